"""Legalization of elementwise operators: one scalar formula per operator
(a table), applied over the broadcast output shape."""

from __future__ import annotations

import math

from ..tir.compute import compute
from ..tir.expr import Compare, Logical, Not, cast, const, intrinsic, is_float, maximum, minimum, select
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


@legalization(*UNARY)
def legalize_unary(ctx):
    (x,) = ctx.inputs
    fn = UNARY[ctx.op_name]
    return compute(ctx.out_shape, lambda *i: fn(x[i], ctx.attrs), ctx.op_name, ctx.out_dtype)


@legalization(*BINARY)
def legalize_binary(ctx):
    a, b = ctx.inputs
    fn, shape = BINARY[ctx.op_name], ctx.out_shape
    return compute(shape, lambda *i: fn(load_broadcast(a, shape, i), load_broadcast(b, shape, i)),
                   ctx.op_name, ctx.out_dtype)


@legalization("where")
def legalize_where(ctx):
    c, a, b = ctx.inputs
    shape = ctx.out_shape
    return compute(shape, lambda *i: select(load_broadcast(c, shape, i), load_broadcast(a, shape, i),
                                            load_broadcast(b, shape, i)), "where", ctx.out_dtype)


