"""Converters for elementwise ONNX operators.

Arithmetic, comparisons, Where, Not, Cast and the like on import-time
integers (shape values) are evaluated symbolically where the answer is
decidable; otherwise they become graph operators."""

from __future__ import annotations

import numpy as np

from ....errors import ShapeError
from ....ir.shape import (
    IntExpr,
    Proof,
    as_expr,
    bounds,
    floordiv,
    floormod,
    max_expr,
    min_expr,
    monomial_quotient,
    prove_equal,
    prove_lt,
)
from ..context import converter, onnx_dtype
from ..values import SymInts, from_static, static_array, to_object


class _Undecidable(Exception):
    pass


def _trunc_div(a: IntExpr, b: IntExpr) -> IntExpr:
    if bounds(a)[0] >= 0 and bounds(b)[0] > 0:
        return floordiv(a, b)
    if bounds(a)[0] >= 0 and bounds(b)[0] == 0 and not b.is_const:
        # b may be 0 only where ONNX's integer Div is undefined; an exact quotient (swin_t's
        # (batch * windows) / windows) leaves no division to fault at run time
        q = monomial_quotient(a, b)
        if q is not None:
            return q
    raise _Undecidable


def _floor_mod(a: IntExpr, b: IntExpr) -> IntExpr:
    if bounds(b)[0] > 0:  # integer Mod takes the divisor's sign: floor semantics
        return floormod(a, b)
    raise _Undecidable


def _decide(p: Proof) -> bool:
    if p is Proof.UNKNOWN:
        raise _Undecidable
    return p is Proof.YES


_SYM_ARITH = {
    "Add": lambda a, b: a + b, "Sub": lambda a, b: a - b, "Mul": lambda a, b: a * b,
    "Div": _trunc_div, "Min": min_expr, "Max": max_expr,
    "Mod": _floor_mod,
}
_SYM_COMPARE = {
    "Equal": lambda a, b: _decide(prove_equal(a, b)),
    "Less": lambda a, b: _decide(prove_lt(a, b)),
    "Greater": lambda a, b: _decide(prove_lt(b, a)),
}


def _as_objects(arr):
    return arr if arr.dtype == object else to_object(arr)


def symbolic_binary(op_type, inputs):
    """Evaluate on import-time integers with at least one symbolic entry, or None."""
    if not any(isinstance(v, SymInts) for v in inputs):
        return None
    arrs = [static_array(v) for v in inputs]
    if any(a is None or (a.dtype != object and a.dtype.kind not in "iu") for a in arrs):
        return None
    try:
        objs = np.broadcast_arrays(*[_as_objects(a) for a in arrs])
    except ValueError:
        raise ShapeError(f"shapes {', '.join(str(a.shape) for a in arrs)} cannot be broadcast together") from None
    dtype = next(v.dtype for v in inputs if isinstance(v, SymInts))
    try:
        if op_type in _SYM_ARITH:
            out = np.empty(objs[0].shape, dtype=object)
            fn = _SYM_ARITH[op_type]
            acc = objs[0]
            for other in objs[1:]:
                out = np.empty(acc.shape, dtype=object)
                out.reshape(-1)[:] = [fn(x, y) for x, y in zip(acc.reshape(-1), other.reshape(-1))]
                acc = out
            return from_static(acc, dtype)
        fn = _SYM_COMPARE[op_type]
        flat = [fn(x, y) for x, y in zip(objs[0].reshape(-1), objs[1].reshape(-1))]
        return np.array(flat, dtype=bool).reshape(objs[0].shape)
    except _Undecidable:
        return None


_BINARY = {"Add": "add", "Sub": "subtract", "Mul": "multiply", "Div": "divide", "Pow": "power",
           "Equal": "equal", "Less": "less", "Greater": "greater", "LessOrEqual": "less_equal",
           "GreaterOrEqual": "greater_equal", "And": "logical_and", "Or": "logical_or",
           "Xor": "logical_xor"}


@converter(*_BINARY)
def convert_binary(ctx, inputs):
    op_type = ctx.node.op_type
    if op_type in _SYM_ARITH or op_type in _SYM_COMPARE:
        sym = symbolic_binary(op_type, inputs)
        if sym is not None:
            return sym
    a, b = inputs
    if op_type == "Pow":
        tb = ctx.type_of(b)
        if tb.dtype != ctx.type_of(a).dtype:  # ONNX allows a different exponent type
            b = ctx.emit("cast", [b], {"dtype": ctx.type_of(a).dtype})
    return ctx.emit(_BINARY[op_type], [a, b])


@converter("Min", "Max", "Sum", "Mean")
def convert_variadic(ctx, inputs):
    op_type = ctx.node.op_type
    if op_type in ("Min", "Max"):
        sym = symbolic_binary(op_type, inputs)
        if sym is not None:
            return sym
    name = {"Min": "minimum", "Max": "maximum", "Sum": "add", "Mean": "add"}[op_type]
    acc = inputs[0]
    for other in inputs[1:]:
        acc = ctx.emit(name, [acc, other])
    if op_type == "Mean":
        dtype = ctx.type_of(acc).dtype
        acc = ctx.emit("divide", [acc, np.array(len(inputs), dtype=dtype)])
    return acc if len(inputs) > 1 else ctx.emit("add", [acc, np.zeros((), ctx.type_of(acc).dtype)])


