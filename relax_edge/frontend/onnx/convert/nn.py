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


# ------------------------------------------- normalizations built on reductions: LpNormalization,
# MeanVarianceNormalization, InstanceNormalization, GroupNormalization, LRN

def _float_input(ctx, x):
    dtype = ctx.type_of(x).dtype
    if not dtype.startswith("float"):
        raise ctx.error(f"input dtype {dtype} is not supported (floating point only)")
    return dtype


def _as_dtype(ctx, v, dtype):
    return v if ctx.type_of(v).dtype == dtype else ctx.emit("cast", [v], {"dtype": dtype})


def _along_axis(ctx, v, rank, axis):
    """A 1-D tensor of length C reshaped to broadcast along `axis` of a rank-`rank` tensor."""
    return ctx.emit("reshape", [v], {"shape": (-1,) + (1,) * (rank - 1 - axis)})


def _standardize(ctx, x, axes, eps):
    """(x - mean) / sqrt(var + eps) over `axes`, the variance as the mean of squared deviations."""
    dtype = ctx.type_of(x).dtype
    mean = ctx.emit("mean", [x], {"axis": axes, "keepdims": True})
    centered = ctx.emit("subtract", [x, mean])
    var = ctx.emit("mean", [ctx.emit("multiply", [centered, centered])], {"axis": axes, "keepdims": True})
    return ctx.emit("divide", [centered, ctx.emit("sqrt", [ctx.emit("add", [var, np.array(eps, dtype)])])])


@converter("LpNormalization")
def convert_lp_normalization(ctx, inputs):
    """x / ||x||_p along one axis (p 1 or 2); 0 where the norm is 0, as the ONNX reference."""
    x = inputs[0]
    dtype = _float_input(ctx, x)
    p, axis = ctx.attr("p", 2, int), ctx.attr("axis", -1, int)
    if p not in (1, 2):
        raise ctx.error(f"attribute p={p} is not supported (1 or 2)")
    norm = ctx.emit("l1" if p == 1 else "l2", [x], {"axis": (axis,), "keepdims": True})
    zero = np.array(0, dtype)
    return ctx.emit("where", [ctx.emit("equal", [norm, zero]), zero, ctx.emit("divide", [x, norm])])


@converter("MeanVarianceNormalization")
def convert_mean_variance_normalization(ctx, inputs):
    """The ONNX function: (x - E[x]) / (sqrt(E[x^2] - E[x]^2) + 1e-9) over `axes`."""
    x = inputs[0]
    dtype = _float_input(ctx, x)
    axes = tuple(int(a) for a in ctx.attr("axes", [0, 2, 3]))
    mean = ctx.emit("mean", [x], {"axis": axes, "keepdims": True})
    mean_of_squares = ctx.emit("mean", [ctx.emit("multiply", [x, x])], {"axis": axes, "keepdims": True})
    var = ctx.emit("subtract", [mean_of_squares, ctx.emit("multiply", [mean, mean])])
    std = ctx.emit("add", [ctx.emit("sqrt", [var]), np.array(1e-9, dtype)])
    return ctx.emit("divide", [ctx.emit("subtract", [x, mean]), std])


@converter("InstanceNormalization")
def convert_instance_normalization(ctx, inputs):
    """Per sample and channel over the spatial axes, then scale and bias of shape (C,)."""
    x, scale, bias = inputs[:3]
    dtype = _float_input(ctx, x)
    rank = len(ctx.type_of(x).shape)
    if rank < 3:
        raise ctx.error(f"input rank {rank} is not supported (N, C and at least one spatial axis)")
    work = "float32" if dtype == "float16" else dtype  # float16 computed in float32, as ONNX Runtime does
    x, scale, bias = (_as_dtype(ctx, v, work) for v in (x, scale, bias))
    y = _standardize(ctx, x, tuple(range(2, rank)), ctx.attr("epsilon", 1e-5, float))
    y = ctx.emit("multiply", [y, _along_axis(ctx, scale, rank, 1)])
    return _as_dtype(ctx, ctx.emit("add", [y, _along_axis(ctx, bias, rank, 1)]), dtype)


