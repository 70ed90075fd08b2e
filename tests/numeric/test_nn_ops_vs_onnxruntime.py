"""Normalization, transposed convolution, resize and reductions, built over a
symbolic batch dim `n` and interpreted at several sizes, against ONNX Runtime
running the equivalent ONNX node; then their type rules over symbolic dims."""

import zlib
from dataclasses import dataclass
from typing import Callable

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

from relax_edge import op
from relax_edge.errors import TypeInferenceError
from relax_edge.ir import SizeVar, TensorType, Var, evaluate
from tests.numeric.onnx_reference import run_node
from tests.numeric.test_ops_vs_onnxruntime import random_inputs, run_ours

BATCH = [1, 2, 5]
NO_ROI = np.zeros(0, np.float32)


@dataclass
class Case:
    name: str
    templates: list           # input shapes; "n" is the symbolic batch dim
    onnx_op: str
    attrs: dict
    build: Callable            # our builder, called on the input Vars
    constants: object = ()     # ONNX initializer inputs, or a function of n giving them
    opset: int = 17
    dtypes: tuple = None
    prepare: Callable = None   # fixes random inputs in place (e.g. a positive variance)


def _positive_var(arrays):
    arrays[4] = np.abs(arrays[4]) + 0.1


def _batch_norm(name, shape, eps=1e-5):
    c = shape[1]
    return Case(name, [shape, (c,), (c,), (c,), (c,)], "BatchNormalization", {"epsilon": eps},
                lambda *a: op.batch_norm(*a, epsilon=eps), prepare=_positive_var)


def _conv_t(name, x, w, **kw):
    onnx_names = {"strides": "strides", "padding": "pads", "output_padding": "output_padding",
                  "dilation": "dilations", "groups": "group"}
    attrs = {onnx_names[k]: list(v) if isinstance(v, tuple) else v for k, v in kw.items()}
    return Case(name, [x, w], "ConvTranspose", attrs, lambda a, b: op.conv2d_transpose(a, b, **kw))


def _dims(template, n_var):
    return tuple(n_var if d == "n" else d(n_var) if callable(d) else d for d in template)


def _resize(name, shape, mode, ctm="half_pixel", nearest="round_prefer_floor", sizes=None, scales=None):
    """A Resize case given output `sizes` (entries may be "n" or a function of n) or `scales`."""
    attrs = {"mode": mode, "coordinate_transformation_mode": ctm}
    if mode == "nearest":
        attrs["nearest_mode"] = nearest
    kw = {"mode": mode, "coordinate_transformation_mode": ctm, "nearest_mode": nearest}
    if sizes is not None:
        def build(x):
            return op.resize(x, sizes=_dims(sizes, x.type.shape[shape.index("n")]), **kw)

        def constants(n):
            return [NO_ROI, np.zeros(0, np.float32), np.array(_dims(sizes, n), np.int64)]
    else:
        def build(x):
            return op.resize(x, scales=scales, **kw)
        constants = [NO_ROI, np.array(scales, np.float32)]
    opset = 19 if ctm == "half_pixel_symmetric" else 18
    return Case(name, [shape], "Resize", attrs, build, constants, opset)


def _reduce(name, onnx_op, shape, axes, keepdims, dtype="float32", noop=False):
    ours = op.reduce_max if onnx_op == "ReduceMax" else op.reduce_min
    attrs = {"keepdims": int(keepdims), **({"noop_with_empty_axes": 1} if noop else {})}
    constants = [] if axes is None else [np.array(axes, np.int64)]
    axis = None if axes is None else tuple(axes)
    return Case(name, [shape], onnx_op, attrs, lambda x: ours(x, axis=axis, keepdims=keepdims),
                constants, opset=18, dtypes=(dtype,))


def _argmax(name, shape, axis, keepdims, last, dtype="int32"):
    attrs = {"axis": axis, "keepdims": int(keepdims), "select_last_index": int(last)}
    return Case(name, [shape], "ArgMax", attrs,
                lambda x: op.argmax(x, axis=axis, keepdims=keepdims, select_last_index=last),
                dtypes=(dtype,))


NEAREST_MODES = ["round_prefer_floor", "round_prefer_ceil", "floor", "ceil"]
COORD_MODES = ["half_pixel", "align_corners", "asymmetric", "pytorch_half_pixel", "half_pixel_symmetric"]

