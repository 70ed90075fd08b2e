"""A decoder on a microcontroller: the tiny Llama of tests/llm_models.py
("llama-mcu": about 0.3M parameters, a context of 128) compiled for a
Cortex-M4F with no OS and generating under qemu-system-arm with semihosting
through the runner's generate mode (rxe_generate on the device, one fixed
arena plus one fixed state block).

Its greedy tokens must equal PyTorch's (transformers' generate), and the
host's; a seeded sampled run must equal the host's (the sampler draws in
integers, the logits agree closely enough here); the context bound is a
RuntimeCheckError naming it, with the tokens made before it. The memory the
device needs is what the header and the artifact say: the state
(MODEL_STATE_BYTES), the step's fixed arena and the loop's scratch.
"""

import re

import pytest

import relax_edge as rxe
from tests.llm_models import get_llm, torch_greedy

pytestmark = [pytest.mark.slow, pytest.mark.emu]

BOARD = "qemu-cortex-m4"
CONTEXT = 128
PROMPT = [5, 77, 300, 12, 9]


@pytest.fixture(scope="module")
def decoder(tmp_path_factory):
    path, model = get_llm("llama-mcu")
    mod = rxe.from_onnx(str(path), max_context=CONTEXT)
    out = tmp_path_factory.mktemp("mcu-decoder")
    return (model, rxe.build(mod, board=BOARD, out_dir=out / "m4", profile=False),
            rxe.build(mod, board="host", out_dir=out / "host", profile=False))


def test_the_model_is_the_size_the_issue_names(decoder):
    model, art, _ = decoder
    params = sum(p.numel() for p in model.parameters())
    assert 250_000 <= params <= 350_000
    assert art.decoder["max_context"] == CONTEXT
    layers, kv_heads, head_dim = model.config.num_hidden_layers, model.config.num_key_value_heads, 96 // 4
    assert art.state_bytes == 2 * layers * kv_heads * CONTEXT * head_dim * 4
    header = art.header.read_text()
    assert re.search(rf"#define MODEL_STATE_BYTES {art.state_bytes}u", header)
    assert re.search(rf"#define MODEL_MAX_CONTEXT {CONTEXT}\b", header)
    assert isinstance(art.signature["step"]["fixed_workspace_bytes"], int)


def test_greedy_tokens_equal_pytorch_and_the_host(decoder):
    model, art, host_art = decoder
    expected = torch_greedy(model, PROMPT, 32)
    with rxe.connect(BOARD) as dev:
        res = dev.load(art, function="step").generate(PROMPT, max_new_tokens=32)
    with rxe.connect("host") as dev:
        host = dev.load(host_art).generate(PROMPT, max_new_tokens=32)
    assert res.tokens == expected
    assert host.tokens == expected
    assert res.prompt_tokens == len(PROMPT) and res.stopped_by == "max_new_tokens"


def test_sampling_with_a_seed_is_the_hosts(decoder):
    _, art, host_art = decoder
    kw = dict(max_new_tokens=24, temperature=0.8, top_k=40, top_p=0.9, seed=11)
    with rxe.connect(BOARD) as dev:
        m = dev.load(art, function="step")
        first, again = m.generate(PROMPT, **kw), m.generate(PROMPT, **kw)
    with rxe.connect("host") as dev:
        host = dev.load(host_art).generate(PROMPT, **kw)
    assert first.tokens == again.tokens == host.tokens
    assert first.tokens != torch_greedy(decoder[0], PROMPT, 24)   # it did sample


def test_the_context_bound_is_a_named_error_with_the_tokens_before_it(decoder):
    _, art, _ = decoder
    prompt = list(range(CONTEXT - 8))
    with rxe.connect(BOARD) as dev:
        m = dev.load(art, function="step")
        with pytest.raises(rxe.RuntimeCheckError, match=f"max_context={CONTEXT}") as err:
            m.generate(prompt, max_new_tokens=20)
        assert len(err.value.tokens) == 9   # the 120 + 8 positions fill the cache; the 9th token needs no step
        with pytest.raises(rxe.RuntimeCheckError, match=f"max_context={CONTEXT}"):
            m.generate(list(range(CONTEXT + 1)), max_new_tokens=1)
