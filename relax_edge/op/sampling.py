"""Sampling operators: type rules and numpy references.

- `grid_sample(x, grid; mode, padding_mode, align_corners)` (ONNX
  GridSample): x (N, C, D_1..D_r), grid (N, O_1..O_r, r) of normalized
  coordinates in [-1, 1], the last grid entry for the last spatial axis
  reversed (grid[..., 0] is the width's); result (N, C, O_1..O_r). Modes
  linear (2^r taps), nearest (round half to even) and cubic (4^r taps, Keys
  alpha -0.75); padding zeros (taps outside weigh 0), border (coordinate
  and taps clamped) and reflection (reflected at the borders, -0.5 and
  d - 0.5, or 0 and d - 1 with align_corners). Cubic with border clamps
  only its taps, not the coordinate, as ONNX Runtime and PyTorch do (the
  ONNX reference implementation clamps the coordinate first, which moves
  the taps and their weights).
- `roi_align(x, rois, batch_indices; ...)` (ONNX RoiAlign): x (N, C, H, W),
  rois (R, 4) as (x1, y1, x2, y2), batch_indices (R,); result (R, C,
  output_height, output_width): per bin the average (or the max, each
  sample being the largest of its four weighted corners, as the ONNX
  reference and ONNX Runtime do) of a sampling_ratio x sampling_ratio grid
  of bilinear samples. sampling_ratio 0 (an adaptive grid) is not
  supported.
"""

from __future__ import annotations

import itertools

import numpy as np

from ..ir.shape import as_expr, floordiv
from ..ir.types import TensorType, shape_str
from .registry import REQUIRED, Op, RuleError, register
from .rules import check_equal, float_dtype, tensor

GRID_MODES = ("linear", "nearest", "cubic")
PADDING_MODES = ("zeros", "border", "reflection")
ROI_MODES = ("avg", "max")
ROI_COORDINATES = ("half_pixel", "output_half_pixel")
CUBIC_ALPHA = -0.75


# ----------------------------------------------------------------- grid_sample

def _grid_sample_rule(types, attrs):
    x, grid = tensor(types[0], 0), tensor(types[1], 1)
    float_dtype(x, 0)
    if grid.dtype != x.dtype:
        raise RuleError(f"grid dtype {grid.dtype} differs from input dtype {x.dtype}")
    r = len(x.shape) - 2
    if r < 1:
        raise RuleError(f"the input must have rank >= 3 (N, C, spatial...), got rank {len(x.shape)}")
    if len(grid.shape) != r + 2 or grid.shape[-1] != as_expr(r):
        raise RuleError(f"grid must have shape (N, {r} output dims, {r}), got {shape_str(grid.shape)}")
    check_equal(grid.shape[0], x.shape[0], "grid and input batch differ")
    if attrs["mode"] not in GRID_MODES:
        raise RuleError(f"mode {attrs['mode']!r} is not one of {', '.join(GRID_MODES)}")
    if attrs["padding_mode"] not in PADDING_MODES:
        raise RuleError(f"padding_mode {attrs['padding_mode']!r} is not one of {', '.join(PADDING_MODES)}")
    return TensorType((x.shape[0], x.shape[1]) + tuple(grid.shape[1:-1]), x.dtype)


def reflect(v, lo, hi):
    """v folded into [lo, hi] by reflection at its ends (any distance away)."""
    span = hi - lo
    if span <= 0:
        return np.full_like(v, lo)
    below, above = v < lo, v > hi
    dx = np.where(below, lo - v, v - hi)
    n = np.floor(dx / span)
    r = dx - n * span
    even = n % 2 == 0
    folded = np.where(below, np.where(even, lo + r, hi - r), np.where(even, hi - r, lo + r))
    return np.where(below | above, folded, v)


def cubic_weights(f):
    """The four Keys (alpha -0.75) weights of taps -1, 0, 1, 2 at fraction f."""
    a, x = CUBIC_ALPHA, np.abs(f)
    return [((a * (x + 1) - 5 * a) * (x + 1) + 8 * a) * (x + 1) - 4 * a,
            ((a + 2) * x - (a + 3)) * x * x + 1,
            ((a + 2) * (1 - x) - (a + 3)) * (1 - x) * (1 - x) + 1,
            ((a * (2 - x) - 5 * a) * (2 - x) + 8 * a) * (2 - x) - 4 * a]


