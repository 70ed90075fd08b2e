"""ONNX import: scatter, gather-nd and sampling operators.

ScatterElements (11, 13, 16, 18; reduction none / add / mul / max / min),
Scatter (9, 11: ScatterElements without reduction), ScatterND (11, 13, 16,
18), GatherND (11, 12, 13; batch_dims), TensorScatter (24; linear and
circular modes, write_indices optional), GridSample (16, 20, 22) and
RoiAlign (10, 16) and DeformConv (19, 22; 2-D)."""

from __future__ import annotations

import numpy as np

from ....op.sampling import PADDING_MODES, ROI_COORDINATES, ROI_MODES
from ....op.scatter import REDUCTIONS
from ..context import converter


def _reduction(ctx, data):
    reduction = ctx.attr("reduction", "none", str)
    if reduction not in REDUCTIONS:
        raise ctx.error(f"reduction {reduction!r} is not supported ({', '.join(REDUCTIONS)})")
    if reduction != "none" and ctx.type_of(data).dtype == "bool":
        raise ctx.error(f"reduction {reduction} of bool data is not supported")
    return reduction


def _check_inputs(ctx, inputs, count):
    if len(inputs) < count or any(v is None for v in inputs[:count]):
        raise ctx.error(f"needs {count} inputs, got {sum(v is not None for v in inputs)}")


@converter("ScatterElements", "Scatter")
def convert_scatter_elements(ctx, inputs):
    _check_inputs(ctx, inputs, 3)
    attrs = {"axis": ctx.attr("axis", 0, int), "reduction": _reduction(ctx, inputs[0])}
    return ctx.emit("scatter_elements", inputs[:3], attrs)


@converter("ScatterND")
def convert_scatter_nd(ctx, inputs):
    _check_inputs(ctx, inputs, 3)
    return ctx.emit("scatter_nd", inputs[:3], {"reduction": _reduction(ctx, inputs[0])})


@converter("GatherND")
def convert_gather_nd(ctx, inputs):
    _check_inputs(ctx, inputs, 2)
    return ctx.emit("gather_nd", inputs[:2], {"batch_dims": ctx.attr("batch_dims", 0, int)})


@converter("TensorScatter")
def convert_tensor_scatter(ctx, inputs):
    _check_inputs(ctx, inputs, 2)
    past = ctx.type_of(inputs[0])
    if len(past.shape) < 2:
        raise ctx.error(f"past_cache must have rank >= 2 (batch first), got rank {len(past.shape)}")
    mode = ctx.attr("mode", "linear", str)
    if mode not in ("linear", "circular"):
        raise ctx.error(f"mode {mode!r} is not supported (linear or circular)")
    write = inputs[2] if len(inputs) > 2 and inputs[2] is not None else None
    if write is None:
        batch = past.shape[0]
        write = np.zeros(batch.value, np.int64) if batch.is_const else \
            ctx.emit("full", [], {"shape": (batch,), "value": 0, "dtype": "int64"})
    return ctx.emit("tensor_scatter", [inputs[0], inputs[1], write], {"mode": mode, "axis": ctx.attr("axis", -2, int)})


_GRID_MODES = {"bilinear": "linear", "linear": "linear", "nearest": "nearest", "bicubic": "cubic", "cubic": "cubic"}


@converter("GridSample")
def convert_grid_sample(ctx, inputs):
    _check_inputs(ctx, inputs, 2)
    mode = ctx.attr("mode", "bilinear" if ctx.opset < 20 else "linear", str)
    if mode not in _GRID_MODES:
        raise ctx.error(f"mode {mode!r} is not supported (linear/bilinear, nearest, cubic/bicubic)")
    padding = ctx.attr("padding_mode", "zeros", str)
    if padding not in PADDING_MODES:
        raise ctx.error(f"padding_mode {padding!r} is not supported ({', '.join(PADDING_MODES)})")
    rank = len(ctx.type_of(inputs[0]).shape)
    if rank < 3 or (ctx.opset < 20 and rank != 4):
        raise ctx.error(f"an input of rank {rank} is not supported (GridSample-{ctx.opset} takes "
                        f"{'rank 4' if ctx.opset < 20 else 'rank 3 or more'})")
    if _GRID_MODES[mode] == "cubic" and rank != 4:
        raise ctx.error(f"mode {mode} of a rank {rank} input is not supported (cubic is 4-D only)")
    attrs = {"mode": _GRID_MODES[mode], "padding_mode": padding,
             "align_corners": bool(ctx.attr("align_corners", 0, int))}
    return ctx.emit("grid_sample", inputs[:2], attrs)


