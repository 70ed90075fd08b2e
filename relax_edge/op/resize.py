"""Resize of an N-D tensor with ONNX Resize semantics: modes nearest,
(multi)linear and (multi)cubic over every axis whose size changes, six
coordinate transformation modes (tf_crop_and_resize with its roi and
extrapolation_value included), four nearest rounding modes, cubic_coeff_a,
exclude_outside and antialias; output sizes given directly (symbolic
allowed) or derived from scales.

Source coordinates are computed in float32 exactly as ONNX Runtime computes
them (so rounding ties fall the same way); the scale of an axis is
`scales[i]` when scales are given, else `float32(out) / float32(in)`, and an
axis with scale 1 maps each index to itself, except that tf_crop_and_resize
still applies its roi there (as the ONNX reference does; ONNX Runtime
ignores the roi of such an axis). Like ONNX Runtime and unlike the ONNX reference
implementation, align_corners and tf_crop_and_resize divide by the integer
output length `out - 1` also when scales are given (the spec's
`length_resized`). Linear and cubic resizing weigh the input samples within
the kernel's reach of the source coordinate, in float64: the kernel is
stretched by 1 / scale when antialiasing a downscale, samples past the edge
repeat the edge sample (or, with exclude_outside=1, drop out), and the
weights are normalized to sum 1. tf_crop_and_resize writes
extrapolation_value wherever a source coordinate leaves [0, in - 1]; its
output sizes from scales are floor(scale * dim), ignoring the roi as ONNX
Runtime does.

`roi` is the ONNX roi over every axis: (start_0, ..., start_r-1, end_0, ...,
end_r-1). When both sizes and scales are given, sizes[i] must be
floor(scales[i] * dim), or floor(scales[i] * dim + 1/2), the rounding of
ONNX keep_aspect_ratio_policy.

Not supported: linear and cubic on integer tensors, antialias with nearest
(the ONNX reference rejects it too). Sizes derived from scales are symbolic only
where floor(scale * dim) is exact: a float32 scale p / 2**k with p <= 4096.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from ..ir.shape import Proof, as_expr, prove_equal, prove_lt
from ..ir.types import TensorType, shape_str
from .registry import Op, RuleError, make_call, register
from .rules import check_equal, float_dtype, tensor

__all__ = ["resize"]

MODES = ("nearest", "linear", "cubic")
COORDINATE_MODES = ("half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners",
                    "asymmetric", "tf_crop_and_resize")
NEAREST_MODES = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil")
_F32 = np.float32


def size_from_scale(dim, scale, round_half_up=False):
    """floor(scale * dim) as ONNX Runtime computes it (float32), or with
    round_half_up floor(scale * dim + 1/2), as an expression; None when it
    has no exact symbolic form."""
    dim, s, half = as_expr(dim), _F32(scale), 0.5 if round_half_up else 0.0
    if dim.is_const:
        return as_expr(int(np.floor(float(s * _F32(dim.value)) + half)))
    ratio = Fraction(float(s))
    if ratio.numerator > 4096:
        return None
    p, q = ratio.numerator, ratio.denominator
    return (dim * (2 * p) + q) // (2 * q) if round_half_up else (dim * p) // q


def _choice(attrs, key, allowed):
    if attrs[key] not in allowed:
        raise RuleError(f"{key} {attrs[key]!r} is not supported (choose from {', '.join(map(str, allowed))})")


def _check_attrs(attrs, rank):
    _choice(attrs, "mode", MODES)
    _choice(attrs, "coordinate_transformation_mode", COORDINATE_MODES)
    _choice(attrs, "nearest_mode", NEAREST_MODES)
    _choice(attrs, "exclude_outside", (0, 1))
    _choice(attrs, "antialias", (0, 1))
    if attrs["antialias"] and attrs["mode"] == "nearest":
        raise RuleError("antialias applies to modes linear and cubic only")
    roi = attrs["roi"]
    if roi is not None and len(roi) != 2 * rank:
        raise RuleError(f"roi {tuple(roi)} must have 2 * {rank} entries (starts, then ends)")
    if roi is None and attrs["coordinate_transformation_mode"] == "tf_crop_and_resize":
        raise RuleError("coordinate_transformation_mode tf_crop_and_resize needs a roi")


def _check_size(i, out, dim, scale):
    """sizes[i] against floor(scale * dim); the keep_aspect_ratio rounding passes too."""
    want = size_from_scale(dim, scale)
    if want is None or prove_equal(out, want) is Proof.YES:
        return
    rounded = size_from_scale(dim, scale, round_half_up=True)
    if rounded is None or prove_equal(out, rounded) is not Proof.YES:
        check_equal(out, want, f"sizes[{i}] differs from floor(scales[{i}] * input dim)")


def _resize_rule(types, attrs):
    x = tensor(types[0], 0)
    rank = len(x.shape)
    _check_attrs(attrs, rank)
    if attrs["mode"] != "nearest":
        float_dtype(x)
    if rank == 0:
        raise RuleError("cannot resize a scalar")
    sizes, scales = attrs["sizes"], attrs["scales"]
    if scales is not None:
        scales = tuple(float(s) for s in scales)
        if len(scales) != rank or min(scales) <= 0:
            raise RuleError(f"scales {scales} must be {rank} positive numbers, one per axis")
    if sizes is None:
        if scales is None:
            raise RuleError("give sizes or scales")
        derived = [size_from_scale(d, s) for d, s in zip(x.shape, scales)]
        for d, s, out in zip(x.shape, scales, derived):
            if out is None:
                raise RuleError(f"floor({d} * {s}) has no exact symbolic form; give sizes")
        return TensorType(derived, x.dtype)
    sizes = tuple(as_expr(d) for d in sizes)
    if len(sizes) != rank:
        raise RuleError(f"sizes {shape_str(sizes)} must have one entry per axis of the rank-{rank} input")
    for i, out in enumerate(sizes):
        if prove_lt(out, 0) is Proof.YES:
            raise RuleError(f"sizes {shape_str(sizes)} has a negative entry at axis {i}")
        if scales is not None:
            _check_size(i, out, x.shape[i], scales[i])
    return TensorType(sizes, x.dtype)


# ------------------------------------------------------------ numpy reference

def _source_coords(mode, out_len, in_len, scale, roi):
    """The float32 source coordinate of each output index along one axis;
    roi is this axis's (start, end) for tf_crop_and_resize."""
    y = np.arange(out_len, dtype=_F32)
    half = _F32(0.5)
    if mode == "tf_crop_and_resize":
        start, end = _F32(roi[0]), _F32(roi[1])
        if out_len == 1:
            return np.full(1, 0.5 * np.float64(start + end) * (in_len - 1), _F32)
        return start * _F32(in_len - 1) + y * (end - start) * _F32(in_len - 1) / _F32(out_len - 1)
    if scale == 1:
        return y
    if mode == "asymmetric":
        return y / scale
    if mode == "half_pixel":
        return (y + half) / scale - half
    if mode == "pytorch_half_pixel":
        return (y + half) / scale - half if out_len > 1 else np.zeros(out_len, _F32)
    if mode == "align_corners":
        return y * _F32(in_len - 1) / _F32(out_len - 1) if out_len > 1 else np.zeros(out_len, _F32)
    # half_pixel_symmetric: ONNX Runtime mixes float32 and float64 here
    adjustment = _F32(out_len) / (scale * _F32(in_len))
    offset = _F32(in_len) / _F32(2) * (_F32(1) - adjustment)
    return (np.float64(offset) + (y.astype(np.float64) + 0.5) / np.float64(scale) - 0.5).astype(_F32)


