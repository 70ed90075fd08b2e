"""A KV-cache decoder's `step` function (transform/kv_state.py): the KV cache
as caller-owned state, written in place (the contract of M12).

Expected values come from references we did not write: ONNX Runtime running
the same export (presents fed back), PyTorch's greedy tokens (transformers'
generate), and the models' own shapes. The GPT-2, Llama and Qwen2 test
decoders (tests/llm_models.py) are imported with max_context=64; each is
compiled once per backend (host, C and LLVM) and its step is driven here
with numpy state arrays that persist across calls (the host transport hands
the arrays' memory to the step, which writes them in place).

1. The step's signature is the contract's; its IR reads the state only
   through kv_append / kv_attention (no copy of the past).
2. Interpreted, its greedy tokens are ORT's; compiled, its 32 greedy tokens
   are PyTorch's.
3. At contexts 0, 1, 7, 33 and near the bound (a random past written into
   the state), the last position's logits are ORT's, the state holds ORT's
   presents at [0, total_seq), and positions from total_seq on keep a
   sentinel; a prefill followed by decode steps up to the bound agrees with
   ORT at every step, and one step more is refused with the state untouched.
4. Bad inputs are RuntimeCheckErrors (InterpretErrors interpreted) naming
   the input and the bound.
5. A decoder without attention_mask, an unbounded one and a model without
   a cache get no step, with the reason. Hand-made decoders: presents only
   returned (the state still written), a present and a past read outside
   attention (ORT's logits at every step), token inputs in another order
   (the step's in the contract's).
6. art.state_bytes, art.decoder and the header's defines; the step's arena
   is fixed and holds no seq x vocab logits (shown on a vocab of 8192).
"""

import ctypes
import re

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import relax_edge as rxe
from relax_edge.build import Artifact
from relax_edge.frontend.onnx import from_onnx, kv_pairs
from relax_edge.interp import InterpretError
from relax_edge.ir.expr import Call
from relax_edge.transform.kv_state import step_reason
from tests.llm_models import (
    CONFIGS,
    MAX_CONTEXT,
    VOCAB,
    _transformers,
    cache_shape,
    empty_cache,
    export_step,
    get_llm,
    greedy,
    step_feeds,
    torch_greedy,
)
from tests.model_cache import export_once, source_key

MODELS = ["gpt2", "llama", "qwen2"]   # the vocab-256 decoders; each in CONFIGS
BACKENDS = ["c", "llvm"]
PROMPT = [3, 17, 42, 99, 5]
SENTINEL = np.float32(1234.5)   # read as a key or a value, it would dominate the logits
TOKEN_INPUTS = ("input_ids", "attention_mask", "position_ids")
# (past, seq): a random past of `past` positions in the state, then `seq` new tokens
CONTEXTS = [(0, 5), (0, 1), (1, 1), (7, 3), (33, 1), (33, 6), (62, 1), (62, 2), (63, 1), (0, MAX_CONTEXT)]
RTOL, ATOL = 1e-4, 2e-5   # ATOL per unit of the expected values' magnitude (GPT-2's logits reach ~12)

_TORCH_TOKENS = {}


def _ort(path):
    import onnxruntime as ort
    return ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])


def _torch_tokens(name, model):
    if name not in _TORCH_TOKENS:
        _TORCH_TOKENS[name] = torch_greedy(model, PROMPT, 32)
        assert len(set(_TORCH_TOKENS[name])) > 4, f"{name}: PyTorch's greedy tokens say little"
    return _TORCH_TOKENS[name]


def token_inputs(names, tokens, past):
    """The step's token inputs (in the order of `names`) for `tokens` after `past` positions."""
    seq = len(tokens)
    values = {"input_ids": np.asarray(tokens, np.int64).reshape(1, seq),
              "attention_mask": np.ones((1, past + seq), np.int64),
              "position_ids": np.arange(past, past + seq, dtype=np.int64).reshape(1, seq)}
    return [values[n] for n in names if n in TOKEN_INPUTS]


def new_states(model, fill=SENTINEL):
    layers, kv_heads, head_dim = cache_shape(model)
    return [np.full((1, kv_heads, MAX_CONTEXT, head_dim), fill, np.float32) for _ in range(2 * layers)]


