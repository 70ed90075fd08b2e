"""ONNX import: the quantization operators.

1. QuantizeLinear (opsets 10, 13, 19, 21, 23, 24, 25): the `quantize` operator (op/quant_int8.py):
   y = clip(round_half_even(x / scale) + zero_point, qmin, qmax), cast to the zero point's dtype (else
   output_dtype, else uint8). The division runs in numpy's promotion of x and the scale (or in `precision`,
   opset 23); per-axis scales are reshaped along `axis`, blocked ones (block_size) repeated along it.
   Quantized dtypes: int8, uint8, int16, uint16, and int4, uint4, int2, uint2 held in int8 / uint8 with
   [qmin, qmax] their own range (the holder is what the IR and the runtime see: an int4 graph input or
   output is an int8 tensor whose values lie in [-8, 7]; int4 initializers are widened at import). float8
   and float4 are refused, by design: no float8 / float4 arithmetic in the IR or the C runtime.
2. DequantizeLinear (same opsets): the `dequantize` operator: y = (x - zero_point) * scale in float32
   (float64 for a float64 scale), cast to the scale's dtype or output_dtype; x int8, uint8, int16, uint16,
   int32, or int4 / uint4 / int2 / uint2 in their holders. Not folded on a constant x, so that
   transform/quantize.py sees a constant int8 weight; what it leaves folds later (fold_constants).
3. DynamicQuantizeLinear (opset 11): uint8, the scale and zero point from min(0, min x) and max(0, max x),
   as the ONNX reference.
4. MatMulInteger, ConvInteger (opset 10): operands widened to int32, zero points subtracted (per row of A /
   per column of B, per output channel of W), matmul / conv on int32 (an int32 accumulator, as ONNX Runtime).
   quantize_dynamic's chains (DynamicQuantizeLinear -> MatMulInteger -> Cast -> Mul) stay this exact form.
5. QLinearMatMul (opsets 10, 21), QLinearConv (opset 10): the int32 accumulator (plus QLinearConv's int32
   bias) times a_scale * b_scale / y_scale (per row of a / per column of b, per output channel of w),
   requantized as QuantizeLinear. The multiplication runs in float32 when every accumulator is provably
   below 2^24 (exact in float32: K * 2^16 < 2^24 for 8-bit operands, K the reduction length, plus a known
   bias), else in float64. A 2-D QLinearConv whose weights, scales, zero points and bias are all constants
   (ONNX Runtime's QOperator models) imports as dequantize -> Conv -> quantize instead, which the quantize
   pass makes one qconv2d; a QLinearMatMul of a constant 2-D b and constant parameters (a per tensor) as
   dequantize -> MatMul -> quantize, which it makes one qdense.
6. TfIdfVectorizer (opset 9) is in tfidf.py and registers from here.
"""

from __future__ import annotations

import numpy as np

from ....errors import RelaxEdgeError
from ....ir.expr import Constant
from ....ir.shape import as_expr
from ....op.registry import make_call
from ..context import HELD_NARROW, ONNX_DTYPE_NAMES, ONNX_DTYPES, converter
from . import tfidf  # noqa: F401  (registers its converter)
from .conv import _emit_spatial, _spatial_rank, _static_kernel, _window

QUANT_RANGES = {"int8": (-128, 127), "uint8": (0, 255), "int16": (-32768, 32767), "uint16": (0, 65535)}
_DEQUANT_INPUTS = (*QUANT_RANGES, "int32")
_FLOATS = ("float32", "float16", "float64")
_EXACT_F32 = 1 << 24


def _dtype_attr(ctx, name):
    """A dtype attribute (output_dtype, precision) as a relax_edge dtype name, or None when absent or 0."""
    code = ctx.attr(name, 0, int)
    if not code:
        return None
    if code not in ONNX_DTYPES:
        raise ctx.error(f"attribute {name}: element type {ONNX_DTYPE_NAMES.get(code, code)} is not supported")
    return ONNX_DTYPES[code]


def _scale_dtype(ctx, scale, index, what="the scale"):
    dtype = ctx.type_of(scale).dtype
    if dtype not in _FLOATS:
        raise ctx.error(f"input {index} ({what}) must be a float tensor (float32, float16, float64), got {dtype}")
    return dtype


def _optional(inputs, index):
    return inputs[index] if len(inputs) > index else None


