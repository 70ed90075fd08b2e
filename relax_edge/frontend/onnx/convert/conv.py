"""Converters for ONNX convolutions and pooling: Conv, ConvTranspose,
MaxPool, AveragePool.

1-D convolutions and pools run as 2-D ones over a height of 1; 3-D ones
are not supported. auto_pad SAME_* needs static spatial sizes."""

from __future__ import annotations

from ....ir.shape import as_expr
from ..context import converter


def _spatial(ctx, x, w_shape=None):
    rank = len(ctx.type_of(x).shape)
    if rank not in (3, 4):
        raise ctx.error(f"only 1-D and 2-D spatial inputs are supported, got rank {rank}")
    return rank - 2


def _to_2d(ctx, x):
    """(N, C, L) -> (N, C, 1, L)."""
    n, c, length = ctx.type_of(x).shape
    return ctx.emit("reshape", [x], {"shape": (n, c, as_expr(1), length)})


def _from_2d(ctx, y):
    n, c, _, length = ctx.type_of(y).shape
    return ctx.emit("reshape", [y], {"shape": (n, c, length)})


def _window(ctx, nd, kernel, in_dims):
    """strides, padding (top, left, bottom, right), dilation from the
    attributes, resolving auto_pad; all as 2-D tuples."""
    strides = list(ctx.attr("strides", [1] * nd))
    dilations = list(ctx.attr("dilations", [1] * nd))
    pads = list(ctx.attr("pads", [0] * (2 * nd)))
    auto_pad = ctx.attr("auto_pad", "NOTSET", str)
    if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        pads = [0] * (2 * nd)
        for i in range(nd):
            size = in_dims[i]
            if not size.is_const:
                raise ctx.error(f"auto_pad {auto_pad} needs a static spatial size, got {size}")
            out = -(-size.value // strides[i])
            total = max((out - 1) * strides[i] + (kernel[i] - 1) * dilations[i] + 1 - size.value, 0)
            small, big = total // 2, total - total // 2
            pads[i], pads[i + nd] = (small, big) if auto_pad == "SAME_UPPER" else (big, small)
    elif auto_pad not in ("NOTSET", "VALID"):
        raise ctx.error(f"unknown auto_pad {auto_pad!r}")
    if nd == 1:
        return (1, strides[0]), (0, pads[0], 0, pads[1]), (1, dilations[0])
    return tuple(strides), (pads[0], pads[1], pads[2], pads[3]), tuple(dilations)


@converter("Conv")
def convert_conv(ctx, inputs):
    x, w = inputs[0], inputs[1]
    bias = inputs[2] if len(inputs) > 2 else None
    nd = _spatial(ctx, x)
    w_dims = ctx.type_of(w).shape
    kernel = [d.value if d.is_const else None for d in w_dims[2:]]
    if None in kernel:
        raise ctx.error("the kernel size must be static")
    strides, padding, dilation = _window(ctx, nd, kernel, ctx.type_of(x).shape[2:])
    if nd == 1:
        x, w = _to_2d(ctx, x), _to_2d(ctx, w)
    y = ctx.emit("conv2d", [x, w], {"strides": strides, "padding": padding, "dilation": dilation,
                                    "groups": ctx.attr("group", 1, int)})
    if bias is not None:
        out_c = ctx.type_of(y).shape[1]
        y = ctx.emit("add", [y, ctx.emit("reshape", [bias], {"shape": (1, out_c, 1, 1)})])
    return _from_2d(ctx, y) if nd == 1 else y


@converter("ConvTranspose")
def convert_conv_transpose(ctx, inputs):
    x, w = inputs[0], inputs[1]
    bias = inputs[2] if len(inputs) > 2 else None
    nd = _spatial(ctx, x)
    kernel = [d.value for d in ctx.type_of(w).shape[2:]]
    if ctx.has_attr("output_shape") or ctx.attr("auto_pad", "NOTSET", str) not in ("NOTSET", "VALID"):
        raise ctx.error("output_shape and auto_pad SAME are not supported; give pads")
    strides, padding, dilation = _window(ctx, nd, kernel, ctx.type_of(x).shape[2:])
    out_pad = list(ctx.attr("output_padding", [0] * nd))
    out_pad = (0, out_pad[0]) if nd == 1 else tuple(out_pad)
    if nd == 1:
        x, w = _to_2d(ctx, x), _to_2d(ctx, w)
    y = ctx.emit("conv2d_transpose", [x, w], {"strides": strides, "padding": padding,
                                              "output_padding": out_pad, "dilation": dilation,
                                              "groups": ctx.attr("group", 1, int)})
    if bias is not None:
        out_c = ctx.type_of(y).shape[1]
        y = ctx.emit("add", [y, ctx.emit("reshape", [bias], {"shape": (1, out_c, 1, 1)})])
    return _from_2d(ctx, y) if nd == 1 else y


@converter("MaxPool", "AveragePool")
def convert_pool(ctx, inputs):
    x = inputs[0]
    if len(ctx.node.output) > 1 and ctx.node.output[1]:
        raise ctx.error("the Indices output of MaxPool is not supported")
    if ctx.attr("storage_order", 0, int) != 0:
        raise ctx.error("storage_order 1 is not supported")
    nd = _spatial(ctx, x)
    kernel = list(ctx.attr("kernel_shape", kind=list))
    strides, padding, dilation = _window(ctx, nd, kernel, ctx.type_of(x).shape[2:])
    if nd == 1:
        x = _to_2d(ctx, x)
        kernel = [1] + kernel
    attrs = {"kernel_size": tuple(kernel), "strides": strides, "padding": padding, "dilation": dilation,
             "ceil_mode": bool(ctx.attr("ceil_mode", 0, int))}
    if ctx.node.op_type == "AveragePool":
        attrs["count_include_pad"] = bool(ctx.attr("count_include_pad", 0, int))
        y = ctx.emit("avg_pool2d", [x], attrs)
    else:
        y = ctx.emit("max_pool2d", [x], attrs)
    return _from_2d(ctx, y) if nd == 1 else y
