"""ONNX import: the LLM operators over existing graph operators.

Attention (opsets 23, 24, 25: 3-D and 4-D inputs, GQA/MQA, is_causal with
the offset-aligned frontier, boolean and float masks, the past/present key
and value cache, nonpad_kv_seqlen, scale, softcap, softmax_precision, the
qk_matmul_output modes, the sliding window of opset 25), RMSNormalization,
RotaryEmbedding, SwiGLU, CausalConvWithState and LinearAttention. Each is a
composition of matmul, softmax, reshape, transpose, broadcast, where, concat,
slices and reductions; sequence lengths may be symbolic (LinearAttention's
delta rules excepted: they unroll over a known length).
"""

from __future__ import annotations

import math

import numpy as np

from ....ir.shape import as_expr, max_expr
from ....ir.types import DTYPES
from ..context import converter

# ONNX element type codes a softmax_precision or stash_type may name: those of our dtypes
_ONNX_FLOATS = {1: "float32", 10: "float16", 11: "float64", 16: "bfloat16"}
_PRECISIONS = {code: name for code, name in _ONNX_FLOATS.items() if name in DTYPES}
_FLOATS = tuple(_PRECISIONS.values())
# LinearAttention's recurrent rules unroll over the sequence: at most this many steps
MAX_UNROLLED_STEPS = 64


def _dims(ctx, v):
    return tuple(ctx.type_of(v).shape)


def _float_dtype(ctx, v, what):
    dtype = ctx.type_of(v).dtype
    if dtype not in _FLOATS:
        raise ctx.error(f"{what} of dtype {dtype} is not supported ({', '.join(_FLOATS)})")
    return dtype


def _as(ctx, v, dtype):
    return v if ctx.type_of(v).dtype == dtype else ctx.emit("cast", [v], {"dtype": dtype})


def _const(value, dtype):
    return np.array(value, dtype)


def _static_dim(ctx, d, what):
    d = as_expr(d)
    if not d.is_const:
        raise ctx.error(f"{what} ({d}) must be static")
    return int(d.value)


def _last_slice(ctx, x, begin, end, step=1):
    return ctx.emit("strided_slice", [x], {"begin": (begin,), "end": (end,), "strides": (step,), "axes": (-1,)})


def _optional(inputs, index):
    return inputs[index] if len(inputs) > index else None


def _precision(ctx, name, default=None):
    code = ctx.attr(name, default, int)
    if code is None:
        return None
    if code not in _PRECISIONS:
        what = _ONNX_FLOATS.get(code, f"element type {code}")
        known = ", ".join(f"{c}: {n}" for c, n in _PRECISIONS.items())
        raise ctx.error(f"attribute {name}={code} ({what}) is not supported ({known})")
    return _PRECISIONS[code]


# ------------------------------------------------------------------ Attention

def _heads_4d(ctx, x, heads, what):
    """(B, S, heads * head_size) -> (B, heads, S, head_size)."""
    b, s, hidden = _dims(ctx, x)
    if hidden.is_const and int(hidden) % heads:
        raise ctx.error(f"{what} hidden size {int(hidden)} does not split into {heads} heads")
    x = ctx.emit("reshape", [x], {"shape": (b, s, heads, -1)})
    return ctx.emit("transpose", [x], {"axes": (0, 2, 1, 3)})


def _repeat_heads(ctx, x, reps):
    """Each head of (B, H, S, D) repeated `reps` times in place: h0, h0, h1, h1, ..."""
    if reps == 1:
        return x
    b, h, s, d = _dims(ctx, x)
    x = ctx.emit("reshape", [x], {"shape": (b, h, 1, s, d)})
    x = ctx.emit("broadcast_to", [x], {"shape": (b, h, reps, s, d)})
    return ctx.emit("reshape", [x], {"shape": (b, h * reps, s, d)})


def _neg_inf_where_not(ctx, allowed, dtype):
    return ctx.emit("where", [allowed, _const(0, dtype), _const(-np.inf, dtype)])


def _padded_mask(ctx, mask, kv_len):
    """A mask shorter than the keys padded at the end: False, or -inf for a float mask.
    Over a symbolic difference the padding is max(keys - mask length, 0) wide: a longer
    mask then fails the run-time broadcast check of the scores."""
    dims = _dims(ctx, mask)
    missing = as_expr(kv_len) - dims[-1]
    if missing.is_const and missing.value == 0:
        return mask
    if missing.is_const and missing.value < 0:
        raise ctx.error(f"attn_mask has {dims[-1]} key positions, more than the {kv_len} keys")
    missing = max_expr(missing, 0)
    dtype = ctx.type_of(mask).dtype
    value = False if dtype == "bool" else -np.inf
    fill = ctx.emit("full", [], {"shape": dims[:-1] + (missing,), "value": value, "dtype": dtype})
    return ctx.emit("concat", [mask, fill], {"axis": -1})


