"""ONNX import: ONNX Runtime's LLM contrib operators, as ONNX Runtime GenAI's model builder emits them.

Each is mapped onto existing operators; the weight-only quantized ones onto
op/quant_weight.py's matmul_nbits and gather_nbits without re-quantization.

1. MatMulNBits (com.microsoft): A (..., K) @ dequant(B)^T (+ bias) as
   matmul_nbits. bits 4 or 8; block_size a power of two >= 16; B uint8
   (N, n_blocks, blob) (or its flattening), scales (N * n_blocks) or
   (N, n_blocks), float32 or float16 (widened exactly). Zero points: packed
   uint8 (4 bits: two blocks a byte, the even block in the low nibble) are
   unpacked to (N, n_blocks) (zero "uint8"; all of them 2^(bits-1) is the
   "default" mode); float zero points (the scales' type, w = (q - zp) * s)
   become offsets m = -zp * s (zero "float", equal to ONNX Runtime's within
   float32 rounding; 4 bits only, as ONNX Runtime's CPU kernel). g_idx only
   when it is the trivial k // block_size.
   accuracy_level: levels 0-3 compute with float32 activations, as does 4
   by default; with the importer option `int8_activations` (genai.py's
   `from_genai(..., int8_activations=True)` or `import_model`) level 4
   becomes act="int8", ONNX Runtime's int8 activations per block.
2. GatherBlockQuantized (com.microsoft): gather_nbits for uint8 data (N,
   K * bits / 8) quantized along its last axis (quantize_axis 1 or -1),
   gathered on axis 0, bits 4 or 8; zero points packed like MatMulNBits'
   (default 2^(bits-1), ONNX Runtime's for uint8 data). int4/uint4 data, 3-D
   data and other axes are refused. Equal packed arrays are one Constant per
   import, so a tied embedding (the builder's shared_embeddings: the LM
   head's weight reshaped into GatherBlockQuantized) shares the LM head's.
3. SimplifiedLayerNormalization (ONNX Runtime registers it in ONNX's domain)
   and SkipSimplifiedLayerNormalization (com.microsoft): RMSNorm over the
   last axes in float32; the skip form also returns input + skip (+ bias).
4. RotaryEmbedding (com.microsoft): (B, S, hidden) or (B, heads, S, head);
   position_ids (B, S), or one offset; cos/sin caches (max_pos, rot / 2);
   interleaved or halves; a partial rotary_embedding_dim; scale must be 1.
5. GroupQueryAttention (com.microsoft): query (B, S, heads * head) with key
   and value, or packed QKV; rotary inside (do_rotary) or none; past/present
   KV as `concat(past, new)` on the sequence axis (present (B, kv_heads,
   past + S, head)), q @ k^T * scale over the heads repeated by reshape,
   broadcast_to, reshape, plus a causal mask, softmax, @ v: the form
   transform/kv_state.py turns into kv_append / kv_attention. The causal
   frontier and the rotary positions come from seqlens_k (query i of batch b
   is at seqlens_k[b] + 1 - S + i; position_ids, input 9, place the rotary
   instead when given); the new keys go after the past, which is
   ONNX Runtime's placement when seqlens_k + 1 = past + S (an unpadded
   attention_mask, as generation feeds it). total_sequence_length is not
   read. local_window_size and softcap are supported; smooth_softmax,
   head_sink, attention_bias and qk_output are refused.
"""

from __future__ import annotations

import hashlib

import numpy as np

from ....ir.expr import Constant
from ....ir.shape import as_expr
from ..context import converter
from .attention import _as, _dims, _optional, _static_dim

_MS = "com.microsoft"
_FLOATS = ("float32", "float16")


def _float_input(ctx, v, what):
    dtype = ctx.type_of(v).dtype
    if dtype not in _FLOATS:
        raise ctx.error(f"{what} of dtype {dtype} is not supported ({', '.join(_FLOATS)})")
    return dtype


def _int_attr(ctx, name, default=None):
    value = ctx.attr(name, default, int)
    if value is None:
        raise ctx.error(f"attribute {name} is required")
    return value


def _known(ctx, inputs, index, what):
    value = inputs[index] if len(inputs) > index else None
    if value is None:
        raise ctx.error(f"input {index} ({what}) is required")
    return ctx.require_known(value, index, what)


