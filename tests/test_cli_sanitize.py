"""`relax-edge compile --sanitize`: a host artifact whose runner and server
carry ASan + UBSan, run and checked through the sanitized server."""

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from relax_edge.cli import main


def _tiny_onnx(path):
    w = np.random.default_rng(0).standard_normal((8, 4)).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"]), helper.make_node("Relu", ["y"], ["z"])], "tiny",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 8])],
        [helper.make_tensor_value_info("z", TensorProto.FLOAT, ["n", 4])],
        [numpy_helper.from_array(w, "w")])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))


def test_compile_sanitize_then_run_check(tmp_path, capsys):
    model = tmp_path / "tiny.onnx"
    _tiny_onnx(model)
    out = tmp_path / "san"
    assert main(["compile", str(model), "--board", "host", "-o", str(out), "--sanitize"]) == 0
    printed = capsys.readouterr().out
    assert "sanitized (ASan + UBSan): tiny_runner, tiny_server" in printed
    assert "(shared)" not in printed
    assert main(["run", str(out), "--dim", "n=3", "--check"]) == 0
    assert "PASS" in capsys.readouterr().out


def test_sanitize_on_a_static_board_is_one_error_line(tmp_path, capsys):
    model = tmp_path / "tiny.onnx"
    _tiny_onnx(model)
    assert main(["compile", str(model), "--board", "qemu-aarch64", "-o", str(tmp_path / "q"), "--sanitize"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("relax-edge: error: sanitize=True needs a Linux board that links dynamically")