def _nearest_index(coords, nearest_mode, in_len):
    c = coords.astype(np.float64)   # exact; the rounding below sees no float32 error
    rounded = {"round_prefer_floor": np.ceil(c - 0.5), "round_prefer_ceil": np.floor(c + 0.5),
               "floor": np.floor(c), "ceil": np.ceil(c)}[nearest_mode]
    return np.clip(rounded, 0, in_len - 1).astype(np.intp)


def _linear_kernel(d, a):
    return np.maximum(0.0, 1.0 - np.abs(d))


def _cubic_kernel(d, a):
    """Keys' cubic convolution kernel with coefficient a."""
    d = np.abs(d)
    near = ((a + 2) * d - (a + 3)) * d * d + 1
    far = ((a * d - 5 * a) * d + 8 * a) * d - 4 * a
    return np.where(d <= 1, near, np.where(d < 2, far, 0.0))


KERNELS = {"linear": (_linear_kernel, 1), "cubic": (_cubic_kernel, 2)}   # kernel, reach


def _filter_along(data, axis, coords, in_len, mode, stretch, cubic_coeff_a, exclude_outside):
    """Weigh the samples within the kernel's reach (times `stretch`) of each coordinate."""
    kernel, reach = KERNELS[mode]
    half_width = int(np.ceil(reach * stretch))
    x = coords.astype(np.float64)[:, None]
    taps = np.floor(x).astype(np.intp) + np.arange(1 - half_width, half_width + 1)
    weights = kernel((taps - x) / stretch, cubic_coeff_a)
    if exclude_outside:
        weights = np.where((taps < 0) | (taps >= in_len), 0.0, weights)
    total = weights.sum(axis=1, keepdims=True)
    weights = weights / np.where(total == 0, 1.0, total)
    samples = np.take(data, np.clip(taps, 0, in_len - 1), axis=axis)   # axis -> (out, taps)
    return np.sum(samples * weights.reshape(weights.shape + (1,) * (data.ndim - axis - 1)), axis=axis + 1)


