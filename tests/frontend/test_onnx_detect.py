"""ONNX TopK, NonMaxSuppression, Unique and Compress: the ONNX backend node
cases that use them; one-node models over symbolic dims imported and
interpreted at several sizes against ONNX Runtime; TopK (K constant or read
from a shape) and Compress with a constant condition compiled on the host
with the C and LLVM backends (and TopK on qemu-aarch64), with a fixed arena
under bounded dims; the data-dependent counts (NonMaxSuppression, Unique,
Compress with a run-time condition) bounded in their match_cast, and
NonMaxSuppression and Unique compiled (library kernels of data-dependent
size; tests/codegen/test_data_dependent.py has the rest); bad input refused
with the node named."""

import zlib

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

import relax_edge as rxe
from relax_edge.frontend.onnx import node_tests
from relax_edge.frontend.onnx.context import ONNX_DTYPES
from relax_edge.ir.expr import MatchCast
from relax_edge.ir.shape import free_vars
from tests.frontend.one_node import assert_matches, compiled

PREFIXES = ("test_top_k", "test_nonmaxsuppression", "test_unique", "test_compress")


def _in_scope(case) -> bool:
    graph = case.model.graph
    return case.name.startswith(PREFIXES) and all(
        v.type.tensor_type.elem_type in ONNX_DTYPES for v in list(graph.input) + list(graph.output))


NODE_CASES = [c for c in node_tests.collect_cases() if _in_scope(c)]
_T = {"float32": TensorProto.FLOAT, "float64": TensorProto.DOUBLE, "int32": TensorProto.INT32,
      "int64": TensorProto.INT64, "bool": TensorProto.BOOL}


def test_every_operator_has_node_cases():
    for prefix in PREFIXES:
        assert any(c.name.startswith(prefix) for c in NODE_CASES), prefix


# Unique sorts values: bfloat16 is held as uint16 bits, whose order is not the values' order
REFUSED = {"test_unique_bfloat16_sorted_without_axis": "Unique of bfloat16 is not supported"}


@pytest.mark.parametrize("case", NODE_CASES, ids=[c.name for c in NODE_CASES])
def test_node_case(case):
    from relax_edge.frontend.onnx import convert  # noqa: F401  (registers the converters: the scope)
    result = node_tests.run_case(case)
    if case.name in REFUSED:
        assert result.status == "unsupported" and REFUSED[case.name] in result.detail, (result.status, result.detail)
    else:
        assert result.status == "pass", (result.status, result.detail)


# ------------------------------------------------------------------ helpers

def _model(nodes, inputs, outputs, opset, initializers=()):
    graph = helper.make_graph(nodes, "detect", [helper.make_tensor_value_info(n, _T[d], s) for n, d, s in inputs],
                              [helper.make_empty_tensor_value_info(o) for o in outputs], list(initializers))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return model


def _ort(model, feeds):
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


def _rng(name, n):
    return np.random.default_rng(zlib.crc32(name.encode()) + n)


def _outputs(result):
    return list(result) if isinstance(result, tuple) else [result]


def _check_all(actual, expected):
    assert len(actual) == len(expected)
    for a, e in zip(actual, expected):
        assert_matches(np.asarray(a), e)


def _k(value):
    return helper.make_tensor("k", TensorProto.INT64, [1], [value])


# --------------------------------------------------------------------- TopK

def _topk_model(k, axis=-1, largest=None, opset=11, dtype="float32", shape=("n", 7), name="topk"):
    attrs = {"axis": axis}
    if largest is not None:
        attrs["largest"] = largest
    if opset < 10:
        node = helper.make_node("TopK", ["x"], ["v", "i"], name=name, k=k, **attrs)
        return _model([node], [("x", dtype, list(shape))], ["v", "i"], opset)
    node = helper.make_node("TopK", ["x", "k"], ["v", "i"], name=name, **attrs)
    return _model([node], [("x", dtype, list(shape))], ["v", "i"], opset, [_k(k)])


