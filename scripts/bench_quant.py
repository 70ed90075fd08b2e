"""relax_edge's int8 models against ONNX Runtime on the same quantized ONNX files.

    python scripts/bench_quant.py [--threads 1 2] [--rounds 5] [--repeat 20] [--models mobilenet_v2 resnet18 bert]
                                  [--profile] [--build-dir D [--reuse]] [--json F]

The models (tests/quant_zoo.py, cached): MobileNetV2 and ResNet-18 at
224x224 quantized by ONNX Runtime's quantize_static (QDQ, per-channel int8
weights, uint8 activations), the BERT encoder at seq 128 quantized by
quantize_dynamic. For each model and thread count: ONNX Runtime (CPU
provider, all graph optimizations, the same file), relax_edge's build of
that file for the host (C backend; the quantize pass makes it integer) and
relax_edge's build of the float model it was quantized from (the int8 / fp32
speedup).

Timing as scripts/bench_vs_ort.py: the runtimes alternate in `--rounds`
rounds, each with its warm-up; a cell is the median of its round medians and
its spread the lowest and highest round median. Ratios: relax_edge int8 /
ONNX Runtime int8 (below 1.0: relax_edge is faster) and relax_edge fp32 /
relax_edge int8 (the speedup of quantizing). `err` is the largest difference
of relax_edge's int8 output from ONNX Runtime's, over the output's range.
`--profile` adds the int8 builds' per-kernel profile: per kernel (library
symbol or tensor program), its calls in one run and the median of its summed
time over the rounds, with its share of their total.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import relax_edge as rxe  # noqa: E402
from relax_edge.build import Artifact  # noqa: E402
from relax_edge.files import write_atomic  # noqa: E402
from scripts.bench_vs_ort import ort_session, say, time_calls  # noqa: E402   (a namespace package)
from tests import onnx_models, quant_zoo  # noqa: E402

IMAGE = 224
SEQ = 128
MODELS = ("mobilenet_v2", "resnet18", "bert")


def model_files(name):
    """(int8 path, fp32 path, import arguments, inputs) of `name`."""
    if name == "bert":
        path, spec = quant_zoo.get_bert(long=True)
        float_path, _ = onnx_models.get_model("bert_long")
        return path, float_path, {"dim_bounds": {"seq": 512}}, spec["make_inputs"](seed=0, seq=SEQ)
    return quant_zoo.get_cnn(name, IMAGE), quant_zoo.get_float_cnn(name, IMAGE), {}, \
        {"input": quant_zoo.make_image(IMAGE, 0)}


def build(path, import_args, out_dir, name, reuse=False):
    if reuse and (out_dir / "artifact.json").exists():
        return Artifact.load(out_dir)
    say(f"compiling {Path(path).name}")
    return rxe.build(rxe.from_onnx(str(path), **import_args), board="host", out_dir=out_dir, name=name)


def spread(rounds):
    """(median of the round medians, lowest, highest)."""
    medians = [statistics.median(r) for r in rounds]
    return statistics.median(medians), min(medians), max(medians)


def bench_model(name, args, root: Path) -> list:
    path, float_path, import_args, feeds = model_files(name)
    arts = {"int8": build(path, import_args, root / f"{name}-int8", f"{name}_int8", args.reuse),
            "fp32": build(float_path, import_args, root / f"{name}-fp32", f"{name}_fp32", args.reuse)}
    rows = []
    for threads in args.threads:
        sess = ort_session(path, threads)
        expected = sess.run(None, feeds)[0]
        rounds = {"ort": [], "int8": [], "fp32": []}
        with rxe.connect("host") as dev:
            loaded = {k: dev.load(a, threads=threads) for k, a in arts.items()}
            got = loaded["int8"].run(*feeds.values())[0]
            err = float(np.abs(got - expected).max() / (expected.max() - expected.min() + 1e-12))
            per_round = max(1, args.repeat // args.rounds)
            for _ in range(args.rounds):   # alternating, so that a slow spell of a shared machine hits all
                rounds["ort"].append(time_calls(lambda sess=sess: sess.run(None, feeds), args.warmup, per_round))
                for key, m in loaded.items():
                    rounds[key].append(m.benchmark(*feeds.values(), warmup=args.warmup,
                                                   repeat=per_round)["samples_ms"])
            profile = kernel_shares(loaded["int8"], feeds, args.rounds) if args.profile else None
        row = {"model": name if name != "bert" else f"bert seq={SEQ}", "threads": threads, "err": err}
        if profile is not None:
            row["profile"] = profile
        for key, samples in rounds.items():
            row[f"{key}_ms"], row[f"{key}_lo"], row[f"{key}_hi"] = spread(samples)
        row["int8_vs_ort"] = row["int8_ms"] / row["ort_ms"]
        row["fp32_vs_int8"] = row["fp32_ms"] / row["int8_ms"]
        rows.append(row)
        say("  ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in row.items()
                      if k != "profile"))
    return rows


def kernel_shares(module, feeds, runs) -> list:
    """The int8 build's per-kernel profile: per kernel (the program or library symbol, numbered programs
    together), the calls of one run and the median over `runs` runs of their summed ms, largest first."""
    totals, calls = {}, {}
    for _ in range(max(runs, 1)):
        run, count = {}, {}
        for r in module.profile(*feeds.values())["rows"]:
            kernel = re.sub(r"_\d+$", "", r["kernel"])
            run[kernel] = run.get(kernel, 0.0) + r["total_ms"]
            count[kernel] = count.get(kernel, 0) + int(r["calls"])
        for kernel, ms in run.items():
            totals.setdefault(kernel, []).append(ms)
        calls = count
    medians = {k: statistics.median(v) for k, v in totals.items()}
    whole = sum(medians.values()) or 1.0
    return [{"kernel": k, "calls": calls[k], "ms": ms, "share": ms / whole}
            for k, ms in sorted(medians.items(), key=lambda kv: -kv[1])]


def profile_table(rows) -> str:
    lines = []
    for r in rows:
        if "profile" not in r:
            continue
        lines.append(f"{r['model']} int8, {r['threads']} thread(s): per-kernel profile (median of the runs)")
        for p in r["profile"][:8]:
            lines.append(f"  {p['kernel']:<36}{p['calls']:>5}{p['ms']:>9.3f} ms{p['share']:>7.1%}")
    return "\n".join(lines)


def table(rows) -> str:
    def cell(r, key):
        return f"{r[key + '_ms']:.2f} ({r[key + '_lo']:.2f}-{r[key + '_hi']:.2f})"
    lines = [f"{'model':<14}{'thr':>4}{'ORT int8 ms':>24}{'rxe int8 ms':>24}{'rxe/ORT':>9}{'rxe fp32 ms':>24}"
             f"{'fp32/int8':>10}{'err':>8}"]
    for r in rows:
        lines.append(f"{r['model']:<14}{r['threads']:>4}{cell(r, 'ort'):>24}{cell(r, 'int8'):>24}"
                     f"{r['int8_vs_ort']:>9.2f}{cell(r, 'fp32'):>24}{r['fp32_vs_int8']:>10.2f}{r['err']:>8.1%}")
    lines.append("ms: median of the round medians (lowest-highest round median)")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=20, help="timed runs per runtime, over all rounds")
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=5, help="alternations of the runtimes (default 5)")
    parser.add_argument("--threads", type=int, nargs="+", default=[1])
    parser.add_argument("--models", nargs="+", default=list(MODELS), choices=MODELS)
    parser.add_argument("--json", help="write the rows to this file")
    parser.add_argument("--build-dir", help="keep the builds here (default: a temporary directory)")
    parser.add_argument("--reuse", action="store_true", help="load the builds --build-dir holds (same sources)")
    parser.add_argument("--profile", action="store_true",
                        help="also print the int8 builds' per-kernel profile (median of --rounds runs)")
    args = parser.parse_args(argv)
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-quant-") as tmp:
        root = Path(args.build_dir) if args.build_dir else Path(tmp)
        root.mkdir(parents=True, exist_ok=True)
        for name in args.models:
            rows += bench_model(name, args, root)
    print(table(rows))
    if args.profile:
        print(profile_table(rows))
    if args.json:
        write_atomic(Path(args.json), json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
