"""Which loops of a tensor program become the dispatch grid.

The rule of this first version: the leading loop nest, collapsed. At each
level the statements must all be loops of one extent (the prover shows the
extents equal); they are fused into one loop (later stages' variables
renamed to the first's) and the level joins the grid when that fused loop is
independent in its variable, by the scheduler's test
(transform/schedule.py's `_independent`: every store to a non-local buffer
indexes one axis with exactly the loop variable, and every load of a stored
buffer reads that axis with it too). Such iterations touch disjoint
elements, so fusing the stages and running the iterations as invocations in
any order computes what the loops in sequence did. Then the fused body is
tried as the next level. Everything below the grid runs serially in one
invocation.

A program with no such leading loop (a reduction to one value at the top
level, stages of different extents) gets an empty grid: one invocation runs
the whole body. That is correct but serial; reductions over shared memory
come later.

A stage that the host scheduler split into `if work > T: <parallel> else:
<serial>` (the two are the same loops) is read as its parallel branch.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...ir.shape import Proof, as_expr, prove_equal
from ...tir.analysis import stmts_of
from ...tir.stmt import For, IfThenElse, Seq
from ...transform.schedule import _independent, _subst

__all__ = ["Grid", "map_grid"]


@dataclass(frozen=True)
class Grid:
    """`loops`: (loop variable, extent) from the outermost; `body`: what one
    invocation runs with those variables set from its index."""
    loops: tuple
    body: object

    @property
    def items(self):
        """The number of invocations: the product of the grid's extents (an IntExpr)."""
        total = as_expr(1)
        for _, extent in self.loops:
            total = total * extent
        return total


def _unsplit(s):
    """The parallel branch of a stage the host scheduler split by its work."""
    if isinstance(s, IfThenElse) and isinstance(s.then_body, For) and s.then_body.kind == "parallel" \
            and isinstance(s.else_body, For):
        return s.then_body
    return s


def _fused(stmts):
    """The statements as one loop, or None when they are not loops of one extent."""
    if not stmts or not all(isinstance(s, For) for s in stmts):
        return None
    first = stmts[0]
    if not all(prove_equal(s.extent, first.extent) is Proof.YES for s in stmts[1:]):
        return None
    bodies = [first.body] + [_subst(s.body, {s.var: as_expr(first.var)}) for s in stmts[1:]]
    return For(first.var, first.extent, Seq(bodies))


def map_grid(program) -> Grid:
    """The dispatch grid of `program` (see the module docstring)."""
    loops = []
    stmts = tuple(_unsplit(s) for s in stmts_of(program.body))
    while True:
        loop = _fused(stmts)
        if loop is None or not _independent(loop):
            break
        loops.append((loop.var, loop.extent))
        stmts = tuple(_unsplit(s) for s in stmts_of(loop.body))
    body = stmts[0] if len(stmts) == 1 else Seq(list(stmts))
    return Grid(tuple(loops), body)
