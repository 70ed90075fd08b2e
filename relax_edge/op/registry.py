"""The operator registry: one record per operator.

An `Op` holds what the rest of the compiler needs to know about an operator:
its attributes and their defaults, its type rule (shape and dtype inference
over symbolic dims), its numpy reference (the executable definition that
the interpreter runs), its pattern kind for fusion, and, from the
legalization stage on, how it lowers to a tensor program.

`make_call` is the one way to build a call: it checks the attributes, runs
the type rule and turns a rule violation into a `TypeInferenceError` that
names the operator and the argument types.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from ..errors import TypeInferenceError
from ..ir.expr import Call, Constant, Expr
from ..ir.types import TensorType, Type

__all__ = ["Op", "OPS", "register", "get_op", "make_call", "REQUIRED", "RuleError"]


class _Required:
    def __repr__(self):
        return "REQUIRED"


REQUIRED = _Required()


class RuleError(Exception):
    """Raised inside a type rule; make_call adds the operator and argument types."""


@dataclass
class Op:
    name: str
    infer: Callable[[list, dict], Type]
    reference: Callable[..., Any]
    attrs: dict = field(default_factory=dict)
    kind: str = "opaque"            # elementwise | broadcast | injective | reduction | opaque
    num_args: tuple = (1, 1)        # (min, max); max None for variadic
    legalize: Callable | None = None
    doc: str = ""

    def __repr__(self):
        return f"Op({self.name})"


OPS: dict[str, Op] = {}


def register(op: Op) -> Op:
    if op.name in OPS:
        raise ValueError(f"operator {op.name} registered twice")
    OPS[op.name] = op
    return op


def get_op(name: str) -> Op:
    try:
        return OPS[name]
    except KeyError:
        raise TypeInferenceError(f"unknown operator {name!r}") from None


def _as_arg(value, like_dtype: str | None) -> Expr:
    if isinstance(value, Expr):
        return value
    if isinstance(value, (bool, int, float, np.number, np.ndarray, list)):
        arr = np.asarray(value)
        if like_dtype is not None and arr.ndim == 0 and not isinstance(value, np.ndarray):
            arr = arr.astype(like_dtype)
        elif arr.dtype == np.float64:
            arr = arr.astype(np.float32)
        return Constant(arr)
    raise TypeInferenceError(f"cannot use {type(value).__name__} {value!r} as an operator argument")


def _fill_attrs(op: Op, attrs: dict) -> dict:
    unknown = sorted(set(attrs) - set(op.attrs))
    if unknown:
        allowed = ", ".join(op.attrs) or "none"
        raise TypeInferenceError(f"{op.name}: unknown attribute(s) {', '.join(unknown)} (allowed: {allowed})")
    out = {}
    for name, default in op.attrs.items():
        if name in attrs and attrs[name] is not None:
            out[name] = attrs[name]
        elif default is REQUIRED:
            raise TypeInferenceError(f"{op.name}: attribute {name} is required")
        else:
            out[name] = default
    return out


def infer_type(op: Op, arg_types: list, attrs: dict, span: str | None = None) -> Type:
    """Run the operator's type rule, naming the operator on failure."""
    lo, hi = op.num_args
    if len(arg_types) < lo or (hi is not None and len(arg_types) > hi):
        want = f"{lo}" if lo == hi else f"{lo} to {hi if hi is not None else 'any'}"
        raise TypeInferenceError(f"{op.name}: takes {want} arguments, got {len(arg_types)}")
    try:
        return op.infer(arg_types, attrs)
    except RuleError as err:
        where = f" (node {span})" if span else ""
        shown = ", ".join(str(t) for t in arg_types)
        raise TypeInferenceError(f"{op.name}{where}: {err}; argument types: {shown}") from None


def make_call(name: str, args, attrs: dict | None = None, span: str | None = None) -> Call:
    """A call of operator `name` with its type inferred."""
    op = get_op(name)
    like = next((a.type.dtype for a in args
                 if isinstance(a, Expr) and isinstance(a.type, TensorType)), None)
    args = [_as_arg(a, like) for a in args]
    full = _fill_attrs(op, dict(attrs or {}))
    ty = infer_type(op, [a.type for a in args], full, span)
    return Call(op, args, full, ty, span)
