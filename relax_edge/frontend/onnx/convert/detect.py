"""ONNX import: detection-head operators with data-dependent output sizes (TopK, NonMaxSuppression, ...).

1. TopK (opsets 1, 10, 11): `topk_indices` with K known at compile time (a
   constant or a value computed from shapes, so possibly symbolic), the
   values a `gather_elements` of those indices. `sorted=0` gives the sorted
   order too (ONNX leaves that order open).
2. NonMaxSuppression (10, 11), Unique (11): one operator call per result,
   followed by a match_cast whose fresh count carries the operator's upper
   bound (batch * classes * min(max_output_boxes_per_class, boxes) selected
   rows; one unique value per element), so a memory plan can bound it: a
   compiled model plans the result at that capacity (library kernels,
   relax_edge/library/data_dependent.py) and binds the count at run time.
3. Compress (9, 11): the indices of the condition's true entries (NonZero,
   over the condition cut to the axis' length as ONNX Runtime does), then a
   `take`; a constant condition folds to a take of constant indices.
"""

from __future__ import annotations

import math
import re

import numpy as np

from ....ir.expr import Expr
from ....ir.shape import SizeVar, as_expr, bounds
from ....ir.types import TensorType
from ....op.detect import UNIQUE_OUTPUTS
from ..context import converter
from ..values import static_array


def _count_type(ctx, value, what: str, upper, known):
    """match_cast `value` (known rank, unknown shape) to `known`, with one
    fresh data-dependent count (>= 0, <= `upper` when it is finite) where
    `known` has None. A count already made for this node may be passed as
    `upper` to reuse it (the results of one Unique share it)."""
    if isinstance(upper, SizeVar):
        count = upper
    else:
        base = re.sub(r"\W", "_", ctx.span)
        base = base if base[:1].isalpha() else f"d_{base}"
        finite = upper is not None and not math.isinf(upper)
        count = SizeVar(f"{base}_{what}", upper=int(upper) if finite else None, lower=0)
    dims = [count if k is None else k for k in known]
    return ctx.builder.match_cast(value, TensorType(dims, value.type.dtype)), count


def _highest(expr):
    """The largest value `expr` takes within its variables' bounds (inf when unbounded)."""
    return bounds(expr)[1]


def _axis(ctx, axis: int, rank: int, what: str = "axis") -> int:
    if not -rank <= axis < rank:
        raise ctx.error(f"{what} {axis} is out of range for rank {rank}")
    return axis % rank


# ------------------------------------------------------------------ TopK

def _topk_k(ctx, inputs):
    if ctx.opset < 10:
        if not ctx.has_attr("k"):
            raise ctx.error("TopK-1 needs the attribute k")
        return as_expr(ctx.attr("k", None, int))
    if len(inputs) < 2 or inputs[1] is None:
        raise ctx.error("TopK needs its input K")
    if ctx.type_of(inputs[1]).dtype != "int64":
        raise ctx.error(f"K must be int64, got {ctx.type_of(inputs[1]).dtype}")
    k = ctx.require_static(inputs[1], 1, "K").reshape(-1)
    if k.size != 1:
        raise ctx.error(f"K must hold one value, got {k.size}")
    return as_expr(k[0])


@converter("TopK", static={1})
def convert_topk(ctx, inputs):
    x = inputs[0]
    shape = ctx.type_of(x).shape
    if not shape:
        raise ctx.error("TopK of a scalar: the input must have rank >= 1")
    axis = _axis(ctx, ctx.attr("axis", -1, int), len(shape))
    k = _topk_k(ctx, inputs)
    if k.is_const and not 0 <= k.value <= (shape[axis].value if shape[axis].is_const else k.value):
        raise ctx.error(f"K={k.value} is outside [0, {shape[axis]}] (the size of axis {axis})")
    largest, ordered = ctx.attr("largest", 1, int), ctx.attr("sorted", 1, int)
    for name, v in (("largest", largest), ("sorted", ordered)):
        if v not in (0, 1):
            raise ctx.error(f"attribute {name} must be 0 or 1, got {v}")
    idx = ctx.emit("topk_indices", [x], {"k": k, "axis": axis, "largest": bool(largest)})
    return [ctx.emit("gather_elements", [x, idx], {"axis": axis}), idx]


# ------------------------------------------------------ NonMaxSuppression

