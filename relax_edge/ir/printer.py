"""Printer: a readable, stable text form of a module, in the spirit of TVMScript.

    # size n: 1 <= n
    def main(x: Tensor((n, 784), "float32")) -> Tensor((n, 10), "float32"):
        with dataflow():
            lv0: Tensor((n, 256), "float32") = matmul(x, meta[0])
            gv: Tensor((n, 10), "float32") = relu(lv0)
        return gv

    # meta[0]: Tensor((784, 256), "float32")

1. Symbolic shapes are shown in their canonical form.
2. Constants with more than one element print as `meta[i]`, listed at the
   end of the module with their types; scalars print inline.
3. Operator attributes print as keywords, only where they differ from the
   operator's default, in the operator's declared order.
4. An `if` prints its branches indented under it; a `loop` prints its
   trip count, initial condition and carried values, then its body as a
   nested `def body(...)`.
"""

from __future__ import annotations

from .expr import (
    BindingBlock,
    Call,
    CallExtern,
    CallTensor,
    Constant,
    DataflowBlock,
    Function,
    GlobalVar,
    If,
    IRModule,
    Loop,
    MatchCast,
    ShapeExpr,
    Tuple,
    TupleGetItem,
    Var,
)
from .shape import IntExpr
from .types import shape_str, type_free_vars

__all__ = ["print_module", "print_function"]

_INDENT = "    "


def _attr_str(v) -> str:
    if isinstance(v, tuple):
        inner = ", ".join(_attr_str(x) for x in v)
        return f"({inner},)" if len(v) == 1 else f"({inner})"
    if isinstance(v, IntExpr):
        return str(v)
    if isinstance(v, str):
        return f'"{v}"'
    return repr(v)


class _Printer:
    def __init__(self):
        self.meta: list[Constant] = []
        self.meta_index: dict = {}
        self.lines: list[str] = []

    def value(self, e) -> str:
        if isinstance(e, Var):
            return e.name
        if isinstance(e, Constant):
            if e.data.size == 1 and e.data.ndim == 0:
                return f'const({e.data.item()!r}, "{e.type.dtype}")'
            if id(e) not in self.meta_index:
                self.meta_index[id(e)] = len(self.meta)
                self.meta.append(e)
            return f"meta[{self.meta_index[id(e)]}]"
        if isinstance(e, ShapeExpr):
            return f"shape({shape_str(e.values)})"
        if isinstance(e, Tuple):
            inner = ", ".join(self.value(f) for f in e.fields)
            return f"({inner},)" if len(e.fields) == 1 else f"({inner})"
        if isinstance(e, TupleGetItem):
            return f"{self.value(e.tuple_value)}[{e.index}]"
        if isinstance(e, GlobalVar):
            return f"@{e.name}"
        if isinstance(e, Call):
            args = [self.value(a) for a in e.args]
            if isinstance(e.op, GlobalVar):
                return f"@{e.op.name}({', '.join(args)})"
            defaults = e.op.attrs
            for k, v in e.attrs.items():
                if k not in defaults or defaults[k] != v:
                    args.append(f"{k}={_attr_str(v)}")
            return f"{e.op.name}({', '.join(args)})"
        if isinstance(e, CallTensor):
            args = ", ".join(self.value(a) for a in e.args)
            sizes = "" if not e.size_args else f", sizes={shape_str(e.size_args)}"
            return f"call_tensor(@{e.program.name}, ({args}){sizes}, out={e.type})"
        if isinstance(e, CallExtern):
            args = ", ".join(self.value(a) for a in e.args)
            return f'call_extern("{e.name}", ({args}), out={e.type})'
        raise TypeError(f"cannot print {type(e).__name__}")

    def emit(self, depth: int, text: str) -> None:
        self.lines.append(_INDENT * depth + text)

    def block(self, block: BindingBlock, depth: int) -> None:
        if isinstance(block, DataflowBlock):
            self.emit(depth, "with dataflow():")
            depth += 1
        for b in block.bindings:
            head = f"{b.var.name}: {b.var.type}"
            if isinstance(b, MatchCast):
                self.emit(depth, f"{head} = match_cast({self.value(b.value)}, {b.type})")
            elif isinstance(b.value, If):
                self.if_binding(b.var, b.value, depth)
            elif isinstance(b.value, Loop):
                self.loop_binding(b.var, b.value, depth)
            else:
                self.emit(depth, f"{head} = {self.value(b.value)}")

    def if_binding(self, var: Var, e: If, depth: int) -> None:
        for keyword, branch in ((f"if {self.value(e.cond)}:", e.then_branch), ("else:", e.else_branch)):
            self.emit(depth, keyword)
            for blk in branch.blocks:
                self.block(blk, depth + 1)
            self.emit(depth + 1, f"{var.name}: {var.type} = {self.value(branch.body)}")

    def loop_binding(self, var: Var, e: Loop, depth: int) -> None:
        trip = e.trip_count
        trip = "none" if trip is None else self.value(trip) if not isinstance(trip, IntExpr) else str(trip)
        cond = "none" if e.cond is None else self.value(e.cond)
        init = ", ".join(self.value(x) for x in e.init)
        params = ", ".join(f"{p.name}: {p.type}" for p in e.params)
        self.emit(depth, f"{var.name}: {var.type} = loop(trip_count={trip}, cond={cond}, init=({init})):")
        self.emit(depth + 1, f"def body({params}):")
        for blk in e.body.blocks:
            self.block(blk, depth + 2)
        self.emit(depth + 2, f"return {self.value(e.body.body)}")

    def function(self, f: Function) -> None:
        size_vars = set()
        for p in f.params:
            size_vars |= type_free_vars(p.type)
        for sv in sorted(size_vars, key=lambda v: v.name):
            self.emit(0, f"# size {sv.name}: {sv.describe()}")
        params = ", ".join(f"{p.name}: {p.type}" for p in f.params)
        self.emit(0, f"def {f.name}({params}) -> {f.ret_type}:")
        for blk in f.body.blocks:
            self.block(blk, 1)
        self.emit(1, f"return {self.value(f.body.body)}")

    def meta_section(self) -> None:
        if self.meta:
            self.emit(0, "")
            for i, c in enumerate(self.meta):
                self.emit(0, f"# meta[{i}]: {c.type}")


def print_function(f: Function) -> str:
    p = _Printer()
    p.function(f)
    p.meta_section()
    return "\n".join(p.lines) + "\n"


def print_module(mod: IRModule) -> str:
    p = _Printer()
    first = True
    for f in mod.functions.values():
        if not first:
            p.emit(0, "")
        p.function(f)
        first = False
    for name, decl in mod.externs.items():
        params = ", ".join(str(t) for t in decl.param_types)
        p.emit(0, f'# extern {name}({params}) -> {decl.ret_type}  from "{decl.library}"')
    for name, program in mod.tensor_programs.items():
        p.emit(0, "")
        text = str(program) if hasattr(program, "body") else f"# tensor program @{name}\n"
        p.lines.extend(text.rstrip("\n").splitlines())
    p.meta_section()
    return "\n".join(p.lines) + "\n"
