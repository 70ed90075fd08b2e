"""Reductions over axes: sum, mean, max, min, prod, sum_square, l1, l2,
log_sum and log_sum_exp (axis None means every axis; an empty axis tuple
reduces nothing, as ONNX's noop_with_empty_axes=1), and argmax / argmin (one
axis, int64 result, ONNX ArgMax / ArgMin). Over an empty set each gives its
ONNX identity: 0 for the sums and norms, 1 for prod, -inf for log_sum and
log_sum_exp, -inf / +inf (or the dtype's lowest / highest value) for max and
min. The mean of integers truncates toward zero (as ONNX Runtime's
integer division); l2, log_sum and log_sum_exp need a float input. NaN handling
follows numpy and is not guaranteed to match ONNX Runtime."""

from __future__ import annotations

import numpy as np

from ..ir.shape import Proof, prove_equal
from ..ir.types import TensorType
from .registry import Op, RuleError, make_call, register
from .rules import float_dtype, normalize_axis, tensor

__all__ = ["reduce_max", "reduce_min", "reduce_prod", "reduce_sum_square", "reduce_l1", "reduce_l2",
           "reduce_log_sum", "reduce_log_sum_exp", "argmax", "argmin"]  # sum and mean: op/__init__


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
    axes = reduce_axes(axis, x.ndim)
    if x.size == 0 and x.dtype.kind in "iub":   # an empty integer mean is 0, as ONNX Runtime gives
        return np.zeros_like(np.sum(x, axis=axes, keepdims=keepdims), dtype=x.dtype)
    return np.mean(x.astype(np.float64), axis=axes, keepdims=keepdims).astype(x.dtype)


_ATTRS = {"axis": None, "keepdims": False}
register(Op("sum", _reduce_rule, _sum_ref, attrs=dict(_ATTRS), kind="reduction"))
register(Op("mean", _reduce_rule, _mean_ref,
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


def _float64_ref(fn):
    """A reference computing `fn` of the float64 input over the axes, in x's dtype."""
    def ref(x, axis, keepdims):
        y = fn(x.astype(np.float64), reduce_axes(axis, x.ndim), keepdims)
        return np.asarray(y).astype(x.dtype)
    return ref


def _log_sum_exp(x, axes, keepdims):
    with np.errstate(divide="ignore"):
        if x.size == 0:
            return np.log(np.sum(np.exp(x), axis=axes, keepdims=keepdims))
        peak = np.max(x, axis=axes, keepdims=True)
        peak = np.where(np.isfinite(peak), peak, 0.0)
        total = np.log(np.sum(np.exp(x - peak), axis=axes, keepdims=True)) + peak
        return total if keepdims else np.squeeze(total, axes)


def _prod_ref(x, axis, keepdims):
    acc = np.float64 if x.dtype.kind == "f" else None
    return np.prod(x, axis=reduce_axes(axis, x.ndim), keepdims=keepdims, dtype=acc).astype(x.dtype)


def _integer_ref(fn):
    """fn of x over the axes; floats in float64, integers in int64 (wrapping)."""
    def ref(x, axis, keepdims):
        wide = x.astype(np.float64 if x.dtype.kind == "f" else np.int64)
        return np.asarray(fn(wide, reduce_axes(axis, x.ndim), keepdims)).astype(x.dtype)
    return ref


def _float_rule(types, attrs):
    return _reduce_rule(types, attrs, need_float=True)


register(Op("prod", _reduce_rule, _prod_ref, attrs=dict(_ATTRS), kind="reduction"))
register(Op("sum_square", _reduce_rule, _integer_ref(lambda x, a, k: np.sum(x * x, axis=a, keepdims=k)),
            attrs=dict(_ATTRS), kind="reduction"))
register(Op("l1", _reduce_rule, _integer_ref(lambda x, a, k: np.sum(np.abs(x), axis=a, keepdims=k)),
            attrs=dict(_ATTRS), kind="reduction"))
register(Op("l2", _float_rule, _float64_ref(lambda x, a, k: np.sqrt(np.sum(x * x, axis=a, keepdims=k))),
            attrs=dict(_ATTRS), kind="reduction"))
register(Op("log_sum", _float_rule, _float64_ref(lambda x, a, k: np.log(np.sum(x, axis=a, keepdims=k))),
            attrs=dict(_ATTRS), kind="reduction"))
register(Op("log_sum_exp", _float_rule, _float64_ref(_log_sum_exp), attrs=dict(_ATTRS), kind="reduction"))


def _arg_rule(types, attrs, name):
    x = tensor(types[0], 0)
    axis = normalize_axis(attrs["axis"], len(x.shape))
    if prove_equal(x.shape[axis], 0) is Proof.YES:
        raise RuleError(f"{name} over axis {axis} of length 0")
    if attrs["keepdims"]:
        shape = [1 if i == axis else d for i, d in enumerate(x.shape)]
    else:
        shape = [d for i, d in enumerate(x.shape) if i != axis]
    return TensorType(shape, "int64")


def _arg_ref(find):
    """The reference of argmax (find=np.argmax) or argmin (np.argmin)."""
    def ref(x, axis, keepdims, select_last_index):
        if select_last_index:
            index = x.shape[axis] - 1 - find(np.flip(x, axis), axis=axis)
        else:
            index = find(x, axis=axis)
        index = np.asarray(index, np.int64)
        return np.expand_dims(index, axis) if keepdims else index
    return ref


register(Op("max", _reduce_rule, _max_ref, attrs=dict(_ATTRS), kind="reduction"))
register(Op("min", _reduce_rule, _min_ref, attrs=dict(_ATTRS), kind="reduction"))
for _name, _find in (("argmax", np.argmax), ("argmin", np.argmin)):
    register(Op(_name, lambda t, a, name=_name: _arg_rule(t, a, name), _arg_ref(_find),
                attrs={"axis": 0, "keepdims": True, "select_last_index": False}, kind="reduction"))


def reduce_max(x, axis=None, keepdims=False, span=None):
    return make_call("max", [x], {"axis": axis, "keepdims": keepdims}, span=span)


def reduce_min(x, axis=None, keepdims=False, span=None):
    return make_call("min", [x], {"axis": axis, "keepdims": keepdims}, span=span)


def _reduction(name):
    def build(x, axis=None, keepdims=False, span=None):
        return make_call(name, [x], {"axis": axis, "keepdims": keepdims}, span=span)
    build.__name__ = f"reduce_{name}"
    build.__doc__ = f"The {name} reduction of x over `axis` (None: every axis)."
    return build


reduce_prod = _reduction("prod")
reduce_sum_square = _reduction("sum_square")
reduce_l1 = _reduction("l1")
reduce_l2 = _reduction("l2")
reduce_log_sum = _reduction("log_sum")
reduce_log_sum_exp = _reduction("log_sum_exp")


def argmin(x, axis=0, keepdims=True, select_last_index=False, span=None):
    """Index (int64) of the first smallest element along `axis`, or of the last one."""
    return make_call("argmin", [x], {"axis": axis, "keepdims": keepdims,
                                     "select_last_index": select_last_index}, span=span)


def argmax(x, axis=0, keepdims=True, select_last_index=False, span=None):
    """Index (int64) of the first largest element along `axis`, or of the last one."""
    return make_call("argmax", [x], {"axis": axis, "keepdims": keepdims,
                                     "select_last_index": select_last_index}, span=span)
