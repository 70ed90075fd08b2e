"""Legalization of shape-manipulation operators as copy kernels (no views
yet): reshape, transpose, concat, strided_slice, take, gather_elements,
broadcast_to, tile, pad, trilu, and tensors made from sizes."""

from __future__ import annotations

from ..ir.shape import as_expr, max_expr, min_expr
from ..op.manipulate import slice_extent
from ..tir.compute import compute
from ..tir.expr import Load, cast, const, eq, index, logical_and, maximum, minimum, select, wrap
from .common import legalization, load_broadcast


def _unravel(flat, shape):
    """Row-major indices of flat offset `flat` in `shape`."""
    out = []
    for d in reversed(shape):
        out.append(flat % d)
        flat = flat // d
    return tuple(reversed(out))


def _ravel(idx, shape):
    flat = as_expr(0)
    for i, d in zip(idx, shape):
        flat = flat * d + i
    return flat


@legalization("reshape")
def legalize_reshape(ctx):
    (x,) = ctx.inputs
    shape = ctx.out_shape
    return compute(shape, lambda *i: x[_unravel(_ravel(i, shape), x.shape)], "reshape", ctx.out_dtype)


@legalization("transpose")
def legalize_transpose(ctx):
    (x,) = ctx.inputs
    axes = ctx.attrs["axes"]
    rank = len(x.shape)
    axes = tuple(reversed(range(rank))) if axes is None else tuple(a % rank for a in axes)

    def element(*i):
        src = [None] * rank
        for out_axis, in_axis in enumerate(axes):
            src[in_axis] = i[out_axis]
        return x[tuple(src)]
    return compute(ctx.out_shape, element, "transpose", ctx.out_dtype)


@legalization("concat")
def legalize_concat(ctx):
    axis = ctx.attrs["axis"] % len(ctx.out_shape)

    def element(*i):
        starts, pos = [], as_expr(0)
        for t in ctx.inputs:
            starts.append(pos)
            pos = pos + t.shape[axis]
        value = None
        for t, start in reversed(list(zip(ctx.inputs, starts))):
            src = list(i)
            src[axis] = as_expr(i[axis]) - start
            here = Load(t.buffer, _clamped(src, axis, t.shape[axis]))
            end = wrap(start + t.shape[axis], "int64")
            value = here if value is None else select(wrap(i[axis], "int64") < end, here, value)
        return value
    return compute(ctx.out_shape, element, "concat", ctx.out_dtype)


def _clamped(src, axis, extent):
    """Keep a select's untaken branch in bounds: clamp the concat axis index."""
    src = list(src)
    src[axis] = max_expr(0, min_expr(src[axis], as_expr(extent) - 1))
    return tuple(src)


@legalization("strided_slice")
def legalize_strided_slice(ctx):
    (x,) = ctx.inputs
    a = ctx.attrs
    rank = len(x.shape)
    axes = tuple(range(len(a["begin"]))) if a["axes"] is None else tuple(ax % rank for ax in a["axes"])
    strides = (1,) * len(axes) if a["strides"] is None else tuple(a["strides"])
    starts = {}
    for b, e, ax, s in zip(a["begin"], a["end"], axes, strides):
        starts[ax] = (slice_extent(x.shape[ax], b, e, s)[0], s)

    def element(*i):
        src = [as_expr(i[d]) * starts[d][1] + starts[d][0] if d in starts else i[d] for d in range(rank)]
        return x[tuple(src)]
    return compute(ctx.out_shape, element, "strided_slice", ctx.out_dtype)


def _wrap_index(idx_value, dim):
    """A gather index (possibly negative) as an int64 index clamped into
    [0, dim), so no load leaves the buffer; `_index_check` reports the
    out-of-range ones."""
    v = cast(idx_value, "int64")
    d = wrap(dim, "int64")
    v = select(v < const(0, "int64"), v + d, v)
    return maximum(const(0, "int64"), minimum(v, d - wrap(1, "int64")))


def _index_check(idx_value, dim, axis):
    v, d = cast(idx_value, "int64"), wrap(dim, "int64")
    ok = logical_and(v >= const(0, "int64") - d, v < d)
    return [(ok, f"index {{}} out of range [-{{}}, {{}}) on axis {axis}", (v, d, d))]


