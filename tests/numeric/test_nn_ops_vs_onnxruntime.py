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
           (lambda a: lambda x: op.log_softmax(x, axis=a))(a))  # noqa: B023 (bound by the outer lambda)
      for a in (0, 1, -1)],
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
    (lambda n: op.resize(T(1, n), sizes=(1, n), mode="area"), r"mode 'area' is not supported"),
    (lambda n: op.resize(T(1, n, dtype="int32"), sizes=(1, n), mode="linear"), r"must be floating point"),
    (lambda n: op.resize(T(1, n), sizes=(1, n), coordinate_transformation_mode="tf_crop_and_resize"),
     r"tf_crop_and_resize needs a roi"),
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


# ------------------------------------- resize: cubic, antialias, tf_crop_and_resize

def _resize_more(name, shape, mode, ctm="half_pixel", sizes=None, scales=None, roi=None, **kw):
    """A Resize case over batch axis 0 ("n") with the newer attributes: kw holds
    cubic_coeff_a, exclude_outside, antialias or extrapolation_value."""
    attrs = {"mode": mode, "coordinate_transformation_mode": ctm, **kw}
    roi_input = NO_ROI if roi is None else np.array(roi, np.float32)

    def build(x):
        out = None if sizes is None else _dims(sizes, x.type.shape[0])
        return op.resize(x, sizes=out, scales=scales, roi=roi, **attrs)

    def constants(n):
        if sizes is None:
            return [roi_input, np.array(scales, np.float32)]
        return [roi_input, np.zeros(0, np.float32), np.array(_dims(sizes, n), np.int64)]
    return Case(name, [shape], "Resize", attrs, build, constants, opset=19)


def _keep_aspect(name, shape, policy, sizes, scale):
    """ONNX keep_aspect_ratio_policy over axes 2, 3 against our sizes and scales."""
    out = ("n", shape[1], *(int(scale * d + 0.5) for d in shape[2:]))
    attrs = {"axes": [2, 3], "keep_aspect_ratio_policy": policy}
    return Case(name, [shape], "Resize", attrs,
                lambda x: op.resize(x, sizes=_dims(out, x.type.shape[0]), scales=(1.0, 1.0, scale, scale)),
                [NO_ROI, np.zeros(0, np.float32), np.array(sizes, np.int64)], opset=19)


CROP = (0, 0, 0.2, 0.3, 1, 1, 0.9, 0.7)        # starts, then ends; axes 0 and 1 uncropped
CROP_PAST_EDGES = (0, 0, -0.3, 0.4, 1, 1, 1.2, 1.6)

RESIZE_MORE_CASES = [
    *[_resize_more(f"cubic_{c}_{kind}", shape, "cubic", c, sizes=sizes, scales=scales)
      for c in COORD_MODES
      for kind, shape, sizes, scales in [
          ("up", ("n", 2, 4, 5), ("n", 2, 7, 9), None),
          ("down", ("n", 2, 7, 9), ("n", 2, 3, 4), None),
          ("scales", ("n", 2, 5, 6), None, (1.0, 1.0, 1.7, 0.55))]],
    _resize_more("cubic_pytorch_to_one", ("n", 2, 5, 4), "cubic", "pytorch_half_pixel", sizes=("n", 2, 1, 7)),
    _resize_more("cubic_2d", ("n", 6), "cubic", sizes=("n", 11)),
    _resize_more("cubic_a_exclude_outside_up", ("n", 2, 4, 4), "cubic", scales=(1.0, 1.0, 2.0, 2.0),
                 cubic_coeff_a=-0.5, exclude_outside=1),
    _resize_more("cubic_a_exclude_outside_down", ("n", 2, 7, 9), "cubic", "asymmetric", sizes=("n", 2, 3, 5),
                 cubic_coeff_a=-0.5, exclude_outside=1),
    *[_resize_more(f"{m}_antialias_{kind}", shape, m, c, sizes=sizes, scales=scales, antialias=1, **kw)
      for m in ("linear", "cubic")
      for kind, shape, c, sizes, scales, kw in [
          ("down", ("n", 2, 9, 7), "half_pixel", ("n", 2, 3, 2), None, {}),
          ("scales", ("n", 2, 9, 7), "half_pixel", None, (1.0, 1.0, 0.6, 0.35), {}),
          ("strong", ("n", 1, 13, 16), "half_pixel", None, (1.0, 1.0, 0.25, 0.1), {}),
          ("mixed", ("n", 2, 4, 9), "half_pixel", ("n", 2, 7, 4), None, {}),
          ("align_corners", ("n", 2, 9, 7), "align_corners", ("n", 2, 4, 3), None, {}),
          ("symmetric", ("n", 2, 9, 7), "half_pixel_symmetric", None, (1.0, 1.0, 0.7, 0.45), {}),
          ("exclude_outside", ("n", 2, 9, 7), "half_pixel", ("n", 2, 4, 3), None, {"exclude_outside": 1}),
          ("nhwc", ("n", 9, 7, 3), "asymmetric", ("n", 3, 4, 3), None, {})]],
    *[_resize_more(f"crop_{m}_{kind}", ("n", 2, 5, 6), m, "tf_crop_and_resize", sizes=sizes, scales=scales,
                   roi=roi, **kw)
      for m in ("nearest", "linear", "cubic")
      for kind, sizes, scales, roi, kw in [
          ("inside", ("n", 2, 4, 7), None, CROP, {}),
          ("past_edges", ("n", 2, 4, 7), None, CROP_PAST_EDGES, {"extrapolation_value": 2.5}),
          ("to_one", ("n", 2, 1, 3), None, CROP, {}),
          ("scales", None, (1.0, 1.0, 0.6, 1.5), CROP_PAST_EDGES, {"extrapolation_value": -1.0})]],
    _resize_more("crop_nearest_ceil", ("n", 2, 5, 6), "nearest", "tf_crop_and_resize", sizes=("n", 2, 7, 4),
                 roi=CROP_PAST_EDGES, nearest_mode="ceil"),
    _resize_more("crop_linear_antialias", ("n", 2, 9, 8), "linear", "tf_crop_and_resize",
                 sizes=("n", 2, 2, 3), roi=CROP, antialias=1),
    _resize_more("crop_cubic_exclude_outside", ("n", 2, 5, 6), "cubic", "tf_crop_and_resize",
                 sizes=("n", 2, 4, 7), roi=CROP_PAST_EDGES, exclude_outside=1, cubic_coeff_a=-0.5),
    _keep_aspect("keep_aspect_not_smaller_rounds_up", ("n", 2, 2, 4), "not_smaller", [1, 3], 0.75),
    _keep_aspect("keep_aspect_not_larger", ("n", 2, 6, 4), "not_larger", [3, 3], 0.5),
]


