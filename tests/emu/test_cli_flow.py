"""A user's flow on the default emulated board, through the command line:
compile for qemu-aarch64, then run there with given inputs and --check."""

import subprocess
import sys

import numpy as np

from tests.onnx_models import get_model


def cli(*args):
    return subprocess.run([sys.executable, "-m", "relax_edge.cli", *map(str, args)], capture_output=True,
                          text=True, timeout=600)


def test_compile_for_qemu_aarch64_then_run_with_check(tmp_path):
    path, _ = get_model("mlp")
    proc = cli("compile", path, "--board", "qemu-aarch64", "-o", tmp_path / "out", "--dim", "batch=1..32")
    assert proc.returncode == 0, proc.stderr
    assert "for qemu-aarch64" in proc.stdout and "size on qemu-aarch64: model .text" in proc.stdout
    assert "workspace: a fixed arena of" in proc.stdout
    x = np.random.default_rng(3).standard_normal((6, 32)).astype(np.float32)
    np.savez(tmp_path / "in.npz", x=x)
    proc = cli("run", tmp_path / "out", "--board", "qemu-aarch64", "--inputs", tmp_path / "in.npz", "--check",
               "--output", tmp_path / "out.npz")
    assert proc.returncode == 0, proc.stderr
    assert "on qemu-aarch64 in" in proc.stdout and proc.stdout.startswith("ran mlp")
    assert "check against the numpy reference: PASS" in proc.stdout
    assert np.load(tmp_path / "out.npz")["output0"].shape == (6, 10)


def test_run_on_the_wrong_board_is_refused(tmp_path):
    path, _ = get_model("mlp")
    assert cli("compile", path, "--board", "qemu-riscv64", "-o", tmp_path / "rv").returncode == 0
    proc = cli("run", tmp_path / "rv", "--board", "qemu-armv7")
    assert proc.returncode == 1
    assert "was built for board qemu-riscv64, not qemu-armv7; rebuild with relax-edge compile --board qemu-armv7" \
        in proc.stderr
