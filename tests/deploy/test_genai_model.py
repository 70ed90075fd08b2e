"""An int4 decoder made by ONNX Runtime GenAI's model builder, through rxe.from_genai, the step and m.generate.

The model is tests/llm_models' tiny Llama (CONFIGS["llama"]: RoPE, RMSNorm, 4 query heads over 2 KV
heads) saved as a Hugging Face folder with a word-level tokenizer of its 256 ids, then built by
`python -m onnxruntime_genai.models.builder -p int4 -e cpu` (MatMulNBits with accuracy_level 4,
GroupQueryAttention with rotary inside and packed QKV, SimplifiedLayerNormalization,
SkipSimplifiedLayerNormalization); the folder is cached like tests/llm_models' exports. Two more builds
(VARIANTS): 8-bit weights (-p int8), and tied embeddings quantized into GatherBlockQuantized.

References we did not write: ONNX Runtime on the same model.onnx (a Python greedy loop feeding the
presents back; at accuracy_level 4 it quantizes activations to int8, so from_genai's default float32
activations are compared with the model's accuracy_level set to 0 as well) and onnxruntime-genai's own
generator. Tokens are compared up to the first near-tie of ONNX Runtime's logits.
"""

import importlib.metadata
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest

import relax_edge as rxe
from relax_edge.frontend.onnx.genai import read_config
from relax_edge.ir.expr import Call
from relax_edge.transform.kv_state import step_reason
from tests.frontend.kv_step import state_reads
from tests.llm_models import CONFIGS, LAYERS, VOCAB
from tests.model_cache import cache_dir, export_once, source_key

og = pytest.importorskip("onnxruntime_genai")
pytestmark = pytest.mark.slow   # the builder's run (a cold cache) takes ~25 s

ROOT = Path(__file__).resolve().parents[2]
PROMPT = [3, 17, 42, 99, 5]
NEW = 24
_LLAMA = CONFIGS["llama"][2]
KV_HEADS, HEAD = _LLAMA["num_key_value_heads"], _LLAMA["hidden_size"] // _LLAMA["num_attention_heads"]
NEAR_TIE = 1e-4   # a top-2 margin of ONNX Runtime's logits below this ends the token comparison
_BUILD = ("import runpy, sys; sys.path.insert(0, sys.argv[1]); from tests.onnx_models import _import_torchvision; "
          "_import_torchvision(); sys.argv = ['builder', *sys.argv[2:]]; "
          "runpy.run_module('onnxruntime_genai.models.builder', run_name='__main__')")


# the builder's inputs: transformers config changes, --extra_options and the precision (-p)
VARIANTS = {
    "llama": ({}, []),
    "llama-int8": ({}, [], "int8"),   # 8-bit MatMulNBits
    # tied embeddings quantized too (GatherBlockQuantized on the LM head's weight, a width of 80 padded to 96
    # by the blocks of 32), one KV head (MQA)
    "llama-tied": ({"hidden_size": 80, "num_attention_heads": 5, "num_key_value_heads": 1, "tie_word_embeddings": True},
                   ["shared_embeddings=true", "int4_op_types_to_quantize=MatMul/Gather"]),
}


def _hf_folder(path: Path, variant: str) -> None:
    """The seeded tiny Llama and a word-level tokenizer of its ids (bos 1, eos 2) in a Hugging Face folder."""
    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    from tests.llm_models import _COMMON, _transformers
    config_class, model_class, config = CONFIGS["llama"]
    tf = _transformers()
    torch.manual_seed(0)
    cfg = getattr(tf, config_class)(**{**_COMMON, **config, **VARIANTS[variant][0]})
    getattr(tf, model_class)(cfg).eval().save_pretrained(path)
    words = Tokenizer(models.WordLevel({f"t{i}": i for i in range(VOCAB)}, unk_token="t0"))
    words.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=words, bos_token="t1", eos_token="t2", unk_token="t0")
    tokenizer.save_pretrained(path)


def genai_llama(variant: str = "llama") -> Path:
    """The builder's int4 CPU folder of a tiny Llama (VARIANTS), built once per source and package versions."""
    key = source_key(__file__, ROOT / "tests" / "llm_models.py") + "-" + importlib.metadata.version(
        "onnxruntime-genai").replace(".", "")
    stem = "genai_" + variant.replace("-", "_")   # no stem a prefix of another's "stem-" (the cleanups glob it)
    folder = cache_dir() / f"{stem}-{key}"

    def build(marker: Path) -> None:
        for old in cache_dir().glob(f"{stem}-*"):
            if old.is_dir():
                shutil.rmtree(old, ignore_errors=True)
        work = folder.with_name(f".{folder.name}.{os.getpid()}")
        shutil.rmtree(work, ignore_errors=True)
        try:
            _hf_folder(work / "hf", variant)
            extra, precision = VARIANTS[variant][1], (VARIANTS[variant][2:] or ("int4",))[0]
            subprocess.run([sys.executable, "-c", _BUILD, str(ROOT), "-i", str(work / "hf"), "-o", str(work / "out"),
                            "-p", precision, "-e", "cpu", "-c", str(work / "cache"),
                            *(["--extra_options", *extra] if extra else [])],
                           check=True, capture_output=True, timeout=600)
            os.replace(work / "out", folder)
        finally:
            shutil.rmtree(work, ignore_errors=True)
        marker.write_text(json.dumps({"folder": folder.name}))

    export_once(stem, key, build)   # the lock, and a marker that the folder is complete
    return folder


