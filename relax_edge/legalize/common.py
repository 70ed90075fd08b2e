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
