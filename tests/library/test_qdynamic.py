"""rxe_lib_dynamic_qdense_f32 and rxe_lib_matmul_integer_i32
(runtime_c/kernels/qdynamic.c on qgemm.c's 32-bit output mode) against numpy
mirrors written from the ONNX definitions: DynamicQuantizeLinear from
onnx.reference, MatMulInteger as an int64 matmul, then the chain's float32
Cast / Mul / Add. Shapes off the tiles (N not a multiple of 8 or 32, K not a
multiple of 4, one row), int8 and uint8 x, zero and per-column weight zero
points, one and two threads; on the host in three builds (-march=native:
AVX-512 VNNI here; AVX2; portable C)."""

import ctypes

import numpy as np
import pytest
from onnx.reference.ops.op_dynamic_quantize_linear import DynamicQuantizeLinear

from relax_edge.library import qdynamic as QD
from relax_edge.library.qint8 import pack_qdense_weights
from tests.library.qint8_lib import RUNTIME, WARNINGS, Error, compile_c

SOURCES = [RUNTIME / "kernels" / n for n in ("qdynamic.c", "qgemm.c")] + \
    [RUNTIME / "src" / n for n in ("status.c", "threads.c")]
BUILDS = {"native": ["-O3", "-march=native"], "avx2": ["-O2", "-mavx2", "-mfma"], "portable": ["-O2"]}
SHAPES = [(1, 1, 1), (3, 13, 7), (9, 37, 21), (17, 64, 64), (130, 100, 48), (8, 33, 130)]   # (m, n, k)


class Kernels:
    def __init__(self, path, flags):
        compile_c(["cc", *flags, *WARNINGS, "-shared", "-fPIC", "-pthread", f"-I{RUNTIME / 'include'}", *SOURCES,
                   "-o", path])
        self.lib = ctypes.CDLL(str(path))

    def call(self, symbol, arrays, sizes):
        err = Error()
        fn = getattr(self.lib, symbol)
        fn.restype = ctypes.c_int
        ptrs = [None if a is None else a.ctypes.data_as(ctypes.c_void_p) for a in arrays]
        status = fn(*ptrs, *[ctypes.c_int64(s) for s in sizes], ctypes.byref(err))
        return status, err.message.decode()


@pytest.fixture(scope="module", params=list(BUILDS))
def kernels(request, tmp_path_factory):
    k = Kernels(tmp_path_factory.mktemp("qdyn") / f"libqdyn_{request.param}.so", BUILDS[request.param])
    yield k
    k.lib.rxe_threads_set_count(1)


def _weights(rng, n, k, zeros):
    """int8 v (n, k) and int32 zero points (n,) with v - z within one byte's span."""
    z = rng.integers(-40, 40, n).astype(np.int32) if zeros else np.zeros(n, np.int32)
    v = rng.integers(-128, 128, (n, k)).astype(np.int8)
    return v, z


def spec_dense(x, v, z, w_scale, bias):
    """The ONNX chain: DynamicQuantizeLinear, MatMulInteger (int64 sums), Cast, Mul(x_scale * w_scale), Add."""
    q, scale, zero = DynamicQuantizeLinear.eval(x)
    acc = (q.astype(np.int64) - int(zero)) @ (v.astype(np.int64) - z[:, None].astype(np.int64)).T
    out = acc.astype(np.int32).astype(np.float32) * (np.float32(scale) * w_scale)
    return out if bias is None else out + bias


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("zeros", [False, True])
@pytest.mark.parametrize("has_bias", [False, True])
@pytest.mark.parametrize("m,n,k", SHAPES)
def test_dynamic_qdense_equals_the_onnx_chain(kernels, m, n, k, has_bias, zeros, threads):
    kernels.lib.rxe_threads_set_count(threads)
    rng = np.random.default_rng(m * 1000 + n * 10 + k)
    x = (rng.standard_normal((m, k)) * rng.uniform(0.1, 4)).astype(np.float32)
    v, z = _weights(rng, n, k, zeros)
    w_scale = rng.uniform(0.001, 0.05, n).astype(np.float32)
    bias = rng.standard_normal(n).astype(np.float32) if has_bias else None
    out = np.full((m, n), np.nan, np.float32)
    scratch = np.zeros(m * k, np.uint8)
    flags = (QD.W_ZERO if zeros else 0) | (QD.BIAS if has_bias else 0)
    status, message = kernels.call(QD.DYNAMIC_QDENSE, [x, pack_qdense_weights(v), z, w_scale,
                                                       bias if has_bias else w_scale, out, scratch], [m, n, k, flags])
    assert status == 0, message
    np.testing.assert_array_equal(out, spec_dense(x, v, z, w_scale, bias))


