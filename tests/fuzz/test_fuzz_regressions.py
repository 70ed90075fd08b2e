"""Bugs the compiler fuzzer (scripts/fuzz_compiler.py) found, each as its
reduced graph built explicitly, compiled for the host with the C and LLVM
backends and checked against numpy written by hand from the operators'
definitions."""

import numpy as np
import pytest

import relax_edge as rxe
from relax_edge import op
from relax_edge.ir import Builder, TensorType, Tuple, Var
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
    art = rxe.build(mod, board="host", backend=backend, out_dir=tmp_path / backend, name="fuzz")
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


_C_PROMOTION = pytest.mark.xfail(
    strict=True, reason="C kernels compute 8/16-bit integer arithmetic in C's int without narrowing it "
    "before max/min, compares or reductions (codegen/c/kernel.py, reported to its owner)")


@pytest.mark.parametrize("backend", [pytest.param("c", marks=_C_PROMOTION), "llvm"])
def test_uint8_negative_wraps_before_maximum(backend, tmp_path):
    """negative(uint8) then maximum, fused into one kernel: C rendered
    RXE_MAX((0 - x), y) in int, so -1 stayed below 0 instead of being 255."""
    x = Var("x", TensorType((4,), "uint8"))
    y = Var("y", TensorType((), "uint8"))
    mod = _module([x, y], lambda bb: op.make_call("maximum", [bb.emit(make_call("negative", [x])), y]))
    data, zero = np.array([0, 1, 3, 200], np.uint8), np.array(0, np.uint8)
    (got,) = _run(mod, backend, tmp_path, data, zero)
    np.testing.assert_array_equal(got, np.array([0, 255, 253, 56], np.uint8))


@pytest.mark.skipif("uint16" not in DTYPES, reason="uint16 is not a dtype of this tree yet")
@pytest.mark.parametrize("backend", [pytest.param("c", marks=_C_PROMOTION), "llvm"])
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
