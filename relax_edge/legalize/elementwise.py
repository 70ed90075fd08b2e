"""Legalization of elementwise operators: one scalar formula per operator
(a table), applied over the broadcast output shape."""

from __future__ import annotations

import functools
import math

from ..tir.compute import compute
from ..tir.expr import BinOp, Cast, Compare, Logical, Not, cast, const, intrinsic, is_float, maximum, minimum, select
from .common import legalization, load_broadcast


def _clip01(v):
    return minimum(maximum(v, const(0, v.dtype)), const(1, v.dtype))


def _abs(x):
    return intrinsic("fabs", x) if is_float(x.dtype) else select(x < const(0, x.dtype), -x, x)


def _gelu(x, approximate):
    half, one = const(0.5, x.dtype), const(1.0, x.dtype)
    if approximate == "tanh":
        inner = const(math.sqrt(2.0 / math.pi), x.dtype) * (x + const(0.044715, x.dtype) * x * x * x)
        return half * x * (one + intrinsic("tanh", inner))
    return half * x * (one + intrinsic("erf", x * const(1.0 / math.sqrt(2.0), x.dtype)))


def _power(a, b):
    if is_float(a.dtype):
        return intrinsic("pow", a, b)
    wide = intrinsic("pow", cast(a, "float64"), cast(b, "float64"))
    return cast(intrinsic("round", wide), a.dtype)


def _clip(x, lo, hi):
    if lo is not None:
        x = maximum(x, const(lo, x.dtype))
    if hi is not None:
        x = minimum(x, const(hi, x.dtype))
    return x


UNARY = {
    "relu": lambda x, a: maximum(x, const(0, x.dtype)),
    "sigmoid": lambda x, a: const(1.0, x.dtype) / (const(1.0, x.dtype) + intrinsic("exp", -x)),
    "tanh": lambda x, a: intrinsic("tanh", x),
    "exp": lambda x, a: intrinsic("exp", x),
    "log": lambda x, a: intrinsic("log", x),
    "sqrt": lambda x, a: intrinsic("sqrt", x),
    "erf": lambda x, a: intrinsic("erf", x),
    "floor": lambda x, a: intrinsic("floor", x),
    "ceil": lambda x, a: intrinsic("ceil", x),
    "reciprocal": lambda x, a: const(1.0, x.dtype) / x,
    "negative": lambda x, a: -x,
    "abs": lambda x, a: _abs(x),
    "hard_swish": lambda x, a: x * _clip01(x / const(6.0, x.dtype) + const(0.5, x.dtype)),
    "leaky_relu": lambda x, a: select(x >= const(0, x.dtype), x, const(a["alpha"], x.dtype) * x),
    "hard_sigmoid": lambda x, a: _clip01(const(a["alpha"], x.dtype) * x + const(a["beta"], x.dtype)),
    "gelu": lambda x, a: _gelu(x, a["approximate"]),
    "clip": lambda x, a: _clip(x, a["min"], a["max"]),
    "logical_not": lambda x, a: Not(x),
    "cast": lambda x, a: (cast(x, a["dtype"]) if a["dtype"] != "bool"
                          else Compare("ne", x, const(0, x.dtype))),
}

BINARY = {
    "add": lambda a, b: a + b,
    "subtract": lambda a, b: a - b,
    "multiply": lambda a, b: a * b,
    "divide": lambda a, b: a / b,
    "power": _power,
    "maximum": maximum,
    "minimum": minimum,
    "equal": lambda a, b: Compare("eq", a, b),
    "less": lambda a, b: Compare("lt", a, b),
    "greater": lambda a, b: Compare("gt", a, b),
    "less_equal": lambda a, b: Compare("le", a, b),
    "greater_equal": lambda a, b: Compare("ge", a, b),
    "logical_and": lambda a, b: Logical("and", a, b),
    "logical_or": lambda a, b: Logical("or", a, b),
    "logical_xor": lambda a, b: Compare("ne", a, b),
}


@legalization("where")
def legalize_where(ctx):
    c, a, b = ctx.inputs
    shape = ctx.out_shape
    return compute(shape, lambda *i: select(load_broadcast(c, shape, i), load_broadcast(a, shape, i),
                                            load_broadcast(b, shape, i)), "where", ctx.out_dtype)


# ------------------------------------------- activations, trigonometry, tests

