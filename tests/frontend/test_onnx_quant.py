"""ONNX QuantizeLinear / DequantizeLinear (opsets 10 to 25: per tensor, per axis, blocked, output_dtype,
precision), DynamicQuantizeLinear, MatMulInteger, ConvInteger, QLinearMatMul, QLinearConv,
TfIdfVectorizer and MaxPool's Indices output: every ONNX backend node case of them; one-node models
over a symbolic batch dim `n`, interpreted at several sizes against onnx.reference (and ONNX Runtime at
the opsets it runs); one model of all of them compiled on the host with the C and LLVM backends (and,
slow, a QDQ + QLinearMatMul model for qemu-aarch64); bad input refused with the node named."""

import functools
import zlib
from dataclasses import dataclass, field

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import relax_edge as rxe
from relax_edge.frontend.onnx import node_tests
from tests.frontend.one_node import assert_matches, check_interpreted, compiled, one_node_model, reference_outputs

OPS = {"QuantizeLinear", "DequantizeLinear", "DynamicQuantizeLinear", "MatMulInteger", "ConvInteger",
       "QLinearMatMul", "QLinearConv", "TfIdfVectorizer"}
NODE_CASES = [c for c in node_tests.collect_cases()
              if (node_tests.case_ops(c) & OPS or "maxpool_with_argmax" in c.name)
              and not node_tests.scope_problem(c.model)]
TYPES = {"float32": TensorProto.FLOAT, "float16": TensorProto.FLOAT16, "float64": TensorProto.DOUBLE,
         "int8": TensorProto.INT8, "uint8": TensorProto.UINT8, "int16": TensorProto.INT16,
         "uint16": TensorProto.UINT16, "int32": TensorProto.INT32, "int64": TensorProto.INT64}
SIZES = [1, 3, 6]


def test_node_cases_cover_every_operator():
    ops = set().union(*(node_tests.case_ops(c) for c in NODE_CASES))
    assert OPS <= ops and len(NODE_CASES) >= 36
    assert any("maxpool_with_argmax" in c.name for c in NODE_CASES)


@pytest.mark.parametrize("case", NODE_CASES, ids=[c.name for c in NODE_CASES])
def test_node_case(case):
    result = node_tests.run_case(case)
    assert result.status == "pass", (result.status, result.detail)


# ------------------------------------------------ one-node models over a symbolic batch dim

@dataclass
class Case:
    name: str
    op_type: str
    inputs: list                   # (name, dtype, shape) of the run-time inputs; "n" is symbolic
    consts: dict                   # initializer name -> array (input order follows `order`)
    order: list                    # the node's input names ("" for an omitted optional input)
    attrs: dict = field(default_factory=dict)
    opset: int = 13
    outputs: int = 1
    ort: bool = True               # ONNX Runtime runs this form too
    by_ort: bool = False           # ONNX Runtime gives the expected values (onnx.reference cannot run the form)
    data: object = None            # n -> the input arrays, instead of random ones


def _model(case: Case):
    return one_node_model(
        case.op_type, [(n, TYPES[d], s) for n, d, s in case.inputs], opset=case.opset, node_inputs=case.order,
        outputs=[f"y{i}" for i in range(case.outputs)], attrs=case.attrs, graph_name=case.name,
        initializers=[numpy_helper.from_array(np.asarray(v), k) for k, v in case.consts.items()],
        ir_version=8 if case.opset < 21 else 10)


def _arrays(case: Case, n: int) -> list:
    if case.data is not None:
        return case.data(n)
    rng = np.random.default_rng(zlib.crc32(case.name.encode()) + n)
    out = []
    for _, dtype, shape in case.inputs:
        shape = tuple(n if d == "n" else d for d in shape)
        if dtype.startswith("float") and not shape:  # a run-time scale
            out.append(np.asarray(rng.uniform(0.05, 0.5), dtype))
        elif dtype.startswith("float"):
            out.append((rng.standard_normal(shape) * 3).astype(dtype))
        elif dtype == "int64":
            out.append(rng.integers(0, 5, shape).astype(dtype))
        else:
            info = np.iinfo(dtype)
            out.append(np.asarray(rng.integers(max(info.min, -1000), min(info.max, 1000) + 1, shape), dtype))
    return out


