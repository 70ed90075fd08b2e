"""Single-precision GEMM throughput: relax_edge's library kernels
(rxe_lib_matmul_f32, and rxe_lib_dense_f32 with packed weights) against
numpy's BLAS (OpenBLAS), side by side in one process, on this machine.

Builds runtime_c/kernels with the host cc -O3 -march=native into a temporary
shared library. BLAS runs single-threaded; --threads sets relax_edge's pool
only. Prints the best of --repeat runs per size as GFLOP/s and the ratio
relax_edge / BLAS. Numbers depend on the machine and its load; the script
checks the results against numpy but guarantees nothing about speed.

--conv times rxe_lib_conv2d_f32 on the conv layers of ResNet-18 and
MobileNetV2 instead; its BLAS column is the matmul of the weights with a
precomputed im2col (the packing of the input is not timed there).

    python scripts/bench_gemm.py [--sizes 256 512 768 1024] [--threads 2] [--conv]
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

from relax_edge.library.kernels import (conv2d_output_size, conv2d_scratch_bytes, matmul_scratch_bytes,  # noqa: E402
                                        pack_conv2d_weights, pack_dense_weights)

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


# name -> (c, h, o, k, stride, pad), square inputs and kernels, batch 1
CONVS = {
    "r18 stem 7x7/2": (3, 224, 64, 7, 2, 3),
    "r18 l1 3x3": (64, 56, 64, 3, 1, 1),
    "r18 l2 3x3": (128, 28, 128, 3, 1, 1),
    "r18 l3 3x3": (256, 14, 256, 3, 1, 1),
    "r18 l4 3x3": (512, 7, 512, 3, 1, 1),
    "r18 down 1x1/2": (64, 56, 128, 1, 2, 0),
    "mb2 first 3x3/2": (3, 224, 32, 3, 2, 1),
    "mb2 16-96@112": (16, 112, 96, 1, 1, 0),
    "mb2 96-24@56": (96, 56, 24, 1, 1, 0),
    "mb2 144-24@56": (144, 56, 24, 1, 1, 0),
    "mb2 144-32@28": (144, 28, 32, 1, 1, 0),
    "mb2 192-64@14": (192, 14, 64, 1, 1, 0),
    "mb2 384-64@14": (384, 14, 64, 1, 1, 0),
    "mb2 576-160@7": (576, 7, 160, 1, 1, 0),
    "mb2 960-320@7": (960, 7, 320, 1, 1, 0),
    "mb2 320-1280@7": (320, 7, 1280, 1, 1, 0),
}


def bench_conv(lib, shape, repeat: int):
    c, h, o, k, stride, pad = shape
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, c, h, h)).astype(np.float32)
    w = rng.standard_normal((o, c, k, k)).astype(np.float32)
    packed = pack_conv2d_weights(w, 1)
    oh = conv2d_output_size(h, k, stride, pad, pad, 1)
    y = np.empty((1, o, oh, oh), np.float32)
    scratch = np.empty(conv2d_scratch_bytes(c, k, k, oh, oh, 1) // 4, np.float32)
    sizes = [ctypes.c_int64(v) for v in (1, c, h, h, o, k, k, oh, oh, stride, stride, pad, pad, 1, 1, 1, 0)]
    xp = np.pad(x[0], ((0, 0), (pad, pad), (pad, pad)))
    cols = np.stack([xp[:, ky:ky + stride * (oh - 1) + 1:stride, kx:kx + stride * (oh - 1) + 1:stride]
                     for ky in range(k) for kx in range(k)], 1).reshape(c * k * k, oh * oh)
    wm = w.reshape(o, -1)

    def conv():
        status = lib.rxe_lib_conv2d_f32(pointer(x), pointer(packed), None, pointer(y), pointer(scratch), *sizes,
                                        None)
        assert status == 0, f"rxe_lib_conv2d_f32 returned status {status}"

    conv()
    np.testing.assert_allclose(y.reshape(o, -1), wm @ cols, rtol=1e-3, atol=1e-3 * (c * k * k) ** 0.5)
    seconds = best_seconds({"numpy": lambda: wm @ cols, "conv": conv}, repeat)
    flop = 2.0 * o * oh * oh * c * k * k
    return {name: flop / s / 1e9 for name, s in seconds.items()}, seconds["conv"]


def main_conv(lib, repeat: int, threads: int):
    print(f"conv2d, GFLOP/s (best of {repeat}); numpy = BLAS matmul of a precomputed im2col, 1 thread; "
          f"relax_edge {threads} thread(s)")
    print(f"{'layer':<18} {'numpy':>8} {'conv':>8} {'conv/numpy':>11} {'conv ms':>8}")
    for name, shape in CONVS.items():
        r, s = bench_conv(lib, shape, repeat)
        print(f"{name:<18} {r['numpy']:8.1f} {r['conv']:8.1f} {r['conv'] / r['numpy']:11.2f} {1e3 * s:8.3f}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[256, 512, 768, 1024])
    parser.add_argument("--threads", type=int, default=1, help="relax_edge thread pool size")
    parser.add_argument("--repeat", type=int, default=10, help="runs per measurement (the best counts)")
    parser.add_argument("--conv", action="store_true", help="time the conv layers of ResNet-18 and MobileNetV2")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        lib = build(Path(tmp))
        lib.rxe_set_num_threads(args.threads)
        if args.conv:
            main_conv(lib, args.repeat, args.threads)
            lib.rxe_threads_shutdown()
            return
        print(f"square sgemm, GFLOP/s (best of {args.repeat}); numpy BLAS 1 thread, relax_edge {args.threads}")
        print(f"{'size':>6} {'numpy':>8} {'matmul':>8} {'dense':>8} {'matmul/numpy':>13} {'dense/numpy':>12}")
        for size in args.sizes:
            r = bench(lib, size, args.repeat)
            print(f"{size:>6} {r['numpy']:8.1f} {r['matmul']:8.1f} {r['dense']:8.1f} "
                  f"{r['matmul'] / r['numpy']:13.2f} {r['dense'] / r['numpy']:12.2f}")
        lib.rxe_threads_shutdown()


if __name__ == "__main__":
    main()
