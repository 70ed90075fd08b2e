"""Visitors and mutators over tensor-program statements and expressions.

Mirrors the graph IR's ir/visitor.py. `visit(node)` dispatches once, to the
method `visit_<ClassName>` of the node's class (looked up once per visitor
class and node class, then cached); a node class without a hook goes to
`generic_visit` where the visitor defines one, and is otherwise a
`NoHookError` (a RelaxEdgeError, and a TypeError) naming both classes.

1. `StmtVisitor` / `ExprVisitor`: the default hooks walk every child
   (statements' expressions through `visit_expr`, which does nothing in a
   StmtVisitor). Override a hook to act on a node; call the base hook to
   keep descending.
2. `StmtMutator` / `ExprMutator`: the default hooks rebuild a node from its
   visited children, and only when a child changed, so a mutator that
   changes nothing returns the very same objects. A StmtMutator sends every
   expression a statement holds through `visit_expr` (identity by default)
   and every stored buffer through `visit_buffer`.
3. Functions over a callback for one-off walks: `map_expr`, `map_stmt_exprs`,
   `walk_stmt`.
"""

from __future__ import annotations

import dataclasses

from ..errors import RelaxEdgeError
from .expr import Intrinsic, Load
from .stmt import Allocate, Assert, For, IfThenElse, Let, Seq, Store

__all__ = ["NoHookError", "NodeFunctor", "StmtVisitor", "StmtMutator", "ExprVisitor", "ExprMutator",
           "map_expr", "map_stmt_exprs", "walk_stmt"]


class NoHookError(RelaxEdgeError, TypeError):
    """A visitor met a node class it has no hook for (a backend that cannot
    emit it, or a value that is not a tensor-program node)."""


class NodeFunctor:
    """Dispatch on the class of a node to the hook `visit_<ClassName>`."""

    _hooks: dict = {}

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        cls._hooks = {}

    def visit(self, node):
        cls = type(self)
        hook = cls._hooks.get(type(node))
        if hook is None:
            hook = cls._hooks[type(node)] = self._find_hook(type(node))
        return hook(self, node)

    @classmethod
    def _find_hook(cls, node_class):
        hook = getattr(cls, "visit_" + node_class.__name__, None) or getattr(cls, "generic_visit", None)
        if hook is None:
            raise NoHookError(f"{cls.__name__} cannot handle {node_class.__name__} (no visit_{node_class.__name__})")
        return hook


# ------------------------------------------------------------ expressions

class ExprVisitor(NodeFunctor):
    """Visits every node of an expression; leaves do nothing."""

    def visit_leaf(self, e):
        return None

    visit_Const = visit_Index = visit_ScalarVar = visit_leaf

    def visit_binary(self, e):
        self.visit(e.a)
        self.visit(e.b)

    visit_BinOp = visit_Compare = visit_Logical = visit_binary

    def visit_Not(self, e):
        self.visit(e.a)

    visit_Cast = visit_Reinterpret = visit_Not

    def visit_Select(self, e):
        self.visit(e.cond)
        self.visit(e.a)
        self.visit(e.b)

    def visit_Intrinsic(self, e):
        for a in e.args:
            self.visit(a)

    def visit_Load(self, e):
        for i in e.indices:
            self.visit(i)

    def visit_Reduce(self, e):   # tir.compute's reduction, before lowering
        self.visit(e.source)
        self.visit(e.init)


class ExprMutator(NodeFunctor):
    """Rebuilds an expression bottom-up; unchanged nodes are reused."""

    def visit_leaf(self, e):
        return e

    visit_Const = visit_Index = visit_ScalarVar = visit_leaf

    def _replace(self, e, fields):
        new = {f: self.visit(getattr(e, f)) for f in fields}
        return e if all(new[f] is getattr(e, f) for f in fields) else dataclasses.replace(e, **new)

    def visit_binary(self, e):
        return self._replace(e, ("a", "b"))

    visit_BinOp = visit_Compare = visit_Logical = visit_binary

    def visit_Not(self, e):
        return self._replace(e, ("a",))

    visit_Cast = visit_Reinterpret = visit_Not

    def visit_Select(self, e):
        return self._replace(e, ("cond", "a", "b"))

    def visit_Intrinsic(self, e):
        args = self.visit_all(e.args)
        return e if args is e.args else Intrinsic(e.name, args, e.dtype)

    def visit_Load(self, e):
        indices = self.visit_all(e.indices)
        return e if indices is e.indices else Load(e.buffer, indices)

    def visit_Reduce(self, e):   # tir.compute's reduction, before lowering
        return self._replace(e, ("source", "init"))

    def visit_all(self, exprs: tuple) -> tuple:
        """The visited `exprs`; the same tuple when none changed."""
        new = tuple(self.visit(x) for x in exprs)
        return exprs if all(a is b for a, b in zip(new, exprs)) else new


