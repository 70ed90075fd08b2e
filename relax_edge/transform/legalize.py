"""legalize: every operator call becomes a call to a tensor program.

1. For each `Call` of an operator in a graph function, the operator's
   legalization (relax_edge/legalize) builds a tensor program whose size
   parameters are fresh copies of the call's size variables, so the program
   is generic in them: one kernel serves every `seq`.
2. The call becomes `call_tensor(@program, args, out_type, sizes)`, keeping
   its span; the program is added to the module.
3. An operator without a legalization is a compile error naming it (every
   such operator of the module, at once); those with data-dependent result
   sizes (nonzero, non_max_suppression, unique), the KV cache's and the
   quantized ones become `call_extern`s of library kernels instead
   (relax_edge/library: EXTERN_LIBRARIES).

Does not fuse, schedule or deduplicate programs; calls of graph functions,
externs and existing tensor programs are left as they are.
"""

from __future__ import annotations

import collections

from ..errors import RelaxEdgeError
from ..ir.expr import Call, CallTensor, GlobalVar, IRModule
from ..ir.shape import IntExpr, SizeVar, as_expr, free_vars, substitute
from ..ir.types import TensorType, type_free_vars
from ..ir.visitor import ExprMutator, ExprVisitor
from ..legalize import LegalizeContext
from ..legalize.elementwise import BINARY
from ..library import extern_lowerings, lowering_for
from ..op.registry import Op
from ..tir.compute import lower, placeholder

__all__ = ["legalize", "LegalizeError", "NUMPY_BROADCASTING"]

# operators whose arguments broadcast against each other by numpy's rules
NUMPY_BROADCASTING = frozenset(BINARY) | {"where", "matmul"}


class LegalizeError(RelaxEdgeError):
    """An operator cannot be lowered to a tensor program."""


def _attr_vars(v) -> set:
    if isinstance(v, IntExpr):
        return set(free_vars(v))
    if isinstance(v, tuple):
        out = set()
        for x in v:
            out |= _attr_vars(x)
        return out
    return set()


def _rename_attr(v, mapping):
    if isinstance(v, IntExpr):
        return substitute(v, mapping)
    if isinstance(v, tuple):
        return tuple(_rename_attr(x, mapping) for x in v)
    return v


class _Missing(ExprVisitor):
    def __init__(self, externs):
        self.missing = collections.Counter()
        self.externs = externs

    def visit_Call(self, call):
        if isinstance(call.op, Op) and call.op.legalize is None and call.op.name not in self.externs:
            self.missing[call.op.name] += 1
        super().visit_Call(call)

    def visit_binding(self, b):
        self.visit(b.value)


class NameSupply:
    """Names unused in a module: `base`, then `base_1`, `base_2`, ..."""

    def __init__(self, mod: IRModule):
        self.taken = set(mod.names())
        self.counts = collections.Counter()

    def __call__(self, base: str) -> str:
        while True:
            name = f"{base}_{self.counts[base]}" if self.counts[base] else base
            self.counts[base] += 1
            if name not in self.taken:
                self.taken.add(name)
                return name


class _Legalizer(ExprMutator):
    def __init__(self, mod: IRModule):
        super().__init__()
        self.programs = dict(mod.tensor_programs)
        self.fresh_name = NameSupply(mod)
        self.externs = dict(mod.externs)
        self.libraries = extern_lowerings()

    def rewrite_call(self, call: Call):
        if not isinstance(call.op, Op):
            return call
        library = self.libraries.get(call.op.name)
        lowered = library.lower_call(call) if library is not None else None
        if lowered is not None:   # a library kernel (library.EXTERN_LIBRARIES); None: the tensor program
            ext, self.externs[ext.name] = lowered
            return ext
        arg_types = [a.type for a in call.args]
        if not isinstance(call.type, TensorType) or not all(isinstance(t, TensorType) for t in arg_types):
            raise LegalizeError(f"{call.op.name}: only tensor arguments and results can be legalized")
        outer = set(type_free_vars(call.type))
        for t in arg_types:
            outer |= type_free_vars(t)
        for v in call.attrs.values():
            outer |= _attr_vars(v)
        outer = sorted(outer, key=lambda v: (v.name, id(v)))
        inner = [SizeVar(v.name, upper=v.upper, lower=v.lower) for v in outer]
        mapping = dict(zip(outer, (as_expr(v) for v in inner)))
        inputs = [placeholder([substitute(d, mapping) for d in t.shape], t.dtype, f"x{i}")
                  for i, t in enumerate(arg_types)]
        ctx = LegalizeContext(call.op.name, inputs, {k: _rename_attr(v, mapping) for k, v in call.attrs.items()},
                              tuple(substitute(d, mapping) for d in call.type.shape), call.type.dtype)
        try:
            outs = call.op.legalize(ctx)
        except RelaxEdgeError as err:
            where = f" (node {call.span})" if call.span else ""
            raise LegalizeError(f"{call.op.name}{where}: {err}") from None
        outs = outs if isinstance(outs, list) else [outs]
        name = self.fresh_name(call.op.name)
        program = lower(name, inputs, outs, size_params=tuple(inner))
        program.attrs["op"] = call.op.name
        if call.op.name in NUMPY_BROADCASTING:  # the host checks what the prover could not
            program.attrs["broadcast_skip"] = 2 if call.op.name == "matmul" else 0
        self.programs[name] = program
        return CallTensor(GlobalVar(name), call.args, call.type, size_args=tuple(as_expr(v) for v in outer),
                          span=call.span)


def legalize(mod: IRModule, target=None) -> IRModule:
    """The module with every operator call replaced by a tensor-program call. `target` (the board's), when
    known, lets a library lowering size its kernel's scratch for the paths that target compiles."""
    from .. import legalize as _families  # noqa: F401  (registers the legalizations)
    missing = _Missing(extern_lowerings())
    for f in mod.functions.values():
        missing.visit(f)
    if missing.missing:
        listed = ", ".join(f"{op} ({n} call{'s' * (n > 1)})" for op, n in sorted(missing.missing.items()))
        raise LegalizeError(f"no legalization for: {listed}")
    mutator = _Legalizer(mod)
    with lowering_for(target):
        functions = {name: mutator.visit_Function(f) for name, f in mod.functions.items()}
    return IRModule(functions, mutator.programs, mutator.externs)
