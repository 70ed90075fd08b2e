"""Legalization of resize (ONNX Resize; the numpy reference in op/resize.py
is the definition matched here).

Guaranteed:
1. Source coordinates are float32 expressions in the reference's order of
   operations, one table per resized axis (`resize_coord<axis>`), and
   arithmetic on constants alone is folded now in numpy float32. A C kernel
   (float32 arithmetic, no contraction under -std=c99) therefore computes
   every coordinate bit for bit as the reference, so nearest rounding and
   tf_crop_and_resize's range test fall the same way, ties included.
   Rounding a coordinate to an index (round_prefer_floor / round_prefer_ceil
   / floor / ceil) happens in float64 on the float32 value, as in the
   reference.
2. Linear and cubic weigh taps in float64 as the reference does: per resized
   axis a weight table (out, taps) and its sum, then one stage per resized
   axis, in axis order, summing samples times normalized weights over the
   taps (a float64 scratch tensor between axes); the input dtype is
   restored once at the end. Antialias stretches the kernel by 1 / scale.
3. No load leaves its buffer: nearest indices and tap indices are clamped
   into the input (past the edge a tap repeats the edge sample), taps
   outside the input weigh 0 under exclude_outside, and
   tf_crop_and_resize's extrapolation_value is a select on the coordinates'
   range.
4. One program serves every value of the symbolic dims: an axis's scale is
   float32(out) / float32(in) computed in the program when scales are not
   given; antialias with such a scale sums over ceil(reach * in / out) + 1
   taps each side, a bound on the reference's window whose extra taps
   weigh 0.

Not guaranteed: the tensor-program interpreter evaluates float32 arithmetic
in float64, so where float32 rounding lands a coordinate exactly on an
integer or a half (1 / float32(2/3) is 1.5), the interpreter's coordinate
stays beside it and may round the other way (exact ties, as from scales 2
or 0.5, agree; linear and cubic differ by ~1e-7). An axis whose
size only turns out equal at run time (symbolic dims) is resampled at
coordinates y rather than copied: the same values, except that an inf or
NaN neighbour, weighed 0, gives NaN. Taps are recomputed per output element
rather than scheduled.
"""

from __future__ import annotations

import numpy as np

from ..ir.shape import Proof, as_expr, max_expr, prove_equal
from ..tir.compute import compute, reduce_axis, reduce_sum
from ..tir.expr import (
    BinOp,
    Cast,
    Const,
    Index,
    Select,
    cast,
    const,
    eq,
    index,
    intrinsic,
    logical_or,
    maximum,
    minimum,
    select,
)
from .common import legalization

F32, F64, I64 = "float32", "float64", "int64"


# ------------------------------------------------------------ float32 math

_FOLD = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide}


def _fold(e):
    """`e` with float arithmetic on constants done now, in its own dtype (as
    C and the reference do it, not in the interpreter's float64)."""
    if isinstance(e, BinOp):
        a, b = _fold(e.a), _fold(e.b)
        if isinstance(a, Const) and isinstance(b, Const) and e.op in _FOLD and e.dtype in (F32, F64):
            kind = np.dtype(e.dtype).type
            return const(float(_FOLD[e.op](kind(a.value), kind(b.value))), e.dtype)
        return BinOp(e.op, a, b, e.dtype)
    if isinstance(e, Select):
        return select(e.cond, _fold(e.a), _fold(e.b))
    if isinstance(e, Cast):
        a = _fold(e.a)
        if isinstance(a, Index) and a.value.is_const:
            a = const(a.value.value, I64)
        if isinstance(a, Const) and e.dtype in (F32, F64):
            return const(float(np.dtype(e.dtype).type(a.value)), e.dtype)
        return cast(a, e.dtype)
    return e


def _f32(n):
    """An integer dim (or loop variable) as a float32 expression."""
    return cast(index(n), F32)


def _if_single(out_len, single, general):
    """`single` where the axis has one output element, else `general`."""
    out_len = as_expr(out_len)
    if out_len.is_const:
        return single if out_len.value == 1 else general
    return select(eq(index(out_len), 1), single, general)


