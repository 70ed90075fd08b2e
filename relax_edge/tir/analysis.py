"""Index analysis of tensor programs, shared by the scheduler and the backends.

1. `depends_on(e, var)`: whether an expression uses a loop variable.
2. `stride(index, var)`: the constant step of a flat index per step of a
   loop variable (0: invariant; None: not linear with a constant step).
3. `at_lane(e, var, lane)`: an expression at one value of a loop variable,
   the lane of a vector or one iteration of an unrolled loop.
4. `vectorizable(loop)`: whether a backend can emit a loop as one vector
   operation per statement: a constant extent (the lane count) and a body
   of stores of float32 / float64 values, each contiguous in the loop. A
   loop marked "vectorized" that fails it is emitted as a plain loop.
"""

from __future__ import annotations

from ..ir.shape import as_expr, free_vars, substitute
from .expr import Index, PrimExpr
from .stmt import For, Seq, Store
from .visit import ExprVisitor, map_expr

__all__ = ["VECTOR_DTYPES", "depends_on", "stride", "at_lane", "stmts_of", "vectorizable"]

VECTOR_DTYPES = ("float32", "float64")   # element types of vector loops


class _UsesVar(ExprVisitor):
    def __init__(self, var):
        self.var, self.found = var, False

    def visit_Index(self, e: Index):
        self.found = self.found or self.var in free_vars(e.value)


def depends_on(e: PrimExpr, var) -> bool:
    """Whether expression `e` uses loop variable `var`."""
    finder = _UsesVar(var)
    finder.visit(e)
    return finder.found


def stride(index: PrimExpr, var) -> int | None:
    """The constant step of a flat index per step of `var` (0: invariant),
    or None when it is not linear in `var` with a constant coefficient."""
    if not isinstance(index, Index):
        return 0 if not depends_on(index, var) else None
    delta = index.value - substitute(index.value, {var: 0})
    if not delta.terms:
        return 0
    if len(delta.terms) != 1 or delta.terms[0][0] != ((var, 1),):
        return None
    return delta.terms[0][1]


def at_lane(e: PrimExpr, var, lane) -> PrimExpr:
    """`e` with loop variable `var` replaced by `lane` (an int or IntExpr)."""
    return map_expr(e, lambda n: Index(substitute(n.value, {var: as_expr(lane)})) if isinstance(n, Index) else None)


def stmts_of(body) -> tuple:
    """The statements of a sequence, or the one statement."""
    return body.stmts if isinstance(body, Seq) else (body,)


def _contiguous_store(s, var) -> bool:
    return isinstance(s, Store) and s.buffer.dtype in VECTOR_DTYPES \
        and stride(s.buffer.flat_index(s.indices), var) == 1


def vectorizable(loop: For) -> bool:
    """Whether the backends emit `loop` as vector statements (point 4)."""
    return loop.extent.is_const and all(_contiguous_store(x, loop.var) for x in stmts_of(loop.body))