def step_greedy(run, names, prompt, new_tokens, states):
    """Greedy decoding through a step function: the prompt in one call, then one token per call."""
    ids, past, out = list(prompt), 0, []
    for _ in range(new_tokens):
        (logits,) = run(*token_inputs(names, ids, past), *states)
        assert np.asarray(logits).shape == (1, 1, VOCAB)
        past += len(ids)
        ids = [int(np.argmax(np.asarray(logits)[0, -1]))]
        out.append(ids[0])
    return out


def assert_logits(got, want, what):
    assert float(np.abs(want).max()) > 0, f"{what}: ORT's logits are all zeros"
    assert_close(got, want, what)


def assert_close(got, want, what):
    atol = ATOL * max(1.0, float(np.abs(want).max(initial=0.0)))
    np.testing.assert_allclose(np.asarray(got), want, rtol=RTOL, atol=atol, err_msg=what)


# the step function in the IR ----------------------------------------------------------------
def test_the_test_models():
    for name in MODELS:
        assert CONFIGS[name][2].get("vocab_size", VOCAB) == VOCAB


@pytest.fixture(scope="module", params=MODELS)
def llm(request):
    path, model = get_llm(request.param)
    return request.param, path, model, from_onnx(path, max_context=MAX_CONTEXT)


def test_step_signature_is_the_contract(llm):
    name, _, model, mod = llm
    layers, kv_heads, head_dim = cache_shape(model)
    step = mod["step"]
    assert step_reason(mod) is None
    got = [(p.name, p.type.dtype, tuple(str(d) for d in p.type.shape)) for p in step.params]
    want = [("input_ids", "int64", ("1", "seq")), ("attention_mask", "int64", ("1", "total_seq")),
            ("position_ids", "int64", ("1", "seq"))]
    want += [(f"state_{i}", "float32", ("1", str(kv_heads), str(MAX_CONTEXT), str(head_dim)))
             for i in range(2 * layers)]
    assert got == want
    assert (step.ret_type.dtype, tuple(str(d) for d in step.ret_type.shape)) == ("float32", ("1", "1", str(VOCAB)))
    seq, total = (step.params[k].type.shape[1].as_var() for k in (0, 1))
    assert (seq.lower, seq.upper, total.upper) == (1, MAX_CONTEXT, MAX_CONTEXT)
    # main stays the model as exported: logits for every position and the presents
    main = mod["main"]
    assert len(main.ret_type.fields) == 1 + 2 * layers
    assert str(main.ret_type.fields[0].shape[1]) == "seq"


def test_step_reads_the_state_in_place(llm):
    """Each state is written by one kv_append and read only by kv_attention: no copy of the past, no
    repeat of K/V; the LM head multiplies one row."""
    name, _, model, mod = llm
    layers = cache_shape(model)[0]
    step = mod["step"]
    states = {p for p in step.params if p.name.startswith("state_")}
    appended, counts, readers = set(), {"kv_append": 0, "kv_attention": 0}, []
    for block in step.body.blocks:
        for b in block.bindings:
            if not isinstance(b.value, Call):
                continue
            op = b.value.op.name
            if op in counts:
                counts[op] += 1
            if op == "kv_append":
                assert b.value.args[0] in states
                appended.add(b.var)
            for a in b.value.args:
                if a in states or a in appended:
                    readers.append(op)
            if op == "matmul":
                lm_head = b.value
    assert counts == {"kv_append": 2 * layers, "kv_attention": layers}
    # the last matmul is the LM head: one row in, one row of logits out
    assert [str(d) for d in lm_head.type.shape] == ["1", "1", str(VOCAB)], lm_head.type
    assert str(lm_head.args[0].type.shape[-2]) == "1", f"{name}: the LM head runs on {lm_head.args[0].type}"
    assert sorted(set(readers)) == ["kv_append", "kv_attention"], readers


def test_interpreted_step_greedy_equals_onnxruntime(llm):
    name, path, model, mod = llm
    sess = _ort(path)
    want = greedy(lambda f: sess.run(None, f), PROMPT, empty_cache(model), 32)
    names = [p.name for p in mod["step"].params]
    states = new_states(model)
    got = step_greedy(lambda *a: [rxe.interpret(mod, *a, func="step")], names, PROMPT, 32, states)
    assert got == want
    written = len(PROMPT) + 31
    assert all((s[:, :, written:] == SENTINEL).all() and not (s[:, :, :written] == SENTINEL).any() for s in states)


