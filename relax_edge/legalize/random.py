"""Legalization of the random operators as elementwise tensor programs:
each element hashes its own row-major index with splitmix64 in uint64
arithmetic (every product and sum cast back to uint64, so the interpreter
wraps as C and LLVM do) and turns the bits into a value as op/random.py
defines. multinomial has three stages: the rows' cumulative weights
(a masked sum, O(classes^2) per row), each sample's target `u * total`,
and the count of cumulative weights at or below it."""

from __future__ import annotations

from ..ir.shape import as_expr
from ..op.random import GAMMA, MIX1, MIX2, TWO_PI
from ..tir.compute import compute, reduce_axis, reduce_sum
from ..tir.expr import BinOp, Cast, cast, const, index, intrinsic, select
from .common import legalization

U64 = "uint64"


def _u64(op, a, b):
    """A uint64 operation wrapped to 64 bits."""
    return Cast(BinOp(op, a, b, U64), U64)


def _xorshift(z, k):
    return _u64("bitxor", z, BinOp("shr", z, const(k, U64), U64))


def splitmix64(seed: int, counter):
    """The 64 bits of element `counter` (an index expression) under `seed`."""
    z = _u64("add", const(seed, U64), _u64("mul", cast(index(as_expr(counter) + 1), U64), const(GAMMA, U64)))
    z = _u64("mul", _xorshift(z, 30), const(MIX1, U64))
    z = _u64("mul", _xorshift(z, 27), const(MIX2, U64))
    return _xorshift(z, 31)


def _flat(idx, shape):
    flat = as_expr(0)
    for i, d in zip(idx, shape):
        flat = flat * d + i
    return flat


def _to_float(bits_expr, dtype):
    """An unsigned value below 2^53 as a float (through int64: exact, and no uint64 conversion)."""
    return cast(cast(bits_expr, "int64"), dtype)


def uniform(bits, dtype: str):
    """In [0, 1): float64 from 53 bits, float32 from 24."""
    if dtype == "float64":
        return _to_float(BinOp("shr", bits, const(11, U64), U64), dtype) * const(2.0 ** -53, dtype)
    return _to_float(BinOp("shr", bits, const(40, U64), U64), "float32") * const(2.0 ** -24, "float32")


def _compute_type(dtype):
    return "float64" if dtype == "float64" else "float32"


@legalization("random_uniform")
def legalize_random_uniform(ctx):
    a, dtype, shape = ctx.attrs, ctx.out_dtype, ctx.out_shape
    ct = _compute_type(dtype)

    def element(*i):
        u = uniform(splitmix64(a["seed"], _flat(i, shape)), ct)
        return cast(const(a["low"], ct) + const(a["high"] - a["low"], ct) * u, dtype)
    return compute(shape, element, "random_uniform", dtype)


def normal(bits, mean: float, scale: float):
    """Box-Muller in float64."""
    f64 = "float64"
    u1 = (_to_float(BinOp("shr", bits, const(32, U64), U64), f64) + const(1.0, f64)) * const(2.0 ** -32, f64)
    u2 = _to_float(BinOp("bitand", bits, const(0xFFFFFFFF, U64), U64), f64) * const(2.0 ** -32, f64)
    radius = intrinsic("sqrt", const(-2.0, f64) * intrinsic("log", u1))
    return const(mean, f64) + const(scale, f64) * (radius * intrinsic("cos", const(TWO_PI, f64) * u2))


@legalization("random_normal")
def legalize_random_normal(ctx):
    a, dtype, shape = ctx.attrs, ctx.out_dtype, ctx.out_shape

    def element(*i):
        value = normal(splitmix64(a["seed"], _flat(i, shape)), a["mean"], a["scale"])
        return value if dtype == "float64" else cast(cast(value, "float32"), dtype)
    return compute(shape, element, "random_normal", dtype)


@legalization("bernoulli")
def legalize_bernoulli(ctx):
    (p,) = ctx.inputs
    dtype, shape, seed = ctx.out_dtype, ctx.out_shape, ctx.attrs["seed"]
    ct = _compute_type(p.dtype)

    def element(*i):
        return cast(uniform(splitmix64(seed, _flat(i, shape)), ct) < cast(p[i], ct), dtype)
    return compute(shape, element, "bernoulli", dtype)


@legalization("multinomial")
def legalize_multinomial(ctx):
    (weights,) = ctx.inputs
    batch, classes = weights.shape
    samples = ctx.attrs["sample_size"]
    dtype, ft, seed = ctx.out_dtype, weights.dtype, ctx.attrs["seed"]
    k = reduce_axis(classes, "k")
    cdf = compute((batch, classes), lambda b, j: reduce_sum(
        select(index(k.var) <= index(j), weights[b, k.var], const(0.0, ft)), [k]), "multinomial_cdf", ft)
    target = compute((batch, samples), lambda b, s: uniform(splitmix64(seed, as_expr(b) * samples + s), ft)
                     * cdf[b, as_expr(classes) - 1], "multinomial_target", ft)
    j = reduce_axis(as_expr(classes) - 1, "j")
    return compute((batch, samples), lambda b, s: reduce_sum(
        cast(cdf[b, j.var] <= target[b, s], dtype), [j]), "multinomial", dtype)
