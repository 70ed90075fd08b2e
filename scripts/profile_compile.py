"""Where a model's compile spends its time and memory: the import, each pass of
the optimizing pipeline and each build stage, with the wall time and the
process's resident memory (now and at its peak) after each.

    .venv/bin/python scripts/profile_compile.py MODEL.onnx [--max-context 64] [--board host] [--backend c]
    .venv/bin/python scripts/profile_compile.py MODEL.onnx --profile prof.out --top 40   # cProfile as well
    .venv/bin/python scripts/profile_compile.py MODEL.onnx --no-toolchain                # stop after emit

The stages are those of rxe.build (relax_edge/build.py), called one by one;
the pipeline's passes are those of relax_edge/pipeline.py default_passes().
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import importlib
import os
import pstats
import resource
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from relax_edge.codegen.host_program import lower_host  # noqa: E402
from relax_edge.frontend import from_onnx  # noqa: E402
from relax_edge.memory import plan_module  # noqa: E402
from relax_edge.pipeline import PASSES, default_passes  # noqa: E402
from relax_edge.target import load_board  # noqa: E402
from relax_edge.toolchain import Packager, Products  # noqa: E402

build_module = importlib.import_module("relax_edge.build")   # the module, not rxe.build the function
toolchain_module = importlib.import_module("relax_edge.toolchain")


def rss_mb() -> float:
    """The resident memory now, in MB (Linux)."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 1e6


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / 1e6   # KiB on Linux


class Table:
    """One row per step: its wall seconds, the RSS after it and the peak so far."""

    def __init__(self):
        self.rows = []
        print(f"{'step':<24}{'seconds':>9}{'rss MB':>9}{'peak MB':>9}", flush=True)

    def run(self, name, fn, *args):
        start = time.perf_counter()
        result = fn(*args)
        row = (name, time.perf_counter() - start, rss_mb(), peak_rss_mb())
        self.rows.append(row)
        print(f"{row[0]:<24}{row[1]:>9.2f}{row[2]:>9.0f}{row[3]:>9.0f}", flush=True)
        return result

    def total(self):
        print(f"{'total':<24}{sum(r[1] for r in self.rows):>9.2f}{'':>9}{peak_rss_mb():>9.0f}", flush=True)


@contextlib.contextmanager
def _timed_tools(record: list):
    """Every compiler, assembler, archiver and linker run of the toolchain stage timed into `record`."""
    original = toolchain_module.run_tool

    def timed(cmd, what):
        start = time.perf_counter()
        try:
            return original(cmd, what)
        finally:
            record.append((what, time.perf_counter() - start))
    toolchain_module.run_tool = timed
    try:
        yield
    finally:
        toolchain_module.run_tool = original


def compile_model(path: Path, max_context: int, board_name: str, backend: str, toolchain: bool) -> None:
    board = load_board(board_name)
    table = Table()
    options = {} if max_context is None else {"max_context": max_context}
    mod = table.run("import", lambda: from_onnx(str(path), **options))
    for i, name in enumerate(default_passes(board)):
        mod = table.run(f"pass {i} {name}", PASSES[name], mod, board)
    plans = table.run("plan_memory", plan_module, mod)
    prefix = "model"
    host = table.run("lower_host", lower_host, mod, plans, prefix, build_module.kernel_prefix(backend, prefix))
    tc = build_module._toolchain(board, None, False)
    sources, _key = table.run("emit", build_module.emit_keyed, host, backend, board, tc, None, False)
    weights_mb = len(sources.weights) / 1e6
    tools = []
    if toolchain:
        with tempfile.TemporaryDirectory(prefix="rxe-profile-") as out, _timed_tools(tools):
            products = Products.of(Path(out), host.prefix, tc, board)
            packager = Packager(tc, board, Path(out), products, None, False)
            table.run("toolchain", packager.package, sources, backend)
    table.total()
    for what, seconds in tools:
        print(f"  toolchain: {what:<40}{seconds:>8.2f}s")
    print(f"weights: {weights_mb:.0f} MB; peak RSS {peak_rss_mb() / max(weights_mb, 1e-9):.2f}x the weights")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model", type=Path, help="an ONNX file")
    ap.add_argument("--max-context", type=int, default=None, help="the KV-cache bound (decoders)")
    ap.add_argument("--board", default="host")
    ap.add_argument("--backend", default="c", choices=build_module.BACKENDS)
    ap.add_argument("--no-toolchain", action="store_true", help="stop after the emit stage")
    ap.add_argument("--profile", type=Path, help="write cProfile stats here and print the top functions")
    ap.add_argument("--top", type=int, default=30, help="how many functions of the profile to print")
    args = ap.parse_args(argv)
    compile_args = (args.model, args.max_context, args.board, args.backend, not args.no_toolchain)
    if args.profile is None:
        compile_model(*compile_args)
        return 0
    profiler = cProfile.Profile()
    profiler.runcall(compile_model, *compile_args)
    profiler.dump_stats(args.profile)
    stats = pstats.Stats(str(args.profile))
    stats.sort_stats("cumulative").print_stats(args.top)
    stats.sort_stats("tottime").print_stats(args.top)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
