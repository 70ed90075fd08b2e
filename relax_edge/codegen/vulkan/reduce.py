"""Row reductions as one workgroup per row: softmax, layer norm, sum, mean,
max and min over trailing axes, fused or not.

kernel.py maps the leading independent loops of a program to the grid, one
invocation per row, and runs each row's reduction serially in it. When the
per-row body is a sequence of stages of these three kinds:

- a reduction: `acc = local T[1]; acc[0] = init; for r... (a perfect nest):
  acc[0] = acc[0] op g(r); <tail stores>` with T float32 or int32 and op
  add, max or min; the tail stores write float32 / int32 elements indexed by
  the row alone (`softmax_max[i0] = acc[0]`, `mean[i0] = acc[0] / n`);
- a map: a loop over the row independent in its variable (the scheduler's
  test), e.g. softmax's `out[i0, i1] = exp(x[i0, i1] - max[i0]) / sum[i0]`;
- a tail store by itself,

and at least one reduction runs over at least a workgroup of elements (or a
symbolic count) while the rows may be few (fewer than FEW_ROWS at the
smallest sizes: with more, one invocation per row already fills the device,
e.g. a convolution's output pixels), `cooperative` emits the kernel with
one workgroup of L invocations (specialization constant 0) per row instead:

- the row is the workgroup's index in the folded grid; `items` is rows * L.
  No invocation returns early: the body is guarded by `rxe_live` (the
  workgroup holds a row) and every barrier is outside the guard, in uniform
  control flow;
- a reduction: invocation t combines the elements t, t + L, ... of the
  flattened nest (a partial starting from op's identity), writes it to
  `shared T rxe_red[L]`, and a tree over the largest power of two below L
  (a barrier per level) leaves the row's value in rxe_red[0]; every
  invocation reads it (then a barrier, before the next stage reuses the
  array) into acc[0] (add: init + the sum);
- a tail store: every invocation computes the value, invocation 0 stores it,
  and later loads of that element in the kernel read the invocation's copy
  (so no invocation reads memory another wrote in this dispatch);
- a map: the invocations take the loop's iterations t, t + L, ...

Anything else (an assert, which returns early, other statements, a later
stage loading what a map stored or a tail element at another index, int64
or bool accumulators) keeps kernel.py's one invocation per row. The order
of the float sums changes (a tree over strided partials), by rounding only.

Shared memory: 4 L bytes per accumulator type used.
"""

from __future__ import annotations

from ...ir.shape import as_expr, bounds
from ...tir.expr import BinOp, Load
from ...tir.stmt import Allocate, Assert, For, Seq, Store
from ...tir.visit import map_expr, walk_stmt
from ...transform.schedule import _Accesses, _independent
from ..c.kernel import CRenderer
from .kernel import INT32, GlslKernel, KernelRecord

__all__ = ["cooperative", "row_reduction"]

OPS = ("add", "max", "min")
FEW_ROWS = 4096
SHARED = {"float32": ("float", "rxe_red_f"), "int32": ("int", "rxe_red_i")}
IDENTITY = {"float32": "0.0", "int32": "0"}


class _Fallback(Exception):
    """The program does not take the cooperative form (kernel.py's form instead)."""


def _nest(s):
    """(the loops of a perfect nest, its innermost statement)."""
    loops = []
    while isinstance(s, For):
        loops.append(s)
        s = s.body
        if isinstance(s, Seq) and len(s.stmts) == 1:
            s = s.stmts[0]
    return loops, s


def _uses(e, buffer) -> bool:
    found = []
    map_expr(e, lambda n: found.append(n) if isinstance(n, Load) and n.buffer is buffer else None)
    return bool(found)


def row_reduction(stage):
    """(acc buffer, init, loops, op, g, tails) of a reduction stage, or None."""
    if not isinstance(stage, Allocate) or int(stage.buffer.numel()) != 1 or stage.buffer.dtype not in SHARED:
        return None
    acc = stage.buffer
    stmts = list(stage.body.stmts) if isinstance(stage.body, Seq) else [stage.body]
    if len(stmts) < 2 or not isinstance(stmts[0], Store) or stmts[0].buffer is not acc:
        return None
    loops, inner = _nest(stmts[1])
    if not loops or not isinstance(inner, Store) or inner.buffer is not acc:
        return None
    v = inner.value
    if not isinstance(v, BinOp) or v.op not in OPS:
        return None
    if isinstance(v.a, Load) and v.a.buffer is acc and not _uses(v.b, acc):
        g = v.b
    elif isinstance(v.b, Load) and v.b.buffer is acc and not _uses(v.a, acc):
        g = v.a
    else:
        return None
    if _uses(stmts[0].value, acc):
        return None
    tails = stmts[2:]
    if not all(isinstance(t, Store) and t.buffer.dtype in SHARED for t in tails):
        return None
    return acc, stmts[0].value, loops, v.op, g, tails