def test_interpreted_step_errors(llm):
    name, _, model, mod = llm
    layers, kv_heads, head_dim = cache_shape(model)
    names = [p.name for p in mod["step"].params]
    ok = new_states(model)

    def expect(inputs, pattern):
        with pytest.raises(InterpretError, match=pattern):
            rxe.interpret(mod, *inputs, func="step")

    ids, mask, pos = token_inputs(names, [1, 2, 3], 0)
    expect([ids, mask[:, :2], pos, *ok], r"kv_append\): positions \[-1, 2\) are outside the state's 64 positions")
    expect([*token_inputs(names, [1], MAX_CONTEXT), *ok],
           r"input attention_mask dimension 1: total_seq = 65 exceeds its upper bound 64")
    expect([ids, mask, pos, ok[0][:, :, :32], *ok[1:]], r"input state_0 dimension 2 is 32, but it must be 64")
    expect([ids.astype(np.float32), mask, pos, *ok], r"input input_ids: dtype float32, expected int64")
    assert all((s == SENTINEL).all() for s in ok)


# the step compiled on the host ---------------------------------------------------------------
class Compiled:
    def __init__(self, name, backend, path, model, art):
        self.name, self.backend, self.path, self.model, self.art = name, backend, path, model, art
        self.step = rxe.connect("host").load(art, function="step")
        self.names = [i["name"] for i in art.signature["step"]["inputs"]]
        self.sess = _ort(path)

    def run(self, tokens, past, states):
        return self.step.run(*token_inputs(self.names, tokens, past), *states)


@pytest.fixture(scope="module", params=[(m, b) for m in MODELS for b in BACKENDS], ids=lambda p: f"{p[0]}-{p[1]}")
def compiled(request, tmp_path_factory):
    name, backend = request.param
    path, model = get_llm(name)
    art = rxe.build(from_onnx(path, max_context=MAX_CONTEXT), board="host", backend=backend,
                    out_dir=tmp_path_factory.mktemp(f"{name}-{backend}"), name="llm", quiet=True, profile=False)
    c = Compiled(name, backend, path, model, art)
    yield c
    c.step.close()


def test_compiled_greedy_equals_pytorch(compiled):
    c = compiled
    want = _torch_tokens(c.name, c.model)
    assert step_greedy(c.step.run, c.names, PROMPT, 32, new_states(c.model)) == want
    # the state needs no initialization: zeros or a sentinel, the same tokens
    assert step_greedy(c.step.run, c.names, PROMPT, 32, new_states(c.model, 0.0)) == want


def test_compiled_logits_and_state_at_contexts(compiled):
    """A random past of each length written into a sentinel-filled state: ORT's last logits and
    presents, the past itself untouched and nothing written from total_seq on."""
    c = compiled
    layers, kv_heads, head_dim = cache_shape(c.model)
    rng = np.random.default_rng(7)
    for past, seq in CONTEXTS:
        what = f"{c.name} ({c.backend}) at past {past}, seq {seq}"
        pasts = [rng.standard_normal((1, kv_heads, past, head_dim), dtype=np.float32) for _ in range(2 * layers)]
        tokens = rng.integers(0, VOCAB, seq)
        want = c.sess.run(None, step_feeds(tokens, pasts))
        states = new_states(c.model)
        for s, p in zip(states, pasts):
            s[:, :, :past] = p
        (logits,) = c.run(tokens, past, states)
        assert logits.shape == (1, 1, VOCAB), what
        assert_logits(logits, want[0][:, -1:], what)
        for i, (s, p, present) in enumerate(zip(states, pasts, want[1:])):
            assert present.shape[2] == past + seq
            assert np.array_equal(s[:, :, :past], p), f"{what}: state_{i} changed before the past's end"
            assert_close(s[:, :, past:past + seq], present[:, :, past:], f"{what}: state_{i}'s new positions")
            assert (s[:, :, past + seq:] == SENTINEL).all(), f"{what}: state_{i} written at or after total_seq"


