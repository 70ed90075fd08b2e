"""Sampling operators as tensor programs: grid_sample and roi_align (the
numpy references in op/sampling.py are the definitions matched here).

Guaranteed:
1. Coordinates, weights and sums are float32 (a float16 input is widened
   on load and rounded once at the end) in the reference's order of
   operations per tap, so compiled and reference results differ by float32
   rounding only (the references work in float64).
2. What depends only on the grid (roi) is computed once, in its own stage,
   not per channel: grid_sample's per-axis coordinates (N, O...), tap
   indices and tap weights (N, O..., taps); roi_align's per-axis sample
   positions (R, out, s) and corner indices and weights (R, out, s, 2).
   The output stage loads them, so expressions stay linear in size.
3. No load leaves its buffer: every tap index is clamped into its axis; a
   grid tap outside the input under padding zeros is marked -1 and
   contributes 0 through a select; a roi sample outside [-1, size] has its
   corner weights 0 (an inf or NaN input there gives NaN, where the
   reference gives 0). A batch index of roi_align outside [0, N) fails the
   program's check (the load is clamped).
"""

from __future__ import annotations

import itertools

from ..ir.shape import as_expr
from ..op.sampling import CUBIC_ALPHA
from ..tir.compute import compute, reduce_axis, reduce_max, reduce_sum
from ..tir.expr import cast, compare, const, eq, index, intrinsic, logical_and, logical_or, maximum, minimum, select
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


def _coordinate(g, dim, attrs):
    """The float32 source coordinate of normalized grid value `g` on an axis
    of `dim`, rounded (nearest) and moved inside by the padding (border,
    reflection) as the reference does before taking taps."""
    mode, padding = attrs["mode"], attrs["padding_mode"]
    d = _f32(dim)
    lo, hi = _borders(d, attrs)
    if attrs["align_corners"]:
        coord = ((g + _f(1.0)) * _f(0.5)) * (d - _f(1.0))
    else:
        coord = ((g + _f(1.0)) * d - _f(1.0)) * _f(0.5)
    if mode == "nearest":
        coord = intrinsic("round", coord)
    if padding == "border" and mode != "cubic":  # cubic clamps its taps only (op/sampling.py)
        clamped = maximum(_f(0.0), minimum(coord, d - _f(1.0)))
        coord = select(logical_or(coord < lo, coord > hi), clamped, coord)
    elif padding == "reflection":
        coord = _reflect(coord, lo, hi)
    return coord


def _borders(d, attrs):
    return (_f(0.0), d - _f(1.0)) if attrs["align_corners"] else (_f(-0.5), d - _f(0.5))


_FIRST_TAP = {"nearest": 0, "linear": 0, "cubic": -1}
TAPS = {"nearest": 1, "linear": 2, "cubic": 4}


def _tap_index(coord, t, dim, attrs):
    """Tap `t` (a loop variable) of float32 `coord`: its int64 index into
    the axis, -1 when it is outside under padding zeros."""
    mode, padding = attrs["mode"], attrs["padding_mode"]
    d = _f32(dim)
    if mode == "nearest":
        pos = coord   # the index truncates the coordinate: >= 0 from -1 on
        inside = logical_and(pos > _f(-1.0), pos < d)
    else:
        pos = _floor(coord) + cast(index(as_expr(t) + _FIRST_TAP[mode]), F32)
        inside = logical_and(pos >= _f(0.0), pos < d)
    if padding == "reflection":
        pos = _reflect(pos, *_borders(d, attrs))
    idx = _axis_index(pos, dim)
    return select(inside, idx, const(-1, I64)) if padding == "zeros" else idx


def _tap_weight(coord, t, mode):
    f = coord - _floor(coord)
    weights = [_f(1.0) - f, f] if mode == "linear" else _cubic_weights(f)
    out = weights[-1]
    for k in range(len(weights) - 2, -1, -1):
        out = select(eq(index(t), k), weights[k], out)
    return out