def _reference(model, case: Case, arrays) -> list:
    if case.by_ort:
        return [np.asarray(v) for v in _ort(model, case, arrays)]
    if case.op_type == "DequantizeLinear" and case.opset < 19:
        # onnx.reference starts at DequantizeLinear-19, the same for these dtypes and per tensor / per axis
        model = helper.make_model(model.graph, opset_imports=[helper.make_opsetid("", 19)])
        model.ir_version = 9
    return [np.asarray(v) for v in reference_outputs(model, _feeds(case, arrays), by_ort=False)]


def _ort(model, case: Case, arrays) -> list:
    return reference_outputs(model, _feeds(case, arrays))


def _feeds(case: Case, arrays) -> dict:
    return {name: a for (name, _, _), a in zip(case.inputs, arrays)}


U8, I8 = np.uint8, np.int8
F = np.float32
CASES = [
    Case("q10_uint8", "QuantizeLinear", [("x", "float32", ("n", 5))], {"s": F(0.25), "z": U8(128)},
         ["x", "s", "z"], opset=10),
    Case("q13_axis_int8", "QuantizeLinear", [("x", "float32", ("n", 3, 4))],
         {"s": np.array([0.5, 0.1, 2.0], F), "z": np.array([-3, 0, 7], I8)}, ["x", "s", "z"], {"axis": 1}),
    Case("q13_axis_last", "QuantizeLinear", [("x", "float32", ("n", 4))],
         {"s": np.array([0.5, 0.1, 2.0, 1.0], F), "z": np.array([1, 2, 3, 4], U8)}, ["x", "s", "z"], {"axis": -1}),
    Case("q13_no_zero_point", "QuantizeLinear", [("x", "float32", ("n", 6))], {"s": F(0.02)}, ["x", "s"]),
    Case("q19_float16", "QuantizeLinear", [("x", "float16", ("n", 5))],
         {"s": np.float16(0.125), "z": I8(-2)}, ["x", "s", "z"], opset=19),
    Case("q21_blocked", "QuantizeLinear", [("x", "float32", (2, 5))],
         {"s": np.array([[0.5, 0.25, 1.0], [0.1, 2.0, 0.3]], F), "z": np.array([[1, -1, 0], [5, 6, 7]], I8)},
         ["x", "s", "z"],
         {"axis": 1, "block_size": 2}, 21, ort=False),
    Case("q21_output_dtype_int16", "QuantizeLinear", [("x", "float32", ("n", 4))], {"s": F(0.001)},
         ["x", "s"], {"output_dtype": TensorProto.INT16}, 21),
    Case("q21_uint16", "QuantizeLinear", [("x", "float32", ("n", 4))], {"s": F(0.0001), "z": np.uint16(30000)},
         ["x", "s", "z"], opset=21),
    Case("q19_int32_input", "QuantizeLinear", [("x", "int32", ("n", 4))], {"s": F(3.0), "z": I8(1)},
         ["x", "s", "z"], opset=19, ort=False),
    Case("q23_precision", "QuantizeLinear", [("x", "float32", ("n", 4))], {"s": F(0.3), "z": U8(10)},
         ["x", "s", "z"], {"precision": TensorProto.DOUBLE}, 23, ort=False),
    Case("q25_precision_float16", "QuantizeLinear", [("x", "float32", ("n", 4))], {"s": F(0.3), "z": I8(-10)},
         ["x", "s", "z"], {"precision": TensorProto.FLOAT16}, 25, ort=False),
    # exact halves: round half to even, after the division and before the zero point
    Case("q_ties_half_even", "QuantizeLinear", [("x", "float32", ("n", 8))], {"s": F(0.5), "z": I8(3)}, ["x", "s", "z"],
         data=lambda n: [(np.array([0.25, 0.75, 1.25, -0.25, -0.75, -1.25, 63.25, -65.75], F)
                          + np.arange(n, dtype=F)[:, None]).astype(F)]),
    Case("q_runtime_scale", "QuantizeLinear", [("x", "float32", ("n", 3)), ("s", "float32", ()),
                                               ("z", "uint8", ())], {}, ["x", "s", "z"]),
    Case("dq10_uint8", "DequantizeLinear", [("x", "uint8", ("n", 5))], {"s": F(0.5), "z": U8(100)},
         ["x", "s", "z"], opset=10),
    Case("dq13_axis_int8", "DequantizeLinear", [("x", "int8", ("n", 3, 2))],
         {"s": np.array([0.5, 0.1, 2.0], F), "z": np.array([-3, 0, 7], I8)}, ["x", "s", "z"], {"axis": 1}),
    Case("dq13_int32", "DequantizeLinear", [("x", "int32", ("n", 4))], {"s": F(0.001)}, ["x", "s"]),
    Case("dq21_int16", "DequantizeLinear", [("x", "int16", ("n", 4))], {"s": F(0.01), "z": np.int16(-50)},
         ["x", "s", "z"], opset=21),
    Case("dq21_blocked", "DequantizeLinear", [("x", "uint8", (2, "n"))],
         {"s": np.array([[0.5], [2.0]], F), "z": np.array([[3], [9]], U8)}, ["x", "s", "z"],
         {"axis": 1, "block_size": 8}, 21, ort=False),
    Case("dq21_blocked_axis0_runtime_scale", "DequantizeLinear", [("x", "int8", (5, "n")), ("s", "float32", (3, "n"))],
         {}, ["x", "s"], {"axis": 0, "block_size": 2}, 21, ort=False),
    Case("dq19_float16_scale", "DequantizeLinear", [("x", "uint8", ("n", 3))], {"s": np.float16(0.25)},
         ["x", "s"], opset=19),
    Case("dq23_output_dtype", "DequantizeLinear", [("x", "int8", ("n", 3))], {"s": F(0.25), "z": I8(3)},
         ["x", "s", "z"], {"output_dtype": TensorProto.FLOAT16}, 23, ort=False),
    Case("dynamic_quantize", "DynamicQuantizeLinear", [("x", "float32", ("n", 7))], {}, ["x"], opset=11,
         outputs=3),
    Case("matmul_integer", "MatMulInteger", [("a", "uint8", ("n", 4)), ("b", "uint8", (4, 3))],
         {"za": U8(12), "zb": np.array([3, 0, 200], U8)}, ["a", "b", "za", "zb"], opset=10),
    Case("matmul_integer_int8_3d", "MatMulInteger", [("a", "int8", (2, "n", 5)), ("b", "int8", (2, 5, 3))],
         {}, ["a", "b"], opset=10),
    Case("qlinear_matmul_uint8", "QLinearMatMul", [("a", "uint8", ("n", 4)), ("b", "uint8", (4, 3))],
         {"sa": F(0.02), "za": U8(113), "sb": F(0.004), "zb": U8(114), "sy": F(0.01), "zy": U8(118)},
         ["a", "sa", "za", "b", "sb", "zb", "sy", "zy"], opset=10),
    Case("qlinear_matmul_int8_per_column", "QLinearMatMul", [("a", "int8", ("n", 6)), ("b", "int8", (6, 3))],
         {"sa": F(0.05), "za": I8(-3), "sb": np.array([0.01, 0.02, 0.005], F), "zb": np.array([0, 0, 0], I8),
          "sy": F(0.3), "zy": I8(5)}, ["a", "sa", "za", "b", "sb", "zb", "sy", "zy"], opset=21, ort=False),
    # K = 300: the accumulators may pass 2^24, the requantization runs in float64
    Case("qlinear_matmul_long_k", "QLinearMatMul", [("a", "uint8", ("n", 300)), ("b", "uint8", (300, 2))],
         {"sa": F(0.02), "za": U8(3), "sb": F(0.01), "zb": U8(0), "sy": F(3.0), "zy": U8(0)},
         ["a", "sa", "za", "b", "sb", "zb", "sy", "zy"], opset=10),
    Case("qlinear_matmul_float16", "QLinearMatMul", [("a", "uint8", ("n", 4)), ("b", "uint8", (4, 2))],
         {"sa": np.float16(0.02), "za": U8(100), "sb": np.float16(0.01), "zb": U8(120), "sy": np.float16(0.05),
          "zy": U8(128)}, ["a", "sa", "za", "b", "sb", "zb", "sy", "zy"], opset=21,
         ort=False),  # ONNX Runtime's float16 multiplier rounds differently (off by 1 at some elements)
    Case("conv_integer_pads", "ConvInteger", [("x", "uint8", ("n", 2, 5, 5)), ("w", "uint8", (3, 2, 3, 3))],
         {"zx": U8(7)}, ["x", "w", "zx"], {"pads": [1, 1, 1, 1]}, 10, ort=False),
    Case("conv_integer_strided", "ConvInteger", [("x", "int8", ("n", 2, 6, 5))],
         {"w": np.arange(-12, 12, dtype=I8).reshape(2, 2, 3, 2), "zx": I8(2), "zw": I8(-1)}, ["x", "w", "zx", "zw"],
         {"strides": [2, 1]}, 10, ort=False),
    Case("qlinear_conv", "QLinearConv", [("x", "uint8", ("n", 2, 5, 5))],
         {"sx": F(0.02), "zx": U8(100), "w": (np.arange(54) % 7).astype(U8).reshape(3, 2, 3, 3),
          "sw": np.array([0.01, 0.02, 0.03], F), "zw": np.array([3, 3, 3], U8), "sy": F(0.05), "zy": U8(90),
          "b": np.array([10, -200, 35], np.int32)},
         ["x", "sx", "zx", "w", "sw", "zw", "sy", "zy", "b"], {"pads": [1, 0, 1, 0]}, 10, ort=False),
    Case("qlinear_conv_1d_int8", "QLinearConv", [("x", "int8", ("n", 3, 7))],
         {"sx": F(0.1), "zx": I8(0), "w": np.arange(-9, 9, dtype=I8).reshape(2, 3, 3), "sw": F(0.05),
          "zw": I8(0), "sy": F(0.2), "zy": I8(-4)},
         ["x", "sx", "zx", "w", "sw", "zw", "sy", "zy"], {"strides": [2]}, 10, ort=False),
]
_POOL = {"pool_int64s": [2, 3, 5, 4, 5, 6, 7, 8, 6, 7], "ngram_counts": [0, 4], "ngram_indexes": [0, 1, 2, 3, 4, 5, 6]}
CASES += [
    Case(f"tfidf_{mode.lower()}_{tag}", "TfIdfVectorizer", [("x", "int64" if tag != "int32" else "int32",
                                                               ("n", 8) if tag != "1d" else (8,))],
         {}, ["x"], {**_POOL, "mode": mode, "min_gram_length": low, "max_gram_length": 2, "max_skip_count": skip,
                     **({"weights": [0.5, 1.0, 2.0, 0.25, 3.0, 1.5, 0.75]} if tag == "w" else {})}, 9,
         by_ort=tag in ("int32", "plain"))  # onnx.reference needs weights and int64
    for mode, tag, low, skip in [("TF", "uni_bi_skip2", 1, 2), ("IDF", "w", 1, 1), ("TFIDF", "w", 2, 3),
                                 ("TFIDF", "int32", 1, 0), ("TF", "1d", 1, 5), ("IDF", "plain", 2, 0)]]
