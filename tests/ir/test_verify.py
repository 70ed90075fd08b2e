"""The verifier rejects ill-formed modules, each with a message naming the
function and the variable; well-formed ones pass."""

import numpy as np
import pytest

from relax_edge import op
from relax_edge.errors import VerifyError
from relax_edge.ir import (
    BindingBlock,
    Builder,
    Call,
    CallTensor,
    Constant,
    DataflowBlock,
    DataflowVar,
    Function,
    GlobalVar,
    If,
    IRModule,
    MatchCast,
    SeqExpr,
    SizeVar,
    TensorType,
    Var,
    VarBinding,
    verify,
    well_formed,
)

n = SizeVar("n")


def func(params, blocks, result, name="main"):
    return IRModule({name: Function(params, SeqExpr(blocks, result), name=name)})


def assert_rejected(mod, *fragments):
    with pytest.raises(VerifyError) as info:
        verify(mod)
    msg = str(info.value)
    for frag in fragments:
        assert frag in msg, f"{frag!r} not in {msg!r}"


def test_well_formed_module_passes():
    x = Var("x", TensorType((n, 4)))
    y = Var("y", TensorType((n, 4)))
    mod = func([x], [BindingBlock([VarBinding(y, op.relu(x))])], y)
    assert well_formed(mod) == []
    assert verify(mod) is mod


def test_use_before_definition():
    x = Var("x", TensorType((n, 4)))
    ghost = Var("ghost", TensorType((n, 4)))
    y = Var("y", TensorType((n, 4)))
    mod = func([x], [BindingBlock([VarBinding(y, op.add(x, ghost))])], y)
    assert_rejected(mod, "function main", "binding y uses variable ghost before it is defined")


def test_dataflow_var_escapes_its_block():
    x = Var("x", TensorType((n, 4)))
    lv = DataflowVar("lv", TensorType((n, 4)))
    gv = Var("gv", TensorType((n, 4)))
    blocks = [DataflowBlock([VarBinding(lv, op.relu(x))]),
              BindingBlock([VarBinding(gv, op.exp(lv))])]
    assert_rejected(func([x], blocks, gv), "binding gv uses dataflow variable lv outside its dataflow block")


def test_function_returns_dataflow_var():
    x = Var("x", TensorType((n, 4)))
    lv = DataflowVar("lv", TensorType((n, 4)))
    mod = func([x], [DataflowBlock([VarBinding(lv, op.relu(x))])], lv)
    assert_rejected(mod, "returns dataflow variable lv")


def test_dataflow_var_outside_dataflow_block():
    x = Var("x", TensorType((n, 4)))
    lv = DataflowVar("lv", TensorType((n, 4)))
    gv = Var("gv", TensorType((n, 4)))
    blocks = [BindingBlock([VarBinding(lv, op.relu(x)), VarBinding(gv, op.exp(lv))])]
    assert_rejected(func([x], blocks, gv), "dataflow variable lv is defined outside a dataflow block")


def test_unbound_size_variable():
    m = SizeVar("m")
    x = Var("x", TensorType((n, 4)))
    y = Var("y", TensorType((m * 2, 4)))
    mod = func([x], [BindingBlock([VarBinding(y, Call(op.get_op("relu"), [x], {},
                                                         TensorType((m * 2, 4))))])], y)
    assert_rejected(mod, "size variable m in the type of variable y is not bound")


def test_parameter_with_unbindable_size_variable():
    x = Var("x", TensorType((n * 2, 4)))
    mod = func([x], [], x)
    assert_rejected(mod, "size variable n in the type of parameter x is not bound")


def test_binding_type_disagrees_with_value():
    x = Var("x", TensorType((n, 4)))
    y = Var("y", TensorType((n, 5)))
    mod = func([x], [BindingBlock([VarBinding(y, op.relu(x))])], y)
    assert_rejected(mod, "binding y: declared Tensor((n, 5)", "shape dimension 1: 5 vs 4")


def test_recorded_call_type_disagrees_with_rule():
    x = Var("x", TensorType((n, 4)))
    bad = Call(op.get_op("matmul"), [x, Constant(np.ones((4, 3), np.float32))], {}, TensorType((n, 4)))
    y = Var("y", TensorType((n, 4)))
    mod = func([x], [BindingBlock([VarBinding(y, bad)])], y)
    assert_rejected(mod, "binding y: matmul recorded type Tensor((n, 4)", "rule gives Tensor((n, 3)")


def test_variable_defined_twice():
    x = Var("x", TensorType((n, 4)))
    y = Var("y", TensorType((n, 4)))
    blocks = [BindingBlock([VarBinding(y, op.relu(x)), VarBinding(y, op.exp(x))])]
    assert_rejected(func([x], blocks, y), "variable y is defined twice")


def test_call_to_missing_tensor_program():
    x = Var("x", TensorType((n, 4)))
    y = Var("y", TensorType((n, 4)))
    call = CallTensor(GlobalVar("fused_relu"), [x], TensorType((n, 4)))
    mod = func([x], [BindingBlock([VarBinding(y, call)])], y)
    assert_rejected(mod, "calls tensor program fused_relu, which the module does not have")


def test_if_condition_must_be_boolean_scalar():
    x = Var("x", TensorType((n, 4)))
    y = Var("y", TensorType((n, 4)))
    branch = SeqExpr([], x)
    mod = func([x], [BindingBlock([VarBinding(y, If(x, branch, branch))])], y)
    assert_rejected(mod, "binding y: if condition must be a boolean scalar tensor")


def test_match_cast_that_can_never_succeed():
    x = Var("x", TensorType((n, 4)))
    y = Var("y", TensorType((n, 5)))
    mod = func([x], [BindingBlock([MatchCast(y, x, TensorType((n, 5)))])], y)
    assert_rejected(mod, "match_cast to Tensor((n, 5)", "can never succeed")


def test_all_problems_reported_together():
    x = Var("x", TensorType((n, 4)))
    ghost = Var("ghost", TensorType((n, 4)))
    y = Var("y", TensorType((n, 5)))
    mod = func([x], [BindingBlock([VarBinding(y, op.add(x, ghost))])], y)
    errors = well_formed(mod)
    assert len(errors) >= 2
    assert all(e.startswith("function main: ") for e in errors)


def test_match_cast_binds_new_size_variable():
    """A value of unknown shape is match_cast to fresh dims; later bindings may use them."""
    x = Var("x", TensorType(None, "float32", ndim=2))
    k = SizeVar("k")
    bb = Builder()
    with bb.function("main", [x]):
        y = bb.match_cast(x, TensorType((k, 3)))
        bb.ret(bb.emit(op.relu(y)))
    mod = bb.get()  # verifies
    assert "match_cast(x, Tensor((k, 3)" in str(mod)
