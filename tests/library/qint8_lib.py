"""The int8 kernels of runtime_c (qgemm.c, qconv.c) for the tests: built with
the host cc into a shared library called through ctypes, or with a board's
cross compiler into qint8_driver.c run under QEMU (semihosting files on the
Cortex-M4). Random cases carry their expectation from a numpy mirror of the
contract's formulas (int64 accumulators, one rounding half to even of
acc * q * 2^(shift - 31)), written here from the contract, not from the
kernels or the operator module."""

import ctypes
import subprocess
from pathlib import Path

import numpy as np

from relax_edge.library import qint8 as Q
from relax_edge.target import load_board

ROOT = Path(__file__).resolve().parents[2]
RUNTIME = ROOT / "runtime_c"
KERNELS = [RUNTIME / "kernels" / f for f in ("qgemm.c", "qconv.c", "qdepthwise_dsp.c")]
SOURCES = [*KERNELS, RUNTIME / "src" / "status.c", RUNTIME / "src" / "threads.c"]
DRIVER = Path(__file__).with_name("qint8_driver.c")
WARNINGS = ["-std=c99", "-Wall", "-Wextra", "-pedantic", "-Werror"]
KIND = {Q.DENSE: 0, Q.CONV2D: 1, Q.DEPTHWISE: 2, "requantize": 3}
OUTPUT = {Q.DENSE: 5, Q.CONV2D: 5, Q.DEPTHWISE: 5, "requantize": 3}
INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1
RANGE = {"int8": (-128, 127), "uint8": (0, 255)}


def compile_c(cmd):
    proc = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"{' '.join(map(str, cmd))}\n{proc.stderr}"


# ------------------------------------------------------------ the contract in numpy

def requant(acc, q, shift):
    """acc (saturated to int32) * q / 2^(31 - shift) rounded half to even, by floor division."""
    acc = np.clip(np.asarray(acc, np.int64), INT32_MIN, INT32_MAX)
    product = acc * np.asarray(q, np.int64)
    divisor = np.int64(2) ** (31 - np.asarray(shift, np.int64))
    low = product // divisor
    twice_rem = 2 * (product - low * divisor)        # in [0, 2 * divisor)
    return low + ((twice_rem > divisor) | ((twice_rem == divisor) & (low % 2 == 1)))


def finish(acc, q, shift, out_zero, act_min, act_max, out_dtype):
    return np.clip(requant(acc, q, shift) + out_zero, act_min, act_max).astype(out_dtype)


def dense_expected(x, w, bias, q, shift, x_zero, w_zero, out_zero, act_min, act_max, out_dtype):
    acc = (x.astype(np.int64) - x_zero) @ (w.astype(np.int64) - w_zero).T + bias
    return finish(acc, q, shift, out_zero, act_min, act_max, out_dtype)


def conv_expected(x, w, bias, q, shift, stride, padding, dilation, groups, x_zero, w_zero, out_zero, act_min,
                  act_max, out_dtype):
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    (sh, sw), (pt, pl, pb, pr), (dh, dw) = stride, padding, dilation
    oh = (h + pt + pb - dh * (kh - 1) - 1) // sh + 1
    ow = (wd + pl + pr - dw * (kw - 1) - 1) // sw + 1
    xp = np.pad(x.astype(np.int64) - x_zero, ((0, 0), (0, 0), (pt, pb), (pl, pr)))   # padding: the real 0
    wi = w.astype(np.int64) - w_zero
    og = o // groups
    acc = np.zeros((n, o, oh, ow), np.int64)
    for ky in range(kh):
        for kx in range(kw):
            taps = xp[:, :, ky * dh: ky * dh + sh * (oh - 1) + 1: sh, kx * dw: kx * dw + sw * (ow - 1) + 1: sw]
            for g in range(groups):
                acc[:, g * og:(g + 1) * og] += np.einsum("nchw,oc->nohw", taps[:, g * cg:(g + 1) * cg],
                                                         wi[g * og:(g + 1) * og, :, ky, kx])
    acc += bias.reshape(1, o, 1, 1)
    return finish(acc, q.reshape(1, o, 1, 1), shift.reshape(1, o, 1, 1), out_zero, act_min, act_max, out_dtype)


# ------------------------------------------------------------ cases