@converter("RoiAlign")
def convert_roi_align(ctx, inputs):
    _check_inputs(ctx, inputs, 3)
    mode = ctx.attr("mode", "avg", str)
    if mode not in ROI_MODES:
        raise ctx.error(f"mode {mode!r} is not supported (avg or max)")
    # RoiAlign-10 has no attribute: it shifts as output_half_pixel does
    coords = ctx.attr("coordinate_transformation_mode", "half_pixel" if ctx.opset >= 16 else "output_half_pixel",
                      str)
    if coords not in ROI_COORDINATES:
        raise ctx.error(f"coordinate_transformation_mode {coords!r} is not supported "
                        "(half_pixel or output_half_pixel)")
    sampling = ctx.attr("sampling_ratio", 0, int)
    if sampling == 0:
        raise ctx.error("sampling_ratio 0 (an adaptive grid per roi) is not supported; give a positive one")
    attrs = {"mode": mode, "coordinate_transformation_mode": coords, "sampling_ratio": sampling,
             "output_height": ctx.attr("output_height", 1, int), "output_width": ctx.attr("output_width", 1, int),
             "spatial_scale": ctx.attr("spatial_scale", 1.0, float)}
    return ctx.emit("roi_align", inputs[:3], attrs)


def _pair(ctx, name, default, count=2):
    value = ctx.attr(name, default, list)
    if len(value) != count or not all(isinstance(v, int) for v in value):
        raise ctx.error(f"attribute {name} must be {count} integers for a 2-D DeformConv, got {value}")
    return tuple(value)


@converter("DeformConv")
def convert_deform_conv(ctx, inputs):
    _check_inputs(ctx, inputs, 3)
    x, w, offset = (ctx.type_of(v) for v in inputs[:3])
    if len(x.shape) != 4:
        raise ctx.error(f"an input of rank {len(x.shape)} is not supported (2-D only: N, C, H, W)")
    if not all(d.is_const for d in w.shape):
        raise ctx.error("the weights' shape must be static")
    kernel = tuple(d.value for d in w.shape[2:])
    if ctx.has_attr("kernel_shape") and _pair(ctx, "kernel_shape", None) != kernel:
        raise ctx.error(f"kernel_shape {ctx.attr('kernel_shape')} differs from the weights' {list(kernel)}")
    attrs = {"strides": _pair(ctx, "strides", [1, 1]), "pads": _pair(ctx, "pads", [0, 0, 0, 0], 4),
             "dilations": _pair(ctx, "dilations", [1, 1]), "group": ctx.attr("group", 1, int),
             "offset_group": ctx.attr("offset_group", 1, int)}
    if min(attrs["strides"] + attrs["dilations"]) < 1 or min(attrs["pads"]) < 0:
        raise ctx.error("strides and dilations must be positive and pads non-negative")
    bias = inputs[3] if len(inputs) > 3 and inputs[3] is not None else np.zeros(w.shape[0].value, x.dtype)
    mask = inputs[4] if len(inputs) > 4 and inputs[4] is not None else None
    if mask is None:
        og = max(attrs["offset_group"], 1)
        shape = (offset.shape[0], og * kernel[0] * kernel[1], offset.shape[2], offset.shape[3])
        mask = ctx.emit("full", [], {"shape": shape, "value": 1.0, "dtype": x.dtype})
    return ctx.emit("deform_conv2d", [inputs[0], inputs[1], inputs[2], bias, mask], attrs)
