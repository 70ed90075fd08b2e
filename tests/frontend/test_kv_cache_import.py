"""Import of KV-cache decoders as transformers exports them (M12, frontend/onnx/kv_cache.py).

The GPT-2, Llama and Qwen2 steps of tests/llm_models.py import without any
dim_bounds; their logits and presents match ONNX Runtime interpreted and
compiled (host, C) at context lengths 0, 1, 7 and at the bound from one
artifact, and a 32-token greedy loop feeding the presents back gives
PyTorch's greedy tokens. SmolLM2-135M-Instruct (from its GGUF) gives the
issue's reference text in transformers and its first greedy tokens compiled.
"""

import numpy as np
import pytest
from onnx import TensorProto, helper

import relax_edge as rxe
from relax_edge.frontend.onnx import OnnxImportError, from_onnx, kv_pairs
from tests.llm_models import (
    CONFIGS,
    MAX_CONTEXT,
    VOCAB,
    cache_shape,
    empty_cache,
    get_llm,
    greedy,
    step_feeds,
    torch_greedy,
)

# (past_len, seq): a prompt on an empty cache, one token after one, three after seven, the last position
CONTEXTS = [(0, 5), (1, 1), (7, 3), (MAX_CONTEXT - 1, 1)]
PROMPT = [3, 17, 42, 99, 5]


def _var(expr):
    var = expr.as_var()
    assert var is not None, f"{expr} is not one size variable"
    return var


@pytest.fixture(scope="module", params=list(CONFIGS))
def llm(request):
    path, model = get_llm(request.param)
    return request.param, path, model


def _ort(path):
    import onnxruntime as ort
    return ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])


def _close(got, want, what):
    assert len(got) == len(want)
    for i, (g, w) in enumerate(zip(got, want)):
        g = np.asarray(g)
        assert g.shape == w.shape, f"{what}: output {i} has shape {g.shape}, ORT {w.shape}"
        assert float(np.abs(w).max()) > 0, f"{what}: output {i} is all zeros"
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5, err_msg=f"{what}: output {i}")


def _contexts(model, seed=0):
    layers, kv_heads, head_dim = cache_shape(model)
    rng = np.random.default_rng(seed)
    for past_len, seq in CONTEXTS:
        past = [rng.standard_normal((1, kv_heads, past_len, head_dim), dtype=np.float32) for _ in range(2 * layers)]
        yield (past_len, seq), step_feeds(rng.integers(0, VOCAB, seq), past)


def test_pairs_found_without_dim_bounds(llm):
    name, path, model = llm
    mod = from_onnx(path)
    main = mod["main"]
    pairs = kv_pairs(mod)
    layers = cache_shape(model)[0]
    assert [(p.past, p.present, p.axis) for p in pairs] == [
        (f"past_key_values.{n}.{kind}", f"present.{n}.{kind}", 2) for n in range(layers) for kind in ("key", "value")]
    assert [p.param for p in pairs] == list(range(3, 3 + 2 * layers))
    assert [p.output for p in pairs] == list(range(1, 1 + 2 * layers))
    past = _var(main.params[3].type.shape[2])
    assert (past.lower, past.upper) == (0, None)
    assert main.attrs["max_context"] is None
    for p in pairs:
        assert main.params[p.param].type.shape[2].as_var() is past
        assert str(main.ret_type.fields[p.output].shape[2]) == "past_seq + seq"


