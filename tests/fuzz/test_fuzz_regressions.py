"""Bugs the compiler fuzzer (scripts/fuzz_compiler.py) found, each as its
reduced graph built explicitly, compiled for the host with the C and LLVM
backends and checked against numpy written by hand from the operators'
definitions."""

import numpy as np
import pytest

import relax_edge as rxe
from relax_edge import op
from relax_edge.errors import TypeInferenceError
from relax_edge.ir import Builder, Constant, SizeVar, TensorType, Tuple, Var
from relax_edge.ir.types import DTYPES
from relax_edge.op import make_call

BACKENDS = ["c", "llvm"]


def _module(params, body, dataflow=True):
    bb = Builder()
    with bb.function("main", params):
        if dataflow:
            with bb.dataflow():
                out = bb.emit_output(body(bb))
        else:
            out = bb.emit(body(bb))
        bb.ret(out)
    return bb.get()


def _run(mod, backend, tmp_path, *inputs):
    art = rxe.build(mod, board="host", backend=backend, out_dir=tmp_path / backend, name="fuzz", profile=False)
    with rxe.connect("host") as dev:
        return dev.load(art).run(*inputs)


@pytest.mark.parametrize("backend", BACKENDS)
def test_rank0_input(backend, tmp_path):
    """A 0-d input was refused with RXE_ERR_RANK 'rank 1, expected 0':
    prepare_inputs' np.ascontiguousarray made it 1-d (deploy/session.py)."""
    s = Var("s", TensorType((), "uint8"))
    v = Var("v", TensorType((3,), "uint8"))
    mod = _module([s, v], lambda bb: Tuple([bb.emit(make_call("greater_equal", [s, v])),
                                             bb.emit(op.add(s, v))]), dataflow=False)
    x, y = np.array(2, np.uint8), np.array([1, 2, 3], np.uint8)
    ge, total = _run(mod, backend, tmp_path, x, y)
    np.testing.assert_array_equal(ge, [True, True, False])
    np.testing.assert_array_equal(total, np.array([3, 4, 5], np.uint8))
    assert total.dtype == np.uint8 and ge.dtype == np.bool_


@pytest.mark.slow
@pytest.mark.emu
def test_rank0_input_on_qemu_aarch64(tmp_path):
    """The same over RPC: tensorfile.encode made the 0-d input 1-d too."""
    s = Var("s", TensorType((), "float64"))
    v = Var("v", TensorType((1, 2), "float64"))
    mod = _module([s, v], lambda bb: op.make_call("maximum", [v, s]))
    art = rxe.build(mod, board="qemu-aarch64", backend="c", out_dir=tmp_path, name="fuzz", profile=False)
    with rxe.connect("qemu-aarch64") as dev:
        (got,) = dev.load(art).run(np.float64(0.5), np.array([[0.25, 1.5]]))
    np.testing.assert_array_equal(got, [[0.5, 1.5]])


@pytest.mark.parametrize("backend", BACKENDS)
def test_bool_min_max_reductions(backend, tmp_path):
    """max / min over bool crashed legalization: np.iinfo(bool) raised in
    tir/compute.py's initial values."""
    x = Var("x", TensorType((2, 3), "bool"))
    mod = _module([x], lambda bb: Tuple([
        bb.emit(make_call("max", [x], {"axis": 1, "keepdims": True})),
        bb.emit(make_call("min", [x], {"axis": None, "keepdims": False})),
        bb.emit(make_call("min", [x], {"axis": 0, "keepdims": False}))]), dataflow=False)
    data = np.array([[True, False, False], [False, False, False]])
    any_row, all_of, all_col = _run(mod, backend, tmp_path, data)
    np.testing.assert_array_equal(any_row, [[True], [False]])
    np.testing.assert_array_equal(all_of, np.array(False))
    np.testing.assert_array_equal(all_col, [False, False, False])
    np.testing.assert_array_equal(all_col, rxe.interpret(mod, data)[2])


@pytest.mark.parametrize("backend", BACKENDS)
def test_uint8_negative_wraps_before_maximum(backend, tmp_path):
    """negative(uint8) inlined into maximum by fuse: C rendered
    RXE_MAX((0 - x), y) in int, so -1 stayed below 0 instead of being 255
    (transform/fuse.py now casts an inlined 8/16-bit value back)."""
    n = SizeVar("n", upper=64)
    x = Var("x", TensorType((n,), "uint8"))
    y = Var("y", TensorType((), "uint8"))
    mod = _module([x, y], lambda bb: op.make_call("maximum", [bb.emit(make_call("negative", [x])), y]))
    art = rxe.build(mod, board="host", backend=backend, out_dir=tmp_path / backend, name="fuzz", profile=False)
    with rxe.connect("host") as dev:
        loaded = dev.load(art)
        for size in (4, 61):
            data = (np.arange(size) * 37 % 256).astype(np.uint8)
            (got,) = loaded.run(data, np.array(3, np.uint8))
            want = np.maximum((256 - data.astype(np.int64)) % 256, 3).astype(np.uint8)
            np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("backend", BACKENDS)
