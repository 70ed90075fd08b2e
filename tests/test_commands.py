"""The README's main command and the CLI entry point work as documented."""

import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent


def test_main_job_runs_and_checks_against_onnxruntime():
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "demo.py")],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "demo: PASS" in proc.stdout
    assert "batch = 300 exceeds its upper bound 256" in proc.stdout


def test_cli_version_and_help():
    from relax_edge import __version__
    out = subprocess.run([sys.executable, "-m", "relax_edge.cli", "--version"],
                         capture_output=True, text=True, check=True).stdout
    assert out.strip() == f"relax-edge {__version__}"
    out = subprocess.run([sys.executable, "-m", "relax_edge.cli", "--help"],
                         capture_output=True, text=True, check=True).stdout
    assert "usage: relax-edge" in out and "ops" in out


def test_cli_lists_operators():
    out = subprocess.run([sys.executable, "-m", "relax_edge.cli", "ops"],
                         capture_output=True, text=True, check=True).stdout
    names = [line.split()[0] for line in out.splitlines()]
    assert "conv2d" in names and "matmul" in names and names == sorted(names)
