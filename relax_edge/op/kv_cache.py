"""The KV cache as state: an append in place and attention over the cache.

A decoder's `step` function (transform/kv_state.py) keeps each cache tensor
in a caller-owned state buffer of a fixed shape (1, kv_heads, max_context,
head_dim); positions [0, kv_len) of it are valid.

1. `kv_append(state, new; offset)` writes `new` (1, kv_heads, seq, head_dim)
   at positions [offset, offset + seq) of `state` and returns the state.
   Compiled, the result IS the state's storage (the library kernel writes in
   place, memory/liveness.py); the numpy reference writes into the array it
   is given too, so the interpreter keeps the same state across calls.
2. `kv_attention(q, k_state, v_state[, mask]; kv_len, scale)` is
   softmax(q @ k[:kv_len]^T * scale + mask) @ v[:kv_len] for q
   (1, heads, seq, head_dim), with grouped-query attention: query head h
   reads KV head h // (heads / kv_heads), as repeat_kv does, without the
   repeat. The mask is additive, broadcast to (1, heads, seq, kv_len) from
   (1 | heads) heads and (1 | seq) rows.
"""

from __future__ import annotations

import numpy as np

from ..ir.shape import Proof, as_expr, prove_equal
from ..ir.types import TensorType
from .registry import REQUIRED, Op, RuleError, register
from .rules import tensor


def _state(t, index: int, what: str) -> TensorType:
    t = tensor(t, index)
    if len(t.shape) != 4 or t.dtype != "float32":
        raise RuleError(f"{what} must be a float32 (1, kv_heads, max_context, head_dim) tensor, got {t}")
    return t


def _append_rule(types, attrs):
    state, new = _state(types[0], 0, "the state"), tensor(types[1], 1)
    if len(new.shape) != 4 or new.dtype != state.dtype:
        raise RuleError(f"the new positions must be a {state.dtype} rank-4 tensor, got {new}")
    for axis in (0, 1, 3):
        if prove_equal(state.shape[axis], new.shape[axis]) is Proof.NO:
            raise RuleError(f"axis {axis} of the new positions ({new.shape[axis]}) differs from the state's "
                            f"({state.shape[axis]})")
    return state


def _append_ref(state, new, offset):
    offset = int(offset)
    if offset < 0 or offset + new.shape[2] > state.shape[2]:
        raise ValueError(f"positions [{offset}, {offset + new.shape[2]}) are outside the state's "
                         f"{state.shape[2]} positions")
    state[:, :, offset:offset + new.shape[2]] = new
    return state


def _attention_rule(types, attrs):
    q = tensor(types[0], 0)
    k, v = _state(types[1], 1, "the key state"), _state(types[2], 2, "the value state")
    if len(q.shape) != 4 or q.dtype != "float32":
        raise RuleError(f"the query must be a float32 (1, heads, seq, head_dim) tensor, got {q}")
    heads, kv_heads = as_expr(q.shape[1]), as_expr(k.shape[1])
    if not (heads.is_const and kv_heads.is_const) or heads.value % kv_heads.value:
        raise RuleError(f"the query's {heads} heads must be a known multiple of the cache's {kv_heads}")
    for axis in (1, 2, 3):
        if prove_equal(k.shape[axis], v.shape[axis]) is Proof.NO:
            raise RuleError(f"the key and value states differ on axis {axis}")
    if prove_equal(q.shape[3], k.shape[3]) is Proof.NO:
        raise RuleError(f"the query's head_dim {q.shape[3]} differs from the cache's {k.shape[3]}")
    if len(types) > 3:
        m = tensor(types[3], 3)
        if len(m.shape) != 4 or m.dtype != "float32":
            raise RuleError(f"the mask must be a float32 rank-4 tensor, got {m}")
        want = (1, heads, q.shape[2], attrs["kv_len"])
        for axis, (d, w) in enumerate(zip(m.shape, want)):
            if prove_equal(d, w) is not Proof.YES and not (axis < 3 and prove_equal(d, 1) is Proof.YES):
                raise RuleError(f"mask axis {axis} is {d}; it must be {w}" + (" or 1" if axis < 3 else ""))
    return TensorType(q.shape, q.dtype)


def attention_reference(q, k, v, mask=None, kv_len=0, scale=1.0):
    """softmax(q k^T scale + mask) v over the first kv_len positions, KV heads shared by query-head groups."""
    kv_len = int(kv_len)
    group = q.shape[1] // k.shape[1]
    k = np.repeat(k[:, :, :kv_len], group, axis=1)
    v = np.repeat(v[:, :, :kv_len], group, axis=1)
    scores = (q @ np.swapaxes(k, -1, -2)) * np.float32(scale)
    if mask is not None:
        scores = scores + mask
    scores = scores - scores.max(axis=-1, keepdims=True)
    p = np.exp(scores)
    p /= p.sum(axis=-1, keepdims=True)
    return (p @ v).astype(np.float32)


register(Op("kv_append", _append_rule, _append_ref, attrs={"offset": REQUIRED}, kind="opaque", num_args=(2, 2),
            doc="writes positions [offset, offset + seq) of a cache state in place"))
register(Op("kv_attention", _attention_rule, attention_reference, attrs={"kv_len": REQUIRED, "scale": 1.0},
            kind="opaque", num_args=(3, 4), doc="attention over the first kv_len positions of a cache state"))
