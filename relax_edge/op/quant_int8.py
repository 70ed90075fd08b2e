"""Integer (int8 / uint8) operators: what a statically quantized model
computes once its QuantizeLinear / DequantizeLinear pairs are folded away
(transform/quantize.py) or imported from ONNX Runtime's QOperator ops.

Requantization rescales an int32 accumulator by a real multiplier M > 0
held as `quantize_multiplier(M) = (q, shift)`: q in [2^30, 2^31) an int32,
shift in [-31, 30], M ~= q * 2^(shift - 31). qdense, qconv2d, qrequantize,
qmul and the pools round acc * q * 2^(shift - 31) once, half to even, in
int64 (`requantize_exact`; qdense and qconv2d saturate their accumulator to
int32 first, `requantize_accumulator`): the integer nearest the exact
product, as the float DequantizeLinear -> op -> QuantizeLinear of the ONNX
spec rounds it (to the precision of the 31-bit multiplier). The product is
exact: |acc| <= 2^31 and q < 2^31 give |acc * q| < 2^62, and the right
shift 31 - shift lies in [1, 62]; a positive shift (M >= 1) is only a
shorter right shift (nothing is shifted left, nothing saturates before the
final clamp). qadd alone keeps TFLite's (gemmlowp) arithmetic, bit for bit:
`requantize(acc, q, shift) = rdbpot(srdhm(acc * 2^max(shift, 0), q),
max(-shift, 0))` with srdhm the saturating rounding doubling high multiply
and rdbpot the rounding (half away from zero) divide by a power of two, the
left shift saturating to int32 (its final rescale therefore rounds twice).
Outputs are `clamp(requant(...) + out_zero, act_min, act_max)` cast to
out_dtype; [act_min, act_max] is out_dtype's range narrowed by a fused Relu
or Clip.

1. `qdense(x, w, bias, multiplier, shift; x_zero, w_zero, out_zero, out_dtype,
   act_min, act_max)`: x (..., K) int8/uint8, w (N, K) int8/uint8, bias int32
   (N,), multiplier / shift int32 (N,) (per output channel; per-tensor
   repeats the value). acc[m, n] = bias[n] + sum_k (x[m, k] - x_zero) *
   (w[n, k] - w_zero). Result (..., N).
2. `qconv2d(x, w, bias, multiplier, shift; strides, padding (top, left,
   bottom, right), dilation, groups, x_zero, w_zero, out_zero, out_dtype,
   act_min, act_max)`: x NCHW, w (O, C/groups, kh, kw); the padding holds
   x_zero (the real value 0). Depthwise is groups == C == O.
3. `qrequantize(x; in_zero, out_zero, multiplier, shift, out_dtype, act_min,
   act_max)`: a per-tensor rescale, acc = x - in_zero.
4. `qadd(a, b; ...)`: TFLite's int8 add: each input (x - zero) << 20 is
   rescaled by its own multiplier onto 2 * max(scale_a, scale_b), the sum by
   the output multiplier; numpy broadcasting. `qmul(a, b; ...)`: acc =
   (a - a_zero) * (b - b_zero), one multiplier scale_a * scale_b / scale_out.
5. `qglobal_avg_pool(x; x_zero, out_zero, multiplier, shift, out_dtype, ...)`:
   acc[n, c] = sum over the H * W window of (x - x_zero), the multiplier
   scale_x / (scale_out * H * W): (N, C, 1, 1). `qavg_pool2d(x; kernel_size,
   strides, padding, ...)` the same over windows without padding (every
   window has the same count). Max pooling needs no new operator:
   max_pool2d on int8 is exact (the quantize pass requantizes after it when
   the output scale differs).
6. `qlut(x, table)`: out = table[x - min(x.dtype)], a 256-entry table of the
   output dtype computed at compile time in float64 (`lut_table`): sigmoid,
   tanh, leaky_relu, ... of the dequantized input, quantized again.
7. `quantize(x, scale, zero; out_dtype, qmin, qmax, compute)` and
   `dequantize(x, scale, zero; out_dtype, compute)`: ONNX QuantizeLinear /
   DequantizeLinear with broadcastable scale and zero point (the frontend
   reshapes per-axis ones): clip(round_half_even(x / scale) + zero, qmin,
   qmax) and (x - zero) * scale, both in the float dtype `compute`. Int4 and
   int2 values are held in int8 / uint8 with [qmin, qmax] their range.
   These are what the quantize pass matches; it expands the ones it leaves
   into float arithmetic.

The numpy references below are the definition (the interpreter runs them).
"""