@legalization("grid_sample")
def legalize_grid_sample(ctx):
    """Per spatial axis, stages of the coordinates, the tap indices and the
    tap weights over (N, O...); then each output element sums its taps."""
    x, grid = ctx.inputs
    r = len(x.shape) - 2
    mode = ctx.attrs["mode"]
    out_sp = tuple(grid.shape[:-1])
    taps = TAPS[mode]
    indices, weights = [], []
    for i in range(r):
        dim = x.shape[2 + i]

        def coordinate(n, *o, i=i, dim=dim):
            return _coordinate(cast(grid[(n,) + tuple(o) + (r - 1 - i,)], F32), dim, ctx.attrs)
        coord = compute(out_sp, coordinate, f"grid_coord{i}", F32)
        indices.append(compute(out_sp + (taps,), lambda *a, c=coord, dim=dim: _tap_index(
            c[a[:-1]], a[-1], dim, ctx.attrs), f"grid_index{i}", I64))
        weights.append(None if mode == "nearest" else compute(
            out_sp + (taps,), lambda *a, c=coord: _tap_weight(c[a[:-1]], a[-1], mode), f"grid_weight{i}", F32))

    def element(n, c, *o):
        total = None
        for combo in itertools.product(range(taps), repeat=r):
            at = [(n,) + tuple(o) + (t,) for t in combo]
            idx = [indices[i][at[i]] for i in range(r)]
            term = cast(x[(n, c) + tuple(maximum(const(0, I64), v) for v in idx)], F32)
            for i in range(r):
                term = term if weights[i] is None else weights[i][at[i]] * term
            if ctx.attrs["padding_mode"] == "zeros":
                ok = idx[0] >= const(0, I64)
                for v in idx[1:]:
                    ok = logical_and(ok, v >= const(0, I64))
                term = select(ok, term, _f(0.0))
            total = term if total is None else total + term
        return cast(total, ctx.out_dtype)
    return compute(ctx.out_shape, element, "grid_sample", ctx.out_dtype)


def _roi_corner(pos, j, size):
    """Corner j (0 low, 1 high) of a roi sample at float32 `pos` on an axis
    of `size`: (its int64 index, its weight; 0 outside [-1, size])."""
    size_f = _f32(size)
    inside = logical_and(pos >= _f(-1.0), pos <= size_f)
    pos = maximum(pos, _f(0.0))
    low = _floor(pos)
    at_edge = low >= size_f - _f(1.0)
    low = select(at_edge, size_f - _f(1.0), low)
    frac = select(at_edge, _f(0.0), pos - low)
    high = select(at_edge, low, low + _f(1.0))
    first = eq(index(j), 0)
    weight = select(inside, select(first, _f(1.0) - frac, frac), _f(0.0))
    return _axis_index(select(first, low, high), size), weight


@legalization("roi_align")
def legalize_roi_align(ctx):
    """Per axis, stages of the sample positions (R, out, s) and of their two
    corners' indices and weights (R, out, s, 2); then each output element
    reduces over its bin's s x s samples."""
    x, rois, bi = ctx.inputs
    a = ctx.attrs
    s = a["sampling_ratio"]
    count = rois.shape[0]
    half = a["coordinate_transformation_mode"] == "half_pixel"
    scale = _f(a["spatial_scale"])
    tables = []
    for start, out_len, size in ((1, a["output_height"], x.shape[2]), (0, a["output_width"], x.shape[3])):
        def position(r, p, k, start=start, out_len=out_len):
            lo, hi = (cast(rois[r, start + j], F32) * scale - _f(0.5 if half else 0.0) for j in (0, 2))
            extent = hi - lo if half else maximum(hi - lo, _f(1.0))
            bin_size = extent / _f(float(out_len))
            return lo + _f32(p) * bin_size + (_f32(k) + _f(0.5)) * bin_size / _f(float(s))
        pos = compute((count, out_len, s), position, "roi_pos", F32)
        idx = compute((count, out_len, s, 2), lambda r, p, k, j, pos=pos, size=size: _roi_corner(
            pos[r, p, k], j, size)[0], "roi_index", I64)
        weight = compute((count, out_len, s, 2), lambda r, p, k, j, pos=pos, size=size: _roi_corner(
            pos[r, p, k], j, size)[1], "roi_weight", F32)
        tables.append((idx, weight))

    def batch(r):
        b = cast(bi[(r,)], I64)
        return maximum(const(0, I64), minimum(b, cast(index(x.shape[0]), I64) - const(1, I64)))

    def element(r, c, ph, pw):
        iy, ix = reduce_axis(s, "iy"), reduce_axis(s, "ix")
        (yi, yw), (xi, xw) = tables
        b = batch(r)
        corners = [(yw[r, ph, iy.var, jy] * xw[r, pw, ix.var, jx])
                   * cast(x[b, c, yi[r, ph, iy.var, jy], xi[r, pw, ix.var, jx]], F32)
                   for jy in (0, 1) for jx in (0, 1)]
        if a["mode"] == "avg":
            sample = ((corners[0] + corners[1]) + corners[2]) + corners[3]
            return cast(reduce_sum(sample, [iy, ix]) / _f(float(s * s)), ctx.out_dtype)
        sample = maximum(maximum(maximum(corners[0], corners[1]), corners[2]), corners[3])
        return cast(reduce_max(sample, [iy, ix]), ctx.out_dtype)

    def check(r, c, ph, pw):
        b, n = cast(bi[(r,)], I64), cast(index(x.shape[0]), I64)
        return [(logical_and(b >= const(0, I64), b < n), "batch index {} out of range [0, {})", (b, n))]
    return compute(ctx.out_shape, element, "roi_align", ctx.out_dtype, asserts=check)