@pytest.fixture(scope="module")
def folder():
    return genai_llama()


@pytest.fixture(scope="module")
def model(folder):
    return onnx.load(str(folder / "model.onnx"))


def _session(proto):
    return ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])


def _level_0(proto):
    """The model with every MatMulNBits at accuracy_level 0 (float32 activations in ONNX Runtime)."""
    proto = onnx.ModelProto.FromString(proto.SerializeToString())
    for node in proto.graph.node:
        for a in node.attribute:
            if a.name == "accuracy_level":
                a.i = 0
    return proto


def _feeds(model, tokens, past):
    """One step's inputs of the builder's model (its order: input_ids, attention_mask, the pasts)."""
    feeds = {"input_ids": np.array([tokens], np.int64),
             "attention_mask": np.ones((1, past[0].shape[2] + len(tokens)), np.int64)}
    names = [i.name for i in model.graph.input if i.name.startswith("past_key_values")]
    return {**feeds, **dict(zip(names, past))}


def _cache_dims(model):
    """(kv_heads, head size) of the builder's model."""
    dims = next(i for i in model.graph.input if i.name.startswith("past_key_values")).type.tensor_type.shape.dim
    return dims[1].dim_value, HEAD


def _empty_past(model):
    kv_heads, head = _cache_dims(model)
    return [np.zeros((1, kv_heads, 0, head), np.float32) for _ in range(2 * LAYERS)]


def ort_greedy(proto, new_tokens):
    """ONNX Runtime's greedy tokens and each step's top-2 margin."""
    sess = _session(proto)
    outputs = [o.name for o in sess.get_outputs()]
    past, ids, tokens, margins = _empty_past(proto), list(PROMPT), [], []
    for _ in range(new_tokens):
        out = dict(zip(outputs, sess.run(None, _feeds(proto, ids, past))))
        past = [out[i.name.replace("past_key_values", "present")] for i in proto.graph.input
                if i.name.startswith("past_key_values")]
        logits = out["logits"][0, -1]
        top = np.sort(logits)[-2:]
        ids = [int(np.argmax(logits))]
        tokens.append(ids[0])
        margins.append(float(top[1] - top[0]))
    return tokens, margins


def until_tie(tokens, margins):
    n = next((i for i, m in enumerate(margins) if m < NEAR_TIE), len(margins))
    return tokens[:n + 1]   # the token chosen at a near-tie may differ; the ones before may not


def step_greedy(mod, new_tokens, max_context, kv_heads=KV_HEADS):
    states = [np.zeros((1, kv_heads, max_context, HEAD), np.float32) for _ in range(2 * LAYERS)]
    ids, total, tokens = list(PROMPT), 0, []
    for _ in range(new_tokens):
        total += len(ids)
        logits = rxe.interpret(mod, np.array([ids], np.int64), np.ones((1, total), np.int64), *states, func="step")
        ids = [int(np.argmax(np.asarray(logits)[0, -1]))]
        tokens.append(ids[0])
    return tokens


def test_the_builder_uses_the_contrib_operators_and_the_step_reads_the_state_in_place(folder, model):
    ops = {n.op_type for n in model.graph.node}
    assert {"MatMulNBits", "GroupQueryAttention", "SimplifiedLayerNormalization",
            "SkipSimplifiedLayerNormalization"} <= ops
    assert all(a.i == 4 for n in model.graph.node for a in n.attribute if a.name == "accuracy_level")
    config = read_config(folder)
    assert (config.eos_token_ids, config.bos_token_id, config.context_length) == ((2,), 1, 64)
    mod = rxe.from_genai(folder)
    assert step_reason(mod) is None, step_reason(mod)
    counts, readers = state_reads(mod["step"])
    assert (counts["kv_append"], counts["kv_attention"]) == (2 * LAYERS, LAYERS), counts
    assert readers == {"kv_append", "kv_attention"}