def test_int8_add_wraps_before_compare(backend, tmp_path):
    """add(int8) that overflows, inlined into less: 100 + 100 is -56."""
    a = Var("a", TensorType((5,), "int8"))
    b = Var("b", TensorType((5,), "int8"))
    mod = _module([a, b], lambda bb: make_call("less", [bb.emit(op.add(a, b)), b]))
    x = np.array([100, -100, 1, 127, -128], np.int8)
    y = np.array([100, -100, 2, 1, -1], np.int8)
    (got,) = _run(mod, backend, tmp_path, x, y)
    wrapped = (x.astype(np.int64) + y + 128) % 256 - 128          # [-56, 56, 3, -128, 127]
    np.testing.assert_array_equal(got, wrapped < y)


@pytest.mark.skipif("uint16" not in DTYPES, reason="uint16 is not a dtype of this tree yet")
@pytest.mark.parametrize("backend", BACKENDS)
def test_uint16_subtract_wraps_before_mean(backend, tmp_path):
    """subtract(uint16) wraps; its mean is of the wrapped values (C summed
    the negative int differences instead)."""
    a = Var("a", TensorType((2, 2), "uint16"))
    b = Var("b", TensorType((2, 2), "uint16"))
    mod = _module([a, b], lambda bb: make_call("mean", [bb.emit(op.subtract(a, b))],
                                               {"axis": None, "keepdims": False}))
    x, y = np.array([[1, 4], [3, 0]], np.uint16), np.array([[2, 1], [3, 0]], np.uint16)
    (got,) = _run(mod, backend, tmp_path, x, y)
    wrapped = [65535, 3, 0, 0]                       # 1 - 2 wraps to 2**16 - 1
    assert got.dtype == np.uint16 and int(got) == int(np.mean(wrapped))


@pytest.mark.parametrize("backend", BACKENDS)
def test_output_folded_to_a_constant(backend, tmp_path):
    """A result computed from constants only: fold_constants returned the
    Constant itself and plan_memory refused it ('outputs must be tensor
    variables'); it is bound to a variable again."""
    x = Var("x", TensorType((2,), "int32"))
    c = Constant(np.array([[1, 2, 3], [4, 5, 6]], np.int32))
    mod = _module([x], lambda bb: Tuple([bb.emit(make_call("transpose", [c], {"axes": None})),
                                         bb.emit(op.add(x, x))]), dataflow=False)
    single = _module([x], lambda bb: make_call("sum", [c], {"axis": 1, "keepdims": False}))
    data = np.array([3, -1], np.int32)
    transposed, doubled = _run(mod, backend, tmp_path, data)
    np.testing.assert_array_equal(transposed, [[1, 4], [2, 5], [3, 6]])
    np.testing.assert_array_equal(doubled, [6, -2])
    (sums,) = _run(single, backend, tmp_path / "single", data)
    np.testing.assert_array_equal(sums, np.array([6, 15], np.int32))


@pytest.mark.parametrize("name", ["add", "subtract", "multiply", "divide", "power"])
def test_arithmetic_on_bool_is_refused(name):
    """The fuzzer found bool add accepted by the type rule with three answers
    (numpy: logical or; C: True + True stored as 2; LLVM: an i1 add wrapping
    to 0). ONNX has no bool arithmetic: the rule refuses it, naming bool."""
    x = Var("x", TensorType((3,), "bool"))
    with pytest.raises(TypeInferenceError, match="bool"):
        make_call(name, [x, x])
    with pytest.raises(TypeInferenceError, match="bool"):
        make_call("negative", [x])
    assert make_call("maximum", [x, x]).type.dtype == "bool"  # an or: kept


@pytest.mark.parametrize("backend", BACKENDS)
def test_reflect_pad_of_a_size_that_is_one_at_run_time(backend, tmp_path):
    """pad(mode=reflect) over a symbolic dim took the index modulo 2n - 2,
    a division by zero (SIGFPE in the C kernel) when n is 1 at run time;
    an axis with no padding is not wrapped at all now."""
    n = SizeVar("n", upper=9)
    x = Var("x", TensorType((2, n), "int16" if "int16" in DTYPES else "int32"))
    mod = _module([x], lambda bb: Tuple([
        bb.emit(make_call("pad", [x], {"pads": (0, 2, 1, 1), "mode": "reflect"})),
        bb.emit(make_call("pad", [x], {"pads": (1, 0, 0, 0), "mode": "reflect"}))]), dataflow=False)
    art = rxe.build(mod, board="host", backend=backend, out_dir=tmp_path / backend, name="fuzz", profile=False)
    with rxe.connect("host") as dev:
        loaded = dev.load(art)
        for size in (1, 2, 5):
            data = (np.arange(2 * size).reshape(2, size) + 1).astype(x.type.dtype)
            both, rows = loaded.run(data)
            np.testing.assert_array_equal(both, np.pad(data, [(0, 1), (2, 1)], mode="reflect"))
            np.testing.assert_array_equal(rows, np.pad(data, [(1, 0), (0, 0)], mode="reflect"))
