"""relax_edge's Vulkan build against ncnn's Vulkan path, both on lavapipe
(Mesa's CPU Vulkan driver, the host-vulkan board), side by side, with
relax_edge's C build of the same model beside them.

LAVAPIPE IS A CPU: these figures say how the shaders compare on a software
rasterizer's compute path, not how fast either engine is on a GPU.

Cases: a 256x1024x1024 GEMM (x @ W, W constant; ncnn: InnerProduct), an
elementwise chain over 256x4096 (sigmoid(x) * tanh(x) + exp(-0.5 x)) and
MobileNetV2 (ncnn: a .param/.bin written here from the same ONNX file,
onnx_to_ncnn, its outputs checked against relax_edge's C build). Rounds interleave the engines; each figure
is the median (min-max) of the rounds' times of one run (inputs written,
dispatches, outputs read back), ncnn timed in process around
create_extractor / input / extract, with fp16 (and bf16) storage and arithmetic off.

    python scripts/bench_vulkan.py [--rounds 15] [--cases gemm,chain,mobilenet_v2]

ncnn is `pip install ncnn` (its wheel has the Vulkan path); without it
the ncnn column says "ncnn not installed".
"""

from __future__ import annotations

import argparse
import os
import statistics
import struct
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import relax_edge as rxe  # noqa: E402
from relax_edge import op  # noqa: E402
from relax_edge.ir import Builder, TensorType, Var  # noqa: E402
from relax_edge.target import load_board  # noqa: E402

BOARD = load_board("host-vulkan")


def pin_lavapipe() -> None:
    """ncnn in this process uses the board's driver and thread count, as relax_edge's server does."""
    os.environ["VK_DRIVER_FILES"] = BOARD.vulkan["icd"]
    os.environ["VK_ICD_FILENAMES"] = BOARD.vulkan["icd"]
    os.environ.setdefault("LP_NUM_THREADS", str(BOARD.vulkan["lp_num_threads"] or os.cpu_count() or 1))


def gemm_case(m=256, k=1024, n=1024):
    rng = np.random.default_rng(0)
    w = (rng.standard_normal((k, n)) / np.sqrt(k)).astype("float32")
    x = Var("x", TensorType((m, k), "float32"))
    bb = Builder()
    with bb.function("main", [x]):
        with bb.dataflow():
            out = bb.emit_output(op.matmul(x, w))
        bb.ret(out)
    # ncnn InnerProduct: weights (num_output, K), a zero flag word before them (raw float32)
    param = f"7767517\n2 2\nInput in 0 1 x 0={k} 1={m}\nInnerProduct ip 1 1 x out 0={n} 1=0 2={k * n}\n"
    weights = struct.pack("<I", 0) + np.ascontiguousarray(w.T).tobytes()
    feed = rng.standard_normal((m, k)).astype("float32")
    return bb.get(), [feed], (param, weights), lambda xv: xv @ w


def chain_case(rows=256, cols=4096):
    x = Var("x", TensorType((rows, cols), "float32"))
    bb = Builder()
    with bb.function("main", [x]):
        with bb.dataflow():
            out = bb.emit_output(op.add(op.multiply(op.sigmoid(x), op.tanh(x)),
                                        op.exp(op.multiply(x, np.float32(-0.5)))))
        bb.ret(out)
    param = "\n".join([
        "7767517", "8 10", f"Input in 0 1 x 0={cols} 1={rows}", "Split sp 1 3 x x1 x2 x3",
        "Sigmoid sg 1 1 x1 s", "TanH th 1 1 x2 t", "BinaryOp mul 2 1 s t st 0=2",
        "BinaryOp scale 1 1 x3 xs 0=2 1=1 2=-0.5", "UnaryOp ex 1 1 xs e 0=7", "BinaryOp add 2 1 st e out 0=0", ""])
    feed = np.random.default_rng(1).standard_normal((rows, cols)).astype("float32")

    def reference(xv):
        return 1 / (1 + np.exp(-xv)) * np.tanh(xv) + np.exp(-0.5 * xv)
    return bb.get(), [feed], (param, b""), reference


