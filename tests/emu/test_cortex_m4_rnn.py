"""Recurrent networks under QEMU: the PyTorch LSTM keyword spotter
(tests/rnn_models.py: 49 frames x 40 MFCC features -> LSTM(64) -> 12 logits)
built for the Cortex-M4F MPS2 AN386 board with the batch bounded (batch <= 2),
so the memory planner gives one fixed arena, checked against the generated
header and run under qemu-system-arm against ONNX Runtime (batch 1 and 2;
batch 3 refused); and a one-node bidirectional GRU with sequence_lens and an
initial state cross-compiled for qemu-aarch64 against ONNX Runtime."""

import re

import numpy as np
import onnx
import onnxruntime as ort
import pytest

import relax_edge as rxe
from tests.frontend.test_onnx_rnn import CASES, _expected, _feeds, _model
from tests.rnn_models import FEATURES, FRAMES, HIDDEN, get_kws

MAX_BATCH = 2


@pytest.fixture(scope="module")
def lstm_kws(tmp_path_factory):
    path = get_kws("lstm")
    mod = rxe.from_onnx(str(path), dim_bounds={"batch": MAX_BATCH})
    art = rxe.build(mod, board="qemu-cortex-m4", backend="c", out_dir=tmp_path_factory.mktemp("kws_lstm"),
                    name="kws", quiet=True, profile=False)
    return path, art


@pytest.mark.slow
def test_lstm_kws_arena_and_outputs_on_mps2_an386(lstm_kws):
    path, art = lstm_kws
    match = re.search(r"#define KWS_WORKSPACE_BYTES (\d+)u", art.header.read_text())
    assert match and int(match.group(1)) == art.workspace_bytes
    # the input projection of every frame at the bound (batch 2, 49 frames, 4 gates of 64) must fit
    assert art.workspace_bytes >= MAX_BATCH * FRAMES * 4 * HIDDEN * 4
    x = np.random.default_rng(7).standard_normal((MAX_BATCH, FRAMES, FEATURES)).astype(np.float32)
    want = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, {"mfcc": x})[0]
    with rxe.connect("qemu-cortex-m4") as dev:
        loaded = dev.load(art)
        for batch in (1, MAX_BATCH):
            (out,) = loaded.run(x[:batch])
            np.testing.assert_allclose(out, want[:batch], rtol=1e-4, atol=1e-5)
        with pytest.raises(rxe.RuntimeCheckError) as err:
            loaded.run(np.zeros((MAX_BATCH + 1, FRAMES, FEATURES), np.float32))
    assert err.value.status == "RXE_ERR_BOUND"


@pytest.mark.slow
@pytest.mark.parametrize("board", ["qemu-aarch64"])
def test_gru_node_on_qemu_aarch64(board, tmp_path):
    case = next(c for c in CASES if c.name == "gru_bidir_lbr_lens_h16")
    art = rxe.build(rxe.from_onnx(_model(case)), board=board, backend="llvm", out_dir=tmp_path, name="gru",
                    quiet=True, profile=False)
    with rxe.connect(board) as dev:
        loaded = dev.load(art)
        for n in (1, 3):
            feeds = _feeds(case, n)
            for ours, ref in zip(loaded.run(*feeds.values()), _expected(case, feeds), strict=True):
                np.testing.assert_allclose(ours, ref, rtol=2e-5, atol=2e-5)


def test_exported_lstm_is_one_onnx_lstm_node():
    ops = [n.op_type for n in onnx.load(str(get_kws("lstm"))).graph.node]
    assert ops.count("LSTM") == 1 and "Loop" not in ops and "Scan" not in ops
