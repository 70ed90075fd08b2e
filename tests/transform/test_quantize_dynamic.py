"""transform/quantize_dynamic.py on models quantized by ONNX Runtime's
quantize_dynamic (MatMul with and without a bias, 2-D and batched 3-D x,
per-tensor and per-channel weights, int8 and uint8 weights, N not a multiple
of 8 or 32, K not a multiple of 4) and on bare MatMulInteger nodes: the
chains become one dynamic_qdense (matmul_integer), and the module before
the pass, interpreted after it and compiled for the host all give ONNX
Runtime's result with graph optimizations off and onnx.reference's, bit for
bit (the same float32 operations in the same order). With the LLVM backend
on the host and under QEMU (aarch64
with and without dotprod, armv7, riscv64, the Cortex-M4): a two-layer model
of uint8 per-channel weights (per-column zero points), one with a bias."""

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

import relax_edge as rxe
from relax_edge.ir.expr import Call
from relax_edge.transform.dce import dce
from relax_edge.transform.quantize import quantize_int8

CASES = {   # name -> (x shape, N, bias, per_channel, weight type)
    "2d_no_bias": ((6, 20), 13, False, False, "QInt8"),
    "3d_bias": ((2, 5, 21), 40, True, False, "QInt8"),
    "per_channel": ((2, 7, 36), 33, True, True, "QInt8"),
    "uint8_weights": ((3, 4, 19), 9, True, False, "QUInt8"),
    "uint8_per_channel": ((9, 64), 70, False, True, "QUInt8"),
}


def _spec_session(path):
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.log_severity_level = 3
    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


def _two_layers(x_shape, n1, n2, seed):
    rng = np.random.default_rng(seed)
    k = x_shape[-1]
    inits = [numpy_helper.from_array((rng.standard_normal((k, n1)) * 0.3).astype(np.float32), "W1"),
             numpy_helper.from_array(rng.standard_normal(n1).astype(np.float32), "B1"),
             numpy_helper.from_array((rng.standard_normal((n1, n2)) * 0.3).astype(np.float32), "W2")]
    nodes = [helper.make_node("MatMul", ["x", "W1"], ["mm"]), helper.make_node("Add", ["mm", "B1"], ["h"]),
             helper.make_node("MatMul", ["h", "W2"], ["y"])]
    graph = helper.make_graph(nodes, "two", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, (*x_shape[:-1], n2))], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def _float_model(x_shape, n, bias, seed):
    rng = np.random.default_rng(seed)
    k = x_shape[-1]
    inits = [numpy_helper.from_array((rng.standard_normal((k, n)) * 0.3).astype(np.float32), "W")]
    nodes = [helper.make_node("MatMul", ["x", "W"], ["mm" if bias else "y"])]
    if bias:
        inits.append(numpy_helper.from_array(rng.standard_normal(n).astype(np.float32), "B"))
        nodes.append(helper.make_node("Add", ["mm", "B"], ["y"]))
    graph = helper.make_graph(nodes, "dense", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, (*x_shape[:-1], n))], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def _quantized(tmp_path, name):
    from onnxruntime.quantization import QuantType, quantize_dynamic
    x_shape, n, bias, per_channel, wtype = CASES[name]
    src, dst = tmp_path / f"{name}_f32.onnx", tmp_path / f"{name}.onnx"
    onnx.save(_float_model(x_shape, n, bias, len(name)), str(src))
    quantize_dynamic(str(src), str(dst), per_channel=per_channel, weight_type=getattr(QuantType, wtype))
    return dst


def _ops(mod):
    return [b.value.op.name for blk in mod.functions["main"].body.blocks for b in blk.bindings
            if isinstance(b.value, Call)]


def _interpreted(mod, x):
    out = rxe.interpret(mod, x)
    return out[0] if isinstance(out, (list, tuple)) else out


def _compiled(mod, tmp_path, inputs, board="host", backend="c"):
    art = rxe.build(mod, board=board, backend=backend, out_dir=tmp_path / board, name="qdyn", profile=False)
    with rxe.connect(board) as dev:
        loaded = dev.load(art)
        return [loaded.run(*x)[0] for x in inputs]


@pytest.mark.parametrize("name", list(CASES))
def test_quantize_dynamic_chain_is_one_operator_and_exact(name, tmp_path):
    path = _quantized(tmp_path, name)
    model = onnx.load(str(path))
    assert [n.op_type for n in model.graph.node].count("MatMulInteger") == 1
    mod = rxe.from_onnx(str(path))
    rewritten = dce(quantize_int8(mod))
    assert _ops(rewritten) == ["dynamic_qdense"], _ops(rewritten)
    x_shape = CASES[name][0]
    rng = np.random.default_rng(11)
    inputs = [(rng.standard_normal(x_shape) * s).astype(np.float32) for s in (1.0, 0.02)]
    inputs.append(np.abs(inputs[0]))   # no negatives: zero point 0
    session, reference = _spec_session(path), ReferenceEvaluator(model)
    compiled = _compiled(mod, tmp_path, [(x,) for x in inputs])
    for x, got in zip(inputs, compiled):
        want = session.run(None, {"x": x})[0]
        np.testing.assert_array_equal(reference.run(None, {"x": x})[0], want)
        np.testing.assert_array_equal(_interpreted(mod, x), want)
        np.testing.assert_array_equal(_interpreted(rewritten, x), want)
        np.testing.assert_array_equal(got, want)


