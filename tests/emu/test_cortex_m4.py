"""A keyword-spotting DS-CNN (in the style of "Hello Edge", Zhang et al.
2017) compiled for a Cortex-M4F with no OS and run on the MPS2 AN386 board
under qemu-system-arm with semihosting.

The model takes 49 frames x 10 MFCC features, applies a strided 10x4 conv,
four depthwise-separable blocks (batch norm as a real `batch_norm` after the
pointwise convs and folded into per-channel scale/bias after the depthwise
ones), global average pooling and a dense layer to 12 classes. The batch is
symbolic but bounded (batch <= 4), so the memory planner gives one fixed
arena. The test checks that arena against the generated header, the size of
the runtime core, the outputs at batch 1 and 4 against the numpy reference,
and that batch 5 is refused with RXE_ERR_BOUND.
"""

import re
import shutil
import subprocess

import numpy as np
import pytest

import relax_edge as rxe
from relax_edge import op
from relax_edge.ir import Builder, SizeVar, TensorType, Var

BOARD = "qemu-cortex-m4"
FRAMES, FEATURES, CHANNELS, CLASSES, BLOCKS = 49, 10, 64, 12, 4
MAX_BATCH = 4
RUNTIME_TEXT_GOAL = 8 * 1024

def ds_cnn_weights(seed=0):
    """Seeded weights, He-scaled so that activations stay near unit size."""
    rng = np.random.default_rng(seed)

    def he(shape, fan_in):
        return (rng.standard_normal(shape) * np.sqrt(2.0 / fan_in)).astype(np.float32)

    def uniform(lo, hi, shape):
        return rng.uniform(lo, hi, shape).astype(np.float32)

    def batch_norm_params():
        return {"scale": uniform(0.8, 1.2, CHANNELS), "bias": uniform(-0.1, 0.1, CHANNELS),
                "mean": uniform(-0.1, 0.1, CHANNELS), "var": uniform(0.8, 1.2, CHANNELS)}

    w = {"conv1": he((CHANNELS, 1, 10, 4), 40), "conv1_bias": uniform(-0.1, 0.1, (1, CHANNELS, 1, 1))}
    w.update({f"bn1_{k}": v for k, v in batch_norm_params().items()})
    for i in range(BLOCKS):
        w[f"dw{i}"] = he((CHANNELS, 1, 3, 3), 9)
        w[f"dw{i}_scale"] = uniform(0.8, 1.2, (1, CHANNELS, 1, 1))   # batch norm folded
        w[f"dw{i}_bias"] = uniform(-0.1, 0.1, (1, CHANNELS, 1, 1))
        w[f"pw{i}"] = he((CHANNELS, CHANNELS, 1, 1), CHANNELS)
        w.update({f"pw{i}_bn_{k}": v for k, v in batch_norm_params().items()})
    w["fc"] = (rng.standard_normal((CHANNELS, CLASSES)) / np.sqrt(CHANNELS)).astype(np.float32)
    w["fc_bias"] = uniform(-0.1, 0.1, CLASSES)
    return w


def _batch_norm(x, w, prefix):
    return op.batch_norm(x, w[f"{prefix}_scale"], w[f"{prefix}_bias"], w[f"{prefix}_mean"], w[f"{prefix}_var"])


def build_ds_cnn(w):
    """(batch, 1, 49, 10) MFCC features -> (batch, 12) class probabilities."""
    batch = SizeVar("batch", upper=MAX_BATCH)
    x = Var("mfcc", TensorType((batch, 1, FRAMES, FEATURES), "float32"))
    bb = Builder()
    with bb.function("main", [x]):
        with bb.dataflow():
            # 10x4 conv, stride 2, "same" padding: 49x10 -> 25x5
            h = bb.emit(op.add(op.conv2d(x, w["conv1"], strides=(2, 2), padding=(4, 1, 5, 1)), w["conv1_bias"]))
            h = bb.emit(op.relu(_batch_norm(h, w, "bn1")))
            for i in range(BLOCKS):
                d = op.conv2d(h, w[f"dw{i}"], padding=(1, 1, 1, 1), groups=CHANNELS)
                d = bb.emit(op.relu(op.add(op.multiply(d, w[f"dw{i}_scale"]), w[f"dw{i}_bias"])))
                h = bb.emit(op.relu(_batch_norm(op.conv2d(d, w[f"pw{i}"]), w, f"pw{i}_bn")))
            pooled = bb.emit(op.avg_pool2d(h, kernel_size=(25, 5)))              # (batch, 64, 1, 1)
            flat = bb.emit(op.reshape(pooled, (batch, CHANNELS)))
            logits = bb.emit(op.add(op.matmul(flat, w["fc"]), w["fc_bias"]))
            out = bb.emit_output(op.softmax(logits, axis=-1))
        bb.ret(out)
    return bb.get()


