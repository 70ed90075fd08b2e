"""Every operator cross-compiled for the emulated Linux boards (aarch64,
armv7, riscv64) with each backend (C, LLVM) and run under qemu-user at
several sizes (including 1), against the numpy reference. Small shapes: this
is a full matrix."""

import numpy as np
import pytest

from relax_edge.op.registry import make_call
from tests.codegen.test_compiled_ops import ALL, NN, _int_div_safe
from tests.legalize import test_legalize_basic as basic
from tests.legalize import test_legalize_nn as nn
from tests.legalize.harness import check_compiled

BOARDS = ["qemu-aarch64", "qemu-armv7", "qemu-riscv64"]
BACKENDS = ["c", "llvm"]
SIZES = [{"n": 1, "m": 1}, {"n": 3, "m": 2}]


@pytest.mark.slow
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("board", BOARDS)
@pytest.mark.parametrize("case", ALL, ids=[c[0] for c in ALL])
def test_operator_on_emulated_board(case, board, backend, tmp_path):
    name, templates, dtypes, build = case
    check_compiled(templates, dtypes, build, SIZES, tmp_path, _int_div_safe(name), rtol=2e-5, atol=1e-5,
                   board=board, backend=backend)


@pytest.mark.slow
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("board", BOARDS)
@pytest.mark.parametrize("name", basic.UNARY)
def test_unary_on_emulated_board(name, board, backend, tmp_path):
    def arrays(t, d, sizes, seed):
        return [np.random.default_rng(seed).uniform(0.1, 3.0, (sizes["n"], 5)).astype(np.float32)]
    check_compiled([("n", 5)], ["float32"], lambda x: make_call(name, [x]), SIZES, tmp_path, arrays,
                   rtol=2e-5, atol=1e-6, board=board, backend=backend)


@pytest.mark.slow
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("board", BOARDS)
@pytest.mark.parametrize("case", NN, ids=[c[0] for c in NN])
def test_nn_operator_on_emulated_board(case, board, backend, tmp_path):
    name, templates, dtypes, build = case[:4]
    check_compiled(templates, dtypes, build, nn.SIZES, tmp_path, rtol=2e-5, atol=1e-5, board=board, backend=backend)
