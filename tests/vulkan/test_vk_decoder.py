"""The KV-cache decoders of tests/llm_models.py (tiny GPT-2 and tiny Llama,
GQA) built with backend="vulkan" and run on lavapipe: the cache in device
buffers, kv_append and kv_attention as shaders (codegen/vulkan/kv.py).

- `step` run by hand (the C build's in-place state: the appended rows read
  back into the caller's arrays, the state written again only when the
  caller's bytes changed): a prompt, then 8 one-token steps; each step's
  logits against ONNX Runtime (graph optimizations off) running the
  exported model on the growing past, and the cache's valid positions
  against ONNX Runtime's presents; then the prompt again on a fresh state.
- `m.generate` (the cache kept on the device for the whole request) and the
  model's RPC server's generate (rxe_generate over caller memory): the
  greedy tokens equal transformers' generate.
- `main` (the past as inputs, the presents as outputs) against ONNX Runtime.
- Every pipeline is made at load: none across the changing past length; the
  validation layer (when installed) reports nothing."""

from __future__ import annotations

import numpy as np
import pytest

import relax_edge as rxe
from relax_edge.deploy.host import server_module
from tests.llm_models import MAX_CONTEXT, get_llm, step_feeds, torch_greedy
from tests.vulkan import test_vk_build as vk_build
from tests.vulkan import vkrt

monkeypatch_module = vk_build.monkeypatch_module
vulkan_env = vk_build.vulkan_env

PROMPT = [1, 5, 9, 42, 7]
DECODE_STEPS = 8


@pytest.fixture(scope="module", params=["gpt2", "llama"])
def decoder(request, vulkan_env, tmp_path_factory):
    path, model = get_llm(request.param)
    bounds = {"batch": (1, 1), "seq": (1, MAX_CONTEXT), "total_seq": (1, MAX_CONTEXT)}
    mod = rxe.from_onnx(path, max_context=MAX_CONTEXT, dim_bounds=bounds)
    art = rxe.build(mod, board="host-vulkan", backend="vulkan", out_dir=tmp_path_factory.mktemp(f"vk_{request.param}"),
                    profile=False)
    return request.param, path, model, art


def _session(path):
    ort = pytest.importorskip("onnxruntime")
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


def test_decoder_steps_match_onnxruntime_and_generate_matches_transformers(decoder, vulkan_env):
    name, path, model, art = decoder
    assert art.decoder is not None and art.decoder["max_context"] == MAX_CONTEXT
    session = _session(path)
    shapes = [tuple(s) for s in art.decoder["states"]]
    want_tokens = torch_greedy(model, PROMPT, 10)
    with rxe.connect("host-vulkan") as dev:
        m = dev.load(art, function="step")
        created = m.pipelines_created()
        states = [np.full(s, np.nan, np.float32) for s in shapes]   # positions past the cache's length unread
        past = [np.zeros((1, s[1], 0, s[3]), np.float32) for s in shapes]
        ids = list(PROMPT)
        first = None
        for step in range(1 + DECODE_STEPS):
            feeds = step_feeds(ids, past)
            want = session.run(None, feeds)
            (logits,) = m.run(feeds["input_ids"], feeds["attention_mask"], feeds["position_ids"], *states)
            total = feeds["attention_mask"].shape[1]
            np.testing.assert_allclose(logits[0, -1], want[0][0, -1], rtol=1e-4, atol=1e-4,
                                       err_msg=f"{name}: logits at step {step} (total {total})")
            for k, (state, present) in enumerate(zip(states, want[1:])):
                np.testing.assert_allclose(state[:, :, :total], present, rtol=1e-4, atol=1e-4,
                                           err_msg=f"{name}: state_{k} at step {step}")
            past = want[1:]
            ids = [int(np.argmax(want[0][0, -1]))]
            first = want[0][0, -1] if first is None else first
        fresh = [np.zeros(s, np.float32) for s in shapes]   # the caller's new bytes are written to the device
        feeds = step_feeds(PROMPT, [np.zeros((1, s[1], 0, s[3]), np.float32) for s in shapes])
        (logits,) = m.run(feeds["input_ids"], feeds["attention_mask"], feeds["position_ids"], *fresh)
        np.testing.assert_allclose(logits[0, -1], first, rtol=1e-4, atol=1e-4, err_msg=f"{name}: the prompt again")
        res = m.generate(PROMPT, max_new_tokens=10)
        assert res.tokens == want_tokens, name
        assert len(set(want_tokens)) > 2, f"transformers' greedy tokens {want_tokens} say little"
        again = m.generate(PROMPT[:2], max_new_tokens=3)   # a new request over the kept cache: no stale positions
        assert again.tokens == torch_greedy(model, PROMPT[:2], 3)
        assert m.pipelines_created() == created   # every pipeline was made at load, whatever the past length
        vkrt.assert_clean(m, vulkan_env)
    with server_module(art, "step", None, "host-vulkan") as s:
        assert s.generate(PROMPT, max_new_tokens=10).tokens == want_tokens


def test_main_with_past_inputs_matches_onnxruntime(decoder, vulkan_env):
    """The artifact's `main` (the exported step, the past as inputs and the presents as outputs)."""
    name, path, _, art = decoder
    session = _session(path)
    rng = np.random.default_rng(3)
    with rxe.connect("host-vulkan") as dev:
        m = dev.load(art)
        for past_len, seq in ((0, 4), (9, 3)):
            past = [rng.standard_normal((1, s[1], past_len, s[3])).astype(np.float32) for s in art.decoder["states"]]
            feeds = step_feeds(rng.integers(0, 256, seq), past)
            for got, want in zip(m.run(*feeds.values()), session.run(None, feeds)):
                np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4, err_msg=f"{name} past {past_len}")
        vkrt.assert_clean(m, vulkan_env)


def test_context_bound_is_a_named_error(decoder):
    _, _, _, art = decoder
    with rxe.connect("host-vulkan") as dev:
        m = dev.load(art, function="step")
        with pytest.raises(rxe.RuntimeCheckError, match=f"max_context={MAX_CONTEXT}"):
            m.generate(PROMPT, max_new_tokens=MAX_CONTEXT)