@pytest.fixture(scope="module", params=["c", "llvm"])
def ds_cnn(request, tmp_path_factory):
    """The keyword spotter built with each backend (C, LLVM)."""
    weights = ds_cnn_weights()
    mod = build_ds_cnn(weights)
    art = rxe.build(mod, board=BOARD, backend=request.param, out_dir=tmp_path_factory.mktemp("ds_cnn"), name="kws",
                    profile=False)
    return weights, mod, art


def test_ds_cnn_has_hello_edge_size(ds_cnn):
    weights, _, _ = ds_cnn
    params = sum(v.size for v in weights.values())
    assert 20_000 <= params <= 40_000, params


def test_fixed_arena_matches_header(ds_cnn):
    _, _, art = ds_cnn
    assert isinstance(art.workspace_bytes, int) and art.workspace_bytes > 0
    header = art.header.read_text()
    match = re.search(r"#define KWS_WORKSPACE_BYTES (\d+)u", header)
    assert match, header
    assert int(match.group(1)) == art.workspace_bytes
    # the largest activation at the bound (batch 4, 64 x 25 x 5 floats) must fit
    assert art.workspace_bytes >= MAX_BATCH * CHANNELS * 25 * 5 * 4


def test_runtime_core_is_small(ds_cnn):
    _, _, art = ds_cnn
    assert art.sizes["runtime"]["text"] < RUNTIME_TEXT_GOAL, art.sizes


def test_runner_is_a_hard_float_cortex_m_elf(ds_cnn):
    _, _, art = ds_cnn
    head = art.runner.read_bytes()[:20]
    assert head[:4] == b"\x7fELF" and head[4] == 1          # 32-bit
    assert int.from_bytes(head[18:20], "little") == 40      # EM_ARM
    if shutil.which("arm-none-eabi-readelf"):
        attrs = subprocess.run(["arm-none-eabi-readelf", "-A", str(art.runner)], capture_output=True,
                               text=True).stdout
        assert "Tag_CPU_arch_profile: Microcontroller" in attrs, attrs
        assert "Tag_ABI_VFP_args: VFP registers" in attrs, attrs   # hard-float calling convention


@pytest.mark.parametrize("batch", [1, MAX_BATCH])
def test_ds_cnn_on_mps2_an386(ds_cnn, batch):
    _, mod, art = ds_cnn
    x = np.random.default_rng(batch).standard_normal((batch, 1, FRAMES, FEATURES)).astype(np.float32)
    with rxe.connect(BOARD) as dev:
        (out,) = dev.load(art).run(x)
    ref = rxe.interpret(mod, x)
    assert out.shape == (batch, CLASSES)
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(out.sum(axis=1), 1.0, rtol=1e-5)
    assert ref.std() > 1e-3                                   # a real check, not all 1/12


def test_batch_over_bound_is_rejected(ds_cnn):
    _, _, art = ds_cnn
    x = np.zeros((MAX_BATCH + 1, 1, FRAMES, FEATURES), np.float32)
    with rxe.connect(BOARD) as dev, pytest.raises(rxe.RuntimeCheckError) as err:
        dev.load(art).run(x)
    assert err.value.status == "RXE_ERR_BOUND"
    assert "batch = 5 exceeds its upper bound 4" in str(err.value)
