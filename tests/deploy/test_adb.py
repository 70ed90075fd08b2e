"""The adb transport against a stand-in adb (no phone here): push with
content-hash reuse, the runner over files, RPC frames over `adb shell -T`.
The board's target is the host so the stand-in can run the binaries."""

import os

import numpy as np
import pytest

import relax_edge as rxe
from tests.models import build_mlp, mlp_weights


def test_run_and_benchmark_over_adb(adb_board, tmp_path):
    mod = build_mlp(mlp_weights())
    art = rxe.build(mod, board=adb_board, out_dir=tmp_path / "mlp", name="mlp")
    x = np.random.default_rng(1).standard_normal((2, 784)).astype(np.float32)
    with rxe.connect(adb_board) as dev:
        m = dev.load(art)
        np.testing.assert_allclose(m.run(x)[0], rxe.interpret(mod, x), rtol=1e-5, atol=1e-6)
        assert m.benchmark(x, warmup=0, repeat=3)["repeat"] == 3
        m.close()
        assert dev.uploads == 1
    with rxe.connect(adb_board) as dev:
        dev.load(art)
        assert dev.uploads == 0  # already on the phone


def test_no_device(tmp_path, monkeypatch, adb_board):
    bin_dir = tmp_path / "nodevice"
    bin_dir.mkdir()
    (bin_dir / "adb").write_text("#!/bin/sh\necho 'error: no devices/emulators found' >&2\nexit 1\n")
    (bin_dir / "adb").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    with pytest.raises(rxe.DeviceError, match="no device over adb .*no devices/emulators found.*enable USB debugging"):
        rxe.connect(adb_board)