def onnx_to_ncnn(model) -> tuple:
    """An ncnn .param text and .bin bytes of the same network, for the ONNX
    graphs of plain CNNs (Conv with a Clip(0, 6) / Relu after it folded in as
    ncnn's activation, Add, GlobalAveragePool, Flatten, Gemm with transB):
    ncnn's param format (a magic line, the layer and blob counts, a line per
    layer: type, name, input and output counts and blobs, then id=value
    pairs, -23300 - id for an array) and its weights file (per layer with
    weights, a zero word tagging raw float32, the weights, then the bias
    untagged). A blob read by more than one layer goes through a Split, as
    ncnn wants. Raises ValueError naming an operator it does not map."""
    from onnx import numpy_helper
    from onnx.helper import get_attribute_value
    inits = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    consts = {n.output[0]: numpy_helper.to_array(n.attribute[0].t) for n in model.graph.node if n.op_type == "Constant"}
    nodes = [n for n in model.graph.node if n.op_type != "Constant"]
    readers: dict = {}
    for n in nodes:
        for i in n.input:
            readers.setdefault(i, []).append(n)
    names: dict = {}

    def blob(tensor):
        return names.setdefault(tensor, f"b{len(names)}")

    (graph_in,) = [i for i in model.graph.input if i.name not in inits]
    _, c, h, w = (d.dim_value for d in graph_in.type.tensor_type.shape.dim)
    names[graph_in.name] = "x"
    names[model.graph.output[0].name] = "out"
    layers, weights, fused = [f"Input in 0 1 x 0={w} 1={h} 2={c}"], [], set()
    taken: dict = {}   # tensor -> split outputs not yet read

    def read(tensor):
        if tensor in taken:
            return taken[tensor].pop(0)
        return blob(tensor)

    def produced(tensor):
        users = [r for r in readers.get(tensor, []) if id(r) not in fused]
        if len(users) > 1:
            outs = [f"{blob(tensor)}_{k}" for k in range(len(users))]
            layers.append(f"Split sp{len(layers)} 1 {len(outs)} {blob(tensor)} {' '.join(outs)}")
            taken[tensor] = outs

    for k, n in enumerate(nodes):
        if id(n) in fused:
            continue
        attrs = {a.name: get_attribute_value(a) for a in n.attribute}
        out = n.output[0]
        if n.op_type == "Conv":
            wt, bias = inits[n.input[1]], inits[n.input[2]] if len(n.input) > 2 else None
            o, _, kh, kw = wt.shape
            group = attrs.get("group", 1)
            (dh, dw), (sh, sw) = attrs.get("dilations", [1, 1]), attrs.get("strides", [1, 1])
            pt, pl, pb, pr = attrs.get("pads", [0, 0, 0, 0])
            act = ""
            nxt = readers.get(out, [])
            if len(nxt) == 1 and nxt[0].op_type in ("Clip", "Relu"):
                if nxt[0].op_type == "Relu":
                    act = " 9=1"
                else:
                    lo, hi = (float(consts.get(t, inits.get(t))) for t in nxt[0].input[1:3])
                    act = f" 9=3 -23310=2,{lo:e},{hi:e}"
                fused.add(id(nxt[0]))
                out = nxt[0].output[0]
            kind = "ConvolutionDepthWise" if group > 1 else "Convolution"
            extra = f" 7={group}" if group > 1 else ""
            layers.append(f"{kind} conv{k} 1 1 {read(n.input[0])} {blob(out)} 0={o} 1={kw} 11={kh} 2={dw} 12={dh} "
                          f"3={sw} 13={sh} 4={pl} 14={pt} 15={pr} 16={pb} 5={int(bias is not None)} 6={wt.size}"
                          f"{extra}{act}")
            weights.append(struct.pack("<I", 0) + np.ascontiguousarray(wt, np.float32).tobytes())
            if bias is not None:
                weights.append(np.ascontiguousarray(bias, np.float32).tobytes())
        elif n.op_type == "Add":
            a, b = (read(i) for i in n.input)
            layers.append(f"BinaryOp add{k} 2 1 {a} {b} {blob(out)} 0=0")
        elif n.op_type == "GlobalAveragePool":
            layers.append(f"Pooling gap{k} 1 1 {read(n.input[0])} {blob(out)} 0=1 4=1")
        elif n.op_type == "Flatten":
            layers.append(f"Flatten flat{k} 1 1 {read(n.input[0])} {blob(out)}")
        elif n.op_type == "Gemm" and attrs.get("transB") == 1:
            wt, bias = inits[n.input[1]], inits[n.input[2]]
            layers.append(f"InnerProduct fc{k} 1 1 {read(n.input[0])} {blob(out)} 0={wt.shape[0]} 1=1 2={wt.size}")
            weights.append(struct.pack("<I", 0) + np.ascontiguousarray(wt, np.float32).tobytes())
            weights.append(np.ascontiguousarray(bias, np.float32).tobytes())
        else:
            raise ValueError(f"onnx_to_ncnn: no ncnn layer for {n.op_type} ({n.name})")
        produced(out)
    blobs = set()
    for line in layers:   # every blob is some layer's output
        parts = line.split()
        nin, nout = int(parts[2]), int(parts[3])
        blobs.update(parts[4 + nin:4 + nin + nout])
    return "\n".join(["7767517", f"{len(layers)} {len(blobs)}", *layers, ""]), b"".join(weights)


def mobilenet_case():
    import onnx

    from relax_edge.frontend import from_onnx
    from tests.onnx_models import get_model
    path, spec = get_model("mobilenet_v2")
    model = onnx.load(str(path))
    bounds = {d.dim_param: (1, 8) for i in model.graph.input for d in i.type.tensor_type.shape.dim if d.dim_param}
    feeds = spec["make_inputs"](seed=0)
    return from_onnx(model, dim_bounds=bounds), list(feeds.values()), onnx_to_ncnn(model), None


