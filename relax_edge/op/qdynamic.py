"""Integer matmuls with 32-bit outputs: what ONNX Runtime's quantize_dynamic
makes of a MatMul, as single operators (transform/quantize_dynamic.py makes
them from the imported ONNX chains; library/qdynamic.py runs them on the
int8 GEMM of runtime_c/kernels/qgemm.c).

1. `matmul_integer(x, w, w_zero; x_zero)`: ONNX MatMulInteger with constant
   weights: int32 (..., N) = sum_k (x[..., k] - x_zero) * (w[n, k] -
   w_zero[n]) for x int8 / uint8 (..., K), w int8 (N, K), w_zero int32 (N,)
   in [-128, 127] (per column; uint8 or offset weights are re-centred into
   this form by the pass), x_zero a constant of x's type.
2. `dynamic_qdense(x, w, w_zero, w_scale[, bias]; has_bias)`: the chain
   DynamicQuantizeLinear(x) -> MatMulInteger -> Cast(float) -> Mul(x_scale
   * w_scale) [-> Add(bias)] for x float32 (..., K): x quantized to uint8
   over the whole tensor as DynamicQuantizeLinear defines it
   (`dynamic_quantize_linear` below), the matmul_integer of it with the
   dynamic zero point, then float32 (float)acc * (x_scale * w_scale[n])
   (+ bias[n]): the same float32 operations, in the same order, as the ONNX
   chain (ONNX Runtime with graph optimizations off gives the same bits).
   w_scale float32 (N,), bias float32 (N,).

The numpy references below are the definition; the C kernels
(runtime_c/kernels/qdynamic.c) are tested against them. The int32 sums are
exact for K * 255 * 255 < 2^31 (the kernels' limit; the reference wraps as
int32 arithmetic does beyond).
"""

from __future__ import annotations

import numpy as np

from ..ir.types import TensorType
from .registry import REQUIRED, Op, RuleError, register
from .rules import check_equal, tensor

__all__ = ["dynamic_quantize_linear", "matmul_integer_reference", "dynamic_qdense_reference"]

_RANGES = {"int8": (-128, 127), "uint8": (0, 255)}


def dynamic_quantize_linear(x):
    """(uint8 values, float32 scale, zero point) of ONNX DynamicQuantizeLinear (opset 11) over all of x."""
    x = np.asarray(x, np.float32)
    hi = np.maximum(np.float32(0), x.max(initial=np.float32(0)))
    lo = np.minimum(np.float32(0), x.min(initial=np.float32(0)))
    scale = np.float32(np.float32(1) if hi == lo else np.float32(hi - lo)) / np.float32(255)
    zero = np.rint(np.clip(np.float32(0) - lo / scale, np.float32(0), np.float32(255)))
    q = np.clip(np.rint(x / scale) + zero, 0, 255).astype(np.uint8)
    return q, np.float32(scale), int(zero)


def _accumulate(x, w, w_zero, x_zero):
    xi = np.asarray(x).astype(np.int64) - int(x_zero)
    wi = np.asarray(w).astype(np.int64) - np.asarray(w_zero, np.int64).reshape(-1, 1)
    return np.matmul(xi, wi.T).astype(np.int32)   # int32 wrap-around beyond int32, as ONNX's int32 matmul


def matmul_integer_reference(x, w, w_zero, *, x_zero):
    return _accumulate(x, w, w_zero, x_zero)


def dynamic_qdense_reference(x, w, w_zero, w_scale, *bias, has_bias=False):
    q, scale, zero = dynamic_quantize_linear(x)
    acc = _accumulate(q, w, w_zero, zero).astype(np.float32)
    out = acc * (scale * np.asarray(w_scale, np.float32))
    if has_bias:
        out = out + np.asarray(bias[0], np.float32)
    return out.astype(np.float32)


def _weights(types, first_index, what):
    """The (N, K) int8 weight and its int32 (N,) zero points; N."""
    w, z = tensor(types[0], first_index), tensor(types[1], first_index + 1)
    if w.dtype != "int8" or len(w.shape) != 2:
        raise RuleError(f"{what}: the weight must be int8 (N, K), got {w}")
    if z.dtype != "int32" or len(z.shape) != 1:
        raise RuleError(f"{what}: w_zero must be int32 (N,), got {z}")
    check_equal(z.shape[0], w.shape[0], f"{what}: w_zero's length differs from the weight's N")
    return w


def _matmul_integer_rule(types, attrs):
    x = tensor(types[0], 0)
    if x.dtype not in _RANGES or not x.shape:
        raise RuleError(f"matmul_integer: x must be int8 or uint8 (..., K), got {x}")
    w = _weights(types[1:], 1, "matmul_integer")
    check_equal(x.shape[-1], w.shape[1], "matmul_integer: x's last axis differs from the weight's K")
    lo, hi = _RANGES[x.dtype]
    zero = attrs["x_zero"]
    if not isinstance(zero, (int, np.integer)) or not lo <= int(zero) <= hi:
        raise RuleError(f"matmul_integer: x_zero {zero!r} is not an integer in x's range [{lo}, {hi}]")
    return TensorType((*x.shape[:-1], w.shape[0]), "int32")


def _dynamic_qdense_rule(types, attrs):
    x = tensor(types[0], 0)
    if x.dtype != "float32" or not x.shape:
        raise RuleError(f"dynamic_qdense: x must be float32 (..., K), got {x}")
    w = _weights(types[1:], 1, "dynamic_qdense")
    check_equal(x.shape[-1], w.shape[1], "dynamic_qdense: x's last axis differs from the weight's K")
    want = 5 if attrs["has_bias"] else 4
    if len(types) != want:
        raise RuleError(f"dynamic_qdense: {len(types)} arguments; has_bias={attrs['has_bias']} needs {want}")
    for index, name in ((3, "w_scale"), (4, "bias"))[:want - 3]:
        t = tensor(types[index], index)
        if t.dtype != "float32" or len(t.shape) != 1:
            raise RuleError(f"dynamic_qdense: {name} must be float32 (N,), got {t}")
        check_equal(t.shape[0], w.shape[0], f"dynamic_qdense: {name}'s length differs from the weight's N")
    return TensorType((*x.shape[:-1], w.shape[0]), "float32")


register(Op("matmul_integer", _matmul_integer_rule, matmul_integer_reference, attrs={"x_zero": REQUIRED},
            kind="opaque", num_args=(3, 3), doc="int8 x @ (w - w_zero)^T in int32 (MatMulInteger)"))
register(Op("dynamic_qdense", _dynamic_qdense_rule, dynamic_qdense_reference, attrs={"has_bias": False},
            kind="opaque", num_args=(4, 5),
            doc="x quantized dynamically to uint8, int8 GEMM, scaled to float32 (+ bias): quantize_dynamic's MatMul"))
