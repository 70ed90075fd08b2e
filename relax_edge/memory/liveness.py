"""Liveness of a lowered graph function: the buffers the planner sees.

1. Steps are the tensor-program and library-kernel calls in order. Each intermediate value
   becomes a buffer with a symbolic byte size, its producing step as first
   use and its last reading step as last use; each kernel's scratch buffers
   live for their call's step only (scratch declared by tensor programs is
   lifted into the plan, so kernels never allocate).
2. A reshape (which is also how flatten, squeeze and unsqueeze arrive) of a
   contiguous tensor is a view: no kernel runs, the value shares its
   source's storage and extends its lifetime.
3. An elementwise or broadcast kernel (by its operator, or by the pattern
   the fusion pass read from a fused program) writes in place over an input of the
   same shape and dtype that dies at that call (an intermediate in the
   workspace, not a view of an input, a constant or an output). The step
   records it (`inplace_over`); the IR is not changed. A library kernel
   whose attrs name an `inplace_arg` (kv_append: the KV cache state) always
   writes over that argument's storage, a caller's input included.
4. Values that are function outputs are computed straight into the caller's
   output tensors when their producer is a kernel; others are copied there
   at the end.
5. An `if` is linearized: the then branch's steps, then the else branch's,
   each step carrying its guard (the enclosing branches, outermost first);
   each branch ends with a copy step writing its result into the if's
   storage. Lifetimes over this order cover both branches (a value read in
   either lives through both), so the plan is sound whichever runs.

6. A match_cast is a run-time step (`Cast`, at the position of the steps
   around it): the value keeps its storage (the cast value is an alias), and
   the host code binds the cast's fresh size variables from the value's
   actual dims (a library kernel's count, an if branch's dims) or checks the
   dims already known. Values whose shape is only known at run time (a
   data-dependent kernel's result, an if whose branches differ in a dim) are
   planned at their capacity: the kernel's attrs["capacity"], the larger of
   the branches; every fresh size variable's capacity (`Liveness.capacity`)
   stands for it in the sizes of later buffers, so the plan (and a bounded
   arena) never depends on a value found at run time.
7. A `loop` is linearized too: before it, copies of the initial carried
   values (and condition) into the loop's state; then the body's steps,
   each carrying the loop's `LoopScope` in its guard: the iteration number
   stored, the body's kernels, and at the end of the iteration the copies
   of the body's condition and carried values into the state and of each
   scan value into its slot of the stacked output. A carried result that is
   another state of the same loop goes through a temporary first (double
   buffering, so a body that swaps its states is right). Every value
   defined before the loop and read inside it (the state included) lives to
   the loop's last step, and the stacked outputs live from its first, so
   no iteration clobbers what a later one reads.

Values are grouped (views, in-place results) and each group is one buffer.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import RelaxEdgeError
from ..ir.expr import (
    CallExtern,
    CallTensor,
    Constant,
    Function,
    If,
    IRModule,
    Loop,
    MatchCast,
    Tuple,
    TupleGetItem,
    Var,
)
from ..ir.shape import IntExpr, Proof, as_expr, free_vars, max_expr, min_expr, prove_equal, substitute
from ..ir.types import TensorType, TupleType
from ..op.registry import OPS
from .plan import Buffer

VIEW_OPS = frozenset({"reshape"})
INPLACE_KINDS = frozenset({"elementwise", "broadcast"})


def itemsize(dtype: str) -> int:
    return {"float32": 4, "float16": 2, "bfloat16": 2, "float64": 8, "int8": 1, "uint8": 1, "int16": 2,
            "uint16": 2, "int32": 4, "uint32": 4, "int64": 8, "uint64": 8, "bool": 1}[dtype]


def nbytes(t: TensorType):
    total = as_expr(itemsize(t.dtype))
    for d in t.shape:
        total = total * d
    return total


@dataclass(eq=False)
class LoopScope:
    """One loop of the function, as a guard entry of the steps of its body.
    `trip`: an IntExpr, a Var (an int64 scalar read at run time) or None;
    `cond`: the condition's state (read before each iteration) or None when
    the loop cannot stop early; `depth`: how many loops enclose it."""
    number: int
    trip: object
    cond: Var | None
    depth: int
    first: int = 0      # its first and last step
    last: int = 0
    counted: list = field(default_factory=list)   # stacked outputs whose length is the iterations run


@dataclass
class Step:
    var: Var
    call: CallTensor | CallExtern | None   # None: a copy step (copy_from into var's storage)
    view_of: Var | None = None          # a view: no kernel, shares this value's storage
    inplace_over: Var | None = None     # writes over this argument's storage
    scratch: list = field(default_factory=list)   # buffer indices of its scratch
    copy_from: object = None            # a copy step's source (an if branch's result)
    guard: tuple = ()                   # per enclosing branch (if number, branch taken, condition Var),
    #                                     per enclosing loop its LoopScope; outermost first
    counter: LoopScope | None = None    # stores the loop's iteration number into var (no call, no copy)
    slot: LoopScope | None = None       # a copy into the iteration's slot of var (a stacked scan output)

    @property
    def reads(self) -> tuple:
        """The values the step reads, its guards' conditions (and loops' trip counts) included."""
        args = () if self.counter is not None else self.call.args if self.call is not None else (self.copy_from,)
        extra = []
        for g in self.guard:
            extra += [g.cond, g.trip] if isinstance(g, LoopScope) else [g[2]]
        return tuple(args) + tuple(x for x in extra if isinstance(x, Var))


@dataclass
class Cast:
    """A match_cast run before step `at`: `var` (an alias of `source`) has
    `var.type`; `fresh` are the size variables it binds."""
    var: Var
    source: Var
    at: int
    guard: tuple
    fresh: tuple


@dataclass
class Liveness:
    steps: list
    buffers: list                 # memory.plan.Buffer
    storage: dict                 # Var -> ("input", i) | ("const", Constant) | ("output", k) | ("buffer", i)
    outputs: list                 # output Vars in order
    copies: list                  # (output index, Var) copied into outputs at the end
    casts: list = field(default_factory=list)       # Cast, in order
    capacity: dict = field(default_factory=dict)    # fresh SizeVar -> its largest value (IntExpr of the inputs)
    unknown: dict = field(default_factory=dict)     # Var of a run-time shape -> its capacity shape

    def capacity_of(self, e):
        """`e` with each fresh size variable at its capacity."""
        return substitute(as_expr(e), self.capacity) if self.capacity else as_expr(e)


def output_vars(func: Function) -> list:
    body = func.body.body
    bound = {b.var: b.value for blk in func.body.blocks for b in blk.bindings}
    if isinstance(body, Var) and isinstance(body.type, TupleType):
        body = bound.get(body, body)
    values = body.fields if isinstance(body, Tuple) else (body,)
    for v in values:
        if not isinstance(v, Var) or not isinstance(v.type, TensorType) or v.type.shape is None:
            raise RelaxEdgeError(f"function {func.name}: outputs must be tensor variables of known shape")
    return list(values)


def _always_true(cond) -> bool:
    return cond is None or (isinstance(cond, Constant) and bool(cond.data.reshape(-1)[0]))


def _same_type(a: TensorType, b: TensorType) -> bool:
    return (a.dtype == b.dtype and len(a.shape) == len(b.shape)
            and all(prove_equal(x, y) is Proof.YES for x, y in zip(a.shape, b.shape)))


def analyze(mod: IRModule, func: Function, inplace: bool = True, views: bool = True) -> Liveness:
    """The steps, buffers and storage of a lowered graph function; `inplace`
    and `views` allow sharing storage as the module's description says."""
    analysis = _Analysis(mod, func)
    analysis.share_storage(inplace, views)
    buffers = analysis.place()
    analysis.add_scratch(buffers)
    return analysis.result(buffers)


