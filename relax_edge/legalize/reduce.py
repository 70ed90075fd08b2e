"""Legalization of reductions (sum, mean, max, min, argmax), matmul and
softmax / log_softmax, as reductions of the compute language.

Float sums accumulate in `accumulator_dtype` (float32 for float32 and
float16, float64 for float64), as ONNX Runtime does; the result may differ
from the float64 numpy reference by float32 rounding of the sum (the
schedule's partial accumulators keep that error small)."""

from __future__ import annotations

from ..ir.shape import as_expr
from ..op.reduce import reduce_axes
from ..tir.compute import Reduce, compute, reduce_axis, reduce_max, reduce_min, reduce_sum
from ..tir.expr import cast, const, intrinsic, is_float, select, wrap
from .common import broadcast_indices, legalization


def accumulator_dtype(dtype: str) -> str:
    """The dtype float sums of `dtype` accumulate in; int64 for integers."""
    if is_float(dtype):
        return "float64" if dtype == "float64" else "float32"
    return "int64"


def _split_axes(ctx, x):
    rank = len(x.shape)
    axis = ctx.attrs["axis"]
    axes = reduce_axes(axis, rank) if axis != () else ()
    return axes, [reduce_axis(x.shape[a], f"r{a}") for a in axes]


def _source_index(i, axes, raxes, rank, keepdims):
    """Input indices from output indices `i` and reduction variables."""
    out, it = [], iter(i)
    for d in range(rank):
        if d in axes:
            out.append(raxes[axes.index(d)].var)
            if keepdims:
                next(it)
        else:
            out.append(next(it))
    return tuple(out)


_REDUCERS = {"sum": reduce_sum, "max": reduce_max, "min": reduce_min, "mean": reduce_sum}


@legalization("sum", "mean", "max", "min")
def legalize_reduce(ctx):
    (x,) = ctx.inputs
    axes, raxes = _split_axes(ctx, x)
    rank, keep = len(x.shape), ctx.attrs["keepdims"]
    reducer = _REDUCERS[ctx.op_name]

    def element(*i):
        src = x[_source_index(i, axes, raxes, rank, keep)]
        acc_dtype = accumulator_dtype(x.dtype) if is_float(x.dtype) and ctx.op_name in ("sum", "mean") else x.dtype
        value = reducer(cast(src, acc_dtype), raxes)
        if ctx.op_name == "mean":
            count = as_expr(1)
            for r in raxes:
                count = count * r.extent
            value = value / cast(wrap(count, "int64"), acc_dtype)
        return cast(value, x.dtype)
    return compute(ctx.out_shape, element, ctx.op_name, ctx.out_dtype)


@legalization("argmax")
def legalize_argmax(ctx):
    """Two reductions: the maximum, then the first (or last) index holding it."""
    (x,) = ctx.inputs
    rank = len(x.shape)
    axis = ctx.attrs["axis"] % rank
    keep, last = ctx.attrs["keepdims"], ctx.attrs["select_last_index"]
    r = reduce_axis(x.shape[axis], "r")
    shape = ctx.out_shape
    best = compute(shape, lambda *i: reduce_max(x[_source_index(i, (axis,), [r], rank, keep)], [r]),
                   "argmax_value", x.dtype)
    r2 = reduce_axis(x.shape[axis], "r2")

    def element(*i):
        here = x[_source_index(i, (axis,), [r2], rank, keep)]
        pos = wrap(r2.var, "int64")
        hit = here >= best[i]
        if last:
            return Reduce("max", select(hit, pos, const(-1, "int64")), (r2,), const(-1, "int64"), "int64")
        big = wrap(x.shape[axis], "int64")
        return Reduce("min", select(hit, pos, big), (r2,), big, "int64")
    return compute(shape, element, "argmax", "int64")


@legalization("matmul")
def legalize_matmul(ctx):
    a, b = ctx.inputs
    sa = a.shape if len(a.shape) > 1 else (as_expr(1),) + a.shape
    sb = b.shape if len(b.shape) > 1 else b.shape + (as_expr(1),)
    k = reduce_axis(sa[-1], "k")
    out = ctx.out_shape
    batch_rank = len(out) - (len(a.shape) > 1) - (len(b.shape) > 1)
    batch = out[:batch_rank]
    acc = accumulator_dtype(a.dtype) if is_float(a.dtype) else a.dtype

    def element(*i):
        bi = i[:batch_rank]
        row = i[batch_rank] if len(a.shape) > 1 else 0
        col = i[-1] if len(b.shape) > 1 else 0
        ia = broadcast_indices(sa[:-2], batch, bi) + (row, k.var)
        ib = broadcast_indices(sb[:-2], batch, bi) + (k.var, col)
        ia = ia[-len(a.shape):] if len(a.shape) > 1 else (k.var,)
        ib = ib[-len(b.shape):] if len(b.shape) > 1 else (k.var,)
        return cast(reduce_sum(cast(a[ia], acc) * cast(b[ib], acc), [k]), a.dtype)
    return compute(out, element, "matmul", ctx.out_dtype)


@legalization("softmax", "log_softmax")
def legalize_softmax(ctx):
    """max over the axis, sum of exp(x - max), then the normalized value,
    computed in the accumulator dtype."""
    (x,) = ctx.inputs
    acc = accumulator_dtype(x.dtype)
    rank = len(x.shape)
    axis = ctx.attrs["axis"] % rank
    outer = tuple(d for k, d in enumerate(x.shape) if k != axis)

    def at(i, j):
        return tuple(i[:axis]) + (j,) + tuple(i[axis:])

    r = reduce_axis(x.shape[axis], "r")
    peak = compute(outer, lambda *i: reduce_max(x[at(i, r.var)], [r]), f"{ctx.op_name}_max", x.dtype)
    r2 = reduce_axis(x.shape[axis], "r2")
    total = compute(outer, lambda *i: reduce_sum(intrinsic("exp", cast(x[at(i, r2.var)] - peak[i], acc)), [r2]),
                    f"{ctx.op_name}_sum", acc)

    def element(*i):
        rest = tuple(v for k, v in enumerate(i) if k != axis)
        shifted = cast(x[i] - peak[rest], acc)
        if ctx.op_name == "softmax":
            return cast(intrinsic("exp", shifted) / total[rest], x.dtype)
        return cast(shifted - intrinsic("log", total[rest]), x.dtype)
    return compute(ctx.out_shape, element, ctx.op_name, ctx.out_dtype)
