"""The Vulkan matmul shaders (codegen/vulkan/matmul.py) through rxe.build:
matmuls become the library call the Vulkan host dispatches with the tiled
shader (the GEMV when m = 1), checked against numpy at sizes that do and
do not fill a tile (8 rows x 512 columns; 512 for the GEMV), from one build over symbolic sizes, with the validation
layer on (when installed) and zero messages."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import relax_edge as rxe
from relax_edge import op
from relax_edge.codegen.vulkan import matmul
from relax_edge.ir import Builder, SizeVar, TensorType, Var
from relax_edge.transform.dispatch import dispatch
from tests.models import build_mlp, mlp_weights
from tests.vulkan import vkrt

SIZES = (1, 7, 63, 64, 65, 130, 257)


def _matmul_module(batched: bool):
    m, k, n = SizeVar("m", upper=512), SizeVar("k", upper=512), SizeVar("n", upper=2048)
    lead = (SizeVar("b", upper=8),) if batched else ()
    a = Var("a", TensorType((*lead, m, k), "float32"))
    b = Var("b", TensorType((*lead, k, n), "float32"))
    bb = Builder()
    with bb.function("main", [a, b]):
        with bb.dataflow():
            out = bb.emit_output(op.matmul(a, b))
        bb.ret(out)
    return bb.get()


@pytest.fixture(scope="module")
def matmul_artifact(vulkan_env, tmp_path_factory):
    return rxe.build(_matmul_module(False), board="host-vulkan", backend="vulkan",
                     out_dir=tmp_path_factory.mktemp("vk_matmul"), profile=False)


def test_the_build_dispatches_the_matmul_shaders(matmul_artifact):
    text = (matmul_artifact.out_dir / f"{matmul_artifact.prefix}.c").read_text()
    assert f'"{matmul.TILED}"' in text and f'"{matmul.GEMV}"' in text
    assert "rxe_lib_matmul_f32(" not in text   # no call into the CPU library


def test_tiled_and_gemv_match_numpy_at_every_size_from_one_build(matmul_artifact, vulkan_env):
    rng = np.random.default_rng(0)
    with rxe.connect("host-vulkan") as dev:
        mod = dev.load(matmul_artifact)
        created = mod.pipelines_created()
        for m, n, k in itertools.product(SIZES, SIZES, SIZES):
            if (m, n, k).count(257) + (m, n, k).count(130) > 2:   # keep the run short on lavapipe
                continue
            a = rng.standard_normal((m, k)).astype("float32")
            b = rng.standard_normal((k, n)).astype("float32")
            (c,) = mod.run(a, b)
            ref = a.astype(np.float64) @ b.astype(np.float64)
            np.testing.assert_allclose(c, ref, rtol=1e-4, atol=1e-4 * np.sqrt(k), err_msg=f"m={m} n={n} k={k}")
        assert mod.pipelines_created() == created
        vkrt.assert_clean(mod, vulkan_env)


def test_batched_matmul_matches_numpy(vulkan_env, tmp_path):
    art = rxe.build(_matmul_module(True), board="host-vulkan", backend="vulkan", out_dir=tmp_path, profile=False)
    rng = np.random.default_rng(1)
    with rxe.connect("host-vulkan") as dev:
        mod = dev.load(art)
        for bt, m, n, k in ((3, 1, 65, 130), (2, 65, 7, 63), (4, 64, 64, 64), (1, 130, 257, 7),
                              (2, 9, 1100, 5), (2, 1, 1100, 9)):   # n past one tile's 512 columns
            a = rng.standard_normal((bt, m, k)).astype("float32")
            b = rng.standard_normal((bt, k, n)).astype("float32")
            (c,) = mod.run(a, b)
            np.testing.assert_allclose(c, np.matmul(a.astype(np.float64), b), rtol=1e-4, atol=1e-4 * np.sqrt(k))
        vkrt.assert_clean(mod, vulkan_env)


def test_mlp_goes_through_the_tiled_shader(vulkan_env, tmp_path):
    w = mlp_weights()
    art = rxe.build(build_mlp(w, SizeVar("n", upper=4096)), board="host-vulkan", backend="vulkan", out_dir=tmp_path,
                    profile=False)
    text = (art.out_dir / f"{art.prefix}.c").read_text()
    assert text.count(f'"{matmul.MATMUL_SYMBOL}"') >= 3   # the three layers' dispatches name the call
    x = np.random.default_rng(2).standard_normal((65, 784)).astype("float32")
    h = np.maximum(x @ w[0] + w[1], 0)
    h = np.maximum(h @ w[2] + w[3], 0)
    z = h @ w[4] + w[5]
    e = np.exp(z - z.max(-1, keepdims=True))
    with rxe.connect("host-vulkan") as dev:
        mod = dev.load(art)
        np.testing.assert_allclose(mod.run(x)[0], e / e.sum(-1, keepdims=True), rtol=1e-5, atol=1e-6)
        vkrt.assert_clean(mod, vulkan_env)


def test_vulkan_dispatch_target_is_checked():
    mod = _matmul_module(False)
    with pytest.raises(ValueError, match="unknown dispatch target 'metal'"):
        dispatch(mod, ("matmul",), target="metal")
    with pytest.raises(ValueError, match=r"unknown kernel families \['dense'\] for target vulkan"):
        dispatch(mod, ("dense",), target="vulkan")


def test_vulkan_matmul_has_no_scratch_and_cpu_keeps_it():
    mod = _matmul_module(False)
    vk = dispatch(mod, ("matmul",), target="vulkan")
    cpu = dispatch(mod, ("matmul",))
    calls = [b.value for f in (vk, cpu) for blk in f.functions["main"].body.blocks for b in blk.bindings]
    assert [c.name for c in calls] == ["rxe_lib_matmul_f32"] * 2
    assert "scratch_bytes" not in calls[0].attrs and "scratch_bytes" in calls[1].attrs


def test_a_k_past_the_shader_limit_stays_a_tensor_program():
    x = Var("x", TensorType((1, 300_000), "float32"))
    bb = Builder()
    with bb.function("main", [x]):
        with bb.dataflow():
            out = bb.emit_output(op.matmul(x, np.ones((300_000, 2), "float32")))
        bb.ret(out)
    mod = dispatch(bb.get(), ("matmul",), target="vulkan", max_k=matmul.max_k(65535))
    (call,) = [b.value for blk in mod.functions["main"].body.blocks for b in blk.bindings]
    assert call.op.name == "matmul"
