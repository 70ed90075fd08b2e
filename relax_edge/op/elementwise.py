"""Elementwise operators: binary arithmetic and comparisons with numpy
broadcasting across symbolic dims, `where`, `cast`, and unary activations and
math functions. References compute in float64 where rounding matters and
return the input dtype (comparisons return bool)."""

from __future__ import annotations

import math

import numpy as np

from ..ir.types import TensorType, normalize_dtype
from .registry import REQUIRED, Op, RuleError, register
from .rules import broadcast_shapes, float_dtype, same_dtype, tensor

__all__ = ["ERF"]


# ------------------------------------------------------------------ rules

def _binary_rule(types, attrs):
    a, b = tensor(types[0], 0), tensor(types[1], 1)
    dtype = same_dtype([a, b])
    return TensorType(broadcast_shapes(a.shape, b.shape), dtype)


def _numeric_binary_rule(types, attrs):
    t = _binary_rule(types, attrs)
    if t.dtype == "bool":
        raise RuleError("operands must be numeric, got bool")
    return t


def _compare_rule(types, attrs):
    t = _binary_rule(types, attrs)
    return TensorType(t.shape, "bool")


def _logical_rule(types, attrs):
    a, b = tensor(types[0], 0), tensor(types[1], 1)
    if a.dtype != "bool" or b.dtype != "bool":
        raise RuleError(f"operands must be bool, got {a.dtype} and {b.dtype}")
    return _binary_rule(types, attrs)


def _unary_rule(types, attrs):
    return tensor(types[0], 0, need_shape=False)


def _numeric_unary_rule(types, attrs):
    t = tensor(types[0], 0, need_shape=False)
    if t.dtype == "bool":
        raise RuleError("operand must be numeric, got bool")
    return t


def _float_unary_rule(types, attrs):
    t = tensor(types[0], 0, need_shape=False)
    float_dtype(t)
    return t


def _bool_unary_rule(types, attrs):
    t = tensor(types[0], 0, need_shape=False)
    if t.dtype != "bool":
        raise RuleError(f"operand must be bool, got {t.dtype}")
    return t


def _where_rule(types, attrs):
    c, a, b = (tensor(t, i) for i, t in enumerate(types))
    if c.dtype != "bool":
        raise RuleError(f"condition must be bool, got {c.dtype}")
    dtype = same_dtype([a, b])
    return TensorType(broadcast_shapes(broadcast_shapes(c.shape, a.shape), b.shape), dtype)


def _cast_rule(types, attrs):
    t = tensor(types[0], 0, need_shape=False)
    return TensorType(t.shape, normalize_dtype(attrs["dtype"]), t.ndim)


# ------------------------------------------------------------- references

def _divide(a, b):
    if np.issubdtype(a.dtype, np.integer):
        if np.any(b == 0):
            raise ZeroDivisionError("integer division by zero")
        if np.issubdtype(a.dtype, np.unsignedinteger):
            return (a // b).astype(a.dtype)
        q = np.abs(a.astype(np.int64)) // np.abs(b.astype(np.int64))  # truncating, as C and ONNX
        return (np.sign(a) * np.sign(b) * q).astype(a.dtype)
    return np.divide(a, b).astype(a.dtype)


def _power(a, b):
    if np.issubdtype(a.dtype, np.integer):
        return np.power(a.astype(np.int64), b.astype(np.int64)).astype(a.dtype)
    return np.power(a.astype(np.float64), b.astype(np.float64)).astype(a.dtype)


def _in_f64(fn):
    """Apply fn in float64 and return the input's dtype."""
    return lambda x, **attrs: fn(x.astype(np.float64), **attrs).astype(x.dtype)


ERF = np.vectorize(math.erf, otypes=[np.float64])


def _gelu(x, approximate):
    if approximate == "tanh":
        return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))
    return 0.5 * x * (1.0 + ERF(x / math.sqrt(2.0)))


def _clip(x, min, max):  # noqa: A002  (ONNX names)
    out = x
    if min is not None:
        out = np.maximum(out, np.asarray(min, dtype=x.dtype))
    if max is not None:
        out = np.minimum(out, np.asarray(max, dtype=x.dtype))
    return out.astype(x.dtype)


def _cast(x, dtype):
    target = np.dtype(normalize_dtype(dtype))
    if x.dtype.kind == "f" and target.kind in "iu":
        with np.errstate(invalid="ignore"):
            return np.trunc(x).astype(target)
    return x.astype(target)


def _typed(fn):
    return lambda a, b, **attrs: fn(a, b).astype(a.dtype)


_BINARY = {
    "add": _typed(np.add),
    "subtract": _typed(np.subtract),
    "multiply": _typed(np.multiply),
    "divide": lambda a, b: _divide(a, b),
    "power": lambda a, b: _power(a, b),
    "maximum": _typed(np.maximum),
    "minimum": _typed(np.minimum),
}

