"""rxe_lib_qconv2d_s8 (im2col into the int8 GEMM, a transpose for 1x1) and
rxe_lib_qdepthwise_conv2d_s8 (3x3 interior path and the generic
loop) against a numpy mirror of the contract: strides, padding (x_zero is
the padded value), dilation, groups, int8 / uint8 in and out, zero points,
per-tensor and per-channel, fused clamps, more pixels than one im2col block.
On the host in three builds and under QEMU in one driver run per board."""

import numpy as np
import pytest

from relax_edge.ir.shape import SizeVar, as_expr
from relax_edge.library import qint8 as Q
from tests.library.qint8_lib import INT32_MIN, HostKernels, check, check_on_board, conv_case, requant
from tests.library.test_qgemm import HOST_BUILDS, edge_requantizations


@pytest.fixture(scope="module", params=list(HOST_BUILDS))
def kernels(request, tmp_path_factory):
    return HostKernels(tmp_path_factory.mktemp("qconv") / f"libqconv_{request.param}.so", HOST_BUILDS[request.param])


# (n, c, h, w, o, kh, kw, stride, padding, dilation, groups)
CONVS = [
    (1, 3, 9, 9, 8, 3, 3, (2, 2), (1, 1, 1, 1), (1, 1), 1),      # a first layer
    (2, 5, 7, 6, 9, 3, 3, (1, 1), (1, 0, 2, 1), (1, 1), 1),      # asymmetric padding, batch 2
    (1, 6, 10, 11, 4, 3, 2, (1, 2), (0, 1, 0, 1), (2, 1), 2),    # dilation, groups
    (1, 16, 12, 12, 24, 1, 1, (1, 1), (0, 0, 0, 0), (1, 1), 1),  # 1x1: a transpose (144 pixels)
    (1, 7, 5, 5, 3, 1, 1, (1, 1), (0, 0, 0, 0), (1, 1), 1),      # 1x1, c not a multiple of 4
    (1, 8, 9, 9, 8, 1, 1, (2, 2), (0, 0, 0, 0), (1, 1), 1),      # 1x1 of stride 2: im2col
    (1, 4, 13, 13, 5, 5, 5, (1, 1), (2, 2, 2, 2), (1, 1), 1),    # 169 pixels: three im2col blocks
    (1, 2, 1, 1, 3, 1, 1, (1, 1), (0, 0, 0, 0), (1, 1), 1),      # K = 2, one pixel
    (1, 6, 5, 4, 4, 1, 1, (1, 1), (0, 0, 0, 0), (1, 1), 2),      # 1x1 in groups
    (1, 5, 6, 70, 40, 3, 3, (1, 1), (1, 1, 1, 1), (1, 1), 1),    # rows of 70: blocks of 64 + 6 columns; 5 panels
    (1, 24, 10, 9, 20, 1, 1, (1, 1), (0, 1, 0, 0), (1, 1), 1),   # 1x1 padded: the slice's zero column
]
DEPTHWISE = [
    (1, 8, 9, 9, 8, 3, 3, (1, 1), (1, 1, 1, 1), (1, 1), 8),
    (2, 5, 10, 7, 5, 3, 3, (2, 2), (1, 1, 1, 1), (1, 1), 5),
    (1, 3, 8, 8, 3, 3, 3, (1, 1), (0, 0, 0, 0), (2, 2), 3),      # dilated: the generic loop
    (1, 4, 6, 9, 4, 5, 2, (1, 2), (2, 0, 1, 1), (1, 1), 4),
    (1, 2, 3, 3, 2, 3, 3, (1, 1), (2, 2, 2, 2), (1, 1), 2),      # every tap bounds-checked
    (1, 3, 21, 40, 3, 3, 3, (2, 2), (1, 1, 1, 1), (1, 1), 3),    # stride 2 over blocks of 256 outputs
    (1, 2, 9, 11, 2, 3, 3, (3, 2), (0, 2, 1, 0), (1, 2), 2),     # strides 3 x 2 (phases), dilated columns
]
DTYPES = [("int8", "int8", "int8"), ("uint8", "int8", "uint8"), ("uint8", "uint8", "uint8"), ("int8", "uint8", "int8")]


def cases(shapes, seed):
    rng = np.random.default_rng(seed)
    out = []
    for i, (n, c, h, w, o, kh, kw, stride, padding, dilation, groups) in enumerate(shapes):
        for j, (xd, wd, od) in enumerate(DTYPES):
            x_zero = {"int8": [0, -128, 9, 127][(i + j) % 4], "uint8": [128, 0, 255, 60][(i + j) % 4]}[xd]
            w_zero = 0 if (i + j) % 3 else {"int8": 3, "uint8": 128}[wd]
            out_zero = {"int8": [0, -5, 17][j % 3], "uint8": [128, 3, 250][j % 3]}[od]
            out.append(conv_case(rng, n, c, h, w, o, kh, kw, stride, padding, dilation, groups, xd, wd, od,
                                 x_zero, w_zero, out_zero, per_channel=(i + j) % 2 == 0, relu=j == 1))
    return out


def test_conv_matches_the_mirror(kernels):
    for case in cases(CONVS, 1):
        check(case, kernels.run(case))


