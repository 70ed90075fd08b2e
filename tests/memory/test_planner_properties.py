"""Property-based tests of the memory planner (relax_edge.memory.plan).

Random sets of 1-30 buffers with lifetimes over steps 0..40 and symbolic sizes
over 1-3 size variables (constants, c*n, c*n*m, (n + c)//k * c2, n*m + c,
min/max forms, sums of those) are planned in bounded mode (every variable has
an upper bound), in symbolic mode (some variable unbounded) and by
`plan_memory`. The tests check that

1. every plan passes `verify_plan`, and also an independent check written
   here: at many in-bounds assignments (unbounded variables sampled up to
   UNBOUNDED_MAX), live buffers never share a byte, offsets are multiples of
   ALIGNMENT, and every buffer lies inside the evaluated arena;
2. bounded mode: constant offsets and total, lower_bound <= arena <= no-reuse
   sum of aligned upper sizes, reservations are the (exact, for monotone
   sizes) upper sizes; both packing algorithms called directly give valid
   placements and plan_bounded keeps the smaller;
3. symbolic mode: at every sampled assignment, lower bound <= arena <=
   no-reuse total; equal/growing sizes with disjoint lifetimes share slots;
4. lower_bound equals a brute-force max of live aligned bytes over every step;
5. edge cases (no buffers, one buffer, zero sizes, identical lifetimes, a
   buffer living across everything) and negative verifier cases.
"""

import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from relax_edge.errors import RelaxEdgeError
from relax_edge.ir.shape import (
    Proof,
    SizeVar,
    as_expr,
    bounds,
    evaluate,
    free_vars,
    is_monotone_nondecreasing,
    max_expr,
    min_expr,
    prove_equal,
)
from relax_edge.memory import (
    Buffer,
    Plan,
    PlanError,
    dump_plan,
    lower_bound,
    plan_bounded,
    plan_memory,
    plan_symbolic,
    verify_plan,
)
from relax_edge.memory.plan import ALIGNMENT, align, greedy_by_breadth, greedy_by_size
from relax_edge.memory.verify import live_pairs