def test_main_logits_and_presents_equal_onnxruntime(folder, model):
    rng = np.random.default_rng(0)
    default, int8 = rxe.from_genai(folder), rxe.from_genai(folder, int8_activations=True)
    as_built, level_0 = _session(model), _session(_level_0(model))
    for past_len, tokens in ((0, PROMPT), (4, [7, 8, 9])):
        past = [rng.standard_normal((1, KV_HEADS, past_len, HEAD), dtype=np.float32) for _ in range(2 * LAYERS)]
        feeds = _feeds(model, tokens, past)
        args = [feeds[i.name] for i in model.graph.input]
        want4, want0 = as_built.run(None, feeds), level_0.run(None, feeds)
        for mod, want in ((default, want0), (int8, want4)):
            for g, w in zip(rxe.interpret(mod, *args), want):
                np.testing.assert_allclose(np.asarray(g), w, rtol=1e-4, atol=1e-4 * np.abs(w).max())
        largest = np.abs(want4[0]).max()   # float32 activations against ONNX Runtime's int8 ones
        assert np.abs(np.asarray(rxe.interpret(default, *args)[0]) - want4[0]).max() <= 0.01 * largest


def test_interpreted_step_greedy_equals_onnxruntime_and_genai(folder, model):
    tokens4, margins4 = ort_greedy(model, NEW)
    tokens0, margins0 = ort_greedy(_level_0(model), NEW)
    genai_model = og.Model(str(folder))
    params = og.GeneratorParams(genai_model)
    params.set_search_options(max_length=len(PROMPT) + NEW, do_sample=False)
    generator = og.Generator(genai_model, params)
    generator.append_tokens(PROMPT)
    genai = []
    while not generator.is_done():
        generator.generate_next_token()
        genai.append(int(generator.get_next_tokens()[0]))
    want4, want0 = until_tie(tokens4, margins4), until_tie(tokens0, margins0)
    assert len(want4) > 3 and genai[:len(want4)] == want4   # the reference loop is onnxruntime-genai's
    assert step_greedy(rxe.from_genai(folder, int8_activations=True), len(want4), 64) == want4
    assert step_greedy(rxe.from_genai(folder), len(want0), 64) == want0


@pytest.mark.slow
@pytest.mark.parametrize("backend, int8", [("c", True), ("llvm", False)], ids=["c-int8", "llvm-f32"])
def test_compiled_generate_equals_onnxruntime(folder, model, backend, int8, tmp_path):
    mod = rxe.from_genai(folder, max_context=48, int8_activations=int8)
    art = rxe.build(mod, board="host", backend=backend, out_dir=tmp_path, name="genai", quiet=True, profile=False)
    want = until_tie(*ort_greedy(model if int8 else _level_0(model), NEW))
    config = read_config(folder)
    with rxe.connect("host") as dev, dev.load(art) as m:
        got = m.generate(PROMPT, max_new_tokens=len(want), stop=list(config.eos_token_ids)).tokens
    assert got == want[:len(got)] and (len(got) == len(want) or got[-1] in config.eos_token_ids)
    assert art.decoder["max_context"] == 48 and art.decoder["vocab"] == VOCAB


def test_int8_weights_equal_onnxruntime():
    folder = genai_llama("llama-int8")
    model = onnx.load(str(folder / "model.onnx"))
    assert {a.i for n in model.graph.node for a in n.attribute if a.name == "bits"} == {8}
    feeds = _feeds(model, PROMPT, _empty_past(model))
    args = [feeds[i.name] for i in model.graph.input]
    for mod, proto in ((rxe.from_genai(folder), _level_0(model)), (rxe.from_genai(folder, int8_activations=True),
                                                                   model)):
        for g, w in zip(rxe.interpret(mod, *args), _session(proto).run(None, feeds)):
            np.testing.assert_allclose(np.asarray(g), w, rtol=1e-4, atol=1e-4 * np.abs(w).max())


def test_tied_int4_embeddings_share_the_lm_heads_constants():
    """shared_embeddings: GatherBlockQuantized reads the LM head's weight, reshaped; one Constant each for both."""
    folder = genai_llama("llama-tied")
    model = onnx.load(str(folder / "model.onnx"))
    assert "GatherBlockQuantized" in {n.op_type for n in model.graph.node}
    mod = rxe.from_genai(folder)
    calls = {c.op.name: c for blk in mod["main"].body.blocks for c in (b.value for b in blk.bindings)
             if isinstance(c, Call) and c.op.name in ("gather_nbits", "matmul_nbits")}   # the last matmul: the head
    gather, head = calls["gather_nbits"], calls["matmul_nbits"]
    assert gather.args[0] is head.args[1] and gather.args[1] is head.args[2]
    feeds = _feeds(model, PROMPT, _empty_past(model))
    want = _session(_level_0(model)).run(None, feeds)
    for g, w in zip(rxe.interpret(mod, *[feeds[i.name] for i in model.graph.input]), want):
        np.testing.assert_allclose(np.asarray(g), w, rtol=1e-4, atol=1e-4 * np.abs(w).max())
    expected = until_tie(*ort_greedy(_level_0(model), 12))
    assert step_greedy(mod, len(expected), 64, kv_heads=_cache_dims(model)[0]) == expected
