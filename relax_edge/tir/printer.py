"""Printer of tensor programs: a readable, stable, Python-like text form.

    # program row_sum(a: float32(n, 4)) -> (b: float32(n,)), sizes n
    for i0 in range(n):
        b_acc = local float32[1]
        b_acc[0] = 0.0
        for k in range(4):
            b_acc[0] = b_acc[0] + a[i0, k] * 2.0
        b[i0] = b_acc[0]
"""

from __future__ import annotations

from ..ir.types import shape_str
from .render import IndentedLines
from .stmt import Allocate, Assert, For, IfThenElse, Let, Store
from .visit import NodeFunctor, StmtVisitor

__all__ = ["print_program", "expr_str"]

_OPS = {"add": "+", "sub": "-", "mul": "*", "div": "/", "floordiv": "//", "floormod": "%"}
_OPS.update({"bitand": "&", "bitor": "|", "bitxor": "^", "shl": "<<", "shr": ">>"})
_CMP = {"lt": "<", "le": "<=", "gt": ">", "ge": ">=", "eq": "==", "ne": "!="}


class _ExprPrinter(NodeFunctor):
    """An expression as text; a node class without a hook prints as <Name>."""

    def generic_visit(self, e) -> str:
        return f"<{type(e).__name__}>"

    def visit_Index(self, e) -> str:
        return str(e.value)

    def visit_Const(self, e) -> str:
        return repr(e.value)

    def visit_ScalarVar(self, e) -> str:
        return e.name

    def visit_Load(self, e) -> str:
        return f"{e.buffer.name}[{self.join(e.indices)}]"

    def visit_BinOp(self, e) -> str:
        if e.op in _OPS:
            return f"({self.visit(e.a)} {_OPS[e.op]} {self.visit(e.b)})"
        return f"{e.op}({self.visit(e.a)}, {self.visit(e.b)})"

    def visit_Compare(self, e) -> str:
        return f"({self.visit(e.a)} {_CMP[e.op]} {self.visit(e.b)})"

    def visit_Logical(self, e) -> str:
        return f"({self.visit(e.a)} {e.op} {self.visit(e.b)})"

    def visit_Not(self, e) -> str:
        return f"(not {self.visit(e.a)})"

    def visit_Select(self, e) -> str:
        return f"select({self.visit(e.cond)}, {self.visit(e.a)}, {self.visit(e.b)})"

    def visit_Cast(self, e) -> str:
        return f"{e.dtype}({self.visit(e.a)})"

    def visit_Reinterpret(self, e) -> str:
        return f"reinterpret_{e.dtype}({self.visit(e.a)})"

    def visit_Intrinsic(self, e) -> str:
        return f"{e.name}({self.join(e.args)})"

    def join(self, exprs) -> str:
        return ", ".join(self.visit(x) for x in exprs)


_EXPRS = _ExprPrinter()


def expr_str(e) -> str:
    """A tensor-program expression as text."""
    return _EXPRS.visit(e)


def _buf(b) -> str:
    return f"{b.name}: {b.dtype}{shape_str(b.shape)}"


class _StmtPrinter(IndentedLines, StmtVisitor):
    """Statements as indented lines; a loop or branch body one level deeper."""

    def __init__(self):
        self.lines: list = []
        self.depth = 0

    def visit_Store(self, s: Store):
        self.line(f"{s.buffer.name}[{_EXPRS.join(s.indices)}] = {expr_str(s.value)}")

    def visit_For(self, s: For):
        kind = "" if s.kind == "serial" else f"  # {s.kind}"
        self.line(f"for {s.var.name} in range({s.extent}):{kind}")
        self.nested(s.body)

    def visit_IfThenElse(self, s: IfThenElse):
        self.branch(s, f"if {expr_str(s.cond)}:", "else:")

    def visit_Let(self, s: Let):
        self.line(f"{s.var.name} = {expr_str(s.value)}")
        self.visit(s.body)

    def visit_Allocate(self, s: Allocate):
        self.line(f"{s.buffer.name} = local {s.buffer.dtype}[{s.buffer.numel()}]")
        self.visit(s.body)

    def visit_Assert(self, s: Assert):
        values = "".join(f", {expr_str(v)}" for v in s.values)
        self.line(f"assert {expr_str(s.cond)}, {s.message!r}{values}")


def print_program(p) -> str:
    """A TensorProgram as text: a header line, then its body."""
    head = f"# program {p.name}({', '.join(_buf(b) for b in p.inputs)}) -> ({', '.join(_buf(b) for b in p.outputs)})"
    if p.scratch:
        head += f", scratch ({', '.join(_buf(b) for b in p.scratch)})"
    if p.size_params:
        head += ", sizes " + ", ".join(v.name for v in p.size_params)
    printer = _StmtPrinter()
    printer.visit(p.body)
    return "\n".join([head, *printer.lines]) + "\n"
