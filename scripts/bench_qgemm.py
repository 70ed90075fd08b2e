"""int8 GEMMs at MobileNetV2 / ResNet-18 layer shapes (convolutions as their
im2col GEMM: M output pixels, N output channels, K = C*kh*kw): relax_edge's
rxe_lib_qdense_s8 (runtime_c/kernels/qgemm.c, uint8 x, int8 weights,
per-channel requantization to uint8) against ONNX Runtime's MatMulInteger
(int32 out, no requantization) and QLinearMatMul (uint8 out, per-tensor)
one-node models and against our float32 dense kernel (rxe_lib_dense_f32),
one thread each.

The kernels are built with the host cc -O3 -march=native (the host board's
flags) into a temporary shared library, their timing loops in C. Each sample
is the mean of a loop of calls lasting about --sample-ms; the contenders are
sampled in turn, round after round (--rounds), so that a change of load hits
all alike; each cell is the median over rounds with the spread (min..max as %
of the median), in GOP/s (2*M*N*K per call). The int8 result is checked bit
for bit against a numpy mirror of the requantization. --baseline REV adds
the int8 kernel as of git revision REV (its runtime_c built the same way)
as one more contender, sampled in the same rounds, its outputs checked
within one step of the current kernel's. Nothing is promised about speed:
it depends on the machine and its load.

    python scripts/bench_qgemm.py [--rounds 5] [--sample-ms 30] [--shapes 0 3] [--baseline main]
"""

from __future__ import annotations

import argparse
import ctypes
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

from relax_edge.library import kernels as F  # noqa: E402
from relax_edge.library import qint8 as Q  # noqa: E402
from relax_edge.op.quant_int8 import quantize_multiplier, requantize_accumulator  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
RUNTIME = ROOT / "runtime_c"
SOURCES = ["kernels/qgemm.c", "kernels/qconv.c", "kernels/gemm.c", "kernels/gemv.c", "src/status.c", "src/threads.c"]
# (name, M, N, K)
SHAPES = [("mbv2 conv1 3x3 s2", 12544, 32, 27), ("mbv2 expand 1x1 56x56", 3136, 144, 24),
          ("mbv2 project 1x1 28x28", 784, 32, 192), ("mbv2 expand 1x1 14x14", 196, 384, 64),
          ("mbv2 last 1x1 7x7", 49, 1280, 320), ("mbv2 classifier", 1, 1000, 1280),
          ("r18 3x3 56x56", 3136, 64, 576), ("r18 3x3 28x28", 784, 128, 1152), ("r18 3x3 14x14", 196, 256, 2304),
          ("r18 3x3 7x7", 49, 512, 4608), ("r18 fc", 1, 1000, 512)]
TIMER_C = r"""
#include <time.h>
#include "relax_edge/kernels.h"
static double seconds(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}
double rxe_bench_qdense(const void* x, const void* w, const int32_t* b, const int32_t* q, const int32_t* s, void* y,
                        int64_t m, int64_t n, int64_t k, int64_t reps) {
  double t0 = seconds();
  int64_t r;
  for (r = 0; r < reps; ++r) rxe_lib_qdense_s8(x, w, b, q, s, y, m, n, k, 128, 0, 128, 0, 255, 3, (rxe_error_t*)0);
  return (seconds() - t0) / (double)reps;
}
double rxe_bench_dense(const float* x, const float* w, const float* b, float* y, int64_t m, int64_t n, int64_t k,
                       int64_t reps) {
  double t0 = seconds();
  int64_t r;
  for (r = 0; r < reps; ++r) rxe_lib_dense_f32(x, w, b, y, m, n, k, 0, (rxe_error_t*)0);
  return (seconds() - t0) / (double)reps;
}
"""


def build(out: Path, runtime: Path = RUNTIME) -> ctypes.CDLL:
    timer = out / "timer.c"
    timer.write_text(TIMER_C)
    lib = out / "libqbench.so"
    subprocess.run(["cc", "-O3", "-march=native", "-std=c99", "-shared", "-fPIC", "-pthread",
                    f"-I{runtime / 'include'}", str(timer), *[str(runtime / s) for s in SOURCES], "-o", str(lib)],
                   check=True)
    dll = ctypes.CDLL(str(lib))
    dll.rxe_bench_qdense.restype = ctypes.c_double
    dll.rxe_bench_dense.restype = ctypes.c_double
    dll.rxe_threads_set_count(1)
    return dll


def reps_for(fn, sample_ms: float) -> int:
    t0 = time.perf_counter()
    fn(1)
    one = max(time.perf_counter() - t0, 1e-7)
    return max(1, int(sample_ms / 1000 / one))


def ort_session(node, inputs, outputs, initializers):
    import onnxruntime as ort
    from onnx import helper, numpy_helper
    graph = helper.make_graph([node], "q", inputs, outputs,
                              initializer=[numpy_helper.from_array(v, k) for k, v in initializers.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    opts.inter_op_num_threads = 1
    return ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])


def ort_loop(sess, feeds):
    def run(r):
        t0 = time.perf_counter()
        for _ in range(r):
            sess.run(None, feeds)
        return (time.perf_counter() - t0) / r
    return run


def build_revision(out: Path, rev: str) -> ctypes.CDLL:
    """The kernels of runtime_c as of git revision `rev`, built as `build` does."""
    out.mkdir()
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", rev, "runtime_c"], check=True,
                             capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(out)], input=archive, check=True)
    return build(out, out / "runtime_c")


