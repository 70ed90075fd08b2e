"""relax_edge against its CNN peers on this machine, side by side in one run.

    python scripts/bench_cnn.py [--models mobilenet_v2 resnet18 mobilenet_v3_small efficientnet_b0]
                                [--threads 1 2] [--rounds 5] [--repeat 20] [--engines rxe ort executorch tvm]
                                [--llvm] [--json out.json]

Every model is built once in PyTorch from torchvision with seeded random
weights (BatchNorm statistics too), and every engine gets those same weights:
the ONNX file (opset 17, TorchScript exporter) that relax_edge and ONNX
Runtime (and TVM) import, and the ExecuTorch program, are exported in this
script from the same module. MobileNetV3-small and EfficientNet-B0 (squeeze-
excite, hard-swish, SiLU) are the families nothing in relax_edge was tuned on.

The engines, each at N threads for N in --threads:
  rxe         relax_edge, host board, C backend (and LLVM with --llvm), its
              runtime pool at N threads; timed by the model's server on the
              monotonic clock (the server is a child process).
  ort         ONNX Runtime, CPU provider, intra-op threads = N, sequential,
              all graph optimizations; `session.run` timed in this process.
  executorch  ExecuTorch with the XNNPACK delegate: torch.export, then
              to_edge_transform_and_lower with XnnpackPartitioner, to a .pte
              run by `executorch.runtime`; its pthreadpool (process-wide) is
              set to N threads with portable_lib._unsafe_reset_threadpool(N);
              `method.execute` timed in this process.
  tvm         Apache TVM (Relax ONNX frontend, `tvm.compile` for
              LLVM at the host CPU, default schedules: no MetaSchedule tuning),
              run by the Relax VM; its pool set to N threads with
              runtime.config_threadpool; timed in this process.
An engine that is not installed, or that fails to export or build a model,
gets a cell saying why, and the rest of the run goes on.

Every engine's output is compared with ONNX Runtime's (max abs diff printed);
an engine whose answer is off by more than --tolerance (relative to the
largest ORT logit) is not timed.

Timing: in each of --rounds rounds every engine runs one block (warm-up, then
--repeat/--rounds timed runs), the engines in a rotating order, with a pause
of --settle-ms between blocks. Blocks, not run-by-run alternation: a runtime
whose pool spins after a run (ONNX Runtime's, XNNPACK's) would otherwise hold
the second core while the next engine runs. Medians are over all samples of
all rounds, with min and max.

Spin-loop calibration: at N > 1 threads, each round also times a fixed busy
loop (C, through ctypes, so that Python threads run it in parallel) alone and
on N threads at once. The ratio (N at once / alone) is about 1.0 where N cores
were free while the figures were taken, and about N where only one was; it is
printed beside the N-thread rows.

The table is printed; --json writes it with the raw samples, atomically.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

# label -> (torchvision architecture, image size)
MODELS = {
    "mobilenet_v2": ("mobilenet_v2", 224),
    "resnet18": ("resnet18", 224),
    "mobilenet_v3_small": ("mobilenet_v3_small", 224),
    "efficientnet_b0": ("efficientnet_b0", 224),
}
ENGINES = ("rxe", "ort", "executorch", "tvm")
OPSET = 17


def say(msg: str) -> None:
    print(f"[bench] {msg}", file=sys.stderr, flush=True)


class Unavailable(Exception):
    """The engine cannot run here (not installed, or it failed on this model): the cell says why."""


# ---------------------------------------------------------------- models

@dataclass
class Case:
    """One model: the PyTorch module every engine's copy is exported from, and its input."""
    label: str
    module: object
    x: np.ndarray
    onnx_path: Path
    work: Path


def make_case(label: str, root: Path, seed: int = 0) -> Case:
    import torch

    from tests.onnx_models import _vision_model
    arch, size = MODELS[label]
    module = _vision_model(arch, seed)
    x = np.random.default_rng(seed).standard_normal((1, 3, size, size)).astype(np.float32)
    work = root / label
    work.mkdir(parents=True, exist_ok=True)
    path = work / f"{label}.onnx"
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")
        torch.onnx.export(module, (torch.from_numpy(x),), str(path), dynamo=False, opset_version=OPSET,
                          input_names=["input"], output_names=["logits"])
    return Case(label, module, x, path, work)


# ---------------------------------------------------------------- engines

