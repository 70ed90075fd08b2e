"""Rendering tensor-program expressions as source text, by table.

`Renderer` walks an expression the same way for every text backend (Python
for the interpreter, C for the C backend); a backend is a table from node
kind to format string plus a few hooks (names, constants, integer division).
Statements are rendered by the backend, since their syntax differs.
"""

from __future__ import annotations

from ..ir.shape import SizeVar, _FloorDiv, _FloorMod, _Min, bounds
from .expr import BinOp, Cast, Compare, Const, Index, Intrinsic, Load, Logical, Not, ScalarVar, Select


class Renderer:
    # node kind -> format string over rendered operands {a}, {b}, {c}
    BINARY: dict = {}
    COMPARE = {"lt": "({a} < {b})", "le": "({a} <= {b})", "gt": "({a} > {b})",
               "ge": "({a} >= {b})", "eq": "({a} == {b})", "ne": "({a} != {b})"}
    LOGICAL: dict = {}
    NOT = ""
    SELECT = ""

    def __init__(self):
        self.names: dict = {}
        self.used: set = set()

    # names ---------------------------------------------------------------
    def name(self, obj, hint: str) -> str:
        """A unique identifier for a variable or buffer."""
        key = id(obj)
        if key not in self.names:
            base = "".join(c if c.isalnum() or c == "_" else "_" for c in hint) or "v"
            if base[0].isdigit():
                base = "v" + base
            candidate, k = base, 1
            while candidate in self.used or candidate in self.RESERVED:
                candidate = f"{base}_{k}"
                k += 1
            self.used.add(candidate)
            self.names[key] = candidate
        return self.names[key]

    RESERVED: frozenset = frozenset()

    # integers --------------------------------------------------------------
    def int_expr(self, e) -> str:
        """A canonical IntExpr as source."""
        if not e.terms:
            return "0"
        parts = []
        for mono, k in e.terms:
            factors = [self.int_atom(atom) for atom, p in mono for _ in range(p)]
            if k != 1 or not factors:
                factors.insert(0, self.int_const(k))
            parts.append(" * ".join(factors))
        return "(" + " + ".join(parts) + ")" if len(parts) > 1 else parts[0]

    def int_atom(self, atom) -> str:
        if isinstance(atom, SizeVar):
            return self.name(atom, atom.name)
        x, y = (self.int_expr(a) for a in atom.args)
        if isinstance(atom, (_FloorDiv, _FloorMod)):
            nonneg = bounds(atom.args[0])[0] >= 0 and bounds(atom.args[1])[0] > 0
            return self.int_division("div" if isinstance(atom, _FloorDiv) else "mod", x, y, nonneg)
        return self.int_minmax("min" if isinstance(atom, _Min) else "max", x, y)

    def int_const(self, k: int) -> str:
        return str(k)

    def int_division(self, kind: str, x: str, y: str, nonneg: bool) -> str:
        raise NotImplementedError

    def int_minmax(self, kind: str, x: str, y: str) -> str:
        raise NotImplementedError

    # expressions -----------------------------------------------------------
    def expr(self, e) -> str:
        if isinstance(e, Index):
            return self.int_expr(e.value)
        if isinstance(e, Const):
            return self.constant(e.value, e.dtype)
        if isinstance(e, ScalarVar):
            return self.name(e, e.name)
        if isinstance(e, Load):
            return self.load(e)
        if isinstance(e, BinOp):
            return self.binary(e.op, self.expr(e.a), self.expr(e.b), e.dtype)
        if isinstance(e, Compare):
            return self.COMPARE[e.op].format(a=self.expr(e.a), b=self.expr(e.b))
        if isinstance(e, Logical):
            return self.LOGICAL[e.op].format(a=self.expr(e.a), b=self.expr(e.b))
        if isinstance(e, Not):
            return self.NOT.format(a=self.expr(e.a))
        if isinstance(e, Select):
            return self.SELECT.format(c=self.expr(e.cond), a=self.expr(e.a), b=self.expr(e.b))
        if isinstance(e, Cast):
            return self.cast(self.expr(e.a), e.a.dtype, e.dtype)
        if isinstance(e, Intrinsic):
            return self.intrinsic(e.name, [self.expr(a) for a in e.args], e.dtype)
        raise TypeError(f"cannot render {type(e).__name__}")

    def binary(self, op: str, a: str, b: str, dtype: str) -> str:
        return self.BINARY[op].format(a=a, b=b)

    def constant(self, value, dtype: str) -> str:
        raise NotImplementedError

    def load(self, e: Load) -> str:
        return f"{self.name(e.buffer, e.buffer.name)}[{self.expr(e.buffer.flat_index(e.indices))}]"

    def cast(self, x: str, src: str, dst: str) -> str:
        raise NotImplementedError

    def intrinsic(self, name: str, args: list, dtype: str) -> str:
        raise NotImplementedError
