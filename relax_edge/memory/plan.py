"""Memory planning over buffers that know only (size, first use, last use).

1. A `Buffer` has a symbolic size in bytes and an inclusive lifetime
   [first, last] in steps; two buffers conflict when their lifetimes overlap.
2. Bounded mode (every size variable has an upper bound): sizes are taken at
   their sound upper bound (`bounds()`: the maximum over the box, exact for
   sizes that grow with each variable), and two packing algorithms place
   buffers at constant offsets: greedy by size (largest first, lowest offset
   that fits, as TFLite Micro) and greedy by breadth (steps with the most
   live bytes first). The smaller arena wins. Offsets computed at the bounds
   stay safe below them because every buffer's reservation is its maximum.
3. Symbolic mode (some variable unbounded): buffers share a storage slot
   only when the prover shows they fit (size provably not larger than the
   slot's) and no member's lifetime overlaps; slots are laid out one after
   another, so offsets and the total are integer expressions of the sizes.
4. `lower_bound` is the most bytes live at any one step: no plan can do
   better, so arena / lower bound measures a plan's quality.

Nothing here knows the IR: memory/liveness.py builds the buffers.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import RelaxEdgeError
from ..ir.shape import IntExpr, Proof, as_expr, bounds, free_vars, prove_le

__all__ = ["Buffer", "Plan", "plan_bounded", "plan_symbolic", "plan_memory", "lower_bound",
           "greedy_by_size", "greedy_by_breadth", "ALIGNMENT"]

ALIGNMENT = 64


def align(n: int, a: int = ALIGNMENT) -> int:
    return -(-n // a) * a


@dataclass
class Buffer:
    name: str
    size: IntExpr          # bytes, symbolic
    first: int
    last: int

    def __post_init__(self):
        self.size = as_expr(self.size)
        if self.first > self.last:
            raise RelaxEdgeError(f"buffer {self.name}: first use {self.first} after last use {self.last}")

    def conflicts(self, other: "Buffer") -> bool:
        return self.first <= other.last and other.first <= self.last


@dataclass
class Plan:
    buffers: list
    offsets: list          # IntExpr per buffer (constants in bounded mode)
    total: IntExpr         # arena bytes
    mode: str              # "bounded" | "symbolic"
    algorithm: str
    reserved: list = field(default_factory=list)   # bytes reserved per buffer (bounded mode)

    @property
    def is_bounded(self) -> bool:
        return self.mode == "bounded"

    def offset_of(self, name: str) -> IntExpr:
        for b, o in zip(self.buffers, self.offsets):
            if b.name == name:
                return o
        raise KeyError(name)


def upper_size(b: Buffer) -> int:
    hi = bounds(b.size)[1]
    if hi == float("inf"):
        raise RelaxEdgeError(f"buffer {b.name}: size {b.size} has no upper bound")
    return max(int(hi), 0)


def lower_bound(buffers, sizes: list) -> int:
    """The most bytes live at any step, with each buffer's size from `sizes`."""
    if not buffers:
        return 0
    events = {}
    for b in buffers:
        for t in (b.first, b.last):
            events.setdefault(t, 0)
    best = 0
    for t in sorted(events):
        live = sum(align(s) for b, s in zip(buffers, sizes) if b.first <= t <= b.last)
        best = max(best, live)
    return best


def _first_fit(size: int, taken: list) -> int:
    """Lowest offset where [offset, offset + size) misses every (start, end)."""
    offset = 0
    for start, end in sorted(taken):
        if offset + size <= start:
            break
        offset = max(offset, end)
    return offset


def greedy_by_size(buffers, sizes) -> list:
    """Largest first; each at the lowest offset clear of the conflicting
    buffers already placed (TFLite Micro's GreedyMemoryPlanner)."""
    order = sorted(range(len(buffers)), key=lambda i: (-sizes[i], buffers[i].first, i))
    offsets = [None] * len(buffers)
    for i in order:
        taken = [(offsets[j], offsets[j] + align(sizes[j])) for j in range(len(buffers))
                 if offsets[j] is not None and buffers[i].conflicts(buffers[j])]
        offsets[i] = _first_fit(align(sizes[i]), taken)
    return offsets


def greedy_by_breadth(buffers, sizes) -> list:
    """Steps in decreasing order of live bytes; at each, its unplaced
    buffers largest first, each at the lowest clear offset (Pisarchyk & Lee)."""
    steps = sorted({t for b in buffers for t in range(b.first, b.last + 1)},
                   key=lambda t: -sum(align(s) for b, s in zip(buffers, sizes) if b.first <= t <= b.last))
    offsets = [None] * len(buffers)
    for t in steps:
        live = [i for i, b in enumerate(buffers) if b.first <= t <= b.last and offsets[i] is None]
        for i in sorted(live, key=lambda i: -sizes[i]):
            taken = [(offsets[j], offsets[j] + align(sizes[j])) for j in range(len(buffers))
                     if offsets[j] is not None and buffers[i].conflicts(buffers[j])]
            offsets[i] = _first_fit(align(sizes[i]), taken)
    return offsets


ALGORITHMS = {"greedy_by_size": greedy_by_size, "greedy_by_breadth": greedy_by_breadth}


def plan_bounded(buffers) -> Plan:
    sizes = [upper_size(b) for b in buffers]
    best = None
    for name, algorithm in ALGORITHMS.items():
        offsets = algorithm(buffers, sizes)
        total = max((o + align(s) for o, s in zip(offsets, sizes)), default=0)
        if best is None or total < best[0]:
            best = (total, name, offsets)
    total, name, offsets = best
    return Plan(list(buffers), [as_expr(o) for o in offsets], as_expr(total), "bounded", name, sizes)


def _aligned(e: IntExpr) -> IntExpr:
    return (e + (ALIGNMENT - 1)) // ALIGNMENT * ALIGNMENT


def plan_symbolic(buffers) -> Plan:
    """Storage slots: a buffer joins a slot whose members it never overlaps
    in time and whose size it provably does not exceed (the tightest such
    slot); a slot grows to a buffer provably larger than all its members."""
    slots = []   # [size IntExpr, [buffer indices]]
    order = sorted(range(len(buffers)), key=lambda i: (buffers[i].first, i))
    slot_of = [None] * len(buffers)
    for i in order:
        b = buffers[i]
        best = None
        for k, (size, members) in enumerate(slots):
            if any(b.conflicts(buffers[j]) for j in members):
                continue
            if prove_le(b.size, size) is Proof.YES:
                if best is None or prove_le(size, slots[best][0]) is Proof.YES:
                    best = k
        if best is None:
            for k, (size, members) in enumerate(slots):
                if not any(b.conflicts(buffers[j]) for j in members) and prove_le(size, b.size) is Proof.YES:
                    slots[k][0] = b.size
                    best = k
                    break
        if best is None:
            slots.append([b.size, []])
            best = len(slots) - 1
        slots[best][1].append(i)
        slot_of[i] = best
    starts, offset = [], as_expr(0)
    for size, _ in slots:
        starts.append(offset)
        offset = offset + _aligned(size)
    offsets = [starts[slot_of[i]] for i in range(len(buffers))]
    return Plan(list(buffers), offsets, offset, "symbolic", "slots")


def plan_memory(buffers) -> Plan:
    """Bounded mode when every size is bounded above, else symbolic mode."""
    if all(bounds(b.size)[1] != float("inf") for b in buffers):
        return plan_bounded(buffers)
    return plan_symbolic(buffers)


def size_vars(buffers) -> set:
    out = set()
    for b in buffers:
        out |= free_vars(b.size)
    return out