@legalization("deform_conv2d")
def legalize_deform_conv2d(ctx):
    """Stages of the sample positions (N, offset_group, kH, kW, oH, oW) per
    axis, the masked bilinear samples (N, C, kH, kW, oH, oW; corners outside
    the input weigh 0), then the grouped convolution over them plus bias."""
    x, w, off, bias, mask = ctx.inputs
    a = ctx.attrs
    n, c, height, width = x.shape
    oc, cg, kh, kw = (d.value for d in w.shape)
    oh, ow = off.shape[2], off.shape[3]
    og = a["offset_group"]
    per_og, per_group = c.value // og, oc // a["group"]
    positions = []
    for axis in (0, 1):
        def position(b, g, i, j, y, z, axis=axis):
            start = as_expr((y, z)[axis]) * a["strides"][axis] - a["pads"][axis] + (i, j)[axis] * a["dilations"][axis]
            channel = as_expr(g) * (2 * kh * kw) + (as_expr(i) * kw + j) * 2 + axis
            return cast(index(start), F32) + cast(off[b, channel, y, z], F32)
        positions.append(compute((n, og, kh, kw, oh, ow), position, f"deform_pos{axis}", F32))

    def sample(b, ch, i, j, y, z):
        g = as_expr(ch) // per_og
        ph, pw = positions[0][b, g, i, j, y, z], positions[1][b, g, i, j, y, z]
        h0, w0 = _floor(ph), _floor(pw)
        fh, fw = ph - h0, pw - w0
        total = None
        for th, wh in ((h0, _f(1.0) - fh), (h0 + _f(1.0), fh)):
            for tw, ww in ((w0, _f(1.0) - fw), (w0 + _f(1.0), fw)):
                ok = logical_and(logical_and(th >= _f(0.0), th < _f32(height)),
                                 logical_and(tw >= _f(0.0), tw < _f32(width)))
                v = cast(x[b, ch, _axis_index(th, height), _axis_index(tw, width)], F32)
                term = select(ok, (wh * ww) * v, _f(0.0))
                total = term if total is None else total + term
        return total * cast(mask[b, g * (kh * kw) + as_expr(i) * kw + j, y, z], F32)
    cols = compute((n, c, kh, kw, oh, ow), sample, "deform_cols", F32)

    def element(b, o, y, z):
        ci, i, j = reduce_axis(cg, "ci"), reduce_axis(kh, "ki"), reduce_axis(kw, "kj")
        ch = (as_expr(o) // per_group) * cg + ci.var
        acc = reduce_sum(cast(w[o, ci.var, i.var, j.var], F32) * cols[b, ch, i.var, j.var, y, z], [ci, i, j])
        return cast(cast(bias[(o,)], F32) + acc, ctx.out_dtype)
    return compute(ctx.out_shape, element, "deform_conv2d", ctx.out_dtype)
