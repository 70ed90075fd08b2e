"""Builder: makes graph functions binding by binding, in normal form.

    bb = Builder()
    n = SizeVar("n")
    x = Var("x", TensorType((n, 784), "float32"))
    with bb.function("main", [x]):
        with bb.dataflow():
            h = bb.emit(op.relu(op.matmul(x, w1)))    # nested calls are emitted first
            out = bb.emit_output(op.matmul(h, w2))
        bb.ret(out)
    mod = bb.get()                                      # verified IRModule

1. Operators infer their types when called (`relax_edge.op`); a provable
   mismatch fails there with the operator's name and the argument shapes.
2. `emit` binds a value to a fresh variable (a DataflowVar inside a dataflow
   block); arguments that are not variables, constants or shape values are
   emitted first, so every call's arguments are leaves.
3. `emit_if` and `emit_loop` build their branches / body with callbacks in
   a nested frame; the loop's type follows from its body (see `Loop`).
4. `get()` returns the module and, by default, runs the verifier.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Callable

from ..errors import RelaxEdgeError
from .expr import (
    BindingBlock,
    Call,
    CallExtern,
    CallTensor,
    Constant,
    DataflowBlock,
    DataflowVar,
    Expr,
    ExternDecl,
    Function,
    GlobalVar,
    If,
    IRModule,
    Loop,
    MatchCast,
    SeqExpr,
    ShapeExpr,
    Tuple,
    TupleGetItem,
    Var,
    VarBinding,
)
from .types import TensorType, TupleType, Type

__all__ = ["Builder"]

_LEAVES = (Var, Constant, ShapeExpr, GlobalVar)


class _Frame:
    """Bindings of the function (or If branch) under construction."""

    def __init__(self):
        self.blocks: list = []
        self.current: list = []
        self.in_dataflow = False

    def close_block(self):
        if self.current:
            cls = DataflowBlock if self.in_dataflow else BindingBlock
            self.blocks.append(cls(self.current))
        self.current = []


class Builder:
    def __init__(self, module: IRModule | None = None):
        self._functions = dict(module.functions) if module else {}
        self._programs = dict(module.tensor_programs) if module else {}
        self._externs = dict(module.externs) if module else {}
        self._frames: list[_Frame] = []
        self._names: set = set()
        self._counters: dict = {}
        self._func_name = None
        self._params = None
        self._attrs = None
        self._result = None

    # functions --------------------------------------------------------
    @contextmanager
    def function(self, name: str, params, attrs=None):
        if self._frames:
            raise RelaxEdgeError(f"function {name}: functions cannot be nested")
        if name in self._functions:
            raise RelaxEdgeError(f"function {name} is already defined in this module")
        self._func_name, self._params, self._attrs = name, list(params), attrs
        self._names = {p.name for p in self._params}
        self._counters, self._result = {}, None
        self._frames = [_Frame()]
        try:
            yield self
            frame = self._frames[0]
            if frame.in_dataflow:
                raise RelaxEdgeError(f"function {name}: dataflow block left open")
            frame.close_block()
            if self._result is None:
                raise RelaxEdgeError(f"function {name}: no return value (call Builder.ret)")
            body = SeqExpr(frame.blocks, self._result)
            self._functions[name] = Function(self._params, body, body.type, name, attrs)
        finally:
            self._frames = []

    def ret(self, value: Expr) -> None:
        """Set the function's return value."""
        frame = self._frame()
        if frame.in_dataflow:
            raise RelaxEdgeError(f"function {self._func_name}: return inside a dataflow block")
        self._result = self._leaf(value)

    @contextmanager
    def dataflow(self):
        frame = self._frame()
        if frame.in_dataflow:
            raise RelaxEdgeError(f"function {self._func_name}: dataflow blocks cannot be nested")
        frame.close_block()
        frame.in_dataflow = True
        try:
            yield self
        finally:
            frame.close_block()
            frame.in_dataflow = False

    # bindings ---------------------------------------------------------
    def emit(self, value: Expr, name: str | None = None) -> Var:
        """Bind `value` to a fresh variable and return it."""
        value = self._normalize(value)
        frame = self._frame()
        cls = DataflowVar if frame.in_dataflow else Var
        var = cls(self._fresh(name, "lv" if frame.in_dataflow else "gv"), value.type)
        frame.current.append(VarBinding(var, value))
        return var

    def emit_output(self, value: Expr, name: str | None = None) -> Var:
        """Inside a dataflow block: bind `value` to a variable visible after the block."""
        frame = self._frame()
        if not frame.in_dataflow:
            raise RelaxEdgeError(f"function {self._func_name}: emit_output outside a dataflow block")
        value = self._normalize(value)
        var = Var(self._fresh(name, "gv"), value.type)
        frame.current.append(VarBinding(var, value))
        return var

    def match_cast(self, value: Expr, type: Type, name: str | None = None) -> Var:
        """Bind `value` as `type`, checked at run time; new size vars in
        `type` are bound from the value's actual shape."""
        value = self._leaf(value)
        frame = self._frame()
        cls = DataflowVar if frame.in_dataflow else Var
        var = cls(self._fresh(name, "lv" if frame.in_dataflow else "gv"), type)
        frame.current.append(MatchCast(var, value, type))
        return var

    def emit_if(self, cond: Expr, then_body: Callable[["Builder"], Expr],
                else_body: Callable[["Builder"], Expr], name: str | None = None,
                join: Callable[[Type, Type], Type] | None = None) -> Var:
        """Emit `if cond` whose branches are built by the two callbacks; each
        callback emits bindings and returns the branch's value. The if's type
        is `join(then type, else type)` (default: the then branch's)."""
        if self._frame().in_dataflow:
            raise RelaxEdgeError(f"function {self._func_name}: an if cannot be inside a dataflow block")
        cond = self._leaf(cond)
        branches = []
        for build in (then_body, else_body):
            self._frames.append(_Frame())
            try:
                result = self._leaf(build(self))
                frame = self._frames[-1]
                frame.close_block()
                branches.append(SeqExpr(frame.blocks, result))
            finally:
                self._frames.pop()
        joined = join(branches[0].type, branches[1].type) if join is not None else None
        return self.emit(If(cond, branches[0], branches[1], joined), name)

    def emit_loop(self, trip_count, cond: Expr | None, init, body: Callable, name: str | None = None) -> Var:
        """Emit a `loop` (ir/expr.py `Loop`). `body(builder, iteration, condition, carried)`
        emits the body's bindings over its parameters and returns (condition,
        carried values, scan values). The scan values are stacked to the trip
        count's length when the loop cannot stop early (no condition, or a
        constant true one the body passes on), else to an unknown length."""
        if self._frame().in_dataflow:
            raise RelaxEdgeError(f"function {self._func_name}: a loop cannot be inside a dataflow block")
        init = [self._leaf(x) for x in init]
        cond = None if cond is None else self._leaf(cond)
        if isinstance(trip_count, Expr):
            trip_count = self._leaf(trip_count)
        params = [Var(self._fresh(f"{name or 'loop'}_iter", "it"), TensorType((), "int64")),
                  Var(self._fresh(f"{name or 'loop'}_cond", "c"), TensorType((), "bool"))]
        params += [Var(self._fresh(f"{name or 'loop'}_state{k}", "st"), x.type) for k, x in enumerate(init)]
        self._frames.append(_Frame())
        try:
            go, carried, scans = body(self, params[0], params[1], params[2:])
            result = self._leaf(Tuple([go, *carried, *scans]))
            frame = self._frames[-1]
            frame.close_block()
            seq = SeqExpr([_pure(blk) for blk in frame.blocks], result)
        finally:
            self._frames.pop()
        go = result.fields[0]
        early = not (_always_true(cond) and (_always_true(go) or go is params[1]))
        length = None if early or isinstance(trip_count, Expr) or trip_count is None else trip_count
        stacked = [_stacked(s.type, length) for s in result.fields[1 + len(init):]]
        loop = Loop(trip_count, cond, init, params, seq, TupleType([p.type for p in params[2:]] + stacked))
        return self.emit(loop, name)

    def checkpoint(self) -> tuple:
        """A mark of the bindings emitted so far in the current frame (see `rollback`)."""
        frame = self._frame()
        return frame, len(frame.blocks), len(frame.current), frame.in_dataflow

    def rollback(self, mark: tuple) -> None:
        """Drop the bindings emitted in the current frame since `checkpoint()` gave `mark`."""
        frame, n_blocks, n_current, in_dataflow = mark
        if frame is not self._frame() or frame.in_dataflow != in_dataflow or len(frame.blocks) != n_blocks:
            raise RelaxEdgeError(f"function {self._func_name}: rollback past a block or frame boundary")
        del frame.current[n_current:]

    # module contents --------------------------------------------------
    def add_extern(self, decl: ExternDecl) -> None:
        self._externs[decl.name] = decl

    def add_tensor_program(self, name: str, program) -> GlobalVar:
        self._programs[name] = program
        return GlobalVar(name)

    def get(self, verify: bool = True) -> IRModule:
        mod = IRModule(self._functions, self._programs, self._externs)
        if verify:
            from .verify import verify as run_verifier
            run_verifier(mod)
        return mod

    # helpers ----------------------------------------------------------
    def _frame(self) -> _Frame:
        if not self._frames:
            raise RelaxEdgeError("Builder: emit outside of `with builder.function(...)`")
        return self._frames[-1]

    def _fresh(self, name: str | None, prefix: str) -> str:
        if name is None:
            k = self._counters.get(prefix, 0)
            while f"{prefix}{k}" in self._names:
                k += 1
            self._counters[prefix] = k + 1
            name = f"{prefix}{k}"
        base, k = name, 1
        while name in self._names:
            name = f"{base}_{k}"
            k += 1
        self._names.add(name)
        return name

    def _leaf(self, value: Expr) -> Expr:
        if isinstance(value, _LEAVES):
            return value
        if isinstance(value, Tuple):
            return Tuple(self._leaf(f) for f in value.fields)
        return self.emit(value)

    def _normalize(self, value: Expr) -> Expr:
        """Emit non-leaf arguments first so that calls take leaves."""
        if isinstance(value, Call):
            return Call(value.op, [self._leaf(a) for a in value.args], value.attrs, value.type, value.span)
        if isinstance(value, CallTensor):
            return CallTensor(value.program, [self._leaf(a) for a in value.args], value.type,
                              value.size_args, value.span)
        if isinstance(value, CallExtern):
            return CallExtern(value.name, [self._leaf(a) for a in value.args], value.type,
                              value.attrs, value.span)
        if isinstance(value, TupleGetItem):
            return TupleGetItem(self._leaf(value.tuple_value), value.index)
        if isinstance(value, Tuple):
            return Tuple(self._leaf(f) for f in value.fields)
        return value


def _pure(block: BindingBlock) -> BindingBlock:
    """A loop body's block as a dataflow block (so fusion sees it) unless it holds control flow."""
    if isinstance(block, DataflowBlock) or any(isinstance(b.value, (If, Loop)) for b in block.bindings):
        return block
    return DataflowBlock(block.bindings)


def _always_true(cond) -> bool:
    """No condition, or a constant true one."""
    return cond is None or (isinstance(cond, Constant) and bool(cond.data.reshape(-1)[0]))


def _stacked(t: TensorType, length) -> TensorType:
    """A scan value's type stacked over the iterations on a new axis 0 (`length` None: unknown)."""
    if length is None or t.shape is None:
        return TensorType(None, t.dtype, ndim=(t.ndim or 0) + 1)
    return TensorType((length, *t.shape), t.dtype)
