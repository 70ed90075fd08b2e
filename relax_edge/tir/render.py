"""Lowering tensor-program expressions, by table.

1. `IndexLowering` is the one description of index arithmetic: a canonical
   `IntExpr` is a sum of terms, each an integer coefficient times a product
   of atoms (size and loop variables, floor division, floor modulo, min and
   max of IntExprs). A backend supplies the primitive operations (constants,
   `*`, `+`, division and min/max) and the value of a variable: text for the
   Python and C renderers, IRBuilder calls for the LLVM backend.
2. `Renderer` walks an expression the same way for every text backend
   (Python for the interpreter, C for the C backend); a backend is a table
   from node kind to format string plus a few hooks (names, constants,
   integer division). Statements are rendered by the backend, since their
   syntax differs; `IndentedLines` is how a text backend lays them out.
"""

from __future__ import annotations

from ..ir.shape import SizeVar, _FloorDiv, _FloorMod, _Min, bounds
from .expr import Load
from .visit import NodeFunctor

__all__ = ["IndexLowering", "Renderer", "IndentedLines"]


class IndexLowering:
    """Canonical IntExprs through a backend's primitive integer operations."""

    def int_expr(self, e):
        """A canonical IntExpr: the terms' products left to right, summed in order."""
        total = None
        for mono, k in e.terms:
            factors = [self.int_atom(atom) for atom, p in mono for _ in range(p)]
            if k != 1 or not factors:
                factors.insert(0, self.int_const(k))
            term = factors[0]
            for f in factors[1:]:
                term = self.int_mul(term, f)
            total = term if total is None else self.int_add(total, term)
        if total is None:
            return self.int_const(0)
        return self.int_sum(total) if len(e.terms) > 1 else total

    def int_atom(self, atom):
        if isinstance(atom, SizeVar):
            return self.size_value(atom)
        x, y = (self.int_expr(a) for a in atom.args)
        if isinstance(atom, (_FloorDiv, _FloorMod)):
            nonneg = bounds(atom.args[0])[0] >= 0 and bounds(atom.args[1])[0] > 0
            (mono, k), *rest = atom.args[1].terms or [((), 0)]
            if not rest and (k != 1) + sum(p for _, p in mono) > 1:  # a product divisor: `x % 2 * n` is not x % (2n)
                y = self.int_group(y)
            return self.int_division("div" if isinstance(atom, _FloorDiv) else "mod", x, y, nonneg)
        return self.int_minmax("min" if isinstance(atom, _Min) else "max", x, y)

    # the backend's primitives ---------------------------------------------
    def size_value(self, var: SizeVar):
        """The value of a size or loop variable."""
        raise NotImplementedError

    def int_const(self, k: int):
        raise NotImplementedError

    def int_mul(self, a, b):
        raise NotImplementedError

    def int_add(self, a, b):
        raise NotImplementedError

    def int_sum(self, total):
        """A finished sum of two or more terms (text backends parenthesize it)."""
        return total

    def int_group(self, product):
        """A product used as a divisor (text backends parenthesize it)."""
        return product

    def int_division(self, kind: str, x, y, nonneg: bool):
        """Floor division (`div`) or modulo (`mod`); `nonneg`: the prover shows x >= 0 and y > 0."""
        raise NotImplementedError

    def int_minmax(self, kind: str, x, y):
        raise NotImplementedError


class Renderer(IndexLowering, NodeFunctor):
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
    def size_value(self, var) -> str:
        return self.name(var, var.name)

    def int_const(self, k: int) -> str:
        return str(k)

    def int_mul(self, a: str, b: str) -> str:
        return f"{a} * {b}"

    def int_add(self, a: str, b: str) -> str:
        return f"{a} + {b}"

    def int_sum(self, total: str) -> str:
        return f"({total})"

    def int_group(self, product: str) -> str:
        return f"({product})"

    # expressions -----------------------------------------------------------
    def expr(self, e) -> str:
        """`e` as source text."""
        return self.visit(e)

    def visit_Index(self, e) -> str:
        return self.int_expr(e.value)

    def visit_Const(self, e) -> str:
        return self.constant(e.value, e.dtype)

    def visit_ScalarVar(self, e) -> str:
        return self.name(e, e.name)

    def visit_Load(self, e) -> str:
        return self.load(e)

    def visit_BinOp(self, e) -> str:
        return self.binary(e.op, self.expr(e.a), self.expr(e.b), e.dtype)

    def visit_Compare(self, e) -> str:
        return self.COMPARE[e.op].format(a=self.expr(e.a), b=self.expr(e.b))

    def visit_Logical(self, e) -> str:
        return self.LOGICAL[e.op].format(a=self.expr(e.a), b=self.expr(e.b))

    def visit_Not(self, e) -> str:
        return self.NOT.format(a=self.expr(e.a))

    def visit_Select(self, e) -> str:
        return self.SELECT.format(c=self.expr(e.cond), a=self.expr(e.a), b=self.expr(e.b))

    def visit_Cast(self, e) -> str:
        return self.cast(self.expr(e.a), e.a.dtype, e.dtype)

    def visit_Reinterpret(self, e) -> str:
        return self.reinterpret(self.expr(e.a), e.a.dtype, e.dtype)

    def visit_Intrinsic(self, e) -> str:
        return self.intrinsic(e.name, [self.expr(a) for a in e.args], e.dtype)

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

    def reinterpret(self, x: str, src: str, dst: str) -> str:
        """The bits of `x` (a value of `src`) read as `dst`, of the same width."""
        raise NotImplementedError


class IndentedLines:
    """Statements as lines of text, a nested body one level deeper; for a
    statement visitor with `lines` (a list) and `depth`."""

    INDENT = "    "
    lines: list
    depth: int

    def line(self, text: str) -> None:
        self.lines.append(self.INDENT * self.depth + text)

    def nested(self, s) -> None:
        """Visit `s` one level deeper."""
        self.depth += 1
        self.visit(s)
        self.depth -= 1

    def branch(self, s, opening: str, middle: str, closing: str | None = None) -> None:
        """An IfThenElse: `opening`, the then-body, `middle` and the else-body
        when there is one, then `closing` when the syntax has one."""
        self.line(opening)
        self.nested(s.then_body)
        if s.else_body is not None:
            self.line(middle)
            self.nested(s.else_body)
        if closing is not None:
            self.line(closing)
