"""Legalization of the neural-network operators: convolution, transposed
convolution, max / average pooling (2-D and 3-D through helpers generic in
the spatial rank) and batch / layer normalization.

Guaranteed:
1. Results follow the numpy references of op/nn.py and op/norm.py up to
   float rounding: float inputs compute and accumulate in
   reduce.accumulator_dtype (float32 for float32, as ONNX Runtime does;
   float64 for float64) and are rounded to the input dtype once; integer
   convolutions accumulate in int64, then cast like the reference.
2. No load is ever out of bounds: a kernel tap that may fall in padding, past
   the input (ceil mode) or between input elements (transposed convolution)
   is guarded by a select on an in-bounds condition, and its indices are
   clamped into the input, so a backend that evaluates both branches of a
   select still reads inside the buffer. Only axes that can leave the input
   get a guard (no begin padding: no lower check; no end padding and no ceil
   mode: no upper check).
3. Index math uses the symbolic input dims and output shape, so one program
   serves every size; kernel sizes may be symbolic too.

Not guaranteed: no scheduling (one plain reduction per output element: no
im2col, Winograd or tiling); an average-pooling window with nothing to count
(padding wider than the dilated kernel) divides by zero where the reference
gives NaN.
"""

from __future__ import annotations

import numpy as np

from ..ir.shape import as_expr, floordiv, floormod, max_expr, min_expr
from ..tir.compute import compute, reduce_axis, reduce_max, reduce_sum
from ..tir.expr import cast, const, eq, intrinsic, is_float, logical_and, select, wrap
from .common import legalization, load_broadcast
from .reduce import accumulator_dtype


def _ints(values):
    return tuple(int(v) for v in values)


def _all(conds):
    """The conjunction of `conds`, or None when there is nothing to check."""
    out = None
    for c in conds:
        out = c if out is None else logical_and(out, c)
    return out


def _clamp(j, size):
    return max_expr(0, min_expr(j, as_expr(size) - 1))


def _ge(j, bound):
    return wrap(j, "int64") >= wrap(bound, "int64")


def _lt(j, bound):
    return wrap(j, "int64") < wrap(bound, "int64")


def _tap_coords(pos, taps, strides, dilation, padding):
    """Per spatial axis, the input coordinate that kernel tap `taps` of the
    window at output position `pos` reads (negative inside the begin padding)."""
    return [as_expr(p) * s + as_expr(t) * d - b
            for p, t, s, d, b in zip(pos, taps, strides, dilation, padding)]


def _guard(coords, sizes, padding, overhang):
    """The coordinates clamped into the input, and the condition that they all
    lie inside it (None where that holds by construction: an axis needs a
    lower check only with begin padding, an upper one only with end padding
    or ceil-mode overhang)."""
    nd = len(coords)
    idx, conds = [], []
    for i, (j, size) in enumerate(zip(coords, sizes)):
        low, high = padding[i] > 0, padding[nd + i] > 0 or overhang
        conds += ([_ge(j, 0)] if low else []) + ([_lt(j, size)] if high else [])
        idx.append(_clamp(j, size) if low or high else j)
    return tuple(idx), _all(conds)


# ----------------------------------------------------------- convolutions

def _conv_attrs(attrs):
    return _ints(attrs["strides"]), _ints(attrs["dilation"]), _ints(attrs["padding"]), int(attrs["groups"])


def _conv(ctx, nd):
    """out[n, o, p] = sum over channels c of o's group and taps k of
    x[n, group(o) * C/g + c, p * s + k * d - pad] * w[o, c, k]."""
    x, w = ctx.inputs
    strides, dilation, padding, groups = _conv_attrs(ctx.attrs)
    per_group_in, per_group_out = w.shape[1], floordiv(w.shape[0], groups)
    c = reduce_axis(per_group_in, "rc")
    taps = [reduce_axis(k, f"rk{i}") for i, k in enumerate(w.shape[2:])]
    tap_vars = [t.var for t in taps]
    acc = accumulator_dtype(x.dtype)

    def element(n, o, *pos):
        channel = c.var if groups == 1 else floordiv(o, per_group_out) * per_group_in + c.var
        coords = _tap_coords(pos, tap_vars, strides, dilation, padding)
        idx, inside = _guard(coords, x.shape[2:], padding, overhang=False)
        value = cast(x[(n, channel, *idx)], acc) * cast(w[(o, c.var, *tap_vars)], acc)
        if inside is not None:
            value = select(inside, value, const(0, acc))
        return cast(reduce_sum(value, [c, *taps]), ctx.out_dtype)
    return compute(ctx.out_shape, element, ctx.op_name, ctx.out_dtype)


