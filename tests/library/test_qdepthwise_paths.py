"""rxe_lib_qdepthwise_conv2d_s8's two paths (runtime_c/kernels/qconv.c): small
output planes channels last (16 channels per vector, groups of channels over
the thread pool), larger ones or more than 25 taps per channel over phase
planes. Both against the numpy mirror of the contract (tests/library/qint8_lib.py)
in the three host builds: channel counts off the multiples of 16, MobileNetV2's
shapes, 5x5 kernels, dilation, strides, int8 / uint8, 1 to 3 threads; and the
scratch each path is given."""

import numpy as np
import pytest

from relax_edge.ir.shape import SizeVar, as_expr
from relax_edge.library import qint8 as Q
from tests.library.qint8_lib import HostKernels, check, conv_case
from tests.library.test_qgemm import HOST_BUILDS


@pytest.fixture(scope="module", params=list(HOST_BUILDS))
def kernels(request, tmp_path_factory):
    lib = HostKernels(tmp_path_factory.mktemp("qdw") / f"libqdw_{request.param}.so", HOST_BUILDS[request.param])
    yield lib
    lib.set_threads(1)


# (n, c, h, w, kh, kw, stride, padding, dilation), the path
SHAPES = [
    ((1, 960, 7, 7, 3, 3, (1, 1), (1, 1, 1, 1), (1, 1)), True),      # MobileNetV2's last blocks
    ((1, 144, 56, 56, 3, 3, (2, 2), (0, 0, 1, 1), (1, 1)), True),    # 28x28 of stride 2, padding after
    ((2, 21, 9, 8, 3, 3, (1, 1), (1, 1, 1, 1), (1, 1)), True),       # 21 channels: a group of 5 lanes
    ((1, 17, 12, 11, 5, 5, (2, 1), (2, 2, 1, 2), (1, 1)), True),     # 5x5
    ((1, 18, 10, 10, 3, 3, (1, 1), (2, 2, 2, 2), (2, 2)), True),     # dilated
    ((1, 5, 4, 3, 3, 3, (1, 1), (3, 3, 3, 3), (1, 1)), True),        # pixels with no tap inside
    ((1, 3, 20, 20, 6, 6, (1, 1), (2, 2, 3, 3), (1, 1)), False),     # 36 taps: the phase planes
    ((1, 5, 40, 36, 3, 3, (1, 1), (1, 1, 1, 1), (1, 1)), False),     # 1440 pixels: the phase planes
    ((1, 7, 69, 66, 3, 3, (2, 2), (0, 0, 1, 1), (1, 1)), False),     # 1122 pixels of stride 2: the planes
]
DTYPES = [("uint8", "int8", "uint8"), ("int8", "int8", "int8"), ("int8", "uint8", "uint8"), ("uint8", "uint8", "int8")]


def cases(seed):
    rng = np.random.default_rng(seed)
    out = []
    for i, ((n, c, h, w, kh, kw, stride, padding, dilation), nhwc) in enumerate(SHAPES):
        oh = (h + padding[0] + padding[2] - dilation[0] * (kh - 1) - 1) // stride[0] + 1
        ow = (w + padding[1] + padding[3] - dilation[1] * (kw - 1) - 1) // stride[1] + 1
        assert Q.depthwise_nhwc(kh, kw, oh, ow) is nhwc
        xd, wd, od = DTYPES[i % len(DTYPES)]
        x_zero = {"int8": [-7, 127, -128][i % 3], "uint8": [0, 131, 255][i % 3]}[xd]
        w_zero = 0 if i % 2 else {"int8": -4, "uint8": 127}[wd]
        out_zero = {"int8": [3, -128][i % 2], "uint8": [0, 200][i % 2]}[od]
        out.append(conv_case(rng, n, c, h, w, c, kh, kw, stride, padding, dilation, c, xd, wd, od, x_zero, w_zero,
                             out_zero, per_channel=i % 3 != 2, relu=i % 2 == 0))
    return out


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_both_paths_match_the_mirror(kernels, threads):
    kernels.set_threads(threads)
    for case in cases(threads):
        assert case[0] == Q.DEPTHWISE
        check(case, kernels.run(case))
    kernels.set_threads(1)


def test_scratch_of_each_path():
    # channels last: the 56x56 image, 144 channels (a multiple of 16)
    assert Q.depthwise_scratch_bytes(3, 3, 28, 28, (2, 2), c=144, h=56, w=56) == 56 * 56 * 144
    # 21 channels padded to 32
    assert Q.depthwise_scratch_bytes(3, 3, 9, 8, c=21, h=9, w=8) == 9 * 8 * 32
    # a 56x56 output: one channel's planes, (56+2+1) x (56+2) int16
    assert Q.depthwise_scratch_bytes(3, 3, 56, 56) == 59 * 58 * 2
    # symbolic: both, a bound for either path
    with pytest.raises(ValueError, match="needs the input's c, h and w"):
        Q.depthwise_scratch_bytes(3, 3, 7, 7)
    bound = as_expr(Q.depthwise_scratch_bytes(3, 3, SizeVar("h"), 8, c=8, h=SizeVar("h"), w=8))
    assert not bound.is_const


def test_planes_only_flag_keeps_the_kernel_on_the_planes(kernels):
    """With RXE_QINT8_DW_PLANES_ONLY in dtypes (what the lowering passes for a target whose kernel takes the
    planes for every size) a small plane runs over the phase planes in a scratch of their size alone: the
    mirror's output, and nothing written past that scratch."""
    canary, smaller = 64, 0
    for case in cases(7)[:6]:
        symbol, arrays, sizes, expected = case
        n, c, h, w, kh, kw, oh, ow, sh, sw, _, _, dh, dw = sizes[:14]
        planes = Q.depthwise_scratch_bytes(kh, kw, oh, ow, (sh, sw), (dh, dw), planes_only=True)
        smaller += planes < Q.depthwise_scratch_bytes(kh, kw, oh, ow, (sh, sw), (dh, dw), c=c, h=h, w=w)
        arrays = list(arrays)
        arrays[6] = np.full(planes + canary, 0x33, np.uint8)
        sizes = [*sizes[:-1], sizes[-1] | Q.DW_PLANES_ONLY]
        check((symbol, arrays, sizes, expected), kernels.run((symbol, arrays, sizes, expected)))
        assert (arrays[6][planes:] == 0x33).all(), f"{sizes}: the kernel wrote past the planes"
    assert smaller >= 4   # most of these small planes would have taken the larger channels-last scratch