_COMPARE = {"equal": np.equal, "less": np.less, "greater": np.greater,
            "less_equal": np.less_equal, "greater_equal": np.greater_equal}

_LOGICAL = {"logical_and": np.logical_and, "logical_or": np.logical_or,
            "logical_xor": np.logical_xor}

_FLOAT_UNARY = {
    "sigmoid": _in_f64(lambda x: 1.0 / (1.0 + np.exp(-x))),
    "tanh": _in_f64(np.tanh),
    "exp": _in_f64(np.exp),
    "log": _in_f64(np.log),
    "sqrt": _in_f64(np.sqrt),
    "erf": _in_f64(ERF),
    "reciprocal": _in_f64(lambda x: 1.0 / x),
    "floor": _in_f64(np.floor),
    "ceil": _in_f64(np.ceil),
    "hard_swish": _in_f64(lambda x: x * np.clip(x / 6.0 + 0.5, 0.0, 1.0)),
}

_ANY_UNARY = {
    "relu": lambda x: np.maximum(x, np.zeros((), x.dtype)),
    "negative": lambda x: np.negative(x),
    "abs": lambda x: np.abs(x),
}

for _name, _ref in _BINARY.items():
    # arithmetic on bool is refused (ONNX has none; numpy's bool add is an or, C's would store 2):
    # maximum and minimum stay, as or and and
    _rule = _binary_rule if _name in ("maximum", "minimum") else _numeric_binary_rule
    register(Op(_name, _rule, _ref, kind="broadcast", num_args=(2, 2)))
for _name, _fn in _COMPARE.items():
    register(Op(_name, _compare_rule, (lambda f: lambda a, b: f(a, b))(_fn), kind="broadcast", num_args=(2, 2)))
for _name, _fn in _LOGICAL.items():
    register(Op(_name, _logical_rule, (lambda f: lambda a, b: f(a, b))(_fn), kind="broadcast", num_args=(2, 2)))
for _name, _ref in _FLOAT_UNARY.items():
    register(Op(_name, _float_unary_rule, _ref, kind="elementwise"))
for _name, _ref in _ANY_UNARY.items():
    _rule = _unary_rule if _name == "relu" else _numeric_unary_rule
    register(Op(_name, _rule, (lambda f: lambda x: f(x))(_ref), kind="elementwise"))

register(Op("logical_not", _bool_unary_rule, lambda x: np.logical_not(x), kind="elementwise"))
register(Op("where", _where_rule, lambda c, a, b: np.where(c, a, b), kind="broadcast", num_args=(3, 3)))
register(Op("cast", _cast_rule, _cast, attrs={"dtype": REQUIRED}, kind="elementwise"))
register(Op("clip", _unary_rule, _clip, attrs={"min": None, "max": None}, kind="elementwise"))
register(Op("leaky_relu", _float_unary_rule, _in_f64(lambda x, alpha: np.where(x >= 0, x, alpha * x)),
            attrs={"alpha": 0.01}, kind="elementwise"))
register(Op("hard_sigmoid", _float_unary_rule,
            _in_f64(lambda x, alpha, beta: np.clip(alpha * x + beta, 0.0, 1.0)),
            attrs={"alpha": 0.2, "beta": 0.5}, kind="elementwise"))
register(Op("gelu", _float_unary_rule, _in_f64(_gelu), attrs={"approximate": "none"}, kind="elementwise"))


# ------------------------------------------- activations, trigonometry, tests

def _bool_of_float_rule(types, attrs):
    t = _float_unary_rule(types, attrs)
    return TensorType(t.shape, "bool", t.ndim)


def _mod(a, b, fmod):
    if np.issubdtype(a.dtype, np.integer) and np.any(b == 0):
        raise ZeroDivisionError("integer modulo by zero")
    with np.errstate(invalid="ignore", divide="ignore"):
        return (np.fmod(a, b) if fmod else np.mod(a, b)).astype(a.dtype)


def _shrink(x, bias, lambd):
    wide = x.astype(np.float64)
    out = np.where(wide < -lambd, wide + bias, np.where(wide > lambd, wide - bias, 0.0))
    return out.astype(x.dtype)


def _isinf(x, detect_negative, detect_positive):
    return (np.isposinf(x) & bool(detect_positive)) | (np.isneginf(x) & bool(detect_negative))


_TRIG = {"sin": np.sin, "cos": np.cos, "tan": np.tan, "asin": np.arcsin, "acos": np.arccos, "atan": np.arctan,
         "sinh": np.sinh, "cosh": np.cosh, "asinh": np.arcsinh, "acosh": np.arccosh, "atanh": np.arctanh}