def _conv_transpose(ctx, nd):
    """out[n, o, q] = sum over channels c of o's group and taps k of
    x[n, c, i] * w[c, o mod C_out/g, k] where i * s + k * d == q + pad."""
    x, w = ctx.inputs
    strides, dilation, padding, groups = _conv_attrs(ctx.attrs)
    per_group_in, per_group_out = floordiv(x.shape[1], groups), w.shape[1]
    c = reduce_axis(per_group_in, "rc")
    taps = [reduce_axis(k, f"rk{i}") for i, k in enumerate(w.shape[2:])]
    tap_vars = [t.var for t in taps]
    acc = accumulator_dtype(x.dtype)

    def element(n, o, *pos):
        group = 0 if groups == 1 else floordiv(o, per_group_out)
        channel = as_expr(group) * per_group_in + c.var
        o_in_group = o if groups == 1 else floormod(o, per_group_out)
        idx, conds = [], []
        for q, t, s, d, b, size in zip(pos, tap_vars, strides, dilation, padding, x.shape[2:]):
            canvas = as_expr(q) + b - as_expr(t) * d
            i = floordiv(canvas, s)
            conds += [_ge(canvas, 0), _lt(i, size)] + ([eq(floormod(canvas, s), 0)] if s > 1 else [])
            idx.append(_clamp(i, size))
        value = cast(x[(n, channel, *idx)], acc) * cast(w[(channel, o_in_group, *tap_vars)], acc)
        return cast(reduce_sum(select(_all(conds), value, const(0, acc)), [c, *taps]), ctx.out_dtype)
    return compute(ctx.out_shape, element, ctx.op_name, ctx.out_dtype)


# ---------------------------------------------------------------- pooling

def _pool_attrs(attrs):
    kernel = _ints(attrs["kernel_size"])
    strides = kernel if attrs["strides"] is None else _ints(attrs["strides"])
    return kernel, strides, _ints(attrs["dilation"]), _ints(attrs["padding"]), bool(attrs["ceil_mode"])


def _lowest(dtype):
    return const(-np.inf if is_float(dtype) else np.iinfo(dtype).min, dtype)


def _max_pool(ctx, nd):
    """The maximum over the window; padded and overhanging taps are the lowest value."""
    (x,) = ctx.inputs
    kernel, strides, dilation, padding, ceil_mode = _pool_attrs(ctx.attrs)
    taps = [reduce_axis(k, f"rk{i}") for i, k in enumerate(kernel)]

    def element(n, c, *pos):
        coords = _tap_coords(pos, [t.var for t in taps], strides, dilation, padding)
        idx, inside = _guard(coords, x.shape[2:], padding, ceil_mode)
        value = x[(n, c, *idx)]
        if inside is not None:
            value = select(inside, value, _lowest(x.dtype))
        return reduce_max(value, taps)
    return compute(ctx.out_shape, element, ctx.op_name, ctx.out_dtype)


