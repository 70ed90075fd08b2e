"""ONNX import: the com.microsoft QOperator ops that ONNX Runtime's quantizer
emits with quant_format=QOperator, as dequantize -> the float operator ->
quantize (op/quant_int8.py), the form transform/quantize.py turns into the
integer operators (qadd, qmul, qglobal_avg_pool, qavg_pool2d, qlut,
qrequantize + concat, qdense) when the scales and zero points are constants.
The float operator is the ONNX one's own converter, so its attributes mean
what they mean there.

1. QLinearAdd, QLinearMul (A, A_scale, A_zp, B, B_scale, B_zp, C_scale,
   C_zp): numpy broadcasting.
2. QLinearGlobalAveragePool (X, x_scale, x_zp, y_scale, y_zp; channels_last),
   QLinearAveragePool (the same inputs; AveragePool's attributes and
   channels_last): channels_last=1 (NHWC) is refused.
3. QLinearConcat (Y_scale, Y_zp, then (X, X_scale, X_zp) per input; axis).
4. QLinearSigmoid, QLinearLeakyRelu (X, X_scale, X_zp, Y_scale, Y_zp; alpha).
5. QGemm (A, a_scale, a_zp, B, b_scale, b_zp[, C[, y_scale, y_zp]]; alpha,
   transA, transB): B per-tensor or per output channel, C int32 in units of
   a_scale * b_scale; without y_scale the output is float32.
Scales are float32 scalars (B's scale of QGemm may be per channel); zero
points int8 / uint8 scalars.
"""

from __future__ import annotations

import copy

from ..context import CONVERTERS, converter
from .quant import dequantized, quantized

_MS = "com.microsoft"


def _as(ctx, op_type, drop=("channels_last",)):
    """A view of ctx as a node of ONNX's `op_type` with the same attributes (less `drop`)."""
    inner = copy.copy(ctx)
    node = copy.deepcopy(ctx.node)
    node.op_type, node.domain = op_type, ""
    kept = [a for a in node.attribute if a.name not in drop]
    del node.attribute[:]
    node.attribute.extend(kept)
    inner.node = node
    inner._attrs = {a.name: a for a in kept}
    return inner


def _input(inputs, i):
    return inputs[i] if len(inputs) > i and inputs[i] is not None else None


def _dq(ctx, inputs, first, what):
    x, s, z = (_input(inputs, first + k) for k in range(3))
    if x is None or s is None:
        raise ctx.error(f"{what} and its scale are required (inputs {first}, {first + 1})")
    if ctx.type_of(x).dtype not in ("int8", "uint8"):
        raise ctx.error(f"input {first} ({what}) must be int8 or uint8, got {ctx.type_of(x).dtype}")
    return dequantized(ctx, x, s, z)


def _q(ctx, y, inputs, first):
    s, z = _input(inputs, first), _input(inputs, first + 1)
    if s is None or z is None:
        raise ctx.error(f"the output scale and zero point (inputs {first}, {first + 1}) are required")
    return quantized(ctx, y, s, z)


def _channels_first(ctx):
    if ctx.attr("channels_last", 0, int):
        raise ctx.error("channels_last=1 (NHWC) is not supported; quantize the model with channels first")


@converter("QLinearAdd", "QLinearMul", domain=_MS)
def convert_qlinear_binary(ctx, inputs):
    a, b = _dq(ctx, inputs, 0, "A"), _dq(ctx, inputs, 3, "B")
    y = ctx.emit("add" if ctx.node.op_type == "QLinearAdd" else "multiply", [a, b])
    return _q(ctx, y, inputs, 6)


@converter("QLinearGlobalAveragePool", "QLinearAveragePool", domain=_MS)
def convert_qlinear_pool(ctx, inputs):
    _channels_first(ctx)
    x = _dq(ctx, inputs, 0, "X")
    op = "GlobalAveragePool" if ctx.node.op_type == "QLinearGlobalAveragePool" else "AveragePool"
    return _q(ctx, CONVERTERS[op](_as(ctx, op), [x]), inputs, 3)


@converter("QLinearConcat", domain=_MS)
def convert_qlinear_concat(ctx, inputs):
    if len(inputs) < 5 or (len(inputs) - 2) % 3:
        raise ctx.error(f"QLinearConcat takes Y_scale, Y_zero_point and (X, X_scale, X_zero_point) triples, "
                        f"got {len(inputs)} inputs")
    parts = [_dq(ctx, inputs, i, f"X{(i - 2) // 3}") for i in range(2, len(inputs), 3)]
    return _q(ctx, CONVERTERS["Concat"](_as(ctx, "Concat"), parts), inputs, 0)


@converter("QLinearSigmoid", "QLinearLeakyRelu", domain=_MS)
def convert_qlinear_unary(ctx, inputs):
    x = _dq(ctx, inputs, 0, "X")
    op = ctx.node.op_type[len("QLinear"):]
    return _q(ctx, CONVERTERS[op](_as(ctx, op), [x]), inputs, 3)


@converter("QGemm", domain=_MS)
def convert_qgemm(ctx, inputs):
    a = _dq(ctx, inputs, 0, "A")
    b, b_scale, b_zp = (_input(inputs, i) for i in (3, 4, 5))
    if b is None or b_scale is None:
        raise ctx.error("B and its scale (inputs 3, 4) are required")
    b_axis = 0 if ctx.attr("transB", 0, int) else 1
    per_channel = len(ctx.type_of(b_scale).shape) == 1 and not (
        ctx.type_of(b_scale).shape[0].is_const and ctx.type_of(b_scale).shape[0].value == 1)
    bf = dequantized(ctx, b, b_scale, b_zp, b_axis if per_channel else None)
    args = [a, bf]
    c = _input(inputs, 6)
    if c is not None:
        if ctx.type_of(c).dtype != "int32":
            raise ctx.error(f"input 6 (C) must be int32, got {ctx.type_of(c).dtype}")
        c_scale = ctx.emit("multiply", [ctx.emit("reshape", [inputs[1]], {"shape": ()}), b_scale])
        args.append(dequantized(ctx, c, c_scale, None, len(ctx.type_of(c).shape) - 1 if per_channel else None))
    y = CONVERTERS["Gemm"](_as(ctx, "Gemm"), args)
    return y if _input(inputs, 7) is None else _q(ctx, y, inputs, 7)
