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


def recurrence_module(runtime_trip=False, with_cond=False, scans=True, doubled=False):
    """h_{i+1} = 0.5 h_i + x[i] (+ the unused value d), over the rows of x;
    the outputs: the final h and the h of every iteration stacked (`doubled`: both times 2, so that the
    loop's results are intermediates)."""
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
            return keep, [new], [new] if scans else []
        trip = params[2] if runtime_trip else n
        cond = Constant(np.array(True)) if with_cond else None
        loop = bb.emit_loop(trip, cond, [h0], body, name="rec")
        result = final = bb.emit(TupleGetItem(loop, 0))
        if scans:
            seq = bb.emit(TupleGetItem(loop, 1))
            if seq.type.shape is None:   # an unknown length: a match_cast names it
                seq = bb.match_cast(seq, TensorType((SizeVar("k", lower=0), 3), "float32"))
            if doubled:
                two = Constant(np.float32(2))
                final, seq = bb.emit(op.multiply(final, two)), bb.emit(op.multiply(seq, two))
            result = bb.emit(Tuple([final, seq]))
        bb.ret(result)
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


def swap_module():
    """(a, b) -> (b, a + b) three times: the body reads both states while writing both."""
    a0, b0 = Var("a0", TensorType((2,), "float32")), Var("b0", TensorType((2,), "float32"))
    bb = Builder()
    with bb.function("main", [a0, b0]):
        def body(b, i, go, carried):
            a, c = carried
            return go, [c, b.emit(op.add(a, c))], []
        loop = bb.emit_loop(3, None, [a0, b0], body, name="fib")
        bb.ret(bb.emit(Tuple([bb.emit(TupleGetItem(loop, 0)), bb.emit(TupleGetItem(loop, 1))])))
    return bb.get()


@pytest.fixture(scope="module", params=["c", "llvm"])
def host(request):
    with rxe.connect("host") as dev:
        yield request.param, dev


def build(mod, backend, tmp_path, dev):
    return dev.load(rxe.build(mod, board="host", backend=backend, out_dir=tmp_path, name="m", profile=False))


def test_compiled_symbolic_trip_count_and_scans(host, tmp_path):
    backend, dev = host
    loaded = build(recurrence_module(), backend, tmp_path, dev)
    for n in (1, 6):
        x, h0 = inputs(n)
        for got, want in zip(loaded.run(x, h0), reference(x, h0)):
            np.testing.assert_allclose(got, want, rtol=1e-6)


def test_compiled_runtime_trip_count_and_condition(host, tmp_path):
    backend, dev = host
    loaded = build(recurrence_module(runtime_trip=True, with_cond=True, scans=False), backend, tmp_path, dev)
    for m, limit in ((0, 1.5), (3, 100.0), (9, 0.5), (9, 100.0)):
        x, h0 = inputs(9, seed=m)
        got = loaded.run(x, h0, np.int64(m), np.float32(limit))
        np.testing.assert_allclose(got[0] if isinstance(got, (list, tuple)) else got,
                                   reference(x, h0, m, limit)[0], rtol=1e-6)


def test_compiled_swap_of_carried_values(host, tmp_path):
    backend, dev = host
    loaded = build(swap_module(), backend, tmp_path, dev)
    a, b = np.array([1, 2], np.float32), np.array([1, 3], np.float32)
    got = loaded.run(a, b)
    np.testing.assert_array_equal(got[0], [3, 8])
    np.testing.assert_array_equal(got[1], [5, 13])
    np.testing.assert_array_equal(rxe.interpret(swap_module(), a, b)[1], [5, 13])


def test_compiled_path_refuses_a_scan_of_run_time_length(tmp_path):
    with pytest.raises(rxe.RelaxEdgeError, match=r"loop rec: its scan output 0 has type Tensor\(ndim=2"):
        rxe.build(recurrence_module(runtime_trip=True), board="host", backend="c", out_dir=tmp_path, name="m",
                  profile=False)


def nested_module():
    """For i < n: for j < i + 1: acc += x (the inner trip count computed in the outer body)."""
    n = SizeVar("n", upper=8)
    x = Var("x", TensorType((n, 2), "float32"))
    acc0 = Var("acc0", TensorType((2,), "float32"))
    bb = Builder()
    with bb.function("main", [x, acc0]):
        def outer(b, i, go, carried):
            row = b.emit(make_call("take", [x, i], {"axis": 0}))
            trip = b.emit(op.add(i, Constant(np.int64(1))))

            def inner(b2, j, go2, carried2):
                return go2, [b2.emit(op.add(carried2[0], row))], []
            loop = b.emit_loop(trip, None, carried, inner, name="inner")
            return go, [b.emit(TupleGetItem(loop, 0))], []
        loop = bb.emit_loop(n, None, [acc0], outer, name="outer")
        bb.ret(bb.emit(TupleGetItem(loop, 0)))
    return bb.get()


