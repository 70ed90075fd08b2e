"""Converters for ONNX OneHot (opsets 9, 11) and CumSum (opsets 11, 14),
expressed over existing operators.

1. OneHot compares the indices (negative ones wrapped by depth) against a
   Range of depth placed at `axis`; out-of-range indices match nothing and
   give all off values. depth must be known at import time.
2. CumSum selects, for output element i along `axis`, the inputs j <= i
   (j < i exclusive; j >= i / j > i reversed) and sums them: O(n^2) in the
   axis length, correct but not fast. The axis must be known at import time.
"""

from __future__ import annotations

import numpy as np

from ....ir.shape import IntExpr, as_expr
from ..context import converter

_CUMSUM_DTYPES = ("float32", "float16", "float64", "int32", "int64", "uint32", "uint64")


def _axis(ctx, axis: int, rank: int) -> int:
    if not -rank <= axis < rank:
        raise ctx.error(f"axis {axis} is out of range for rank {rank - (ctx.node.op_type == 'OneHot')}")
    return axis % rank


def _positions(ctx, length, rank: int, at: int):
    """arange(length) as a rank-`rank` tensor laid along dim `at`."""
    shape = [as_expr(1)] * rank
    shape[at] = as_expr(length)
    return ctx.emit("reshape", [ctx.emit("arange", [], {"stop": as_expr(length)})], {"shape": tuple(shape)})


def _insert_unit_dim(ctx, x, at: int):
    shape = [as_expr(d) for d in ctx.type_of(x).shape]
    return ctx.emit("reshape", [x], {"shape": tuple(shape[:at] + [as_expr(1)] + shape[at:])})


@converter("OneHot")
def convert_one_hot(ctx, inputs):
    indices, depth_value, values = inputs[:3]
    depth = ctx.scalar(depth_value, 1, "depth").item()
    if not isinstance(depth, IntExpr):
        depth = int(depth)  # the spec casts a float depth to an integer
        if depth < 1:
            raise ctx.error(f"depth must be positive, got {depth}")
    values_type = ctx.type_of(values)
    if len(values_type.shape) != 1 or not (values_type.shape[0].is_const and int(values_type.shape[0].value) == 2):
        raise ctx.error(f"values must be a 1-D tensor [off_value, on_value], got shape {values_type.shape}")
    rank = len(ctx.type_of(indices).shape) + 1
    axis = _axis(ctx, ctx.attr("axis", -1, int), rank)
    idx = indices
    if ctx.type_of(idx).dtype != "int64":
        idx = ctx.emit("cast", [idx], {"dtype": "int64"})
    depth_t = np.array(depth, np.int64) if not isinstance(depth, IntExpr) else \
        ctx.emit("reshape", [ctx.emit("shape_to_tensor", [], {"values": (depth,)})], {"shape": ()})
    zero = np.array(0, np.int64)
    idx = ctx.emit("where", [ctx.emit("less", [idx, zero]), ctx.emit("add", [idx, depth_t]), idx])
    hit = ctx.emit("equal", [_insert_unit_dim(ctx, idx, axis), _positions(ctx, depth, rank, axis)])
    known = ctx.known(values)
    if known is not None:
        off, on = known[0:1].reshape(()), known[1:2].reshape(())
    else:
        off, on = (ctx.emit("reshape", [ctx.emit("strided_slice", [values], {"begin": (i,), "end": (i + 1,),
                                                                              "axes": (0,)})], {"shape": ()})
                   for i in (0, 1))
    return ctx.emit("where", [hit, on, off])


@converter("CumSum")
def convert_cum_sum(ctx, inputs):
    return cumulative(ctx, inputs, "sum", 0, _CUMSUM_DTYPES)


def cumulative(ctx, inputs, reduction: str, identity, dtypes):
    """CumSum / CumProd (misc.py): `reduction` over the masked inputs, the others `identity`."""
    x = inputs[0]
    t = ctx.type_of(x)
    if t.dtype not in dtypes:
        raise ctx.error(f"x of type {t.dtype} is not supported (supported: {', '.join(dtypes)})")
    rank = len(t.shape)
    if rank == 0:
        raise ctx.error("x must have rank >= 1")
    if len(inputs) < 2 or inputs[1] is None:
        raise ctx.error("the axis input is required")
    axis = _axis(ctx, int(ctx.scalar(inputs[1], 1, "axis", integer=True).item()), rank)
    exclusive, reverse = ctx.attr("exclusive", 0, int), ctx.attr("reverse", 0, int)
    for name, flag in (("exclusive", exclusive), ("reverse", reverse)):
        if flag not in (0, 1):
            raise ctx.error(f"attribute {name} must be 0 or 1, got {flag}")
    length = t.shape[axis]
    # mask[i, j] over dims (axis, axis + 1) of a rank + 1 tensor: does output i take input j?
    out_pos = _positions(ctx, length, rank + 1, axis)
    in_pos = _positions(ctx, length, rank + 1, axis + 1)
    compare = {(0, 0): "less_equal", (1, 0): "less", (0, 1): "greater_equal", (1, 1): "greater"}
    mask = ctx.emit(compare[exclusive, reverse], [in_pos, out_pos])
    picked = ctx.emit("where", [mask, _insert_unit_dim(ctx, x, axis), np.array(identity, t.dtype)])
    return ctx.emit(reduction, [picked], {"axis": (axis + 1,), "keepdims": False})
