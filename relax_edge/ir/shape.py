"""Symbolic integer expressions for shapes.

1. A `SizeVar` is a named integer unknown with optional bounds
   (`SizeVar("seq", upper=2048)` means 1 <= seq <= 2048; lower defaults to 1
   because it names a size; pass `lower=None` for an unbounded integer).
   Two size variables are the same only if they are the same object.
2. An `IntExpr` is kept in one canonical form: a sum of products of atoms with
   integer coefficients. Atoms are size variables and the non-polynomial
   operations floor division, floor modulo, min and max over canonical
   operands. So `n*4 + n*2` and `6*n` are the same object value, print the
   same and hash the same.
3. Floor division and modulo follow Python (`-7 // 2 == -4`, `-7 % 2 == 1`).
   By a positive constant they are simplified where that is exact:
   coefficients are reduced modulo the divisor, common factors cancel,
   nested divisions merge, and a remainder proved to lie in [0, c) vanishes.
4. The prover (`prove_equal`, `prove_le`, `prove_lt`) answers YES only when the
   relation holds for every assignment within the bounds, NO only when it
   fails for every such assignment, and UNKNOWN otherwise. It works by sound
   interval arithmetic over the canonical form: it never answers YES or NO
   wrongly, but it may answer UNKNOWN where a cleverer prover would decide.
"""

from __future__ import annotations

import enum
import itertools
import math
import numbers
import re
from typing import Mapping, Union

from ..errors import ShapeError

__all__ = [
    "SizeVar", "IntExpr", "Proof", "as_expr", "const", "floordiv", "floormod",
    "min_expr", "max_expr", "substitute", "evaluate", "free_vars", "bounds",
    "prove_equal", "prove_le", "prove_lt", "is_monotone_nondecreasing",
]

IntLike = Union["IntExpr", "SizeVar", int]

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_INF = math.inf


class Proof(enum.Enum):
    """The prover's answer. Deliberately not usable as a bool: say `is Proof.YES`."""

    YES = "yes"
    NO = "no"
    UNKNOWN = "unknown"

    def __bool__(self):
        raise TypeError("a Proof is three-valued; compare it with Proof.YES / Proof.NO")


# --------------------------------------------------------------------- atoms

class _Arith:
    """Arithmetic operators shared by SizeVar and IntExpr; results are IntExpr."""

    __slots__ = ()

    def __add__(self, other): return _add(as_expr(self), as_expr(other))
    def __radd__(self, other): return _add(as_expr(other), as_expr(self))
    def __sub__(self, other): return _add(as_expr(self), -as_expr(other))
    def __rsub__(self, other): return _add(as_expr(other), -as_expr(self))
    def __mul__(self, other): return _mul(as_expr(self), as_expr(other))
    def __rmul__(self, other): return _mul(as_expr(other), as_expr(self))
    def __floordiv__(self, other): return floordiv(self, other)
    def __rfloordiv__(self, other): return floordiv(other, self)
    def __mod__(self, other): return floormod(self, other)
    def __rmod__(self, other): return floormod(other, self)
    def __neg__(self): return _scale(as_expr(self), -1)
    def __pos__(self): return as_expr(self)


class SizeVar(_Arith):
    """A symbolic size with optional inclusive bounds; compared by identity."""

    __slots__ = ("name", "lower", "upper", "_uid")
    _counter = itertools.count()

    def __init__(self, name: str, upper: int | None = None, lower: int | None = 1):
        if not isinstance(name, str) or not _NAME.match(name):
            raise ShapeError(f"size variable name {name!r} is not an identifier")
        for label, value in (("lower", lower), ("upper", upper)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, numbers.Integral)):
                raise ShapeError(f"size variable {name}: {label} bound {value!r} is not an integer")
        if lower is not None and upper is not None and lower > upper:
            raise ShapeError(f"size variable {name}: lower bound {lower} exceeds upper bound {upper}")
        self.name = name
        self.lower = None if lower is None else int(lower)
        self.upper = None if upper is None else int(upper)
        self._uid = next(SizeVar._counter)

    def with_bounds(self, upper: int | None = None, lower: int | None = 1) -> "SizeVar":
        """A new variable of the same name with other bounds."""
        return SizeVar(self.name, upper=upper, lower=lower)

    @property
    def is_bounded(self) -> bool:
        return self.upper is not None

    def _key(self):
        return (0, self.name, self._uid)

    def __eq__(self, other):
        if isinstance(other, SizeVar):
            return self is other
        return NotImplemented

    def __hash__(self):
        return hash(("SizeVar", self._uid))

    def __repr__(self):
        return self.name

    def describe(self) -> str:
        """`name` with its bounds, e.g. `1 <= seq <= 2048`."""
        lo = "" if self.lower is None else f"{self.lower} <= "
        hi = "" if self.upper is None else f" <= {self.upper}"
        return f"{lo}{self.name}{hi}"


