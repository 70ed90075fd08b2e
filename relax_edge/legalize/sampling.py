"""Sampling operators as tensor programs: grid_sample and roi_align (the
numpy references in op/sampling.py are the definitions matched here).

Guaranteed:
1. Coordinates, weights and sums are float32 (a float16 input is widened
   on load and rounded once at the end); the order of operations is the
   reference's, so compiled and reference results differ by float32
   rounding only (the references work in float64).
2. No load leaves its buffer: every tap index is clamped into its axis;
   taps outside the input under padding zeros, and roi samples outside
   [-1, size], contribute 0 through a select, not through a load.
3. grid_sample unrolls its taps (1, 2^r or 4^r terms per output element);
   roi_align reduces over the sampling_ratio^2 grid of each bin. A batch
   index of roi_align outside [0, N) fails the program's check (the load is
   clamped).
"""

from __future__ import annotations

import itertools

from ..op.sampling import CUBIC_ALPHA
from ..tir.compute import compute, reduce_axis, reduce_max, reduce_sum
from ..tir.expr import cast, compare, const, index, intrinsic, logical_and, logical_or, maximum, minimum, select
from .common import legalization

F32, I64 = "float32", "int64"


def _f(value):
    return const(value, F32)


def _f32(n):
    return cast(index(n), F32)


def _floor(v):
    return intrinsic("floor", v)


def _axis_index(t, dim):
    """A float tap position as an int64 index clamped into [0, dim)."""
    i = cast(t, I64)
    return maximum(const(0, I64), minimum(i, cast(index(dim), I64) - const(1, I64)))


def _reflect(v, lo, hi):
    """v folded into [lo, hi] by reflection (op/sampling.py `reflect`)."""
    span = hi - lo
    below, above = v < lo, v > hi
    dx = select(below, lo - v, v - hi)
    n = _floor(dx / select(span > _f(0.0), span, _f(1.0)))
    r = dx - n * span
    even = compare("eq", _floor(n * _f(0.5)) * _f(2.0), n)
    folded = select(below, select(even, lo + r, hi - r), select(even, hi - r, lo + r))
    return select(span > _f(0.0), select(logical_or(below, above), folded, v), lo)


def _cubic_weights(f):
    a = CUBIC_ALPHA
    x = intrinsic("fabs", f)
    one, two = x + _f(1.0), _f(2.0) - x
    rest = _f(1.0) - x
    return [((one * _f(a) - _f(5 * a)) * one + _f(8 * a)) * one - _f(4 * a),
            ((x * _f(a + 2) - _f(a + 3)) * x) * x + _f(1.0),
            ((rest * _f(a + 2) - _f(a + 3)) * rest) * rest + _f(1.0),
            ((two * _f(a) - _f(5 * a)) * two + _f(8 * a)) * two - _f(4 * a)]


def _grid_taps(coord, dim, attrs):
    """[(index, weight, inside or None)] of one spatial axis at float32 `coord`."""
    mode, padding = attrs["mode"], attrs["padding_mode"]
    d = _f32(dim)
    lo, hi = (_f(0.0), d - _f(1.0)) if attrs["align_corners"] else (_f(-0.5), d - _f(0.5))
    if mode == "nearest":
        coord = intrinsic("round", coord)
    if padding == "border":
        clamped = maximum(_f(0.0), minimum(coord, d - _f(1.0)))
        coord = select(logical_or(coord < lo, coord > hi), clamped, coord)
    elif padding == "reflection":
        coord = _reflect(coord, lo, hi)
    if mode == "nearest":
        taps = [(coord, None)]   # the index truncates the coordinate
    else:
        base = _floor(coord)
        f = coord - base
        if mode == "linear":
            taps = [(base, _f(1.0) - f), (base + _f(1.0), f)]
        else:
            taps = [(base + _f(float(t - 1)), w) for t, w in enumerate(_cubic_weights(f))]
    out = []
    for t, w in taps:
        inside = None
        if padding == "zeros":  # a nearest index truncates: it is >= 0 from -1 on
            inside = logical_and(t > _f(-1.0) if mode == "nearest" else t >= _f(0.0), t < d)
        elif padding == "reflection":
            t = _reflect(t, lo, hi)
        out.append((_axis_index(t, dim), w, inside))
    return out


