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
precomputed im2col (the packing of the input is not timed there);
--baseline DIR also times the conv.c, gemm.c and gemm_internal.h of DIR,
built the same way, interleaved with these.

--llm times rxe_lib_dense_f32 (packed weights) at the dense shapes of
SmolLM2-135M's prefill (K x N: 576x576, 576x192, 576x1536, 1536x576 and the
LM head 576x49152) for the rows of --rows (default 128; the prompt length),
against numpy's a @ w; --baseline DIR also times the gemm.c and
gemm_internal.h of DIR, built the same way, interleaved with these; the
weighted line is the whole step's dense work (its layers' mix, less the LM
head).

--depthwise times rxe_lib_depthwise_conv2d_f32 on the 17 depthwise layers of
MobileNetV2 (3x3, pad 1, bias, relu6) as GFLOP/s and GB/s (input, weights,
bias and output bytes), with a numpy reference (a sum of nine shifted
slices) for scale; --baseline OTHER.c also times another depthwise.c, built
the same way, interleaved with this one.

    python scripts/bench_gemm.py [--sizes 256 512 768 1024] [--threads 2] [--conv]
    python scripts/bench_gemm.py --conv [--baseline dir_with_old_conv_and_gemm]
    python scripts/bench_gemm.py --llm [--rows 1 16 128 300] [--baseline dir_with_old_gemm]
    python scripts/bench_gemm.py --depthwise [--baseline old_depthwise.c]
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

from relax_edge.library.kernels import (  # noqa: E402
    conv2d_output_size,
    conv2d_scratch_bytes,
    matmul_scratch_bytes,
    pack_conv2d_weights,
    pack_dense_weights,
)

RUNTIME = Path(__file__).resolve().parents[1] / "runtime_c"
SOURCES = ["kernels/gemm.c", "kernels/gemv.c", "kernels/conv.c", "kernels/depthwise.c", "src/status.c",
           "src/threads.c"]


def build(out_dir: Path, replace: dict = None, name: str = "librxe_gemm.so"):
    """replace: source path (as in SOURCES) -> the file to build instead."""
    path = out_dir / name
    sources = [str((replace or {}).get(s, RUNTIME / s)) for s in SOURCES]
    cmd = ["cc", "-O3", "-march=native", "-std=c99", "-shared", "-fPIC", "-pthread", f"-I{RUNTIME / 'include'}",
           *sources, "-o", str(path)]
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


def bench_conv(libs: dict, shape, repeat: int):
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

    def kernel(lib):
        def run():
            status = lib.rxe_lib_conv2d_f32(pointer(x), pointer(packed), None, pointer(y), pointer(scratch),
                                            *sizes, None)
            assert status == 0, f"rxe_lib_conv2d_f32 returned status {status}"
        return run

    fns = {"numpy": lambda: wm @ cols, **{name: kernel(lib) for name, lib in libs.items()}}
    for name in libs:
        y.fill(np.nan)
        fns[name]()
        np.testing.assert_allclose(y.reshape(o, -1), wm @ cols, rtol=1e-3, atol=1e-3 * (c * k * k) ** 0.5,
                                   err_msg=name)
    return best_seconds(fns, repeat), 2.0 * o * oh * oh * c * k * k


def main_conv(libs: dict, repeat: int, threads: int):
    print(f"conv2d, GFLOP/s (best of {repeat}); numpy = BLAS matmul of a precomputed im2col, 1 thread; "
          f"relax_edge {threads} thread(s)")
    names = list(libs)
    print(f"{'layer':<18} {'numpy':>8}" + "".join(f" {n:>8} {n + '/numpy':>14} {n + ' ms':>11}" for n in names))
    for name, shape in CONVS.items():
        seconds, flop = bench_conv(libs, shape, repeat)
        line = f"{name:<18} {flop / seconds['numpy'] / 1e9:8.1f}"
        for n in names:
            line += (f" {flop / seconds[n] / 1e9:8.1f} {seconds['numpy'] / seconds[n]:14.2f}"
                     f" {1e3 * seconds[n]:11.3f}")
        print(line)


