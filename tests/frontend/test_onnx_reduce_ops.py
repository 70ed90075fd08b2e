"""ONNX reductions (every Reduce*, ArgMax / ArgMin) and the normalizations
built on them (LpNormalization, MeanVarianceNormalization, LRN,
InstanceNormalization, GroupNormalization): the ONNX backend node cases that
use them; one-node models over a symbolic batch dim `n`, imported and
interpreted at several sizes and compiled on the host with the C and LLVM
backends, against ONNX Runtime (or onnx.reference where ONNX Runtime lacks the
opset); bad attributes and dtypes rejected with the node named."""

import functools
import zlib
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import relax_edge as rxe
from relax_edge import op
from relax_edge.errors import TypeInferenceError
from relax_edge.frontend.onnx import node_tests
from relax_edge.frontend.onnx.context import ONNX_DTYPES
from relax_edge.ir import Builder, SizeVar, TensorType, Var
from relax_edge.op.registry import make_call
from tests.frontend.one_node import assert_matches, check_compiled, check_interpreted, one_node_model, reference_outputs

OPS = frozenset("""ReduceSum ReduceMean ReduceMax ReduceMin ReduceProd ReduceSumSquare ReduceL1 ReduceL2
ReduceLogSum ReduceLogSumExp ArgMax ArgMin LpNormalization MeanVarianceNormalization LRN
InstanceNormalization GroupNormalization""".split())


PREFIXES = ("test_reduce_", "test_argmax_", "test_argmin_", "test_lrn", "test_l1normalization",
            "test_l2normalization", "test_lpnormalization", "test_mvn", "test_instancenorm",
            "test_group_normalization")


def _uses_ops(case) -> bool:
    """A node case of these operators (expanded forms included) with supported dtypes."""
    graph = case.model.graph
    if not case.name.startswith(PREFIXES):
        return False
    return all(v.type.tensor_type.elem_type in ONNX_DTYPES for v in list(graph.input) + list(graph.output))


NODE_CASES = [c for c in node_tests.collect_cases() if _uses_ops(c)]
KNOWN_UNSUPPORTED: dict = {}   # (the float64 cast of test_reduce_log_sum_exp_empty_set_expanded is supported)


def test_every_opset_form_has_node_cases():
    names = {c.name for c in NODE_CASES}
    for prefix in ("test_reduce_l1_", "test_reduce_l2_", "test_reduce_log_sum_", "test_reduce_log_sum_exp_",
                   "test_reduce_sum_square_", "test_reduce_prod_", "test_argmin_", *PREFIXES):
        assert any(n.startswith(prefix) for n in names), prefix


@pytest.mark.parametrize("case", NODE_CASES, ids=[c.name for c in NODE_CASES])
def test_node_case(case):
    from relax_edge.frontend.onnx import convert  # noqa: F401  (registers the converters: the scope)
    result = node_tests.run_case(case)
    expected = "unsupported" if case.name in KNOWN_UNSUPPORTED else "pass"
    assert result.status == expected, (result.status, result.detail)


# ------------------------------------------------ one-node models over a symbolic batch dim

BATCH = [1, 2, 5]
_TYPES = {np.dtype("float32"): TensorProto.FLOAT, np.dtype("float16"): TensorProto.FLOAT16,
          np.dtype("int32"): TensorProto.INT32,
          np.dtype("int64"): TensorProto.INT64}


@dataclass
class Case:
    name: str
    op_type: str
    shapes: list                  # input shapes; "n" is the symbolic batch dim
    attrs: dict = field(default_factory=dict)
    opset: int = 18
    axes: list = None             # the axes input (opset 18 reductions)
    dtype: str = "float32"
    positive: bool = False        # inputs drawn from (0.1, 2): logs of sums stay finite
    ort: bool = True              # False: onnx.reference gives the expected values
    reference: object = None      # a numpy reference written from the spec, where neither runs the case


