"""Neural-network operators on channel-first tensors: convolution, transposed
convolution and max / average pooling over 2-D (NCHW: conv2d,
conv2d_transpose, max_pool2d, avg_pool2d) and 3-D (NCDHW: conv3d,
conv3d_transpose, max_pool3d, avg_pool3d) spatial axes, and softmax.

The 2-D and 3-D operators share one type rule and one numpy reference per
kind, generic over the spatial rank `nd`. Per-axis attributes have `nd`
entries; padding lists all begins, then all ends, like ONNX pads:
(top, left, bottom, right) in 2-D, (front, top, left, back, bottom, right)
in 3-D. Output sizes are symbolic expressions of the input sizes, per axis
`(h + pad_begin + pad_end - dilation * (k - 1) - 1) // stride + 1`, and for
the transposed convolution
`stride * (h - 1) + output_padding + dilation * (k - 1) + 1 - pad_begin - pad_end`.
The builders of the transposed convolutions and of the 3-D operators are
exported from `op.norm`."""

from __future__ import annotations

import itertools
from functools import partial

import numpy as np

from ..ir.shape import Proof, as_expr, min_expr, prove_lt
from ..ir.types import TensorType
from .registry import REQUIRED, Op, RuleError, register
from .rules import check_equal, float_dtype, int_tuple, normalize_axis, same_dtype, tensor

# per spatial rank: data layout, convolution weight layout, padding order
_LAYOUT = {2: ("NCHW", "OIHW", "(top, left, bottom, right)"),
           3: ("NCDHW", "OIDHW", "(front, top, left, back, bottom, right)")}
_AXIS_NAMES = ("depth", "height", "width")