@converter("GroupNormalization")
def convert_group_normalization(ctx, inputs):
    """Over (N, G, C/G * spatial) groups; scale and bias per group (opset 18)
    or per channel (opset 21, whose stash_type=1 computes float16 in float32)."""
    x, scale, bias = inputs[:3]
    dtype = _float_input(ctx, x)
    dims = ctx.type_of(x).shape
    rank = len(dims)
    groups, eps = ctx.attr("num_groups", None, int), ctx.attr("epsilon", 1e-5, float)
    if groups is None or groups < 1:
        raise ctx.error(f"attribute num_groups={groups} must be a positive integer")
    if rank < 2:
        raise ctx.error(f"input rank {rank} is not supported (N, C, ...)")
    if dims[1].is_const and int(dims[1]) % groups:
        raise ctx.error(f"{int(dims[1])} channels do not split into num_groups={groups} groups")
    stash_type = ctx.attr("stash_type", 1, int) if ctx.opset >= 21 else 0
    if stash_type not in (0, 1):
        raise ctx.error(f"attribute stash_type={stash_type} is not supported (0 or 1)")
    work = "float32" if stash_type == 1 else dtype
    x, scale, bias = (_as_dtype(ctx, v, work) for v in (x, scale, bias))
    grouped = ctx.emit("reshape", [x], {"shape": (dims[0], groups, -1)})
    y = _standardize(ctx, grouped, (2,), eps)
    if ctx.opset < 21:  # scale and bias of shape (G,)
        y = ctx.emit("multiply", [y, _along_axis(ctx, scale, 3, 1)])
        y = ctx.emit("add", [y, _along_axis(ctx, bias, 3, 1)])
        return _as_dtype(ctx, ctx.emit("reshape", [y], {"shape": dims}), dtype)
    y = ctx.emit("reshape", [y], {"shape": dims})
    y = ctx.emit("multiply", [y, _along_axis(ctx, scale, rank, 1)])
    return _as_dtype(ctx, ctx.emit("add", [y, _along_axis(ctx, bias, rank, 1)]), dtype)


@converter("LRN")
def convert_lrn(ctx, inputs):
    """x / (bias + alpha / size * sum of x^2 over a window of `size` channels)^beta;
    the window sum is an average pool (padding counted) over the channels of an
    (N, 1, C, rest) view."""
    x = inputs[0]
    dtype = _float_input(ctx, x)
    dims = ctx.type_of(x).shape
    if len(dims) < 2:
        raise ctx.error(f"input rank {len(dims)} is not supported (N, C, ...)")
    size = ctx.attr("size", None, int)
    if size is None or size < 1:
        raise ctx.error(f"attribute size={size} must be a positive integer")
    alpha, beta = ctx.attr("alpha", 1e-4, float), ctx.attr("beta", 0.75, float)
    bias = ctx.attr("bias", 1.0, float)
    rest = as_expr(1)
    for d in dims[2:]:
        rest = rest * d
    squares = ctx.emit("reshape", [ctx.emit("multiply", [x, x])], {"shape": (dims[0], 1, dims[1], rest)})
    before, after = (size - 1) // 2, size // 2
    window = ctx.emit("avg_pool2d", [squares], {"kernel_size": (size, 1), "strides": (1, 1),
                                                "padding": (before, 0, after, 0), "count_include_pad": True})
    window = ctx.emit("reshape", [window], {"shape": dims})
    base = ctx.emit("add", [ctx.emit("multiply", [window, np.array(alpha, dtype)]), np.array(bias, dtype)])
    return ctx.emit("divide", [x, ctx.emit("power", [base, np.array(beta, dtype)])])
