"""Converter for ONNX Resize (nearest and linear; sizes or scales, the axes
attribute, keep_aspect_ratio_policy)."""

from __future__ import annotations

import numpy as np

from ....ir.shape import as_expr
from ..context import converter
from ..values import static_array


def _resize_targets(ctx, inputs, rank):
    """(sizes, scales) over every axis from the inputs and the axes attribute."""
    if ctx.opset < 11:
        scales_in, sizes_in = inputs[1], None
    else:
        scales_in = inputs[2] if len(inputs) > 2 else None
        sizes_in = inputs[3] if len(inputs) > 3 else None
    scales = ctx.known(scales_in) if scales_in is not None else None
    sizes = ctx.require_static(sizes_in, 3, "sizes") if sizes_in is not None else None
    if scales is not None and scales.size == 0:
        scales = None
    if sizes is not None and sizes.size == 0:
        sizes = None
    if scales_in is not None and scales is None and static_array(scales_in) is None:
        ctx.require_known(scales_in, 2, "scales")
    axes = ctx.attr("axes")
    dims = ctx.type_of(inputs[0]).shape
    if axes is not None:
        axes = [a % rank for a in axes]
        if scales is not None:
            full = [1.0] * rank
            for a, s in zip(axes, scales):
                full[a] = float(s)
            scales = np.array(full, np.float32)
        if sizes is not None:
            full = list(dims)
            for a, s in zip(axes, sizes.reshape(-1)):
                full[a] = s
            sizes = np.array(full + [None], dtype=object)[:-1]
    return sizes, scales


@converter("Resize")
def convert_resize(ctx, inputs):
    x = inputs[0]
    rank = len(ctx.type_of(x).shape)
    mode = ctx.attr("mode", "nearest", str)
    coord = ctx.attr("coordinate_transformation_mode", "half_pixel", str)
    if mode == "cubic" or ctx.attr("antialias", 0, int):
        raise ctx.error("cubic and antialiased resize are not supported")
    if coord == "tf_crop_and_resize":
        raise ctx.error("coordinate_transformation_mode tf_crop_and_resize is not supported")
    if ctx.attr("keep_aspect_ratio_policy", "stretch", str) != "stretch":
        sizes, _ = _resize_targets(ctx, inputs, rank)
        return ctx.emit("resize", [x], _aspect_sizes(ctx, x, sizes, mode, coord))
    sizes, scales = _resize_targets(ctx, inputs, rank)
    attrs = {"mode": mode, "coordinate_transformation_mode": coord,
             "nearest_mode": ctx.attr("nearest_mode", "round_prefer_floor", str),
             "exclude_outside": ctx.attr("exclude_outside", 0, int),
             "extrapolation_value": ctx.attr("extrapolation_value", 0.0, float),
             "sizes": None if sizes is None else tuple(as_expr(s) for s in sizes.reshape(-1)),
             "scales": None if scales is None else tuple(float(s) for s in scales.reshape(-1))}
    return ctx.emit("resize", [x], attrs)


def _aspect_sizes(ctx, x, sizes, mode, coord):
    """keep_aspect_ratio_policy not_larger / not_smaller: one scale for every
    resized axis, from static sizes."""
    policy = ctx.attr("keep_aspect_ratio_policy", "stretch", str)
    dims = ctx.type_of(x).shape
    axes = [a % len(dims) for a in ctx.attr("axes", list(range(len(dims))))]
    if sizes is None or any(not dims[a].is_const for a in axes):
        raise ctx.error(f"keep_aspect_ratio_policy {policy} needs static sizes and dims")
    ratios = [float(as_expr(sizes[a]).value) / dims[a].value for a in axes]
    scale = min(ratios) if policy == "not_larger" else max(ratios)
    out = list(dims)
    for a in axes:
        out[a] = as_expr(int(np.floor(scale * dims[a].value + 0.5)))
    scales = tuple(scale if a in axes else 1.0 for a in range(len(dims)))
    return {"mode": mode, "coordinate_transformation_mode": coord,
            "nearest_mode": ctx.attr("nearest_mode", "round_prefer_floor", str),
            "sizes": tuple(out), "scales": scales}
