"""ONNX import: the loss operators (SoftmaxCrossEntropyLoss, NegativeLogLikelihoodLoss) over existing operators.

1. NegativeLogLikelihoodLoss (opsets 12, 13, 22): input (N, C, d1..dk) of log
   probabilities, target (N, d1..dk) of class indices. The picked entry
   -input[n, target[n, d], d] is a gather_elements along axis 1, scaled by
   weight[target] (a take) when a weight is given. Targets equal to
   ignore_index are first replaced by class 0 (so that an out-of-range
   ignore_index is never read) and their loss and weight set to 0.
   reduction "none" keeps the per-element losses, "sum" sums them, "mean"
   divides the sum by the sum of the weights taken (the count of targets not
   ignored without a weight): every target ignored gives 0 / 0, NaN, as the
   ONNX reference does.
2. SoftmaxCrossEntropyLoss (opsets 12, 13): log_softmax over axis 1, then
   NegativeLogLikelihoodLoss with the same weight, ignore_index and
   reduction; the optional second output is the log_softmax.
"""

from __future__ import annotations

import numpy as np

from ....ir.shape import as_expr
from ..context import converter

_FLOATS = ("float32", "float16", "float64")
_REDUCTIONS = ("none", "sum", "mean")


def _check_types(ctx, x, target, weight, names):
    xt, tt = ctx.type_of(x), ctx.type_of(target)
    if xt.dtype not in _FLOATS:
        raise ctx.error(f"{names[0]} of type {xt.dtype} is not supported (supported: {', '.join(_FLOATS)})")
    if tt.dtype not in ("int32", "int64"):
        raise ctx.error(f"{names[1]} must be int32 or int64, got {tt.dtype}")
    if len(xt.shape) < 2:
        raise ctx.error(f"{names[0]} must have rank >= 2 (N, C, ...), got rank {len(xt.shape)}")
    if len(tt.shape) != len(xt.shape) - 1:
        raise ctx.error(f"{names[1]} must have rank {len(xt.shape) - 1} (the {names[0]} without C), "
                        f"got rank {len(tt.shape)}")
    if weight is not None:
        wt = ctx.type_of(weight)
        if len(wt.shape) != 1:
            raise ctx.error(f"the weight must have rank 1 (C,), got rank {len(wt.shape)}")
        if wt.dtype != xt.dtype:
            raise ctx.error(f"the weight must have the type of {names[0]} ({xt.dtype}), got {wt.dtype}")


def _reduction(ctx) -> str:
    reduction = ctx.attr("reduction", "mean", str)
    if reduction not in _REDUCTIONS:
        raise ctx.error(f"reduction {reduction!r} is not supported ({', '.join(_REDUCTIONS)})")
    return reduction


def nll_loss(ctx, x, target, weight, ignore_index, reduction):
    """The NegativeLogLikelihoodLoss of log probabilities `x` (N, C, d...) and `target` (N, d...)."""
    xt, tt = ctx.type_of(x), ctx.type_of(target)
    dtype = xt.dtype
    ignored = None
    if ignore_index is not None:
        ignored = ctx.emit("equal", [target, np.array(ignore_index, tt.dtype)])
        target = ctx.emit("where", [ignored, np.array(0, tt.dtype), target])
    dims = [as_expr(d) for d in tt.shape]
    column = ctx.emit("reshape", [target], {"shape": tuple(dims[:1] + [as_expr(1)] + dims[1:])})
    picked = ctx.emit("gather_elements", [x, column], {"axis": 1})
    loss = ctx.emit("negative", [ctx.emit("reshape", [picked], {"shape": tuple(dims)})])
    taken = None  # the weight of each element (None: 1 everywhere)
    if weight is not None:
        taken = ctx.emit("take", [weight, target], {"axis": 0})
        loss = ctx.emit("multiply", [loss, taken])
    zero = np.array(0, dtype)
    if ignored is not None:
        loss = ctx.emit("where", [ignored, zero, loss])
        taken = ctx.emit("where", [ignored, zero, np.array(1, dtype) if taken is None else taken])
    if reduction == "none":
        return loss
    total = ctx.emit("sum", [loss], {"axis": None, "keepdims": False})
    if reduction == "sum":
        return total
    if taken is None:
        return ctx.emit("mean", [loss], {"axis": None, "keepdims": False})
    return ctx.emit("divide", [total, ctx.emit("sum", [taken], {"axis": None, "keepdims": False})])


def _optional(inputs, index):
    return inputs[index] if len(inputs) > index else None


@converter("NegativeLogLikelihoodLoss")
def convert_nll_loss(ctx, inputs):
    x, target, weight = inputs[0], inputs[1], _optional(inputs, 2)
    _check_types(ctx, x, target, weight, ("input", "target"))
    return nll_loss(ctx, x, target, weight, ctx.attr("ignore_index", None, int), _reduction(ctx))


@converter("SoftmaxCrossEntropyLoss")
def convert_softmax_cross_entropy_loss(ctx, inputs):
    scores, labels, weight = inputs[0], inputs[1], _optional(inputs, 2)
    _check_types(ctx, scores, labels, weight, ("scores", "labels"))
    log_prob = ctx.emit("log_softmax", [scores], {"axis": 1})
    loss = nll_loss(ctx, log_prob, labels, weight, ctx.attr("ignore_index", None, int), _reduction(ctx))
    return [loss, log_prob]