@converter("Mod")
def convert_mod(ctx, inputs):
    fmod = ctx.attr("fmod", 0, int)
    if fmod not in (0, 1):
        raise ctx.error(f"attribute fmod must be 0 or 1, got {fmod}")
    if not fmod:
        sym = symbolic_binary("Mod", inputs)
        if sym is not None:
            return sym
    return ctx.emit("mod", inputs, {"fmod": bool(fmod)})   # folded when both are constants


@converter("Where")
def convert_where(ctx, inputs):
    cond, a, b = inputs
    c, sa, sb = ctx.known(cond), static_array(a), static_array(b)
    if c is not None and sa is not None and sb is not None and (isinstance(a, SymInts) or isinstance(b, SymInts)):
        dtype = a.dtype if isinstance(a, SymInts) else b.dtype
        return from_static(np.where(c, _as_objects(sa), _as_objects(sb)), dtype)
    return ctx.emit("where", [cond, a, b])


@converter("Not")
def convert_not(ctx, inputs):
    return ctx.emit("logical_not", inputs)


_UNARY = {"Relu": "relu", "Sigmoid": "sigmoid", "Tanh": "tanh", "Erf": "erf", "Sqrt": "sqrt",
          "Reciprocal": "reciprocal", "Neg": "negative", "Abs": "abs", "Exp": "exp", "Log": "log",
          "Floor": "floor", "Ceil": "ceil", "HardSwish": "hard_swish"}


@converter(*_UNARY)
def convert_unary(ctx, inputs):
    (x,) = inputs
    if ctx.node.op_type in ("Neg", "Abs") and isinstance(x, SymInts):
        fn = (lambda e: -e) if ctx.node.op_type == "Neg" else None
        if fn is not None:
            return from_static(np.vectorize(fn, otypes=[object])(x.values), x.dtype)
    return ctx.emit(_UNARY[ctx.node.op_type], [x])


@converter("LeakyRelu")
def convert_leaky_relu(ctx, inputs):
    return ctx.emit("leaky_relu", inputs, {"alpha": ctx.attr("alpha", 0.01, float)})


@converter("HardSigmoid")
def convert_hard_sigmoid(ctx, inputs):
    return ctx.emit("hard_sigmoid", inputs, {"alpha": ctx.attr("alpha", 0.2, float),
                                             "beta": ctx.attr("beta", 0.5, float)})


@converter("Gelu")
def convert_gelu(ctx, inputs):
    approximate = ctx.attr("approximate", "none", str)
    if approximate not in ("none", "tanh"):
        raise ctx.error(f"attribute approximate must be 'none' or 'tanh', got {approximate!r}")
    return ctx.emit("gelu", inputs, {"approximate": approximate})


@converter("Clip")
def convert_clip(ctx, inputs):
    x = inputs[0]
    if ctx.opset < 11:
        return ctx.emit("clip", [x], {"min": ctx.attr("min", None, float), "max": ctx.attr("max", None, float)})
    bounds_ = []
    for i in (1, 2):
        v = inputs[i] if len(inputs) > i else None
        bounds_.append(v)
    lo, hi = (ctx.known(v) if v is not None else None for v in bounds_)
    for name, k in (("min", lo), ("max", hi)):
        if k is not None and k.size != 1:
            raise ctx.error(f"{name} must be a scalar, got shape {k.shape}")
    if all(v is None or k is not None for v, k in zip(bounds_, (lo, hi))):
        return ctx.emit("clip", [x], {"min": None if lo is None else lo.item(),
                                      "max": None if hi is None else hi.item()})
    if bounds_[0] is not None:  # run-time bounds
        x = ctx.emit("maximum", [x, bounds_[0]])
    if bounds_[1] is not None:
        x = ctx.emit("minimum", [x, bounds_[1]])
    return x


@converter("Cast", "CastLike")
def convert_cast(ctx, inputs):
    x = inputs[0]
    if ctx.node.op_type == "Cast":
        dtype = onnx_dtype(ctx.attr("to", kind=int), "attribute to")
    else:
        dtype = ctx.type_of(inputs[1]).dtype
    if isinstance(x, SymInts) and dtype in ("int32", "int64"):
        return SymInts(x.values, dtype)
    return ctx.emit("cast", [x], {"dtype": dtype})


@converter("Identity")
def convert_identity(ctx, inputs):
    return inputs[0]


