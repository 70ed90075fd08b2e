package PACKAGE;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.StandardOpenOption;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * Runs the commands of a script (one a line) against RelaxEdgeModel and prints one line
 * per command: "STEP OK ..." with each output as k:dtype:dims:file, or
 * "STEP ERROR status name detail", or "STEP THROWABLE ..." for anything else.
 * Tensors are files of raw native-order bytes, given as file:dtype:d0,d1.
 */
public final class JniCheck {
    private static RelaxEdgeModel model;
    private static Path dir;

    public static void main(String[] args) throws IOException {
        Path script = Paths.get(args[0]);
        dir = script.toAbsolutePath().getParent();
        List<String> lines = Files.readAllLines(script);
        int step = 0;
        for (String line : lines) {
            if (line.trim().isEmpty()) {
                continue;
            }
            String[] words = line.trim().split("\\s+");
            String result;
            try {
                result = "OK" + command(step, words);
            } catch (RelaxEdgeException e) {
                result = "ERROR " + e.status() + " " + e.statusName() + " " + e.detail();
            } catch (Throwable t) {
                result = "THROWABLE " + t;
            }
            System.out.println(step + " " + result);
            step++;
        }
    }

    private static String command(int step, String[] w) throws IOException {
        switch (w[0]) {
            case "load":
                model = RelaxEdgeModel.load();
                return " " + model.arenaBytes() + " " + model.arenaPolicy().replace(' ', '_');
            case "load_sizes": {
                Map<String, Long> sizes = new HashMap<>();
                for (int k = 1; k < w.length; k++) {
                    String[] kv = w[k].split("=");
                    sizes.put(kv[0], Long.parseLong(kv[1]));
                }
                model = RelaxEdgeModel.load(sizes);
                return " " + model.arenaBytes();
            }
            case "arena":
                return " " + model.arenaBytes();
            case "close":
                model.close();
                return "";
            case "floats": {
                float[][] inputs = new float[w.length - 1][];
                for (int k = 1; k < w.length; k++) {
                    inputs[k - 1] = (float[]) array(read(w[k]), "float32");
                }
                float[][] outs = model.run(inputs);
                StringBuilder s = new StringBuilder();
                for (int k = 0; k < outs.length; k++) {
                    ByteBuffer b = ByteBuffer.allocate(outs[k].length * 4).order(ByteOrder.nativeOrder());
                    b.asFloatBuffer().put(outs[k]);
                    s.append(" ").append(write(step, k, "float32", "-", b));
                }
                return s.toString();
            }
            case "tensors":
            case "buffers":
            case "heap": {
                Object[] data = new Object[w.length - 1];
                long[][] shapes = new long[w.length - 1][];
                RelaxEdgeModel.Tensor[] tensors = new RelaxEdgeModel.Tensor[w.length - 1];
                for (int k = 1; k < w.length; k++) {
                    String[] spec = w[k].split(":", -1);
                    shapes[k - 1] = dims(spec[2]);
                    ByteBuffer b = read(spec[0]);
                    if (w[0].equals("heap")) {
                        ByteBuffer heap = ByteBuffer.allocate(b.capacity()).order(ByteOrder.nativeOrder());
                        heap.put(b);
                        data[k - 1] = heap;
                    } else {
                        data[k - 1] = w[0].equals("buffers") ? b : array(b, spec[1]);
                    }
                    tensors[k - 1] = tensor(data[k - 1], shapes[k - 1]);
                }
                RelaxEdgeModel.Tensor[] outs = w[0].equals("tensors") ? model.run(tensors)
                        : model.run(shapes, java.util.Arrays.copyOf(data, data.length, ByteBuffer[].class));
                StringBuilder s = new StringBuilder();
                for (int k = 0; k < outs.length; k++) {
                    StringBuilder shape = new StringBuilder();
                    for (long d : outs[k].shape()) {
                        shape.append(shape.length() > 0 ? "," : "").append(d);
                    }
                    s.append(" ").append(write(step, k, outs[k].dtype(), shape.toString(), outs[k].toByteBuffer()));
                }
                return s.toString();
            }
            case "null_input":
                model.run(new float[][] {null});
                return "";
            case "null_inputs":
                model.run((float[][]) null);
                return "";
            case "null_tensor":
                model.run(new RelaxEdgeModel.Tensor[] {null});
                return "";
            case "null_shape":
                model.run(new long[][] {null}, new float[] {1f});
                return "";
            case "no_inputs":
                model.run(new float[0][]);
                return "";
            case "float_output": {   // a non-float output read as floats
                RelaxEdgeModel.Tensor[] outs = model.run(new RelaxEdgeModel.Tensor[] {
                    RelaxEdgeModel.Tensor.of(new long[] {1}, 1), RelaxEdgeModel.Tensor.of(new byte[] {1}, 1)});
                outs[1].floats();
                return "";
            }
            default:
                throw new IllegalArgumentException("unknown command " + w[0]);
        }
    }