def _extent(loops):
    total = as_expr(1)
    for f in loops:
        total = total * f.extent
    return total


class CooperativeKernel(GlslKernel):
    """kernel.py's emitter with the row body laid over a workgroup (module docstring)."""

    def __init__(self, program, local_size_x: int, inplace: bool, stages: list):
        super().__init__(program, local_size_x, inplace)
        self.stages = stages
        self.held: dict = {}        # (tail buffer, index text) -> the invocation's copy of that element
        self.tail_buffers: set = set()
        self.shared: dict = {}      # dtype -> the shared array's name

    def emit(self):
        self.begin()
        for stage in self.stages:
            if isinstance(stage, Allocate):
                self.reduction(*row_reduction(stage))
            elif isinstance(stage, Store):
                self.tail(stage)
            else:
                self.map(stage)
        return self.end()

    def begin(self) -> None:
        p = self.program
        self.slot = {b: k for k, b in enumerate(p.params)}
        GlslKernel.begin(self)   # the checks, the names and the grid variables (replaced below)
        self.lines = []
        self.r.used.update(("rxe_t", "rxe_live", "rxe_row", "rxe_s", "rxe_e", "rxe_red_f", "rxe_red_i"))
        self.line("uint gid = (gl_WorkGroupID.y + gl_WorkGroupID.z * gl_NumWorkGroups.y) * pc.groups_x "
                  "* gl_WorkGroupSize.x")
        self.line("    + gl_WorkGroupID.x * gl_WorkGroupSize.x + gl_LocalInvocationID.x;")
        self.line("uint rxe_t = gl_LocalInvocationID.x;")
        self.line("bool rxe_live = gid < pc.items;   // no early return: the barriers below need every invocation")
        self.line("uint rxe_row = rxe_live ? gid / gl_WorkGroupSize.x : 0u;")
        for k, v in enumerate(p.size_params):
            self.line(f"int {self.r.name(v, v.name)} = pc.size[{k}];")
        self.grid_variables("rxe_row")

    def element(self, buffer, indices) -> str:
        if buffer in self.tail_buffers:
            key = (buffer, self.r.expr(buffer.flat_index(indices)))
            if key not in self.held:
                raise _Fallback(f"{buffer.name} read at another element than its tail store")
            return self.held[key]
        return super().element(buffer, indices)

    def combine(self, op: str, a: str, b: str) -> str:
        if op == "add":
            return f"({a} + {b})"
        return self.r.helper("minmax", f"rxe_{op}({a}, {b})")

    def reduction(self, acc, init, loops, op, g, tails) -> None:
        t, red = SHARED[acc.dtype]
        self.shared[acc.dtype] = f"shared {t} {red}[gl_WorkGroupSize.x];"
        total = _extent(loops)
        if bounds(total)[1] >= INT32:
            raise _Fallback("reduction past 2^31 elements")
        for f in loops:
            self.bind(f.var, f.extent)
        a = self.r.name(acc, acc.name)
        self.locals.add(acc)
        part = self.temp("part")
        start = IDENTITY[acc.dtype] if op == "add" else self.r.expr(init)
        self.line(f"{t} {a}[1];")
        self.line(f"{t} {part} = {start};")
        self.line("if (rxe_live) {")
        self.depth += 1
        e = self.temp("e")
        self.line(f"for (uint {e} = rxe_t; {e} < uint({self.r.int_expr(total)}); {e} += gl_WorkGroupSize.x) {{")
        self.depth += 1
        rest = e
        for k in range(len(loops) - 1, -1, -1):
            name = self.r.name(loops[k].var, loops[k].var.name)
            if k == 0:
                self.line(f"int {name} = int({rest});")
            else:
                ext = self.r.int_expr(loops[k].extent)
                self.line(f"int {name} = int({rest} % uint({ext}));")
                q = self.temp("q")
                self.line(f"uint {q} = {rest} / uint({ext});")
                rest = q
        self.line(f"{part} = {self.combine(op, part, self.r.expr(g))};")
        self.depth -= 1
        self.line("}")
        self.depth -= 1
        self.line("}")
        self.line(f"{red}[rxe_t] = {part};")
        self.line("barrier();")
        s = self.temp("s")
        self.line(f"for (uint {s} = gl_WorkGroupSize.x > 1u ? 1u << uint(findMSB(gl_WorkGroupSize.x - 1u)) : 0u; "
                  f"{s} > 0u; {s} >>= 1u) {{")
        self.depth += 1
        self.line(f"if (rxe_t < {s} && rxe_t + {s} < gl_WorkGroupSize.x) "
                  f"{red}[rxe_t] = {self.combine(op, f'{red}[rxe_t]', f'{red}[rxe_t + {s}]')};")
        self.line("barrier();")
        self.depth -= 1
        self.line("}")
        final = f"({self.r.expr(init)} + {red}[0])" if op == "add" else f"{red}[0]"
        self.line(f"{a}[0] = {final};")
        self.line("barrier();   // every invocation has read the row's value before the array is reused")
        for tail in tails:
            self.tail(tail)

    def tail(self, s: Store) -> None:
        b = s.buffer
        if b.dtype not in SHARED or b in self.locals:
            raise _Fallback(f"tail store to {b.name}")
        t = SHARED[b.dtype][0]
        value = self.r.expr(s.value)
        index = self.r.expr(b.flat_index(s.indices))
        held = self.temp("held")
        self.line(f"{t} {held} = {IDENTITY[b.dtype]};")
        self.line(f"if (rxe_live) {held} = {value};")
        self.line(f"if (rxe_live && rxe_t == 0u) {super().element(b, s.indices)} = {held};")
        self.tail_buffers.add(b)
        self.held[(b, index)] = held

    def map(self, s: For) -> None:
        v = self.r.name(s.var, s.var.name)
        self.bind(s.var, s.extent)
        self.line("if (rxe_live) {")
        self.depth += 1
        self.braced(f"for (int {v} = int(rxe_t); {v} < {self.r.int_expr(s.extent)}; "
                    f"{v} += int(gl_WorkGroupSize.x)) {{", None, lambda: self.scoped(s.var, s.body))
        self.depth -= 1
        self.line("}")

    def end(self):
        for decl in self.shared.values():
            self.helpers.setdefault(decl, decl + "\n")
        text, record = super().end()
        L = self.local_size_x
        items = self.grid.items * L
        c = CRenderer()
        for v in self.program.size_params:
            c.name(v, v.name)
        record = KernelRecord(
            name=record.name, num_buffers=record.num_buffers, push_words=record.push_words,
            local_size_x=L, shared_bytes=4 * L * len(self.shared), flags=record.flags, items=items,
            items_c=c.int_expr(items), size_params=record.size_params, grid=record.grid,
            push_in_buffer=record.push_in_buffer, asserts=record.asserts, status=record.status)
        text = text.replace(f"items = {self.items_text}", f"items = rows x {L}: one workgroup per row", 1)
        return text, record


