"""rxe_lib_dense_f32 and rxe_lib_matmul_f32 against numpy: remainders of
every tile and block size, activations, batch strides, thread counts,
errors, the weight packer and the scratch mirror; and the NEON (aarch64)
and generic C (riscv64) paths under QEMU."""

import itertools
import subprocess

import numpy as np
import pytest

from relax_edge.ir.shape import SizeVar, evaluate
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

SIZES = [1, 3, 7, 16, 17, 33, 100, 257]
RXE_ERR_SHAPE, RXE_ERR_NULL, RXE_ERR_INTERNAL = 4, 7, 10


def run_case(kernels, case):
    symbol, arrays, sizes, _ = case
    status, message = kernels.call(symbol, arrays, sizes)
    assert status == 0, message
    return output_of(case)


@pytest.mark.parametrize("m", SIZES)
def test_dense_matches_numpy(host_kernels, m):
    rng = np.random.default_rng(m)
    for n, k in itertools.product(SIZES, SIZES):
        case = dense_case(rng, m, n, k, act=(n + k) % 3, bias=n != 7)
        assert_close(run_case(host_kernels, case), case)


@pytest.mark.parametrize("m, n, k", [(40, 2 * K.NC + 5, 3 * K.KC - 1), (13, K.NC + 1, 2 * K.KC + 1), (1, 1000, 2048)])
def test_dense_across_cache_blocks(host_kernels, m, n, k):
    case = dense_case(np.random.default_rng(1), m, n, k, act=2)
    assert_close(run_case(host_kernels, case), case)


@pytest.mark.parametrize("m, n, k", [(128, 192, 576), (13, 200, 576), (30, 48, 1540)])
def test_dense_at_decoder_shapes(host_kernels, m, n, k):
    """A prompt's dense layers: 2MR x 2NR tiles (AVX-512) beside row and column tails, K not a multiple of KC."""
    case = dense_case(np.random.default_rng(m + n), m, n, k, act=m % 3)
    assert_close(run_case(host_kernels, case), case)


def _within_the_float32_bound(got, a, b, bias, act, what):
    """|got - exact| <= (k + 2) eps |a| @ |b| (+ |bias|): what any summation order of float32 FMAs and adds must meet
    (k products, one bias add), and a missing, doubled or misplaced term or bias cannot; exact in float64."""
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    exact, bound = a64 @ b64, np.abs(a64) @ np.abs(b64)
    if bias is not None:
        exact, bound = exact + bias, bound + np.abs(bias)
    exact = np.minimum(np.maximum(exact, 0), 6 if act == 2 else np.inf) if act else exact
    err = np.abs(got.astype(np.float64) - exact)
    assert not np.isnan(got).any(), f"{what}: elements never written"
    worst = float(np.max(err / ((a.shape[1] + 2) * 2.0 ** -24 * bound + 1e-30)))
    assert worst <= 1.0, f"{what}: error {worst:.3g} of the bound"


@pytest.mark.parametrize("k", [1, K.KC - 1, 2 * K.KC + 3])
def test_every_row_and_column_remainder_of_the_wide_tiles_against_float64(host_kernels, k):
    """m over all remainders of 2MR (row panel pairs, a lone panel, a partial one), n of 2NR (panel pairs, an
    unpaired full panel, a partial one) and a block edge of NC; k a single step, a KC tail, k blocks accumulated."""
    rng = np.random.default_rng(k)
    for m, n in itertools.product(range(2 * K.MR, 4 * K.MR), [64, 65, 79, 80, 81, 95, K.NC + 48]):
        a, w, bias = (rng.standard_normal(s).astype(np.float32) for s in ((m, k), (k, n), (n,)))
        act = (m + n) % 3
        out = np.full((m, n), np.nan, np.float32)
        status, message = host_kernels.call("rxe_lib_dense_f32", [a, K.pack_dense_weights(w), bias, out],
                                            [m, n, k, act])
        assert status == 0, message
        _within_the_float32_bound(out, a, w, bias, act, f"dense m {m} n {n} k {k}")
        case = matmul_case(rng, 1, m, n, k)
        case[1][0][0], case[1][1][0] = a, w
        _within_the_float32_bound(run_case(host_kernels, case)[0], a, w, None, 0, f"matmul m {m} n {n} k {k}")


