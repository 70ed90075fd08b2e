"""Scatter, gather-nd and sampling operators: type rules and numpy references.

- `scatter_elements(data, indices, updates; axis, reduction)` (ONNX
  ScatterElements / Scatter): `updates[q]` goes to `data` at `q` with its
  `axis` coordinate replaced by `indices[q]`.
- `scatter_nd(data, indices, updates; reduction)` (ONNX ScatterND): each
  index tuple `indices[m, :k]` addresses the slice `data[i_0, ..., i_k-1]`,
  which `updates[m]` replaces or is combined with.
- `gather_nd(data, indices; batch_dims)` (ONNX GatherND).
- `tensor_scatter(past, update, write_indices; mode, axis)` (ONNX
  TensorScatter, the KV-cache update): `update` written into `past` along
  `axis` from `write_indices[b]` on, per batch row b (mode circular wraps).

Updates apply in index order (row-major over `indices`): with reduction
none the last of duplicate indices wins; add, mul, max and min fold every
update of a position into the data in that order. Negative indices count
from the end of their axis. The references raise IndexError for an index
outside [-dim, dim) (TensorScatter: a write past the cache in linear mode);
the compiled programs skip such updates (legalize/scatter.py).

The sampling operators (grid_sample, roi_align) are in op/sampling.py.
"""

from __future__ import annotations

import numpy as np

from ..ir.types import TensorType, shape_str
from .registry import Op, RuleError, register
from .rules import check_equal, normalize_axis, tensor

REDUCTIONS = ("none", "add", "mul", "max", "min")
_UFUNCS = {"add": np.add, "mul": np.multiply, "max": np.maximum, "min": np.minimum}


def _index_tensor(t, i: int) -> TensorType:
    t = tensor(t, i)
    if t.dtype not in ("int32", "int64"):
        raise RuleError(f"indices must be int32 or int64, got {t.dtype}")
    return t


def _same_kind(t, like, what, of):
    """`t` has the dtype and rank of `like`."""
    if t.dtype != like.dtype:
        raise RuleError(f"{what} dtype {t.dtype} differs from {of} dtype {like.dtype}")
    if len(t.shape) != len(like.shape):
        raise RuleError(f"{what} rank {len(t.shape)} differs from {of} rank {len(like.shape)}")


def _check_reduction(reduction, dtype):
    if reduction not in REDUCTIONS:
        raise RuleError(f"reduction {reduction!r} is not one of {', '.join(REDUCTIONS)}")
    if reduction != "none" and dtype == "bool":
        raise RuleError(f"reduction {reduction} of bool data is not supported")


def _not_larger(small, large, what):
    if small.is_const and large.is_const and small.value > large.value:
        raise RuleError(f"{what}: {small} is larger than {large}")


def _wrapped(indices, dims, what):
    """Integer indices (..., len(dims)) with negatives counted from the end; IndexError out of range."""
    idx = indices.astype(np.int64)
    dims = np.asarray(dims, np.int64)
    if idx.size and (np.any(idx < -dims) or np.any(idx >= dims)):
        bad = idx[np.any((idx < -dims) | (idx >= dims), axis=-1)][0]
        raise IndexError(f"{what} index {bad.tolist()} out of range for dims {dims.tolist()}")
    return np.where(idx < 0, idx + dims, idx)


def _scatter_rows(out2, rows, upd2, reduction):
    """Apply row updates `upd2[j]` to `out2[rows[j]]` in order j = 0, 1, ..."""
    if reduction == "none":
        if rows.size:
            _, first_in_reversed = np.unique(rows[::-1], return_index=True)
            last = rows.size - 1 - first_in_reversed  # the last update of each row wins
            out2[rows[last]] = upd2[last]
    else:
        _UFUNCS[reduction].at(out2, rows, upd2)
    return out2


# ------------------------------------------------------------ scatter_elements

