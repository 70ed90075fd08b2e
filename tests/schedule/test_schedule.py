"""The schedule pass: structure of scheduled programs, the same numbers from
the tensor-program interpreter before and after (sizes with vector
remainders), compiled C and LLVM kernels against the numpy reference,
vector instructions in the objects, and parallel kernels bitwise equal at
one and two threads."""

import ctypes
import subprocess

import numpy as np
import pytest

import relax_edge as rxe
from relax_edge.op.registry import make_call
from relax_edge.tir.verify import verify_program
from relax_edge.transform.legalize import legalize
from relax_edge.transform.schedule import schedule
from tests.legalize.harness import one_op_module, random_arrays

SIZES = (1, 3, 7, 8, 9, 33)


def layer_norm(x, s, b):
    return make_call("layer_norm", [x, s, b], {"axis": -1, "epsilon": 1e-5})


def conv3x3(x, w):
    return make_call("conv2d", [x, w], {"strides": (1, 1), "padding": (1, 1, 1, 1), "dilation": (1, 1), "groups": 1})


# name, templates, dtypes, build
CASES = [
    ("add", [("m", "n"), ("n",)], ["float32"] * 2, lambda a, b: make_call("add", [a, b])),
    ("gelu", [("m", "n")], ["float32"], lambda x: make_call("gelu", [x])),
    ("softmax", [("m", "n")], ["float32"], lambda x: make_call("softmax", [x], {"axis": -1})),
    ("sum", [("m", "n")], ["float32"], lambda x: make_call("sum", [x], {"axis": (1,), "keepdims": False})),
    ("max", [("m", "n")], ["float32"], lambda x: make_call("max", [x], {"axis": (1,), "keepdims": True})),
    ("layer_norm", [("m", "n"), ("n",), ("n",)], ["float32"] * 3, layer_norm),
    ("matmul", [("m", "n"), ("n", 5)], ["float32"] * 2, lambda a, b: make_call("matmul", [a, b])),
    ("conv3x3", [(1, 2, "m", "n"), (3, 2, 3, 3)], ["float32"] * 2, conv3x3),
]


def scheduled(case, target="host", threads=True):
    _, templates, dtypes, build = case
    mod = one_op_module(templates, dtypes, build)
    out = schedule(legalize(mod), target, threads=threads)
    for p in out.tensor_programs.values():
        verify_program(p)
    return mod, out


def test_elementwise_becomes_vector_loop_and_remainder():
    _, mod = scheduled(CASES[0], "qemu-aarch64")
    (text,) = [str(p) for p in mod.tensor_programs.values()]
    assert "for i0 in range(m):" in text
    assert "for i1_o in range(n // 4):" in text
    assert "for i1_v in range(4):  # vectorized" in text
    assert "for i1_r in range(n % 4):" in text
    assert "x0[i0, i1_o * 4 + i1_v] + x1[i1_o * 4 + i1_v]" in text


def test_reduction_splits_into_partial_accumulators():
    _, mod = scheduled(CASES[3], "qemu-aarch64")
    (text,) = [str(p) for p in mod.tensor_programs.values()]
    assert "sum_acc_lanes = local float32[4]" in text   # float32 accumulator: 4 lanes of 128 bits
    assert "sum_acc_lanes[r1_v] = (sum_acc_lanes[r1_v] + x0[i0, r1_o * 4 + r1_v])" in text
    assert "for r1_c in range(4):  # unrolled" in text
    assert "for r1_r in range(n % 4):" in text