def test_max_context_bounds_the_context(llm):
    _, path, _ = llm
    mod = from_onnx(path, max_context=MAX_CONTEXT)
    main = mod["main"]
    bounds = {v.name: (v.lower, v.upper) for v in (_var(main.params[0].type.shape[1]),
                                                   _var(main.params[1].type.shape[1]),
                                                   _var(main.params[3].type.shape[2]))}
    assert bounds == {"seq": (1, MAX_CONTEXT), "total_seq": (1, MAX_CONTEXT), "past_seq": (0, MAX_CONTEXT - 1)}
    assert main.attrs["max_context"] == MAX_CONTEXT
    same = from_onnx(path, dim_bounds={"seq": MAX_CONTEXT, "total_seq": MAX_CONTEXT,
                                       "past_seq": (0, MAX_CONTEXT - 1)})
    assert [str(p.type) for p in same["main"].params] == [str(p.type) for p in main.params]
    # a tighter prompt bound is allowed; one past the context is a conflict
    tight = from_onnx(path, max_context=MAX_CONTEXT, dim_bounds={"seq": 8})["main"]
    assert _var(tight.params[0].type.shape[1]).upper == 8
    with pytest.raises(OnnxImportError, match=r"dim_bounds\['total_seq'\] = 65 conflicts with max_context=64"):
        from_onnx(path, max_context=MAX_CONTEXT, dim_bounds={"total_seq": MAX_CONTEXT + 1})


def test_interpreted_matches_onnxruntime(llm):
    name, path, model = llm
    mod = from_onnx(path, max_context=MAX_CONTEXT)
    sess = _ort(path)
    for sizes, feeds in _contexts(model):
        _close(rxe.interpret(mod, *feeds.values()), sess.run(None, feeds), f"{name} interpreted at {sizes}")


@pytest.mark.slow
def test_compiled_matches_onnxruntime_and_pytorch_greedy(llm, tmp_path):
    """One host C artifact at every context length; 32 greedy tokens equal PyTorch's (and ORT's)."""
    name, path, model = llm
    art = rxe.build(from_onnx(path, max_context=MAX_CONTEXT), board="host", backend="c", out_dir=tmp_path / "art",
                    name="llm", quiet=True, profile=False)
    loaded = rxe.connect("host").load(art)
    sess = _ort(path)
    for sizes, feeds in _contexts(model, seed=1):
        _close(loaded.run(*feeds.values()), sess.run(None, feeds), f"{name} compiled at {sizes}")
    want = torch_greedy(model, PROMPT, 32)
    assert len(set(want)) > 4, f"{name}: PyTorch's greedy tokens {want} say little"
    assert greedy(lambda f: loaded.run(*f.values()), PROMPT, empty_cache(model), 32) == want
    assert greedy(lambda f: sess.run(None, f), PROMPT, empty_cache(model), 32) == want


@pytest.mark.slow
@pytest.mark.emu
def test_llama_on_qemu_aarch64(tmp_path):
    """The Llama step cross-compiled for qemu-aarch64: contexts 0 and at the bound, 8 greedy tokens."""
    path, model = get_llm("llama")
    art = rxe.build(from_onnx(path, max_context=MAX_CONTEXT), board="qemu-aarch64", backend="c",
                    out_dir=tmp_path / "art", name="llm", quiet=True, profile=False)
    loaded = rxe.connect("qemu-aarch64").load(art)
    sess = _ort(path)
    for sizes, feeds in list(_contexts(model, seed=2))[::3]:
        _close(loaded.run(*feeds.values()), sess.run(None, feeds), f"llama on qemu-aarch64 at {sizes}")
    assert greedy(lambda f: loaded.run(*f.values()), PROMPT, empty_cache(model), 8) == torch_greedy(model, PROMPT, 8)


def test_interpreted_greedy_matches_pytorch():
    path, model = get_llm("llama")
    mod = from_onnx(path, max_context=MAX_CONTEXT)
    want = torch_greedy(model, PROMPT, 32)
    assert greedy(lambda f: rxe.interpret(mod, *f.values()), PROMPT, empty_cache(model), 32) == want


def test_cli_import_passes_max_context(llm):
    from relax_edge import cli
    _, path, _ = llm
    mod, source = cli._import(str(path), {}, MAX_CONTEXT)
    assert source["max_context"] == MAX_CONTEXT and mod["main"].attrs["max_context"] == MAX_CONTEXT
    args = cli.build_parser().parse_args(["compile", str(path), "--max-context", "32"])
    assert args.max_context == 32


