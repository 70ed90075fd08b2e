"""rxe_lib_conv2d_f32 against numpy: 1x1 (the pointwise path: packed, or
whole panels read in place and a last partial one packed), 3x3, 7x7, strides, asymmetric
padding, dilation, groups 1, 2 and c, blocks larger than KC and NC, thread
counts, errors, the weight packer and the scratch mirror; and the NEON
(aarch64) and generic C (riscv64) paths under QEMU."""

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
    conv_case,
    output_of,
    run_driver,
)

RXE_ERR_SHAPE, RXE_ERR_INTERNAL = 4, 10

# id -> (n, c, h, w, o, kh, kw, keyword arguments of conv_case)
CONVS = {
    "1x1": (2, 16, 7, 9, 33, 1, 1, {}),
    "1x1_in_place": (2, 260, 4, 8, 13, 1, 1, {"act": 2}),
    "1x1_in_place_wide": (1, 8, 24, 24, 9, 1, 1, {"bias": False}),
    "1x1_partial_beyond_kc_and_nc": (1, 300, 23, 25, 7, 1, 1, {"act": 1}),
    "1x1_partial_groups2": (2, 6, 9, 9, 4, 1, 1, {"groups": 2}),
    "1x1_under_one_panel": (1, 5, 3, 3, 7, 1, 1, {}),
    "1x1_stride2": (1, 8, 9, 9, 7, 1, 1, {"stride": (2, 2)}),
    "1x1_padded": (1, 3, 4, 5, 17, 1, 1, {"padding": (1, 0, 1, 2)}),
    "3x3_same": (1, 3, 17, 17, 16, 3, 3, {"padding": (1, 1, 1, 1), "act": 1}),
    "3x3_stride2_asymmetric_pad": (2, 5, 16, 15, 12, 3, 3, {"stride": (2, 2), "padding": (0, 1, 1, 0), "act": 2}),
    "3x3_stride_2x1_dilated": (1, 4, 13, 21, 9, 3, 3, {"stride": (2, 1), "padding": (2, 2, 2, 2),
                                                      "dilation": (2, 2)}),
    "3x3_wide_rows": (1, 4, 5, 40, 7, 3, 3, {"padding": (1, 1, 1, 1)}),
    "7x7_stride2": (1, 3, 33, 33, 8, 7, 7, {"stride": (2, 2), "padding": (3, 3, 3, 3), "act": 1}),
    "7x7_whole_input": (3, 2, 7, 7, 5, 7, 7, {"bias": False}),
    "1x5_dilated_width": (1, 2, 6, 30, 3, 1, 5, {"dilation": (1, 3), "act": 2}),
    "groups2": (1, 8, 10, 12, 6, 3, 3, {"groups": 2, "padding": (1, 1, 1, 1)}),
    "depthwise": (2, 5, 9, 9, 5, 3, 3, {"groups": 5, "padding": (1, 1, 1, 1), "act": 2}),
    "depthwise_multiplier2": (1, 4, 8, 8, 8, 3, 3, {"groups": 4, "stride": (2, 2), "padding": (1, 1, 0, 0)}),
    "beyond_kc_and_nc": (1, 64, 20, 27, 70, 3, 3, {"padding": (1, 1, 1, 1), "act": 1}),
    "empty_kernel_window": (1, 0, 4, 4, 3, 3, 3, {"act": 1}),
}


def run_case(kernels, case):
    symbol, arrays, sizes, _ = case
    status, message = kernels.call(symbol, arrays, sizes)
    assert status == 0, message
    return output_of(case)


@pytest.mark.parametrize("name", list(CONVS))
def test_conv2d_matches_numpy(host_kernels, name):
    *shape, options = CONVS[name]
    case = conv_case(np.random.default_rng(len(name)), *shape, **options)
    assert_close(run_case(host_kernels, case), case)


@pytest.mark.parametrize("name", ["1x1", "1x1_in_place", "1x1_partial_beyond_kc_and_nc", "3x3_same",
                                  "beyond_kc_and_nc", "groups2"])
def test_two_threads_give_the_same_bits_as_one(host_kernels, name):
    *shape, options = CONVS[name]
    case = conv_case(np.random.default_rng(9), *shape, **options)
    one = run_case(host_kernels, case).copy()
    previous = host_kernels.set_threads(2)
    try:
        output_of(case).fill(np.nan)
        two = run_case(host_kernels, case)
    finally:
        host_kernels.set_threads(previous)
    assert one.tobytes() == two.tobytes()
    assert_close(two, case)