def _query_positions(ctx, q_len, offset, nonpad, batch):
    """The absolute position of each query: (q, 1) for a scalar offset, (B, 1, q, 1) per batch."""
    if nonpad is None:
        pos = ctx.emit("arange", [], {"start": offset, "stop": offset + q_len, "dtype": "int64"})
        return ctx.emit("reshape", [pos], {"shape": (q_len, 1)})
    pos = ctx.emit("reshape", [ctx.emit("arange", [], {"stop": q_len, "dtype": "int64"})], {"shape": (q_len, 1)})
    per_batch = ctx.emit("subtract", [ctx.emit("reshape", [nonpad], {"shape": (batch, 1, 1, 1)}),
                                      _q_len_tensor(ctx, q_len)])
    return ctx.emit("add", [pos, per_batch])


def _q_len_tensor(ctx, q_len):
    q_len = as_expr(q_len)
    if q_len.is_const:
        return np.array(int(q_len.value), np.int64)
    return ctx.emit("reshape", [ctx.emit("shape_to_tensor", [], {"values": (q_len,)})], {"shape": ()})


def _attention_bias(ctx, mask, q_len, kv_len, past_len, nonpad, batch, dtype):
    """The additive bias of the scores (None when nothing masks), as the ONNX reference
    builds it: the mask (booleans as 0 / -inf), the causal frontier, the window, the padding."""
    is_causal = bool(ctx.attr("is_causal", 0, int))
    left = ctx.attr("left_window_size", -1, int) if ctx.opset >= 25 else -1
    right = ctx.attr("right_window_size", -1, int) if ctx.opset >= 25 else -1
    for name, w in (("left_window_size", left), ("right_window_size", right)):
        if w < -1:
            raise ctx.error(f"attribute {name}={w} must be -1 or nonnegative")
    if mask is not None:
        mask_dtype = ctx.type_of(mask).dtype
        if mask_dtype != "bool":
            mask = _as(ctx, mask, dtype)
        mask = _padded_mask(ctx, mask, kv_len)
        if mask_dtype == "bool":
            mask = _neg_inf_where_not(ctx, mask, dtype)
    bias = mask
    keys, queries = None, None
    if is_causal or left >= 0 or right >= 0:
        keys = ctx.emit("arange", [], {"stop": kv_len, "dtype": "int64"})
        queries = _query_positions(ctx, q_len, past_len, nonpad, batch)
    if is_causal:
        causal = _neg_inf_where_not(ctx, ctx.emit("less_equal", [keys, queries]), dtype)
        bias = causal if bias is None else ctx.emit("add", [bias, causal])
    if left >= 0 or right >= 0:
        diff = ctx.emit("subtract", [queries, keys])
        allowed = None
        if left >= 0:
            allowed = ctx.emit("less_equal", [diff, np.array(left, np.int64)])
        if right >= 0:
            within = ctx.emit("greater_equal", [diff, np.array(-right, np.int64)])
            allowed = within if allowed is None else ctx.emit("logical_and", [allowed, within])
        window = _neg_inf_where_not(ctx, allowed, dtype)
        bias = window if bias is None else ctx.emit("add", [bias, window])
    if nonpad is not None:
        valid = ctx.emit("less", [keys if keys is not None else ctx.emit("arange", [], {"stop": kv_len,
                                                                                        "dtype": "int64"}),
                                  ctx.emit("reshape", [nonpad], {"shape": (batch, 1, 1, 1)})])
        padding = _neg_inf_where_not(ctx, valid, dtype)
        bias = padding if bias is None else ctx.emit("add", [bias, padding])
    return bias


