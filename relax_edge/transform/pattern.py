"""Pattern analysis of tensor programs: what kind of computation a program
is, read from its loops, loads and stores (never from the operator name),
so that a hand-written program and a legalized one are treated alike. This
is the analysis that drives fusion (relax_edge/transform/fuse.py).

1. The *output nest* of a program with one output: the only store to the
   output sits under a perfect nest of loops whose variables are exactly
   the store's indices, in order, with the output's shape as extents.
   Before the nest there may be stages that write scratch buffers; inside
   it, around the store, only local accumulators, lets, asserts and inner
   loops that do not store to the output.
2. Patterns, from the most to the least fusable:
   - ELEMENTWISE: one loop nest, one store, every input loaded at exactly
     the loop variables (a program with no input qualifies);
   - BROADCAST: as elementwise, but some inputs are loaded at a subset of
     the loop variables in order, at 0 along a dimension of 1, or at
     `var % size`, so an input of the output's shape is still read only at
     the element being written (in-place safe);
   - INJECTIVE: one store per output element and no reduction, loads at any
     index (transpose, slicing, concat, gather, pad);
   - REDUCTION: loops that are not the output's feed each output element
     (sum, mean, softmax, layer_norm), each input element read once per
     output element it contributes to;
   - OUTPUT_FUSABLE: a reduction that re-reads its inputs across output
     elements (matmul, convolution, pooling), still storing each output
     element once at the end of its nest;
   - OPAQUE: anything else (several outputs or stores to the output, a
     store that is not at the loop variables, conditionals).

Not guaranteed: the classification is syntactic and conservative; it does
not prove that indices stay in bounds, and cost figures are estimates
(arithmetic node counts, re-read factors from loop extents).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from ..ir.shape import IntExpr, Proof, _FloorMod, free_vars, prove_equal
from ..tir.analysis import stmts_of
from ..tir.expr import BinOp, Cast, Compare, Index, Intrinsic, Load, Logical, Not, Select
from ..tir.program import TensorProgram
from ..tir.stmt import Allocate, Assert, For, IfThenElse, Let, Seq, Store
from ..tir.visit import NodeFunctor, StmtVisitor, map_expr, walk_stmt

__all__ = ["Pattern", "OutputNest", "analyze", "output_nest", "inline_form", "at_loop_vars", "reads_per_element",
           "arith_cost", "stmt_exprs", "loads_in"]


class Pattern(str, enum.Enum):
    ELEMENTWISE = "elementwise"
    BROADCAST = "broadcast"
    INJECTIVE = "injective"
    REDUCTION = "reduction"
    OUTPUT_FUSABLE = "output_fusable"
    OPAQUE = "opaque"


_ORDER = [Pattern.ELEMENTWISE, Pattern.BROADCAST, Pattern.INJECTIVE]


@dataclass(frozen=True)
class OutputNest:
    loops: tuple      # the For nodes whose variables index the output, outermost first
    store: Store      # the only store to the output
    tail: object      # the innermost output loop's body (the whole nest when the output is a scalar)
    stages: tuple     # top-level statements before the nest (they write scratch)


# ------------------------------------------------------------ small walks

class _OwnExprs(NodeFunctor):
    """The expressions a statement itself holds (not its children's)."""

    def visit_Store(self, s: Store):
        return [*s.indices, s.value]

    def visit_IfThenElse(self, s: IfThenElse):
        return [s.cond]

    def visit_Let(self, s: Let):
        return [s.value]

    def visit_Assert(self, s: Assert):
        return [s.cond, *s.values]

    def visit_nested(self, s):
        return []

    visit_For = visit_Allocate = visit_Seq = visit_nested


_OWN_EXPRS = _OwnExprs()


def stmt_exprs(s) -> list:
    """The expressions a statement itself holds (not its children's)."""
    return _OWN_EXPRS.visit(s)


def loads_in(e) -> list:
    """Every Load in expression `e`, nested ones included."""
    found = []

    def visit(node):
        if isinstance(node, Load):
            found.append(node)
            for i in node.indices:
                map_expr(i, visit)
            return node
        return None
    map_expr(e, visit)
    return found


def _index_vars(load: Load) -> set:
    out = set()
    for i in load.indices:
        def visit(node):
            if isinstance(node, Index):
                out.update(free_vars(node.value))
            return None
        map_expr(i, visit)
    return out


class _LoopScope(StmtVisitor):
    """A walk that knows the For nodes enclosing each statement (`loops`, outermost first)."""

    loops: tuple = ()

    def visit_For(self, s: For):
        outer, self.loops = self.loops, self.loops + (s,)
        super().visit_For(s)
        self.loops = outer


class _WalkWithLoops(_LoopScope):
    def __init__(self, fn):
        self.fn = fn

    def visit(self, node):
        self.fn(node, self.loops)
        super().visit(node)


def _walk_with_loops(s, fn):
    """fn(statement, enclosing For nodes) for every statement."""
    _WalkWithLoops(fn).visit(s)


# ------------------------------------------------------------ the output nest

def _stores_to(body, buffer) -> list:
    found = []
    walk_stmt(body, lambda s: found.append(s) if isinstance(s, Store) and s.buffer is buffer else None)
    return found


class _ReachesPlainly(NodeFunctor):
    """Whether `store` is inside a statement through Seq / Allocate / Let only."""

    def __init__(self, store):
        self.store = store

    def visit(self, node):
        return node is self.store or super().visit(node)

    def visit_Seq(self, s: Seq):
        return any(self.visit(x) for x in s.stmts)

    def visit_body(self, s):
        return self.visit(s.body)

    visit_Allocate = visit_Let = visit_body

    def generic_visit(self, s):
        return False


def _reaches_plainly(tail, store) -> bool:
    return _ReachesPlainly(store).visit(tail)


def output_nest(program: TensorProgram) -> OutputNest | None:
    """The output nest (see the module's point 1), or None."""
    if len(program.outputs) != 1:
        return None
    out = program.outputs[0]
    stores = _stores_to(program.body, out)
    if len(stores) != 1:
        return None
    stmts = stmts_of(program.body)
    if not stmts:
        return None
    nest, stages = stmts[-1], tuple(stmts[:-1])
    if any(_stores_to(s, out) for s in stages):
        return None
    loops, node = [], nest
    while isinstance(node, For) and len(loops) < len(out.shape):
        loops.append(node)
        node = node.body
    store = stores[0]
    if len(loops) != len(out.shape) or not _reaches_plainly(node, store):
        return None
    for loop, idx, dim in zip(loops, store.indices, out.shape):
        if not isinstance(idx, Index) or idx.value.as_var() is not loop.var:
            return None
        if loop.extent != dim and prove_equal(loop.extent, dim) is not Proof.YES:
            return None
    return OutputNest(tuple(loops), store, node, stages)


# ------------------------------------------------------------ classification

def _mod_of_var(e: IntExpr):
    """v when e is exactly `v % size`, else None."""
    if len(e.terms) != 1 or e.terms[0][1] != 1 or len(e.terms[0][0]) != 1:
        return None
    atom, power = e.terms[0][0][0]
    if power != 1 or not isinstance(atom, _FloorMod):
        return None
    return atom.args[0].as_var()


def at_loop_vars(load: Load, loops) -> bool:
    """The load reads at exactly the loop variables of `loops` (For nodes),
    or at 0 along a loop of extent 1."""
    return len(load.indices) == len(loops) and all(
        isinstance(i, Index) and (i.value.as_var() is loop.var or (loop.extent == 1 and i.value == 0))
        for i, loop in zip(load.indices, loops))


def _load_pattern(load: Load, loops: tuple) -> Pattern:
    if at_loop_vars(load, loops):
        return Pattern.ELEMENTWISE
    loop_vars = tuple(loop.var for loop in loops)
    idx = load.indices
    positions = []
    for i, dim in zip(idx, load.buffer.shape):
        if not isinstance(i, Index):
            return Pattern.INJECTIVE
        e = i.value
        if e == 0 and dim == 1:
            continue
        v = e.as_var() or _mod_of_var(e)
        if v is None or v not in loop_vars:
            return Pattern.INJECTIVE
        positions.append(loop_vars.index(v))
    if positions != sorted(set(positions)):
        return Pattern.INJECTIVE
    return Pattern.BROADCAST


def _loop_vars(program: TensorProgram):
    """(all loop variables, those of loops that enclose a store to a
    parameter: output or scratch); the others are reduction loops."""
    walk = _LoopVars(set(program.params))
    walk.visit(program.body)
    return walk.every, walk.spatial


class _LoopVars(_LoopScope):
    def __init__(self, params):
        self.params, self.every, self.spatial = params, set(), set()

    def visit_For(self, s: For):
        self.every.add(s.var)
        super().visit_For(s)

    def visit_Store(self, s: Store):
        if s.buffer in self.params:
            self.spatial.update(loop.var for loop in self.loops)


def _reuses_inputs(program: TensorProgram) -> bool:
    """Some input element that a reduction runs over is read by several
    output (or scratch) elements: an enclosing spatial variable is missing
    from the load's indices, or one index mixes spatial and reduction
    variables (a window)."""
    (every, spatial), inputs = _loop_vars(program), set(program.inputs)
    found = []

    def visit(s, loops):
        reduction = [loop.var for loop in loops if loop.var not in spatial]
        if not reduction:
            return
        outer = {loop.var for loop in loops if loop.var in spatial and loop.extent != 1}
        for e in stmt_exprs(s):
            for load in loads_in(e):
                if load.buffer not in inputs:
                    continue
                used = _index_vars(load)
                if not used & set(reduction):
                    continue     # the same element for the whole reduction: a bias, a scalar
                mixed = any(_window_vars(i, every, spatial) for i in load.indices)
                found.append(bool(outer - used) or mixed)
    _walk_with_loops(program.body, visit)
    return any(found)


def _window_vars(i, every, spatial) -> set:
    """The reduction variables of index `i` when it also uses a spatial one
    (a sliding window), else nothing."""
    if not isinstance(i, Index):
        return set()
    vs = free_vars(i.value)
    reduction = {v for v in vs if v in every and v not in spatial}
    return reduction if reduction and any(v in spatial for v in vs) else set()


def analyze(program: TensorProgram) -> Pattern:
    """The program's pattern, from its TIR."""
    nest = output_nest(program)
    if nest is None:
        return Pattern.OPAQUE
    kinds = []
    walk_stmt(program.body, lambda s: kinds.append(type(s)))
    if IfThenElse in kinds:
        return Pattern.OPAQUE
    nested_loops = kinds.count(For) > len(nest.loops)
    if program.scratch or nested_loops or Allocate in kinds:
        return Pattern.OUTPUT_FUSABLE if _reuses_inputs(program) else Pattern.REDUCTION
    if nest.stages:
        return Pattern.OPAQUE
    worst = Pattern.ELEMENTWISE
    for stmt in _tail_stmts(nest.tail):
        for e in stmt_exprs(stmt):
            for load in loads_in(e):
                kind = _load_pattern(load, nest.loops)
                worst = max(worst, kind, key=_ORDER.index)
    return worst


def _tail_stmts(tail) -> list:
    out = []
    walk_stmt(tail, out.append)
    return out


# ------------------------------------------------------------ what fusion needs

def inline_form(program: TensorProgram):
    """(loops, stored value, asserts) when the program is one loop nest
    whose body is asserts then the store (no scratch, locals or lets), so
    its value can be computed wherever a consumer loads it; else None."""
    nest = output_nest(program)
    if nest is None or nest.stages or program.scratch:
        return None
    body = stmts_of(nest.tail)
    if body[-1] is not nest.store or not all(isinstance(s, Assert) for s in body[:-1]):
        return None
    if analyze(program) not in _ORDER:
        return None
    return nest.loops, nest.store.value, tuple(body[:-1])


def arith_cost(e) -> int:
    """Arithmetic operations in an expression (index arithmetic is free, a
    math intrinsic counts 4)."""
    total = [0]

    def visit(node):
        if isinstance(node, Intrinsic):
            total[0] += 4
        elif isinstance(node, (BinOp, Compare, Logical, Not, Select, Cast)):
            total[0] += 1
        return None
    map_expr(e, visit)
    return total[0]


def reads_per_element(program: TensorProgram, buffer) -> int | None:
    """How many times the program reads each element of `buffer`, summed over
    its loads: a load counts the product of the extents of enclosing loops
    whose variable its indices do not use, and of reduction loops whose
    variable shares an index with a spatial one (a sliding window). None
    when that number depends on a symbolic size (unbounded re-reads)."""
    every, spatial = _loop_vars(program)
    total = [0]

    def visit(s, loops):
        for e in stmt_exprs(s):
            for load in loads_in(e):
                if load.buffer is not buffer or total[0] is None:
                    continue
                used, factor = _index_vars(load), 1
                windows = set().union(*(_window_vars(i, every, spatial) for i in load.indices))
                for loop in loops:
                    if (loop.var not in used or loop.var in windows) and loop.extent != 1:
                        if not loop.extent.is_const:
                            total[0] = None
                            return
                        factor *= loop.extent.value
                total[0] += factor
    _walk_with_loops(program.body, visit)
    return total[0]