def test_conv2d_errors_name_the_kernel_and_the_value(host_kernels):
    symbol, arrays, sizes, _ = conv_case(np.random.default_rng(10), 1, 4, 5, 5, 6, 3, 3, groups=2)
    status, message = host_kernels.call(symbol, arrays, sizes[:16] + [5])
    assert (status, message) == (RXE_ERR_INTERNAL,
                                 "rxe_lib_conv2d_f32: act 5 is not 0 (none), 1 (relu) or 2 (relu6)")
    status, message = host_kernels.call(symbol, arrays, sizes[:15] + [3, 0])
    assert (status, message) == (RXE_ERR_SHAPE, "rxe_lib_conv2d_f32: groups 3 must divide the input channels 4 "
                                                "and the outputs 6")
    status, message = host_kernels.call(symbol, arrays, sizes[:9] + [0] + sizes[10:])
    assert status == RXE_ERR_SHAPE and message.startswith("rxe_lib_conv2d_f32: strides (0, 1)")


def test_conv2d_packing_layout_and_inverse():
    o, cg, kh, kw, groups = 14, 3, 2, 2, 2
    w = np.random.default_rng(11).standard_normal((o, cg, kh, kw)).astype(np.float32)
    packed = K.pack_conv2d_weights(w, groups)
    og, depth, panels = 7, cg * kh * kw, 2
    assert packed.dtype == np.float32 and packed.shape == (groups * panels * depth * K.MR,)
    matrix = w.reshape(groups, og, depth)
    for g, panel, col, row in itertools.product(range(groups), range(panels), range(depth), range(K.MR)):
        i = panel * K.MR + row
        assert packed[((g * panels + panel) * depth + col) * K.MR + row] == (matrix[g, i, col] if i < og else 0.0)
    np.testing.assert_array_equal(K.unpack_conv2d_weights(packed, w.shape, groups), w)
    with pytest.raises(ValueError, match="groups 4 does not divide the 14 output channels"):
        K.pack_conv2d_weights(w, 4)


def test_scratch_bytes_mirror_the_c_macro(tmp_path):
    shapes = [(3, 3, 3, 112, 112, 1), (64, 1, 1, 7, 7, 1), (32, 3, 3, 10, 10, 32), (512, 3, 3, 1, 1, 2)]
    program = tmp_path / "scratch.c"
    program.write_text('#include <stdio.h>\n#include "relax_edge/kernels.h"\nint main(void) {\n' + "".join(
        f'  printf("%llu\\n", (unsigned long long)RXE_LIB_CONV2D_SCRATCH_BYTES({", ".join(map(str, s))}));\n'
        for s in shapes) + "  return 0;\n}\n")
    compile_c(["cc", *WARNINGS, f"-I{RUNTIME / 'include'}", program, "-o", tmp_path / "scratch"])
    c_values = [int(v) for v in subprocess.run([tmp_path / "scratch"], capture_output=True, text=True,
                                               check=True).stdout.split()]
    assert c_values == [K.conv2d_scratch_bytes(*s) for s in shapes]
    names = [SizeVar(v) for v in ("c", "kh", "kw", "oh", "ow", "groups")]
    symbolic = K.conv2d_scratch_bytes(*names)
    for shape, value in zip(shapes, c_values):
        assert evaluate(symbolic, dict(zip(names, shape))) == value


EMULATED = ["qemu-aarch64", "qemu-riscv64"]   # the NEON and the generic C paths


@pytest.mark.parametrize("board_name", EMULATED)
def test_emulated_target_matches_numpy(tmp_path, board_name):
    board = load_board(board_name)
    driver = build_driver(board.target.compiler, list(board.target.cflags), tmp_path / "driver")
    cases = [conv_case(np.random.default_rng(12), *CONVS[name][:7], **CONVS[name][7])
             for name in ("1x1", "1x1_in_place", "3x3_stride2_asymmetric_pad", "groups2", "3x3_wide_rows")]
    for case, (status, out) in zip(cases, run_driver([*board.qemu["command"], driver], cases)):
        assert status == 0, f"{case[0]} {case[2]}: status {status}"
        assert_close(out, case)