def test_depthwise_matches_the_mirror(kernels):
    for case in cases(DEPTHWISE, 2):
        assert case[0] == Q.DEPTHWISE
        check(case, kernels.run(case))


def depthwise_edge_case():
    """A 1x1 depthwise of zero weights over 8 x 8 pixels, so that every output of channel c is requant(bias[c]):
    the edge multipliers, shifts and ties through the depthwise requantization's 16- and 8-lane loops."""
    acc, q, shift = edge_requantizations()
    keep = (np.abs(acc) < (1 << 30)) & (shift <= 0) & (q != INT32_MIN)
    bias, q, shift = acc[keep].astype(np.int32), q[keep].astype(np.int32), shift[keep].astype(np.int32)
    c = bias.size
    x, w, out = np.zeros((1, c, 8, 8), np.int8), np.zeros((c, 1, 1, 1), np.int8), np.zeros((1, c, 8, 8), np.int8)
    expected = np.broadcast_to(np.clip(requant(bias, q, shift), -128, 127).astype(np.int8)[None, :, None, None],
                               out.shape)
    scratch = np.zeros(int(Q.depthwise_scratch_bytes(1, 1, 8, 8, (1, 1), (1, 1), c, 8, 8)), np.uint8)
    sizes = [1, c, 8, 8, 1, 1, 8, 8, 1, 1, 0, 0, 1, 1, 0, 0, 0, -128, 127, 0]
    return Q.DEPTHWISE, [x, Q.pack_qdepthwise_weights(w), bias, q, shift, out, scratch], sizes, expected


def test_depthwise_requantizes_edge_values(kernels):
    case = depthwise_edge_case()
    check(case, kernels.run(case))


def test_a_missing_scratch_is_an_error(kernels):
    for kernel in (1, 3):
        symbol, arrays, sizes, _ = conv_case(np.random.default_rng(3), 1, 16, 6, 6, 8, kernel, kernel)
        status, message = kernels.call(symbol, [*arrays[:6], None], sizes)
        assert status == 7 and "scratch is NULL" in message
    symbol, arrays, sizes, _ = conv_case(np.random.default_rng(3), 1, 8, 6, 6, 8, 3, 3, groups=8)
    assert symbol == Q.DEPTHWISE
    status, message = kernels.call(symbol, [*arrays[:6], None], sizes)
    assert status == 7 and message == "rxe_lib_qdepthwise_conv2d_s8: scratch is NULL"


def test_bad_sizes_are_errors(kernels):
    symbol, arrays, sizes, _ = conv_case(np.random.default_rng(4), 1, 6, 5, 5, 4, 3, 3, groups=2)
    status, message = kernels.call(symbol, arrays, [*sizes[:15], 4, *sizes[16:]])   # groups 4 does not divide 6
    assert status == 4 and "groups 4" in message
    symbol, arrays, sizes, _ = conv_case(np.random.default_rng(4), 1, 2, 12, 12, 2, 9, 9, groups=2)
    assert symbol == Q.DEPTHWISE
    status, message = kernels.call(symbol, arrays, sizes)
    assert status == 4 and "at most 64 taps" in message


def test_packed_groups_follow_one_another():
    w = np.random.default_rng(5).integers(-128, 128, (6, 3, 2, 2)).astype(np.int8)
    packed = Q.pack_qconv2d_weights(w, 2)
    one = Q.packed_bytes(3, 12)
    assert packed.size == 2 * one
    # k in the order (ky, kx, ci)
    np.testing.assert_array_equal(Q.unpack_qdense_weights(packed[one:], 3, 12),
                                  w[3:].transpose(0, 2, 3, 1).reshape(3, 12))


def test_scratch_bytes_are_one_block_of_pixels():
    # 64 columns of a 112-wide row: the slice 3 rows x (63*2+3) columns x 3 channels, then 64 im2col rows
    assert Q.conv_scratch_bytes(3, 3, 3, 112, 112, (2, 2)) == 3 * 129 * 3 + 64 * 27
    # all 25 pixels (5 rows of 5): the slice 7 x 7, then 25 rows of 9
    assert Q.conv_scratch_bytes(1, 3, 3, 5, 5) == 49 + 25 * 9
    # 1x1 stride 1: the slice only (8 rows of 8 pixels x 16 channels)
    assert Q.conv_scratch_bytes(16, 1, 1, 56, 8) == 8 * 8 * 16
    # a symbolic width: a bound over every width (64 pixels x 16 channels at most)
    bound = as_expr(Q.conv_scratch_bytes(16, 1, 1, 56, SizeVar("w")))
    assert bound.is_const and bound.value == (64 * 3 + 1) * 16 >= 64 * 16


EMULATED = ["qemu-aarch64", "qemu-aarch64-dotprod", "qemu-armv7", "qemu-riscv64", "qemu-cortex-m4"]


@pytest.mark.emu
@pytest.mark.parametrize("board_name", EMULATED)
def test_emulated_convolutions_match_the_mirror(tmp_path, board_name):
    check_on_board(board_name, cases(CONVS[:5] + CONVS[6:], 6) + cases(DEPTHWISE, 7) + [depthwise_edge_case()],
                   tmp_path)
