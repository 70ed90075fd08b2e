"""The graph function's host code as data, decided once and rendered twice:
as C (codegen/c/host.py) and as LLVM IR (codegen/llvm/host.py).

1. `HostLowering` takes a legalized graph function and its memory plan
   (relax_edge/memory/graph.py: liveness and the planned arena) and decides
   everything its host code does: which input dimension binds each size
   variable (with its bounds),
   which dimensions are checked against which symbolic expression, where
   each value's bytes are (an input's or output's data, the weights blob,
   the workspace at a planned offset), the kernel calls with their pointer
   and size arguments, the run-time broadcast checks, the copies into
   outputs and the profiler's rows.
2. The result, a `HostFunction`, holds four entries (ENTRIES: bind,
   workspace, plan, run), each a list of operations over symbolic integers
   (IntExprs of the size variables, every one bound before it is read), the
   layout (each planned buffer's offset and the arena's total) and the
   metadata of the module's entry table (arg infos, size names, the fixed
   arena, profile rows).
3. Renderers walk an entry's operations in order; a fallible operation
   returns its status from the entry when it is not RXE_OK. Profile
   operations only count in a build with the profiler (RXE_PROFILE).
4. The entries' names and parameters are the ABI's (runtime_c/include/
   relax_edge/abi.h): `run` is PREFIX_main, `plan` PREFIX_main_plan_shapes,
   `workspace` PREFIX_main_workspace_size; `bind` is internal.

5. An `if` (linearized by memory/liveness.py, each step with its guard)
   becomes `Branch` ... `EndBranch` around each branch's operations: the
   condition's byte read at run time, then the branch's kernels and the
   copy of its result into the if's storage.

6. A match_cast (memory/liveness.py's `Cast`) runs where it stands among
   the steps: each fresh size variable is bound (`BindSize`, within 0 and
   its capacity, RXE_ERR_BOUND naming it otherwise) from the value's actual
   dim, and every other dim is checked (`CheckDim`). The actual dims live in
   run-time slots of the sizes struct (`HostFunction.run_sizes`, after the
   input sizes): a data-dependent library kernel writes its count into one
   (its `int64_t* out_count`, an `Address("sizes", slot)`), the copy ending
   an if branch whose dims differ from the other's stores its dims
   (`SetSize`). Later kernels, copies and checks read the bound variables.
7. The plan entry reports a data-dependent output dim at its capacity (the
   buffer the caller allocates); the run checks the caller's dims against the
   capacity and, at its end, writes the actual dims into outputs[k].shape
   (`StoreDim`). The layout never reads a run-time size: buffers are planned
   at capacity (memory/liveness.py).
8. A `loop` (linearized by memory/liveness.py, its body's steps under its
   LoopScope) becomes `LoopBegin` ... `LoopEnd` around the body's
   operations: iterations 0, 1, ... while below the trip count (a symbolic
   integer, or an int64 read at run time) and, where the loop can stop
   early, while the condition's byte is nonzero (read before each one).
   Each iteration stores its number (`StoreCounter`), runs the body, copies
   the results into the state and each scan value into its slot of the
   stacked output (`CopySlot`: at the iteration number times its bytes).

Library kernels (call_extern of runtime_c/kernels) are called like
generated ones, their constant weights packed at compile time. Not supported
here yet: calls between graph functions.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np

from ..errors import RelaxEdgeError
from ..ir.expr import CallExtern, Constant, Function, IRModule, Var
from ..ir.shape import IntExpr, Proof, SizeVar, as_expr, free_vars, prove_equal
from ..ir.types import TensorType, shape_str
from ..legalize.common import broadcast_checks
from ..memory import FunctionMemory, MemoryPlans, Plan
from ..memory.liveness import LoopScope, nbytes
from .abi import DTYPES, WORKSPACE_ALIGNMENT


class CodegenError(RelaxEdgeError):
    """The module cannot be compiled (C or LLVM)."""


# entry -> (symbol suffix after PREFIX_FUNC, parameter names); each returns a status
ENTRIES = {
    "bind": ("_bind", ("inputs", "s", "err")),
    "workspace": ("_workspace_size", ("size_values", "out_bytes", "err")),
    "plan": ("_plan_shapes", ("inputs", "out_shapes", "out_workspace_bytes", "err")),
    "run": ("", ("inputs", "outputs", "workspace", "workspace_bytes", "err")),
}


# ---- values and places -----------------------------------------------------

@dataclass(frozen=True)
class Dim:
    """Dimension `axis` of `tensor` ("inputs" or "outputs") number `index`."""
    tensor: str
    index: int
    axis: int


@dataclass(frozen=True)
class SizeValue:
    """size_values[index], the workspace entry's argument."""
    index: int


