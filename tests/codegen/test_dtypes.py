"""float64, int16, uint16, uint32, uint64, float16 and bfloat16 (stored
narrow, computed in float32; bfloat16 arrays from ml_dtypes) through the
operator matrix of dtype_cases.py: the graph interpreter, the legalized
tensor programs (the tensor-program interpreter) and the programs compiled
on the host with the C and LLVM backends, each against numpy, at several
batch sizes (1 included)."""

import numpy as np
import pytest

import relax_edge as rxe
from relax_edge.errors import RelaxEdgeError
from relax_edge.ir import Builder, TensorType, Var
from relax_edge.op.registry import make_call
from relax_edge.transform.legalize import legalize
from tests.codegen.dtype_cases import NARROW_FLOATS, NEW_DTYPES, arrays, compare, expected, module

DTYPES = NEW_DTYPES + NARROW_FLOATS

ROWS = (1, 3)


def _need(dtype):
    if dtype == "bfloat16":
        pytest.importorskip("ml_dtypes")   # the caller's bfloat16 arrays


def _run_inputs(inputs):
    return [inputs[v] for v in "xysp"]


@pytest.mark.parametrize("dtype", DTYPES)
def test_dtype_interpreted_and_legalized(dtype):
    _need(dtype)
    mod, selected = module(dtype)
    lowered = legalize(mod)
    for k, rows in enumerate(ROWS):
        inputs = arrays(dtype, rows, seed=k)
        want = expected(selected, inputs)
        compare(selected, rxe.interpret(mod, *_run_inputs(inputs)), want, "graph interpreter")
        compare(selected, rxe.interpret(lowered, *_run_inputs(inputs)), want, "tensor programs")


@pytest.mark.parametrize("backend", ["c", "llvm"])
@pytest.mark.parametrize("dtype", DTYPES)
def test_dtype_compiled_on_host(dtype, backend, tmp_path):
    _need(dtype)
    mod, selected = module(dtype)
    art = rxe.build(mod, board="host", backend=backend, out_dir=tmp_path, name="dtypes", quiet=True, profile=False)
    with rxe.connect("host") as dev:
        loaded = dev.load(art)
        for k, rows in enumerate((1, 4)):
            inputs = arrays(dtype, rows, seed=10 + k)
            compare(selected, loaded.run(*_run_inputs(inputs)), expected(selected, inputs), f"{backend} build")


def test_wrong_input_dtype_is_refused_by_the_compiled_model(tmp_path):
    mod, _ = module("uint16", names=("add",))
    art = rxe.build(mod, board="host", out_dir=tmp_path, name="dtypes", quiet=True, profile=False)
    inputs = arrays("int16", 2)
    with rxe.connect("host") as dev, pytest.raises(RelaxEdgeError, match="uint16"):
        dev.load(art).run(*_run_inputs(inputs))


def test_float16_kernels_round_as_the_interpreter(tmp_path):
    """float16 values widened, computed in float32 and narrowed to nearest even: the C and LLVM kernels
    give the tensor-program interpreter's bits exactly, and numpy's float16 cast of the float32 result."""
    x = Var("x", TensorType((6,), "float16"))
    bb = Builder()
    with bb.function("main", [x]):
        bb.ret(bb.emit(make_call("multiply", [x, bb.emit(make_call("exp", [x]))])))
    mod = bb.get()
    data = np.array([0.1, -2.5, 3.0, 6.0e-5, 11.0, -0.0], np.float16)
    wide = data.astype(np.float32)
    with np.errstate(over="ignore"):
        want = (wide * np.exp(wide)).astype(np.float16)   # 11 e^11 overflows to inf
    tir = rxe.interpret(legalize(mod), data)
    np.testing.assert_allclose(tir.astype(np.float32), want.astype(np.float32), rtol=1e-3)
    for backend in ("c", "llvm"):
        art = rxe.build(mod, board="host", backend=backend, out_dir=tmp_path / backend, name="f16", quiet=True,
                        profile=False)
        with rxe.connect("host") as dev:
            np.testing.assert_array_equal(dev.load(art).run(data)[0].view(np.uint16), tir.view(np.uint16))


def test_uint64_beyond_int64_survives_a_round_trip():
    """Values above 2^63 keep their bits through the interpreter and the tensor programs."""
    mod, selected = module("uint64", names=("maximum", "divide", "mod", "cast_float64"))
    big = np.array([[2 ** 64 - 1, 2 ** 63, 2 ** 63 + 5, 7, 0]], np.uint64)
    inputs = {"x": big, "y": np.array([[3, 2 ** 63 + 1, 2, 2 ** 64 - 1, 1]], np.uint64),
              "s": big, "p": big}
    want = expected(selected, inputs)
    compare(selected, rxe.interpret(legalize(mod), *_run_inputs(inputs)), want, "tensor programs")


@pytest.mark.parametrize("dtype", ["float64", "int16"])
def test_matmul_of_other_dtypes_is_not_dispatched_to_the_float32_kernels(dtype, tmp_path):
    """The library GEMM takes float32 only: other dtypes keep the legalized tensor program, compiled."""
    from relax_edge.transform.dispatch import dispatch
    a, b = Var("a", TensorType((3, 4), dtype)), Var("b", TensorType((4, 2), dtype))
    bb = Builder()
    with bb.function("main", [a, b]):
        bb.ret(bb.emit(make_call("matmul", [a, b])))
    mod = bb.get()
    assert not dispatch(mod).externs
    rng = np.random.default_rng(0)
    x, y = (rng.integers(-50, 50, s).astype(dtype) for s in ((3, 4), (4, 2)))
    art = rxe.build(mod, board="host", out_dir=tmp_path, name="mm", quiet=True, profile=False)
    with rxe.connect("host") as dev:
        (got,) = dev.load(art).run(x, y)
    np.testing.assert_array_equal(got, (x.astype(np.int64) @ y.astype(np.int64)).astype(dtype))