# SmolLM2-135M's dense layers: name -> (k, n, how many per layer)
LLM_DENSE = {"q/o 576x576": (576, 576, 2), "k/v 576x192": (576, 192, 2), "gate/up 576x1536": (576, 1536, 2),
             "down 1536x576": (1536, 576, 1), "lm head 576x49152": (576, 49152, 0)}


def bench_dense(libs: dict, m: int, k: int, n: int, repeat: int):
    rng = np.random.default_rng(0)
    a = rng.standard_normal((m, k)).astype(np.float32)
    w = rng.standard_normal((k, n)).astype(np.float32)
    bias = rng.standard_normal(n).astype(np.float32)
    packed = pack_dense_weights(w)
    c = np.empty((m, n), np.float32)
    sizes = [ctypes.c_int64(v) for v in (m, n, k, 0)]

    def kernel(lib):
        def run():
            status = lib.rxe_lib_dense_f32(pointer(a), pointer(packed), pointer(bias), pointer(c), *sizes, None)
            assert status == 0, f"rxe_lib_dense_f32 returned status {status}"
        return run

    expected = a @ w + bias
    fns = {"numpy": lambda: a @ w + bias, **{name: kernel(lib) for name, lib in libs.items()}}
    for name in libs:
        c.fill(np.nan)
        fns[name]()
        np.testing.assert_allclose(c, expected, rtol=1e-3, atol=1e-3 * k ** 0.5, err_msg=name)
    return best_seconds(fns, repeat), 2.0 * m * n * k


def main_llm(libs: dict, rows, repeat: int, threads: int):
    print(f"dense (packed weights + bias) at SmolLM2-135M's shapes, GFLOP/s (best of {repeat}); numpy BLAS "
          f"1 thread, relax_edge {threads} thread(s)")
    names = list(libs)
    print(f"{'rows':>5} {'layer':<18} {'numpy':>8}" + "".join(f" {n:>8} {n + '/numpy':>14}" for n in names))
    for m in rows:
        totals = dict.fromkeys(["numpy", *names], 0.0)
        flops = 0.0
        for name, (k, n, count) in LLM_DENSE.items():
            seconds, flop = bench_dense(libs, m, k, n, repeat)
            print(f"{m:>5} {name:<18} {flop / seconds['numpy'] / 1e9:8.1f}"
                  + "".join(f" {flop / seconds[x] / 1e9:8.1f} {seconds['numpy'] / seconds[x]:14.2f}" for x in names))
            flops += count * flop
            for x in totals:
                totals[x] += count * seconds[x]
        print(f"{m:>5} {'weighted layer':<18} {flops / totals['numpy'] / 1e9:8.1f}"
              + "".join(f" {flops / totals[x] / 1e9:8.1f} {totals['numpy'] / totals[x]:14.2f}" for x in names))


# MobileNetV2's depthwise layers: (c, h, stride, how many), 3x3, pad 1, batch 1
DEPTHWISE = [(32, 112, 1, 1), (96, 112, 2, 1), (144, 56, 1, 1), (144, 56, 2, 1), (192, 28, 1, 2), (192, 28, 2, 1),
             (384, 14, 1, 4), (576, 14, 1, 2), (576, 14, 2, 1), (960, 7, 1, 3)]


