"""Single-precision GEMM throughput: relax_edge's library kernels
(rxe_lib_matmul_f32, and rxe_lib_dense_f32 with packed weights) against
numpy's BLAS (OpenBLAS), side by side in one process, on this machine.

Builds runtime_c/kernels with the host cc -O3 -march=native into a temporary
shared library. BLAS runs single-threaded; --threads sets relax_edge's pool
only. Prints the best of --repeat runs per size as GFLOP/s and the ratio
relax_edge / BLAS. Numbers depend on the machine and its load; the script
checks the results against numpy but guarantees nothing about speed.

    python scripts/bench_gemm.py [--sizes 256 512 768 1024] [--threads 2]
"""

import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"

import argparse  # noqa: E402
import ctypes  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

from relax_edge.library.kernels import matmul_scratch_bytes, pack_dense_weights  # noqa: E402

RUNTIME = Path(__file__).resolve().parents[1] / "runtime_c"
SOURCES = ["kernels/gemm.c", "kernels/conv.c", "src/status.c", "src/threads.c"]


def build(out_dir: Path) -> ctypes.CDLL:
    path = out_dir / "librxe_gemm.so"
    cmd = ["cc", "-O3", "-march=native", "-std=c99", "-shared", "-fPIC", "-pthread", f"-I{RUNTIME / 'include'}",
           *[str(RUNTIME / s) for s in SOURCES], "-o", str(path)]
    subprocess.run(cmd, check=True)
    return ctypes.CDLL(str(path))


def best_seconds(fns: dict, repeat: int) -> dict:
    """The best time of each function, the runs interleaved so that a
    change of load on the machine hits all of them alike."""
    best = {name: float("inf") for name in fns}
    for _ in range(repeat + 1):   # the first round warms up
        for name, fn in fns.items():
            start = time.perf_counter()
            fn()
            best[name] = min(best[name], time.perf_counter() - start)
    return best


def pointer(a):
    return a.ctypes.data_as(ctypes.c_void_p)


def bench(lib, size: int, repeat: int):
    rng = np.random.default_rng(0)
    a = rng.standard_normal((size, size)).astype(np.float32)
    b = rng.standard_normal((size, size)).astype(np.float32)
    packed = pack_dense_weights(b)
    c = np.empty((size, size), np.float32)
    scratch = np.empty(matmul_scratch_bytes(size, size, size) // 4, np.float32)
    sizes = [ctypes.c_int64(v) for v in (1, size, size, size, 0, 0)]

    def matmul():
        status = lib.rxe_lib_matmul_f32(pointer(a), pointer(b), pointer(c), pointer(scratch), *sizes, None)
        assert status == 0, f"rxe_lib_matmul_f32 returned status {status}"

    def dense():
        status = lib.rxe_lib_dense_f32(pointer(a), pointer(packed), None, pointer(c), *sizes[1:4],
                                       ctypes.c_int64(0), None)
        assert status == 0, f"rxe_lib_dense_f32 returned status {status}"

    expected = a @ b
    for name, fn in (("matmul", matmul), ("dense", dense)):
        c.fill(np.nan)
        fn()
        np.testing.assert_allclose(c, expected, rtol=1e-3, atol=1e-3 * size ** 0.5, err_msg=name)
    seconds = best_seconds({"numpy": lambda: a @ b, "matmul": matmul, "dense": dense}, repeat)
    return {name: 2.0 * size ** 3 / s / 1e9 for name, s in seconds.items()}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[256, 512, 768, 1024])
    parser.add_argument("--threads", type=int, default=1, help="relax_edge thread pool size")
    parser.add_argument("--repeat", type=int, default=10, help="runs per measurement (the best counts)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        lib = build(Path(tmp))
        lib.rxe_set_num_threads(args.threads)
        print(f"square sgemm, GFLOP/s (best of {args.repeat}); numpy BLAS 1 thread, relax_edge {args.threads}")
        print(f"{'size':>6} {'numpy':>8} {'matmul':>8} {'dense':>8} {'matmul/numpy':>13} {'dense/numpy':>12}")
        for size in args.sizes:
            r = bench(lib, size, args.repeat)
            print(f"{size:>6} {r['numpy']:8.1f} {r['matmul']:8.1f} {r['dense']:8.1f} "
                  f"{r['matmul'] / r['numpy']:13.2f} {r['dense'] / r['numpy']:12.2f}")
        lib.rxe_threads_shutdown()


if __name__ == "__main__":
    main()