from __future__ import annotations

import math

import numpy as np

from ..ir.shape import Proof, as_expr, prove_equal
from ..ir.types import TensorType
from .nn import _out_sizes, _pool_windows, _window_attrs
from .registry import REQUIRED, Op, RuleError, register
from .rules import broadcast_shapes, check_equal, tensor

__all__ = ["quantize_multiplier", "srdhm", "rdbpot", "requantize", "requantize_exact", "requantize_accumulator",
           "qdense_reference",
           "qconv2d_reference", "lut_table", "add_multipliers", "QUANT_RANGES", "ADD_LEFT_SHIFT"]

INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1
QUANT_RANGES = {"int8": (-128, 127), "uint8": (0, 255)}
ADD_LEFT_SHIFT = 20
_Q8 = tuple(QUANT_RANGES)


# ------------------------------------------------------------------ fixed-point arithmetic (the definition)

def quantize_multiplier(real: float) -> tuple[int, int]:
    """(q, shift) with q in [2^30, 2^31) and real ~= q * 2^(shift - 31); (0, 0) for 0."""
    real = float(real)
    if real < 0 or not math.isfinite(real):
        raise ValueError(f"a requantization multiplier must be finite and non-negative, got {real}")
    if real == 0.0:
        return 0, 0
    frac, shift = math.frexp(real)
    q = int(round(frac * (1 << 31)))
    if q == 1 << 31:
        q //= 2
        shift += 1
    if shift < -31:
        return 0, 0
    return q, shift


def srdhm(a, b):
    """Saturating rounding doubling high multiply of int32 values (as int64 arrays)."""
    a, b = np.asarray(a, np.int64), np.asarray(b, np.int64)
    ab = a * b
    nudged = ab + np.where(ab >= 0, np.int64(1 << 30), np.int64(1 - (1 << 30)))
    high = np.where(nudged >= 0, nudged >> 31, -((-nudged) >> 31))    # C division: toward zero
    return np.where((a == INT32_MIN) & (b == INT32_MIN), np.int64(INT32_MAX), high)


def rdbpot(x, exponent):
    """x / 2^exponent rounded half away from zero (exponent >= 0)."""
    x, e = np.asarray(x, np.int64), np.asarray(exponent, np.int64)
    mask = (np.int64(1) << e) - 1
    rem = x & mask
    threshold = (mask >> 1) + (x < 0)
    return (x >> e) + (rem > threshold)


def requantize(acc, multiplier, shift):
    """TFLite's MultiplyByQuantizedMultiplier over int64 arrays holding int32 values; the left shift saturates."""
    acc, shift = np.asarray(acc, np.int64), np.asarray(shift, np.int64)
    left = np.maximum(shift, 0)
    scaled = np.clip(acc << left, INT32_MIN, INT32_MAX)
    return rdbpot(srdhm(scaled, multiplier), np.maximum(-shift, 0))


def requantize_exact(acc, multiplier, shift):
    """acc * q * 2^(shift - 31) rounded once, half to even, in int64 (|acc| <= 2^31, |q| <= 2^31, shift in
    [-31, 30]: the product is exact below 2^62). A multiplier that is a power of two (a pool's 1/4, equal
    scales) then rounds its exact halves as the float QuantizeLinear does."""
    acc, q = np.asarray(acc, np.int64), np.asarray(multiplier, np.int64)
    total = np.int64(31) - np.asarray(shift, np.int64)
    product = acc * q
    low = product >> total
    rem = product & ((np.int64(1) << total) - 1)
    half = np.int64(1) << (total - 1)
    return low + ((rem > half) | ((rem == half) & (low & 1 == 1)))