@pytest.mark.parametrize("n", [1, 3], ids=lambda n: f"n{n}")
@pytest.mark.parametrize("case", RESIZE_MORE_CASES, ids=[c.name for c in RESIZE_MORE_CASES])
def test_resize_modes_match_onnxruntime(case, n):
    test_op_matches_onnxruntime(case, n)


def test_resize_types_of_cubic_antialias_and_crop():
    n = SizeVar("n")
    crop = (0, 0, 0.25, 1, 1, 0.75)
    assert op.resize(T(n, 3, 8), scales=(1.0, 1.0, 0.5), mode="cubic", antialias=1).type == \
        TensorType((n, 3, 4))
    # tf_crop_and_resize sizes from scales ignore the roi, as ONNX Runtime does
    assert op.resize(T(n, 3, 8), scales=(1.0, 2.0, 0.5), coordinate_transformation_mode="tf_crop_and_resize",
                     roi=crop).type == TensorType((n, 6, 4))
    # keep_aspect_ratio_policy rounds half up: floor(0.75 * 2 + 1/2) = 2
    assert op.resize(T(n, 3, 2, 4), sizes=(n, 3, 2, 3), scales=(1.0, 1.0, 0.75, 0.75)).type == \
        TensorType((n, 3, 2, 3))
    assert op.resize(T(1, n), sizes=(1, (6 * n + 4) // 8), scales=(1.0, 0.75)).type == \
        TensorType((1, (6 * n + 4) // 8))


@pytest.mark.parametrize("build,message", [
    (lambda n: op.resize(T(n, 4), sizes=(n, 2), mode="nearest", antialias=1),
     r"antialias applies to modes linear and cubic only"),
    (lambda n: op.resize(T(n, 4, dtype="int32"), sizes=(n, 2), mode="cubic"), r"must be floating point"),
    (lambda n: op.resize(T(n, 4), sizes=(n, 2), coordinate_transformation_mode="tf_crop_and_resize",
                         roi=(0, 0.5, 1)), r"roi \(0.0, 0.5, 1.0\) must have 2 \* 2 entries"),
    (lambda n: op.resize(T(n, 4), sizes=(n, 2), mode="cubic", exclude_outside=2), r"exclude_outside 2"),
    (lambda n: op.resize(T(n, 3, 2, 4), sizes=(n, 3, 3, 3), scales=(1.0, 1.0, 0.75, 0.75)),
     r"sizes\[2\] differs from floor\(scales\[2\] \* input dim\): 3 vs 1"),
])
def test_resize_bad_new_attributes_are_rejected(build, message):
    with pytest.raises(TypeInferenceError, match=message):
        build(SizeVar("n"))