@converter("Dropout")
def convert_dropout(ctx, inputs):
    """Inference: the input, and a mask of ones if asked for."""
    x = inputs[0]
    if len(inputs) > 2 and inputs[2] is not None:
        training = ctx.known(inputs[2])
        if training is not None and training.size != 1:
            raise ctx.error(f"training_mode must be a scalar, got shape {training.shape}")
        if training is None or bool(training.reshape(())):
            raise ctx.error("Dropout in training mode is not supported (inference only)")
    if len(ctx.node.output) > 1 and ctx.node.output[1]:
        t = ctx.type_of(x)
        return [x, ctx.emit("full", [], {"shape": t.shape, "value": True, "dtype": "bool"})]
    return x


_UNARY_MORE = {"Sin": "sin", "Cos": "cos", "Tan": "tan", "Asin": "asin", "Acos": "acos", "Atan": "atan",
               "Sinh": "sinh", "Cosh": "cosh", "Asinh": "asinh", "Acosh": "acosh", "Atanh": "atanh",
               "Round": "round", "Softplus": "softplus", "Softsign": "softsign", "Mish": "mish", "Sign": "sign",
               "IsNaN": "isnan"}


@converter(*_UNARY_MORE)
def convert_unary_more(ctx, inputs):
    return ctx.emit(_UNARY_MORE[ctx.node.op_type], inputs[:1])


# op type -> (our operator, {attribute: default}); every attribute a float
_FLOAT_ATTR_ACTIVATIONS = {
    "Elu": ("elu", {"alpha": 1.0}),
    "Selu": ("selu", {"alpha": 1.67326319217681884765625, "gamma": 1.05070102214813232421875}),
    "Celu": ("celu", {"alpha": 1.0}),
    "ThresholdedRelu": ("thresholded_relu", {"alpha": 1.0}),
    "Swish": ("swish", {"alpha": 1.0}),
    "Shrink": ("shrink", {"bias": 0.0, "lambd": 0.5}),
}


@converter(*_FLOAT_ATTR_ACTIVATIONS)
def convert_float_attr_activation(ctx, inputs):
    name, defaults = _FLOAT_ATTR_ACTIVATIONS[ctx.node.op_type]
    attrs = {k: ctx.attr(k, v, float) for k, v in defaults.items()}
    if name == "celu" and attrs["alpha"] == 0.0:
        raise ctx.error("attribute alpha must not be 0")
    return ctx.emit(name, inputs[:1], attrs)


@converter("IsInf")
def convert_isinf(ctx, inputs):
    return ctx.emit("isinf", inputs[:1], {"detect_negative": bool(ctx.attr("detect_negative", 1, int)),
                                          "detect_positive": bool(ctx.attr("detect_positive", 1, int))})


@converter("PRelu")
def convert_prelu(ctx, inputs):
    x, slope = inputs
    tx, ts = ctx.type_of(x), ctx.type_of(slope)
    if ts.ndim > tx.ndim:
        raise ctx.error(f"slope of rank {ts.ndim} does not broadcast to the input's rank {tx.ndim}")
    return ctx.emit("prelu", [x, slope])


@converter("Hardmax")
def convert_hardmax(ctx, inputs):
    """1 at the first maximum along `axis`, 0 elsewhere: argmax compared with
    the positions along the axis. Before opset 13 the input is seen as 2-D
    (the dims before `axis` by the dims from it)."""
    x = inputs[0]
    t = ctx.type_of(x)
    axis = ctx.attr("axis", -1 if ctx.opset >= 13 else 1, int)
    if not -t.ndim <= axis < max(t.ndim, 1):
        raise ctx.error(f"attribute axis {axis} is out of range for rank {t.ndim}")
    axis %= max(t.ndim, 1)
    shape = list(t.shape)
    if ctx.opset < 13:
        outer, inner = as_expr(1), as_expr(1)
        for d in shape[:axis]:
            outer = outer * d
        for d in shape[axis:]:
            inner = inner * d
        x, axis = ctx.emit("reshape", [x], {"shape": (outer, inner)}), 1
    rows = list(ctx.type_of(x).shape)
    best = ctx.emit("argmax", [x], {"axis": axis, "keepdims": True})
    along = [as_expr(1)] * len(rows)
    along[axis] = rows[axis]
    positions = ctx.emit("reshape", [ctx.emit("arange", [], {"stop": rows[axis]})], {"shape": tuple(along)})
    out = ctx.emit("cast", [ctx.emit("equal", [positions, best])], {"dtype": t.dtype})
    return ctx.emit("reshape", [out], {"shape": tuple(shape)}) if ctx.opset < 13 else out


_BITWISE = {"BitwiseAnd": "bitwise_and", "BitwiseOr": "bitwise_or", "BitwiseXor": "bitwise_xor",
            "BitwiseNot": "bitwise_not"}


@converter(*_BITWISE)
def convert_bitwise(ctx, inputs):
    return ctx.emit(_BITWISE[ctx.node.op_type], inputs)


@converter("BitShift")
def convert_bit_shift(ctx, inputs):
    direction = ctx.attr("direction", kind=str)
    if direction not in ("LEFT", "RIGHT"):
        raise ctx.error(f"attribute direction must be 'LEFT' or 'RIGHT', got {direction!r}")
    return ctx.emit("bit_shift", inputs, {"direction": direction.lower()})