def test_a_row_has_the_same_bits_in_every_tile(host_kernels):
    """Rows of a 2MR-row tile equal the same rows computed in an MR-row tile, and matmul (B packed at run time)
    equals dense (B packed ahead) bit for bit."""
    rng = np.random.default_rng(6)
    a, w = rng.standard_normal((24, 300)).astype(np.float32), rng.standard_normal((300, 80)).astype(np.float32)

    def dense(rows):
        out = np.full((len(rows), 80), np.nan, np.float32)
        case = ("rxe_lib_dense_f32", [rows, K.pack_dense_weights(w), None, out], [len(rows), 80, 300, 0], rows @ w)
        return run_case(host_kernels, case).copy()

    full = dense(a)
    np.testing.assert_allclose(full, a @ w, rtol=1e-4, atol=1e-5 * 300 ** 0.5)
    for lo in (0, 6, 12):
        assert dense(a[lo:lo + K.MR].copy()).tobytes() == full[lo:lo + K.MR].tobytes(), lo
    mm = matmul_case(rng, 1, 24, 80, 300)
    mm[1][0][...], mm[1][1][...] = a, w
    assert run_case(host_kernels, mm)[0].tobytes() == full.tobytes()


@pytest.mark.parametrize("act", [0, 1, 2])
def test_dense_with_empty_k_gives_the_activated_bias(host_kernels, act):
    case = dense_case(np.random.default_rng(2), 5, 20, 0, act=act)
    bias = case[1][2]
    np.testing.assert_array_equal(run_case(host_kernels, case), np.broadcast_to(K.apply_act(bias, act), (5, 20)))


@pytest.mark.parametrize("m", SIZES)
def test_matmul_matches_numpy(host_kernels, m):
    rng = np.random.default_rng(100 + m)
    for n, k in itertools.product(SIZES, SIZES):
        case = matmul_case(rng, 1, m, n, k)
        assert_close(run_case(host_kernels, case), case)


@pytest.mark.parametrize("a_shared, b_shared", [(False, False), (True, False), (False, True), (True, True)])
@pytest.mark.parametrize("m, n, k", [(7, 33, 17), (70, K.NC + 100, K.KC + 90)])
def test_batched_matmul_with_broadcast_strides(host_kernels, m, n, k, a_shared, b_shared):
    case = matmul_case(np.random.default_rng(3), 3, m, n, k, a_shared, b_shared)
    assert case[3].shape == (3, m, n)
    assert_close(run_case(host_kernels, case), case)


@pytest.mark.parametrize("make", [
    lambda rng: dense_case(rng, 200, 150, 300, act=1),    # threads split rows
    lambda rng: dense_case(rng, 4, 1000, 513, act=2),     # the matrix-vector path
    lambda rng: dense_case(rng, 13, 1000, 300, act=2),    # threads split column panels (an odd count)
    lambda rng: dense_case(rng, 100, 40, 600, act=0),     # threads split row panels, tiles of two
    lambda rng: matmul_case(rng, 2, 257, 100, 260),
    lambda rng: matmul_case(rng, 1, 5, 700, 300),
], ids=["dense_rows", "dense_gemv", "dense_columns", "dense_rows_pairs", "matmul_rows", "matmul_columns"])
def test_two_threads_give_the_same_bits_as_one(host_kernels, make):
    case = make(np.random.default_rng(4))
    one = run_case(host_kernels, case).copy()
    previous = host_kernels.set_threads(2)
    try:
        output_of(case).fill(np.nan)
        two = run_case(host_kernels, case)
    finally:
        host_kernels.set_threads(previous)
    assert one.tobytes() == two.tobytes()
    assert_close(two, case)


def test_dense_rejects_an_unknown_activation(host_kernels):
    symbol, arrays, sizes, _ = dense_case(np.random.default_rng(5), 2, 3, 4)
    status, message = host_kernels.call(symbol, arrays, sizes[:3] + [3])
    assert status == RXE_ERR_INTERNAL
    assert message == "rxe_lib_dense_f32: act 3 is not 0 (none), 1 (relu) or 2 (relu6)"


