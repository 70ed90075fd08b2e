"""rxe_lib_depthwise_conv2d_f32 (runtime_c/kernels/depthwise.c) against the
numpy reference of relax_edge.library.depthwise: built with the host cc
(AVX2 with -march=native where the machine has it, and the generic C path)
and called through ctypes, and cross-compiled for aarch64 (the NEON path) and
run under qemu-aarch64. Also: the same bits for any thread count, and errors
for bad arguments."""

import ctypes
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from relax_edge.library.depthwise import DEPTHWISE_CONV2D, depthwise_conv2d_reference

ROOT = Path(__file__).resolve().parents[2]
RUNTIME = ROOT / "runtime_c"
SOURCES = [RUNTIME / "kernels" / "depthwise.c", RUNTIME / "src" / "threads.c", RUNTIME / "src" / "status.c"]
WARNINGS = ["-std=c99", "-Wall", "-Wextra", "-pedantic", "-Werror"]
RXE_ERR_SHAPE, RXE_ERR_NULL, RXE_ERR_INTERNAL = 4, 7, 10

# (n, c, h, w, kh, kw, stride, padding (top, left, bottom, right), dilation, act, bias)
CASES = {
    "1x1_spatial": (1, 4, 1, 1, 3, 3, (1, 1), (1, 1, 1, 1), (1, 1), 0, True),
    "odd_3x3_s1_p1_relu": (2, 3, 7, 9, 3, 3, (1, 1), (1, 1, 1, 1), (1, 1), 1, True),
    "3x3_s2_p1_relu6": (1, 5, 17, 18, 3, 3, (2, 2), (1, 1, 1, 1), (1, 1), 2, True),
    "3x3_s2_same_upper": (1, 3, 16, 40, 3, 3, (2, 2), (0, 0, 1, 1), (1, 1), 2, True),
    "3x3_s1_p0_wide": (1, 2, 6, 45, 3, 3, (1, 1), (0, 0, 0, 0), (1, 1), 0, False),
    "5x5_s1_p2": (1, 3, 11, 21, 5, 5, (1, 1), (2, 2, 2, 2), (1, 1), 1, True),
    "5x5_s2_p2": (2, 2, 13, 37, 5, 5, (2, 2), (2, 2, 2, 2), (1, 1), 0, True),
    "3x3_dilation2_p2": (1, 3, 13, 30, 3, 3, (1, 1), (2, 2, 2, 2), (2, 2), 0, True),
    "3x5_s2x1_dilation2x1": (1, 2, 12, 19, 3, 5, (2, 1), (1, 2, 1, 2), (2, 1), 2, True),
    "1x1_kernel_s2": (1, 3, 9, 20, 1, 1, (2, 2), (0, 0, 0, 0), (1, 1), 1, True),
    "3x3_s3_generic_stride": (1, 2, 14, 29, 3, 3, (3, 3), (1, 1, 1, 1), (1, 1), 0, True),
    "kernel_wider_than_input": (1, 2, 3, 2, 3, 5, (1, 1), (1, 2, 1, 2), (1, 1), 0, True),
    "mobilenet_7x7": (1, 16, 7, 7, 3, 3, (1, 1), (1, 1, 1, 1), (1, 1), 2, True),
    # 3x3 rows around the 8-column blocks of the AVX2 path: masked edges, partial last blocks
    "3x3_s1_w8": (1, 2, 5, 8, 3, 3, (1, 1), (1, 1, 1, 1), (1, 1), 2, True),
    "3x3_s1_w17": (1, 2, 4, 17, 3, 3, (1, 1), (1, 1, 1, 1), (1, 1), 0, True),
    "3x3_s2_w16": (1, 2, 6, 16, 3, 3, (2, 2), (1, 1, 1, 1), (1, 1), 1, True),
    "3x3_s2_w35": (1, 2, 5, 35, 3, 3, (2, 2), (1, 1, 1, 1), (1, 1), 2, True),
    "3x3_s2_h1_w9": (1, 3, 1, 9, 3, 3, (2, 2), (1, 1, 1, 1), (1, 1), 0, True),
    "3x3_pad2_rows_outside": (1, 2, 2, 11, 3, 3, (1, 1), (2, 2, 2, 2), (1, 1), 0, True),
    "3x3_s1_pad9_wide_borders": (1, 1, 3, 4, 3, 3, (1, 1), (9, 9, 9, 9), (1, 1), 0, True),
    "3x3_s2x1": (1, 2, 9, 20, 3, 3, (2, 1), (1, 1, 1, 1), (1, 1), 2, True),
    # rows narrower than a block: a row's last block writes over the rows after it, later rewritten
    "3x3_s1_w2_rows_spill": (2, 3, 9, 2, 3, 3, (1, 1), (1, 1, 1, 1), (1, 1), 1, True),
    # rows too wide for the kernel's zero-padded row copy: borders computed in place
    "wide_rows_s1_p1": (1, 2, 5, 1500, 3, 3, (1, 1), (1, 1, 1, 1), (1, 1), 1, True),
    "wide_rows_s2_p1": (1, 2, 6, 1401, 3, 3, (2, 2), (1, 1, 1, 1), (1, 1), 0, True),
}