def _model(case: Case):
    inits = []
    if case.axes is not None:
        inits.append(numpy_helper.from_array(np.array(case.axes, np.int64), "axes"))
    elem = _TYPES[np.dtype(case.dtype)]
    rest = elem if case.dtype.startswith("float") else TensorProto.FLOAT
    inputs = [(f"x{i}", elem if i == 0 else rest, s) for i, s in enumerate(case.shapes)]
    return one_node_model(case.op_type, inputs, opset=case.opset, attrs=case.attrs, initializers=inits,
                          graph_name=case.name)


def _arrays(case: Case, n: int):
    rng = np.random.default_rng(zlib.crc32(case.name.encode()) + n)
    out = []
    for i, s in enumerate(case.shapes):
        shape = tuple(n if d == "n" else d for d in s)
        floats = case.dtype if case.dtype.startswith("float") else "float32"
        if i == 0 and floats != case.dtype:
            out.append(rng.integers(-4, 5, shape).astype(case.dtype))
        elif case.positive:
            out.append(rng.uniform(0.1, 2.0, shape).astype(floats))
        else:
            out.append(rng.standard_normal(shape).astype(floats))
    return out


def _expected(case: Case, model, arrays):
    """The numpy reference's output where the case has one, else ONNX Runtime's or onnx.reference's."""
    if case.reference:
        return case.reference(*arrays, **case.attrs)
    return reference_outputs(model, {f"x{i}": a for i, a in enumerate(arrays)}, case.ort)[0]


def _example(case: Case, model, n: int):
    """The inputs at size n and the expected outputs."""
    arrays = _arrays(case, n)
    return arrays, [_expected(case, model, arrays)]



