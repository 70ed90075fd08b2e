"""Legalization of the integer operators of op/quant_int8.py: portable tensor
programs, so that a quantized model compiles on every board with either
backend (a library lowering registered in library.EXTERN_LIBRARIES, when
there is one, takes precedence).

Guaranteed:
1. Results equal the numpy references bit for bit: accumulators are int32
   where a constant reduction length proves every sum of 8-bit products fits
   (K * 255 * 255 + bias < 2^31), else int64; requantization runs in int64
   with the reference's steps: the single rounding, half to even, of
   acc * q * 2^(shift - 31) (requantize_exact; qdense and qconv2d saturate
   the accumulator to int32 first) written with the tensor programs' shl /
   shr / bitand operations, and for qadd TFLite's (saturating left shift,
   rounding doubling high multiply with C's truncating division, rounding
   right shift).
2. Padding of qconv2d adds nothing (the padding holds x_zero); out-of-input
   taps are guarded by a select and their indices clamped, as legalize/nn.py.
3. quantize / dequantize (ONNX Q / DQ left in float by the quantize pass)
   follow their references: the division in `compute`, round half to even,
   the zero point added, clipped to [qmin, qmax], cast.

Not guaranteed: speed (one plain reduction per output element).
"""

from __future__ import annotations

from ..ir.shape import floordiv
from ..op.quant_int8 import ADD_LEFT_SHIFT, INT32_MAX, INT32_MIN, QUANT_RANGES
from ..tir.compute import compute, reduce_axis, reduce_sum
from ..tir.expr import binop, cast, const, intrinsic, maximum, minimum, select
from .common import legalization, load_broadcast
from .nn import _guard, _tap_coords

_I64 = "int64"


def _k(value):
    return const(value, _I64)


def requant_expr(acc, multiplier, shift):
    """TFLite's MultiplyByQuantizedMultiplier of an int64 expression (holding an int32 value) by int64
    expressions q and shift (op/quant_int8.requantize)."""
    acc, q, shift = cast(acc, _I64), cast(multiplier, _I64), cast(shift, _I64)
    left, right = maximum(shift, _k(0)), maximum(_k(0) - shift, _k(0))
    scaled = minimum(maximum(binop("shl", acc, left), _k(INT32_MIN)), _k(INT32_MAX))
    ab = scaled * q
    nudged = ab + select(ab >= _k(0), _k(1 << 30), _k(1 - (1 << 30)))
    high = binop("div", nudged, _k(1 << 31))            # truncation, as C
    mask = binop("shl", _k(1), right) - _k(1)
    rem = binop("bitand", high, mask)
    threshold = binop("shr", mask, _k(1)) + select(high < _k(0), _k(1), _k(0))
    return binop("shr", high, right) + select(rem > threshold, _k(1), _k(0))


def requant_exact_expr(acc, multiplier, shift):
    """op/quant_int8.requantize_exact: acc * q * 2^(shift - 31) rounded once, half to even, in int64."""
    total = _k(31) - cast(shift, _I64)
    product = cast(acc, _I64) * cast(multiplier, _I64)
    low = binop("shr", product, total)
    rem = binop("bitand", product, binop("shl", _k(1), total) - _k(1))
    half = binop("shl", _k(1), total - _k(1))
    odd = binop("bitand", low, _k(1))
    up = select(rem > half, _k(1), select(rem < half, _k(0), odd))
    return low + up


def requant_accumulator_expr(acc, multiplier, shift):
    """op/quant_int8.requantize_accumulator: the accumulator saturated to int32, then requant_exact_expr."""
    acc = minimum(maximum(cast(acc, _I64), _k(INT32_MIN)), _k(INT32_MAX))
    return requant_exact_expr(acc, multiplier, shift)


def _finish(ctx, value):
    lo, hi = QUANT_RANGES[ctx.attrs["out_dtype"]]
    amin = lo if ctx.attrs["act_min"] is None else int(ctx.attrs["act_min"])
    amax = hi if ctx.attrs["act_max"] is None else int(ctx.attrs["act_max"])
    value = value + _k(int(ctx.attrs["out_zero"]))
    return cast(minimum(maximum(value, _k(amin)), _k(amax)), ctx.out_dtype)


