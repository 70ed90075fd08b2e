"""ONNX control flow: If, Loop and Scan, against ONNX Runtime.

If with a runtime condition is imported as the IR's if, interpreted and
compiled (C, LLVM on the host; one qemu-aarch64 row); a known condition
folds. Loop and Scan of a few known iterations are unrolled at import;
longer ones, run-time trip counts and conditions and symbolic scan lengths
become the IR's loop, interpreted and compiled (one qemu-aarch64 row).
Unsupported forms (carried values that change shape in a loop, branches
that differ in dtype, sequence values, a scan output of run-time length in
compiled code when the trip count is not a compile-time bound) and
unsupported operators inside bodies are refused with the node named."""

import importlib.util
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto as T
from onnx import helper

import relax_edge as rxe
from relax_edge.errors import RelaxEdgeError
from relax_edge.frontend.onnx import OnnxImportError, node_tests
from tests.frontend.one_node import compiled

ROOT = Path(__file__).resolve().parents[2]
RNG = np.random.default_rng(7)


def vi(name, shape, dtype=T.FLOAT):
    return helper.make_tensor_value_info(name, dtype, shape)


def graph(nodes, name, inputs, outputs, inits=()):
    return helper.make_graph(nodes, name, inputs, outputs, list(inits))


def model(nodes, inputs, outputs, inits=(), opset=17):
    return helper.make_model(graph(nodes, "g", inputs, outputs, inits),
                             opset_imports=[helper.make_opsetid("", opset)])


def ort_run(m, feeds: dict):
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


def check(m, feeds: dict, run, tol=1e-5):
    """`run(*inputs)` (the interpreter or a loaded model) against ONNX Runtime."""
    expected = ort_run(m, feeds)
    got = run(*feeds.values())
    got = list(got) if isinstance(got, (list, tuple)) else [got]
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        assert g.shape == e.shape and g.dtype == e.dtype, (g.shape, g.dtype, e.shape, e.dtype)
        np.testing.assert_allclose(g, e, rtol=tol, atol=tol)


def interpreted(mod):
    return lambda *arrays: rxe.interpret(mod, *arrays)


