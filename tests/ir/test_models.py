"""A 3-layer MLP with symbolic batch and a small CNN, built with the builder:
printed (golden text), verified, and interpreted at batch 1, 7 and 64 against
hand-written numpy computations."""

import os
import pathlib

import numpy as np
import pytest

import relax_edge as rxe
from relax_edge.ir import verify
from tests.models import build_cnn, build_mlp, cnn_weights, mlp_weights

GOLDEN = pathlib.Path(__file__).parent / "golden"


def check_golden(name: str, text: str) -> None:
    path = GOLDEN / name
    if os.environ.get("RXE_UPDATE_GOLDEN") == "1":
        path.write_text(text)
    assert path.exists(), f"golden file {path} is missing (run with RXE_UPDATE_GOLDEN=1 once)"
    assert text == path.read_text()


def numpy_mlp(x, weights):
    w1, b1, w2, b2, w3, b3 = (w.astype(np.float64) for w in weights)
    h = np.maximum(x @ w1 + b1, 0)
    h = np.maximum(h @ w2 + b2, 0)
    z = h @ w3 + b3
    z = np.exp(z - z.max(axis=1, keepdims=True))
    return z / z.sum(axis=1, keepdims=True)


def numpy_conv_nchw(x, w, stride=1, pad=0, groups=1):
    """Direct convolution by explicit loops over output pixels."""
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    oh = (h + 2 * pad - kh) // stride + 1
    ow = (wd + 2 * pad - kw) // stride + 1
    out = np.zeros((n, o, oh, ow))
    per_group = o // groups
    for oc in range(o):
        g = oc // per_group
        chans = slice(g * cg, (g + 1) * cg)
        for i in range(oh):
            for j in range(ow):
                patch = xp[:, chans, i * stride:i * stride + kh, j * stride:j * stride + kw]
                out[:, oc, i, j] = np.tensordot(patch, w[oc], axes=([1, 2, 3], [0, 1, 2]))
    return out


def numpy_cnn(x, w):
    w = {k: v.astype(np.float64) for k, v in w.items()}
    c1 = np.maximum(numpy_conv_nchw(x, w["c1"], pad=1) + w["b1"], 0)
    n, c, h, wd = c1.shape
    p1 = c1.reshape(n, c, h // 2, 2, wd // 2, 2).max(axis=(3, 5))
    dw = numpy_conv_nchw(p1, w["dw"], stride=2, pad=1, groups=8)
    c2 = np.tanh(numpy_conv_nchw(dw, w["c2"]))
    g = c2.mean(axis=(2, 3))
    return g @ w["fc"] + w["fcb"]


def test_mlp_prints_golden_and_verifies():
    mod = build_mlp(mlp_weights())
    verify(mod)
    check_golden("mlp.txt", str(mod))


def test_cnn_prints_golden_and_verifies():
    mod = build_cnn(cnn_weights())
    verify(mod)
    check_golden("cnn.txt", str(mod))


@pytest.mark.parametrize("batch", [1, 7, 64])
def test_mlp_interpreted_matches_numpy(batch):
    weights = mlp_weights()
    mod = build_mlp(weights)
    x = np.random.default_rng(batch).standard_normal((batch, 784)).astype("float32")
    out = rxe.interpret(mod, x)
    assert out.shape == (batch, 10) and out.dtype == np.float32
    np.testing.assert_allclose(out, numpy_mlp(x.astype(np.float64), weights), rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("batch", [1, 7, 64])
def test_cnn_interpreted_matches_numpy(batch):
    w = cnn_weights()
    mod = build_cnn(w)
    x = np.random.default_rng(batch).standard_normal((batch, 1, 16, 16)).astype("float32")
    out = rxe.interpret(mod, x)
    assert out.shape == (batch, 10)
    np.testing.assert_allclose(out, numpy_cnn(x.astype(np.float64), w), rtol=1e-4, atol=1e-5)


def test_one_module_serves_every_batch():
    """The same module object runs at each batch size (no re-build)."""
    weights = mlp_weights()
    mod = build_mlp(weights)
    for batch in (3, 1, 12):
        x = np.ones((batch, 784), np.float32)
        assert rxe.interpret(mod, x).shape == (batch, 10)