    private static RelaxEdgeModel.Tensor tensor(Object data, long[] shape) {
        if (data instanceof ByteBuffer) {
            return RelaxEdgeModel.Tensor.of((ByteBuffer) data, shape);
        } else if (data instanceof float[]) {
            return RelaxEdgeModel.Tensor.of((float[]) data, shape);
        } else if (data instanceof double[]) {
            return RelaxEdgeModel.Tensor.of((double[]) data, shape);
        } else if (data instanceof long[]) {
            return RelaxEdgeModel.Tensor.of((long[]) data, shape);
        } else if (data instanceof int[]) {
            return RelaxEdgeModel.Tensor.of((int[]) data, shape);
        } else if (data instanceof short[]) {
            return RelaxEdgeModel.Tensor.of((short[]) data, shape);
        }
        return RelaxEdgeModel.Tensor.of((byte[]) data, shape);
    }

    private static Object array(ByteBuffer b, String dtype) {
        int n = b.capacity();
        switch (dtype) {
            case "float32":
            {
                float[] a = new float[n / 4];
                b.asFloatBuffer().get(a);
                return a;
            }
            case "float64":
            {
                double[] a = new double[n / 8];
                b.asDoubleBuffer().get(a);
                return a;
            }
            case "int64":
            {
                long[] a = new long[n / 8];
                b.asLongBuffer().get(a);
                return a;
            }
            case "int32":
            {
                int[] a = new int[n / 4];
                b.asIntBuffer().get(a);
                return a;
            }
            case "int16":
            {
                short[] a = new short[n / 2];
                b.asShortBuffer().get(a);
                return a;
            }
            default:
                byte[] bytes = new byte[n];
                b.get(bytes);
                return bytes;
        }
    }

    private static long[] dims(String text) {
        if (text.isEmpty()) {
            return new long[0];
        }
        String[] parts = text.split(",");
        long[] out = new long[parts.length];
        for (int k = 0; k < parts.length; k++) {
            out[k] = Long.parseLong(parts[k]);
        }
        return out;
    }

    private static ByteBuffer read(String name) throws IOException {
        byte[] bytes = Files.readAllBytes(dir.resolve(name));
        ByteBuffer b = ByteBuffer.allocateDirect(bytes.length).order(ByteOrder.nativeOrder());
        b.put(bytes);
        b.clear();
        return b;
    }

    private static String write(int step, int k, String dtype, String shape, ByteBuffer b) throws IOException {
        String name = "out_" + step + "_" + k + ".bin";
        b.clear();
        try (FileChannel f = FileChannel.open(dir.resolve(name), StandardOpenOption.CREATE, StandardOpenOption.WRITE,
                StandardOpenOption.TRUNCATE_EXISTING)) {
            while (b.hasRemaining()) {
                f.write(b);
            }
        }
        return k + ":" + dtype + ":" + shape + ":" + name;
    }
}
