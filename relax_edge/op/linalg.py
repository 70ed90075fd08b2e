"""Linear algebra: matmul with numpy semantics (batched, broadcasting, 1-D
operands promoted and squeezed)."""

from __future__ import annotations

import numpy as np

from ..ir.types import TensorType
from .registry import Op, RuleError, register
from .rules import broadcast_shapes, check_equal, same_dtype, tensor


def _matmul_rule(types, attrs):
    a, b = tensor(types[0], 0), tensor(types[1], 1)
    dtype = same_dtype([a, b])
    if len(a.shape) == 0 or len(b.shape) == 0:
        raise RuleError("operands must have rank >= 1")
    sa = a.shape if len(a.shape) > 1 else (1,) + a.shape
    sb = b.shape if len(b.shape) > 1 else b.shape + (1,)
    check_equal(sa[-1], sb[-2], "inner dimensions differ")
    batch = broadcast_shapes(sa[:-2], sb[:-2])
    out = batch + (sa[-2],) * (len(a.shape) > 1) + (sb[-1],) * (len(b.shape) > 1)
    return TensorType(out, dtype)


def _matmul_ref(a, b):
    if a.shape[-1] != (b.shape[-2] if b.ndim > 1 else b.shape[0]):
        raise ValueError(f"matmul inner dimensions differ: {a.shape} @ {b.shape}")
    return np.matmul(a, b).astype(a.dtype)


register(Op("matmul", _matmul_rule, _matmul_ref, kind="opaque", num_args=(2, 2)))
