"""Converters for ONNX convolutions and pooling: Conv, ConvTranspose,
MaxPool, AveragePool.

2-D and 3-D ones map to conv2d / conv3d, conv2d_transpose /
conv3d_transpose, max_pool2d / max_pool3d and avg_pool2d / avg_pool3d;
1-D ones run as 2-D ones over a height of 1. auto_pad SAME_* of Conv and the
pools needs static spatial sizes. ConvTranspose turns output_shape and
auto_pad SAME_* into pads by the ONNX rule (see `_transpose_pads`);
output_shape needs static spatial sizes. MaxPool's Indices output (see
`_max_pool_indices`) needs static spatial sizes. Not supported: more than 3
spatial axes."""

from __future__ import annotations

import itertools

import numpy as np

from ....ir.shape import as_expr
from ..context import converter

_SAME = ("SAME_UPPER", "SAME_LOWER")


def _spatial_rank(ctx, x):
    nd = len(ctx.type_of(x).shape) - 2
    if nd not in (1, 2, 3):
        raise ctx.error(f"{nd} spatial axes are not supported (1-D, 2-D and 3-D are)")
    return nd


def _static_kernel(ctx, w, nd):
    shape = ctx.type_of(w).shape
    if len(shape) != nd + 2:
        raise ctx.error(f"the weight has rank {len(shape)}, an input with {nd} spatial axes needs {nd + 2}")
    kernel = [d.value if d.is_const else None for d in shape[2:]]
    if None in kernel:
        raise ctx.error("the kernel size must be static")
    return kernel


def _per_axis(ctx, name, default, count, least=None):
    """An ints attribute with `count` entries (each >= `least`, if given)."""
    values = list(ctx.attr(name, default, list))
    if len(values) != count:
        raise ctx.error(f"attribute {name} has {len(values)} values, {count} expected")
    if least is not None and any(v < least for v in values):
        raise ctx.error(f"attribute {name} {values} must be at least {least} on every axis")
    return values


def _to_2d(ctx, x):
    """(N, C, L) -> (N, C, 1, L)."""
    n, c, length = ctx.type_of(x).shape
    return ctx.emit("reshape", [x], {"shape": (n, c, as_expr(1), length)})


def _from_2d(ctx, y):
    n, c, _, length = ctx.type_of(y).shape
    return ctx.emit("reshape", [y], {"shape": (n, c, length)})


def _lift_1d(name, value):
    """A 1-D attribute as the 2-D one over a height of 1."""
    if name == "padding":
        return (0, value[0], 0, value[1])
    if name == "output_padding":
        return (0, *value)
    if name in ("kernel_size", "strides", "dilation"):
        return (1, *value)
    return value


def _emit_spatial(ctx, op_name, nd, args, attrs):
    """Emit `op_name` ("conv{}d", ...) for nd spatial axes; 1-D runs as 2-D."""
    if nd > 1:
        return ctx.emit(op_name.format(nd), args, attrs)
    lifted = {k: _lift_1d(k, v) for k, v in attrs.items()}
    return _from_2d(ctx, ctx.emit(op_name.format(2), [_to_2d(ctx, a) for a in args], lifted))


def _add_bias(ctx, y, bias):
    if bias is None:
        return y
    shape = ctx.type_of(y).shape
    along_c = (1, shape[1]) + (1,) * (len(shape) - 2)
    return ctx.emit("add", [y, ctx.emit("reshape", [bias], {"shape": along_c})])


