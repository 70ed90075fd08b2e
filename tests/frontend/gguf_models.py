"""Small GGUF files written with the `gguf` package's GGUFWriter for the tests of frontend/gguf.

``write_decoder(path, model, weight_type)`` writes a seeded transformers
Llama / Qwen2 model as llama.cpp's converter would (convert_hf_to_gguf.py:
llama's attn_q / attn_k rows permuted for interleaved RoPE, norms and biases
F32, the 2-D weights in ``weight_type`` via gguf.quants.quantize, any of them
kept F32 by name), with a byte-level BPE vocabulary of the model's size. ``decoder_config(arch)`` is
the tiny config.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

VOCAB = 320   # a multiple of 32: a Q8_0 / Q4_0 embedding's rows need nothing special, but K must be 32k
CONFIGS = {
    "llama": ("LlamaConfig", "LlamaForCausalLM",
              dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                   intermediate_size=96, max_position_embeddings=128, rms_norm_eps=1e-5, rope_theta=10000.0,
                   tie_word_embeddings=False)),
    "qwen2": ("Qwen2Config", "Qwen2ForCausalLM",
              dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                   intermediate_size=96, max_position_embeddings=128, rms_norm_eps=1e-6, rope_theta=1000000.0,
                   tie_word_embeddings=True)),
}


def transformers():
    from tests.onnx_models import _import_transformers
    return _import_transformers()


def build_decoder(arch: str, seed: int = 0):
    import torch
    tf = transformers()
    config_class, model_class, cfg = CONFIGS[arch]
    torch.manual_seed(seed)
    config = getattr(tf, config_class)(vocab_size=VOCAB, attn_implementation="eager", **cfg)
    model = getattr(tf, model_class)(config).eval()
    with torch.no_grad():   # larger weights than the default 0.02 (more varied logits)
        for p in model.parameters():
            if p.dim() == 2:
                p.mul_(5.0)
    return model


def _permute(w: np.ndarray, heads: int) -> np.ndarray:
    """convert_hf_to_gguf.py's LlamaModel.permute."""
    return w.reshape(heads, 2, w.shape[0] // heads // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def _byte_vocab(n: int):
    """GPT-2's 256 byte symbols, merges of common letter pairs, filler tokens, then <s> and </s> (control):
    ``n`` tokens (below 259, the last byte symbols make room for one merge, <s> and </s>: llama.cpp wants a
    merge)."""
    from tokenizers.pre_tokenizers import ByteLevel
    tokens = sorted(ByteLevel.alphabet())
    if n < len(tokens) + 3:
        tokens = tokens[:n - 3]
    merges = []
    for a in "etaoinshr":
        for b in "etaoinshr":
            if len(tokens) < n - 2:
                merges.append(f"{a} {b}")
                tokens.append(a + b)
    tokens += [f"<extra_{i}>" for i in range(n - 2 - len(tokens))] + ["<s>", "</s>"]
    return tokens, merges


def write_decoder(path, model, weight_type: str = "F32", arch: str = "llama", keep_f32=()) -> Path:
    """``model`` as a GGUF file, its 2-D weights in ``weight_type`` but those named in ``keep_f32`` (GGUF
    names, e.g. "token_embd.weight") in F32."""
    import gguf
    from gguf.quants import quantize
    cfg = model.config
    w = gguf.GGUFWriter(str(path), arch)
    w.add_block_count(cfg.num_hidden_layers)
    w.add_context_length(cfg.max_position_embeddings)
    w.add_embedding_length(cfg.hidden_size)
    w.add_feed_forward_length(cfg.intermediate_size)
    w.add_head_count(cfg.num_attention_heads)
    w.add_head_count_kv(cfg.num_key_value_heads)
    w.add_layer_norm_rms_eps(cfg.rms_norm_eps)
    w.add_rope_freq_base(CONFIGS[arch][2]["rope_theta"])
    w.add_rope_dimension_count(cfg.hidden_size // cfg.num_attention_heads)
    w.add_vocab_size(cfg.vocab_size)
    tokens, merges = _byte_vocab(cfg.vocab_size)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("qwen2" if arch == "qwen2" else "smollm")
    w.add_token_list(tokens)
    w.add_token_types([1] * (len(tokens) - 2) + [3, 3])
    w.add_token_merges(merges)
    w.add_bos_token_id(len(tokens) - 2)
    w.add_eos_token_id(len(tokens) - 1)
    qtype = getattr(gguf.GGMLQuantizationType, weight_type)
    names = {"model.embed_tokens.weight": "token_embd.weight", "model.norm.weight": "output_norm.weight",
             "lm_head.weight": "output.weight"}
    parts = {"self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v",
             "self_attn.o_proj": "attn_output", "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up",
             "mlp.down_proj": "ffn_down", "input_layernorm": "attn_norm", "post_attention_layernorm": "ffn_norm"}
    for name, t in model.state_dict().items():
        if name == "lm_head.weight" and cfg.tie_word_embeddings:
            continue
        if name in names:
            out = names[name]
        else:
            _, _, layer, *rest = name.split(".")
            suffix = rest[-1]
            out = f"blk.{layer}.{parts['.'.join(rest[:-1])]}.{suffix}"
        data = t.detach().numpy().astype(np.float32)
        if arch == "llama" and (".attn_q." in out or ".attn_k." in out):
            heads = cfg.num_attention_heads if ".attn_q." in out else cfg.num_key_value_heads
            data = _permute(data, heads)
        if data.ndim == 2 and weight_type != "F32" and out not in keep_f32:
            w.add_tensor(out, quantize(data, qtype), raw_dtype=qtype)
        else:
            w.add_tensor(out, data)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return Path(path)