CASES += [
    Case("maxpool_indices_pads", "MaxPool", [("x", "float32", ("n", 2, 5, 6))], {}, ["x"],
         {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}, 12, outputs=2),
    Case("maxpool_indices_column_major", "MaxPool", [("x", "float32", ("n", 2, 5, 6))], {}, ["x"],
         {"kernel_shape": [2, 3], "strides": [1, 2], "storage_order": 1}, 12, outputs=2),
    Case("maxpool_indices_ceil_dilated", "MaxPool", [("x", "float32", ("n", 1, 7, 6))], {}, ["x"],
         {"kernel_shape": [2, 2], "strides": [2, 2], "dilations": [2, 1], "ceil_mode": 1}, 12, outputs=2),
    Case("maxpool_indices_1d_int8", "MaxPool", [("x", "int8", ("n", 3, 9))], {}, ["x"],
         {"kernel_shape": [3], "strides": [2], "pads": [1, 1]}, 12, outputs=2, ort=False),
    Case("maxpool_indices_3d", "MaxPool", [("x", "float32", ("n", 2, 3, 4, 4))], {}, ["x"],
         {"kernel_shape": [2, 2, 2], "strides": [1, 2, 2]}, 12, outputs=2),
]


def test_reference_agrees_with_onnx_runtime():
    """onnx.reference gives ONNX Runtime's numbers where ONNX Runtime runs the form."""
    for case in CASES:
        if case.ort:
            model = _model(case)
            arrays = _arrays(case, 3)
            for want, got in zip(_reference(model, case, arrays), _ort(model, case, arrays)):
                assert_matches(np.asarray(got), want, tol=1e-6)