# hand-made caches: what is refused -------------------------------------------------------
def _cache_model(past="past_key_values.0.key", present="present.0.key", concat_axis=2, past_shape=None,
                 identity=False):
    past_shape = past_shape or ["batch", 2, "past_seq", 4]
    new = helper.make_tensor_value_info("new", TensorProto.FLOAT, ["batch", 2, "seq", 4])
    p = helper.make_tensor_value_info(past, TensorProto.FLOAT, past_shape)
    q = helper.make_tensor_value_info(present, TensorProto.FLOAT, None)
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    nodes = [helper.make_node("Identity", [past], [present]) if identity
             else helper.make_node("Concat", [past, "new"], [present], axis=concat_axis),
             helper.make_node("Relu", ["new"], ["y"])]
    graph = helper.make_graph(nodes, "cache", [new, p], [y, q])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_hand_made_cache_found_and_run():
    mod = from_onnx(_cache_model())
    (pair,) = kv_pairs(mod)
    assert (pair.past, pair.present, pair.axis, pair.param, pair.output) == \
        ("past_key_values.0.key", "present.0.key", 2, 1, 1)
    new = np.arange(16, dtype=np.float32).reshape(1, 2, 2, 4)
    y, present = rxe.interpret(mod, new, np.zeros((1, 2, 0, 4), np.float32))
    np.testing.assert_array_equal(np.asarray(present), new)


def test_named_pairs_when_the_names_differ():
    mod = from_onnx(_cache_model("cache_in", "cache_out"), kv_cache={"cache_in": "cache_out"}, max_context=16)
    assert [(p.past, p.present) for p in kv_pairs(mod)] == [("cache_in", "cache_out")]
    past = _var(mod["main"].params[1].type.shape[2])
    assert (past.lower, past.upper) == (0, 15)
    # without kv_cache, "cache_in" is no cache: its dim keeps lower bound 1
    assert kv_pairs(from_onnx(_cache_model("cache_in", "cache_out"))) == ()
    assert _var(from_onnx(_cache_model(), kv_cache={})["main"].params[1].type.shape[2]).lower == 1


@pytest.mark.parametrize(("kwargs", "kv", "message"), [
    ({}, {"nope": "present.0.key"}, r"kv_cache: 'nope' is not a graph input of the model"),
    ({}, {"past_key_values.0.key": "nope"}, r"kv_cache: 'nope' \(the present of past_key_values.0.key\) is not a "
                                            r"graph output"),
    ({}, {"past_key_values.0.key": "y"}, r"kv_cache: y \(present of past_key_values.0.key\) has seq positions on "
                                         r"axis 2, the past past_seq; the present must be the past grown"),
    ({"present": "out"}, None, r"input past_key_values.0.key looks like a KV cache but the model has no output "
                               r"present.0.key"),
    ({"concat_axis": 3}, None, r"it must be past's shape \[batch, 2, past_seq, 4\] with only axis 2 grown "
                               r"\(axis 3 differs\)"),
    ({"identity": True}, None, r"has past_seq positions on axis 2, the past past_seq; the present must be the "
                               r"past grown"),
    ({"past_shape": ["batch", 2, 3, 4]}, None, r"input past_key_values.0.key has a fixed size 3 on its sequence "
                                               r"axis 2"),
    ({}, ["past_key_values.0.key"], r"kv_cache must be a dict"),
])
def test_bad_pairs_are_named(kwargs, kv, message):
    with pytest.raises(OnnxImportError, match=message):
        from_onnx(_cache_model(**kwargs), kv_cache=kv)


@pytest.mark.parametrize("bad", [0, -3, 2.5, True])
def test_bad_max_context(bad):
    with pytest.raises(OnnxImportError, match="max_context must be a positive int"):
        from_onnx(_cache_model(), max_context=bad)


# SmolLM2-135M-Instruct: tests/deploy/test_smollm2.py (its compiled main and generate)


def test_an_onnx_model_is_unchanged_without_cache():
    model = _cache_model("a", "b")
    assert "kv_cache" not in from_onnx(model)["main"].attrs
