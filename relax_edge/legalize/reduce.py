"""Legalization of reductions (sum, mean, max, min, prod, sum_square, l1,
l2, log_sum, log_sum_exp, argmax, argmin), matmul and softmax /
log_softmax, as reductions of the compute language.

Float sums accumulate in `accumulator_dtype` (float32 for float32 and
float16, float64 for float64), as ONNX Runtime does; the result may differ
from the float64 numpy reference by float32 rounding of the sum (the
schedule's partial accumulators keep that error small)."""

from __future__ import annotations

from ..ir.shape import as_expr
from ..op.reduce import reduce_axes
from ..tir.compute import Reduce, compute, reduce_axis, reduce_max, reduce_min, reduce_sum
from ..tir.expr import cast, const, eq, intrinsic, is_float, maximum, select, wrap
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


def _count(raxes):
    count = as_expr(1)
    for r in raxes:
        count = count * r.extent
    return count


def _abs(v):
    return intrinsic("fabs", v) if is_float(v.dtype) else select(v < const(0, v.dtype), -v, v)


def _divide(v, count):
    """v / count: floats in their dtype (an empty set gives NaN, as numpy), integers in
    float64 over at least 1 (the cast back truncates; an empty set gives 0, never 0 / 0)."""
    if is_float(v.dtype):
        return v / cast(count, v.dtype)
    return cast(v, "float64") / cast(maximum(count, const(1, "int64")), "float64")


def _product(src, raxes):
    return Reduce("mul", src, tuple(raxes), const(1, src.dtype), src.dtype)


# op -> (the reducer, the term of each element, the result from the reduced value and the count)
_REDUCTIONS = {
    "sum": (reduce_sum, None, None),
    "mean": (reduce_sum, None, lambda v, n: _divide(v, wrap(n, "int64"))),
    "max": (reduce_max, None, None),
    "min": (reduce_min, None, None),
    "prod": (_product, None, None),
    "sum_square": (reduce_sum, lambda v: v * v, None),
    "l1": (reduce_sum, _abs, None),
    "l2": (reduce_sum, lambda v: v * v, lambda v, n: intrinsic("sqrt", v)),
    "log_sum": (reduce_sum, None, lambda v, n: intrinsic("log", v)),
}


@legalization(*_REDUCTIONS)
def legalize_reduce(ctx):
    """One reduction per output element; sums and products of floats in the
    accumulator dtype, of integers in int64; max and min in the input dtype."""
    (x,) = ctx.inputs
    axes, raxes = _split_axes(ctx, x)
    rank, keep = len(x.shape), ctx.attrs["keepdims"]
    reducer, term, finish = _REDUCTIONS[ctx.op_name]
    acc_dtype = x.dtype if ctx.op_name in ("max", "min") else accumulator_dtype(x.dtype)

    def element(*i):
        src = cast(x[_source_index(i, axes, raxes, rank, keep)], acc_dtype)
        value = reducer(term(src) if term else src, raxes)
        if finish:
            value = finish(value, _count(raxes))
        return cast(value, x.dtype)
    return compute(ctx.out_shape, element, ctx.op_name, ctx.out_dtype)


@legalization("log_sum_exp")
def legalize_log_sum_exp(ctx):
    """The maximum (0 where it is infinite, as over an empty set), then
    log(sum(exp(x - max))) + max in the accumulator dtype."""
    (x,) = ctx.inputs
    axes, raxes = _split_axes(ctx, x)
    rank, keep = len(x.shape), ctx.attrs["keepdims"]
    acc = accumulator_dtype(x.dtype)
    peak = compute(ctx.out_shape, lambda *i: reduce_max(cast(x[_source_index(i, axes, raxes, rank, keep)], acc),
                                                        raxes), "log_sum_exp_max", acc)
    shift = compute(ctx.out_shape, lambda *i: select(eq(intrinsic("fabs", peak[i]), const(float("inf"), acc)),
                                                     const(0, acc), peak[i]), "log_sum_exp_shift", acc)
    raxes2 = [reduce_axis(r.extent, f"{r.var.name}_s") for r in raxes]

    def element(*i):
        src = cast(x[_source_index(i, axes, raxes2, rank, keep)], acc)
        total = reduce_sum(intrinsic("exp", src - shift[i]), raxes2)
        return cast(intrinsic("log", total) + shift[i], x.dtype)
    return compute(ctx.out_shape, element, "log_sum_exp", ctx.out_dtype)


@legalization("argmax", "argmin")
def legalize_arg_reduce(ctx):
    """Two reductions: the maximum (minimum), then the first (or last) index holding it."""
    (x,) = ctx.inputs
    rank = len(x.shape)
    axis = ctx.attrs["axis"] % rank
    keep, last = ctx.attrs["keepdims"], ctx.attrs["select_last_index"]
    largest = ctx.op_name == "argmax"
    r = reduce_axis(x.shape[axis], "r")
    shape = ctx.out_shape
    best = compute(shape, lambda *i: (reduce_max if largest else reduce_min)(
        x[_source_index(i, (axis,), [r], rank, keep)], [r]), f"{ctx.op_name}_value", x.dtype)
    r2 = reduce_axis(x.shape[axis], "r2")

    def element(*i):
        here = x[_source_index(i, (axis,), [r2], rank, keep)]
        pos = wrap(r2.var, "int64")
        hit = here >= best[i] if largest else here <= best[i]
        if last:
            return Reduce("max", select(hit, pos, const(-1, "int64")), (r2,), const(-1, "int64"), "int64")
        big = wrap(x.shape[axis], "int64")
        return Reduce("min", select(hit, pos, big), (r2,), big, "int64")
    return compute(shape, element, ctx.op_name, "int64")


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