def _stages(body) -> list:
    return list(body.stmts) if isinstance(body, Seq) else [body]


def _has_assert(s) -> bool:
    found = []
    walk_stmt(s, lambda n: found.append(n) if isinstance(n, Assert) else None)
    return bool(found)


def _plan(program, local_size_x: int):
    """The stages of the cooperative form, or None (module docstring)."""
    from .grid import map_grid
    grid = map_grid(program)
    if _has_assert(grid.body) or local_size_x < 2:
        return None
    if bounds(grid.items * local_size_x)[1] >= INT32 or bounds(grid.items)[0] >= FEW_ROWS:
        return None
    stages, wide, mapped = _stages(grid.body), False, set()
    for stage in stages:
        acc = _Accesses()
        acc.visit(stage)
        if any(ld.buffer in mapped for ld in acc.loads):
            return None   # a later stage reads what another invocation stored
        if isinstance(stage, Allocate):
            found = row_reduction(stage)
            if found is None:
                return None
            wide = wide or bounds(_extent(found[2]))[1] >= local_size_x
        elif isinstance(stage, For):
            if not _independent(stage):
                return None
            mapped.update(st.buffer for st in acc.stores if st.buffer not in acc.locals)
        elif not isinstance(stage, Store):
            return None
    return stages if wide else None


def cooperative(program, local_size_x: int, inplace: bool):
    """(GLSL text, KernelRecord) of `program` in the one-workgroup-per-row
    form, or None where it does not take that form (module docstring)."""
    stages = _plan(program, local_size_x)
    if stages is None:
        return None
    try:
        return CooperativeKernel(program, local_size_x, inplace, stages).emit()
    except _Fallback:
        return None
