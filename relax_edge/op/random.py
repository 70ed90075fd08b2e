"""Random operators: random_uniform, random_normal (a shape, possibly
symbolic), bernoulli (a probability per element) and multinomial (classes
drawn from each row of unnormalized weights).

The generator is counter based, so every element is computed on its own (in
parallel, in any order, the same on every target): element `i` of a call
with seed `s` (a uint64) takes the 64 bits

    splitmix64(s, i) = mix(s + (i + 1) * 0x9E3779B97F4A7C15)
    mix(z): z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
            z = (z ^ (z >> 27)) * 0x94D049BB133111EB
            return z ^ (z >> 31)

the i-th output of Steele, Lea and Flood's SplitMix64 seeded with `s`
("Fast splittable pseudorandom number generators", OOPSLA 2014; Vigna's
reference splitmix64.c), all arithmetic modulo 2^64. `i` is the row-major
element index (multinomial: batch * sample_size + sample). From the bits:

- uniform in [0, 1): float32 (and float16 / bfloat16, computed in float32)
  `(bits >> 40) * 2^-24`, float64 `(bits >> 11) * 2^-53`; random_uniform is
  `low + (high - low) * u` in that type;
- normal (Box-Muller, in float64 for every output type, rounded to float32
  and then to a narrower type): `u1 = ((bits >> 32) + 1) * 2^-32` in (0, 1],
  `u2 = (bits & 0xFFFFFFFF) * 2^-32`, `mean + scale * sqrt(-2 log u1) *
  cos(2 pi u2)`;
- bernoulli: 1 where `u < p` (u in p's type: float64, else float32);
- multinomial: with `cdf` the cumulative sums of a row's weights (float32
  or float64, summed in order) and `t = u * cdf[-1]`, the class is the
  number of `j < C - 1` with `cdf[j] <= t` (inverse CDF; a class of weight
  0 is never drawn but for the last class when `t` rounds up to the total).

The references below are this definition in numpy; the tensor programs
(legalize/random.py) compute the same operations, so the interpreter, C and
LLVM agree bit for bit on uniforms, Bernoulli and Multinomial draws, and
normals agree to the libm's last bit (float64 log and cos). The values are
not ONNX Runtime's (its generators are its own).
"""

from __future__ import annotations

import numpy as np

from ..ir.shape import as_expr
from ..ir.types import TensorType, normalize_dtype
from .registry import REQUIRED, Op, RuleError, register
from .rules import tensor

__all__ = ["GAMMA", "MIX1", "MIX2", "FLOAT_DTYPES", "splitmix64", "uniform_bits"]

GAMMA, MIX1, MIX2 = 0x9E3779B97F4A7C15, 0xBF58476D1CE4E5B9, 0x94D049BB133111EB
TWO_PI = 6.283185307179586
FLOAT_DTYPES = ("float16", "bfloat16", "float32", "float64")
SAMPLE_DTYPES = ("int32", "int64")


def splitmix64(seed: int, counter) -> np.ndarray:
    """The 64 bits of each element of `counter` (uint64 indices) under `seed`."""
    u = np.uint64
    with np.errstate(over="ignore"):
        z = u(seed) + (np.asarray(counter, np.uint64) + u(1)) * u(GAMMA)
        z = (z ^ (z >> u(30))) * u(MIX1)
        z = (z ^ (z >> u(27))) * u(MIX2)
        return z ^ (z >> u(31))


def uniform_bits(bits: np.ndarray, dtype: str) -> np.ndarray:
    """Uniforms in [0, 1) from the bits: float64 from 53 of them, float32 from 24."""
    if dtype == "float64":
        return (bits >> np.uint64(11)).astype(np.float64) * np.float64(2.0 ** -53)
    return (bits >> np.uint64(40)).astype(np.float32) * np.float32(2.0 ** -24)


def _bits(shape, seed):
    count = int(np.prod(shape, dtype=np.int64))
    return splitmix64(seed, np.arange(count, dtype=np.uint64)).reshape(tuple(shape))


def _seed(attrs):
    seed = attrs["seed"]
    if not isinstance(seed, int) or not 0 <= seed < 2 ** 64:
        raise RuleError(f"seed must be an integer in [0, 2^64), got {seed!r}")


