"""Shape manipulation: reshape (with -1 and symbolic dims), transpose, concat,
strided_slice (ONNX Slice clamping, symbolic bounds), take (gather),
broadcast_to, tile, pad, trilu; and tensors made from sizes: full,
arange, shape_to_tensor (a shape value as an int64 tensor)."""

from __future__ import annotations

import numpy as np

from ..ir.shape import Proof, as_expr, floordiv, max_expr, min_expr, prove_equal
from ..ir.types import TensorType, normalize_dtype, shape_str
from .registry import REQUIRED, Op, RuleError, register
from .rules import broadcast_shapes, check_equal, normalize_axis, same_dtype, tensor


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


# ------------------------------------------------------ slicing and gathering

_BIG = 2 ** 62  # ONNX uses INT64_MAX / INT64_MIN as "to the end"


def _clamp(e, lo, hi):
    return max_expr(lo, min_expr(e, hi))


def slice_extent(dim, begin, end, step):
    """(normalized begin, output length) of an ONNX Slice along one axis,
    symbolically: negative constants count from the end, then clamp."""
    dim, begin, end = as_expr(dim), as_expr(begin), as_expr(end)
    if begin.is_const and begin.value < 0:
        begin = begin + dim
    if end.is_const and end.value < 0:
        end = end + dim
    if step > 0:
        b = dim if begin.is_const and begin.value >= _BIG else _clamp(begin, 0, dim)
        e = dim if end.is_const and end.value >= _BIG else _clamp(end, 0, dim)
        return b, max_expr(0, floordiv(e - b + step - 1, step))
    b = dim - 1 if begin.is_const and begin.value >= _BIG else _clamp(begin, -1, dim - 1)
    e = as_expr(-1) if end.is_const and end.value <= -_BIG else _clamp(end, -1, dim - 1)
    return b, max_expr(0, floordiv(b - e - step - 1, -step))


def _slice_rule(types, attrs):
    x = tensor(types[0], 0)
    begin, end, strides, axes = attrs["begin"], attrs["end"], attrs["strides"], attrs["axes"]
    rank = len(x.shape)
    axes = tuple(range(len(begin))) if axes is None else tuple(axes)
    strides = (1,) * len(axes) if strides is None else tuple(strides)
    if not len(begin) == len(end) == len(axes) == len(strides):
        raise RuleError(f"begin, end, axes and strides differ in length: {begin}, {end}, {axes}, {strides}")
    shape = list(x.shape)
    seen = set()
    for b, e, a, s in zip(begin, end, axes, strides):
        a = normalize_axis(a, rank)
        if a in seen:
            raise RuleError(f"axis {a} sliced twice")
        seen.add(a)
        if not isinstance(s, int) or s == 0:
            raise RuleError(f"step on axis {a} must be a nonzero integer, got {s!r}")
        shape[a] = slice_extent(x.shape[a], b, e, s)[1]
    return TensorType(shape, x.dtype)


def _slice_ref(x, begin, end, strides, axes):
    axes = range(len(begin)) if axes is None else axes
    strides = (1,) * len(begin) if strides is None else strides
    index = [slice(None)] * x.ndim
    for b, e, a, s in zip(begin, end, axes, strides):
        a = a % x.ndim
        start, length = (int(v) for v in slice_extent(x.shape[a], b, e, s))
        stop = start + s * length
        index[a] = slice(start, stop if stop >= 0 else None, s)
    return x[tuple(index)]


def _take_rule(types, attrs):
    x, idx = tensor(types[0], 0), tensor(types[1], 1)
    if idx.dtype not in ("int32", "int64"):
        raise RuleError(f"indices must be int32 or int64, got {idx.dtype}")
    axis = normalize_axis(attrs["axis"], len(x.shape))
    return TensorType(x.shape[:axis] + idx.shape + x.shape[axis + 1:], x.dtype)


