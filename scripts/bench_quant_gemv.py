"""Weight-only 4/8-bit matmuls on the shapes of SmolLM2-135M: relax_edge's
rxe_lib_matmul_nbits_f32 (runtime_c/kernels/matmul_nbits.c) against numpy's
float32 x @ W (OpenBLAS) and ONNX Runtime's com.microsoft MatMulNBits on the
same packed weights (a one-node model, accuracy_level 0 and 4), one thread
each, at M = 1 (a decode step) and M = 128 (a prefill); "rxe int8" is
rxe_lib_matmul_nbits_q8_f32 (act="int8", like accuracy_level 4).

The kernel is built with the host cc -O3 -march=native (the host board's
flags) into a temporary shared library, its timing loop in C. Each sample
is the mean of a loop of calls lasting about --sample-ms; the contenders are
sampled in turn, round after round (--rounds), so that a change of load hits
all alike; each cell is the median over rounds with the spread (min..max as %
of the median). GB/s counts the bytes of packed W + scales per call (numpy's:
its float32 W). Results are checked against the operator's numpy reference.
--zero float gives relax_edge GGUF Q4_1's float offsets m = -8 s (the same
weights as ORT's default zero point 8). --baseline REV adds "rxe@REV", the
kernel as committed at git revision REV, sampled in the same rounds (an A/B
on a loaded machine). Nothing is promised about speed: it depends on the
machine and its load.

    python scripts/bench_quant_gemv.py [--bits 4] [--block 32] [--m 1 128] [--rounds 7] [--zero float]
                                       [--baseline HEAD~1]
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")   # before numpy loads

import argparse  # noqa: E402
import ctypes  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

from relax_edge.library.quant_weight import q8_scratch_bytes  # noqa: E402
from relax_edge.op.quant_weight import dequantize_blocks, matmul_nbits_reference  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
RUNTIME = ROOT / "runtime_c"
SOURCES = ["kernels/matmul_nbits.c", "src/status.c", "src/threads.c"]
# SmolLM2-135M's projections: (name, K, N)
SHAPES = [("attn q/o 576x576", 576, 576), ("attn k/v 576x192", 576, 192), ("mlp up 576x1536", 576, 1536),
          ("mlp down 1536x576", 1536, 576), ("lm head 576x49152", 576, 49152)]
TIMER_C = r"""
#include <time.h>
#include "relax_edge/kernels.h"
double rxe_bench_nbits(const float* x, const uint8_t* q, const float* s, const float* z, float* y, int64_t m,
                       int64_t n, int64_t k, int64_t bits, int64_t block, int64_t mode, int64_t reps) {
  struct timespec t0, t1;
  int64_t r;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (r = 0; r < reps; ++r) rxe_lib_matmul_nbits_f32(x, q, s, z, s, y, m, n, k, bits, block, mode, 0, (rxe_error_t*)0);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  return ((double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec)) / (double)reps;
}
/* The same with act="int8" (x quantized at each call, into scratch). */
double rxe_bench_nbits_q8(const float* x, const uint8_t* q, const float* s, const float* z, float* y, float* scratch,
                          int64_t m, int64_t n, int64_t k, int64_t bits, int64_t block, int64_t mode, int64_t reps) {
  struct timespec t0, t1;
  int64_t r;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (r = 0; r < reps; ++r) {
    rxe_lib_matmul_nbits_q8_f32(x, q, s, z, s, y, scratch, m, n, k, bits, block, mode, 0, (rxe_error_t*)0);
  }
  clock_gettime(CLOCK_MONOTONIC, &t1);
  return ((double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec)) / (double)reps;
}
"""


def build(out: Path, revision: str | None = None) -> ctypes.CDLL:
    """The kernel and its timing loops, built with the host board's flags into out/libnbits.so (one thread);
    with a git revision, its matmul_nbits.c as committed there."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "timer.c").write_text(TIMER_C)
    sources = [out / "timer.c", *(RUNTIME / s for s in SOURCES)]
    if revision is not None:
        kernel = subprocess.run(["git", "-C", str(ROOT), "show", f"{revision}:runtime_c/{SOURCES[0]}"], check=True,
                                capture_output=True, text=True).stdout
        (out / "matmul_nbits.c").write_text(kernel)
        sources[1] = out / "matmul_nbits.c"
    flags = ["-O3", "-march=native", "-std=c99", "-shared", "-fPIC", "-pthread", "-Wl,-Bsymbolic",
             f"-I{RUNTIME / 'include'}"]
    subprocess.run(["cc", *flags, *map(str, sources), "-o", str(out / "libnbits.so")], check=True)
    dll = ctypes.CDLL(str(out / "libnbits.so"))
    for timer in (dll.rxe_bench_nbits, dll.rxe_bench_nbits_q8):
        timer.restype = ctypes.c_double
    dll.rxe_threads_set_count(1)
    return dll


