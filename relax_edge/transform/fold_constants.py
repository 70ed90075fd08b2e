"""fold_constants: compute at compile time what depends only on constants.

1. An operator call whose arguments are all constants and whose type is a
   tensor of static shape is run once by the interpreter (the operator's
   numpy reference, its result checked against the call's type) and
   replaced by that constant: uses of its variable now read the constant
   and the binding goes. Bindings are visited in order, so chains of
   constants fold in one pass (weight transposes, reshapes, casts, batch
   norm scales times conv weights, shape arithmetic made tensors).
2. Size limit: a folded constant that is still used and is larger than
   `max_bytes` is kept only if the constants it was computed from, used by
   nothing else any more, are at least as large (a transposed weight
   replaces the weight). Constants used only to fold further constants
   cost nothing. A call refused this way stays a call, and its own
   arguments are then judged the same way, until nothing changes.
3. Exact algebraic identities, where the result has exactly the type of
   `x` (so no broadcast is lost): `x * 1`, `1 * x`, `x + 0`, `0 + x`
   (with every element of the constant 1 or 0; `-0.0 + 0` gives `+0.0`),
   `reshape(x)` to its own shape, and `transpose(transpose(x))` whose axes
   compose to the identity, all become `x`. A variable that outlives its
   dataflow block and would become a dataflow variable is bound to it
   instead (`gv = lv`).
4. Strength reduction (not bit-exact, within an ulp or two): `x ** 2` and
   `x ** 3` by a constant exponent become products, `x ** 0.5` a sqrt
   (GELU's tanh form computes `x ** 3` per element).

A result that folds to a constant is bound to a variable again in a last
binding block, so the function still returns variables.

Does not fold calls of tensor programs, externs or graph functions, calls
with symbolic attributes or results of unknown or symbolic shape, or `if`
on a constant condition; a call whose reference fails on its constants is
left for run time to report, and one whose result would take more than
`EVAL_MAX_BYTES` is not even evaluated (compile-time memory stays bounded). Bindings that become unused stay (run dce).
"""

from __future__ import annotations

import collections

import numpy as np

from ..errors import RelaxEdgeError
from ..interp import interpret
from ..ir.expr import BindingBlock, Call, Constant, DataflowVar, Function, IRModule, SeqExpr, Tuple, Var, VarBinding
from ..ir.types import TensorType
from ..ir.visitor import ExprMutator, ExprVisitor
from ..op.registry import Op, make_call

__all__ = ["fold_constants", "DEFAULT_MAX_BYTES"]

DEFAULT_MAX_BYTES = 1 << 16
# no call whose result is larger is evaluated at compile time
EVAL_MAX_BYTES = 1 << 30


def _static(t) -> bool:
    return isinstance(t, TensorType) and t.shape is not None and all(d.is_const for d in t.shape)


def _evaluate(call: Call) -> Constant | None:
    """The call run by the interpreter, or None where it cannot run on
    constants or its result would be larger than EVAL_MAX_BYTES."""
    if call.type.dtype == "bfloat16":   # the interpreter holds it as uint16 bits: left to run time
        return None
    count = 1
    for d in call.type.shape:
        count *= d.value
    if count * np.dtype(call.type.dtype).itemsize > EVAL_MAX_BYTES:
        return None
    out = Var("folded", call.type)
    func = Function([], SeqExpr([BindingBlock([VarBinding(out, call)])], out), call.type)
    try:
        return Constant(interpret(IRModule({"main": func})))
    except RelaxEdgeError:
        return None


def _axes(call: Call) -> list:
    n = call.type.ndim
    axes = call.attrs["axes"]
    return list(reversed(range(n))) if axes is None else [a % n for a in axes]


def _identity(call: Call, producers: dict):
    """The argument that `call` provably returns unchanged, or None."""
    name, args = call.op.name, call.args
    if not all(isinstance(a.type, TensorType) and a.type.shape is not None for a in args):
        return None
    if name in ("multiply", "add"):
        unit = 1 if name == "multiply" else 0
        for x, c in (args, args[::-1]):
            if isinstance(c, Constant) and x.type == call.type and np.all(c.data == unit):
                return x
    elif name == "reshape" and args[0].type == call.type:
        return args[0]
    elif name == "transpose":
        inner = producers.get(args[0])
        if isinstance(inner, Call) and inner.op is call.op:
            outer_axes, inner_axes = _axes(call), _axes(inner)
            if all(inner_axes[a] == i for i, a in enumerate(outer_axes)):
                return inner.args[0]
    return None


def _strength_reduce(var, call: Call):
    """`x ** 2` and `x ** 3` as products, `x ** 0.5` as sqrt (the exponent a
    constant of equal elements that broadcasts nothing), as bindings, or None."""
    if call.op.name != "power" or not isinstance(call.args[1], Constant):
        return None
    x, e = call.args
    if x.type != call.type or call.type.dtype not in ("float32", "float64") or e.data.size == 0:
        return None
    exponent = float(e.data.reshape(-1)[0])
    if not np.all(e.data == exponent) or exponent not in (0.5, 2.0, 3.0):
        return None
    if exponent == 0.5:
        return [VarBinding(var, make_call("sqrt", [x], span=call.span))]
    square = make_call("multiply", [x, x], span=call.span)
    if exponent == 2.0:
        return [VarBinding(var, square)]
    sq = type(var)(f"{var.name}_sq", square.type)
    return [VarBinding(sq, square), VarBinding(var, make_call("multiply", [sq, x], span=call.span))]


