"""Legalization of bitcast: one elementwise kernel whose value is the
tensor-program `Reinterpret` of each loaded element (a union in C, `bitcast`
in LLVM)."""

from __future__ import annotations

from ..tir.compute import compute
from ..tir.expr import reinterpret
from .common import legalization


@legalization("bitcast")
def legalize_bitcast(ctx):
    (x,) = ctx.inputs
    to = ctx.attrs["to"]
    return compute(ctx.out_shape, lambda *i: reinterpret(x[i], to), "bitcast", to)