# ------------------------------------------------------------ statements

class StmtVisitor(NodeFunctor):
    """Visits every statement, parents first; expressions go to visit_expr."""

    def visit_expr(self, e) -> None:
        return None

    def visit_Store(self, s: Store):
        for i in s.indices:
            self.visit_expr(i)
        self.visit_expr(s.value)

    def visit_For(self, s: For):
        self.visit(s.body)

    visit_Allocate = visit_For

    def visit_Let(self, s: Let):
        self.visit_expr(s.value)
        self.visit(s.body)

    def visit_IfThenElse(self, s: IfThenElse):
        self.visit_expr(s.cond)
        self.visit(s.then_body)
        if s.else_body is not None:
            self.visit(s.else_body)

    def visit_Assert(self, s: Assert):
        self.visit_expr(s.cond)
        for v in s.values:
            self.visit_expr(v)

    def visit_Seq(self, s: Seq):
        for x in s.stmts:
            self.visit(x)


class StmtMutator(NodeFunctor):
    """Rebuilds a statement bottom-up; unchanged statements are reused."""

    def visit_expr(self, e):
        return e

    def visit_buffer(self, buffer):
        """The buffer a Store writes (default: the same)."""
        return buffer

    def visit_exprs(self, exprs: tuple) -> tuple:
        new = tuple(self.visit_expr(x) for x in exprs)
        return exprs if all(a is b for a, b in zip(new, exprs)) else new

    def visit_Store(self, s: Store):
        buffer, indices, value = self.visit_buffer(s.buffer), self.visit_exprs(s.indices), self.visit_expr(s.value)
        if buffer is s.buffer and indices is s.indices and value is s.value:
            return s
        return Store(buffer, indices, value)

    def visit_For(self, s: For):
        body = self.visit(s.body)
        return s if body is s.body else For(s.var, s.extent, body, s.kind)

    def visit_Allocate(self, s: Allocate):
        body = self.visit(s.body)
        return s if body is s.body else Allocate(s.buffer, body)

    def visit_Let(self, s: Let):
        value, body = self.visit_expr(s.value), self.visit(s.body)
        return s if value is s.value and body is s.body else Let(s.var, value, body)

    def visit_IfThenElse(self, s: IfThenElse):
        cond, then_body = self.visit_expr(s.cond), self.visit(s.then_body)
        else_body = None if s.else_body is None else self.visit(s.else_body)
        if cond is s.cond and then_body is s.then_body and else_body is s.else_body:
            return s
        return IfThenElse(cond, then_body, else_body)

    def visit_Assert(self, s: Assert):
        cond, values = self.visit_expr(s.cond), self.visit_exprs(s.values)
        return s if cond is s.cond and values is s.values else Assert(cond, s.message, values)

    def visit_Seq(self, s: Seq):
        stmts = tuple(self.visit(x) for x in s.stmts)
        return s if all(a is b for a, b in zip(stmts, s.stmts)) else Seq(stmts)


# ------------------------------------------------------------ callback walks

class _CallbackExprMutator(ExprMutator):
    """fn(node) first: a replacement (not visited further), or None to descend."""

    def __init__(self, fn):
        self.fn = fn

    def visit(self, node):
        out = self.fn(node)
        return out if out is not None else super().visit(node)


class _CallbackStmtMutator(StmtMutator):
    def __init__(self, fn):
        self.exprs = _CallbackExprMutator(fn)

    def visit_expr(self, e):
        return self.exprs.visit(e)


class _CallbackStmtVisitor(StmtVisitor):
    def __init__(self, fn):
        self.fn = fn

    def visit(self, node):
        self.fn(node)
        super().visit(node)


def map_expr(e, fn):
    """Rebuild `e` bottom-up; fn(node) may return a replacement (not visited
    further) or None to keep descending."""
    return _CallbackExprMutator(fn).visit(e)


def map_stmt_exprs(s, fn):
    """Rebuild a statement with map_expr(fn) applied to every expression."""
    return _CallbackStmtMutator(fn).visit(s)


def walk_stmt(s, fn) -> None:
    """Call fn on every statement, parents first."""
    _CallbackStmtVisitor(fn).visit(s)
