"""Scatter, gather-nd and sampling operators as tensor programs.

Guaranteed:
1. A scatter is written as a gather over its output, so the program is pure
   (one value per output element, no store order between elements, safe to
   vectorize and thread): each output element folds, in index order, every
   update whose index lands on it into its data element. With reduction
   none a first stage finds the last such update (a max over update
   numbers) and a second takes it or keeps the data; add / mul / max / min
   reduce from the data element in index order (the vectorized schedule of
   a float add/max/min reduction changes the order by rounding only).
2. Out-of-range indices (outside [-dim, dim) after counting negatives from
   the end; TensorScatter: a write past the cache in linear mode) are
   skipped: they match no output element, so nothing is written out of
   bounds. The numpy references raise IndexError instead. GatherND clamps
   an out-of-range index into its axis and fails the program's index check
   (as take and gather_elements do).
3. Loads of indices and updates stay in their buffers for every output
   element when those buffers are not empty.

Cost: a scatter visits, per output element, the updates that could land on
it: ScatterElements the `indices` extent along `axis`, ScatterND every
index tuple (work data size x number of tuples).
"""

from __future__ import annotations

from ..ir.shape import as_expr, bounds, max_expr, min_expr
from ..tir.compute import Reduce, _highest, _lowest, compute, reduce_axis
from ..tir.expr import cast, const, eq, index, logical_and, select, wrap
from .common import legalization
from .manipulate import _index_check, _wrap_index

I64 = "int64"
_COMBINER = {"add": "add", "mul": "mul", "max": "max", "min": "min"}


def _identity(reduction, dtype):
    """The update value that leaves a position unchanged under `reduction`."""
    value = {"add": 0, "mul": 1, "max": _lowest(dtype), "min": _highest(dtype)}[reduction]
    return const(value, dtype)


def _counted_from_end(value, dim):
    """An index value as int64, negatives counted from the end (not clamped)."""
    v, d = cast(value, I64), wrap(dim, I64)
    return select(v < const(0, I64), v + d, v)


def _clamp(i, extent):
    return max_expr(0, min_expr(as_expr(i), as_expr(extent) - 1))


def _all(conditions):
    out = None
    for c in conditions:
        out = c if out is None else logical_and(out, c)
    return out


def _fold_updates(ctx, match, value, axes, data_at):
    """The scatter of one output element: the updates where `match` holds,
    folded into `data_at` by the reduction, in index order over `axes`; for
    reduction none, (the last matching update number, or -1) by `value`'s
    caller. Returns the output tensor."""
    data = ctx.inputs[0]
    reduction = ctx.attrs["reduction"]
    dtype = data.dtype
    if reduction != "none":
        def element(*p):
            return Reduce(_COMBINER[reduction], select(match(p), value(p, None), _identity(reduction, dtype)),
                          tuple(axes), data_at(p), dtype)
        return compute(ctx.out_shape, element, "scatter", dtype)
    number = _update_number(axes)

    def last(*p):
        return Reduce("max", select(match(p), number, const(-1, I64)), tuple(axes), const(-1, I64), I64)
    winner = compute(ctx.out_shape, last, "scatter_last", I64)

    def element(*p):
        w = winner[p]
        return select(w >= const(0, I64), value(p, w), data_at(p))
    return compute(ctx.out_shape, element, "scatter", dtype)


def _update_number(axes):
    """The row-major number of the update at reduction axes `axes`."""
    flat = as_expr(0)
    for a in axes:
        flat = flat * a.extent + a.var
    return index(flat)


def _unravel(flat, extents):
    """Row-major indices (int64 expressions) of update number `flat`."""
    out = []
    for d in reversed(extents):
        d = wrap(max_expr(d, 1), I64)
        out.append(flat % d)
        flat = flat // d
    return list(reversed(out))


@legalization("scatter_elements")
def legalize_scatter_elements(ctx):
    data, ind, upd = ctx.inputs
    rank = len(data.shape)
    axis = ctx.attrs["axis"] % rank
    extent = as_expr(ind.shape[axis])
    for d in range(rank):  # no update at all when another indices dim is 0
        if d != axis and bounds(ind.shape[d])[0] < 1:
            extent = min_expr(extent, as_expr(ind.shape[d]) * ind.shape[axis])
    k = reduce_axis(extent, "k")

    def source(p, along):
        """The update position q for output p: p itself off the axis (clamped into indices), `along` on it."""
        return tuple(along if d == axis else _clamp(p[d], ind.shape[d]) for d in range(rank))

    def match(p):
        inside = [wrap(p[d], I64) < wrap(ind.shape[d], I64) for d in range(rank)
                  if d != axis and as_expr(ind.shape[d]) != as_expr(data.shape[d])]
        hit = eq(_counted_from_end(ind[source(p, k.var)], data.shape[axis]), wrap(p[axis], I64))
        return _all([*inside, hit])

    def value(p, w):
        return upd[source(p, k.var if w is None else w)]

    return _fold_updates(ctx, match, value, [k], lambda p: data[p])


@legalization("scatter_nd")
def legalize_scatter_nd(ctx):
    data, ind, upd = ctx.inputs
    tuple_len = ind.shape[-1].value
    lead = ind.shape[:-1]
    axes = [reduce_axis(n, f"m{j}") for j, n in enumerate(lead)]

    def match(p):
        m = tuple(a.var for a in axes)
        return _all([eq(_counted_from_end(ind[m + (j,)], data.shape[j]), wrap(p[j], I64))
                     for j in range(tuple_len)])

    def value(p, w):
        m = tuple(a.var for a in axes) if w is None else tuple(_unravel(w, lead))
        return upd[m + tuple(p[tuple_len:])]

    return _fold_updates(ctx, match, value, axes, lambda p: data[p])


@legalization("gather_nd")
def legalize_gather_nd(ctx):
    data, ind = ctx.inputs
    b = ctx.attrs["batch_dims"]
    tuple_len = ind.shape[-1].value
    outer = len(ind.shape) - 1        # output dims taken from indices

    def at(o, j):
        return ind[tuple(o[:outer]) + (j,)]

    def element(*o):
        picked = tuple(_wrap_index(at(o, j), data.shape[b + j]) for j in range(tuple_len))
        return data[tuple(o[:b]) + picked + tuple(o[outer:])]

    def checks(*o):
        out = []
        for j in range(tuple_len):
            out += _index_check(at(o, j), data.shape[b + j], b + j)
        return out
    return compute(ctx.out_shape, element, "gather_nd", ctx.out_dtype, asserts=checks)


@legalization("tensor_scatter")
def legalize_tensor_scatter(ctx):
    past, upd, wi = ctx.inputs
    axis = ctx.attrs["axis"] % len(past.shape)
    cache_len, seq = past.shape[axis], upd.shape[axis]

    def element(*p):
        s = wrap(p[axis], I64) - cast(wi[(p[0],)], I64)
        if ctx.attrs["mode"] == "circular":
            s = s % wrap(cache_len, I64)
        inside = logical_and(s >= const(0, I64), s < wrap(seq, I64))
        src = list(p)
        src[axis] = select(s < const(0, I64), const(0, I64), s)
        src[axis] = select(src[axis] < wrap(seq, I64), src[axis], wrap(max_expr(as_expr(seq) - 1, 0), I64))
        return select(inside, upd[tuple(src)], past[p])
    return compute(ctx.out_shape, element, "tensor_scatter", ctx.out_dtype)


from . import sampling  # noqa: E402,F401  (registers grid_sample and roi_align)