def _take_ref(x, indices, axis):
    dim = x.shape[axis]
    if indices.size and (indices.min() < -dim or indices.max() >= dim):
        raise IndexError(f"gather index out of range [-{dim}, {dim}) on axis {axis}")
    return np.take(x, np.where(indices < 0, indices + dim, indices), axis=axis)


def _broadcast_to_rule(types, attrs):
    x = tensor(types[0], 0)
    return TensorType(broadcast_shapes(x.shape, tuple(as_expr(d) for d in attrs["shape"])), x.dtype)


def _broadcast_to_ref(x, shape):
    return np.broadcast_to(x, np.broadcast_shapes(x.shape, tuple(shape))).copy()


def _tile_rule(types, attrs):
    x = tensor(types[0], 0)
    reps = attrs["repeats"]
    if len(reps) != len(x.shape):
        raise RuleError(f"{len(reps)} repeats for rank {len(x.shape)}")
    return TensorType([d * r for d, r in zip(x.shape, reps)], x.dtype)


def _pad_rule(types, attrs):
    x = tensor(types[0], 0)
    pads, rank = attrs["pads"], len(x.shape)
    if len(pads) != 2 * rank:
        raise RuleError(f"pads needs {2 * rank} values (begins then ends), got {len(pads)}")
    if attrs["mode"] not in ("constant", "reflect", "edge", "wrap"):
        raise RuleError(f"unknown pad mode {attrs['mode']!r}")
    return TensorType([d + pads[i] + pads[i + rank] for i, d in enumerate(x.shape)], x.dtype)


def _pad_ref(x, pads, mode, value):
    rank = x.ndim
    crop = tuple(slice(max(-pads[i], 0), x.shape[i] - max(-pads[i + rank], 0)) for i in range(rank))
    x = x[crop]
    widths = [(max(pads[i], 0), max(pads[i + rank], 0)) for i in range(rank)]
    if mode == "constant":
        return np.pad(x, widths, mode="constant", constant_values=np.asarray(value, x.dtype))
    return np.pad(x, widths, mode={"reflect": "reflect", "edge": "edge", "wrap": "wrap"}[mode])


def _trilu_rule(types, attrs):
    x = tensor(types[0], 0)
    if len(x.shape) < 2:
        raise RuleError(f"input must have rank >= 2, got {len(x.shape)}")
    return x


def _trilu_ref(x, k, upper):
    return np.triu(x, k) if upper else np.tril(x, k)


# ------------------------------------------------------ tensors from sizes

def _full_rule(types, attrs):
    return TensorType(tuple(as_expr(d) for d in attrs["shape"]), attrs["dtype"])


def _full_ref(shape, value, dtype):
    return np.full(tuple(shape), value, dtype=normalize_dtype(dtype))


def arange_length(start, stop, step):
    """ONNX Range's element count, max(ceil((stop - start) / step), 0), for integer steps."""
    if step > 0:
        return max_expr(0, floordiv(as_expr(stop) - start + step - 1, step))
    return max_expr(0, floordiv(as_expr(start) - stop - step - 1, -step))


def _arange_rule(types, attrs):
    step = attrs["step"]
    if not isinstance(step, int) or step == 0:
        raise RuleError(f"step must be a nonzero integer, got {step!r}")
    return TensorType((arange_length(attrs["start"], attrs["stop"], step),), attrs["dtype"])


def _arange_ref(start, stop, step, dtype):
    return np.arange(start, stop, step, dtype=normalize_dtype(dtype))


def _shape_to_tensor_rule(types, attrs):
    return TensorType((len(attrs["values"]),), "int64")


register(Op("strided_slice", _slice_rule, _slice_ref,
            attrs={"begin": REQUIRED, "end": REQUIRED, "strides": None, "axes": None},
            kind="injective"))
register(Op("take", _take_rule, _take_ref, attrs={"axis": 0}, kind="injective", num_args=(2, 2)))
register(Op("broadcast_to", _broadcast_to_rule, _broadcast_to_ref, attrs={"shape": REQUIRED},
            kind="broadcast"))