def _avg_pool(ctx, nd):
    """The sum (accumulator dtype) over the window's taps inside the input, divided by the
    number of taps inside the input (or inside the declared padding, with
    count_include_pad). Where that count varies with the position it is a
    stage of its own over the spatial output shape."""
    (x,) = ctx.inputs
    kernel, strides, dilation, padding, ceil_mode = _pool_attrs(ctx.attrs)
    include_pad = bool(ctx.attrs["count_include_pad"])
    sizes = x.shape[2:]
    acc = accumulator_dtype(x.dtype) if is_float(x.dtype) else "float64"
    taps = [reduce_axis(k, f"rk{i}") for i, k in enumerate(kernel)]
    count_taps = [reduce_axis(k, f"rc{i}") for i, k in enumerate(kernel)]

    def counted(*pos):
        coords = _tap_coords(pos, [t.var for t in count_taps], strides, dilation, padding)
        if include_pad:  # inside [-pad_begin, size + pad_end)
            cond = _all([_lt(j, as_expr(z) + e) for j, z, e in zip(coords, sizes, padding[nd:])])
        else:
            cond = _guard(coords, sizes, padding, ceil_mode)[1]
        return reduce_sum(select(cond, const(1, acc), const(0, acc)), count_taps)

    # the count varies with the position only where some tap can fall outside what is counted
    if ceil_mode or (not include_pad and max(padding) > 0):
        count = compute(ctx.out_shape[2:], counted, f"{ctx.op_name}_count", acc)
    else:
        count = None

    def element(n, c, *pos):
        coords = _tap_coords(pos, [t.var for t in taps], strides, dilation, padding)
        idx, inside = _guard(coords, sizes, padding, ceil_mode)
        value = cast(x[(n, c, *idx)], acc)
        if inside is not None:
            value = select(inside, value, const(0, acc))
        total = reduce_sum(value, taps)
        divisor = const(int(np.prod(kernel)), acc) if count is None else count[pos]
        return cast(total / divisor, ctx.out_dtype)
    return compute(ctx.out_shape, element, ctx.op_name, ctx.out_dtype)


_SPATIAL = {"conv": _conv, "conv_transpose": _conv_transpose, "max_pool": _max_pool, "avg_pool": _avg_pool}


@legalization("conv2d", "conv3d", "conv2d_transpose", "conv3d_transpose",
              "max_pool2d", "max_pool3d", "avg_pool2d", "avg_pool3d")
def legalize_spatial(ctx):
    nd = len(ctx.inputs[0].shape) - 2
    kind = ctx.op_name.replace(f"{nd}d", "")
    return _SPATIAL[kind](ctx, nd)


# ---------------------------------------------------------- normalization

@legalization("batch_norm")
def legalize_batch_norm(ctx):
    """(x - mean[c]) / sqrt(var[c] + epsilon) * scale[c] + bias[c], in the
    accumulator dtype."""
    x, scale, bias, mean, var = ctx.inputs
    acc = accumulator_dtype(x.dtype)
    eps = const(ctx.attrs["epsilon"], acc)

    def element(*i):
        def channel(t):
            return cast(t[i[1]], acc)
        y = (cast(x[i], acc) - channel(mean)) / intrinsic("sqrt", channel(var) + eps) * channel(scale)
        return cast(y + channel(bias), ctx.out_dtype)
    return compute(ctx.out_shape, element, "batch_norm", ctx.out_dtype)


@legalization("layer_norm")
def legalize_layer_norm(ctx):
    """Three stages over the leading axes [0, axis): the mean, the variance
    (mean of squared deviations), then the normalized, scaled, shifted value,
    in the accumulator dtype."""
    x, scale, *bias = ctx.inputs
    acc = accumulator_dtype(x.dtype)
    rank = len(x.shape)
    axis = ctx.attrs["axis"] % rank
    outer, inner = x.shape[:axis], x.shape[axis:]
    eps = const(ctx.attrs["epsilon"], acc)
    inner_size = as_expr(1)
    for d in inner:
        inner_size = inner_size * d
    count = cast(wrap(inner_size, "int64"), acc)

    def sum_over_inner(name, term):
        r = [reduce_axis(d, f"r{k}") for k, d in enumerate(inner)]
        return compute(outer, lambda *i: reduce_sum(term(i, tuple(v.var for v in r)), r) / count,
                       f"layer_norm_{name}", acc)

    mean = sum_over_inner("mean", lambda i, j: cast(x[i + j], acc))

    def squared_deviation(i, j):
        deviation = cast(x[i + j], acc) - mean[i]
        return deviation * deviation
    var = sum_over_inner("var", squared_deviation)

    def element(*i):
        o = i[:axis]
        y = (cast(x[i], acc) - mean[o]) / intrinsic("sqrt", var[o] + eps)
        y = y * cast(load_broadcast(scale, x.shape, i), acc)
        if bias:
            y = y + cast(load_broadcast(bias[0], x.shape, i), acc)
        return cast(y, ctx.out_dtype)
    return compute(ctx.out_shape, element, "layer_norm", ctx.out_dtype)
