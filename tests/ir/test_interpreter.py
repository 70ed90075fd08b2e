"""Interpreter: size variables bound from inputs, and clear errors for bad inputs."""

import numpy as np
import pytest

import relax_edge as rxe
from relax_edge import op
from relax_edge.errors import InterpretError, RelaxEdgeError
from relax_edge.ir import Builder, SizeVar, TensorType, Var


def two_input_module(bound=None):
    n = SizeVar("n", upper=bound)
    x, y = Var("x", TensorType((n, 4))), Var("y", TensorType((n, 4)))
    bb = Builder()
    with bb.function("main", [x, y]):
        bb.ret(bb.emit(op.add(x, y)))
    return bb.get()


def test_contradicting_dimension_names_input_and_binding():
    mod = two_input_module()
    with pytest.raises(InterpretError) as info:
        rxe.interpret(mod, np.zeros((3, 4), np.float32), np.zeros((4, 4), np.float32))
    assert str(info.value) == ("function main: input y dimension 0 is 4, but it must equal "
                               "n = 3 (bound by function main: input x dimension 0)")


def test_wrong_rank_dtype_count_and_constant_dim():
    mod = two_input_module()
    ok = np.zeros((2, 4), np.float32)
    with pytest.raises(InterpretError, match=r"input x: rank 1 \(shape \(4,\)\), expected \(n, 4\)"):
        rxe.interpret(mod, np.zeros(4, np.float32), ok)
    with pytest.raises(InterpretError, match="input y: dtype float64, expected float32"):
        rxe.interpret(mod, ok, np.zeros((2, 4)))
    with pytest.raises(InterpretError, match=r"takes 2 inputs \(x, y\), got 1"):
        rxe.interpret(mod, ok)
    with pytest.raises(InterpretError, match="input x dimension 1 is 5, but it must be 4"):
        rxe.interpret(mod, np.zeros((2, 5), np.float32), ok)


def test_bounds_are_checked():
    mod = two_input_module(bound=8)
    x = np.zeros((9, 4), np.float32)
    with pytest.raises(InterpretError, match="n = 9 exceeds its upper bound 8"):
        rxe.interpret(mod, x, x)
    x = np.zeros((0, 4), np.float32)
    with pytest.raises(InterpretError, match="n = 0 is below its lower bound 1"):
        rxe.interpret(mod, x, x)
    x = np.ones((8, 4), np.float32)
    np.testing.assert_array_equal(rxe.interpret(mod, x, x), 2 * x)


def test_unknown_function():
    with pytest.raises(InterpretError, match="no graph function 'decode'"):
        rxe.interpret(two_input_module(), func="decode")


def test_runtime_broadcast_failure_is_a_project_error():
    """(n, 4) + (m, 4) is accepted symbolically (as max(m, n)); unequal sizes
    fail at run time with the binding named, not with a numpy traceback."""
    n, m = SizeVar("n"), SizeVar("m")
    x, y = Var("x", TensorType((n, 4))), Var("y", TensorType((m, 4)))
    bb = Builder()
    with bb.function("main", [x, y]):
        bb.ret(bb.emit(op.add(x, y), name="total"))
    mod = bb.get()
    ones = np.ones((3, 4), np.float32)
    np.testing.assert_array_equal(rxe.interpret(mod, ones, np.ones((1, 4), np.float32)), 2 * ones)
    with pytest.raises(InterpretError, match=r"binding total \(add\)"):
        rxe.interpret(mod, ones, np.ones((2, 4), np.float32))


def test_match_cast_checked_at_run_time():
    x = Var("x", TensorType(None, "float32", ndim=2))
    k = SizeVar("k")
    bb = Builder()
    with bb.function("main", [x]):
        y = bb.match_cast(x, TensorType((k, 3)), name="y")
        bb.ret(bb.emit(op.sum(y, axis=1)))
    mod = bb.get()
    np.testing.assert_allclose(rxe.interpret(mod, np.ones((5, 3), np.float32)), np.full(5, 3.0))
    with pytest.raises(InterpretError, match=r"binding y \(match_cast\) dimension 1 is 4, but it must be 3"):
        rxe.interpret(mod, np.ones((5, 4), np.float32))


def test_if_and_call_between_functions():
    n = SizeVar("n")
    x = Var("x", TensorType((n,)))
    c = Var("c", TensorType((), "bool"))
    bb = Builder()
    with bb.function("double", [x]):
        bb.ret(bb.emit(op.add(x, x)))
    x2 = Var("x", TensorType((n,)))
    with bb.function("main", [x2, c]):
        from relax_edge.ir import Call, GlobalVar
        doubled = bb.emit(Call(GlobalVar("double"), [x2], type=TensorType((n,))))
        out = bb.emit_if(c, lambda b: b.emit(op.exp(doubled)), lambda b: b.emit(op.relu(x2)))
        bb.ret(out)
    mod = bb.get()
    v = np.array([-1.0, 0.5], np.float32)
    np.testing.assert_allclose(rxe.interpret(mod, v, np.array(True)), np.exp(2 * v), rtol=1e-6)
    np.testing.assert_allclose(rxe.interpret(mod, v, np.array(False)), np.maximum(v, 0))


def test_builder_misuse_is_reported():
    x = Var("x", TensorType((3,)))
    bb = Builder()
    with pytest.raises(RelaxEdgeError, match="no return value"):
        with bb.function("main", [x]):
            bb.emit(op.relu(x))
    with pytest.raises(RelaxEdgeError, match="emit_output outside a dataflow block"):
        with bb.function("f", [x]):
            bb.emit_output(op.relu(x))