@dataclass(frozen=True)
class Address:
    """Where a value's bytes start: the data of "inputs"/"outputs" number
    `index`, the "weights" blob at byte `index`, the "workspace" at the
    planned offset of slot `index`, or run-time size slot `index` of the
    "sizes" struct (HostFunction.run_sizes). `dtype` types the pointer (None: bytes)."""
    base: str
    index: int
    dtype: str | None = None
    const: bool = False


# ---- operations ----------------------------------------------------------------

@dataclass
class CheckTensor:
    """The dtype and rank of a tensor (rxe_tensor_check)."""
    tensor: str
    index: int
    what: str
    code: int
    bits: int
    ndim: int


@dataclass
class BindSize:
    """Bind a size variable from a value, within its bounds (rxe_dim_bind);
    `upper` (an IntExpr) replaces the variable's own upper bound (a capacity),
    `lower` its lower bound (a function's attrs["bind_lower"]: a decoder step's
    total_seq is at least its seq)."""
    value: Dim | SizeValue | IntExpr
    var: SizeVar
    what: str
    upper: IntExpr | None = None
    lower: IntExpr | None = None


@dataclass
class CheckDim:
    """A dimension (or a run-time size, an IntExpr) equals its expected value
    (rxe_dim_check); `expr` is how the signature writes it (None for constants)."""
    value: Dim | IntExpr
    expected: IntExpr
    what: str
    expr: str | None


@dataclass
class CheckBroadcast:
    """Two dims broadcast at run time: equal, or `a` is 1 (rxe_dim_check_broadcast)."""
    a: IntExpr
    b: IntExpr
    what: str


@dataclass
class Bind:
    """The bind entry over this entry's inputs and sizes."""


@dataclass
class Layout:
    """Each planned buffer's offset; the arena's total bytes go to the entry's
    parameter `out`, or (None) are kept as the bytes the run needs."""
    out: str | None = None


@dataclass
class CheckWorkspace:
    """When bytes are needed: the workspace is there, large enough and aligned."""
    too_small: str = "workspace of %d bytes, %d needed"
    misaligned: str = "workspace is not aligned to %d bytes"
    alignment: int = WORKSPACE_ALIGNMENT


@dataclass
class StoreShape:
    """out_shapes[index] = value."""
    index: int
    value: IntExpr


@dataclass
class StoreDim:
    """outputs[index].shape[axis] = value: a data-dependent output's actual dim."""
    index: int
    axis: int
    value: IntExpr


@dataclass
class SetSize:
    """The run-time size slot `var` (of HostFunction.run_sizes) = value."""
    var: SizeVar
    value: IntExpr


@dataclass
class View:
    """`name` is a view of `of`: no code."""
    name: str
    of: str


@dataclass
class ProfileBegin:
    row: int


@dataclass
class ProfileEnd:
    """Add the time since ProfileBegin and one call to profile row `row`."""
    row: int


@dataclass
class CallKernel:
    """symbol(buffers..., sizes..., err), a status."""
    symbol: str
    buffers: list
    sizes: list
    note: str = ""


@dataclass
class Copy:
    """rxe_mem_copy(dst, src, bytes)."""
    dst: Address
    src: Address
    bytes: IntExpr


@dataclass
class Branch:
    """`if (the bool at cond is taken) {`: the operations up to the matching EndBranch run only then."""
    cond: Address
    taken: bool
    what: str


@dataclass
class EndBranch:
    """The end of the innermost Branch."""


@dataclass
class LoopBegin:
    """`for (iteration of loop `depth` = 0; below `count`; ++)`: `count` an IntExpr,
    an Address of an int64 (read at run time) or None (no limit); before each
    iteration, stop unless the bool at `cond` is set (None: never stops early)."""
    count: object
    cond: Address | None
    depth: int
    what: str


@dataclass
class LoopEnd:
    """The end of the innermost LoopBegin."""