def requantize_accumulator(acc, multiplier, shift):
    """The rescale of qdense and qconv2d: the accumulator saturated to int32 (only a reduction far deeper than
    real layers reaches it), then `requantize_exact`. Shifts outside [-31, 30] are refused."""
    shift = np.asarray(shift, np.int64)
    if shift.size and (shift.min() < -31 or shift.max() > 30):
        bad = int(shift[(shift < -31) | (shift > 30)].flat[0])
        raise ValueError(f"a requantization shift must lie in [-31, 30], got {bad}")
    return requantize_exact(np.clip(np.asarray(acc, np.int64), INT32_MIN, INT32_MAX), multiplier, shift)


def _finish(value, out_zero, out_dtype, act_min, act_max):
    return np.clip(value + out_zero, *_act_range(out_dtype, act_min, act_max)).astype(out_dtype)


def add_multipliers(a_scale: float, b_scale: float, out_scale: float):
    """qadd's three (q, shift) pairs, as TFLite computes them from the three scales."""
    twice_max = 2.0 * max(a_scale, b_scale)
    return (quantize_multiplier(a_scale / twice_max), quantize_multiplier(b_scale / twice_max),
            quantize_multiplier(twice_max / ((1 << ADD_LEFT_SHIFT) * out_scale)))


def lut_table(fn, in_dtype: str, in_scale: float, in_zero: int, out_dtype: str, out_scale: float,
              out_zero: int) -> np.ndarray:
    """The 256 outputs of fn on every value of in_dtype, in float64: quantize(fn(dequantize(v)))."""
    lo, hi = QUANT_RANGES[in_dtype]
    real = (np.arange(lo, hi + 1, dtype=np.float64) - in_zero) * in_scale
    q = np.rint(np.asarray(fn(real), np.float64) / out_scale) + out_zero
    olo, ohi = QUANT_RANGES[out_dtype]
    return np.clip(q, olo, ohi).astype(out_dtype)


# ------------------------------------------------------------------ type-rule helpers

def _q8(t, index, what):
    if t.dtype not in _Q8:
        raise RuleError(f"{what} (argument {index}) must be int8 or uint8, got {t.dtype}")


def _check_output(attrs):
    dtype = attrs["out_dtype"]
    if dtype not in _Q8:
        raise RuleError(f"out_dtype must be int8 or uint8, got {dtype!r}")
    lo, hi = QUANT_RANGES[dtype]
    amin, amax = attrs["act_min"], attrs["act_max"]
    amin, amax = lo if amin is None else amin, hi if amax is None else amax
    if not (lo <= amin <= amax <= hi):
        raise RuleError(f"act_min {amin} / act_max {amax} must lie in {dtype}'s [{lo}, {hi}] in order")
    if not lo <= attrs["out_zero"] <= hi:
        raise RuleError(f"out_zero {attrs['out_zero']} is outside {dtype}'s [{lo}, {hi}]")
    return dtype


def _act_range(out_dtype, act_min, act_max):
    lo, hi = QUANT_RANGES[out_dtype]
    return (lo if act_min is None else act_min), (hi if act_max is None else act_max)


def _check_zero(attrs, key, dtype):
    lo, hi = QUANT_RANGES[dtype]
    if not isinstance(attrs[key], int) or not lo <= attrs[key] <= hi:
        raise RuleError(f"{key} {attrs[key]!r} must be an int in {dtype}'s [{lo}, {hi}]")


def _check_multiplier(attrs, key):
    q, shift = attrs[key], attrs[key.replace("multiplier", "shift")]
    if not isinstance(q, int) or not (q == 0 or (1 << 30) <= q < (1 << 31)):
        raise RuleError(f"{key} {q!r} must be 0 or an int in [2^30, 2^31)")
    if not isinstance(shift, int) or not -31 <= shift <= 30:
        raise RuleError(f"{key.replace('multiplier', 'shift')} {shift!r} must be an int in [-31, 30]")


