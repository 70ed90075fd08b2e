#!/usr/bin/env python3
"""Differential testing of the compiler on random graphs.

    python scripts/fuzz_compiler.py 150                      # host, C and LLVM builds
    python scripts/fuzz_compiler.py 20 --board qemu-aarch64 --keep /tmp/fuzz --json /tmp/fuzz.json

Each graph (relax_edge/testing/generate.py) is interpreted before any
optimization and compiled with every backend for the board; the outputs
are compared at several sizes (relax_edge/testing/differential.py). A
mismatch or a build failure is reduced to a small graph and written under
--keep as a Python snippet of its Builder code. Prints one line per graph
and a summary; --json writes the summary and every failure.
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
import time
from pathlib import Path

import numpy as np

import relax_edge as rxe
from relax_edge.testing.differential import check_graph, failure_persists, locate, reduce_graph, supported_dtypes
from relax_edge.testing.generate import family_of, generate_graph, pick_sizes
from relax_edge.testing.graphs import to_snippet


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("count", type=int, help="how many graphs")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--board", default="host")
    p.add_argument("--backend", default="c,llvm", help="comma-separated: c, llvm")
    p.add_argument("--keep", type=Path, help="write each reduced failure here as a Python snippet")
    p.add_argument("--json", type=Path, help="write the summary and the failures here")
    p.add_argument("--sizes", type=int, default=3, help="size assignments per graph")
    p.add_argument("--max-steps", type=int, default=12, help="operator calls per graph at most")
    p.add_argument("--no-reduce", action="store_true", help="keep failing graphs as generated")
    p.add_argument("--dtypes", help="comma-separated dtypes to generate (default: DTYPES, probed)")
    p.add_argument("--all-dtypes", action="store_true",
                   help="also generate dtypes whose one-operator probe fails (default: probe, then skip them)")
    return p.parse_args(argv)


def keep_failure(args, index: int, graph, failure, seed: int, dev) -> str | None:
    if not args.no_reduce:
        graph = reduce_graph(graph, failure_persists(failure, dev, args.board, seed), failure.sizes)
    if args.keep is None:
        return None
    args.keep.mkdir(parents=True, exist_ok=True)
    path = args.keep / f"fuzz_{args.seed}_{index}_{failure.backend}_{failure.kind}.py"
    note = (f"fuzz_compiler seed {args.seed} graph {index}: {failure.kind} on {args.board} with "
            f"{failure.backend}, sizes {failure.sizes}, {len(graph.steps)} steps after reduction.\n\n"
            f"{failure.message}")
    if failure.kind == "mismatch":
        note += "\n\n" + locate(graph, failure, args.board, seed)
    sizes = {n: v for n, v in failure.sizes.items() if n in graph.size_vars}
    path.write_text(to_snippet(graph, sizes, seed, note.replace('"""', "'''"), args.board, failure.backend))
    return str(path)


def main(argv=None) -> int:
    args = parse_args(argv)
    backends = [b for b in args.backend.split(",") if b]
    counts = collections.Counter()
    families = collections.Counter()
    failures = []
    start = time.perf_counter()
    reduced = {}
    with rxe.connect(args.board) as dev:
        if args.dtypes:
            dtypes, refused = args.dtypes.split(","), {}
        else:
            dtypes, refused = supported_dtypes(dev, args.board, backends)
        for dtype, why in refused.items():
            print(f"dtype {dtype} {'kept' if args.all_dtypes else 'skipped'}: {why[:200]}")
        if args.all_dtypes or not dtypes:
            dtypes = None
        for i in range(args.count):
            rng = np.random.default_rng([args.seed, i])
            graph = generate_graph(rng, dtypes, args.max_steps)
            sizes_list = pick_sizes(graph, rng, args.sizes)
            seed = int(rng.integers(2 ** 31))
            counts["graphs"] += 1
            counts["ops"] += len(graph.steps)
            families.update(family_of(s) for s in graph.steps)
            found = check_graph(graph, dev, args.board, backends, sizes_list, seed)
            counts["builds"] += len(backends) - sum(f.kind == "interp" for f in found) * len(backends)
            status = "ok"
            for f in found:
                counts[{"build": "build failures", "run": "run failures", "mismatch": "mismatches",
                        "interp": "interpreter failures"}[f.kind]] += 1
                if f.kind in ("build", "run"):
                    counts[f"{f.kind} failures, {'clear errors' if f.clear else 'crashes'}"] += 1
                status = f"{f.kind} ({f.backend})"
                repeat = f.signature in reduced
                if f.kind != "interp" and not repeat:
                    reduced[f.signature] = keep_failure(args, i, graph, f, seed, dev)
                snippet = reduced.get(f.signature)
                failures.append({"graph": i, "kind": f.kind, "backend": f.backend, "sizes": f.sizes,
                                 "message": f.message, "error": f.error, "clear": f.clear,
                                 "repeat": repeat, "snippet": snippet})
                print(f"    {f.kind} ({f.backend}): {f.message[:300]}" + (f" -> {snippet}" if snippet else ""))
            input_dtypes = sorted({dt for _, _, dt in graph.inputs})
            print(f"[{i + 1}/{args.count}] {len(graph.steps)} ops, {','.join(input_dtypes)}, "
                  f"{len(graph.size_vars)} size vars: {status}", flush=True)
    seconds = time.perf_counter() - start
    summary = {"board": args.board, "backends": backends, "seed": args.seed, "graphs": counts["graphs"],
               "ops": counts["ops"], "builds": counts["builds"], "mismatches": counts["mismatches"],
               "build_failures": counts["build failures"], "run_failures": counts["run failures"],
               "interpreter_failures": counts["interpreter failures"], "seconds": round(seconds, 1),
               "build_failures_clear": counts["build failures, clear errors"],
               "build_failures_crash": counts["build failures, crashes"],
               "distinct_failures": len(reduced), "dtypes": dtypes or "all", "refused_dtypes": refused,
               "families": dict(families)}
    print(f"\n{summary['graphs']} graphs, {summary['ops']} ops, {summary['builds']} builds on {args.board} "
          f"({', '.join(backends)}): {summary['mismatches']} mismatches, {summary['build_failures']} build "
          f"failures ({summary['build_failures_crash']} crashes), {summary['run_failures']} run failures, "
          f"{summary['interpreter_failures']} interpreter failures, {len(reduced)} distinct, {seconds:.0f} s")
    if args.json:
        args.json.write_text(json.dumps({"summary": summary, "failures": failures}, indent=2, default=str))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
