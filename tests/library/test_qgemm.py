"""rxe_lib_qdense_s8 and rxe_qint8_requantize (runtime_c/kernels/qgemm.c)
against a numpy mirror of the contract's formulas: the requantization bit
for bit over edge values (INT32_MIN, ties, shifts -31..30), the GEMM over
shapes that are not multiples of the 4 x 8 tile (K = 1, K not a multiple of
4), x / weight / output int8 and uint8, zero points, per-tensor and
per-channel multipliers, fused clamps. On the host in four builds (the
native one, with AMX tiles where the CPU has AMX-INT8; native without AMX,
the AVX-512 VNNI tile; AVX2 widening; portable C), and under
QEMU in one driver run per board: aarch64 (smlal), aarch64 with dotprod
(sdot), armv7 NEON, riscv64 (portable C) and the Cortex-M4 (SMLAD)."""

import itertools
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from relax_edge.library import qint8 as Q
from relax_edge.op import quant_int8
from relax_edge.target import load_board
from tests.library.qint8_lib import (
    INT32_MAX,
    INT32_MIN,
    KERNELS,
    RUNTIME,
    WARNINGS,
    HostKernels,
    check,
    check_on_board,
    compile_c,
    dense_case,
    requant,
    requantize_case,
)

HOST_BUILDS = {"native": ["-O3", "-march=native"], "native-no-amx": ["-O3", "-march=native", "-mno-amx-tile"],
               "avx2": ["-O2", "-mavx2", "-mfma"], "portable": ["-O2"]}


def host_has_amx_int8() -> bool:
    flags = next((line for line in Path("/proc/cpuinfo").read_text().splitlines() if line.startswith("flags")), "")
    return {"amx_tile", "amx_int8"} <= set(flags.split())


@pytest.fixture(scope="module", params=list(HOST_BUILDS))
def kernels(request, tmp_path_factory):
    return HostKernels(tmp_path_factory.mktemp("qint8") / f"libqint8_{request.param}.so", HOST_BUILDS[request.param])


def edge_requantizations():
    accs = [INT32_MIN, INT32_MIN + 1, -(1 << 30), -65537, -65536, -3, -2, -1, 0, 1, 2, 3, 65535, 65536, 1 << 30,
            INT32_MAX - 1, INT32_MAX]
    qs = [0, 1 << 30, (1 << 30) + 1, 1518500250, INT32_MAX]
    shifts = list(range(-31, 31))
    acc, q, shift = (np.array(v, np.int64) for v in zip(*itertools.product(accs, qs, shifts)))
    # ties: acc * q / 2^(31 - shift) an odd multiple of 1/2 (q = 2^30: acc / 2^(1 - shift)), positive and
    # negative, with an even and an odd integer below; and values a unit of the product off a tie
    odd = np.array([1, -1, 3, -3, 5, -5, 7, -7], np.int64)
    tie_cases = [(odd << max(-s, 0), np.full(odd.size, 1 << 30), np.full(odd.size, s)) for s in (0, -1, -5, -27)]
    tie_cases.append((np.array([3, -3, 3, -3]), np.array([(1 << 30) + 1, (1 << 30) + 1, (1 << 30) - 1, (1 << 30) - 1]),
                      np.zeros(4)))
    for a, b, c in tie_cases:
        acc, q, shift = np.concatenate([acc, a]), np.concatenate([q, b]), np.concatenate([shift, c])
    return acc.astype(np.int64), q.astype(np.int64), shift.astype(np.int64)


def exact_requantization(acc, q, shift):
    """round_half_even(acc * q * 2^(shift - 31)) in rationals, acc and the result saturated to int32."""
    acc = np.clip(acc, INT32_MIN, INT32_MAX)
    want = [round(Fraction(int(a) * int(m) * 2 ** (int(s) + 32), 1 << 63)) for a, m, s in zip(acc, q, shift)]
    return np.array([min(max(w, INT32_MIN), INT32_MAX) for w in want], np.int64)


