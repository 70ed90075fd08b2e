"""Build time of real models, optionally against another checkout of relax_edge,
measured side by side in interleaved rounds.

    python scripts/bench_build.py [--rounds 3] [--backends c llvm] [--compare /path/to/other/checkout]

Each round builds every model with every backend once per tree, each build
in a fresh child process and a fresh output directory (the runtime objects
come from the shared compile cache, warmed before the first round, so what
is timed is the model: import, pipeline, memory plan, code generation,
compile and link). The trees alternate within every round, so that a slow
spell of a shared machine hits them alike. Printed: the median seconds of
`rxe.build` per model and backend for each tree, the spread (min..max), the
ratio against the first tree, and, where the tree records them
(`Artifact.stage_seconds`), the median time of each build stage.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# (label, model, import arguments)
MODELS = [
    ("mlp", "mlp", {}),
    ("mobilenet_v2", "mobilenet_v2", {}),
    ("bert", "bert_long", {"dim_bounds": {"seq": 512}}),
    ("gpt2", "gpt2_long", {"dim_bounds": {"seq": 1024}}),
]

CHILD = r"""
import json, sys, time
from pathlib import Path
tree, model_path, import_args, backend, out_dir = sys.argv[1:6]
sys.path.insert(0, tree)
import relax_edge as rxe
start = time.perf_counter()
mod = rxe.from_onnx(model_path, **json.loads(import_args))
imported = time.perf_counter() - start
art = rxe.build(mod, board="host", backend=backend, out_dir=out_dir, name="model")
total = time.perf_counter() - start
print(json.dumps({"import": imported, "total": total, "cached": bool(art.cached),
                  "stages": getattr(art, "stage_seconds", None) or {}}))
"""


def say(msg: str) -> None:
    print(f"[bench] {msg}", file=sys.stderr, flush=True)


def build_once(tree: Path, model_path: Path, import_args: dict, backend: str, out_dir: Path) -> dict:
    proc = subprocess.run([sys.executable, "-c", CHILD, str(tree), str(model_path), json.dumps(import_args),
                           backend, str(out_dir)], capture_output=True, text=True, cwd=tree)
    if proc.returncode != 0:
        raise SystemExit(f"building in {tree} failed:\n{proc.stderr[-3000:]}")
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    if result["cached"]:
        raise SystemExit(f"{out_dir}: a cache hit, the build was not timed")
    return result


def spread(values) -> str:
    return f"{min(values):.2f}..{max(values):.2f}"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--backends", nargs="+", default=["c", "llvm"], choices=["c", "llvm"])
    parser.add_argument("--models", nargs="*", help="only these (mlp mobilenet_v2 bert gpt2)")
    parser.add_argument("--compare", help="another relax_edge checkout, timed in the same rounds")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    from tests.onnx_models import get_model

    trees = [ROOT] + ([Path(args.compare).resolve()] if args.compare else [])
    models = [m for m in MODELS if not args.models or m[0] in args.models]
    paths = {label: get_model(name)[0] for label, name, _ in models}
    runs: dict = {}
    with tempfile.TemporaryDirectory(prefix="rxe-bench-build-") as tmp:
        for tree in trees:   # warm the shared runtime-object cache, untimed
            build_once(tree, paths[models[0][0]], models[0][2], args.backends[0], Path(tmp) / f"warm{len(runs)}")
            runs[tree] = {}
        for r in range(args.rounds):
            for label, _, import_args in models:
                for backend in args.backends:
                    for tree in trees:
                        out = Path(tmp) / f"r{r}-{label}-{backend}-{trees.index(tree)}"
                        result = build_once(tree, paths[label], import_args, backend, out)
                        runs[tree].setdefault((label, backend), []).append(result)
                        say(f"round {r + 1}: {label} ({backend}) in {tree}: {result['total']:.2f}s")
    header = f"{'model':<14}{'backend':>8}" + "".join(f"{'tree ' + str(i) + ' s':>12}{'spread':>14}"
                                                       for i in range(len(trees)))
    if len(trees) > 1:
        header += f"{'1 / 0':>8}"
    print("\n".join(f"tree {i}: {t}" for i, t in enumerate(trees)))
    print(header)
    for label, _, _ in models:
        for backend in args.backends:
            line = f"{label:<14}{backend:>8}"
            medians = []
            for tree in trees:
                totals = [x["total"] for x in runs[tree][(label, backend)]]
                medians.append(statistics.median(totals))
                line += f"{medians[-1]:>12.2f}{spread(totals):>14}"
            if len(trees) > 1:
                line += f"{medians[1] / medians[0]:>8.2f}"
            print(line)
    for i, tree in enumerate(trees):
        stage_names = []
        for results in runs[tree].values():
            for name in results[0]["stages"]:
                if name not in stage_names:
                    stage_names.append(name)
        if not stage_names:
            continue
        print(f"\nstages of tree {i} (median seconds)")
        print(f"{'model':<14}{'backend':>8}{'import':>9}" + "".join(f"{n:>13}" for n in stage_names))
        for (label, backend), results in runs[tree].items():
            cells = [statistics.median(x["stages"].get(n, 0.0) for x in results) for n in stage_names]
            imported = statistics.median(x["import"] for x in results)
            print(f"{label:<14}{backend:>8}{imported:>9.2f}" + "".join(f"{c:>13.2f}" for c in cells))
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONDONTWRITEBYTECODE", "1")
    sys.exit(main())
