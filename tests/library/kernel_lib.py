"""Builds the GEMM-family kernels of runtime_c for the tests and calls them
with numpy arrays: in process through ctypes (host cc), or on an emulated
target through kernel_driver.c run under QEMU. Also makes random cases with
their numpy expectation (relax_edge.library.kernels references)."""

import ctypes
import subprocess
from pathlib import Path

import numpy as np

from relax_edge.library import kernels as K

ROOT = Path(__file__).resolve().parents[2]
RUNTIME = ROOT / "runtime_c"
SOURCES = [RUNTIME / "kernels" / "gemm.c", RUNTIME / "kernels" / "gemv.c", RUNTIME / "kernels" / "conv.c",
           RUNTIME / "src" / "status.c", RUNTIME / "src" / "threads.c"]
DRIVER = Path(__file__).with_name("kernel_driver.c")
WARNINGS = ["-std=c99", "-Wall", "-Wextra", "-pedantic", "-Werror"]
KIND = {"rxe_lib_dense_f32": 0, "rxe_lib_matmul_f32": 1, "rxe_lib_conv2d_f32": 2}
OUTPUT = {"rxe_lib_dense_f32": 3, "rxe_lib_matmul_f32": 2, "rxe_lib_conv2d_f32": 3}


def compile_c(cmd):
    proc = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"{' '.join(map(str, cmd))}\n{proc.stderr}"


class Error(ctypes.Structure):
    _fields_ = [("status", ctypes.c_int), ("message", ctypes.c_char * 256)]


class HostKernels:
    """The kernels built with the host cc into a shared library."""

    def __init__(self, out_dir: Path, flags=("-O3", "-march=native")):
        path = out_dir / "librxe_gemm.so"
        compile_c(["cc", *flags, *WARNINGS, "-shared", "-fPIC", "-pthread", f"-I{RUNTIME / 'include'}", *SOURCES,
                   "-o", path])
        self.lib = ctypes.CDLL(str(path))
        for symbol in KIND:
            fn = getattr(self.lib, symbol)
            fn.restype = ctypes.c_int

    def set_threads(self, n: int) -> int:
        return self.lib.rxe_threads_set_count(n)

    def call(self, symbol, arrays, sizes):
        """Call `symbol` on arrays (float32, C-contiguous, or None) and int
        sizes; returns (status, message). The output array is written."""
        err = Error()
        ptrs = [None if a is None else a.ctypes.data_as(ctypes.c_void_p) for a in arrays]
        status = getattr(self.lib, symbol)(*ptrs, *[ctypes.c_int64(s) for s in sizes], ctypes.byref(err))
        return status, err.message.decode()


def build_driver(compiler, flags, out: Path) -> Path:
    compile_c([compiler, *flags, *WARNINGS, "-static", "-DRXE_NO_THREADS", f"-I{RUNTIME / 'include'}", DRIVER,
               *SOURCES, "-o", out])
    return out


def run_driver(command, cases):
    """Run every case in one process of `command` (a list ending with the
    driver); returns each case's (status, output array)."""
    payload = bytearray()
    for symbol, arrays, sizes, _ in cases:
        payload += np.array([KIND[symbol], len(sizes), *sizes, len(arrays)], np.int64).tobytes()
        for a in arrays:
            payload += np.array([-1 if a is None else a.size], np.int64).tobytes()
            if a is not None:
                payload += a.tobytes()
    proc = subprocess.run([str(c) for c in command], input=bytes(payload), capture_output=True, timeout=120)
    assert proc.returncode == 0, proc.stderr.decode()
    results, data, pos = [], proc.stdout, 0
    for _ in cases:
        status, count = np.frombuffer(data, np.int64, 2, pos)
        pos += 16
        results.append((int(status), np.frombuffer(data, np.float32, count, pos)))
        pos += 4 * int(count)
    assert pos == len(data), "the driver wrote more than the cases' outputs"
    return results


# ------------------------------------------------------------------- cases

def _f32(rng, *shape):
    return rng.standard_normal(shape).astype(np.float32)


def dense_case(rng, m, n, k, act=0, bias=True):
    a, w = _f32(rng, m, k), _f32(rng, k, n)
    b = _f32(rng, n) if bias else None
    out = np.full((m, n), np.nan, np.float32)
    return ("rxe_lib_dense_f32", [a, K.pack_dense_weights(w), b, out], [m, n, k, act],
            K.dense_reference(a, w, b, act))


def matmul_case(rng, batch, m, n, k, a_shared=False, b_shared=False):
    a, b = _f32(rng, 1 if a_shared else batch, m, k), _f32(rng, 1 if b_shared else batch, k, n)
    out = np.full((batch, m, n), np.nan, np.float32)
    scratch = np.full(max(K.matmul_scratch_bytes(m, n, k) // 4, 1), np.nan, np.float32)
    sizes = [batch, m, n, k, 0 if a_shared else m * k, 0 if b_shared else k * n]
    return "rxe_lib_matmul_f32", [a, b, out, scratch], sizes, np.broadcast_to(K.matmul_reference(a, b), out.shape)


def conv_case(rng, n, c, h, w, o, kh, kw, stride=(1, 1), padding=(0, 0, 0, 0), dilation=(1, 1), groups=1, act=0,
              bias=True):
    x, wt = _f32(rng, n, c, h, w), _f32(rng, o, c // groups, kh, kw)
    b = _f32(rng, o) if bias else None
    expected = K.conv2d_reference(x, wt, b, stride, padding, dilation, groups, act)
    oh, ow = expected.shape[2:]
    out = np.full(expected.shape, np.nan, np.float32)
    scratch = np.full(max(K.conv2d_scratch_bytes(c, kh, kw, oh, ow, groups) // 4, 1), np.nan, np.float32)
    sizes = [n, c, h, w, o, kh, kw, oh, ow, *stride, padding[0], padding[1], *dilation, groups, act]
    return ("rxe_lib_conv2d_f32", [x, K.pack_conv2d_weights(wt, groups), b, out, scratch], sizes, expected)


def output_of(case):
    symbol, arrays, _, _ = case
    return arrays[OUTPUT[symbol]]


def depth_of(case):
    """The number of terms summed into each output element."""
    symbol, _, sizes, _ = case
    if symbol == "rxe_lib_conv2d_f32":
        return sizes[1] // sizes[15] * sizes[5] * sizes[6]
    return sizes[2] if symbol == "rxe_lib_dense_f32" else sizes[3]


def assert_close(actual, case):
    """Within float32 rounding of the case's sums of unit-normal products."""
    expected = case[3]
    np.testing.assert_allclose(np.asarray(actual).reshape(expected.shape), expected, rtol=1e-4,
                               atol=1e-5 * max(depth_of(case), 1) ** 0.5, err_msg=f"{case[0]} sizes {case[2]}")