@dataclass
class StoreCounter:
    """The int64 at `dst` = the iteration number of loop `depth` + `plus`."""
    dst: Address
    depth: int
    plus: int = 0


@dataclass
class CopySlot:
    """rxe_mem_copy(dst + iteration of loop `depth` * bytes, src, bytes)."""
    dst: Address
    src: Address
    bytes: IntExpr
    depth: int


FALLIBLE = (CheckTensor, BindSize, CheckDim, CheckBroadcast, Bind, CallKernel)


# ---- functions and modules ----------------------------------------------------

@dataclass
class ArgInfo:
    """One rxe_arg_info_t of the entry table."""
    name: str
    code: int
    bits: int
    ndim: int
    shape: str


@dataclass
class HostFunction:
    name: str                     # the graph function ("main")
    symbol: str                   # PREFIX_main
    size_vars: list               # in binding order: the sizes array / struct
    entries: dict                 # ENTRIES key -> list of operations
    offsets: list                 # (buffer name, IntExpr byte offset) per planned slot
    total: IntExpr                # the arena's bytes
    memory_plan: Plan
    inputs: list                  # ArgInfo
    outputs: list                 # ArgInfo
    profile_rows: list            # (kernel symbol, span) per kernel call
    kernels: dict                 # symbol -> tensor program, the ones called
    signature: dict               # the artifact's description of the function
    summary: str                  # "x: Tensor(...) -> Tensor(...)", for the header
    output_dims: int
    run_sizes: list = field(default_factory=list)   # bound while running: count slots, fresh sizes

    @property
    def struct_sizes(self) -> list:
        """Every field of the sizes struct: the input sizes, then the run-time ones."""
        return self.size_vars + self.run_sizes

    @property
    def fixed_workspace(self) -> int | None:
        """The arena's bytes when the plan is bounded (a constant), else None."""
        return self.memory_plan.total.value if self.memory_plan.is_bounded else None


