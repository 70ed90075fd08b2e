"""Generated C compiles warning-free under gcc and clang, weights travel as
binary, and an operator without a legalization is a compile error naming it."""

import subprocess

import numpy as np
import pytest

import relax_edge as rxe
from relax_edge.codegen.c.module import generate_c
from relax_edge.toolchain import RUNTIME_DIR
from relax_edge.transform.legalize import LegalizeError, legalize
from tests.models import build_cnn, cnn_weights
from tests.onnx_models import get_model


def modules():
    yield "cnn", build_cnn(cnn_weights())
    path, _ = get_model("gpt2")
    yield "gpt2", rxe.from_onnx(str(path), dim_bounds={"seq": 64})


@pytest.mark.parametrize("compiler", ["gcc", "clang"])
def test_generated_c_compiles_with_werror(compiler, tmp_path):
    for name, mod in modules():
        sources = generate_c(legalize(mod), name)
        for fname, text in sources.files.items():
            (tmp_path / fname).write_text(text)
        proc = subprocess.run([compiler, "-std=c99", "-O1", "-Wall", "-Wextra", "-Werror", "-pedantic",
                               f"-I{RUNTIME_DIR / 'include'}", "-c", str(tmp_path / f"{name}.c"),
                               "-o", str(tmp_path / f"{name}.o")], capture_output=True, text=True)
        assert proc.returncode == 0, f"{name}: {proc.stderr[:2000]}"


def test_weights_are_binary_not_literals(tmp_path):
    from relax_edge.library import pack
    weights = cnn_weights()
    art = rxe.build(build_cnn(weights), board="host", out_dir=tmp_path, name="cnn", optimize=False, profile=False)
    blob = (tmp_path / "cnn_weights.bin").read_bytes()
    c_text = (tmp_path / "cnn.c").read_text()
    # every constant's bytes are in the blob, and the C source holds no weight values
    assert weights["c1"].tobytes() in blob and weights["fc"].tobytes() in blob
    assert f"{float(weights['c1'].reshape(-1)[0])!r}" not in c_text
    assert ".incbin \"cnn_weights.bin\"" in (tmp_path / "cnn_weights.S").read_text()
    assert art.shared_library.exists() and art.static_library.exists() and art.header.exists()
    # optimized, the convolution's weights are there in the library kernel's packed layout
    rxe.build(build_cnn(weights), board="host", out_dir=tmp_path / "opt", name="cnn", profile=False)
    blob = (tmp_path / "opt" / "cnn_weights.bin").read_bytes()
    assert pack("conv2d", weights["c1"]).tobytes() in blob


def test_operator_without_legalization_is_a_compile_error(tmp_path):
    from onnx import TensorProto, helper
    graph = helper.make_graph([helper.make_node("Reshape", ["x", "shape"], ["y"], name="flat")], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3]),
                               helper.make_tensor_value_info("shape", TensorProto.INT64, [1])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    mod = rxe.from_onnx(model)
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    assert rxe.interpret(mod, x, np.array([6])).tolist() == list(range(6))
    with pytest.raises(LegalizeError, match=r"no legalization for: reshape_dynamic \(1 call\)"):
        rxe.build(mod, board="host", out_dir=tmp_path, name="rs", profile=False)
