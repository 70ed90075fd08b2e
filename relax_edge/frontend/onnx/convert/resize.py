"""Converter for ONNX Resize: modes nearest, linear and cubic; sizes or
scales, the axes attribute, keep_aspect_ratio_policy, tf_crop_and_resize
with a roi known at compile time, cubic_coeff_a, exclude_outside, antialias.

Resize-10 (opset < 11, scales only) is read as ONNX Runtime runs it:
asymmetric coordinates, and nearest rounds down along axes that grow or keep
their size and up along axes that shrink (its Upsample logic), so a nearest
Resize-10 that does both becomes two resizes, one per rounding.

Not supported: a roi, scales or sizes computed at run time (they decide the
output shape or the coordinates, so they must be known when importing)."""

from __future__ import annotations

import numpy as np

from ....ir.shape import as_expr
from ..context import converter
from ..values import static_array


def _scatter(values, axes, base):
    """`base` (one entry per axis) with `values` written at `axes`."""
    out = list(base)
    for a, v in zip(axes, values):
        out[a] = v
    return out


def _resize_targets(ctx, inputs, rank, axes):
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
    if scales is not None:
        if scales.dtype == object or not np.all(np.isfinite(scales.astype(np.float64))) or np.any(scales <= 0):
            raise ctx.error(f"scales must be finite and positive, got {scales.reshape(-1).tolist()}")
        scales = _scatter((float(s) for s in scales.reshape(-1)), axes, [1.0] * rank)
        for a, (d, s) in enumerate(zip(ctx.type_of(inputs[0]).shape, scales)):
            with np.errstate(over="ignore"):
                size = np.float32(s) * np.float32(d.value if d.is_const else 1)
            if not np.isfinite(size) or size > 2.0 ** 62:
                raise ctx.error(f"scale {s} on axis {a} (size {d}) gives an output size too large to hold")
    if sizes is not None:
        sizes = _scatter((as_expr(s) for s in sizes.reshape(-1)), axes, ctx.type_of(inputs[0]).shape)
    return sizes, scales


def _roi(ctx, inputs, rank, axes):
    """The roi over every axis (starts, then ends), for tf_crop_and_resize."""
    roi_in = inputs[1] if ctx.opset >= 11 and len(inputs) > 1 else None
    if roi_in is None:
        raise ctx.error("coordinate_transformation_mode tf_crop_and_resize needs the roi input")
    roi = ctx.require_known(roi_in, 1, "roi").reshape(-1).astype(np.float64)
    if roi.size != 2 * len(axes):
        raise ctx.error(f"roi has {roi.size} entries; expected 2 * {len(axes)} (starts, then ends)")
    starts = _scatter(roi[:len(axes)], axes, [0.0] * rank)
    ends = _scatter(roi[len(axes):], axes, [1.0] * rank)
    return tuple(float(r) for r in starts + ends)


def _keep_aspect_ratio(ctx, policy, dims, sizes, axes):
    """keep_aspect_ratio_policy not_larger / not_smaller: one float32 scale for
    every resized axis, from static sizes, rounded as ONNX Runtime does."""
    if sizes is None or any(not dims[a].is_const for a in axes):
        raise ctx.error(f"keep_aspect_ratio_policy {policy} needs static sizes and dims")
    ratios = [np.float32(sizes[a].value) / np.float32(dims[a].value) for a in axes]
    scale = min(ratios) if policy == "not_larger" else max(ratios)
    if not np.isfinite(scale):
        raise ctx.error(f"keep_aspect_ratio_policy {policy}: sizes {[sizes[a] for a in axes]} over dims "
                        f"{[dims[a] for a in axes]} give no finite scale")
    out = _scatter((as_expr(int(np.floor(float(scale * np.float32(dims[a].value)) + 0.5))) for a in axes),
                   axes, dims)
    return out, _scatter([float(scale)] * len(axes), axes, [1.0] * len(dims))


def _resize_10(ctx, x, scales):
    """Resize-10 as ONNX Runtime runs it: asymmetric; nearest takes floor
    along axes with scale >= 1 and ceil along axes with scale < 1."""
    mode = ctx.attr("mode", "nearest", str)
    attrs = {"mode": mode, "coordinate_transformation_mode": "asymmetric", "nearest_mode": "floor"}
    grow = tuple(max(s, 1.0) for s in scales)
    shrink = tuple(min(s, 1.0) for s in scales)
    if mode != "nearest" or shrink == (1.0,) * len(scales):
        return ctx.emit("resize", [x], {**attrs, "scales": tuple(scales)})
    if grow != (1.0,) * len(scales):
        x = ctx.emit("resize", [x], {**attrs, "scales": grow})
    return ctx.emit("resize", [x], {**attrs, "nearest_mode": "ceil", "scales": shrink})


@converter("Resize")
def convert_resize(ctx, inputs):
    x = inputs[0]
    dims = ctx.type_of(x).shape
    rank = len(dims)
    axes = [a % rank for a in ctx.attr("axes", list(range(rank)))]
    coord = ctx.attr("coordinate_transformation_mode", "half_pixel", str)
    sizes, scales = _resize_targets(ctx, inputs, rank, axes)
    if ctx.opset < 11:
        if scales is None:
            raise ctx.error("Resize-10 needs its scales input")
        return _resize_10(ctx, x, scales)
    policy = ctx.attr("keep_aspect_ratio_policy", "stretch", str)
    if policy != "stretch":
        sizes, scales = _keep_aspect_ratio(ctx, policy, dims, sizes, axes)
    attrs = {"mode": ctx.attr("mode", "nearest", str), "coordinate_transformation_mode": coord,
             "nearest_mode": ctx.attr("nearest_mode", "round_prefer_floor", str),
             "cubic_coeff_a": ctx.attr("cubic_coeff_a", -0.75, float),
             "exclude_outside": ctx.attr("exclude_outside", 0, int),
             "antialias": ctx.attr("antialias", 0, int),
             "extrapolation_value": ctx.attr("extrapolation_value", 0.0, float),
             "roi": _roi(ctx, inputs, rank, axes) if coord == "tf_crop_and_resize" else None,
             "sizes": None if sizes is None else tuple(sizes),
             "scales": None if scales is None else tuple(scales)}
    return ctx.emit("resize", [x], attrs)
