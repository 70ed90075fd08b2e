"""Reductions over axes: sum, mean, max and min (axis None means every axis;
an empty axis tuple reduces nothing, as ONNX's noop_with_empty_axes=1), and
argmax (one axis, int64 result, ONNX ArgMax). max and min of an empty set
give ONNX's identities (-inf / +inf, or the dtype's lowest / highest value);
NaN handling follows numpy and is not guaranteed to match ONNX Runtime."""

from __future__ import annotations

import numpy as np

from ..ir.shape import Proof, prove_equal
from ..ir.types import TensorType
from .registry import Op, RuleError, make_call, register
from .rules import float_dtype, normalize_axis, tensor

__all__ = ["reduce_max", "reduce_min", "argmax"]  # sum and mean are built in op/__init__


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


def _extreme(x, largest: bool):
    """The identity of max (largest=False) or min (largest=True) for x's dtype."""
    if x.dtype.kind == "f":
        return np.inf if largest else -np.inf
    if x.dtype.kind == "b":
        return largest
    info = np.iinfo(x.dtype)
    return info.max if largest else info.min


def _max_ref(x, axis, keepdims):
    return np.max(x, axis=reduce_axes(axis, x.ndim), keepdims=keepdims, initial=_extreme(x, False))


def _min_ref(x, axis, keepdims):
    return np.min(x, axis=reduce_axes(axis, x.ndim), keepdims=keepdims, initial=_extreme(x, True))


def _argmax_rule(types, attrs):
    x = tensor(types[0], 0)
    axis = normalize_axis(attrs["axis"], len(x.shape))
    if prove_equal(x.shape[axis], 0) is Proof.YES:
        raise RuleError(f"argmax over axis {axis} of length 0")
    if attrs["keepdims"]:
        shape = [1 if i == axis else d for i, d in enumerate(x.shape)]
    else:
        shape = [d for i, d in enumerate(x.shape) if i != axis]
    return TensorType(shape, "int64")


def _argmax_ref(x, axis, keepdims, select_last_index):
    if select_last_index:
        index = x.shape[axis] - 1 - np.argmax(np.flip(x, axis), axis=axis)
    else:
        index = np.argmax(x, axis=axis)
    index = np.asarray(index, np.int64)
    return np.expand_dims(index, axis) if keepdims else index


register(Op("max", _reduce_rule, _max_ref, attrs=dict(_ATTRS), kind="reduction"))
register(Op("min", _reduce_rule, _min_ref, attrs=dict(_ATTRS), kind="reduction"))
register(Op("argmax", _argmax_rule, _argmax_ref,
            attrs={"axis": 0, "keepdims": True, "select_last_index": False}, kind="reduction"))


def reduce_max(x, axis=None, keepdims=False, span=None):
    return make_call("max", [x], {"axis": axis, "keepdims": keepdims}, span=span)


def reduce_min(x, axis=None, keepdims=False, span=None):
    return make_call("min", [x], {"axis": axis, "keepdims": keepdims}, span=span)


def argmax(x, axis=0, keepdims=True, select_last_index=False, span=None):
    """Index (int64) of the first largest element along `axis`, or of the last one."""
    return make_call("argmax", [x], {"axis": axis, "keepdims": keepdims,
                                     "select_last_index": select_last_index}, span=span)