def test_compiled_prefill_then_decode_to_the_bound(compiled):
    """One artifact: a 7-token prefill, then decode steps up to total_seq = max_context, each step's
    logits ORT's (ORT fed its own presents); the state at the bound holds ORT's presents; one step more
    is an RXE_ERR_BOUND naming total_seq and the bound, and writes nothing."""
    c = compiled
    rng = np.random.default_rng(3)
    states = new_states(c.model)
    past, tokens = 0, list(rng.integers(0, VOCAB, 7))
    ort_past = empty_cache(c.model)
    while past < MAX_CONTEXT:
        want = c.sess.run(None, step_feeds(tokens, ort_past))
        (logits,) = c.run(tokens, past, states)
        assert_logits(logits, want[0][:, -1:], f"{c.name} ({c.backend}) at total_seq {past + len(tokens)}")
        ort_past, past, tokens = want[1:], past + len(tokens), [int(rng.integers(0, VOCAB))]
    for i, (s, present) in enumerate(zip(states, ort_past)):
        assert present.shape[2] == MAX_CONTEXT
        assert_close(s, present, f"state_{i} at the bound")
    before = [s.copy() for s in states]
    with pytest.raises(rxe.RuntimeCheckError, match=r"attention_mask dimension 1: total_seq = 65 exceeds its upper "
                                                    r"bound 64"):
        c.run(tokens, past, states)
    assert all(np.array_equal(s, b) for s, b in zip(states, before))


def test_compiled_step_on_threads(compiled):
    """The runtime's thread pool (3 threads: attention's rows split unevenly) gives the same logits."""
    c = compiled
    tokens = list(np.random.default_rng(4).integers(0, VOCAB, 9))
    one, states = c.run(tokens, 0, new_states(c.model))[0], new_states(c.model)
    with rxe.connect("host") as dev:
        threaded = dev.load(c.art, function="step", threads=3)
        (got,) = threaded.run(*token_inputs(c.names, tokens, 0), *states)
        c.step.lib.rxe_threads_set_count(ctypes.c_int(1))   # the pool is the process's: back to one
    np.testing.assert_allclose(got, one, rtol=1e-5, atol=1e-6)


