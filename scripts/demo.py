"""The main job as it stands: build a model with symbolic batch, verify it,
print it, and run it at several batch sizes from the one module, checking
each result against ONNX Runtime running the same model exported to ONNX.

Later stages (code generation, boards) extend this into compile -> deploy
-> run -> benchmark on the default board.
"""

from __future__ import annotations

import sys
import time

import numpy as np

import relax_edge as rxe
from relax_edge import op
from relax_edge.ir import Builder, SizeVar, TensorType, Var


def build(weights):
    w1, b1, w2, b2 = weights
    n = SizeVar("batch", upper=256)
    x = Var("x", TensorType((n, 64), "float32"))
    bb = Builder()
    with bb.function("main", [x]):
        with bb.dataflow():
            h = bb.emit(op.relu(op.add(op.matmul(x, w1), b1)))
            out = bb.emit_output(op.softmax(op.add(op.matmul(h, w2), b2)))
        bb.ret(out)
    return bb.get()


def onnx_reference(weights, x):
    import onnx
    import onnxruntime as ort
    from onnx import TensorProto, helper, numpy_helper
    names = ["w1", "b1", "w2", "b2"]
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["m1"]), helper.make_node("Add", ["m1", "b1"], ["a1"]),
             helper.make_node("Relu", ["a1"], ["h"]), helper.make_node("MatMul", ["h", "w2"], ["m2"]),
             helper.make_node("Add", ["m2", "b2"], ["a2"]), helper.make_node("Softmax", ["a2"], ["y"])]
    graph = helper.make_graph(
        nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 64])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 10])],
        initializer=[numpy_helper.from_array(w, nm) for nm, w in zip(names, weights)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, {"x": x})[0]


def main() -> int:
    rng = np.random.default_rng(0)
    weights = [(rng.standard_normal(s) / np.sqrt(s[0])).astype(np.float32)
               for s in [(64, 128), (128,), (128, 10), (10,)]]
    mod = build(weights)
    print(mod)
    worst = 0.0
    for batch in (1, 7, 256):
        x = rng.standard_normal((batch, 64)).astype(np.float32)
        t0 = time.perf_counter()
        out = rxe.interpret(mod, x)
        ms = (time.perf_counter() - t0) * 1e3
        err = float(np.max(np.abs(out - onnx_reference(weights, x))))
        worst = max(worst, err)
        print(f"batch {batch:>3}: output {out.shape}, max |ours - onnxruntime| = {err:.2e} "
              f"(interpreted in {ms:.2f} ms)")
    try:
        rxe.interpret(mod, np.zeros((300, 64), np.float32))
    except rxe.RelaxEdgeError as err:
        print(f"batch 300 is rejected as it should be: {err}")
    ok = worst < 1e-5
    print("demo:", "PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
