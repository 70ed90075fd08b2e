"""Whole transformer models through rxe.build(backend="vulkan") on lavapipe
against ONNX Runtime (graph optimizations off): BERT, whose token ids,
attention mask and index math are int64 and bool on the device, at several
sequence lengths from one build, with the validation layer on (when
installed) and zero messages; the same BERT exported in float16; GPT-2
without a cache. The decoders with the
KV cache are in test_vk_decoder.py."""

from __future__ import annotations

import numpy as np
import pytest

import relax_edge as rxe
from relax_edge.deploy.session import RuntimeCheckError
from tests.vulkan import test_vk_build as vk_build
from tests.vulkan import vkrt
from tests.vulkan.test_vk_build import _onnx_module

# the fixtures of test_vk_build.py: the Vulkan library found, the validation layer on when installed
monkeypatch_module = vk_build.monkeypatch_module
vulkan_env = vk_build.vulkan_env


def _session(path):
    ort = pytest.importorskip("onnxruntime")
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


def _feeds(rng, seq, vocab, mask_low):
    ids = rng.integers(0, vocab, (1, seq)).astype("int64")
    mask = np.ones((1, seq), dtype="int64")
    if mask_low == 0 and seq > 1:
        mask[0, seq // 2:] = 0   # padded tail
    return {"input_ids": ids, "attention_mask": mask}


@pytest.fixture(scope="module")
def bert(vulkan_env, tmp_path_factory):
    path, spec, mod = _onnx_module("bert")
    art = rxe.build(mod, board="host-vulkan", backend="vulkan", out_dir=tmp_path_factory.mktemp("vk_bert"))
    return path, spec, art


def _matches_onnxruntime(art, path, spec, masks, validation, seed):
    """Each output of `art` against ONNX Runtime at seq 1, 7 and 64, for each
    attention-mask kind in `masks` (1: all ones, 0: a padded tail)."""
    session = _session(path)
    vocab = spec["inputs"]["input_ids"]["range"][1]
    rng = np.random.default_rng(seed)
    with rxe.connect("host-vulkan") as dev:
        m = dev.load(art)
        for seq in (1, 7, 64):
            for mask_low in masks:
                feeds = _feeds(rng, seq, vocab, mask_low)
                want = session.run(None, feeds)
                got = m.run(*feeds.values())
                for g, w in zip(got, want):
                    np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5,
                                               err_msg=f"seq {seq}, mask {feeds['attention_mask'].tolist()}")
        vkrt.assert_clean(m, validation)


@pytest.mark.slow
def test_bert_at_seq_1_7_64_from_one_build(bert, vulkan_env):
    path, spec, art = bert
    _matches_onnxruntime(art, path, spec, (1, 0), vulkan_env, 0)


@pytest.mark.slow
def test_bert_token_id_outside_the_device_range_is_named(bert, vulkan_env):
    _, _, art = bert
    with rxe.connect("host-vulkan") as dev:
        m = dev.load(art)
        ids = np.array([[1, 2 ** 31 + 5, 3]], dtype="int64")   # not representable in the device's int64 range
        with pytest.raises(RuntimeCheckError, match="input_ids"):
            m.run(ids, np.ones((1, 3), dtype="int64"))


@pytest.mark.slow
def test_gpt2_without_a_cache_at_seq_1_7_64_from_one_build(vulkan_env, tmp_path):
    path, spec, mod = _onnx_module("gpt2")
    art = rxe.build(mod, board="host-vulkan", backend="vulkan", out_dir=tmp_path)
    _matches_onnxruntime(art, path, spec, (1,), vulkan_env, 1)


