"""Shape manipulation: reshape (with -1 and symbolic dims), transpose, concat."""

from __future__ import annotations

import numpy as np

from ..ir.shape import Proof, as_expr, floordiv, prove_equal
from ..ir.types import TensorType, shape_str
from .registry import REQUIRED, Op, RuleError, register
from .rules import check_equal, normalize_axis, same_dtype, tensor


def _product(dims):
    out = as_expr(1)
    for d in dims:
        out = out * d
    return out


def _reshape_rule(types, attrs):
    x = tensor(types[0], 0)
    target = attrs["shape"]
    if isinstance(target, (int, str)) or not hasattr(target, "__iter__"):
        raise RuleError(f"shape must be a sequence of dimensions, got {target!r}")
    dims = [as_expr(d) for d in target]
    holes = [i for i, d in enumerate(dims) if d == -1]
    if len(holes) > 1:
        raise RuleError(f"at most one -1 in the new shape, got {shape_str(dims)}")
    for i, d in enumerate(dims):
        if d.is_const and d.value < -1:
            raise RuleError(f"new shape {shape_str(dims)} has negative dimension {d.value} at {i}")
    total = _product(x.shape)
    if holes:
        known = _product(d for i, d in enumerate(dims) if i != holes[0])
        if known == 0:
            raise RuleError(f"cannot infer -1 in {shape_str(dims)}: the other dims multiply to 0")
        inferred = floordiv(total, known)
        if prove_equal(inferred * known, total) is not Proof.YES:
            raise RuleError(f"cannot prove that {total} elements divide evenly by {known} "
                            f"to infer -1 in {shape_str(dims)}; give that dimension explicitly")
        dims[holes[0]] = inferred
    if prove_equal(_product(dims), total) is Proof.NO:
        raise RuleError(f"cannot reshape {shape_str(x.shape)} ({total} elements) "
                        f"to {shape_str(dims)} ({_product(dims)} elements)")
    return TensorType(dims, x.dtype)


def _reshape_ref(x, shape):
    shape = tuple(int(d) for d in shape)
    if -1 not in shape and int(np.prod(shape, dtype=np.int64)) != x.size:
        raise ValueError(f"cannot reshape {x.shape} ({x.size} elements) to {shape}")
    return np.reshape(x, shape)


def _transpose_rule(types, attrs):
    x = tensor(types[0], 0)
    axes = attrs["axes"]
    n = len(x.shape)
    if axes is None:
        axes = tuple(reversed(range(n)))
    axes = tuple(axes)
    if sorted(normalize_axis(a, n) for a in axes) != list(range(n)):
        raise RuleError(f"axes {axes} are not a permutation of range({n})")
    return TensorType([x.shape[normalize_axis(a, n)] for a in axes], x.dtype)


def _transpose_ref(x, axes):
    return np.transpose(x, axes)


def _concat_rule(types, attrs):
    tensors = [tensor(t, i) for i, t in enumerate(types)]
    dtype = same_dtype(tensors)
    rank = len(tensors[0].shape)
    if any(len(t.shape) != rank for t in tensors):
        raise RuleError("inputs have different ranks: " + ", ".join(str(len(t.shape)) for t in tensors))
    axis = normalize_axis(attrs["axis"], rank)
    out = list(tensors[0].shape)
    for i, t in enumerate(tensors[1:], start=1):
        for d in range(rank):
            if d != axis:
                check_equal(out[d], t.shape[d], f"input {i} dimension {d} differs")
        out[axis] = out[axis] + t.shape[axis]
    return TensorType(out, dtype)


def _concat_ref(*xs, axis):
    return np.concatenate(xs, axis=axis)


register(Op("reshape", _reshape_rule, _reshape_ref, attrs={"shape": REQUIRED},
            kind="injective", num_args=(1, 1)))
register(Op("transpose", _transpose_rule, _transpose_ref, attrs={"axes": None},
            kind="injective", num_args=(1, 1)))
register(Op("concat", _concat_rule, _concat_ref, attrs={"axis": 0},
            kind="injective", num_args=(1, None)))
