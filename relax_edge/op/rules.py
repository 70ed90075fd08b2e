"""Helpers shared by type rules: argument checks, broadcasting, axes.

Rules raise `RuleError` with a message about the shapes; `make_call` adds
the operator's name and the argument types.
"""

from __future__ import annotations

from ..ir.shape import IntExpr, Proof, as_expr, bounds, max_expr, prove_equal
from ..ir.types import TensorType, shape_str
from .registry import RuleError

FLOAT_DTYPES = ("float32", "float16", "bfloat16", "float64")
INT_DTYPES = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")


def tensor(t, index: int = 0, need_shape: bool = True) -> TensorType:
    """The argument's TensorType; its shape must be known when need_shape."""
    if not isinstance(t, TensorType):
        raise RuleError(f"argument {index} must be a tensor, got {t}")
    if need_shape and t.shape is None:
        raise RuleError(f"argument {index} has an unknown shape")
    return t


def same_dtype(types) -> str:
    dtypes = {t.dtype for t in types}
    if len(dtypes) != 1:
        raise RuleError("dtypes differ: " + " vs ".join(t.dtype for t in types))
    return types[0].dtype


def float_dtype(t: TensorType, index: int = 0) -> str:
    if t.dtype not in FLOAT_DTYPES:
        raise RuleError(f"argument {index} must be floating point, got {t.dtype}")
    return t.dtype


def _may_be_one(d: IntExpr) -> bool:
    return prove_equal(d, 1) is not Proof.NO


def broadcast_dim(x: IntExpr, y: IntExpr) -> IntExpr:
    """The broadcast of two dims under numpy rules, symbolically.

    1 and d give d; provably equal dims give either; dims that may be equal
    or may be 1 (and are never 0) give max(x, y), which is the broadcast
    result whenever broadcasting is legal (checked again at run time).
    """
    if x == 1:
        return y
    if y == 1:
        return x
    eq = prove_equal(x, y)
    if eq is Proof.YES:
        return x
    if eq is Proof.NO and not _may_be_one(x) and not _may_be_one(y):
        raise RuleError(f"cannot broadcast dimension {x} with {y}")
    if bounds(x)[0] >= 1 and bounds(y)[0] >= 1:
        return max_expr(x, y)
    raise RuleError(f"cannot decide how dimensions {x} and {y} broadcast (either may be 0); "
                    "bound them or match_cast first")


def broadcast_shapes(a: tuple, b: tuple) -> tuple:
    rank = max(len(a), len(b))
    a = (as_expr(1),) * (rank - len(a)) + tuple(a)
    b = (as_expr(1),) * (rank - len(b)) + tuple(b)
    out = []
    for i, (x, y) in enumerate(zip(a, b)):
        try:
            out.append(broadcast_dim(x, y))
        except RuleError as err:
            raise RuleError(f"shapes {shape_str(a)} and {shape_str(b)} at axis {i}: {err}") from None
    return tuple(out)


def normalize_axis(axis: int, ndim: int, what: str = "axis") -> int:
    if not isinstance(axis, int) or isinstance(axis, bool):
        raise RuleError(f"{what} must be an integer, got {axis!r}")
    if not -ndim <= axis < ndim:
        raise RuleError(f"{what} {axis} out of range for rank {ndim}")
    return axis % ndim


def int_tuple(value, length: int, what: str) -> tuple:
    """An attribute given as an int or a sequence, as a tuple of `length` ints."""
    if isinstance(value, int) and not isinstance(value, bool):
        value = (value,) * length
    value = tuple(value)
    if len(value) != length or not all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        raise RuleError(f"{what} must be {length} integers, got {value!r}")
    return value


def check_equal(x, y, what: str) -> None:
    """Raise when two dims provably differ (unknown is left to the run-time check)."""
    if prove_equal(x, y) is Proof.NO:
        raise RuleError(f"{what}: {x} vs {y}")
