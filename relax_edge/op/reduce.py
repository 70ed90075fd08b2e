"""Reductions over axes: sum and mean (axis None means every axis)."""

from __future__ import annotations

import numpy as np

from ..ir.types import TensorType
from .registry import Op, RuleError, register
from .rules import float_dtype, normalize_axis, tensor


def reduce_axes(axis, ndim: int) -> tuple:
    if axis is None:
        return tuple(range(ndim))
    axes = (axis,) if isinstance(axis, int) else tuple(axis)
    norm = tuple(sorted(normalize_axis(a, ndim) for a in axes))
    if len(set(norm)) != len(norm):
        raise RuleError(f"axis {axis} repeats an axis")
    return norm


def _reduce_rule(types, attrs, need_float=False):
    x = tensor(types[0], 0)
    if need_float:
        float_dtype(x)
    axes = reduce_axes(attrs["axis"], len(x.shape))
    if attrs["keepdims"]:
        shape = [1 if i in axes else d for i, d in enumerate(x.shape)]
    else:
        shape = [d for i, d in enumerate(x.shape) if i not in axes]
    return TensorType(shape, x.dtype)


def _sum_ref(x, axis, keepdims):
    acc = np.float64 if x.dtype.kind == "f" else None
    return np.sum(x, axis=reduce_axes(axis, x.ndim), keepdims=keepdims, dtype=acc).astype(x.dtype)


def _mean_ref(x, axis, keepdims):
    return np.mean(x.astype(np.float64), axis=reduce_axes(axis, x.ndim), keepdims=keepdims).astype(x.dtype)


_ATTRS = {"axis": None, "keepdims": False}
register(Op("sum", _reduce_rule, _sum_ref, attrs=dict(_ATTRS), kind="reduction"))
register(Op("mean", lambda t, a: _reduce_rule(t, a, need_float=True), _mean_ref,
            attrs=dict(_ATTRS), kind="reduction"))