def test_the_mirror_and_the_operator_module_agree_with_exact_rationals():
    """Python's round() of a Fraction rounds halves to even: the spec's QuantizeLinear of the exact product."""
    acc, q, shift = edge_requantizations()
    want = exact_requantization(acc, q, shift)
    np.testing.assert_array_equal(np.clip(requant(acc, q, shift), INT32_MIN, INT32_MAX), want)
    np.testing.assert_array_equal(np.clip(quant_int8.requantize_accumulator(acc, q, shift), INT32_MIN, INT32_MAX),
                                  want)
    # float64 agrees wherever the product is exact in it (below 2^53)
    small = np.abs(acc * q) < (1 << 53)
    real = acc[small].astype(np.float64) * q[small].astype(np.float64) * np.exp2(shift[small] - 31.0)
    np.testing.assert_array_equal(np.clip(np.rint(real), INT32_MIN, INT32_MAX).astype(np.int64), want[small])
    ties = np.array([1, -1, 3, -3, 5, -5])
    assert list(requant(ties, 1 << 30, 0)) == [0, 0, 2, -2, 2, -2]
    assert list(requant(ties << 1, 1 << 30, -1)) == [0, 0, 2, -2, 2, -2]


def test_requantize_matches_the_contract_bit_for_bit(kernels):
    acc, q, shift = edge_requantizations()
    # outside the quantize pass's range but defined: q = INT32_MIN (|acc * q| up to 2^62)
    extra = np.array([INT32_MIN, INT32_MAX, -1, 1, 3]), np.full(5, INT32_MIN), np.array([0, 0, 0, -31, 30])
    acc, q, shift = (np.concatenate([u, v]) for u, v in zip((acc, q, shift), extra))
    case = requantize_case(acc, q, shift)
    np.testing.assert_array_equal(case[3], exact_requantization(acc, q, shift))
    check(case, kernels.run(case))


def test_requantize_refuses_shifts_outside_the_range():
    with pytest.raises(ValueError, match=r"\[-31, 30\], got 31"):
        quant_int8.requantize_accumulator(np.array([1, 2]), 1 << 30, np.array([0, 31]))


def epilogue_case(positive_shifts, m):
    """qdense with k = 1 and zero operands, so that acc = bias: edge accumulators, multipliers and shifts
    through the vector epilogue (every shift <= 0, |bias| + 65536 below 2^31; m = 8 full rows: the 512-bit
    tile's too) or, with a positive shift among them, the scalar one."""
    acc, q, shift = edge_requantizations()
    keep = (np.abs(acc) < INT32_MAX - 65536) & (shift > 0 if positive_shifts else shift <= 0)
    acc, q, shift = acc[keep].astype(np.int32), q[keep].astype(np.int32), shift[keep].astype(np.int32)
    n = acc.size
    x, w, out = np.zeros((m, 1), np.int8), np.zeros((n, 1), np.int8), np.zeros((m, n), np.int8)
    expected = np.repeat(np.clip(requant(acc, q, shift), -128, 127).astype(np.int8).reshape(1, n), m, axis=0)
    return Q.DENSE, [x, Q.pack_qdense_weights(w), acc, q, shift, out], [m, n, 1, 0, 0, 0, -128, 127, 0], expected


@pytest.mark.parametrize("positive_shifts", [False, True])
@pytest.mark.parametrize("m", [1, 8])
def test_the_epilogues_match_over_edge_values(kernels, positive_shifts, m):
    case = epilogue_case(positive_shifts, m)
    check(case, kernels.run(case))


DTYPES = [("int8", "int8", "int8"), ("uint8", "int8", "uint8"), ("uint8", "uint8", "int8"), ("int8", "uint8", "uint8")]
SHAPES = [(1, 1, 1), (1, 8, 4), (3, 5, 7), (4, 8, 16), (5, 9, 33), (7, 17, 64), (13, 40, 130), (2, 3, 1)]


def dense_cases(seed):
    rng = np.random.default_rng(seed)
    cases = []
    for i, ((m, n, k), (xd, wd, od)) in enumerate(itertools.product(SHAPES, DTYPES)):
        x_zero = {"int8": [0, -128, 5, 127][i % 4], "uint8": [128, 0, 255, 37][i % 4]}[xd]
        w_zero = 0 if i % 3 else {"int8": -7, "uint8": 131}[wd]
        out_zero = {"int8": [0, -20, 11][i % 3], "uint8": [128, 0, 200][i % 3]}[od]
        cases.append(dense_case(rng, m, n, k, xd, wd, od, x_zero, w_zero, out_zero, per_channel=i % 2 == 0,
                                relu=i % 4 == 1))
    return cases