def channel_params(rng, n, per_channel, k):
    """bias, multiplier, shift (n,) of a plausible layer: the output scale ~ 1/sqrt(k) of the products."""
    count = n if per_channel else 1
    real = rng.uniform(0.3, 3.0, count) / (64.0 * max(k, 1) ** 0.5)
    pairs = [Q_multiplier(r) for r in real]
    q = np.array([p[0] for p in pairs] * (1 if per_channel else n), np.int32)
    shift = np.array([p[1] for p in pairs] * (1 if per_channel else n), np.int32)
    bias = rng.integers(-4000, 4000, n).astype(np.int32)
    return bias, q, shift


def Q_multiplier(real):   # noqa: N802 (the contract's quantize_multiplier, from frexp)
    frac, shift = np.frexp(real)
    q = int(round(frac * (1 << 31)))
    if q == 1 << 31:
        q, shift = q // 2, shift + 1
    return q, int(shift)


def _ints(rng, dtype, shape):
    lo, hi = RANGE[dtype]
    return rng.integers(lo, hi + 1, shape).astype(dtype)


def _dtypes(x_dtype, out_dtype):
    return (Q.X_UNSIGNED if x_dtype == "uint8" else 0) | (Q.OUT_UNSIGNED if out_dtype == "uint8" else 0)


def _clamp(out_dtype, relu, out_zero):
    lo, hi = RANGE[out_dtype]
    return (max(lo, out_zero) if relu else lo), hi


def dense_case(rng, m, n, k, x_dtype="int8", w_dtype="int8", out_dtype="int8", x_zero=0, w_zero=0, out_zero=0,
               per_channel=True, relu=False):
    x, w = _ints(rng, x_dtype, (m, k)), _ints(rng, w_dtype, (n, k))
    bias, q, shift = channel_params(rng, n, per_channel, k)
    act_min, act_max = _clamp(out_dtype, relu, out_zero)
    expected = dense_expected(x, w, bias, q, shift, x_zero, w_zero, out_zero, act_min, act_max, out_dtype)
    out = np.full((m, n), 0x5a, out_dtype)
    signed_w_zero = w_zero - (128 if w_dtype == "uint8" else 0)
    sizes = [m, n, k, x_zero, signed_w_zero, out_zero, act_min, act_max, _dtypes(x_dtype, out_dtype)]
    return Q.DENSE, [x, Q.pack_qdense_weights(w), bias, q, shift, out], sizes, expected