def rand(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


# ------------------------------------------------------------------------ If

W = helper.make_tensor("w", T.FLOAT, [3], [1.0, -2.0, 0.5])


def if_model(c_shape=()):
    """Two outputs from an If on `c` whose then branch holds an If on `d`
    (computed: its storage must live through the branches); the
    branches read outer values (x, w) and one output is an outer value itself
    (through an Identity, which ONNX Runtime wants)."""
    inner_then = graph([helper.make_node("Add", ["x", "x"], ["it"])], "inner_then", [], [vi("it", ["n", 3])])
    inner_else = graph([helper.make_node("Mul", ["x", "w"], ["ie"])], "inner_else", [], [vi("ie", ["n", 3])])
    then_b = graph([helper.make_node("If", ["d"], ["t0"], then_branch=inner_then, else_branch=inner_else),
                    helper.make_node("Relu", ["t0"], ["t1"]), helper.make_node("Identity", ["x"], ["t2"])],
                   "then", [], [vi("t1", ["n", 3]), vi("t2", ["n", 3])])
    else_b = graph([helper.make_node("Sub", ["x", "w"], ["e0"]), helper.make_node("Neg", ["x"], ["e1"])],
                   "else", [], [vi("e0", ["n", 3]), vi("e1", ["n", 3])])
    nodes = [helper.make_node("Sigmoid", ["x0"], ["x"]), helper.make_node("Greater", ["dv", "zero"], ["d"]),
             helper.make_node("If", ["c"], ["y0", "z"], name="choose", then_branch=then_b, else_branch=else_b),
             helper.make_node("Exp", ["y0"], ["y"])]
    return model(nodes, [vi("c", list(c_shape), T.BOOL), vi("dv", [1]), vi("x0", ["n", 3])],
                 [vi("y", ["n", 3]), vi("z", ["n", 3])], [W, helper.make_tensor("zero", T.FLOAT, [], [0.0])])


def if_feeds(c, d, n, c_shape=()):
    return {"c": np.full(c_shape, c), "dv": np.array([1.0 if d else -1.0], np.float32), "x0": rand(n, 3)}


CONDITIONS = [(True, True), (True, False), (False, True), (False, False)]


def test_if_on_a_runtime_condition_is_the_irs_if_and_interprets():
    m = if_model()
    mod = rxe.from_onnx(m)
    assert str(mod).count("if ") == 2
    for (c, d) in CONDITIONS:
        for n in (1, 4):
            check(m, if_feeds(c, d, n), interpreted(mod))


def test_if_memory_plan_covers_both_branches():
    """Linearized, every step of both branches (guarded) reads and writes
    buffers live at that step: a value read in either branch, a branch
    condition and the if's result (written by each branch's copy)."""
    from relax_edge.memory import plan_module
    live = plan_module(rxe.optimize(rxe.from_onnx(if_model())))["main"].liveness
    guards = {tuple(taken for _, taken, _ in s.guard) for s in live.steps}
    assert {(True, True), (True, False), (True,), (False,)} <= guards
    copies = [s for s in live.steps if s.call is None]
    assert len(copies) == 6   # the inner if's result twice, the outer if's two results twice
    for t, s in enumerate(live.steps):
        for v in (*s.reads, s.var):
            kind, index = live.storage.get(v, (None, None)) if hasattr(v, "name") else (None, None)
            if kind == "buffer":
                assert live.buffers[index].first <= t <= live.buffers[index].last, (t, v)


@pytest.mark.parametrize("backend", ["c", "llvm"])
def test_if_compiled_on_the_host(backend, tmp_path):
    m = if_model()
    with compiled(m, backend, tmp_path) as loaded:
        for (c, d) in CONDITIONS:
            for n in (1, 5):
                check(m, if_feeds(c, d, n), loaded.run)


@pytest.mark.slow
@pytest.mark.emu
def test_if_compiled_on_qemu_aarch64(tmp_path):
    """(The condition is a 1-element tensor: remote sessions refuse rank-0 inputs.)"""
    m = if_model((1,))
    art = rxe.build(rxe.from_onnx(m), board="qemu-aarch64", backend="c", out_dir=tmp_path, name="m", profile=False)
    with rxe.connect("qemu-aarch64") as dev:
        loaded = dev.load(art)
        for (c, d) in [(True, False), (False, True)]:
            check(m, if_feeds(c, d, 3, (1,)), loaded.run)


def test_if_on_a_known_condition_folds():
    """A condition known at import (here from a shape) picks the branch: no if is left."""
    then_b = graph([helper.make_node("Relu", ["x"], ["t"])], "then", [], [vi("t", ["n", 2])])
    else_b = graph([helper.make_node("Neg", ["x"], ["e"])], "else", [], [vi("e", ["n", 2])])
    nodes = [helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("Constant", [], ["two"], value=helper.make_tensor("two", T.INT64, [], [2])),
             helper.make_node("Gather", ["s", "one"], ["s1"]),
             helper.make_node("Equal", ["s1", "two"], ["c"]),
             helper.make_node("If", ["c"], ["y"], then_branch=then_b, else_branch=else_b)]
    m = model(nodes, [vi("x", ["n", 2])], [vi("y", ["n", 2])], [helper.make_tensor("one", T.INT64, [], [1])])
    mod = rxe.from_onnx(m)
    assert "if " not in str(mod) and "relu" in str(mod)
    check(m, {"x": rand(3, 2)}, interpreted(mod))


def test_if_branches_differing_in_a_dim_get_a_fresh_size(tmp_path):
    """then gives (n, 3), else (n, 2): the result's last dim is a fresh size,
    bound at run time; compiled, the result is planned at the larger branch."""
    then_b = graph([helper.make_node("Relu", ["x"], ["t"])], "then", [], [vi("t", ["n", 3])])
    else_b = graph([helper.make_node("Slice", ["x", "s0", "s1", "ax"], ["e"])], "else", [], [vi("e", ["n", 2])])
    inits = [helper.make_tensor("s0", T.INT64, [1], [0]), helper.make_tensor("s1", T.INT64, [1], [2]),
             helper.make_tensor("ax", T.INT64, [1], [1])]
    m = model([helper.make_node("If", ["c"], ["y"], then_branch=then_b, else_branch=else_b)],
              [vi("c", [], T.BOOL), vi("x", ["n", 3])], [vi("y", ["n", None])], inits)
    mod = rxe.from_onnx(m)
    for c in (True, False):
        check(m, {"c": np.array(c), "x": rand(2, 3)}, interpreted(mod))
    with compiled(m, "c", tmp_path) as loaded:
        for c in (True, False):
            check(m, {"c": np.array(c), "x": rand(2, 3)}, loaded.run)


@pytest.mark.parametrize("else_node,message", [
    (helper.make_node("Cast", ["x"], ["e"], to=T.INT32), r"node choose \(If\): output 0: the branches give dtypes "
                                                         r"float32 and int32"),
    (helper.make_node("ReduceSum", ["x"], ["e"], keepdims=0), r"node choose \(If\): output 0: the branches give "
                                                              r"ranks 2 and 0"),
])
def test_if_branches_that_disagree_are_refused(else_node, message):
    then_b = graph([helper.make_node("Relu", ["x"], ["t"])], "then", [], [vi("t", None)])
    else_b = graph([else_node], "else", [], [vi("e", None)])
    m = model([helper.make_node("If", ["c"], ["y"], name="choose", then_branch=then_b, else_branch=else_b)],
              [vi("c", [], T.BOOL), vi("x", [2, 3])], [vi("y", None)])
    with pytest.raises(OnnxImportError, match=message):
        rxe.from_onnx(m)


def test_deeply_nested_if_imports():
    """The malformed corpus's 20-deep nest of Ifs (each then branch another If) imports and runs."""
    spec = importlib.util.spec_from_file_location("make_malformed_onnx", ROOT / "scripts" / "make_malformed_onnx.py")
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    mod = rxe.from_onnx(gen.nested_if(20))
    for c in (True, False):
        out = rxe.interpret(mod, np.array(c), np.array([2.5], np.float32))
        assert all(np.array_equal(o, [2.5]) for o in (out if isinstance(out, tuple) else [out]))


# ---------------------------------------------------------------------- Loop

def loop_model(trip=3, cond_node=None, with_cond_input=True, opset=17):
    """y carried (y + x * i), its per-iteration values as a scan output."""
    cond_out = cond_node or helper.make_node("Identity", ["cond_in"], ["cond_out"])
    body = graph([cond_out,
                  helper.make_node("Cast", ["i"], ["fi"], to=T.FLOAT),
                  helper.make_node("Mul", ["x", "fi"], ["xi"]),
                  helper.make_node("Add", ["y_in", "xi"], ["y_out"]),
                  helper.make_node("Identity", ["y_out"], ["scan"])], "body",
                 [vi("i", [], T.INT64), vi("cond_in", [], T.BOOL), vi("y_in", None)],
                 [vi("cond_out", [], T.BOOL), vi("y_out", None), vi("scan", None)])
    inits = [helper.make_tensor("M", T.INT64, [], [trip])]
    if with_cond_input:
        inits.append(helper.make_tensor("cond", T.BOOL, [], [True]))
    node = helper.make_node("Loop", ["M", "cond" if with_cond_input else "", "y0"], ["y", "ys"], name="loop",
                            body=body)
    return model([node], [vi("y0", ["n", 2]), vi("x", ["n", 2])], [vi("y", ["n", 2]), vi("ys", [None, "n", 2])],
                 inits, opset)


def test_loop_unrolled_with_carried_values_and_scan_outputs():
    for m in (loop_model(3), loop_model(1, with_cond_input=False)):
        mod = rxe.from_onnx(m)
        assert "if " not in str(mod)
        for n in (1, 3):
            check(m, {"y0": rand(n, 2), "x": rand(n, 2)}, interpreted(mod))


def test_loop_stops_on_a_condition_known_at_import():
    """cond_out = i < 1 (known every iteration): two iterations of a trip count of 10."""
    less = [helper.make_node("Constant", [], ["one"], value=helper.make_tensor("one", T.INT64, [], [1])),
            helper.make_node("Less", ["i", "one"], ["cond_out"])]
    m = loop_model(10, cond_node=less[1])
    m.graph.node[0].attribute[0].g.node.insert(0, less[0])
    mod = rxe.from_onnx(m)
    x = rand(2, 2)
    check(m, {"y0": rand(2, 2), "x": x}, interpreted(mod))
    assert rxe.interpret(mod, x, x)[1].shape == (2, 2, 2)


@pytest.mark.parametrize("backend", ["c", "llvm"])
def test_loop_compiled_on_the_host(backend, tmp_path):
    m = loop_model(4)
    with compiled(m, backend, tmp_path) as loaded:
        for n in (1, 6):
            check(m, {"y0": rand(n, 2), "x": rand(n, 2)}, loaded.run)


def stopping_loop_model():
    """cond_out = sum(y_in) > 0, computed at run time, with a scan output."""
    runtime_cond = helper.make_node("Greater", ["y_in_sum", "zero"], ["cond_out"])
    m = loop_model(3, cond_node=runtime_cond)
    body = m.graph.node[0].attribute[0].g
    body.node.insert(0, helper.make_node("ReduceSum", ["y_in"], ["y_in_sum"], keepdims=0))
    body.node.insert(0, helper.make_node("Constant", [], ["zero"], value=helper.make_tensor("z", T.FLOAT, [], [0])))
    return m


# the body's condition reads y_in: all 3 iterations run when sum(y0) > 0, else only the first
STOPPING_FEEDS = [{"y0": np.ones((2, 2), np.float32), "x": np.full((2, 2), -0.75, np.float32)},
                  {"y0": -np.ones((1, 2), np.float32), "x": np.ones((1, 2), np.float32)}]


def test_loop_with_a_runtime_condition_and_scan_outputs_is_the_irs_loop():
    """The loop; its scan output's length (the iterations run) bound by a match_cast after it."""
    m = stopping_loop_model()
    mod = rxe.from_onnx(m)
    assert "loop(trip_count=3" in str(mod) and "match_cast" in str(mod)
    for feeds in STOPPING_FEEDS:
        check(m, feeds, interpreted(mod))


@pytest.mark.parametrize("backend", ["c", "llvm"])
def test_loop_with_a_runtime_condition_and_scan_outputs_compiled(backend, tmp_path):
    """The stacked output planned at the trip count; the run writes its actual length."""
    m = stopping_loop_model()
    with compiled(m, backend, tmp_path) as loaded:
        for feeds in STOPPING_FEEDS:
            check(m, feeds, loaded.run)


def test_loop_with_a_runtime_trip_count():
    m = loop_model(3)
    m.graph.initializer.pop(0)   # the trip count becomes a graph input
    m.graph.input.append(vi("M", [], T.INT64))
    mod = rxe.from_onnx(m)
    assert "loop(trip_count=M" in str(mod)
    for trip in (1, 2, 5):
        check(m, {"y0": rand(2, 2), "x": rand(2, 2), "M": np.array(trip, np.int64)}, interpreted(mod))
    # no iteration: the initial value and an empty scan output of the body's rank (ONNX Runtime gives shape (0,))
    y0 = rand(2, 2)
    y, ys = rxe.interpret(mod, y0, rand(2, 2), np.array(0, np.int64))
    assert np.array_equal(y, y0) and ys.shape == (0, 2, 2)
    mod = rxe.from_onnx(m, constant_inputs={"M": np.array(2, np.int64)})   # known: unrolled
    assert "loop(" not in str(mod) and rxe.interpret(mod, rand(1, 2), rand(1, 2))[1].shape == (2, 1, 2)
    with pytest.raises(RelaxEdgeError, match=r"loop loop: its scan output 0 has type Tensor\(ndim=3.* not "
                                             r"supported by the compiled code yet"):
        rxe.build(rxe.from_onnx(m), board="host", backend="c", out_dir="/nonexistent", name="m", profile=False)


def test_a_long_loop_is_not_unrolled():
    m = loop_model(40)
    mod = rxe.from_onnx(m)
    assert "loop(trip_count=40" in str(mod) and str(mod).count("Mul") <= 1
    check(m, {"y0": rand(2, 2), "x": rand(2, 2)}, interpreted(mod))


def test_loop_whose_carried_value_changes_shape_is_refused():
    """y_out = concat(y_in, x * i): fine unrolled (each copy its own shape), refused as the IR's loop."""
    m = loop_model(2, cond_node=helper.make_node("Identity", ["cond_in"], ["cond_out"]))
    body = m.graph.node[0].attribute[0].g
    body.node[3].CopyFrom(helper.make_node("Concat", ["y_in", "xi"], ["y_out"], axis=0))
    body.node[4].CopyFrom(helper.make_node("Identity", ["xi"], ["scan"]))
    check(m, {"y0": rand(2, 2), "x": rand(2, 2)}, interpreted(rxe.from_onnx(m)))
    m.graph.initializer[0].CopyFrom(helper.make_tensor("M", T.INT64, [], [20]))
    with pytest.raises(OnnxImportError, match=r"node loop \(Loop\): loop-carried value 0 \(y_out\) enters the "
                                              r"body as Tensor\(\(n, 2\), \"float32\"\) and leaves it as "
                                              r"Tensor\(\(n \* 2, 2\).* changes shape"):
        rxe.from_onnx(m)


def while_model():
    """y doubles while its sum stays below `limit` (a runtime condition), at most 5 times."""
    body = graph([helper.make_node("Add", ["y_in", "y_in"], ["y_out"]),
                  helper.make_node("ReduceSum", ["y_out"], ["total"], keepdims=0),
                  helper.make_node("Less", ["total", "limit"], ["cond_out"])], "body",
                 [vi("i", [], T.INT64), vi("cond_in", [], T.BOOL), vi("y_in", ["n", 2])],
                 [vi("cond_out", [], T.BOOL), vi("y_out", ["n", 2])])
    nodes = [helper.make_node("ReduceSum", ["y0"], ["t0"], keepdims=0),
             helper.make_node("Less", ["t0", "limit"], ["c0"]),
             helper.make_node("Loop", ["M", "c0", "y0"], ["y"], name="grow", body=body)]
    return model(nodes, [vi("y0", ["n", 2]), vi("limit", [])], [vi("y", ["n", 2])],
                 [helper.make_tensor("M", T.INT64, [], [5])])


@pytest.mark.parametrize("backend", ["c", "llvm"])
def test_loop_with_a_runtime_condition_compiled(backend, tmp_path):
    m = while_model()
    mod = rxe.from_onnx(m)
    assert "loop(trip_count=5, cond=" in str(mod) and "if " not in str(mod)
    cases = [(np.ones((2, 2), np.float32), 10.0), (np.ones((1, 2), np.float32), 1.0),
             (np.ones((3, 2), np.float32), 1000.0), (np.ones((2, 2), np.float32), 30.0)]
    for y0, limit in cases:
        check(m, {"y0": y0, "limit": np.array(limit, np.float32)}, interpreted(mod))
    with compiled(m, backend, tmp_path) as loaded:
        for y0, limit in cases:
            check(m, {"y0": y0, "limit": np.array(limit, np.float32)}, loaded.run)


def runtime_trip_model():
    """The while model with its trip count a graph input (1 element: remote sessions refuse rank 0)."""
    m = while_model()
    m.graph.initializer.pop(0)
    m.graph.input.append(vi("M", [1], T.INT64))
    return m


@pytest.mark.parametrize("backend", ["c", "llvm"])
def test_loop_with_a_runtime_trip_count_and_condition_compiled(backend, tmp_path):
    m = runtime_trip_model()
    with compiled(m, backend, tmp_path) as loaded:
        for trip, limit in ((0, 100.0), (3, 100.0), (9, 100.0), (9, 30.0)):
            check(m, {"y0": np.ones((2, 2), np.float32), "limit": np.array(limit, np.float32),
                      "M": np.array([trip], np.int64)}, loaded.run)


@pytest.mark.slow
@pytest.mark.emu
def test_loop_compiled_on_qemu_aarch64(tmp_path):
    m = runtime_trip_model()
    art = rxe.build(rxe.from_onnx(m), board="qemu-aarch64", backend="c", out_dir=tmp_path, name="m", profile=False)
    with rxe.connect("qemu-aarch64") as dev:
        loaded = dev.load(art)
        for trip, limit in ((2, 100.0), (9, 30.0)):
            check(m, {"y0": np.ones((3, 2), np.float32), "limit": np.array(limit, np.float32),
                      "M": np.array([trip], np.int64)}, loaded.run)


def test_if_inside_an_unrolled_loop_with_a_constant_branch(tmp_path):
    """Each Loop copy holds an If on an outer runtime condition; its then branch is a constant."""
    then_b = graph([helper.make_node("Constant", [], ["k"], value=helper.make_tensor("k", T.FLOAT, [2], [0.5, -1.0]))],
                   "then", [], [vi("k", [2])])
    else_b = graph([helper.make_node("Mul", ["y_in", "y_in"], ["sq"])], "else", [], [vi("sq", [2])])
    body = graph([helper.make_node("Identity", ["cond_in"], ["cond_out"]),
                  helper.make_node("If", ["c"], ["step"], then_branch=then_b, else_branch=else_b),
                  helper.make_node("Add", ["y_in", "step"], ["y_out"])], "body",
                 [vi("i", [], T.INT64), vi("cond_in", [], T.BOOL), vi("y_in", [2])],
                 [vi("cond_out", [], T.BOOL), vi("y_out", [2])])
    m = model([helper.make_node("Loop", ["M", "", "y0"], ["y"], body=body)], [vi("c", [], T.BOOL), vi("y0", [2])],
              [vi("y", [2])], [helper.make_tensor("M", T.INT64, [], [3])])
    mod = rxe.from_onnx(m)
    feeds = [{"c": np.array(c), "y0": rand(2)} for c in (True, False)]
    for f in feeds:
        check(m, f, interpreted(mod))
    with compiled(m, "c", tmp_path) as loaded:
        for f in feeds:
            check(m, f, loaded.run)


def test_loop_body_with_a_sequence_input_is_refused():
    body = graph([helper.make_node("Identity", ["cond_in"], ["cond_out"]), helper.make_node("Identity", ["s"], ["s2"])],
                 "body", [vi("i", [], T.INT64), vi("cond_in", [], T.BOOL),
                          helper.make_tensor_sequence_value_info("s", T.FLOAT, None)],
                 [vi("cond_out", [], T.BOOL), helper.make_tensor_sequence_value_info("s2", T.FLOAT, None)])
    m = model([helper.make_node("Loop", ["M", "", "x"], ["y"], name="seq", body=body)], [vi("x", [2])],
              [vi("y", [2])], [helper.make_tensor("M", T.INT64, [], [2])])
    with pytest.raises(OnnxImportError, match=r"node seq \(Loop\): input s of seq/iter0 is not a tensor: sequence "
                                              r"and optional values are not supported"):
        rxe.from_onnx(m)


# ---------------------------------------------------------------------- Scan

def scan9_model(n_steps="t"):
    """A running sum over axis 1 of x (read backwards) and the scan outputs
    stacked on axis 1, the second reversed."""
    body = graph([helper.make_node("Add", ["s_in", "x_t"], ["s_out"]),
                  helper.make_node("Mul", ["s_out", "x_t"], ["o1"]),
                  helper.make_node("Identity", ["s_out"], ["o2"])], "body",
                 [vi("s_in", None), vi("x_t", None)], [vi("s_out", None), vi("o1", None), vi("o2", None)])
    node = helper.make_node("Scan", ["s0", "x"], ["s", "y1", "y2"], name="scan", body=body, num_scan_inputs=1,
                            scan_input_axes=[1], scan_input_directions=[1], scan_output_axes=[1, -1],
                            scan_output_directions=[0, 1])
    return model([node], [vi("s0", ["n", 3]), vi("x", ["n", n_steps, 3])],
                 [vi("s", ["n", 3]), vi("y1", None), vi("y2", None)], opset=16)


def test_scan9_axes_and_directions():
    m = scan9_model()
    for n, t in ((1, 1), (2, 4)):
        mod = rxe.from_onnx(m, input_shapes={"x": ["n", t, 3]})
        check(m, {"s0": rand(n, 3), "x": rand(n, t, 3)}, interpreted(mod))


@pytest.mark.parametrize("backend", ["c", "llvm"])
def test_scan_compiled_on_the_host(backend, tmp_path):
    m = scan9_model(3)
    with compiled(m, backend, tmp_path) as loaded:
        for n in (1, 4):
            check(m, {"s0": rand(n, 3), "x": rand(n, 3, 3)}, loaded.run)


def test_scan8_batch_and_directions():
    body = graph([helper.make_node("Add", ["s_in", "x_t"], ["s_out"]), helper.make_node("Identity", ["s_out"], ["o"])],
                 "body", [vi("s_in", [2]), vi("x_t", [2])], [vi("s_out", [2]), vi("o", [2])])
    node = helper.make_node("Scan", ["", "s0", "x"], ["s", "y"], body=body, num_scan_inputs=1, directions=[1])
    m = model([node], [vi("s0", [2, 2]), vi("x", [2, 3, 2])], [vi("s", [2, 2]), vi("y", [2, 3, 2])], opset=8)
    mod = rxe.from_onnx(m)
    s0, x = rand(2, 2), rand(2, 3, 2)
    check(m, {"s0": s0, "x": x}, interpreted(mod))
    m.graph.node[0].input[0] = "lens"
    m.graph.initializer.append(helper.make_tensor("lens", T.INT32, [2], [3, 2]))
    with pytest.raises(OnnxImportError, match=r"sequence_lens \[3, 2\] differ from the scanned length 3"):
        rxe.from_onnx(m)


def test_scan8_over_a_symbolic_axis_is_refused():
    body = graph([helper.make_node("Add", ["s_in", "x_t"], ["s_out"]), helper.make_node("Identity", ["s_out"], ["o"])],
                 "body", [vi("s_in", [2]), vi("x_t", [2])], [vi("s_out", [2]), vi("o", [2])])
    node = helper.make_node("Scan", ["", "s0", "x"], ["s", "y"], name="scan8", body=body, num_scan_inputs=1)
    m = model([node], [vi("s0", [2, 2]), vi("x", [2, "t", 2])], [vi("s", [2, 2]), vi("y", None)], opset=8)
    with pytest.raises(OnnxImportError, match=r"node scan8 \(Scan\): the scanned axis has symbolic length t; an "
                                              r"opset-8 Scan .* needs its batch and scanned lengths known"):
        rxe.from_onnx(m)


def test_scan_over_a_symbolic_axis_is_the_irs_loop():
    m = scan9_model()
    mod = rxe.from_onnx(m)
    assert "loop(trip_count=t" in str(mod)
    for n, t in ((1, 1), (2, 5), (1, 20)):
        check(m, {"s0": rand(n, 3), "x": rand(n, t, 3)}, interpreted(mod))


@pytest.mark.parametrize("backend", ["c", "llvm"])
def test_scan_over_a_symbolic_axis_compiled(backend, tmp_path):
    m = scan9_model()
    with compiled(m, backend, tmp_path) as loaded:
        for n, t in ((1, 1), (2, 5), (1, 20)):
            check(m, {"s0": rand(n, 3), "x": rand(n, t, 3)}, loaded.run)


# ------------------------------------------------------ unsupported operators, validation

def test_unsupported_operators_inside_bodies_are_listed_with_the_rest():
    then_b = graph([helper.make_node("FooBar", ["x"], ["t"])], "then", [], [vi("t", [2])])
    else_b = graph([helper.make_node("Relu", ["x"], ["e"])], "else", [], [vi("e", [2])])
    body = graph([helper.make_node("Identity", ["c_in"], ["c_out"]),
                  helper.make_node("Frobnicate", ["v"], ["v2"], domain="com.example")], "body",
                 [vi("i", [], T.INT64), vi("c_in", [], T.BOOL), vi("v", [2])], [vi("c_out", [], T.BOOL), vi("v2", [2])])
    nodes = [helper.make_node("FooBar", ["x"], ["a"]),
             helper.make_node("If", ["c"], ["b"], name="pick", then_branch=then_b, else_branch=else_b),
             helper.make_node("Loop", ["M", "", "b"], ["y"], name="repeat", body=body)]
    m = model(nodes, [vi("c", [], T.BOOL), vi("x", [2])], [vi("y", [2]), vi("a", [2])],
              [helper.make_tensor("M", T.INT64, [], [2])])
    m.opset_import.append(helper.make_opsetid("com.example", 1))
    with pytest.raises(OnnxImportError) as info:
        rxe.from_onnx(m)
    assert str(info.value) == ("unsupported ONNX operators: FooBar (2 nodes, 1 of them inside node pick (If) attribute "
                               "then_branch), com.example.Frobnicate (1 node, inside node repeat (Loop) "
                               "attribute body)")


def test_subgraph_names_are_checked_in_their_scope():
    """A branch may read a value defined before its If, not one defined after it."""
    then_b = graph([helper.make_node("Add", ["x", "later"], ["t"])], "then", [], [vi("t", [2])])
    else_b = graph([helper.make_node("Relu", ["x"], ["e"])], "else", [], [vi("e", [2])])
    nodes = [helper.make_node("If", ["c"], ["y"], name="pick", then_branch=then_b, else_branch=else_b),
             helper.make_node("Relu", ["x"], ["later"])]
    m = model(nodes, [vi("c", [], T.BOOL), vi("x", [2])], [vi("y", [2]), vi("later", [2])])
    with pytest.raises(OnnxImportError, match=r"node pick \(If\) attribute then_branch: node Add_0 \(Add\): input "
                                              r"'later' is not produced by any node"):
        rxe.from_onnx(m)


def test_subgraph_nodes_are_checked_against_their_schemas():
    then_b = graph([helper.make_node("Relu", ["x"], ["t"], alpha=1.0)], "then", [], [vi("t", [2])])
    else_b = graph([helper.make_node("Relu", ["x"], ["e"])], "else", [], [vi("e", [2])])
    m = model([helper.make_node("If", ["c"], ["y"], name="pick", then_branch=then_b, else_branch=else_b)],
              [vi("c", [], T.BOOL), vi("x", [2])], [vi("y", [2])])
    with pytest.raises(OnnxImportError, match=r"node pick \(If\) attribute then_branch: node Relu_0 \(Relu\): "
                                              r"Relu-14 has no attribute alpha"):
        rxe.from_onnx(m)


# ------------------------------------------------------------------ node cases

CONTROL_CASES = sorted(c.name for c in node_tests.collect_cases() if node_tests.case_ops(c) & {"If", "Loop", "Scan"}
                       and not node_tests.scope_problem(c.model))


def test_control_flow_node_cases_pass():
    assert len(CONTROL_CASES) >= 27
    by_name = {c.name: c for c in node_tests.collect_cases()}
    failed = [(n, r.detail) for n in CONTROL_CASES if (r := node_tests.run_case(by_name[n])).status != "pass"]
    assert not failed