def grid_taps(coord, d, mode, padding_mode, align_corners):
    """Per tap of one spatial axis: (index into the axis, weight, inside)
    for the denormalized coordinates `coord` (float64 arrays)."""
    lo, hi = (0.0, d - 1.0) if align_corners else (-0.5, d - 0.5)
    if mode == "nearest":
        coord = np.rint(coord)
    if padding_mode == "border" and mode != "cubic":
        coord = np.where((coord < lo) | (coord > hi), np.clip(coord, 0, d - 1), coord)
    elif padding_mode == "reflection":
        coord = reflect(coord, lo, hi)
    if mode == "nearest":
        taps = [(np.trunc(coord), np.ones_like(coord))]
    else:
        base = np.floor(coord)
        f = coord - base
        if mode == "linear":
            taps = [(base, 1 - f), (base + 1, f)]
        else:
            taps = [(base + t - 1, w) for t, w in enumerate(cubic_weights(f))]
    out = []
    for t, w in taps:
        if padding_mode == "zeros":
            inside = (t >= 0) & (t < d)
        else:
            t = np.clip(t, 0, d - 1) if padding_mode == "border" else np.trunc(reflect(t, lo, hi))
            inside = np.ones(t.shape, bool)
        out.append((np.clip(t, 0, d - 1).astype(np.int64), w, inside))
    return out


def denormalize(g, d, align_corners):
    return (g + 1) / 2 * (d - 1) if align_corners else ((g + 1) * d - 1) / 2


def _grid_sample_ref(x, grid, mode, padding_mode, align_corners):
    r = x.ndim - 2
    n = grid.shape[0]
    dims = x.shape[2:]
    per_axis = [grid_taps(denormalize(grid[..., r - 1 - i].astype(np.float64), dims[i], align_corners),
                          dims[i], mode, padding_mode, align_corners) for i in range(r)]
    channels_last = np.moveaxis(x, 1, -1).astype(np.float64)       # (N, D..., C)
    batch = np.arange(n).reshape((n,) + (1,) * r)
    out = np.zeros(grid.shape[:-1] + (x.shape[1],))
    for combo in itertools.product(*per_axis):
        weight, inside = np.ones(grid.shape[:-1]), np.ones(grid.shape[:-1], bool)
        for _, w, tap_inside in combo:
            weight, inside = weight * w, inside & tap_inside
        pixel = channels_last[(batch,) + tuple(t for t, _, _ in combo)]
        out += np.where(inside[..., None], weight[..., None] * pixel, 0.0)
    return np.moveaxis(out, -1, 1).astype(x.dtype)


register(Op("grid_sample", _grid_sample_rule, _grid_sample_ref,
            attrs={"mode": "linear", "padding_mode": "zeros", "align_corners": False},
            kind="opaque", num_args=(2, 2)))


# ------------------------------------------------------------------- roi_align

def _roi_align_rule(types, attrs):
    x, rois, bi = tensor(types[0], 0), tensor(types[1], 1), tensor(types[2], 2)
    float_dtype(x, 0)
    if len(x.shape) != 4:
        raise RuleError(f"the input must have rank 4 (N, C, H, W), got rank {len(x.shape)}")
    if rois.dtype != x.dtype or len(rois.shape) != 2 or rois.shape[1] != as_expr(4):
        raise RuleError(f"rois must be ({x.dtype}) of shape (num_rois, 4), got {rois}")
    if bi.dtype not in ("int32", "int64") or len(bi.shape) != 1:
        raise RuleError(f"batch_indices must be 1-D int64, got {bi}")
    check_equal(bi.shape[0], rois.shape[0], "batch_indices and rois differ in length")
    if attrs["mode"] not in ROI_MODES:
        raise RuleError(f"mode {attrs['mode']!r} is not avg or max")
    if attrs["coordinate_transformation_mode"] not in ROI_COORDINATES:
        raise RuleError(f"coordinate_transformation_mode {attrs['coordinate_transformation_mode']!r} "
                        "is not half_pixel or output_half_pixel")
    for name in ("output_height", "output_width", "sampling_ratio"):
        v = attrs[name]
        if not isinstance(v, int) or isinstance(v, bool) or v < 1:
            raise RuleError(f"{name} must be a positive integer, got {v!r}")
    return TensorType((rois.shape[0], x.shape[1], attrs["output_height"], attrs["output_width"]), x.dtype)


