"""Property-based tests of relax_edge.ir.shape (symbolic integer expressions).

Random expression trees over a few size variables (unbounded, half-bounded
and bounded, so that negative values occur) are built twice: once with the
module (canonical IntExpr, simplified on construction) and once as a plain
tree that Python evaluates with its own int `//`, `%`, `min`, `max`. The
tests check that

1. the canonical form evaluates to the reference value at in-bounds points;
2. the prover never answers YES (NO) where a sampled in-bounds point says
   otherwise;
3. `bounds` contains every sampled value;
4. algebraically equal constructions are equal, hash equal and print the same;
5. substitute-then-evaluate equals evaluate-with-composed-assignment;
6. a handful of hand-picked floor-semantics and simplification facts hold.
"""

import math
import random

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from relax_edge.errors import ShapeError
from relax_edge.ir.shape import (
    IntExpr,
    Proof,
    SizeVar,
    as_expr,
    bounds,
    const,
    evaluate,
    floordiv,
    floormod,
    free_vars,
    is_monotone_nondecreasing,
    max_expr,
    min_expr,
    prove_equal,
    prove_le,
    prove_lt,
    substitute,
)

SETTINGS = settings(max_examples=200, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

# A fixed pool of variables with every kind of bound. Names are distinct so the
# printed form can be read back.
X = SizeVar("x", lower=None)              # any integer
Y = SizeVar("y", lower=None)              # any integer
I = SizeVar("i", lower=0, upper=20)       # 0..20
N = SizeVar("n", upper=64)                # 1..64
M = SizeVar("m")                          # 1..inf
W = SizeVar("w", lower=-8, upper=3)       # -8..3, crosses zero
P = SizeVar("p", upper=-2, lower=None)    # ..-2, always negative
POOL = (X, Y, I, N, M, W, P)

OPS = ("+", "-", "*", "//", "%", "min", "max")
CONSTS = st.integers(-12, 12)
NONZERO = CONSTS.filter(lambda c: c != 0)


# ------------------------------------------------------------------ strategies

def values_for(v):
    """In-bounds integers for `v`, biased to small values and to the edges."""
    lo_wide = v.lower if v.lower is not None else -10**6
    hi_wide = v.upper if v.upper is not None else 10**6
    if v.lower is not None and v.upper is not None:
        small = st.integers(v.lower, v.upper)
    elif v.lower is not None:
        small = st.integers(v.lower, v.lower + 80)
    elif v.upper is not None:
        small = st.integers(v.upper - 80, v.upper)
    else:
        small = st.integers(-40, 40)
    edges = sorted({e for e in (v.lower, v.upper, -1, 0, 1, 2, -2)
                    if e is not None and lo_wide <= e <= hi_wide})
    return st.one_of(st.sampled_from(edges), small, small, st.integers(lo_wide, hi_wide))


def envs_for(variables, min_size=1, max_size=6):
    return st.lists(st.fixed_dictionaries({v: values_for(v) for v in variables}),
                    min_size=min_size, max_size=max_size)


variable_sets = st.lists(st.sampled_from(POOL), min_size=2, max_size=3, unique=True)


@st.composite
def trees(draw, variables, depth=4, ops=OPS):
    """A random tree: ("var", v) | ("const", c) | (op, left, right)."""
    if depth == 0 or draw(st.integers(0, 3)) == 0:
        if draw(st.booleans()):
            return ("var", draw(st.sampled_from(variables)))
        return ("const", draw(CONSTS))
    op = draw(st.sampled_from(ops))
    left = draw(trees(variables, depth - 1, ops))
    if op in ("//", "%") and draw(st.integers(0, 4)) != 0:
        right = ("const", draw(NONZERO))       # mostly by constants, of both signs
    else:
        right = draw(trees(variables, depth - 1, ops))
    return (op, left, right)


@st.composite
def cases(draw, depth=4):
    variables = draw(variable_sets)
    return variables, draw(trees(variables, depth)), draw(envs_for(variables))


# --------------------------------------------------------- build and reference

def _raw(t):
    """Build with the module, leaving leaves as SizeVar / int so that the
    reflected operators (__radd__, __rfloordiv__, ...) are exercised too."""
    kind = t[0]
    if kind == "var":
        return t[1]
    if kind == "const":
        return t[1]
    a, b = _raw(t[1]), _raw(t[2])
    if kind == "+":
        return a + b
    if kind == "-":
        return a - b
    if kind == "*":
        return a * b
    if kind == "//":
        return a // b
    if kind == "%":
        return a % b
    if kind == "min":
        return min_expr(a, b)
    return max_expr(a, b)


class ZeroDivisor(Exception):
    pass


def build(t) -> IntExpr:
    """The canonical IntExpr of tree `t`; ZeroDivisor if a divisor is constant 0."""
    try:
        return as_expr(_raw(t))
    except ZeroDivisionError as err:   # int // 0 between two constant leaves
        raise ZeroDivisor from err
    except ShapeError as err:
        assert "by zero" in str(err), f"unexpected ShapeError building {show(t)}: {err}"
        raise ZeroDivisor from err


def ref(t, env) -> int:
    """Python's own value of tree `t` (raises ZeroDivisionError)."""
    kind = t[0]
    if kind == "var":
        return env[t[1]]
    if kind == "const":
        return t[1]
    a, b = ref(t[1], env), ref(t[2], env)
    return {"+": lambda: a + b, "-": lambda: a - b, "*": lambda: a * b,
            "//": lambda: a // b, "%": lambda: a % b,
            "min": lambda: min(a, b), "max": lambda: max(a, b)}[kind]()


def show(t) -> str:
    kind = t[0]
    if kind == "var":
        return t[1].name
    if kind == "const":
        return str(t[1])
    if kind in ("min", "max"):
        return f"{kind}({show(t[1])}, {show(t[2])})"
    return f"({show(t[1])} {kind} {show(t[2])})"


def show_env(env) -> str:
    return "{" + ", ".join(f"{v.name}: {x}" for v, x in env.items()) + "}"


def in_bounds(v, value) -> bool:
    return (v.lower is None or value >= v.lower) and (v.upper is None or value <= v.upper)


def assert_same(p, q):
    """Equal, equal hash, equal printed form."""
    p, q = as_expr(p), as_expr(q)
    assert p == q, f"{p} != {q}"
    assert hash(p) == hash(q), f"hash differs for equal {p}"
    assert str(p) == str(q)
    assert repr(p) == str(p)


# ------------------------------------------------- 1. evaluation vs reference

@SETTINGS
@given(cases())
def test_canonical_form_evaluates_like_python(case):
    variables, tree, envs = case
    try:
        e = build(tree)
    except ZeroDivisor:
        # A divisor simplified to the constant 0: Python must divide by zero too.
        for env in envs:
            with pytest.raises(ZeroDivisionError):
                ref(tree, env)
        return
    assert free_vars(e) <= set(variables)
    for env in envs:
        try:
            expected = ref(tree, env)
        except ZeroDivisionError:
            continue
        try:
            got = evaluate(e, env)
        except ShapeError as err:
            pytest.fail(f"{show(tree)} -> {e}: evaluate raised {err} at {show_env(env)}, "
                        f"Python gives {expected}")
        assert got == expected, f"{show(tree)} -> {e} at {show_env(env)}: {got} != {expected}"


# ------------------------------------------------------------ 3. bounds

@SETTINGS
@given(cases())
def test_bounds_contain_every_value(case):
    variables, tree, envs = case
    try:
        e = build(tree)
    except ZeroDivisor:
        return
    lo, hi = bounds(e)
    assert lo <= hi
    for end in (lo, hi):
        assert isinstance(end, int) or end in (math.inf, -math.inf)
    for env in envs:
        try:
            value = evaluate(e, env)
        except ShapeError:
            continue
        assert lo <= value <= hi, f"{e} = {value} at {show_env(env)} outside bounds {(lo, hi)}"
        # the reference value agrees (property 1), so the bound covers it too
        try:
            assert lo <= ref(tree, env) <= hi
        except ZeroDivisionError:
            pass


def test_bounds_of_constant_and_variable():
    for v in POOL:
        lo, hi = bounds(v)
        assert lo == (-math.inf if v.lower is None else v.lower)
        assert hi == (math.inf if v.upper is None else v.upper)
    for c in (-5, 0, 7):
        assert bounds(c) == (c, c)


# ------------------------------------------------------------ 2. the prover

@st.composite
def related_pairs(draw):
    """Two trees over the same variables, often related so that YES / NO occur."""
    variables = draw(variable_sets)
    a = draw(trees(variables, 3))
    how = draw(st.sampled_from(["independent", "shift", "plus_tree", "min", "max", "div", "mod",
                                "same"]))
    if how == "independent":
        b = draw(trees(variables, 3))
    elif how == "shift":
        b = ("+", a, ("const", draw(CONSTS)))
    elif how == "plus_tree":
        b = ("+", a, draw(trees(variables, 2)))
    elif how in ("min", "max"):
        b = (how, a, draw(trees(variables, 2)))
    elif how == "div":
        b = ("//", a, ("const", draw(NONZERO)))
    elif how == "mod":
        b = ("%", a, ("const", draw(NONZERO)))
    else:
        b = a
    if draw(st.booleans()):
        a, b = b, a
    return variables, a, b, draw(envs_for(variables, 1, 10))


RELATIONS = (
    ("prove_le", prove_le, lambda p, q: p <= q),
    ("prove_lt", prove_lt, lambda p, q: p < q),
    ("prove_equal", prove_equal, lambda p, q: p == q),
)


@SETTINGS
@given(related_pairs())
def test_prover_never_contradicts_a_sample(case):
    variables, ta, tb, envs = case
    try:
        a, b = build(ta), build(tb)
    except ZeroDivisor:
        return
    samples = []
    for env in envs:
        try:
            samples.append((env, evaluate(a, env), evaluate(b, env)))
        except ShapeError:
            continue
    for name, prove, holds in RELATIONS:
        for lhs, rhs, swap in ((a, b, False), (b, a, True)):
            answer = prove(lhs, rhs)
            assert isinstance(answer, Proof)
            for env, va, vb in samples:
                vl, vr = (vb, va) if swap else (va, vb)
                if answer is Proof.YES:
                    assert holds(vl, vr), (f"{name}({lhs}, {rhs}) is YES but at {show_env(env)} "
                                           f"the values are {vl}, {vr}")
                elif answer is Proof.NO:
                    assert not holds(vl, vr), (f"{name}({lhs}, {rhs}) is NO but at "
                                               f"{show_env(env)} the values are {vl}, {vr}")


@SETTINGS
@given(cases(depth=3))
def test_prover_reflexive_facts(case):
    _, tree, _ = case
    try:
        e = build(tree)
    except ZeroDivisor:
        return
    assert prove_equal(e, e) is Proof.YES
    assert prove_le(e, e) is Proof.YES
    assert prove_lt(e, e) is Proof.NO
    assert prove_lt(e, e + 1) is Proof.YES
    assert prove_le(e + 1, e) is Proof.NO
    assert prove_equal(e, e + 3) is Proof.NO


def test_proof_is_not_a_bool():
    for answer in Proof:
        with pytest.raises(TypeError):
            bool(answer)


# ---------------------------------------------------------- 4. canonical form

@SETTINGS
@given(st.data())
def test_ring_laws_hold_syntactically(data):
    variables = data.draw(variable_sets)
    built = []
    for _ in range(3):
        try:
            built.append(build(data.draw(trees(variables, 3))))
        except ZeroDivisor:
            assume(False)
    e1, e2, e3 = built
    assert_same(e1 + e2, e2 + e1)
    assert_same((e1 + e2) + e3, e1 + (e2 + e3))
    assert_same(e1 * e2, e2 * e1)
    assert_same((e1 * e2) * e3, e1 * (e2 * e3))
    assert_same(e1 * (e2 + e3), e1 * e2 + e1 * e3)
    assert_same((e1 + e2) * (e1 - e2), e1 * e1 - e2 * e2)
    assert_same(e1 - e2, e1 + (-1) * e2)
    assert_same(e1 - e2, -(e2 - e1))
    assert_same(-(-e1), e1)  # noqa: B002 (double negation on purpose)
    assert_same(+e1, e1)
    assert_same(e1 + 0, e1)
    assert_same(e1 * 1, e1)
    assert_same(e1 * 0, 0)
    assert_same(e1 - e1, 0)
    assert_same(e1 * 4 + e1 * 2, 6 * e1)
    assert_same(e1 + e1 + e1, 3 * e1)
    # any order and grouping of a sum / product of several terms
    terms = [e1, e2, e3, data.draw(st.sampled_from(variables)), data.draw(CONSTS)]
    shuffled = data.draw(st.permutations(terms))
    total_a, total_b = as_expr(0), as_expr(0)
    for t in terms:
        total_a = total_a + t
    for t in reversed(shuffled):
        total_b = t + total_b
    assert_same(total_a, total_b)
    prod_a, prod_b = as_expr(1), as_expr(1)
    for t in terms[:4]:
        prod_a = prod_a * t
    for t in data.draw(st.permutations(terms[:4])):
        prod_b = t * prod_b
    assert_same(prod_a, prod_b)


@SETTINGS
@given(cases())
def test_rebuild_and_print_are_stable(case):
    variables, tree, envs = case
    try:
        e = build(tree)
    except ZeroDivisor:
        return
    again = build(tree)
    assert_same(e, again)
    assert str(e) == str(e)
    assert {e: 1}[again] == 1
    # min / max are commutative in the canonical form
    try:
        other = build(("+", tree, ("var", variables[0])))
    except ZeroDivisor:
        return
    assert_same(min_expr(e, other), min_expr(other, e))
    assert_same(max_expr(e, other), max_expr(other, e))
    # the printed form, read as Python over ints, has the same value
    text = str(e)
    for env in envs:
        try:
            value = evaluate(e, env)
        except ShapeError:
            continue
        namespace = {v.name: x for v, x in env.items()}
        namespace.update(min=min, max=max)
        assert eval(text, {"__builtins__": {}}, namespace) == value, (text, show_env(env))


def test_hand_picked_canonical_equalities():
    n, a, b = SizeVar("n"), SizeVar("a", lower=None), SizeVar("b", lower=None)
    assert_same(n * 4 + n * 2, 6 * n)
    assert_same((a + b) * (a - b), a * a - b * b)
    assert_same((a + b) * (a + b), a * a + 2 * a * b + b * b)
    assert_same(a * b * a, b * a * a)
    assert_same(a + b - a, b)
    assert_same(as_expr(n), n)
    assert str(n * 4 + n * 2) == str(6 * n) == "n * 6"
    assert_same(floordiv(a * 6 + 4, 3), floordiv(a * 6 + 4, 3))
    assert_same(min_expr(a, b), min_expr(b, a))
    assert_same(max_expr(a + 1, b), max_expr(b, 1 + a))
    assert_same(a // 4 + b % 3, b % 3 + a // 4)
    # a SizeVar and its IntExpr are interchangeable as dict keys
    assert {n: 1}[as_expr(n)] == 1


@given(st.integers(-10**6, 10**6))
@settings(max_examples=100, deadline=None)
def test_constant_expression_equals_its_int_and_hashes_alike(k):
    e = const(k)
    assert e == k and as_expr(k) == k
    assert int(e) == k and e.value == k and str(e) == str(k)
    # Python requires objects that compare equal to hash equal
    assert hash(e) == hash(k), f"const({k}) == {k} but hashes differ"


# ---------------------------------------------------- 5. substitute / evaluate

@SETTINGS
@given(st.data())
def test_substitute_then_evaluate_composes(data):
    variables = data.draw(variable_sets)
    try:
        e = build(data.draw(trees(variables, 4)))
    except ZeroDivisor:
        return
    targets = data.draw(st.lists(st.sampled_from(variables), min_size=1, unique=True))
    new_vars = data.draw(variable_sets)           # may overlap the replaced ones
    mapping = {}
    for v in targets:
        if data.draw(st.booleans()):
            mapping[v] = data.draw(CONSTS)
        else:
            try:
                mapping[v] = build(data.draw(trees(new_vars, 2)))
            except ZeroDivisor:
                mapping[v] = data.draw(CONSTS)
    envs = data.draw(envs_for(set(variables) | set(new_vars)))
    try:
        s = substitute(e, mapping)
    except ShapeError as err:
        assert "by zero" in str(err)
        s = None
    for env in envs:
        try:
            composed = {**env, **{v: evaluate(x, env) for v, x in mapping.items()}}
            expected = evaluate(e, composed)
        except ShapeError:    # a replacement or the original divides by zero here
            continue
        assert s is not None, f"substitute({e}, {mapping}) raised but {e} evaluates at {composed}"
        assert evaluate(s, env) == expected, (f"{e} with {mapping} -> {s} at {show_env(env)}: "
                                               f"{evaluate(s, env)} != {expected}")


@SETTINGS
@given(cases(depth=3))
def test_substitute_identity_and_constants(case):
    variables, tree, envs = case
    try:
        e = build(tree)
    except ZeroDivisor:
        return
    assert_same(substitute(e, {}), e)
    assert_same(substitute(e, {v: v for v in variables}), e)
    for env in envs:
        try:
            expected = evaluate(e, env)
        except ShapeError:
            continue
        # substituting in-bounds constants for every variable gives the constant value
        s = substitute(e, env)
        assert s.is_const and s.value == expected
        assert free_vars(s) == frozenset()


# --------------------------------------------------------- monotonicity claim

@SETTINGS
@given(st.data())
def test_monotone_claim_holds_on_samples(data):
    variables = data.draw(st.lists(st.sampled_from((I, N, M)), min_size=2, max_size=3,
                                   unique=True))
    try:
        e = build(data.draw(trees(variables, 3, ("+", "*", "//", "min", "max", "-"))))
    except ZeroDivisor:
        return
    if not is_monotone_nondecreasing(e):
        return
    for env in data.draw(envs_for(variables)):
        v = data.draw(st.sampled_from(variables))
        if not in_bounds(v, env[v] + 1):
            continue
        try:
            before = evaluate(e, env)
            after = evaluate(e, {**env, v: env[v] + 1})
        except ShapeError:
            continue
        assert after >= before, f"{e} decreases in {v.name} at {show_env(env)}"


# ------------------------------------------------------- 6. hand-picked units

def test_floor_semantics_for_negative_operands():
    x = SizeVar("x", lower=None)
    for value in range(-30, 31):
        env = {x: value}
        for c in (-7, -3, -2, -1, 1, 2, 3, 5):
            for shift in (-7, 0, 4):
                assert evaluate((x + shift) // c, env) == (value + shift) // c
                assert evaluate((x + shift) % c, env) == (value + shift) % c
                assert evaluate(floordiv(x * 3 + shift, c), env) == (3 * value + shift) // c
                assert evaluate(floormod(x * 3 + shift, c), env) == (3 * value + shift) % c
    assert evaluate((x - 7) // 2, {x: 0}) == -4
    assert evaluate((x - 7) % 2, {x: 0}) == 1
    assert evaluate((x - 7) % -3, {x: 0}) == -1
    assert evaluate((x - 7) // -3, {x: 0}) == 2
    assert evaluate(7 // (x - 10), {x: 0}) == -1
    assert evaluate(7 % (x - 10), {x: 0}) == -3
    assert floordiv(-7, 2) == -4 and floormod(-7, 2) == 1
    assert floordiv(7, -2) == -4 and floormod(7, -2) == -1
    assert floordiv(-7, -2) == 3 and floormod(-7, -2) == -1


def test_exact_simplifications():
    n = SizeVar("n", upper=64)           # 1..64
    i = SizeVar("i", lower=0, upper=20)  # 0..20
    x = SizeVar("x", lower=None)
    y = SizeVar("y", lower=None)
    k = SizeVar("k", upper=16)
    assert_same((n * 4 + 3) // 4, n)
    assert_same((n * 4 + 3) % 4, 3)
    assert_same((x * 4 + 3) // 4, x)          # the remainder 3 is in [0, 4) for every x
    assert_same((x * 4 + 3) % 4, 3)
    assert_same((x * 4) % 4, 0)
    assert_same((x * 6) // 3, 2 * x)
    assert_same((x * 6 + 4) // 3, 2 * x + 1)
    assert_same(x // 1, x)
    assert_same(x % 1, 0)
    assert_same(x // -1, -x)
    assert_same((i * 8 + 4) // 8, i)
    assert_same(i % 32, i)                    # 0 <= i <= 20 < 32
    assert_same(i // 32, 0)
    assert_same((x // 2) // 3, x // 6)
    assert_same((x % 12) % 4, x % 4)
    assert_same((x * k) // k, x)              # k >= 1
    assert_same((x * k + k * y) % k, 0)
    assert_same(min_expr(n, n + 1), n)
    assert_same(max_expr(n, n + 1), n + 1)
    assert_same(max_expr(i, 0), i)
    assert_same(min_expr(i, 0), 0)
    assert_same(min_expr(n, 64), n)
    assert_same(max_expr(n, 64), 64)
    assert_same(min_expr(x, x), x)
    assert prove_le(n, 64) is Proof.YES and prove_lt(n, 64) is Proof.UNKNOWN
    assert prove_lt(0, n) is Proof.YES and prove_le(n, 0) is Proof.NO
    assert prove_equal(n * n, n * n) is Proof.YES
    assert prove_le(x // 4, (x + 3) // 4) is Proof.YES
    assert prove_le(x, y) is Proof.UNKNOWN and prove_equal(x, y) is Proof.UNKNOWN
    # a randomised spot check that the simplified forms agree with Python
    rnd = random.Random(0)
    for _ in range(200):
        env = {n: rnd.randint(1, 64), i: rnd.randint(0, 20), x: rnd.randint(-500, 500),
               y: rnd.randint(-500, 500), k: rnd.randint(1, 16)}
        assert evaluate((x * 6 + 4) // 3, env) == (env[x] * 6 + 4) // 3
        assert evaluate((x // 2) // 3, env) == (env[x] // 2) // 3
        assert evaluate((x % 12) % 4, env) == (env[x] % 12) % 4
        assert evaluate((x * k) // k, env) == (env[x] * env[k]) // env[k]


def test_errors_are_shape_errors():
    x, y = SizeVar("x", lower=None), SizeVar("y", lower=None)
    with pytest.raises(ShapeError):
        floordiv(x, 0)
    with pytest.raises(ShapeError):
        floormod(x + 1, x - x)
    with pytest.raises(ShapeError):
        x // 0
    with pytest.raises(ShapeError):
        evaluate(x // y, {x: 1, y: 0})
    with pytest.raises(ShapeError):
        evaluate(x % y, {x: 1, y: 0})
    with pytest.raises(ShapeError):
        evaluate(x + y, {x: 1})
    with pytest.raises(ShapeError):
        SizeVar("bad name")
    with pytest.raises(ShapeError):
        SizeVar("v", upper=1, lower=2)
    with pytest.raises(ShapeError):
        bool(x + 1)
    with pytest.raises(ShapeError):
        int(x + 1)
