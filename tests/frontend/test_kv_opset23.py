"""A decoder in the opset-23 forms newer exporters emit (Attention with
past_key / past_value, RotaryEmbedding, RMSNormalization), built by hand with
onnx.helper, through import, the `step` function and m.generate.

The decoder: a Gather embedding, per layer RMSNormalization, q/k/v MatMul,
RotaryEmbedding of q and k with position_ids, Attention with 4 query heads
over 2 KV heads (GQA) taking past_key_values.N.key|value and giving
present.N.key|value, a SiLU-gated MLP; then a final RMSNormalization and the
LM head. Two masks: is_causal alone (attention_mask unused), and is_causal
with attention_mask as a boolean key mask. Expected values come from ONNX
Runtime running the model (its greedy loop feeding the presents back) and
onnx.reference for one step.

1. The importer finds the pairs by name (and by kv_cache= under other
   names); kv_state's matcher catches the Attention converter's form, so the
   step reads the state in place (one kv_attention per layer).
2. Interpreted, the step's greedy tokens are ORT's; compiled on the host
   (C and LLVM), its logits and state at several contexts are ORT's (and
   nothing is written at or after total_seq), and 32 greedy tokens of
   m.generate equal ORT's loop.
3. A row the mask hides entirely (a prompt whose first positions are
   masked) is zero, as ONNX Attention says, in the step too.
"""

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import relax_edge as rxe
from relax_edge.frontend.onnx import from_onnx, kv_pairs
from relax_edge.transform.kv_state import step_reason
from tests.frontend.kv_step import state_reads
from tests.llm_models import greedy, step_feeds

VOCAB, HIDDEN, HEADS, KV_HEADS, HEAD_DIM, FFN, LAYERS = 256, 64, 4, 2, 16, 128, 2
MAX_CONTEXT = 64
PROMPT = [3, 17, 42, 99, 5]
RTOL, ATOL = 1e-4, 2e-5
CONTEXTS = [(0, 5), (1, 1), (7, 3), (62, 2)]
MASKS = ["causal", "causal+mask"]