def window_out_dim(size, k, stride, pad_begin, pad_end, dilation, ceil_mode=False):
    """Output length of a sliding window, symbolic or concrete (PyTorch/ONNX rule)."""
    span = as_expr(size) + pad_begin + pad_end - dilation * (k - 1) - 1
    if not ceil_mode:
        return span // stride + 1
    out = (span + stride - 1) // stride + 1
    # the last window must start inside the input or its leading padding
    return min_expr(out, (as_expr(size) + pad_begin - 1) // stride + 1)


def transpose_out_dim(size, k, stride, pad_begin, pad_end, dilation, output_padding):
    """Output length of a transposed convolution (ONNX ConvTranspose rule)."""
    return stride * (as_expr(size) - 1) + output_padding + dilation * (k - 1) + 1 - pad_begin - pad_end


def _window_attrs(attrs, kernel_key, nd):
    kernel = int_tuple(attrs[kernel_key], nd, kernel_key)
    strides = int_tuple(attrs["strides"] if attrs["strides"] is not None else kernel, nd, "strides")
    padding = int_tuple(attrs["padding"], 2 * nd, f"padding {_LAYOUT[nd][2]}")
    dilation = int_tuple(attrs["dilation"], nd, "dilation")
    if min(strides) < 1 or min(dilation) < 1 or min(kernel) < 1:
        raise RuleError(f"kernel {kernel}, strides {strides} and dilation {dilation} must be positive")
    if min(padding) < 0:
        raise RuleError(f"padding {padding} must not be negative")
    return kernel, strides, padding, dilation


def _out_sizes(size, kernel, strides, padding, dilation, ceil_mode=False):
    """Per spatial axis, the number of window positions (symbolic or concrete)."""
    nd = len(kernel)
    return tuple(window_out_dim(size[i], kernel[i], strides[i], padding[i], padding[nd + i],
                                dilation[i], ceil_mode) for i in range(nd))


def _tap_slices(tap, dilation, strides, count):
    """Per spatial axis, the elements that kernel tap `tap` meets at `count` window positions."""
    return tuple(slice(t * d, t * d + s * (c - 1) + 1, s) for t, d, s, c in zip(tap, dilation, strides, count))


def _taps(kernel):
    return itertools.product(*(range(k) for k in kernel))


def _check_ranks(x, w, nd, weight_layout):
    if len(x.shape) != nd + 2 or len(w.shape) != nd + 2:
        raise RuleError(f"input must be {_LAYOUT[nd][0]} (rank {nd + 2}) and weight {weight_layout} "
                        f"(rank {nd + 2}), got ranks {len(x.shape)} and {len(w.shape)}")


def _check_groups(groups):
    if not isinstance(groups, int) or groups < 1:
        raise RuleError(f"groups must be a positive integer, got {groups!r}")


def _conv_rule(nd, types, attrs):
    x, w = tensor(types[0], 0), tensor(types[1], 1)
    dtype = same_dtype([x, w])
    _check_ranks(x, w, nd, _LAYOUT[nd][1])
    groups = attrs["groups"]
    _check_groups(groups)
    _, strides, padding, dilation = _window_attrs({**attrs, "kernel": (1,) * nd}, "kernel", nd)
    check_equal(x.shape[1], w.shape[1] * groups, "input channels differ from weight channels * groups")
    if w.shape[0].is_const and w.shape[0].value % groups:
        raise RuleError(f"output channels {w.shape[0]} not divisible by groups {groups}")
    out = _out_sizes(x.shape[2:], w.shape[2:], strides, padding, dilation)
    return TensorType((x.shape[0], w.shape[0], *out), dtype)


def _conv_ref(x, w, strides, padding, dilation, groups):
    """Sum, over kernel taps, each tap's weights times the input it meets."""
    (n, c, *size), (o, cg, *kernel) = x.shape, w.shape
    nd = len(size)
    if c != cg * groups:
        raise ValueError(f"conv{nd}d: input has {c} channels, weight expects {cg} x {groups} groups")
    out = [int(d) for d in _out_sizes(size, kernel, strides, padding, dilation)]
    acc = np.float64 if x.dtype.kind == "f" else np.int64
    xp = np.pad(x.astype(acc), [(0, 0), (0, 0), *zip(padding[:nd], padding[nd:])])
    xg = xp.reshape(n, groups, cg, *xp.shape[2:])
    wg = w.astype(acc).reshape(groups, o // groups, cg, *kernel)
    y = np.zeros((n, groups, o // groups, *out), acc)
    for tap in _taps(kernel):
        patch = xg[(..., *_tap_slices(tap, dilation, strides, out))]
        y += np.einsum("ngc...,goc->ngo...", patch, wg[(..., *tap)], optimize=True)
    return y.reshape(n, o, *out).astype(x.dtype)


def _conv_transpose_rule(nd, types, attrs):
    x, w = tensor(types[0], 0), tensor(types[1], 1)
    dtype = same_dtype([x, w])
    _check_ranks(x, w, nd, f"(C_in, C_out/groups, {', '.join('k' + a for a in _LAYOUT[nd][0][2:])})")
    groups = attrs["groups"]
    _check_groups(groups)
    _, strides, padding, dilation = _window_attrs({**attrs, "kernel": (1,) * nd}, "kernel", nd)
    out_pad = int_tuple(attrs["output_padding"], nd, "output_padding")
    if min(out_pad) < 0 or any(p >= max(s, d) for p, s, d in zip(out_pad, strides, dilation)):
        raise RuleError(f"output_padding {out_pad} must be non-negative and below max(stride, dilation) "
                        f"per axis (strides {strides}, dilation {dilation})")
    check_equal(x.shape[1], w.shape[0], "input channels differ from weight input channels")
    if w.shape[0].is_const and w.shape[0].value % groups:
        raise RuleError(f"input channels {w.shape[0]} not divisible by groups {groups}")
    out = []
    for i, name in enumerate(_AXIS_NAMES[-nd:]):
        d = transpose_out_dim(x.shape[2 + i], w.shape[2 + i], strides[i], padding[i],
                              padding[nd + i], dilation[i], out_pad[i])
        if prove_lt(d, 1) is Proof.YES:
            raise RuleError(f"output {name} {d} is not positive")
        out.append(d)
    return TensorType((x.shape[0], w.shape[1] * groups, *out), dtype)


def _conv_transpose_ref(x, w, strides, padding, output_padding, dilation, groups):
    """Scatter each input element times each kernel tap onto a canvas, then crop the padding."""
    (n, c, *size), (cin, og, *kernel) = x.shape, w.shape
    nd = len(size)
    if c != cin or c % groups:
        raise ValueError(f"conv{nd}d_transpose: input has {c} channels, weight {cin} in {groups} groups")
    canvas_size = [int(transpose_out_dim(size[i], kernel[i], strides[i], 0, 0, dilation[i], output_padding[i]))
                   for i in range(nd)]
    if any(canvas_size[i] - padding[i] - padding[nd + i] < 1 for i in range(nd)):
        raise ValueError(f"conv{nd}d_transpose: the padding leaves no output")
    acc = np.float64 if x.dtype.kind == "f" else np.int64
    xg = x.astype(acc).reshape(n, groups, c // groups, *size)
    wg = w.astype(acc).reshape(groups, c // groups, og, *kernel)
    canvas = np.zeros((n, groups, og, *canvas_size), acc)
    for tap in _taps(kernel):
        canvas[(..., *_tap_slices(tap, dilation, strides, size))] += \
            np.einsum("ngc...,gco->ngo...", xg, wg[(..., *tap)], optimize=True)
    out = canvas[(..., *(slice(padding[i], canvas_size[i] - padding[nd + i]) for i in range(nd)))]
    return out.reshape(n, groups * og, *out.shape[3:]).astype(x.dtype)


def _pool_rule(nd, types, attrs):
    x = tensor(types[0], 0)
    if len(x.shape) != nd + 2:
        raise RuleError(f"input must be {_LAYOUT[nd][0]} (rank {nd + 2}), got rank {len(x.shape)}")
    kernel, strides, padding, dilation = _window_attrs(attrs, "kernel_size", nd)
    out = _out_sizes(x.shape[2:], kernel, strides, padding, dilation, attrs["ceil_mode"])
    return TensorType((x.shape[0], x.shape[1], *out), x.dtype)


def _pool_windows(x, attrs, fill):
    """Every window element as a leading axis: (prod(kernel), n, c, *out), plus
    masks of which window elements lie inside the input and which inside the
    declared padding (the others lie past it, in ceil mode only)."""
    nd = x.ndim - 2
    kernel, strides, padding, dilation = _window_attrs(attrs, "kernel_size", nd)
    size, begin, end = x.shape[2:], padding[:nd], padding[nd:]
    out = [int(d) for d in _out_sizes(size, kernel, strides, padding, dilation, attrs["ceil_mode"])]
    need = [max(s * (o - 1) + d * (k - 1) + 1 - (z + b), e)
            for s, o, d, k, z, b, e in zip(strides, out, dilation, kernel, size, begin, end)]
    xp = np.pad(x, [(0, 0), (0, 0), *zip(begin, need)], constant_values=fill)
    inside = np.pad(np.ones(size), list(zip(begin, need)))
    declared = np.pad(np.ones([z + b + e for z, b, e in zip(size, begin, end)]),
                      [(0, m - e) for m, e in zip(need, end)])
    wins, in_masks, decl_masks = [], [], []
    for tap in _taps(kernel):
        at = _tap_slices(tap, dilation, strides, out)
        wins.append(xp[(..., *at)])
        in_masks.append(inside[at])
        decl_masks.append(declared[at])
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


def _register_spatial(nd):
    """conv{nd}d, conv{nd}d_transpose, max_pool{nd}d and avg_pool{nd}d."""
    ones, no_padding = (1,) * nd, (0,) * (2 * nd)
    window = {"strides": None, "padding": no_padding, "dilation": ones, "ceil_mode": False}
    register(Op(f"conv{nd}d", partial(_conv_rule, nd), _conv_ref,
                attrs={"strides": ones, "padding": no_padding, "dilation": ones, "groups": 1},
                kind="opaque", num_args=(2, 2)))
    register(Op(f"conv{nd}d_transpose", partial(_conv_transpose_rule, nd), _conv_transpose_ref,
                attrs={"strides": ones, "padding": no_padding, "output_padding": (0,) * nd,
                       "dilation": ones, "groups": 1},
                kind="opaque", num_args=(2, 2)))
    register(Op(f"max_pool{nd}d", partial(_pool_rule, nd), _max_pool_ref,
                attrs={"kernel_size": REQUIRED, **window}, kind="opaque"))
    register(Op(f"avg_pool{nd}d", partial(_pool_rule, nd), _avg_pool_ref,
                attrs={"kernel_size": REQUIRED, **window, "count_include_pad": False}, kind="opaque"))


_register_spatial(2)
_register_spatial(3)
register(Op("softmax", _softmax_rule, _softmax_ref, attrs={"axis": -1}, kind="opaque"))