# ------------------------------------------------------------------ packed blocks

def _check_bits(ctx, bits, block):
    if bits not in (4, 8):
        raise ctx.error(f"attribute bits={bits} is not supported (4 or 8)")
    if block < 16 or block & (block - 1):
        raise ctx.error(f"attribute block_size={block} must be a power of two of at least 16")


def _scales(ctx, arr, rows, n_blocks, index):
    if arr.dtype not in (np.float32, np.float16) or arr.size != rows * n_blocks:
        raise ctx.error(f"input {index} (scales) must be float32 or float16 with {rows} x {n_blocks} values "
                        f"(rows x blocks), got {arr.dtype} {arr.shape}")
    return np.ascontiguousarray(arr.astype(np.float32).reshape(rows, n_blocks))


def _unpack_zero_points(ctx, zp, rows, n_blocks, bits, index):
    """Packed uint8 zero points -> (rows, n_blocks) uint8 (4 bits: block 2j low nibble, 2j + 1 high)."""
    per_row = -(-n_blocks * bits // 8)
    if zp.size != rows * per_row:
        raise ctx.error(f"input {index} (zero_points) has {zp.size} bytes; {rows} rows of {n_blocks} blocks at "
                        f"{bits} bits pack into {rows * per_row}")
    zp = zp.reshape(rows, per_row)
    if bits == 8:
        return np.ascontiguousarray(zp)
    both = np.stack([zp & 0x0F, zp >> 4], axis=-1).reshape(rows, 2 * per_row)
    return np.ascontiguousarray(both[:, :n_blocks].astype(np.uint8))


def _zero_args(ctx, zp, scales, bits, index):
    """(zero mode, [zero constant]) of known zero points (None: the default 2^(bits-1))."""
    rows, n_blocks = scales.shape
    if zp is None:
        return "default", []
    if zp.dtype == np.uint8:
        unpacked = _unpack_zero_points(ctx, zp, rows, n_blocks, bits, index)
        if (unpacked == 1 << (bits - 1)).all():
            return "default", []
        return "uint8", [unpacked]
    if zp.dtype in (np.float32, np.float16):
        if bits == 8:
            raise ctx.error(f"input {index} (zero_points): float zero points with 8-bit weights are not supported "
                            "(nor by ONNX Runtime's CPU kernel); use uint8 zero points")
        if zp.size != rows * n_blocks:
            raise ctx.error(f"input {index} (zero_points) has {zp.size} values, {rows} x {n_blocks} expected")
        offsets = -(zp.astype(np.float32).reshape(rows, n_blocks) * scales)
        return "float", [np.ascontiguousarray(offsets.astype(np.float32))]
    raise ctx.error(f"input {index} (zero_points) of dtype {zp.dtype} is not supported (uint8, or the scales' type)")


def _packed(ctx, arr):
    """One Constant per distinct packed array of an import: a tied embedding's gather and the LM head's
    matmul (ONNX Runtime GenAI's shared_embeddings) then share their weight and scales."""
    importer = getattr(ctx, "importer", None)
    cache = importer.__dict__.setdefault("packed_constants", {}) if importer is not None else {}
    key = (arr.dtype.str, arr.shape, hashlib.blake2b(arr.tobytes(), digest_size=16).digest())
    if key not in cache:
        cache[key] = Constant(np.ascontiguousarray(arr))
    return cache[key]


def _blocks(ctx, data, rows, n_blocks, blob, index, what):
    if data.dtype != np.uint8 or data.size != rows * n_blocks * blob:
        raise ctx.error(f"input {index} ({what}) must be uint8 with {rows} x {n_blocks} x {blob} bytes, "
                        f"got {data.dtype} {data.shape}")
    return np.ascontiguousarray(data.reshape(rows, n_blocks, blob))


# ------------------------------------------------------------------ MatMulNBits

@converter("MatMulNBits", domain=_MS)
def convert_matmul_nbits(ctx, inputs):
    a = inputs[0]
    k, n = _int_attr(ctx, "K"), _int_attr(ctx, "N")
    bits, block = _int_attr(ctx, "bits", 4), _int_attr(ctx, "block_size")
    _check_bits(ctx, bits, block)
    if k < 1 or n < 1:
        raise ctx.error(f"attributes K={k} and N={n} must be positive")
    level = ctx.attr("accuracy_level", 0, int)
    if level not in (0, 1, 2, 3, 4):
        raise ctx.error(f"attribute accuracy_level={level} must be 0 to 4")
    dtype = _float_input(ctx, a, "A")
    last = _dims(ctx, a)[-1] if _dims(ctx, a) else None
    if last is None or (as_expr(last).is_const and int(last) != k):
        raise ctx.error(f"A {ctx.type_of(a)} must have K={k} features on its last axis")
    n_blocks = -(-k // block)
    qweight = _blocks(ctx, _known(ctx, inputs, 1, "B"), n, n_blocks, block * bits // 8, 1, "B")
    scales = _scales(ctx, _known(ctx, inputs, 2, "scales"), n, n_blocks, 2)
    zp = _optional(inputs, 3)
    mode, zero = _zero_args(ctx, None if zp is None else ctx.require_known(zp, 3, "zero_points"), scales, bits, 3)
    g_idx = _optional(inputs, 4)
    if g_idx is not None:
        order = ctx.require_known(g_idx, 4, "g_idx")
        if order.shape != (k,) or (order.astype(np.int64) != np.arange(k) // block).any():
            raise ctx.error("input 4 (g_idx) reorders the weight's rows into blocks; only the trivial "
                            "g_idx[k] = k // block_size is supported")
    bias = _optional(inputs, 5)
    args = [_as(ctx, a, "float32"), *(_packed(ctx, c) for c in (qweight, scales, *zero))]
    if bias is not None:
        bdims = _dims(ctx, bias)
        if len(bdims) != 1 or (as_expr(bdims[0]).is_const and int(bdims[0]) != n):
            raise ctx.error(f"input 5 (bias) must be (N={n},), got {ctx.type_of(bias)}")
        args.append(_as(ctx, bias, "float32"))
    int8 = level == 4 and getattr(getattr(ctx, "importer", None), "int8_activations", False)
    y = ctx.emit("matmul_nbits", args, {"K": k, "N": n, "bits": bits, "block_size": block, "zero": mode,
                                        "has_bias": bias is not None, "act": "int8" if int8 else "f32"})
    return _as(ctx, y, dtype)


# ------------------------------------------------------------------ GatherBlockQuantized

@converter("GatherBlockQuantized", domain=_MS)
def convert_gather_block_quantized(ctx, inputs):
    data = _known(ctx, inputs, 0, "data")
    indices = inputs[1]
    bits, block = _int_attr(ctx, "bits", 4), _int_attr(ctx, "block_size", 128)
    _check_bits(ctx, bits, block)
    gather_axis, quantize_axis = ctx.attr("gather_axis", 0, int), ctx.attr("quantize_axis", 1, int)
    if data.ndim != 2 or gather_axis % 2 != 0 or quantize_axis % 2 != 1:
        raise ctx.error(f"data {data.dtype} {data.shape} gathered on axis {gather_axis}, quantized on axis "
                        f"{quantize_axis}: only 2-D uint8 data gathered on axis 0 and quantized along axis 1 "
                        "is supported")
    if data.dtype != np.uint8:
        raise ctx.error(f"data of dtype {data.dtype} is not supported (uint8 packed data only; int4/uint4 are not)")
    rows, k = data.shape[0], data.shape[1] * 8 // bits
    n_blocks = -(-k // block)
    scales_arr = _known(ctx, inputs, 2, "scales")
    if scales_arr.shape != (rows, n_blocks):
        raise ctx.error(f"input 2 (scales) has shape {scales_arr.shape}; data {data.shape} in blocks of {block} "
                        f"needs ({rows}, {n_blocks})")
    scales = _scales(ctx, scales_arr, rows, n_blocks, 2)
    out_dtype = str(scales_arr.dtype)
    blob = block * bits // 8
    padded = np.zeros((rows, n_blocks * blob), np.uint8)
    padded[:, :data.shape[1]] = data
    qweight = _blocks(ctx, padded, rows, n_blocks, blob, 0, "data")
    zp = _optional(inputs, 3)
    mode, zero = _zero_args(ctx, None if zp is None else ctx.require_known(zp, 3, "zero_points"), scales, bits, 3)
    if mode == "float":
        raise ctx.error("float zero points are not supported for uint8 data (ONNX Runtime takes uint8 ones)")
    if ctx.type_of(indices).dtype not in ("int32", "int64"):
        raise ctx.error(f"indices must be int32 or int64, got {ctx.type_of(indices).dtype}")
    y = ctx.emit("gather_nbits", [*(_packed(ctx, c) for c in (qweight, scales, *zero)), indices],
                 {"K": k, "bits": bits, "block_size": block, "zero": mode})
    return _as(ctx, y, out_dtype)


# ------------------------------------------------------------------ RMSNorm forms

def _rms_norm(ctx, x, gamma, dtype):
    """x / sqrt(mean(x^2 over axes [axis, rank)) + epsilon) * gamma in float32, and 1 / that root."""
    rank = len(_dims(ctx, x))
    axis = ctx.attr("axis", -1, int)
    if not -rank <= axis < rank:
        raise ctx.error(f"attribute axis={axis} is out of range for rank {rank}")
    if ctx.attr("stash_type", 1, int) != 1:
        raise ctx.error("attribute stash_type must be 1 (float32)")
    eps = np.array(ctx.attr("epsilon", 1e-5, float), np.float32)
    xw = _as(ctx, x, "float32")
    mean_sq = ctx.emit("mean", [ctx.emit("multiply", [xw, xw])], {"axis": tuple(range(axis % rank, rank)),
                                                                    "keepdims": True})
    inv = ctx.emit("reciprocal", [ctx.emit("sqrt", [ctx.emit("add", [mean_sq, eps])])])
    y = ctx.emit("multiply", [ctx.emit("multiply", [xw, inv]), _as(ctx, gamma, "float32")])
    return _as(ctx, y, dtype), inv


@converter("SimplifiedLayerNormalization", onnx_schema=False)
def convert_simplified_layer_norm(ctx, inputs):
    x, gamma = inputs[:2]
    dtype = _float_input(ctx, x, "X")
    y, inv = _rms_norm(ctx, x, gamma, dtype)
    return [y, inv]


@converter("SkipSimplifiedLayerNormalization", domain=_MS)
def convert_skip_simplified_layer_norm(ctx, inputs):
    x, skip, gamma = inputs[:3]
    bias = _optional(inputs, 3)
    dtype = _float_input(ctx, x, "input")
    if len(ctx.node.output) > 1 and ctx.node.output[1]:
        raise ctx.error("output 1 (mean) is not defined for the simplified (RMS) form")
    total = ctx.emit("add", [x, _as(ctx, skip, dtype)])
    if bias is not None:
        total = ctx.emit("add", [total, _as(ctx, bias, dtype)])
    y, inv = _rms_norm(ctx, total, gamma, dtype)
    return [y, None, inv, total]


# ------------------------------------------------------------------ rotary

def _rotate(ctx, x, cos, sin, interleaved):
    """x (..., D) rotated on its first 2 * half features by cos / sin (..., half) broadcast to it."""
    head = _static_dim(ctx, _dims(ctx, x)[-1], "the head size")
    half = _static_dim(ctx, _dims(ctx, cos)[-1], "the rotary half width")
    rot = 2 * half
    if rot > head:
        raise ctx.error(f"the cos/sin caches rotate {rot} features, more than the head size {head}")

    def part(begin, end, step=1):
        return ctx.emit("strided_slice", [x], {"begin": (begin,), "end": (end,), "strides": (step,), "axes": (-1,)})
    x1, x2 = (part(0, rot, 2), part(1, rot, 2)) if interleaved else (part(0, half), part(half, rot))
    real = ctx.emit("subtract", [ctx.emit("multiply", [x1, cos]), ctx.emit("multiply", [x2, sin])])
    imag = ctx.emit("add", [ctx.emit("multiply", [x2, cos]), ctx.emit("multiply", [x1, sin])])
    if interleaved:
        shape = _dims(ctx, real)
        pairs = [ctx.emit("reshape", [t], {"shape": (*shape, 1)}) for t in (real, imag)]
        out = ctx.emit("reshape", [ctx.emit("concat", pairs, {"axis": -1})], {"shape": (*shape[:-1], rot)})
    else:
        out = ctx.emit("concat", [real, imag], {"axis": -1})
    return out if rot == head else ctx.emit("concat", [out, part(rot, head)], {"axis": -1})


def _cache_rows(ctx, cache, positions, what, dtype):
    """Rows `positions` (B, S) of a (max_pos, half) cos or sin cache: (B, S, 1, half)."""
    if len(_dims(ctx, cache)) != 2:
        raise ctx.error(f"{what} must be 2-D (max_position, rotary_dim / 2), got {ctx.type_of(cache)}")
    rows = ctx.emit("take", [_as(ctx, cache, dtype), positions], {"axis": 0})
    b, s, half = _dims(ctx, rows)
    return ctx.emit("reshape", [rows], {"shape": (b, s, 1, half)})


@converter("RotaryEmbedding", domain=_MS)
def convert_ms_rotary_embedding(ctx, inputs):
    x, positions, cos, sin = inputs[:4]
    dtype = _float_input(ctx, x, "input")
    if ctx.attr("is_packed_batching", 0, int):
        raise ctx.error("is_packed_batching=1 is not supported")
    if ctx.attr("scale", 1.0, float) != 1.0:
        raise ctx.error(f"attribute scale={ctx.attr('scale', 1.0, float)} is not supported (1.0)")
    dims = _dims(ctx, x)
    heads, rot_dim = ctx.attr("num_heads", 0, int), ctx.attr("rotary_embedding_dim", 0, int)
    half = _static_dim(ctx, _dims(ctx, cos)[-1], "cos_cache's last dim")
    if rot_dim and rot_dim != 2 * half:
        raise ctx.error(f"rotary_embedding_dim={rot_dim} but the caches hold {half} = dim / 2 values")
    if len(dims) == 3:
        b, s, hidden = dims
        hidden = _static_dim(ctx, hidden, "the hidden size")
        if not heads:
            if rot_dim:
                raise ctx.error("a partial rotary_embedding_dim needs num_heads")
            heads = hidden // (2 * half)
        if heads < 1 or hidden % heads:
            raise ctx.error(f"hidden size {hidden} does not split into num_heads={heads} heads")
        xs = ctx.emit("reshape", [x], {"shape": (b, s, heads, hidden // heads)})
    elif len(dims) == 4:
        b, _, s, _ = dims
        xs = ctx.emit("transpose", [x], {"axes": (0, 2, 1, 3)})   # (B, S, H, D)
    else:
        raise ctx.error(f"input rank {len(dims)} is not supported (3-D or 4-D)")
    pos = _positions(ctx, positions, b, s)
    out = _rotate(ctx, _as(ctx, xs, "float32"), _cache_rows(ctx, cos, pos, "cos_cache", "float32"),
                  _cache_rows(ctx, sin, pos, "sin_cache", "float32"), bool(ctx.attr("interleaved", 0, int)))
    out = ctx.emit("reshape", [out], {"shape": dims}) if len(dims) == 3 else \
        ctx.emit("transpose", [out], {"axes": (0, 2, 1, 3)})
    return _as(ctx, out, dtype)


def _positions(ctx, positions, b, s):
    """position_ids (B, S), or one start offset (shape (1,) or ()), as (B, S) int64."""
    pdims = _dims(ctx, positions)
    positions = _as(ctx, positions, "int64")
    if len(pdims) == 2:
        return positions
    if len(pdims) > 1 or (pdims and not (as_expr(pdims[0]).is_const and int(pdims[0]) == 1)):
        raise ctx.error(f"position_ids must be (batch, seq) or one offset, got {ctx.type_of(positions)}")
    start = ctx.emit("reshape", [positions], {"shape": (1, 1)})
    steps = ctx.emit("reshape", [ctx.emit("arange", [], {"stop": s, "dtype": "int64"})], {"shape": (1, s)})
    return ctx.emit("broadcast_to", [ctx.emit("add", [start, steps])], {"shape": (b, s)})


# ------------------------------------------------------------------ GroupQueryAttention

def _split_heads(ctx, x, heads, head, what):
    b, s, width = _dims(ctx, x)
    if as_expr(width).is_const and int(width) != heads * head:
        raise ctx.error(f"{what} has {width} features, {heads} heads of {head} need {heads * head}")
    return ctx.emit("reshape", [x], {"shape": (b, s, heads, head)})


def _qkv(ctx, inputs, heads, kv_heads):
    """Q (B, S, H, D), K and V (B, S, kv_heads, D) from separate or packed inputs."""
    query, key, value = inputs[0], _optional(inputs, 1), _optional(inputs, 2)
    dims = _dims(ctx, query)
    if len(dims) != 3:
        raise ctx.error(f"query must be (batch, seq, hidden), got {ctx.type_of(query)}")
    if (key is None) != (value is None):
        raise ctx.error("key and value must be given together (or neither, for packed QKV)")
    if key is None:
        width = _static_dim(ctx, dims[2], "the packed QKV width")
        if width % (heads + 2 * kv_heads):
            raise ctx.error(f"packed QKV width {width} does not split into {heads} + 2 x {kv_heads} heads")
        head = width // (heads + 2 * kv_heads)

        def part(begin, end):
            return ctx.emit("strided_slice", [query], {"begin": (begin,), "end": (end,), "axes": (2,)})
        query, key, value = (part(0, heads * head), part(heads * head, (heads + kv_heads) * head),
                             part((heads + kv_heads) * head, width))
    else:
        width = _static_dim(ctx, dims[2], "the query width")
        if width % heads:
            raise ctx.error(f"query width {width} does not split into num_heads={heads} heads")
        head = width // heads
    return (_split_heads(ctx, query, heads, head, "query"), _split_heads(ctx, key, kv_heads, head, "key"),
            _split_heads(ctx, value, kv_heads, head, "value"), head)


def _gqa_bias(ctx, seqlens, b, s, kv_len, window):
    """The (B, 1, S, kv_len) additive mask: query i of batch b at seqlens[b] + 1 - S + i sees keys up to
    it, the last `window` of them when window > 0; also the rotary positions (B, S)."""
    start = ctx.emit("subtract", [ctx.emit("reshape", [_as(ctx, seqlens, "int64")], {"shape": (b, 1)}),
                                  _seq_minus_one(ctx, s)])
    steps = ctx.emit("reshape", [ctx.emit("arange", [], {"stop": s, "dtype": "int64"})], {"shape": (1, s)})
    positions = ctx.emit("add", [start, steps])   # (B, S)
    q_pos = ctx.emit("reshape", [positions], {"shape": (b, 1, s, 1)})
    keys = ctx.emit("arange", [], {"stop": kv_len, "dtype": "int64"})
    allowed = ctx.emit("less_equal", [keys, q_pos])
    if window > 0:
        near = ctx.emit("less", [ctx.emit("subtract", [q_pos, keys]), np.array(window, np.int64)])
        allowed = ctx.emit("logical_and", [allowed, near])
    bias = ctx.emit("where", [allowed, np.array(0, np.float32), np.array(-np.inf, np.float32)])
    return bias, positions


def _seq_minus_one(ctx, s):
    s = as_expr(s)
    if s.is_const:
        return np.array(int(s.value) - 1, np.int64)
    t = ctx.emit("reshape", [ctx.emit("shape_to_tensor", [], {"values": (s,)})], {"shape": ()})
    return ctx.emit("subtract", [t, np.array(1, np.int64)])


def _repeat_kv(ctx, x, reps):
    """(B, kv_heads, T, D) with each head repeated `reps` times in place (reshape, broadcast_to, reshape)."""
    if reps == 1:
        return x
    b, h, t, d = _dims(ctx, x)
    x = ctx.emit("broadcast_to", [ctx.emit("reshape", [x], {"shape": (b, h, 1, t, d)})],
                 {"shape": (b, h, reps, t, d)})
    return ctx.emit("reshape", [x], {"shape": (b, h * reps, t, d)})


def _gqa_refusals(ctx, inputs):
    for name in ("smooth_softmax", "qk_output"):
        if ctx.attr(name, 0, int) not in (0, -1):
            raise ctx.error(f"attribute {name}={ctx.attr(name, 0, int)} is not supported")
    for index, name in ((10, "attention_bias"), (11, "head_sink")):
        if _optional(inputs, index) is not None:
            raise ctx.error(f"input {index} ({name}) is not supported")
    if _optional(inputs, 5) is None:
        raise ctx.error("input 5 (seqlens_k) is required")


@converter("GroupQueryAttention", domain=_MS)
def convert_group_query_attention(ctx, inputs):
    _gqa_refusals(ctx, inputs)
    heads, kv_heads = _int_attr(ctx, "num_heads"), _int_attr(ctx, "kv_num_heads")
    if heads < 1 or kv_heads < 1 or heads % kv_heads:
        raise ctx.error(f"num_heads={heads} must be a positive multiple of kv_num_heads={kv_heads}")
    dtype = _float_input(ctx, inputs[0], "query")
    q, k, v, head = _qkv(ctx, [_as(ctx, x, "float32") if x is not None else None for x in inputs[:3]],
                         heads, kv_heads)
    b, s = _dims(ctx, q)[:2]
    past_key, past_value = _optional(inputs, 3), _optional(inputs, 4)
    if (past_key is None) != (past_value is None):
        raise ctx.error("past_key and past_value must be given together")
    past_len = _dims(ctx, past_key)[2] if past_key is not None else 0
    if past_key is not None:
        for name, past in (("past_key", past_key), ("past_value", past_value)):
            pdims = _dims(ctx, past)
            if len(pdims) != 4 or any(not as_expr(d).is_const or int(d) != w
                                      for d, w in ((pdims[1], kv_heads), (pdims[3], head))):
                raise ctx.error(f"{name} must be (batch, {kv_heads}, past, {head}), got {ctx.type_of(past)} (a "
                                "symbolic head size: import with input_shapes={input: [None, None, None, "
                                f"{head}]}}, as from_genai does)")
    bias, positions = _gqa_bias(ctx, inputs[5], b, s, as_expr(past_len) + s, ctx.attr("local_window_size", -1, int))
    if ctx.attr("do_rotary", 0, int):
        cos, sin = _optional(inputs, 7), _optional(inputs, 8)
        if cos is None or sin is None:
            raise ctx.error("do_rotary=1 needs cos_cache and sin_cache (inputs 7 and 8)")
        if _optional(inputs, 9) is not None:
            positions = _as(ctx, inputs[9], "int64")
        interleaved = bool(ctx.attr("rotary_interleaved", 0, int))
        cos_rows = _cache_rows(ctx, cos, positions, "cos_cache", "float32")
        sin_rows = _cache_rows(ctx, sin, positions, "sin_cache", "float32")
        q, k = (_rotate(ctx, t, cos_rows, sin_rows, interleaved) for t in (q, k))
    q, k, v = (ctx.emit("transpose", [t], {"axes": (0, 2, 1, 3)}) for t in (q, k, v))   # (B, heads, S, D)
    if past_key is not None:
        k = ctx.emit("concat", [_as(ctx, past_key, "float32"), k], {"axis": 2})
        v = ctx.emit("concat", [_as(ctx, past_value, "float32"), v], {"axis": 2})
    present_key, present_value = k, v
    reps = heads // kv_heads
    scale = ctx.attr("scale", 0.0, float) or 1.0 / float(np.sqrt(head))
    kt = ctx.emit("transpose", [_repeat_kv(ctx, k, reps)], {"axes": (0, 1, 3, 2)})
    scores = ctx.emit("multiply", [ctx.emit("matmul", [q, kt]), np.array(scale, np.float32)])
    softcap = ctx.attr("softcap", 0.0, float)
    if softcap < 0:
        raise ctx.error(f"attribute softcap={softcap} must be nonnegative")
    if softcap > 0:
        cap = np.array(softcap, np.float32)
        scores = ctx.emit("multiply", [ctx.emit("tanh", [ctx.emit("divide", [scores, cap])]), cap])
    probs = ctx.emit("softmax", [ctx.emit("add", [scores, bias])], {"axis": -1})
    y = ctx.emit("matmul", [probs, _repeat_kv(ctx, v, reps)])
    y = ctx.emit("reshape", [ctx.emit("transpose", [y], {"axes": (0, 2, 1, 3)})], {"shape": (b, s, heads * head)})
    cache_dtype = ctx.type_of(past_key).dtype if past_key is not None else dtype
    return [_as(ctx, y, dtype), _as(ctx, present_key, cache_dtype), _as(ctx, present_value, cache_dtype)]