def _quiet(fn):
    """fn with numpy's warnings off: NaN outside the domain, inf on overflow, as C."""
    def call(x, **attrs):
        with np.errstate(all="ignore"):
            return fn(x, **attrs)
    return call


_MORE_FLOAT_UNARY = {
    **{name: _quiet(_in_f64(fn)) for name, fn in _TRIG.items()},
    "round": _in_f64(np.round),   # halves to even
    "softplus": _quiet(_in_f64(lambda x: np.logaddexp(0.0, x))),
    "softsign": _in_f64(lambda x: x / (1.0 + np.abs(x))),
    "mish": _quiet(_in_f64(lambda x: x * np.tanh(np.logaddexp(0.0, x)))),
}
for _name, _ref in _MORE_FLOAT_UNARY.items():
    register(Op(_name, _float_unary_rule, (lambda f: lambda x: f(x))(_ref), kind="elementwise"))

register(Op("sign", _numeric_unary_rule, lambda x: np.sign(x).astype(x.dtype), kind="elementwise"))
register(Op("isnan", _bool_of_float_rule, lambda x: np.isnan(x), kind="elementwise"))
register(Op("isinf", _bool_of_float_rule, _isinf, attrs={"detect_negative": True, "detect_positive": True},
            kind="elementwise"))
register(Op("elu", _float_unary_rule, _quiet(_in_f64(lambda x, alpha: np.where(x < 0, alpha * np.expm1(x), x))),
            attrs={"alpha": 1.0}, kind="elementwise"))
register(Op("selu", _float_unary_rule,
            _quiet(_in_f64(lambda x, alpha, gamma: gamma * np.where(x > 0, x, alpha * np.expm1(x)))),
            attrs={"alpha": 1.67326319217681884765625, "gamma": 1.05070102214813232421875}, kind="elementwise"))
register(Op("celu", _float_unary_rule,
            _quiet(_in_f64(lambda x, alpha: np.maximum(x, 0.0) + np.minimum(0.0, alpha * np.expm1(x / alpha)))),
            attrs={"alpha": 1.0}, kind="elementwise"))
register(Op("thresholded_relu", _float_unary_rule, _in_f64(lambda x, alpha: np.where(x > alpha, x, 0.0)),
            attrs={"alpha": 1.0}, kind="elementwise"))
register(Op("swish", _float_unary_rule, _quiet(_in_f64(lambda x, alpha: x / (1.0 + np.exp(-alpha * x)))),
            attrs={"alpha": 1.0}, kind="elementwise"))
register(Op("shrink", _numeric_unary_rule, _shrink, attrs={"bias": 0.0, "lambd": 0.5}, kind="elementwise"))
register(Op("prelu", _numeric_binary_rule, lambda x, slope: np.where(x < 0, slope * x, x).astype(x.dtype),
            kind="broadcast", num_args=(2, 2)))
register(Op("mod", _numeric_binary_rule, _mod, attrs={"fmod": False}, kind="broadcast", num_args=(2, 2)))


# ------------------------------------------------------------ bit operations

def _int_binary_rule(types, attrs):
    t = _binary_rule(types, attrs)
    if not np.issubdtype(np.dtype(t.dtype), np.integer):
        raise RuleError(f"operands must be integers, got {t.dtype}")
    return t


def _int_unary_rule(types, attrs):
    t = tensor(types[0], 0, need_shape=False)
    if not np.issubdtype(np.dtype(t.dtype), np.integer):
        raise RuleError(f"operand must be an integer, got {t.dtype}")
    return t


def _bit_shift(x, y, direction):
    """ONNX BitShift: a shift by less than 0 or by the width or more leaves
    only the sign fill (-1 for a negative x shifted right, else 0)."""
    bits = x.dtype.itemsize * 8
    out_of_range = (y < 0) | (y >= bits)
    amount = np.where(out_of_range, 0, y).astype(x.dtype)
    shifted = np.left_shift(x, amount) if direction == "left" else np.right_shift(x, amount)
    fill = np.where((x < 0) & (direction == "right"), -1, 0).astype(x.dtype)
    return np.where(out_of_range, fill, shifted).astype(x.dtype)


for _name, _fn in {"bitwise_and": np.bitwise_and, "bitwise_or": np.bitwise_or,
                   "bitwise_xor": np.bitwise_xor}.items():
    register(Op(_name, _int_binary_rule, (lambda f: lambda a, b: f(a, b))(_fn), kind="broadcast", num_args=(2, 2)))
register(Op("bitwise_not", _int_unary_rule, lambda x: np.invert(x), kind="elementwise"))
register(Op("bit_shift", _int_binary_rule, _bit_shift, attrs={"direction": REQUIRED}, kind="broadcast",
            num_args=(2, 2)))
