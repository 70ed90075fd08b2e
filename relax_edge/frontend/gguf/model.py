"""`from_gguf(path)`: a llama or qwen2 GGUF file as a KV-cache decoder IRModule.

1. main is built in the form of a transformers ONNX export (frontend/onnx/
   kv_cache.py): input_ids (batch, seq), attention_mask (batch, total_seq),
   position_ids (batch, seq), past_key_values.N.key|value (batch, kv_heads,
   past_seq, head_dim) -> logits (batch, seq, vocab), present.N.key|value;
   its pairs are recorded in main.attrs["kv_cache"] and `add_step`
   (transform/kv_state.py) adds `step`, so generation works as for ONNX.
2. The hyperparameters come from the metadata (`<arch>.block_count`,
   embedding_length, feed_forward_length, attention.head_count[_kv],
   attention.layer_norm_rms_epsilon, rope.freq_base, rope.dimension_count,
   rope.scaling.type / factor (none or linear), context_length: the default
   bound of the context). Missing or ill-typed values are GGUFErrors.
3. Q8_0 / Q4_0 / Q4_1 weights become matmul_nbits (an embedding table:
   gather_nbits) over their blocks as stored (blocks.py); F32 / F16 / BF16
   weights become float32 constants (F16 and BF16 widened). Without
   output.weight the head is tied: the embedding's very Constants.
4. llama.cpp's converter permutes the rows of llama's attn_q / attn_k for its
   interleaved RoPE; they are permuted back (exact for packed blocks: whole
   rows move) and RoPE is transformers' rotate-half form, so the logits are
   transformers'. qwen2 files are not permuted (NEOX RoPE).
Not supported (a GGUFError): other architectures, RoPE scaling other than
linear, per-dimension RoPE factors (rope_freqs.weight), partial rotary
dimensions, tensor types other than those above.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from ...ir.builder import Builder
from ...ir.expr import Constant, Tuple, Var
from ...ir.shape import SizeVar
from ...ir.types import TensorType
from ...op.registry import make_call
from ...transform.kv_state import add_step
from ..onnx.kv_cache import KVPair
from .blocks import BLOCK_TYPES, float_weight, packed_blocks
from .reader import GGUFError, GGUFReader

__all__ = ["from_gguf", "HParams", "read_hparams", "ARCHITECTURES"]

ARCHITECTURES = ("llama", "qwen2")
_MASK_MIN = float(np.finfo(np.float32).min)


@dataclasses.dataclass(frozen=True)
class HParams:
    arch: str
    layers: int
    hidden: int
    ffn: int
    heads: int
    kv_heads: int
    head_dim: int
    eps: float
    rope_base: float
    rope_linear: float   # positions are divided by it (1.0: no scaling)
    context: int


def _meta(r: GGUFReader, key: str, kind, default=None):
    value = r.metadata.get(key, default)
    if value is None:
        raise GGUFError(f"metadata {key!r} is missing; a {r.metadata.get('general.architecture')} model needs it")
    ok = isinstance(value, kind) and not (kind is not bool and isinstance(value, bool))
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        value, ok = float(value), True
    if not ok:
        raise GGUFError(f"metadata {key!r} is {value!r}; it must be {kind.__name__}")
    return value


def _positive(r, key, default=None) -> int:
    v = _meta(r, key, int, default)
    if not 1 <= v <= 1 << 24:
        raise GGUFError(f"metadata {key!r} is {v}; it must be 1 to {1 << 24}")
    return v


def read_hparams(r: GGUFReader) -> HParams:
    arch = _meta(r, "general.architecture", str)
    if arch not in ARCHITECTURES:
        raise GGUFError(f"general.architecture is {arch!r}; from_gguf supports {', '.join(ARCHITECTURES)}")
    layers, hidden = _positive(r, f"{arch}.block_count"), _positive(r, f"{arch}.embedding_length")
    heads = _positive(r, f"{arch}.attention.head_count")
    kv_heads = _positive(r, f"{arch}.attention.head_count_kv", heads)
    if f"{arch}.attention.key_length" not in r.metadata and hidden % heads:
        raise GGUFError(f"{arch}: embedding_length {hidden} is not a multiple of head_count {heads} and "
                        f"'{arch}.attention.key_length' is missing")
    head_dim = _positive(r, f"{arch}.attention.key_length", hidden // heads)
    if heads % kv_heads or head_dim % 2:
        raise GGUFError(f"{arch}: {heads} heads over {kv_heads} KV heads of dim {head_dim}: the heads must be a "
                        "multiple of the KV heads and head_dim even")
    rope_dims = _positive(r, f"{arch}.rope.dimension_count", head_dim)
    if rope_dims != head_dim:
        raise GGUFError(f"metadata '{arch}.rope.dimension_count' is {rope_dims}, head_dim {head_dim}: partial "
                        "rotary embeddings are not supported")
    scaling = r.metadata.get(f"{arch}.rope.scaling.type", "none")
    linear = 1.0
    if scaling == "linear":
        linear = _meta(r, f"{arch}.rope.scaling.factor", float)
        if not linear > 0:
            raise GGUFError(f"metadata '{arch}.rope.scaling.factor' is {linear}; it must be positive")
    elif scaling != "none":
        raise GGUFError(f"metadata '{arch}.rope.scaling.type' is {scaling!r}; only 'none' and 'linear' are "
                        "supported")
    if "rope_freqs.weight" in r.tensors:
        raise GGUFError("tensor rope_freqs.weight: per-dimension RoPE factors (llama 3.1 scaling) are not supported")
    eps = _meta(r, f"{arch}.attention.layer_norm_rms_epsilon", float)
    base = _meta(r, f"{arch}.rope.freq_base", float, 10000.0)
    if not (0 < eps < 1 and base > 1):
        raise GGUFError(f"{arch}: rms epsilon {eps} / rope.freq_base {base} out of range")
    return HParams(arch, layers, hidden, _positive(r, f"{arch}.feed_forward_length"), heads, kv_heads, head_dim,
                   eps, base, linear, _positive(r, f"{arch}.context_length"))


def _row_unpermute(n_rows: int, heads: int) -> np.ndarray:
    """The rows of transformers' q/k weight in llama.cpp's permuted order (undoes convert_hf_to_gguf's permute)."""
    half = n_rows // heads // 2
    return np.arange(n_rows).reshape(heads, half, 2).transpose(0, 2, 1).reshape(-1)


class _Weights:
    """Each tensor of the file as the constants of a linear layer or an embedding, made once per name."""

    def __init__(self, r: GGUFReader):
        self.r, self.made = r, {}

    def info(self, name: str, shape: tuple):
        info = self.r.tensor(name)
        if info.shape != tuple(shape):
            raise GGUFError(f"tensor {name} has shape {list(info.shape)}; the metadata needs {list(shape)}")
        return info

    def vector(self, name: str, n: int) -> Constant:
        info = self.info(name, (n,))
        return Constant(float_weight(self.r.tensor_data(name), info.type_name, f"tensor {name}"))

    def table(self, name: str, rows: int, cols: int, perm_heads: int = 0):
        """('packed', consts, attrs) or ('float', (rows, cols) float32 Constant)."""
        if name in self.made:
            return self.made[name]
        info = self.info(name, (rows, cols))
        data = self.r.tensor_data(name)
        if info.type_name in BLOCK_TYPES:
            q, s, z, attrs = packed_blocks(data, info.type_name, f"tensor {name}")
            parts = [q, s] + ([z] if z is not None else [])
            if perm_heads:
                parts = [p[_row_unpermute(rows, perm_heads)] for p in parts]
            made = ("packed", [Constant(p) for p in parts], {**attrs, "K": cols})
        else:
            w = float_weight(data, info.type_name, f"tensor {name}")
            if perm_heads:
                w = w[_row_unpermute(rows, perm_heads)]
            made = ("float", Constant(w))
        self.made[name] = made
        return made


class _Decoder:
    def __init__(self, r: GGUFReader, hp: HParams, max_context: int, dims: dict):
        self.r, self.hp, self.w = r, hp, _Weights(r)
        self.b = Builder()
        self.batch, self.seq, self.total, self.past = dims["batch"], dims["seq"], dims["total_seq"], dims["past_seq"]
        self.max_context = max_context
        self.vocab = r.tensor("token_embd.weight").dims[-1]

    def emit(self, name, args, **attrs):
        return self.b.emit(make_call(name, args, attrs))

    def const(self, value):
        return Constant(np.asarray(value, np.float32))

    def linear(self, x, name: str, n_out: int, n_in: int, perm_heads: int = 0, bias: str | None = None):
        made = self.w.table(name, n_out, n_in, perm_heads)
        bias_c = None
        if bias is not None and bias in self.r.tensors:
            vec = self.w.vector(bias, n_out)
            bias_c = Constant(vec.data[_row_unpermute(n_out, perm_heads)]) if perm_heads else vec
        if made[0] == "packed":
            consts, attrs = made[1], made[2]
            args = [x, *consts] + ([bias_c] if bias_c is not None else [])
            return self.emit("matmul_nbits", args, N=n_out, has_bias=bias_c is not None, **attrs)
        y = self.emit("matmul", [x, Constant(np.ascontiguousarray(made[1].data.T))])
        return y if bias_c is None else self.emit("add", [y, bias_c])

    def rms_norm(self, x, name: str):
        sq = self.emit("power", [x, self.const(2.0)])
        ms = self.emit("mean", [sq], axis=(-1,), keepdims=True)
        root = self.emit("sqrt", [self.emit("add", [ms, self.const(self.hp.eps)])])
        inv = self.emit("divide", [self.const(1.0), root])
        return self.emit("multiply", [self.w.vector(name, self.hp.hidden), self.emit("multiply", [x, inv])])

    def heads(self, x, n: int):
        hd, b, s = self.hp.head_dim, self.batch, self.seq
        return self.emit("transpose", [self.emit("reshape", [x], shape=(b, s, n, hd))], axes=(0, 2, 1, 3))

    def rope(self, x, cos, sin):
        half = self.hp.head_dim // 2
        x1 = self.emit("strided_slice", [x], begin=(0,), end=(half,), axes=(3,))
        x2 = self.emit("strided_slice", [x], begin=(half,), end=(2 * half,), axes=(3,))
        rot = self.emit("concat", [self.emit("negative", [x2]), x1], axis=-1)
        return self.emit("add", [self.emit("multiply", [x, cos]), self.emit("multiply", [rot, sin])])

    def repeat(self, kv, groups: int):
        if groups == 1:
            return kv
        b, hp, n = self.batch, self.hp, self.past + self.seq
        x = self.emit("reshape", [kv], shape=(b, hp.kv_heads, 1, n, hp.head_dim))
        x = self.emit("broadcast_to", [x], shape=(b, hp.kv_heads, groups, n, hp.head_dim))
        return self.emit("reshape", [x], shape=(b, hp.heads, n, hp.head_dim))

    def mask(self, attention_mask):
        b, s, n = self.batch, self.seq, self.past + self.seq
        key_pos = self.emit("arange", [], stop=n)
        past = self.emit("reshape", [self.emit("shape_to_tensor", [], values=(self.past,))], shape=())
        query_pos = self.emit("add", [self.emit("arange", [], stop=s), past])
        causal = self.emit("less_equal", [self.emit("reshape", [key_pos], shape=(1, 1, 1, n)),
                                          self.emit("reshape", [query_pos], shape=(1, 1, s, 1))])
        keep = self.emit("cast", [self.emit("take", [attention_mask, key_pos], axis=1)], dtype="bool")
        allowed = self.emit("logical_and", [causal, self.emit("reshape", [keep], shape=(b, 1, 1, n))])
        return self.emit("where", [allowed, self.const(0.0), self.const(_MASK_MIN)])

    def rotary(self, position_ids):
        hp, b, s = self.hp, self.batch, self.seq
        exponents = np.arange(0, hp.head_dim, 2, dtype=np.int64).astype(np.float32) / np.float32(hp.head_dim)
        inv_freq = (1.0 / np.power(np.float32(hp.rope_base), exponents)).astype(np.float32) / np.float32(hp.rope_linear)
        pos = self.emit("reshape", [self.emit("cast", [position_ids], dtype="float32")], shape=(b, s, 1))
        freqs = self.emit("multiply", [pos, Constant(inv_freq.astype(np.float32))])
        angles = self.emit("concat", [freqs, freqs], axis=-1)
        return [self.emit("reshape", [self.emit(f, [angles])], shape=(b, 1, s, hp.head_dim)) for f in ("cos", "sin")]

    def embed(self, input_ids):
        made = self.w.table("token_embd.weight", self.vocab, self.hp.hidden)
        if made[0] == "packed":
            return self.emit("gather_nbits", [*made[1], input_ids], **made[2])
        return self.emit("take", [made[1], input_ids], axis=0)

    def build(self):
        hp, b = self.hp, self.b
        ids_t = TensorType((self.batch, self.seq), "int64")
        params = [Var("input_ids", ids_t), Var("attention_mask", TensorType((self.batch, self.total), "int64")),
                  Var("position_ids", ids_t)]
        cache_t = TensorType((self.batch, hp.kv_heads, self.past, hp.head_dim), "float32")
        pairs = []
        for layer in range(hp.layers):
            for kind in ("key", "value"):
                pairs.append(KVPair(f"past_key_values.{layer}.{kind}", f"present.{layer}.{kind}", 2,
                                    len(params), len(pairs) + 1))
                params.append(Var(f"past_key_values_{layer}_{kind}", cache_t))
        attrs = {"kv_cache": tuple(pairs), "max_context": self.max_context}
        with b.function("main", params, attrs):
            with b.dataflow():
                outputs = [b.emit_output(o, name) for o, name in self.body(*params[:3], params[3:])]
            b.ret(b.emit(Tuple(outputs)))
        return b.get()

    def body(self, input_ids, attention_mask, position_ids, pasts):
        hp = self.hp
        q_dim, kv_dim = hp.heads * hp.head_dim, hp.kv_heads * hp.head_dim
        permute = hp.arch == "llama"
        x = self.embed(input_ids)
        mask = self.mask(attention_mask)
        cos, sin = self.rotary(position_ids)
        presents = []
        for i in range(hp.layers):
            p = f"blk.{i}."
            h = self.rms_norm(x, p + "attn_norm.weight")
            q = self.heads(self.linear(h, p + "attn_q.weight", q_dim, hp.hidden, hp.heads if permute else 0,
                                       p + "attn_q.bias"), hp.heads)
            k = self.heads(self.linear(h, p + "attn_k.weight", kv_dim, hp.hidden, hp.kv_heads if permute else 0,
                                       p + "attn_k.bias"), hp.kv_heads)
            v = self.heads(self.linear(h, p + "attn_v.weight", kv_dim, hp.hidden, bias=p + "attn_v.bias"),
                           hp.kv_heads)
            q, k = self.rope(q, cos, sin), self.rope(k, cos, sin)
            k_all = self.emit("concat", [pasts[2 * i], k], axis=-2)
            v_all = self.emit("concat", [pasts[2 * i + 1], v], axis=-2)
            presents += [(k_all, f"present_{i}_key"), (v_all, f"present_{i}_value")]
            groups = hp.heads // hp.kv_heads
            kt = self.emit("transpose", [self.repeat(k_all, groups)], axes=(0, 1, 3, 2))
            scores = self.emit("multiply", [self.emit("matmul", [q, kt]), self.const(hp.head_dim ** -0.5)])
            probs = self.emit("softmax", [self.emit("add", [scores, mask])], axis=-1)
            o = self.emit("matmul", [probs, self.repeat(v_all, groups)])
            o = self.emit("reshape", [self.emit("transpose", [o], axes=(0, 2, 1, 3))],
                          shape=(self.batch, self.seq, q_dim))
            x = self.emit("add", [x, self.linear(o, p + "attn_output.weight", hp.hidden, q_dim)])
            h = self.rms_norm(x, p + "ffn_norm.weight")
            gate = self.linear(h, p + "ffn_gate.weight", hp.ffn, hp.hidden)
            up = self.linear(h, p + "ffn_up.weight", hp.ffn, hp.hidden)
            act = self.emit("multiply", [self.emit("multiply", [gate, self.emit("sigmoid", [gate])]), up])
            x = self.emit("add", [x, self.linear(act, p + "ffn_down.weight", hp.hidden, hp.ffn)])
        x = self.rms_norm(x, "output_norm.weight")
        head = "output.weight" if "output.weight" in self.r.tensors else "token_embd.weight"
        logits = self.linear(x, head, self.vocab, hp.hidden)
        return [(logits, "logits"), *presents]


def _dims(max_context: int, dim_bounds: dict | None) -> dict:
    bounds = {"batch": (1, None), "seq": (1, max_context), "total_seq": (1, max_context),
              "past_seq": (0, max_context - 1)}
    for name, given in (dim_bounds or {}).items():
        if name not in bounds:
            raise GGUFError(f"dim_bounds: {name!r} is not a dim of the model (its dims: {', '.join(bounds)})")
        lo, hi = given if isinstance(given, tuple) else (bounds[name][0], given)
        if not isinstance(hi, int) or isinstance(hi, bool) or not isinstance(lo, int) or lo > hi or \
                lo < bounds[name][0] or (bounds[name][1] is not None and hi > bounds[name][1]):
            raise GGUFError(f"dim_bounds[{name!r}] = {given!r} conflicts with max_context={max_context}, which "
                            f"bounds {name} to {bounds[name][0]}..{bounds[name][1]}")
        bounds[name] = (lo, hi)
    return {n: SizeVar(n, hi, lo) for n, (lo, hi) in bounds.items()}


def from_gguf(path, max_context: int | None = None, dim_bounds: dict | None = None):
    """A llama / qwen2 GGUF file as an IRModule with main and step (see the module docstring).

    max_context: the bound of the context (default: the file's context_length).
    dim_bounds: {"batch" | "seq" | "total_seq" | "past_seq": upper or (lower, upper)}, within max_context.
    Any problem with the file is a GGUFError naming the field, tensor or key.
    """
    r = path if isinstance(path, GGUFReader) else GGUFReader(path)
    hp = read_hparams(r)
    if max_context is None:
        max_context = hp.context
    if isinstance(max_context, bool) or not isinstance(max_context, int) or max_context < 1:
        raise GGUFError(f"max_context must be a positive int, got {max_context!r}")
    mod = _Decoder(r, hp, max_context, _dims(max_context, dim_bounds)).build()
    return add_step(mod)
