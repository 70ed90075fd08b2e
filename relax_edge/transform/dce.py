"""dce: dead-code elimination over graph functions and the module.

1. In every graph function (and in each branch of an `if` and the body of
   a `loop`, whose result is always kept whole), a `VarBinding`
   whose variable nothing uses is removed, walking backwards so that whole
   dead chains go in one pass. Every value of the graph IR is pure: operator
   calls, calls of graph functions, tensor programs and externs; removing an
   unused one also removes any run-time error it would have raised (an
   integer division by zero, a failed dynamic reshape).
2. `match_cast` bindings are always kept, with what they read: their check
   can fail at run time and they may bind size variables used later. So are
   writes of a decoder's state (kv_append, and its library kernel: a call
   with attrs["inplace_arg"]): their effect is on the caller's memory.
3. Blocks left empty are dropped.
4. Graph functions not reachable from `main` or another entry function
   (attrs["entry"], a decoder's `step`) by calls or by name are removed,
   then tensor programs and externs that no remaining function calls. A
   module without `main` keeps all its graph functions.

Does not remove parameters, rewrite calls, or look inside tensor programs
(a program is kept or removed whole).
"""

from __future__ import annotations

from ..ir.expr import (
    Call,
    CallExtern,
    CallTensor,
    Function,
    GlobalVar,
    If,
    IRModule,
    Loop,
    MatchCast,
    SeqExpr,
    VarBinding,
)
from ..ir.visitor import ExprVisitor

__all__ = ["dce"]


class _Uses(ExprVisitor):
    """Variables, graph functions, tensor programs and externs an expression refers to."""

    def __init__(self):
        self.vars: set = set()
        self.names: set = set()

    def visit_Var(self, v):
        self.vars.add(v)

    def visit_GlobalVar(self, g):
        self.names.add(g.name)

    def visit_Call(self, c: Call):
        if isinstance(c.op, GlobalVar):
            self.names.add(c.op.name)
        super().visit_Call(c)

    def visit_CallTensor(self, c: CallTensor):
        self.names.add(c.program.name)
        super().visit_CallTensor(c)

    def visit_CallExtern(self, c: CallExtern):
        self.names.add(c.name)
        super().visit_CallExtern(c)

    def visit_binding(self, b):
        self.visit(b.value)


def _read(e, live: set) -> None:
    uses = _Uses()
    uses.visit(e)
    live |= uses.vars


def _writes_state(value) -> bool:
    """A call that writes a decoder's state in place (kept even when nothing reads its result)."""
    if isinstance(value, Call):
        return getattr(value.op, "name", None) == "kv_append"
    return isinstance(value, CallExtern) and "inplace_arg" in value.attrs


def _sweep_seq(seq: SeqExpr, live: set) -> SeqExpr:
    """`seq` without its dead bindings; adds what the kept ones read to `live`."""
    _read(seq.body, live)
    blocks = []
    for block in reversed(seq.blocks):
        kept = []
        for b in reversed(block.bindings):
            if not isinstance(b, MatchCast) and b.var not in live and not _writes_state(b.value):
                continue
            if isinstance(b, VarBinding) and isinstance(b.value, If):
                value = b.value
                branches = [_sweep_seq(br, live) for br in (value.then_branch, value.else_branch)]
                if any(new is not old for new, old in zip(branches, (value.then_branch, value.else_branch))):
                    b = VarBinding(b.var, If(value.cond, *branches, value.type))
                _read(value.cond, live)
            elif isinstance(b, VarBinding) and isinstance(b.value, Loop):
                value = b.value
                body = _sweep_seq(value.body, live)
                if body is not value.body:
                    b = VarBinding(b.var, Loop(value.trip_count, value.cond, value.init, value.params, body,
                                               value.type))
                for x in value.operands():
                    _read(x, live)
            else:
                _read(b.value, live)
            kept.append(b)
        if kept:
            kept.reverse()
            same = len(kept) == len(block.bindings) and all(a is b for a, b in zip(kept, block.bindings))
            blocks.append(block if same else type(block)(kept))
    blocks.reverse()
    if len(blocks) == len(seq.blocks) and all(a is b for a, b in zip(blocks, seq.blocks)):
        return seq
    return SeqExpr(blocks, seq.body)


def _sweep_function(f: Function) -> Function:
    body = _sweep_seq(f.body, set())
    return f if body is f.body else Function(f.params, body, f.ret_type, f.name, f.attrs)


def _references(f: Function) -> set:
    uses = _Uses()
    uses.visit(f)
    return uses.names


def dce(mod: IRModule) -> IRModule:
    """The module without unused bindings, graph functions, tensor programs and externs."""
    functions = {name: _sweep_function(f) for name, f in mod.functions.items()}
    if "main" in functions:
        reached = set()
        todo = ["main", *(n for n, f in functions.items() if (f.attrs or {}).get("entry"))]
        while todo:
            name = todo.pop()
            if name in reached or name not in functions:
                continue
            reached.add(name)
            todo.extend(_references(functions[name]))
        functions = {name: f for name, f in functions.items() if name in reached}
    names = set()
    for f in functions.values():
        names |= _references(f)
    return IRModule(functions,
                    {name: p for name, p in mod.tensor_programs.items() if name in names},
                    {name: d for name, d in mod.externs.items() if name in names})