def _optional_scalar(ctx, inputs, index: int, what: str, integer: bool = False):
    if len(inputs) <= index or inputs[index] is None:
        return None
    arr = ctx.require_known(inputs[index], index, what).reshape(-1)
    if arr.size == 0:
        return None
    if arr.size != 1:
        raise ctx.error(f"input {index} ({what}) must hold one value, got {arr.size}")
    if integer and arr.dtype.kind not in "iu":
        raise ctx.error(f"input {index} ({what}) must be an integer, got {arr.dtype}")
    return int(arr[0]) if integer else float(arr[0])


@converter("NonMaxSuppression", static={2, 3, 4})
def convert_non_max_suppression(ctx, inputs):
    if len(inputs) < 2:
        raise ctx.error("NonMaxSuppression needs boxes and scores")
    boxes, scores = inputs[0], inputs[1]
    max_output = _optional_scalar(ctx, inputs, 2, "max_output_boxes_per_class", integer=True)
    iou = _optional_scalar(ctx, inputs, 3, "iou_threshold")
    score = _optional_scalar(ctx, inputs, 4, "score_threshold")
    max_output = max(max_output or 0, 0)
    center = ctx.attr("center_point_box", 0, int)
    if center not in (0, 1):
        raise ctx.error(f"center_point_box must be 0 or 1, got {center}")
    if iou is not None and not 0.0 <= iou <= 1.0:
        raise ctx.error(f"iou_threshold must be in [0, 1], got {iou}")
    out = ctx.emit("non_max_suppression", [boxes, scores],
                   {"max_output": max_output, "iou_threshold": iou or 0.0, "score_threshold": score,
                    "center_point_box": center})
    if not isinstance(out, Expr):
        return out  # constant boxes and scores: folded
    b, c = ctx.type_of(scores).shape[:2]
    n = ctx.type_of(boxes).shape[1]
    per_class = min(max_output, _highest(n))
    upper = _highest(b) * _highest(c) * per_class if per_class else 0
    return _count_type(ctx, out, "selected", upper, [None, 3])[0]


# ------------------------------------------------------------------ Unique

@converter("Unique")
def convert_unique(ctx, inputs):
    x = inputs[0]
    shape = ctx.type_of(x).shape
    axis = ctx.attr("axis", None, int)
    if axis is not None:
        axis = _axis(ctx, axis, len(shape))
    ordered = ctx.attr("sorted", 1, int)
    if ordered not in (0, 1):
        raise ctx.error(f"attribute sorted must be 0 or 1, got {ordered}")
    dtype = ctx.type_of(x).dtype
    if dtype == "bool" or np.dtype(dtype).kind not in "iuf":
        raise ctx.error(f"Unique of {dtype} is not supported")
    total = as_expr(1)
    for d in shape:
        total = total * d
    count = _highest(shape[axis] if axis is not None else total)
    rest = [d for i, d in enumerate(shape) if i != axis] if axis is not None else []
    outs = []
    for which, name in enumerate(ctx.node.output[:len(UNIQUE_OUTPUTS)]):
        if not name:
            outs.append(None)
            continue
        out = ctx.emit("unique", [x], {"axis": axis, "sorted": bool(ordered), "output": which})
        if which != 2 and isinstance(out, Expr):
            known = rest[:axis] + [None] + rest[axis:] if which == 0 and axis is not None else [None]
            out, count = _count_type(ctx, out, "unique", count, known)
        outs.append(out)
    return outs


# ---------------------------------------------------------------- Compress

@converter("Compress")
def convert_compress(ctx, inputs):
    x, cond = inputs
    shape = ctx.type_of(x).shape
    axis = ctx.attr("axis", None, int)
    if axis is None:
        total = as_expr(1)
        for d in shape:
            total = total * d
        x, shape, axis = ctx.emit("reshape", [x], {"shape": (total,)}), (total,), 0
    else:
        axis = _axis(ctx, axis, len(shape))
    ct = ctx.type_of(cond)
    if ct.dtype != "bool" or len(ct.shape) != 1:
        raise ctx.error(f"the condition must be a 1-D bool tensor, got {ct.dtype} of rank {len(ct.shape)}")
    cond = ctx.emit("strided_slice", [cond], {"begin": (0,), "end": (shape[axis],), "axes": (0,), "strides": (1,)})
    if static_array(cond) is not None:  # a constant condition: constant indices
        idx = np.flatnonzero(static_array(cond).astype(bool)).astype(np.int64)
        return ctx.emit("take", [x, idx], {"axis": axis})
    found = ctx.emit("nonzero", [cond])
    found, count = _count_type(ctx, found, "kept", _highest(ctx.type_of(cond).shape[0]), [1, None])
    idx = ctx.emit("reshape", [found], {"shape": (count,)})
    return ctx.emit("take", [x, idx], {"axis": axis})