TRIG = ("sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "asinh", "acosh", "atanh")
FLOAT_MAX = {"float32": 3.4028234663852886e38, "float64": 1.7976931348623157e308, "float16": 65504.0}


def _softplus(x):
    """log(1 + exp(x)) as max(x, 0) + log(1 + exp(-|x|)): no overflow for large x."""
    one = const(1.0, x.dtype)
    return maximum(x, const(0.0, x.dtype)) + intrinsic("log", one + intrinsic("exp", -_abs(x)))


def _expm1(x):
    return intrinsic("exp", x) - const(1.0, x.dtype)


def _sign(x):
    one, zero = const(1, x.dtype), const(0, x.dtype)
    if x.dtype.startswith("uint"):
        return select(x > zero, one, zero)
    rest = select(x < zero, const(-1, x.dtype), x if is_float(x.dtype) else zero)   # 0, -0 and NaN kept
    return select(x > zero, one, rest)


def _isinf(x, detect_negative, detect_positive):
    big = const(FLOAT_MAX[x.dtype], x.dtype)
    if detect_negative and detect_positive:
        return intrinsic("fabs", x) > big
    if detect_positive:
        return x > big
    if detect_negative:
        return x < -big
    return Logical("and", x > big, x < -big)   # neither: never true


def _shrink(x, bias, lambd):
    v = x if is_float(x.dtype) else cast(x, "float64")
    lo, b = const(-lambd, v.dtype), const(bias, v.dtype)
    out = select(v < lo, v + b, select(v > const(lambd, v.dtype), v - b, const(0.0, v.dtype)))
    return out if is_float(x.dtype) else cast(out, x.dtype)


def _mod(a, b, fmod):
    if not is_float(a.dtype):
        return a - (a / b) * b if fmod else a % b   # "/" truncates (C), "%" floors (Python)
    r = intrinsic("fmod", a, b)
    if fmod:
        return r
    zero = const(0.0, a.dtype)
    wrong_sign = Logical("and", Compare("ne", r, zero), Compare("ne", r < zero, b < zero))
    return select(wrong_sign, r + b, r)


UNARY_MORE = {
    **{name: (lambda n: lambda x, a: intrinsic(n, x))(name) for name in TRIG},
    "round": lambda x, a: intrinsic("round", x),
    "softplus": lambda x, a: _softplus(x),
    "softsign": lambda x, a: x / (const(1.0, x.dtype) + _abs(x)),
    "mish": lambda x, a: x * intrinsic("tanh", _softplus(x)),
    "sign": lambda x, a: _sign(x),
    "isnan": lambda x, a: Compare("ne", x, x),
    "isinf": lambda x, a: _isinf(x, a["detect_negative"], a["detect_positive"]),
    "elu": lambda x, a: select(x < const(0.0, x.dtype), const(a["alpha"], x.dtype) * _expm1(x), x),
    "selu": lambda x, a: const(a["gamma"], x.dtype) * select(x > const(0.0, x.dtype), x,
                                                             const(a["alpha"], x.dtype) * _expm1(x)),
    "celu": lambda x, a: (maximum(x, const(0.0, x.dtype))
                          + minimum(const(0.0, x.dtype),
                                    const(a["alpha"], x.dtype) * _expm1(x / const(a["alpha"], x.dtype)))),
    "thresholded_relu": lambda x, a: select(x > const(a["alpha"], x.dtype), x, const(0.0, x.dtype)),
    "swish": lambda x, a: x / (const(1.0, x.dtype) + intrinsic("exp", const(-a["alpha"], x.dtype) * x)),
    "shrink": lambda x, a: _shrink(x, a["bias"], a["lambd"]),
}
INT_BITS = {"int8": 8, "uint8": 8, "int16": 16, "uint16": 16, "int32": 32, "uint32": 32, "int64": 64, "uint64": 64}


def _wrapped(op, a, b):
    """An integer bit operation, cast back to its dtype: C computes narrow types as int."""
    return Cast(BinOp(op, a, b, a.dtype), a.dtype)


def _bit_shift(x, y, direction):
    """A shift by less than 0 or by the width or more leaves the sign fill (ONNX BitShift)."""
    zero, signed = const(0, x.dtype), not x.dtype.startswith("uint")
    out_of_range = Compare("ge", y, const(INT_BITS[x.dtype], y.dtype))
    if signed:
        out_of_range = Logical("or", y < zero, out_of_range)
    shifted = _wrapped("shl" if direction == "left" else "shr", x, select(out_of_range, zero, y))
    fill = select(x < zero, const(-1, x.dtype), zero) if signed and direction == "right" else zero
    return select(out_of_range, fill, shifted)


UNARY_MORE["bitwise_not"] = lambda x, a: _wrapped("bitxor", x, const(-1, x.dtype))
UNARY.update(UNARY_MORE)
BINARY.update({"bitwise_and": lambda a, b: _wrapped("bitand", a, b), "bitwise_or": lambda a, b: _wrapped("bitor", a, b),
               "bitwise_xor": lambda a, b: _wrapped("bitxor", a, b)})
BINARY["prelu"] = lambda x, slope: select(x < const(0, x.dtype), slope * x, x)
BINARY_WITH_ATTRS = {"mod": lambda a, b, attrs: _mod(a, b, attrs["fmod"]),
                     "bit_shift": lambda a, b, attrs: _bit_shift(a, b, attrs["direction"])}


@legalization(*UNARY)
def legalize_unary(ctx):
    (x,) = ctx.inputs
    fn = UNARY[ctx.op_name]
    return compute(ctx.out_shape, lambda *i: fn(x[i], ctx.attrs), ctx.op_name, ctx.out_dtype)


@legalization(*BINARY, *BINARY_WITH_ATTRS)
def legalize_binary(ctx):
    a, b = ctx.inputs
    shape = ctx.out_shape
    fn = BINARY.get(ctx.op_name) or functools.partial(BINARY_WITH_ATTRS[ctx.op_name], attrs=ctx.attrs)
    return compute(shape, lambda *i: fn(load_broadcast(a, shape, i), load_broadcast(b, shape, i)),
                   ctx.op_name, ctx.out_dtype)
