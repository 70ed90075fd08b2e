"""relax_edge against ONNX Runtime on this machine, side by side in one run.

    python scripts/bench_vs_ort.py [--repeat 20] [--threads 1 2] [--png docs/bench_vs_ort.png]

For each model (MLP, MobileNetV2, ResNet-18, the BERT encoder at seq 32
and 128, the GPT-2 decoder at seq 32 and 128) and each thread count:
ONNX Runtime (CPU provider, intra-op threads = N, sequential execution,
all graph optimizations) and relax_edge built for the host with the C and
the LLVM backends (runtime thread pool = N). Then square matmuls (256 to
1024) against numpy with OpenBLAS on one thread.

What is timed: ONNX Runtime's `session.run` in this process (it includes
its small per-call overhead); relax_edge's run as timed by the model's
server on the monotonic clock (no transfer). The runtimes alternate in
`--rounds` rounds (each with its warm-up), and each median is over all of
its `--repeat` samples, so that a slow spell of a shared machine hits them
all alike; ratios are relax_edge / reference (below 1.0: relax_edge is
faster). The table is printed, and written with the raw numbers to
`--json` and as a chart to `--png`, atomically.
"""

from __future__ import annotations

import os

# one OpenBLAS thread for the numpy reference, before numpy is imported
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"

import argparse  # noqa: E402
import json  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import relax_edge as rxe  # noqa: E402
from relax_edge.files import write_atomic  # noqa: E402
from tests.onnx_models import get_model  # noqa: E402

# (label, model, import arguments, sizes of the inputs)
MODELS = [
    ("mlp", "mlp", {}, {}),
    ("mobilenet_v2", "mobilenet_v2", {}, {}),
    ("resnet18", "resnet18", {}, {}),
    ("bert seq=32", "bert_long", {"dim_bounds": {"seq": 512}}, {"seq": 32}),
    ("bert seq=128", "bert_long", {"dim_bounds": {"seq": 512}}, {"seq": 128}),
    ("gpt2 seq=32", "gpt2_long", {"dim_bounds": {"seq": 1024}}, {"seq": 32}),
    ("gpt2 seq=128", "gpt2_long", {"dim_bounds": {"seq": 1024}}, {"seq": 128}),
]
MATMUL_SIZES = (256, 512, 768, 1024)


def say(msg: str) -> None:
    print(f"[bench] {msg}", file=sys.stderr, flush=True)


def time_calls(fn, warmup: int, repeat: int) -> list:
    """Milliseconds of `repeat` calls of `fn()` after `warmup` calls."""
    for _ in range(warmup):
        fn()
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - start) * 1e3)
    return samples


def ort_session(path, threads: int):
    import onnxruntime as ort
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    return ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])


