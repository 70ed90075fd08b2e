"""Statements and buffers of tensor programs.

1. A `Buffer` is a named, typed, row-major array with a symbolic shape
   (strides for views are optional and default to row-major).
2. Statements: `Store`, `For` (a loop from 0 to a symbolic extent, annotated
   serial / parallel / vectorized / unrolled for the scheduler), `IfThenElse`,
   `Let` (a scalar), `Allocate` (local scratch with a constant size, for
   accumulators), `Assert` (fail with a message, e.g. an index read from a
   tensor out of range), and `Seq`. A `TensorProgram` (tir/program.py)
   is a function whose body is a statement.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import RelaxEdgeError
from ..ir.shape import IntExpr, SizeVar, as_expr
from ..ir.types import shape_str
from .expr import PrimExpr, ScalarVar, wrap

__all__ = ["Buffer", "Stmt", "Store", "For", "IfThenElse", "Let", "Allocate", "Assert", "Seq",
           "LOOP_KINDS", "loop_var"]

LOOP_KINDS = ("serial", "parallel", "vectorized", "unrolled")


def loop_var(name: str) -> SizeVar:
    """A loop variable: an integer >= 0 that indices may use."""
    return SizeVar(name, lower=0)


@dataclass(frozen=True, eq=False)
class Buffer:
    name: str
    dtype: str
    shape: tuple
    strides: tuple | None = None

    def __init__(self, name, dtype, shape, strides=None):
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "dtype", dtype)
        object.__setattr__(self, "shape", tuple(as_expr(d) for d in shape))
        object.__setattr__(self, "strides", None if strides is None else tuple(as_expr(s) for s in strides))

    def __getitem__(self, indices):
        from .expr import Load
        if not isinstance(indices, tuple):
            indices = (indices,)
        return Load(self, indices)

    def numel(self) -> IntExpr:
        total = as_expr(1)
        for d in self.shape:
            total = total * d
        return total

    def flat_index(self, indices) -> IntExpr | PrimExpr:
        """Row-major (or strided) offset of `indices`."""
        strides = self.strides if self.strides is not None else self.row_major_strides()
        total = None
        for i, s in zip(indices, strides):
            term = wrap(i, "int64") * wrap(s, "int64")
            total = term if total is None else total + term
        return total if total is not None else wrap(0, "int64")

    def row_major_strides(self) -> tuple:
        strides, acc = [], as_expr(1)
        for d in reversed(self.shape):
            strides.append(acc)
            acc = acc * d
        return tuple(reversed(strides))

    def __hash__(self):
        return id(self)

    def __repr__(self):
        return f"Buffer({self.name}: {self.dtype}{shape_str(self.shape)})"


class Stmt:
    def __hash__(self):
        return id(self)


@dataclass(frozen=True, eq=False)
class Store(Stmt):
    buffer: Buffer
    indices: tuple
    value: PrimExpr

    def __init__(self, buffer, indices, value):
        indices = tuple(wrap(i, "int64") for i in indices)
        if len(indices) != len(buffer.shape):
            raise RelaxEdgeError(f"store to {buffer.name}: {len(indices)} indices for rank {len(buffer.shape)}")
        value = wrap(value, buffer.dtype)
        if value.dtype != buffer.dtype:
            raise RelaxEdgeError(f"store to {buffer.name} ({buffer.dtype}) of a {value.dtype} value")
        object.__setattr__(self, "buffer", buffer)
        object.__setattr__(self, "indices", indices)
        object.__setattr__(self, "value", value)


@dataclass(frozen=True, eq=False)
class For(Stmt):
    var: SizeVar
    extent: IntExpr
    body: Stmt
    kind: str = "serial"

    def __init__(self, var, extent, body, kind="serial"):
        if kind not in LOOP_KINDS:
            raise RelaxEdgeError(f"loop kind {kind!r} is not one of {', '.join(LOOP_KINDS)}")
        object.__setattr__(self, "var", var)
        object.__setattr__(self, "extent", as_expr(extent))
        object.__setattr__(self, "body", body)
        object.__setattr__(self, "kind", kind)


@dataclass(frozen=True, eq=False)
class IfThenElse(Stmt):
    cond: PrimExpr
    then_body: Stmt
    else_body: Stmt | None = None


@dataclass(frozen=True, eq=False)
class Let(Stmt):
    var: ScalarVar
    value: PrimExpr
    body: Stmt


@dataclass(frozen=True, eq=False)
class Allocate(Stmt):
    """Local scratch of constant size (an accumulator), live in `body`."""
    buffer: Buffer
    body: Stmt

    def __init__(self, buffer, body):
        if not all(d.is_const for d in buffer.shape):
            raise RelaxEdgeError(f"local buffer {buffer.name} must have a constant shape, "
                                 f"got {shape_str(buffer.shape)}")
        object.__setattr__(self, "buffer", buffer)
        object.__setattr__(self, "body", body)


@dataclass(frozen=True, eq=False)
class Assert(Stmt):
    """Stop the program with an error when `cond` is false. `message` may
    show integer values: each "{}" is replaced by the next of `values`."""
    cond: PrimExpr
    message: str
    values: tuple = ()


@dataclass(frozen=True, eq=False)
class Seq(Stmt):
    stmts: tuple

    def __init__(self, stmts):
        flat = []
        for s in stmts:
            flat.extend(s.stmts if isinstance(s, Seq) else [s])
        object.__setattr__(self, "stmts", tuple(flat))