def bench_depthwise(libs: dict, layer, repeat: int):
    from relax_edge.library.depthwise import depthwise_conv2d_reference
    c, h, stride, _ = layer
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, c, h, h)).astype(np.float32)
    w = rng.standard_normal((c, 1, 3, 3)).astype(np.float32)
    bias = rng.standard_normal(c).astype(np.float32)
    oh = conv2d_output_size(h, 3, stride, 1, 1, 1)
    sizes = [ctypes.c_int64(v) for v in (1, c, h, h, 3, 3, oh, oh, stride, stride, 1, 1, 1, 1, 2)]
    expected = depthwise_conv2d_reference(x, w, bias, (stride, stride), (1, 1, 1, 1), (1, 1), 2)
    xp, wb, y = np.pad(x[0], ((0, 0), (1, 1), (1, 1))), w.reshape(c, 9, 1, 1), np.empty_like(expected)
    span = stride * (oh - 1) + 1

    def numpy_dw():
        acc = bias.reshape(c, 1, 1) + wb[:, 0] * xp[:, 0:span:stride, 0:span:stride]
        for k in range(1, 9):
            acc += wb[:, k] * xp[:, k // 3:k // 3 + span:stride, k % 3:k % 3 + span:stride]
        return np.clip(acc, 0, 6, out=acc)

    def kernel(lib):
        def run():
            status = lib.rxe_lib_depthwise_conv2d_f32(pointer(x), pointer(w), pointer(bias), pointer(y), *sizes,
                                                      None)
            assert status == 0, f"rxe_lib_depthwise_conv2d_f32 returned status {status}"
        return run

    fns = {"numpy": numpy_dw, **{name: kernel(lib) for name, lib in libs.items()}}
    for name, fn in fns.items():
        y.fill(np.nan)
        out = fn()
        np.testing.assert_allclose(y if out is None else out[None], expected, rtol=1e-4, atol=1e-5, err_msg=name)
    return best_seconds(fns, repeat), 2.0 * 9 * c * oh * oh, 4.0 * (x.size + w.size + c + y.size)


def main_depthwise(libs: dict, repeat: int, threads: int):
    print(f"depthwise 3x3 pad 1 + bias + relu6, best of {repeat}; relax_edge {threads} thread(s); "
          f"GB/s counts input, weights, bias and output once")
    names = list(libs)
    print(f"{'layer':<18} {'numpy ms':>9}" + "".join(f" {n + ' ms':>12} {'GFLOP/s':>8} {'GB/s':>6}" for n in names))
    totals = dict.fromkeys(["numpy", *names], 0.0)
    for layer in DEPTHWISE:
        seconds, flop, nbytes = bench_depthwise(libs, layer, repeat)
        c, h, stride, count = layer
        line = f"{f'{c}@{h} s{stride} x{count}':<18} {1e3 * seconds['numpy']:9.3f}"
        for n in names:
            line += f" {1e3 * seconds[n]:12.3f} {flop / seconds[n] / 1e9:8.1f} {nbytes / seconds[n] / 1e9:6.1f}"
        print(line)
        for n in totals:
            totals[n] += count * seconds[n]
    print(f"{'model total ms':<18} {1e3 * totals['numpy']:9.3f}" + "".join(f" {1e3 * totals[n]:12.3f} {'':>8} {'':>6}"
                                                                          for n in names))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[256, 512, 768, 1024])
    parser.add_argument("--threads", type=int, default=1, help="relax_edge thread pool size")
    parser.add_argument("--repeat", type=int, default=10, help="runs per measurement (the best counts)")
    parser.add_argument("--conv", action="store_true", help="time the conv layers of ResNet-18 and MobileNetV2")
    parser.add_argument("--depthwise", action="store_true", help="time the depthwise layers of MobileNetV2")
    parser.add_argument("--llm", action="store_true", help="time the dense layers of SmolLM2-135M")
    parser.add_argument("--rows", type=int, nargs="+", default=[128], help="with --llm: the rows (prompt tokens)")
    parser.add_argument("--baseline", type=Path, help="with --depthwise: another depthwise.c to time alongside; "
                        "with --conv or --llm: a directory with another conv.c, gemm.c and gemm_internal.h")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        lib = build(Path(tmp))
        lib.rxe_threads_set_count(args.threads)
        if args.depthwise or args.conv or args.llm:
            libs = {"rxe": lib}
            if args.baseline:
                replace = ({"kernels/depthwise.c": args.baseline} if args.depthwise else
                           {f"kernels/{f}": args.baseline / f for f in ("conv.c", "gemm.c")})
                libs["baseline"] = build(Path(tmp), replace, "librxe_baseline.so")
                libs["baseline"].rxe_threads_set_count(args.threads)
            if args.llm:
                main_llm(libs, args.rows, args.repeat, args.threads)
            else:
                (main_depthwise if args.depthwise else main_conv)(libs, args.repeat, args.threads)
            for one in libs.values():
                one.rxe_threads_shutdown()
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