def conv_case(rng, n, c, h, wd, o, kh, kw, stride=(1, 1), padding=(0, 0, 0, 0), dilation=(1, 1), groups=1,
              x_dtype="int8", w_dtype="int8", out_dtype="int8", x_zero=0, w_zero=0, out_zero=0, per_channel=True,
              relu=False):
    x, w = _ints(rng, x_dtype, (n, c, h, wd)), _ints(rng, w_dtype, (o, c // groups, kh, kw))
    bias, q, shift = channel_params(rng, o, per_channel, c // groups * kh * kw)
    act_min, act_max = _clamp(out_dtype, relu, out_zero)
    expected = conv_expected(x, w, bias, q, shift, stride, padding, dilation, groups, x_zero, w_zero, out_zero,
                             act_min, act_max, out_dtype)
    oh, ow = expected.shape[2:]
    out = np.full(expected.shape, 0x5a, out_dtype)
    tail = [x_zero, w_zero - (128 if w_dtype == "uint8" else 0), out_zero, act_min, act_max,
            _dtypes(x_dtype, out_dtype)]
    window = [*stride, padding[0], padding[1], *dilation]
    if groups == c == o:
        scratch_bytes = int(Q.depthwise_scratch_bytes(kh, kw, oh, ow, stride, dilation, c, h, wd))
        scratch = np.full(max(scratch_bytes, 1), 0x33, np.uint8)
        return (Q.DEPTHWISE, [x, Q.pack_qdepthwise_weights(w), bias, q, shift, out, scratch],
                [n, c, h, wd, kh, kw, oh, ow, *window, *tail], expected)
    scratch_bytes = int(Q.conv_scratch_bytes(c // groups, kh, kw, oh, ow, stride, dilation))
    scratch = np.full(max(scratch_bytes, 1), 0x33, np.uint8)
    return (Q.CONV2D, [x, Q.pack_qconv2d_weights(w, groups), bias, q, shift, out, scratch],
            [n, c, h, wd, o, kh, kw, oh, ow, *window, groups, *tail], expected)


def requantize_case(acc, q, shift):
    acc, q, shift = (np.asarray(a, np.int32) for a in (acc, q, shift))
    expected = np.clip(requant(acc, q, shift), INT32_MIN, INT32_MAX).astype(np.int32)   # the C result saturates
    return "requantize", [acc, q, shift, np.zeros_like(acc)], [], expected


def output_of(case):
    symbol, arrays, _, _ = case
    return arrays[OUTPUT[symbol]]


def check(case, actual):
    symbol, _, sizes, expected = case
    np.testing.assert_array_equal(np.asarray(actual).view(expected.dtype).reshape(expected.shape), expected,
                                  err_msg=f"{symbol} sizes {sizes}")


# ------------------------------------------------------------ running

class Error(ctypes.Structure):
    _fields_ = [("status", ctypes.c_int), ("message", ctypes.c_char * 256)]


class HostKernels:
    """The int8 kernels built with the host cc (these flags) into a shared library."""

    def __init__(self, path: Path, flags):
        compile_c(["cc", *flags, *WARNINGS, "-shared", "-fPIC", "-pthread", f"-I{RUNTIME / 'include'}", *SOURCES, "-o",
                   path])
        self.lib = ctypes.CDLL(str(path))
        self.lib.rxe_qint8_requantize.restype = ctypes.c_int32
        self.lib.rxe_qint8_requantize.argtypes = [ctypes.c_int32] * 3

    def set_threads(self, n: int) -> int:
        return self.lib.rxe_threads_set_count(n)

    def call(self, symbol, arrays, sizes):
        """(status, message); the output array is written."""
        if symbol == "requantize":
            acc, q, shift, out = arrays
            out[:] = [self.lib.rxe_qint8_requantize(int(a), int(b), int(c)) for a, b, c in zip(acc, q, shift)]
            return 0, ""
        err = Error()
        ptrs = [None if a is None else a.ctypes.data_as(ctypes.c_void_p) for a in arrays]
        fn = getattr(self.lib, symbol)
        fn.restype = ctypes.c_int
        status = fn(*ptrs, *[ctypes.c_int64(s) for s in sizes], ctypes.byref(err))
        return status, err.message.decode()

    def run(self, case):
        status, message = self.call(*case[:3])
        assert status == 0, f"{case[0]} {case[2]}: {message}"
        return output_of(case)


def build_driver(board, out: Path) -> Path:
    t = board.target
    if t.freestanding:
        flags = [*t.cflags, *t.ldflags, "-DRXE_NO_LIBM", "-DRXE_NO_THREADS"]
    else:
        flags = [*t.cflags, "-static", "-DRXE_NO_THREADS"]
    compile_c([t.compiler, *flags, *WARNINGS, f"-I{RUNTIME / 'include'}", DRIVER, *SOURCES, "-o", out])
    return out


def check_on_board(board_name: str, cases, workdir: Path) -> None:
    """Build the driver for the board, run every case in one emulator run, compare each with its mirror."""
    board = load_board(board_name)
    driver = build_driver(board, workdir / "qint8_driver")
    for case, (status, out) in zip(cases, run_driver(board, driver, cases, workdir)):
        assert status == 0, f"{case[0]} {case[2]}: status {status}"
        check(case, out)


def run_driver(board, driver: Path, cases, workdir: Path):
    """Every case in one run of the driver on `board`; each case's (status, output bytes)."""
    payload = bytearray()
    for symbol, arrays, sizes, _ in cases:
        payload += np.array([KIND[symbol], len(sizes), *sizes, len(arrays)], np.int64).tobytes()
        for a in arrays:
            payload += np.array([-1 if a is None else a.nbytes], np.int64).tobytes()
            if a is not None:
                payload += np.ascontiguousarray(a).tobytes()
    (workdir / "qint8_cases.bin").write_bytes(bytes(payload))
    result = workdir / "qint8_results.bin"
    command = list(board.qemu["command"])
    if board.qemu.get("system"):
        command += ["-semihosting-config", "enable=on,target=native", "-kernel", str(driver)]
    else:
        command.append(str(driver))
    proc = subprocess.run(command, capture_output=True, timeout=300, cwd=workdir)
    assert proc.returncode == 0, f"{command}: {proc.returncode} {proc.stderr.decode()}"
    data, pos, results = result.read_bytes(), 0, []
    for _ in cases:
        status, count = np.frombuffer(data, np.int64, 2, pos)
        pos += 16
        results.append((int(status), np.frombuffer(data, np.uint8, count, pos)))
        pos += int(count)
    assert pos == len(data), "the driver wrote more than the cases' outputs"
    return results
