"""The numpy interpreter: the executable meaning of a graph function.

`interpret(mod, *inputs)` runs `main` (or `func=`) on numpy inputs:

1. Binds size variables from the input shapes, checking rank, dtype, each
   dimension against the others and each variable against its bounds; a
   violation is an `InterpretError` naming the function, the input and the
   dimension.
2. Runs the bindings in order with each operator's numpy reference;
   symbolic attributes are evaluated under the current size variables.
3. Checks every `match_cast` (binding new size variables) and, by default,
   every binding's value against its variable's type, so a type rule that
   disagrees with its reference is caught where it happens.

4. A `loop` runs its body while the iteration is below the trip count and
   the condition holds, the carried values passed from one iteration to the
   next and the scan values stacked on a new axis 0.

A tensor result comes back as an ndarray, a tuple result as a tuple.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .errors import InterpretError, RelaxEdgeError
from .ir import bfloat16
from .ir.expr import (
    Call,
    CallExtern,
    CallTensor,
    Constant,
    Expr,
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
)
from .ir.shape import IntExpr, evaluate
from .ir.types import ObjectType, ShapeType, TensorType, TupleType, shape_str

__all__ = ["interpret"]


class _Env:
    """Size-variable values and where each was bound, for error messages."""

    def __init__(self):
        self.values: dict = {}
        self.source: dict = {}

    def eval(self, e: IntExpr) -> int:
        return evaluate(e, self.values)


def _check_bounds(var, value: int, what: str) -> None:
    if var.lower is not None and value < var.lower:
        raise InterpretError(f"{what}: {var.name} = {value} is below its lower bound {var.lower}")
    if var.upper is not None and value > var.upper:
        raise InterpretError(f"{what}: {var.name} = {value} exceeds its upper bound {var.upper}")


def _match_dims(dims, actual, env: _Env, what: str, kind: str) -> None:
    """Bind unbound variables from `actual`, then check every dim."""
    for i, (d, n) in enumerate(zip(dims, actual)):
        var = d.as_var()
        if var is not None and var not in env.values:
            _check_bounds(var, n, f"{what} {kind} {i}")
            env.values[var] = n
            env.source[var] = f"{what} {kind} {i}"
    for i, (d, n) in enumerate(zip(dims, actual)):
        try:
            expected = env.eval(d)
        except RelaxEdgeError as err:
            raise InterpretError(f"{what} {kind} {i}: {err}") from None
        if expected != n:
            var = d.as_var()
            if var is not None:
                why = f"equal {var.name} = {expected} (bound by {env.source.get(var, 'a parameter')})"
            elif d.is_const:
                why = f"be {expected}"
            else:
                why = f"equal {d} = {expected}"
            raise InterpretError(f"{what} {kind} {i} is {n}, but it must {why}")


def _match_value(value, t, env: _Env, what: str) -> None:
    """Check `value` against type `t`, binding size variables not yet bound."""
    if isinstance(t, ObjectType):
        return
    if isinstance(t, TensorType):
        if not isinstance(value, np.ndarray):
            raise InterpretError(f"{what}: expected a tensor, got {type(value).__name__}")
        if value.dtype.name != t.dtype and not (t.dtype == "bfloat16" and value.dtype == np.uint16):
            raise InterpretError(f"{what}: dtype {value.dtype.name}, expected {t.dtype}")
        if t.ndim is not None and value.ndim != t.ndim:
            expected = shape_str(t.shape) if t.shape is not None else f"rank {t.ndim}"
            raise InterpretError(f"{what}: rank {value.ndim} (shape {value.shape}), expected {expected}")
        if t.shape is not None:
            _match_dims(t.shape, value.shape, env, what, "dimension")
        return
    if isinstance(t, ShapeType):
        if not isinstance(value, tuple):
            raise InterpretError(f"{what}: expected a shape value, got {type(value).__name__}")
        if t.ndim is not None and len(value) != t.ndim:
            raise InterpretError(f"{what}: shape value of length {len(value)}, expected {t.ndim}")
        if t.values is not None:
            _match_dims(t.values, value, env, what, "shape entry")
        return
    if isinstance(t, TupleType):
        if not isinstance(value, tuple) or len(value) != len(t.fields):
            raise InterpretError(f"{what}: expected a tuple of {len(t.fields)} values")
        for i, (v, ft) in enumerate(zip(value, t.fields)):
            _match_value(v, ft, env, f"{what} field {i}")
        return
    raise InterpretError(f"{what}: cannot check a value of type {t}")


def _concrete(v, env: _Env):
    if isinstance(v, IntExpr):
        return env.eval(v)
    if isinstance(v, tuple):
        return tuple(_concrete(x, env) for x in v)
    return v


class _Interpreter:
    def __init__(self, mod: IRModule, check_types: bool):
        self.mod = mod
        self.check_types = check_types

    def call_function(self, func: Function, inputs) -> Any:
        names = ", ".join(p.name for p in func.params)
        if len(inputs) != len(func.params):
            raise InterpretError(f"function {func.name} takes {len(func.params)} inputs ({names}), "
                                 f"got {len(inputs)}")
        env = _Env()
        values: dict = {}
        for p, x in zip(func.params, inputs):
            if isinstance(p.type, TensorType) and not isinstance(x, np.ndarray):
                x = np.asarray(x)
            if bfloat16.is_bfloat16_type(p.type):
                x = bfloat16.bits(x)   # an ml_dtypes array as its bits
            _match_value(x, p.type, env, f"function {func.name}: input {p.name}")
            values[p] = x
        return self.run_seq(func, func.body, values, env)

    def run_seq(self, func: Function, seq: SeqExpr, values: dict, env: _Env):
        for block in seq.blocks:
            for b in block.bindings:
                what = f"function {func.name}: binding {b.var.name}"
                result = self.eval(func, b.value, values, env, what)
                if isinstance(b, MatchCast):
                    _match_value(result, b.type, env, f"{what} (match_cast)")
                elif self.check_types:
                    try:
                        _match_value(result, b.var.type, env, what)
                    except InterpretError as err:
                        raise InterpretError(f"{err} [the value disagrees with its inferred type "
                                             f"{b.var.type}]") from None
                values[b.var] = result
        return self.eval(func, seq.body, values, env, f"function {func.name}: result")

    def eval(self, func: Function, e, values: dict, env: _Env, what: str):
        if isinstance(e, Var):
            return values[e]
        if isinstance(e, Constant):
            return bfloat16.bits(e.data) if e.type.dtype == "bfloat16" else e.data
        if isinstance(e, ShapeExpr):
            return tuple(env.eval(v) for v in e.values)
        if isinstance(e, Tuple):
            return tuple(self.eval(func, f, values, env, what) for f in e.fields)
        if isinstance(e, TupleGetItem):
            return self.eval(func, e.tuple_value, values, env, what)[e.index]
        if isinstance(e, If):
            cond = self.eval(func, e.cond, values, env, what)
            branch = e.then_branch if bool(np.asarray(cond)) else e.else_branch
            return self.run_seq(func, branch, values, env)
        if isinstance(e, Loop):
            return self.run_loop(func, e, values, env, what)
        if isinstance(e, Call):
            args = [self.eval(func, a, values, env, what) for a in e.args]
            if isinstance(e.op, GlobalVar):
                return self.call_function(self.mod.functions[e.op.name], args)
            return self.call_op(e, args, env, what)
        if isinstance(e, CallTensor):
            program = self.mod.tensor_programs.get(e.program.name)
            run = getattr(program, "interpret", None)
            if run is None:
                raise InterpretError(f"{what}: tensor program @{e.program.name} cannot be interpreted")
            args = [self.eval(func, a, values, env, what) for a in e.args]
            return run(args, e.type, [env.eval(s) for s in e.size_args], env.values)
        if isinstance(e, CallExtern):
            decl = self.mod.externs.get(e.name)
            reference = getattr(decl, "reference", None)
            if reference is None:
                raise InterpretError(f"{what}: extern {e.name} has no numpy reference")
            params = {k: _concrete(v, env) for k, v in e.attrs.get("params", ())}
            with np.errstate(all="ignore"):
                return np.asarray(reference(*[self.eval(func, a, values, env, what) for a in e.args], **params))
        raise InterpretError(f"{what}: cannot interpret {type(e).__name__}")

    def run_loop(self, func: Function, e: Loop, values: dict, env: _Env, what: str):
        trip = e.trip_count
        if isinstance(trip, Expr):
            trip = int(np.asarray(self.eval(func, trip, values, env, what)).reshape(-1)[0])
        elif trip is not None:
            trip = env.eval(trip)
        go = True if e.cond is None else bool(np.asarray(self.eval(func, e.cond, values, env, what)))
        carried = [self.eval(func, x, values, env, what) for x in e.init]
        n = len(carried)
        scan_types = e.body.type.fields[1 + n:]
        scans: list = [[] for _ in scan_types]
        i = 0
        while go and (trip is None or i < trip):
            for p, x in zip(e.params, [np.array(i, np.int64), np.array(True), *carried]):
                values[p] = x
            out = self.run_seq(func, e.body, values, env)
            go, carried = bool(np.asarray(out[0])), list(out[1:1 + n])
            for acc, x in zip(scans, out[1 + n:]):
                acc.append(x)
            i += 1
        stacked = []
        for acc, t in zip(scans, scan_types):
            if acc:
                stacked.append(np.stack(acc))
            elif t.shape is None:
                raise InterpretError(f"{what}: the loop ran no iteration and its scan value's shape is unknown")
            else:
                stacked.append(np.zeros((0, *(env.eval(d) for d in t.shape)), t.dtype))
        return tuple(carried + stacked)

    def call_op(self, call: Call, args, env: _Env, what: str):
        attrs = {k: _concrete(v, env) for k, v in call.attrs.items()}
        where = f"{what} ({call.op.name}{', node ' + call.span if call.span else ''})"
        try:
            if bfloat16.involved(call):
                return bfloat16.call_in_float32(call, args, attrs)
            with np.errstate(all="ignore"):
                return np.asarray(call.op.reference(*args, **attrs))
        except RelaxEdgeError as err:
            raise InterpretError(f"{where}: {err}") from None
        except (ValueError, IndexError, ZeroDivisionError, TypeError) as err:
            shapes = ", ".join(str(getattr(a, "shape", a)) for a in args)
            raise InterpretError(f"{where}: {err} (argument shapes {shapes})") from None


def interpret(mod: IRModule, *inputs, func: str = "main", check_types: bool = True):
    """Run graph function `func` of `mod` on numpy inputs with numpy references."""
    if func not in mod.functions:
        raise InterpretError(f"the module has no graph function {func!r} "
                             f"(it has: {', '.join(mod.functions) or 'none'})")
    main = mod.functions[func]
    return _public(_Interpreter(mod, check_types).call_function(main, list(inputs)), main.ret_type)


def _public(value, t):
    """Results as handed back: bfloat16 bits as ml_dtypes arrays when ml_dtypes is loaded."""
    if bfloat16.is_bfloat16_type(t):
        return bfloat16.public(value)
    if isinstance(t, TupleType) and isinstance(value, tuple):
        return tuple(_public(v, ft) for v, ft in zip(value, t.fields))
    return value
