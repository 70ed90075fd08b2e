"""The KV-cache shaders (codegen/vulkan/kv.py) through small compiled
functions on lavapipe, all in one module built once: kv_attention against
tests/library/test_kv_kernels.py's float64 definition (heads / KV heads
9/3, 4/2 and 1/1; head_dim 17, 16 and 64; masks per row, per head, one row
for all, one row per head with -3.4e38 entries, and none; seq 1, 3 and 7;
kv_len 1, 5 and the context bound), a NaN query giving NaN rows, and
kv_append writing the caller's state in place (the input read back after
the run) with the bound an RXE_ERR_BOUND. The validation layer (when
installed) reports nothing."""

from __future__ import annotations

import numpy as np
import pytest

import relax_edge as rxe
from relax_edge.ir import Builder, SizeVar, TensorType, Var
from relax_edge.op import make_call
from tests.library.test_kv_kernels import MASKED, SENTINEL, attention_f64
from tests.vulkan import test_vk_build as vk_build
from tests.vulkan import vkrt

monkeypatch_module = vk_build.monkeypatch_module
vulkan_env = vk_build.vulkan_env

CONTEXT = 32
ATTENTION = {"attn_9_3_17_rows": (9, 3, 17, "rows"), "attn_4_2_16_heads": (4, 2, 16, "heads"),
             "attn_4_2_16_one": (4, 2, 16, "one"), "attn_4_2_64_heads_one": (4, 2, 64, "heads_one"),
             "attn_1_1_16_none": (1, 1, 16, None)}


def _attention(b, name, heads, kv_heads, dim, mask):
    seq, kv_len = SizeVar("seq", upper=CONTEXT), SizeVar("kv_len", upper=CONTEXT)
    q = Var("q", TensorType((1, heads, seq, dim), "float32"))
    k = Var("k", TensorType((1, kv_heads, CONTEXT, dim), "float32"))
    v = Var("v", TensorType((1, kv_heads, CONTEXT, dim), "float32"))
    if mask is None:   # kv_len from an int64 input of kv_len elements
        extra = Var("lens", TensorType((kv_len,), "int64"))
    else:
        mh = heads if mask.startswith("heads") else 1
        extra = Var("mask", TensorType((1, mh, 1 if mask.endswith("one") else seq, kv_len), "float32"))
    with b.function(name, [q, k, v, extra], {"entry": True}):
        args = [q, k, v] + ([extra] if mask is not None else [])
        b.ret(b.emit(make_call("kv_attention", args, {"kv_len": kv_len, "scale": 1.0 / np.sqrt(dim)})))


def _append(b, name, kv_heads, dim):
    """kv_append at [total - seq, total) of the caller's state, then attention of `new` over it."""
    seq, total = SizeVar("seq", upper=CONTEXT), SizeVar("total", upper=CONTEXT)
    state = Var("state", TensorType((1, kv_heads, CONTEXT, dim), "float32"))
    new = Var("new", TensorType((1, kv_heads, seq, dim), "float32"))
    positions = Var("positions", TensorType((total,), "int64"))
    with b.function(name, [state, new, positions], {"entry": True}):
        appended = b.emit(make_call("kv_append", [state, new], {"offset": total - seq}))
        b.ret(b.emit(make_call("kv_attention", [new, appended, appended], {"kv_len": total, "scale": 0.5})))


@pytest.fixture(scope="module")
def kv_art(vulkan_env, tmp_path_factory):
    b = Builder()
    for name, spec in ATTENTION.items():
        _attention(b, name, *spec)
    _append(b, "append_3_17", 3, 17)
    _attention(b, "main", 1, 1, 16, "rows")
    return rxe.build(b.get(), board="host-vulkan", backend="vulkan", out_dir=tmp_path_factory.mktemp("vk_kv"),
                     name="kv", profile=False)


def _mask(rng, heads, seq, kv_len, kind):
    mh = heads if kind.startswith("heads") else 1
    m = rng.standard_normal((1, mh, 1 if kind.endswith("one") else seq, kv_len)).astype(np.float32)
    m[rng.random(m.shape) < 0.4] = MASKED
    m[..., rng.integers(0, kv_len)] = rng.standard_normal()   # a column open in every row
    return m


def test_kv_attention_shader_matches_the_definition(kv_art, vulkan_env):
    rng = np.random.default_rng(5)
    with rxe.connect("host-vulkan") as dev:
        for name, (heads, kv_heads, dim, kind) in ATTENTION.items():
            m = dev.load(kv_art, function=name)
            created = m.pipelines_created()
            for seq in (1, 3, 7):
                for kv_len in (1, 5, CONTEXT):
                    q = rng.standard_normal((1, heads, seq, dim)).astype(np.float32)
                    k, v = (rng.standard_normal((1, kv_heads, CONTEXT, dim)).astype(np.float32) for _ in range(2))
                    k[:, :, kv_len:] = v[:, :, kv_len:] = np.nan   # positions past kv_len are never read
                    mask = None if kind is None else _mask(rng, heads, seq, kv_len, kind)
                    extra = np.zeros(kv_len, np.int64) if kind is None else mask
                    (got,) = m.run(q, k, v, extra)
                    want = attention_f64(q, k, v, mask, kv_len, 1.0 / np.sqrt(dim))
                    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5, err_msg=f"{name} seq {seq} "
                                                                                          f"kv_len {kv_len}")
            assert m.pipelines_created() == created
        m = dev.load(kv_art, function="attn_1_1_16_none")
        q = np.zeros((1, 1, 2, 16), np.float32)
        q[0, 0, 1, 3] = np.nan
        (got,) = m.run(q, *(rng.standard_normal((1, 1, CONTEXT, 16)).astype(np.float32) for _ in range(2)),
                       np.zeros(4, np.int64))
        assert np.isfinite(got[0, 0, 0]).all() and np.isnan(got[0, 0, 1]).all()
        vkrt.assert_clean(m, vulkan_env)


def test_kv_append_shader_writes_the_callers_state_in_place(kv_art, vulkan_env):
    rng = np.random.default_rng(7)
    state = np.full((1, 3, CONTEXT, 17), SENTINEL, np.float32)
    expected = state.copy()
    total = 0
    with rxe.connect("host-vulkan") as dev:
        m = dev.load(kv_art, function="append_3_17")
        for seq in (7, 1, 3, CONTEXT - 11):   # ends at the bound
            new = rng.standard_normal((1, 3, seq, 17)).astype(np.float32)
            past, total = total, total + seq
            (got,) = m.run(state, new, np.zeros(total, np.int64))
            expected[:, :, past:total] = new
            np.testing.assert_array_equal(state, expected, err_msg=f"[{past}, {total})")
            np.testing.assert_allclose(got, attention_f64(new, expected, expected, None, total, 0.5), rtol=1e-4,
                                       atol=1e-5)
        with pytest.raises(rxe.RuntimeCheckError, match="RXE_ERR_BOUND"):
            m.run(state, new[:, :, :2], np.zeros(CONTEXT + 1, np.int64))
        vkrt.assert_clean(m, vulkan_env)
