"""The README's main command and the command line work as documented."""

import pathlib
import subprocess
import sys

import numpy as np
import pytest

from tests.onnx_models import get_model

ROOT = pathlib.Path(__file__).resolve().parent.parent


def cli(*args, **kw):
    return subprocess.run([sys.executable, "-m", "relax_edge.cli", *map(str, args)],
                          capture_output=True, text=True, timeout=600, **kw)


@pytest.mark.emu
def test_main_job_compiles_runs_and_checks_a_real_model():
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "demo.py")],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "demo: PASS" in proc.stdout
    assert proc.stdout.count("check against the numpy reference: PASS") == 2


def test_cli_version_and_help():
    from relax_edge import __version__
    assert cli("--version").stdout.strip() == f"relax-edge {__version__}"
    out = cli("--help").stdout
    assert "usage: relax-edge" in out and "compile" in out and "run" in out


def test_cli_lists_operators():
    names = [line.split()[0] for line in cli("ops").stdout.splitlines()]
    assert "conv2d" in names and "matmul" in names and names == sorted(names)


def test_compile_then_run_with_inputs_and_check(tmp_path):
    path, spec = get_model("mlp")
    out_dir = tmp_path / "mlp"
    proc = cli("compile", path, "--board", "host", "-o", out_dir, "--dim", "batch=1..16")
    assert proc.returncode == 0, proc.stderr
    assert "inputs:  x: float32(batch, 32)" in proc.stdout
    assert "tuning table: " in proc.stdout   # the board's table, or none
    assert "[relax-edge] compiling" in proc.stderr  # progress is shown
    x = np.random.default_rng(0).standard_normal((5, 32)).astype(np.float32)
    np.savez(tmp_path / "in.npz", x=x)
    proc = cli("run", out_dir, "--board", "host", "--inputs", tmp_path / "in.npz", "--check",
               "--output", tmp_path / "out.npz")
    assert proc.returncode == 0, proc.stderr
    assert "check against the numpy reference: PASS" in proc.stdout
    out = np.load(tmp_path / "out.npz")["output0"]
    assert out.shape == (5, 10)
    np.testing.assert_allclose(out.sum(axis=1), np.ones(5), rtol=1e-5)  # softmax rows


def test_cli_errors_are_one_clear_line(tmp_path):
    proc = cli("compile", tmp_path / "missing.onnx", "--board", "host")
    assert proc.returncode == 1 and "relax-edge: error:" in proc.stderr and "no such file" in proc.stderr
    path, _ = get_model("mlp")
    proc = cli("compile", path, "--dim", "batch=big", "-o", tmp_path / "x")
    assert proc.returncode == 2 and "--dim 'batch=big': expected NAME=LO..HI" in proc.stderr  # a usage error
    proc = cli("run", tmp_path, "--board", "host")
    assert proc.returncode == 1 and "no artifact.json" in proc.stderr
    proc = cli("compile", path, "--board", "nosuch-board", "-o", tmp_path / "y")
    assert proc.returncode == 1 and "unknown board 'nosuch-board'; known boards: android-arm64" in proc.stderr