def test_nested_loops_verified_through_the_pipeline_interpreted_and_compiled(host, tmp_path):
    from relax_edge.memory import plan_module
    backend, dev = host
    mod = nested_module()
    plan = plan_module(rxe.optimize(mod, verify=True))["main"].plan
    assert plan.is_bounded   # n is bounded: the arena is fixed
    x, acc = inputs(4)[0][:, :2].copy(), np.zeros(2, np.float32)
    want = acc + sum((i + 1) * x[i] for i in range(4))
    np.testing.assert_allclose(rxe.interpret(mod, x, acc), want, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(build(mod, backend, tmp_path, dev).run(x, acc)[0], want, rtol=1e-5, atol=1e-6)


def test_compiled_scans_of_a_loop_stopped_early(host, tmp_path):
    """A run-time condition with scans: the stacked output planned at the trip count, its length the iterations
    run (the match_cast after the loop binds it)."""
    backend, dev = host
    loaded = build(recurrence_module(with_cond=True), backend, tmp_path, dev)
    for n, limit in ((1, 100.0), (6, 100.0), (6, 0.0), (6, 1.0)):
        x, h0 = inputs(n, seed=n)
        got, want = loaded.run(x, h0, np.float32(limit)), reference(x, h0, None, limit)
        for g, w in zip(got, want):
            assert g.shape == w.shape
            np.testing.assert_allclose(g, w, rtol=1e-6)


def test_dispatch_keeps_a_value_that_a_loop_reads():
    """m = x @ W feeds `add` and is the loop's initial value: the dense pattern must not absorb it."""
    from relax_edge.transform.dispatch import dispatch
    rng = np.random.default_rng(3)
    w, bias = rng.standard_normal((3, 4)).astype(np.float32), rng.standard_normal(4).astype(np.float32)
    x = Var("x", TensorType((2, 3), "float32"))
    bb = Builder()
    with bb.function("main", [x]):
        m = bb.emit(op.matmul(x, Constant(w)))
        y = bb.emit(op.add(m, Constant(bias)))
        loop = bb.emit_loop(20, None, [m], lambda b, i, go, s: (go, [b.emit(op.add(s[0], y))], []), name="acc")
        bb.ret(bb.emit(TupleGetItem(loop, 0)))
    mod = verify(dispatch(bb.get()))
    xs = rng.standard_normal((2, 3)).astype(np.float32)
    np.testing.assert_allclose(rxe.interpret(mod, xs), xs @ w + 20 * (xs @ w + bias), rtol=1e-5, atol=1e-5)


def test_memory_plan_covers_the_loop():
    """Linearized: every step's reads and writes live at it; the state and the stacked output (intermediates
    here) live over the whole loop, from its first step to its last."""
    from relax_edge.memory import plan_module
    from relax_edge.memory.liveness import LoopScope
    live = plan_module(rxe.optimize(recurrence_module(doubled=True)))["main"].liveness
    (scope,) = {g for s in live.steps for g in s.guard if isinstance(g, LoopScope)}
    assert live.steps[scope.first].counter is scope and live.steps[scope.last].slot is scope

    def span(v):
        kind, index = live.storage.get(v, (None, None))
        return (live.buffers[index].first, live.buffers[index].last) if kind == "buffer" else None

    for t, s in enumerate(live.steps):
        for v in (*s.reads, s.var):
            if span(v) is not None:
                assert span(v)[0] <= t <= span(v)[1], (t, v)
    inside = [s for s in live.steps if scope in s.guard]
    state = next(s.var for s in inside if s.call is None and s.slot is None and s.counter is None)
    stacked = live.steps[scope.last].var
    for v in (state, stacked):
        assert span(v)[0] <= scope.first and span(v)[1] >= scope.last, v


def if_in_loop_module():
    """h += x[i] for i < 3, then h *= 0.5: an if inside the body, each h stacked."""
    n = SizeVar("n", upper=10)
    x, h0 = Var("x", TensorType((n, 2), "float32")), Var("h0", TensorType((2,), "float32"))
    bb = Builder()
    with bb.function("main", [x, h0]):
        def body(b, i, go, carried):
            small = b.emit(make_call("less", [i, Constant(np.int64(3))]))
            row = b.emit(make_call("take", [x, i], {"axis": 0}))
            new = b.emit_if(small, lambda _: op.add(carried[0], row),
                            lambda _: op.multiply(carried[0], Constant(np.float32(0.5))))
            return go, [new], [new]
        loop = bb.emit_loop(n, None, [h0], body, name="l")
        bb.ret(bb.emit(TupleGetItem(loop, 1)))
    return bb.get()


def test_if_inside_a_loop_compiled(host, tmp_path):
    backend, dev = host
    x, h = inputs(6)[0][:, :2].copy(), np.ones(2, np.float32)
    want, hh = [], h
    for i in range(6):
        hh = hh + x[i] if i < 3 else hh * np.float32(0.5)
        want.append(hh)
    mod = if_in_loop_module()
    np.testing.assert_allclose(rxe.interpret(mod, x, h), want, rtol=1e-6)
    np.testing.assert_allclose(build(mod, backend, tmp_path, dev).run(x, h)[0], want, rtol=1e-6)