def _topk_input(name, dtype, shape):
    """Few distinct values (ties), and NaN in float inputs."""
    rng = _rng(name, int(np.prod(shape)))
    x = rng.integers(-3, 4, shape).astype(dtype)
    if x.dtype.kind == "f" and x.size > 2:
        x.reshape(-1)[rng.integers(0, x.size, 2)] = np.nan
    return x


TOPK = [  # name, k, axis, largest, opset, dtype, shape (n the symbolic dim)
    ("k3_last_axis", 3, -1, None, 11, "float32", ("n", 7)),
    ("k1_smallest", 1, 1, 0, 11, "float32", ("n", 5)),
    ("k_all_smallest_int32", 6, -1, 0, 11, "int32", ("n", 6)),
    ("k2_axis0_int64", 2, 0, 1, 11, "int64", (4, "n")),
    ("k4_middle_axis_f64", 4, 1, None, 11, "float64", (2, 9, "n")),
    ("k0", 0, -1, None, 11, "float32", ("n", 3)),
    ("opset1_attr_k", 2, -1, None, 1, "float32", ("n", 5)),
    ("opset10", 3, 0, None, 10, "float32", (6, "n")),
]
SIZES = [1, 3, 6]


def _concrete(shape, n):
    return tuple(n if d == "n" else d for d in shape)


@pytest.mark.parametrize("case", TOPK, ids=[c[0] for c in TOPK])
def test_topk_interpreted_matches_onnx_runtime(case):
    name, k, axis, largest, opset, dtype, shape = case
    model = _topk_model(k, axis, largest, opset, dtype, shape)
    mod = rxe.from_onnx(model)
    for n in SIZES:
        x = _topk_input(name, dtype, _concrete(shape, n))
        _check_all(_outputs(rxe.interpret(mod, x)), _ort(model, {"x": x}))


COMPILED_TOPK = [c for c in TOPK if c[0] in {"k3_last_axis", "k_all_smallest_int32", "k2_axis0_int64",
                                             "k4_middle_axis_f64"}]


@pytest.mark.parametrize("backend", ["c", "llvm"])
@pytest.mark.parametrize("case", COMPILED_TOPK, ids=[c[0] for c in COMPILED_TOPK])
def test_topk_compiled_matches_onnx_runtime(case, backend, tmp_path):
    name, k, axis, largest, opset, dtype, shape = case
    model = _topk_model(k, axis, largest, opset, dtype, shape)
    with compiled(model, backend, tmp_path) as loaded:
        for n in SIZES:
            x = _topk_input(name, dtype, _concrete(shape, n))
            _check_all(loaded.run(x), _ort(model, {"x": x}))


def _topk_k_from_shape():
    """K is Shape(x)[0] (the symbolic n), over an axis of 8: K beyond 8 is refused at run time."""
    nodes = [helper.make_node("Shape", ["x"], ["s"], start=0, end=1),
             helper.make_node("TopK", ["x", "s"], ["v", "i"], name="shape_k", axis=1, largest=0)]
    return _model(nodes, [("x", "float32", ["n", 8])], ["v", "i"], 15)


def test_topk_k_from_a_shape_interpreted_and_refused_beyond_the_axis():
    model = _topk_k_from_shape()
    mod = rxe.from_onnx(model)
    for n in (1, 4, 8):
        x = _topk_input("shape_k", "float32", (n, 8))
        _check_all(_outputs(rxe.interpret(mod, x)), _ort(model, {"x": x}))
    with pytest.raises(rxe.RelaxEdgeError, match=r"shape_k.*k=9 is outside \[0, 8\]"):
        rxe.interpret(mod, np.zeros((9, 8), np.float32))