register(Op("tile", _tile_rule, lambda x, repeats: np.tile(x, tuple(repeats)),
            attrs={"repeats": REQUIRED}, kind="injective"))
register(Op("pad", _pad_rule, _pad_ref, attrs={"pads": REQUIRED, "mode": "constant", "value": 0},
            kind="injective"))
register(Op("trilu", _trilu_rule, _trilu_ref, attrs={"k": 0, "upper": True}, kind="injective"))
register(Op("full", _full_rule, _full_ref, attrs={"shape": REQUIRED, "value": 0, "dtype": "float32"},
            kind="injective", num_args=(0, 0)))
register(Op("arange", _arange_rule, _arange_ref,
            attrs={"start": 0, "stop": REQUIRED, "step": 1, "dtype": "int64"},
            kind="injective", num_args=(0, 0)))
register(Op("shape_to_tensor", _shape_to_tensor_rule, lambda values: np.array(values, np.int64),
            attrs={"values": REQUIRED}, kind="injective", num_args=(0, 0)))


def _gather_elements_rule(types, attrs):
    x, idx = tensor(types[0], 0), tensor(types[1], 1)
    if idx.dtype not in ("int32", "int64"):
        raise RuleError(f"indices must be int32 or int64, got {idx.dtype}")
    if len(idx.shape) != len(x.shape):
        raise RuleError(f"indices rank {len(idx.shape)} differs from data rank {len(x.shape)}")
    normalize_axis(attrs["axis"], len(x.shape))
    return TensorType(idx.shape, x.dtype)


def _gather_elements_ref(x, indices, axis):
    dim = x.shape[axis]
    if indices.size and (indices.min() < -dim or indices.max() >= dim):
        raise IndexError(f"gather index out of range [-{dim}, {dim}) on axis {axis}")
    return np.take_along_axis(x, np.where(indices < 0, indices + dim, indices), axis=axis)


register(Op("gather_elements", _gather_elements_rule, _gather_elements_ref, attrs={"axis": 0},
            kind="injective", num_args=(2, 2)))


# ------------------------------------------------ data-dependent shapes
# Results whose shape depends on tensor values have an unknown shape (known
# rank); the importer follows them with a match_cast that binds fresh size
# variables at run time.

def _nonzero_rule(types, attrs):
    x = tensor(types[0], 0, need_shape=False)
    if x.ndim is None:
        raise RuleError("the input's rank must be known")
    return TensorType(None, "int64", ndim=2)


def _reshape_dynamic_rule(types, attrs):
    x, shape = tensor(types[0], 0, need_shape=False), tensor(types[1], 1)
    if shape.dtype != "int64" or len(shape.shape) != 1 or not shape.shape[0].is_const:
        raise RuleError(f"the new shape must be a 1-D int64 tensor of static length, got {shape}")
    return TensorType(None, x.dtype, ndim=shape.shape[0].value)


def reshape_target_values(data_shape, target, allowzero):
    """ONNX Reshape's target on concrete values: 0 copies a dim, -1 infers one."""
    out = [data_shape[i] if (t == 0 and not allowzero) else int(t) for i, t in enumerate(target)]
    if out.count(-1) == 1:
        known = int(np.prod([d for d in out if d != -1], dtype=np.int64))
        total = int(np.prod(data_shape, dtype=np.int64))
        if known == 0 or total % known:
            raise ValueError(f"cannot reshape {tuple(data_shape)} to {tuple(int(t) for t in target)}")
        out[out.index(-1)] = total // known
    return tuple(out)


def _reshape_dynamic_ref(x, shape, allowzero):
    return np.reshape(x, reshape_target_values(x.shape, shape.tolist(), allowzero))


register(Op("nonzero", _nonzero_rule, lambda x: np.array(np.nonzero(x), dtype=np.int64).reshape(x.ndim, -1),
            kind="opaque"))
register(Op("reshape_dynamic", _reshape_dynamic_rule, _reshape_dynamic_ref, attrs={"allowzero": False},
            kind="opaque", num_args=(2, 2)))
