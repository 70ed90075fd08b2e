"""Verifier: checks that a module is well formed.

1. Every variable is defined (as a parameter or by a binding) before it is
   used, and defined once.
2. A DataflowVar is defined only inside a dataflow block and used only
   inside the block that defines it; a function never returns one.
3. Every size variable that occurs in a parameter or a binding's type is
   bound: by a parameter dimension that is exactly that variable, or by an
   earlier match_cast.
4. Types are consistent: a binding's variable has the type of its value; a
   call's recorded type is what its operator's rule infers now; calls name
   functions, tensor programs and externs that the module has, with the
   right number of arguments; an `if` condition is a boolean scalar tensor;
   no `if` or `loop` inside a dataflow block; the body matches the declared
   return type.
5. A `loop`: its trip count is an int64 scalar tensor, a symbolic integer
   or absent; its condition a boolean scalar tensor or absent; its
   parameters are the iteration number (int64 scalar), the condition (bool
   scalar) and one per carried value of that value's type, defined only
   inside the body; the body gives (condition, carried values of their
   parameters' types, scan values), and the loop's type is the carried
   types then each scan value's type with a new leading axis (the trip
   count, or unknown).

All problems found are reported together in one `VerifyError`, each naming
the function and the variable. The verifier does not check what only run
time can decide (a dimension that may or may not match).
"""

from __future__ import annotations