def time_calls(fn, warmup: int, repeat: int, clock=time.perf_counter) -> list:
    """Milliseconds of `repeat` calls of `fn()` after `warmup` calls."""
    for _ in range(warmup):
        fn()
    samples = []
    for _ in range(repeat):
        start = clock()
        fn()
        samples.append((clock() - start) * 1e3)
    return samples


class OrtEngine:
    label = "ORT"

    def __init__(self, case: Case, threads: int):
        import onnxruntime as ort
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = threads
        opts.inter_op_num_threads = 1
        opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        self.sess = ort.InferenceSession(str(case.onnx_path), opts, providers=["CPUExecutionProvider"])
        self.feeds = {"input": case.x}

    def run(self) -> np.ndarray:
        return self.sess.run(None, self.feeds)[0]

    def time(self, warmup: int, repeat: int) -> list:
        return time_calls(self.run, warmup, repeat)

    def close(self) -> None:
        self.sess = None


class RxeEngine:
    """relax_edge on the host board; one build per model and backend, shared by the thread counts."""

    def __init__(self, case: Case, threads: int, backend: str = "c", builds: dict | None = None):
        import relax_edge as rxe
        self.label = f"rxe {backend.upper()}"
        builds = {} if builds is None else builds
        key = (case.label, backend)
        if key not in builds:
            say(f"compiling {case.label} with relax_edge ({backend})")
            mod = rxe.from_onnx(str(case.onnx_path))
            builds[key] = rxe.build(mod, board="host", backend=backend, out_dir=case.work / f"rxe-{backend}",
                                    name=case.label)
        self.dev = rxe.connect("host")
        self.dev.__enter__()
        try:
            self.m = self.dev.load(builds[key], threads=threads)
        except BaseException:
            self.close()
            raise
        self.x = case.x

    def run(self) -> np.ndarray:
        return self.m.run(self.x)[0]

    def time(self, warmup: int, repeat: int) -> list:
        return list(self.m.benchmark(self.x, warmup=warmup, repeat=repeat)["samples_ms"])

    def close(self) -> None:
        self.dev.__exit__(None, None, None)


def export_pte(case: Case) -> Path:
    """The ExecuTorch program of `case.module`, lowered to XNNPACK (exported once per model)."""
    path = case.work / f"{case.label}-xnnpack.pte"
    if path.exists():
        return path
    import torch
    try:
        from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
        from executorch.exir import to_edge_transform_and_lower
    except ImportError as exc:
        raise Unavailable(f"executorch not installed (pip install executorch): {exc}") from None
    say(f"exporting {case.label} to ExecuTorch (XNNPACK)")
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")
        exported = torch.export.export(case.module, (torch.from_numpy(case.x),))
        program = to_edge_transform_and_lower(exported, partitioner=[XnnpackPartitioner()]).to_executorch()
    path.write_bytes(program.buffer)
    return path


class ExecuTorchEngine:
    label = "ExecuTorch"

    def __init__(self, case: Case, threads: int):
        try:
            import torch
            from executorch.extension.pybindings import portable_lib
            from executorch.runtime import Runtime
        except ImportError as exc:
            raise Unavailable(f"executorch not installed (pip install executorch): {exc}") from None
        pte = export_pte(case)
        portable_lib._unsafe_reset_threadpool(threads)
        got = portable_lib._threadpool_get_thread_count()
        if got != threads:
            raise Unavailable(f"its threadpool has {got} threads, not {threads}")
        self.method = Runtime.get().load_program(str(pte)).load_method("forward")
        self.inputs = [torch.from_numpy(case.x)]

    def run(self) -> np.ndarray:
        return self.method.execute(self.inputs)[0].numpy()

    def time(self, warmup: int, repeat: int) -> list:
        return time_calls(lambda: self.method.execute(self.inputs), warmup, repeat)

    def close(self) -> None:
        self.method = None


def build_tvm(case: Case, builds: dict):
    key = (case.label, "tvm")
    if key not in builds:
        try:
            import onnx
            import tvm
            from tvm.relax.frontend.onnx import from_onnx
        except ImportError as exc:
            raise Unavailable(f"tvm not installed (pip install apache-tvm): {exc}") from None
        say(f"compiling {case.label} with TVM {tvm.__version__}")
        mod = from_onnx(onnx.load(str(case.onnx_path)), shape_dict={"input": list(case.x.shape)},
                        keep_params_in_input=False)
        target = tvm.target.Target({"kind": "llvm", "mcpu": tvm.target.codegen.llvm_get_system_cpu()})
        builds[key] = tvm.compile(mod, target=target)
    return builds[key]