@pytest.mark.parametrize("backend", ["c", "llvm"])
def test_topk_k_from_a_shape_compiled_with_a_fixed_arena(backend, tmp_path):
    """Under a bounded n the arena is a compile-time constant; K = n beyond the axis is a run-time error."""
    model = _topk_k_from_shape()
    art = rxe.build(rxe.from_onnx(model, dim_bounds={"n": 16}), board="host", backend=backend, out_dir=tmp_path,
                    name="m", quiet=True, profile=False)
    assert art.workspace_bytes is not None and art.workspace_bytes > 0
    with rxe.connect("host") as dev:
        loaded = dev.load(art)
        for n in (2, 8):
            x = _topk_input("shape_k", "float32", (n, 8))
            _check_all(loaded.run(x), _ort(model, {"x": x}))
        with pytest.raises(rxe.RelaxEdgeError, match=r"k=9 is outside \[0, 8\]"):
            loaded.run(np.zeros((9, 8), np.float32))


def test_topk_k_as_the_smaller_of_a_shape_and_a_constant(tmp_path):
    """K = Min(Shape(x)[1], 3), as detection heads cap their candidates: symbolic min(w, 3), never beyond w."""
    nodes = [helper.make_node("Shape", ["x"], ["s"]), helper.make_node("Slice", ["s", "one", "two"], ["s1"]),
             helper.make_node("Min", ["s1", "three"], ["k"]),
             helper.make_node("TopK", ["x", "k"], ["v", "i"], name="capped", axis=1)]
    inits = [helper.make_tensor(name, TensorProto.INT64, [1], [v]) for name, v in (("one", 1), ("two", 2),
                                                                                   ("three", 3))]
    model = _model(nodes, [("x", "float32", [2, "w"])], ["v", "i"], 13, inits)
    mod = rxe.from_onnx(model)
    with compiled(model, "c", tmp_path) as loaded:
        for w in (1, 2, 5):
            x = _topk_input("capped", "float32", (2, w))
            want = _ort(model, {"x": x})
            _check_all(_outputs(rxe.interpret(mod, x)), want)
            _check_all(loaded.run(x), want)


@pytest.mark.slow
@pytest.mark.emu
def test_topk_compiled_on_qemu_aarch64(tmp_path):
    name, k, axis, largest, opset, dtype, shape = TOPK[0]
    model = _topk_model(k, axis, largest, opset, dtype, shape)
    art = rxe.build(rxe.from_onnx(model), board="qemu-aarch64", backend="c", out_dir=tmp_path, name="m", quiet=True,
                    profile=False)
    with rxe.connect("qemu-aarch64") as dev:
        loaded = dev.load(art)
        for n in (1, 5):
            x = _topk_input(name, dtype, _concrete(shape, n))
            _check_all(loaded.run(x), _ort(model, {"x": x}))


# -------------------------------------------------------- NonMaxSuppression

def _nms_model(center=0, max_out=3, iou=0.5, score=None, name="nms", boxes=("b", "n", 4), scores=("b", 2, "n")):
    inits = [helper.make_tensor("m", TensorProto.INT64, [1], [max_out]),
             helper.make_tensor("iou", TensorProto.FLOAT, [1], [iou])]
    ins = ["boxes", "scores", "m", "iou"]
    if score is not None:
        inits.append(helper.make_tensor("st", TensorProto.FLOAT, [1], [score]))
        ins.append("st")
    node = helper.make_node("NonMaxSuppression", ins, ["sel"], name=name, center_point_box=center)
    return _model([node], [("boxes", "float32", list(boxes)), ("scores", "float32", list(scores))], ["sel"], 11,
                  inits)


def _nms_inputs(name, b, n, classes=2, center=0):
    rng = _rng(name, 10 * b + n)
    xy = rng.uniform(0, 4, (b, n, 2)).astype(np.float32)
    wh = rng.uniform(0.5, 3, (b, n, 2)).astype(np.float32)
    if center:
        boxes = np.concatenate([xy, wh], axis=2)
    else:  # corners in either order (ONNX allows flipped boxes)
        boxes = np.concatenate([xy, xy + wh], axis=2)
        boxes[:, ::2] = boxes[:, ::2][:, :, [2, 3, 0, 1]]
    scores = np.round(rng.uniform(0, 1, (b, classes, n)), 1).astype(np.float32)  # ties
    return boxes.astype(np.float32), scores


