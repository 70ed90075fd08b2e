"""SmolLM2-135M-Instruct straight from its GGUF file (tests/llm_models.smollm2_gguf: Q4_1 weights, a Q8_0
embedding tied to the head), kept quantized: rxe.from_gguf interpreted and compiled for the host.

References we did not write: transformers' fp32 model loaded from the same file (it dequantizes every
tensor), and the issue's greedy text for "Once upon a time" (tests/llm_models.SMOLLM2_REFERENCE)."""

import numpy as np
import pytest

import relax_edge as rxe
from relax_edge.frontend.gguf import gguf_tokenizer
from tests.frontend.gguf_models import transformers
from tests.llm_models import SMOLLM2_PROMPT, SMOLLM2_REFERENCE, empty_cache, smollm2_gguf, step_feeds

pytestmark = pytest.mark.slow

CONTEXT = 64
NEW = 26   # the reference's tokens


@pytest.fixture(scope="module")
def smol():
    path = smollm2_gguf()
    import torch
    model = transformers().AutoModelForCausalLM.from_pretrained(
        str(path.parent), gguf_file=path.name, dtype=torch.float32, attn_implementation="eager").eval()
    tokenizer = gguf_tokenizer(path)
    prompt = tokenizer.encode(SMOLLM2_PROMPT).ids
    with torch.no_grad():
        want = model(torch.tensor([prompt])).logits.numpy()
    return rxe.from_gguf(path, max_context=CONTEXT), model, tokenizer, prompt, want


def _ops(func) -> set:
    return {b.value.op.name for blk in func.body.blocks for b in blk.bindings if hasattr(b.value, "op")}


def test_weights_stay_quantized(smol):
    mod, model, *_ = smol
    ops = _ops(mod.functions["main"])
    assert {"matmul_nbits", "gather_nbits"} <= ops and "take" in ops   # take: the mask's positions only
    assert {"kv_append", "kv_attention"} <= _ops(mod.functions["step"])
    assert mod.functions["step"].attrs["max_context"] == CONTEXT


def test_interpreted_logits_and_first_tokens(smol):
    mod, model, tokenizer, prompt, want = smol
    feeds = step_feeds(prompt, empty_cache(model))
    got = rxe.interpret(mod, *feeds.values())[0]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())
    cfg = model.config
    states = [np.zeros((1, cfg.num_key_value_heads, CONTEXT, cfg.hidden_size // cfg.num_attention_heads),
                       np.float32) for _ in range(2 * cfg.num_hidden_layers)]
    ids, done, tokens = list(prompt), 0, []
    for _ in range(3):
        logits = rxe.interpret(mod, np.array([ids]), np.ones((1, done + len(ids)), np.int64),
                               np.arange(done, done + len(ids))[None], *states, func="step")
        done += len(ids)
        ids = [int(np.argmax(logits[0, -1]))]
        tokens.append(ids[0])
    assert SMOLLM2_REFERENCE.startswith(tokenizer.decode(tokens)), tokenizer.decode(tokens)


def test_compiled_logits_and_generated_text(smol, tmp_path):
    mod, model, tokenizer, prompt, want = smol
    art = rxe.build(mod, board="host", backend="c", out_dir=tmp_path / "host", name="smollm2_gguf",
                    quiet=True, profile=False)
    assert art.decoder["vocab"] == 49152
    with rxe.connect("host") as dev:
        loaded = dev.load(art, threads=1)
        got = loaded.run(*step_feeds(prompt, empty_cache(model)).values())[0]
        np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-4 * np.abs(want).max())
        res = loaded.generate(prompt, max_new_tokens=NEW)
    text = tokenizer.decode(res.tokens)
    assert text.startswith(SMOLLM2_REFERENCE), text