class _Compound:
    """An atom built from canonical operands: floordiv, floormod, min, max."""

    __slots__ = ("args", "_hash")
    kind = ""
    order = 0

    def __init__(self, *args: "IntExpr"):
        self.args = args
        self._hash = hash((self.kind,) + args)

    def _key(self):
        return (self.order, self.kind) + tuple(a._key() for a in self.args)

    def __eq__(self, other):
        return type(self) is type(other) and self.args == other.args

    def __hash__(self):
        return self._hash


class _FloorDiv(_Compound):
    __slots__ = ()
    kind, order = "floordiv", 1

    def __repr__(self):
        return f"{_operand_str(self.args[0])} // {_operand_str(self.args[1])}"


class _FloorMod(_Compound):
    __slots__ = ()
    kind, order = "floormod", 2

    def __repr__(self):
        return f"{_operand_str(self.args[0])} % {_operand_str(self.args[1])}"


class _Min(_Compound):
    __slots__ = ()
    kind, order = "min", 3

    def __repr__(self):
        return f"min({self.args[0]}, {self.args[1]})"


class _Max(_Compound):
    __slots__ = ()
    kind, order = "max", 4

    def __repr__(self):
        return f"max({self.args[0]}, {self.args[1]})"


# ----------------------------------------------------------- canonical form

def _mono_key(mono):
    return tuple((atom._key(), power) for atom, power in mono)


class IntExpr(_Arith):
    """A canonical sum of products: `terms` is a sorted tuple of
    (monomial, coefficient) where a monomial is a sorted tuple of
    (atom, power) and the empty monomial is the constant term."""

    __slots__ = ("terms", "_hash")

    def __init__(self, terms):
        self.terms = terms
        if len(terms) == 1 and terms[0][1] == 1 and len(terms[0][0]) == 1 \
                and terms[0][0][0][1] == 1 and isinstance(terms[0][0][0][0], SizeVar):
            self._hash = hash(terms[0][0][0][0])  # equal to its SizeVar's hash
        elif not terms or (len(terms) == 1 and terms[0][0] == ()):
            self._hash = hash(terms[0][1] if terms else 0)  # equal to its int's hash
        else:
            self._hash = hash(terms)

    @staticmethod
    def _from_dict(coeffs: Mapping) -> "IntExpr":
        items = [(m, k) for m, k in coeffs.items() if k != 0]
        items.sort(key=lambda mk: (len(mk[0]) == 0, _mono_key(mk[0])))
        return IntExpr(tuple(items))

    # queries -----------------------------------------------------------
    @property
    def is_const(self) -> bool:
        return not self.terms or (len(self.terms) == 1 and self.terms[0][0] == ())

    @property
    def value(self) -> int | None:
        """The integer value of a constant expression, else None."""
        if not self.terms:
            return 0
        if self.is_const:
            return self.terms[0][1]
        return None

    def as_var(self) -> SizeVar | None:
        """The size variable if this expression is exactly one, else None."""
        if len(self.terms) == 1 and self.terms[0][1] == 1:
            mono = self.terms[0][0]
            if len(mono) == 1 and mono[0][1] == 1 and isinstance(mono[0][0], SizeVar):
                return mono[0][0]
        return None

    def _dict(self):
        return dict(self.terms)

    def _key(self):
        return tuple((_mono_key(m), k) for m, k in self.terms)

    # python protocol ---------------------------------------------------
    def __eq__(self, other):
        if isinstance(other, IntExpr):
            return self.terms == other.terms
        if isinstance(other, (SizeVar, numbers.Integral)) and not isinstance(other, bool):
            return self.terms == as_expr(other).terms
        return NotImplemented

    def __hash__(self):
        return self._hash

    def __int__(self):
        if not self.is_const:
            raise ShapeError(f"symbolic expression {self} has no integer value")
        return self.value

    __index__ = __int__

    def __bool__(self):
        if not self.is_const:
            raise ShapeError(f"the truth of symbolic expression {self} is unknown; use the prover")
        return self.value != 0

    def __repr__(self):
        return _poly_str(self)


