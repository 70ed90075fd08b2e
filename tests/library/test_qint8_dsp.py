"""The int8 kernels' Cortex-M DSP paths against the numpy mirror of the
contract (tests/library/qint8_lib.py) under qemu-system-arm, and the same
cases on a copy of the board without `dsp` (their generic C path):

- the GEMM's 2 x 2 SMLAD tile (qgemm.c): odd and even row counts (the last
  row alone), column counts that leave part of a panel, k % 4 of 0 to 3,
  int8 / uint8 x and weights, zero points, and -128 * -128 over k = 4099;
- the depthwise path (qdepthwise_dsp.c): the 3x3 kernel of column stride 1
  two outputs at a time (even and odd rows, rows of 1, rows longer than a
  block of sums, a row stride of 2), the table path (column strides,
  dilation, 1xN / Nx1 / 5x5 / 8x8 kernels, padding past the input), batches
  and extreme operands (|x - x_zero| = |w - w_zero| = 255 over 64 taps).
"""

import numpy as np
import pytest

from relax_edge.library import qint8 as Q
from relax_edge.target import load_board, toolchain_problems
from tests.frontend import kws_model
from tests.library.qint8_lib import check_on_board, conv_case, conv_expected, dense_case, dense_expected, finish

BOARD = "qemu-cortex-m4"
pytestmark = [pytest.mark.emu,
              pytest.mark.skipif(bool(toolchain_problems(load_board(BOARD))), reason="no Cortex-M4 toolchain or QEMU")]

DTYPES = [("int8", "int8", "int8"), ("uint8", "int8", "uint8"), ("uint8", "uint8", "int8"), ("int8", "uint8", "uint8")]
X_ZEROS = {"int8": [0, -128, 9, 127], "uint8": [128, 0, 255, 60]}
OUT_ZEROS = {"int8": [0, -5, 17], "uint8": [128, 3, 250]}

# (m, n, k): rows in pairs and an odd last one, panel remainders, every k % 4
GEMMS = [(2, 8, 4), (3, 9, 5), (4, 16, 6), (5, 17, 7), (6, 3, 1), (1, 40, 3), (8, 24, 130), (9, 8, 2), (7, 64, 64),
         (125, 12, 64)]

# (n, c, h, w, kh, kw, stride, padding, dilation)
DEPTHWISE = [
    (1, 4, 25, 5, 3, 3, (1, 1), (1, 1, 1, 1), (1, 1)),     # the KWS layer's rows of 5: pairs and a last output
    (1, 3, 6, 8, 3, 3, (1, 1), (1, 1, 1, 1), (1, 1)),      # rows of 8: pairs only
    (1, 2, 3, 300, 3, 3, (1, 1), (1, 1, 1, 1), (1, 1)),    # rows of 300: blocks of 128 + 128 + 44 sums
    (1, 2, 4, 128, 3, 3, (1, 1), (0, 1, 0, 1), (1, 1)),    # a row of exactly one block
    (1, 3, 7, 1, 3, 3, (1, 1), (1, 1, 1, 1), (1, 1)),      # rows of one output
    (1, 2, 7, 9, 3, 3, (1, 1), (0, 0, 0, 0), (1, 1)),      # rows of 7, the last output's taps all inside
    (1, 2, 5, 3, 3, 3, (1, 1), (1, 0, 1, 0), (1, 1)),      # rows of one output inside the input
    (1, 3, 11, 7, 3, 3, (2, 1), (1, 1, 1, 1), (1, 1)),     # row stride 2: kernel rows in two phase planes
    (1, 2, 9, 10, 3, 3, (1, 2), (1, 1, 1, 1), (1, 1)),     # column stride 2: the tables
    (1, 2, 10, 9, 3, 3, (2, 2), (1, 0, 0, 1), (1, 1)),
    (1, 2, 9, 9, 3, 3, (1, 1), (2, 2, 2, 2), (2, 2)),      # dilated
    (1, 3, 6, 9, 1, 3, (1, 1), (0, 1, 0, 1), (1, 1)),      # 1x3
    (1, 3, 9, 6, 3, 1, (1, 1), (1, 0, 1, 0), (1, 1)),      # 3x1: single taps only
    (1, 2, 9, 9, 5, 5, (1, 1), (2, 2, 2, 2), (1, 1)),
    (1, 2, 9, 10, 8, 8, (1, 1), (0, 0, 0, 0), (1, 1)),     # 64 taps
    (1, 2, 2, 2, 3, 3, (1, 1), (3, 3, 3, 3), (1, 1)),      # padding past the input: rows of zeros only
    (2, 3, 5, 6, 3, 3, (1, 1), (1, 1, 1, 1), (1, 1)),      # a batch of 2
    (1, 1, 3, 3, 1, 1, (1, 1), (0, 0, 0, 0), (1, 1)),      # 1x1
]


def spread(case, expected_with):
    """The case with its shifts lowered until at most 5% of the outputs sit at the clamps' top and 60% at
    their bottom (a fused ReLU's half): random operands with the shared cases' multipliers saturate most
    outputs, which would hide wrong sums. expected_with(shift) is the mirror's output for those shifts."""
    symbol, arrays, sizes, expected = case
    shift = arrays[4]
    lo, hi = sizes[-3], sizes[-2]
    for _ in range(24):
        if (expected == hi).mean() <= 0.05 and (expected == lo).mean() <= 0.6 or shift.min() <= -31:
            break
        shift = np.maximum(shift - 1, -31).astype(np.int32)
        expected = expected_with(shift)
    arrays = [*arrays[:4], shift, *arrays[5:]]
    return symbol, arrays, sizes, expected