@legalization("grid_sample")
def legalize_grid_sample(ctx):
    x, grid = ctx.inputs
    r = len(x.shape) - 2
    align = ctx.attrs["align_corners"]

    def element(n, c, *o):
        per_axis = []
        for i in range(r):
            g = cast(grid[(n,) + tuple(o) + (r - 1 - i,)], F32)
            d = _f32(x.shape[2 + i])
            coord = ((g + _f(1.0)) * _f(0.5)) * (d - _f(1.0)) if align else \
                ((g + _f(1.0)) * d - _f(1.0)) * _f(0.5)
            per_axis.append(_grid_taps(coord, x.shape[2 + i], ctx.attrs))
        total = None
        for combo in itertools.product(*per_axis):
            term = cast(x[(n, c) + tuple(t for t, _, _ in combo)], F32)
            for _, w, _ in combo:
                term = term if w is None else w * term
            insides = [inside for _, _, inside in combo if inside is not None]
            if insides:
                ok = insides[0]
                for more in insides[1:]:
                    ok = logical_and(ok, more)
                term = select(ok, term, _f(0.0))
            total = term if total is None else total + term
        return cast(total, ctx.out_dtype)
    return compute(ctx.out_shape, element, "grid_sample", ctx.out_dtype)


def _roi_axis(start, bin_size, p, k, s, size):
    """One axis of a roi sample: (low index, high index, high weight, inside)."""
    pos = start + _f32(p) * bin_size + (_f32(k) + _f(0.5)) * bin_size / _f(float(s))
    size_f = _f32(size)
    inside = logical_and(pos >= _f(-1.0), pos <= size_f)
    pos = maximum(pos, _f(0.0))
    low = _floor(pos)
    at_edge = low >= size_f - _f(1.0)
    low = select(at_edge, size_f - _f(1.0), low)
    high = select(at_edge, size_f - _f(1.0), low + _f(1.0))
    frac = select(at_edge, _f(0.0), pos - low)
    return _axis_index(low, size), _axis_index(high, size), frac, inside


@legalization("roi_align")
def legalize_roi_align(ctx):
    x, rois, bi = ctx.inputs
    a = ctx.attrs
    s = a["sampling_ratio"]
    height, width = x.shape[2], x.shape[3]
    half = a["coordinate_transformation_mode"] == "half_pixel"
    scale = _f(a["spatial_scale"])

    def box(r):
        v = [cast(rois[r, j], F32) * scale - _f(0.5 if half else 0.0) for j in range(4)]
        w, h = v[2] - v[0], v[3] - v[1]
        if not half:
            w, h = maximum(w, _f(1.0)), maximum(h, _f(1.0))
        return v[0], v[1], w / _f(float(a["output_width"])), h / _f(float(a["output_height"]))

    def batch(r):
        b = cast(bi[(r,)], I64)
        return maximum(const(0, I64), minimum(b, cast(index(x.shape[0]), I64) - const(1, I64)))

    def element(r, c, ph, pw):
        iy, ix = reduce_axis(s, "iy"), reduce_axis(s, "ix")
        x1, y1, bin_w, bin_h = box(r)
        ylo, yhi, ly, yin = _roi_axis(y1, bin_h, ph, iy.var, s, height)
        xlo, xhi, lx, xin = _roi_axis(x1, bin_w, pw, ix.var, s, width)
        b = batch(r)
        hy, hx = _f(1.0) - ly, _f(1.0) - lx
        corners = [hy * hx * cast(x[b, c, ylo, xlo], F32), hy * lx * cast(x[b, c, ylo, xhi], F32),
                   ly * hx * cast(x[b, c, yhi, xlo], F32), ly * lx * cast(x[b, c, yhi, xhi], F32)]
        inside = logical_and(yin, xin)
        if a["mode"] == "avg":
            sample = select(inside, ((corners[0] + corners[1]) + corners[2]) + corners[3], _f(0.0))
            return cast(reduce_sum(sample, [iy, ix]) / _f(float(s * s)), ctx.out_dtype)
        sample = select(inside, maximum(maximum(maximum(corners[0], corners[1]), corners[2]), corners[3]), _f(0.0))
        return cast(reduce_max(sample, [iy, ix]), ctx.out_dtype)

    def check(r, c, ph, pw):
        b, n = cast(bi[(r,)], I64), cast(index(x.shape[0]), I64)
        return [(logical_and(b >= const(0, I64), b < n), "batch index {} out of range [0, {})", (b, n))]
    return compute(ctx.out_shape, element, "roi_align", ctx.out_dtype, asserts=check)