def _acc_dtype(reduction, bias=True):
    """int32 when `reduction` 8-bit products (each at most 255 * 255) and an int32 bias provably fit it."""
    if reduction.is_const and reduction.value * 255 * 255 < (1 << 30):
        return "int32"
    return _I64


def _centered(value, zero, dtype):
    return cast(value, dtype) - const(int(zero), dtype)


@legalization("qdense")
def _qdense(ctx):
    x, w, bias, mult, shift = ctx.inputs
    k = reduce_axis(w.shape[1], "rk")
    acc_dtype = _acc_dtype(w.shape[1])
    xz, wz = ctx.attrs["x_zero"], ctx.attrs["w_zero"]

    def element(*idx):
        n = idx[-1]
        prod = _centered(x[(*idx[:-1], k.var)], xz, acc_dtype) * _centered(w[n, k.var], wz, acc_dtype)
        return cast(reduce_sum(prod, [k]), _I64) + cast(bias[n], _I64)
    return _requantized(ctx, compute(ctx.out_shape, element, f"{ctx.op_name}_acc", _I64), mult, shift, -1)


def _requantized(ctx, acc, mult, shift, channel_axis):
    """The output from an accumulator tensor (a separate stage: requantization reads it several times)."""
    def element(*idx):
        n = idx[channel_axis]
        return _finish(ctx, requant_accumulator_expr(acc[idx], mult[n], shift[n]))
    return compute(ctx.out_shape, element, ctx.op_name, ctx.out_dtype)


@legalization("qconv2d")
def _qconv2d(ctx):
    x, w, bias, mult, shift = ctx.inputs
    strides, dilation = tuple(int(v) for v in ctx.attrs["strides"]), tuple(int(v) for v in ctx.attrs["dilation"])
    padding, groups = tuple(int(v) for v in ctx.attrs["padding"]), int(ctx.attrs["groups"])
    per_group_in, per_group_out = w.shape[1], floordiv(w.shape[0], groups)
    c = reduce_axis(per_group_in, "rc")
    taps = [reduce_axis(k, f"rk{i}") for i, k in enumerate(w.shape[2:])]
    tap_vars = [t.var for t in taps]
    acc_dtype = _acc_dtype(w.shape[1] * w.shape[2] * w.shape[3])
    xz, wz = ctx.attrs["x_zero"], ctx.attrs["w_zero"]

    def element(n, o, *pos):
        channel = c.var if groups == 1 else floordiv(o, per_group_out) * per_group_in + c.var
        coords = _tap_coords(pos, tap_vars, strides, dilation, padding)
        idx, inside = _guard(coords, x.shape[2:], padding, overhang=False)
        value = _centered(x[(n, channel, *idx)], xz, acc_dtype) * _centered(w[(o, c.var, *tap_vars)], wz, acc_dtype)
        if inside is not None:
            value = select(inside, value, const(0, acc_dtype))
        return cast(reduce_sum(value, [c, *taps]), _I64) + cast(bias[o], _I64)
    return _requantized(ctx, compute(ctx.out_shape, element, f"{ctx.op_name}_acc", _I64), mult, shift, 1)


@legalization("qrequantize")
def _qrequantize(ctx):
    (x,) = ctx.inputs
    a = ctx.attrs

    def element(*i):
        acc = _centered(x[i], a["in_zero"], _I64)
        return _finish(ctx, requant_exact_expr(acc, _k(a["multiplier"]), _k(a["shift"])))
    return compute(ctx.out_shape, element, ctx.op_name, ctx.out_dtype)


