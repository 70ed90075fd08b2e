"""A memory plan as text: a table of buffers and an ASCII timeline, in the
spirit of TFLite Micro's PrintMemoryPlan."""

from __future__ import annotations

from ..ir.shape import evaluate
from .plan import Plan, align, lower_bound, size_vars


def dump_plan(plan: Plan, env: dict | None = None, width: int = 60) -> str:
    """The plan at one assignment of the size variables (default: the upper
    bounds in bounded mode, 64 for unbounded variables)."""
    env = dict(env or {})
    for v in size_vars(plan.buffers):
        env.setdefault(v, v.upper if v.upper is not None else max(v.lower or 0, 64))
    sizes = [evaluate(b.size, env) for b in plan.buffers]
    offsets = [evaluate(o, env) for o in plan.offsets]
    total = evaluate(plan.total, env)
    lb = lower_bound(plan.buffers, sizes)
    at = ", ".join(f"{v.name}={x}" for v, x in sorted(env.items(), key=lambda kv: kv[0].name)) or "static sizes"
    lines = [f"memory plan: {plan.mode} mode, {plan.algorithm}, {len(plan.buffers)} buffers, at {at}",
             f"arena {total} bytes, lower bound {lb} bytes, ratio {total / lb if lb else 1.0:.3f}, "
             f"no reuse {sum(align(s) for s in sizes)} bytes",
             f"{'buffer':<24}{'offset':>12}{'bytes':>12}  life   offset expression"]
    for b, o, s, off in zip(plan.buffers, offsets, sizes, plan.offsets):
        lines.append(f"{b.name[:23]:<24}{o:>12}{s:>12}  {b.first:>2}-{b.last:<3} {off}")
    if plan.buffers and total:
        steps = max(b.last for b in plan.buffers) + 1
        lines.append("timeline (rows: steps; columns: arena offset; letters: buffers)")
        for t in range(steps):
            row = [" "] * width
            for k, (b, o, s) in enumerate(zip(plan.buffers, offsets, sizes)):
                if b.first <= t <= b.last and s:
                    lo, hi = o * width // total, max((o + s) * width // total, o * width // total + 1)
                    for c in range(lo, min(hi, width)):
                        row[c] = chr(ord("a") + k % 26)
            lines.append(f"{t:>4} |{''.join(row)}|")
    return "\n".join(lines) + "\n"