def _window(ctx, nd, kernel, in_dims):
    """strides, pads (all begins, then all ends) and dilations from the
    attributes, resolving auto_pad; ONNX layout, nd entries per axis."""
    if len(kernel) != nd:
        raise ctx.error(f"kernel_shape {list(kernel)} has {len(kernel)} values, {nd} expected")
    strides = _per_axis(ctx, "strides", [1] * nd, nd, least=1)
    dilations = _per_axis(ctx, "dilations", [1] * nd, nd, least=1)
    pads = _per_axis(ctx, "pads", [0] * (2 * nd), 2 * nd)
    auto_pad = ctx.attr("auto_pad", "NOTSET", str)
    if auto_pad in _SAME:
        pads = [0] * (2 * nd)
        for i in range(nd):
            size = in_dims[i]
            if not size.is_const:
                raise ctx.error(f"auto_pad {auto_pad} needs a static spatial size, got {size}")
            out = -(-size.value // strides[i])
            total = max((out - 1) * strides[i] + (kernel[i] - 1) * dilations[i] + 1 - size.value, 0)
            small, big = total // 2, total - total // 2
            pads[i], pads[i + nd] = (small, big) if auto_pad == "SAME_UPPER" else (big, small)
    elif auto_pad == "VALID":
        pads = [0] * (2 * nd)
    elif auto_pad != "NOTSET":
        raise ctx.error(f"unknown auto_pad {auto_pad!r}")
    return tuple(strides), tuple(pads), tuple(dilations)


def _transpose_pads(ctx, nd, kernel, strides, dilations, out_pad, in_dims):
    """ConvTranspose pads, all begins then all ends, possibly negative.

    Given output_shape, or with auto_pad SAME_* (output_shape = input * stride),
    total = stride * (in - 1) + output_padding + (k - 1) * dilation + 1 - out
    is split in halves, the larger half at the end for SAME_UPPER and at the
    begin otherwise; explicit pads are then ignored. A negative total (an
    output longer than the full result) becomes zeros appended at the end,
    as in ONNX Runtime."""
    auto_pad = ctx.attr("auto_pad", "NOTSET", str)
    if auto_pad not in ("NOTSET", "VALID", *_SAME):
        raise ctx.error(f"unknown auto_pad {auto_pad!r}")
    output_shape = ctx.attr("output_shape", None, list)
    if output_shape is None and auto_pad not in _SAME:
        return _per_axis(ctx, "pads", [0] * (2 * nd), 2 * nd) if auto_pad == "NOTSET" else [0] * (2 * nd)
    if output_shape is not None and len(output_shape) != nd:
        raise ctx.error(f"output_shape {output_shape} must hold the {nd} spatial sizes")
    begins, ends = [], []
    for i in range(nd):
        full = (kernel[i] - 1) * dilations[i] + 1 + out_pad[i]
        if output_shape is None:    # SAME: total is the same for every input size
            total = full - strides[i]
        elif in_dims[i].is_const:
            total = strides[i] * (in_dims[i].value - 1) + full - output_shape[i]
        else:
            raise ctx.error(f"output_shape needs a static spatial size, got {in_dims[i]}")
        small, big = total // 2, total - total // 2
        if total < 0:
            begins.append(0)
            ends.append(total)
        else:
            begins.append(small if auto_pad == "SAME_UPPER" else big)
            ends.append(big if auto_pad == "SAME_UPPER" else small)
    return begins + ends


@converter("Conv")
def convert_conv(ctx, inputs):
    x, w = inputs[0], inputs[1]
    bias = inputs[2] if len(inputs) > 2 else None
    nd = _spatial_rank(ctx, x)
    strides, pads, dilations = _window(ctx, nd, _static_kernel(ctx, w, nd), ctx.type_of(x).shape[2:])
    y = _emit_spatial(ctx, "conv{}d", nd, [x, w], {"strides": strides, "padding": pads,
                                                   "dilation": dilations,
                                                   "groups": ctx.attr("group", 1, int)})
    return _add_bias(ctx, y, bias)


@converter("ConvTranspose")
def convert_conv_transpose(ctx, inputs):
    x, w = inputs[0], inputs[1]
    bias = inputs[2] if len(inputs) > 2 else None
    nd = _spatial_rank(ctx, x)
    kernel = _static_kernel(ctx, w, nd)
    strides = _per_axis(ctx, "strides", [1] * nd, nd, least=1)
    dilations = _per_axis(ctx, "dilations", [1] * nd, nd, least=1)
    out_pad = _per_axis(ctx, "output_padding", [0] * nd, nd, least=0)
    pads = _transpose_pads(ctx, nd, kernel, strides, dilations, out_pad, ctx.type_of(x).shape[2:])
    y = _emit_spatial(ctx, "conv{}d_transpose", nd, [x, w],
                      {"strides": tuple(strides), "padding": tuple(max(p, 0) for p in pads),
                       "output_padding": tuple(out_pad), "dilation": tuple(dilations),
                       "groups": ctx.attr("group", 1, int)})
    grow = [max(-p, 0) for p in pads]
    if any(grow):
        y = ctx.emit("pad", [y], {"pads": (0, 0, *grow[:nd], 0, 0, *grow[nd:])})
    return _add_bias(ctx, y, bias)


@converter("MaxPool", "AveragePool")
def convert_pool(ctx, inputs):
    x = inputs[0]
    with_indices = len(ctx.node.output) > 1 and bool(ctx.node.output[1])
    storage_order = ctx.attr("storage_order", 0, int)
    if storage_order not in (0, 1):
        raise ctx.error(f"storage_order must be 0 (row major) or 1 (column major), got {storage_order}")
    nd = _spatial_rank(ctx, x)
    if not ctx.has_attr("kernel_shape"):
        raise ctx.error("attribute kernel_shape is required")
    kernel = tuple(ctx.attr("kernel_shape", kind=list))
    strides, pads, dilations = _window(ctx, nd, kernel, ctx.type_of(x).shape[2:])
    attrs = {"kernel_size": kernel, "strides": strides, "padding": pads, "dilation": dilations,
             "ceil_mode": bool(ctx.attr("ceil_mode", 0, int))}
    if ctx.node.op_type == "AveragePool":
        attrs["count_include_pad"] = bool(ctx.attr("count_include_pad", 0, int))
        return _emit_spatial(ctx, "avg_pool{}d", nd, [x], attrs)
    y = _emit_spatial(ctx, "max_pool{}d", nd, [x], attrs)
    if not with_indices:
        return y
    return [y, _max_pool_indices(ctx, x, y, kernel, strides, pads, dilations, storage_order)]


def _max_pool_indices(ctx, x, y, kernel, strides, pads, dilations, storage_order):
    """MaxPool's Indices: per output, the flattened index (n, c and the spatial position, the spatial part
    row major for storage_order 0, column major for 1) of the first largest element of its window in
    row-major window order, as ONNX Runtime. The K window elements of every output are K strided slices of
    the input (padded with the dtype's lowest value, widened at the end for ceil_mode), stacked on a new
    axis; argmax over it picks k, and a gather of a constant (K, outputs) position table gives the index.
    Padding positions never win unless a window's real elements are all the lowest value."""
    shape = ctx.type_of(x).shape
    nd = len(shape) - 2
    if not all(d.is_const for d in shape[2:]):
        raise ctx.error(f"the Indices output needs static spatial sizes, got {tuple(shape[2:])}")
    dims = [int(d.value) for d in shape[2:]]
    out = [int(d.value) for d in ctx.type_of(y).shape[2:]]
    begins, ends = list(pads[:nd]), list(pads[nd:])
    for i in range(nd):  # ceil_mode: the last windows may reach past the end padding
        reach = (out[i] - 1) * strides[i] + (kernel[i] - 1) * dilations[i] + 1
        ends[i] = max(ends[i], reach - dims[i] - begins[i])
    dtype = ctx.type_of(x).dtype
    lowest = float("-inf") if dtype.startswith("float") else int(np.iinfo(dtype).min)
    padded = ctx.emit("pad", [x], {"pads": (0, 0, *begins, 0, 0, *ends), "value": lowest}) \
        if any(begins) or any(ends) else x
    n, c = shape[0], shape[1]
    order = "F" if storage_order == 1 else "C"
    offsets = list(itertools.product(*[range(k) for k in kernel]))
    slices, table = [], np.zeros((len(offsets), *out), np.int64)
    grid = np.meshgrid(*[np.arange(o) for o in out], indexing="ij")
    for j, offset in enumerate(offsets):
        starts = [offset[i] * dilations[i] for i in range(nd)]
        part = ctx.emit("strided_slice", [padded], {
            "begin": tuple(starts), "end": tuple(s + (o - 1) * st + 1 for s, o, st in zip(starts, out, strides)),
            "strides": tuple(strides), "axes": tuple(range(2, nd + 2))})
        slices.append(ctx.emit("reshape", [part], {"shape": (n, c, as_expr(1), *ctx.type_of(part).shape[2:])}))
        where = [np.clip(grid[i] * strides[i] + starts[i] - begins[i], 0, dims[i] - 1) for i in range(nd)]
        table[j] = np.ravel_multi_index(where, dims, order=order)
    stacked = ctx.emit("concat", slices, {"axis": 2}) if len(slices) > 1 else slices[0]
    best = ctx.emit("argmax", [stacked], {"axis": 2, "keepdims": True})
    full = (n, c, as_expr(len(offsets)), *[as_expr(o) for o in out])
    positions = ctx.emit("broadcast_to", [table.reshape(1, 1, len(offsets), *out)], {"shape": full})
    index = ctx.emit("reshape", [ctx.emit("gather_elements", [positions, best], {"axis": 2})],
                     {"shape": (n, c, *[as_expr(o) for o in out])})
    size = int(np.prod(dims))
    base = ctx.emit("arange", [], {"start": 0, "stop": n * c * size, "step": size, "dtype": "int64"})
    base = ctx.emit("reshape", [base], {"shape": (n, c, *[as_expr(1)] * nd)})
    return ctx.emit("add", [index, base])