CASES = [
    _batch_norm("bn_rank2", ("n", 4)),
    _batch_norm("bn_rank3", ("n", 3, 7), eps=1e-3),
    _batch_norm("bn_rank4", ("n", 3, 5, 4)),
    Case("ln_last_bias", [("n", 3, 8), (8,), (8,)], "LayerNormalization", {"axis": -1}, op.layer_norm),
    Case("ln_last_no_bias", [("n", 8), (8,)], "LayerNormalization", {"axis": -1}, op.layer_norm),
    Case("ln_axis1_bias", [("n", 3, 4), (3, 4), (3, 4)], "LayerNormalization", {"axis": 1, "epsilon": 1e-3},
         lambda x, s, b: op.layer_norm(x, s, b, axis=1, epsilon=1e-3)),
    Case("ln_axis1_no_bias", [("n", 2, 3, 4), (2, 3, 4)], "LayerNormalization", {"axis": 1},
         lambda x, s: op.layer_norm(x, s, axis=1)),
    Case("ln_axis1_broadcast_params", [("n", 3, 8), (8,), (1, 8)], "LayerNormalization", {"axis": 1},
         lambda x, s, b: op.layer_norm(x, s, b, axis=1)),
    *[Case(f"log_softmax_axis{a}", [("n", 4, 5)], "LogSoftmax", {"axis": a},
           (lambda a: lambda x: op.log_softmax(x, axis=a))(a)) for a in (0, 1, -1)],
    _conv_t("convt_plain", ("n", 2, 4, 5), (2, 3, 3, 3)),
    _conv_t("convt_stride_pad", ("n", 3, 5, 4), (3, 2, 3, 3), strides=(2, 2), padding=(1, 0, 1, 2)),
    _conv_t("convt_output_padding", ("n", 2, 4, 4), (2, 3, 3, 3), strides=(2, 3), output_padding=(1, 2)),
    _conv_t("convt_dilated", ("n", 2, 5, 5), (2, 2, 2, 3), dilation=(2, 3), padding=(1, 1, 0, 0)),
    _conv_t("convt_grouped", ("n", 4, 3, 5), (4, 3, 3, 2), strides=(2, 1), groups=2),
    _conv_t("convt_depthwise", ("n", 3, 4, 4), (3, 1, 3, 3), strides=(2, 2), padding=(1, 1, 1, 1),
            output_padding=(1, 1), groups=3),
    *[_resize(f"nearest_{m}_{kind}", shape, "nearest", nearest=m, sizes=sizes, scales=scales)
      for m in NEAREST_MODES
      for kind, shape, sizes, scales in [
          ("up", ("n", 2, 4, 5), ("n", 2, 7, 11), None),
          ("down_ties", ("n", 2, 8, 6), ("n", 2, 4, 3), None),
          ("scales", ("n", 2, 4, 5), None, (1.0, 1.0, 1.5, 0.6))]],
    _resize("nearest_asymmetric_float32_tie", ("n", 3, 6), "nearest", "asymmetric", "round_prefer_ceil",
            sizes=("n", 2, 4)),
    _resize("nearest_asymmetric_floor_2x", ("n", 2, 3, 4), "nearest", "asymmetric", "floor",
            scales=(1.0, 1.0, 2.0, 2.0)),
    _resize("nearest_align_corners", ("n", 2, 5, 4), "nearest", "align_corners", sizes=("n", 2, 9, 3)),
    _resize("nearest_pytorch_to_one", ("n", 2, 5, 4), "nearest", "pytorch_half_pixel", sizes=("n", 2, 1, 7)),
    _resize("nearest_symmetric_scales", ("n", 2, 5, 4), "nearest", "half_pixel_symmetric",
            scales=(1.0, 1.0, 1.7, 0.8)),
    _resize("nearest_int", ("n", 3, 4), "nearest", sizes=("n", 5, 9)),
    *[_resize(f"linear_{c}_{kind}", shape, "linear", c, sizes=sizes, scales=scales)
      for c in COORD_MODES
      for kind, shape, sizes, scales in [
          ("up", ("n", 3, 4, 5), ("n", 3, 7, 9), None),
          ("down", ("n", 3, 9, 7), ("n", 3, 4, 3), None),
          ("scales", ("n", 3, 5, 6), None, (1.0, 1.0, 1.7, 0.55)),
          ("to_one", ("n", 2, 4, 3), ("n", 2, 1, 5), None)]],
    _resize("linear_2d", ("n", 6), "linear", sizes=("n", 9)),
    _resize("linear_3d", ("n", 4, 5), "linear", "align_corners", sizes=("n", 7, 3)),
    _resize("linear_nhwc", ("n", 5, 4, 3), "linear", "asymmetric", sizes=("n", 8, 6, 3)),
    _resize("linear_symbolic_axis", (1, 2, "n", 3), "linear", sizes=(1, 2, lambda n: 2 * n + 1, 5)),
    _resize("linear_symbolic_scales", (1, 2, "n", 3), "linear", "pytorch_half_pixel",
            scales=(1.0, 1.0, 2.0, 1.5)),
    _reduce("max_axis1", "ReduceMax", ("n", 3, 4), [1], False),
    _reduce("max_axes02_keep", "ReduceMax", ("n", 3, 4), [0, 2], True),
    _reduce("max_all", "ReduceMax", ("n", 3, 4), None, False),
    _reduce("max_empty_axes_noop", "ReduceMax", ("n", 3), [], True, noop=True),
    _reduce("max_empty_set", "ReduceMax", ("n", 0, 3), [1], False),
    _reduce("min_last_keep", "ReduceMin", ("n", 3, 4), [-1], True),
    _reduce("min_all_keep", "ReduceMin", ("n", 3, 4), None, True),
    _reduce("min_int_axis0", "ReduceMin", ("n", 5), [0], False, dtype="int32"),
    _reduce("min_empty_set_int", "ReduceMin", (0, "n"), [0], True, dtype="int32"),
    _argmax("argmax_axis0_keep", ("n", 5), 0, True, False),
    _argmax("argmax_axis1_first", ("n", 7), 1, False, False),
    _argmax("argmax_axis1_last", ("n", 6, 3), 1, False, True),
    _argmax("argmax_last_axis_keep_last", ("n", 4, 5), -1, True, True),
    _argmax("argmax_float", ("n", 4, 5), 2, False, False, dtype="float32"),
]


