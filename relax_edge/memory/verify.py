"""Plan verifier: no two buffers whose lifetimes overlap share a byte.

Checked at many assignments of the size variables within their bounds
(random ones, plus every variable at its lower and at its upper bound; an
unbounded variable is sampled up to `unbounded_max`), with the symbolic
offsets and sizes evaluated at each; also that offsets are aligned, that
every buffer lies inside the arena, and in bounded mode that no buffer ever
outgrows its reservation."""

from __future__ import annotations

import random

import numpy as np

from ..errors import RelaxEdgeError
from ..ir.shape import evaluate
from .plan import ALIGNMENT, Plan, size_vars

__all__ = ["verify_plan", "PlanError", "sample_assignments", "live_pairs"]


class PlanError(RelaxEdgeError):
    """A memory plan places two live buffers over the same bytes."""


def sample_assignments(variables, samples: int, seed: int = 0, unbounded_max: int = 64):
    rng = random.Random(seed)
    variables = sorted(variables, key=lambda v: v.name)

    def lo(v):
        return v.lower if v.lower is not None else 0

    def hi(v):
        return v.upper if v.upper is not None else max(lo(v), unbounded_max)

    yield {v: lo(v) for v in variables}
    yield {v: hi(v) for v in variables}
    for _ in range(samples):
        yield {v: rng.randint(lo(v), hi(v)) for v in variables}


def live_pairs(buffers) -> list:
    """The pairs (i, j), i < j, of buffers whose lifetimes overlap, in order (a sweep over first uses)."""
    order = sorted(range(len(buffers)), key=lambda k: buffers[k].first)
    active, pairs = [], []
    for k in order:
        first = buffers[k].first
        active = [a for a in active if buffers[a].last >= first]
        pairs.extend((min(a, k), max(a, k)) for a in active)
        active.append(k)
    pairs.sort()
    return pairs


def _first_overlap(pairs, spans):
    """The first pair (in order) whose byte ranges overlap, both non-empty, or None."""
    if not pairs:
        return None
    if max((abs(x) for span in spans for x in span), default=0) >= 2**62:   # beyond int64: one by one
        return next(((i, j) for i, j in pairs if _overlap(spans[i], spans[j])), None)
    ends = np.asarray(spans, dtype=np.int64).reshape(-1, 2)
    index = np.asarray(pairs, dtype=np.int64)
    a, b = ends[index[:, 0]], ends[index[:, 1]]
    hit = (a[:, 0] < b[:, 1]) & (b[:, 0] < a[:, 1]) & (a[:, 1] > a[:, 0]) & (b[:, 1] > b[:, 0])
    found = np.flatnonzero(hit)
    return pairs[found[0]] if found.size else None


def _overlap(a, b) -> bool:
    (a0, a1), (b0, b1) = a, b
    return a0 < b1 and b0 < a1 and a1 > a0 and b1 > b0


def verify_plan(plan: Plan, samples: int = 100, seed: int = 0) -> Plan:
    buffers = plan.buffers
    pairs = live_pairs(buffers)
    for env in sample_assignments(size_vars(buffers), samples, seed):
        where = ", ".join(f"{v.name}={x}" for v, x in env.items()) or "static sizes"
        total = evaluate(plan.total, env)
        spans = []
        for k, (b, off) in enumerate(zip(buffers, plan.offsets)):
            o, s = evaluate(off, env), evaluate(b.size, env)
            if o % ALIGNMENT:
                raise PlanError(f"{b.name} at offset {o} is not {ALIGNMENT}-byte aligned ({where})")
            if o < 0 or o + s > total:
                raise PlanError(f"{b.name} [{o}, {o + s}) lies outside the arena of {total} bytes ({where})")
            if plan.reserved and s > plan.reserved[k]:
                raise PlanError(f"{b.name} needs {s} bytes, more than its reserved {plan.reserved[k]} ({where})")
            spans.append((o, o + s))
        found = _first_overlap(pairs, spans)
        if found is not None:
            i, j = found
            (a0, a1), (b0, b1) = spans[i], spans[j]
            raise PlanError(f"{buffers[i].name} [{a0}, {a1}) and {buffers[j].name} [{b0}, {b1}) "
                            f"are live together and overlap ({where})")
    return plan