@legalization("qadd")
def _qadd(ctx):
    x, y = ctx.inputs
    a, shape = ctx.attrs, ctx.out_shape

    def side(t, i, key):
        shifted = binop("shl", _centered(load_broadcast(t, shape, i), a[f"{key}_zero"], _I64), _k(ADD_LEFT_SHIFT))
        return requant_expr(shifted, _k(a[f"{key}_multiplier"]), _k(a[f"{key}_shift"]))

    def element(*i):
        return _finish(ctx, requant_expr(side(x, i, "a") + side(y, i, "b"), _k(a["multiplier"]), _k(a["shift"])))
    return compute(shape, element, ctx.op_name, ctx.out_dtype)


@legalization("qmul")
def _qmul(ctx):
    x, y = ctx.inputs
    a, shape = ctx.attrs, ctx.out_shape

    def element(*i):
        acc = _centered(load_broadcast(x, shape, i), a["a_zero"], _I64) * \
            _centered(load_broadcast(y, shape, i), a["b_zero"], _I64)
        return _finish(ctx, requant_exact_expr(acc, _k(a["multiplier"]), _k(a["shift"])))
    return compute(shape, element, ctx.op_name, ctx.out_dtype)


@legalization("qglobal_avg_pool")
def _qglobal_avg_pool(ctx):
    (x,) = ctx.inputs
    a = ctx.attrs
    h, w = reduce_axis(x.shape[2], "rh"), reduce_axis(x.shape[3], "rw")

    def element(n, c, _i, _j):
        return reduce_sum(_centered(x[n, c, h.var, w.var], a["x_zero"], _I64), [h, w])
    return _rescaled(ctx, compute(ctx.out_shape, element, f"{ctx.op_name}_acc", _I64))


def _rescaled(ctx, acc):
    """The output from an accumulator tensor with the per-tensor multiplier of the attributes."""
    def element(*idx):
        return _finish(ctx, requant_exact_expr(acc[idx], _k(ctx.attrs["multiplier"]), _k(ctx.attrs["shift"])))
    return compute(ctx.out_shape, element, ctx.op_name, ctx.out_dtype)


@legalization("qavg_pool2d")
def _qavg_pool2d(ctx):
    (x,) = ctx.inputs
    a = ctx.attrs
    kernel = tuple(int(v) for v in a["kernel_size"])
    strides = kernel if a["strides"] is None else tuple(int(v) for v in a["strides"])
    kh, kw = reduce_axis(kernel[0], "rh"), reduce_axis(kernel[1], "rw")

    def element(n, c, p, q):
        return reduce_sum(_centered(x[n, c, p * strides[0] + kh.var, q * strides[1] + kw.var], a["x_zero"], _I64),
                          [kh, kw])
    return _rescaled(ctx, compute(ctx.out_shape, element, f"{ctx.op_name}_acc", _I64))


@legalization("qlut")
def _qlut(ctx):
    x, table = ctx.inputs
    lo = QUANT_RANGES[x.dtype][0]
    return compute(ctx.out_shape, lambda *i: table[cast(x[i], _I64) - _k(lo)], ctx.op_name, ctx.out_dtype)


@legalization("quantize")
def _quantize(ctx):
    x, scale, zero = ctx.inputs
    a, shape = ctx.attrs, ctx.out_shape
    compute_dtype = a["compute"]
    wide = "float64" if compute_dtype == "float64" else "float32"

    def element(*i):
        q = cast(load_broadcast(x, shape, i), compute_dtype) / cast(load_broadcast(scale, shape, i), compute_dtype)
        q = cast(intrinsic("round", q), wide) + cast(load_broadcast(zero, shape, i), wide)
        q = minimum(maximum(q, const(a["qmin"], wide)), const(a["qmax"], wide))
        return cast(q, ctx.out_dtype)
    return compute(shape, element, ctx.op_name, ctx.out_dtype)


@legalization("dequantize")
def _dequantize(ctx):
    x, scale, zero = ctx.inputs
    c, shape = ctx.attrs["compute"], ctx.out_shape

    def element(*i):
        y = (cast(load_broadcast(x, shape, i), c) - cast(load_broadcast(zero, shape, i), c)) * \
            cast(load_broadcast(scale, shape, i), c)
        return cast(y, ctx.out_dtype)
    return compute(shape, element, ctx.op_name, ctx.out_dtype)
