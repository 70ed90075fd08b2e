"""`relax-edge compile --sanitize`: a host artifact whose runner and server
carry ASan + UBSan, run and checked through the sanitized server."""

import pytest

from relax_edge.cli import main
from tests.models import save_tiny_onnx


def test_compile_sanitize_then_run_check(tmp_path, capsys):
    model = tmp_path / "tiny.onnx"
    save_tiny_onnx(model)
    out = tmp_path / "san"
    assert main(["compile", str(model), "--board", "host", "-o", str(out), "--sanitize"]) == 0
    printed = capsys.readouterr().out
    assert "sanitized (ASan + UBSan): tiny_runner, tiny_server" in printed
    assert "(shared)" not in printed
    assert main(["run", str(out), "--dim", "n=3", "--check"]) == 0
    assert "PASS" in capsys.readouterr().out


@pytest.mark.emu
def test_sanitize_on_a_static_board_is_one_error_line(tmp_path, capsys):
    model = tmp_path / "tiny.onnx"
    save_tiny_onnx(model)
    assert main(["compile", str(model), "--board", "qemu-aarch64", "-o", str(tmp_path / "q"), "--sanitize"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("relax-edge: error: sanitize=True needs a Linux board that links dynamically")