@legalization("take")
def legalize_take(ctx):
    x, ind = ctx.inputs
    axis = ctx.attrs["axis"] % len(x.shape)
    k = len(ind.shape)

    def element(*i):
        pos = _wrap_index(ind[i[axis:axis + k]], x.shape[axis])
        return x[tuple(i[:axis]) + (pos,) + tuple(i[axis + k:])]
    return compute(ctx.out_shape, element, "take", ctx.out_dtype,
                   asserts=lambda *i: _index_check(ind[i[axis:axis + k]], x.shape[axis], axis))


@legalization("gather_elements")
def legalize_gather_elements(ctx):
    x, ind = ctx.inputs
    axis = ctx.attrs["axis"] % len(x.shape)

    def element(*i):
        src = list(i)
        src[axis] = _wrap_index(ind[i], x.shape[axis])
        return x[tuple(src)]
    return compute(ctx.out_shape, element, "gather_elements", ctx.out_dtype,
                   asserts=lambda *i: _index_check(ind[i], x.shape[axis], axis))


@legalization("broadcast_to")
def legalize_broadcast_to(ctx):
    (x,) = ctx.inputs
    shape = ctx.out_shape
    return compute(shape, lambda *i: load_broadcast(x, shape, i), "broadcast_to", ctx.out_dtype)


@legalization("tile")
def legalize_tile(ctx):
    (x,) = ctx.inputs
    return compute(ctx.out_shape, lambda *i: x[tuple(as_expr(v) % d for v, d in zip(i, x.shape))],
                   "tile", ctx.out_dtype)


@legalization("pad")
def legalize_pad(ctx):
    (x,) = ctx.inputs
    pads, mode = ctx.attrs["pads"], ctx.attrs["mode"]
    rank = len(x.shape)

    def source(i, d):
        j = as_expr(i) - pads[d]
        n = x.shape[d]
        if mode != "constant" and pads[d] == 0 and pads[d + rank] == 0:
            return j
        if mode == "edge":
            return _clamp(j, n)
        if mode == "wrap":
            return j % n
        if mode == "reflect":  # period 2n - 2; n == 1 (also a size that is 1 at run time) reflects onto itself
            return _reflect(j % max_expr(n * 2 - 2, 1), n)
        return j

    def element(*i):
        src = [source(i[d], d) for d in range(rank)]
        if mode != "constant":
            return x[tuple(src)]
        inside = None
        for d in range(rank):
            ok = logical_and(wrap(src[d], "int64") >= wrap(0, "int64"),
                             wrap(src[d], "int64") < wrap(x.shape[d], "int64"))
            inside = ok if inside is None else logical_and(inside, ok)
        value = x[tuple(_clamp(s, x.shape[d]) for d, s in enumerate(src))]
        return value if inside is None else select(inside, value, const(ctx.attrs["value"], x.dtype))
    return compute(ctx.out_shape, element, "pad", ctx.out_dtype)


def _clamp(j, n):
    return max_expr(0, min_expr(j, as_expr(n) - 1))


def _reflect(m, n):
    return min_expr(m, as_expr(n) * 2 - 2 - m)


@legalization("trilu")
def legalize_trilu(ctx):
    (x,) = ctx.inputs
    k, upper = ctx.attrs["k"], ctx.attrs["upper"]

    def element(*i):
        row, col = wrap(i[-2], "int64"), wrap(i[-1], "int64")
        keep = (col - row >= wrap(k, "int64")) if upper else (col - row <= wrap(k, "int64"))
        return select(keep, x[i], const(0, x.dtype))
    return compute(ctx.out_shape, element, "trilu", ctx.out_dtype)


@legalization("full")
def legalize_full(ctx):
    value = const(ctx.attrs["value"], ctx.out_dtype)
    return compute(ctx.out_shape, lambda *i: value, "full", ctx.out_dtype)


@legalization("arange")
def legalize_arange(ctx):
    a = ctx.attrs
    dtype = ctx.out_dtype
    return compute(ctx.out_shape, lambda i: cast(index(as_expr(a["start"]) + as_expr(i) * a["step"]), dtype),
                   "arange", dtype)


@legalization("shape_to_tensor")
def legalize_shape_to_tensor(ctx):
    values = ctx.attrs["values"]

    def element(i):
        out = wrap(values[-1], "int64")
        for k in range(len(values) - 2, -1, -1):
            out = select(eq(i, k), wrap(values[k], "int64"), out)
        return out
    return compute(ctx.out_shape, element, "shape_to_tensor", "int64")