def _float_out(attrs):
    dtype = normalize_dtype(attrs["dtype"])
    if dtype not in FLOAT_DTYPES:
        raise RuleError(f"dtype must be one of {', '.join(FLOAT_DTYPES)}, got {dtype}")
    return dtype


def _generator_rule(types, attrs):
    _seed(attrs)
    return TensorType(tuple(as_expr(d) for d in attrs["shape"]), _float_out(attrs))


def _compute_type(dtype: str) -> str:
    return "float64" if dtype == "float64" else "float32"


def _random_uniform_ref(shape, dtype, low, high, seed):
    ct = np.dtype(_compute_type(dtype))
    u = uniform_bits(_bits(shape, seed), ct.name)
    with np.errstate(all="ignore"):
        return (ct.type(low) + ct.type(high - low) * u).astype(dtype)


def normal_from_bits(bits: np.ndarray, mean: float, scale: float) -> np.ndarray:
    """Box-Muller in float64 (the module docstring)."""
    u1 = ((bits >> np.uint64(32)).astype(np.float64) + 1.0) * 2.0 ** -32
    u2 = (bits & np.uint64(0xFFFFFFFF)).astype(np.float64) * 2.0 ** -32
    return np.float64(mean) + np.float64(scale) * (np.sqrt(-2.0 * np.log(u1)) * np.cos(TWO_PI * u2))


def _random_normal_ref(shape, dtype, mean, scale, seed):
    value = normal_from_bits(_bits(shape, seed), mean, scale)
    return value if dtype == "float64" else value.astype(np.float32).astype(dtype)


def _bernoulli_rule(types, attrs):
    p = tensor(types[0])
    if p.dtype not in FLOAT_DTYPES:
        raise RuleError(f"the probabilities must be floating point, got {p.dtype}")
    _seed(attrs)
    return TensorType(p.shape, normalize_dtype(attrs["dtype"]))


def _bernoulli_ref(p, dtype, seed):
    p = np.asarray(p)
    ct = _compute_type(p.dtype.name)
    u = uniform_bits(_bits(p.shape, seed), ct)
    return (u < p.astype(ct)).astype(dtype)


def _multinomial_rule(types, attrs):
    weights = tensor(types[0])
    if weights.dtype not in ("float32", "float64") or weights.ndim != 2:
        raise RuleError(f"the weights must be a float32 or float64 (batch, classes) tensor, got {weights}")
    if attrs["dtype"] not in SAMPLE_DTYPES:
        raise RuleError(f"dtype must be int32 or int64, got {attrs['dtype']}")
    if not isinstance(attrs["sample_size"], int) or attrs["sample_size"] < 1:
        raise RuleError(f"sample_size must be a positive integer, got {attrs['sample_size']!r}")
    _seed(attrs)
    return TensorType((weights.shape[0], as_expr(attrs["sample_size"])), attrs["dtype"])


def _multinomial_ref(weights, sample_size, dtype, seed):
    cdf = np.cumsum(weights, axis=1, dtype=weights.dtype)   # in order, in the weights' type
    batch, classes = cdf.shape
    u = uniform_bits(_bits((batch, sample_size), seed), cdf.dtype.name)
    target = u * cdf[:, -1:]
    return (cdf[:, None, :classes - 1] <= target[:, :, None]).sum(axis=2).astype(dtype)


register(Op("random_uniform", _generator_rule, _random_uniform_ref,
            attrs={"shape": REQUIRED, "dtype": "float32", "low": 0.0, "high": 1.0, "seed": REQUIRED},
            num_args=(0, 0), doc="uniform in [low, high) from splitmix64(seed, element index)"))
register(Op("random_normal", _generator_rule, _random_normal_ref,
            attrs={"shape": REQUIRED, "dtype": "float32", "mean": 0.0, "scale": 1.0, "seed": REQUIRED},
            num_args=(0, 0), doc="normal (Box-Muller) from splitmix64(seed, element index)"))
register(Op("bernoulli", _bernoulli_rule, _bernoulli_ref, attrs={"dtype": REQUIRED, "seed": REQUIRED},
            doc="1 where a uniform from splitmix64(seed, element index) is below p, else 0"))
register(Op("multinomial", _multinomial_rule, _multinomial_ref,
            attrs={"sample_size": 1, "dtype": "int32", "seed": REQUIRED},
            doc="classes drawn by inverse CDF from (batch, classes) unnormalized weights"))
