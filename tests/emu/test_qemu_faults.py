"""Emulator runs have a timeout and report crashes clearly."""

import subprocess

import numpy as np
import pytest
import yaml

import relax_edge as rxe
from relax_edge.target import BOARDS_DIR
from tests.models import build_mlp, mlp_weights


def custom_board(tmp_path, **changes):
    data = yaml.safe_load((BOARDS_DIR / "qemu-aarch64.yaml").read_text())
    data.update(changes)
    path = tmp_path / "board.yaml"
    path.write_text(yaml.safe_dump(data))
    return str(path)


def test_a_run_past_the_timeout_is_stopped(tmp_path):
    board = custom_board(tmp_path, timeout_s=0.001)
    art = rxe.build(build_mlp(mlp_weights()), board=board, out_dir=tmp_path / "mlp", name="mlp", profile=False)
    with rxe.connect(board) as dev:
        m = dev.load(art)
        with pytest.raises(rxe.DeviceError, match=r"qemu-aarch64: no answer in time; the server was stopped "
                                                  r"\(after 0.001s; raise timeout_s in"):
            m.run(np.zeros((2, 784), np.float32))
        stray = subprocess.run(["pgrep", "-f", str(dev.workdir)], capture_output=True, text=True).stdout
        assert stray.strip() == "", f"processes left behind: {stray}"


def test_a_crashing_binary_reports_its_signal(tmp_path):
    """The device binary dies on a signal: the error names it; the next
    request starts a fresh server."""
    art = rxe.build(build_mlp(mlp_weights()), board="qemu-aarch64", out_dir=tmp_path / "mlp", name="mlp", profile=False)
    good = art.server.read_bytes()
    crasher = tmp_path / "crash.c"
    crasher.write_text("#include <signal.h>\nint main(void) { raise(SIGSEGV); return 0; }\n")
    subprocess.run(["aarch64-linux-gnu-gcc", "-static", "-o", str(art.server), str(crasher)], check=True)
    x = np.zeros((2, 784), np.float32)
    with rxe.connect("qemu-aarch64") as dev:
        m = dev.load(art)
        with pytest.raises(rxe.DeviceError, match="crashed with SIGSEGV"):
            m.run(x)
        dev.stage(art.server).write_bytes(good)  # the server is fixed on the device: the session restarts
        assert m.run(x)[0].shape == (2, 10)
