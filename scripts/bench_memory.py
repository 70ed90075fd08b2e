"""Memory plans of real models: for each, the lower bound (the most bytes
live at any one point), the planned arena, their ratio, and the no-reuse
total (every intermediate its own buffer), side by side.

    python scripts/bench_memory.py [--show NAME]

Transformers are bounded (BERT seq <= 512, GPT-2 seq <= 1024), so their plans
are fixed arenas computed at the bounds; the CNNs have static shapes.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import relax_edge as rxe  # noqa: E402
from relax_edge.ir.shape import evaluate  # noqa: E402
from relax_edge.memory import dump_plan, lower_bound, plan_function  # noqa: E402
from relax_edge.memory.plan import align, size_vars  # noqa: E402
from relax_edge.transform.legalize import legalize  # noqa: E402
from tests.onnx_models import get_model  # noqa: E402

MODELS = [("mobilenet_v2", "mobilenet_v2", None), ("resnet18", "resnet18", None),
          ("bert (seq <= 512)", "bert_long", {"seq": 512}), ("gpt2 (seq <= 1024)", "gpt2_long", {"seq": 1024})]


def plan_of(model: str, bounds):
    path, _ = get_model(model)
    mod = legalize(rxe.from_onnx(str(path), dim_bounds=bounds))
    return plan_function(mod, mod.functions["main"]).plan


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--show", help="also print this model's plan dump (e.g. resnet18)")
    args = parser.parse_args(argv)
    print(f"{'model':<20}{'lower bound':>14}{'arena':>14}{'ratio':>8}{'no reuse':>14}{'saved':>8}  mode")
    worst = 0.0
    for label, model, bounds in MODELS:
        plan = plan_of(model, bounds)
        env = {v: v.upper for v in size_vars(plan.buffers)}
        sizes = [evaluate(b.size, env) for b in plan.buffers]
        lb = lower_bound(plan.buffers, sizes)
        arena = evaluate(plan.total, env)
        no_reuse = sum(align(s) for s in sizes)
        ratio = arena / lb if lb else 1.0
        worst = max(worst, ratio)
        print(f"{label:<20}{lb:>14,}{arena:>14,}{ratio:>8.3f}{no_reuse:>14,}{1 - arena / no_reuse:>8.1%}  "
              f"{plan.mode} ({plan.algorithm})")
        if args.show and args.show in (model, label):
            print(dump_plan(plan))
    print(f"worst arena / lower bound: {worst:.3f} (goal <= 1.10)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
