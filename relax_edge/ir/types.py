"""Types of graph-level values (Relax's StructInfo), one vocabulary.

1. `TensorType(shape, dtype)`: shape is a tuple of symbolic integer
   expressions, or None when unknown (then `ndim` may still be known).
2. `TupleType(fields)`, `ShapeType(values)` (a shape value such as the output
   of ONNX `Shape`), `ObjectType()` (anything), `FuncType(params, ret)`.
3. dtypes are strings: float32, float16, bfloat16, float64, int8, int16,
   int32, int64, uint8, uint16, uint32, uint64, bool. bfloat16 has no numpy
   dtype: its arrays are uint16 bits (ir/bfloat16.py).

Types are immutable and compare structurally (symbolic dims by canonical
form). `type_equal` compares; `types_conflict` asks the prover whether two
types provably disagree.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

import numpy as np

from ..errors import RelaxEdgeError
from .shape import IntExpr, Proof, SizeVar, as_expr, free_vars, prove_equal

__all__ = [
    "DTYPES", "normalize_dtype", "Type", "TensorType", "TupleType", "ShapeType",
    "ObjectType", "FuncType", "shape_str", "type_free_vars", "type_conflict",
]

DTYPES = ("float32", "float16", "bfloat16", "float64", "int8", "int16", "int32", "int64",
          "uint8", "uint16", "uint32", "uint64", "bool")


def normalize_dtype(dtype) -> str:
    """The dtype's name in relax_edge's vocabulary; raises on unsupported ones."""
    try:
        name = np.dtype(dtype).name
    except TypeError:
        name = str(dtype)
    if name not in DTYPES:
        raise RelaxEdgeError(f"unsupported dtype {dtype!r}: relax_edge supports {', '.join(DTYPES)}")
    return name


def _shape_tuple(shape) -> tuple[IntExpr, ...] | None:
    if shape is None:
        return None
    if isinstance(shape, (IntExpr, SizeVar, int)):
        raise RelaxEdgeError(f"a shape is a sequence of dimensions, got {shape!r}")
    return tuple(as_expr(d) for d in shape)


def shape_str(shape) -> str:
    if shape is None:
        return "?"
    inner = ", ".join(str(d) for d in shape)
    return f"({inner},)" if len(shape) == 1 else f"({inner})"


class Type:
    """Base class of graph-level types."""


@dataclass(frozen=True)
class TensorType(Type):
    shape: tuple | None
    dtype: str
    ndim: int | None = None

    def __init__(self, shape, dtype="float32", ndim=None):
        shape = _shape_tuple(shape)
        if shape is not None:
            if ndim is not None and ndim != len(shape):
                raise RelaxEdgeError(f"TensorType: ndim {ndim} disagrees with shape {shape_str(shape)}")
            ndim = len(shape)
        object.__setattr__(self, "shape", shape)
        object.__setattr__(self, "dtype", normalize_dtype(dtype))
        object.__setattr__(self, "ndim", ndim)

    def __str__(self):
        if self.shape is None:
            if self.ndim is None:
                return f'Tensor(dtype="{self.dtype}")'
            return f'Tensor(ndim={self.ndim}, dtype="{self.dtype}")'
        return f'Tensor({shape_str(self.shape)}, "{self.dtype}")'


@dataclass(frozen=True)
class TupleType(Type):
    fields: tuple

    def __init__(self, fields: Iterable[Type]):
        object.__setattr__(self, "fields", tuple(fields))

    def __str__(self):
        return "Tuple(" + ", ".join(str(f) for f in self.fields) + ")"


@dataclass(frozen=True)
class ShapeType(Type):
    values: tuple | None
    ndim: int | None = None

    def __init__(self, values=None, ndim=None):
        values = _shape_tuple(values)
        if values is not None:
            ndim = len(values)
        object.__setattr__(self, "values", values)
        object.__setattr__(self, "ndim", ndim)

    def __str__(self):
        if self.values is None:
            return "Shape()" if self.ndim is None else f"Shape(ndim={self.ndim})"
        return f"Shape({shape_str(self.values)})"


@dataclass(frozen=True)
class ObjectType(Type):
    def __str__(self):
        return "Object"


@dataclass(frozen=True)
class FuncType(Type):
    params: tuple
    ret: Type

    def __init__(self, params: Iterable[Type], ret: Type):
        object.__setattr__(self, "params", tuple(params))
        object.__setattr__(self, "ret", ret)

    def __str__(self):
        return "Func([" + ", ".join(str(p) for p in self.params) + f"], {self.ret})"


def type_free_vars(t: Type) -> frozenset:
    """Every size variable that occurs in a type."""
    out: set = set()
    if isinstance(t, TensorType) and t.shape is not None:
        for d in t.shape:
            out |= free_vars(d)
    elif isinstance(t, ShapeType) and t.values is not None:
        for d in t.values:
            out |= free_vars(d)
    elif isinstance(t, TupleType):
        for f in t.fields:
            out |= type_free_vars(f)
    elif isinstance(t, FuncType):
        for p in t.params:
            out |= type_free_vars(p)
        out |= type_free_vars(t.ret)
    return frozenset(out)


def _dims_conflict(what: str, a, b) -> str | None:
    if a is None or b is None:
        return None
    if len(a) != len(b):
        return f"{what} rank {len(a)} vs {len(b)}"
    for i, (x, y) in enumerate(zip(a, b)):
        if prove_equal(x, y) is Proof.NO:
            return f"{what} dimension {i}: {x} vs {y}"
    return None


def type_conflict(declared: Type, actual: Type) -> str | None:
    """A description of how `actual` provably disagrees with `declared`, or None.

    ObjectType accepts anything; unknown shapes accept any shape; symbolic
    dims conflict only when the prover shows they always differ.
    """
    if isinstance(declared, ObjectType):
        return None
    if type(declared) is not type(actual):
        return f"expected {declared}, got {actual}"
    if isinstance(declared, TensorType):
        if declared.dtype != actual.dtype:
            return f"dtype {declared.dtype} vs {actual.dtype}"
        if declared.ndim is not None and actual.ndim is not None and declared.ndim != actual.ndim:
            return f"rank {declared.ndim} vs {actual.ndim}"
        return _dims_conflict("shape", declared.shape, actual.shape)
    if isinstance(declared, ShapeType):
        if declared.ndim is not None and actual.ndim is not None and declared.ndim != actual.ndim:
            return f"shape value length {declared.ndim} vs {actual.ndim}"
        return _dims_conflict("shape value", declared.values, actual.values)
    if isinstance(declared, TupleType):
        if len(declared.fields) != len(actual.fields):
            return f"tuple of {len(declared.fields)} vs {len(actual.fields)} fields"
        for i, (d, a) in enumerate(zip(declared.fields, actual.fields)):
            why = type_conflict(d, a)
            if why:
                return f"tuple field {i}: {why}"
        return None
    if isinstance(declared, FuncType):
        if len(declared.params) != len(actual.params):
            return f"function of {len(declared.params)} vs {len(actual.params)} parameters"
        return type_conflict(declared.ret, actual.ret)
    return None