def _matmul_integer_model(x_dtype, w_dtype, k, n, per_column, seed):
    rng = np.random.default_rng(seed)
    lo_x, lo_w = (0 if x_dtype == "uint8" else -128), (0 if w_dtype == "uint8" else -128)
    w = rng.integers(lo_w, lo_w + 256, (k, n)).astype(w_dtype)
    w_zero = (rng.integers(lo_w, lo_w + 256, n) if per_column else np.array(lo_w + 100)).astype(w_dtype)
    inits = [numpy_helper.from_array(w, "W"), numpy_helper.from_array(np.array(lo_x + 77, x_dtype), "xz"),
             numpy_helper.from_array(w_zero, "wz")]
    onnx_type = {"uint8": TensorProto.UINT8, "int8": TensorProto.INT8}
    graph = helper.make_graph([helper.make_node("MatMulInteger", ["x", "W", "xz", "wz"], ["y"])], "mmi",
                              [helper.make_tensor_value_info("x", onnx_type[x_dtype], (2, 3, k))],
                              [helper.make_tensor_value_info("y", TensorProto.INT32, (2, 3, n))], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


@pytest.mark.parametrize("x_dtype,w_dtype,per_column", [("uint8", "int8", False), ("uint8", "uint8", True),
                                                        ("int8", "int8", True)])
def test_matmul_integer_with_constant_weights(x_dtype, w_dtype, per_column, tmp_path):
    k, n = 23, 11
    model = _matmul_integer_model(x_dtype, w_dtype, k, n, per_column, 5)
    path = tmp_path / "mmi.onnx"
    onnx.save(model, str(path))
    mod = rxe.from_onnx(str(path))
    rewritten = dce(quantize_int8(mod))
    assert _ops(rewritten) == ["matmul_integer"], _ops(rewritten)
    lo = 0 if x_dtype == "uint8" else -128
    x = np.random.default_rng(2).integers(lo, lo + 256, (2, 3, k)).astype(x_dtype)
    want = ReferenceEvaluator(model).run(None, {"x": x})[0]
    if x_dtype == "uint8":   # ONNX Runtime's MatMulInteger takes a uint8 A
        np.testing.assert_array_equal(_spec_session(path).run(None, {"x": x})[0], want)
    np.testing.assert_array_equal(_interpreted(rewritten, x), want)
    np.testing.assert_array_equal(_compiled(mod, tmp_path, [(x,)])[0], want)


def test_a_scale_that_is_not_the_dynamic_one_stays_generic(tmp_path):
    """A Mul by another scale than DynamicQuantizeLinear's times a constant is left as it is."""
    path = _quantized(tmp_path, "2d_no_bias")
    model = onnx.load(str(path))
    for node in model.graph.node:
        if node.op_type == "Mul" and "x_scale" in node.input:
            node.input[list(node.input).index("x_scale")] = "other"
    model.graph.initializer.append(numpy_helper.from_array(np.array(0.5, np.float32), "other"))
    onnx.save(model, str(tmp_path / "other.onnx"))
    mod = dce(quantize_int8(rxe.from_onnx(str(tmp_path / "other.onnx"))))
    assert "dynamic_qdense" not in _ops(mod) and "matmul" in _ops(mod)


@pytest.mark.parametrize("board,backend", [("host", "llvm"), ("qemu-aarch64", "c"), ("qemu-aarch64-dotprod", "c"),
                                           ("qemu-armv7", "c"), ("qemu-riscv64", "c"), ("qemu-cortex-m4", "c")])
def test_compiled_for_each_board_is_exact(board, backend, tmp_path):
    from onnxruntime.quantization import QuantType, quantize_dynamic
    x_shape = (2, 3, 21)
    src, path = tmp_path / "two_f32.onnx", tmp_path / "two.onnx"
    onnx.save(_two_layers(x_shape, 13, 40, 4), str(src))
    quantize_dynamic(str(src), str(path), per_channel=True, weight_type=QuantType.QUInt8)
    mod = rxe.from_onnx(str(path))
    assert _ops(dce(quantize_int8(mod))) == ["dynamic_qdense", "dynamic_qdense"]
    rng = np.random.default_rng(8)
    inputs = [(rng.standard_normal(x_shape) * s).astype(np.float32) for s in (1.0, 30.0)]
    session = _spec_session(path)
    for x, got in zip(inputs, _compiled(mod, tmp_path, [(x,) for x in inputs], board, backend)):
        np.testing.assert_array_equal(got, session.run(None, {"x": x})[0])