CASES = {"gemm": ("GEMM 256x1024x1024", gemm_case), "chain": ("elementwise chain 256x4096", chain_case),
         "mobilenet_v2": ("MobileNetV2 1x3x224x224", mobilenet_case)}


class NcnnNet:
    def __init__(self, ncnn, param: str, weights: bytes, tmp: Path):
        (tmp / "m.param").write_text(param)
        (tmp / "m.bin").write_bytes(weights)
        self.ncnn = ncnn
        self.net = ncnn.Net()
        opt = self.net.opt   # a copy: set, then assigned back (fp16 stays on otherwise)
        opt.use_vulkan_compute = True
        opt.use_fp16_packed = opt.use_fp16_storage = opt.use_fp16_arithmetic = False
        opt.use_bf16_packed = opt.use_bf16_storage = False
        self.net.opt = opt
        if self.net.load_param(str(tmp / "m.param")) != 0:
            raise RuntimeError("ncnn refused the param file")
        if self.net.load_model(str(tmp / "m.bin")) != 0:   # also when empty: the net is not ready before
            raise RuntimeError("ncnn refused the weights")

    def run(self, x: np.ndarray) -> tuple:
        start = time.perf_counter()
        ex = self.net.create_extractor()
        ex.set_light_mode(False)   # the wheel's extract crashes in light mode (ncnn 1.0.20261020)
        mat = self.ncnn.Mat(x[0] if x.ndim == 4 else x)   # held until extract returns: the Mat wraps x's memory
        ex.input("x", mat)
        ret, out = ex.extract("out")
        ms = (time.perf_counter() - start) * 1e3
        if ret != 0:
            raise RuntimeError(f"ncnn extract returned {ret}")
        return ms, np.array(out).reshape(x.shape[0], -1)


def summary(samples) -> str:
    if not samples:
        return "-"
    return f"{statistics.median(samples):9.2f} ms ({min(samples):.2f}-{max(samples):.2f})"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--cases", default=",".join(CASES))
    args = ap.parse_args(argv)
    pin_lavapipe()
    try:
        import ncnn
    except ImportError:
        ncnn = None
    print("relax_edge Vulkan vs ncnn Vulkan, both on LAVAPIPE (a CPU driver: not GPU speed); relax_edge C beside them")
    print(f"LP_NUM_THREADS={os.environ['LP_NUM_THREADS']}, {os.cpu_count()} CPUs; {args.rounds} interleaved rounds, "
          "median (min-max) per run")
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-vulkan-") as tmpdir:
        tmp = Path(tmpdir)
        for key in args.cases.split(","):
            if key not in CASES:
                ap.error(f"unknown case {key}; choose from {', '.join(CASES)}")
            label, make = CASES[key]
            mod, feeds, ncnn_model, reference = make()
            arts = {b: rxe.build(mod, board=board, backend=b, out_dir=tmp / f"{key}_{b}", quiet=True)
                    for b, board in (("vulkan", "host-vulkan"), ("c", "host"))}
            net, note = None, ""
            if ncnn is None:
                note = "ncnn not installed"
            elif ncnn_model is None:
                note = "ncnn: no .param/.bin (pnnx not in the wheel)"
            else:
                (tmp / key).mkdir()
                net = NcnnNet(ncnn, *ncnn_model, tmp / key)
            samples = {"vulkan": [], "c": [], "ncnn": []}
            with rxe.connect("host-vulkan") as vdev, rxe.connect("host") as cdev:
                mods = {"vulkan": vdev.load(arts["vulkan"]), "c": cdev.load(arts["c"])}
                outs = {}
                for name, m in mods.items():   # warm up, and check against the reference
                    (outs[name],) = m.run(*feeds)
                    if reference is not None:
                        np.testing.assert_allclose(outs[name], reference(feeds[0]), rtol=1e-3, atol=1e-3, err_msg=name)
                if reference is None:   # MobileNetV2: the Vulkan build against the C build
                    np.testing.assert_allclose(outs["vulkan"], outs["c"], rtol=1e-3, atol=1e-3, err_msg="vulkan")
                if net is not None:
                    _, y = net.run(feeds[0])
                    want = reference(feeds[0]) if reference is not None else outs["c"]
                    np.testing.assert_allclose(y, want.reshape(y.shape), rtol=1e-3, atol=1e-3, err_msg="ncnn")
                for _ in range(args.rounds):
                    for name, m in mods.items():
                        samples[name] += m.benchmark(*feeds, warmup=0, repeat=1)["samples_ms"]
                    if net is not None:
                        samples["ncnn"].append(net.run(feeds[0])[0])
            rows.append((label, samples, note))
    print(f"\n{'case':28s} {'relax_edge vulkan (lavapipe)':>32s} {'ncnn vulkan (lavapipe)':>32s} "
          f"{'relax_edge C (host CPU)':>32s}")
    for label, s, note in rows:
        ncnn_col = note if note else summary(s["ncnn"])
        print(f"{label:28s} {summary(s['vulkan']):>32s} {ncnn_col:>32s} {summary(s['c']):>32s}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