from ..errors import RelaxEdgeError, TypeInferenceError, VerifyError
from .expr import (
    BindingBlock,
    Call,
    CallExtern,
    CallTensor,
    Constant,
    DataflowBlock,
    DataflowVar,
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
from .shape import IntExpr
from .types import TensorType, TupleType, type_conflict, type_free_vars

__all__ = ["verify", "well_formed"]


class _FunctionChecker:
    def __init__(self, mod: IRModule, func: Function):
        self.mod = mod
        self.func = func
        self.errors: list[str] = []
        self.defined: set = set()
        self.scope: set = set()
        self.size_vars: set = set()

    def error(self, msg: str) -> None:
        self.errors.append(f"function {self.func.name}: {msg}")

    # definitions -----------------------------------------------------
    def define(self, var: Var, where: str) -> None:
        if var in self.defined:
            self.error(f"variable {var.name} is defined twice ({where})")
        self.defined.add(var)
        self.scope.add(var)

    def check_bound(self, t, what: str) -> None:
        for sv in sorted(type_free_vars(t) - self.size_vars, key=lambda v: v.name):
            self.error(f"size variable {sv.name} in the type of {what} is not bound "
                       "by a parameter or an earlier match_cast")

    def run(self) -> list[str]:
        for p in self.func.params:
            if isinstance(p, DataflowVar):
                self.error(f"parameter {p.name} is a dataflow variable")
            self.define(p, "parameter")
            self.size_vars |= _binding_dims(p.type)
        for p in self.func.params:
            self.check_bound(p.type, f"parameter {p.name}")
        self.check_seq(self.func.body, in_dataflow=False)
        result = self.func.body.body
        if isinstance(result, DataflowVar):
            self.error(f"returns dataflow variable {result.name}, which does not live past its block")
        why = type_conflict(self.func.ret_type, self.func.body.type)
        if why:
            self.error(f"return type {self.func.ret_type} disagrees with the body: {why}")
        return self.errors

    # structure -------------------------------------------------------
    def check_seq(self, seq: SeqExpr, in_dataflow: bool) -> None:
        outer_scope = set(self.scope)
        for block in seq.blocks:
            self.check_block(block)
        self.check_use(seq.body, "the result")
        self.scope = outer_scope

    def check_block(self, block: BindingBlock) -> None:
        is_df = isinstance(block, DataflowBlock)
        local = []
        for b in block.bindings:
            what = f"binding {b.var.name}"
            if isinstance(b.value, (If, Loop)) and is_df:
                self.error(f"{what}: an {'if' if isinstance(b.value, If) else 'loop'} inside a dataflow block")
            self.check_value(b.value, what, is_df)
            if isinstance(b.var, DataflowVar) and not is_df:
                self.error(f"dataflow variable {b.var.name} is defined outside a dataflow block")
            if isinstance(b, MatchCast):
                why = type_conflict(b.type, b.var.type)
                if why:
                    self.error(f"{what}: variable type {b.var.type} is not the match_cast type {b.type}")
                why = type_conflict(b.type, b.value.type)
                if why:
                    self.error(f"{what}: match_cast to {b.type} can never succeed on a value of "
                               f"type {b.value.type} ({why})")
                self.size_vars |= _binding_dims(b.type)
            else:
                why = type_conflict(b.var.type, b.value.type)
                if why:
                    self.error(f"{what}: declared {b.var.type} but the value is {b.value.type} ({why})")
            self.check_bound(b.var.type, f"variable {b.var.name}")
            self.define(b.var, what)
            if isinstance(b.var, DataflowVar):
                local.append(b.var)
        for v in local:  # dataflow vars die with their block
            self.scope.discard(v)

    def check_use(self, e, what: str) -> None:
        if isinstance(e, Var):
            if e not in self.scope:
                if isinstance(e, DataflowVar) and e in self.defined:
                    self.error(f"{what} uses dataflow variable {e.name} outside its dataflow block")
                else:
                    self.error(f"{what} uses variable {e.name} before it is defined")
        elif isinstance(e, Tuple):
            for f in e.fields:
                self.check_use(f, what)
        elif isinstance(e, (Constant, ShapeExpr, GlobalVar)):
            pass
        else:
            self.check_value(e, what, False)

    def check_value(self, e, what: str, in_dataflow: bool) -> None:
        if isinstance(e, (Var, Tuple, Constant, ShapeExpr, GlobalVar)):
            self.check_use(e, what)
        elif isinstance(e, TupleGetItem):
            self.check_use(e.tuple_value, what)
        elif isinstance(e, Call):
            for a in e.args:
                self.check_use(a, what)
            self.check_call(e, what)
        elif isinstance(e, CallTensor):
            for a in e.args:
                self.check_use(a, what)
            if e.program.name not in self.mod.tensor_programs:
                self.error(f"{what} calls tensor program {e.program.name}, which the module does not have")
        elif isinstance(e, CallExtern):
            for a in e.args:
                self.check_use(a, what)
            decl = self.mod.externs.get(e.name)
            if decl is None:
                self.error(f"{what} calls extern {e.name}, which the module does not declare")
            elif len(decl.param_types) != len(e.args):
                self.error(f"{what} calls extern {e.name} with {len(e.args)} arguments, "
                           f"declared with {len(decl.param_types)}")
        elif isinstance(e, If):
            self.check_use(e.cond, what)
            c = e.cond.type
            if not (isinstance(c, TensorType) and c.ndim == 0 and c.dtype == "bool"):
                self.error(f"{what}: if condition must be a boolean scalar tensor, got {c}")
            saved = set(self.scope)
            for branch in (e.then_branch, e.else_branch):
                self.check_seq(branch, in_dataflow)
                self.scope = set(saved)
        elif isinstance(e, Loop):
            self.check_loop(e, what)
        elif isinstance(e, SeqExpr):
            self.check_seq(e, in_dataflow)
        else:
            self.error(f"{what}: unexpected expression {type(e).__name__}")

    def check_loop(self, e: Loop, what: str) -> None:
        for x in e.operands():
            self.check_use(x, what)
        trip = e.trip_count
        if isinstance(trip, IntExpr):
            self.check_bound(TensorType([trip], "int64"), f"{what} (its trip count)")
        elif trip is not None and not _is_scalar(trip.type, "int64"):
            self.error(f"{what}: loop trip count must be an int64 scalar tensor, got {trip.type}")
        if e.cond is not None and not _is_scalar(e.cond.type, "bool"):
            self.error(f"{what}: loop condition must be a boolean scalar tensor, got {e.cond.type}")
        n = e.num_carried
        if len(e.params) != 2 + n:
            self.error(f"{what}: loop body takes {len(e.params)} parameters, it must take 2 + {n}")
            return
        if not _is_scalar(e.params[0].type, "int64") or not _is_scalar(e.params[1].type, "bool"):
            self.error(f"{what}: loop body parameters 0 and 1 must be an int64 and a bool scalar tensor")
        for k, (p, x) in enumerate(zip(e.params[2:], e.init)):
            why = type_conflict(p.type, x.type)
            if why:
                self.error(f"{what}: loop carried value {k}: parameter {p.type}, initial value {x.type} ({why})")
        saved = set(self.scope)
        for p in e.params:
            self.define(p, f"{what} (loop parameter)")
        self.check_seq(e.body, False)
        self.scope = saved
        self.check_loop_types(e, what)

    def check_loop_types(self, e: Loop, what: str) -> None:
        result, n = e.body.type, e.num_carried
        if not isinstance(result, TupleType) or len(result.fields) < 1 + n:
            self.error(f"{what}: loop body must give a tuple (condition, {n} carried values, scans), got {result}")
            return
        if not _is_scalar(result.fields[0], "bool"):
            self.error(f"{what}: loop body's condition must be a boolean scalar tensor, got {result.fields[0]}")
        for k, (p, t) in enumerate(zip(e.params[2:], result.fields[1:1 + n])):
            why = type_conflict(p.type, t)
            if why:
                self.error(f"{what}: loop carried value {k} changes type: {p.type} in, {t} out ({why})")
        scans = result.fields[1 + n:]
        if not isinstance(e.type, TupleType) or len(e.type.fields) != n + len(scans):
            self.error(f"{what}: loop type {e.type} must list {n} carried and {len(scans)} scan values")
            return
        for k, (t, final) in enumerate(zip(result.fields[1:1 + n], e.type.fields)):
            why = type_conflict(final, t)
            if why:
                self.error(f"{what}: loop carried value {k}: type {final}, the body gives {t} ({why})")
        for k, (t, stacked) in enumerate(zip(scans, e.type.fields[n:])):
            ok = isinstance(t, TensorType) and isinstance(stacked, TensorType) and t.dtype == stacked.dtype \
                and t.shape is not None and stacked.ndim == len(t.shape) + 1
            if ok and stacked.shape is not None:
                ok = not type_conflict(TensorType(stacked.shape[1:], t.dtype), t)
            if not ok:
                self.error(f"{what}: loop scan value {k}: the body gives {t}, the loop stacks it as {stacked}")

    def check_call(self, call: Call, what: str) -> None:
        if isinstance(call.op, GlobalVar):
            callee = self.mod.functions.get(call.op.name)
            if callee is None:
                self.error(f"{what} calls function {call.op.name}, which the module does not have")
            elif len(callee.params) != len(call.args):
                self.error(f"{what} calls {call.op.name} with {len(call.args)} arguments, "
                           f"it takes {len(callee.params)}")
            return
        from ..op.registry import Op, infer_type
        if not isinstance(call.op, Op):
            self.error(f"{what}: call target {call.op!r} is not an operator or a function")
            return
        try:
            inferred = infer_type(call.op, [a.type for a in call.args], dict(call.attrs), call.span)
        except (TypeInferenceError, RelaxEdgeError) as err:
            self.error(f"{what}: {err}")
            return
        why = type_conflict(call.type, inferred)
        if why:
            self.error(f"{what}: {call.op.name} recorded type {call.type} but its rule gives {inferred} ({why})")


def _is_scalar(t, dtype: str) -> bool:
    return isinstance(t, TensorType) and t.ndim == 0 and t.dtype == dtype


def _binding_dims(t) -> set:
    """Size variables that a value of type `t` binds: dims that are exactly a variable."""
    out = set()
    if isinstance(t, TensorType) and t.shape is not None:
        out = {d.as_var() for d in t.shape if d.as_var() is not None}
    elif hasattr(t, "values") and t.values is not None:
        out = {d.as_var() for d in t.values if d.as_var() is not None}
    elif hasattr(t, "fields"):
        for f in t.fields:
            out |= _binding_dims(f)
    return out


def well_formed(mod: IRModule) -> list[str]:
    """Every problem found in `mod`, as messages (empty when well formed)."""
    errors = []
    for func in mod.functions.values():
        errors.extend(_FunctionChecker(mod, func).run())
    return errors


def verify(mod: IRModule) -> IRModule:
    """Raise VerifyError listing every problem; return the module when well formed."""
    errors = well_formed(mod)
    if errors:
        raise VerifyError("ill-formed module:\n  " + "\n  ".join(errors))
    return mod
