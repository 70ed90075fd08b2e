"""The graph IR's loop: builder, verifier, printer, dce, the interpreter and
the legalized, compiled loop (host C and LLVM) against numpy."""

import numpy as np
import pytest

import relax_edge as rxe
from relax_edge import op
from relax_edge.errors import VerifyError
from relax_edge.ir import Builder, Constant, Loop, SizeVar, TensorType, TupleGetItem, Var, VarBinding, verify
from relax_edge.ir.expr import BindingBlock, Function, SeqExpr, Tuple
from relax_edge.op.registry import make_call
from relax_edge.transform.dce import dce


def recurrence_module(runtime_trip=False, with_cond=False):
    """h_{i+1} = 0.5 h_i + x[i] (+ the unused value d), over the rows of x;
    the outputs: the final h and the h of every iteration stacked."""
    n = SizeVar("n", upper=16)
    x = Var("x", TensorType((n, 3), "float32"))
    h0 = Var("h0", TensorType((3,), "float32"))
    params = [x, h0]
    if runtime_trip:
        params.append(Var("m", TensorType((), "int64")))
    if with_cond:
        params.append(Var("limit", TensorType((), "float32")))
    bb = Builder()
    with bb.function("main", params):
        def body(b, i, go, carried):
            (h,) = carried
            row = b.emit(make_call("take", [x, i], {"axis": 0}))
            b.emit(op.exp(row))   # dead: dce removes it from the body
            new = b.emit(op.add(op.multiply(h, Constant(np.float32(0.5))), row))
            keep = go
            if with_cond:   # go on while sum(h) stays below the limit
                keep = b.emit(make_call("less", [op.sum(new), params[-1]]))
            return keep, [new], [new]
        trip = params[2] if runtime_trip else n
        cond = Constant(np.array(True)) if with_cond else None
        loop = bb.emit_loop(trip, cond, [h0], body, name="rec")
        final, seq = bb.emit(TupleGetItem(loop, 0)), bb.emit(TupleGetItem(loop, 1))
        if seq.type.shape is None:   # an unknown length: a match_cast names it
            seq = bb.match_cast(seq, TensorType((SizeVar("k", lower=0), 3), "float32"))
        bb.ret(bb.emit(Tuple([final, seq])))
    return bb.get()


def reference(x, h0, m=None, limit=None):
    h, seq = h0, []
    for i in range(len(x) if m is None else min(m, len(x))):
        h = np.float32(0.5) * h + x[i]
        seq.append(h)
        if limit is not None and not h.sum() < limit:
            break
    return h, np.array(seq, np.float32).reshape(-1, 3)


def inputs(n, seed=0):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((n, 3)).astype(np.float32), rng.standard_normal(3).astype(np.float32)


def test_loop_type_printer_and_verifier():
    mod = recurrence_module()
    loop = next(b.value for blk in mod["main"].body.blocks for b in blk.bindings if isinstance(b.value, Loop))
    assert str(loop.type) == 'Tuple(Tensor((3,), "float32"), Tensor((n, 3), "float32"))'
    text = mod.script()
    assert "loop(trip_count=n, cond=none, init=(h0)):" in text
    assert "def body(rec_iter: Tensor((), \"int64\"), rec_cond: Tensor((), \"bool\")" in text
    verify(mod)


def test_runtime_condition_gives_an_unknown_length():
    mod = recurrence_module(with_cond=True)
    loop = next(b.value for blk in mod["main"].body.blocks for b in blk.bindings if isinstance(b.value, Loop))
    assert loop.type.fields[1].shape is None and loop.type.fields[1].ndim == 2


def test_verifier_rejects_a_carried_value_that_changes_type_and_outer_use_of_parameters():
    mod = recurrence_module()
    func = mod["main"]
    binding = next(b for blk in func.body.blocks for b in blk.bindings if isinstance(b.value, Loop))
    loop = binding.value
    wrong = Var("wrong", TensorType((4,), "float32"))
    body = SeqExpr([BindingBlock([VarBinding(wrong, op.concat([loop.params[2], Constant(np.zeros(1, np.float32))]))]
                                 )], Tuple([loop.params[1], wrong, wrong]))
    bad = Loop(loop.trip_count, None, loop.init, loop.params, body, loop.type)
    leak = Var("leak", loop.params[2].type)
    blocks = [BindingBlock([VarBinding(binding.var, bad), VarBinding(leak, loop.params[2])])]
    broken = mod.with_function(Function(func.params, SeqExpr(blocks, leak), name="main"))
    with pytest.raises(VerifyError) as info:
        verify(broken)
    assert "loop carried value 0 changes type" in str(info.value)
    assert "uses variable rec_state0 before it is defined" in str(info.value)


def test_dce_sweeps_the_body():
    mod = recurrence_module()
    swept = dce(mod)
    loop = next(b.value for blk in swept["main"].body.blocks for b in blk.bindings if isinstance(b.value, Loop))
    assert [b.value.op.name for blk in loop.body.blocks for b in blk.bindings] == ["take", "multiply", "add"]
    verify(swept)


@pytest.mark.parametrize("n", [1, 5])
def test_interpreter_symbolic_trip_count(n):
    x, h0 = inputs(n)
    final, seq = rxe.interpret(recurrence_module(), x, h0)
    want = reference(x, h0)
    np.testing.assert_allclose(final, want[0], rtol=1e-6)
    np.testing.assert_allclose(seq, want[1], rtol=1e-6)


@pytest.mark.parametrize("m", [0, 2, 7])
def test_interpreter_runtime_trip_count_and_condition(m):
    x, h0 = inputs(7, seed=m)
    final, seq = rxe.interpret(recurrence_module(runtime_trip=True, with_cond=True), x, h0, np.int64(m),
                               np.float32(1.5))
    want = reference(x, h0, m, 1.5)
    np.testing.assert_allclose(final, want[0], rtol=1e-6)
    np.testing.assert_allclose(seq, want[1], rtol=1e-6)
