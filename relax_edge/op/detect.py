"""Detection-head operators (top-k, non-max suppression, unique): type rules and numpy references.

1. `topk_indices` gives the positions of the k largest (smallest) elements
   along an axis, best first, ties broken by the lower index and NaN above
   every number (ONNX Runtime's order); its values are a gather_elements.
   The output shape is static (k an IntExpr, possibly symbolic).
2. `non_max_suppression` and `unique` have results whose length depends on
   the data: a known rank and an unknown shape; the importer follows them with
   a match_cast whose fresh size variable carries the operator's upper bound
   (compiled, they are library kernels: relax_edge/library/data_dependent.py).
   `unique`'s `output` attribute picks one of ONNX's four results (the
   unique values, the first index of each, the inverse indices, the counts).
"""

from __future__ import annotations

import numpy as np

from ..ir.shape import Proof, as_expr, prove_le
from ..ir.types import TensorType
from .registry import REQUIRED, Op, RuleError, register
from .rules import normalize_axis, tensor

_NUMERIC_KINDS = "iuf"


# ------------------------------------------------------------------ top-k

def _topk_rule(types, attrs):
    x = tensor(types[0], 0)
    if not x.shape:
        raise RuleError("the input must have rank >= 1")
    axis = normalize_axis(attrs["axis"], len(x.shape))
    k = as_expr(attrs["k"])
    if k.is_const and k.value < 0:
        raise RuleError(f"k must be >= 0, got {k.value}")
    if prove_le(k, x.shape[axis]) is Proof.NO:
        raise RuleError(f"k={k} is larger than the axis {axis} of size {x.shape[axis]}")
    if np.dtype(x.dtype).kind not in _NUMERIC_KINDS:
        raise RuleError(f"top-k of {x.dtype} is not supported")
    shape = list(x.shape)
    shape[axis] = k
    return TensorType(shape, "int64")


def topk_order(x: np.ndarray, axis: int, largest: bool) -> np.ndarray:
    """Every position along `axis`, best first: ties by the lower index, NaN
    above every number (numpy sorts NaN last)."""
    pos = np.indices(x.shape)[axis]
    if largest:  # ascending by (x, -pos), then reversed: x descending, pos ascending
        return np.flip(np.lexsort((-pos, x), axis=axis), axis=axis)
    return np.lexsort((pos, x), axis=axis)


def _topk_ref(x, k, axis, largest):
    axis = axis % x.ndim
    k = int(k)
    if not 0 <= k <= x.shape[axis]:
        raise ValueError(f"k={k} is outside [0, {x.shape[axis]}] (the size of axis {axis})")
    return np.take(topk_order(x, axis, largest), np.arange(k), axis=axis).astype(np.int64)


register(Op("topk_indices", _topk_rule, _topk_ref, attrs={"k": REQUIRED, "axis": -1, "largest": True},
            kind="opaque", doc="positions of the k largest (smallest) elements along an axis, best first"))


# ------------------------------------------------------- non-max suppression

def _nms_rule(types, attrs):
    boxes, scores = tensor(types[0], 0), tensor(types[1], 1)
    if len(boxes.shape) != 3 or len(scores.shape) != 3:
        raise RuleError(f"boxes must be [batch, boxes, 4] and scores [batch, classes, boxes], got ranks "
                        f"{len(boxes.shape)} and {len(scores.shape)}")
    if boxes.shape[2].is_const and boxes.shape[2].value != 4:
        raise RuleError(f"boxes must have 4 coordinates in the last dim, got {boxes.shape[2]}")
    for a, b, what in ((0, 0, "batch"), (1, 2, "box count")):
        d1, d2 = boxes.shape[a], scores.shape[b]
        if d1.is_const and d2.is_const and d1.value != d2.value:
            raise RuleError(f"boxes and scores differ in their {what}: {d1} and {d2}")
    for t, i in ((boxes, 0), (scores, 1)):
        if t.dtype != "float32":
            raise RuleError(f"input {i} must be float32 (ONNX's only type here), got {t.dtype}")
    if attrs["center_point_box"] not in (0, 1):
        raise RuleError(f"center_point_box must be 0 or 1, got {attrs['center_point_box']!r}")
    return TensorType(None, "int64", ndim=2)


def _corners(box, center_point_box):
    """(x_min, x_max, y_min, y_max) of one box, as ONNX Runtime reads it."""
    if center_point_box:
        xc, yc, w, h = box
        return xc - w / 2, xc + w / 2, yc - h / 2, yc + h / 2
    y1, x1, y2, x2 = box
    return min(x1, x2), max(x1, x2), min(y1, y2), max(y1, y2)


