"""Every operator cross-compiled for the emulated Linux boards (aarch64,
armv7, riscv64) with each backend (C, LLVM) and run under qemu-user at
several sizes (including 1), against the numpy reference. Small shapes: this
is a full matrix. The operators of a family are built together, as one
module of one-operator results side by side (tests/legalize/harness.OpBatch:
one cross build and one qemu session per board, backend and chunk), each
still checked, and reported, on its own."""

import numpy as np
import pytest

from relax_edge.op.registry import make_call
from tests.codegen.test_compiled_ops import ALL, NN, _int_div_safe
from tests.legalize import test_legalize_basic as basic
from tests.legalize import test_legalize_nn as nn
from tests.legalize.harness import OpBatch

BOARDS = ["qemu-aarch64", "qemu-armv7", "qemu-riscv64"]
BACKENDS = ["c", "llvm"]
SIZES = [{"n": 1, "m": 1}, {"n": 3, "m": 2}]


def _unary_arrays(t, d, sizes, seed):
    return [np.random.default_rng(seed).uniform(0.1, 3.0, (sizes["n"], 5)).astype(np.float32)]


def _unary(name):
    return lambda x: make_call(name, [x])


FAMILIES = {   # family: (its cases, the sizes they run at)
    "ops": ([(name, t, d, build, _int_div_safe(name)) for name, t, d, build in ALL], SIZES),
    "unary": ([(name, [("n", 5)], ["float32"], _unary(name), _unary_arrays) for name in basic.UNARY], SIZES),
    "nn": ([(c[0], c[1], c[2], c[3], None) for c in NN], nn.SIZES),
}
CHUNKS = {family: OpBatch.chunks(cases) for family, (cases, _) in FAMILIES.items()}
CHUNK = {(family, case[0]): i for family, chunks in CHUNKS.items() for i, chunk in enumerate(chunks) for case in chunk}


@pytest.fixture(scope="module")
def batch(tmp_path_factory):
    """The OpBatch holding a case, built the first time one of its chunk asks."""
    built = {}

    def get(family, name, board, backend):
        key = family, CHUNK[family, name], board, backend
        if key not in built:
            built[key] = OpBatch(CHUNKS[family][key[1]], FAMILIES[family][1],
                                 tmp_path_factory.mktemp(f"{family}{key[1]}-{board}-{backend}"), board=board,
                                 backend=backend)
        return built[key]
    return get


def _grouped(names, family):
    """(name, board, backend) parameters, each board and backend's cases on one xdist worker."""
    return [pytest.param(name, board, backend, marks=pytest.mark.xdist_group(f"{family}-{board}-{backend}"))
            for board in BOARDS for backend in BACKENDS for name in names]


@pytest.mark.slow
@pytest.mark.parametrize(("name", "board", "backend"), _grouped([c[0] for c in ALL], "ops"))
def test_operator_on_emulated_board(name, board, backend, batch):
    batch("ops", name, board, backend).check(name, rtol=2e-5, atol=1e-5)


@pytest.mark.slow
@pytest.mark.parametrize(("name", "board", "backend"), _grouped(basic.UNARY, "unary"))
def test_unary_on_emulated_board(name, board, backend, batch):
    batch("unary", name, board, backend).check(name, rtol=2e-5, atol=1e-6)


@pytest.mark.slow
@pytest.mark.parametrize(("name", "board", "backend"), _grouped([c[0] for c in NN], "nn"))
def test_nn_operator_on_emulated_board(name, board, backend, batch):
    batch("nn", name, board, backend).check(name, rtol=2e-5, atol=1e-5)
