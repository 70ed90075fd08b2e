"""ONNX random operators: RandomUniform, RandomNormal, RandomUniformLike,
RandomNormalLike (opsets 1 and 22), Bernoulli (15, 22) and Multinomial (7,
22), every dtype their schemas allow, over op/random.py's counter-based
generator (splitmix64 of the seed and the element index).

The values are NOT ONNX Runtime's (nor the ONNX reference's): the same seed
gives the same values in relax_edge's interpreter, C and LLVM builds on
every board, with the distribution the operator asks for, but not the
numbers another runtime draws.

Seeds: the float attribute `seed` becomes the 64 bits of its float64 value
(distinct seeds, distinct streams). Without a seed the seed is fixed at
import: the CRC-32 of the node's first output name with bit 63 set (as a
float64, a negative subnormal: no seed a model would state), so a model
draws the same values on every call and every run; ONNX Runtime picks a new
seed per session instead.

A RandomUniform / RandomNormal of a static shape is not computed at import
(its kernel is smaller than its values); the build's fold_constants folds it
when it is small.

Multinomial: the weights are `exp(x - max(x))` per row (float16 computed in
float32), drawn by inverse CDF (op/random.py)."""

from __future__ import annotations

import struct
import zlib

import numpy as np

from ....errors import RelaxEdgeError
from ....op import make_call
from ....op.random import FLOAT_DTYPES
from ..context import ONNX_DTYPE_NAMES, ONNX_DTYPES, converter


def _seed(ctx) -> int:
    if ctx.has_attr("seed"):
        return struct.unpack("<Q", struct.pack("<d", ctx.attr("seed", None, float)))[0]
    return zlib.crc32(ctx.node.output[0].encode()) | 1 << 63


def _dtype(ctx, default: str, allowed) -> str:
    code = ctx.attr("dtype", None, int)
    if code is None:
        dtype = default
    elif code not in ONNX_DTYPES:
        raise ctx.error(f"attribute dtype: element type {ONNX_DTYPE_NAMES.get(code, code)} is not supported")
    else:
        dtype = ONNX_DTYPES[code]
    if dtype not in allowed:
        raise ctx.error(f"the output element type {dtype} is not allowed (allowed: {', '.join(allowed)})")
    return dtype


def _like_shape(ctx, x):
    shape = ctx.type_of(x).shape
    if shape is None:
        raise ctx.error("the input's shape must be known (its rank at least)")
    return tuple(shape)


def _shape_attr(ctx):
    shape = ctx.attr("shape", None, list)
    if shape is None or any(not isinstance(d, int) or d < 0 for d in shape):
        raise ctx.error(f"attribute shape must be a list of sizes >= 0, got {shape!r}")
    ctx.check_constant_size(shape, "float64", "the random tensor")
    return tuple(shape)


def _float_default(ctx, x) -> str:
    """*Like's default output type: the input's, which must then be floating point."""
    dtype = ctx.type_of(x).dtype
    if ctx.attr("dtype") is None and dtype not in FLOAT_DTYPES:
        raise ctx.error(f"the input is {dtype}: attribute dtype must name a floating-point output type")
    return dtype


# ONNX generator -> (graph operator, its two float attributes with their defaults)
_GENERATORS = {"RandomUniform": ("random_uniform", ("low", 0.0), ("high", 1.0)),
               "RandomNormal": ("random_normal", ("mean", 0.0), ("scale", 1.0))}


@converter("RandomUniform", "RandomUniformLike", "RandomNormal", "RandomNormalLike")
def convert_random_generator(ctx, inputs):
    base = ctx.node.op_type.removesuffix("Like")
    like = base != ctx.node.op_type
    op, (a, a_default), (b, b_default) = _GENERATORS[base]
    shape = _like_shape(ctx, inputs[0]) if like else _shape_attr(ctx)
    dtype = _dtype(ctx, _float_default(ctx, inputs[0]) if like else "float32", FLOAT_DTYPES)
    va, vb = ctx.attr(a, a_default, float), ctx.attr(b, b_default, float)
    uniform = op == "random_uniform"
    if not np.isfinite([va, vb]).all() or (uniform and vb < va):
        raise ctx.error(f"{a}={va} and {b}={vb} must be finite" + (f" with {a} <= {b}" if uniform else ""))
    attrs = {"shape": shape, "dtype": dtype, a: va, b: vb, "seed": _seed(ctx)}
    try:   # not folded at import (ctx.emit would): a large random tensor stays a kernel, not a weight
        return ctx.builder.emit(make_call(op, [], attrs, span=ctx.span))
    except RelaxEdgeError as err:
        raise ctx.error(str(err)) from None


@converter("Bernoulli")
def convert_bernoulli(ctx, inputs):
    p = inputs[0]
    source = ctx.type_of(p).dtype
    if source not in FLOAT_DTYPES:
        raise ctx.error(f"the probabilities must be floating point, got {source}")
    dtype = _dtype(ctx, source, tuple(ONNX_DTYPES.values()))
    return ctx.emit("bernoulli", [p], {"dtype": dtype, "seed": _seed(ctx)})


@converter("Multinomial")
def convert_multinomial(ctx, inputs):
    x = inputs[0]
    t = ctx.type_of(x)
    if t.dtype not in FLOAT_DTYPES or t.ndim != 2:
        raise ctx.error(f"the input must be a 2-D (batch, classes) floating-point tensor, got {t}")
    sample_size = ctx.attr("sample_size", 1, int)
    if sample_size < 1:
        raise ctx.error(f"attribute sample_size must be >= 1, got {sample_size}")
    dtype = _dtype(ctx, "int32", ("int32", "int64"))
    if t.dtype != "float64":
        x = ctx.emit("cast", [x], {"dtype": "float32"}) if t.dtype != "float32" else x
    row_max = ctx.emit("max", [x], {"axis": (1,), "keepdims": True})
    weights = ctx.emit("exp", [ctx.emit("subtract", [x, row_max])])
    return ctx.emit("multinomial", [weights], {"sample_size": sample_size, "dtype": dtype, "seed": _seed(ctx)})
