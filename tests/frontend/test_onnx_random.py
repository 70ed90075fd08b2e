"""ONNX RandomUniform, RandomNormal, RandomUniformLike, RandomNormalLike,
Bernoulli and Multinomial over relax_edge's counter-based generator
(op/random.py: splitmix64 of the seed and the element index).

Their values cannot match ONNX Runtime's (another generator), so:
- the generator against SplitMix64's published outputs;
- the same seed gives the same values in the interpreter (the numpy
  references), the legalized tensor programs, and the C and LLVM builds on
  the host (one model of many random nodes, a symbolic dim `n` at several
  sizes) and on qemu-armv7;
- distributions on 20k draws with fixed seeds: Kolmogorov-Smirnov tests
  (p > 1e-4) against the uniform and normal CDFs, Bernoulli's mean and
  Multinomial's class frequencies against softmax within 5 binomial sigmas;
- seeds: distinct seeds differ, a missing seed is fixed per output name;
- bad attributes refused with the node named; the node cases run (values
  not compared, the runner says why)."""

import math

import ml_dtypes
import numpy as np
import pytest
from onnx import TensorProto, helper

import relax_edge as rxe
from relax_edge.frontend.onnx import node_tests
from relax_edge.op.random import splitmix64
from tests.frontend.one_node import compiled, one_node_model

F32, F16, F64, BF16 = TensorProto.FLOAT, TensorProto.FLOAT16, TensorProto.DOUBLE, TensorProto.BFLOAT16


def test_splitmix64_matches_its_published_outputs():
    """The first outputs of SplitMix64 (Vigna's splitmix64.c) seeded with 0 and with 1234567 (the values
    rand_xoshiro's SplitMix64 test lists)."""
    assert [int(x) for x in splitmix64(0, np.arange(3))] == [0xE220A8397B1DCDAF, 0x6E789E6AA1B965F4,
                                                             0x06C45D188009454F]
    assert [int(x) for x in splitmix64(1234567, np.arange(5))] == [
        6457827717110365317, 3203168211198807973, 9817491932198370423, 4593380528125082431, 16408922859458223821]


# ------------------------------------------------------------ one model of every operator and dtype

def _nodes():
    """(node, output element type) pairs over inputs x (n, 4) float32, h (n, 4) float16, l (n, 3) float32,
    d (n, 5) float64."""
    node = helper.make_node
    return [
        (node("RandomUniformLike", ["x"], ["u32"], seed=3.0, low=-2.0, high=5.0), F32),
        (node("RandomUniformLike", ["x"], ["u16"], seed=3.0, dtype=F16), F16),
        (node("RandomUniformLike", ["h"], ["ubf"], seed=3.5, dtype=BF16), BF16),
        (node("RandomUniformLike", ["d"], ["u64"], seed=-1.0), F64),
        (node("RandomNormalLike", ["x"], ["g32"], seed=4.0, mean=1.0, scale=2.0), F32),
        (node("RandomNormalLike", ["h"], ["g16"], seed=4.0), F16),
        (node("RandomNormalLike", ["x"], ["g64"], seed=4.0, dtype=F64), F64),
        (node("Bernoulli", ["x"], ["b32"], seed=5.0), F32),
        (node("Bernoulli", ["h"], ["bbool"], seed=5.0, dtype=TensorProto.BOOL), TensorProto.BOOL),
        (node("Bernoulli", ["d"], ["bint"], seed=5.0, dtype=TensorProto.INT32), TensorProto.INT32),
        (node("Multinomial", ["l"], ["m32"], seed=6.0, sample_size=7), TensorProto.INT32),
        (node("Multinomial", ["d"], ["m64"], seed=6.0, sample_size=3, dtype=TensorProto.INT64), TensorProto.INT64),
        (node("RandomUniform", [], ["r"], seed=7.0, shape=[3, 5], dtype=F64), F64),
        (node("RandomNormal", [], ["rn"], seed=8.0, shape=[2, 3]), F32),
        (node("RandomUniform", [], ["unseeded"], shape=[4]), F32),
    ]


def _model(opset=22):
    nodes = _nodes()
    inputs = [helper.make_tensor_value_info(name, elem, ["n", width])
              for name, elem, width in (("x", F32, 4), ("h", F16, 4), ("l", F32, 3), ("d", F64, 5))]
    graph = helper.make_graph([n for n, _ in nodes], "random", inputs,
                              [helper.make_tensor_value_info(n.output[0], elem, None) for n, elem in nodes])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 10
    return model


def _inputs(n, seed):
    rng = np.random.default_rng(seed)
    return [rng.random((n, 4), dtype=np.float32), rng.random((n, 4)).astype(np.float16),
            rng.standard_normal((n, 3)).astype(np.float32), rng.standard_normal((n, 5))]