def _check(actual, expected):
    assert_matches(np.asarray(actual), expected, tol=1e-6)


def _example(case: Case, model, n: int):
    arrays = _arrays(case, n)
    return arrays, _reference(model, case, arrays)


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_interpreted_matches_reference(case):
    model = _model(case)
    check_interpreted(model, SIZES, functools.partial(_example, case, model), _check)



def _qdq_model():
    """A QDQ-exported block as quantization tools write it: the activation quantized and dequantized,
    int8 weights dequantized per output channel, Conv + Relu, the result quantized and dequantized."""
    rng = np.random.default_rng(7)
    w = rng.integers(-127, 128, (4, 3, 3, 3)).astype(I8)
    inits = [numpy_helper.from_array(a, k) for k, a in {
        "xs": F(0.05), "xz": U8(128), "w": w, "ws": np.array([0.01, 0.02, 0.005, 0.015], F),
        "wz": np.zeros(4, I8), "b": np.array([0.1, -0.2, 0.0, 0.3], F), "ys": F(0.1), "yz": U8(0)}.items()]
    nodes = [helper.make_node("QuantizeLinear", ["x", "xs", "xz"], ["xq"]),
             helper.make_node("DequantizeLinear", ["xq", "xs", "xz"], ["xd"]),
             helper.make_node("DequantizeLinear", ["w", "ws", "wz"], ["wd"], axis=0),
             helper.make_node("Conv", ["xd", "wd", "b"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("QuantizeLinear", ["r", "ys", "yz"], ["rq"]),
             helper.make_node("DequantizeLinear", ["rq", "ys", "yz"], ["y"])]
    graph = helper.make_graph(nodes, "qdq", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 3, 6, 6])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    return model


def test_qdq_model_matches_onnx_runtime():
    """Within one output step (0.1): a sum's rounding may move a value across a quantization boundary, and
    ONNX Runtime fuses the pattern into integer arithmetic."""
    model = _qdq_model()
    mod = rxe.from_onnx(model)
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    for n in SIZES:
        x = np.random.default_rng(n).uniform(-6, 6, (n, 3, 6, 6)).astype(F)
        want = sess.run(None, {"x": x})[0]
        got = np.asarray(rxe.interpret(mod, x))
        assert got.shape == want.shape and got.dtype == want.dtype
        np.testing.assert_allclose(got, want, atol=0.1 + 1e-6, rtol=0)
        assert np.mean(got == want) > 0.95


# ------------------------------------------------ compiled: one model of many of the cases above

COMPILED = ["q_ties_half_even", "q13_axis_int8", "q21_blocked", "q_runtime_scale", "dq21_blocked", "dq13_int32",
            "dynamic_quantize", "matmul_integer", "qlinear_matmul_int8_per_column", "qlinear_matmul_long_k",
            "qlinear_conv", "tfidf_idf_w", "maxpool_indices_column_major"]


def _merged(names, opset=21):
    """One model holding the named cases' nodes side by side (names prefixed; the same symbolic n)."""
    nodes, inputs, outputs, inits = [], [], [], []
    for i, name in enumerate(names):
        case = next(c for c in CASES if c.name == name)
        rename = {k: f"c{i}_{k}" for k in [*case.order, *(n for n, _, _ in case.inputs)] if k}
        nodes.append(helper.make_node(case.op_type, [rename.get(k, "") for k in case.order],
                                      [f"c{i}_y{j}" for j in range(case.outputs)], **case.attrs))
        inputs += [helper.make_tensor_value_info(rename[n], TYPES[d], list(s)) for n, d, s in case.inputs]
        outputs += [helper.make_empty_tensor_value_info(f"c{i}_y{j}") for j in range(case.outputs)]
        inits += [numpy_helper.from_array(np.asarray(v), rename[k]) for k, v in case.consts.items()]
    model = helper.make_model(helper.make_graph(nodes, "quant", inputs, outputs, inits),
                              opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 10
    return model


def _run_merged(run, names, sizes):
    for n in sizes:
        cases = [next(c for c in CASES if c.name == name) for name in names]
        arrays = [_arrays(c, n) for c in cases]
        got = list(run(*[a for arr in arrays for a in arr]))
        for case, arr in zip(cases, arrays):
            for want in _reference(_model(case), case, arr):
                assert_matches(np.asarray(got.pop(0)), want, tol=1e-6)
        assert not got


@pytest.mark.parametrize("backend", ["c", "llvm"])
def test_compiled_matches_reference(backend, tmp_path):
    with compiled(_merged(COMPILED), backend, tmp_path) as loaded:
        _run_merged(loaded.run, COMPILED, SIZES)


QEMU = ["q13_axis_int8", "dq13_axis_int8", "qlinear_matmul_uint8", "maxpool_indices_pads"]


@pytest.mark.slow
@pytest.mark.emu
def test_compiled_for_qemu_aarch64(tmp_path):
    art = rxe.build(rxe.from_onnx(_merged(QEMU)), board="qemu-aarch64", backend="c", out_dir=tmp_path, name="m",
                    profile=False)
    with rxe.connect("qemu-aarch64") as dev:
        _run_merged(dev.load(art).run, QEMU, SIZES[1:])


# ------------------------------------------------------------------------ bad input

def _bad(op_type, inputs, consts, order, attrs=None, opset=21, outputs=1):
    return one_node_model(
        op_type, inputs, opset=opset, node_inputs=order, outputs=[f"y{i}" for i in range(outputs)], attrs=attrs,
        initializers=[helper.make_tensor(k, t, s, v) for k, (t, s, v) in consts.items()], graph_name="bad",
        node_name="bad", ir_version=10)


_X = [("x", TensorProto.FLOAT, ["n", 3])]
_S = {"s": (TensorProto.FLOAT, [], [0.5])}
_TFIDF = {"mode": "TF", "min_gram_length": 1, "max_gram_length": 1, "max_skip_count": 0, "ngram_counts": [0],
          "ngram_indexes": [0]}


@pytest.mark.parametrize("model,message", [
    (_bad("QuantizeLinear", _X, {**_S, "z": (TensorProto.FLOAT8E4M3FN, [], [0])}, ["x", "s", "z"]),
     r"bad \(QuantizeLinear\).*float8_e4m3fn"),
    (_bad("QuantizeLinear", _X, _S, ["x", "s"], {"output_dtype": TensorProto.FLOAT4E2M1}),
     r"bad \(QuantizeLinear\).*output_dtype: element type float4e2m1 is not supported"),
    (_bad("QuantizeLinear", _X, _S, ["x", "s"], {"output_dtype": TensorProto.INT32}),
     r"bad \(QuantizeLinear\).*output_dtype int32 is not a supported quantized type"),
    (_bad("QuantizeLinear", _X, {**_S, "z": (TensorProto.UINT8, [], [3])}, ["x", "s", "z"],
          {"output_dtype": TensorProto.INT8}), r"bad \(QuantizeLinear\).*output_dtype int8 differs from the zero"),
    (_bad("QuantizeLinear", _X, {"s": (TensorProto.INT32, [], [2])}, ["x", "s"]),
     r"bad \(QuantizeLinear\).*input 1 \(the scale\) must be a float tensor.*got int32"),
    (_bad("QuantizeLinear", _X, {"s": (TensorProto.FLOAT, [2], [0.5, 1.0])}, ["x", "s"]),
     r"bad \(QuantizeLinear\).*the scale has 2 values, the input's axis 1 has size 3"),
    (_bad("QuantizeLinear", _X, {"s": (TensorProto.FLOAT, [3], [0.5, 1.0, 2.0])}, ["x", "s"], opset=10),
     r"bad \(QuantizeLinear\).*the scale must be a scalar before opset 13"),
    (_bad("QuantizeLinear", _X, {"s": (TensorProto.FLOAT, [3], [0.5, 1.0, 2.0])}, ["x", "s"], {"axis": 2}),
     r"bad \(QuantizeLinear\).*axis 2 is out of range for an input of rank 2"),
    (_bad("DequantizeLinear", [("x", TensorProto.UINT8, ["n", 3])], {**_S, "z": (TensorProto.INT8, [], [1])},
          ["x", "s", "z"]), r"bad \(DequantizeLinear\).*zero point's type int8 differs from the input's uint8"),
    (_bad("DequantizeLinear", [("x", TensorProto.UINT8, ["n", 4])], {"s": (TensorProto.FLOAT, [1, 3], [1, 1, 1])},
          ["x", "s"], {"block_size": 2}), r"bad \(DequantizeLinear\).*\(blocked\) of shape \(1, 3\) differs"),
    (_bad("DequantizeLinear", [("x", TensorProto.UINT8, [2, 5])], {"s": (TensorProto.FLOAT, [2, 2], [1] * 4)},
          ["x", "s"], {"block_size": 2}), r"bad \(DequantizeLinear\).*2 blocks on axis 1.*needs 3"),
    (_bad("DequantizeLinear", [("x", TensorProto.FLOAT4E2M1, ["n", 3])], _S, ["x", "s"]), r"element type float4e2m1"),
    (_bad("DequantizeLinear", [("x", TensorProto.INT64, ["n", 3])], _S, ["x", "s"]),
     r"bad \(DequantizeLinear\).*input 0 of type int64 is not supported"),
    (_bad("DynamicQuantizeLinear", [("x", TensorProto.DOUBLE, ["n"])], {}, ["x"], opset=11, outputs=3),
     r"bad \(DynamicQuantizeLinear\).*must be float32, got float64"),
    (_bad("MatMulInteger", [("a", TensorProto.INT32, ["n", 3]), ("b", TensorProto.UINT8, [3, 2])], {}, ["a", "b"]),
     r"bad \(MatMulInteger\).*input 0 \(A\) must be int8 or uint8, got int32"),
    (_bad("QLinearMatMul", [("a", TensorProto.UINT8, ["n", 3]), ("b", TensorProto.INT8, [3, 2])],
          {**_S, "z": (TensorProto.UINT8, [], [1])}, ["a", "s", "z", "b", "s", "z", "s", "z"]),
     r"bad \(QLinearMatMul\).*input 5 \(a zero point\) of type uint8 differs from its operand's int8"),
    (_bad("QLinearConv", [("x", TensorProto.UINT8, ["n", 2, 4, 4]), ("w", TensorProto.UINT8, [2, 2, 3, 3])],
          {**_S, "z": (TensorProto.UINT8, [], [1]), "b": (TensorProto.FLOAT, [2], [1, 2])},
          ["x", "s", "z", "w", "s", "z", "s", "z", "b"], opset=10),
     r"bad \(QLinearConv\).*input 8 \(the bias\) must be int32, got float32"),
    (_bad("TfIdfVectorizer", [("x", TensorProto.INT64, ["n", "l"])], {}, ["x"], {**_TFIDF, "pool_int64s": [1]}, 9),
     r"bad \(TfIdfVectorizer\).*the row length must be static, got l"),
    (_bad("TfIdfVectorizer", [("x", TensorProto.INT64, ["n", 4])], {}, ["x"], {**_TFIDF, "pool_strings": ["a"]}, 9),
     r"bad \(TfIdfVectorizer\).*pool_strings is not supported"),
    (_bad("TfIdfVectorizer", [("x", TensorProto.INT64, ["n", 4])], {}, ["x"],
          {**_TFIDF, "pool_int64s": [1], "mode": "BM25"}, 9), r"bad \(TfIdfVectorizer\).*mode 'BM25' is not"),
    (_bad("TfIdfVectorizer", [("x", TensorProto.FLOAT, ["n", 4])], {}, ["x"], {**_TFIDF, "pool_int64s": [1]}, 9),
     r"bad \(TfIdfVectorizer\).*input of type float32 is not supported"),
    (_bad("TfIdfVectorizer", [("x", TensorProto.INT64, ["n", 1000])], {}, ["x"],
          {**_TFIDF, "pool_int64s": list(range(20000)), "ngram_indexes": list(range(20000))}, 9),
     r"bad \(TfIdfVectorizer\).*the comparison masks would take 20000000 elements per row, more than 16777216"),
    (_bad("MaxPool", [("x", TensorProto.FLOAT, ["n", 2, "h", 4])], {}, ["x"], {"kernel_shape": [2, 2]}, 12, 2),
     r"bad \(MaxPool\).*the Indices output needs static spatial sizes"),
    (_bad("MaxPool", [("x", TensorProto.FLOAT, ["n", 2, 4, 4])], {}, ["x"],
          {"kernel_shape": [2, 2], "storage_order": 2}, 12, 2), r"bad \(MaxPool\).*storage_order must be 0"),
])
def test_bad_input_names_the_node(model, message):
    with pytest.raises(rxe.frontend.OnnxImportError, match=message):
        rxe.from_onnx(model)
