"""rxe_lib_dense_f32 and rxe_lib_matmul_f32 at few rows (their
matrix-vector path, gemv.c, up to GEMV_MAX_M rows, and the blocked GEMM just
above) against numpy: K odd and even, N not a multiple of the NR-column
panel, bias and activations, batch strides, thread counts; the dense kernel
through a compiled graph (matmul with a constant weight and a symbolic first
dim, + bias, relu) on the host with the C and the LLVM backends, and both
kernels under QEMU on aarch64 (NEON) and riscv64 (the portable C)."""

import itertools
import subprocess

import numpy as np
import pytest

import relax_edge as rxe
from relax_edge import op
from relax_edge.build import optimize_module
from relax_edge.ir import Builder, Constant, SizeVar, TensorType, Var
from relax_edge.library import kernels as K
from relax_edge.target import load_board
from tests.library.kernel_lib import (
    RUNTIME,
    WARNINGS,
    assert_close,
    build_driver,
    compile_c,
    dense_case,
    matmul_case,
    output_of,
    run_driver,
)

KS = [1, 2, 7, 64, 577]
NS = [1, 15, 16, 17, 200]


def expected_dense(a, w, bias, act):
    """numpy in float64: act(a @ w + bias), act 0 none, 1 relu, 2 clip to [0, 6]."""
    y = a.astype(np.float64) @ w.astype(np.float64)
    if bias is not None:
        y = y + bias
    if act == 1:
        y = np.maximum(y, 0)
    elif act == 2:
        y = np.clip(y, 0, 6)
    return y.astype(np.float32)


def run_dense(kernels, a, w, bias, act):
    (m, k), n = a.shape, w.shape[1]
    out = np.full((m, n), np.nan, np.float32)
    status, message = kernels.call("rxe_lib_dense_f32", [a, K.pack_dense_weights(w), bias, out], [m, n, k, act])
    assert status == 0, message
    return out


def check(kernels, rng, m, n, k, act, with_bias):
    a = rng.standard_normal((m, k)).astype(np.float32)
    w = rng.standard_normal((k, n)).astype(np.float32)
    bias = rng.standard_normal(n).astype(np.float32) if with_bias else None
    np.testing.assert_allclose(run_dense(kernels, a, w, bias, act), expected_dense(a, w, bias, act), rtol=1e-4,
                               atol=2e-6 * max(k, 1) ** 0.5, err_msg=f"m {m} n {n} k {k} act {act}")


@pytest.mark.parametrize("m", list(range(1, K.GEMV_MAX_M + 2)))   # the last one takes the blocked GEMM
def test_few_rows_match_numpy(host_kernels, m):
    rng = np.random.default_rng(m)
    for i, (n, k) in enumerate(itertools.product(NS, KS)):
        check(host_kernels, rng, m, n, k, act=i % 3, with_bias=i % 2 == 0)


