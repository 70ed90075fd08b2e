"""Small models built with the Builder, shared by several tests."""

import numpy as np

from relax_edge import op
from relax_edge.ir import Builder, SizeVar, TensorType, Var


def mlp_weights(seed=0):
    rng = np.random.default_rng(seed)
    shapes = [(784, 256), (256,), (256, 128), (128,), (128, 10), (10,)]
    return [(rng.standard_normal(s) / np.sqrt(s[0])).astype("float32") for s in shapes]


def build_mlp(weights, batch=None):
    """A 3-layer MLP over a symbolic batch: 784 -> 256 -> 128 -> 10, softmax."""
    w1, b1, w2, b2, w3, b3 = weights
    n = batch if batch is not None else SizeVar("n")
    x = Var("x", TensorType((n, 784), "float32"))
    bb = Builder()
    with bb.function("main", [x]):
        with bb.dataflow():
            h1 = bb.emit(op.relu(op.add(op.matmul(x, w1), b1)))
            h2 = bb.emit(op.relu(op.add(op.matmul(h1, w2), b2)))
            logits = bb.emit(op.add(op.matmul(h2, w3), b3))
            out = bb.emit_output(op.softmax(logits, axis=-1))
        bb.ret(out)
    return bb.get()


def cnn_weights(seed=1):
    rng = np.random.default_rng(seed)
    shapes = {"c1": (8, 1, 3, 3), "b1": (1, 8, 1, 1), "dw": (8, 1, 3, 3), "c2": (16, 8, 1, 1),
              "fc": (16, 10), "fcb": (10,)}
    return {k: (rng.standard_normal(s) * 0.5).astype("float32") for k, s in shapes.items()}


def build_cnn(w):
    """A small CNN over a symbolic batch on 1x16x16 images: conv + bias + relu,
    max pool, depthwise conv, pointwise conv, tanh, global average, dense."""
    n = SizeVar("n")
    x = Var("x", TensorType((n, 1, 16, 16), "float32"))
    bb = Builder()
    with bb.function("main", [x]):
        with bb.dataflow():
            c1 = bb.emit(op.relu(op.add(op.conv2d(x, w["c1"], padding=(1, 1, 1, 1)), w["b1"])))
            p1 = bb.emit(op.max_pool2d(c1, kernel_size=(2, 2)))
            dw = bb.emit(op.conv2d(p1, w["dw"], strides=(2, 2), padding=(1, 1, 1, 1), groups=8))
            c2 = bb.emit(op.tanh(op.conv2d(dw, w["c2"])))
            g = bb.emit(op.mean(c2, axis=(2, 3)))
            out = bb.emit_output(op.add(op.matmul(g, w["fc"]), w["fcb"]))
        bb.ret(out)
    return bb.get()


def save_tiny_onnx(path) -> None:
    """A two-node ONNX model over a symbolic batch: MatMul by an 8x4 weight, then Relu."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    w = np.random.default_rng(0).standard_normal((8, 4)).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"]), helper.make_node("Relu", ["y"], ["z"])], "tiny",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 8])],
        [helper.make_tensor_value_info("z", TensorProto.FLOAT, ["n", 4])],
        [numpy_helper.from_array(w, "w")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