class TvmEngine:
    label = "TVM"

    def __init__(self, case: Case, threads: int, builds: dict | None = None):
        executable = build_tvm(case, {} if builds is None else builds)
        import tvm
        from tvm import relax
        # affinity mode 0 (none): the thread count only
        tvm.get_global_func("runtime.config_threadpool")(0, threads)
        self.vm = relax.VirtualMachine(executable, tvm.cpu())
        self.x = tvm.runtime.tensor(case.x)

    def run(self) -> np.ndarray:
        out = self.vm["main"](self.x)
        return (out if hasattr(out, "numpy") else out[0]).numpy()

    def time(self, warmup: int, repeat: int) -> list:
        main = self.vm["main"]
        return time_calls(lambda: main(self.x), warmup, repeat)

    def close(self) -> None:
        self.vm = None


def make_engine(kind: str, case: Case, threads: int, builds: dict):
    if kind == "ort":
        return OrtEngine(case, threads)
    if kind in ("rxe", "rxe-llvm"):
        return RxeEngine(case, threads, "llvm" if kind == "rxe-llvm" else "c", builds)
    if kind == "executorch":
        return ExecuTorchEngine(case, threads)
    if kind == "tvm":
        return TvmEngine(case, threads, builds)
    raise ValueError(f"unknown engine {kind!r}; known: {', '.join(ENGINES)}")


# ---------------------------------------------------------------- calibration

SPIN_C = r"""
/* A fixed amount of integer work nothing can optimize away or vectorize. */
unsigned long long rxe_bench_spin(unsigned long long n) {
    unsigned long long x = 88172645463325252ull;
    for (unsigned long long i = 0; i < n; ++i) {
        x ^= x << 13; x ^= x >> 7; x ^= x << 17;
    }
    return x;
}
"""


def load_spin(work: Path):
    """The C busy loop as a callable `spin(n)` (ctypes drops the GIL, so threads run it in parallel)."""
    src, lib = work / "spin.c", work / "spin.so"
    src.write_text(SPIN_C)
    cc = os.environ.get("CC", "cc")
    try:
        subprocess.run([cc, "-O2", "-shared", "-fPIC", str(src), "-o", str(lib)], check=True,
                       capture_output=True, text=True)
    except (OSError, subprocess.CalledProcessError) as exc:
        raise Unavailable(f"cannot build the spin loop with {cc}: {getattr(exc, 'stderr', exc)}") from None
    fn = ctypes.CDLL(str(lib)).rxe_bench_spin
    fn.argtypes, fn.restype = [ctypes.c_ulonglong], ctypes.c_ulonglong
    return fn


def spin_once(spin, n: int, threads: int, clock=time.perf_counter) -> float:
    """Milliseconds from a common start until `threads` threads have each run `spin(n)`."""
    barrier = threading.Barrier(threads + 1)
    errors = []

    def worker():
        barrier.wait()
        try:
            spin(n)
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    pool = [threading.Thread(target=worker) for _ in range(threads)]
    for t in pool:
        t.start()
    start = clock()
    barrier.wait()
    for t in pool:
        t.join()
    if errors:
        raise errors[0]
    return (clock() - start) * 1e3


def calibrate(spin, threads: int, n: int, repeat: int = 3, clock=time.perf_counter) -> dict:
    """The busy loop alone and on `threads` threads at once, alternated `repeat` times; the ratio
    of the medians is ~1.0 when `threads` cores are free and ~`threads` when only one is."""
    if threads < 2:
        raise ValueError(f"the calibration needs at least 2 threads, got {threads}")
    if repeat < 1 or n < 1:
        raise ValueError(f"repeat and n must be positive, got repeat={repeat} n={n}")
    alone, together = [], []
    for _ in range(repeat):
        alone.append(spin_once(spin, n, 1, clock))
        together.append(spin_once(spin, n, threads, clock))
    return {"threads": threads, "alone_ms": alone, "together_ms": together,
            "ratio": statistics.median(together) / statistics.median(alone)}


def verdict(ratio: float, threads: int) -> str:
    """What a calibration ratio says about the cores while the figures were taken."""
    if ratio <= 1.2:
        return f"{threads} cores free"
    if ratio >= threads - 0.2:
        return "one core free"
    return "cores partly busy"


# ---------------------------------------------------------------- the run