def _scale(attrs, axis, in_len, out_len):
    """The axis's float32 scale as an expression: scales[axis], else
    float32(out) / float32(in)."""
    if attrs["scales"] is not None:
        return const(float(np.float32(attrs["scales"][axis])), F32)
    if prove_equal(out_len, in_len) is Proof.YES:
        return const(1.0, F32)
    return _fold(_f32(out_len) / _f32(in_len))


def _coordinate(mode, y, in_len, out_len, scale, roi):
    """The float32 source coordinate of output index `y` (the reference's
    _source_coords); `roi` is the axis's (start, end) for tf_crop_and_resize."""
    yf = _f32(y)
    last_in, last_out = _f32(in_len - 1), _f32(max_expr(out_len - 1, 1))
    if mode == "tf_crop_and_resize":
        start, end = np.float32(roi[0]), np.float32(roi[1])
        middle = cast(const(0.5 * np.float64(start + end), F64) * cast(index(in_len - 1), F64), F32)
        spread = const(start, F32) * last_in + yf * const(end - start, F32) * last_in / last_out
        return _if_single(out_len, middle, spread)
    if isinstance(scale, Const) and scale.value == 1:
        return yf
    if mode == "asymmetric":
        return yf / scale
    if mode == "half_pixel":
        return (yf + 0.5) / scale - 0.5
    if mode == "pytorch_half_pixel":
        return _if_single(out_len, const(0.0, F32), (yf + 0.5) / scale - 0.5)
    if mode == "align_corners":
        return _if_single(out_len, const(0.0, F32), yf * last_in / last_out)
    # half_pixel_symmetric: float32 offset, then float64 as ONNX Runtime does
    adjustment = _f32(out_len) / (scale * _f32(in_len))
    offset = _f32(in_len) / 2.0 * (1.0 - adjustment)
    return cast(cast(offset, F64) + (cast(index(y), F64) + 0.5) / cast(scale, F64) - 0.5, F32)


class _Axis:
    """One resized axis: its lengths, scale and float32 coordinate table."""

    def __init__(self, axis, in_len, out_len, scale, mode, roi):
        self.axis, self.in_len, self.out_len, self.scale = axis, in_len, out_len, scale
        self.coords = compute((out_len,), lambda y: _fold(_coordinate(mode, y, in_len, out_len, scale, roi)),
                              f"resize_coord{axis}", F32)

    def coord(self, y):
        return cast(self.coords[y], F64)

    def clamp(self, i):
        """An int64 index kept inside the input axis."""
        return maximum(minimum(i, index(self.in_len - 1)), 0)

    def outside(self, y):
        c = self.coord(y)
        return logical_or(c < 0.0, c > cast(index(self.in_len - 1), F64))


def _resized_axes(x, out_shape, attrs):
    """The axes the reference resamples (it copies an axis of scale 1, equal
    sizes and, for tf_crop_and_resize, roi (0, 1))."""
    rank, roi = len(out_shape), attrs["roi"]
    mode = attrs["coordinate_transformation_mode"]
    axes = []
    for a, (in_len, out_len) in enumerate(zip(x.shape, out_shape)):
        scale = _scale(attrs, a, in_len, out_len)
        axis_roi = (roi[a], roi[a + rank]) if mode == "tf_crop_and_resize" else None
        unit = isinstance(scale, Const) and scale.value == 1
        if not (unit and prove_equal(out_len, in_len) is Proof.YES and axis_roi in (None, (0, 1))):
            axes.append(_Axis(a, in_len, out_len, scale, mode, axis_roi))
    return axes


# ------------------------------------------------------------------ nearest

_ROUNDING = {"round_prefer_floor": lambda c: intrinsic("ceil", c - 0.5),
             "round_prefer_ceil": lambda c: intrinsic("floor", c + 0.5),
             "floor": lambda c: intrinsic("floor", c), "ceil": lambda c: intrinsic("ceil", c)}


def _nearest(x, axes, out_shape, attrs, finish):
    rounding = _ROUNDING[attrs["nearest_mode"]]

    def element(*i):
        src = list(i)
        for ax in axes:
            src[ax.axis] = ax.clamp(cast(rounding(ax.coord(i[ax.axis])), I64))
        return finish(x[tuple(src)], i)
    return compute(out_shape, element, "resize", x.dtype)


