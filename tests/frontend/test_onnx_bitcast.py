"""ONNX BitCast (opset 26) of tensors known only at run time: every pair of
same-width element types with a float side (float16 and bfloat16 as their 16
bits), over a symbolic dim `n` at several sizes, interpreted and compiled on
the host with the C and LLVM backends (one model of many BitCast nodes per
build), one qemu-armv7 row; the node cases; widths that differ and bool
targets refused with the node named. Expected values are numpy's
`ndarray.view` of the input bits (the spec: the same bits, little endian)."""

import ml_dtypes
import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import relax_edge as rxe
from relax_edge.frontend.onnx import node_tests
from tests.frontend.one_node import compiled, one_node_model

ELEM = {"float32": TensorProto.FLOAT, "float64": TensorProto.DOUBLE, "float16": TensorProto.FLOAT16,
        "bfloat16": TensorProto.BFLOAT16, "int8": TensorProto.INT8, "uint8": TensorProto.UINT8,
        "int16": TensorProto.INT16, "uint16": TensorProto.UINT16, "int32": TensorProto.INT32,
        "uint32": TensorProto.UINT32, "int64": TensorProto.INT64, "uint64": TensorProto.UINT64}
NUMPY = {**{name: np.dtype(name) for name in ELEM if name != "bfloat16"}, "bfloat16": np.dtype(ml_dtypes.bfloat16)}

# (source, target): a float on at least one side (integer pairs are plain wrapping casts)
PAIRS = [("float32", "int32"), ("int32", "float32"), ("float32", "uint32"), ("uint32", "float32"),
         ("float64", "int64"), ("int64", "float64"), ("float64", "uint64"), ("uint64", "float64"),
         ("float16", "int16"), ("uint16", "float16"), ("bfloat16", "int16"), ("uint16", "bfloat16"),
         ("float16", "bfloat16"), ("bfloat16", "float16")]
SIZES = (1, 4, 7)


# per width, (exponent mask, quiet bit) of the float layouts
NAN_LAYOUTS = {16: ((0x7C00, 0x0200), (0x7F80, 0x0040)), 32: ((0x7F800000, 0x00400000),),
               64: ((0x7FF0000000000000, 0x0008000000000000),)}


def _quiet(bits, width):
    """The bit patterns with every NaN of the width's float layouts made quiet."""
    t = bits.dtype.type
    for exp_mask, quiet in NAN_LAYOUTS[width]:
        mantissa = t((1 << (width - 1)) - 1) & ~t(exp_mask)
        nan = ((bits & t(exp_mask)) == t(exp_mask)) & ((bits & mantissa) != 0)
        bits = np.where(nan, bits | t(quiet), bits)
    return bits


def _inputs(n, seed, quiet_nans=False):
    """Per source dtype, an (n, 3) array of random bits plus specials (zeros, infinities, NaN, subnormals).
    float16 / bfloat16 NaNs are quiet (their kernels hold values as float, see op/bitcast.py); with
    `quiet_nans` every float NaN pattern is."""
    rng = np.random.default_rng(seed)
    out = {}
    for name in sorted({s for s, _ in PAIRS}):
        width = NUMPY[name].itemsize * 8
        bits = rng.integers(0, 2 ** width, size=(n, 3), dtype=np.uint64).astype(f"uint{width}")
        specials = {16: [0x8000, 0x7C00, 0x7E01, 0x0001, 0x7F80], 32: [0x80000000, 0x7F800000, 0x7FC00001,
                                                                     0x00000001, 0x7F800001],
                    64: [2 ** 63, 0x7FF0000000000000, 0x7FF8000000000001, 1, 0x7FF0000000000001]}[width]
        flat = bits.reshape(-1)
        flat[:len(specials)] = np.array(specials, bits.dtype)[:flat.size]
        if (width == 16 and NUMPY[name].kind == "f") or quiet_nans:
            bits = _quiet(bits, width)
        out[name] = bits.view(NUMPY[name])
    return out


def _model():
    sources = sorted({s for s, _ in PAIRS})
    nodes = [helper.make_node("BitCast", [f"x_{s}"], [f"y_{s}_{t}"], to=ELEM[t]) for s, t in PAIRS]
    graph = helper.make_graph(
        nodes, "bitcast", [helper.make_tensor_value_info(f"x_{s}", ELEM[s], ["n", 3]) for s in sources],
        [helper.make_tensor_value_info(f"y_{s}_{t}", ELEM[t], ["n", 3]) for s, t in PAIRS])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 26)])
    model.ir_version = 10
    return model, sources


def _check(results, inputs, float16_payloads=True):
    """Bit for bit; without `float16_payloads` a float16 NaN only needs to be a NaN."""
    for (s, t), got in zip(PAIRS, results):
        want = inputs[s].view(NUMPY[t])
        got = np.asarray(got)
        if got.dtype == np.uint16 and t == "bfloat16":   # bits handed back without ml_dtypes' dtype
            got = got.view(NUMPY[t])
        assert got.shape == want.shape and got.dtype == want.dtype, (s, t, got.dtype, got.shape)
        got_bits, want_bits = (a.view(f"uint{want.itemsize * 8}") for a in (got, want))
        if t == "float16" and not float16_payloads:
            nan = np.isnan(want)
            assert np.isnan(got[nan]).all(), (s, t)
            got_bits, want_bits = got_bits[~nan], want_bits[~nan]
        np.testing.assert_array_equal(got_bits, want_bits, err_msg=f"{s} -> {t}")


