"""The integer operators of op/quant_int8.py: the fixed-point arithmetic
against a scalar transcription of TFLite's (gemmlowp) formulas, the
accumulators against onnx.reference's ConvInteger / MatMulInteger, the
tensor-program legalizations equal to the numpy references bit for bit at
several sizes of a symbolic dim, and compiled on the host (C and LLVM)."""

import math

import numpy as np
import pytest
from onnx import helper
from onnx.reference import ReferenceEvaluator

from relax_edge.errors import TypeInferenceError
from relax_edge.ir.expr import Constant
from relax_edge.op import quant_int8 as q
from relax_edge.op.registry import make_call
from tests.legalize.harness import check_compiled, check_legalized

INT32_MIN = -(1 << 31)


def _srdhm(a, b):
    """gemmlowp SaturatingRoundingDoublingHighMul, in Python integers."""
    if a == b == INT32_MIN:
        return (1 << 31) - 1
    ab = a * b
    nudge = (1 << 30) if ab >= 0 else 1 - (1 << 30)
    v = ab + nudge
    return abs(v) // (1 << 31) * (1 if v >= 0 else -1)


def _rdbpot(x, e):
    mask = (1 << e) - 1
    rem, threshold = x & mask, (mask >> 1) + (1 if x < 0 else 0)
    return (x >> e) + (1 if rem > threshold else 0)


def _requant(acc, m, s):
    return _rdbpot(_srdhm(acc * (1 << max(s, 0)), m), max(-s, 0))


def test_quantize_multiplier_and_requantize_follow_gemmlowp():
    rng = np.random.default_rng(0)
    for real in np.exp(rng.uniform(-18, 4, 3000)):
        m, s = q.quantize_multiplier(real)
        frac, exp = math.frexp(real)
        assert (1 << 30) <= m < (1 << 31) and abs(m * 2.0 ** (s - 31) - real) <= real * 2 ** -30
        assert s in (exp, exp + 1)
        accs = rng.integers(-(1 << 20), 1 << 20, 8) >> max(s, 0)
        got = q.requantize(accs, m, s)
        assert [int(g) for g in got] == [_requant(int(a), m, s) for a in accs]
    assert q.quantize_multiplier(0.0) == (0, 0)
    assert q.quantize_multiplier(1.0) == (1 << 30, 1)
    # the final shift rounds halves away from zero; the high multiply rounds -1.5 to -1 (gemmlowp's nudge)
    assert list(q.rdbpot(np.array([3, -3, 1, -1, 5]), 1)) == [2, -2, 1, -1, 3]
    assert list(q.srdhm(np.array([3, -3]), 1 << 30)) == [2, -1]
    assert int(q.srdhm(INT32_MIN, INT32_MIN)) == (1 << 31) - 1
    with pytest.raises(ValueError, match="non-negative"):
        q.quantize_multiplier(-1.0)


def _channel_params(rng, n, lo=1e-4, hi=3e-3):
    pairs = [q.quantize_multiplier(r) for r in rng.uniform(lo, hi, n)]
    return (Constant(np.array([m for m, _ in pairs], np.int32)), Constant(np.array([s for _, s in pairs], np.int32)))


def test_qdense_accumulator_matches_onnx_matmul_integer():
    rng = np.random.default_rng(1)
    x = rng.integers(0, 256, (3, 17)).astype(np.uint8)
    w = rng.integers(-128, 128, (5, 17)).astype(np.int8)
    node = helper.make_node("MatMulInteger", ["a", "b", "az", "bz"], ["y"])
    model = helper.make_model(helper.make_graph(
        [node], "g", [helper.make_tensor_value_info(n, t, None) for n, t in
                      (("a", 2), ("b", 3), ("az", 2), ("bz", 3))], [helper.make_tensor_value_info("y", 6, None)]),
        opset_imports=[helper.make_opsetid("", 13)])
    (want,) = ReferenceEvaluator(model).run(None, {"a": x, "b": w.T.copy(), "az": np.uint8(9), "bz": np.int8(0)})
    got = q.qdense_accumulator(x, w, np.zeros(5, np.int32), 9, 0)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("groups,strides,padding,dilation", [(1, (1, 1), (1, 1, 1, 1), (1, 1)),
                                                              (4, (2, 1), (1, 0, 2, 1), (1, 2))])
