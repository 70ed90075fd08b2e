"""schedule: per-target loop transformations of every tensor program.

Works from the loop structure of each program (legalized or fused), stage by
stage (the statements of the program's top-level sequence):
1. Loops of extent 1 at the top of a stage are removed (their variable is 0).
2. Reductions: an innermost loop `acc[0] = acc[0] op src` (op add / max /
   min, a float one-element local accumulator, `src` contiguous in the loop)
   becomes a vectorized loop over L partial accumulators (a local array),
   combined into `acc` in lane order, then a scalar remainder. This changes
   the summation order (deterministically) so that the loop vectorizes
   without fast-math.
3. Vectorization: an innermost loop made of float stores that are contiguous
   in it becomes `for vo in range(E // L): for vi in range(L)  # vectorized`
   plus a scalar remainder loop of E % L iterations (L: the target's vector
   width over the store dtype). A vectorized loop always has the constant
   extent L; backends emit one vector operation per statement of its body.
4. Unrolling: loops of small constant extent (kernel windows) whose whole
   body runs at most UNROLL_BODY iterations are marked "unrolled".
5. Threads (hosted targets only): the outermost loop of a stage with enough
   work (the product of its loop extents) is marked "parallel" when every
   store to a parameter buffer indexes one axis with its variable exactly;
   with symbolic extents the stage becomes `if work > PARALLEL_WORK:
   <parallel> else: <serial>`.

Does not tile, reorder loops, or prove that indices stay in bounds; results
of float reductions differ from the serial order by rounding only.
"""

from __future__ import annotations

import math

from ..ir.expr import IRModule
from ..ir.shape import as_expr, bounds, floordiv, floormod, substitute
from ..target import Board, Target, load_board
from ..tir.analysis import at_lane, stmts_of, stride
from ..tir.expr import BinOp, Index, Load, const, is_float
from ..tir.program import TensorProgram
from ..tir.stmt import Allocate, Buffer, For, IfThenElse, Seq, Store, loop_var
from ..tir.visit import ExprMutator, ExprVisitor, NodeFunctor, StmtMutator, StmtVisitor, walk_stmt

__all__ = ["schedule", "schedule_program", "vector_bits", "PARALLEL_WORK"]

PARALLEL_WORK = 1 << 15    # loop iterations below which a stage stays on one thread
UNROLL_MAX = 8             # largest constant extent unrolled
UNROLL_BODY = 64           # most iterations an unrolled loop's whole body may run
_BITS = {"float32": 32, "float64": 64}
_IDENTITY = {"add": 0.0, "max": -math.inf, "min": math.inf}


def vector_bits(target: Target) -> int:
    """The target's SIMD register width in bits (0: no vectors); for the
    native host, 256 when its flags enable the host's AVX (-march=native,
    -mavx*), else 128 (the x86-64 and aarch64 baselines)."""
    if target.vector_bits or target.llvm_triple != "native":
        return target.vector_bits
    if not any(f == "-march=native" or f.startswith("-mavx") for f in target.cflags):
        return 128
    import llvmlite.binding as llvm
    llvm.initialize_native_target()
    return 256 if "+avx" in llvm.get_host_cpu_features().flatten().split(",") else 128


def schedule(mod: IRModule, target, threads: bool = True) -> IRModule:
    """A new module whose tensor programs are scheduled for `target` (a
    Target, a Board or a board name); `threads=False` marks no loop parallel."""
    if not isinstance(target, Target):
        target = (target if isinstance(target, Board) else load_board(target)).target
    bits = vector_bits(target)
    threads = threads and not target.freestanding
    programs = {name: schedule_program(p, bits, threads) for name, p in mod.tensor_programs.items()}
    return IRModule(mod.functions, programs, mod.externs)


def schedule_program(p: TensorProgram, bits: int, threads: bool) -> TensorProgram:
    stages = p.body.stmts if isinstance(p.body, Seq) else (p.body,)
    body = Seq([_stage(s, bits, threads) for s in stages])
    attrs = {k: v for k, v in p.attrs.items() if not k.startswith("_")}
    return TensorProgram(p.name, p.inputs, p.outputs, body, p.size_params, p.scratch, attrs)


# ------------------------------------------------------------ rewriting

class _IndexSubstitution(ExprMutator):
    """Index arithmetic with size / loop variables replaced by IntExprs."""

    def __init__(self, mapping):
        self.mapping = mapping

    def visit_Index(self, e: Index):
        return Index(substitute(e.value, self.mapping))


class _Substitution(StmtMutator):
    """Statements with size / loop variables replaced by IntExprs; a loop
    whose variable maps to a bare variable is renamed to it."""

    def __init__(self, mapping):
        self.mapping = mapping
        self.exprs = _IndexSubstitution(mapping)

    def visit_expr(self, e):
        return self.exprs.visit(e)

    def visit_For(self, s: For):
        var = self.mapping[s.var].as_var() if s.var in self.mapping else s.var
        return For(var, substitute(s.extent, self.mapping), self.visit(s.body), s.kind)


