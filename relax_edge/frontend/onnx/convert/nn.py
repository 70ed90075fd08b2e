"""Converters for ONNX dense and normalization operators: MatMul, Gemm,
Softmax, LogSoftmax, BatchNormalization, LayerNormalization."""

from __future__ import annotations

import numpy as np

from ....ir.shape import as_expr
from ..context import converter


@converter("MatMul")
def convert_matmul(ctx, inputs):
    return ctx.emit("matmul", inputs)


@converter("Gemm")
def convert_gemm(ctx, inputs):
    a, b = inputs[0], inputs[1]
    c = inputs[2] if len(inputs) > 2 else None
    if ctx.attr("transA", 0, int):
        a = ctx.emit("transpose", [a], {"axes": (1, 0)})
    if ctx.attr("transB", 0, int):
        b = ctx.emit("transpose", [b], {"axes": (1, 0)})
    y = ctx.emit("matmul", [a, b])
    dtype = ctx.type_of(y).dtype
    alpha, beta = ctx.attr("alpha", 1.0, float), ctx.attr("beta", 1.0, float)
    if alpha != 1.0:
        y = ctx.emit("multiply", [y, np.array(alpha, dtype)])
    if c is not None:
        if beta != 1.0:
            c = ctx.emit("multiply", [c, np.array(beta, dtype)])
        y = ctx.emit("add", [y, c])
    return y


def _coerced_2d(ctx, x, op_name):
    """Softmax before opset 13: over all axes from `axis` on, as a 2-D matrix."""
    dims = ctx.type_of(x).shape
    axis = ctx.attr("axis", 1, int) % len(dims)
    outer, inner = as_expr(1), as_expr(1)
    for d in dims[:axis]:
        outer = outer * d
    for d in dims[axis:]:
        inner = inner * d
    flat = ctx.emit("reshape", [x], {"shape": (outer, inner)})
    y = ctx.emit(op_name, [flat], {"axis": 1})
    return ctx.emit("reshape", [y], {"shape": dims})


@converter("Softmax", "LogSoftmax")
def convert_softmax(ctx, inputs):
    op_name = "softmax" if ctx.node.op_type == "Softmax" else "log_softmax"
    if ctx.opset < 13:
        return _coerced_2d(ctx, inputs[0], op_name)
    return ctx.emit(op_name, inputs, {"axis": ctx.attr("axis", -1, int)})


@converter("BatchNormalization")
def convert_batch_norm(ctx, inputs):
    if ctx.attr("training_mode", 0, int) or len([o for o in ctx.node.output if o]) > 1:
        raise ctx.error("training mode is not supported (inference only)")
    return ctx.emit("batch_norm", inputs[:5], {"epsilon": ctx.attr("epsilon", 1e-5, float)})


@converter("LayerNormalization")
def convert_layer_norm(ctx, inputs):
    x = inputs[0]
    axis, eps = ctx.attr("axis", -1, int), ctx.attr("epsilon", 1e-5, float)
    args = [v for v in inputs[:3] if v is not None]
    y = ctx.emit("layer_norm", args, {"axis": axis, "epsilon": eps})
    outs = [y]
    wanted = [o for o in ctx.node.output[1:]]
    if any(wanted):  # Mean and InvStdDev outputs, over axes [axis, rank)
        rank = len(ctx.type_of(x).shape)
        axes = tuple(range(axis % rank, rank))
        mean = ctx.emit("mean", [x], {"axis": axes, "keepdims": True})
        centered = ctx.emit("subtract", [x, mean])
        var = ctx.emit("mean", [ctx.emit("multiply", [centered, centered])], {"axis": axes, "keepdims": True})
        dtype = ctx.type_of(x).dtype
        inv = ctx.emit("reciprocal", [ctx.emit("sqrt", [ctx.emit("add", [var, np.array(eps, dtype)])])])
        outs += [mean, inv]
    return outs