@dataclass
class WeightsBlob:
    """Constants packed into one binary blob, each 64-byte aligned. The blob
    holds the constants' arrays themselves (no copy) until `tobytes` joins
    them, once."""
    symbol: str
    chunks: list = field(default_factory=list)    # (offset, the constant's bytes as a flat uint8 array)
    offsets: dict = field(default_factory=dict)
    size: int = 0
    _joined: bytes | None = field(default=None, repr=False)

    def add(self, const: Constant) -> int:
        key = id(const)
        if key not in self.offsets:
            data = np.ascontiguousarray(const.data)
            if data.dtype == np.bool_:
                data = data.astype(np.uint8)
            start = -(-self.size // WORKSPACE_ALIGNMENT) * WORKSPACE_ALIGNMENT
            self.chunks.append((start, data.reshape(-1).view(np.uint8)))
            self.offsets[key] = start
            self.size = start + data.nbytes
            self._joined = None
        return self.offsets[key]

    @property
    def nbytes(self) -> int:
        """The blob's length (at least 1: an empty blob is one zero byte)."""
        return max(self.size, 1)

    def tobytes(self) -> bytes:
        if self._joined is None:
            parts, end = [], 0
            for start, raw in self.chunks:
                parts += [bytes(start - end), raw]
                end = start + raw.nbytes
            parts.append(bytes(self.nbytes - end))
            self._joined = b"".join(parts)
        return self._joined


@dataclass
class HostModule:
    prefix: str
    functions: list               # HostFunction, "main" among them
    weights: WeightsBlob
    kernels: dict                 # symbol -> tensor program, every one called
    inplace: frozenset            # symbols of the kernels whose output may alias an input

    @property
    def main(self) -> HostFunction:
        return next(f for f in self.functions if f.name == "main")

    @property
    def signature(self) -> dict:
        return {f.name: f.signature for f in self.functions}


def decoder_info(host: "HostModule") -> dict | None:
    """A decoder's `step` function (transform/kv_state.py) as the runtime sees
    it: {"function", "max_context", "vocab", "state_bytes", "states" (each
    state input's shape)}; None without one. Each state is rounded up to the
    workspace alignment (as rxe_decoder_init lays them out)."""
    step = next((f for f in host.functions if f.name == "step"), None)
    if step is None:
        return None
    states = [tuple(int(d) for d in p["shape"].strip("()").split(",") if d.strip())
              for p in step.signature["inputs"] if p["name"].startswith("state_")]
    total = 0
    for shape in states:
        total += -(-int(np.prod(shape)) * 4 // WORKSPACE_ALIGNMENT) * WORKSPACE_ALIGNMENT
    vocab = step.signature["outputs"][0]["shape"].strip("()").split(",")[-1].strip()
    return {"function": "step", "max_context": states[0][2] if states else 0, "vocab": int(vocab),
            "state_bytes": total, "states": [list(s) for s in states]}


def symbol_prefix(name: str) -> str:
    ident = re.sub(r"\W", "_", name).strip("_") or "model"
    return ident if not ident[0].isdigit() else f"m_{ident}"


def kernel_symbol(kernel_prefix: str, program_name: str) -> str:
    return kernel_prefix + re.sub(r"\W", "_", program_name)


def lower_host(mod: IRModule, plans: MemoryPlans, prefix: str, kernel_prefix: str = "k_") -> HostModule:
    """The host functions of a legalized module (every operator a tensor
    program) over its memory plans, its kernels named `kernel_prefix +
    program name`."""
    prefix = symbol_prefix(prefix)
    foreign = sorted(name for name, decl in mod.externs.items() if decl.library != "runtime")
    if foreign:
        raise CodegenError(f"extern kernels of other libraries ({', '.join(foreign)}) are not supported yet")
    if "main" not in mod.functions:
        raise CodegenError("the module has no function named main")
    symbols = {name: kernel_symbol(kernel_prefix, name) for name in mod.tensor_programs}
    weights = WeightsBlob(f"{prefix}_weights")
    packed: dict = {}   # shared: a weight packed for main is the same bytes for step
    functions = [HostLowering(mod, func, plans[name], prefix, symbols, weights, packed).lower()
                 for name, func in mod.functions.items()]
    called = set().union(*(f.kernels for f in functions))
    kernels = {symbols[name]: program for name, program in mod.tensor_programs.items() if symbols[name] in called}
    inplace = frozenset(symbols[name] for name in plans.inplace if symbols[name] in called)
    return HostModule(prefix, functions, weights, kernels, inplace)


class HostLowering:
    """The host operations of one graph function over its memory plan."""

    def __init__(self, mod: IRModule, func: Function, memory: FunctionMemory, prefix: str, kernels: dict,
                 weights: WeightsBlob, packed: dict | None = None):
        self.mod = mod
        self.func = func
        self.symbol = f"{prefix}_{func.name}"
        self.kernels = kernels      # program name -> kernel symbol
        self.weights = weights
        self.live = memory.liveness
        self.plan = memory.plan
        self.size_vars: list = []
        self.profile_rows: list = []
        self.called: dict = {}
        self.packed = {} if packed is None else packed   # (constant id, packer) -> packed Constant
        self.run_sizes: list = []   # count slots and fresh sizes, bound by the run entry
        self.slots: dict = {}       # (Var, axis) -> its run-time size slot

    def lower(self) -> HostFunction:
        bind = self.bind_entry()   # binds the size variables, which the others read
        entries = {"bind": bind, "workspace": self.workspace_entry(), "plan": self.plan_entry(),
                   "run": self.run_entry()}
        outs = self.live.outputs
        out_names = [f"output{k}" if len(outs) > 1 else "output" for k in range(len(outs))]
        signature = {
            "inputs": [{"name": p.name, "dtype": p.type.dtype, "shape": shape_str(p.type.shape)}
                       for p in self.func.params],
            "outputs": [{"dtype": v.type.dtype, "shape": shape_str(v.type.shape), "ndim": len(v.type.shape),
                         "capacity": shape_str([self.live.capacity_of(d) for d in v.type.shape])}
                        for v in outs],
            "sizes": [v.name for v in self.size_vars],
            "fixed_workspace_bytes": self.plan.total.value if self.plan.is_bounded else None,
        }
        summary = (", ".join(f"{p.name}: {p.type}" for p in self.func.params) + " -> "
                   + ", ".join(str(v.type) for v in outs))
        return HostFunction(
            self.func.name, self.symbol, self.size_vars, entries,
            [(b.name, self.sized(off)) for b, off in zip(self.plan.buffers, self.plan.offsets)],
            self.sized(self.plan.total), self.plan,
            [arg_info(p.name, p.type) for p in self.func.params],
            [arg_info(name, v.type) for name, v in zip(out_names, outs)],
            self.profile_rows, self.called, signature, summary,
            max(sum(len(v.type.shape) for v in outs), 1), self.run_sizes)

    # helpers ---------------------------------------------------------------
    def sized(self, e) -> IntExpr:
        """A symbolic integer whose size variables are all bound."""
        e = as_expr(e)
        unbound = [v.name for v in free_vars(e) if v not in self.size_vars and v not in self.run_sizes]
        if unbound:
            raise CodegenError(f"function {self.func.name}: size {', '.join(sorted(unbound))} is not bound "
                               "by any input dimension")
        return e

    def address(self, e, dtype: str | None = None) -> Address:
        if isinstance(e, Constant):
            return Address("weights", self.weights.add(e), dtype, const=True)
        if not isinstance(e, Var):
            raise CodegenError(f"function {self.func.name}: argument {type(e).__name__} is not supported")
        where = self.live.storage.get(e)
        if where is None:
            raise CodegenError(f"function {self.func.name}: {e.name} has no storage")
        kind, index = where
        if kind == "const":
            return Address("weights", self.weights.add(index), dtype)
        base = {"input": "inputs", "output": "outputs", "buffer": "workspace"}[kind]
        return Address(base, index, dtype)

    def bind_size(self, var: SizeVar, value, what: str) -> BindSize:
        if var not in self.size_vars:
            self.size_vars.append(var)
        return BindSize(value, var, what)

    # entries ---------------------------------------------------------------
    def bind_entry(self) -> list:
        """Each input's dtype and rank; each size variable bound from the first
        dimension that is exactly it; every other dimension checked."""
        ops, binding_dims = [], set()
        lower = dict((self.func.attrs or {}).get("bind_lower", ()))
        for i, p in enumerate(self.func.params):
            t = p.type
            if not isinstance(t, TensorType) or t.shape is None:
                raise CodegenError(f"function {self.func.name}: parameter {p.name} must be a tensor of known rank")
            code, bits, _ = DTYPES[t.dtype]
            ops.append(CheckTensor("inputs", i, f"input {p.name}", code, bits, len(t.shape)))
            for d, dim in enumerate(t.shape):
                var = dim.as_var()
                if var is not None and var not in self.size_vars:
                    binding_dims.add((i, d))
                    ops.append(self.bind_size(var, Dim("inputs", i, d), f"input {p.name} dimension {d}"))
                    if var in lower:
                        ops[-1].lower = self.sized(lower[var])
        for i, p in enumerate(self.func.params):
            for d, dim in enumerate(p.type.shape):
                if (i, d) not in binding_dims:
                    ops.append(CheckDim(Dim("inputs", i, d), self.sized(dim), f"input {p.name} dimension {d}",
                                        None if dim.is_const else str(dim)))
        return ops

    def workspace_entry(self) -> list:
        ops = [BindSize(SizeValue(k), var, f"size {var.name}") for k, var in enumerate(self.size_vars)]
        return ops + [Layout("out_bytes")]

    def plan_entry(self) -> list:
        """The outputs' dims (a data-dependent one at its capacity) and the workspace."""
        dims = [self.live.capacity_of(d) for v in self.live.outputs for d in v.type.shape]
        return [Bind(), *(StoreShape(k, self.sized(d)) for k, d in enumerate(dims)), Layout("out_workspace_bytes")]

    def run_entry(self) -> list:
        ops = [Bind(), Layout(), CheckWorkspace()]
        for k, v in enumerate(self.live.outputs):
            code, bits, _ = DTYPES[v.type.dtype]
            ops.append(CheckTensor("outputs", k, f"output {k}", code, bits, len(v.type.shape)))
            ops += [CheckDim(Dim("outputs", k, d), self.sized(self.live.capacity_of(dim)), f"output {k} dimension {d}",
                             None) for d, dim in enumerate(v.type.shape)]
        guard: tuple = ()
        casts = list(self.live.casts)
        for t, step in enumerate(self.live.steps + [None]):
            while casts and casts[0].at == t:
                ops += self.enter_guard(guard, casts[0].guard)
                guard = casts[0].guard
                ops += self.match_cast(casts.pop(0))
            if step is None:
                break
            ops += self.enter_guard(guard, step.guard)
            guard = step.guard
            ops += self.step(step)
        ops += self.enter_guard(guard, ())
        for k, v in self.live.copies:
            ops.append(Copy(Address("outputs", k), self.address(v), self.sized(nbytes(v.type))))
        return ops + self.actual_dims()

    # match_cast and data-dependent sizes -----------------------------------------
    def slot(self, var: Var, axis: int) -> SizeVar:
        """The run-time size slot holding dim `axis` of `var`."""
        if (var, axis) not in self.slots:
            self.slots[(var, axis)] = SizeVar(f"{var.name}_dim{axis}", lower=0)
            self.run_sizes.append(self.slots[(var, axis)])
        return self.slots[(var, axis)]

    def actual_dims(self) -> list:
        """The actual dims of the data-dependent outputs, into the caller's shape arrays."""
        found = set(self.live.capacity)
        return [StoreDim(k, d, self.sized(dim)) for k, v in enumerate(self.live.outputs)
                for d, dim in enumerate(v.type.shape) if set(free_vars(dim)) & found]

    def source_dims(self, source: Var) -> list:
        """The actual dims of a cast's value: run-time slots where its shape is found at run time."""
        if source not in self.live.unknown:
            return [self.sized(d) for d in source.type.shape]
        capacity = self.live.unknown[source]
        producer = next((s for s in self.live.steps if s.var is source and s.call is not None), None)
        if producer is not None:   # a data-dependent kernel: its count at one axis, the others exact
            axis = producer.call.attrs["count"]
            return [as_expr(self.slot(source, axis)) if d == axis else self.sized(c) for d, c in enumerate(capacity)]
        return [as_expr(self.slot(source, d)) for d in range(len(capacity))]   # an if's result: each branch's dims

    def match_cast(self, cast) -> list:
        """Bind the cast's fresh sizes (within 0 and their capacity) and check its other dims."""
        ops = []
        producer = next((s.call for s in self.live.steps if s.var is cast.source and s.call is not None), None)
        where = f"match_cast {cast.var.name}" + (f" of {producer.span}" if getattr(producer, "span", None) else "")
        for d, (target, actual) in enumerate(zip(cast.var.type.shape, self.source_dims(cast.source))):
            var = target.as_var()
            what = f"{where} dimension {d}"
            if var is not None and var in cast.fresh:
                if var not in self.run_sizes:
                    self.run_sizes.append(var)
                ops.append(BindSize(actual, var, what, upper=self.sized(self.live.capacity[var])))
            elif prove_equal(target, actual) is not Proof.YES:
                ops.append(CheckDim(actual, self.sized(target), what, str(target)))
        return ops

    def enter_guard(self, current: tuple, wanted: tuple) -> list:
        """The EndBranch / LoopEnd and Branch / LoopBegin operations that take
        the code from inside the branches and loops `current` to inside
        `wanted` (each outermost first)."""
        common = 0
        while common < min(len(current), len(wanted)) and current[common] == wanted[common]:
            common += 1   # a LoopScope compares by identity
        ops: list = [LoopEnd() if isinstance(g, LoopScope) else EndBranch() for g in reversed(current[common:])]
        for g in wanted[common:]:
            if isinstance(g, LoopScope):
                ops += self.loop_begin(g)
                continue
            number, taken, cond = g
            ops.append(Branch(self.address(cond, "bool"), taken,
                              f"if {number} ({'then' if taken else 'else'} branch, on {getattr(cond, 'name', cond)})"))
        return ops

    def loop_begin(self, scope: LoopScope) -> list:
        """The loop's head; before it, the dims of the stacked outputs whose length is the iterations run."""
        ops = []
        for target, dims in scope.counted:
            ops.append(SetSize(self.slot(target, 0), as_expr(0)))
            ops += [SetSize(self.slot(target, d + 1), self.sized(dim)) for d, dim in enumerate(dims)]
        trip = scope.trip
        count = trip if trip is None else self.address(trip, "int64") if isinstance(trip, (Var, Constant)) \
            else self.sized(trip)
        cond = None if scope.cond is None else self.address(scope.cond, "bool")
        return ops + [LoopBegin(count, cond, scope.depth, f"loop {scope.number}")]

    def step(self, step) -> list:
        """Run-time broadcast checks, then the kernel (views run none); a copy
        step copies an if branch's result into the if's storage."""
        call, var = step.call, step.var
        if step.counter is not None:
            return [StoreCounter(self.address(var, "int64"), step.counter.depth)]
        if step.slot is not None:
            ops = [CopySlot(self.address(var), self.address(step.copy_from), self.sized(nbytes(step.copy_from.type)),
                            step.slot.depth)]
            if var in self.live.unknown:   # one more iteration run: the stacked output's length
                count = Address("sizes", self.run_sizes.index(self.slot(var, 0)), "int64")
                ops.append(StoreCounter(count, step.slot.depth, plus=1))
            return ops
        if call is None:
            src = step.copy_from
            if var in self.live.unknown:   # this branch's dims differ from the other's: recorded for the cast
                return [*(SetSize(self.slot(var, d), self.sized(dim)) for d, dim in enumerate(src.type.shape)),
                        Copy(self.address(var), self.address(src), self.sized(nbytes(src.type)))]
            if self.address(var) == self.address(src):   # a view of the value it is copied into (a loop's state)
                return []
            return [Copy(self.address(var), self.address(src), self.sized(nbytes(var.type)))]
        if isinstance(call, CallExtern):
            return self.library_step(step)
        program = self.mod.tensor_programs[call.program.name]
        ops = []
        skip = program.attrs.get("broadcast_skip")
        if skip is not None:
            for a, d, _, dim, out_dim in broadcast_checks([x.type for x in call.args], call.type, skip):
                what = f"{program.attrs.get('op', call.program.name)} ({call.span or var.name}) argument {a} " \
                       f"dimension {d}"
                ops.append(CheckBroadcast(self.sized(dim), self.sized(out_dim), what))
        if step.view_of is not None:
            return ops + [View(var.name, step.view_of.name)]
        symbol = self.kernels[call.program.name]
        self.called[symbol] = program
        buffers = [self.address(x, x.type.dtype) for x in call.args]
        buffers.append(self.address(var, call.type.dtype))
        buffers += [Address("workspace", k, buf.dtype) for k, buf in zip(step.scratch, program.scratch)]
        note = f"in place over {step.inplace_over.name}" if step.inplace_over is not None else ""
        row = len(self.profile_rows)
        self.profile_rows.append((symbol, call.span or var.name))
        return ops + [ProfileBegin(row), CallKernel(symbol, buffers, [self.sized(s) for s in call.size_args], note),
                      ProfileEnd(row)]


    def library_step(self, step) -> list:
        """A library kernel (runtime_c/kernels): its constants packed as the
        kernel wants them (once per constant and packer), then the call."""
        from ..library import pack
        call, var = step.call, step.var
        packers = dict(call.attrs.get("pack", ()))
        buffers = []
        for i, x in enumerate(call.args):
            if i in packers:
                const = x if isinstance(x, Constant) else self.live.storage.get(x, (None, None))[1]
                if not isinstance(const, Constant):
                    raise CodegenError(f"{call.name} ({call.span or var.name}): argument {i} must be a constant")
                key = (id(const), packers[i])
                if key not in self.packed:
                    groups = dict(call.attrs.get("params", ())).get("groups", 1)
                    self.packed[key] = Constant(pack(packers[i], const.data, groups=groups))
                buffers.append(self.address(self.packed[key], "float32"))
            else:
                buffers.append(self.address(x, x.type.dtype))
        buffers.append(self.address(var, call.type.dtype))
        if "count" in call.attrs:   # a data-dependent result: its count into a run-time slot
            buffers.append(Address("sizes", self.run_sizes.index(self.slot(var, call.attrs["count"])), "int64"))
        buffers += [Address("workspace", k, None if "count" in call.attrs else "float32") for k in step.scratch]
        row = len(self.profile_rows)
        self.profile_rows.append((call.name, call.span or var.name))
        sizes = [self.sized(s) for s in call.attrs["sizes"]]
        return [ProfileBegin(row), CallKernel(call.name, buffers, sizes, "library"), ProfileEnd(row)]


def arg_info(name: str, t: TensorType) -> ArgInfo:
    code, bits, _ = DTYPES[t.dtype]
    return ArgInfo(name, code, bits, len(t.shape), shape_str(t.shape))