def run_typed_node(op_type, inputs, attrs, opset):
    """run_node for nodes whose output dtype differs from the input's (ArgMax)."""
    names = [f"in{i}" for i in range(len(inputs))]
    types = {np.dtype("float32"): TensorProto.FLOAT, np.dtype("int32"): TensorProto.INT32}
    graph = helper.make_graph(
        [helper.make_node(op_type, names, ["out"], **attrs)], "single",
        [helper.make_tensor_value_info(nm, types[x.dtype], x.shape) for nm, x in zip(names, inputs)],
        [helper.make_empty_tensor_value_info("out")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, dict(zip(names, inputs)))[0]


@pytest.mark.parametrize("n", BATCH, ids=lambda n: f"n{n}")
@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_op_matches_onnxruntime(case, n):
    dtypes = list(case.dtypes or ["float32"] * len(case.templates))
    arrays = random_inputs(case.templates, dtypes, {"n": n}, seed=zlib.crc32(case.name.encode()))
    if case.prepare:
        case.prepare(arrays)
    constants = case.constants(n) if callable(case.constants) else list(case.constants)
    if case.onnx_op == "ArgMax":
        expected = run_typed_node("ArgMax", arrays, case.attrs, case.opset)
    else:
        expected = run_node(case.onnx_op, arrays, case.attrs, constants, opset=case.opset)
    ours = run_ours(case.templates, dtypes, case.build, arrays)
    assert ours.shape == expected.shape and ours.dtype == expected.dtype
    if ours.dtype.kind == "f":
        np.testing.assert_allclose(ours, expected, rtol=1e-5, atol=2e-6)
    else:
        np.testing.assert_array_equal(ours, expected)


# ------------------------------------------------------------- type rules

def T(*shape, dtype="float32"):
    return Var("t", TensorType(shape, dtype))


@pytest.mark.parametrize("k,s,p,d,op_", [(3, 2, (1, 2), 1, 1), (4, 3, (0, 0), 2, 2), (1, 1, (0, 0), 1, 0)])
def test_conv_transpose_output_height_is_symbolic_and_real(k, s, p, d, op_):
    h = SizeVar("h")
    call = op.conv2d_transpose(T(1, 2, h, 4), T(2, 3, k, 1), strides=(s, 1), padding=(p[0], 0, p[1], 0),
                               dilation=(d, 1), output_padding=(op_, 0))
    out_h = call.type.shape[2]
    assert not out_h.is_const
    for hv in (1, 2, 7):
        x = np.ones((1, 2, hv, 4), np.float32)
        w = np.ones((2, 3, k, 1), np.float32)
        real = run_node("ConvTranspose", [x, w], {"strides": [s, 1], "pads": [p[0], 0, p[1], 0],
                                                  "dilations": [d, 1], "output_padding": [op_, 0]})
        assert evaluate(out_h, {h: hv}) == real.shape[2]


def test_resize_output_dims_from_scales_are_symbolic_and_real():
    h = SizeVar("h")
    call = op.resize(T(1, 1, h, h), scales=(1.0, 1.0, 1.5, 0.5))
    assert str(call.type.shape[2]) == "h + h // 2" and str(call.type.shape[3]) == "h // 2"
    for hv in (2, 3, 9):
        real = run_node("Resize", [np.ones((1, 1, hv, hv), np.float32)], {"mode": "nearest"},
                        [NO_ROI, np.array([1, 1, 1.5, 0.5], np.float32)], opset=18)
        assert tuple(evaluate(d, {h: hv}) for d in call.type.shape) == real.shape


def test_symbolic_shapes_of_new_ops():
    n, m = SizeVar("n"), SizeVar("m")
    assert op.batch_norm(T(n, 3, m), T(3), T(3), T(3), T(3)).type == TensorType((n, 3, m))
    assert op.layer_norm(T(n, m, 8), T(m, 8), axis=1).type == TensorType((n, m, 8))
    assert op.log_softmax(T(n, m), axis=0).type == TensorType((n, m))
    assert op.resize(T(n, 3, m), sizes=(n, 3, 2 * m + 1)).type == TensorType((n, 3, 2 * m + 1))
    assert op.reduce_max(T(n, 3, m), axis=(0, 2), keepdims=True).type == TensorType((1, 3, 1))
    assert op.reduce_min(T(n, 3, m)).type == TensorType(())
    assert op.argmax(T(n, m), axis=1).type == TensorType((n, 1), "int64")
    assert op.argmax(T(n, m), axis=0, keepdims=False).type == TensorType((m,), "int64")
    assert op.conv2d_transpose(T(n, 4, m, m), T(4, 3, 3, 3), groups=2).type == \
        TensorType((n, 6, m + 2, m + 2))


@pytest.mark.parametrize("build,message", [
    (lambda n: op.batch_norm(T(n, 3, 5), T(4), T(4), T(4), T(4)),
     r"batch_norm: scale length differs from the channels of the input: 4 vs 3"),
    (lambda n: op.layer_norm(T(n, 6), T(5)), r"layer_norm: scale \(5,\) does not broadcast"),
    (lambda n: op.layer_norm(T(n, 6), T(6), T(n + 6)), r"layer_norm: bias \(n \+ 6,\) does not broadcast"),
    (lambda n: op.conv2d_transpose(T(n, 3, 4, 4), T(2, 3, 3, 3)), r"conv2d_transpose: input channels differ"),
    (lambda n: op.conv2d_transpose(T(n, 2, 4, 4), T(2, 3, 3, 3), strides=(2, 2), output_padding=(2, 0)),
     r"output_padding \(2, 0\) must be non-negative and below"),
    (lambda n: op.conv2d_transpose(T(n, 2, 1, 4), T(2, 3, 1, 3), padding=(1, 0, 1, 0)),
     r"output height -1 is not positive"),
    (lambda n: op.resize(T(n, 4), sizes=(n, 7), scales=(1.0, 2.0)),
     r"resize: sizes\[1\] differs from floor\(scales\[1\] \* input dim\): 7 vs 8"),
    (lambda n: op.resize(T(1, n), sizes=(1, 2 * n), scales=(1.0, 3.0)),
     r"sizes\[1\] differs.*n \* 2 vs n \* 3"),
    (lambda n: op.resize(T(1, n), scales=(1.0, 0.3)), r"floor\(n \* 0.3\) has no exact symbolic form"),
    (lambda n: op.resize(T(1, n), sizes=(1, n), mode="cubic"), r"mode 'cubic' is not supported"),
    (lambda n: op.resize(T(1, n, dtype="int32"), sizes=(1, n), mode="linear"), r"must be floating point"),
    (lambda n: op.resize(T(1, n), sizes=(1, n), coordinate_transformation_mode="tf_crop_and_resize"),
     r"tf_crop_and_resize' is not supported"),
    (lambda n: op.argmax(T(n, 4), axis=2), r"argmax: axis 2 out of range for rank 2"),
    (lambda n: op.argmax(T(n, 0), axis=1), r"argmax over axis 1 of length 0"),
    (lambda n: op.reduce_max(T(n, 4), axis=(1, -1)), r"max: axis \(1, -1\) repeats an axis"),
])
def test_provable_mismatch_is_rejected_with_shapes(build, message):
    with pytest.raises(TypeInferenceError, match=message):
        build(SizeVar("n"))


def test_unknown_relation_is_left_to_run_time():
    n, c = SizeVar("n"), SizeVar("c")
    assert op.batch_norm(T(n, c), T(3), T(3), T(3), T(3)).type == TensorType((n, c))
    assert op.conv2d_transpose(T(n, c, 4, 4), T(3, 2, 3, 3)).type == TensorType((n, 2, 6, 6))