SETTINGS = settings(max_examples=100, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
FAST = settings(max_examples=120, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

MAX_STEP = 40
UNBOUNDED_MAX = 200
N_ASSIGNMENTS = 15


def my_align(n):
    """Round up to a multiple of ALIGNMENT, written independently of plan.align."""
    if n <= 0:
        return 0
    return ((n + ALIGNMENT - 1) // ALIGNMENT) * ALIGNMENT


# ------------------------------------------------------------------ strategies

@st.composite
def size_variables(draw, bounded: bool):
    """1-3 variables; bounded: every upper in 1..512; otherwise at least one
    variable is unbounded above (the rest may be bounded)."""
    count = draw(st.integers(1, 3))
    out = []
    for k in range(count):
        lower = draw(st.sampled_from([1, 1, 1, 0]))
        if bounded:
            upper = draw(st.integers(max(lower, 1), 512))
        else:
            upper = None if k == 0 or draw(st.booleans()) else draw(st.integers(max(lower, 1), 512))
        out.append(SizeVar(f"v{k}", upper=upper, lower=lower))
    return out


@st.composite
def simple_size_forms(draw, variables):
    """(IntExpr, reference) where reference(env) computes the same size with
    Python ints, so the planner's view of a size can be checked too."""
    v = st.sampled_from(variables)
    kind = draw(st.sampled_from(["const", "cn", "cnm", "divmul", "nm_c"]))
    if kind == "const":
        c = draw(st.sampled_from([0, 1, 63, 64, 65, 100, 128, 1000, 4096]) | st.integers(0, 5000))
        return as_expr(c), lambda env: c
    if kind == "cn":
        c, n = draw(st.integers(1, 16)), draw(v)
        return c * n, lambda env: c * env[n]
    if kind == "cnm":
        c, n, m = draw(st.integers(1, 8)), draw(v), draw(v)
        return c * n * m, lambda env: c * env[n] * env[m]
    if kind == "divmul":
        c, k, c2, n = draw(st.integers(0, 70)), draw(st.integers(1, 16)), draw(st.integers(1, 64)), draw(v)
        return (n + c) // k * c2, lambda env: (env[n] + c) // k * c2
    n, m, c = draw(v), draw(v), draw(st.integers(0, 300))
    return n * m + c, lambda env: env[n] * env[m] + c


@st.composite
def size_forms(draw, variables, previous=()):
    """A size form; sometimes one derived from an earlier size (equal, a bit
    larger, a multiple, clamped), so that slots get shared and grown."""
    if previous and draw(st.integers(0, 2)) == 0:
        e, f = draw(st.sampled_from(previous))
        kind = draw(st.sampled_from(["same", "plus", "times", "min", "max"]))
        c = draw(st.integers(0, 200))
        if kind == "same":
            return e, f
        if kind == "plus":
            return e + c, lambda env: f(env) + c
        if kind == "times":
            k = draw(st.integers(2, 4))
            return k * e, lambda env: k * f(env)
        if kind == "min":
            return min_expr(e, c), lambda env: min(f(env), c)
        return max_expr(e, c), lambda env: max(f(env), c)
    kind = draw(st.sampled_from(["simple", "simple", "simple", "min", "max", "sum"]))
    if kind == "simple":
        return draw(simple_size_forms(variables))
    (a, fa), (b, fb) = draw(simple_size_forms(variables)), draw(simple_size_forms(variables))
    if kind == "min":
        return min_expr(a, b), lambda env: min(fa(env), fb(env))
    if kind == "max":
        return max_expr(a, b), lambda env: max(fa(env), fb(env))
    return a + b, lambda env: fa(env) + fb(env)


@st.composite
def lifetimes(draw):
    first = draw(st.integers(0, MAX_STEP))
    length = draw(st.sampled_from([0, 0, 1, 2, 3]) | st.integers(0, MAX_STEP))
    return first, min(first + length, MAX_STEP)


@st.composite
def buffer_sets_with_reference(draw, bounded: bool, max_buffers: int = 30):
    variables = draw(size_variables(bounded))
    count = draw(st.integers(1, max_buffers))
    buffers, forms = [], []
    for i in range(count):
        first, last = draw(lifetimes())
        form = draw(size_forms(variables, tuple(forms)))
        forms.append(form)
        buffers.append(Buffer(f"b{i}", form[0], first, last))
    return buffers, [f for _, f in forms], variables


def buffer_sets(bounded: bool, max_buffers: int = 30):
    return buffer_sets_with_reference(bounded, max_buffers).map(lambda bfv: bfv[0])


@st.composite
def int_buffer_sets(draw):
    """Buffers with integer sizes, the sizes given separately (for the
    packing algorithms and lower_bound, which take the sizes as a list)."""
    count = draw(st.integers(0, 30))
    buffers, sz = [], []
    for i in range(count):
        first, last = draw(lifetimes())
        buffers.append(Buffer(f"b{i}", 0, first, last))
        sz.append(draw(st.sampled_from([0, 1, 64, 65, 128]) | st.integers(0, 10_000)))
    return buffers, sz


# ------------------------------------------------------------- independent checks

def all_vars(buffers):
    out = set()
    for b in buffers:
        out |= set(free_vars(b.size))
    return sorted(out, key=lambda v: v.name)


def assignments(buffers, rng, count=N_ASSIGNMENTS, variables=None):
    """All-low, all-high, mixed corners and random in-bounds assignments."""
    variables = all_vars(buffers) if variables is None else variables

    def lo(v):
        return v.lower if v.lower is not None else 0

    def hi(v):
        return v.upper if v.upper is not None else max(lo(v), UNBOUNDED_MAX)

    yield {v: lo(v) for v in variables}
    yield {v: hi(v) for v in variables}
    for _ in range(count):
        env = {}
        for v in variables:
            r = rng.random()
            env[v] = lo(v) if r < 0.15 else hi(v) if r < 0.3 else rng.randint(lo(v), hi(v))
        yield env


def check_placement(buffers, offsets, sz, total, where=""):
    """Integers only: aligned, inside [0, total), live buffers disjoint."""
    for b, o, s in zip(buffers, offsets, sz):
        assert s >= 0, f"{b.name} has negative size {s} {where}"
        assert o % ALIGNMENT == 0, f"{b.name} at {o} not aligned {where}"
        assert 0 <= o and o + s <= total, f"{b.name} [{o}, {o + s}) outside arena {total} {where}"
    for i in range(len(buffers)):
        for j in range(i + 1, len(buffers)):
            bi, bj = buffers[i], buffers[j]
            if not (bi.first <= bj.last and bj.first <= bi.last):
                continue
            if sz[i] == 0 or sz[j] == 0:
                continue
            ai, aj = offsets[i], offsets[j]
            assert ai + sz[i] <= aj or aj + sz[j] <= ai, (
                f"{bi.name} [{ai}, {ai + sz[i]}) life {bi.first}-{bi.last} and "
                f"{bj.name} [{aj}, {aj + sz[j]}) life {bj.first}-{bj.last} overlap {where}")


def brute_lower_bound(buffers, sz):
    """Max over every step of the aligned bytes live at that step."""
    if not buffers:
        return 0
    best = 0
    for t in range(min(b.first for b in buffers), max(b.last for b in buffers) + 1):
        best = max(best, sum(my_align(s) for b, s in zip(buffers, sz) if b.first <= t <= b.last))
    return best


def check_plan_everywhere(plan, rng, bounded_reservations=False):
    """Independent check of a plan at many assignments; returns the
    (env, sizes, total) triples it looked at."""
    buffers = plan.buffers
    assert len(plan.offsets) == len(buffers)
    seen = []
    for env in assignments(buffers, rng):
        where = f"at {({v.name: x for v, x in env.items()})}"
        cache = {}

        def ev(e, cache=cache, env=env):
            e = as_expr(e)
            if e not in cache:
                cache[e] = evaluate(e, env)
            return cache[e]

        sz = [ev(b.size) for b in buffers]
        offs = [ev(o) for o in plan.offsets]
        total = ev(plan.total)
        check_placement(buffers, offs, sz, total, where)
        if bounded_reservations:
            for b, s, r in zip(buffers, sz, plan.reserved):
                assert s <= r, f"{b.name} needs {s} > reserved {r} {where}"
        seen.append((env, sz, total))
    return seen


def upper_sizes(buffers):
    out = []
    for b in buffers:
        hi = bounds(b.size)[1]
        assert hi != float("inf")
        out.append(max(int(hi), 0))
    return out


@SETTINGS
@given(st.booleans().flatmap(lambda b: buffer_sets_with_reference(bounded=b)),
       st.randoms(use_true_random=False))
def test_sizes_and_reservations_match_python_reference(data, rng):
    """The symbolic sizes the planner sees equal the intended sizes computed
    with Python ints, and (bounded) never exceed the reserved bytes."""
    buffers, refs, variables = data
    up = None
    if all(bounds(b.size)[1] != float("inf") for b in buffers):
        up = plan_bounded(buffers).reserved
    for env in assignments(buffers, rng, count=10, variables=variables):
        for k, (b, ref) in enumerate(zip(buffers, refs)):
            want = ref(env)
            assert evaluate(b.size, env) == want, (b, env)
            lo, hi = bounds(b.size)
            assert lo <= want <= hi, (b, env)
            if up is not None:
                assert want <= up[k], (b, env, up[k])


# --------------------------------------------------------------- property 1

def check_symbolic_plan(plan, rng):
    """Property 1 and 3 for a symbolic-mode plan: valid everywhere, and at
    every sampled assignment lower bound <= arena <= no-reuse total."""
    assert plan.mode == "symbolic"
    verify_plan(plan, samples=10)
    for env, sz, total in check_plan_everywhere(plan, rng):
        lb = brute_lower_bound(plan.buffers, sz)
        assert lower_bound(plan.buffers, sz) == lb
        assert lb <= total <= sum(my_align(s) for s in sz), (env, lb, total)


@SETTINGS
@given(buffer_sets(bounded=True), st.randoms(use_true_random=False))
def test_bounded_plans_are_valid(buffers, rng):
    plan = plan_bounded(buffers)
    assert plan_memory(buffers) == plan
    verify_plan(plan, samples=10)
    check_plan_everywhere(plan, rng, bounded_reservations=True)
    # symbolic mode applies to bounded variables too
    check_symbolic_plan(plan_symbolic(buffers), rng)


@SETTINGS
@given(buffer_sets(bounded=False), st.randoms(use_true_random=False))
def test_unbounded_plans_are_valid_and_arena_between_bounds(buffers, rng):
    plan = plan_memory(buffers)
    if all(bounds(b.size)[1] != float("inf") for b in buffers):
        # e.g. every size clamped by min(..., c): bounded mode still applies
        assert plan == plan_bounded(buffers)
        verify_plan(plan, samples=10)
        check_plan_everywhere(plan, rng, bounded_reservations=True)
        sym = plan_symbolic(buffers)
    else:
        assert plan.mode == "symbolic" and plan.algorithm == "slots"
        with pytest.raises(RelaxEdgeError):
            plan_bounded(buffers)
        sym = plan
    check_symbolic_plan(sym, rng)


# --------------------------------------------------------------- property 2

@SETTINGS
@given(buffer_sets(bounded=True))
def test_bounded_mode_constants_arena_range_and_algorithms(buffers):
    plan = plan_memory(buffers)
    assert plan.mode == "bounded" and plan.is_bounded
    assert plan.total.is_const
    assert all(as_expr(o).is_const for o in plan.offsets)
    up = upper_sizes(buffers)
    assert list(plan.reserved) == up
    total = plan.total.value
    assert brute_lower_bound(buffers, up) <= total <= sum(my_align(s) for s in up)
    assert total == max((o.value + my_align(s) for o, s in zip(plan.offsets, up)), default=0)
    # constant placement is valid at the reservations themselves
    check_placement(buffers, [o.value for o in plan.offsets], up, total, "at upper sizes")
    # the upper size is exact for sizes that grow with every variable
    top = {v: v.upper for v in all_vars(buffers)}
    for b, u in zip(buffers, up):
        if is_monotone_nondecreasing(b.size):
            assert evaluate(b.size, top) == u, b
    # both algorithms, called directly at the upper sizes, give valid
    # placements; plan_bounded keeps the smaller arena (greedy_by_size on ties)
    totals = {}
    for name, algorithm in (("greedy_by_size", greedy_by_size),
                            ("greedy_by_breadth", greedy_by_breadth)):
        offsets = algorithm(buffers, up)
        t = max((o + my_align(s) for o, s in zip(offsets, up)), default=0)
        check_placement(buffers, offsets, up, t, name)
        totals[name] = t
    assert total == min(totals.values()) == totals[plan.algorithm]
    if totals["greedy_by_size"] <= totals["greedy_by_breadth"]:
        assert plan.algorithm == "greedy_by_size"
    # property 4 at the upper sizes, and the dump agrees with it
    lb = lower_bound(buffers, up)
    assert lb == brute_lower_bound(buffers, up) <= total
    assert f"arena {total} bytes, lower bound {lb} bytes" in dump_plan(plan)


@FAST
@given(int_buffer_sets())
def test_both_greedy_algorithms_valid_and_smaller_wins(data):
    buffers, sz = data
    totals = {}
    for name, algorithm in (("greedy_by_size", greedy_by_size),
                            ("greedy_by_breadth", greedy_by_breadth)):
        offsets = algorithm(buffers, sz)
        assert len(offsets) == len(buffers) and all(isinstance(o, int) for o in offsets)
        total = max((o + my_align(s) for o, s in zip(offsets, sz)), default=0)
        check_placement(buffers, offsets, sz, total, name)
        assert brute_lower_bound(buffers, sz) <= total <= sum(my_align(s) for s in sz)
        totals[name] = total
    # plan_bounded on constant-sized buffers with the same sizes keeps the smaller
    const_buffers = [Buffer(b.name, s, b.first, b.last) for b, s in zip(buffers, sz)]
    plan = plan_bounded(const_buffers)
    assert plan.total.value == min(totals.values())
    assert totals[plan.algorithm] == plan.total.value
    if totals["greedy_by_size"] <= totals["greedy_by_breadth"]:
        assert plan.algorithm == "greedy_by_size"
    verify_plan(plan, samples=2)


# --------------------------------------------------------------- property 3

# (random symbolic plans: see check_symbolic_plan, used by the property-1 tests)

def _slot_bytes(e):
    return (as_expr(e) + (ALIGNMENT - 1)) // ALIGNMENT * ALIGNMENT


def test_symbolic_chain_of_equal_sizes_uses_two_slots():
    n = SizeVar("n")
    size = 4 * n
    chain = [Buffer("a", size, 0, 1), Buffer("b", size, 1, 2), Buffer("c", size, 2, 3)]
    plan = plan_memory(chain)
    assert plan.mode == "symbolic"
    assert prove_equal(plan.total, 2 * _slot_bytes(size)) is Proof.YES
    assert plan.offset_of("a") == plan.offset_of("c")
    assert plan.offset_of("a") != plan.offset_of("b")
    verify_plan(plan)
    for x in (1, 15, 16, 17, 1000):
        assert evaluate(plan.total, {n: x}) == 2 * my_align(4 * x)


def test_symbolic_equal_sizes_provably_equal_but_differently_built():
    n, m = SizeVar("n"), SizeVar("m")
    a = Buffer("a", n * m * 2, 0, 0)
    b = Buffer("b", m * n + n * m, 1, 1)          # same canonical size
    c = Buffer("c", (n * m * 8 + 3) // 4, 2, 2)   # == 2*n*m after simplification
    plan = plan_symbolic([a, b, c])
    assert len({repr(o) for o in plan.offsets}) == 1
    assert prove_equal(plan.total, _slot_bytes(2 * n * m)) is Proof.YES
    verify_plan(plan)


def test_symbolic_slot_grows_and_smaller_reuses():
    n = SizeVar("n")
    small, big = Buffer("small", n, 0, 0), Buffer("big", 3 * n, 1, 1)
    later = Buffer("later", 2 * n, 2, 2)
    plan = plan_symbolic([small, big, later])
    assert plan.offsets[0] == plan.offsets[1] == plan.offsets[2] == 0
    assert prove_equal(plan.total, _slot_bytes(3 * n)) is Proof.YES
    verify_plan(plan)


def test_symbolic_many_disjoint_equal_buffers_one_slot():
    n = SizeVar("n")
    bufs = [Buffer(f"t{i}", n * 16, i, i) for i in range(10)]
    plan = plan_symbolic(bufs)
    assert all(o == 0 for o in plan.offsets)
    assert prove_equal(plan.total, _slot_bytes(16 * n)) is Proof.YES
    for x in (1, 4, 5, 300):
        assert evaluate(plan.total, {n: x}) == my_align(16 * x)
    verify_plan(plan)


def test_symbolic_overlapping_lifetimes_never_share():
    n = SizeVar("n")
    bufs = [Buffer("a", n, 0, 5), Buffer("b", n, 5, 9), Buffer("c", n, 3, 3)]
    plan = plan_symbolic(bufs)
    # a overlaps b and c in time; b and c are disjoint and may share
    assert plan.offsets[0] != plan.offsets[1] and plan.offsets[0] != plan.offsets[2]
    assert plan.offsets[1] == plan.offsets[2]
    verify_plan(plan)


# --------------------------------------------------------------- property 4

@FAST
@given(int_buffer_sets())
def test_lower_bound_is_brute_force_max_live(data):
    buffers, sz = data
    assert lower_bound(buffers, sz) == brute_lower_bound(buffers, sz)
    assert all(align(s) == my_align(s) for s in sz)


# --------------------------------------------------------------- property 5

def test_empty_buffer_list():
    assert lower_bound([], []) == 0
    assert greedy_by_size([], []) == [] and greedy_by_breadth([], []) == []
    for plan in (plan_memory([]), plan_bounded([]), plan_symbolic([])):
        assert plan.offsets == [] and evaluate(plan.total, {}) == 0
        verify_plan(plan)
    assert plan_memory([]).mode == "bounded"
    dump_plan(plan_memory([]))


@pytest.mark.parametrize("size", [0, 1, 64, 65, 1000])
def test_one_constant_buffer(size):
    b = Buffer("only", size, 3, 7)
    for plan in (plan_memory([b]), plan_symbolic([b])):
        assert evaluate(plan.offsets[0], {}) == 0
        assert evaluate(plan.total, {}) == my_align(size)
        verify_plan(plan)
    assert lower_bound([b], [size]) == my_align(size)


def test_one_symbolic_buffer():
    n, m = SizeVar("n", upper=100), SizeVar("m")
    plan = plan_memory([Buffer("x", 3 * n + 1, 0, 0)])
    assert plan.mode == "bounded" and plan.total.value == my_align(301) and plan.reserved == [301]
    verify_plan(plan)
    plan = plan_memory([Buffer("y", 3 * m + 1, 0, 0)])
    assert plan.mode == "symbolic"
    assert plan.offsets[0] == 0
    for x in (1, 21, 22, 500):
        assert evaluate(plan.total, {m: x}) == my_align(3 * x + 1)
    verify_plan(plan)


def test_zero_size_buffers():
    n = SizeVar("n", upper=8)
    bufs = [Buffer(f"z{i}", 0, 0, 5) for i in range(5)]
    for plan in (plan_memory(bufs), plan_symbolic(bufs)):
        assert evaluate(plan.total, {}) == 0
        verify_plan(plan)
    mixed = bufs + [Buffer("a", 64 * n, 0, 5), Buffer("b", 100, 2, 3)]
    plan = plan_memory(mixed)
    assert plan.total.value == 64 * 8 + 128 == lower_bound(mixed, plan.reserved)
    verify_plan(plan)
    check_placement(mixed, [o.value for o in plan.offsets], plan.reserved, plan.total.value)
    # a size that is zero at some assignments: (n + 3) // 4 * 8 - 8 is 0 for n <= 4
    zs = [Buffer("p", (n + 3) // 4 * 8 - 8, 0, 1), Buffer("q", (n + 3) // 4 * 8 - 8, 1, 2)]
    for plan in (plan_memory(zs), plan_symbolic(zs)):
        verify_plan(plan)
        check_plan_everywhere(plan, random.Random(0))


def test_identical_lifetimes_no_reuse():
    n = SizeVar("n", upper=33)
    bufs = [Buffer(f"b{i}", (i + 1) * n + i, 2, 6) for i in range(6)]
    plan = plan_memory(bufs)
    up = plan.reserved
    assert plan.total.value == sum(my_align(s) for s in up) == lower_bound(bufs, up)
    verify_plan(plan)
    m = SizeVar("m")
    sym = plan_symbolic([Buffer(f"s{i}", (i + 1) * m + i, 2, 6) for i in range(6)])
    assert len({repr(o) for o in sym.offsets}) == 6
    verify_plan(sym)


def test_buffer_living_across_everything():
    n = SizeVar("n", upper=50)
    long = Buffer("long", 10 * n, 0, 20)
    short = [Buffer(f"s{i}", (i % 3 + 1) * 100, i, i + 1) for i in range(20)]
    bufs = short + [long]
    plan = plan_memory(bufs)
    offs = [o.value for o in plan.offsets]
    lo, hi = offs[-1], offs[-1] + plan.reserved[-1]
    assert plan.reserved[-1] == 500
    for o, s in zip(offs[:-1], plan.reserved[:-1]):
        assert o + s <= lo or hi <= o
    lb = lower_bound(bufs, plan.reserved)
    assert lb == brute_lower_bound(bufs, plan.reserved) == my_align(500) + 256 + 320
    assert lb <= plan.total.value
    verify_plan(plan)
    check_plan_everywhere(plan, random.Random(1), bounded_reservations=True)
    m = SizeVar("m")
    sym = plan_symbolic(short + [Buffer("long", 10 * m, 0, 20)])
    assert all(o != sym.offsets[-1] for o in sym.offsets[:-1])
    verify_plan(sym)
    check_plan_everywhere(sym, random.Random(2))


def test_buffer_rejects_reversed_lifetime():
    with pytest.raises(RelaxEdgeError):
        Buffer("bad", 4, 5, 4)


# ------------------------------------------------------------ verifier negatives

def test_verify_rejects_overlapping_live_buffers_same_offset():
    a, b = Buffer("a", 64, 0, 1), Buffer("b", 64, 1, 2)
    plan = Plan([a, b], [as_expr(0), as_expr(0)], as_expr(64), "bounded", "manual", [64, 64])
    with pytest.raises(PlanError):
        verify_plan(plan)


def test_verify_rejects_symbolic_overlap():
    n = SizeVar("n")
    a, b = Buffer("a", n, 0, 3), Buffer("b", 2 * n, 2, 2)
    plan = Plan([a, b], [as_expr(0), as_expr(0)], _slot_bytes(2 * n), "symbolic", "manual")
    with pytest.raises(PlanError):
        verify_plan(plan)
    # partial overlap: b starts inside a
    plan = Plan([a, b], [as_expr(0), _slot_bytes(n) - 64], _slot_bytes(n) + _slot_bytes(2 * n),
                "symbolic", "manual")
    with pytest.raises(PlanError):
        verify_plan(plan)


def test_verify_accepts_disjoint_lifetimes_same_offset():
    a, b = Buffer("a", 64, 0, 1), Buffer("b", 64, 2, 3)
    verify_plan(Plan([a, b], [as_expr(0), as_expr(0)], as_expr(64), "bounded", "manual", [64, 64]))


def test_verify_rejects_misaligned_outside_and_overgrown():
    a = Buffer("a", 64, 0, 0)
    with pytest.raises(PlanError):
        verify_plan(Plan([a], [as_expr(32)], as_expr(128), "bounded", "manual", [64]))
    with pytest.raises(PlanError):
        verify_plan(Plan([a], [as_expr(64)], as_expr(64), "bounded", "manual", [64]))
    n = SizeVar("n", upper=10)
    c = Buffer("c", 8 * n, 0, 0)
    with pytest.raises(PlanError):   # reserved for n <= 8 only
        verify_plan(Plan([c], [as_expr(0)], as_expr(128), "bounded", "manual", [64]))


@FAST
@given(st.lists(st.tuples(st.integers(0, MAX_STEP), st.integers(0, 6)), max_size=40))
def test_live_pairs_are_the_brute_force_pairs(lifetimes):
    buffers = [Buffer(f"b{k}", 64, first, first + length) for k, (first, length) in enumerate(lifetimes)]
    want = [(i, j) for i in range(len(buffers)) for j in range(i + 1, len(buffers))
            if buffers[i].first <= buffers[j].last and buffers[j].first <= buffers[i].last]
    assert live_pairs(buffers) == want


def test_verify_names_the_first_overlapping_pair():
    # a, b, c all live at step 1; only b and c share bytes; a 2**62-byte arena takes the exact path too
    for size in (64, 2**62):
        a, b, c = Buffer("a", 64, 0, 1), Buffer("b", size, 1, 2), Buffer("c", 64, 1, 1)
        offsets = [as_expr(size), as_expr(0), as_expr(0)]
        plan = Plan([a, b, c], offsets, as_expr(size + 64), "bounded", "manual", [64, size, 64])
        with pytest.raises(PlanError, match=r"^b \[0, \d+\) and c \[0, 64\) are live together and overlap"):
            verify_plan(plan)
