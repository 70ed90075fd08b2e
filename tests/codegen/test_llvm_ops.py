"""The LLVM kernel backend (codegen/llvm): every operator of
test_compiled_ops.py built with backend="llvm" on the host equals its numpy
reference; a handful also on the emulated boards (aarch64, armv7, riscv64,
Cortex-M4F); the C and LLVM builds of the MLP and CNN agree; every emitted
module passes the LLVM verifier on every target; aarch64 kernels of an
elementwise add and a matmul use NEON vector instructions."""

import re
import shutil
import subprocess

import numpy as np
import pytest

import relax_edge as rxe
from relax_edge.codegen.c.module import generate_c
from relax_edge.codegen.llvm import compile_module, emit_kernels, prepare_module
from relax_edge.op.registry import make_call
from relax_edge.target import load_board
from relax_edge.transform.legalize import legalize
from tests import models
from tests.codegen.test_compiled_ops import ALL, NN, SIZES, _int_div_safe
from tests.legalize import test_legalize_basic as basic
from tests.legalize import test_legalize_nn as nn
from tests.legalize.harness import check_compiled, one_op_module

EMULATED = ["qemu-aarch64", "qemu-armv7", "qemu-riscv64", "qemu-cortex-m4"]
TARGETS = ["host", *EMULATED]
CASES = {c[0]: c for c in ALL + [tuple(c[:4]) for c in NN]}
HANDFUL = ["add_broadcast", "matmul_2d", "conv2d_plain", "softmax_last", "take"]


def _unary_case(name):
    def arrays(t, d, sizes, seed):
        return [np.random.default_rng(seed).uniform(0.1, 3.0, (sizes["n"], 5)).astype(np.float32)]
    return [("n", 5)], ["float32"], lambda x: make_call(name, [x]), arrays


@pytest.mark.parametrize("case", ALL, ids=[c[0] for c in ALL])
def test_operator_llvm(case, tmp_path):
    name, templates, dtypes, build = case
    check_compiled(templates, dtypes, build, SIZES, tmp_path, _int_div_safe(name), rtol=2e-5, atol=1e-5,
                   backend="llvm")


@pytest.mark.parametrize("name", basic.UNARY)
def test_unary_llvm(name, tmp_path):
    templates, dtypes, build, arrays = _unary_case(name)
    check_compiled(templates, dtypes, build, SIZES, tmp_path, arrays, rtol=2e-5, atol=1e-6, backend="llvm")


@pytest.mark.parametrize("case", NN, ids=[c[0] for c in NN])
def test_nn_operator_llvm(case, tmp_path):
    _, templates, dtypes, build = case[:4]
    check_compiled(templates, dtypes, build, nn.SIZES, tmp_path, rtol=2e-5, atol=1e-5, backend="llvm")


@pytest.mark.parametrize("name, board", [(n, b) for n in HANDFUL for b in EMULATED] + [("take", "host")])
def test_llvm_kernels_on_emulated_board(name, board, tmp_path):
    """A few operators through LLVM for each emulated target; take also
    reports an index out of range as an error, not a read."""
    _, templates, dtypes, build = CASES[name]
    sizes = nn.SIZES if name.startswith("conv2d") else [{"n": 1, "m": 1}, {"n": 3, "m": 2}]
    art = check_compiled(templates, dtypes, build, sizes, tmp_path, rtol=2e-5, atol=1e-5, board=board,
                         backend="llvm")
    if name == "take":
        x = np.arange(12, dtype=np.float32).reshape(2, 6)
        bad = np.array([[0, 1000]], np.int64)
        with rxe.connect(board) as dev, pytest.raises(rxe.RuntimeCheckError, match=r"RXE_ERR_INDEX: take: index 1000"):
            dev.load(art).run(x, bad)


@pytest.mark.parametrize("model", ["mlp", "cnn"])
def test_models_c_and_llvm_agree(model, tmp_path):
    if model == "mlp":
        mod, x = models.build_mlp(models.mlp_weights()), np.random.default_rng(0).standard_normal((3, 784))
    else:
        mod, x = models.build_cnn(models.cnn_weights()), np.random.default_rng(0).standard_normal((3, 1, 16, 16))
    x = x.astype(np.float32)
    expected = rxe.interpret(mod, x)
    host = rxe.connect("host")
    # generated kernels only (no library dispatch, fusion or schedules): the code generators side by side
    outs = {backend: host.load(rxe.build(mod, board="host", backend=backend, out_dir=tmp_path / backend,
                                         name=model, emit_llvm=True, optimize=False, profile=False)).run(x)[0]
            for backend in ("c", "llvm")}
    np.testing.assert_allclose(outs["llvm"], expected, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(outs["c"], expected, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(outs["llvm"], outs["c"], rtol=1e-5, atol=1e-6)
    ll = (tmp_path / "llvm" / f"{model}_kernels.ll").read_text()
    assert re.search(rf"define hidden .*i32 @{model}_k_", ll)
    if model == "mlp":   # add and relu run in place: their buffers may alias
        assert re.search(r"@mlp_k_matmul\(ptr noalias", ll) and re.search(r"@mlp_k_add\(ptr (?!noalias)", ll)
    assert not (tmp_path / "c" / f"{model}_kernels.ll").exists()


def _kernels(templates, dtypes, build):
    """{symbol: tensor program} of a one-operator module, as the LLVM build gets them."""
    sources = generate_c(legalize(one_op_module(templates, dtypes, build)), "op", extern_kernels=True)
    return sources.extern_kernels


def test_every_emitted_module_passes_the_verifier():
    cases = [c[1:4] for c in CASES.values()] + [_unary_case(name)[:3] for name in basic.UNARY]
    targets = [load_board(b).target for b in TARGETS]
    for templates, dtypes, build in cases:
        programs = _kernels(templates, dtypes, build)
        for target in targets:
            prepare_module(emit_kernels(programs, target.freestanding, inplace=()), target)   # raises when invalid


@pytest.mark.emu
@pytest.mark.skipif(shutil.which("aarch64-linux-gnu-objdump") is None, reason="needs binutils-aarch64-linux-gnu")
@pytest.mark.parametrize("name, pattern", [("add_broadcast", r"\bfadd\s+v\d+\.4s"),
                                           ("matmul_2d", r"\b(fmla|fmul|fadd)\s+v\d+\.(4s|2d)")])
def test_aarch64_kernels_use_neon(name, pattern, tmp_path):
    _, templates, dtypes, build = CASES[name]
    target = load_board("qemu-aarch64").target
    compiled = compile_module(emit_kernels(_kernels(templates, dtypes, build), False, inplace=()), target)
    obj = tmp_path / "kernels.o"
    obj.write_bytes(compiled.object_code)
    disassembly = subprocess.run(["aarch64-linux-gnu-objdump", "-d", str(obj)], capture_output=True, text=True,
                                 check=True).stdout
    assert re.search(pattern, disassembly), disassembly[-3000:]