NMS = [  # name, center_point_box, max_output, iou, score_threshold
    ("corners", 0, 3, 0.5, None),
    ("center_score", 1, 4, 0.3, 0.35),
    ("max1_iou0", 0, 1, 0.0, 0.2),
    ("many", 1, 100, 0.6, None),
]


@pytest.mark.parametrize("case", NMS, ids=[c[0] for c in NMS])
def test_non_max_suppression_interpreted_matches_onnx_runtime(case):
    name, center, max_out, iou, score = case
    model = _nms_model(center, max_out, iou, score, name)
    mod = rxe.from_onnx(model)
    for b, n in ((1, 1), (1, 6), (2, 9), (3, 20)):
        boxes, scores = _nms_inputs(name, b, n, center=center)
        _check_all(_outputs(rxe.interpret(mod, boxes, scores)), _ort(model, {"boxes": boxes, "scores": scores}))


def _count_vars(mod):
    """The size variables that the match_casts of `mod`'s main function bind."""
    return [v for b in mod.functions["main"].body.blocks[0].bindings if isinstance(b, MatchCast)
            for d in b.type.shape for v in free_vars(d)]


def test_non_max_suppression_count_is_bounded_in_the_match_cast():
    """batch * classes * min(max_output_boxes_per_class, boxes) under the dims' bounds."""
    model = _nms_model(max_out=3)
    (count,) = _count_vars(rxe.from_onnx(model, dim_bounds={"b": 4, "n": 100}))
    assert (count.lower, count.upper) == (0, 4 * 2 * 3)
    (count,) = _count_vars(rxe.from_onnx(model, dim_bounds={"b": 4, "n": 2}))
    assert count.upper == 4 * 2 * 2
    (count,) = _count_vars(rxe.from_onnx(model))
    assert count.upper is None  # an unbounded batch: no bound to give


@pytest.mark.parametrize("case,backend", [(NMS[0], "c"), (NMS[1], "llvm")], ids=["corners-c", "center_score-llvm"])
def test_non_max_suppression_compiled_matches_onnx_runtime(case, backend, tmp_path):
    """The count bound in the match_cast is the compiled buffer's capacity: a fixed arena."""
    name, center, max_out, iou, score = case
    model = _nms_model(center, max_out, iou, score, name)
    art = rxe.build(rxe.from_onnx(model, dim_bounds={"b": 3, "n": 20}), board="host", backend=backend,
                    out_dir=tmp_path, name="m", quiet=True, profile=False)
    assert art.workspace_bytes is not None
    with rxe.connect("host") as dev:
        loaded = dev.load(art)
        for b, n in ((1, 1), (2, 9), (3, 20)):
            boxes, scores = _nms_inputs(name, b, n, center=center)
            _check_all(loaded.run(boxes, scores), _ort(model, {"boxes": boxes, "scores": scores}))


# ------------------------------------------------------------------- Unique

def _unique_model(axis, ordered, shape=("n", 3), dtype="float32", outputs=("y", "idx", "inv", "cnt")):
    attrs = {"sorted": ordered} if ordered is not None else {}
    if axis is not None:
        attrs["axis"] = axis
    node = helper.make_node("Unique", ["x"], list(outputs), name="uniq", **attrs)
    return _model([node], [("x", dtype, list(shape))], [o for o in outputs if o], 11)


UNIQUE = [  # name, axis, sorted, shape, dtype
    ("flat_sorted", None, 1, ("n", 3), "float32"),
    ("flat_unsorted_int64", None, 0, ("n", 4), "int64"),
    ("axis0_sorted", 0, None, ("n", 3), "int64"),
    ("axis1_unsorted", 1, 0, (2, "n"), "float32"),
    ("axis_neg_sorted", -1, 1, (3, "n"), "int64"),
]


