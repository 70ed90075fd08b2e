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


def _assert_clean(m, validation: bool) -> None:
    count, first = m.validation_messages()
    if validation:
        assert count == 0, first


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
        _assert_clean(m, vulkan_env)


def test_mlp_wrong_input_shape_is_named(mlp_artifact, vulkan_env):
    _, art = mlp_artifact
    with rxe.connect("host-vulkan") as dev:
        m = dev.load(art)
        with pytest.raises(RuntimeCheckError, match="input x dimension 1 is 5, but it must be 784"):
            m.run(np.zeros((3, 5), "float32"))
        x = np.ones((2, 784), "float32")   # the module still runs after the refused call
        np.testing.assert_allclose(m.run(x)[0], _mlp_reference(mlp_artifact[0], x), rtol=1e-5, atol=1e-6)
        _assert_clean(m, vulkan_env)


def test_mlp_benchmark_through_the_server(mlp_artifact, vulkan_env):
    _, art = mlp_artifact
    with rxe.connect("host-vulkan") as dev:
        m = dev.load(art)
        stats = m.benchmark(np.ones((4, 784), "float32"), warmup=1, repeat=2)
        assert stats["repeat"] == 2 and len(stats["samples_ms"]) == 2 and min(stats["samples_ms"]) > 0
        with pytest.raises(rxe.RelaxEdgeError, match="profile.*Vulkan"):
            m.profile(np.ones((4, 784), "float32"))


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
        _assert_clean(m, vulkan_env)


def test_serial_loop_past_the_lavapipe_limit_is_refused(vulkan_env, tmp_path):
    # one invocation sums 560,000 products in a loop of 70,000 steps of 8 (the schedule's split):
    # lavapipe stops a loop after 65,535 iterations without an error
    k = 560_000
    x = Var("x", TensorType((1, k), "float32"))
    bb = Builder()
    with bb.function("main", [x]):
        with bb.dataflow():
            out = bb.emit_output(op.matmul(x, np.ones((k, 1), "float32")))
        bb.ret(out)
    with pytest.raises(CodegenError, match=r"serial loop \(k_o\) may run 70000 iterations"):
        rxe.build(bb.get(), board="host-vulkan", backend="vulkan", out_dir=tmp_path)


def test_vulkan_backend_needs_a_vulkan_board(tmp_path):
    with pytest.raises(BuildError, match="board host has no vulkan: section"):
        rxe.build(build_mlp(mlp_weights()), board="host", backend="vulkan", out_dir=tmp_path)
