"""KV-cache decoders from the dynamo exporter (torch.onnx.export(dynamo=True),
tests/llm_models.py exporter="dynamo") through import, the `step` function and
m.generate.

The GPT-2, Llama and Qwen2 test decoders exported by dynamo (opset 18; its own
forms: Gemm, Split, LayerNormalization for GPT-2, the RMSNorm spelled as
Pow / ReduceMean / Sqrt / Reciprocal, the causal mask from Range / GatherND /
LessOrEqual / And) are imported with max_context=64. Expected values come from
ONNX Runtime running the same export and from PyTorch's greedy tokens
(transformers' generate).

1. The past/present pairs are found by name and the step reads the state in
   place: kv_state's attention matcher catches dynamo's attention (one
   kv_attention per layer, each state read only by kv_append / kv_attention).
2. main, interpreted, gives ORT's logits and presents on a prefill and on a
   step after a random past.
3. Compiled on the host, the step's logits at several contexts are ORT's, and
   32 greedy tokens of m.generate equal PyTorch's.

A model the dynamo exporter cannot export fails with a message saying so.
"""

import numpy as np
import pytest

import relax_edge as rxe
from relax_edge.frontend.onnx import from_onnx, kv_pairs
from relax_edge.transform.kv_state import step_reason
from tests.frontend.kv_step import state_reads
from tests.llm_models import (
    MAX_CONTEXT,
    VOCAB,
    cache_shape,
    empty_cache,
    get_llm,
    step_feeds,
    torch_greedy,
)

MODELS = ["gpt2", "llama", "qwen2"]
BUILDS = [("gpt2", "c"), ("llama", "c"), ("qwen2", "c"), ("llama", "llvm")]
PROMPT = [3, 17, 42, 99, 5]
RTOL, ATOL = 1e-4, 2e-5
# (past, seq): a random past of `past` positions, then `seq` new tokens
CONTEXTS = [(0, 5), (1, 1), (7, 3), (62, 2)]


def dynamo_llm(name):
    """The dynamo export of test decoder `name`, an exporter failure said as such."""
    try:
        return get_llm(name, exporter="dynamo")
    except Exception as e:   # torch.export / onnxscript raise many types
        raise AssertionError(f"the dynamo exporter fails on {name}: {type(e).__name__}: {e}") from e


def _ort(path):
    import onnxruntime as ort
    return ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])


def random_past(model, past, seed=1):
    layers, kv_heads, head_dim = cache_shape(model)
    rng = np.random.default_rng(seed)
    return [rng.standard_normal((1, kv_heads, past, head_dim), dtype=np.float32) for _ in range(2 * layers)]


@pytest.fixture(scope="module", params=MODELS)
def imported(request):
    path, model = dynamo_llm(request.param)
    return request.param, path, model, from_onnx(path, max_context=MAX_CONTEXT)


def test_dynamo_cache_pairs_and_step_reading_the_state_in_place(imported):
    name, _, model, mod = imported
    layers = cache_shape(model)[0]
    kv = [f"{layer}.{kind}" for layer in range(layers) for kind in ("key", "value")]
    assert [(p.past, p.present, p.axis) for p in kv_pairs(mod)] == \
        [(f"past_key_values.{n}", f"present.{n}", 2) for n in kv]
    assert step_reason(mod) is None, step_reason(mod)
    step = mod["step"]
    assert [p.name for p in step.params] == ["input_ids", "attention_mask", "position_ids",
                                             *[f"state_{i}" for i in range(2 * layers)]]
    assert tuple(str(d) for d in step.ret_type.shape) == ("1", "1", str(VOCAB))
    counts, readers = state_reads(step)
    assert (counts["kv_append"], counts["kv_attention"]) == (2 * layers, layers), \
        f"{name}: kv_state's matcher did not catch dynamo's attention: {counts}"
    assert readers == {"kv_append", "kv_attention"}, f"{name}: the state is read by {readers}"


@pytest.mark.parametrize("past,seq", [(0, 5), (7, 1)])
def test_dynamo_main_equals_onnxruntime(imported, past, seq):
    name, path, model, mod = imported
    feeds = step_feeds(np.arange(seq) * 11 % VOCAB, random_past(model, past) if past else empty_cache(model))
    want = _ort(path).run(None, feeds)
    got = rxe.interpret(mod, *feeds.values())
    assert len(got) == len(want)
    for k, (g, w) in enumerate(zip(got, want)):
        np.testing.assert_allclose(np.asarray(g), w, rtol=RTOL, atol=ATOL, err_msg=f"{name}: output {k}")


@pytest.fixture(scope="module", params=BUILDS, ids=lambda p: f"{p[0]}-{p[1]}")
def compiled(request, tmp_path_factory):
    name, backend = request.param
    path, model = dynamo_llm(name)
    art = rxe.build(from_onnx(path, max_context=MAX_CONTEXT), board="host", backend=backend,
                    out_dir=tmp_path_factory.mktemp(f"dynamo-{name}-{backend}"), name="llm", quiet=True, profile=False)
    with rxe.connect("host") as dev, dev.load(art) as m, dev.load(art, function="step") as step:
        yield name, path, model, art, m, step


def test_dynamo_step_logits_equal_onnxruntime(compiled):
    name, path, model, art, _, step = compiled
    sess = _ort(path)
    layers, kv_heads, head_dim = cache_shape(model)
    names = [i["name"] for i in art.signature["step"]["inputs"]]
    for past, seq in CONTEXTS:
        tokens = (np.arange(seq) * 7 + past) % VOCAB
        pasts = random_past(model, past, seed=past)
        feeds = step_feeds(tokens, pasts)
        want = sess.run(None, feeds)
        states = [np.zeros((1, kv_heads, MAX_CONTEXT, head_dim), np.float32) for _ in pasts]
        for s, p in zip(states, pasts):
            s[:, :, :past] = p
        (logits,) = step.run(*[feeds[n] for n in names if not n.startswith("state_")], *states)
        what = f"{name}: past {past}, seq {seq}"
        np.testing.assert_allclose(np.asarray(logits), want[0][:, -1:], rtol=RTOL, atol=ATOL, err_msg=what)
        for s, present in zip(states, want[1:]):
            np.testing.assert_allclose(s[:, :, :past + seq], present, rtol=RTOL, atol=ATOL, err_msg=what)


def test_dynamo_generate_equals_pytorch(compiled):
    name, _, model, _, m, _ = compiled
    want = torch_greedy(model, PROMPT, 32)
    assert len(set(want)) > 4, f"{name}: PyTorch's greedy tokens {want} say little"
    assert m.generate(PROMPT, max_new_tokens=32).tokens == want