@pytest.mark.parametrize("case", UNIQUE, ids=[c[0] for c in UNIQUE])
def test_unique_interpreted_matches_onnx_runtime(case):
    name, axis, ordered, shape, dtype = case
    model = _unique_model(axis, ordered, shape, dtype)
    mod = rxe.from_onnx(model)
    for n in (1, 4, 9):
        x = _rng(name, n).integers(0, 3, _concrete(shape, n)).astype(dtype)
        _check_all(_outputs(rxe.interpret(mod, x)), _ort(model, {"x": x}))


@pytest.mark.parametrize("case,backend", [(UNIQUE[1], "c"), (UNIQUE[3], "llvm")],
                         ids=["flat_unsorted_int64-c", "axis1_unsorted-llvm"])
def test_unique_compiled_matches_onnx_runtime(case, backend, tmp_path):
    name, axis, ordered, shape, dtype = case
    model = _unique_model(axis, ordered, shape, dtype)
    with compiled(model, backend, tmp_path) as loaded:
        for n in (1, 4, 9):
            x = _rng(name, n).integers(0, 3, _concrete(shape, n)).astype(dtype)
            _check_all(loaded.run(x), _ort(model, {"x": x}))


def test_unique_results_share_one_bounded_count():
    mod = rxe.from_onnx(_unique_model(None, 1, ("n", 3)), dim_bounds={"n": 5})
    counts = _count_vars(mod)
    assert len(counts) == 3 and len(set(counts)) == 1 and counts[0].upper == 15
    y_only = rxe.from_onnx(_unique_model(0, 0, ("n", 3), outputs=("y",)))
    x = np.array([[1, 2, 3], [0, 0, 0], [1, 2, 3]], np.float32)
    assert_matches(np.asarray(rxe.interpret(y_only, x)), np.array([[1, 2, 3], [0, 0, 0]], np.float32))


# ----------------------------------------------------------------- Compress

def _compress_model(axis, shape=("n", 4), cond_shape=("c",), const_cond=None, opset=11):
    attrs = {"axis": axis} if axis is not None else {}
    node = helper.make_node("Compress", ["x", "cond"], ["y"], name="comp", **attrs)
    inputs = [("x", "float32", list(shape))]
    inits = []
    if const_cond is None:
        inputs.append(("cond", "bool", list(cond_shape)))
    else:
        inits.append(helper.make_tensor("cond", TensorProto.BOOL, [len(const_cond)], const_cond))
    return _model([node], inputs, ["y"], opset, inits)


@pytest.mark.parametrize("axis,shape,opset", [(0, ("n", 4), 11), (1, (3, "n"), 9), (None, ("n", 2), 11),
                                              (-1, (2, "n"), 11)])
def test_compress_with_a_run_time_condition_matches_onnx_runtime(axis, shape, opset):
    model = _compress_model(axis, shape, opset=opset)
    mod = rxe.from_onnx(model)
    for n, c in ((1, 1), (4, 2), (5, 5), (3, 8)):  # conditions shorter than, as long as and longer than the axis
        x = _rng("compress", n).standard_normal(_concrete(shape, n)).astype(np.float32)
        cond = _rng("cond", n + c).random(c) > 0.4
        _check_all(_outputs(rxe.interpret(mod, x, cond)), _ort(model, {"x": x, "cond": cond}))
    (count,) = _count_vars(rxe.from_onnx(model, dim_bounds={"c": 6}))
    assert (count.lower, count.upper) == (0, 6)