@pytest.mark.parametrize("m", list(range(1, K.GEMV_MAX_M + 2)))
def test_few_rows_of_a_matmul_match_numpy(host_kernels, m):
    """rxe_lib_matmul_f32 (b row-major, read in place): batches, b broadcast or a broadcast."""
    rng = np.random.default_rng(20 + m)
    for i, (n, k) in enumerate(itertools.product(NS, KS)):
        a = rng.standard_normal((1 if i % 3 == 1 else 3, m, k)).astype(np.float32)
        b = rng.standard_normal((1 if i % 3 == 2 else 3, k, n)).astype(np.float32)
        out = np.full((3, m, n), np.nan, np.float32)
        scratch = np.zeros(max(K.matmul_scratch_bytes(m, n, k) // 4, 1), np.float32)
        sizes = [3, m, n, k, 0 if a.shape[0] == 1 else m * k, 0 if b.shape[0] == 1 else k * n]
        status, message = host_kernels.call("rxe_lib_matmul_f32", [a, b, out, scratch], sizes)
        assert status == 0, message
        expected = np.matmul(a.astype(np.float64), b.astype(np.float64)).astype(np.float32)
        np.testing.assert_allclose(out, np.broadcast_to(expected, out.shape), rtol=1e-4,
                                   atol=2e-6 * max(k, 1) ** 0.5, err_msg=f"m {m} n {n} k {k}")


@pytest.mark.parametrize("m", [1, 3])
def test_wide_layers_match_numpy(host_kernels, m):
    """Many panels and a long k (an LM head's shape, scaled down)."""
    check(host_kernels, np.random.default_rng(10 + m), m, 3001, 1537, act=0, with_bias=True)


@pytest.mark.parametrize("act", [0, 1, 2])
def test_empty_k_gives_the_activated_bias(host_kernels, act):
    bias = np.random.default_rng(3).standard_normal(20).astype(np.float32) * 8
    out = run_dense(host_kernels, np.zeros((1, 0), np.float32), np.zeros((0, 20), np.float32), bias, act)
    np.testing.assert_array_equal(out, expected_dense(np.zeros((1, 0)), np.zeros((0, 20)), bias, act))


def on_two_threads(kernels, run):
    previous = kernels.set_threads(2)
    try:
        return run()
    finally:
        kernels.set_threads(previous)


@pytest.mark.parametrize("m", [1, 2, 4])
def test_two_threads_give_the_same_bits_as_one(host_kernels, m):
    rng = np.random.default_rng(4)
    a = rng.standard_normal((m, 600)).astype(np.float32)
    w = rng.standard_normal((600, 1000)).astype(np.float32)
    one = run_dense(host_kernels, a, w, None, 0)
    two = on_two_threads(host_kernels, lambda: run_dense(host_kernels, a, w, None, 0))
    assert one.tobytes() == two.tobytes()
    np.testing.assert_allclose(two, expected_dense(a, w, None, 0), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("m, n, k", [(1, 1001, 700), (1, 9000, 41), (3, 2900, 130), (3, 4000, 50)])
def test_two_threads_give_the_same_bits_as_one_in_a_matmul(host_kernels, m, n, k):
    case = matmul_case(np.random.default_rng(5), 2, m, n, k)
    one = run_case(host_kernels, case).copy()
    output_of(case).fill(np.nan)
    two = on_two_threads(host_kernels, lambda: run_case(host_kernels, case))
    assert one.tobytes() == two.tobytes()
    assert_close(two, case)


def run_case(kernels, case):
    symbol, arrays, sizes, _ = case
    status, message = kernels.call(symbol, arrays, sizes)
    assert status == 0, message
    return output_of(case)


def test_gemv_rows_mirror_the_c_macro(tmp_path):
    program = tmp_path / "rows.c"
    program.write_text('#include <stdio.h>\n#include "relax_edge/kernels.h"\n'
                       'int main(void) { printf("%d\\n", RXE_GEMV_MAX_M); return 0; }\n')
    compile_c(["cc", *WARNINGS, f"-I{RUNTIME / 'include'}", program, "-o", tmp_path / "rows"])
    assert int(subprocess.run([tmp_path / "rows"], capture_output=True, text=True, check=True).stdout) == K.GEMV_MAX_M


@pytest.mark.parametrize("board_name", ["host", "qemu-aarch64", "qemu-armv7", "qemu-riscv64", "qemu-cortex-m4"])
def test_gemv_compiles_without_warnings_for_each_board(tmp_path, board_name):
    target = load_board(board_name).target
    freestanding = ["-ffreestanding"] if target.freestanding else []
    compile_c([target.compiler, *target.cflags, *freestanding, *WARNINGS, f"-I{RUNTIME / 'include'}", "-c",
               RUNTIME / "kernels" / "gemv.c", "-o", tmp_path / "gemv.o"])


@pytest.mark.slow
@pytest.mark.emu
@pytest.mark.parametrize("board_name", ["qemu-aarch64", "qemu-riscv64"])   # NEON, the portable C
def test_emulated_kernel_matches_numpy(tmp_path, board_name):
    board = load_board(board_name)
    driver = build_driver(board.target.compiler, list(board.target.cflags), tmp_path / "driver")
    rng = np.random.default_rng(9)
    shapes = [(m, n, k) for m in range(1, K.GEMV_MAX_M + 2) for n, k in [(17, 577), (200, 7), (1, 64)]]
    cases = [dense_case(rng, m, n, k, act=(m + n) % 3, bias=m != 2) for m, n, k in shapes] + \
        [matmul_case(rng, 2, m, n, k, b_shared=m % 2 == 0) for m, n, k in shapes]
    for case, (status, out) in zip(cases, run_driver([*board.qemu["command"], driver], cases)):
        assert status == 0, f"{case[0]} {case[2]}: status {status}"
        assert_close(out, case)


# ---- through a compiled graph: x (seq, K) @ W + b, relu, seq symbolic ----------------------

def dense_graph(k, n, seed):
    rng = np.random.default_rng(seed)
    w = rng.standard_normal((k, n)).astype(np.float32)
    b = rng.standard_normal(n).astype(np.float32)
    x = Var("x", TensorType((SizeVar("seq"), k), "float32"))
    bb = Builder()
    with bb.function("main", [x]):
        with bb.dataflow():
            y = bb.emit(op.relu(bb.emit(op.add(bb.emit(op.matmul(x, Constant(w))), Constant(b)))))
            out = bb.emit_output(y)
        bb.ret(out)
    return bb.get(), w, b


def check_graph(tmp_path, board, backend, k, n, seqs):
    mod, w, b = dense_graph(k, n, seed=k + n)
    optimized = optimize_module(mod, load_board(board), True)
    (call,) = [b.value for blk in optimized.functions["main"].body.blocks for b in blk.bindings
               if type(b.value).__name__ == "CallExtern"]
    assert call.name == "rxe_lib_dense_f32" and dict(call.attrs["params"])["act"] == 1   # bias and relu inside
    art = rxe.build(mod, board=board, backend=backend, out_dir=tmp_path / "art", name="dense", quiet=True,
                    profile=False)
    rng = np.random.default_rng(0)
    with rxe.connect(board) as dev:
        loaded = dev.load(art)
        for seq in seqs:
            x = rng.standard_normal((seq, k)).astype(np.float32)
            (actual,) = loaded.run(x)
            np.testing.assert_allclose(actual, expected_dense(x, w, b, 1), rtol=1e-4, atol=1e-4,
                                       err_msg=f"{board} {backend} seq {seq}")


@pytest.mark.parametrize("backend", ["c", "llvm"])
def test_compiled_graph_matches_numpy_at_each_seq(tmp_path, backend):
    check_graph(tmp_path, "host", backend, 97, 300, [1, 2, 3, 4, 5, 9])


@pytest.mark.slow
@pytest.mark.emu
@pytest.mark.parametrize("board", ["qemu-aarch64", "qemu-riscv64"])   # NEON, the portable C
def test_compiled_graph_under_qemu(tmp_path, board):
    check_graph(tmp_path, board, "c", 33, 41, [1, 2, 3, 4, 5])