def lrn_reference(x, size, alpha=1e-4, beta=0.75, bias=1.0):
    """The ONNX spec: square_sum[n, c] sums x^2 over channels
    [c - floor((size - 1) / 2), c + ceil((size - 1) / 2)] inside [0, C)."""
    x64 = x.astype(np.float64)
    channels = x.shape[1]
    square_sum = np.zeros_like(x64)
    for c in range(channels):
        lo, hi = max(0, c - (size - 1) // 2), min(channels, c + size // 2 + 1)
        square_sum[:, c] = np.sum(x64[:, lo:hi] ** 2, axis=1)
    return (x64 / (bias + alpha / size * square_sum) ** beta).astype(x.dtype)


def _reduce(name, op_type, shape, axes=None, keepdims=1, opset=18, **kw):
    attrs = {"keepdims": keepdims, **kw.pop("attrs", {})}
    if opset < 18 and op_type != "ReduceSum" or opset < 13:
        if axes is not None:
            attrs["axes"] = axes
        axes = None
    return Case(name, op_type, [shape], attrs, opset, axes, **kw)


CASES = [
    _reduce("l1_axis1", "ReduceL1", ("n", 3, 4), [1], 0),
    _reduce("l1_int_all_opset13", "ReduceL1", ("n", 3), None, 1, opset=13, dtype="int32"),
    _reduce("l2_last_keep", "ReduceL2", ("n", 3, 4), [-1]),
    _reduce("l2_opset11_attr", "ReduceL2", ("n", 5), [0], 0, opset=11),
    _reduce("l1_opset7_attr", "ReduceL1", ("n", 3, 4), [0, -1], 1, opset=7),
    _reduce("log_sum_exp_opset7_all", "ReduceLogSumExp", ("n", 3), None, 0, opset=7),
    _reduce("sum_square_axes02", "ReduceSumSquare", ("n", 3, 4), [0, 2], 0),
    _reduce("sum_square_int", "ReduceSumSquare", ("n", 4), [1], 1, dtype="int32"),
    _reduce("prod_axis0", "ReduceProd", ("n", 3), [0], 0),
    _reduce("prod_int_opset13", "ReduceProd", ("n", 3), [1], 1, opset=13, dtype="int64"),
    _reduce("log_sum_axis1", "ReduceLogSum", ("n", 3, 4), [1], 1, positive=True),
    _reduce("log_sum_all", "ReduceLogSum", ("n", 3), None, 0, positive=True),
    _reduce("log_sum_exp_last", "ReduceLogSumExp", ("n", 3, 4), [-1], 0),
    _reduce("log_sum_exp_opset13", "ReduceLogSumExp", ("n", 6), [1], 1, opset=13),
    _reduce("log_sum_exp_noop", "ReduceLogSumExp", ("n", 3), [], 1, attrs={"noop_with_empty_axes": 1}),
    _reduce("sum_opset13_axes_input", "ReduceSum", ("n", 3, 4), [-2], 0, opset=13),
    _reduce("sum_int_noop", "ReduceSum", ("n", 3), [], 1, dtype="int32", attrs={"noop_with_empty_axes": 1}),
    _reduce("mean_negative_axes", "ReduceMean", ("n", 3, 4), [-1, -3], 1),
    _reduce("mean_int_truncates", "ReduceMean", ("n", 3, 4), [1, 2], 0, dtype="int32"),
    _reduce("max_int64_do_not_keepdims", "ReduceMax", ("n", 4), [1], 0, dtype="int64"),
    _reduce("min_opset11_all", "ReduceMin", ("n", 2, 3), None, 0, opset=11),
    Case("argmin_opset7", "ArgMin", [("n", 4, 3)], {"axis": 2, "keepdims": 1}, 7),
    Case("argmin_axis1", "ArgMin", [("n", 5)], {"axis": 1, "keepdims": 0}, 13),
    Case("argmin_int_last_index", "ArgMin", [("n", 6)], {"axis": 0, "select_last_index": 1}, 13, dtype="int32"),
    Case("argmax_int_last_index", "ArgMax", [(4, "n")], {"axis": 0, "select_last_index": 1}, 13, dtype="int32"),
    Case("lp_l2_axis1", "LpNormalization", [("n", 4, 3)], {"axis": 1}, 17),
    Case("lp_l1_last", "LpNormalization", [("n", 5)], {"p": 1}, 17),
    Case("lp_opset7_default", "LpNormalization", [("n", 2, 3)], {}, 7),
    Case("lrn_opset7", "LRN", [("n", 3, 2, 2)], {"size": 3}, 7),
    Case("instance_norm_opset7", "InstanceNormalization", [("n", 2, 3, 3), (2,), (2,)], {}, 7),
    Case("mvn_opset9", "MeanVarianceNormalization", [("n", 2, 3, 3)], {}, 9),
    Case("mvn_default", "MeanVarianceNormalization", [("n", 3, 4, 5)], {}, 13),
    Case("mvn_axes", "MeanVarianceNormalization", [("n", 3, 4)], {"axes": [1, 2]}, 13),
    Case("lrn_size5", "LRN", [("n", 7, 3, 4)], {"size": 5, "alpha": 1e-2, "beta": 0.6, "bias": 2.0}, 13),
    # ONNX Runtime takes only odd sizes and 4-D inputs
    Case("lrn_size2", "LRN", [("n", 4, 3, 3)], {"size": 2}, 13, reference=lrn_reference),
    Case("lrn_size4_rank3", "LRN", [("n", 5, 6)], {"size": 4, "alpha": 0.5}, 13, reference=lrn_reference),
    Case("lrn_size3_rank5", "LRN", [("n", 3, 2, 2, 3)], {"size": 3, "beta": 1.5}, 13, reference=lrn_reference),
    Case("instance_norm", "InstanceNormalization", [("n", 3, 4, 5), (3,), (3,)], {"epsilon": 1e-3}, 6),
    Case("instance_norm_rank3", "InstanceNormalization", [("n", 2, 7), (2,), (2,)], {}, 6),
    Case("group_norm21", "GroupNormalization", [("n", 6, 2, 3), (6,), (6,)], {"num_groups": 3}, 21),
    Case("group_norm21_rank3", "GroupNormalization", [("n", 4, 5), (4,), (4,)],
         {"num_groups": 2, "epsilon": 1e-3}, 21),
    # float16 (interpreted only: the C backend has no float16): statistics in float32, as ONNX Runtime
    _reduce("l2_float16", "ReduceL2", ("n", 4, 5), [1], 0, dtype="float16"),
    _reduce("log_sum_exp_float16", "ReduceLogSumExp", ("n", 4, 5), [-1], 1, dtype="float16"),
    Case("instance_norm_float16", "InstanceNormalization", [("n", 3, 6), (3,), (3,)], {}, 13, dtype="float16"),
    Case("lrn_float16", "LRN", [("n", 5, 2, 3)], {"size": 3}, 13, dtype="float16"),
    Case("group_norm18_per_group", "GroupNormalization", [("n", 6, 2, 3), (3,), (3,)], {"num_groups": 3}, 18,
         ort=False),
]


def _check(actual, expected):
    assert_matches(actual, expected, tol=2e-5, float16_tol=1e-3)   # float16: one rounding apart at most


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_interpreted_matches_reference(case):
    model = _model(case)
    check_interpreted(model, BATCH, functools.partial(_example, case, model), _check)


COMPILED = [c for c in CASES if c.name in {
    "l1_int_all_opset13", "l2_last_keep", "sum_square_axes02", "prod_int_opset13", "log_sum_axis1",
    "log_sum_exp_last", "mean_int_truncates", "argmin_int_last_index", "lp_l2_axis1", "mvn_default", "lrn_size5",
    "lrn_size4_rank3", "instance_norm", "group_norm21", "group_norm18_per_group"}]


@pytest.mark.parametrize("backend", ["c", "llvm"])
@pytest.mark.parametrize("case", COMPILED, ids=[c.name for c in COMPILED])
def test_compiled_matches_reference(case, backend, tmp_path):
    model = _model(case)
    check_compiled(model, backend, tmp_path, BATCH, functools.partial(_example, case, model), _check)


# ------------------------------------------------------------------------ type rules

def _t(*shape, dtype="float32"):
    return Var("t", TensorType(shape, dtype))


def test_symbolic_shapes_of_the_reductions():
    n, m = SizeVar("n"), SizeVar("m")
    for build in (op.reduce_prod, op.reduce_sum_square, op.reduce_l1, op.reduce_l2, op.reduce_log_sum,
                  op.reduce_log_sum_exp):
        assert build(_t(n, 3, m), axis=(0, -1), keepdims=True).type == TensorType((1, 3, 1))
        assert build(_t(n, 3, m), axis=(1,)).type == TensorType((n, m))
        assert build(_t(n, 3, m)).type == TensorType(())
        assert build(_t(n, 0, m), axis=(1,)).type == TensorType((n, m))
    assert op.reduce_l1(_t(n, 4, dtype="int32"), axis=1).type == TensorType((n,), "int32")
    assert op.mean(_t(n, 4, dtype="int64"), axis=0).type == TensorType((4,), "int64")
    assert op.argmin(_t(n, m), axis=1).type == TensorType((n, 1), "int64")
    assert op.argmin(_t(n, m), axis=0, keepdims=False, select_last_index=True).type == TensorType((m,), "int64")


@pytest.mark.parametrize("build,message", [
    (lambda n: op.reduce_l2(_t(n, 4, dtype="int32"), axis=1), r"l2: .*floating point"),
    (lambda n: op.reduce_log_sum_exp(_t(n, 4, dtype="int64")), r"log_sum_exp: .*floating point"),
    (lambda n: op.reduce_prod(_t(n, 4), axis=(0, -2)), r"prod: axis \(0, -2\) repeats an axis"),
    (lambda n: op.reduce_l1(_t(n, 4), axis=(2,)), r"l1: axis 2 out of range for rank 2"),
    (lambda n: op.argmin(_t(n, 0), axis=1), r"argmin over axis 1 of length 0"),
])
def test_bad_reductions_are_rejected(build, message):
    with pytest.raises(TypeInferenceError, match=message):
        build(SizeVar("n"))


# ------------------------------------------------------------------------ bad input

def _bad(op_type, shapes, attrs, opset=18, dtype=TensorProto.FLOAT):
    inputs = [(f"x{i}", dtype if i == 0 else TensorProto.FLOAT, s) for i, s in enumerate(shapes)]
    return one_node_model(op_type, inputs, opset=opset, attrs=attrs, graph_name="bad", node_name="bad")


@pytest.mark.parametrize("model,message", [
    (_bad("LpNormalization", [("n", 4)], {"p": 3}, 17), r"bad \(LpNormalization\).*p=3 is not supported"),
    (_bad("LRN", [("n", 4, 2, 2)], {"size": 3}, 13, TensorProto.INT32),
     r"bad \(LRN\).*int32 is not supported \(floating point only\)"),
    (_bad("GroupNormalization", [("n", 6, 2), (6,), (6,)], {"num_groups": 4}, 21),
     r"bad \(GroupNormalization\).*6 channels do not split into num_groups=4"),
    (_bad("InstanceNormalization", [("n", 3), (3,), (3,)], {}, 6),
     r"bad \(InstanceNormalization\).*rank 2 is not supported"),
    (_bad("ReduceL2", [("n", 4)], {"axes": [1]}, 13, TensorProto.INT32),
     r"bad \(ReduceL2\).*floating point"),
    (_bad("ReduceLogSumExp", [("n", 4)], {"axes": [1, -1]}, 13), r"bad \(ReduceLogSumExp\).*repeats an axis"),
    (_bad("ArgMin", [("n", 4)], {"axis": 2}, 13), r"bad \(ArgMin\).*axis 2 out of range for rank 2"),
])
def test_bad_input_names_the_node(model, message):
    with pytest.raises(rxe.frontend.OnnxImportError, match=message):
        rxe.from_onnx(model)


def test_reduce_ops_are_registered_with_the_importer():
    from relax_edge.frontend.onnx import convert  # noqa: F401  (registers the converters)
    from relax_edge.frontend.onnx.context import CONVERTERS
    assert OPS <= set(CONVERTERS)



# ------------------------------------------------------------------ models

def test_sentence_embedding_normalization_compiles(tmp_path):
    """The tail of all-MiniLM-L6-v2 with normalization as torch exports it:
    mean pooling under the attention mask, ReduceL2, Clip and Div, over a
    symbolic batch and sequence length, compiled to C, against ONNX Runtime."""
    nodes = [
        helper.make_node("Unsqueeze", ["mask", "minus1"], ["mask3"]),
        helper.make_node("Cast", ["mask3"], ["maskf"], to=TensorProto.FLOAT),
        helper.make_node("Mul", ["tokens", "maskf"], ["masked"]),
        helper.make_node("ReduceSum", ["masked", "one"], ["summed"], keepdims=0),
        helper.make_node("ReduceSum", ["maskf", "one"], ["count"], keepdims=0),
        helper.make_node("Clip", ["count", "tiny"], ["count_safe"]),
        helper.make_node("Div", ["summed", "count_safe"], ["pooled"]),
        helper.make_node("ReduceL2", ["pooled", "one"], ["norm"], keepdims=1),
        helper.make_node("Clip", ["norm", "eps"], ["norm_safe"]),
        helper.make_node("Div", ["pooled", "norm_safe"], ["embedding"]),
    ]
    inits = [numpy_helper.from_array(np.array([-1], np.int64), "minus1"),
             numpy_helper.from_array(np.array([1], np.int64), "one"),
             numpy_helper.from_array(np.array(1e-9, np.float32), "tiny"),
             numpy_helper.from_array(np.array(1e-12, np.float32), "eps")]
    graph = helper.make_graph(nodes, "minilm_tail",
                              [helper.make_tensor_value_info("tokens", TensorProto.FLOAT, ["b", "s", 8]),
                               helper.make_tensor_value_info("mask", TensorProto.INT64, ["b", "s"])],
                              [helper.make_tensor_value_info("embedding", TensorProto.FLOAT, ["b", 8])],
                              initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 8
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    art = rxe.build(rxe.from_onnx(model), board="host", out_dir=tmp_path, name="tail", profile=False)
    rng = np.random.default_rng(0)
    with rxe.connect("host") as dev:
        loaded = dev.load(art)
        for b, s in [(1, 1), (2, 5), (3, 7)]:
            tokens = rng.standard_normal((b, s, 8)).astype(np.float32)
            mask = (rng.random((b, s)) > 0.3).astype(np.int64)
            mask[:, 0] = 1
            (expected,) = sess.run(None, {"tokens": tokens, "mask": mask})
            _check(loaded.run(tokens, mask)[0], expected)


LIGHT = sorted(Path(onnx.__file__).parent.glob("backend/test/data/light/light_*.onnx"))
LRN_MODELS = [p for p in LIGHT if p.stem[len("light_"):] in ("bvlc_alexnet", "inception_v1", "zfnet512")]


@pytest.mark.slow
@pytest.mark.parametrize("path", LRN_MODELS, ids=[p.stem for p in LRN_MODELS])
def test_light_zoo_models_with_lrn(path):
    """AlexNet, Inception v1 and ZFNet (the onnx package's light model zoo, LRN
    after their first convolutions) interpreted against ONNX Runtime; the
    light models' constant weights make the softmax uniform, so the logits
    before it are compared too."""
    model = onnx.load(path)
    softmax = [n for n in model.graph.node if n.op_type == "Softmax"][-1]
    model.graph.output.append(helper.make_tensor_value_info(softmax.input[0], TensorProto.FLOAT, None))
    weights = {i.name for i in model.graph.initializer}
    feeds = {i.name: np.random.default_rng(0).standard_normal(
        [d.dim_value for d in i.type.tensor_type.shape.dim]).astype(np.float32)
        for i in model.graph.input if i.name not in weights}
    expected = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)
    ours = rxe.interpret(rxe.from_onnx(model), *feeds.values())
    for got, want in zip(ours, expected):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5 * float(np.abs(want).max()))