def test_dense_matches_the_mirror(kernels):
    for case in dense_cases(1):
        check(case, kernels.run(case))


def test_dense_over_many_panels_and_a_long_k(kernels):
    rng = np.random.default_rng(2)
    for m, n, k in [(37, 67, 1001), (1, 1000, 577), (64, 96, 4608)]:
        case = dense_case(rng, m, n, k, "uint8", "int8", "uint8", x_zero=128, out_zero=128)
        check(case, kernels.run(case))


def test_extreme_operands_do_not_saturate(kernels):
    """-128 * -128 everywhere (vpmaddubsw or int16 sums would saturate), K at its largest tested depth."""
    m, n, k = 5, 9, 4099
    x = np.full((m, k), -128, np.int8)
    w = np.full((n, k), -128, np.int8)
    bias = np.zeros(n, np.int32)
    q, shift = np.full(n, 1 << 30, np.int32), np.full(n, -24, np.int32)
    out = np.zeros((m, n), np.int8)
    status, message = kernels.call(Q.DENSE, [x, Q.pack_qdense_weights(w), bias, q, shift, out],
                                   [m, n, k, 0, 0, 0, -128, 127, 0])
    assert status == 0, message
    acc = np.full((m, n), 128 * 128 * k, np.int64)
    np.testing.assert_array_equal(out, np.clip(requant(acc, q, shift), -128, 127))


def test_dense_over_every_panel_remainder(kernels):
    """n of 2, 3, 5, 6 and 7 panels (the 512-bit tile's 4 and its remainders), m not a multiple of 8, K small."""
    rng = np.random.default_rng(8)
    for m, n, k in [(17, 16, 24), (19, 24, 27), (9, 40, 16), (23, 44, 5), (8, 56, 33)]:
        case = dense_case(rng, m, n, k, "uint8", "int8", "uint8", x_zero=128, out_zero=128)
        check(case, kernels.run(case))
        case = dense_case(rng, m, n, k, "int8", "int8", "int8", x_zero=-3, w_zero=2, out_zero=-1)
        check(case, kernels.run(case))


def test_dense_over_the_64_byte_k_steps(kernels):
    """k at and around multiples of 64 (the AMX tile's k step: full steps, then the last k % 64 bytes over the
    panels' last 16 groups), 8-row blocks and a remainder, uint8 and int8 x, 2 to 5 panels."""
    rng = np.random.default_rng(11)
    for m, n, k in [(8, 32, 64), (16, 40, 65), (17, 24, 67), (8, 32, 100), (24, 36, 127), (9, 32, 128),
                    (16, 16, 130), (8, 40, 191), (32, 32, 576)]:
        case = dense_case(rng, m, n, k, "uint8", "int8", "uint8", x_zero=128, out_zero=128)
        check(case, kernels.run(case))
        case = dense_case(rng, m, n, k, "int8", "int8", "int8", x_zero=-3, w_zero=2, out_zero=-1)
        check(case, kernels.run(case))


def test_the_native_build_takes_amx_where_the_cpu_has_it(tmp_path):
    """-march=native on a CPU with AMX-INT8 compiles the AMX tile, and Linux grants the tile state (the
    other native build, -mno-amx-tile, keeps the VNNI tile under the same tests)."""
    if not host_has_amx_int8():
        pytest.skip("this CPU has no AMX-INT8 (the native build is the VNNI or AVX2 one)")
    lib = HostKernels(tmp_path / "libqint8_amx.so", HOST_BUILDS["native"]).lib
    assert lib.rxe_qint8_amx_enabled() == 1
    assert HostKernels(tmp_path / "libqint8_vnni.so", HOST_BUILDS["native-no-amx"]).lib.rxe_qint8_amx_enabled() == 0


