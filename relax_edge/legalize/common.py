"""What a legalization sees, and helpers shared by the operator families.

A legalization is `fn(ctx) -> Tensor | list[Tensor]`, registered for one or
more operators with `@legalization("add", ...)`; it builds its outputs with
the compute language (relax_edge.tir.compute) from `ctx.inputs`, which are
placeholders whose shapes use the program's own size variables, so one
program serves every value of them.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import RelaxEdgeError
from ..ir.shape import Proof, as_expr, prove_equal
from ..op.registry import OPS
from ..tir.compute import Tensor
from ..tir.expr import index


def legalization(*op_names):
    def register(fn):
        for name in op_names:
            if name not in OPS:
                raise ValueError(f"legalization for unknown operator {name}")
            OPS[name].legalize = fn
        return fn
    return register


@dataclass
class LegalizeContext:
    op_name: str
    inputs: list          # Tensor placeholders
    attrs: dict           # symbolic values in the program's size variables
    out_shape: tuple
    out_dtype: str

    def error(self, msg: str) -> RelaxEdgeError:
        return RelaxEdgeError(f"legalizing {self.op_name}: {msg}")


def broadcast_indices(in_shape, out_shape, idx):
    """Indices into an input of `in_shape` broadcast (numpy rules) to
    `out_shape`, for output indices `idx`."""
    offset = len(out_shape) - len(in_shape)
    out = []
    for d, dim in enumerate(in_shape):
        i, out_dim = idx[d + offset], out_shape[d + offset]
        if dim == 1:
            out.append(index(0))
        elif prove_equal(dim, out_dim) is Proof.YES:
            out.append(i)
        else:  # may be 1 or equal at run time: i % dim covers both
            out.append(index(as_expr(i) % dim))
    return tuple(out)


def load_broadcast(t: Tensor, out_shape, idx):
    return t[broadcast_indices(t.shape, out_shape, idx)]


def broadcast_checks(arg_types, out_type, skip_trailing: int = 0):
    """Dims that broadcasting cannot settle at compile time: a list of
    (argument index, argument dim, output dim, argument dim expr, output dim
    expr) to check at run time (equal, or the argument dim is 1)."""
    out_shape = out_type.shape
    out_rank = len(out_shape) - skip_trailing
    checks = []
    for a, t in enumerate(arg_types):
        shape = t.shape[:len(t.shape) - skip_trailing] if skip_trailing else t.shape
        offset = out_rank - len(shape)
        for d, dim in enumerate(shape):
            if d + offset < 0:
                continue
            out_dim = out_shape[d + offset]
            if dim == 1 or prove_equal(dim, out_dim) is Proof.YES:
                continue
            checks.append((a, d, d + offset, dim, out_dim))
    return checks