@pytest.mark.slow
def test_float16_bert_at_seq_1_7_64_from_one_build(vulkan_env, tmp_path):
    """BERT exported with float16 weights and activations (torch .half()): every tensor on the device is float16
    (packed two to a word, computed in float32, rounded where stored), outputs within 3 float16 ulps of the
    largest |reference| value of ONNX Runtime's float16 run, with a padded mask too."""
    path, spec, mod = _onnx_module("bert_fp16")
    art = rxe.build(mod, board="host-vulkan", backend="vulkan", out_dir=tmp_path, profile=False)
    session = _session(path)
    vocab = spec["inputs"]["input_ids"]["range"][1]
    rng = np.random.default_rng(3)
    with rxe.connect("host-vulkan") as dev:
        m = dev.load(art)
        for seq in (1, 7, 64):
            for mask_low in (1, 0):
                feeds = _feeds(rng, seq, vocab, mask_low)
                want = session.run(None, feeds)
                got = m.run(*feeds.values())
                for g, w in zip(got, want):
                    assert g.dtype == w.dtype == np.float16
                    w = w.astype(np.float32)
                    scale = float(np.abs(w).max())
                    np.testing.assert_allclose(g.astype(np.float32), w, rtol=0, atol=3 * 2.0 ** -10 * scale,
                                               err_msg=f"seq {seq}, mask {feeds['attention_mask'].tolist()}")
        vkrt.assert_clean(m, vulkan_env)


def _float64_mlp():
    """x (n x 32, float64) -> MatMul, Add, Relu, Sqrt, Div (inf and NaN where the root is 0), a ReduceMax and a
    Cast to float32: a graph in float64 throughout, as scikit-learn style exports are."""
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(0)
    nodes = [helper.make_node("MatMul", ["x", "W"], ["m"]), helper.make_node("Add", ["m", "B"], ["a"]),
             helper.make_node("Relu", ["a"], ["r"]), helper.make_node("Sqrt", ["r"], ["s"]),
             helper.make_node("Div", ["a", "s"], ["d"]),
             helper.make_node("ReduceMax", ["m"], ["mx"], keepdims=1, axes=[1]),
             helper.make_node("Cast", ["m"], ["m32"], to=TensorProto.FLOAT)]
    graph = helper.make_graph(
        nodes, "float64_mlp", [helper.make_tensor_value_info("x", TensorProto.DOUBLE, ["n", 32])],
        [helper.make_tensor_value_info("d", TensorProto.DOUBLE, ["n", 48]),
         helper.make_tensor_value_info("mx", TensorProto.DOUBLE, ["n", 1]),
         helper.make_tensor_value_info("m32", TensorProto.FLOAT, ["n", 48])],
        [numpy_helper.from_array(rng.standard_normal((32, 48)), "W"),
         numpy_helper.from_array(rng.standard_normal(48), "B")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_float64_graph_matches_onnxruntime(vulkan_env, tmp_path):
    """A float64 graph on the device (double arithmetic, shaderFloat64) at n = 1, 5 and 33 from one build against
    ONNX Runtime: within 1e-13 of the largest |reference| (the matmul's sums in another order), NaN where ORT's
    NaN is and infinities equal."""
    ort = pytest.importorskip("onnxruntime")
    model = _float64_mlp()
    art = rxe.build(rxe.from_onnx(model, dim_bounds={"n": 64}), board="host-vulkan", backend="vulkan",
                    out_dir=tmp_path, profile=False)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(1)
    with rxe.connect("host-vulkan") as dev:
        m = dev.load(art)
        for n in (1, 5, 33):
            x = rng.standard_normal((n, 32))
            for g, w in zip(m.run(x), session.run(None, {"x": x})):
                assert g.dtype == w.dtype and g.shape == w.shape
                finite = np.isfinite(w)
                np.testing.assert_array_equal(np.isnan(g), np.isnan(w), err_msg=f"n={n}")
                np.testing.assert_array_equal(g[np.isinf(w)], w[np.isinf(w)])
                np.testing.assert_allclose(g[finite], w[finite], rtol=0, atol=1e-13 * np.abs(w[finite]).max())
        vkrt.assert_clean(m, vulkan_env)