def _attention_inputs(ctx, inputs):
    """Q, K, V as (B, heads, S, head_size), and whether the input was 3-D."""
    q, k, v = inputs[:3]
    ranks = [len(_dims(ctx, x)) for x in (q, k, v)]
    if ranks not in ([3, 3, 3], [4, 4, 4]):
        raise ctx.error(f"Q, K and V must all be 3-D or all 4-D, got ranks {ranks}")
    q_heads, kv_heads = ctx.attr("q_num_heads", None, int), ctx.attr("kv_num_heads", None, int)
    if ranks[0] == 3:
        if q_heads is None or kv_heads is None:
            raise ctx.error("3-D inputs need the q_num_heads and kv_num_heads attributes")
        if q_heads < 1 or kv_heads < 1:
            raise ctx.error(f"q_num_heads={q_heads} and kv_num_heads={kv_heads} must be positive")
        q = _heads_4d(ctx, q, q_heads, "Q")
        k = _heads_4d(ctx, k, kv_heads, "K")
        v = _heads_4d(ctx, v, kv_heads, "V")
        return q, k, v, True
    for name, given, x in (("q_num_heads", q_heads, q), ("kv_num_heads", kv_heads, k)):
        dim = _dims(ctx, x)[1]
        if given is not None and (not dim.is_const or int(dim) != given):
            raise ctx.error(f"attribute {name}={given} does not match the 4-D input's {dim} heads")
    return q, k, v, False


def _with_cache(ctx, k, v, past_key, past_value, dtype):
    """K and V after the past ones (the present key and value), and the past length."""
    if (past_key is None) != (past_value is None):
        raise ctx.error("past_key and past_value must be given together")
    if past_key is None:
        return k, v, as_expr(0)
    k = ctx.emit("concat", [_as(ctx, past_key, dtype), k], {"axis": 2})
    v = ctx.emit("concat", [_as(ctx, past_value, dtype), v], {"axis": 2})
    return k, v, _dims(ctx, past_key)[2]


def _scores(ctx, q, k, dtype):
    """Q K^T with Q and K each scaled by sqrt(scale) (as the spec says), then the softcap:
    the raw and the capped scores."""
    scale = ctx.attr("scale", None, float)
    if scale is None:
        scale = 1.0 / math.sqrt(_static_dim(ctx, _dims(ctx, q)[3], "the head size (for the default scale)"))
    root = _const(np.sqrt(np.float32(scale)), dtype)
    k_t = ctx.emit("transpose", [ctx.emit("multiply", [k, root])], {"axes": (0, 1, 3, 2)})
    raw = ctx.emit("matmul", [ctx.emit("multiply", [q, root]), k_t])
    softcap = ctx.attr("softcap", 0.0, float)
    if softcap < 0:
        raise ctx.error(f"attribute softcap={softcap} must be nonnegative")
    if softcap == 0:
        return raw, raw
    cap = _const(softcap, dtype)
    return raw, ctx.emit("multiply", [ctx.emit("tanh", [ctx.emit("divide", [raw, cap])]), cap])


def _masked_softmax(ctx, scores, bias, dtype):
    """softmax(scores + bias) in softmax_precision, rows whose bias masks every key zero."""
    precision = _precision(ctx, "softmax_precision") or dtype
    probs = ctx.emit("softmax", [_as(ctx, scores, precision)], {"axis": -1})
    if bias is None:
        return _as(ctx, probs, dtype)
    row_max = ctx.emit("max", [bias], {"axis": (-1,), "keepdims": True})
    masked = ctx.emit("equal", [row_max, _const(-np.inf, dtype)])
    return _as(ctx, ctx.emit("where", [masked, _const(0, precision), probs]), dtype)