class _Folder(ExprMutator):
    """One folding walk; `refused` variables stay calls. `made` records, for
    each constant it creates, the variable it replaced and its arguments."""

    def __init__(self, refused: set, cache: dict, made: dict):
        super().__init__()
        self.refused, self.cache, self.made = refused, cache, made
        self.producers: dict = {}

    def visit_binding(self, b):
        if not (isinstance(b, VarBinding) and isinstance(b.value, Call) and isinstance(b.value.op, Op)):
            return super().visit_binding(b)
        call = self.visit(b.value)
        folded = None
        if b.var not in self.refused and _static(call.type) and all(isinstance(a, Constant) for a in call.args):
            if b.var not in self.cache:
                self.cache[b.var] = _evaluate(call)
            folded = self.cache[b.var]
            if folded is not None:
                self.made[folded] = (b.var, call.args)
        replacement = folded if folded is not None else _identity(call, self.producers)
        if replacement is None:
            cheaper = _strength_reduce(b.var, call)
            if cheaper is not None:
                return cheaper
            self.producers[b.var] = call
            return [b] if call is b.value else [VarBinding(b.var, call)]
        if isinstance(replacement, DataflowVar) and not isinstance(b.var, DataflowVar):
            return [VarBinding(b.var, replacement)]
        self.var_map[b.var] = replacement
        return []


class _Constants(ExprVisitor):
    def __init__(self):
        self.found: set = set()

    def visit_Constant(self, c):
        self.found.add(c)


def _oversized(func: Function, made: dict, max_bytes: int) -> set:
    """Variables whose folded constant in `func` is too large for what it frees."""
    used = _Constants()
    used.visit(func)
    memo: dict = {}

    def sources(c) -> set:
        if c not in memo:
            memo[c] = set().union(*(sources(a) for a in made[c][1])) if c in made else {c}
        return memo[c]

    big = {c: sources(c) - used.found for c in used.found if c in made and c.data.nbytes > max_bytes}
    shared = collections.Counter(s for freed in big.values() for s in freed)
    return {made[c][0] for c, freed in big.items()
            if c.data.nbytes > sum(s.data.nbytes for s in freed if shared[s] == 1)}


def _bound_fields(fields, taken: set) -> tuple:
    """(bindings of the constants among `fields` to fresh variables, the fields with those variables)."""
    bindings, out = [], []
    for i, f in enumerate(fields):
        if isinstance(f, Constant):
            name = next(n for n in (f"folded_output{i}_{k}" for k in range(len(taken) + 1)) if n not in taken)
            taken.add(name)
            bindings.append(VarBinding(Var(name, f.type), f))
            f = bindings[-1].var
        out.append(f)
    return bindings, out


def _bind_constant_outputs(func: Function) -> Function:
    """A function result folded to a constant is bound to a variable again
    (the host code returns variables), also inside the result's tuple."""
    taken = {p.name for p in func.params} | {b.var.name for blk in func.body.blocks for b in blk.bindings}
    result, blocks = func.body.body, list(func.body.blocks)
    if isinstance(result, Var):
        for k, blk in enumerate(blocks):
            for j, b in enumerate(blk.bindings):
                if b.var is result and isinstance(b.value, Tuple) and any(isinstance(f, Constant)
                                                                         for f in b.value.fields):
                    bindings, fields = _bound_fields(b.value.fields, taken)
                    new = [*blk.bindings[:j], *bindings, VarBinding(b.var, Tuple(fields)), *blk.bindings[j + 1:]]
                    blocks[k] = type(blk)(new)
    fields = result.fields if isinstance(result, Tuple) else (result,)
    bindings, fields = _bound_fields(fields, taken)
    if bindings:
        blocks.append(BindingBlock(bindings))
        result = Tuple(fields) if isinstance(result, Tuple) else fields[0]
    if blocks == list(func.body.blocks) and not bindings:
        return func
    return Function(func.params, SeqExpr(blocks, result), func.ret_type, func.name, func.attrs)


def _fold_function(func: Function, max_bytes: int) -> Function:
    refused, cache = set(), {}
    while True:
        made = {}
        out = _Folder(refused, cache, made).visit_Function(func)
        too_big = _oversized(out, made, max_bytes) - refused
        if not too_big:
            return _bind_constant_outputs(out)
        refused |= too_big


def fold_constants(mod: IRModule, max_bytes: int = DEFAULT_MAX_BYTES) -> IRModule:
    """The module with constant operator calls computed and exact identities removed."""
    functions = {name: _fold_function(f, max_bytes) for name, f in mod.functions.items()}
    return IRModule(functions, mod.tensor_programs, mod.externs)