def _same(got, want):
    """Bit for bit (bfloat16 through its bits), float64 normals to 1e-13 (libm's last bits)."""
    for i, (g, w) in enumerate(zip(got, want)):
        g, w = np.asarray(g), np.asarray(w)
        assert g.shape == w.shape and g.dtype == w.dtype, (i, g.dtype, g.shape, w.dtype, w.shape)
        if g.dtype == np.float64:
            np.testing.assert_allclose(g, w, rtol=1e-13, atol=1e-13, err_msg=str(i))
        else:
            np.testing.assert_array_equal(g.view(np.uint16) if g.dtype == ml_dtypes.bfloat16 else g,
                                          w.view(np.uint16) if w.dtype == ml_dtypes.bfloat16 else w, err_msg=str(i))


SIZES = (1, 3, 8)


def test_interpreted_and_legalized_agree():
    mod = rxe.from_onnx(_model())
    legalized = rxe.optimize(mod, verify=True)
    for n in (1, 3):
        arrays = _inputs(n, n)
        _same(rxe.interpret(legalized, *arrays), rxe.interpret(mod, *arrays))


@pytest.mark.parametrize("backend", ["c", "llvm"])
def test_compiled_on_the_host(backend, tmp_path):
    mod = rxe.from_onnx(_model())
    with compiled(_model(), backend, tmp_path) as loaded:
        for n in SIZES:
            arrays = _inputs(n, 20 + n)
            _same(loaded.run(*arrays), rxe.interpret(mod, *arrays))


@pytest.mark.slow
@pytest.mark.emu
def test_compiled_on_qemu_armv7(tmp_path):
    """32-bit ARM: the uint64 hash in register pairs, the same values."""
    mod = rxe.from_onnx(_model())
    art = rxe.build(mod, board="qemu-armv7", backend="c", out_dir=tmp_path, name="m", profile=False)
    with rxe.connect("qemu-armv7") as dev:
        loaded = dev.load(art)
        arrays = _inputs(6, 77)
        _same(loaded.run(*arrays), rxe.interpret(mod, *arrays))


def test_older_opsets_import():
    """RandomUniform / RandomNormal (Like) since opset 1, Multinomial since 7, Bernoulli since 15."""
    mod = rxe.from_onnx(_model(opset=15))
    assert len(rxe.interpret(mod, *_inputs(2, 0))) == len(_nodes())


# ------------------------------------------------------------------ distributions

DRAWS = 20000


def _ks_pvalue(samples, cdf) -> float:
    """Kolmogorov-Smirnov: the asymptotic p-value of the largest gap between the empirical CDF and `cdf`."""
    x = np.sort(np.asarray(samples, np.float64))
    n = x.size
    f = cdf(x)
    d = max(np.max(np.arange(1, n + 1) / n - f), np.max(f - np.arange(n) / n))
    lam = (math.sqrt(n) + 0.12 + 0.11 / math.sqrt(n)) * d
    return float(min(1.0, max(0.0, 2 * sum((-1) ** (k - 1) * math.exp(-2 * k * k * lam * lam)
                                           for k in range(1, 101)))))


def _one(op, inputs, attrs, opset=22, outputs=("y",)):
    return one_node_model(op, inputs, opset=opset, outputs=outputs, attrs=attrs, node_name="rnd", ir_version=10)


def _normal_cdf(mean, scale):
    return np.vectorize(lambda v: 0.5 * (1 + math.erf((v - mean) / (scale * math.sqrt(2)))))


@pytest.mark.parametrize("dtype", [F32, F64])
def test_uniform_distribution(dtype):
    low, high = -1.5, 2.5
    model = _one("RandomUniform", [], {"shape": [DRAWS], "low": low, "high": high, "seed": 11.0, "dtype": dtype})
    y = rxe.interpret(rxe.from_onnx(model))
    assert y.min() >= low and y.max() < high
    assert _ks_pvalue(y, lambda v: (v - low) / (high - low)) > 1e-4


@pytest.mark.parametrize("dtype", [F32, F64])
def test_normal_distribution(dtype):
    mean, scale = 0.5, 3.0
    model = _one("RandomNormal", [], {"shape": [DRAWS], "mean": mean, "scale": scale, "seed": 12.0, "dtype": dtype})
    y = rxe.interpret(rxe.from_onnx(model))
    assert _ks_pvalue(y, _normal_cdf(mean, scale)) > 1e-4


def test_compiled_draws_follow_the_distributions(tmp_path):
    """20k draws of each *Like operator and of a static-shape RandomNormal (too large to fold: a kernel) from
    the C build: equal to the interpreter's, and distributed right."""
    nodes = [helper.make_node("RandomUniformLike", ["x"], ["u"], seed=21.0),
             helper.make_node("RandomNormalLike", ["x"], ["g"], seed=22.0),
             helper.make_node("Bernoulli", ["x"], ["b"], seed=23.0),
             helper.make_node("RandomNormal", [], ["s"], seed=24.0, shape=[DRAWS], dtype=F64)]
    graph = helper.make_graph(nodes, "draws", [helper.make_tensor_value_info("x", F32, ["n"])],
                              [helper.make_empty_tensor_value_info(o) for o in "ugbs"])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 22)])
    model.ir_version = 10
    p = np.full(DRAWS, 0.3, np.float32)
    with compiled(model, "c", tmp_path) as loaded:
        u, g, b, s = loaded.run(p)
    _same((u, g, b, s), rxe.interpret(rxe.from_onnx(model), p))
    assert _ks_pvalue(u, lambda v: v) > 1e-4
    assert _ks_pvalue(g, _normal_cdf(0.0, 1.0)) > 1e-4 and _ks_pvalue(s, _normal_cdf(0.0, 1.0)) > 1e-4
    assert abs(b.mean() - 0.3) < 5 * math.sqrt(0.3 * 0.7 / DRAWS)