def _check_channel_params(types, n, first=2):
    """bias, multiplier, shift: int32 (n,)."""
    for i, what in zip(range(first, first + 3), ("bias", "multiplier", "shift")):
        t = tensor(types[i], i)
        if t.dtype != "int32" or len(t.shape) != 1 or prove_equal(t.shape[0], n) is Proof.NO:
            raise RuleError(f"the {what} (argument {i}) must be int32 ({n},), got {t}")


def _check_weight_zero(attrs, w_dtype):
    _check_zero(attrs, "w_zero", w_dtype)


# ------------------------------------------------------------------ qdense

def _qdense_rule(types, attrs):
    x, w = tensor(types[0], 0), tensor(types[1], 1)
    _q8(x, 0, "x")
    _q8(w, 1, "the weight")
    if not x.shape or len(w.shape) != 2:
        raise RuleError(f"x must be (..., K) and the weight (N, K), got ranks {len(x.shape)} and {len(w.shape)}")
    check_equal(x.shape[-1], w.shape[1], "x's last axis differs from the weight's K")
    _check_channel_params(types, w.shape[0])
    _check_zero(attrs, "x_zero", x.dtype)
    _check_weight_zero(attrs, w.dtype)
    return TensorType((*x.shape[:-1], w.shape[0]), _check_output(attrs))


def qdense_accumulator(x, w, bias, x_zero, w_zero):
    xi = np.asarray(x).astype(np.int64) - x_zero
    wi = np.asarray(w).astype(np.int64) - w_zero
    return np.matmul(xi, wi.T) + np.asarray(bias, np.int64)


def qdense_reference(x, w, bias, multiplier, shift, *, x_zero, w_zero, out_zero, out_dtype, act_min=None,
                     act_max=None):
    acc = qdense_accumulator(x, w, bias, x_zero, w_zero)
    return _finish(requantize_accumulator(acc, multiplier, shift), out_zero, out_dtype, act_min, act_max)


# ------------------------------------------------------------------ qconv2d

def _qconv_rule(types, attrs):
    x, w = tensor(types[0], 0), tensor(types[1], 1)
    _q8(x, 0, "x")
    _q8(w, 1, "the weight")
    if len(x.shape) != 4 or len(w.shape) != 4:
        raise RuleError(f"x must be NCHW and the weight OIHW, got ranks {len(x.shape)} and {len(w.shape)}")
    groups = attrs["groups"]
    if not isinstance(groups, int) or groups < 1:
        raise RuleError(f"groups must be a positive integer, got {groups!r}")
    _, strides, padding, dilation = _window_attrs({**attrs, "kernel": (1, 1)}, "kernel", 2)
    check_equal(x.shape[1], w.shape[1] * groups, "input channels differ from weight channels * groups")
    if w.shape[0].is_const and w.shape[0].value % groups:
        raise RuleError(f"output channels {w.shape[0]} not divisible by groups {groups}")
    _check_channel_params(types, w.shape[0])
    _check_zero(attrs, "x_zero", x.dtype)
    _check_weight_zero(attrs, w.dtype)
    out = _out_sizes(x.shape[2:], w.shape[2:], strides, padding, dilation)
    return TensorType((x.shape[0], w.shape[0], *out), _check_output(attrs))


