"""Converters for ONNX reductions: ReduceSum, ReduceMean, ReduceMax,
ReduceMin, ReduceProd, ReduceSumSquare, ReduceL1, ReduceL2, ReduceLogSum,
ReduceLogSumExp, ArgMax, ArgMin, GlobalAveragePool, GlobalMaxPool. Axes come
from the attribute (older opsets) or the second input (ReduceSum from opset
13, the others from opset 18); no axes means every axis, or nothing with
noop_with_empty_axes=1."""

from __future__ import annotations

import operator

import numpy as np

from ....ir.shape import max_expr, min_expr
from ..context import converter
from ..values import SymInts, from_static

# reductions that run on import-time integers with symbolic entries (shape arithmetic such as
# min(300, number of boxes) in detection heads)
_SYMBOLIC = {"ReduceMin": min_expr, "ReduceMax": max_expr, "ReduceSum": operator.add, "ReduceProd": operator.mul}

_REDUCE = {"ReduceSum": "sum", "ReduceMean": "mean", "ReduceMax": "max", "ReduceMin": "min",
           "ReduceProd": "prod", "ReduceSumSquare": "sum_square", "ReduceL1": "l1", "ReduceL2": "l2",
           "ReduceLogSum": "log_sum", "ReduceLogSumExp": "log_sum_exp"}


@converter(*_REDUCE)
def convert_reduce(ctx, inputs):
    x = inputs[0]
    if ctx.has_attr("axes"):
        axes = [int(a) for a in ctx.attr("axes")]
    elif len(inputs) > 1 and inputs[1] is not None:
        axes = ctx.integers(inputs[1], 1, "axes")
    else:
        axes = []
    keepdims = bool(ctx.attr("keepdims", 1, int))
    if not axes:
        if ctx.attr("noop_with_empty_axes", 0, int):
            return x
        axes = None
    if isinstance(x, SymInts) and ctx.node.op_type in _SYMBOLIC:
        return _symbolic_reduce(ctx, x, axes, keepdims)
    return ctx.emit(_REDUCE[ctx.node.op_type], [x], {"axis": None if axes is None else tuple(axes),
                                                     "keepdims": keepdims})


def _symbolic_reduce(ctx, x, axes, keepdims):
    values = x.values
    axes = tuple(range(values.ndim)) if axes is None else tuple(sorted(a % max(values.ndim, 1) for a in axes))
    if any(values.shape[a] == 0 for a in axes):
        raise ctx.error(f"{ctx.node.op_type} of an empty set of import-time integers")
    fn = np.frompyfunc(_SYMBOLIC[ctx.node.op_type], 2, 1)
    for a in reversed(axes):
        values = fn.reduce(values, axis=a, keepdims=keepdims)
    return from_static(np.asarray(values, dtype=object), x.dtype)


@converter("ArgMax", "ArgMin")
def convert_arg_reduce(ctx, inputs):
    return ctx.emit(ctx.node.op_type.lower(), inputs, {"axis": ctx.attr("axis", 0, int),
                                       "keepdims": bool(ctx.attr("keepdims", 1, int)),
                                       "select_last_index": bool(ctx.attr("select_last_index", 0, int))})


@converter("GlobalAveragePool", "GlobalMaxPool")
def convert_global_pool(ctx, inputs):
    rank = len(ctx.type_of(inputs[0]).shape)
    op_name = "mean" if ctx.node.op_type == "GlobalAveragePool" else "max"
    return ctx.emit(op_name, inputs, {"axis": tuple(range(2, rank)), "keepdims": True})
