"""Tensor programs: functions over buffers whose body is a statement.

A `TensorProgram` is destination-passing: parameters are input buffers,
then output buffers, then scratch buffers that the caller places in its
workspace; `size_params` are the symbolic sizes it is generic over (one
program serves every value of them). Its text is the printer's
(tir/printer.py), its meaning the numpy interpreter's (tir/interp.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..ir.shape import evaluate
from ..ir.types import TensorType, TupleType
from .interp import run_program
from .printer import print_program
from .stmt import Stmt

__all__ = ["TensorProgram"]


@dataclass(eq=False)
class TensorProgram:
    name: str
    inputs: tuple
    outputs: tuple
    body: Stmt
    size_params: tuple = ()
    scratch: tuple = ()
    attrs: dict = field(default_factory=dict)

    @property
    def params(self) -> tuple:
        return tuple(self.inputs) + tuple(self.outputs) + tuple(self.scratch)

    def __str__(self):
        return print_program(self)

    def interpret(self, args, out_type, size_values, env=None):
        """Run on numpy inputs (see tir/interp.py); outputs take the shapes of
        `out_type` (a graph type, evaluated under `env`) when it is given."""
        out = run_program(self, args, size_values)
        if out_type is None or env is None:
            return out
        types = out_type.fields if isinstance(out_type, TupleType) else (out_type,)
        arrays = out if isinstance(out, tuple) else (out,)
        shaped = tuple(a.reshape(tuple(evaluate(d, env) for d in t.shape))
                       if isinstance(t, TensorType) and t.shape is not None else a
                       for a, t in zip(arrays, types))
        return shaped if isinstance(out_type, TupleType) else shaped[0]