def test_qconv2d_accumulator_matches_onnx_conv_integer(groups, strides, padding, dilation):
    rng = np.random.default_rng(2)
    x = rng.integers(0, 256, (2, 4, 7, 6)).astype(np.uint8)
    w = rng.integers(-128, 128, (4, 4 // groups, 3, 3)).astype(np.int8)
    node = helper.make_node("ConvInteger", ["x", "w", "xz"], ["y"], group=groups, strides=list(strides),
                            pads=list(padding[:1]) + [padding[1], padding[2], padding[3]], dilations=list(dilation))
    model = helper.make_model(helper.make_graph(
        [node], "g", [helper.make_tensor_value_info(n, t, None) for n, t in (("x", 2), ("w", 3), ("xz", 2))],
        [helper.make_tensor_value_info("y", 6, None)]), opset_imports=[helper.make_opsetid("", 13)])
    (want,) = ReferenceEvaluator(model).run(None, {"x": x, "w": w, "xz": np.uint8(5)})
    got = q.qconv2d_accumulator(x, w, np.zeros(4, np.int32), strides=strides, padding=padding, dilation=dilation,
                                groups=groups, x_zero=5, w_zero=0)
    np.testing.assert_array_equal(got, want)


def _ints(dtype, lo=None, hi=None):
    lo = q.QUANT_RANGES[dtype][0] if lo is None else lo
    hi = q.QUANT_RANGES[dtype][1] if hi is None else hi

    def arrays(templates, dtypes, sizes, seed):
        rng = np.random.default_rng(seed)
        out = []
        for t, dt in zip(templates, dtypes):
            shape = tuple(sizes[d] if isinstance(d, str) else d for d in t)
            if dt.startswith("float"):
                out.append((rng.standard_normal(shape) * 3).astype(dt))
            else:
                r = q.QUANT_RANGES[dt]
                out.append(rng.integers(r[0], r[1] + 1, shape).astype(dt))
        return out
    return arrays


def _cases():
    rng = np.random.default_rng(3)
    k, n = 19, 6
    w = Constant(rng.integers(-127, 128, (n, k)).astype(np.int8))
    bias = Constant(rng.integers(-5000, 5000, n).astype(np.int32))
    mult, shift = _channel_params(rng, n)
    wc = Constant(rng.integers(-127, 128, (6, 3, 3, 3)).astype(np.int8))
    wd = Constant(rng.integers(-127, 128, (3, 1, 3, 3)).astype(np.int8))
    bd = Constant(rng.integers(-500, 500, 3).astype(np.int32))
    md, sd = _channel_params(rng, 3, 1e-3, 1e-2)
    m1, s1 = q.quantize_multiplier(0.37)
    m2, s2 = q.quantize_multiplier(1.8)
    (ma, sa), (mb, sb), (mo, so) = q.add_multipliers(0.05, 0.02, 0.06)
    table = Constant(q.lut_table(lambda v: 1 / (1 + np.exp(-v)), "int8", 0.05, 3, "uint8", 1 / 256, 0))
    mp, sp = q.quantize_multiplier(0.04 / (0.05 * 5 * 4))
    return [
        ("qdense", [("n", k)], ["uint8"], lambda x: make_call("qdense", [x, w, bias, mult, shift], {
            "x_zero": 7, "w_zero": 0, "out_zero": -3, "out_dtype": "int8"})),
        ("qdense_relu_3d", [(2, "n", k)], ["int8"], lambda x: make_call("qdense", [x, w, bias, mult, shift], {
            "x_zero": -5, "w_zero": 2, "out_zero": 10, "out_dtype": "uint8", "act_min": 10})),
        ("qconv2d", [("n", 3, 6, 5)], ["uint8"], lambda x: make_call(
            "qconv2d", [x, wc, Constant(np.arange(6, dtype=np.int32) * 100), *_channel_params(rng, 6)], {
                "padding": (1, 1, 1, 1), "x_zero": 128, "out_zero": 0, "out_dtype": "uint8"})),
        ("qconv2d_depthwise_strided", [(1, 3, "n", 7)], ["int8"], lambda x: make_call(
            "qconv2d", [x, wd, bd, md, sd], {"strides": (2, 2), "padding": (1, 0, 1, 2), "dilation": (1, 2),
                                             "groups": 3, "x_zero": -1, "out_zero": 4, "out_dtype": "int8",
                                             "act_min": -20, "act_max": 90})),
        ("qrequantize_down", [("n", 7)], ["int8"], lambda x: make_call("qrequantize", [x], {
            "in_zero": 3, "out_zero": -2, "multiplier": m1, "shift": s1, "out_dtype": "int8"})),
        ("qrequantize_up", [("n", 7)], ["uint8"], lambda x: make_call("qrequantize", [x], {
            "in_zero": 128, "out_zero": 120, "multiplier": m2, "shift": s2, "out_dtype": "uint8"})),
        ("qadd_broadcast", [("n", 4), (4,)], ["int8", "int8"], lambda a, b: make_call("qadd", [a, b], {
            "a_zero": 1, "b_zero": -4, "a_multiplier": ma, "a_shift": sa, "b_multiplier": mb, "b_shift": sb,
            "multiplier": mo, "shift": so, "out_zero": 5, "out_dtype": "int8"})),
        ("qmul", [("n", 4), ("n", 4)], ["uint8", "uint8"], lambda a, b: make_call("qmul", [a, b], {
            "a_zero": 100, "b_zero": 128, "multiplier": mp, "shift": sp, "out_zero": 3, "out_dtype": "uint8"})),
        ("qglobal_avg_pool", [("n", 3, 5, 4)], ["int8"], lambda x: make_call("qglobal_avg_pool", [x], {
            "x_zero": 2, "multiplier": mp, "shift": sp, "out_zero": -1, "out_dtype": "int8"})),
        ("qavg_pool2d", [("n", 2, 6, 7)], ["uint8"], lambda x: make_call("qavg_pool2d", [x], {
            "kernel_size": (2, 3), "strides": (2, 2), "x_zero": 128, "multiplier": mp, "shift": sp,
            "out_zero": 128, "out_dtype": "uint8"})),
        ("qlut_sigmoid", [("n", 9)], ["int8"], lambda x: make_call("qlut", [x, table])),
        ("quantize", [("n", 3), (3,), (3,)], ["float32", "float32", "int8"], lambda x, s, z: make_call(
            "quantize", [x, s, z], {"out_dtype": "int8", "qmin": -128, "qmax": 127})),
        ("quantize_int4_held_in_int8", [("n", 3), (), ()], ["float32", "float32", "int8"],
         lambda x, s, z: make_call("quantize", [x, s, z], {"out_dtype": "int8", "qmin": -8, "qmax": 7})),
        ("dequantize", [("n", 3), (3,), (3,)], ["uint8", "float32", "uint8"], lambda x, s, z: make_call(
            "dequantize", [x, s, z], {})),
    ]


CASES = _cases()
SIZES = [{"n": 1}, {"n": 3}, {"n": 6}]


def _arrays_for(name):
    base = _ints("int8")
    if not name.startswith("quantize"):
        return base

    def arrays(templates, dtypes, sizes, seed):
        x, s, z = base(templates, dtypes, sizes, seed)
        return [x, (np.abs(s) / 4 + 0.05).astype(np.float32), (z // 32).astype(np.int8)]
    return arrays


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_legalized_equals_reference(case):
    name, templates, dtypes, build = case
    check_legalized(templates, dtypes, build, SIZES, _arrays_for(name), rtol=0, atol=0)


COMPILED = [c for c in CASES if c[0] in ("qdense_relu_3d", "qconv2d_depthwise_strided", "qadd_broadcast",
                                         "qlut_sigmoid", "qglobal_avg_pool", "quantize")]


COMPILED_ROWS = [(c, "c") for c in COMPILED] + [(c, "llvm") for c in COMPILED if c[0].startswith(("qdense", "qconv"))]


@pytest.mark.parametrize("case,backend", COMPILED_ROWS, ids=[f"{c[0]}-{b}" for c, b in COMPILED_ROWS])
def test_compiled_equals_reference(case, backend, tmp_path, monkeypatch):
    """The portable tensor programs, compiled: the library kernels for qdense / qconv2d are set aside
    (tests/library/test_qgemm*.py test those)."""
    from relax_edge.transform import legalize as legalize_pass
    libraries = legalize_pass.extern_lowerings()
    monkeypatch.setattr(legalize_pass, "extern_lowerings",
                        lambda: {k: v for k, v in libraries.items() if k not in ("qdense", "qconv2d")})
    name, templates, dtypes, build = case
    check_compiled(templates, dtypes, build, SIZES[:2], tmp_path, _arrays_for(name), rtol=0, atol=0,
                   backend=backend)


def test_requantize_exact_rounds_once_half_to_even():
    from fractions import Fraction
    rng = np.random.default_rng(6)
    for real in list(np.exp(rng.uniform(-12, 2, 200))) + [0.25, 0.5, 1.0, 2.0]:
        m, s = q.quantize_multiplier(real)
        accs = rng.integers(-(1 << 18), 1 << 18, 16)
        got = q.requantize_exact(accs, m, s)
        want = [round(Fraction(int(a) * m, 1 << (31 - s))) for a in accs]   # Python rounds halves to even
        assert [int(g) for g in got] == want
    m, s = q.quantize_multiplier(0.25)
    assert list(q.requantize_exact(np.array([2, 6, -2, -6, 3]), m, s)) == [0, 2, 0, -2, 1]


def test_qadd_and_qmul_within_one_step_of_float():
    """The fixed-point add and multiply against dequantize -> float op -> quantize (round half to even)."""
    rng = np.random.default_rng(4)
    a = rng.integers(-128, 128, 4000).astype(np.int8)
    b = rng.integers(-128, 128, 4000).astype(np.int8)
    sa, za, sb, zb, so, zo = 0.0513, 1, 0.0217, -4, 0.0611, 5   # no exact ties (where halves round differently)
    (ma, sha), (mb, shb), (mo, sho) = q.add_multipliers(sa, sb, so)
    got = q.qadd_reference(a, b, a_zero=za, b_zero=zb, out_zero=zo, a_multiplier=ma, a_shift=sha, b_multiplier=mb,
                           b_shift=shb, multiplier=mo, shift=sho, out_dtype="int8").astype(np.int64)
    real = (a.astype(np.float64) - za) * sa + (b.astype(np.float64) - zb) * sb
    want = np.clip(np.rint(real / so) + zo, -128, 127)
    assert np.abs(got - want).max() <= 1 and np.mean(got != want) < 0.01
    m, s = q.quantize_multiplier(sa * sb / 0.1)
    got = q.qmul_reference(a, b, a_zero=za, b_zero=zb, multiplier=m, shift=s, out_zero=0, out_dtype="int8")
    real = (a.astype(np.float64) - za) * sa * (b.astype(np.float64) - zb) * sb
    want = np.clip(np.rint(real / 0.1), -128, 127)
    assert np.abs(got.astype(np.int64) - want).max() <= 1


def test_type_rules_name_the_problem():
    x = Constant(np.zeros((2, 4), np.int8))
    w = Constant(np.zeros((3, 4), np.int8))
    ones = Constant(np.ones(3, np.int32))
    attrs = {"x_zero": 0, "out_zero": 0, "out_dtype": "int8"}
    with pytest.raises(TypeInferenceError, match="bias"):
        make_call("qdense", [x, w, Constant(np.ones(3, np.int64)), ones, ones], attrs)
    with pytest.raises(TypeInferenceError, match="K"):
        make_call("qdense", [x, Constant(np.zeros((3, 5), np.int8)), ones, ones, ones], attrs)
    with pytest.raises(TypeInferenceError, match="x_zero"):
        make_call("qdense", [x, w, ones, ones, ones], {**attrs, "x_zero": 200})
    with pytest.raises(TypeInferenceError, match="act_min"):
        make_call("qdense", [x, w, ones, ones, ones], {**attrs, "act_min": 100, "act_max": 0})
    with pytest.raises(TypeInferenceError, match="int8 or uint8"):
        make_call("qdense", [Constant(np.zeros((2, 4), np.float32)), w, ones, ones, ones], attrs)
    with pytest.raises(TypeInferenceError, match="256 entries"):
        make_call("qlut", [x, Constant(np.zeros(10, np.int8))])
    with pytest.raises(TypeInferenceError, match="multiplier"):
        make_call("qrequantize", [x], {"in_zero": 0, "multiplier": 5, "shift": 0, "out_zero": 0, "out_dtype": "int8"})
    y = make_call("qdense", [x, w, ones, ones, ones], attrs)
    assert y.type.dtype == "int8" and [int(d.value) for d in y.type.shape] == [2, 3]