def test_interpreted_at_several_sizes():
    model, sources = _model()
    mod = rxe.from_onnx(model)
    for n in SIZES:
        inputs = _inputs(n, n)
        _check(rxe.interpret(mod, *[inputs[s] for s in sources]), inputs)


def test_tensor_programs_interpreted():
    """The legalized module (the kernels' Reinterpret run by the tensor-program interpreter), verified.
    That interpreter holds floats as Python floats: a signalling NaN becomes quiet, and float16 is stored
    through Python's struct, which keeps no NaN payload."""
    model, sources = _model()
    mod = rxe.optimize(rxe.from_onnx(model), verify=True)
    for n in (1, 3):
        inputs = _inputs(n, 50 + n, quiet_nans=True)
        _check(rxe.interpret(mod, *[inputs[s] for s in sources]), inputs, float16_payloads=False)


@pytest.mark.parametrize("backend", ["c", "llvm"])
def test_compiled_on_the_host(backend, tmp_path):
    model, sources = _model()
    with compiled(model, backend, tmp_path) as loaded:
        for n in SIZES:
            inputs = _inputs(n, 10 + n)
            _check(loaded.run(*[inputs[s] for s in sources]), inputs)


def _chain_model():
    """BitCast inside fusable chains: the float16 sum's bits, the float32 exponent field cleared and read back."""
    node = helper.make_node
    i32 = numpy_helper.from_array(np.array(0x007FFFFF, np.int32), "mantissa")
    one = numpy_helper.from_array(np.array(1.0, np.float32), "one")
    half = numpy_helper.from_array(np.array(0.5, np.float16), "half")
    nodes = [node("Add", ["x", "one"], ["a"]), node("BitCast", ["a"], ["bits"], to=TensorProto.INT32),
             node("BitwiseAnd", ["bits", "mantissa"], ["m"]), node("BitCast", ["m"], ["f"], to=TensorProto.FLOAT),
             node("Mul", ["f", "x"], ["y"]),
             node("Add", ["h", "half"], ["hs"]), node("BitCast", ["hs"], ["hb"], to=TensorProto.INT16)]
    graph = helper.make_graph(nodes, "chain", [helper.make_tensor_value_info("x", ELEM["float32"], ["n"]),
                                               helper.make_tensor_value_info("h", ELEM["float16"], ["n"])],
                              [helper.make_tensor_value_info("y", ELEM["float32"], ["n"]),
                               helper.make_tensor_value_info("hb", ELEM["int16"], ["n"])],
                              initializer=[i32, one, half])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 26)])
    model.ir_version = 10
    return model


def _chain_expected(x, h):
    f = ((x + np.float32(1)).view(np.int32) & np.int32(0x007FFFFF)).view(np.float32)
    return f * x, (h.astype(np.float32) + np.float32(0.5)).astype(np.float16).view(np.int16)


@pytest.mark.parametrize("backend", ["c", "llvm"])
def test_fused_chains_compiled(backend, tmp_path):
    model = _chain_model()
    rng = np.random.default_rng(3)
    with compiled(model, backend, tmp_path) as loaded:
        for n in (2, 9):
            x, h = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float16)
            for got, want in zip(loaded.run(x, h), _chain_expected(x, h)):
                np.testing.assert_array_equal(np.asarray(got), want)


@pytest.mark.slow
@pytest.mark.emu
def test_compiled_on_qemu_armv7(tmp_path):
    """32-bit ARM (hard float), where the 64-bit patterns live in register pairs."""
    model, sources = _model()
    art = rxe.build(rxe.from_onnx(model), board="qemu-armv7", backend="c", out_dir=tmp_path, name="m", profile=False)
    with rxe.connect("qemu-armv7") as dev:
        loaded = dev.load(art)
        inputs = _inputs(5, 99)
        _check(loaded.run(*[inputs[s] for s in sources]), inputs)


NODE_CASES = [c for c in node_tests.collect_cases() if c.name.startswith("test_bitcast")]


def test_there_are_node_cases():
    assert len(NODE_CASES) >= 6


@pytest.mark.parametrize("case", NODE_CASES, ids=[c.name for c in NODE_CASES])
def test_node_case(case):
    from relax_edge.frontend.onnx import convert  # noqa: F401  (registers the converters: the scope)
    result = node_tests.run_case(case)
    assert result.status == "pass", (result.status, result.detail)


def _one(source, target):
    return one_node_model("BitCast", [("x", source, ["n"])], opset=26, attrs={"to": target}, node_name="cast_it",
                          ir_version=10)


@pytest.mark.parametrize("source,target,message", [
    (TensorProto.FLOAT, TensorProto.INT16, r"node cast_it \(BitCast\): float32 and int16 differ in width"),
    (TensorProto.DOUBLE, TensorProto.FLOAT, r"float64 and float32 differ in width \(64 and 32 bits\)"),
    (TensorProto.UINT8, TensorProto.BOOL, r"node cast_it \(BitCast\): BitCast from uint8 to bool .* not supported"),
    (TensorProto.FLOAT, TensorProto.STRING, r"element type string is not supported"),
])
def test_refused_with_the_node_named(source, target, message):
    with pytest.raises(rxe.RelaxEdgeError, match=message):
        rxe.from_onnx(_one(source, target))
