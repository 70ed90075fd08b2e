"""Neural-network operators on NCHW tensors: conv2d, conv2d_transpose,
max_pool2d, avg_pool2d, softmax. Output sizes are symbolic expressions of the
input sizes: `(h + pad_top + pad_bottom - dilation * (k - 1) - 1) // stride + 1`,
and for the transposed convolution
`stride * (h - 1) + output_padding + dilation * (k - 1) + 1 - pad_top - pad_bottom`.
The builder of conv2d_transpose is exported from `op.norm`."""

from __future__ import annotations

import numpy as np

from ..ir.shape import Proof, as_expr, min_expr, prove_lt
from ..ir.types import TensorType
from .registry import REQUIRED, Op, RuleError, register
from .rules import check_equal, float_dtype, int_tuple, normalize_axis, same_dtype, tensor


def window_out_dim(size, k, stride, pad_begin, pad_end, dilation, ceil_mode=False):
    """Output length of a sliding window, symbolic or concrete (PyTorch/ONNX rule)."""
    span = as_expr(size) + pad_begin + pad_end - dilation * (k - 1) - 1
    if not ceil_mode:
        return span // stride + 1
    out = (span + stride - 1) // stride + 1
    # the last window must start inside the input or its leading padding
    return min_expr(out, (as_expr(size) + pad_begin - 1) // stride + 1)


def _window_attrs(attrs, kernel_key):
    kernel = int_tuple(attrs[kernel_key], 2, kernel_key)
    strides = int_tuple(attrs["strides"] if attrs["strides"] is not None else kernel, 2, "strides")
    padding = int_tuple(attrs["padding"], 4, "padding (top, left, bottom, right)")
    dilation = int_tuple(attrs["dilation"], 2, "dilation")
    if min(strides) < 1 or min(dilation) < 1 or min(kernel) < 1:
        raise RuleError(f"kernel {kernel}, strides {strides} and dilation {dilation} must be positive")
    if min(padding) < 0:
        raise RuleError(f"padding {padding} must not be negative")
    return kernel, strides, padding, dilation


def _spatial_out(x, kernel, strides, padding, dilation, ceil_mode=False):
    h, w = x.shape[2], x.shape[3]
    oh = window_out_dim(h, kernel[0], strides[0], padding[0], padding[2], dilation[0], ceil_mode)
    ow = window_out_dim(w, kernel[1], strides[1], padding[1], padding[3], dilation[1], ceil_mode)
    return oh, ow


def _conv2d_rule(types, attrs):
    x, w = tensor(types[0], 0), tensor(types[1], 1)
    dtype = same_dtype([x, w])
    if len(x.shape) != 4 or len(w.shape) != 4:
        raise RuleError(f"input must be NCHW (rank 4) and weight OIHW (rank 4), got ranks {len(x.shape)} and {len(w.shape)}")
    groups = attrs["groups"]
    if not isinstance(groups, int) or groups < 1:
        raise RuleError(f"groups must be a positive integer, got {groups!r}")
    _, strides, padding, dilation = _window_attrs({**attrs, "kernel": (1, 1)}, "kernel")
    kernel = (w.shape[2], w.shape[3])
    check_equal(x.shape[1], w.shape[1] * groups, "input channels differ from weight channels * groups")
    if w.shape[0].is_const and w.shape[0].value % groups:
        raise RuleError(f"output channels {w.shape[0]} not divisible by groups {groups}")
    oh, ow = _spatial_out(x, kernel, strides, padding, dilation)
    return TensorType((x.shape[0], w.shape[0], oh, ow), dtype)


def _conv2d_ref(x, w, strides, padding, dilation, groups):
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    if c != cg * groups:
        raise ValueError(f"conv2d: input has {c} channels, weight expects {cg} x {groups} groups")
    pt, pl, pb, pr = padding
    sh, sw = strides
    dh, dw = dilation
    oh = (h + pt + pb - dh * (kh - 1) - 1) // sh + 1
    ow = (wd + pl + pr - dw * (kw - 1) - 1) // sw + 1
    acc = np.float64 if x.dtype.kind == "f" else np.int64
    xp = np.pad(x.astype(acc), ((0, 0), (0, 0), (pt, pb), (pl, pr)))
    xg = xp.reshape(n, groups, cg, xp.shape[2], xp.shape[3])
    wg = w.astype(acc).reshape(groups, o // groups, cg, kh, kw)
    out = np.zeros((n, groups, o // groups, oh, ow), acc)
    for i in range(kh):
        for j in range(kw):
            patch = xg[:, :, :, i * dh: i * dh + sh * (oh - 1) + 1: sh,
                       j * dw: j * dw + sw * (ow - 1) + 1: sw]
            out += np.einsum("ngchw,goc->ngohw", patch, wg[:, :, :, i, j], optimize=True)
    return out.reshape(n, o, oh, ow).astype(x.dtype)


def transpose_out_dim(size, k, stride, pad_begin, pad_end, dilation, output_padding):
    """Output length of a transposed convolution (ONNX ConvTranspose rule)."""
    return stride * (as_expr(size) - 1) + output_padding + dilation * (k - 1) + 1 - pad_begin - pad_end


def _conv2d_transpose_rule(types, attrs):
    x, w = tensor(types[0], 0), tensor(types[1], 1)
    dtype = same_dtype([x, w])
    if len(x.shape) != 4 or len(w.shape) != 4:
        raise RuleError(f"input must be NCHW (rank 4) and weight (C_in, C_out/groups, kH, kW) (rank 4), "
                        f"got ranks {len(x.shape)} and {len(w.shape)}")
    groups = attrs["groups"]
    if not isinstance(groups, int) or groups < 1:
        raise RuleError(f"groups must be a positive integer, got {groups!r}")
    _, strides, padding, dilation = _window_attrs({**attrs, "kernel": (1, 1)}, "kernel")
    out_pad = int_tuple(attrs["output_padding"], 2, "output_padding")
    if min(out_pad) < 0 or any(p >= max(s, d) for p, s, d in zip(out_pad, strides, dilation)):
        raise RuleError(f"output_padding {out_pad} must be non-negative and below max(stride, dilation) "
                        f"per axis (strides {strides}, dilation {dilation})")
    check_equal(x.shape[1], w.shape[0], "input channels differ from weight input channels")
    if w.shape[0].is_const and w.shape[0].value % groups:
        raise RuleError(f"input channels {w.shape[0]} not divisible by groups {groups}")
    out = []
    for axis in (0, 1):
        d = transpose_out_dim(x.shape[2 + axis], w.shape[2 + axis], strides[axis], padding[axis],
                              padding[2 + axis], dilation[axis], out_pad[axis])
        if prove_lt(d, 1) is Proof.YES:
            raise RuleError(f"output {'height' if axis == 0 else 'width'} {d} is not positive")
        out.append(d)
    return TensorType((x.shape[0], w.shape[1] * groups, *out), dtype)


def _conv2d_transpose_ref(x, w, strides, padding, output_padding, dilation, groups):
    """Scatter each input pixel times each kernel tap onto a canvas, then crop the padding."""
    n, c, h, wd = x.shape
    cin, og, kh, kw = w.shape
    if c != cin or c % groups:
        raise ValueError(f"conv2d_transpose: input has {c} channels, weight {cin} in {groups} groups")
    (sh, sw), (pt, pl, pb, pr), (dh, dw) = strides, padding, dilation
    canvas_h = sh * (h - 1) + dh * (kh - 1) + 1 + output_padding[0]
    canvas_w = sw * (wd - 1) + dw * (kw - 1) + 1 + output_padding[1]
    if canvas_h - pt - pb < 1 or canvas_w - pl - pr < 1:
        raise ValueError("conv2d_transpose: the padding leaves no output")
    acc = np.float64 if x.dtype.kind == "f" else np.int64
    xg = x.astype(acc).reshape(n, groups, c // groups, h, wd)
    wg = w.astype(acc).reshape(groups, c // groups, og, kh, kw)
    canvas = np.zeros((n, groups, og, canvas_h, canvas_w), acc)
    for i in range(kh):
        for j in range(kw):
            rows = slice(i * dh, i * dh + sh * (h - 1) + 1, sh)
            cols = slice(j * dw, j * dw + sw * (wd - 1) + 1, sw)
            canvas[..., rows, cols] += np.einsum("ngchw,gco->ngohw", xg, wg[..., i, j], optimize=True)
    out = canvas[..., pt:canvas_h - pb, pl:canvas_w - pr]
    return out.reshape(n, groups * og, *out.shape[-2:]).astype(x.dtype)


def _pool_rule(types, attrs):
    x = tensor(types[0], 0)
    if len(x.shape) != 4:
        raise RuleError(f"input must be NCHW (rank 4), got rank {len(x.shape)}")
    kernel, strides, padding, dilation = _window_attrs(attrs, "kernel_size")
    oh, ow = _spatial_out(x, kernel, strides, padding, dilation, attrs["ceil_mode"])
    return TensorType((x.shape[0], x.shape[1], oh, ow), x.dtype)


def _pool_windows(x, attrs, fill):
    """Every window as a leading axis: (kh*kw, n, c, oh, ow), plus a mask of
    which window elements lie inside the input (1), the declared padding
    (pad_value) or past it (0, ceil mode only)."""
    kernel, strides, padding, dilation = _window_attrs(attrs, "kernel_size")
    (kh, kw), (sh, sw), (pt, pl, pb, pr), (dh, dw) = kernel, strides, padding, dilation
    n, c, h, w = x.shape
    oh = int(window_out_dim(h, kh, sh, pt, pb, dh, attrs["ceil_mode"]))
    ow = int(window_out_dim(w, kw, sw, pl, pr, dw, attrs["ceil_mode"]))
    need_h = max(sh * (oh - 1) + dh * (kh - 1) + 1 - (h + pt), pb)
    need_w = max(sw * (ow - 1) + dw * (kw - 1) + 1 - (w + pl), pr)
    xp = np.pad(x, ((0, 0), (0, 0), (pt, need_h), (pl, need_w)), constant_values=fill)
    inside = np.pad(np.ones((h, w)), ((pt, need_h), (pl, need_w)))
    declared = np.pad(np.ones((h + pt + pb, w + pl + pr)), ((0, need_h - pb), (0, need_w - pr)))
    wins, in_masks, decl_masks = [], [], []
    for i in range(kh):
        for j in range(kw):
            rows = slice(i * dh, i * dh + sh * (oh - 1) + 1, sh)
            cols = slice(j * dw, j * dw + sw * (ow - 1) + 1, sw)
            wins.append(xp[:, :, rows, cols])
            in_masks.append(inside[rows, cols])
            decl_masks.append(declared[rows, cols])
    return np.stack(wins), np.stack(in_masks), np.stack(decl_masks)


def _max_pool_ref(x, **attrs):
    fill = -np.inf if x.dtype.kind == "f" else np.iinfo(x.dtype).min
    wins, _, _ = _pool_windows(x, attrs, fill)
    return wins.max(axis=0).astype(x.dtype)


def _avg_pool_ref(x, **attrs):
    wins, inside, declared = _pool_windows(x.astype(np.float64), attrs, 0.0)
    count = (declared if attrs["count_include_pad"] else inside).sum(axis=0)
    return (wins.sum(axis=0) / count).astype(x.dtype)


def _softmax_rule(types, attrs):
    x = tensor(types[0], 0)
    float_dtype(x)
    normalize_axis(attrs["axis"], len(x.shape))
    return x


def _softmax_ref(x, axis):
    x64 = x.astype(np.float64)
    e = np.exp(x64 - x64.max(axis=axis, keepdims=True))
    return (e / e.sum(axis=axis, keepdims=True)).astype(x.dtype)


_WINDOW_ATTRS = {"strides": None, "padding": (0, 0, 0, 0), "dilation": (1, 1), "ceil_mode": False}

register(Op("conv2d", _conv2d_rule, _conv2d_ref,
            attrs={"strides": (1, 1), "padding": (0, 0, 0, 0), "dilation": (1, 1), "groups": 1},
            kind="opaque", num_args=(2, 2)))
register(Op("conv2d_transpose", _conv2d_transpose_rule, _conv2d_transpose_ref,
            attrs={"strides": (1, 1), "padding": (0, 0, 0, 0), "output_padding": (0, 0),
                   "dilation": (1, 1), "groups": 1},
            kind="opaque", num_args=(2, 2)))
register(Op("max_pool2d", _pool_rule, _max_pool_ref,
            attrs={"kernel_size": REQUIRED, **_WINDOW_ATTRS}, kind="opaque"))
register(Op("avg_pool2d", _pool_rule, _avg_pool_ref,
            attrs={"kernel_size": REQUIRED, **_WINDOW_ATTRS, "count_include_pad": False},
            kind="opaque"))
register(Op("softmax", _softmax_rule, _softmax_ref, attrs={"axis": -1}, kind="opaque"))
