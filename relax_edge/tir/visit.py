"""Generic rebuilding walks over tensor-program expressions and statements."""

from __future__ import annotations

import dataclasses

from .expr import BinOp, Cast, Compare, Intrinsic, Load, Logical, Not, PrimExpr, Select
from .stmt import Allocate, Assert, For, IfThenElse, Let, Seq, Stmt, Store

__all__ = ["map_expr", "map_stmt_exprs", "walk_stmt"]

_EXPR_CHILDREN = {BinOp: ("a", "b"), Compare: ("a", "b"), Logical: ("a", "b"), Not: ("a",),
                  Select: ("cond", "a", "b"), Cast: ("a",)}


def map_expr(e: PrimExpr, fn):
    """Rebuild `e` bottom-up; fn(node) may return a replacement (not visited
    further) or None to keep descending."""
    out = fn(e)
    if out is not None:
        return out
    fields = _EXPR_CHILDREN.get(type(e))
    if fields is not None:
        new = {f: map_expr(getattr(e, f), fn) for f in fields}
        if any(new[f] is not getattr(e, f) for f in fields):
            return dataclasses.replace(e, **new)
        return e
    if isinstance(e, Intrinsic):
        args = tuple(map_expr(a, fn) for a in e.args)
        return e if all(a is b for a, b in zip(args, e.args)) else Intrinsic(e.name, args, e.dtype)
    if isinstance(e, Load):
        idx = tuple(map_expr(i, fn) for i in e.indices)
        return e if all(a is b for a, b in zip(idx, e.indices)) else Load(e.buffer, idx)
    if hasattr(e, "source") and hasattr(e, "combiner"):  # a Reduce of tir.compute
        source = map_expr(e.source, fn)
        return e if source is e.source else dataclasses.replace(e, source=source)
    return e


def map_stmt_exprs(s: Stmt, fn) -> Stmt:
    """Rebuild a statement with map_expr(fn) applied to every expression."""
    if isinstance(s, Store):
        return Store(s.buffer, [map_expr(i, fn) for i in s.indices], map_expr(s.value, fn))
    if isinstance(s, For):
        return For(s.var, s.extent, map_stmt_exprs(s.body, fn), s.kind)
    if isinstance(s, IfThenElse):
        return IfThenElse(map_expr(s.cond, fn), map_stmt_exprs(s.then_body, fn),
                          None if s.else_body is None else map_stmt_exprs(s.else_body, fn))
    if isinstance(s, Let):
        return Let(s.var, map_expr(s.value, fn), map_stmt_exprs(s.body, fn))
    if isinstance(s, Allocate):
        return Allocate(s.buffer, map_stmt_exprs(s.body, fn))
    if isinstance(s, Seq):
        return Seq([map_stmt_exprs(x, fn) for x in s.stmts])
    if isinstance(s, Assert):
        return Assert(map_expr(s.cond, fn), s.message, tuple(map_expr(v, fn) for v in s.values))
    raise TypeError(f"unknown statement {type(s).__name__}")


def walk_stmt(s: Stmt, fn) -> None:
    """Call fn on every statement, parents first."""
    fn(s)
    if isinstance(s, (For, Let, Allocate)):
        walk_stmt(s.body, fn)
    elif isinstance(s, IfThenElse):
        walk_stmt(s.then_body, fn)
        if s.else_body is not None:
            walk_stmt(s.else_body, fn)
    elif isinstance(s, Seq):
        for x in s.stmts:
            walk_stmt(x, fn)