def test_negative_sizes_and_missing_scratch_are_errors(host_kernels):
    symbol, arrays, sizes, _ = dense_case(np.random.default_rng(6), 2, 3, 4)
    status, message = host_kernels.call(symbol, arrays, [2, -3, 4, 0])
    assert (status, message) == (RXE_ERR_SHAPE, "rxe_lib_dense_f32: negative size (m 2, n -3, k 4)")
    symbol, arrays, sizes, _ = matmul_case(np.random.default_rng(6), 1, 2, 3, 4)
    status, message = host_kernels.call(symbol, arrays, [1, 2, 3, -4, 0, 0])
    assert (status, message) == (RXE_ERR_SHAPE, "rxe_lib_matmul_f32: negative size (batch 1, m 2, n 3, k -4)")
    status, message = host_kernels.call(symbol, arrays[:3] + [None], sizes)
    assert (status, message) == (RXE_ERR_NULL, "rxe_lib_matmul_f32: scratch is NULL")


def test_dense_packing_layout_and_inverse():
    k, n = 5, 37
    w = np.random.default_rng(7).standard_normal((k, n)).astype(np.float32)
    packed = K.pack_dense_weights(w)
    assert packed.dtype == np.float32 and packed.shape == (3 * K.NR * k,)
    for panel, row, col in itertools.product(range(3), range(k), range(K.NR)):
        j = panel * K.NR + col
        assert packed[(panel * k + row) * K.NR + col] == (w[row, j] if j < n else 0.0)
    np.testing.assert_array_equal(K.unpack_dense_weights(packed, k, n), w)


def test_scratch_bytes_mirror_the_c_macro(tmp_path):
    shapes = [(1, 1, 1), (5, 17, 300), (64, 1000, 64), (3, K.NC, K.KC), (2, K.NC + 1, K.KC + 1), (9, 9, 0)]
    program = tmp_path / "scratch.c"
    program.write_text('#include <stdio.h>\n#include "relax_edge/kernels.h"\nint main(void) {\n' + "".join(
        f'  printf("%llu\\n", (unsigned long long)RXE_LIB_MATMUL_SCRATCH_BYTES({m}, {n}, {k}));\n'
        for m, n, k in shapes) + "  return 0;\n}\n")
    compile_c(["cc", *WARNINGS, f"-I{RUNTIME / 'include'}", program, "-o", tmp_path / "scratch"])
    c_values = [int(v) for v in subprocess.run([tmp_path / "scratch"], capture_output=True, text=True,
                                               check=True).stdout.split()]
    assert c_values == [K.matmul_scratch_bytes(*s) for s in shapes]
    m, n, k = SizeVar("m"), SizeVar("n"), SizeVar("k")
    symbolic = K.matmul_scratch_bytes(m, n, k)
    for shape, value in zip(shapes, c_values):
        assert evaluate(symbolic, dict(zip((m, n, k), shape))) == value


@pytest.mark.parametrize("board_name", ["host", "qemu-aarch64", "qemu-armv7", "qemu-riscv64", "qemu-cortex-m4"])
def test_kernels_compile_without_warnings_for_each_board(tmp_path, board_name):
    target = load_board(board_name).target
    freestanding = ["-ffreestanding"] if target.freestanding else []
    for source in ("gemm.c", "conv.c"):
        compile_c([target.compiler, *target.cflags, *freestanding, *WARNINGS, f"-I{RUNTIME / 'include'}", "-c",
                   RUNTIME / "kernels" / source, "-o", tmp_path / f"{source}.o"])


EMULATED = ["qemu-aarch64", "qemu-riscv64"]   # the NEON and the generic C paths


def emulated_cases():
    rng = np.random.default_rng(8)
    return [dense_case(rng, m, n, k, act=(m + n) % 3) for m, n, k in [(1, 3, 7), (7, 17, 33), (17, 33, 100),
                                                                      (6, 16, 300), (13, 400, 20)]] + \
        [matmul_case(rng, 2, m, n, k, b_shared=True) for m, n, k in [(3, 7, 1), (16, 33, 17), (33, 100, 257)]]


@pytest.mark.parametrize("board_name", EMULATED)
def test_emulated_target_matches_numpy(tmp_path, board_name):
    board = load_board(board_name)
    driver = build_driver(board.target.compiler, list(board.target.cflags), tmp_path / "driver")
    cases = emulated_cases()
    for case, (status, out) in zip(cases, run_driver([*board.qemu["command"], driver], cases)):
        assert status == 0, f"{case[0]} {case[2]}: status {status}"
        assert_close(out, case)
