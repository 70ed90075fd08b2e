"""rxe.build(backend="vulkan") on the host-vulkan board (lavapipe): whole
models through the GLSL emitter, SPIR-V embedded in the artifact, and the
Vulkan runtime in process, against numpy references, with the validation
layer on (when installed) and zero messages."""

from __future__ import annotations

import numpy as np
import pytest

import relax_edge as rxe
from relax_edge import op
from relax_edge.build import BuildError
from relax_edge.codegen.host_program import CodegenError
from relax_edge.deploy.session import RuntimeCheckError
from relax_edge.ir import Builder, SizeVar, TensorType, Var
from tests.models import build_mlp, mlp_weights
from tests.vulkan import vkrt


@pytest.fixture(scope="module")
def vulkan_env(monkeypatch_module):
    reason = vkrt.unavailable()
    if reason is not None:
        pytest.skip(reason)
    if vkrt.validation_installed():
        monkeypatch_module.setenv("RXE_VK_VALIDATION", "1")
    return vkrt.validation_installed()


@pytest.fixture(scope="module")
def monkeypatch_module():
    with pytest.MonkeyPatch.context() as mp:
        yield mp


def _softmax(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def _mlp_reference(w, x):
    h = np.maximum(x @ w[0] + w[1], 0)
    h = np.maximum(h @ w[2] + w[3], 0)
    return _softmax(h @ w[4] + w[5])


@pytest.fixture(scope="module")
def mlp_artifact(vulkan_env, tmp_path_factory):
    w = mlp_weights()
    art = rxe.build(build_mlp(w, SizeVar("n", upper=4096)), board="host-vulkan", backend="vulkan",
                    out_dir=tmp_path_factory.mktemp("vk_mlp"))
    return w, art


def test_mlp_matches_numpy_at_several_batches_from_one_build(mlp_artifact, vulkan_env):
    w, art = mlp_artifact
    assert art.backend == "vulkan"
    with rxe.connect("host-vulkan") as dev:
        m = dev.load(art)
        created = m.pipelines_created()
        assert created > 0
        for n in (1, 7, 65, 300):   # 65 and 300: rows that do not divide the workgroup size
            x = np.random.default_rng(n).standard_normal((n, 784)).astype("float32")
            (y,) = m.run(x)
            np.testing.assert_allclose(y, _mlp_reference(w, x), rtol=1e-5, atol=1e-6)
        assert m.pipelines_created() == created   # every pipeline was made at load
        vkrt.assert_clean(m, vulkan_env)


def test_mlp_wrong_input_shape_is_named(mlp_artifact, vulkan_env):
    _, art = mlp_artifact
    with rxe.connect("host-vulkan") as dev:
        m = dev.load(art)
        with pytest.raises(RuntimeCheckError, match="input x dimension 1 is 5, but it must be 784"):
            m.run(np.zeros((3, 5), "float32"))
        x = np.ones((2, 784), "float32")   # the module still runs after the refused call
        np.testing.assert_allclose(m.run(x)[0], _mlp_reference(mlp_artifact[0], x), rtol=1e-5, atol=1e-6)
        vkrt.assert_clean(m, vulkan_env)


def test_mlp_benchmark_through_the_server(mlp_artifact, vulkan_env):
    _, art = mlp_artifact
    with rxe.connect("host-vulkan") as dev:
        m = dev.load(art)
        stats = m.benchmark(np.ones((4, 784), "float32"), warmup=1, repeat=2)
        assert stats["repeat"] == 2 and len(stats["samples_ms"]) == 2 and min(stats["samples_ms"]) > 0

def test_mlp_profile_has_a_gpu_time_per_kernel(mlp_artifact, vulkan_env):
    _, art = mlp_artifact
    with rxe.connect("host-vulkan") as dev:
        m = dev.load(art)
        prof = m.profile(np.ones((4, 784), "float32"))
        kernels = {r["kernel"] for r in prof["rows"]}
        assert kernels == {k for k, _ in _dispatch_rows(art)} and len(kernels) >= 3
        assert all(r["calls"] >= 1 and r["total_ms"] >= 0 for r in prof["rows"])
        assert prof["kernels_ms"] > 0
        vkrt.assert_clean(m, vulkan_env)


def _dispatch_rows(art):
    """(kernel, node) pairs read from the generated C's row table, independently of the loader."""
    import re
    text = (art.out_dir / f"{art.prefix}.c").read_text()
    table = text.split(f"{art.prefix}_main_vk_rows[] = {{", 1)[1].split("NULL};", 1)[0]
    names = re.findall(r'"([^"]*)"', table)
    return list(zip(names[0::2], names[1::2]))


def _norm_chain(cols: int):
    """sigmoid, tanh, exp, multiply, add, then layer norm and softmax over a symbolic row count."""
    rng = np.random.default_rng(3)
    gamma = rng.standard_normal(cols).astype("float32")
    beta = rng.standard_normal(cols).astype("float32")
    n = SizeVar("n", upper=1 << 16)
    x = Var("x", TensorType((n, cols), "float32"))
    bb = Builder()
    with bb.function("main", [x]):
        with bb.dataflow():
            a = bb.emit(op.multiply(op.sigmoid(x), op.tanh(x)))
            b = bb.emit(op.add(a, op.exp(op.multiply(x, np.float32(-0.5)))))
            c = bb.emit(op.layer_norm(b, gamma, beta))
            out = bb.emit_output(op.softmax(c, axis=-1))
        bb.ret(out)

    def reference(xv):
        xv = xv.astype(np.float64)
        bv = 1 / (1 + np.exp(-xv)) * np.tanh(xv) + np.exp(xv * -0.5)
        mean = bv.mean(-1, keepdims=True)
        var = ((bv - mean) ** 2).mean(-1, keepdims=True)
        return _softmax((bv - mean) / np.sqrt(var + 1e-5) * gamma + beta)

    return bb.get(), reference


def test_elementwise_layernorm_softmax_chain(vulkan_env, tmp_path):
    mod, reference = _norm_chain(33)
    art = rxe.build(mod, board="host-vulkan", backend="vulkan", out_dir=tmp_path)
    with rxe.connect("host-vulkan") as dev:
        m = dev.load(art)
        created = m.pipelines_created()
        for n in (1, 5, 130):
            x = np.random.default_rng(n).standard_normal((n, 33)).astype("float32")
            np.testing.assert_allclose(m.run(x)[0], reference(x), rtol=2e-5, atol=1e-6)
        assert m.pipelines_created() == created
        vkrt.assert_clean(m, vulkan_env)


def test_serial_loop_past_the_lavapipe_limit_is_refused(vulkan_env, tmp_path):
    # one invocation sums 560,000 products in one loop (the Vulkan build schedules no vector split):
    # lavapipe stops a loop after 65,535 iterations without an error
    k = 560_000
    x = Var("x", TensorType((1, k), "float32"))
    bb = Builder()
    with bb.function("main", [x]):
        with bb.dataflow():
            out = bb.emit_output(op.matmul(x, np.ones((k, 1), "float32")))
        bb.ret(out)
    with pytest.raises(CodegenError, match=r"serial loop \(k\) may run 560000 iterations"):
        rxe.build(bb.get(), board="host-vulkan", backend="vulkan", out_dir=tmp_path)


def test_vulkan_backend_needs_a_vulkan_board(tmp_path):
    with pytest.raises(BuildError, match="board host has no vulkan: section"):
        rxe.build(build_mlp(mlp_weights()), board="host", backend="vulkan", out_dir=tmp_path)


def _encoder(hidden=64, heads=4, ffn=128, max_seq=128):
    """A BERT-like encoder layer over a symbolic sequence: self-attention
    (4 heads), residual + layer norm, a tanh-GELU feed-forward, residual +
    layer norm; its float32 embeddings are the input."""
    rng = np.random.default_rng(7)

    def weight(*shape):
        return (rng.standard_normal(shape) / np.sqrt(shape[0])).astype("float32")

    wq, wk, wv, wo = (weight(hidden, hidden) for _ in range(4))
    bq, bk, bv, bo = (weight(hidden) * 0.1 for _ in range(4))
    w1, b1, w2, b2 = weight(hidden, ffn), weight(ffn) * 0.1, weight(ffn, hidden), weight(hidden) * 0.1
    g1, g2 = (1 + 0.1 * rng.standard_normal(hidden)).astype("float32"), np.ones(hidden, "float32")
    e1, e2 = (0.1 * rng.standard_normal(hidden)).astype("float32"), np.zeros(hidden, "float32")
    dh = hidden // heads
    seq = SizeVar("seq", lower=1, upper=max_seq)
    x = Var("x", TensorType((1, seq, hidden), "float32"))
    bb = Builder()

    def heads_of(t):
        return op.transpose(op.reshape(t, (1, seq, heads, dh)), (0, 2, 1, 3))

    with bb.function("main", [x]):
        with bb.dataflow():
            q = bb.emit(heads_of(op.add(op.matmul(x, wq), bq)))
            k = bb.emit(op.transpose(op.reshape(op.add(op.matmul(x, wk), bk), (1, seq, heads, dh)), (0, 2, 3, 1)))
            v = bb.emit(heads_of(op.add(op.matmul(x, wv), bv)))
            scores = bb.emit(op.multiply(op.matmul(q, k), np.float32(1 / np.sqrt(dh))))
            ctx = bb.emit(op.matmul(op.softmax(scores, axis=-1), v))
            merged = bb.emit(op.reshape(op.transpose(ctx, (0, 2, 1, 3)), (1, seq, hidden)))
            h = bb.emit(op.layer_norm(op.add(x, op.add(op.matmul(merged, wo), bo)), g1, e1))
            u = bb.emit(op.add(op.matmul(h, w1), b1))
            inner = op.multiply(op.add(u, op.multiply(op.multiply(op.multiply(u, u), u), np.float32(0.044715))),
                                np.float32(0.7978845608))
            act = bb.emit(op.multiply(op.multiply(u, np.float32(0.5)), op.add(op.tanh(inner), np.float32(1))))
            out = bb.emit_output(op.layer_norm(op.add(h, op.add(op.matmul(act, w2), b2)), g2, e2))
        bb.ret(out)

    def layer_norm(t, g, b):
        mean = t.mean(-1, keepdims=True)
        return (t - mean) / np.sqrt(((t - mean) ** 2).mean(-1, keepdims=True) + 1e-5) * g + b

    def reference(xv):
        xv = xv.astype(np.float64)
        s = xv.shape[1]

        def split(t):
            return t.reshape(1, s, heads, dh).transpose(0, 2, 1, 3)

        q, k, v = split(xv @ wq + bq), split(xv @ wk + bk), split(xv @ wv + bv)
        ctx = _softmax(q @ k.transpose(0, 1, 3, 2) / np.sqrt(dh)) @ v
        h = layer_norm(xv + ctx.transpose(0, 2, 1, 3).reshape(1, s, hidden) @ wo + bo, g1, e1)
        u = h @ w1 + b1
        act = 0.5 * u * (1 + np.tanh(0.7978845608 * (u + 0.044715 * u ** 3)))
        return layer_norm(h + act @ w2 + b2, g2, e2)

    return bb.get(), reference


def test_encoder_at_seq_1_7_64_from_one_build(vulkan_env, tmp_path):
    mod, reference = _encoder()
    art = rxe.build(mod, board="host-vulkan", backend="vulkan", out_dir=tmp_path)
    with rxe.connect("host-vulkan") as dev:
        m = dev.load(art)
        created = m.pipelines_created()
        for seq in (1, 7, 64):
            x = np.random.default_rng(seq).standard_normal((1, seq, 64)).astype("float32")
            np.testing.assert_allclose(m.run(x)[0], reference(x), rtol=1e-4, atol=2e-5)
        assert m.pipelines_created() == created   # one set of shaders for every sequence length
        with pytest.raises(RuntimeCheckError, match="seq"):
            m.run(np.zeros((1, 129, 64), "float32"))   # past the bound of seq
        vkrt.assert_clean(m, vulkan_env)


def _save_gemm_mlp(path):
    """Gemm (transB) + Relu + Gemm over a symbolic batch, as ONNX."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(11)
    inits = [numpy_helper.from_array(rng.standard_normal(s).astype("float32") / 4, name)
             for name, s in (("w1", (48, 20)), ("b1", (48,)), ("w2", (20, 48)), ("b2", (20,)))]
    graph = helper.make_graph(
        [helper.make_node("Gemm", ["x", "w1", "b1"], ["h"], transB=1), helper.make_node("Relu", ["h"], ["r"]),
         helper.make_node("Gemm", ["r", "w2", "b2"], ["y"], transB=1)], "gemm_mlp",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 20])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 20])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(model)
    onnx.save(model, str(path))


def test_cli_compile_backend_vulkan_gemm_mlp_matches_onnxruntime(vulkan_env, tmp_path, capsys):
    ort = pytest.importorskip("onnxruntime")
    from relax_edge.build import Artifact
    from relax_edge.cli import main
    model = tmp_path / "gemm_mlp.onnx"
    _save_gemm_mlp(model)
    out = tmp_path / "art"
    assert main(["compile", str(model), "--board", "host-vulkan", "--backend", "vulkan", "--dim", "n=1..512",
                 "-o", str(out)]) == 0
    assert "(vulkan)" in capsys.readouterr().out
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(str(model), options, providers=["CPUExecutionProvider"])
    with rxe.connect("host-vulkan") as dev:
        m = dev.load(Artifact.load(out))
        for n in (1, 3, 100):
            x = np.random.default_rng(n).standard_normal((n, 20)).astype("float32")
            np.testing.assert_allclose(m.run(x)[0], session.run(None, {"x": x})[0], rtol=1e-5, atol=1e-5)
        vkrt.assert_clean(m, vulkan_env)


def _onnx_module(name):
    import onnx

    from relax_edge.frontend import from_onnx
    from tests.onnx_models import get_model
    path, spec = get_model(name)
    model = onnx.load(str(path))
    bounds = {d.dim_param: (1, 128) for i in model.graph.input for d in i.type.tensor_type.shape.dim if d.dim_param}
    return path, spec, from_onnx(model, dim_bounds=bounds)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["mobilenet_v2", "resnet18"])
def test_vision_model_matches_onnxruntime(name, vulkan_env, tmp_path):
    ort = pytest.importorskip("onnxruntime")
    path, spec, mod = _onnx_module(name)
    art = rxe.build(mod, board="host-vulkan", backend="vulkan", out_dir=tmp_path)
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    feeds = spec["make_inputs"](seed=0)
    (want,) = session.run(None, feeds)
    with rxe.connect("host-vulkan") as dev:
        m = dev.load(art)
        (got,) = m.run(*feeds.values())
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())
        vkrt.assert_clean(m, vulkan_env)