def gemm_cases(seed):
    rng = np.random.default_rng(seed)
    cases = []
    for i, (m, n, k) in enumerate(GEMMS):
        for j, (xd, wd, od) in enumerate(DTYPES):
            case = dense_case(rng, m, n, k, xd, wd, od, X_ZEROS[xd][(i + j) % 4],
                              0 if (i + j) % 3 else {"int8": -7, "uint8": 131}[wd], OUT_ZEROS[od][j % 3],
                              per_channel=(i + j) % 2 == 0, relu=j == 1)
            _, arrays, sizes, expected = case
            x, w = arrays[0], Q.unpack_qdense_weights(arrays[1], n, k)   # w signed, w_zero too (sizes[4])

            def expected_with(shift, x=x, w=w, arrays=arrays, sizes=sizes, dtype=expected.dtype):
                return dense_expected(x, w, arrays[2], arrays[3], shift, *sizes[3:8], dtype)
            cases.append(spread(case, expected_with))
    return cases


def depthwise_cases(seed):
    rng = np.random.default_rng(seed)
    cases = []
    for i, (n, c, h, w, kh, kw, stride, padding, dilation) in enumerate(DEPTHWISE):
        for j, (xd, wd, od) in enumerate(DTYPES):
            case = conv_case(rng, n, c, h, w, c, kh, kw, stride, padding, dilation, c, xd, wd, od,
                             X_ZEROS[xd][(i + j) % 4], 0 if (i + j) % 3 else {"int8": 3, "uint8": 128}[wd],
                             OUT_ZEROS[od][j % 3], per_channel=(i + j) % 2 == 0, relu=j == 1)
            assert case[0] == Q.DEPTHWISE
            _, arrays, sizes, expected = case
            x, wt = arrays[0], arrays[1].reshape(c, 1, kh, kw)   # signed weights, w_zero signed (sizes[15])

            def expected_with(shift, x=x, wt=wt, arrays=arrays, sizes=sizes, geometry=(stride, padding, dilation),
                              channels=c, dtype=expected.dtype):
                return conv_expected(x, wt, arrays[2], arrays[3], shift, *geometry, channels, *sizes[14:19], dtype)
            cases.append(spread(case, expected_with))
    return cases


def extreme_gemm_case():
    """-128 * -128 over k = 4099 (int16 sums would saturate)."""
    m, n, k = 5, 9, 4099
    x, w = np.full((m, k), -128, np.int8), np.full((n, k), -128, np.int8)
    bias, q, shift = np.zeros(n, np.int32), np.full(n, 1 << 30, np.int32), np.full(n, -24, np.int32)
    expected = finish(np.full((m, n), 128 * 128 * k, np.int64), q, shift, 0, -128, 127, np.int8)
    return Q.DENSE, [x, Q.pack_qdense_weights(w), bias, q, shift, np.zeros((m, n), np.int8)], \
        [m, n, k, 0, 0, 0, -128, 127, 0], expected


def extreme_depthwise_case(x_value, x_zero, w_value, w_zero):
    """Every x - x_zero and w - w_zero of magnitude 255 over an 8x8 kernel: sums of +-64 * 65025."""
    n, c, h, wd, k = 1, 2, 9, 10, 8
    x = np.full((n, c, h, wd), x_value, np.int8)
    w = np.full((c, 1, k, k), w_value, np.int8)
    bias, q, shift = np.array([5, -5], np.int32), np.full(c, 1 << 30, np.int32), np.full(c, -15, np.int32)
    expected = conv_expected(x, w, bias, q, shift, (1, 1), (0, 0, 0, 0), (1, 1), c, x_zero, w_zero, 0, -128, 127,
                             np.int8)
    oh, ow = expected.shape[2:]
    scratch = np.zeros(int(Q.depthwise_scratch_bytes(k, k, oh, ow)), np.uint8)
    sizes = [n, c, h, wd, k, k, oh, ow, 1, 1, 0, 0, 1, 1, x_zero, w_zero, 0, -128, 127, 0]
    return (Q.DEPTHWISE, [x, Q.pack_qdepthwise_weights(w), bias, q, shift, np.zeros(expected.shape, np.int8), scratch],
            sizes, expected)


def all_cases():
    return (gemm_cases(11) + [extreme_gemm_case()] + depthwise_cases(12)
            + [extreme_depthwise_case(-128, 127, -128, 127), extreme_depthwise_case(-128, 127, 127, -128)])


def test_the_extreme_cases_reach_the_largest_sums():
    """64 * 65025 * 2^-1 * 2^-15 = 63.5: outputs of 63 or 64 (by sign and bias), not clamped."""
    for w_value, w_zero, sign in ((-128, 127, 1), (127, -128, -1)):
        _, arrays, _, expected = extreme_depthwise_case(-128, 127, w_value, w_zero)
        assert np.abs(arrays[1].astype(np.int64) - w_zero).min() == 255
        assert set(np.unique(sign * expected.astype(np.int64))) <= {63, 64}, np.unique(expected)


def test_dsp_paths_match_the_mirror_on_cortex_m4(tmp_path):
    check_on_board(BOARD, all_cases(), tmp_path)


def test_generic_c_paths_match_the_mirror_on_cortex_m4(tmp_path):
    """The same cases built for the board copy without `dsp` (-U__ARM_FEATURE_DSP)."""
    board = kws_model.board_without_dsp(tmp_path)
    check_on_board(str(board), all_cases(), tmp_path)