def roi_sample_axis(start, bin_size, out_len, s, size):
    """Per sample of one axis (shape (R, out_len * s)): the low and high
    index, the weight of the high one and whether the sample is inside
    [-1, size]."""
    p = np.arange(out_len)[:, None]
    k = np.arange(s)[None, :]
    pos = start[:, None, None] + p * bin_size[:, None, None] + (k + 0.5) * bin_size[:, None, None] / s
    pos = pos.reshape(len(start), -1)
    inside = (pos >= -1.0) & (pos <= size)
    pos = np.maximum(pos, 0.0)
    low = np.trunc(pos)
    at_edge = low >= size - 1
    low = np.where(at_edge, size - 1, low)
    high = np.where(at_edge, size - 1, low + 1)
    frac = np.where(at_edge, 0.0, pos - low)
    return low.astype(np.int64), high.astype(np.int64), frac, inside


def roi_boxes(rois, spatial_scale, half_pixel):
    offset = 0.5 if half_pixel else 0.0
    start = rois.astype(np.float64) * spatial_scale - offset
    x1, y1, x2, y2 = start.T
    w, h = x2 - x1, y2 - y1
    if not half_pixel:
        w, h = np.maximum(w, 1.0), np.maximum(h, 1.0)
    return x1, y1, w, h


def _roi_align_ref(x, rois, batch_indices, mode, output_height, output_width, sampling_ratio, spatial_scale,
                   coordinate_transformation_mode):
    s = sampling_ratio
    n_rois, (height, width) = rois.shape[0], x.shape[2:]
    x1, y1, w, h = roi_boxes(rois, spatial_scale, coordinate_transformation_mode == "half_pixel")
    ylo, yhi, ly, yin = roi_sample_axis(y1, h / output_height, output_height, s, height)
    xlo, xhi, lx, xin = roi_sample_axis(x1, w / output_width, output_width, s, width)
    b = batch_indices.astype(np.int64)
    if n_rois and (b.min() < 0 or b.max() >= x.shape[0]):
        raise IndexError(f"batch index out of range [0, {x.shape[0]})")
    img = x.astype(np.float64)[b]                                   # (R, C, H, W)
    rr = np.arange(n_rois)[:, None, None]
    ok = (yin[:, :, None] & xin[:, None, :])[:, None]               # (R, 1, Y, X)
    corners = []
    for yi, wy in ((ylo, 1 - ly), (yhi, ly)):
        for xi, wx in ((xlo, 1 - lx), (xhi, lx)):
            weight = (wy[:, :, None] * wx[:, None, :])[:, None]
            pixel = np.moveaxis(img[rr, :, yi[:, :, None], xi[:, None, :]], -1, 1)   # (R, C, Y, X)
            corners.append(np.where(ok, weight * pixel, 0.0))
    c = x.shape[1]
    shape = (n_rois, c, output_height, s, output_width, s)
    if mode == "avg":
        out = sum(corners).reshape(shape).sum(axis=(3, 5)) / (s * s)
    else:
        out = np.maximum.reduce(corners).reshape(shape).max(axis=(3, 5))
    return out.astype(x.dtype)


register(Op("roi_align", _roi_align_rule, _roi_align_ref,
            attrs={"mode": "avg", "output_height": 1, "output_width": 1, "sampling_ratio": REQUIRED,
                   "spatial_scale": 1.0, "coordinate_transformation_mode": "half_pixel"},
            kind="opaque", num_args=(3, 3)))


# ------------------------------------------------------------- deform_conv2d

def deform_out_dim(size, kernel, stride, pad_begin, pad_end, dilation):
    return floordiv(as_expr(size) + pad_begin + pad_end - ((kernel - 1) * dilation + 1), stride) + 1