@dataclass
class Cell:
    """One engine at one (model, threads): samples, or the reason it has none."""
    samples: list = field(default_factory=list)
    max_abs_diff: float | None = None
    reason: str | None = None

    def summary(self) -> dict:
        if not self.samples:
            return {"unavailable": self.reason or "no samples", "max_abs_diff": self.max_abs_diff}
        return {"median_ms": statistics.median(self.samples), "min_ms": min(self.samples),
                "max_ms": max(self.samples), "n": len(self.samples), "max_abs_diff": self.max_abs_diff,
                "samples_ms": self.samples}


def first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0][:200] if text else ""


def bench_config(case: Case, threads: int, kinds: list, args, builds: dict, spin) -> dict:
    """All engines on one model at one thread count, in interleaved blocks."""
    engines, cells = {}, {k: Cell() for k in kinds}
    try:
        for kind in kinds:
            try:
                engines[kind] = make_engine(kind, case, threads, builds)
            except Unavailable as exc:
                cells[kind].reason = str(exc)
            except Exception as exc:  # noqa: BLE001 - an engine that fails on a model is reported, not fatal
                cells[kind].reason = f"failed: {type(exc).__name__}: {first_line(exc)}"
        if "ort" not in engines:
            raise RuntimeError(f"ONNX Runtime failed on {case.label}: {cells['ort'].reason}")
        expected = engines["ort"].run()
        scale = float(np.max(np.abs(expected))) + 1e-12
        for kind in list(engines):
            try:
                got = engines[kind].run()
                diff = float(np.max(np.abs(np.asarray(got, np.float32).reshape(expected.shape) - expected)))
            except Exception as exc:  # noqa: BLE001
                cells[kind].reason = f"failed to run: {type(exc).__name__}: {first_line(exc)}"
                engines.pop(kind).close()
                continue
            cells[kind].max_abs_diff = diff
            if not diff <= args.tolerance * scale:
                cells[kind].reason = f"wrong answer: max abs diff {diff:.3g} (ORT max {scale:.3g})"
                engines.pop(kind).close()
        per_round = max(1, args.repeat // args.rounds)
        calib = []
        order = list(engines)
        for r in range(args.rounds):
            for kind in order[r % len(order):] + order[:r % len(order)]:
                cells[kind].samples += engines[kind].time(args.warmup, per_round)
                time.sleep(args.settle_ms / 1e3)
            if threads > 1 and spin is not None:
                calib.append(calibrate(spin, threads, args.spin_n, repeat=1)["ratio"])
    finally:
        for e in engines.values():
            e.close()
    row = {"model": case.label, "threads": threads, "engines": {k: c.summary() for k, c in cells.items()}}
    if calib:
        row["calibration"] = {"ratio_median": statistics.median(calib), "ratio_min": min(calib),
                              "ratio_max": max(calib), "ratios": calib,
                              "verdict": verdict(statistics.median(calib), threads)}
    return row


def ratio(row: dict, num: str, den: str):
    a, b = row["engines"].get(num, {}), row["engines"].get(den, {})
    if "median_ms" in a and "median_ms" in b:
        return a["median_ms"] / b["median_ms"]
    return None


LABELS = {"rxe": "rxe C", "rxe-llvm": "rxe LLVM", "ort": "ORT", "executorch": "ExecuTorch", "tvm": "TVM"}


def table(rows: list, kinds: list) -> str:
    """Medians [min-max] per engine, relax_edge's ratios to each peer, and the calibration;
    then the reason of every engine that has no figure."""
    rxe_kinds = [k for k in kinds if k.startswith("rxe")]
    peers = [k for k in kinds if not k.startswith("rxe")]
    head = f"{'model':<20}{'thr':>4}" + "".join(f"{LABELS[k] + ' ms [min-max]':>26}" for k in kinds)
    head += "".join(f"{LABELS[r].split()[-1] + '/' + LABELS[p]:>14}" for r in rxe_kinds for p in peers)
    head += f"{'spin N/1':>10}  calibration"
    lines, notes = [head], []
    for row in rows:
        line = f"{row['model']:<20}{row['threads']:>4}"
        for k in kinds:
            cell = row["engines"].get(k, {"unavailable": "not run"})
            if "median_ms" in cell:
                line += f"{cell['median_ms']:>10.2f} [{cell['min_ms']:.2f}-{cell['max_ms']:.2f}]".rjust(26)
            else:
                line += f"{'-':>26}"
                notes.append(f"{row['model']} {row['threads']} thr, {LABELS[k]}: {cell['unavailable']}")
        for r in rxe_kinds:
            for p in peers:
                v = ratio(row, r, p)
                line += f"{v:>14.2f}" if v is not None else f"{'-':>14}"
        cal = row.get("calibration")
        line += (f"{cal['ratio_median']:>10.2f}  {cal['verdict']} [{cal['ratio_min']:.2f}-{cal['ratio_max']:.2f}]"
                 if cal else f"{'-':>10}")
        lines.append(line)
    diffs = [f"{row['model']} {row['threads']} thr: "
             + ", ".join(f"{LABELS[k]} {row['engines'][k]['max_abs_diff']:.2g}" for k in kinds
                         if row["engines"].get(k, {}).get("max_abs_diff") is not None and k != "ort")
             for row in rows]
    lines += ["", "max abs diff against ORT:"] + [f"  {d}" for d in diffs]
    # one note per distinct reason
    seen = []
    for n in notes:
        if n.split(": ", 1)[1] not in [s.split(": ", 1)[1] for s in seen]:
            seen.append(n)
    if seen:
        lines += ["", "no figure:"] + [f"  {n}" for n in seen]
    return "\n".join(lines)


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=list(MODELS), metavar="MODEL",
                        help=f"default: all of {', '.join(MODELS)}")
    parser.add_argument("--engines", nargs="+", default=list(ENGINES), metavar="ENGINE",
                        help=f"default: all of {', '.join(ENGINES)} (ort is always run: it is the reference)")
    parser.add_argument("--llvm", action="store_true", help="also relax_edge with the LLVM backend")
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--rounds", type=int, default=5, help="blocks per engine, interleaved (default 5)")
    parser.add_argument("--repeat", type=int, default=20, help="timed runs per engine, over all rounds")
    parser.add_argument("--warmup", type=int, default=2, help="untimed runs at the start of each block")
    parser.add_argument("--settle-ms", type=float, default=100.0, help="pause between blocks (default 100)")
    parser.add_argument("--spin-n", type=int, default=20_000_000, help="iterations of the calibration loop")
    parser.add_argument("--tolerance", type=float, default=1e-3,
                        help="largest max abs diff against ORT, relative to ORT's largest logit")
    parser.add_argument("--json", help="write the rows with the raw samples to this file")
    parser.add_argument("--build-dir", help="keep the exports and builds here (default: a temporary directory)")
    args = parser.parse_args(argv)
    bad = [m for m in args.models if m not in MODELS]
    if bad:
        parser.error(f"unknown model(s) {', '.join(bad)}; known: {', '.join(MODELS)}")
    bad = [e for e in args.engines if e not in ENGINES]
    if bad:
        parser.error(f"unknown engine(s) {', '.join(bad)}; known: {', '.join(ENGINES)}")
    if any(t < 1 for t in args.threads):
        parser.error(f"--threads must be positive, got {args.threads}")
    if args.rounds < 1 or args.repeat < args.rounds:
        parser.error(f"need 1 <= --rounds <= --repeat, got --rounds {args.rounds} --repeat {args.repeat}")
    if args.warmup < 0 or args.settle_ms < 0 or args.spin_n < 1 or args.tolerance <= 0:
        parser.error("--warmup and --settle-ms must be >= 0, --spin-n and --tolerance > 0")
    kinds = ["rxe"] if "rxe" in args.engines else []
    if args.llvm:
        kinds.append("rxe-llvm")
    kinds += [e for e in ("ort", "executorch", "tvm") if e in args.engines or e == "ort"]
    args.kinds = kinds
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    from relax_edge.files import write_atomic
    rows, builds = [], {}
    with tempfile.TemporaryDirectory(prefix="bench-cnn-") as tmp:
        root = Path(args.build_dir) if args.build_dir else Path(tmp)
        root.mkdir(parents=True, exist_ok=True)
        spin = None
        if any(t > 1 for t in args.threads):
            try:
                spin = load_spin(root)
            except Unavailable as exc:
                say(f"no calibration: {exc}")
        for label in args.models:
            say(f"exporting {label}")
            case = make_case(label, root)
            for threads in args.threads:
                row = bench_config(case, threads, args.kinds, args, builds, spin)
                rows.append(row)
                say(table([row], args.kinds).splitlines()[1])
    print(table(rows, args.kinds))
    if args.json:
        info = {"rounds": args.rounds, "repeat": args.repeat, "warmup": args.warmup, "settle_ms": args.settle_ms,
                "spin_n": args.spin_n, "cpus": os.cpu_count(), "load_avg": list(os.getloadavg())}
        write_atomic(Path(args.json), json.dumps({"settings": info, "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