@pytest.mark.parametrize("backend", ["c", "llvm"])
def test_compress_with_a_constant_condition_compiled(backend, tmp_path):
    """A constant condition folds to a take of constant indices: compiled, the arena fixed under bounds."""
    model = _compress_model(1, ("n", 5), const_cond=[True, False, True, True])
    art = rxe.build(rxe.from_onnx(model, dim_bounds={"n": 8}), board="host", backend=backend, out_dir=tmp_path,
                    name="m", quiet=True, profile=False)
    assert art.workspace_bytes is not None
    with rxe.connect("host") as dev:
        loaded = dev.load(art)
        for n in (1, 3, 8):
            x = _rng("ccomp", n).standard_normal((n, 5)).astype(np.float32)
            _check_all(loaded.run(x), _ort(model, {"x": x}))


# ---------------------------------------------------------------- bad input

def _topk_bad(**kw):
    return _topk_model(**{"k": 2, "name": "bad", **kw})


@pytest.mark.parametrize("model,message", [
    (_topk_bad(k=8), r"bad \(TopK\).*K=8 is outside \[0, 7\]"),
    (_topk_bad(k=-1), r"bad \(TopK\).*K=-1 is outside"),
    (_topk_bad(axis=2), r"bad \(TopK\).*axis 2 is out of range for rank 2"),
    (_topk_bad(largest=2), r"bad \(TopK\).*largest must be 0 or 1"),
    (_topk_bad(k=2, dtype="bool"), r"bad \(TopK\).*top-k of bool is not supported"),
    (_model([helper.make_node("TopK", ["x", "k"], ["v", "i"], name="bad")], [("x", "float32", [3, 4])], ["v", "i"],
            11, [helper.make_tensor("k", TensorProto.INT64, [2], [1, 2])]), r"bad \(TopK\).*K must hold one value"),
    (_model([helper.make_node("TopK", ["x", "k"], ["v", "i"], name="bad")],
            [("x", "float32", [3, 4]), ("k", "int64", [1])], ["v", "i"], 11),
     r"bad \(TopK\).*input 1 \(K, 'k'\) must be known at compile time"),
    (_nms_model(center=2, name="bad"), r"bad \(NonMaxSuppression\).*center_point_box must be 0 or 1"),
    (_nms_model(boxes=("b", "n", 5), name="bad"), r"bad \(NonMaxSuppression\).*4 coordinates"),
    (_nms_model(scores=("b", 2, 7), boxes=("b", 6, 4), name="bad"), r"bad \(NonMaxSuppression\).*box count"),
    (_model([helper.make_node("Unique", ["x"], ["y"], name="bad", sorted=3)], [("x", "float32", [4])], ["y"], 11),
     r"bad \(Unique\).*sorted must be 0 or 1"),
    (_model([helper.make_node("Unique", ["x"], ["y"], name="bad", axis=1)], [("x", "float32", [4])], ["y"], 11),
     r"bad \(Unique\).*axis 1 is out of range for rank 1"),
    (_model([helper.make_node("Compress", ["x", "c"], ["y"], name="bad")],
            [("x", "float32", [4]), ("c", "int64", [4])], ["y"], 11),
     r"bad \(Compress\).*condition must be a 1-D bool tensor"),
])
def test_bad_input_is_refused(model, message):
    with pytest.raises(rxe.RelaxEdgeError, match=message):
        rxe.from_onnx(model)


def test_topk_k_beyond_a_symbolic_axis_is_a_run_time_error(tmp_path):
    """K=2 over the symbolic axis n: n = 1 is refused (interpreted and compiled), never read out of bounds."""
    model = _topk_model(2, axis=0, shape=("n", 3), name="bad")
    x = np.ones((1, 3), np.float32)
    with pytest.raises(rxe.RelaxEdgeError, match=r"k=2 is outside \[0, 1\]"):
        rxe.interpret(rxe.from_onnx(model), x)
    with compiled(model, "c", tmp_path) as loaded:
        with pytest.raises(rxe.RelaxEdgeError, match=r"k=2 is outside \[0, 1\]"):
            loaded.run(x)
        _check_all(loaded.run(np.arange(6, dtype=np.float32).reshape(2, 3)),
                   _ort(model, {"x": np.arange(6, dtype=np.float32).reshape(2, 3)}))
