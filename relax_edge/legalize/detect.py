"""Detection-head operators as tensor programs.

1. `topk_indices`: two stages per row. `rank[j]` counts the elements that
   come before element j (larger, or equal at a lower index; NaN above every
   number, so the order is total and the ranks are a permutation), then
   output position p holds the j whose rank is p. O(n^2 + n*k) per row
   (the compute language has no sequential selection); a k beyond the axis
   is a run-time assertion, never a read out of bounds.
2. `non_max_suppression` and `unique` (and `nonzero`) have no tensor
   program: their result's length is only known after the kernel runs, which
   the compute language cannot express. transform/legalize.py makes them
   `call_extern`s of library kernels (relax_edge/library/data_dependent.py,
   runtime_c/kernels/detect.c) that write the result at its capacity and
   their count; the match_cast after each binds the count at run time
   (ABI 3: plan reports the capacity, run the actual dims).
"""

from __future__ import annotations

from ..tir.compute import Reduce, compute, reduce_axis, reduce_sum
from ..tir.expr import const, eq, is_float, logical_and, logical_not, logical_or, ne, select, wrap
from .common import legalization


def _before(a, b, a_pos, b_pos, largest: bool):
    """Element `a` (at a_pos) comes before element `b` (at b_pos)."""
    better = a > b if largest else a < b
    same = eq(a, b)
    if is_float(a.dtype):  # NaN ranks above every number (numpy's sort order, flipped for largest)
        a_nan, b_nan = ne(a, a), ne(b, b)
        nan_first = logical_and(a_nan, logical_not(b_nan))
        better = logical_or(nan_first, better) if largest else logical_or(logical_and(b_nan, logical_not(a_nan)),
                                                                          better)
        same = logical_or(same, logical_and(a_nan, b_nan))
    return logical_or(better, logical_and(same, a_pos < b_pos))


@legalization("topk_indices")
def legalize_topk_indices(ctx):
    (x,) = ctx.inputs
    rank_of = len(x.shape)
    axis = ctx.attrs["axis"] % rank_of
    n, k = x.shape[axis], ctx.attrs["k"]
    largest = ctx.attrs["largest"]
    m = reduce_axis(n, "m")

    def at(i, pos):
        return tuple(i[:axis]) + (pos,) + tuple(i[axis + 1:])

    def rank(*i):
        ahead = _before(x[at(i, m.var)], x[i], wrap(m.var, "int64"), wrap(i[axis], "int64"), largest)
        return reduce_sum(select(ahead, const(1, "int64"), const(0, "int64")), [m])
    ranks = compute(x.shape, rank, "topk_rank", "int64")
    j = reduce_axis(n, "j")
    big = wrap(n, "int64")

    def element(*i):
        hit = eq(ranks[at(i, j.var)], wrap(i[axis], "int64"))
        return Reduce("min", select(hit, wrap(j.var, "int64"), big), (j,), big, "int64")

    def k_in_range(*i):
        kk = wrap(k, "int64")
        ok = logical_and(kk >= const(0, "int64"), kk <= big)
        return [(ok, f"k={{}} is outside [0, {{}}] (the size of axis {axis})", (kk, big))]
    return compute(ctx.out_shape, element, "topk_indices", "int64", asserts=k_in_range)
