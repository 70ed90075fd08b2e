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
   records it (`inplace_over`); the IR is not changed.
4. Values that are function outputs are computed straight into the caller's
   output tensors when their producer is a kernel; others are copied there
   at the end.

Values are grouped (views, in-place results) and each group is one buffer.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import RelaxEdgeError
from ..ir.expr import CallExtern, CallTensor, Constant, Function, IRModule, MatchCast, Tuple, Var
from ..ir.shape import Proof, as_expr, prove_equal, substitute
from ..ir.types import TensorType, TupleType
from ..op.registry import OPS
from .plan import Buffer

VIEW_OPS = frozenset({"reshape"})
INPLACE_KINDS = frozenset({"elementwise", "broadcast"})


def itemsize(dtype: str) -> int:
    return {"float32": 4, "float16": 2, "float64": 8, "int8": 1, "uint8": 1, "int32": 4, "int64": 8,
            "bool": 1}[dtype]


def nbytes(t: TensorType):
    total = as_expr(itemsize(t.dtype))
    for d in t.shape:
        total = total * d
    return total


@dataclass
class Step:
    var: Var
    call: CallTensor | CallExtern
    view_of: Var | None = None          # a view: no kernel, shares this value's storage
    inplace_over: Var | None = None     # writes over this argument's storage
    scratch: list = field(default_factory=list)   # buffer indices of its scratch


@dataclass
class Liveness:
    steps: list
    buffers: list                 # memory.plan.Buffer
    storage: dict                 # Var -> ("input", i) | ("const", Constant) | ("output", k) | ("buffer", i)
    outputs: list                 # output Vars in order
    copies: list                  # (output index, Var) copied into outputs at the end


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


def _same_type(a: TensorType, b: TensorType) -> bool:
    return (a.dtype == b.dtype and len(a.shape) == len(b.shape)
            and all(prove_equal(x, y) is Proof.YES for x, y in zip(a.shape, b.shape)))


def analyze(mod: IRModule, func: Function, inplace: bool = True, views: bool = True) -> Liveness:
    storage: dict = {}
    for i, p in enumerate(func.params):
        storage[p] = ("input", i)
    alias: dict = {}          # Var -> Var whose storage it uses (plain var bindings)
    steps: list[Step] = []
    for block in func.body.blocks:
        for b in block.bindings:
            if isinstance(b, MatchCast):
                raise RelaxEdgeError(f"function {func.name}: match_cast ({b.var.name}) is not supported by "
                                     "the C backend yet")
            v = b.value
            if isinstance(v, (CallTensor, CallExtern)):
                if not isinstance(v.type, TensorType):
                    raise RelaxEdgeError(f"{b.var.name}: tuple-valued kernels are not supported yet")
                steps.append(Step(b.var, v))
            elif isinstance(v, Var):
                alias[b.var] = v
            elif isinstance(v, Constant):
                storage[b.var] = ("const", v)
            elif not isinstance(v, Tuple):
                raise RelaxEdgeError(f"function {func.name}: binding {b.var.name} ({type(v).__name__}) is not "
                                     "supported by the C backend yet")

    def root(x):
        while x in alias:
            x = alias[x]
        return x

    outputs = output_vars(func)
    claimed = {}
    producers = {s.var: s for s in steps}
    for k, var in enumerate(outputs):
        r = root(var)
        if r in producers and r not in claimed:
            claimed[r] = k
    last_use: dict = {}
    for t, s in enumerate(steps):
        for a in s.call.args:
            if isinstance(a, Var):
                last_use[root(a)] = t
    end = len(steps)
    for var in outputs:
        last_use[root(var)] = end

    # groups of values that share storage: views and in-place results
    group: dict = {}

    def find(x):
        while group.get(x, x) is not x:
            x = group[x]
        return x

    for t, s in enumerate(steps):
        if isinstance(s.call, CallExtern):   # library kernels write their own output, never in place
            continue
        program = mod.tensor_programs[s.call.program.name]
        op = program.attrs.get("op")
        arg0 = s.call.args[0] if s.call.args else None
        if views and op in VIEW_OPS and isinstance(arg0, Var) and s.var not in claimed:
            s.view_of = root(arg0)
            group[s.var] = find(s.view_of)
            continue
        pointwise = (OPS[op].kind if op in OPS else program.attrs.get("pattern")) in INPLACE_KINDS
        if inplace and s.var not in claimed and pointwise:
            for a in s.call.args:
                if not isinstance(a, Var):
                    continue
                ra = find(root(a))
                if ra in producers and ra not in claimed and last_use.get(root(a)) == t \
                        and _members_die_by(ra, t, group, last_use, root) and _same_type(a.type, s.var.type) \
                        and storage.get(ra) is None:
                    s.inplace_over = root(a)
                    group[s.var] = ra
                    break

    buffers: list[Buffer] = []
    index_of_group: dict = {}
    for t, s in enumerate(steps):
        if s.var in claimed:
            storage[s.var] = ("output", claimed[s.var])
            continue
        g = find(s.var)
        if g in claimed:
            storage[s.var] = ("output", claimed[g])
            continue
        if g in storage:   # a view of an input, a constant or an output
            storage[s.var] = storage[g]
            continue
        if g not in index_of_group:
            index_of_group[g] = len(buffers)
            buffers.append(Buffer(g.name, nbytes(g.type), t, t))
        storage[s.var] = ("buffer", index_of_group[g])
    # lifetimes: a group lives from its producer to the last use of any member
    for var, (kind, idx) in list(storage.items()):
        if kind == "buffer":
            buf = buffers[idx]
            buf.last = max(buf.last, last_use.get(var, buf.first))
    for t, s in enumerate(steps):
        if isinstance(s.call, CallExtern):
            if s.call.attrs.get("scratch_bytes") is not None:
                s.scratch.append(len(buffers))
                buffers.append(Buffer(f"{s.var.name}.scratch", s.call.attrs["scratch_bytes"], t, t))
            continue
        program = mod.tensor_programs[s.call.program.name]
        mapping = dict(zip(program.size_params, s.call.size_args))
        for sb in program.scratch:
            s.scratch.append(len(buffers))
            size = substitute(sb.numel(), mapping) * itemsize(sb.dtype)
            buffers.append(Buffer(f"{s.var.name}.{sb.name}", size, t, t))
    for var in alias:
        storage[var] = storage[root(var)] if root(var) in storage else None
    copies = [(k, var) for k, var in enumerate(outputs) if storage.get(var) != ("output", k)]
    return Liveness(steps, buffers, storage, outputs, copies)


def _members_die_by(g, t, group, last_use, root) -> bool:
    """Every value sharing g's storage is dead after step t."""
    for member in group:
        top = member
        while group.get(top, top) is not top:
            top = group[top]
        if top is g and last_use.get(root(member), -1) > t:
            return False
    return last_use.get(g, -1) <= t
