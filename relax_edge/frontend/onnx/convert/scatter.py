"""ONNX import: scatter, gather-nd and sampling operators.

ScatterElements (11, 13, 16, 18; reduction none / add / mul / max / min),
Scatter (9, 11: ScatterElements without reduction), ScatterND (11, 13, 16,
18), GatherND (11, 12, 13; batch_dims), TensorScatter (24; linear and
circular modes, write_indices optional), GridSample (16, 20, 22) and
RoiAlign (10, 16)."""

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