def contenders(dll, m, n, k, rng, baseline=None):
    from onnx import TensorProto, helper
    x = rng.integers(0, 256, (m, k)).astype(np.uint8)
    w = rng.integers(-127, 128, (n, k)).astype(np.int8)
    bias = rng.integers(-2000, 2000, n).astype(np.int32)
    pairs = [quantize_multiplier(r) for r in rng.uniform(0.3, 3.0, n) / (64.0 * k ** 0.5)]
    q, s = np.array([p[0] for p in pairs], np.int32), np.array([p[1] for p in pairs], np.int32)
    y = np.zeros((m, n), np.uint8)
    packed = Q.pack_qdense_weights(w)
    ptr = [a.ctypes.data_as(ctypes.c_void_p) for a in (x, packed, bias, q, s, y)]
    acc = (x.astype(np.int64) - 128) @ w.astype(np.int64).T + bias
    expected = np.clip(requantize_accumulator(acc, q, s) + 128, 0, 255)
    out = {"rxe int8": (lambda r: dll.rxe_bench_qdense(*ptr, *map(ctypes.c_int64, (m, n, k, r))),
                        lambda: np.testing.assert_array_equal(y, expected))}
    if baseline is not None:
        label, base = baseline
        yb = np.zeros_like(y)
        bptr = [*ptr[:5], yb.ctypes.data_as(ctypes.c_void_p)]
        out[f"rxe int8 @{label}"] = (
            lambda r: base.rxe_bench_qdense(*bptr, *map(ctypes.c_int64, (m, n, k, r))),
            lambda: np.testing.assert_array_less(np.abs(yb.astype(np.int64) - expected), 2))
    xf, wf = rng.standard_normal((m, k)).astype(np.float32), rng.standard_normal((k, n)).astype(np.float32)
    bf, yf, wp = np.zeros(n, np.float32), np.zeros((m, n), np.float32), F.pack_dense_weights(wf)
    fptr = [a.ctypes.data_as(ctypes.c_void_p) for a in (xf, wp, bf, yf)]
    out["rxe f32"] = (lambda r: dll.rxe_bench_dense(*fptr, *map(ctypes.c_int64, (m, n, k, r))),
                      lambda: np.testing.assert_allclose(yf, xf @ wf, rtol=1e-3, atol=1e-3 * k ** 0.5))
    wt = np.ascontiguousarray(w.T)
    try:
        node = helper.make_node("MatMulInteger", ["A", "B", "a_zero"], ["Y"])
        sess = ort_session(node, [helper.make_tensor_value_info("A", TensorProto.UINT8, [m, k])],
                           [helper.make_tensor_value_info("Y", TensorProto.INT32, [m, n])],
                           {"B": wt, "a_zero": np.array(128, np.uint8)})
        acc = (x.astype(np.int64) - 128) @ wt.astype(np.int64)
        out["ort MatMulInteger"] = (ort_loop(sess, {"A": x}), lambda sess=sess: np.testing.assert_array_equal(
            sess.run(None, {"A": x})[0], acc))
        node = helper.make_node("QLinearMatMul", ["A", "a_scale", "a_zero", "B", "b_scale", "b_zero", "y_scale",
                                                  "y_zero"], ["Y"])
        consts = {"B": wt, "a_scale": np.array(0.02, np.float32), "a_zero": np.array(128, np.uint8),
                  "b_scale": np.array(0.01, np.float32), "b_zero": np.array(0, np.int8),
                  "y_scale": np.array(0.02 * 0.01 * 64 * k ** 0.5, np.float32), "y_zero": np.array(128, np.uint8)}
        sess = ort_session(node, [helper.make_tensor_value_info("A", TensorProto.UINT8, [m, k])],
                           [helper.make_tensor_value_info("Y", TensorProto.UINT8, [m, n])], consts)
        out["ort QLinearMatMul"] = (ort_loop(sess, {"A": x}), lambda: None)
    except Exception as err:   # an onnxruntime without these kernels: the other columns still run
        print(f"  (onnxruntime unavailable: {err})", file=sys.stderr)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--sample-ms", type=float, default=30.0)
    ap.add_argument("--shapes", type=int, nargs="*", help="indices into the shape list (default all)")
    ap.add_argument("--baseline", metavar="REV", help="also time the int8 kernel as of this git revision")
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    with tempfile.TemporaryDirectory() as tmp:
        dll = build(Path(tmp))
        baseline = None if args.baseline is None else (args.baseline,
                                                       build_revision(Path(tmp) / "baseline", args.baseline))
        shapes = SHAPES if args.shapes is None else [SHAPES[i] for i in args.shapes]
        print(f"1 thread; GOP/s, median over {args.rounds} rounds (spread min..max)")
        for name, m, n, k in shapes:
            runs = contenders(dll, m, n, k, rng, baseline)
            for fn, verify in runs.values():
                fn(1)
                verify()
            reps = {label: reps_for(fn, args.sample_ms) for label, (fn, _) in runs.items()}
            samples = {label: [] for label in runs}
            labels = list(runs)
            for r in range(args.rounds):
                for label in labels[r % len(labels):] + labels[:r % len(labels)]:
                    samples[label].append(runs[label][0](reps[label]))
            cells = []
            for label in labels:
                t = np.array(samples[label])
                med = float(np.median(t))
                cells.append(f"{label} {2 * m * n * k / med / 1e9:6.1f} ±{100 * (t.max() - t.min()) / med:3.0f}%")
            print(f"{name:24s} M {m:5d} N {n:4d} K {k:4d} | " + " | ".join(cells), flush=True)


if __name__ == "__main__":
    main()
