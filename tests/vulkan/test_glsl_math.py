"""The float32 math helpers of the GLSL emitter (kernel.py's HELPERS: sin,
cos, tan, asin, acos, atan, sinh, cosh, asinh, acosh, atanh, fmod) on the
Vulkan device against numpy's float64 functions of the same float32
inputs, over wide ranges of each function's domain: one shader computes
them all, dispatched once per input range at sizes that are not multiples
of the workgroup. Errors are counted in units in the last place of the
float32 result (sin, cos and tan: in absolute terms where the result
crosses zero, as the reduction's error is absolute)."""

from __future__ import annotations

import numpy as np
import pytest

from relax_edge.ir import SizeVar
from relax_edge.tir import TensorProgram
from relax_edge.tir.expr import intrinsic
from relax_edge.tir.stmt import Buffer, For, Seq, Store, loop_var
from tests.vulkan.test_glsl_run import _dispatch, _load

pytestmark = pytest.mark.skipif(not __import__("shutil").which("glslc"), reason="glslc is not installed")

F = "float32"
UNARY = {"sin": np.sin, "cos": np.cos, "tan": np.tan, "asin": np.arcsin, "acos": np.arccos, "atan": np.arctan,
         "sinh": np.sinh, "cosh": np.cosh, "asinh": np.arcsinh, "acosh": np.arccosh, "atanh": np.arctanh}
SIN_COS_BOUND = 1.0e5   # |x| below which the reduction of sin, cos and tan is exact to float32 (kernel.py)


def _program():
    n, i = SizeVar("n", upper=1 << 20), loop_var("i")
    x, y = Buffer("x", F, (n,)), Buffer("y", F, (n,))
    outs = {name: Buffer(f"out_{name}", F, (n,)) for name in (*UNARY, "fmod")}
    body = [Store(outs[name], (i,), intrinsic(name, x[i])) for name in UNARY]
    body.append(Store(outs["fmod"], (i,), intrinsic("fmod", x[i], y[i])))
    return TensorProgram("math_all", (x, y), tuple(outs.values()), For(i, n, Seq(tuple(body))), (n,)), list(outs)


def _ranges():
    """(label, x, y): each range a few thousand float32 values of both signs, plus the special values."""
    rng = np.random.default_rng(11)
    special = np.array([0.0, -0.0, 1.0, -1.0, 0.5, -0.5, np.inf, -np.inf, np.nan, 1e-30, -1e-30], np.float32)

    def signed(a):
        return (a * rng.choice([-1.0, 1.0], a.size)).astype(np.float32)

    out = []
    for label, lo, hi in (("tiny", 1e-30, 1e-3), ("unit", 1e-3, 1.0), ("small", 1.0, 10.0), ("medium", 10.0, 1e3),
                          ("large", 1e3, SIN_COS_BOUND), ("huge", SIN_COS_BOUND, 3e38)):
        x = signed(np.exp(rng.uniform(np.log(lo), np.log(hi), 4093)))
        y = signed(np.exp(rng.uniform(np.log(1e-3), np.log(1e3), x.size)))
        out.append((label, np.concatenate([x, special]), np.concatenate([y, special[::-1]])))
    return out


def ulp_errors(got, want):
    """|got - want| in units of the float32 spacing at want (0 where both are the same NaN / infinity)."""
    want = np.asarray(want, np.float64)
    with np.errstate(all="ignore"):
        w32 = want.astype(np.float32)
    same = (np.isnan(got) & np.isnan(want)) | (got == w32)
    spacing = np.spacing(np.abs(w32)).astype(np.float64)
    with np.errstate(all="ignore"):
        err = np.abs(got.astype(np.float64) - want) / spacing
    return np.where(same, 0.0, np.nan_to_num(err, nan=np.inf))


def measured(ctx, tmp_path):
    """{(function, range label): (max ulp error, max absolute error of the finite results)} over _ranges()."""
    p, names = _program()
    record = _load(ctx, p, tmp_path)
    out = {}
    for label, x, y in _ranges():
        got = _dispatch(ctx, p, record, [x, y], {p.size_params[0]: x.size})
        x64, y64 = x.astype(np.float64), y.astype(np.float64)
        with np.errstate(all="ignore"):
            wants = [UNARY[name](x64) for name in names[:-1]] + [np.fmod(x64, y64)]
        for name, g, w in zip(names, got, wants):
            finite = np.isfinite(w)
            absolute = np.abs(g[finite] - w[finite]) if finite.any() else np.zeros(1)
            out[name, label] = (float(ulp_errors(g, w).max()), float(np.nan_to_num(absolute, nan=np.inf).max()))
    return out


MAX_ULP = 4   # measured on lavapipe: at most 3.5 (tan), 2.9 (asinh), 2.3 (cos); the polynomials' own error is ~1


def test_math_helpers_match_numpy(open_vk, tmp_path):
    errors = measured(open_vk(), tmp_path)
    bad = {k: v for k, v in errors.items() if v[0] > MAX_ULP and not (k[0] in ("sin", "cos", "tan") and k[1] == "huge")}
    assert bad == {}, f"past {MAX_ULP} ulp: {bad}"
    for name in ("sin", "cos"):   # past the reduction's bound: not accurate, but still a sine
        assert errors[name, "huge"][1] <= 2.0
    worst = max(errors[name, "huge"][1] for name in ("sin", "cos"))
    print(f"\nsin/cos for |x| in [{SIN_COS_BOUND:g}, 3e38]: absolute error up to {worst:.3g} (no reduction bound)")


def test_fmod_is_exact_and_signed_like_c(open_vk, tmp_path):
    """fmod keeps x's sign (-0 included), returns x when |x| < |y| or y is infinite, NaN for y = 0 or x
    infinite; every result over the ranges above equals numpy's (C's) bit for bit."""
    errors = measured(open_vk(), tmp_path)
    assert all(errors["fmod", label] == (0.0, 0.0) for label, _, _ in _ranges())
    p, names = _program()
    ctx = open_vk()
    record = _load(ctx, p, tmp_path)
    x = np.array([-4.0, 4.0, -0.0, 5.5, -5.5, 3.0, 1e30, np.inf, 2.0, 7.0, 1.0, 3e38], np.float32)
    y = np.array([2.0, -2.0, 3.0, np.inf, 2.0, 0.0, 3.0, 2.0, np.nan, -2.5, 1e-30, 1e-37], np.float32)
    got = _dispatch(ctx, p, record, [x, y], {p.size_params[0]: x.size})[names.index("fmod")]
    with np.errstate(all="ignore"):
        want = np.fmod(x, y)
    numbers = ~np.isnan(want)
    assert np.array_equal(got, want, equal_nan=True)
    assert np.array_equal(np.signbit(got[numbers]), np.signbit(want[numbers]))