def test_kernel_window_unrolled_and_large_stage_parallel():
    _, mod = scheduled(CASES[7], "qemu-aarch64")
    (text,) = [str(p) for p in mod.tensor_programs.values()]
    assert "for rk0 in range(3):  # unrolled" in text and "for rk1 in range(3):  # unrolled" in text
    assert "if (" in text and "> 32768):" in text and "# parallel" in text   # symbolic work: decided at run time
    _, serial = scheduled(CASES[7], "qemu-cortex-m4")   # bare metal: no threads, no vectors
    (text,) = [str(p) for p in serial.tensor_programs.values()]
    assert "parallel" not in text and "vectorized" not in text


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_interpreter_same_before_and_after(case):
    mod, out = scheduled(case, "qemu-aarch64")
    for k, n in enumerate(SIZES):
        arrays = random_arrays(case[1], case[2], {"m": 2, "n": n}, k)
        np.testing.assert_allclose(rxe.interpret(out, *arrays), rxe.interpret(mod, *arrays), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("backend", ["c", "llvm"])
@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_compiled_equals_numpy(case, backend, tmp_path):
    mod, out = scheduled(case)
    art = rxe.build(out, board="host", backend=backend, out_dir=tmp_path, name="op", profile=False)
    loaded = rxe.connect("host").load(art)
    for k, n in enumerate(SIZES):
        arrays = random_arrays(case[1], case[2], {"m": 3, "n": n}, k)
        np.testing.assert_allclose(loaded.run(*arrays)[0], rxe.interpret(mod, *arrays), rtol=2e-5, atol=1e-5)


def _disassembly(objdump, path):
    return subprocess.run([objdump, "-d", str(path)], check=True, capture_output=True, text=True).stdout


@pytest.mark.parametrize("backend", ["c", "llvm"])
def test_host_objects_hold_packed_float_instructions(backend, tmp_path):
    _, out = scheduled(CASES[2], threads=False)
    art = rxe.build(out, board="host", backend=backend, out_dir=tmp_path, name="op", profile=False)
    asm = _disassembly("objdump", art.shared_library)
    assert any(op in asm for op in ("maxps", "vmaxps")) and any(op in asm for op in ("addps", "vaddps"))


@pytest.mark.emu
def test_aarch64_objects_hold_neon_vector_instructions(tmp_path):
    _, out = scheduled(CASES[2], "qemu-aarch64", threads=False)
    art = rxe.build(out, board="qemu-aarch64", backend="c", out_dir=tmp_path, name="op", profile=False)
    asm = _disassembly("aarch64-linux-gnu-objdump", art.static_library)
    assert "fmax\tv" in asm and "fadd\tv" in asm and ".4s" in asm


def _parallel_module(tmp_path, backend, case):
    _, out = scheduled(case)
    assert any("parallel" in str(p) for p in out.tensor_programs.values())
    art = rxe.build(out, board="host", backend=backend, out_dir=tmp_path, name="op", profile=False)
    return ctypes.CDLL(str(art.shared_library)), rxe.connect("host").load(art)


@pytest.mark.parametrize("backend", ["c", "llvm"])
@pytest.mark.parametrize("case", [CASES[2], CASES[5], CASES[7]], ids=["softmax", "layer_norm", "conv3x3"])
def test_parallel_kernels_bitwise_equal_at_one_and_two_threads(case, backend, tmp_path):
    lib, loaded = _parallel_module(tmp_path, backend, case)
    sizes = {"m": 40, "n": 1001} if case[0] != "conv3x3" else {"m": 130, "n": 129}
    arrays = random_arrays(case[1], case[2], sizes, 0)
    previous = lib.rxe_threads_set_count(1)
    try:
        (one,) = loaded.run(*arrays)
        lib.rxe_threads_set_count(2)
        (two,) = loaded.run(*arrays)
    finally:
        lib.rxe_threads_set_count(previous)
    assert np.array_equal(one, two)
    expected = rxe.interpret(one_op_module(*case[1:]), *arrays) if case[0] != "conv3x3" else None
    if expected is not None:
        np.testing.assert_allclose(one, expected, rtol=2e-5, atol=1e-5)


@pytest.mark.parametrize("backend", ["c", "llvm"])
def test_failed_check_in_a_parallel_task_is_the_kernel_status(backend, tmp_path):
    case = ("take", [("n", 4), ("m",)], ["float32", "int64"], lambda x, i: make_call("take", [x, i], {"axis": 1}))
    lib, loaded = _parallel_module(tmp_path, backend, case)
    x = np.random.default_rng(0).standard_normal((300, 4)).astype(np.float32)
    idx = np.tile(np.array([3, -1, 0, 2], np.int64), 50)
    lib.rxe_threads_set_count(2)
    try:
        np.testing.assert_array_equal(loaded.run(x, idx)[0], x[:, idx])
        idx[150] = 1000
        with pytest.raises(rxe.RuntimeCheckError, match=r"RXE_ERR_INDEX: take: index 1000 out of range"):
            loaded.run(x, idx)
    finally:
        lib.rxe_threads_set_count(1)
