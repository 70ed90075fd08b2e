"""Visitor and mutator over the graph IR.

`ExprVisitor.visit(e)` dispatches to `visit_<ClassName>`; the defaults walk
every child. `ExprMutator` rebuilds a function bottom-up: override
`rewrite_call(call)` (or any `visit_<ClassName>`) to return a replacement,
and uses of rebound variables follow automatically. Nodes that do not
change are reused, so an identity mutator returns the same objects.
"""

from __future__ import annotations

from .expr import (
    BindingBlock,
    Call,
    CallExtern,
    CallTensor,
    Expr,
    Function,
    If,
    IRModule,
    Loop,
    MatchCast,
    SeqExpr,
    Tuple,
    TupleGetItem,
    Var,
    VarBinding,
)

__all__ = ["ExprVisitor", "ExprMutator"]


class ExprVisitor:
    def visit(self, e):
        return getattr(self, "visit_" + type(e).__name__, self.generic_visit)(e)

    def generic_visit(self, e):
        return None

    def visit_Function(self, f: Function):
        for p in f.params:
            self.visit(p)
        self.visit(f.body)

    def visit_SeqExpr(self, seq: SeqExpr):
        for block in seq.blocks:
            self.visit_block(block)
        self.visit(seq.body)

    def visit_block(self, block: BindingBlock):
        for b in block.bindings:
            self.visit_binding(b)

    def visit_binding(self, b):
        self.visit(b.value)
        self.visit(b.var)

    def visit_DataflowVar(self, v):
        return self.visit_Var(v)

    def visit_Var(self, v):
        return None

    def _visit_args(self, e):
        for a in e.args:
            self.visit(a)

    visit_Call = visit_CallTensor = visit_CallExtern = _visit_args

    def visit_Tuple(self, t: Tuple):
        for f in t.fields:
            self.visit(f)

    def visit_TupleGetItem(self, t: TupleGetItem):
        self.visit(t.tuple_value)

    def visit_If(self, e: If):
        self.visit(e.cond)
        self.visit(e.then_branch)
        self.visit(e.else_branch)

    def visit_Loop(self, e: Loop):
        for x in e.operands():
            self.visit(x)
        for p in e.params:
            self.visit(p)
        self.visit(e.body)


class ExprMutator:
    def __init__(self):
        self.var_map: dict = {}

    def visit(self, e):
        return getattr(self, "visit_" + type(e).__name__, lambda x: x)(e)

    def visit_module(self, mod: IRModule) -> IRModule:
        functions = {name: self.visit_Function(f) for name, f in mod.functions.items()}
        return IRModule(functions, mod.tensor_programs, mod.externs)

    def visit_Function(self, f: Function) -> Function:
        self.var_map = {}
        body = self.visit_SeqExpr(f.body)
        if body is f.body:
            return f
        return Function(f.params, body, body.type, f.name, f.attrs)

    def visit_SeqExpr(self, seq: SeqExpr) -> SeqExpr:
        blocks = [self.visit_block(b) for b in seq.blocks]
        body = self.visit(seq.body)
        if all(a is b for a, b in zip(blocks, seq.blocks)) and body is seq.body:
            return seq
        return SeqExpr(blocks, body)

    def visit_block(self, block: BindingBlock) -> BindingBlock:
        new = []
        for b in block.bindings:
            new.extend(self.visit_binding(b))
        if len(new) == len(block.bindings) and all(a is b for a, b in zip(new, block.bindings)):
            return block
        return type(block)(new)

    def visit_binding(self, b) -> list:
        """Return the bindings that replace `b` (usually one)."""
        value = self.visit(b.value)
        if value is b.value:
            return [b]
        if isinstance(b, MatchCast):
            return [MatchCast(b.var, value, b.type)]
        var = b.var
        if value.type != var.type:
            var = type(var)(var.name, value.type)
            self.var_map[b.var] = var
        return [VarBinding(var, value)]

    def visit_Var(self, v: Var):
        return self.var_map.get(v, v)

    visit_DataflowVar = visit_Var

    def _args(self, args):
        new = [self.visit(a) for a in args]
        return new, any(a is not b for a, b in zip(new, args))

    def visit_Call(self, c: Call):
        args, changed = self._args(c.args)
        if changed:
            c = Call(c.op, args, c.attrs, c.type, c.span)
        return self.rewrite_call(c)

    def rewrite_call(self, call: Call):
        """Hook: return a replacement for an operator call (default: itself)."""
        return call

    def visit_CallTensor(self, c: CallTensor):
        args, changed = self._args(c.args)
        return CallTensor(c.program, args, c.type, c.size_args, c.span) if changed else c

    def visit_CallExtern(self, c: CallExtern):
        args, changed = self._args(c.args)
        return CallExtern(c.name, args, c.type, c.attrs, c.span) if changed else c

    def visit_Tuple(self, t: Tuple):
        fields, changed = self._args(t.fields)
        return Tuple(fields) if changed else t

    def visit_TupleGetItem(self, t: TupleGetItem):
        inner = self.visit(t.tuple_value)
        return t if inner is t.tuple_value else TupleGetItem(inner, t.index)

    def visit_If(self, e: If):
        cond, then_b, else_b = self.visit(e.cond), self.visit_SeqExpr(e.then_branch), self.visit_SeqExpr(e.else_branch)
        if cond is e.cond and then_b is e.then_branch and else_b is e.else_branch:
            return e
        return If(cond, then_b, else_b, e.type)


    def visit_Loop(self, e: Loop):
        trip = self.visit(e.trip_count) if isinstance(e.trip_count, Expr) else e.trip_count
        cond = None if e.cond is None else self.visit(e.cond)
        init, changed = self._args(e.init)
        body = self.visit_SeqExpr(e.body)
        if trip is e.trip_count and cond is e.cond and not changed and body is e.body:
            return e
        return Loop(trip, cond, init, e.params, body, e.type)