def calls_per_sample(seconds_per_call, sample_ms: float) -> int:
    """How many calls make a sample of about sample_ms, from one timed call."""
    start = time.perf_counter()
    seconds_per_call(1)
    return max(1, int(sample_ms / 1000 / max(time.perf_counter() - start, 1e-7)))


def ort_session(qweight, scales, k, n, bits, block, level):
    """A one-node MatMulNBits model with the weights as initializers (so that ORT prepacks them once)."""
    import onnxruntime as ort
    from onnx import TensorProto, helper, numpy_helper
    node = helper.make_node("MatMulNBits", ["A", "B", "scales"], ["Y"], domain="com.microsoft", K=k, N=n, bits=bits,
                            block_size=block, accuracy_level=level)
    graph = helper.make_graph([node], "nbits", [helper.make_tensor_value_info("A", TensorProto.FLOAT, ["M", k])],
                              [helper.make_tensor_value_info("Y", TensorProto.FLOAT, ["M", n])],
                              initializer=[numpy_helper.from_array(qweight, "B"),
                                           numpy_helper.from_array(scales.reshape(-1), "scales")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                    helper.make_opsetid("com.microsoft", 1)])
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    opts.inter_op_num_threads = 1
    return ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])


def contenders(dlls, x, qweight, scales, k, n, bits, block, zero):
    m = x.shape[0]
    w = np.ascontiguousarray(dequantize_blocks(qweight, scales, K=k, bits=bits, block_size=block).T)
    offsets = (-float(1 << (bits - 1)) * scales).astype(np.float32)   # zero "float": q s + m, the same weights
    mode = 2 if zero == "float" else 0
    nbytes = qweight.nbytes + scales.nbytes + (offsets.nbytes if mode else 0)
    sizes = (m, n, k, bits, block, mode)
    out = {}
    for name, dll in dlls.items():
        y, y8 = np.zeros((m, n), np.float32), np.zeros((m, n), np.float32)
        scratch = np.zeros(q8_scratch_bytes(m, k, block) // 4 + 1, np.float32)
        ptr = [a.ctypes.data_as(ctypes.c_void_p) for a in (x, qweight, scales, offsets, y)]
        ptr8 = [a.ctypes.data_as(ctypes.c_void_p) for a in (x, qweight, scales, offsets, y8, scratch)]
        out[name] = (lambda r, dll=dll, ptr=ptr: dll.rxe_bench_nbits(*ptr, *map(ctypes.c_int64, (*sizes, r))),
                     nbytes, lambda y=y: y)
        out[name.replace("rxe", "rxe int8")] = (
            lambda r, dll=dll, ptr8=ptr8: dll.rxe_bench_nbits_q8(*ptr8, *map(ctypes.c_int64, (*sizes, r))),
            nbytes, lambda y8=y8: y8)

    def numpy_loop(r):
        t0 = time.perf_counter()
        for _ in range(r):
            np.matmul(x, w)
        return (time.perf_counter() - t0) / r
    out["numpy f32"] = (numpy_loop, w.nbytes, lambda: x @ w)
    try:
        for level in (0, 4):
            sess = ort_session(qweight, scales, k, n, bits, block, level)
            feeds = {"A": x}

            def ort_loop(r, sess=sess, feeds=feeds):
                t0 = time.perf_counter()
                for _ in range(r):
                    sess.run(None, feeds)
                return (time.perf_counter() - t0) / r
            out[f"ort lvl{level}"] = (ort_loop, qweight.nbytes + scales.nbytes,
                                      lambda sess=sess, feeds=feeds: sess.run(None, feeds)[0])
    except Exception as err:   # an onnxruntime without MatMulNBits: the other columns still run
        print(f"  (onnxruntime MatMulNBits unavailable: {err})", file=sys.stderr)
    return out


def interleaved(timers: dict, rounds: int, sample_ms: float) -> dict:
    """label -> the seconds per call of each round; the contenders take turns, who goes first rotating."""
    calls = {label: calls_per_sample(timer, sample_ms) for label, timer in timers.items()}
    labels = list(timers)
    samples = {label: [] for label in labels}
    for r in range(rounds):
        for label in labels[r % len(labels):] + labels[:r % len(labels)]:
            samples[label].append(timers[label](calls[label]))
    return samples


def cell(label: str, seconds, nbytes: int) -> str:
    s = np.array(seconds)
    med = float(np.median(s))
    return f"{label} {med * 1e6:8.1f} us {nbytes / med / 1e9:6.2f} GB/s ±{100 * (s.max() - s.min()) / med:3.0f}%"


def bench_shape(dll, rng, m: int, k: int, n: int, args) -> str:
    blocks = -(-k // args.block)
    qweight = rng.integers(0, 256, (n, blocks, args.block * args.bits // 8), dtype=np.uint8)
    scales = (rng.random((n, blocks)) * 0.02).astype(np.float32)
    x = rng.standard_normal((m, k)).astype(np.float32)
    runs = contenders(dll, x, qweight, scales, k, n, args.bits, args.block, args.zero)
    expected = matmul_nbits_reference(x, qweight, scales, K=k, N=n, bits=args.bits, block_size=args.block)
    for label, (timer, _, result) in runs.items():
        timer(1)
        tol = 5e-2 if "4" in label or "int8" in label else 1e-3   # int8 activations: the quantization's error
        np.testing.assert_allclose(result(), expected, rtol=tol, atol=tol * np.abs(expected).max(), err_msg=label)
    samples = interleaved({label: run[0] for label, run in runs.items()}, args.rounds, args.sample_ms)
    return " | ".join(cell(label, samples[label], runs[label][1]) for label in runs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bits", type=int, default=4, choices=(4, 8))
    parser.add_argument("--block", type=int, default=32)
    parser.add_argument("--m", type=int, nargs="+", default=[1, 128], help="rows of x")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--sample-ms", type=float, default=30.0)
    parser.add_argument("--shapes", type=int, nargs="*", help="indices into SHAPES (default all)")
    parser.add_argument("--zero", choices=("default", "float"), default="default",
                        help="relax_edge's zero mode (float: GGUF Q4_1's offsets)")
    parser.add_argument("--baseline", help="also the kernel as committed at this git revision")
    args = parser.parse_args()
    chosen = SHAPES if args.shapes is None else [SHAPES[i] for i in args.shapes]
    rng = np.random.default_rng(0)
    print(f"bits {args.bits}, block {args.block}, zero {args.zero}, 1 thread; median over {args.rounds} rounds "
          "(spread min..max)")
    with tempfile.TemporaryDirectory() as tmp:
        dll = {"rxe": build(Path(tmp) / "work")}
        if args.baseline:
            dll[f"rxe@{args.baseline}"] = build(Path(tmp) / "base", args.baseline)
        for m in args.m:
            for name, k, n in chosen:
                print(f"M={m:<4d} {name:20s} " + bench_shape(dll, rng, m, k, n, args), flush=True)


if __name__ == "__main__":
    main()
