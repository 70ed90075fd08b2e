"""cse: common-subexpression elimination in graph functions.

1. A binding whose value repeats an earlier binding's value reuses that
   binding's variable: same operator, attributes, arguments and output type
   for operator calls; same program, arguments, size arguments and output
   type for `call_tensor`; same extern, attributes, arguments and output
   type for `call_extern`. Arguments are the same when they are the same
   variable, the same constant object, equal constants of at most
   `SMALL_CONSTANT` elements (same dtype, shape and bits), or equal shape
   values. Calls are pure, so the first result serves every repeat.
2. Scoping: an earlier binding is reused only while its variable is
   visible: a dataflow variable within its own block, anything bound in an
   `if` branch within that branch, and nothing across functions. A repeat
   whose variable outlives its block while the first one does not is kept
   as `repeat = first`, so uses after the block still see a live variable.
3. Uses of a removed repeat now refer to the first binding; later repeats
   that only became equal through that renaming are found in the same pass.

Does not merge calls of graph functions, `match_cast`s, tuples or branches,
does not reorder bindings, and does not remove bindings that become unused
(run dce after it).
"""

from __future__ import annotations

from ..ir.expr import (
    Call,
    CallExtern,
    CallTensor,
    Constant,
    DataflowVar,
    GlobalVar,
    IRModule,
    ShapeExpr,
    Tuple,
    Var,
    VarBinding,
)
from ..ir.visitor import ExprMutator
from ..op.registry import Op

__all__ = ["cse", "SMALL_CONSTANT"]

# constants of at most this many elements are compared by value
SMALL_CONSTANT = 64


def _arg_key(e):
    if isinstance(e, (Var, GlobalVar)):
        return e
    if isinstance(e, Constant):
        if e.data.size <= SMALL_CONSTANT:
            return ("constant", e.type.dtype, e.data.shape, e.data.tobytes())
        return e
    if isinstance(e, ShapeExpr):
        return ("shape", e.values)
    if isinstance(e, Tuple):
        fields = tuple(_arg_key(f) for f in e.fields)
        return None if any(f is None for f in fields) else ("tuple", fields)
    return None


def _value_key(value):
    """A hashable key equal for values that compute the same thing, or None."""
    if isinstance(value, Call) and isinstance(value.op, Op):
        head = ("op", value.op.name, tuple(sorted(value.attrs.items())))
    elif isinstance(value, CallTensor):
        head = ("tensor", value.program.name, value.size_args)
    elif isinstance(value, CallExtern):
        head = ("extern", value.name, tuple(sorted(value.attrs.items())))
    else:
        return None
    args = tuple(_arg_key(a) for a in value.args)
    if any(a is None for a in args):
        return None
    key = head + (args, value.type)
    try:
        hash(key)
    except TypeError:  # an attribute value that cannot be compared by hashing
        return None
    return key


class _Eliminator(ExprMutator):
    def __init__(self):
        super().__init__()
        self.seen: dict = {}

    def visit_SeqExpr(self, seq):
        outer = dict(self.seen)
        out = super().visit_SeqExpr(seq)
        self.seen = outer
        return out

    def visit_block(self, block):
        out = super().visit_block(block)
        self.seen = {k: v for k, v in self.seen.items() if not isinstance(v, DataflowVar)}
        return out

    def visit_binding(self, b):
        if not isinstance(b, VarBinding):
            return super().visit_binding(b)
        value = self.visit(b.value)
        key = _value_key(value)
        first = self.seen.get(key) if key is not None else None
        if first is None:
            if key is not None:
                self.seen[key] = b.var
            return [b] if value is b.value else [VarBinding(b.var, value)]
        if isinstance(b.var, DataflowVar) or not isinstance(first, DataflowVar):
            self.var_map[b.var] = first
            return []
        self.seen[key] = b.var
        return [VarBinding(b.var, first)]


def cse(mod: IRModule) -> IRModule:
    """The module with repeated pure calls bound once per scope."""
    return _Eliminator().visit_module(mod)
