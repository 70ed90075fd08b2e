"""dce: dead bindings, match_cast, `if` branches, unused functions, tensor
programs and externs, by the printed module before and after, the verifier,
and the interpreter's results before and after at two sizes; then the three
graph passes in a row on the ONNX mlp and bert models, before and after
legalization."""

import numpy as np
import pytest

import relax_edge as rxe
from relax_edge import op
from relax_edge.ir import (
    Builder,
    Call,
    CallExtern,
    ExternDecl,
    GlobalVar,
    SizeVar,
    TensorType,
    Var,
    evaluate,
    verify,
)
from relax_edge.transform.cse import cse
from relax_edge.transform.dce import dce
from relax_edge.transform.fold_constants import fold_constants
from relax_edge.transform.legalize import legalize
from tests.onnx_models import get_model

n = SizeVar("n")


def check_same_results(before, after, sizes=({n: 1}, {n: 6})):
    verify(after)
    for seed, size in enumerate(sizes):
        rng = np.random.default_rng(seed)
        args = [rng.standard_normal(tuple(evaluate(d, size) for d in p.type.shape)).astype(p.type.dtype)
                for p in before.functions["main"].params]
        np.testing.assert_allclose(rxe.interpret(after, *args), rxe.interpret(before, *args), rtol=1e-6)


def main_text(mod):
    lines = str(mod).splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("def main"))
    end = next(i for i, line in enumerate(lines) if line.startswith("    return"))
    return "\n".join(lines[start + 1:end + 1])


def test_dead_chains_go_and_empty_blocks_with_them():
    x = Var("x", TensorType((n, 4)))
    bb = Builder()
    with bb.function("main", [x]):
        with bb.dataflow():
            dead = bb.emit(op.exp(bb.emit(op.relu(x))))
            bb.emit_output(op.add(dead, x))
        with bb.dataflow():
            live = bb.emit(op.tanh(x))
            bb.emit(op.sigmoid(live))
            out = bb.emit_output(op.multiply(live, x))
        bb.ret(out)
    mod = bb.get()
    before = str(mod)
    after = dce(mod)
    assert main_text(after) == (
        "    with dataflow():\n"
        '        lv2: Tensor((n, 4), "float32") = tanh(x)\n'
        '        gv1: Tensor((n, 4), "float32") = multiply(lv2, x)\n'
        "    return gv1")
    assert str(mod) == before, "the input module is not changed"
    check_same_results(mod, after)


def test_match_cast_is_kept_with_what_it_reads():
    x = Var("x", TensorType((n, 4)))
    m = SizeVar("m")
    bb = Builder()
    with bb.function("main", [x]):
        checked = bb.emit(op.relu(x))
        bb.match_cast(checked, TensorType((m, 4)))      # unused, but may fail at run time
        bb.emit(op.exp(x))
        bb.ret(bb.emit(op.tanh(x)))
    mod = bb.get()
    after = dce(mod)
    assert main_text(after) == (
        '    gv0: Tensor((n, 4), "float32") = relu(x)\n'
        '    gv1: Tensor((m, 4), "float32") = match_cast(gv0, Tensor((m, 4), "float32"))\n'
        '    gv3: Tensor((n, 4), "float32") = tanh(x)\n'
        "    return gv3")
    check_same_results(mod, after)


def test_if_branches_are_swept_and_an_unused_if_goes():
    x = Var("x", TensorType((n, 4)))
    bb = Builder()
    with bb.function("main", [x]):
        flag = bb.emit(op.make_call("greater", [bb.emit(op.sum(x)), 0.0]))

        def then_branch(bb):
            bb.emit(op.exp(x))
            return bb.emit(op.relu(x))

        def else_branch(bb):
            return bb.emit(op.tanh(x))

        chosen = bb.emit_if(flag, then_branch, else_branch)
        bb.emit_if(flag, else_branch, then_branch)      # unused
        bb.ret(bb.emit(op.add(chosen, x)))
    mod = bb.get()
    after = dce(mod)
    assert main_text(after) == (
        '    gv0: Tensor((), "float32") = sum(x)\n'
        '    gv1: Tensor((), "bool") = greater(gv0, const(0.0, "float32"))\n'
        "    if gv1:\n"
        '        gv3: Tensor((n, 4), "float32") = relu(x)\n'
        '        gv5: Tensor((n, 4), "float32") = gv3\n'
        "    else:\n"
        '        gv4: Tensor((n, 4), "float32") = tanh(x)\n'
        '        gv5: Tensor((n, 4), "float32") = gv4\n'
        '    gv10: Tensor((n, 4), "float32") = add(gv5, x)\n'
        "    return gv10")
    check_same_results(mod, after)


def test_unused_functions_programs_and_externs_go():
    x = Var("x", TensorType((n, 4)))
    t = TensorType((n, 4))
    bb = Builder()
    for name in ("helper", "orphan"):
        p = Var("p", t)
        with bb.function(name, [p]):
            bb.ret(bb.emit(op.relu(p)))
    bb.add_extern(ExternDecl("used_kernel", [t], t))
    bb.add_extern(ExternDecl("unused_kernel", [t], t))
    with bb.function("main", [x]):
        bb.emit(op.sigmoid(x))                           # dead: its program goes too
        kernel = bb.emit(CallExtern("used_kernel", [x], t))
        bb.ret(bb.emit(Call(GlobalVar("helper"), [kernel], type=t)))
    lowered = legalize(bb.get())
    assert sorted(lowered.tensor_programs) == ["relu", "relu_1", "sigmoid"]
    after = dce(lowered)
    verify(after)
    assert list(after.functions) == ["helper", "main"]
    assert list(after.externs) == ["used_kernel"]
    assert list(after.tensor_programs) == [lowered.functions["helper"].body.blocks[0].bindings[0].value.program.name]
    assert "sigmoid" not in main_text(after)


def test_a_module_without_main_keeps_its_functions():
    p = Var("p", TensorType((n, 4)))
    bb = Builder()
    with bb.function("entry", [p]):
        bb.emit(op.exp(p))
        bb.ret(bb.emit(op.relu(p)))
    after = dce(bb.get())
    assert list(after.functions) == ["entry"]
    assert len(after.functions["entry"].body.blocks[0].bindings) == 1


def binding_count(mod):
    return sum(len(blk.bindings) for blk in mod.functions["main"].body.blocks)


@pytest.mark.parametrize("name,bounds", [("mlp", None), ("bert", {"seq": 64})])
def test_graph_passes_in_a_row_on_onnx_models(name, bounds):
    path, spec = get_model(name)
    mod = rxe.from_onnx(str(path), dim_bounds=bounds)
    stages = [mod]
    for graph_pass in (fold_constants, cse, dce):
        stages.append(verify(graph_pass(stages[-1])))
        assert binding_count(stages[-1]) <= binding_count(stages[-2]), graph_pass.__name__
    lowered = legalize(stages[-1])
    stages.append(verify(dce(cse(fold_constants(lowered)))))
    assert len(stages[-1].tensor_programs) <= len(lowered.tensor_programs)
    for which in (0, 1):
        feeds = spec["make_inputs"](seed=which, **{d: s[which] for d, s in spec["dynamic"].items()})
        expected = rxe.interpret(mod, *feeds.values())
        expected = expected if isinstance(expected, tuple) else (expected,)
        for stage in stages[1:]:
            actual = rxe.interpret(stage, *feeds.values())
            for e, a in zip(expected, actual if isinstance(actual, tuple) else (actual,)):
                assert a.shape == e.shape and a.dtype == e.dtype
                np.testing.assert_allclose(a, e, rtol=1e-5, atol=1e-6)