@pytest.mark.parametrize("backend", ["c", "llvm"])
def test_integer_mean_of_an_empty_set_is_zero_as_onnx_runtime(backend, tmp_path):
    """An empty reduced axis: ONNX Runtime gives 0 for an integer mean; the
    compiled division never computes 0 / 0."""
    graph = helper.make_graph(
        [helper.make_node("ReduceMean", ["x", "axes"], ["y"], keepdims=0)], "empty_mean",
        [helper.make_tensor_value_info("x", TensorProto.INT32, [3, 0])],
        [helper.make_tensor_value_info("y", TensorProto.INT32, [3])],
        initializer=[numpy_helper.from_array(np.array([1], np.int64), "axes")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 8
    x = np.zeros((3, 0), np.int32)
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    expected = sess.run(None, {"x": x})[0]
    v = Var("x", TensorType((3, 0), "int32"))
    bb = Builder()
    with bb.function("main", [v]):
        bb.ret(bb.emit(make_call("mean", [v], {"axis": (1,), "keepdims": False})))
    art = rxe.build(bb.get(), board="host", backend=backend, out_dir=tmp_path, name="m", profile=False)
    np.testing.assert_array_equal(rxe.interpret(bb.get(), x), expected)
    with rxe.connect("host") as dev:
        np.testing.assert_array_equal(dev.load(art).run(x)[0], expected)


@pytest.mark.parametrize("reduce_op,n", [("ReduceMin", 2), ("ReduceMin", 6), ("ReduceMax", 2), ("ReduceSum", 3),
                                         ("ReduceProd", 3)])
def test_reduction_of_shape_values_stays_symbolic(reduce_op, n):
    """Shape arithmetic as detection exports write it (K = min(4, number of boxes)):
    a reduction over [4, n, 2] with n a dynamic dim, used as the shape of a
    ConstantOfShape, imported once and run at several n against ONNX Runtime."""
    nodes = [helper.make_node("Shape", ["x"], ["s"], start=0, end=1),
             helper.make_node("Concat", ["four", "s", "two"], ["c"], axis=0),
             helper.make_node(reduce_op, ["c"], ["k"], keepdims=1),
             helper.make_node("ConstantOfShape", ["k"], ["y"],
                              value=numpy_helper.from_array(np.array([1.5], np.float32)))]
    graph = helper.make_graph(nodes, "symbolic_reduce", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n"])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              initializer=[numpy_helper.from_array(np.array([4], np.int64), "four"),
                                           numpy_helper.from_array(np.array([2], np.int64), "two")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    mod = rxe.from_onnx(model, dim_bounds={"n": 16})
    x = np.zeros(n, np.float32)
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    assert_matches(rxe.interpret(mod, x), want)