def qconv2d_accumulator(x, w, bias, *, strides, padding, dilation, groups, x_zero, w_zero):
    """int64 accumulators (N, O, OH, OW); the padding holds x_zero, so it adds nothing."""
    x = np.asarray(x).astype(np.int64) - x_zero
    w = np.asarray(w).astype(np.int64) - w_zero
    (n, c, *size), (o, cg, *kernel) = x.shape, w.shape
    if c != cg * groups:
        raise ValueError(f"qconv2d: input has {c} channels, weight expects {cg} x {groups} groups")
    out = [int(d) for d in _out_sizes(size, kernel, strides, padding, dilation)]
    xp = np.pad(x, [(0, 0), (0, 0), (padding[0], padding[2]), (padding[1], padding[3])])
    xg = xp.reshape(n, groups, cg, *xp.shape[2:])
    wg = w.reshape(groups, o // groups, cg, *kernel)
    acc = np.zeros((n, groups, o // groups, *out), np.int64)
    for i in range(kernel[0]):
        for j in range(kernel[1]):
            hs = slice(i * dilation[0], i * dilation[0] + strides[0] * (out[0] - 1) + 1, strides[0])
            ws = slice(j * dilation[1], j * dilation[1] + strides[1] * (out[1] - 1) + 1, strides[1])
            acc += np.einsum("ngchw,goc->ngohw", xg[..., hs, ws], wg[..., i, j])
    return acc.reshape(n, o, *out) + np.asarray(bias, np.int64)[:, None, None]


def qconv2d_reference(x, w, bias, multiplier, shift, *, strides, padding, dilation, groups, x_zero, w_zero,
                      out_zero, out_dtype, act_min=None, act_max=None):
    acc = qconv2d_accumulator(x, w, bias, strides=strides, padding=padding, dilation=dilation, groups=groups,
                              x_zero=x_zero, w_zero=w_zero)
    m = np.asarray(multiplier, np.int64)[:, None, None]
    s = np.asarray(shift, np.int64)[:, None, None]
    return _finish(requantize_accumulator(acc, m, s), out_zero, out_dtype, act_min, act_max)


# ------------------------------------------------------------------ element-wise, pooling, tables

def _qrequantize_rule(types, attrs):
    x = tensor(types[0], 0)
    _q8(x, 0, "x")
    _check_zero(attrs, "in_zero", x.dtype)
    _check_multiplier(attrs, "multiplier")
    return TensorType(x.shape, _check_output(attrs))


def qrequantize_reference(x, *, in_zero, out_zero, multiplier, shift, out_dtype, act_min=None, act_max=None):
    acc = np.asarray(x).astype(np.int64) - in_zero
    return _finish(requantize_exact(acc, multiplier, shift), out_zero, out_dtype, act_min, act_max)


def _binary_rule(types, attrs, multipliers):
    a, b = tensor(types[0], 0), tensor(types[1], 1)
    _q8(a, 0, "a")
    _q8(b, 1, "b")
    _check_zero(attrs, "a_zero", a.dtype)
    _check_zero(attrs, "b_zero", b.dtype)
    for key in multipliers:
        _check_multiplier(attrs, key)
    return TensorType(broadcast_shapes(a.shape, b.shape), _check_output(attrs))


def qadd_reference(a, b, *, a_zero, b_zero, out_zero, a_multiplier, a_shift, b_multiplier, b_shift,
                   multiplier, shift, out_dtype, act_min=None, act_max=None):
    sa = requantize((np.asarray(a).astype(np.int64) - a_zero) << ADD_LEFT_SHIFT, a_multiplier, a_shift)
    sb = requantize((np.asarray(b).astype(np.int64) - b_zero) << ADD_LEFT_SHIFT, b_multiplier, b_shift)
    out = requantize(sa + sb, multiplier, shift)
    return _finish(out, out_zero, out_dtype, act_min, act_max)


def qmul_reference(a, b, *, a_zero, b_zero, out_zero, multiplier, shift, out_dtype, act_min=None, act_max=None):
    acc = (np.asarray(a).astype(np.int64) - a_zero) * (np.asarray(b).astype(np.int64) - b_zero)
    return _finish(requantize_exact(acc, multiplier, shift), out_zero, out_dtype, act_min, act_max)


def _pooled_input(types, attrs):
    """The checked NCHW int8 / uint8 input of a pooling operator."""
    x = tensor(types[0], 0)
    _q8(x, 0, "x")
    if len(x.shape) != 4:
        raise RuleError(f"x must be NCHW, got rank {len(x.shape)}")
    _check_zero(attrs, "x_zero", x.dtype)
    _check_multiplier(attrs, "multiplier")
    return x


def _global_pool_rule(types, attrs):
    x = _pooled_input(types, attrs)
    return TensorType((x.shape[0], x.shape[1], as_expr(1), as_expr(1)), _check_output(attrs))


def qglobal_avg_pool_reference(x, *, x_zero, out_zero, multiplier, shift, out_dtype, act_min=None, act_max=None):
    acc = (np.asarray(x).astype(np.int64) - x_zero).sum(axis=(2, 3), keepdims=True)
    return _finish(requantize_exact(acc, multiplier, shift), out_zero, out_dtype, act_min, act_max)


def _avg_pool_rule(types, attrs):
    x = _pooled_input(types, attrs)
    kernel, strides, padding, dilation = _window_attrs({**attrs, "dilation": (1, 1), "ceil_mode": False},
                                                       "kernel_size", 2)
    if any(padding):
        raise RuleError(f"qavg_pool2d takes no padding (every window must have the same count), got {padding}")
    out = _out_sizes(x.shape[2:], kernel, strides, padding, dilation)
    return TensorType((x.shape[0], x.shape[1], *out), _check_output(attrs))


def qavg_pool2d_reference(x, *, kernel_size, strides, padding, x_zero, out_zero, multiplier, shift, out_dtype,
                          act_min=None, act_max=None):
    window = {"kernel_size": kernel_size, "strides": strides, "padding": padding, "dilation": (1, 1),
              "ceil_mode": False}
    wins, _, _ = _pool_windows(np.asarray(x).astype(np.int64) - x_zero, window, 0)
    acc = wins.sum(axis=0)
    return _finish(requantize_exact(acc, multiplier, shift), out_zero, out_dtype, act_min, act_max)


def _lut_rule(types, attrs):
    x, table = tensor(types[0], 0), tensor(types[1], 1)
    _q8(x, 0, "x")
    _q8(table, 1, "the table")
    if len(table.shape) != 1 or prove_equal(table.shape[0], 256) is not Proof.YES:
        raise RuleError(f"the table must have 256 entries, got shape {table.shape}")
    return TensorType(x.shape, table.dtype)


def qlut_reference(x, table):
    x = np.asarray(x)
    return np.asarray(table)[x.astype(np.int64) - QUANT_RANGES[x.dtype.name][0]]


# ------------------------------------------------------------------ quantize / dequantize (ONNX Q / DQ)

_FLOATS = ("float32", "float16", "float64")
_HELD = ("int8", "uint8", "int16", "uint16")
_INT_RANGES = {"int8": (-128, 127), "uint8": (0, 255), "int16": (-32768, 32767), "uint16": (0, 65535)}


def _quantize_rule(types, attrs):
    x, s, z = (tensor(t, i) for i, t in enumerate(types))
    if x.dtype not in (*_FLOATS, "int32") or s.dtype not in _FLOATS:
        raise RuleError(f"x must be float or int32 and the scale float, got {x.dtype} and {s.dtype}")
    dtype = attrs["out_dtype"]
    if dtype not in _HELD or z.dtype != dtype:
        raise RuleError(f"out_dtype {dtype!r} must be one of {', '.join(_HELD)} and the zero point's, got {z.dtype}")
    lo, hi = _INT_RANGES[dtype]
    if not lo <= attrs["qmin"] <= attrs["qmax"] <= hi:
        raise RuleError(f"[qmin, qmax] = [{attrs['qmin']}, {attrs['qmax']}] must lie in {dtype}'s range")
    if attrs["compute"] not in _FLOATS:
        raise RuleError(f"compute must be a float dtype, got {attrs['compute']!r}")
    broadcast_shapes(x.shape, broadcast_shapes(s.shape, z.shape))
    return TensorType(x.shape, dtype)


def quantize_reference(x, scale, zero, *, out_dtype, qmin, qmax, compute):
    q = np.rint(np.asarray(x).astype(compute) / np.asarray(scale).astype(compute))
    wide = np.float64 if compute == "float64" else np.float32
    q = q.astype(wide) + np.asarray(zero).astype(wide)
    return np.clip(q, qmin, qmax).astype(out_dtype)


def _dequantize_rule(types, attrs):
    x, s, z = (tensor(t, i) for i, t in enumerate(types))
    if x.dtype not in (*_HELD, "int32") or s.dtype not in _FLOATS or z.dtype != x.dtype:
        raise RuleError(f"x must be an integer tensor with a zero point of its dtype and a float scale, got "
                        f"{x.dtype}, {s.dtype}, {z.dtype}")
    if attrs["compute"] not in ("float32", "float64") or attrs["out_dtype"] not in _FLOATS:
        raise RuleError(f"compute {attrs['compute']!r} / out_dtype {attrs['out_dtype']!r} must be float dtypes")
    return TensorType(broadcast_shapes(x.shape, broadcast_shapes(s.shape, z.shape)), attrs["out_dtype"])


def dequantize_reference(x, scale, zero, *, out_dtype, compute):
    y = (np.asarray(x).astype(compute) - np.asarray(zero).astype(compute)) * np.asarray(scale).astype(compute)
    return y.astype(out_dtype)


# ------------------------------------------------------------------ registration

_OUT = {"out_zero": REQUIRED, "out_dtype": REQUIRED, "act_min": None, "act_max": None}
_CONV = {"strides": (1, 1), "padding": (0, 0, 0, 0), "dilation": (1, 1), "groups": 1}
_RESCALE = {"multiplier": REQUIRED, "shift": REQUIRED}

register(Op("qdense", _qdense_rule, qdense_reference,
            attrs={"x_zero": REQUIRED, "w_zero": 0, **_OUT}, kind="opaque", num_args=(5, 5),
            doc="int8 x @ w^T + bias, requantized per output channel"))
register(Op("qconv2d", _qconv_rule, qconv2d_reference,
            attrs={**_CONV, "x_zero": REQUIRED, "w_zero": 0, **_OUT}, kind="opaque", num_args=(5, 5),
            doc="int8 NCHW convolution + bias, requantized per output channel"))
register(Op("qrequantize", _qrequantize_rule, qrequantize_reference,
            attrs={"in_zero": REQUIRED, **_RESCALE, **_OUT}, kind="elementwise",
            doc="int8 -> int8 rescale to another scale / zero point"))
register(Op("qadd", lambda t, a: _binary_rule(t, a, ("a_multiplier", "b_multiplier", "multiplier")),
            qadd_reference,
            attrs={"a_zero": REQUIRED, "b_zero": REQUIRED, "a_multiplier": REQUIRED, "a_shift": REQUIRED,
                   "b_multiplier": REQUIRED, "b_shift": REQUIRED, **_RESCALE, **_OUT},
            kind="broadcast", num_args=(2, 2), doc="int8 add of two inputs with their own scales"))
register(Op("qmul", lambda t, a: _binary_rule(t, a, ("multiplier",)), qmul_reference,
            attrs={"a_zero": REQUIRED, "b_zero": REQUIRED, **_RESCALE, **_OUT},
            kind="broadcast", num_args=(2, 2), doc="int8 multiply of two inputs with their own scales"))
register(Op("qglobal_avg_pool", _global_pool_rule, qglobal_avg_pool_reference,
            attrs={"x_zero": REQUIRED, **_RESCALE, **_OUT}, kind="opaque", doc="int8 global average pool"))
register(Op("qavg_pool2d", _avg_pool_rule, qavg_pool2d_reference,
            attrs={"kernel_size": REQUIRED, "strides": None, "padding": (0, 0, 0, 0), "x_zero": REQUIRED,
                   **_RESCALE, **_OUT}, kind="opaque", doc="int8 average pool without padding"))
register(Op("qlut", _lut_rule, qlut_reference, kind="opaque", num_args=(2, 2),
            doc="an int8 function as a 256-entry table"))
register(Op("quantize", _quantize_rule, quantize_reference,
            attrs={"out_dtype": REQUIRED, "qmin": REQUIRED, "qmax": REQUIRED, "compute": "float32"},
            kind="broadcast", num_args=(3, 3), doc="ONNX QuantizeLinear"))
register(Op("dequantize", _dequantize_rule, dequantize_reference,
            attrs={"out_dtype": "float32", "compute": "float32"},
            kind="broadcast", num_args=(3, 3), doc="ONNX DequantizeLinear"))