def as_expr(x: IntLike) -> IntExpr:
    """Convert an int, a SizeVar or an IntExpr to an IntExpr."""
    if isinstance(x, IntExpr):
        return x
    if isinstance(x, SizeVar):
        return IntExpr((((( x, 1),), 1),))
    if isinstance(x, numbers.Integral) and not isinstance(x, bool):
        return const(int(x))
    raise ShapeError(f"{x!r} ({type(x).__name__}) is not an integer or a symbolic integer expression")


def const(value: int) -> IntExpr:
    value = int(value)
    return IntExpr(((((), value),)) if value else ())


def _atom_expr(atom) -> IntExpr:
    return IntExpr(((((atom, 1),), 1),))


def _add(a: IntExpr, b: IntExpr) -> IntExpr:
    coeffs = a._dict()
    for mono, k in b.terms:
        coeffs[mono] = coeffs.get(mono, 0) + k
    return IntExpr._from_dict(coeffs)


def _scale(a: IntExpr, k: int) -> IntExpr:
    if k == 0:
        return const(0)
    return IntExpr(tuple((m, c * k) for m, c in a.terms))


def _mono_mul(m1, m2):
    powers = dict(m1)
    for atom, p in m2:
        powers[atom] = powers.get(atom, 0) + p
    return tuple(sorted(powers.items(), key=lambda ap: ap[0]._key()))


def _mul(a: IntExpr, b: IntExpr) -> IntExpr:
    coeffs: dict = {}
    for m1, k1 in a.terms:
        for m2, k2 in b.terms:
            mono = _mono_mul(m1, m2)
            coeffs[mono] = coeffs.get(mono, 0) + k1 * k2
    return IntExpr._from_dict(coeffs)


# ------------------------------------------------------------------ printing

def _mono_str(mono, bare: bool) -> str:
    """Factors joined by ' * '; division atoms in parentheses unless `bare`
    (a lone atom that no operator binds)."""
    parts = []
    for atom, power in mono:
        text = repr(atom)
        if not bare and isinstance(atom, (_FloorDiv, _FloorMod)):
            text = f"({text})"
        parts.extend([text] * power)
    return " * ".join(parts)


def _term_str(mono, k: int, leading_minus: bool = False) -> str:
    if not mono:
        return str(k)
    bare = k == 1 and not leading_minus and len(mono) == 1 and mono[0][1] == 1
    body = _mono_str(mono, bare)
    return body if k == 1 else f"{body} * {k}"


def _poly_str(e: IntExpr) -> str:
    if not e.terms:
        return "0"
    out = ""
    for i, (mono, k) in enumerate(e.terms):
        if i == 0:
            out = ("-" + _term_str(mono, -k, leading_minus=True)) if k < 0 else _term_str(mono, k)
        elif k < 0:
            out += " - " + _term_str(mono, -k)
        else:
            out += " + " + _term_str(mono, k)
    return out


def _operand_str(e: IntExpr) -> str:
    if e.is_const and e.value >= 0:
        return str(e.value)
    if e.as_var() is not None:
        return repr(e)
    if len(e.terms) == 1 and e.terms[0][1] == 1 and len(e.terms[0][0]) == 1 \
            and e.terms[0][0][0][1] == 1 and isinstance(e.terms[0][0][0][0], (_Min, _Max)):
        return repr(e)
    return f"({e})"


# ---------------------------------------------------- division and modulo

def _single_atom(e: IntExpr, kind):
    """The atom if `e` is exactly one atom of type `kind` with coefficient 1."""
    if len(e.terms) == 1 and e.terms[0][1] == 1 and len(e.terms[0][0]) == 1 \
            and e.terms[0][0][0][1] == 1 and isinstance(e.terms[0][0][0][0], kind):
        return e.terms[0][0][0][0]
    return None


def _split_by_constant(a: IntExpr, c: int):
    """a == c * quotient + rest, with every coefficient of rest in [0, c)."""
    quotient, rest = {}, {}
    for mono, k in a.terms:
        quotient[mono] = k // c
        rest[mono] = k % c
    return IntExpr._from_dict(quotient), IntExpr._from_dict(rest)


