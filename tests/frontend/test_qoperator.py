"""The com.microsoft QOperator ops (convert/qoperator.py) against ONNX Runtime
with graph optimizations off, at two sizes of a symbolic batch dim:
imported (dequantize -> float op -> quantize) and after the quantize pass
(the integer operators), each within one quantization step; compiled on the
host equal to the interpreted integer graph. And int4 / uint4 Q / DQ
(held in int8 / uint8) against onnx.reference."""

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

import relax_edge as rxe
from relax_edge.ir.expr import Call
from relax_edge.transform.dce import dce
from relax_edge.transform.quantize import quantize_int8

_MS = "com.microsoft"
_T = {"uint8": TensorProto.UINT8, "int8": TensorProto.INT8}


def _params(prefix, scale, zero, dtype):
    return [numpy_helper.from_array(np.array(scale, np.float32), f"{prefix}_s"),
            numpy_helper.from_array(np.array(zero, dtype), f"{prefix}_z")]


def _model(nodes, inputs, output, inits, out_dtype):
    graph = helper.make_graph(nodes, "q", [helper.make_tensor_value_info(n, _T[d], s) for n, d, s in inputs],
                              [helper.make_tensor_value_info(output, _T[out_dtype], None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(_MS, 1)])
    model.ir_version = 8
    return model


def _binary(op, dtype):
    z = 0 if dtype == "int8" else 128
    inits = _params("a", 0.037, z + 3, dtype) + _params("b", 0.021, z - 5, dtype) + _params("y", 0.043, z + 1, dtype)
    node = helper.make_node(op, ["a", "a_s", "a_z", "b", "b_s", "b_z", "y_s", "y_z"], ["y"], domain=_MS)
    return _model([node], [("a", dtype, ["n", 4, 5]), ("b", dtype, [4, 5])], "y", inits, dtype), "q" + op[7:].lower()


def _unary(op, dtype, **attrs):
    z = 0 if dtype == "int8" else 128
    inits = _params("x", 0.05, z - 7, dtype) + _params("y", 1 / 256 if op == "QLinearSigmoid" else 0.03,
                                                        (-128 if dtype == "int8" else 0) if op == "QLinearSigmoid"
                                                        else z + 9, dtype)
    node = helper.make_node(op, ["x", "x_s", "x_z", "y_s", "y_z"], ["y"], domain=_MS, **attrs)
    return _model([node], [("x", dtype, ["n", 3, 6, 4])], "y", inits, dtype)


def _concat(dtype):
    z = 0 if dtype == "int8" else 128
    inits = _params("y", 0.04, z, dtype) + _params("a", 0.02, z + 2, dtype) + _params("b", 0.05, z - 3, dtype)
    node = helper.make_node("QLinearConcat", ["y_s", "y_z", "a", "a_s", "a_z", "b", "b_s", "b_z"], ["y"],
                            domain=_MS, axis=1)
    return _model([node], [("a", dtype, ["n", 2, 3]), ("b", dtype, ["n", 4, 3])], "y", inits, dtype)


CASES = [
    ("add_uint8", lambda: _binary("QLinearAdd", "uint8")[0], "qadd"),
    ("mul_int8", lambda: _binary("QLinearMul", "int8")[0], "qmul"),
    ("sigmoid_uint8", lambda: _unary("QLinearSigmoid", "uint8"), "qlut"),
    ("leaky_relu_int8", lambda: _unary("QLinearLeakyRelu", "int8", alpha=0.15), "qlut"),
    ("global_avg_pool_uint8", lambda: _unary("QLinearGlobalAveragePool", "uint8"), "qglobal_avg_pool"),
    ("avg_pool_int8", lambda: _unary("QLinearAveragePool", "int8", kernel_shape=[2, 2], strides=[2, 2]),
     "qavg_pool2d"),
    ("concat_uint8", lambda: _concat("uint8"), "qrequantize"),
]


def _feeds(model, n, seed):
    rng = np.random.default_rng(seed)
    out = {}
    for vi in model.graph.input:
        dtype = np.uint8 if vi.type.tensor_type.elem_type == TensorProto.UINT8 else np.int8
        shape = [n if d.dim_param else d.dim_value for d in vi.type.tensor_type.shape.dim]
        info = np.iinfo(dtype)
        out[vi.name] = rng.integers(info.min, info.max + 1, shape).astype(dtype)
    return out


def _spec(model):
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_qoperator_op_matches_onnxruntime(case):
    _, build, integer_op = case
    model = build()
    imported = rxe.from_onnx(model)
    integer = dce(quantize_int8(imported))
    ops = [b.value.op.name for b in integer.functions["main"].body.blocks[0].bindings if isinstance(b.value, Call)]
    assert integer_op in ops and "quantize" not in ops and "dequantize" not in ops, ops
    sess = _spec(model)
    for n, seed in ((1, 0), (3, 1)):
        feeds = _feeds(model, n, seed)
        (want,) = sess.run(None, feeds)
        args = [feeds[i.name] for i in model.graph.input]
        for mod in (imported, integer):
            got = rxe.interpret(mod, *args)
            assert got.dtype == want.dtype and got.shape == want.shape
            assert np.abs(got.astype(np.int64) - want).max() <= 1


def test_qoperator_chain_compiled_equals_interpreted(tmp_path):
    """QLinearAdd -> QLinearSigmoid -> QLinearGlobalAveragePool, compiled (C) at two batch sizes."""
    model, _ = _binary("QLinearAdd", "uint8")
    graph = model.graph
    graph.node.extend([
        helper.make_node("QLinearSigmoid", ["y", "y_s", "y_z", "p_s", "p_z"], ["p"], domain=_MS),
        helper.make_node("QLinearGlobalAveragePool", ["p", "p_s", "p_z", "g_s", "g_z"], ["g"], domain=_MS)])
    graph.initializer.extend(_params("p", 1 / 256, 0, "uint8") + _params("g", 1 / 200, 3, "uint8"))
    graph.input[0].CopyFrom(helper.make_tensor_value_info("a", TensorProto.UINT8, ["n", 4, 5, 2]))
    graph.input[1].CopyFrom(helper.make_tensor_value_info("b", TensorProto.UINT8, [4, 5, 2]))
    del graph.output[:]
    graph.output.extend([helper.make_tensor_value_info("g", TensorProto.UINT8, None)])
    art = rxe.build(rxe.from_onnx(model), board="host", out_dir=tmp_path, name="qops", profile=False)
    integer = quantize_int8(rxe.from_onnx(model))
    sess = _spec(model)
    with rxe.connect("host") as dev:
        loaded = dev.load(art)
        for n in (1, 3):
            feeds = _feeds(model, n, n)
            (got,) = loaded.run(feeds["a"], feeds["b"])
            np.testing.assert_array_equal(got, rxe.interpret(integer, feeds["a"], feeds["b"]))
            assert np.abs(got.astype(np.int64) - sess.run(None, feeds)[0]).max() <= 1


def test_qoperator_refusals_name_the_node():
    model = _unary("QLinearGlobalAveragePool", "uint8")
    model.graph.node[0].attribute.extend([helper.make_attribute("channels_last", 1)])
    with pytest.raises(rxe.frontend.OnnxImportError, match="channels_last=1"):
        rxe.from_onnx(model)
    model = _concat("uint8")
    del model.graph.node[0].input[-1]
    with pytest.raises(rxe.frontend.OnnxImportError, match="QLinearConcat takes"):
        rxe.from_onnx(model)


@pytest.mark.parametrize("elem,held,lo,hi", [(TensorProto.INT4, np.int8, -8, 7), (TensorProto.UINT4, np.uint8, 0, 15),
                                             (TensorProto.INT2, np.int8, -2, 1)])
def test_narrow_int_quantize_dequantize_against_onnx_reference(elem, held, lo, hi, tmp_path):
    """x -> QuantizeLinear (to the narrow type, saturating at its range) -> output, and a constant narrow
    weight through DequantizeLinear -> MatMul; the narrow outputs are compared as their holders."""
    rng = np.random.default_rng(5)
    w = rng.integers(lo, hi + 1, (6, 3))
    zero = 1 if lo < 0 else 2
    inits = [helper.make_tensor("w", elem, [6, 3], w.reshape(-1).tolist()),
             helper.make_tensor("wz", elem, [], [zero]), helper.make_tensor("yz", elem, [], [zero]),
             numpy_helper.from_array(np.array(0.1, np.float32), "ws"),
             numpy_helper.from_array(np.array(0.3, np.float32), "ys")]
    nodes = [helper.make_node("QuantizeLinear", ["x", "ys", "yz"], ["q"]),
             helper.make_node("DequantizeLinear", ["w", "ws", "wz"], ["wf"]),
             helper.make_node("MatMul", ["x", "wf"], ["m"])]
    graph = helper.make_graph(nodes, "narrow", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 6])],
                              [helper.make_tensor_value_info("q", elem, None),
                               helper.make_tensor_value_info("m", TensorProto.FLOAT, None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    model.ir_version = 10
    compiled = elem == TensorProto.INT4   # one compiled row (the legalization is the same for each range)
    art = rxe.build(rxe.from_onnx(model), board="host", out_dir=tmp_path, name="narrow",
                    profile=False) if compiled else None
    with rxe.connect("host") as dev:
        loaded = dev.load(art) if compiled else None
        for n in (1, 4):
            x = (rng.standard_normal((n, 6)) * 2).astype(np.float32)
            want_q, want_m = ReferenceEvaluator(model).run(None, {"x": x})
            want_q = want_q.astype(held)
            runs = [rxe.interpret(rxe.from_onnx(model), x)] + ([loaded.run(x)] if compiled else [])
            for q, m in runs:
                assert q.dtype == held and q.min() >= lo and q.max() <= hi
                np.testing.assert_array_equal(q, want_q)
                np.testing.assert_allclose(m, want_m, rtol=1e-5, atol=1e-5)


def test_qlinear_matmul_of_constant_weights_becomes_qdense(tmp_path):
    """quantize_static (QOperator) of x @ W: QLinearMatMul with a constant per-column int8 W -> one qdense."""
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static
    rng = np.random.default_rng(8)
    w = numpy_helper.from_array(rng.standard_normal((8, 5)).astype(np.float32), "w")
    graph = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"])], "mm",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 5])], [w])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    float_path, quant_path = tmp_path / "mm.onnx", tmp_path / "mm_q.onnx"
    float_path.write_bytes(model.SerializeToString())

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.batches = iter([{"x": rng.standard_normal((4, 8)).astype(np.float32)} for _ in range(4)])

        def get_next(self):
            return next(self.batches, None)

    quantize_static(str(float_path), str(quant_path), Reader(), quant_format=QuantFormat.QOperator,
                    activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8, per_channel=True)
    import onnx
    qmodel = onnx.load(str(quant_path))
    assert "QLinearMatMul" in {n.op_type for n in qmodel.graph.node}
    mod = dce(quantize_int8(rxe.from_onnx(qmodel)))
    ops = [b.value.op.name for b in mod.functions["main"].body.blocks[0].bindings if isinstance(b.value, Call)]
    assert "qdense" in ops and "matmul" not in ops, ops
    inits = {i.name: numpy_helper.to_array(i) for i in qmodel.graph.initializer}
    step = float(inits[[n for n in qmodel.graph.node if n.output[0] == "y"][0].input[1]])
    sess = _spec(qmodel)
    for n in (1, 5):
        x = rng.standard_normal((n, 8)).astype(np.float32)
        (want,) = sess.run(None, {"x": x})
        assert np.abs(rxe.interpret(mod, x) - want).max() <= step * 1.01
