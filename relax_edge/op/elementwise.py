"""Elementwise operators: binary arithmetic with numpy broadcasting across
symbolic dims, and unary activations and math functions."""

from __future__ import annotations

import numpy as np

from ..ir.types import TensorType
from .registry import Op, register
from .rules import broadcast_shapes, float_dtype, same_dtype, tensor


def _binary_rule(types, attrs):
    a, b = tensor(types[0], 0), tensor(types[1], 1)
    dtype = same_dtype([a, b])
    return TensorType(broadcast_shapes(a.shape, b.shape), dtype)


def _unary_rule(types, attrs):
    t = tensor(types[0], 0, need_shape=False)
    return t


def _float_unary_rule(types, attrs):
    t = tensor(types[0], 0, need_shape=False)
    float_dtype(t)
    return t


def _divide(a, b):
    if np.issubdtype(a.dtype, np.integer):
        if np.any(b == 0):
            raise ZeroDivisionError("integer division by zero")
        q = np.abs(a) // np.abs(b)  # truncating division, as C and ONNX do
        return (np.sign(a) * np.sign(b) * q).astype(a.dtype)
    return np.divide(a, b).astype(a.dtype)


def _sigmoid(x):
    x64 = x.astype(np.float64)
    return (1.0 / (1.0 + np.exp(-x64))).astype(x.dtype)


def _same_dtype(fn):
    return lambda a, b, **attrs: fn(a, b).astype(a.dtype)


_BINARY = {
    "add": _same_dtype(np.add),
    "subtract": _same_dtype(np.subtract),
    "multiply": _same_dtype(np.multiply),
    "divide": lambda a, b, **attrs: _divide(a, b),
}

_UNARY = {
    "relu": (lambda x, **attrs: np.maximum(x, np.zeros((), x.dtype)), _unary_rule),
    "sigmoid": (lambda x, **attrs: _sigmoid(x), _float_unary_rule),
    "tanh": (lambda x, **attrs: np.tanh(x), _float_unary_rule),
    "exp": (lambda x, **attrs: np.exp(x), _float_unary_rule),
}

for _name, _ref in _BINARY.items():
    register(Op(_name, _binary_rule, _ref, kind="broadcast", num_args=(2, 2)))

for _name, (_ref, _rule) in _UNARY.items():
    register(Op(_name, _rule, _ref, kind="elementwise", num_args=(1, 1)))