def _deform_conv_rule(types, attrs):
    x, w, off, bias, mask = (tensor(t, i) for i, t in enumerate(types))
    float_dtype(x, 0)
    if any(t.dtype != x.dtype for t in (w, off, bias, mask)):
        raise RuleError("weights, offsets, bias and mask must have the input's dtype " + x.dtype)
    if len(x.shape) != 4 or len(w.shape) != 4 or len(off.shape) != 4:
        raise RuleError("input, weights and offsets must have rank 4 (2-D deformable convolution)")
    group, og = attrs["group"], attrs["offset_group"]
    oc, cg, kh, kw = w.shape
    if not (oc.is_const and cg.is_const and kh.is_const and kw.is_const):
        raise RuleError(f"the weights' shape must be static, got {shape_str(w.shape)}")
    if group < 1 or og < 1 or oc.value % group:
        raise RuleError(f"group {group} must divide the {oc} output channels (and offset_group {og} be positive)")
    check_equal(x.shape[1], cg * group, f"input channels must be {cg} x group {group}")
    if not x.shape[1].is_const or x.shape[1].value % og:
        raise RuleError(f"offset_group {og} must divide the (static) input channels {x.shape[1]}")
    k = kh.value * kw.value
    check_equal(off.shape[1], as_expr(og * 2 * k), f"offsets need offset_group x 2 x {k} channels")
    check_equal(off.shape[0], x.shape[0], "offsets and input batch differ")
    (sh, sw), (dh, dw), pads = attrs["strides"], attrs["dilations"], attrs["pads"]
    for axis, (size, kk, s, d, pb, pe) in enumerate(((x.shape[2], kh.value, sh, dh, pads[0], pads[2]),
                                                    (x.shape[3], kw.value, sw, dw, pads[1], pads[3]))):
        check_equal(off.shape[2 + axis], deform_out_dim(size, kk, s, pb, pe, d),
                    f"offsets' spatial dim {axis} and the convolution's output")
    if len(bias.shape) != 1:
        raise RuleError(f"bias must be 1-D, got {shape_str(bias.shape)}")
    check_equal(bias.shape[0], oc, "bias and output channels differ")
    want = (off.shape[0], as_expr(og * k), off.shape[2], off.shape[3])
    if len(mask.shape) != 4:
        raise RuleError(f"mask must have shape {shape_str(want)}, got {shape_str(mask.shape)}")
    for a, b in zip(mask.shape, want):
        check_equal(a, b, f"mask must have shape {shape_str(want)}")
    return TensorType((x.shape[0], oc, off.shape[2], off.shape[3]), x.dtype)


def _bilinear_zeros(img, pos_h, pos_w):
    """img (N, C, H, W) sampled at float positions (N, C, ...): corners outside the image weigh 0."""
    n, c, height, width = img.shape
    nn = np.arange(n).reshape((n,) + (1,) * (pos_h.ndim - 1))
    cc = np.arange(c).reshape((1, c) + (1,) * (pos_h.ndim - 2))
    h0, w0 = np.floor(pos_h), np.floor(pos_w)
    out = np.zeros(pos_h.shape)
    for th, wh in ((h0, 1 - (pos_h - h0)), (h0 + 1, pos_h - h0)):
        for tw, ww in ((w0, 1 - (pos_w - w0)), (w0 + 1, pos_w - w0)):
            ok = (th >= 0) & (th < height) & (tw >= 0) & (tw < width)
            v = img[nn, cc, np.clip(th, 0, height - 1).astype(np.int64), np.clip(tw, 0, width - 1).astype(np.int64)]
            out += np.where(ok, wh * ww * v, 0.0)
    return out


def _deform_conv_ref(x, w, offset, bias, mask, strides, pads, dilations, group, offset_group):
    n, c = x.shape[:2]
    oc, cg, kh, kw = w.shape
    oh, ow = offset.shape[2:]
    off = offset.astype(np.float64).reshape(n, offset_group, kh, kw, 2, oh, ow)
    base_h = (np.arange(oh) * strides[0] - pads[0])[None, :, None] + (np.arange(kh) * dilations[0])[:, None, None]
    base_w = (np.arange(ow) * strides[1] - pads[1])[None, None, :] + (np.arange(kw) * dilations[1])[:, None, None]
    pos_h = base_h[None, None, :, None] + off[:, :, :, :, 0]          # (N, og, kH, kW, oH, oW)
    pos_w = base_w[None, None, None, :] + off[:, :, :, :, 1]
    og_of = np.arange(c) // (c // offset_group)
    cols = _bilinear_zeros(x.astype(np.float64), pos_h[:, og_of], pos_w[:, og_of])
    cols = cols * mask.astype(np.float64).reshape(n, offset_group, kh, kw, oh, ow)[:, og_of]
    cols = cols.reshape(n, group, cg, kh, kw, oh, ow)
    weights = w.astype(np.float64).reshape(group, oc // group, cg, kh, kw)
    out = np.einsum("ngckhyx,gockh->ngoyx", cols, weights).reshape(n, oc, oh, ow)
    return (out + bias.astype(np.float64)[None, :, None, None]).astype(x.dtype)


register(Op("deform_conv2d", _deform_conv_rule, _deform_conv_ref,
            attrs={"strides": (1, 1), "pads": (0, 0, 0, 0), "dilations": (1, 1), "group": 1, "offset_group": 1},
            kind="opaque", num_args=(5, 5)))