def _scatter_elements_rule(types, attrs):
    data, idx, upd = tensor(types[0], 0), _index_tensor(types[1], 1), tensor(types[2], 2)
    rank = len(data.shape)
    if len(idx.shape) != rank:
        raise RuleError(f"indices rank {len(idx.shape)} differs from data rank {rank}")
    _same_kind(upd, data, "updates", "data")
    for d in range(rank):
        check_equal(idx.shape[d], upd.shape[d], f"indices and updates differ at axis {d}")
    axis = normalize_axis(attrs["axis"], rank)
    for d in range(rank):
        if d != axis:
            _not_larger(idx.shape[d], data.shape[d], f"indices dim {d} exceeds the data's")
    _check_reduction(attrs["reduction"], data.dtype)
    return data


def _scatter_elements_ref(data, indices, updates, axis, reduction):
    axis %= data.ndim
    out = data.copy()
    if indices.size == 0:
        return out
    coords = list(np.indices(indices.shape))
    coords[axis] = _wrapped(indices[..., None], [data.shape[axis]], "scatter")[..., 0]
    for d in range(data.ndim):
        if d != axis and indices.shape[d] > data.shape[d]:
            raise IndexError(f"scatter indices dim {d} ({indices.shape[d]}) exceeds the data's ({data.shape[d]})")
    rows = np.ravel_multi_index(tuple(c.reshape(-1) for c in coords), data.shape)
    flat = _scatter_rows(out.reshape(-1), rows, updates.reshape(-1), reduction)
    return flat.reshape(data.shape)


register(Op("scatter_elements", _scatter_elements_rule, _scatter_elements_ref,
            attrs={"axis": 0, "reduction": "none"}, kind="opaque", num_args=(3, 3)))


# ------------------------------------------------------------------ scatter_nd

def _tuple_length(idx: TensorType) -> int:
    if len(idx.shape) < 1 or not idx.shape[-1].is_const:
        raise RuleError(f"indices must have rank >= 1 and a static last dim, got {shape_str(idx.shape)}")
    return idx.shape[-1].value


def _scatter_nd_rule(types, attrs):
    data, idx, upd = tensor(types[0], 0), _index_tensor(types[1], 1), tensor(types[2], 2)
    k = _tuple_length(idx)
    if not 1 <= k <= len(data.shape):
        raise RuleError(f"index tuples of length {k} for data of rank {len(data.shape)} (need 1 to rank)")
    if upd.dtype != data.dtype:
        raise RuleError(f"updates dtype {upd.dtype} differs from data dtype {data.dtype}")
    want = tuple(idx.shape[:-1]) + tuple(data.shape[k:])
    if len(upd.shape) != len(want):
        raise RuleError(f"updates must have shape {shape_str(want)} (indices.shape[:-1] + data.shape[{k}:]), "
                        f"got {shape_str(upd.shape)}")
    for d, (u, w) in enumerate(zip(upd.shape, want)):
        check_equal(u, w, f"updates dim {d} must be {w}")
    _check_reduction(attrs["reduction"], data.dtype)
    return data


def _scatter_nd_ref(data, indices, updates, reduction):
    k = indices.shape[-1]
    out = data.copy()
    lead = data.shape[:k]
    tuples = _wrapped(indices.reshape(-1, k), lead, "scatter_nd")
    rows = np.ravel_multi_index(tuple(tuples.T), lead) if tuples.size else np.zeros(0, np.int64)
    out2 = out.reshape((int(np.prod(lead, dtype=np.int64)),) + data.shape[k:])
    _scatter_rows(out2, rows, updates.reshape((rows.size,) + data.shape[k:]), reduction)
    return out2.reshape(data.shape)


register(Op("scatter_nd", _scatter_nd_rule, _scatter_nd_ref, attrs={"reduction": "none"},
            kind="opaque", num_args=(3, 3)))


# ------------------------------------------------------------------- gather_nd

