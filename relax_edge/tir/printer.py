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
from .expr import BinOp, Cast, Compare, Const, Index, Intrinsic, Load, Logical, Not, ScalarVar, Select
from .stmt import Allocate, Assert, For, IfThenElse, Let, Seq, Store, TensorProgram

_OPS = {"add": "+", "sub": "-", "mul": "*", "div": "/", "floordiv": "//", "floormod": "%"}
_CMP = {"lt": "<", "le": "<=", "gt": ">", "ge": ">=", "eq": "==", "ne": "!="}


def expr_str(e) -> str:
    if isinstance(e, Index):
        return str(e.value)
    if isinstance(e, Const):
        return repr(e.value)
    if isinstance(e, ScalarVar):
        return e.name
    if isinstance(e, Load):
        return f"{e.buffer.name}[{', '.join(expr_str(i) for i in e.indices)}]"
    if isinstance(e, BinOp):
        if e.op in _OPS:
            return f"({expr_str(e.a)} {_OPS[e.op]} {expr_str(e.b)})"
        return f"{e.op}({expr_str(e.a)}, {expr_str(e.b)})"
    if isinstance(e, Compare):
        return f"({expr_str(e.a)} {_CMP[e.op]} {expr_str(e.b)})"
    if isinstance(e, Logical):
        return f"({expr_str(e.a)} {e.op} {expr_str(e.b)})"
    if isinstance(e, Not):
        return f"(not {expr_str(e.a)})"
    if isinstance(e, Select):
        return f"select({expr_str(e.cond)}, {expr_str(e.a)}, {expr_str(e.b)})"
    if isinstance(e, Cast):
        return f"{e.dtype}({expr_str(e.a)})"
    if isinstance(e, Intrinsic):
        return f"{e.name}({', '.join(expr_str(a) for a in e.args)})"
    return f"<{type(e).__name__}>"


def _buf(b) -> str:
    return f"{b.name}: {b.dtype}{shape_str(b.shape)}"


def print_program(p: TensorProgram) -> str:
    lines = []
    head = f"# program {p.name}({', '.join(_buf(b) for b in p.inputs)}) -> ({', '.join(_buf(b) for b in p.outputs)})"
    if p.scratch:
        head += f", scratch ({', '.join(_buf(b) for b in p.scratch)})"
    if p.size_params:
        head += ", sizes " + ", ".join(v.name for v in p.size_params)
    lines.append(head)

    def emit(s, depth):
        pad = "    " * depth
        if isinstance(s, Store):
            lines.append(f"{pad}{s.buffer.name}[{', '.join(expr_str(i) for i in s.indices)}] = {expr_str(s.value)}")
        elif isinstance(s, For):
            kind = "" if s.kind == "serial" else f"  # {s.kind}"
            lines.append(f"{pad}for {s.var.name} in range({s.extent}):{kind}")
            emit(s.body, depth + 1)
        elif isinstance(s, IfThenElse):
            lines.append(f"{pad}if {expr_str(s.cond)}:")
            emit(s.then_body, depth + 1)
            if s.else_body is not None:
                lines.append(f"{pad}else:")
                emit(s.else_body, depth + 1)
        elif isinstance(s, Let):
            lines.append(f"{pad}{s.var.name} = {expr_str(s.value)}")
            emit(s.body, depth)
        elif isinstance(s, Allocate):
            lines.append(f"{pad}{s.buffer.name} = local {s.buffer.dtype}[{s.buffer.numel()}]")
            emit(s.body, depth)
        elif isinstance(s, Seq):
            for x in s.stmts:
                emit(x, depth)
        elif isinstance(s, Assert):
            values = "".join(f", {expr_str(v)}" for v in s.values)
            lines.append(f"{pad}assert {expr_str(s.cond)}, {s.message!r}{values}")

    emit(p.body, 0)
    return "\n".join(lines) + "\n"
