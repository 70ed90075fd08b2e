"""Resize of an N-D tensor with ONNX Resize semantics: modes nearest and
(multi)linear over every axis whose size changes, five coordinate
transformation modes, four nearest rounding modes, output sizes given
directly (symbolic allowed) or derived from scales.

Source coordinates are computed in float32 exactly as ONNX Runtime computes
them (so rounding ties fall the same way); the scale of an axis is
`scales[i]` when scales are given, else `float32(out) / float32(in)`, and an
axis with scale 1 maps each index to itself. Linear interpolation clamps the
coordinate to the input (the ONNX edge rule) and blends in float64.

Not supported: cubic mode, antialias, tf_crop_and_resize (roi and
extrapolation_value), the axes and keep_aspect_ratio_policy attributes,
exclude_outside=1 (it changes only cubic and antialiased results), and
linear mode on integer tensors. Sizes derived from scales are symbolic only
where floor(scale * dim) is exact: a float32 scale p / 2**k with p <= 4096.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from ..ir.shape import Proof, as_expr, prove_lt
from ..ir.types import TensorType, shape_str
from .registry import Op, RuleError, make_call, register
from .rules import check_equal, float_dtype, tensor

__all__ = ["resize"]

MODES = ("nearest", "linear")
COORDINATE_MODES = ("half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners",
                    "asymmetric")
NEAREST_MODES = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil")
_F32 = np.float32


def size_from_scale(dim, scale):
    """floor(scale * dim) as ONNX Runtime computes it (float32), as an
    expression; None when it has no exact symbolic form."""
    dim, s = as_expr(dim), _F32(scale)
    if dim.is_const:
        return as_expr(int(np.floor(s * _F32(dim.value))))
    ratio = Fraction(float(s))
    if ratio.numerator > 4096:
        return None
    return (dim * ratio.numerator) // ratio.denominator


def _choice(attrs, key, allowed):
    if attrs[key] not in allowed:
        raise RuleError(f"{key} {attrs[key]!r} is not supported (choose from {', '.join(allowed)})")


def _resize_rule(types, attrs):
    x = tensor(types[0], 0)
    rank = len(x.shape)
    _choice(attrs, "mode", MODES)
    _choice(attrs, "coordinate_transformation_mode", COORDINATE_MODES)
    _choice(attrs, "nearest_mode", NEAREST_MODES)
    if attrs["mode"] == "linear":
        float_dtype(x)
    if attrs["exclude_outside"]:
        raise RuleError("exclude_outside=1 changes only cubic or antialiased resizing, "
                        "which is not supported")
    if rank == 0:
        raise RuleError("cannot resize a scalar")
    sizes, scales = attrs["sizes"], attrs["scales"]
    derived = [None] * rank
    if scales is not None:
        scales = tuple(float(s) for s in scales)
        if len(scales) != rank or min(scales) <= 0:
            raise RuleError(f"scales {scales} must be {rank} positive numbers, one per axis")
        derived = [size_from_scale(d, s) for d, s in zip(x.shape, scales)]
    if sizes is None:
        if scales is None:
            raise RuleError("give sizes or scales")
        for d, s, out in zip(x.shape, scales, derived):
            if out is None:
                raise RuleError(f"floor({d} * {s}) has no exact symbolic form; give sizes")
        return TensorType(derived, x.dtype)
    sizes = tuple(as_expr(d) for d in sizes)
    if len(sizes) != rank:
        raise RuleError(f"sizes {shape_str(sizes)} must have one entry per axis of the rank-{rank} input")
    for i, (out, want) in enumerate(zip(sizes, derived)):
        if prove_lt(out, 0) is Proof.YES:
            raise RuleError(f"sizes {shape_str(sizes)} has a negative entry at axis {i}")
        if want is not None:
            check_equal(out, want, f"sizes[{i}] differs from floor(scales[{i}] * input dim)")
    return TensorType(sizes, x.dtype)


def _source_coords(mode, out_len, in_len, scale):
    """The float32 source coordinate of each output index along one axis."""
    y = np.arange(out_len, dtype=_F32)
    half = _F32(0.5)
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


def _linear_along(data, axis, coords, in_len):
    c = np.clip(coords, _F32(0), _F32(in_len - 1))
    lo = np.minimum(c.astype(np.intp), in_len - 1)
    hi = np.minimum(lo + 1, in_len - 1)
    w_hi = np.where(lo == hi, 0.5, np.abs(c - lo.astype(_F32))).astype(np.float64)
    w_lo = np.where(lo == hi, 0.5, np.abs(c - hi.astype(_F32))).astype(np.float64)
    shape = [1] * data.ndim
    shape[axis] = -1
    return (np.take(data, lo, axis=axis) * w_lo.reshape(shape)
            + np.take(data, hi, axis=axis) * w_hi.reshape(shape))


def _resize_ref(x, sizes, mode, coordinate_transformation_mode, nearest_mode, scales,
                exclude_outside, extrapolation_value):
    if sizes is None:
        sizes = tuple(int(size_from_scale(d, s)) for d, s in zip(x.shape, scales))
    if len(sizes) != x.ndim:
        raise ValueError(f"resize: sizes {sizes} do not match the rank-{x.ndim} input")
    out = x.astype(np.float64) if mode == "linear" else x
    for axis, (in_len, out_len) in enumerate(zip(x.shape, sizes)):
        if in_len == 0 and out_len:
            raise ValueError(f"resize: axis {axis} is empty but its output size is {out_len}")
        if scales is not None:
            scale = _F32(scales[axis])
        else:
            scale = _F32(out_len) / _F32(in_len) if in_len else _F32(1)
        if scale == 1 and out_len == in_len:
            continue
        coords = _source_coords(coordinate_transformation_mode, out_len, in_len, scale)
        if mode == "nearest":
            out = np.take(out, _nearest_index(coords, nearest_mode, in_len), axis=axis)
        else:
            out = _linear_along(out, axis, coords, in_len)
    return out.astype(x.dtype)


register(Op("resize", _resize_rule, _resize_ref,
            attrs={"sizes": None, "mode": "nearest", "coordinate_transformation_mode": "half_pixel",
                   "nearest_mode": "round_prefer_floor", "scales": None, "exclude_outside": 0,
                   "extrapolation_value": 0.0},
            kind="injective"))


def resize(x, sizes=None, mode="nearest", coordinate_transformation_mode="half_pixel",
           nearest_mode="round_prefer_floor", scales=None, exclude_outside=0,
           extrapolation_value=0.0, span=None):
    """Resize every axis of `x` to `sizes` (ints or symbolic dims), or to
    floor(scale * dim) when only `scales` is given; given scales also drive
    the coordinate mapping, as in ONNX."""
    return make_call("resize", [x], {
        "sizes": None if sizes is None else tuple(sizes), "mode": mode,
        "coordinate_transformation_mode": coordinate_transformation_mode,
        "nearest_mode": nearest_mode, "scales": None if scales is None else tuple(scales),
        "exclude_outside": exclude_outside, "extrapolation_value": extrapolation_value}, span=span)