def _coeff_gcd(e: IntExpr, c: int) -> int:
    g = c
    for _, k in e.terms:
        g = math.gcd(g, k)
    return g


def _exact_quotient(a: IntExpr, b: IntExpr) -> IntExpr | None:
    """a / b when b is one nonzero monomial dividing every term of a exactly."""
    lo, hi = bounds(b)
    return None if lo <= 0 <= hi else monomial_quotient(a, b)


def monomial_quotient(a: IntExpr, b: IntExpr) -> IntExpr | None:
    """The polynomial q with q * b == a when b is one monomial dividing every
    term of a exactly, else None; b may be 0 (then a is 0 too)."""
    if len(b.terms) != 1:
        return None
    bmono, bk = b.terms[0]
    bpowers = dict(bmono)
    out = {}
    for mono, k in a.terms:
        if k % bk:
            return None
        powers = dict(mono)
        for atom, p in bpowers.items():
            if powers.get(atom, 0) < p:
                return None
            powers[atom] -= p
        rest = tuple(sorted(((x, p) for x, p in powers.items() if p), key=lambda ap: ap[0]._key()))
        out[rest] = out.get(rest, 0) + k // bk
    return IntExpr._from_dict(out)


def floordiv(a: IntLike, b: IntLike) -> IntExpr:
    """Floor division with Python semantics, simplified where exact."""
    a, b = as_expr(a), as_expr(b)
    if b.is_const:
        c = b.value
        if c == 0:
            raise ShapeError(f"division by zero: ({a}) // 0")
        if a.is_const:
            return const(a.value // c)
        if c < 0:
            return floordiv(_scale(a, -1), -c)
        if c == 1:
            return a
        quotient, rest = _split_by_constant(a, c)
        if not rest.terms:
            return quotient
        lo, hi = bounds(rest)
        if lo >= 0 and hi < c:
            return quotient
        g = _coeff_gcd(rest, c)
        if g > 1:
            rest = IntExpr(tuple((m, k // g) for m, k in rest.terms))
            c //= g
        inner = _single_atom(rest, _FloorDiv)
        if inner is not None and inner.args[1].is_const:
            return _add(quotient, floordiv(inner.args[0], inner.args[1].value * c))
        return _add(quotient, _atom_expr(_FloorDiv(rest, const(c))))
    exact = _exact_quotient(a, b)
    if exact is not None:
        return exact
    return _atom_expr(_FloorDiv(a, b))


def floormod(a: IntLike, b: IntLike) -> IntExpr:
    """Floor modulo with Python semantics (sign of the divisor), simplified where exact."""
    a, b = as_expr(a), as_expr(b)
    if b.is_const:
        c = b.value
        if c == 0:
            raise ShapeError(f"modulo by zero: ({a}) % 0")
        if a.is_const:
            return const(a.value % c)
        if c < 0:
            return _scale(floormod(_scale(a, -1), -c), -1)
        if c == 1:
            return const(0)
        _, rest = _split_by_constant(a, c)
        if not rest.terms:
            return const(0)
        lo, hi = bounds(rest)
        if lo >= 0 and hi < c:
            return rest
        g = _coeff_gcd(rest, c)
        if g > 1:
            reduced = IntExpr(tuple((m, k // g) for m, k in rest.terms))
            return _scale(floormod(reduced, c // g), g)
        inner = _single_atom(rest, _FloorMod)
        if inner is not None and inner.args[1].is_const and inner.args[1].value % c == 0:
            return floormod(inner.args[0], c)
        return _atom_expr(_FloorMod(rest, const(c)))
    if _exact_quotient(a, b) is not None:
        return const(0)
    return _atom_expr(_FloorMod(a, b))


def _ordered(a: IntExpr, b: IntExpr):
    return (a, b) if a._key() <= b._key() else (b, a)


def min_expr(a: IntLike, b: IntLike) -> IntExpr:
    a, b = as_expr(a), as_expr(b)
    if a == b:
        return a
    if a.is_const and b.is_const:
        return const(min(a.value, b.value))
    if prove_le(a, b) is Proof.YES:
        return a
    if prove_le(b, a) is Proof.YES:
        return b
    return _atom_expr(_Min(*_ordered(a, b)))


def max_expr(a: IntLike, b: IntLike) -> IntExpr:
    a, b = as_expr(a), as_expr(b)
    if a == b:
        return a
    if a.is_const and b.is_const:
        return const(max(a.value, b.value))
    if prove_le(a, b) is Proof.YES:
        return b
    if prove_le(b, a) is Proof.YES:
        return a
    return _atom_expr(_Max(*_ordered(a, b)))


_REBUILD = {_FloorDiv: floordiv, _FloorMod: floormod, _Min: min_expr, _Max: max_expr}
_APPLY = {
    _FloorDiv: lambda x, y: x // y,
    _FloorMod: lambda x, y: x % y,
    _Min: min,
    _Max: max,
}


# -------------------------------------------- substitution and evaluation

def _map_atoms(e: IntExpr, atom_fn) -> IntExpr:
    """Rebuild `e`, replacing each atom by atom_fn(atom) (an IntExpr)."""
    total = const(0)
    for mono, k in e.terms:
        term = const(k)
        for atom, power in mono:
            value = atom_fn(atom)
            for _ in range(power):
                term = _mul(term, value)
        total = _add(total, term)
    return total


def substitute(e: IntLike, mapping: Mapping[SizeVar, IntLike]) -> IntExpr:
    """Replace size variables by expressions (or ints) and re-simplify."""
    e = as_expr(e)
    mapping = {v: as_expr(x) for v, x in mapping.items()}

    def atom_fn(atom):
        if isinstance(atom, SizeVar):
            return mapping.get(atom, _atom_expr(atom))
        return _REBUILD[type(atom)](*(substitute(x, mapping) for x in atom.args))

    return _map_atoms(e, atom_fn)


def evaluate(e: IntLike, env: Mapping[SizeVar, int]) -> int:
    """The integer value of `e` with every size variable given by `env`."""
    e = as_expr(e)

    def atom_value(atom) -> int:
        if isinstance(atom, SizeVar):
            if atom not in env:
                raise ShapeError(f"size variable {atom.name} has no value (evaluating {e})")
            return int(env[atom])
        x, y = (evaluate(arg, env) for arg in atom.args)
        if isinstance(atom, (_FloorDiv, _FloorMod)) and y == 0:
            raise ShapeError(f"division by zero evaluating {e}")
        return _APPLY[type(atom)](x, y)

    total = 0
    for mono, k in e.terms:
        term = k
        for atom, power in mono:
            term *= atom_value(atom) ** power
        total += term
    return total


def free_vars(e: IntLike) -> frozenset:
    """The size variables that occur in `e`."""
    e = as_expr(e)
    out = set()
    for mono, _ in e.terms:
        for atom, _ in mono:
            if isinstance(atom, SizeVar):
                out.add(atom)
            else:
                for arg in atom.args:
                    out |= free_vars(arg)
    return frozenset(out)


# ------------------------------------------------------ interval arithmetic

def _emul(x, y):
    """Product on the extended integers, with 0 * inf = 0 (values are finite)."""
    if x == 0 or y == 0:
        return 0
    if x in (_INF, -_INF) or y in (_INF, -_INF):
        return _INF if (x > 0) == (y > 0) else -_INF
    return x * y


def _eadd(x, y):
    if x in (_INF, -_INF):
        return x
    if y in (_INF, -_INF):
        return y
    return x + y


def _imul(a, b):
    products = [_emul(x, y) for x in a for y in b]
    return min(products), max(products)


def _ipow(iv, p):
    lo, hi = iv
    if p % 2 == 0 and lo <= 0 <= hi:
        top = _INF if _INF in (-lo, hi) else max(lo ** p, hi ** p)
        return 0, top
    out = (1, 1)
    for _ in range(p):
        out = _imul(out, iv)
    return out


def _floor_div_ext(x, d):
    """floor(x / d) for d > 0 possibly infinite, x possibly infinite."""
    if x in (_INF, -_INF):
        return x
    if d == _INF:
        return -1 if x < 0 else 0
    return x // d


def _ifloordiv(num, den):
    dlo, dhi = den
    if dlo > 0:
        cands = [_floor_div_ext(x, d) for x in num for d in (dlo, dhi)]
        return min(cands), max(cands)
    if dhi < 0:  # floor(x / d) == floor(-x / -d)
        return _ifloordiv((-num[1], -num[0]), (-dhi, -dlo))
    return -_INF, _INF


def _ifloormod(num, den):
    dlo, dhi = den
    if dlo > 0:
        if num[0] >= 0 and num[1] < dlo:
            return num
        hi = _eadd(dhi, -1)
        if num[0] >= 0:
            hi = min(hi, num[1])
        return 0, hi
    if dhi < 0:
        return _eadd(dlo, 1), 0
    return -_INF, _INF


def _atom_bounds(atom):
    if isinstance(atom, SizeVar):
        return (-_INF if atom.lower is None else atom.lower,
                _INF if atom.upper is None else atom.upper)
    x, y = (bounds(arg) for arg in atom.args)
    if isinstance(atom, _FloorDiv):
        return _ifloordiv(x, y)
    if isinstance(atom, _FloorMod):
        return _ifloormod(x, y)
    if isinstance(atom, _Min):
        return min(x[0], y[0]), min(x[1], y[1])
    return max(x[0], y[0]), max(x[1], y[1])


def bounds(e: IntLike):
    """Sound (lo, hi) of `e` over every assignment within the variables'
    bounds; either end may be -math.inf / math.inf."""
    e = as_expr(e)
    lo, hi = 0, 0
    for mono, k in e.terms:
        iv = (k, k)
        for atom, power in mono:
            iv = _imul(iv, _ipow(_atom_bounds(atom), power))
        lo, hi = _eadd(lo, iv[0]), _eadd(hi, iv[1])
    return lo, hi


# -------------------------------------------------------------------- prover

def prove_equal(a: IntLike, b: IntLike) -> Proof:
    """YES if a == b under every assignment within bounds; NO if never."""
    d = as_expr(a) - as_expr(b)
    lo, hi = bounds(d)
    if lo == 0 and hi == 0:
        return Proof.YES
    if lo > 0 or hi < 0:
        return Proof.NO
    return Proof.UNKNOWN


def prove_le(a: IntLike, b: IntLike) -> Proof:
    """YES if a <= b under every assignment within bounds; NO if never."""
    a, b = as_expr(a), as_expr(b)
    lo, hi = bounds(b - a)
    if lo >= 0:
        return Proof.YES
    if hi < 0:
        return Proof.NO
    # min(x, y) <= x, y and max(x, y) >= x, y
    ma = _single_atom(a, _Min)
    if ma is not None and any(prove_le(x, b) is Proof.YES for x in ma.args):
        return Proof.YES
    mb = _single_atom(b, _Max)
    if mb is not None and any(prove_le(a, x) is Proof.YES for x in mb.args):
        return Proof.YES
    # floor division by one positive constant is monotone: X <= Y gives X // c <= Y // c
    da, db = _single_atom(a, _FloorDiv), _single_atom(b, _FloorDiv)
    if da is not None and db is not None and da.args[1] == db.args[1] \
            and da.args[1].is_const and da.args[1].value > 0 \
            and prove_le(da.args[0], db.args[0]) is Proof.YES:
        return Proof.YES
    return Proof.UNKNOWN


def prove_lt(a: IntLike, b: IntLike) -> Proof:
    """YES if a < b under every assignment within bounds; NO if never."""
    lo, hi = bounds(as_expr(b) - as_expr(a))
    if lo >= 1:
        return Proof.YES
    if hi <= 0:
        return Proof.NO
    return Proof.UNKNOWN


def is_monotone_nondecreasing(e: IntLike) -> bool:
    """True when `e` provably does not decrease as any variable grows (within
    non-negative bounds): non-negative coefficients over variables with
    lower bound >= 0, floordiv by positive constants, min and max of such.
    A False answer means "not shown", not "decreasing"."""
    e = as_expr(e)
    for mono, k in e.terms:
        if mono and k < 0:
            return False
        for atom, _ in mono:
            if isinstance(atom, SizeVar):
                if atom.lower is None or atom.lower < 0:
                    return False
            elif isinstance(atom, _FloorDiv):
                if not (atom.args[1].is_const and atom.args[1].value > 0
                        and is_monotone_nondecreasing(atom.args[0])
                        and bounds(atom.args[0])[0] >= 0):
                    return False
            elif isinstance(atom, (_Min, _Max)):
                if not all(is_monotone_nondecreasing(x) and bounds(x)[0] >= 0 for x in atom.args):
                    return False
            else:
                return False
    return True