@pytest.mark.parametrize("m, n, k", [(67, 40, 300), (1, 999, 257), (5, 64, 1000)])   # by rows, by panels
def test_two_threads_give_the_same_bits_as_one(kernels, m, n, k):
    case = dense_case(np.random.default_rng(7), m, n, k, "uint8", "int8", "int8", x_zero=100, w_zero=3)
    one = kernels.run(case).copy()
    previous = kernels.set_threads(2)
    try:
        two = kernels.run(case)
    finally:
        kernels.set_threads(previous)
    assert one.tobytes() == two.tobytes()
    check(case, two)


def test_bad_arguments_are_errors(kernels):
    case = dense_case(np.random.default_rng(3), 2, 3, 4)
    symbol, arrays, sizes, _ = case
    bad_shift = [*arrays[:4], np.array([0, 31, 0], np.int32), arrays[5]]
    assert kernels.call(symbol, bad_shift, sizes) == (10, "rxe_lib_qdense_s8: shift[1] = 31 is outside [-31, 30]")
    status, message = kernels.call(symbol, arrays, [*sizes[:3], 200, *sizes[4:]])
    assert status == 10 and "zero points" in message
    status, message = kernels.call(symbol, arrays, [*sizes[:6], 5, 4, sizes[8]])
    assert status == 10 and "clamp [5, 4]" in message
    status, message = kernels.call(symbol, [arrays[0], None, *arrays[2:]], sizes)
    assert status == 7 and "NULL" in message
    status, message = kernels.call(symbol, arrays, [2, 3, Q.MAX_K + 1, *sizes[3:]])
    assert status == 4 and "k 65537" in message


def test_packing_layout_and_inverse():
    w = np.arange(-60, 60, dtype=np.int8).reshape(10, 12)[:, :11]
    packed = Q.pack_qdense_weights(w)
    assert packed.dtype == np.int8 and packed.size == Q.packed_bytes(10, 11) == 16 * 4 + 2 * 3 * 32
    np.testing.assert_array_equal(packed[:64].view("<i4")[:10], w.astype(np.int64).sum(axis=1))
    assert packed[64 + 4 * 2 + 1] == w[2, 1] and packed[64 + 32 + 4 * 3 + 2] == w[3, 6]
    np.testing.assert_array_equal(Q.unpack_qdense_weights(packed, 10, 11), w)
    u = (w.astype(np.int16) + 128).astype(np.uint8)
    np.testing.assert_array_equal(Q.unpack_qdense_weights(Q.pack_qdense_weights(u), 10, 11), w)


ARCH_FLAGS = {"x86-64 AVX2": ["-O2", "-mavx2", "-mfma"], "x86-64 AVX-VNNI": ["-O2", "-mavx2", "-mavxvnni"],
              "x86-64 AVX512-VNNI": ["-O2", "-mavx512f", "-mavx512vl", "-mavx512vnni"], "x86-64": ["-O2"]}


@pytest.mark.parametrize("arch", list(ARCH_FLAGS))
def test_compiles_without_warnings_for_each_x86_path(tmp_path, arch):
    for src in KERNELS:
        compile_c(["cc", *ARCH_FLAGS[arch], *WARNINGS, f"-I{RUNTIME / 'include'}", "-c", src, "-o", tmp_path / "k.o"])


BOARDS = ["host", "qemu-aarch64", "qemu-aarch64-dotprod", "qemu-armv7", "qemu-riscv64", "qemu-cortex-m4"]


@pytest.mark.parametrize("board_name", BOARDS)
def test_compiles_without_warnings_for_each_board(tmp_path, board_name):
    target = load_board(board_name).target
    freestanding = ["-ffreestanding"] if target.freestanding else []
    for src in KERNELS:
        compile_c([target.compiler, *target.cflags, *freestanding, *WARNINGS, f"-I{RUNTIME / 'include'}", "-c", src,
                   "-o", tmp_path / "k.o"])


EMULATED = ["qemu-aarch64", "qemu-aarch64-dotprod", "qemu-armv7", "qemu-riscv64", "qemu-cortex-m4"]


@pytest.mark.emu
@pytest.mark.parametrize("board_name", EMULATED)
def test_emulated_dense_matches_the_mirror(tmp_path, board_name):
    cases = [requantize_case(*edge_requantizations()), epilogue_case(False, 1), epilogue_case(True, 1),
             epilogue_case(False, 8)] + dense_cases(4)
    check_on_board(board_name, cases, tmp_path)