@pytest.mark.parametrize("x_dtype", ["int8", "uint8"])
@pytest.mark.parametrize("zeros", [False, True])
@pytest.mark.parametrize("m,n,k", SHAPES)
def test_matmul_integer_equals_the_int64_sums(kernels, m, n, k, x_dtype, zeros):
    rng = np.random.default_rng(7 + m + n + k)
    lo = 0 if x_dtype == "uint8" else -128
    x = rng.integers(lo, lo + 256, (m, k)).astype(x_dtype)
    x_zero = int(rng.integers(lo, lo + 256))
    v, z = _weights(rng, n, k, zeros)
    out = np.zeros((m, n), np.int32)
    flags = (QD.W_ZERO if zeros else 0) | (QD.X_UNSIGNED if x_dtype == "uint8" else 0)
    status, message = kernels.call(QD.MATMUL_INTEGER, [x, pack_qdense_weights(v), z, out], [m, n, k, x_zero, flags])
    assert status == 0, message
    want = (x.astype(np.int64) - x_zero) @ (v.astype(np.int64) - z[:, None]).T
    np.testing.assert_array_equal(out, want)


def test_quantization_ties_and_constant_inputs(kernels):
    """x / scale landing on halves rounds to even; an all-zero x (scale 1/255 or 1: the output is 0 either way)."""
    k, n = 8, 3
    v, z = _weights(np.random.default_rng(3), n, k, True)
    w_scale = np.full(n, 0.25, np.float32)
    for x in (np.array([[-1.0, 0.5, 1.5, 2.5, 254.0 / 255 * 3, 3.0, -0.5, 0.0]], np.float32),
              np.zeros((2, k), np.float32), np.full((1, k), 7.0, np.float32)):
        out = np.full((x.shape[0], n), np.nan, np.float32)
        status, message = kernels.call(QD.DYNAMIC_QDENSE, [x, pack_qdense_weights(v), z, w_scale, w_scale, out,
                                                           np.zeros(x.size, np.uint8)], [x.shape[0], n, k, QD.W_ZERO])
        assert status == 0, message
        np.testing.assert_array_equal(out, spec_dense(x, v, z, w_scale, None))


@pytest.mark.parametrize("sizes,flags,zero,what", [
    ((2, 3, 0), 0, 0, "k 0 is outside"), ((2, 3, QD.MAX_K + 1), 0, 0, "is outside [1, 33025]"),
    ((-1, 3, 4), 0, 0, "negative m"), ((2, 3, 4), QD.W_ZERO, 200, "w_zero[0] = 200"),
    ((2, 3, 4), 9, 0, "flags 9")])
def test_bad_arguments_are_named(kernels, sizes, flags, zero, what):
    m, n, k = sizes
    z = np.full(3, zero, np.int32)
    x = np.zeros(max(m, 1) * max(k, 1), np.float32)
    out = np.zeros(max(m, 1) * n, np.float32)
    status, message = kernels.call(QD.DYNAMIC_QDENSE, [x, np.zeros(64, np.int8), z, out, out, out,
                                                       np.zeros(x.size, np.uint8)], [m, n, k, flags])
    assert status != 0 and what in message, message
