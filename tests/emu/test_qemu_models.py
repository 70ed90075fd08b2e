"""Whole models cross-compiled once per emulated board and backend (C, LLVM)
and run under qemu-user against ONNX Runtime: the MLP at two batch sizes,
MobileNetV2, and the BERT encoder at two sequence lengths from one artifact.
The C and LLVM builds also agree with each other."""

import numpy as np
import onnxruntime as ort
import pytest

import relax_edge as rxe
from tests.onnx_models import get_model

BOARDS = ["qemu-aarch64", "qemu-armv7", "qemu-riscv64"]
MODELS = {"mlp": {"dim_bounds": {"batch": 16}}, "bert": {"dim_bounds": {"seq": 64}}, "mobilenet_v2": {}}


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["c", "llvm"])
@pytest.mark.parametrize("board", BOARDS)
@pytest.mark.parametrize("model", list(MODELS))
def test_model_on_emulated_board(model, board, backend, tmp_path):
    path, spec = get_model(model)
    mod = rxe.from_onnx(str(path), **MODELS[model])
    art = rxe.build(mod, board=board, backend=backend, out_dir=tmp_path / model, name=model,
                    profile=False)
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    runs = [{d: pair[k] for d, pair in spec["dynamic"].items()} for k in (0, 1)] if spec["dynamic"] else [{}]
    with rxe.connect(board) as dev:
        loaded = dev.load(art)
        for k, sizes in enumerate(runs):
            feeds = spec["make_inputs"](seed=k, **sizes)
            expected = session.run(None, feeds)
            outs = loaded.run(*feeds.values())
            assert len(outs) == len(expected)
            for ours, ref in zip(outs, expected):
                assert ours.shape == ref.shape
                np.testing.assert_allclose(ours, ref, rtol=1e-4, atol=1e-5)