def bench_models(args, build_root: Path) -> list:
    rows = []
    artifacts = {}
    for label, name, import_args, sizes in MODELS:
        if args.models and label.split()[0] not in args.models:
            continue
        path, spec = get_model(name)
        feeds = spec["make_inputs"](seed=0, **sizes)
        for backend in args.backends:
            key = (name, backend)
            if key not in artifacts:
                say(f"compiling {name} ({backend})")
                mod = rxe.from_onnx(str(path), **import_args)
                artifacts[key] = rxe.build(mod, board="host", backend=backend, out_dir=build_root / f"{name}-{backend}",
                                           name=name.replace("-", "_"))
        for threads in args.threads:
            sess = ort_session(path, threads)
            expected = sess.run(None, feeds)[0]
            row = {"model": label, "threads": threads}
            samples = {"ort": []}
            with rxe.connect("host") as dev:
                loaded = {}
                for backend in args.backends:
                    m = loaded[backend] = dev.load(artifacts[(name, backend)], threads=threads)
                    got = m.run(*feeds.values())[0]
                    row[f"{backend}_max_rel_err"] = float(np.max(np.abs(got - expected))
                                                         / (np.max(np.abs(expected)) + 1e-12))
                    samples[backend] = []
                # rounds alternate the runtimes, so that a slow spell of a shared machine hits them all
                per_round = max(1, args.repeat // args.rounds)
                for _ in range(args.rounds):
                    samples["ort"] += time_calls(lambda sess=sess, feeds=feeds: sess.run(None, feeds), args.warmup,
                                                 per_round)
                    for backend, m in loaded.items():
                        stats = m.benchmark(*feeds.values(), warmup=args.warmup, repeat=per_round)
                        samples[backend] += stats["samples_ms"]
            row["ort_ms"] = statistics.median(samples["ort"])
            for backend in args.backends:
                row[f"{backend}_ms"] = statistics.median(samples[backend])
                row[f"{backend}_ratio"] = row[f"{backend}_ms"] / row["ort_ms"]
            rows.append(row)
            say("  ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in row.items()))
    return rows


def bench_matmul(args, build_root: Path) -> list:
    from relax_edge.ir import Builder, TensorType, Var
    from relax_edge.op.registry import make_call
    rows = []
    rng = np.random.default_rng(0)
    for n in args.matmul:
        a = rng.standard_normal((n, n)).astype(np.float32)
        b = rng.standard_normal((n, n)).astype(np.float32)
        x, y = Var("a", TensorType((n, n), "float32")), Var("b", TensorType((n, n), "float32"))
        bb = Builder()
        with bb.function("main", [x, y]):
            bb.ret(bb.emit(make_call("matmul", [x, y])))
        art = rxe.build(bb.get(), board="host", out_dir=build_root / f"matmul{n}", name=f"matmul{n}")
        numpy_samples, rxe_samples = [], []
        with rxe.connect("host") as dev:
            m = dev.load(art, threads=1)
            np.testing.assert_allclose(m.run(a, b)[0], a @ b, rtol=1e-3, atol=1e-3 * n ** 0.5)
            per_round = max(1, args.repeat // args.rounds)
            for _ in range(args.rounds):
                numpy_samples += time_calls(lambda a=a, b=b: a @ b, 1, per_round)
                rxe_samples += m.benchmark(a, b, warmup=1, repeat=per_round)["samples_ms"]
        numpy_ms, ms = statistics.median(numpy_samples), statistics.median(rxe_samples)
        flops = 2.0 * n ** 3
        row = {"n": n, "numpy_ms": numpy_ms, "rxe_ms": ms, "numpy_gflops": flops / numpy_ms / 1e6,
               "rxe_gflops": flops / ms / 1e6, "speed_vs_openblas": numpy_ms / ms}
        rows.append(row)
        say("  ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in row.items()))
    return rows


def table(rows, matmuls, backends) -> str:
    lines = [f"{'model':<16}{'thr':>4}{'ORT ms':>10}"
             + "".join(f"{b.upper() + ' ms':>10}{b.upper() + '/ORT':>10}" for b in backends)]
    for r in rows:
        lines.append(f"{r['model']:<16}{r['threads']:>4}{r['ort_ms']:>10.3f}"
                     + "".join(f"{r[b + '_ms']:>10.3f}{r[b + '_ratio']:>10.2f}" for b in backends))
    if matmuls:
        lines += ["", f"{'matmul n^3':<16}{'numpy ms':>10}{'rxe ms':>10}{'numpy GF/s':>12}{'rxe GF/s':>10}"
                      f"{'rxe/OpenBLAS speed':>20}"]
        for r in matmuls:
            lines.append(f"{r['n']:<16}{r['numpy_ms']:>10.3f}{r['rxe_ms']:>10.3f}{r['numpy_gflops']:>12.1f}"
                         f"{r['rxe_gflops']:>10.1f}{r['speed_vs_openblas']:>20.2f}")
    return "\n".join(lines)


def chart(rows, backends, png: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    threads = sorted({r["threads"] for r in rows})
    fig, axes = plt.subplots(1, len(threads), figsize=(6 * len(threads), 4), squeeze=False)
    for ax, t in zip(axes[0], threads):
        sub = [r for r in rows if r["threads"] == t]
        xs = np.arange(len(sub))
        width = 0.8 / len(backends)
        for k, b in enumerate(backends):
            ax.bar(xs + k * width, [r[b + "_ratio"] for r in sub], width, label=f"relax_edge {b.upper()}")
        ax.axhline(1.0, color="black", linewidth=0.8, linestyle="--")
        ax.set_xticks(xs + width * (len(backends) - 1) / 2)
        ax.set_xticklabels([r["model"] for r in sub], rotation=30, ha="right")
        ax.set_ylabel("latency / ONNX Runtime (lower is better)")
        ax.set_title(f"{t} thread{'s' if t > 1 else ''}")
        ax.legend()
    fig.tight_layout()
    with tempfile.NamedTemporaryFile(dir=png.parent, suffix=".png", delete=False) as tmp:
        fig.savefig(tmp.name, dpi=110)
    os.chmod(tmp.name, 0o644)
    os.replace(tmp.name, png)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=5, help="alternations of the runtimes (default 5)")
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--backends", nargs="+", default=["c", "llvm"], choices=["c", "llvm"])
    parser.add_argument("--models", nargs="*", help="only these (mlp mobilenet_v2 resnet18 bert gpt2)")
    parser.add_argument("--matmul", type=int, nargs="*", default=list(MATMUL_SIZES), help="square sizes")
    parser.add_argument("--json", help="write the rows to this file")
    parser.add_argument("--png", help="write the chart to this file")
    parser.add_argument("--build-dir", help="keep the builds here (default: a temporary directory)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench-vs-ort-") as tmp:
        root = Path(args.build_dir) if args.build_dir else Path(tmp)
        root.mkdir(parents=True, exist_ok=True)
        rows = bench_models(args, root)
        matmuls = bench_matmul(args, root) if args.matmul else []
    print(table(rows, matmuls, args.backends))
    if args.json:
        write_atomic(Path(args.json), json.dumps({"models": rows, "matmul": matmuls}, indent=1))
    if args.png and rows:
        Path(args.png).parent.mkdir(parents=True, exist_ok=True)
        chart(rows, args.backends, Path(args.png))
    return 0


if __name__ == "__main__":
    sys.exit(main())