class _Analysis:
    """One function's steps, aliases (plain var bindings), claimed outputs,
    last uses and the groups of values that share storage."""

    def __init__(self, mod: IRModule, func: Function):
        self.mod = mod
        self.func = func
        self.storage: dict = {p: ("input", i) for i, p in enumerate(func.params)}
        self.alias: dict = {}          # Var -> Var whose storage it uses
        self.steps: list[Step] = []
        self.fields: dict = {}         # a tuple-valued if's (or loop's) Var -> one Var per field
        self.ifs = 0
        self.loops: list = []          # LoopScope
        self.unviewed: set = set()     # values that must have their own storage (a loop's carried results)
        self.casts: list[Cast] = []
        self.capacity: dict = {}       # fresh SizeVar -> IntExpr free of fresh variables
        self.unknown: dict = {}        # Var whose shape is known at run time -> its capacity shape
        self.bound = {v for p in func.params if isinstance(p.type, TensorType) and p.type.shape
                      for d in p.type.shape for v in free_vars(d)}
        for block in func.body.blocks:
            for b in block.bindings:
                self.bind(b, ())
        self.outputs = output_vars(func)
        self.producers = {s.var: s for s in self.steps}
        self.claimed = self.claim_outputs()
        self.last_use = self.last_uses()
        self.group: dict = {}          # Var -> a Var whose storage it shares (views, in-place results)

    def bind(self, b, guard: tuple) -> None:
        """A binding as a step, an alias or a constant (an if as its branches' steps)."""
        name = self.func.name
        if isinstance(b, MatchCast):
            self.bind_match_cast(b, guard)
            return
        v = b.value
        if isinstance(v, (CallTensor, CallExtern)):
            if not isinstance(v.type, TensorType):
                raise RelaxEdgeError(f"{b.var.name}: tuple-valued kernels are not supported yet")
            if v.type.shape is None:
                if not (isinstance(v, CallExtern) and "capacity" in v.attrs):
                    raise RelaxEdgeError(f"function {name}: {b.var.name} has a shape known only at run time "
                                         "and no capacity to plan it at")
                self.unknown[b.var] = tuple(self.capacity_of(d) for d in v.attrs["capacity"])
            self.steps.append(Step(b.var, v, guard=guard))
        elif isinstance(v, If):
            self.bind_if(b.var, v, guard)
        elif isinstance(v, Loop):
            self.bind_loop(b.var, v, guard)
        elif isinstance(v, TupleGetItem) and v.tuple_value in self.fields:
            self.alias[b.var] = self.fields[v.tuple_value][v.index]
        elif isinstance(v, Var):
            self.alias[b.var] = v
        elif isinstance(v, Constant):
            self.storage[b.var] = ("const", v)
        elif not isinstance(v, Tuple):
            raise RelaxEdgeError(f"function {name}: binding {b.var.name} ({type(v).__name__}) is not "
                                 "supported by the C backend yet")

    def capacity_of(self, e):
        """`e` with each fresh size variable bound so far at its capacity."""
        return substitute(as_expr(e), self.capacity) if self.capacity else as_expr(e)

    def bind_match_cast(self, b: MatchCast, guard: tuple) -> None:
        """A run-time step before the next kernel: `b.var` shares the value's
        storage; its type's new size variables are bound from the value's
        dims (their capacity: the value's capacity at that axis)."""
        where = f"function {self.func.name}: match_cast {b.var.name}"
        t = b.type
        if not isinstance(b.value, Var) or not isinstance(t, TensorType) or t.shape is None:
            raise RelaxEdgeError(f"{where}: only a variable cast to a tensor type of known shape is supported")
        source = self.root(b.value)
        if source in self.unknown:
            capacity = self.unknown[source]
        elif isinstance(source.type, TensorType) and source.type.shape is not None:
            capacity = tuple(self.capacity_of(d) for d in source.type.shape)
        else:
            raise RelaxEdgeError(f"{where}: the value {source.name} has neither a known shape nor a capacity")
        if len(capacity) != len(t.shape):
            raise RelaxEdgeError(f"{where}: rank {len(t.shape)} for a value of rank {len(capacity)}")
        fresh = []
        for d, cap in zip(t.shape, capacity):
            var = d.as_var()
            if var is not None and var not in self.bound:
                self.bound.add(var)
                self.capacity[var] = cap if var.upper is None else min_expr(cap, var.upper)   # its own bound too
                fresh.append(var)
        self.alias[b.var] = b.value
        self.casts.append(Cast(b.var, source, len(self.steps), guard, tuple(fresh)))

    def bind_if(self, var: Var, e: If, guard: tuple) -> None:
        """Both branches' steps under their guards, each ending with copies of
        its result into the if's storage (one Var per field of a tuple); a
        result whose dims differ between the branches is planned at the larger."""
        where = f"function {self.func.name}: if {var.name}"
        types = var.type.fields if isinstance(var.type, TupleType) else (var.type,)
        if not all(isinstance(t, TensorType) and (t.shape is not None or t.ndim is not None) for t in types):
            raise RelaxEdgeError(f"{where}: the branches must give tensors of known rank, got {var.type}")
        if not isinstance(e.cond, (Var, Constant)):
            raise RelaxEdgeError(f"{where}: the condition must be a variable or a constant")
        targets = [var]
        if isinstance(var.type, TupleType):
            targets = [Var(f"{var.name}_{i}", t) for i, t in enumerate(types)]
            self.fields[var] = targets
        self.ifs += 1
        number = self.ifs
        for taken, branch in ((True, e.then_branch), (False, e.else_branch)):
            inner = guard + ((number, taken, e.cond),)
            for block in branch.blocks:
                for b in block.bindings:
                    self.bind(b, inner)
            result = branch.body
            results = result.fields if isinstance(result, Tuple) else (result,)
            if len(results) != len(targets) or not all(isinstance(r, (Var, Constant)) for r in results):
                raise RelaxEdgeError(f"{where}: each branch must end in {len(targets)} variables or constants")
            for target, r in zip(targets, results):
                if target.type.shape is None:   # the dims differ between the branches: the larger of each
                    dims = tuple(self.capacity_of(d) for d in r.type.shape)
                    before = self.unknown.get(target)
                    self.unknown[target] = dims if before is None else tuple(max_expr(a, b)
                                                                             for a, b in zip(before, dims))
                self.steps.append(Step(target, None, copy_from=r, guard=inner))

    def bind_loop(self, var: Var, e: Loop, guard: tuple) -> None:
        """The copies into the loop's state, then its body's steps under its
        LoopScope, ending with the copies of the iteration's results."""
        where = f"function {self.func.name}: loop {var.name}"
        n = e.num_carried
        for k, t in enumerate(var.type.fields):
            bounded = k >= n and isinstance(e.trip_count, IntExpr)   # stopped early: at most the trip count
            if not isinstance(t, TensorType) or (t.shape is None and not bounded):
                what = f"carried value {k}" if k < n else f"scan output {k - n}"
                raise RelaxEdgeError(f"{where}: its {what} has type {t}; a scan output whose length is known only "
                                     "at run time and has no bound (a run-time trip count, or none) is not "
                                     "supported by the compiled code yet")
        if not all(isinstance(x, (Var, Constant)) for x in e.operands()):
            raise RelaxEdgeError(f"{where}: its trip count, condition and initial values must be variables or "
                                 "constants")
        iteration, cond, states = e.params[0], e.params[1], e.params[2:]
        results = e.body.body.fields if isinstance(e.body.body, Tuple) else ()
        if len(results) != len(e.body.type.fields) or not all(isinstance(r, (Var, Constant)) for r in results):
            raise RelaxEdgeError(f"{where}: its body must end in a tuple of variables or constants")
        go = results[0]
        stops = not (_always_true(e.cond) and (_always_true(go) or go is cond))
        scope = LoopScope(len(self.loops) + 1, e.trip_count, cond if stops else None,
                          sum(isinstance(g, LoopScope) for g in guard))
        self.loops.append(scope)
        self.fields[var] = list(states) + [Var(f"{var.name}_scan{k}", t) for k, t in enumerate(var.type.fields[n:])]
        if stops:
            self.steps.append(Step(cond, None, copy_from=e.cond if e.cond is not None else Constant(True), guard=guard))
        else:
            self.storage[cond] = ("const", Constant(True))
        for state, x in zip(states, e.init):
            self.steps.append(Step(state, None, copy_from=x, guard=guard))
        inner = guard + (scope,)
        scope.first = len(self.steps)
        self.steps.append(Step(iteration, None, counter=scope, guard=inner))
        for block in e.body.blocks:
            for b in block.bindings:
                self.bind(b, inner)
        if stops and go is not cond:
            self.steps.append(Step(cond, None, copy_from=go, guard=inner))
        swapped = []
        for state, r in zip(states, results[1:1 + n]):
            if r is state:
                continue
            self.unviewed.add(r)
            if self.root(r) in states:   # another state: through a temporary, before any state is written
                temp = Var(f"{state.name}_next", state.type)
                self.steps.append(Step(temp, None, copy_from=r, guard=inner))
                swapped.append((state, temp))
            else:
                swapped.append((state, r))
        for state, r in swapped:
            self.steps.append(Step(state, None, copy_from=r, guard=inner))
        for target, r in zip(self.fields[var][n:], results[1 + n:]):
            if target.type.shape is None:   # its length is the iterations run: planned at the trip count
                self.unknown[target] = tuple(self.capacity_of(d) for d in (e.trip_count, *r.type.shape))
                scope.counted.append((target, r.type.shape))
            self.steps.append(Step(target, None, copy_from=r, guard=inner, slot=scope))
        scope.last = len(self.steps) - 1

    def root(self, x):
        """The value an alias stands for."""
        while x in self.alias:
            x = self.alias[x]
        return x

    def find(self, x):
        """The value whose storage x's group uses."""
        while self.group.get(x, x) is not x:
            x = self.group[x]
        return x

    def claim_outputs(self) -> dict:
        """Kernel results computed straight into output k: {Var: k}."""
        claimed = {}
        for k, var in enumerate(self.outputs):
            r = self.root(var)
            if r in self.producers and r not in claimed:
                claimed[r] = k
        return claimed

    def last_uses(self) -> dict:
        """The last step reading each value (outputs: past the last step)."""
        last_use: dict = {}
        defined = {}
        for t, s in enumerate(self.steps):
            defined.setdefault(s.var, t)
        for t, s in enumerate(self.steps):
            for a in s.reads:
                if isinstance(a, Var):
                    r = self.root(a)
                    end = t
                    for g in s.guard:   # read in a loop, defined before it: lives through the whole loop
                        if isinstance(g, LoopScope) and defined.get(r, -1) < g.first:
                            end = max(end, g.last)
                    last_use[r] = max(last_use.get(r, -1), end)
        for var in self.outputs:
            last_use[self.root(var)] = len(self.steps)
        return last_use

    def share_storage(self, inplace: bool, views: bool) -> None:
        """Views share their source's storage; pointwise kernels write over a dying input."""
        for t, s in enumerate(self.steps):
            if isinstance(s.call, CallExtern) and "inplace_arg" in s.call.attrs:   # writes its argument's storage
                arg = s.call.args[s.call.attrs["inplace_arg"]]
                s.inplace_over = self.root(arg)
                self.group[s.var] = self.find(s.inplace_over)
                continue
            if s.call is None or isinstance(s.call, CallExtern):   # copies and other library kernels: never in place
                continue
            if s.var in self.unviewed:
                continue
            program = self.mod.tensor_programs[s.call.program.name]
            op = program.attrs.get("op")
            arg0 = s.call.args[0] if s.call.args else None
            if views and op in VIEW_OPS and isinstance(arg0, Var) and s.var not in self.claimed:
                s.view_of = self.root(arg0)
                self.group[s.var] = self.find(s.view_of)
                continue
            pointwise = (OPS[op].kind if op in OPS else program.attrs.get("pattern")) in INPLACE_KINDS
            if inplace and s.var not in self.claimed and pointwise:
                self.write_in_place(t, s)

    def write_in_place(self, t: int, s: Step) -> None:
        """Step t writes over the first argument it may overwrite, if any."""
        for a in s.call.args:
            if not isinstance(a, Var):
                continue
            ra = self.find(self.root(a))
            if ra in self.producers and ra not in self.claimed and self.last_use.get(self.root(a)) == t \
                    and self.dies_by(ra, t) and _same_type(a.type, s.var.type) and self.storage.get(ra) is None:
                s.inplace_over = self.root(a)
                self.group[s.var] = ra
                return

    def dies_by(self, g, t: int) -> bool:
        """Every value sharing g's storage is dead after step t."""
        for member in self.group:
            if self.find(member) is g and self.last_use.get(self.root(member), -1) > t:
                return False
        return self.last_use.get(g, -1) <= t

    def place(self) -> list:
        """Each step's storage (an output, a view's source, a buffer per
        group); each buffer living to the last use of any member."""
        buffers: list[Buffer] = []
        index_of_group: dict = {}
        for t, s in enumerate(self.steps):
            g = self.find(s.var)
            if s.var in self.claimed or g in self.claimed:
                self.storage[s.var] = ("output", self.claimed.get(s.var, self.claimed.get(g)))
            elif g in self.storage:   # a view of an input, a constant or an output
                self.storage[s.var] = self.storage[g]
            else:
                if g not in index_of_group:
                    index_of_group[g] = len(buffers)
                    buffers.append(Buffer(g.name, self.capacity_bytes(g), t, t))
                self.storage[s.var] = ("buffer", index_of_group[g])
                buffers[index_of_group[g]].last = max(buffers[index_of_group[g]].last, t)  # each if branch writes
        for var, (kind, idx) in list(self.storage.items()):
            if kind == "buffer":
                buf = buffers[idx]
                buf.last = max(buf.last, self.last_use.get(var, buf.first))
        for s in self.steps:   # a stacked scan output holds the earlier iterations' slots: the whole loop
            if s.slot is not None and self.storage[s.var][0] == "buffer":
                buf = buffers[self.storage[s.var][1]]
                buf.first, buf.last = min(buf.first, s.slot.first), max(buf.last, s.slot.last)
        return buffers

    def capacity_bytes(self, v: Var):
        """The bytes planned for v: at its capacity when its size is found at run time."""
        if v in self.unknown:
            total = as_expr(itemsize(v.type.dtype))
            for d in self.unknown[v]:
                total = total * d
            return total
        return self.capacity_of(nbytes(v.type))

    def add_scratch(self, buffers: list) -> None:
        """Each kernel's scratch, a buffer living for its step only."""
        for t, s in enumerate(self.steps):
            if s.call is None:
                continue
            if isinstance(s.call, CallExtern):
                if s.call.attrs.get("scratch_bytes") is not None:
                    s.scratch.append(len(buffers))
                    buffers.append(Buffer(f"{s.var.name}.scratch", self.capacity_of(s.call.attrs["scratch_bytes"]),
                                          t, t))
                continue
            program = self.mod.tensor_programs[s.call.program.name]
            mapping = dict(zip(program.size_params, s.call.size_args))
            for sb in program.scratch:
                s.scratch.append(len(buffers))
                size = self.capacity_of(substitute(sb.numel(), mapping) * itemsize(sb.dtype))
                buffers.append(Buffer(f"{s.var.name}.{sb.name}", size, t, t))

    def result(self, buffers: list) -> Liveness:
        """The analysis with aliases stored like their roots and the outputs to copy."""
        storage = self.storage
        for var in self.alias:
            storage[var] = storage.get(self.root(var))
        copies = [(k, var) for k, var in enumerate(self.outputs) if storage.get(var) != ("output", k)]
        return Liveness(self.steps, buffers, storage, self.outputs, copies, self.casts, self.capacity, self.unknown)