def test_compiled_step_errors(compiled):
    c = compiled
    layers, kv_heads, head_dim = cache_shape(c.model)
    ok = new_states(c.model)
    ids, mask, pos = token_inputs(c.names, [1, 2, 3], 0)

    def expect(inputs, pattern):
        with pytest.raises(rxe.RuntimeCheckError, match=pattern):
            c.step.run(*inputs)

    # total_seq < seq: the new positions would start before position 0
    expect([ids, np.ones((1, 2), np.int64), pos, *ok],
           r"RXE_ERR_BOUND: input attention_mask dimension 1: total_seq = 2 is below its lower bound 3")
    expect([*token_inputs(c.names, [1], MAX_CONTEXT), *ok],
           r"RXE_ERR_BOUND: input attention_mask dimension 1: total_seq = 65 exceeds its upper bound 64")
    expect([*token_inputs(c.names, [1] * (MAX_CONTEXT + 1), 0), *ok],
           r"RXE_ERR_BOUND: input input_ids dimension 1: seq = 65 exceeds its upper bound 64")
    expect([np.zeros((1, 0), np.int64), np.ones((1, 3), np.int64), np.zeros((1, 0), np.int64), *ok],
           r"RXE_ERR_BOUND: input input_ids dimension 1: seq = 0 is below its lower bound 1")
    short = np.zeros((1, kv_heads, MAX_CONTEXT // 2, head_dim), np.float32)
    expect([ids, mask, pos, short, *ok[1:]], rf"RXE_ERR_SHAPE: input state_0 dimension 2 is {MAX_CONTEXT // 2}, "
                                             rf"but it must be {MAX_CONTEXT}")
    wide = np.zeros((1, kv_heads, MAX_CONTEXT, head_dim + 1), np.float32)
    last = 2 * layers - 1
    expect([ids, mask, pos, *ok[:-1], wide], rf"RXE_ERR_SHAPE: input state_{last} dimension 3 is {head_dim + 1}, "
                                             rf"but it must be {head_dim}")
    expect([ids, mask, pos, ok[0].astype(np.float64), *ok[1:]],
           r"RXE_ERR_DTYPE: input state_0: dtype float64, expected float32")
    expect([ids.astype(np.float32), mask, pos, *ok], r"RXE_ERR_DTYPE: input input_ids: dtype float32, expected int64")
    expect([ids, mask, pos[:, :2], *ok], r"RXE_ERR_SHAPE: input position_ids dimension 1 is 2, but it must equal "
                                         r"seq = 3")
    assert all((s == SENTINEL).all() for s in ok), "a refused call wrote the state"


def test_state_bytes_and_header(compiled):
    c = compiled
    art = c.art
    layers, kv_heads, head_dim = cache_shape(c.model)
    states = new_states(c.model)
    assert art.state_bytes == sum(s.nbytes for s in states) == 2 * layers * kv_heads * MAX_CONTEXT * head_dim * 4
    assert art.decoder["max_context"] == MAX_CONTEXT and art.decoder["vocab"] == VOCAB
    assert art.decoder["state_bytes"] == art.state_bytes
    assert art.decoder["states"] == [[1, kv_heads, MAX_CONTEXT, head_dim]] * (2 * layers)
    sig = art.signature["step"]
    assert [i["shape"] for i in sig["inputs"] if i["name"].startswith("state_")] == \
        [f"(1, {kv_heads}, {MAX_CONTEXT}, {head_dim})"] * (2 * layers)
    assert [o["shape"] for o in sig["outputs"]] == [f"(1, 1, {VOCAB})"]
    ws = sig["fixed_workspace_bytes"]
    assert isinstance(ws, int) and not isinstance(ws, bool) and ws > 0
    # what rxe_decoder_init reads: the rxe_function_t's arena and its inputs' rxe_arg_info_t
    fn = c.step.fn
    assert fn.fixed_workspace_bytes == ws
    infos = [fn.inputs[i] for i in range(fn.num_inputs)]
    assert [(i.name.decode(), i.shape.decode()) for i in infos[-2 * layers:]] == \
        [(f"state_{k}", f"(1, {kv_heads}, {MAX_CONTEXT}, {head_dim})") for k in range(2 * layers)]
    header = art.header.read_text()
    for define, value in (("LLM_STATE_BYTES", f"{art.state_bytes}u"), ("LLM_MAX_CONTEXT", str(MAX_CONTEXT)),
                          ("LLM_VOCAB", str(VOCAB)), ("LLM_STEP_WORKSPACE_BYTES", f"{ws}u")):
        assert re.search(rf"^#define {define} {value}$", header, re.M), f"no '#define {define} {value}'"
    # the fixed arena is enough for every size: the plan at the largest prefill and at one decode step
    for tokens, past in (([1] * MAX_CONTEXT, 0), ([1], MAX_CONTEXT - 1), ([1], 0)):
        _, need = c.step.plan(*token_inputs(c.names, tokens, past), *states)
        assert 0 < need <= ws
    loaded = Artifact.load(art.out_dir)
    assert (loaded.state_bytes, loaded.decoder) == (art.state_bytes, art.decoder)


# a large vocabulary: the arena holds no seq x vocab logits ----------------------------------
BIG_VOCAB = 8192


def _big_vocab_llama():
    import torch
    tf = _transformers()
    torch.manual_seed(0)
    cfg = tf.LlamaConfig(vocab_size=BIG_VOCAB, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                         num_key_value_heads=1, intermediate_size=64, max_position_embeddings=MAX_CONTEXT,
                         attn_implementation="eager")
    model = tf.LlamaForCausalLM(cfg).eval()
    # keyed by the exporter's file (tests/llm_models.py) and the packages; the config is in the stem
    key = source_key(export_step.__code__.co_filename)
    path = export_once(f"llm-llama-v{BIG_VOCAB}-h32-l1-s0", key, lambda p: export_step(model, p))
    return path, model


def test_step_arena_holds_no_full_logits(tmp_path):
    """Vocab 8192, max_context 64: seq x vocab logits would be 2 MiB. Were the LM head run on every row,
    that would be an intermediate of the step (its output is one row), so in its arena; the fixed
    arena is far below it. The 64-token prefill still gives ORT's last logits."""
    path, model = _big_vocab_llama()
    full_logits = MAX_CONTEXT * BIG_VOCAB * 4
    art = rxe.build(from_onnx(path, max_context=MAX_CONTEXT), board="host", backend="c", out_dir=tmp_path / "art",
                    name="big", quiet=True, profile=False)
    step_ws = art.signature["step"]["fixed_workspace_bytes"]
    assert isinstance(step_ws, int) and 0 < step_ws < full_logits // 4, step_ws
    weights = BIG_VOCAB * 32 * 4 * 2
    assert art.weights_bytes >= weights, "the model is not the one described"
    with rxe.connect("host") as dev:
        step = dev.load(art, function="step")
        names = [i["name"] for i in art.signature["step"]["inputs"]]
        tokens = list(np.random.default_rng(0).integers(0, BIG_VOCAB, MAX_CONTEXT))
        want = _ort(path).run(None, step_feeds(tokens, empty_cache(model)))[0][:, -1:]
        (logits,) = step.run(*token_inputs(names, tokens, 0), *new_states(model))
        assert logits.shape == (1, 1, BIG_VOCAB)
        assert_logits(logits, want, "vocab 8192, a 64-token prefill")


# models that get no step ---------------------------------------------------------------------
def _tiny_decoder(with_mask: bool, position_ids: bool = False):
    """One KV pair: the new positions are the token embeddings; the logits a matmul of them."""
    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(rng.standard_normal((16, 4)).astype(np.float32), "E"),
             numpy_helper.from_array(rng.standard_normal((4, 16)).astype(np.float32), "W"),
             numpy_helper.from_array(np.array([1], np.int64), "axes")]
    inputs = [helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "seq"])]
    if with_mask:
        inputs.append(helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["batch", "total_seq"]))
    if position_ids:
        inputs.append(helper.make_tensor_value_info("position_ids", TensorProto.INT64, ["batch", "seq"]))
    nodes = [helper.make_node("Gather", ["E", "input_ids"], ["emb"]),
             helper.make_node("Unsqueeze", ["emb", "axes"], ["new"]),
             helper.make_node("MatMul", ["emb", "W"], ["logits"])]
    outputs = [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", "seq", 16])]
    for kind in ("key", "value"):
        past = f"past_key_values.0.{kind}"
        inputs.append(helper.make_tensor_value_info(past, TensorProto.FLOAT, ["batch", 1, "past_seq", 4]))
        nodes.append(helper.make_node("Concat", [past, "new"], [f"present.0.{kind}"], axis=2))
        outputs.append(helper.make_tensor_value_info(f"present.0.{kind}", TensorProto.FLOAT,
                                                     ["batch", 1, "total_seq", 4]))
    graph = helper.make_graph(nodes, "tiny_decoder", inputs, outputs, initializer=inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _reading_decoder(logits_last: bool):
    """A decoder that reads its present and its past outside attention (sums over the positions), the
    LM head with a bias; the outputs in the order logits, presents or presents, logits."""
    rng = np.random.default_rng(1)
    inits = [numpy_helper.from_array(rng.standard_normal((16, 4)).astype(np.float32), "E"),
             numpy_helper.from_array(rng.standard_normal((4, 16)).astype(np.float32), "W"),
             numpy_helper.from_array(rng.standard_normal(16).astype(np.float32), "B"),
             numpy_helper.from_array(np.array([1], np.int64), "axis1"),
             numpy_helper.from_array(np.array([2], np.int64), "axis2"),
             numpy_helper.from_array(np.array(0.5, np.float32), "half")]
    inputs = [helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "seq"]),
              helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["batch", "total_seq"])]
    inputs += [helper.make_tensor_value_info(f"past_key_values.0.{kind}", TensorProto.FLOAT,
                                             ["batch", 1, "past_seq", 4]) for kind in ("key", "value")]
    nodes = [helper.make_node("Gather", ["E", "input_ids"], ["emb"]),
             helper.make_node("Unsqueeze", ["emb", "axis1"], ["new_k"]),
             helper.make_node("Mul", ["new_k", "half"], ["new_v"]),
             helper.make_node("Concat", ["past_key_values.0.key", "new_k"], ["present.0.key"], axis=2),
             helper.make_node("Concat", ["past_key_values.0.value", "new_v"], ["present.0.value"], axis=2),
             helper.make_node("ReduceSum", ["present.0.key", "axis2"], ["pooled"], keepdims=0),
             helper.make_node("ReduceSum", ["past_key_values.0.value", "axis2"], ["past_sum"], keepdims=0),
             helper.make_node("Add", ["emb", "pooled"], ["h0"]),
             helper.make_node("Add", ["h0", "past_sum"], ["h"]),
             helper.make_node("MatMul", ["h", "W"], ["hw"]),
             helper.make_node("Add", ["hw", "B"], ["logits"])]
    logits = [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", "seq", 16])]
    presents = [helper.make_tensor_value_info(f"present.0.{kind}", TensorProto.FLOAT, ["batch", 1, "total_seq", 4])
                for kind in ("key", "value")]
    graph = helper.make_graph(nodes, "reading_decoder", inputs, presents + logits if logits_last else
                              logits + presents, initializer=inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.mark.parametrize(("logits_last", "backend"), [(False, "c"), (True, "c"), (True, "llvm")])
def test_step_of_a_decoder_reading_its_cache(logits_last, backend, tmp_path):
    """A present (and a past) read outside attention: the step reads the state's valid positions, after
    its new ones are written; its logits are ORT's at every step up to the bound."""
    model = _reading_decoder(logits_last)
    mod = from_onnx(model, max_context=16)
    assert step_reason(mod) is None
    calls = {b.var: b.value for block in mod["step"].body.blocks for b in block.bindings if isinstance(b.value, Call)}
    appended = {v for v, c in calls.items() if c.op.name == "kv_append"}
    states = set(mod["step"].params[2:])
    readers = sorted(c.op.name for c in calls.values() for a in c.args if a in appended or a in states)
    assert readers == ["kv_append", "kv_append", "strided_slice", "strided_slice"], readers  # present, past
    art = rxe.build(mod, board="host", backend=backend, out_dir=tmp_path / "art", name="reading", quiet=True,
                    profile=False)
    step = rxe.connect("host").load(art, function="step")
    import onnxruntime as ort
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    k = 2 if logits_last else 0
    states = [np.full((1, 1, 16, 4), SENTINEL, np.float32) for _ in range(2)]
    pasts = [np.zeros((1, 1, 0, 4), np.float32)] * 2
    past = 0
    for tokens in ([3, 1, 4, 1, 5], [9], [2, 6], [5], [3] * 7):
        feeds = {"input_ids": np.array([tokens], np.int64),
                 "attention_mask": np.ones((1, past + len(tokens)), np.int64),
                 "past_key_values.0.key": pasts[0], "past_key_values.0.value": pasts[1]}
        want = sess.run(None, feeds)
        (got,) = step.run(feeds["input_ids"], feeds["attention_mask"], *states)
        assert_logits(got, want[k][:, -1:], f"after {past} positions, {tokens}")
        pasts = [want[1], want[2]] if k == 0 else [want[0], want[1]]
        past += len(tokens)
        for s, p in zip(states, pasts):
            np.testing.assert_allclose(s[:, :, :past], p, rtol=1e-6, atol=1e-6)
    assert past == 16
    step.close()


@pytest.mark.parametrize("order", [("attention_mask", "input_ids"), ("position_ids", "attention_mask", "input_ids")])
def test_step_inputs_in_the_contract_order(order, tmp_path):
    """An export whose token inputs come in another order: the step's are input_ids, attention_mask,
    position_ids, then the states, and it compiles and runs."""
    model = _tiny_decoder(with_mask=True, position_ids="position_ids" in order)
    inputs = {i.name: i for i in model.graph.input}
    reordered = [inputs[n] for n in order] + [i for i in model.graph.input if i.name not in order]
    del model.graph.input[:]
    model.graph.input.extend(reordered)
    mod = from_onnx(model, max_context=16)
    contract = [n for n in TOKEN_INPUTS if n in order] + ["state_0", "state_1"]
    assert [p.name for p in mod["step"].params] == contract
    art = rxe.build(mod, board="host", backend="c", out_dir=tmp_path / "art", name="ordered", quiet=True, profile=False)
    step = rxe.connect("host").load(art, function="step")
    emb, w = (numpy_helper.to_array(t) for t in model.graph.initializer[:2])
    states = [np.zeros((1, 1, 16, 4), np.float32) for _ in range(2)]
    (logits,) = step.run(*token_inputs(contract, [4, 2, 7], 0), *states)
    np.testing.assert_allclose(logits, (emb[7] @ w).reshape(1, 1, 16), rtol=1e-5, atol=1e-5)
    step.close()


def test_decoder_without_attention_mask_gets_no_step():
    mod = from_onnx(_tiny_decoder(with_mask=False), max_context=16)
    assert len(kv_pairs(mod)) == 2 and "step" not in mod.functions
    assert step_reason(mod) == ("generation needs the inputs input_ids (batch, seq) and attention_mask "
                                "(batch, total_seq)")
    # the same graph with an attention_mask does get one: the mask is what was missing
    with_mask = from_onnx(_tiny_decoder(with_mask=True), max_context=16)
    assert step_reason(with_mask) is None
    assert [p.name for p in with_mask["step"].params] == ["input_ids", "attention_mask", "state_0", "state_1"]


@pytest.mark.parametrize("runner", ["interpreted", "compiled"])
def test_tiny_step_without_attention_writes_the_state(runner, tmp_path):
    """The hand-made decoder (presents only returned, no attention, no position_ids): each call writes
    the embeddings of its tokens at [past, total_seq), the logits are the last token's."""
    model = _tiny_decoder(with_mask=True)
    emb, w = (numpy_helper.to_array(t) for t in model.graph.initializer[:2])
    mod = from_onnx(model, max_context=16)
    if runner == "compiled":
        art = rxe.build(mod, board="host", backend="c", out_dir=tmp_path / "art", name="tiny", quiet=True,
                        profile=False)
        assert art.state_bytes == 2 * 16 * 4 * 4
        run = rxe.connect("host").load(art, function="step").run
    else:
        def run(*inputs):
            return [rxe.interpret(mod, *inputs, func="step")]
    states = [np.full((1, 1, 16, 4), SENTINEL, np.float32) for _ in range(2)]
    ids, past = [], 0
    for tokens in ([3, 1, 4, 1, 5], [9], [2, 6], [5]):
        (logits,) = run(np.array([tokens], np.int64), np.ones((1, past + len(tokens)), np.int64), *states)
        ids += tokens
        past += len(tokens)
        np.testing.assert_allclose(logits, (emb[tokens[-1]] @ w).reshape(1, 1, 16), rtol=1e-5, atol=1e-5)
        for s in states:
            np.testing.assert_array_equal(s[0, 0, :past], emb[ids])
            assert (s[:, :, past:] == SENTINEL).all()


def test_state_bytes_round_each_state_up_to_64(tmp_path):
    """max_context 5, (1, 1, 5, 4) floats: 80 bytes a state, 128 rounded, as rxe_decoder_init lays them out."""
    art = rxe.build(from_onnx(_tiny_decoder(with_mask=True), max_context=5), board="host", backend="c",
                    out_dir=tmp_path / "art", name="tiny", quiet=True, profile=False)
    assert art.decoder["states"] == [[1, 1, 5, 4]] * 2
    assert art.state_bytes == 2 * 128
    assert re.search(r"^#define TINY_STATE_BYTES 256u$", art.header.read_text(), re.M)
    assert re.search(r"^#define TINY_MAX_CONTEXT 5$", art.header.read_text(), re.M)


def test_unbounded_decoder_and_model_without_cache_get_no_step(tmp_path):
    path, _ = get_llm("gpt2")
    unbounded = from_onnx(path)
    assert kv_pairs(unbounded) and "step" not in unbounded.functions
    assert "the context is unbounded" in step_reason(unbounded)
    assert "max_context" in step_reason(unbounded)
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 4])
    plain = helper.make_model(helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "plain", [x], [y]),
                              opset_imports=[helper.make_opsetid("", 17)])
    mod = from_onnx(plain)
    assert list(mod.functions) == ["main"]
    assert step_reason(mod) == "the model has no KV cache (no past/present pairs were found)"
    art = rxe.build(mod, board="host", backend="c", out_dir=tmp_path / "art", name="plain", quiet=True, profile=False)
    assert art.state_bytes is None and art.decoder is None
    assert "STATE_BYTES" not in art.header.read_text()