def _axis(ctx):
    """The quantization axis; None before opset 13 (per tensor only)."""
    return ctx.attr("axis", 1, int) if ctx.opset >= 13 else None


def _block_size(ctx):
    block = ctx.attr("block_size", 0, int) if ctx.opset >= 21 else 0
    if block < 0:
        raise ctx.error(f"block_size must be positive (0: not blocked), got {block}")
    return block


def _along(ctx, param, shape, axis, block, what):
    """`param` (a scale or zero point) made broadcastable to `shape`: a scalar as is, a 1-D one of size
    shape[axis] along `axis`, a blocked one (block > 0) repeated `block` times along `axis`."""
    pshape = ctx.type_of(param).shape
    rank = len(shape)
    if len(pshape) == 0:
        return param
    if len(pshape) == 1 and pshape[0].is_const and pshape[0].value == 1 and not block:
        return ctx.emit("reshape", [param], {"shape": ()})
    if axis is None:
        raise ctx.error(f"{what} must be a scalar before opset 13 (per tensor), got shape {tuple(pshape)}")
    if not -rank <= axis < rank:
        raise ctx.error(f"axis {axis} is out of range for an input of rank {rank} (a per-axis {what})")
    axis %= rank
    if not block:
        if len(pshape) != 1:
            raise ctx.error(f"{what} must be a scalar or 1-D (per axis), got shape {tuple(pshape)}; "
                            "blocked quantization needs block_size")
        if pshape[0].is_const and shape[axis].is_const and pshape[0].value != shape[axis].value:
            raise ctx.error(f"{what} has {pshape[0]} values, the input's axis {axis} has size {shape[axis]}")
        dims = [as_expr(1)] * rank
        dims[axis] = pshape[0]
        return ctx.emit("reshape", [param], {"shape": tuple(dims)})
    if len(pshape) != rank:
        raise ctx.error(f"{what} (blocked) must have the input's rank {rank}, got shape {tuple(pshape)}")
    for i, (p, d) in enumerate(zip(pshape, shape)):
        if i != axis and not (p - d).is_const or i != axis and (p - d).value != 0:
            raise ctx.error(f"{what} (blocked) of shape {tuple(pshape)} differs from the input's "
                            f"{tuple(shape)} on axis {i}")
    if pshape[axis].is_const and shape[axis].is_const and -(-shape[axis].value // block) != pshape[axis].value:
        raise ctx.error(f"{what} (blocked) has {pshape[axis]} blocks on axis {axis}, an axis of size "
                        f"{shape[axis]} in blocks of {block} needs {-(-shape[axis].value // block)}")
    wide = (*pshape[:axis + 1], as_expr(block), *pshape[axis + 1:])
    value = ctx.emit("reshape", [param], {"shape": (*pshape[:axis + 1], as_expr(1), *pshape[axis + 1:])})
    value = ctx.emit("broadcast_to", [value], {"shape": wide})
    value = ctx.emit("reshape", [value], {"shape": (*pshape[:axis], pshape[axis] * block, *pshape[axis + 1:])})
    return ctx.emit("strided_slice", [value], {"begin": (0,), "end": (shape[axis],), "axes": (axis,)})


def _zero_point_dtype(ctx, zp, index, allowed, what="the zero point"):
    dtype = ctx.type_of(zp).dtype
    if dtype not in allowed:
        raise ctx.error(f"input {index} ({what}) of type {dtype} is not supported "
                        f"(supported: {', '.join(allowed)}; float8 and float4 are not)")
    return dtype


def requantize(ctx, value, zero_point, qdtype, compute):
    """round half to even, plus the zero point (either broadcastable), clip to qdtype's range, cast."""
    lo, hi = QUANT_RANGES[qdtype]
    y = ctx.emit("round", [value])
    wide = "float64" if compute == "float64" else "float32"
    if ctx.type_of(y).dtype != wide:
        y = ctx.emit("cast", [y], {"dtype": wide})
    if zero_point is not None:
        y = ctx.emit("add", [y, ctx.emit("cast", [zero_point], {"dtype": wide})])
    return ctx.emit("cast", [ctx.emit("clip", [y], {"min": float(lo), "max": float(hi)})], {"dtype": qdtype})


@converter("QuantizeLinear")
def convert_quantize_linear(ctx, inputs):
    x, scale, zp = inputs[0], inputs[1], _optional(inputs, 2)
    xt = ctx.type_of(x)
    if xt.dtype not in (*_FLOATS, "int32"):
        raise ctx.error(f"input 0 of type {xt.dtype} is not supported (float32, float16, float64, int32 are)")
    scale_dtype = _scale_dtype(ctx, scale, 1)
    code = ctx.attr("output_dtype", 0, int) if ctx.opset >= 21 else 0
    narrow = HELD_NARROW.get(code) or (_narrow_type(ctx, 2) if zp is not None else None)
    if zp is not None and code and code != _onnx_type(ctx, 2) and _onnx_type(ctx, 2) is not None:
        raise ctx.error(f"output_dtype {ONNX_DTYPE_NAMES.get(code, code)} differs from the zero point's type "
                        f"{ONNX_DTYPE_NAMES.get(_onnx_type(ctx, 2))}")
    out_dtype = narrow[0] if narrow else (_dtype_attr(ctx, "output_dtype") if ctx.opset >= 21 else None)
    if zp is not None:
        zp_dtype = _zero_point_dtype(ctx, zp, 2, tuple(QUANT_RANGES))
        if out_dtype is not None and out_dtype != zp_dtype:
            raise ctx.error(f"output_dtype {out_dtype} differs from the zero point's type {zp_dtype}")
        out_dtype = zp_dtype
    out_dtype = out_dtype or "uint8"
    if out_dtype not in QUANT_RANGES:
        raise ctx.error(f"output_dtype {out_dtype} is not a supported quantized type "
                        f"({', '.join(QUANT_RANGES)})")
    lo, hi = narrow[1:] if narrow else QUANT_RANGES[out_dtype]
    precision = _dtype_attr(ctx, "precision") if ctx.opset >= 23 else None
    if precision is not None and precision not in _FLOATS:
        raise ctx.error(f"attribute precision {precision} is not supported (float32, float16, float64 are)")
    compute = precision or np.result_type(np.empty(0, xt.dtype), np.empty(0, scale_dtype)).name
    axis, block = _axis(ctx), _block_size(ctx)
    s = _along(ctx, scale, xt.shape, axis, block, "the scale")
    z = None if zp is None else _along(ctx, zp, xt.shape, axis, block, "the zero point")
    if z is None:
        z = Constant(np.zeros((), out_dtype))
    return ctx.emit("quantize", [x, s, z], {"out_dtype": out_dtype, "qmin": lo, "qmax": hi, "compute": compute})


def _onnx_type(ctx, index):
    """The ONNX element type of node input `index` as the model declares it (a graph input, an
    initializer or a value_info), else None."""
    name = ctx.node.input[index] if len(ctx.node.input) > index else ""
    importer = getattr(ctx, "importer", None)
    if not name or importer is None:
        return None
    graph = importer.graph
    for init in graph.initializer:
        if init.name == name:
            return init.data_type
    for vi in (*graph.input, *graph.value_info):
        if vi.name == name and vi.type.HasField("tensor_type"):
            return vi.type.tensor_type.elem_type
    return None


def _narrow_type(ctx, index):
    """(holder dtype, lo, hi) when node input `index` is declared int4 / uint4 / int2 / uint2, else None."""
    return HELD_NARROW.get(_onnx_type(ctx, index))


@converter("DequantizeLinear")
def convert_dequantize_linear(ctx, inputs):
    x, scale, zp = inputs[0], inputs[1], _optional(inputs, 2)
    xt = ctx.type_of(x)
    if xt.dtype not in _DEQUANT_INPUTS:
        raise ctx.error(f"input 0 of type {xt.dtype} is not supported (supported: {', '.join(_DEQUANT_INPUTS)}; "
                        "float8 and float4 are not)")
    scale_dtype = _scale_dtype(ctx, scale, 1)
    out_dtype = (_dtype_attr(ctx, "output_dtype") if ctx.opset >= 23 else None) or scale_dtype
    if out_dtype not in _FLOATS:
        raise ctx.error(f"output_dtype {out_dtype} is not supported (float32, float16, float64 are)")
    compute = "float64" if "float64" in (scale_dtype, out_dtype) else "float32"
    axis, block = _axis(ctx), _block_size(ctx)
    if zp is not None and ctx.type_of(zp).dtype != xt.dtype:
        raise ctx.error(f"the zero point's type {ctx.type_of(zp).dtype} differs from the input's {xt.dtype}")
    return dequantized(ctx, x, scale, zp, axis, block, out_dtype, compute)


def dequantized(ctx, x, scale, zp, axis=None, block=0, out_dtype="float32", compute="float32"):
    """The `dequantize` call of x (scale and zero point along `axis`, or scalars), emitted unfolded: a
    constant int8 weight stays int8 for transform/quantize.py."""
    shape = ctx.type_of(x).shape
    z = Constant(np.zeros((), ctx.type_of(x).dtype)) if zp is None else _along(ctx, zp, shape, axis, block,
                                                                                "the zero point")
    s = _along(ctx, scale, shape, axis, block, "the scale")
    try:
        call = make_call("dequantize", [ctx.tensor(x), ctx.tensor(s), ctx.tensor(z)],
                         {"out_dtype": out_dtype, "compute": compute}, span=ctx.span)
    except RelaxEdgeError as err:
        raise ctx.error(str(err)) from None
    return ctx.builder.emit(call)


def quantized(ctx, x, scale, zp):
    """QuantizeLinear of float32 x with a scalar scale and an int8 / uint8 zero point."""
    dtype = _zero_point_dtype(ctx, zp, 0, ("int8", "uint8"), "a zero point")
    lo, hi = QUANT_RANGES[dtype]
    s, z = (_along(ctx, p, ctx.type_of(x).shape, None, 0, what) for p, what in ((scale, "the scale"),
                                                                               (zp, "the zero point")))
    return ctx.emit("quantize", [x, s, z], {"out_dtype": dtype, "qmin": lo, "qmax": hi, "compute": "float32"})


@converter("DynamicQuantizeLinear")
def convert_dynamic_quantize_linear(ctx, inputs):
    x = inputs[0]
    if ctx.type_of(x).dtype != "float32":
        raise ctx.error(f"input 0 must be float32, got {ctx.type_of(x).dtype}")
    zero = np.array(0, np.float32)
    hi = ctx.emit("maximum", [ctx.emit("max", [x]), zero])
    lo = ctx.emit("minimum", [ctx.emit("min", [x]), zero])
    span = ctx.emit("where", [ctx.emit("equal", [hi, lo]), np.array(1, np.float32), ctx.emit("subtract", [hi, lo])])
    scale = ctx.emit("divide", [span, np.array(255, np.float32)])
    initial = ctx.emit("subtract", [zero, ctx.emit("divide", [lo, scale])])
    zp = ctx.emit("round", [ctx.emit("clip", [initial], {"min": 0.0, "max": 255.0})])
    y = requantize(ctx, ctx.emit("divide", [x, scale]), zp, "uint8", "float32")
    return [y, scale, ctx.emit("cast", [zp], {"dtype": "uint8"})]


# ------------------------------------------------------------------ integer matmul and conv

def _int8_operand(ctx, value, index, what):
    dtype = ctx.type_of(value).dtype
    if dtype not in ("int8", "uint8"):
        raise ctx.error(f"input {index} ({what}) must be int8 or uint8, got {dtype}")
    return dtype


def _widened(ctx, value, zp, zp_index, dtype):
    """int32(value) - int32(zp); zp (already broadcastable) checked to be of `dtype`."""
    wide = ctx.emit("cast", [value], {"dtype": "int32"})
    if zp is None:
        return wide
    if ctx.type_of(zp).dtype != dtype:
        raise ctx.error(f"input {zp_index} (a zero point) of type {ctx.type_of(zp).dtype} differs from its "
                        f"operand's {dtype}")
    return ctx.emit("subtract", [wide, ctx.emit("cast", [zp], {"dtype": "int32"})])


def _per_row(ctx, param):
    """A matmul A-side parameter: 1-D of M values (per row) becomes (M, 1); a scalar or N-D one stays."""
    shape = ctx.type_of(param).shape
    if len(shape) == 1 and not (shape[0].is_const and shape[0].value == 1):
        return ctx.emit("reshape", [param], {"shape": (shape[0], as_expr(1))})
    if len(shape) == 1:
        return ctx.emit("reshape", [param], {"shape": ()})
    return param


def _per_channel(ctx, param, rank, axis, what):
    """A conv parameter: a scalar as is, 1-D of C values along `axis` of a rank-`rank` tensor."""
    shape = ctx.type_of(param).shape
    if len(shape) == 0 or (len(shape) == 1 and shape[0].is_const and shape[0].value == 1):
        return ctx.emit("reshape", [param], {"shape": ()})
    if len(shape) != 1:
        raise ctx.error(f"{what} must be a scalar or 1-D (per output channel), got shape {tuple(shape)}")
    dims = [as_expr(1)] * rank
    dims[axis] = shape[0]
    return ctx.emit("reshape", [param], {"shape": tuple(dims)})


def _requant_dtype(reduction, bias_bound=0):
    """float32 when every int32 accumulator of a `reduction`-long sum of 8-bit products (each below 2^16 in
    magnitude), plus a bias below `bias_bound`, is exact in it; else float64."""
    exact = reduction.is_const and reduction.value * (1 << 16) + bias_bound < _EXACT_F32
    return "float32" if exact else "float64"


@converter("MatMulInteger")
def convert_matmul_integer(ctx, inputs):
    a, b, a_zp, b_zp = inputs[0], inputs[1], _optional(inputs, 2), _optional(inputs, 3)
    za = None if a_zp is None else _per_row(ctx, a_zp)
    return ctx.emit("matmul", [_widened(ctx, a, za, 2, _int8_operand(ctx, a, 0, "A")),
                               _widened(ctx, b, b_zp, 3, _int8_operand(ctx, b, 1, "B"))])


@converter("QLinearMatMul")
def convert_qlinear_matmul(ctx, inputs):
    a, a_scale, a_zp, b, b_scale, b_zp, y_scale, y_zp = (list(inputs) + [None] * 8)[:8]
    for index, s in ((1, a_scale), (4, b_scale), (6, y_scale)):
        _scale_dtype(ctx, s, index)
    if y_zp is None:
        raise ctx.error("input 7 (y_zero_point) is required")
    out_dtype = _zero_point_dtype(ctx, y_zp, 7, ("int8", "uint8"))
    a_type = ctx.type_of(a)
    if _all_known(ctx, a_scale, a_zp, b, b_scale, b_zp, y_scale) and ctx.type_of(b).ndim == 2 and \
            ctx.known(a_scale).size == 1 and (a_zp is None or ctx.known(a_zp).size == 1):
        per_column = ctx.known(b_scale).size > 1
        bf = dequantized(ctx, b, b_scale, b_zp, 1 if per_column else None)
        y = ctx.emit("matmul", [dequantized(ctx, a, a_scale, a_zp), bf])
        return quantized(ctx, y, y_scale, y_zp)
    za = None if a_zp is None else _per_row(ctx, a_zp)
    acc = ctx.emit("matmul", [_widened(ctx, a, za, 2, _int8_operand(ctx, a, 0, "a")),
                              _widened(ctx, b, b_zp, 5, _int8_operand(ctx, b, 3, "b"))])
    compute = _requant_dtype(a_type.shape[-1])
    scale_dtype = ctx.type_of(a_scale).dtype
    b_scale = ctx.emit("cast", [b_scale], {"dtype": scale_dtype})
    mult = ctx.emit("multiply", [_per_row(ctx, a_scale), b_scale])
    mult = ctx.emit("divide", [mult, ctx.emit("cast", [y_scale], {"dtype": scale_dtype})])
    real = ctx.emit("multiply", [ctx.emit("cast", [acc], {"dtype": compute}),
                                 ctx.emit("cast", [mult], {"dtype": compute})])
    return requantize(ctx, real, _scalar_zero_point(ctx, y_zp), out_dtype, compute)


def _scalar_zero_point(ctx, zp):
    shape = ctx.type_of(zp).shape
    if len(shape) > 1 or (len(shape) == 1 and not (shape[0].is_const and shape[0].value == 1)):
        raise ctx.error(f"the output zero point must be a scalar, got shape {tuple(shape)}")
    return ctx.emit("reshape", [zp], {"shape": ()}) if shape else zp


def _integer_conv(ctx, x, w, x_zp, w_zp, w_index):
    """The int32 accumulator of ConvInteger (w_index 1) or QLinearConv (w_index 3)."""
    x_dtype = _int8_operand(ctx, x, 0, "x")
    w_dtype = _int8_operand(ctx, w, w_index, "w")
    nd = _spatial_rank(ctx, x)
    kernel = _static_kernel(ctx, w, nd)
    zx = None if x_zp is None else _per_channel(ctx, x_zp, nd + 2, 1, "the zero point of x")
    if zx is not None and ctx.type_of(zx).shape:
        raise ctx.error("the zero point of x must be a scalar (per-tensor)")
    zw = None if w_zp is None else _per_channel(ctx, w_zp, nd + 2, 0, "the zero point of w")
    wx = _widened(ctx, x, zx, 2, x_dtype)
    ww = _widened(ctx, w, zw, 3 if w_index == 1 else 5, w_dtype)
    strides, pads, dilations = _window(ctx, nd, kernel, ctx.type_of(x).shape[2:])
    group = ctx.attr("group", 1, int)
    acc = _emit_spatial(ctx, "conv{}d", nd, [wx, ww], {"strides": strides, "padding": pads,
                                                      "dilation": dilations, "groups": group})
    reduction = ctx.type_of(w).shape[1]
    for k in kernel:
        reduction = reduction * k
    return acc, nd, reduction


@converter("ConvInteger")
def convert_conv_integer(ctx, inputs):
    return _integer_conv(ctx, inputs[0], inputs[1], _optional(inputs, 2), _optional(inputs, 3), 1)[0]


@converter("QLinearConv")
def convert_qlinear_conv(ctx, inputs):
    x, x_scale, x_zp, w, w_scale, w_zp, y_scale, y_zp, bias = (list(inputs) + [None] * 9)[:9]
    for index, s in ((1, x_scale), (4, w_scale), (6, y_scale)):
        _scale_dtype(ctx, s, index)
    if y_zp is None:
        raise ctx.error("input 7 (y_zero_point) is required")
    out_dtype = _zero_point_dtype(ctx, y_zp, 7, ("int8", "uint8"))
    if _all_known(ctx, x_scale, x_zp, w, w_scale, w_zp, y_scale, bias) and ctx.type_of(x).ndim == 4:
        return _qdq_conv(ctx, x, x_scale, x_zp, w, w_scale, w_zp, y_scale, y_zp, bias)
    acc, nd, reduction = _integer_conv(ctx, x, w, x_zp, w_zp, 3)
    bias_bound = 0
    if bias is not None:
        known = ctx.known(bias)
        bias_bound = _EXACT_F32 if known is None or not known.size else int(np.abs(known.astype(np.int64)).max())
        if ctx.type_of(bias).dtype != "int32":
            raise ctx.error(f"input 8 (the bias) must be int32, got {ctx.type_of(bias).dtype}")
        acc = ctx.emit("add", [acc, _per_channel(ctx, bias, nd + 2, 1, "the bias")])
    compute = _requant_dtype(reduction, bias_bound)
    scale_dtype = ctx.type_of(x_scale).dtype
    ws = ctx.emit("cast", [_per_channel(ctx, w_scale, nd + 2, 1, "w_scale")], {"dtype": scale_dtype})
    mult = ctx.emit("divide", [ctx.emit("multiply", [x_scale, ws]),
                               ctx.emit("cast", [y_scale], {"dtype": scale_dtype})])
    real = ctx.emit("multiply", [ctx.emit("cast", [acc], {"dtype": compute}),
                                 ctx.emit("cast", [mult], {"dtype": compute})])
    return requantize(ctx, real, _scalar_zero_point(ctx, y_zp), out_dtype, compute)


def _all_known(ctx, *values):
    return all(v is None or ctx.known(v) is not None for v in values)


def _qdq_conv(ctx, x, x_scale, x_zp, w, w_scale, w_zp, y_scale, y_zp, bias):
    """QLinearConv of constant weights and parameters as dequantize -> Conv -> quantize, the chain that
    transform/quantize.py turns into qconv2d."""
    from .conv import convert_conv
    per_channel = ctx.known(w_scale).size > 1
    axis = 0 if per_channel else None
    args = [dequantized(ctx, x, x_scale, x_zp), dequantized(ctx, w, w_scale, w_zp, axis)]
    if bias is not None:
        if ctx.type_of(bias).dtype != "int32":
            raise ctx.error(f"input 8 (the bias) must be int32, got {ctx.type_of(bias).dtype}")
        scale = (ctx.known(x_scale).astype(np.float64).reshape(()) * ctx.known(w_scale).astype(np.float64)
                 ).astype(np.float32)
        args.append(dequantized(ctx, bias, Constant(scale.reshape(-1) if per_channel else scale.reshape(())), None,
                                axis))
    return quantized(ctx, convert_conv(ctx, args), y_scale, y_zp)