def compile_c(cmd):
    proc = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"{' '.join(map(str, cmd))}\n{proc.stderr}"


def make_case(name, seed=0):
    n, c, h, w, kh, kw, stride, padding, dilation, act, has_bias = CASES[name]
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, c, h, w)).astype(np.float32)
    wt = rng.standard_normal((c, 1, kh, kw)).astype(np.float32)
    bias = rng.standard_normal(c).astype(np.float32) if has_bias else None
    expected = depthwise_conv2d_reference(x, wt, bias, stride, padding, dilation, act)
    oh, ow = expected.shape[2:]
    sizes = [n, c, h, w, kh, kw, oh, ow, *stride, padding[0], padding[1], *dilation, act]
    assert len(sizes) == len(DEPTHWISE_CONV2D.sizes)
    return x, wt, bias, sizes, expected


def assert_close(actual, expected, taps):
    np.testing.assert_allclose(actual, expected, rtol=1e-5, atol=1e-6 * taps ** 0.5)


class Error(ctypes.Structure):
    _fields_ = [("status", ctypes.c_int), ("message", ctypes.c_char * 256)]


class HostDepthwise:
    """The kernel, the thread pool and status.c in a shared library."""

    def __init__(self, path: Path, flags):
        compile_c(["cc", *flags, *WARNINGS, "-shared", "-fPIC", "-pthread", f"-I{RUNTIME / 'include'}", *SOURCES,
                   "-o", path])
        self.lib = ctypes.CDLL(str(path))
        self.lib.rxe_threads_set_count.argtypes = [ctypes.c_int]

    def __call__(self, x, w, bias, sizes, out_shape, threads=1):
        self.lib.rxe_threads_set_count(threads)
        y = np.full(out_shape, np.nan, np.float32)
        ptrs = [None if a is None else a.ctypes.data_as(ctypes.c_void_p) for a in (x, w, bias, y)]
        err = Error()
        status = self.lib.rxe_lib_depthwise_conv2d_f32(*ptrs, *map(ctypes.c_int64, sizes), ctypes.byref(err))
        return status, err.message.decode(), y


@pytest.fixture(scope="module", params=[("-O3", "-march=native"), ("-O2",)], ids=["native_O3", "baseline_O2"])
def kernel(request, tmp_path_factory):
    lib = HostDepthwise(tmp_path_factory.mktemp("depthwise") / "librxe_depthwise.so", request.param)
    yield lib
    lib.lib.rxe_threads_shutdown()


@pytest.mark.parametrize("name", list(CASES))
def test_matches_numpy(kernel, name):
    x, w, bias, sizes, expected = make_case(name)
    status, message, y = kernel(x, w, bias, sizes, expected.shape)
    assert status == 0, message
    assert_close(y, expected, w.shape[2] * w.shape[3])


@pytest.mark.parametrize("shape", [(1, 32, 56, 56, 2), (2, 24, 29, 31, 1), (1, 3, 150, 71, 2), (1, 400, 7, 3, 1)],
                         ids=["32x56x56_s2", "2x24x29x31_s1", "3x150x71_s2", "400x7x3_s1_planes_split"])
def test_threads_give_the_same_bits(kernel, shape):
    n, c, h, w, stride = shape
    rng = np.random.default_rng(1)
    x = rng.standard_normal((n, c, h, w)).astype(np.float32)
    wt = rng.standard_normal((c, 1, 3, 3)).astype(np.float32)
    bias = rng.standard_normal(c).astype(np.float32)
    expected = depthwise_conv2d_reference(x, wt, bias, (stride, stride), (1, 1, 1, 1), (1, 1), 2)
    sizes = [n, c, h, w, 3, 3, *expected.shape[2:], stride, stride, 1, 1, 1, 1, 2]
    results = []
    for threads in (1, 2, 3):
        status, message, y = kernel(x, wt, bias, sizes, expected.shape, threads)
        assert status == 0, message
        results.append(y)
    assert_close(results[0], expected, 9)
    for y in results[1:]:
        assert np.array_equal(y.view(np.uint32), results[0].view(np.uint32))


