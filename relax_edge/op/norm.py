"""Normalization operators with ONNX inference semantics: batch_norm (channel
axis 1, any rank >= 2), layer_norm (over axes [axis, rank), bias optional)
and log_softmax (one axis, opset-13 meaning). All inputs share one float
dtype. References compute in float64 and return the input dtype. Not
provided: training mode and ONNX's extra outputs (running mean/var,
LayerNormalization's Mean and InvStdDev). This module also exports the
builders of `conv2d_transpose` and of the 3-D (NCDHW) operators `conv3d`,
`conv3d_transpose`, `max_pool3d` and `avg_pool3d`, whose records live in
`op.nn` beside their 2-D forms.
"""

from __future__ import annotations

import numpy as np

from ..ir.types import TensorType, shape_str
from .registry import Op, RuleError, make_call, register
from .rules import check_equal, float_dtype, normalize_axis, same_dtype, tensor

__all__ = ["batch_norm", "layer_norm", "log_softmax", "conv2d_transpose",
           "conv3d", "conv3d_transpose", "max_pool3d", "avg_pool3d"]


def _batch_norm_rule(types, attrs):
    x = tensor(types[0], 0)
    params = [tensor(t, i) for i, t in enumerate(types[1:], start=1)]
    dtype = same_dtype([x, *params])
    float_dtype(x)
    if len(x.shape) < 2:
        raise RuleError(f"input must have rank >= 2 (N, C, ...), got {shape_str(x.shape)}")
    for i, (name, p) in enumerate(zip(("scale", "bias", "mean", "var"), params), start=1):
        if len(p.shape) != 1:
            raise RuleError(f"{name} (argument {i}) must have shape (C,), got {shape_str(p.shape)}")
        check_equal(p.shape[0], x.shape[1], f"{name} length differs from the channels of the input")
    return TensorType(x.shape, dtype)


def _batch_norm_ref(x, scale, bias, mean, var, epsilon):
    along_c = (1, -1) + (1,) * (x.ndim - 2)
    scale, bias, mean, var = (p.astype(np.float64).reshape(along_c) for p in (scale, bias, mean, var))
    y = (x.astype(np.float64) - mean) / np.sqrt(var + epsilon) * scale + bias
    return y.astype(x.dtype)


def _layer_norm_rule(types, attrs):
    x = tensor(types[0], 0)
    params = [tensor(t, i) for i, t in enumerate(types[1:], start=1)]
    dtype = same_dtype([x, *params])
    float_dtype(x)
    axis = normalize_axis(attrs["axis"], len(x.shape))
    normalized = x.shape[axis:]
    for name, p in zip(("scale", "bias"), params):
        if len(p.shape) > len(normalized):
            raise RuleError(f"{name} {shape_str(p.shape)} has more dims than the normalized "
                            f"shape {shape_str(normalized)}")
        for d, n in zip(reversed(p.shape), reversed(normalized)):
            if d != 1:
                check_equal(d, n, f"{name} {shape_str(p.shape)} does not broadcast to the "
                                  f"normalized shape {shape_str(normalized)}")
    return TensorType(x.shape, dtype)


def _layer_norm_ref(x, scale, bias=None, *, axis, epsilon):
    axes = tuple(range(axis % x.ndim, x.ndim))
    x64 = x.astype(np.float64)
    centered = x64 - x64.mean(axis=axes, keepdims=True)
    var = (centered * centered).mean(axis=axes, keepdims=True)
    y = centered / np.sqrt(var + epsilon) * scale.astype(np.float64)
    if bias is not None:
        y = y + bias.astype(np.float64)
    return y.astype(x.dtype)


def _log_softmax_rule(types, attrs):
    x = tensor(types[0], 0)
    float_dtype(x)
    normalize_axis(attrs["axis"], len(x.shape))
    return x


def _log_softmax_ref(x, axis):
    x64 = x.astype(np.float64)
    shifted = x64 - x64.max(axis=axis, keepdims=True)
    return (shifted - np.log(np.exp(shifted).sum(axis=axis, keepdims=True))).astype(x.dtype)


register(Op("batch_norm", _batch_norm_rule, _batch_norm_ref, attrs={"epsilon": 1e-5},
            kind="broadcast", num_args=(5, 5)))
register(Op("layer_norm", _layer_norm_rule, _layer_norm_ref, attrs={"axis": -1, "epsilon": 1e-5},
            kind="opaque", num_args=(2, 3)))
register(Op("log_softmax", _log_softmax_rule, _log_softmax_ref, attrs={"axis": -1}, kind="opaque"))


def batch_norm(x, scale, bias, mean, var, epsilon=1e-5, span=None):
    """Inference batch normalization over channel axis 1; parameters have shape (C,)."""
    return make_call("batch_norm", [x, scale, bias, mean, var], {"epsilon": epsilon}, span=span)


def layer_norm(x, scale, bias=None, axis=-1, epsilon=1e-5, span=None):
    """Normalize over axes [axis, rank); scale and bias broadcast to those axes."""
    args = [x, scale] if bias is None else [x, scale, bias]
    return make_call("layer_norm", args, {"axis": axis, "epsilon": epsilon}, span=span)


def log_softmax(x, axis=-1, span=None):
    return make_call("log_softmax", [x], {"axis": axis}, span=span)


def conv2d_transpose(x, weight, strides=(1, 1), padding=(0, 0, 0, 0), output_padding=(0, 0),
                     dilation=(1, 1), groups=1, span=None):
    """NCHW input, weight (C_in, C_out/groups, kH, kW); padding is (top, left, bottom, right)."""
    return make_call("conv2d_transpose", [x, weight],
                     {"strides": strides, "padding": padding, "output_padding": output_padding,
                      "dilation": dilation, "groups": groups}, span=span)


def conv3d(x, weight, strides=(1, 1, 1), padding=(0,) * 6, dilation=(1, 1, 1), groups=1, span=None):
    """NCDHW input, OIDHW weight; padding is (front, top, left, back, bottom, right)."""
    return make_call("conv3d", [x, weight], {"strides": strides, "padding": padding,
                                             "dilation": dilation, "groups": groups}, span=span)


def conv3d_transpose(x, weight, strides=(1, 1, 1), padding=(0,) * 6, output_padding=(0, 0, 0),
                     dilation=(1, 1, 1), groups=1, span=None):
    """NCDHW input, weight (C_in, C_out/groups, kD, kH, kW); padding is
    (front, top, left, back, bottom, right)."""
    return make_call("conv3d_transpose", [x, weight],
                     {"strides": strides, "padding": padding, "output_padding": output_padding,
                      "dilation": dilation, "groups": groups}, span=span)


def max_pool3d(x, kernel_size, strides=None, padding=(0,) * 6, dilation=(1, 1, 1),
               ceil_mode=False, span=None):
    """NCDHW input; strides default to the kernel size."""
    return make_call("max_pool3d", [x], {"kernel_size": kernel_size, "strides": strides,
                                         "padding": padding, "dilation": dilation,
                                         "ceil_mode": ceil_mode}, span=span)


def avg_pool3d(x, kernel_size, strides=None, padding=(0,) * 6, dilation=(1, 1, 1),
               ceil_mode=False, count_include_pad=False, span=None):
    """NCDHW input; strides default to the kernel size."""
    return make_call("avg_pool3d", [x], {"kernel_size": kernel_size, "strides": strides,
                                         "padding": padding, "dilation": dilation,
                                         "ceil_mode": ceil_mode,
                                         "count_include_pad": count_include_pad}, span=span)
