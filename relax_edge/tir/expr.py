"""Scalar expressions of tensor programs.

1. Integer index arithmetic is an `Index` node holding a canonical `IntExpr`
   over size variables and loop variables (both `SizeVar`s), so indices
   simplify (`i * 4 + j - i * 4` is `j`) and the prover can decide ranges.
2. Everything else is a small tree: constants, binary arithmetic, comparisons,
   logical and/or/not, select, cast, math intrinsics (exp, log, sqrt, tanh,
   erf, pow, fabs, floor, ceil), loads from buffers, scalar variables
   bound by `Let`, and `Reinterpret` (the bits of a value read as another
   type of the same width, ONNX BitCast; float16 / bfloat16 values are
   their 16 bits).
3. Python operators build nodes: `a + b`, `a * 2.0`, `a < b`; integer
   operands (ints, SizeVars, IntExprs) become `Index` nodes, and arithmetic
   between two `Index` nodes stays an `Index`. `==` is not overloaded; use
   `eq(a, b)`.

Integer division in `BinOp("floordiv")` / `BinOp("floormod")` follows Python;
`BinOp("div")` is true division for floats and truncation for integers (C).
"""

from __future__ import annotations

import itertools
import numbers
from dataclasses import dataclass, field

from ..errors import RelaxEdgeError
from ..ir.shape import IntExpr, SizeVar, as_expr, floordiv, floormod, max_expr, min_expr

__all__ = [
    "PrimExpr", "Const", "Index", "BinOp", "Compare", "Logical", "Not", "Select", "Cast",
    "Intrinsic", "Load", "ScalarVar", "Reinterpret", "const", "index", "select", "cast", "eq", "ne",
    "logical_and", "logical_or", "logical_not", "minimum", "maximum", "intrinsic", "INTRINSICS",
    "wrap", "is_float", "reinterpret", "BIT_WIDTHS",
]