@pytest.mark.parametrize("p_dtype", [F32, F64, F16])
def test_bernoulli_mean(p_dtype):
    probs = np.array([0.0, 0.05, 0.5, 0.9, 1.0])
    np_dtype = {F32: np.float32, F64: np.float64, F16: np.float16}[p_dtype]
    model = _one("Bernoulli", [("p", p_dtype, [len(probs), "k"])], {"seed": 13.0}, opset=15)
    y = rxe.interpret(rxe.from_onnx(model), np.repeat(probs[:, None], 4000, axis=1).astype(np_dtype))
    assert set(np.unique(y)) <= {0.0, 1.0}
    assert (y[0] == 0).all() and (y[-1] == 1).all()
    for row, p in zip(y, probs.astype(np_dtype).astype(np.float64)):
        assert abs(row.mean() - p) <= 5 * math.sqrt(p * (1 - p) / row.size) + 1e-12, (p, row.mean())


def test_multinomial_frequencies_follow_softmax():
    logits = np.array([[0.0, 1.0, 2.0, -1.0, -np.inf], [3.0, 3.0, 3.0, 3.0, 3.0]], np.float32)
    model = _one("Multinomial", [("x", F32, [2, 5])], {"seed": 14.0, "sample_size": DRAWS}, opset=7)
    y = rxe.interpret(rxe.from_onnx(model), logits)
    assert y.shape == (2, DRAWS) and y.dtype == np.int32
    probs = np.exp(logits - logits.max(axis=1, keepdims=True))
    probs /= probs.sum(axis=1, keepdims=True)
    for row, p in zip(y, probs):
        freq = np.bincount(row, minlength=5) / DRAWS
        assert (freq[p == 0] == 0).all()
        np.testing.assert_array_less(np.abs(freq - p), 5 * np.sqrt(p * (1 - p) / DRAWS) + 1e-12)


# ------------------------------------------------------------------ seeds

def _uniform(seed=None, output="y"):
    attrs = {"shape": [64]} if seed is None else {"shape": [64], "seed": seed}
    return rxe.interpret(rxe.from_onnx(_one("RandomUniform", [], attrs, outputs=(output,))))


def test_seeds():
    assert not np.array_equal(_uniform(1.0), _uniform(2.0))
    assert not np.array_equal(_uniform(1.0), _uniform(1.5))
    np.testing.assert_array_equal(_uniform(), _uniform())   # no seed: fixed per output name
    assert not np.array_equal(_uniform(output="y"), _uniform(output="z"))


# ------------------------------------------------------------------ bad input

X = [("x", F32, ["n", 3])]


@pytest.mark.parametrize("model,message", [
    (_one("RandomUniformLike", [("x", TensorProto.INT32, ["n"])], {}),
     r"node rnd \(RandomUniformLike\): the input is int32: attribute dtype must name a floating-point"),
    (_one("RandomUniform", [], {"shape": [2], "dtype": TensorProto.INT32}),
     r"node rnd \(RandomUniform\): the output element type int32 is not allowed"),
    (_one("RandomUniform", [], {"shape": [2], "low": 2.0, "high": 1.0}), r"low=2.0 and high=1.0 must be finite"),
    (_one("RandomNormal", [], {"shape": [2], "scale": float("inf")}), r"mean=0.0 and scale=inf must be finite"),
    (_one("Multinomial", [("x", F32, [2, 3, 4])], {}), r"node rnd \(Multinomial\): the input must be a 2-D"),
    (_one("Multinomial", X, {"sample_size": 0}), r"sample_size must be >= 1"),
    (_one("Multinomial", X, {"dtype": F32}), r"the output element type float32 is not allowed"),
    (_one("Bernoulli", [("x", TensorProto.INT64, ["n"])], {}), r"node rnd \(Bernoulli\): the probabilities must be"),
])
def test_refused_with_the_node_named(model, message):
    with pytest.raises(rxe.RelaxEdgeError, match=message):
        rxe.from_onnx(model)


# ------------------------------------------------------------------ node cases

RANDOM_CASES = [c for c in node_tests.collect_cases() if node_tests.case_ops(c) & node_tests.RANDOM_OPS]


def test_there_are_node_cases():
    assert len(RANDOM_CASES) >= 6


@pytest.mark.parametrize("case", RANDOM_CASES, ids=[c.name for c in RANDOM_CASES])
def test_node_case_runs_and_says_values_are_not_comparable(case):
    """It runs with the stored shapes and dtypes, and is not counted as a pass."""
    result = node_tests.run_case(case)
    assert result.status == "shapes_only", (result.status, result.detail)
    assert "not comparable" in result.left_out
