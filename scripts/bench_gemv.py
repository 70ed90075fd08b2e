"""Decode-step dense layers (x (m, K) @ W (K, N) with m = 1 by default):
relax_edge's rxe_lib_dense_f32 (its GEMV path for few rows, gemv.c) against
numpy's BLAS (OpenBLAS) x @ W, on the shapes of SmolLM2-135M, side by side
in one process.

Builds runtime_c/kernels with the host cc -O3 -march=native into temporary
shared libraries: `rxe` as it is, and `gemm` with -DRXE_DENSE_GEMV_ROWS=0
(the blocked GEMM driver alone, what dense did before the GEMV path).
The weights of both are 64-byte aligned, as a model's constants are. Each
sample is the mean of a loop of calls lasting about --sample-ms (relax_edge's
loop runs in C; numpy's in Python, so its column includes about a
microsecond of call overhead per product). The contenders are sampled in
turn, round after round (--rounds; which one goes first rotates), so that a
change of load or of the caches' contents hits all alike;
each cell is the median over rounds, with the spread of the rounds
(min..max, as % of the median); the last two columns are the ratios of
the best rounds. GB/s counts W's bytes once (4*K*N).

One child process per thread count (--threads, default 1 and 2): the child
sets OPENBLAS_NUM_THREADS before numpy loads and relax_edge's pool to the
same count. Results are checked against numpy; nothing is promised about
speed, which depends on the machine and its load.

--matmul times rxe_lib_matmul_f32 on the row-major W instead (its GEMV
path reads W in place; `gemm` packs it into scratch at each call).

    python scripts/bench_gemv.py [--threads 1 2] [--m 1] [--rounds 15] [--matmul]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RUNTIME = ROOT / "runtime_c"
SOURCES = ["kernels/gemm.c", "kernels/gemv.c", "src/status.c", "src/threads.c"]
# SmolLM2-135M's dense layers at seq = 1: (name, K, N)
SHAPES = [("attn q/o 576x576", 576, 576), ("attn k/v 576x192", 576, 192), ("mlp up 576x1536", 576, 1536),
          ("mlp down 1536x576", 1536, 576), ("lm head 576x49152", 576, 49152)]
TIMER_C = r"""
#include <time.h>
#include "relax_edge/kernels.h"
/* Seconds per call of reps calls of rxe_lib_dense_f32. */
double rxe_bench_dense(const float* a, const float* w, const float* bias, float* c, int64_t m, int64_t n,
                       int64_t k, int64_t reps) {
  struct timespec t0, t1;
  int64_t r;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (r = 0; r < reps; ++r) rxe_lib_dense_f32(a, w, bias, c, m, n, k, 0, (rxe_error_t*)0);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  return ((double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec)) / (double)reps;
}
/* The same for rxe_lib_matmul_f32 (b row-major, one batch). */
double rxe_bench_matmul(const float* a, const float* b, float* c, float* scratch, int64_t m, int64_t n,
                        int64_t k, int64_t reps) {
  struct timespec t0, t1;
  int64_t r;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (r = 0; r < reps; ++r) rxe_lib_matmul_f32(a, b, c, scratch, 1, m, n, k, 0, 0, (rxe_error_t*)0);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  return ((double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec)) / (double)reps;
}
"""


def build(out_dir: Path, name: str, defines=()):
    import ctypes
    timer = out_dir / "timer.c"
    timer.write_text(TIMER_C)
    path = out_dir / f"lib{name}.so"
    cmd = ["cc", "-O3", "-march=native", "-std=gnu99", "-shared", "-fPIC", "-pthread", *defines,
           f"-I{RUNTIME / 'include'}", *(str(RUNTIME / s) for s in SOURCES), str(timer), "-o", str(path)]
    subprocess.run(cmd, check=True)
    lib = ctypes.CDLL(str(path))
    lib.rxe_bench_dense.restype = ctypes.c_double
    lib.rxe_bench_matmul.restype = ctypes.c_double
    return lib


def child(threads: int, m: int, rounds: int, sample_ms: float, matmul: bool) -> None:
    import ctypes
    import tempfile
    import time

    import numpy as np

    sys.path.insert(0, str(ROOT))
    from relax_edge.library.kernels import matmul_scratch_bytes, pack_dense_weights

    def ptr(a):
        return a.ctypes.data_as(ctypes.c_void_p)

    def aligned(a):   # 64-byte aligned, as a model's constants are in its weights blob
        buf = np.empty(a.size + 16, np.float32)
        start = (-buf.ctypes.data % 64) // 4
        out = buf[start:start + a.size].reshape(a.shape)
        out[...] = a
        return out

    with tempfile.TemporaryDirectory() as tmp:
        libs = {"rxe": build(Path(tmp), "rxe"), "gemm": build(Path(tmp), "gemm", ["-DRXE_DENSE_GEMV_ROWS=0"])}
        for lib in libs.values():
            lib.rxe_threads_set_count(threads)
        rng = np.random.default_rng(0)
        cases = []
        for name, k, n in SHAPES:
            w = aligned(rng.standard_normal((k, n)).astype(np.float32))
            x = rng.standard_normal((m, k) if m > 1 else (k,)).astype(np.float32)
            out, packed, bias = np.empty((m, n), np.float32), aligned(pack_dense_weights(w)), np.zeros(n, np.float32)
            y = np.empty(n if m == 1 else (m, n), np.float32)

            def numpy_loop(reps, x=x, w=w, y=y):
                start = time.perf_counter()
                for _ in range(reps):
                    np.matmul(x, w, out=y)
                return (time.perf_counter() - start) / reps

            scratch = np.empty(matmul_scratch_bytes(m, n, k) // 4, np.float32)

            def rxe_loop(reps, lib, x=x, w=w, packed=packed, bias=bias, out=out, scratch=scratch, n=n, k=k):
                sizes = [ctypes.c_int64(v) for v in (m, n, k, reps)]
                if matmul:
                    return lib.rxe_bench_matmul(ptr(x), ptr(w), ptr(out), ptr(scratch), *sizes)
                return lib.rxe_bench_dense(ptr(x), ptr(packed), ptr(bias), ptr(out), *sizes)

            fns = {"numpy": numpy_loop, **{lib_name: (lambda reps, lib=lib, f=rxe_loop: f(reps, lib))
                                            for lib_name, lib in libs.items()}}
            expected = x.reshape(m, k) @ w
            for lib_name in libs:
                out.fill(np.nan)
                fns[lib_name](1)
                np.testing.assert_allclose(out, expected, rtol=1e-3, atol=1e-3 * k ** 0.5, err_msg=lib_name)
            reps = {f: max(1, int(sample_ms * 1e-3 / max(fn(3), 1e-7))) for f, fn in fns.items()}
            cases.append((name, 4.0 * k * n, fns, reps))
        samples = {(name, f): [] for name, _, fns, _ in cases for f in fns}
        for r in range(rounds):
            for name, _, fns, reps in cases:
                order = list(fns)
                for f in order[r % len(order):] + order[:r % len(order)]:   # each one first in turn
                    samples[name, f].append(fns[f](reps[f]))
        for lib in libs.values():
            lib.rxe_threads_shutdown()

    kernel = "rxe_lib_matmul_f32 (W row-major)" if matmul else "rxe_lib_dense_f32 (W packed)"
    print(f"\n{kernel}, {threads} thread(s) (OPENBLAS_NUM_THREADS={threads}, relax_edge pool {threads}), m = {m}, "
          f"median of {rounds} rounds [spread min..max % of median]")
    head = "".join(f" {c + ' us':>22} {'GB/s':>6}" for c in ("numpy", "rxe", "gemm"))
    print(f"{'layer':<20} {'MB':>6}{head} {'numpy/rxe':>10} {'gemm/rxe':>9} {'(best of rounds)':>17}")
    for name, nbytes, fns, _ in cases:
        med, best = {}, {}
        line = f"{name:<20} {nbytes / 1e6:6.2f}"
        for f in fns:
            times = sorted(samples[name, f])
            med[f], best[f] = times[len(times) // 2], times[0]
            spread = f"[{100 * (times[0] / med[f] - 1):+.0f}..{100 * (times[-1] / med[f] - 1):+.0f}%]"
            line += f" {1e6 * med[f]:10.1f} {spread:>11} {nbytes / med[f] / 1e9:6.1f}"
        line += f" {med['numpy'] / med['rxe']:10.2f} {med['gemm'] / med['rxe']:9.2f}"
        print(f"{line} {best['numpy'] / best['rxe']:8.2f} {best['gemm'] / best['rxe']:8.2f}", flush=True)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--m", type=int, default=1, help="rows of x (1: a decode step)")
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--sample-ms", type=float, default=5.0, help="length of one sample's loop of calls")
    parser.add_argument("--matmul", action="store_true", help="time rxe_lib_matmul_f32 on a row-major W instead")
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child is not None:
        child(args.child, args.m, args.rounds, args.sample_ms, args.matmul)
        return 0
    for threads in args.threads:
        env = {**os.environ, **{v: str(threads) for v in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS")}}
        cmd = [sys.executable, __file__, "--child", str(threads), "--m", str(args.m), "--rounds", str(args.rounds),
               "--sample-ms", str(args.sample_ms), *(["--matmul"] if args.matmul else [])]
        subprocess.run(cmd, env=env, check=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