INTRINSICS = ("exp", "log", "sqrt", "tanh", "erf", "pow", "fabs", "floor", "ceil", "round")
INTRINSICS += ("sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "asinh", "acosh", "atanh", "fmod")
FLOAT_DTYPES = ("float32", "float16", "bfloat16", "float64")


def is_float(dtype: str) -> bool:
    return dtype in FLOAT_DTYPES


class PrimExpr:
    dtype: str

    def _bin(self, op, other, reverse=False):
        a, b = (wrap(other, self.dtype), self) if reverse else (self, wrap(other, self.dtype))
        return binop(op, a, b)

    def __add__(self, o): return self._bin("add", o)
    def __radd__(self, o): return self._bin("add", o, True)
    def __sub__(self, o): return self._bin("sub", o)
    def __rsub__(self, o): return self._bin("sub", o, True)
    def __mul__(self, o): return self._bin("mul", o)
    def __rmul__(self, o): return self._bin("mul", o, True)
    def __truediv__(self, o): return self._bin("div", o)
    def __rtruediv__(self, o): return self._bin("div", o, True)
    def __floordiv__(self, o): return self._bin("floordiv", o)
    def __mod__(self, o): return self._bin("floormod", o)
    def __neg__(self): return binop("sub", wrap(0, self.dtype), self)
    def __lt__(self, o): return compare("lt", self, wrap(o, self.dtype))
    def __le__(self, o): return compare("le", self, wrap(o, self.dtype))
    def __gt__(self, o): return compare("gt", self, wrap(o, self.dtype))
    def __ge__(self, o): return compare("ge", self, wrap(o, self.dtype))

    def __hash__(self):
        return id(self)

    def __eq__(self, other):
        return self is other

    def __bool__(self):
        raise RelaxEdgeError("a tensor-program expression has no truth value; use select() or if")


@dataclass(frozen=True, eq=False)
class Const(PrimExpr):
    value: object
    dtype: str

    def __repr__(self):
        return f"{self.value!r}:{self.dtype}"


@dataclass(frozen=True, eq=False)
class Index(PrimExpr):
    """Integer arithmetic over size and loop variables, in canonical form."""
    value: IntExpr
    dtype: str = "int64"

    def __repr__(self):
        return str(self.value)


@dataclass(frozen=True, eq=False)
class BinOp(PrimExpr):
    op: str   # add sub mul div floordiv floormod min max pow
    a: PrimExpr
    b: PrimExpr
    dtype: str


@dataclass(frozen=True, eq=False)
class Compare(PrimExpr):
    op: str   # lt le gt ge eq ne
    a: PrimExpr
    b: PrimExpr
    dtype: str = "bool"


@dataclass(frozen=True, eq=False)
class Logical(PrimExpr):
    op: str   # and or
    a: PrimExpr
    b: PrimExpr
    dtype: str = "bool"


@dataclass(frozen=True, eq=False)
class Not(PrimExpr):
    a: PrimExpr
    dtype: str = "bool"


@dataclass(frozen=True, eq=False)
class Select(PrimExpr):
    cond: PrimExpr
    a: PrimExpr
    b: PrimExpr
    dtype: str


@dataclass(frozen=True, eq=False)
class Cast(PrimExpr):
    a: PrimExpr
    dtype: str


@dataclass(frozen=True, eq=False)
class Reinterpret(PrimExpr):
    """The bits of `a` read as `dtype`, a type of the same width (no value conversion)."""
    a: PrimExpr
    dtype: str


@dataclass(frozen=True, eq=False)
class Intrinsic(PrimExpr):
    name: str
    args: tuple
    dtype: str


@dataclass(frozen=True, eq=False)
class Load(PrimExpr):
    buffer: object   # tir.Buffer
    indices: tuple   # of PrimExpr
    dtype: str = ""

    def __init__(self, buffer, indices):
        indices = tuple(wrap(i, "int64") for i in indices)
        if len(indices) != len(buffer.shape):
            raise RelaxEdgeError(f"load from {buffer.name}: {len(indices)} indices for rank {len(buffer.shape)}")
        object.__setattr__(self, "buffer", buffer)
        object.__setattr__(self, "indices", indices)
        object.__setattr__(self, "dtype", buffer.dtype)


_scalar_ids = itertools.count()


@dataclass(frozen=True, eq=False)
class ScalarVar(PrimExpr):
    """A scalar bound by `Let` (not a size or loop variable)."""
    name: str
    dtype: str
    uid: int = field(default_factory=lambda: next(_scalar_ids))

    def __repr__(self):
        return self.name


# ------------------------------------------------------------ constructors

def const(value, dtype: str) -> Const:
    if dtype == "bool":
        value = bool(value)
    elif is_float(dtype):
        value = float(value)
    else:
        value = int(value)
    return Const(value, dtype)


def index(value) -> Index:
    return Index(as_expr(value))


def wrap(x, dtype: str) -> PrimExpr:
    """A PrimExpr for x: expressions stay; ints/SizeVars/IntExprs become an
    Index (or a constant of `dtype` when dtype is not an integer index);
    floats and bools become constants of `dtype`."""
    if isinstance(x, PrimExpr):
        return x
    if isinstance(x, (IntExpr, SizeVar)):
        return Index(as_expr(x))
    if isinstance(x, bool):
        return const(x, "bool" if dtype == "int64" else dtype)
    if isinstance(x, numbers.Integral):
        return Index(as_expr(int(x))) if dtype in ("int64",) else const(x, dtype)
    if isinstance(x, numbers.Real):
        return const(x, dtype if is_float(dtype) else "float32")
    raise RelaxEdgeError(f"cannot use {type(x).__name__} {x!r} in a tensor-program expression")


_INDEX_FOLD = {
    "add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b,
    "floordiv": floordiv, "floormod": floormod, "min": min_expr, "max": max_expr,
}


def _unify(a: PrimExpr, b: PrimExpr):
    """Match dtypes of two operands: an Index meeting another dtype becomes a
    constant or a cast of that dtype."""
    if a.dtype == b.dtype:
        return a, b
    if isinstance(a, Index) and not isinstance(b, Index):
        return _retype(a, b.dtype), b
    if isinstance(b, Index) and not isinstance(a, Index):
        return a, _retype(b, a.dtype)
    raise RelaxEdgeError(f"operand dtypes differ: {a.dtype} vs {b.dtype}; cast one of them")


def _retype(e: Index, dtype: str) -> PrimExpr:
    if e.value.is_const:
        return const(e.value.value, dtype)
    return Cast(e, dtype)


def binop(op: str, a: PrimExpr, b: PrimExpr) -> PrimExpr:
    if isinstance(a, Index) and isinstance(b, Index) and op in _INDEX_FOLD:
        return Index(_INDEX_FOLD[op](a.value, b.value))
    a, b = _unify(a, b)
    return BinOp(op, a, b, a.dtype)


def compare(op: str, a: PrimExpr, b: PrimExpr) -> Compare:
    a, b = _unify(a, b)
    return Compare(op, a, b)


def eq(a, b) -> Compare:
    a = wrap(a, "int64")
    return compare("eq", a, wrap(b, a.dtype))


def ne(a, b) -> Compare:
    a = wrap(a, "int64")
    return compare("ne", a, wrap(b, a.dtype))


def logical_and(a, b) -> PrimExpr:
    return Logical("and", a, b)


def logical_or(a, b) -> PrimExpr:
    return Logical("or", a, b)


def logical_not(a) -> PrimExpr:
    return Not(a)


def select(cond, a, b) -> PrimExpr:
    a = wrap(a, getattr(b, "dtype", "float32"))
    b = wrap(b, a.dtype)
    a, b = _unify(a, b)
    return Select(cond, a, b, a.dtype)


def cast(x, dtype: str) -> PrimExpr:
    x = wrap(x, dtype)
    if x.dtype == dtype:
        return x
    if isinstance(x, Const):
        return const(x.value, dtype)
    return Cast(x, dtype)


BIT_WIDTHS = {"float16": 16, "bfloat16": 16, "float32": 32, "float64": 64, "int8": 8, "uint8": 8, "int16": 16,
              "uint16": 16, "int32": 32, "uint32": 32, "int64": 64, "uint64": 64}


def reinterpret(x: PrimExpr, dtype: str) -> PrimExpr:
    """`x`'s bits as `dtype`; both types must have the same width (bool has no defined bits here)."""
    for t in (x.dtype, dtype):
        if t not in BIT_WIDTHS:
            raise RelaxEdgeError(f"reinterpret: {t} has no bit pattern to reinterpret "
                                 f"(supported: {', '.join(BIT_WIDTHS)})")
    if BIT_WIDTHS[x.dtype] != BIT_WIDTHS[dtype]:
        raise RelaxEdgeError(f"reinterpret: {x.dtype} ({BIT_WIDTHS[x.dtype]} bits) and {dtype} "
                             f"({BIT_WIDTHS[dtype]} bits) differ in width")
    return x if x.dtype == dtype else Reinterpret(x, dtype)


def minimum(a, b) -> PrimExpr:
    a = wrap(a, getattr(b, "dtype", "int64"))
    return binop("min", a, wrap(b, a.dtype))


def maximum(a, b) -> PrimExpr:
    a = wrap(a, getattr(b, "dtype", "int64"))
    return binop("max", a, wrap(b, a.dtype))


def intrinsic(name: str, *args) -> Intrinsic:
    if name not in INTRINSICS:
        raise RelaxEdgeError(f"unknown intrinsic {name!r} (known: {', '.join(INTRINSICS)})")
    args = tuple(wrap(a, "float32") for a in args)
    dtype = args[0].dtype
    if not is_float(dtype):
        raise RelaxEdgeError(f"intrinsic {name} takes floating point, got {dtype}")
    return Intrinsic(name, tuple(_unify(args[0], a)[1] for a in args), dtype)