def _suppresses(a, b, center_point_box, iou_threshold) -> bool:
    ax0, ax1, ay0, ay1 = _corners(a, center_point_box)
    bx0, bx1, by0, by1 = _corners(b, center_point_box)
    ix0, ix1, iy0, iy1 = max(ax0, bx0), min(ax1, bx1), max(ay0, by0), min(ay1, by1)
    if ix1 <= ix0 or iy1 <= iy0:
        return False
    inter = (ix1 - ix0) * (iy1 - iy0)
    area_a, area_b = (ax1 - ax0) * (ay1 - ay0), (bx1 - bx0) * (by1 - by0)
    union = area_a + area_b - inter
    if inter <= 0 or area_a <= 0 or area_b <= 0 or union <= 0:
        return False
    return inter / union > iou_threshold


def _nms_ref(boxes, scores, max_output, iou_threshold, score_threshold, center_point_box):
    """ONNX Runtime's order: batch, then class, then the selected boxes by
    score (ties by the lower box index); a box is kept when no kept box of
    its class overlaps it by more than `iou_threshold`."""
    if boxes.shape[0] != scores.shape[0] or boxes.shape[1] != scores.shape[2] or boxes.shape[2] != 4:
        raise ValueError(f"boxes {boxes.shape} and scores {scores.shape} do not match "
                         "([batch, boxes, 4] and [batch, classes, boxes])")
    dtype = boxes.dtype.type
    iou = dtype(iou_threshold)
    selected = []
    for b in range(boxes.shape[0]):
        for c in range(scores.shape[1]):
            s = scores[b, c]
            order = np.lexsort((np.arange(len(s)), -s.astype(np.float64)))
            if score_threshold is not None:
                order = order[s[order] > s.dtype.type(score_threshold)]
            kept = []
            for i in order:
                if len(kept) >= max_output:
                    break
                if not any(_suppresses(boxes[b, i], boxes[b, j], center_point_box, iou) for j in kept):
                    kept.append(i)
                    selected.append((b, c, i))
    return np.array(selected, dtype=np.int64).reshape(-1, 3)


register(Op("non_max_suppression", _nms_rule, _nms_ref,
            attrs={"max_output": 0, "iou_threshold": 0.0, "score_threshold": None, "center_point_box": 0},
            kind="opaque", num_args=(2, 2),
            doc="[selected, 3] (batch, class, box) rows of greedy non-max suppression"))


# ------------------------------------------------------------------ unique

UNIQUE_OUTPUTS = ("values", "indices", "inverse_indices", "counts")


def _unique_rule(types, attrs):
    x = tensor(types[0], 0)
    axis, which = attrs["axis"], attrs["output"]
    if which not in range(4):
        raise RuleError(f"output must be 0..3 ({', '.join(UNIQUE_OUTPUTS)}), got {which!r}")
    if axis is not None:
        axis = normalize_axis(axis, len(x.shape))
    if which == 2:  # one entry per element (per slice along the axis): a known length
        total = as_expr(1)
        for d in x.shape:
            total = total * d
        return TensorType((x.shape[axis] if axis is not None else total,), "int64")
    if which == 0:
        return TensorType(None, x.dtype, ndim=len(x.shape) if axis is not None else 1)
    return TensorType(None, "int64", ndim=1)


def _unique_ref(x, axis, sorted, output):  # noqa: A002  (ONNX's attribute name)
    """ONNX Unique: np.unique, or in order of first occurrence when not sorted."""
    if axis is None:
        y, first, inverse, counts = np.unique(x.reshape(-1), return_index=True, return_inverse=True,
                                              return_counts=True)
    else:
        y, first, inverse, counts = np.unique(x, return_index=True, return_inverse=True, return_counts=True,
                                              axis=axis % x.ndim)
    inverse = inverse.reshape(-1)
    if not sorted:
        order = np.argsort(first, kind="stable")
        rank = np.empty_like(order)
        rank[order] = np.arange(len(order))
        first, counts, inverse = first[order], counts[order], rank[inverse]
        y = np.take(x.reshape(-1) if axis is None else x, first, axis=0 if axis is None else axis % x.ndim)
    return [y, first.astype(np.int64), inverse.astype(np.int64), counts.astype(np.int64)][output]


register(Op("unique", _unique_rule, _unique_ref, attrs={"axis": None, "sorted": True, "output": 0},
            kind="opaque", doc="one of ONNX Unique's four results (see UNIQUE_OUTPUTS)"))