def decoder(mask: str, seed: int = 0, names=("past_key_values.{}.{}", "present.{}.{}")) -> onnx.ModelProto:
    """The opset-23 decoder; `mask`: "causal" (is_causal only) or "causal+mask" (and attention_mask)."""
    rng = np.random.default_rng(seed)
    inits, nodes = [], []

    def weight(name, *shape, scale=None, value=None):
        a = value if value is not None else rng.standard_normal(shape).astype(np.float32) * (
            scale or 1.0 / np.sqrt(shape[0]))
        inits.append(numpy_helper.from_array(a.astype(np.float32), name))
        return name

    def node(op, ins, outs, **attrs):
        nodes.append(helper.make_node(op, ins, outs, name=f"{op}_{len(nodes)}", **attrs))
        return outs[0]

    def norm(x, name):
        w = weight(f"{name}.weight", HIDDEN, value=1.0 + 0.1 * rng.standard_normal(HIDDEN))
        return node("RMSNormalization", [x, w], [f"{name}.out"], axis=-1, epsilon=1e-5)

    inv = 1.0 / 10000.0 ** (np.arange(0, HEAD_DIM, 2) / HEAD_DIM)
    angles = np.arange(MAX_CONTEXT)[:, None] * inv[None, :]
    cos, sin = weight("cos_cache", value=np.cos(angles)), weight("sin_cache", value=np.sin(angles))
    x = node("Gather", [weight("embed", VOCAB, HIDDEN, scale=1.0), "input_ids"], ["embedded"], axis=0)
    mask_input = ""
    if mask == "causal+mask":
        m = node("Cast", ["attention_mask"], ["mask_bool"], to=TensorProto.BOOL)
        inits.append(numpy_helper.from_array(np.array([1, 2], np.int64), "mask_axes"))
        m = node("Unsqueeze", [m, "mask_axes"], ["mask_keys"])   # (1, 1, 1, total_seq)
        inits.append(numpy_helper.from_array(np.array([1, 1], np.int64), "ones_2"))
        shape = node("Concat", ["ones_2", node("Shape", ["input_ids"], ["seq_dim"], start=1),
                                node("Shape", ["attention_mask"], ["total_dim"], start=1)], ["mask_shape"], axis=0)
        mask_input = node("Expand", [m, shape], ["mask_4d"])   # (1, 1, seq, total_seq): ORT wants seq rows
    past_name, present_name = names
    for layer in range(LAYERS):
        p = f"layers.{layer}"
        h = norm(x, f"{p}.input_norm")
        q = node("MatMul", [h, weight(f"{p}.q", HIDDEN, HEADS * HEAD_DIM)], [f"{p}.q.out"])
        k = node("MatMul", [h, weight(f"{p}.k", HIDDEN, KV_HEADS * HEAD_DIM)], [f"{p}.k.out"])
        v = node("MatMul", [h, weight(f"{p}.v", HIDDEN, KV_HEADS * HEAD_DIM)], [f"{p}.v.out"])
        q = node("RotaryEmbedding", [q, cos, sin, "position_ids"], [f"{p}.q.rope"], num_heads=HEADS)
        k = node("RotaryEmbedding", [k, cos, sin, "position_ids"], [f"{p}.k.rope"], num_heads=KV_HEADS)
        y = node("Attention", [q, k, v, mask_input, past_name.format(layer, "key"), past_name.format(layer, "value")],
                 [f"{p}.attn", present_name.format(layer, "key"), present_name.format(layer, "value")],
                 q_num_heads=HEADS, kv_num_heads=KV_HEADS, is_causal=1)
        o = node("MatMul", [y, weight(f"{p}.o", HEADS * HEAD_DIM, HIDDEN)], [f"{p}.o.out"])
        x = node("Add", [x, o], [f"{p}.resid1"])
        h = norm(x, f"{p}.post_norm")
        gate = node("MatMul", [h, weight(f"{p}.gate", HIDDEN, FFN)], [f"{p}.gate.out"])
        up = node("MatMul", [h, weight(f"{p}.up", HIDDEN, FFN)], [f"{p}.up.out"])
        silu = node("Mul", [gate, node("Sigmoid", [gate], [f"{p}.gate.sigmoid"])], [f"{p}.silu"])
        down = node("MatMul", [node("Mul", [silu, up], [f"{p}.gated"]), weight(f"{p}.down", FFN, HIDDEN)],
                    [f"{p}.down.out"])
        x = node("Add", [x, down], [f"{p}.resid2"])
    node("MatMul", [norm(x, "final_norm"), weight("lm_head", HIDDEN, VOCAB, scale=0.5)], ["logits"])

    def cache(name, seq):
        return helper.make_tensor_value_info(name, TensorProto.FLOAT, [1, KV_HEADS, seq, HEAD_DIM])

    kv = [(layer, kind) for layer in range(LAYERS) for kind in ("key", "value")]
    inputs = [helper.make_tensor_value_info("input_ids", TensorProto.INT64, [1, "seq"]),
              helper.make_tensor_value_info("attention_mask", TensorProto.INT64, [1, "total_seq"]),
              helper.make_tensor_value_info("position_ids", TensorProto.INT64, [1, "seq"]),
              *[cache(past_name.format(*n), "past_seq") for n in kv]]
    outputs = [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, "seq", VOCAB]),
               *[cache(present_name.format(*n), "total_seq") for n in kv]]
    graph = helper.make_graph(nodes, "opset23_decoder", inputs, outputs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 23)])
    model.ir_version = 10
    onnx.checker.check_model(model, full_check=True)
    return model


def empty_cache():
    return [np.zeros((1, KV_HEADS, 0, HEAD_DIM), np.float32) for _ in range(2 * LAYERS)]


def random_past(past, seed):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal((1, KV_HEADS, past, HEAD_DIM), dtype=np.float32) for _ in range(2 * LAYERS)]


def _ort(model):
    import onnxruntime as ort
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])


def _ort_tokens(model, new_tokens):
    sess = _ort(model)
    return greedy(lambda f: sess.run(None, f), PROMPT, empty_cache(), new_tokens)


@pytest.fixture(scope="module", params=MASKS)
def model(request):
    return request.param, decoder(request.param)


def assert_reads_state_in_place(mod):
    counts, readers = state_reads(mod["step"])
    assert (counts["kv_append"], counts["kv_attention"]) == (2 * LAYERS, LAYERS), counts
    assert readers == {"kv_append", "kv_attention"}, f"the state is read by {readers}"


def test_onnxruntime_runs_the_opset23_decoder(model):
    """The reference is sound: ORT's first step agrees with onnx.reference, its tokens vary."""
    from onnx.reference import ReferenceEvaluator
    _, proto = model
    feeds = step_feeds([3, 17, 42], random_past(4, seed=2))
    got, want = _ort(proto).run(None, feeds), ReferenceEvaluator(proto).run(None, feeds)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)
    assert len(set(_ort_tokens(proto, 16))) > 4


def test_pairs_found_and_step_reads_the_state_in_place(model):
    _, proto = model
    mod = from_onnx(proto, max_context=MAX_CONTEXT)
    assert [(p.past, p.present, p.axis) for p in kv_pairs(mod)] == \
        [(f"past_key_values.{layer}.{kind}", f"present.{layer}.{kind}", 2)
         for layer in range(LAYERS) for kind in ("key", "value")]
    assert step_reason(mod) is None, step_reason(mod)
    assert_reads_state_in_place(mod)


