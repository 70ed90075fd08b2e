"""dedupe: one tensor program for every set of identical ones.

1. Two tensor programs are identical when they differ at most in their
   names: the same parameters (buffers' names, dtypes, shapes and strides),
   size parameters (names and bounds), body and attributes, variables
   compared by where they first appear (`structural_key`). A decoder's
   layers legalize and fuse into the same programs, once per layer; after
   this pass the module keeps one of each (the first in the module's order)
   and every `call_tensor` of a repeat calls the kept one with its own
   arguments and size arguments, so the code is generated and compiled once.
2. What the key does not know (a value of an unknown kind in an attribute)
   compares by identity, so programs are merged only when they are provably
   the same text.

Does not merge programs that compute the same thing in other words (other
names, loop order or algebra), graph functions or externs; call sites keep
their spans, so profiles still name each source node.
"""

from __future__ import annotations

import dataclasses
import enum

from ..ir.expr import CallTensor, GlobalVar, IRModule
from ..ir.shape import IntExpr, SizeVar
from ..ir.visitor import ExprMutator
from ..tir.expr import ScalarVar
from ..tir.stmt import Buffer

__all__ = ["dedupe", "structural_key"]

_FIELDS: dict = {}   # dataclass type -> its field names


class _Key:
    """The structural key of one program: variables and buffers numbered by first appearance."""

    def __init__(self):
        self.numbers: dict = {}   # id(variable or buffer) -> its number
        self.keep: list = []      # what `numbers` names, alive while the key is built

    def first(self, x) -> int | None:
        """x's number when seen before, else None (x is numbered now)."""
        n = self.numbers.get(id(x))
        if n is None:
            self.numbers[id(x)] = len(self.numbers)
            self.keep.append(x)
        return n

    def of(self, x):
        t = type(x)
        if t is str or t is int or x is None:
            return x
        if t is float:
            return ("float", repr(x))     # -0.0 and 0.0 differ; 1.0 is not 1
        if t is bool:
            return ("bool", x)
        if t is tuple or t is list:
            return (t.__name__, *map(self.of, x))
        if t is IntExpr:
            return ("int", *(((*((self.atom(a), p) for a, p in mono),), k) for mono, k in x.terms))
        if t is SizeVar:
            n = self.first(x)
            return ("size", n) if n is not None else ("size", len(self.numbers) - 1, x.name, x.lower, x.upper)
        if t is Buffer:
            n = self.first(x)
            return ("buffer", n) if n is not None else \
                ("buffer", len(self.numbers) - 1, x.name, x.dtype, self.of(x.shape), self.of(x.strides))
        if t is ScalarVar:
            n = self.first(x)
            return ("scalar", n) if n is not None else ("scalar", len(self.numbers) - 1, x.name, x.dtype)
        if t is dict:
            return ("dict", *sorted((k, self.of(v)) for k, v in x.items()))
        if isinstance(x, enum.Enum):
            return (t.__name__, self.of(x.value))
        if dataclasses.is_dataclass(x):
            names = _FIELDS.get(t)
            if names is None:
                names = _FIELDS[t] = tuple(f.name for f in dataclasses.fields(x))
            return (t.__name__, *(self.of(getattr(x, n)) for n in names))
        self.keep.append(x)
        return ("object", id(x))     # unknown: equal to itself only

    def atom(self, a):
        if type(a) is SizeVar:
            return self.of(a)
        return (type(a).__name__, *map(self.of, a.args))   # floordiv, floormod, min, max


def structural_key(program):
    """A hashable value equal for tensor programs that differ at most in their names. The programs
    keyed by one call are kept alive by the returned key's holder: compare keys while the programs live."""
    key = _Key()
    value = (key.of(program.size_params), key.of(program.inputs), key.of(program.outputs),
             key.of(program.scratch), key.of(program.body), key.of(program.attrs))
    return value, key.keep


class _Renamer(ExprMutator):
    def __init__(self, kept: dict):
        super().__init__()
        self.kept = kept

    def visit_CallTensor(self, c: CallTensor):
        c = super().visit_CallTensor(c)
        name = self.kept.get(c.program.name)
        return c if name is None else CallTensor(GlobalVar(name), c.args, c.type, c.size_args, c.span)


def dedupe(mod: IRModule) -> IRModule:
    """The module with each set of identical tensor programs replaced by its first."""
    first, kept, alive = {}, {}, []
    for name, program in mod.tensor_programs.items():
        value, keep = structural_key(program)
        alive.append(keep)
        if value in first:
            kept[name] = first[value]
        else:
            first[value] = name
    if not kept:
        return mod
    functions = {name: _Renamer(kept).visit_Function(f) for name, f in mod.functions.items()}
    programs = {name: p for name, p in mod.tensor_programs.items() if name not in kept}
    return IRModule(functions, programs, mod.externs)