def _gather_nd_rule(types, attrs):
    data, idx = tensor(types[0], 0), _index_tensor(types[1], 1)
    b = attrs["batch_dims"]
    if not isinstance(b, int) or isinstance(b, bool) or b < 0:
        raise RuleError(f"batch_dims must be a non-negative integer, got {b!r}")
    k = _tuple_length(idx)
    if b >= len(idx.shape) or b >= len(data.shape):
        raise RuleError(f"batch_dims {b} must be less than the ranks of data ({len(data.shape)}) "
                        f"and indices ({len(idx.shape)})")
    if not 1 <= k <= len(data.shape) - b:
        raise RuleError(f"index tuples of length {k} for data of rank {len(data.shape)} "
                        f"with batch_dims {b} (need 1 to {len(data.shape) - b})")
    for d in range(b):
        check_equal(idx.shape[d], data.shape[d], f"batch dim {d} of indices and data differ")
    return TensorType(tuple(data.shape[:b]) + tuple(idx.shape[b:-1]) + tuple(data.shape[b + k:]), data.dtype)


def _gather_nd_ref(data, indices, batch_dims):
    b, k = batch_dims, indices.shape[-1]
    batch = data.shape[:b]
    nb = int(np.prod(batch, dtype=np.int64))
    tuples = _wrapped(indices.reshape(nb, -1, k), data.shape[b:b + k], "gather_nd")
    flat = data.reshape((nb,) + data.shape[b:])
    rows = [flat[(j,) + tuple(tuples[j].T)] for j in range(nb)]
    out_shape = tuple(data.shape[:b]) + indices.shape[b:-1] + data.shape[b + k:]
    if not rows:
        return np.zeros(out_shape, data.dtype)
    return np.stack(rows).reshape(out_shape)


register(Op("gather_nd", _gather_nd_rule, _gather_nd_ref, attrs={"batch_dims": 0},
            kind="injective", num_args=(2, 2)))


# --------------------------------------------------------------- tensor_scatter

def _tensor_scatter_rule(types, attrs):
    past, upd, wi = tensor(types[0], 0), tensor(types[1], 1), _index_tensor(types[2], 2)
    rank = len(past.shape)
    if rank < 2:
        raise RuleError(f"the cache must have rank >= 2 (batch first), got rank {rank}")
    axis = normalize_axis(attrs["axis"], rank)
    if axis == 0:
        raise RuleError("axis must not be the batch axis 0")
    if attrs["mode"] not in ("linear", "circular"):
        raise RuleError(f"mode {attrs['mode']!r} is not linear or circular")
    _same_kind(upd, past, "update", "cache")
    for d in range(rank):
        if d != axis:
            check_equal(upd.shape[d], past.shape[d], f"update and cache differ at axis {d}")
    _not_larger(upd.shape[axis], past.shape[axis], "the update's sequence exceeds the cache's")
    if len(wi.shape) != 1:
        raise RuleError(f"write_indices must be 1-D (batch,), got {shape_str(wi.shape)}")
    check_equal(wi.shape[0], past.shape[0], "write_indices length and batch differ")
    return past


def _tensor_scatter_ref(past, update, write_indices, mode, axis):
    axis %= past.ndim
    out = past.copy()
    cache_len, seq = past.shape[axis], update.shape[axis]
    if seq > cache_len:
        raise IndexError(f"update sequence {seq} exceeds the cache's {cache_len}")
    for b in range(past.shape[0]):
        start = int(write_indices[b])
        if mode == "linear" and (start < 0 or start + seq > cache_len):
            raise IndexError(f"write index {start} + {seq} updates out of range for a cache of {cache_len}")
        pos = (start + np.arange(seq)) % cache_len
        dst = np.moveaxis(out[b], axis - 1, 0)
        dst[pos] = np.moveaxis(update[b], axis - 1, 0)
    return out


register(Op("tensor_scatter", _tensor_scatter_rule, _tensor_scatter_ref,
            attrs={"mode": "linear", "axis": -2}, kind="opaque", num_args=(3, 3)))

from . import sampling  # noqa: E402,F401  (registers grid_sample and roi_align)