def test_pairs_named_by_kv_cache_argument():
    proto = decoder("causal+mask", names=("cache_in_{}_{}", "cache_out_{}_{}"))
    names = {f"cache_in_{layer}_{kind}": f"cache_out_{layer}_{kind}" for layer in range(LAYERS)
             for kind in ("key", "value")}
    mod = from_onnx(proto, max_context=MAX_CONTEXT, kv_cache=names)
    assert [(p.past, p.present) for p in kv_pairs(mod)] == list(names.items())
    assert step_reason(mod) is None, step_reason(mod)
    assert_reads_state_in_place(mod)


def test_interpreted_step_greedy_equals_onnxruntime(model):
    _, proto = model
    mod = from_onnx(proto, max_context=MAX_CONTEXT)
    states = [np.full((1, KV_HEADS, MAX_CONTEXT, HEAD_DIM), 1234.5, np.float32) for _ in range(2 * LAYERS)]
    ids, past, got = list(PROMPT), 0, []
    for _ in range(12):
        f = step_feeds(ids, empty_cache(), past_len=past)
        (logits,) = [rxe.interpret(mod, f["input_ids"], f["attention_mask"], f["position_ids"], *states,
                                   func="step")]
        past += len(ids)
        ids = [int(np.argmax(np.asarray(logits)[0, -1]))]
        got.append(ids[0])
    assert got == _ort_tokens(proto, 12)


def padded_prompt():
    """The prompt with its first two positions masked: query 0 sees no key (a fully masked row: Y = 0)."""
    feeds = step_feeds(PROMPT, empty_cache())
    feeds["attention_mask"][0, :2] = 0
    return feeds


def assert_step_equals(run, feeds, want, what):
    """The step on `feeds` (with their past written into fresh states) gives ORT's last logits and presents."""
    past = feeds["past_key_values.0.key"].shape[2]
    states = [np.full((1, KV_HEADS, MAX_CONTEXT, HEAD_DIM), 1234.5, np.float32) for _ in range(2 * LAYERS)]
    for i, s in enumerate(states):
        s[:, :, :past] = feeds[f"past_key_values.{i // 2}.{('key', 'value')[i % 2]}"]
    (logits,) = run(feeds["input_ids"], feeds["attention_mask"], feeds["position_ids"], *states)
    total = feeds["attention_mask"].shape[1]
    np.testing.assert_allclose(np.asarray(logits), want[0][:, -1:], rtol=RTOL, atol=ATOL, err_msg=what)
    for s, present in zip(states, want[1:]):
        np.testing.assert_allclose(s[:, :, :total], present, rtol=RTOL, atol=ATOL, err_msg=what)
        assert (s[:, :, total:] == np.float32(1234.5)).all(), f"{what}: a write past total_seq"


def test_interpreted_fully_masked_row_is_zero():
    """ONNX Attention zeroes a row the mask hides entirely; kv_state keeps that (a where around kv_attention)."""
    proto = decoder("causal+mask")
    feeds = padded_prompt()
    want = _ort(proto).run(None, feeds)
    assert np.isfinite(want[0]).all()
    mod = from_onnx(proto, max_context=MAX_CONTEXT)
    assert_step_equals(lambda *a: [rxe.interpret(mod, *a, func="step")], feeds, want, "padded prompt")


@pytest.fixture(scope="module", params=[("causal+mask", "c"), ("causal+mask", "llvm"), ("causal", "c")],
                ids=lambda p: f"{p[0]}-{p[1]}")
def compiled(request, tmp_path_factory):
    mask, backend = request.param
    proto = decoder(mask)
    art = rxe.build(from_onnx(proto, max_context=MAX_CONTEXT), board="host", backend=backend,
                    out_dir=tmp_path_factory.mktemp(f"opset23-{backend}"), name="llm", quiet=True, profile=False)
    with rxe.connect("host") as dev, dev.load(art) as m, dev.load(art, function="step") as step:
        yield mask, proto, art, m, step


def test_compiled_step_logits_and_state_equal_onnxruntime(compiled):
    mask, proto, art, _, step = compiled
    sess = _ort(proto)
    assert [i["name"] for i in art.signature["step"]["inputs"]][:3] == ["input_ids", "attention_mask", "position_ids"]
    for past, seq in CONTEXTS:
        feeds = step_feeds((np.arange(seq) * 7 + past) % VOCAB, random_past(past, seed=past))
        assert_step_equals(step.run, feeds, sess.run(None, feeds), f"past {past}, seq {seq}")
    if mask == "causal+mask":
        feeds = padded_prompt()
        assert_step_equals(step.run, feeds, sess.run(None, feeds), "padded prompt")


def test_compiled_generate_equals_onnxruntime_greedy(compiled):
    _, proto, _, m, _ = compiled
    assert m.generate(PROMPT, max_new_tokens=32).tokens == _ort_tokens(proto, 32)