def _subst(s, mapping):
    """Statement `s` with size / loop variables replaced (see _Substitution)."""
    return _Substitution(mapping).visit(s)


def _renamed(s):
    """A copy of `s` with fresh loop variables (for a second copy of a nest)."""
    loops = []
    walk_stmt(s, lambda x: loops.append(x.var) if isinstance(x, For) else None)
    return _subst(s, {v: as_expr(loop_var(v.name)) for v in loops})


def _loop(var, extent, body, kind="serial"):
    """A loop, or its body once (extent 1), or nothing (extent 0)."""
    extent = as_expr(extent)
    if extent.is_const and extent.value == 0:
        return Seq([])
    if extent.is_const and extent.value == 1 and kind != "vectorized":
        return _subst(body, {var: as_expr(0)})
    return For(var, extent, body, kind)


class _Loads(ExprVisitor):
    """The loads of an expression, nested ones included."""

    def __init__(self):
        self.found: list = []

    def visit_Load(self, e: Load):
        self.found.append(e)
        super().visit_Load(e)


def _loads(e) -> list:
    finder = _Loads()
    finder.visit(e)
    return finder.found


# ------------------------------------------------------------ stages

def _stage(s, bits, threads):
    while isinstance(s, For) and s.extent.is_const and s.extent.value == 1:
        s = _subst(s.body, {s.var: as_expr(0)})
    work = _work(s)
    s = _rewrite(s, bits)
    return _parallel(s, work) if threads and isinstance(s, For) else s


class _Rewrite(StmtMutator):
    """Points 2 to 4 on every loop of a stage, innermost first."""

    def __init__(self, bits):
        self.bits = bits

    def visit_For(self, s: For):
        done = _split_reduction(s, self.bits) or _vectorize(s, self.bits)
        if done is not None:
            return done
        body = self.visit(s.body)
        kind = "unrolled" if s.kind == "serial" and _unrollable(s.extent, body) else s.kind
        return For(s.var, s.extent, body, kind)


def _rewrite(s, bits):
    return _Rewrite(bits).visit(s)


def _lanes(dtype, bits) -> int:
    return bits // _BITS[dtype] if dtype in _BITS else 1


def _vectorize(s: For, bits):
    """Split an innermost loop of contiguous float stores into a vector main
    loop and a scalar remainder."""
    stores = stmts_of(s.body)
    if not all(isinstance(x, Store) and is_float(x.buffer.dtype) for x in stores):
        return None
    written = {x.buffer: x.buffer.flat_index(x.indices) for x in stores}
    for x in stores:
        if stride(written[x.buffer], s.var) != 1:
            return None
        for load in _loads(x.value):   # a value read back must be the element written here
            if load.buffer in written and \
                    not _same_index(load.buffer.flat_index(load.indices), written[load.buffer]):
                return None
    lanes = min(_lanes(x.buffer.dtype, bits) for x in stores)
    return _strip_mine(s, lanes, s.body)


def _same_index(a, b) -> bool:
    return isinstance(a, Index) and isinstance(b, Index) and a.value == b.value


def _strip_mine(s: For, lanes: int, body):
    """for vo: for vi (vectorized) over `body`, then the scalar remainder."""
    lo, hi = bounds(s.extent)
    if lanes < 2 or hi < lanes:
        return None
    vo, vi, vr = loop_var(f"{s.var.name}_o"), loop_var(f"{s.var.name}_v"), loop_var(f"{s.var.name}_r")
    main_count = floordiv(s.extent, lanes)
    main = _loop(vo, main_count, For(vi, lanes, _subst(body, {s.var: as_expr(vo) * lanes + vi}), "vectorized"))
    rest = _loop(vr, floormod(s.extent, lanes), _subst(body, {s.var: main_count * lanes + vr}))
    return Seq([main, rest])