def test_bad_arguments_are_errors(kernel):
    x, w, bias, sizes, expected = make_case("odd_3x3_s1_p1_relu")
    status, message, _ = kernel(x, w, bias, sizes[:-1] + [3], expected.shape)
    assert status == RXE_ERR_INTERNAL and "act 3" in message, message
    status, message, _ = kernel(x, w, bias, sizes[:4] + [0] + sizes[5:], expected.shape)
    assert status == RXE_ERR_SHAPE and "kh 0" in message, message
    status, message, _ = kernel(x, w, bias, sizes[:8] + [0] + sizes[9:], expected.shape)
    assert status == RXE_ERR_SHAPE and "stride (0, 1)" in message, message
    status, message, _ = kernel(None, w, bias, sizes, expected.shape)
    assert status == RXE_ERR_NULL and "NULL" in message, message


DRIVER = r"""
/* stdin: records of 15 int64 sizes, int64 threads, int64 has_bias, then x,
 * w and (if has_bias) bias as floats; stdout: per record int64 status and
 * the output floats. */
#include <stdio.h>
#include <stdlib.h>
#include "relax_edge/kernels.h"
#include "relax_edge/threads.h"

static float* read_floats(int64_t count) {
  float* p = (float*)malloc((size_t)count * sizeof(float) + 1);
  if (p == NULL || fread(p, sizeof(float), (size_t)count, stdin) != (size_t)count) exit(2);
  return p;
}

int main(void) {
  int64_t s[17];
  while (fread(s, sizeof(int64_t), 17, stdin) == 17) {
    int64_t n = s[0], c = s[1], out = n * c * s[6] * s[7];
    float *x = read_floats(n * c * s[2] * s[3]), *w = read_floats(c * s[4] * s[5]);
    float *bias = s[16] ? read_floats(c) : NULL, *y = (float*)malloc((size_t)out * sizeof(float) + 1);
    rxe_error_t err;
    int64_t status;
    rxe_threads_set_count((int)s[15]);
    status = rxe_lib_depthwise_conv2d_f32(x, w, bias, y, s[0], s[1], s[2], s[3], s[4], s[5], s[6], s[7], s[8],
                                          s[9], s[10], s[11], s[12], s[13], s[14], &err);
    fwrite(&status, sizeof status, 1, stdout);
    fwrite(y, sizeof(float), (size_t)out, stdout);
    free(x);
    free(w);
    free(bias);
    free(y);
  }
  return 0;
}
"""


@pytest.mark.emu
def test_neon_path_under_qemu_aarch64(tmp_path):
    """Every case, on one and two threads, in one process under qemu-aarch64."""
    for tool in ("aarch64-linux-gnu-gcc", "qemu-aarch64"):
        assert shutil.which(tool), f"{tool} is missing: scripts/setup.sh installs it"
    (tmp_path / "driver.c").write_text(DRIVER)
    cc = ["aarch64-linux-gnu-gcc", "-O2", "-mcpu=cortex-a72", *WARNINGS, "-pthread", f"-I{RUNTIME / 'include'}"]
    compile_c([*cc, "-c", SOURCES[0], "-o", tmp_path / "depthwise.o"])
    disassembly = subprocess.run(["aarch64-linux-gnu-objdump", "-d", tmp_path / "depthwise.o"], capture_output=True,
                                 text=True).stdout
    assert "fmla\tv" in disassembly, "no NEON multiply-add in the aarch64 kernel"
    exe = tmp_path / "driver"
    compile_c([*cc, "-static", tmp_path / "driver.c", tmp_path / "depthwise.o", *SOURCES[1:], "-o", exe])
    cases, payload = [], bytearray()
    for name in CASES:
        for threads in (1, 2):
            x, w, bias, sizes, expected = make_case(name)
            cases.append((expected, w.shape[2] * w.shape[3]))
            payload += np.array([*sizes, threads, bias is not None], np.int64).tobytes()
            payload += x.tobytes() + w.tobytes() + (b"" if bias is None else bias.tobytes())
    proc = subprocess.run(["qemu-aarch64", exe], input=bytes(payload), capture_output=True, timeout=120)
    assert proc.returncode == 0, proc.stderr.decode()
    data, pos = proc.stdout, 0
    for expected, taps in cases:
        status = int(np.frombuffer(data, np.int64, 1, pos)[0])
        y = np.frombuffer(data, np.float32, expected.size, pos + 8).reshape(expected.shape)
        pos += 8 + 4 * expected.size
        assert status == 0
        assert_close(y, expected, taps)
    assert pos == len(data)