def _resize_ref(x, sizes, mode, coordinate_transformation_mode, nearest_mode, scales,
                exclude_outside, extrapolation_value, cubic_coeff_a, antialias, roi):
    if sizes is None:
        sizes = tuple(int(size_from_scale(d, s)) for d, s in zip(x.shape, scales))
    if len(sizes) != x.ndim:
        raise ValueError(f"resize: sizes {sizes} do not match the rank-{x.ndim} input")
    crop = coordinate_transformation_mode == "tf_crop_and_resize"
    out = x.astype(np.float64) if mode != "nearest" else x
    outside = np.zeros([1] * x.ndim, bool)
    for axis, (in_len, out_len) in enumerate(zip(x.shape, sizes)):
        if in_len == 0 and out_len:
            raise ValueError(f"resize: axis {axis} is empty but its output size is {out_len}")
        if scales is not None:
            scale = _F32(scales[axis])
        else:
            scale = _F32(out_len) / _F32(in_len) if in_len else _F32(1)
        axis_roi = (roi[axis], roi[axis + x.ndim]) if crop else None
        if scale == 1 and out_len == in_len and axis_roi in (None, (0, 1)):
            continue
        coords = _source_coords(coordinate_transformation_mode, out_len, in_len, scale, axis_roi)
        if crop:
            shape = [1] * x.ndim
            shape[axis] = out_len
            outside = outside | ((coords < 0) | (coords > in_len - 1)).reshape(shape)
        if mode == "nearest":
            out = np.take(out, _nearest_index(coords, nearest_mode, in_len), axis=axis)
        else:
            stretch = 1 / min(float(scale), 1.0) if antialias else 1.0
            out = _filter_along(out, axis, coords, in_len, mode, stretch, cubic_coeff_a, exclude_outside)
    if outside.any():
        out = np.where(outside, np.asarray(extrapolation_value).astype(out.dtype), out)
    return out.astype(x.dtype)


register(Op("resize", _resize_rule, _resize_ref,
            attrs={"sizes": None, "mode": "nearest", "coordinate_transformation_mode": "half_pixel",
                   "nearest_mode": "round_prefer_floor", "scales": None, "exclude_outside": 0,
                   "extrapolation_value": 0.0, "cubic_coeff_a": -0.75, "antialias": 0, "roi": None},
            kind="injective"))


def resize(x, sizes=None, mode="nearest", coordinate_transformation_mode="half_pixel",
           nearest_mode="round_prefer_floor", scales=None, exclude_outside=0,
           extrapolation_value=0.0, span=None, cubic_coeff_a=-0.75, antialias=0, roi=None):
    """Resize every axis of `x` to `sizes` (ints or symbolic dims), or to
    floor(scale * dim) when only `scales` is given; given scales also drive
    the coordinate mapping, as in ONNX. `roi` (starts then ends, one per
    axis) is the crop of tf_crop_and_resize."""
    return make_call("resize", [x], {
        "sizes": None if sizes is None else tuple(sizes), "mode": mode,
        "coordinate_transformation_mode": coordinate_transformation_mode,
        "nearest_mode": nearest_mode, "scales": None if scales is None else tuple(scales),
        "exclude_outside": exclude_outside, "extrapolation_value": extrapolation_value,
        "cubic_coeff_a": cubic_coeff_a, "antialias": antialias,
        "roi": None if roi is None else tuple(float(r) for r in roi)}, span=span)