def _split_reduction(s: For, bits):
    """acc[0] = acc[0] op src over contiguous src: L partial accumulators."""
    st = s.body
    if not (isinstance(st, Store) and is_float(st.buffer.dtype) and st.buffer.numel() == 1
            and isinstance(st.value, BinOp) and st.value.op in _IDENTITY):
        return None
    acc, op, src = st.buffer, st.value.op, st.value.b
    if not (isinstance(st.value.a, Load) and st.value.a.buffer is acc) or any(ld.buffer is acc for ld in _loads(src)):
        return None
    steps = [stride(ld.buffer.flat_index(ld.indices), s.var) for ld in _loads(src)]
    if 1 not in steps or any(k not in (0, 1) for k in steps):
        return None
    lanes = _lanes(acc.dtype, bits)
    lo, hi = bounds(s.extent)
    if lanes < 2 or hi < lanes:
        return None
    part = Buffer(f"{acc.name}_lanes", acc.dtype, (lanes,))
    zero = [as_expr(0)]
    vi, vi2, vo, vr, vc = (loop_var(f"{s.var.name}_{t}") for t in ("i", "v", "o", "r", "c"))
    main_count = floordiv(s.extent, lanes)
    lane_src = at_lane(src, s.var, as_expr(vo) * lanes + vi2)
    body = Seq([
        For(vi, lanes, Store(part, [vi], const(_IDENTITY[op], acc.dtype)), "vectorized"),
        _loop(vo, main_count, For(vi2, lanes, Store(part, [vi2], BinOp(op, Load(part, [vi2]), lane_src, acc.dtype)),
                                  "vectorized")),
        For(vc, lanes, Store(acc, zero, BinOp(op, Load(acc, zero), Load(part, [vc]), acc.dtype)), "unrolled"),
        _loop(vr, floormod(s.extent, lanes),
              Store(acc, zero, BinOp(op, Load(acc, zero), at_lane(src, s.var, main_count * lanes + vr), acc.dtype))),
    ])
    return Allocate(part, body)


class _Iterations(NodeFunctor):
    """Iterations of a whole statement when every loop extent is constant, else None."""

    def visit_For(self, s: For):
        inner = self.visit(s.body)
        return None if inner is None or not s.extent.is_const else s.extent.value * inner

    def visit_Seq(self, s: Seq):
        parts = [self.visit(x) for x in s.stmts]
        return None if None in parts else max([1, *parts])

    def visit_body(self, s):
        return self.visit(s.body)

    visit_Allocate = visit_Let = visit_body

    def visit_IfThenElse(self, s: IfThenElse):
        parts = [self.visit(x) for x in (s.then_body, s.else_body) if x is not None]
        return None if None in parts else max(parts)

    def visit_leaf(self, s):
        return 1

    visit_Store = visit_Assert = visit_leaf


def _iterations(s):
    return _Iterations().visit(s)


def _unrollable(extent, body) -> bool:
    inner = _iterations(body)
    return extent.is_const and 1 < extent.value <= UNROLL_MAX and inner is not None \
        and extent.value * inner <= UNROLL_BODY


# ------------------------------------------------------------ threads

class _Work(NodeFunctor):
    """Iterations of a stage's innermost statements, as an IntExpr."""

    def visit_For(self, s: For):
        return s.extent * self.visit(s.body)

    def visit_Seq(self, s: Seq):
        total = as_expr(0)
        for x in s.stmts:
            total = total + self.visit(x)
        return total if s.stmts else as_expr(1)

    def visit_body(self, s):
        return self.visit(s.body)

    visit_Allocate = visit_Let = visit_body

    def visit_IfThenElse(self, s: IfThenElse):
        return self.visit(s.then_body) + (as_expr(0) if s.else_body is None else self.visit(s.else_body))

    def visit_leaf(self, s):
        return as_expr(1)

    visit_Store = visit_Assert = visit_leaf


def _work(s):
    return _Work().visit(s)


class _Accesses(StmtVisitor):
    """The local buffers, the stores, and the loads in stored values and in
    conditions, let values and assert operands (not in store indices)."""

    def __init__(self):
        self.locals, self.stores, self.loads = set(), [], []

    def visit_Allocate(self, s: Allocate):
        self.locals.add(s.buffer)
        super().visit_Allocate(s)

    def visit_Store(self, s: Store):
        self.stores.append(s)
        self.visit_expr(s.value)

    def visit_expr(self, e):
        self.loads.extend(_loads(e))


def _independent(s: For) -> bool:
    """Every store to a non-local buffer has an axis indexed by exactly the
    loop variable, and every load of such a buffer uses it on that axis too."""
    found = _Accesses()
    found.visit(s.body)
    axes = {}
    for st in found.stores:
        if st.buffer in found.locals:
            continue
        hits = {d for d, i in enumerate(st.indices) if isinstance(i, Index) and i.value.as_var() is s.var}
        axes[st.buffer] = axes.get(st.buffer, hits) & hits
        if not axes[st.buffer]:
            return False
    return all(any(isinstance(ld.indices[d], Index) and ld.indices[d].value.as_var() is s.var
                   for d in axes[ld.buffer]) for ld in found.loads if ld.buffer in axes)


def _parallel(s: For, work):
    if s.kind != "serial" or not _independent(s):
        return s
    lo, hi = bounds(work)
    if hi <= PARALLEL_WORK or bounds(s.extent)[1] < 2:
        return s
    par = For(s.var, s.extent, s.body, "parallel")
    if lo > PARALLEL_WORK:
        return par
    return IfThenElse(Index(work) > PARALLEL_WORK, par, _renamed(s))