# ----------------------------------------------------------- linear, cubic

def _linear_kernel(d, a):
    return maximum(0.0, 1.0 - intrinsic("fabs", d))


def _cubic_kernel(d, a):
    """Keys' cubic convolution kernel with coefficient a."""
    d = intrinsic("fabs", d)
    near = ((a + 2) * d - (a + 3)) * d * d + 1.0
    far = ((a * d - 5 * a) * d + 8 * a) * d - 4 * a
    return select(d <= 1.0, near, select(d < 2.0, far, 0.0))


KERNELS = {"linear": (_linear_kernel, 1), "cubic": (_cubic_kernel, 2)}   # kernel, reach


def _stretch(ax, antialias):
    """How far the kernel is widened: 1 / scale when antialiasing a downscale."""
    if not antialias:
        return 1.0
    if isinstance(ax.scale, Const):
        return 1 / min(ax.scale.value, 1.0)
    return select(ax.scale < 1.0, 1.0 / cast(ax.scale, F64), 1.0)


def _half_width(ax, reach, stretch):
    """Taps each side of the coordinate: the reference's ceil(reach * stretch),
    or for a run-time stretch (~ in / out) a bound on it."""
    if isinstance(stretch, float):
        return as_expr(int(np.ceil(reach * stretch)))
    return (ax.in_len * reach + ax.out_len - 1) // ax.out_len + 1


def _filter(src, ax, attrs, finish=None):
    """Resample axis `ax` of `src`: the weighted taps around each coordinate,
    weights normalized to sum 1, summed in float64 (then `finish`ed)."""
    kernel, reach = KERNELS[attrs["mode"]]
    stretch = _stretch(ax, attrs["antialias"])
    half = _half_width(ax, reach, stretch)
    a = attrs["cubic_coeff_a"]

    def tap(y, t):
        return cast(intrinsic("floor", ax.coord(y)), I64) + index(as_expr(t) + 1 - half)

    def weight(y, t):
        p = tap(y, t)
        w = kernel((cast(p, F64) - ax.coord(y)) / stretch, a)
        if attrs["exclude_outside"]:
            w = select(logical_or(p < 0, p >= index(ax.in_len)), 0.0, w)
        return w

    weights = compute((ax.out_len, 2 * half), weight, f"resize_weight{ax.axis}", F64)
    t_sum = reduce_axis(2 * half, "t")
    total = compute((ax.out_len,), lambda y: reduce_sum(weights[y, t_sum.var], [t_sum]),
                    f"resize_weight_sum{ax.axis}", F64)
    t = reduce_axis(2 * half, "t")
    shape = list(src.shape)
    shape[ax.axis] = ax.out_len

    def element(*i):
        y = i[ax.axis]
        src_index = list(i)
        src_index[ax.axis] = ax.clamp(tap(y, t.var))
        norm = select(eq(total[y], 0.0), 1.0, total[y])
        value = reduce_sum(cast(src[tuple(src_index)], F64) * (weights[y, t.var] / norm), [t])
        return value if finish is None else finish(value, i)
    return compute(shape, element, f"resize_axis{ax.axis}", None)


# -------------------------------------------------------------------- entry

@legalization("resize")
def legalize_resize(ctx):
    (x,) = ctx.inputs
    attrs = ctx.attrs
    axes = _resized_axes(x, ctx.out_shape, attrs)
    crop = attrs["coordinate_transformation_mode"] == "tf_crop_and_resize"

    def finish(value, i):
        """The output element: extrapolation_value outside the crop, in the output dtype."""
        outside = None
        for ax in axes if crop else ():
            here = ax.outside(i[ax.axis])
            outside = here if outside is None else logical_or(outside, here)
        if outside is not None:
            value = select(outside, const(attrs["extrapolation_value"], value.dtype), value)
        return cast(value, ctx.out_dtype)

    if attrs["mode"] == "nearest" or not axes:
        return _nearest(x, axes, ctx.out_shape, attrs, finish)
    out = x
    for ax in axes[:-1]:
        out = _filter(out, ax, attrs)
    return _filter(out, axes[-1], attrs, finish)