@converter("Attention")
def convert_attention(ctx, inputs):
    q, k, v, was_3d = _attention_inputs(ctx, inputs)
    mask, past_key, past_value, nonpad = (_optional(inputs, i) for i in (3, 4, 5, 6))
    dtype = _float_dtype(ctx, q, "Q")
    mode = ctx.attr("qk_matmul_output_mode", 0, int)
    if mode not in (0, 1, 2, 3):
        raise ctx.error(f"attribute qk_matmul_output_mode={mode} is not supported (0, 1, 2 or 3)")
    if nonpad is not None:
        if past_key is not None:
            raise ctx.error("nonpad_kv_seqlen cannot be combined with past_key / past_value")
        if ctx.type_of(nonpad).dtype not in ("int32", "int64"):
            raise ctx.error(f"nonpad_kv_seqlen must be int64, got {ctx.type_of(nonpad).dtype}")
        nonpad = _as(ctx, nonpad, "int64")
    batch, q_heads, q_len, _ = _dims(ctx, q)
    kv_heads = _dims(ctx, k)[1]
    if _dims(ctx, v)[1] != kv_heads:
        raise ctx.error(f"K has {kv_heads} heads, V {_dims(ctx, v)[1]}")
    present_key, present_value, past_len = _with_cache(ctx, _as(ctx, k, dtype), _as(ctx, v, dtype),
                                                       past_key, past_value, dtype)
    hq = _static_dim(ctx, q_heads, "the number of query heads")
    hkv = _static_dim(ctx, kv_heads, "the number of key/value heads")
    if hq % hkv:
        raise ctx.error(f"{hq} query heads are not a multiple of {hkv} key/value heads")
    k, v = _repeat_heads(ctx, present_key, hq // hkv), _repeat_heads(ctx, present_value, hq // hkv)
    raw, capped = _scores(ctx, q, k, dtype)
    bias = _attention_bias(ctx, mask, q_len, _dims(ctx, k)[2], past_len, nonpad, batch, dtype)
    biased = capped if bias is None else ctx.emit("add", [capped, bias])
    probs = _masked_softmax(ctx, biased, bias, dtype)
    y = ctx.emit("matmul", [probs, v])
    if was_3d:
        y = ctx.emit("transpose", [y], {"axes": (0, 2, 1, 3)})
        y = ctx.emit("reshape", [y], {"shape": (batch, q_len, -1)})
    return [y, present_key, present_value, (raw, capped, biased, probs)[mode]]


# ------------------------------------------------------------------ RMSNormalization

@converter("RMSNormalization")
def convert_rms_normalization(ctx, inputs):
    """x / sqrt(mean(x^2 over axes [axis, rank)) + epsilon) * scale, in float32 (stash_type 1)."""
    x, scale = inputs[:2]
    dtype = _float_dtype(ctx, x, "X")
    rank = len(_dims(ctx, x))
    axis = ctx.attr("axis", -1, int)
    if not -rank <= axis < rank:
        raise ctx.error(f"attribute axis={axis} is out of range for rank {rank}")
    eps = ctx.attr("epsilon", 1e-5, float)
    work = _precision(ctx, "stash_type", 1)
    xw = _as(ctx, x, work)
    axes = tuple(range(axis % rank, rank))
    mean_sq = ctx.emit("mean", [ctx.emit("multiply", [xw, xw])], {"axis": axes, "keepdims": True})
    inv = ctx.emit("reciprocal", [ctx.emit("sqrt", [ctx.emit("add", [mean_sq, _const(eps, work)])])])
    y = ctx.emit("multiply", [ctx.emit("multiply", [xw, inv]), _as(ctx, scale, work)])
    return _as(ctx, y, dtype)


# ------------------------------------------------------------------ RotaryEmbedding

@converter("RotaryEmbedding")
def convert_rotary_embedding(ctx, inputs):
    """Rotate the first rotary_embedding_dim features of each head by the cached cos / sin
    of its position: the two halves (or the even and odd features, interleaved)."""
    x, cos, sin = inputs[:3]
    positions = _optional(inputs, 3)
    dtype = _float_dtype(ctx, x, "X")
    dims = _dims(ctx, x)
    heads = ctx.attr("num_heads", None, int)
    if len(dims) == 3:
        if heads is None or heads < 1:
            raise ctx.error("a 3-D input needs a positive num_heads attribute")
        b, s, hidden = dims
        if hidden.is_const and int(hidden) % heads:
            raise ctx.error(f"hidden size {int(hidden)} does not split into num_heads={heads} heads")
        x = ctx.emit("reshape", [x], {"shape": (b, s, heads, -1)})  # (B, S, H, D)
        cache_shape = (b, s, 1, -1)
    elif len(dims) == 4:
        b, _, s, _ = dims  # (B, H, S, D)
        cache_shape = (b, 1, s, -1)
    else:
        raise ctx.error(f"input rank {len(dims)} is not supported (3-D or 4-D)")
    head_size = _static_dim(ctx, _dims(ctx, x)[-1], "the head size")
    rot = ctx.attr("rotary_embedding_dim", 0, int) or head_size
    if rot < 0 or rot > head_size or rot % 2:
        raise ctx.error(f"rotary_embedding_dim={rot} must be even and at most the head size {head_size}")
    half = rot // 2
    if positions is not None:
        if ctx.type_of(positions).dtype not in ("int32", "int64"):
            raise ctx.error(f"position_ids must be int64, got {ctx.type_of(positions).dtype}")
        cos = ctx.emit("take", [cos, positions], {"axis": 0})
        sin = ctx.emit("take", [sin, positions], {"axis": 0})
    for name, cache in (("cos_cache", cos), ("sin_cache", sin)):
        cdims = _dims(ctx, cache)
        if len(cdims) != 3:
            raise ctx.error(f"{name} must be 2-D with position_ids, 3-D (B, S, dim/2) without, "
                            f"got {len(cdims) - (positions is not None)}-D")
        if cdims[-1].is_const and int(cdims[-1]) != half:
            raise ctx.error(f"{name} has {int(cdims[-1])} features, rotary_embedding_dim / 2 is {half}")
    cos = ctx.emit("reshape", [_as(ctx, cos, dtype)], {"shape": cache_shape})
    sin = ctx.emit("reshape", [_as(ctx, sin, dtype)], {"shape": cache_shape})
    interleaved = bool(ctx.attr("interleaved", 0, int))
    if interleaved:
        x1, x2 = _last_slice(ctx, x, 0, rot, 2), _last_slice(ctx, x, 1, rot, 2)
    else:
        x1, x2 = _last_slice(ctx, x, 0, half), _last_slice(ctx, x, half, rot)
    real = ctx.emit("subtract", [ctx.emit("multiply", [cos, x1]), ctx.emit("multiply", [sin, x2])])
    imag = ctx.emit("add", [ctx.emit("multiply", [sin, x1]), ctx.emit("multiply", [cos, x2])])
    if interleaved:
        pair_shape = _dims(ctx, real) + (1,)
        pairs = [ctx.emit("reshape", [t], {"shape": pair_shape}) for t in (real, imag)]
        rotated = ctx.emit("reshape", [ctx.emit("concat", pairs, {"axis": -1})],
                           {"shape": _dims(ctx, real)[:-1] + (rot,)})
    else:
        rotated = ctx.emit("concat", [real, imag], {"axis": -1})
    if rot < head_size:
        rotated = ctx.emit("concat", [rotated, _last_slice(ctx, x, rot, head_size)], {"axis": -1})
    if len(dims) == 3:
        rotated = ctx.emit("reshape", [rotated], {"shape": dims})
    return rotated


# ------------------------------------------------------------------ SwiGLU

@converter("SwiGLU")
def convert_swiglu(ctx, inputs):
    """a * sigmoid(alpha * a) * b over equal shapes."""
    a, b = inputs[:2]
    _float_dtype(ctx, a, "A")
    if _dims(ctx, a) != _dims(ctx, b) or ctx.type_of(a).dtype != ctx.type_of(b).dtype:
        raise ctx.error(f"A {ctx.type_of(a)} and B {ctx.type_of(b)} must have one shape and dtype")
    return ctx.emit("multiply", [ctx.emit("swish", [a], {"alpha": ctx.attr("alpha", 1.0, float)}), b])


# ------------------------------------------------------------------ CausalConvWithState

@converter("CausalConvWithState")
def convert_causal_conv_with_state(ctx, inputs):
    """A depthwise causal 1-D convolution over (B, C, L) after the k - 1 carried positions
    (zeros without past_state), a sum of k shifted windows; SiLU optionally; the last
    k - 1 positions as the present state."""
    x, weight = inputs[:2]
    bias, past = _optional(inputs, 2), _optional(inputs, 3)
    dtype = _float_dtype(ctx, x, "input")
    activation = ctx.attr("activation", "none", str)
    if activation not in ("none", "silu", "swish"):
        raise ctx.error(f"attribute activation={activation!r} is not supported (none, silu or swish)")
    dims, wdims = _dims(ctx, x), _dims(ctx, weight)
    if len(dims) != 3 or len(wdims) != 3:
        raise ctx.error(f"input must be (B, C, L) and weight (C, 1, k), got ranks {len(dims)} and {len(wdims)}")
    b, c, length = dims
    k = _static_dim(ctx, wdims[2], "the kernel size")
    if k < 1:
        raise ctx.error(f"the kernel size {k} must be positive")
    work = "float32"
    x = _as(ctx, x, work)
    if past is None:
        past = ctx.emit("full", [], {"shape": (b, c, k - 1), "value": 0, "dtype": work})
    else:
        pdims = _dims(ctx, past)
        if len(pdims) != 3 or (pdims[2].is_const and int(pdims[2]) != k - 1):
            raise ctx.error(f"past_state must be (B, C, {k - 1}), got {ctx.type_of(past)}")
        past = _as(ctx, past, work)
    padded = ctx.emit("concat", [past, x], {"axis": 2}) if k > 1 else x
    w = ctx.emit("reshape", [_as(ctx, weight, work)], {"shape": (c, k)})
    out = None
    for j in range(k):
        window = ctx.emit("strided_slice", [padded], {"begin": (j,), "end": (j + length,), "axes": (2,)})
        tap = ctx.emit("reshape", [ctx.emit("strided_slice", [w], {"begin": (j,), "end": (j + 1,), "axes": (1,)})],
                       {"shape": (c, 1)})
        term = ctx.emit("multiply", [window, tap])
        out = term if out is None else ctx.emit("add", [out, term])
    if bias is not None:
        out = ctx.emit("add", [out, ctx.emit("reshape", [_as(ctx, bias, work)], {"shape": (c, 1)})])
    out = _as(ctx, _as(ctx, out, dtype), work)  # the convolution rounded to the input type first
    if activation != "none":
        out = ctx.emit("multiply", [out, ctx.emit("sigmoid", [out])])
    total = _dims(ctx, padded)[2]
    present = ctx.emit("strided_slice", [padded], {"begin": (total - (k - 1),), "end": (total,), "axes": (2,)})
    return [_as(ctx, out, dtype), _as(ctx, present, dtype)]


# ------------------------------------------------------------------ LinearAttention

def _kv_first(ctx, x, heads, what):
    """(B, T, heads * d) -> (B, heads, T, d) in float32."""
    return _heads_4d(ctx, _as(ctx, x, "float32"), heads, what)


def _gqa_read(ctx, q, state, hkv, hq):
    """q (B, Hq, T, dk) against state (B, Hkv, dk, dv), each key/value head read by
    Hq / Hkv consecutive query heads: (B, Hq, T, dv)."""
    b, _, t, dk = _dims(ctx, q)
    grouped = ctx.emit("reshape", [q], {"shape": (b, hkv, (hq // hkv) * t, dk)})
    out = ctx.emit("matmul", [grouped, state])
    return ctx.emit("reshape", [out], {"shape": (b, hq, t, -1)})


@converter("LinearAttention")
def convert_linear_attention(ctx, inputs):
    """The state recurrence S <- exp(g) S (gated), v <- beta (v - S^T k) (delta),
    S <- S + k v^T, o = scale q S, in float32. The linear and gated rules in closed
    form (any sequence length); the delta rules unrolled over a known length."""
    query, key, value = inputs[:3]
    past, decay, beta = (_optional(inputs, i) for i in (3, 4, 5))
    out_dtype = _float_dtype(ctx, query, "query")
    rule = ctx.attr("update_rule", "gated_delta", str)
    if rule not in ("linear", "gated", "delta", "gated_delta"):
        raise ctx.error(f"attribute update_rule={rule!r} is not supported (linear, gated, delta or gated_delta)")
    hq, hkv = ctx.attr("q_num_heads", None, int), ctx.attr("kv_num_heads", None, int)
    if hq is None or hkv is None or hq < 1 or hkv < 1 or hq % hkv:
        raise ctx.error(f"q_num_heads={hq} must be a positive multiple of kv_num_heads={hkv}")
    gating, delta = rule in ("gated", "gated_delta"), rule in ("delta", "gated_delta")
    for name, given, needed in (("decay", decay, gating), ("beta", beta, delta)):
        if needed and given is None:
            raise ctx.error(f"update_rule {rule!r} needs the {name} input")
        if given is not None and not needed:
            raise ctx.error(f"update_rule {rule!r} takes no {name} input")
    for name, t in (("query", query), ("key", key), ("value", value)):
        if len(_dims(ctx, t)) != 3:
            raise ctx.error(f"{name} must be 3-D (B, T, H * D), got {ctx.type_of(t)}")
    b, t_len = _dims(ctx, query)[:2]
    q, k, v = (_kv_first(ctx, x, h, what) for x, h, what in ((query, hq, "query"), (key, hkv, "key"),
                                                              (value, hkv, "value")))
    dk = _static_dim(ctx, _dims(ctx, q)[3], "the key head size")
    dv = _dims(ctx, v)[3]
    scale = ctx.attr("scale", 0.0, float) or 1.0 / math.sqrt(dk)
    state_dtype = ctx.type_of(past).dtype if past is not None else out_dtype
    if past is None:
        state = ctx.emit("full", [], {"shape": (b, hkv, dk, dv), "value": 0, "dtype": "float32"})
    else:
        state = _as(ctx, past, "float32")
    log_decay = _linear_attention_decay(ctx, decay, b, t_len, hkv, dk) if gating else None
    if delta:
        if not t_len.is_const:
            raise ctx.error(f"update_rule {rule!r} over a symbolic sequence length ({t_len}) is not supported "
                            "(it unrolls over a static length; 'linear' and 'gated' take any)")
        steps = int(t_len)
        if steps > MAX_UNROLLED_STEPS:
            raise ctx.error(f"a sequence of {steps} steps is not supported for update_rule {rule!r} "
                            f"(unrolled: at most {MAX_UNROLLED_STEPS})")
        gate = ctx.emit("exp", [log_decay]) if gating else None
        strength = _linear_attention_beta(ctx, beta, b, t_len, hkv)
        out, state = _unrolled_recurrence(ctx, (q, k, v), state, gate, strength, steps, hkv, hq)
    elif gating:
        out, state = _gated_closed_form(ctx, (q, k, v), state, log_decay, hkv, hq)
    else:
        out, state = _linear_closed_form(ctx, (q, k, v), state, hkv, hq)
    out = ctx.emit("multiply", [out, np.array(scale, np.float32)])
    out = ctx.emit("reshape", [ctx.emit("transpose", [out], {"axes": (0, 2, 1, 3)})], {"shape": (b, t_len, -1)})
    return [_as(ctx, out, out_dtype), _as(ctx, state, state_dtype)]


def _linear_attention_decay(ctx, decay, b, t_len, hkv, dk):
    """The log decay as (B, Hkv, T, dk) or (B, Hkv, T, 1) (one per head)."""
    width = _static_dim(ctx, _dims(ctx, decay)[-1], "decay's last dim")
    if width not in (hkv, hkv * dk) or len(_dims(ctx, decay)) != 3:
        raise ctx.error(f"decay must be (B, T, {hkv}) or (B, T, {hkv * dk}), got {ctx.type_of(decay)}")
    g = ctx.emit("reshape", [_as(ctx, decay, "float32")], {"shape": (b, t_len, hkv, width // hkv)})
    return ctx.emit("transpose", [g], {"axes": (0, 2, 1, 3)})


def _linear_attention_beta(ctx, beta, b, t_len, hkv):
    """beta as (B, Hkv or 1, T, 1)."""
    width = _static_dim(ctx, _dims(ctx, beta)[-1], "beta's last dim")
    if width not in (hkv, 1) or len(_dims(ctx, beta)) != 3:
        raise ctx.error(f"beta must be (B, T, {hkv}) or (B, T, 1), got {ctx.type_of(beta)}")
    g = ctx.emit("reshape", [_as(ctx, beta, "float32")], {"shape": (b, t_len, width, 1)})
    return ctx.emit("transpose", [g], {"axes": (0, 2, 1, 3)})


def _time_step(ctx, x, i):
    """Step `i` of a (B, H, T, d) tensor, kept as (B, H, 1, d)."""
    return ctx.emit("strided_slice", [x], {"begin": (i,), "end": (i + 1,), "axes": (2,)})


def _unrolled_recurrence(ctx, qkv, state, gate, strength, steps, hkv, hq):
    """The gated and/or delta recurrence, one step after another: the outputs
    (B, Hq, T, dv) (unscaled) and the final state."""
    q, k, v = qkv
    outs = []
    for i in range(steps):
        k_t, v_t = _time_step(ctx, k, i), _time_step(ctx, v, i)
        if gate is not None:  # S <- exp(g_t) S, the decay along dk (or one per head)
            g_t = ctx.emit("transpose", [_time_step(ctx, gate, i)], {"axes": (0, 1, 3, 2)})
            state = ctx.emit("multiply", [state, g_t])
        if strength is not None:  # v_t <- beta_t (v_t - S^T k_t)
            retrieved = ctx.emit("matmul", [k_t, state])
            v_t = ctx.emit("multiply", [_time_step(ctx, strength, i), ctx.emit("subtract", [v_t, retrieved])])
        outer = ctx.emit("matmul", [ctx.emit("transpose", [k_t], {"axes": (0, 1, 3, 2)}), v_t])
        state = ctx.emit("add", [state, outer])
        outs.append(_gqa_read(ctx, _time_step(ctx, q, i), state, hkv, hq))
    return (outs[0] if steps == 1 else ctx.emit("concat", outs, {"axis": 2})), state


def _linear_closed_form(ctx, qkv, state, hkv, hq):
    """The plain linear rule over any length: o_t = q_t (S0 + sum_{s <= t} k_s v_s^T),
    i.e. causal (q k^T) v + q S0; the final state S0 + k^T v."""
    q, k, v = qkv
    b, _, t_len, dk = _dims(ctx, q)
    k_t = ctx.emit("transpose", [k], {"axes": (0, 1, 3, 2)})
    scores = ctx.emit("matmul", [ctx.emit("reshape", [q], {"shape": (b, hkv, -1, dk)}), k_t])  # (B, Hkv, r*T, T)
    scores = ctx.emit("reshape", [scores], {"shape": (b, hkv, hq // hkv, t_len, t_len)})
    positions = ctx.emit("arange", [], {"stop": t_len, "dtype": "int64"})
    keep = ctx.emit("less_equal", [positions, ctx.emit("reshape", [positions], {"shape": (t_len, 1)})])
    scores = ctx.emit("reshape", [ctx.emit("where", [keep, scores, np.array(0, np.float32)])],
                      {"shape": (b, hkv, -1, t_len)})
    within = ctx.emit("reshape", [ctx.emit("matmul", [scores, v])], {"shape": (b, hq, t_len, -1)})
    out = ctx.emit("add", [within, _gqa_read(ctx, q, state, hkv, hq)])
    return out, ctx.emit("add", [state, ctx.emit("matmul", [k_t, v])])


def _gated_closed_form(ctx, qkv, state, log_decay, hkv, hq):
    """The gated rule over any length, with G_t the cumulative log decay:
    o_t = sum_{s <= t} (sum_d q_t[d] k_s[d] exp(G_t[d] - G_s[d])) v_s + (q_t exp(G_t)) S0 and
    S_T = exp(G_T) S0 + sum_s (k_s exp(G_T - G_s)) v_s^T. The pairwise weights take
    T * T * (dk, or 1 for a per-head decay) values per head."""
    q, k, v = qkv
    b, _, t_len, dk = _dims(ctx, q)
    dv, width, reps = _dims(ctx, v)[3], _dims(ctx, log_decay)[3], hq // hkv
    positions = ctx.emit("arange", [], {"stop": t_len, "dtype": "int64"})
    lower = ctx.emit("less_equal", [positions, ctx.emit("reshape", [positions], {"shape": (t_len, 1)})])  # s <= t
    cumulative = ctx.emit("matmul", [ctx.emit("cast", [lower], {"dtype": "float32"}), log_decay])  # (B, Hkv, T, w)
    diff = ctx.emit("subtract", [ctx.emit("reshape", [cumulative], {"shape": (b, hkv, 1, t_len, 1, width)}),
                                 ctx.emit("reshape", [cumulative], {"shape": (b, hkv, 1, 1, t_len, width)})])
    causal = ctx.emit("reshape", [lower], {"shape": (1, 1, 1, t_len, t_len, 1)})
    weight = ctx.emit("exp", [ctx.emit("where", [causal, diff, np.array(-np.inf, np.float32)])])
    pairs = ctx.emit("multiply", [ctx.emit("reshape", [q], {"shape": (b, hkv, reps, t_len, 1, dk)}),
                                  ctx.emit("reshape", [k], {"shape": (b, hkv, 1, 1, t_len, dk)})])
    scores = ctx.emit("sum", [ctx.emit("multiply", [pairs, weight])], {"axis": (-1,)})  # (B, Hkv, r, T, T)
    within = ctx.emit("matmul", [scores, ctx.emit("reshape", [v], {"shape": (b, hkv, 1, t_len, dv)})])
    decayed_q = ctx.emit("multiply", [ctx.emit("reshape", [q], {"shape": (b, hkv, reps, t_len, dk)}),
                                      ctx.emit("reshape", [ctx.emit("exp", [cumulative])],
                                               {"shape": (b, hkv, 1, t_len, width)})])
    past = ctx.emit("matmul", [decayed_q, ctx.emit("reshape", [state], {"shape": (b, hkv, 1, dk, dv)})])
    out = ctx.emit("reshape", [ctx.emit("add", [within, past])], {"shape": (b, hq, t_len, dv)})
    total = ctx.emit("strided_slice", [cumulative], {"begin": (-1,), "end": (t_len,), "axes": (2,)})  # G_T
    to_end = ctx.emit("exp", [ctx.emit("subtract", [total, cumulative])])  # (B, Hkv, T, w)
    carried = ctx.emit("multiply", [state, ctx.emit("transpose", [ctx.emit("exp", [total])], {"axes": (0, 1, 3, 2)})])
    written = ctx.emit("matmul", [ctx.emit("transpose", [ctx.emit("multiply", [k, to_end])], {"axes": (0, 1, 3, 2)}),
                                  v])
    return out, ctx.emit("add", [carried, written])
