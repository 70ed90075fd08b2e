"""cse: repeated operator, tensor-program and extern calls, by the printed
module before and after, the verifier, and the interpreter's results
before and after at two sizes; scoping across dataflow blocks and `if`
branches; then the ONNX mlp and bert models."""

import numpy as np
import pytest

import relax_edge as rxe
from relax_edge import op
from relax_edge.ir import (
    Builder,
    CallExtern,
    CallTensor,
    Constant,
    ExternDecl,
    SizeVar,
    TensorType,
    Tuple,
    Var,
    evaluate,
    verify,
)
from relax_edge.op import make_call
from relax_edge.transform.cse import SMALL_CONSTANT, cse
from relax_edge.transform.legalize import legalize
from tests.onnx_models import get_model

n = SizeVar("n")


def inputs(mod, sizes, seed):
    rng = np.random.default_rng(seed)
    out = []
    for p in mod.functions["main"].params:
        shape = tuple(evaluate(d, sizes) for d in p.type.shape)
        out.append(rng.standard_normal(shape).astype(p.type.dtype))
    return out


def check_same_results(before, after, sizes=({n: 1}, {n: 6})):
    verify(after)
    for seed, size in enumerate(sizes):
        args = inputs(before, size, seed)
        expected, actual = rxe.interpret(before, *args), rxe.interpret(after, *args)
        for e, a in zip(expected if isinstance(expected, tuple) else [expected],
                        actual if isinstance(actual, tuple) else [actual]):
            assert a.dtype == e.dtype and a.shape == e.shape
            np.testing.assert_allclose(a, e, rtol=1e-5, atol=1e-6)


def body(mod):
    """The printed bindings and result of main."""
    lines = str(mod).splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("def main"))
    end = next(i for i, line in enumerate(lines) if line.startswith("    return"))
    return "\n".join(lines[start + 1:end + 1])


def test_repeats_merge_and_renaming_exposes_more():
    x = Var("x", TensorType((n, 4)))
    bb = Builder()
    with bb.function("main", [x]):
        with bb.dataflow():
            a = bb.emit(make_call("arange", [], {"stop": n, "dtype": "float32"}))
            b = bb.emit(make_call("arange", [], {"stop": n, "dtype": "float32"}))
            ra, rb = bb.emit(op.reshape(a, (n, 1))), bb.emit(op.reshape(b, (n, 1)))
            other = bb.emit(op.reshape(b, (1, n)))                      # other attrs: stays
            s = bb.emit(op.add(op.add(x, ra), op.add(x, rb)))
            out = bb.emit_output(op.add(s, op.sum(other, axis=1, keepdims=True)), "out")
        bb.ret(out)
    mod = bb.get()
    after = cse(mod)
    assert body(after) == (
        "    with dataflow():\n"
        '        lv0: Tensor((n,), "float32") = arange(stop=n, dtype="float32")\n'
        '        lv2: Tensor((n, 1), "float32") = reshape(lv0, shape=(n, 1))\n'
        '        lv4: Tensor((1, n), "float32") = reshape(lv0, shape=(1, n))\n'
        '        lv5: Tensor((n, 4), "float32") = add(x, lv2)\n'
        '        lv7: Tensor((n, 4), "float32") = add(lv5, lv5)\n'
        '        lv8: Tensor((1, 1), "float32") = sum(lv4, axis=1, keepdims=True)\n'
        '        out: Tensor((n, 4), "float32") = add(lv7, lv8)\n'
        "    return out")
    check_same_results(mod, after)


def test_constants_compare_by_value_only_when_small():
    x = Var("x", TensorType((n, SMALL_CONSTANT + 1)))
    big = np.arange(SMALL_CONSTANT + 1, dtype=np.float32)
    same_big = Constant(big)
    bb = Builder()
    with bb.function("main", [x]):
        with bb.dataflow():
            terms = [op.multiply(x, Constant(np.float32(2))), op.multiply(x, Constant(np.float32(2))),
                     op.multiply(x, Constant(np.float32(-0.0))), op.multiply(x, Constant(np.float32(0.0))),
                     op.add(x, same_big), op.add(x, same_big), op.add(x, Constant(big))]
            out = terms[0]
            for t in terms[1:]:
                out = op.add(bb.emit(out), bb.emit(t))
            out = bb.emit_output(out)
        bb.ret(out)
    mod = bb.get()
    after = cse(mod)
    kept = [b.value.args for blk in after.functions["main"].body.blocks for b in blk.bindings
            if b.value.op.name in ("multiply",) or isinstance(b.value.args[1], Constant)]
    assert len(kept) == 5, "2 == 2 and the same big object merge; -0.0 vs 0.0 and an equal big copy do not"
    check_same_results(mod, after)


def test_scoping_across_blocks():
    x = Var("x", TensorType((n, 4)))
    bb = Builder()
    with bb.function("main", [x]):
        with bb.dataflow():
            local = bb.emit(op.relu(x))                 # dataflow var: dies with the block
            shared = bb.emit_output(op.exp(x))
            twin = bb.emit_output(op.relu(x))           # outlives the block: bound to `local`
            gate = bb.emit(op.sigmoid(x))               # dataflow var with no twin
            first = bb.emit_output(op.add(op.add(local, shared), gate))
        with bb.dataflow():
            gate_again = bb.emit(op.sigmoid(x))         # recomputed: `gate` is gone
            again = bb.emit(op.relu(x))                 # reuses `twin`: `local` is gone
            exp_again = bb.emit(op.exp(x))              # reuses `shared`
            second = bb.emit_output(op.add(op.add(again, exp_again), op.add(first, op.add(twin, gate_again))))
        plain = bb.emit(op.exp(x))                      # outside any block: reuses `shared`
        bb.ret(bb.emit(op.add(second, plain)))
    mod = bb.get()
    after = cse(mod)
    assert body(after) == (
        "    with dataflow():\n"
        '        lv0: Tensor((n, 4), "float32") = relu(x)\n'
        '        gv0: Tensor((n, 4), "float32") = exp(x)\n'
        '        gv1: Tensor((n, 4), "float32") = lv0\n'
        '        lv1: Tensor((n, 4), "float32") = sigmoid(x)\n'
        '        lv2: Tensor((n, 4), "float32") = add(lv0, gv0)\n'
        '        gv2: Tensor((n, 4), "float32") = add(lv2, lv1)\n'
        "    with dataflow():\n"
        '        lv3: Tensor((n, 4), "float32") = sigmoid(x)\n'
        '        lv6: Tensor((n, 4), "float32") = add(gv1, gv0)\n'
        '        lv7: Tensor((n, 4), "float32") = add(gv1, lv3)\n'
        '        lv8: Tensor((n, 4), "float32") = add(gv2, lv7)\n'
        '        gv3: Tensor((n, 4), "float32") = add(lv6, lv8)\n'
        '    gv5: Tensor((n, 4), "float32") = add(gv3, gv0)\n'
        "    return gv5")
    check_same_results(mod, after)


def test_scoping_in_if_branches():
    x = Var("x", TensorType((n, 4)))
    flag = Var("flag", TensorType((), "bool"))
    bb = Builder()
    with bb.function("main", [x, flag]):
        outer = bb.emit(op.exp(x))

        def then_branch(bb):
            bb.emit(op.relu(x))
            return bb.emit(op.add(bb.emit(op.exp(x)), bb.emit(op.relu(x))))  # exp: outer; relu: inner

        def else_branch(bb):
            return bb.emit(op.relu(x))                  # not the then branch's relu

        chosen = bb.emit_if(flag, then_branch, else_branch)
        after_if = bb.emit(op.relu(x))                  # neither branch's relu is visible here
        bb.ret(bb.emit(op.add(op.add(chosen, after_if), outer)))
    mod = bb.get()
    after = cse(mod)
    assert body(after) == (
        '    gv0: Tensor((n, 4), "float32") = exp(x)\n'
        "    if flag:\n"
        '        gv1: Tensor((n, 4), "float32") = relu(x)\n'
        '        gv4: Tensor((n, 4), "float32") = add(gv0, gv1)\n'
        '        gv6: Tensor((n, 4), "float32") = gv4\n'
        "    else:\n"
        '        gv5: Tensor((n, 4), "float32") = relu(x)\n'
        '        gv6: Tensor((n, 4), "float32") = gv5\n'
        '    gv7: Tensor((n, 4), "float32") = relu(x)\n'
        '    gv8: Tensor((n, 4), "float32") = add(gv6, gv7)\n'
        '    gv9: Tensor((n, 4), "float32") = add(gv8, gv0)\n'
        "    return gv9")
    verify(after)
    for size in (1, 6):
        for taken in (True, False):
            x_value = np.random.default_rng(size).standard_normal((size, 4)).astype(np.float32)
            np.testing.assert_allclose(rxe.interpret(after, x_value, np.array(taken)),
                                       rxe.interpret(mod, x_value, np.array(taken)), rtol=1e-6)


def test_tensor_program_calls():
    x = Var("x", TensorType((n, 4)))
    bb = Builder()
    with bb.function("main", [x]):
        bb.ret(bb.emit(op.relu(x)))
    lowered = legalize(bb.get())
    call = lowered.functions["main"].body.blocks[0].bindings[0].value
    bb = Builder(type(lowered)({}, lowered.tensor_programs))
    with bb.function("main", [x]):
        a = bb.emit(call)
        b = bb.emit(CallTensor(call.program, call.args, call.type, call.size_args))
        c = bb.emit(CallTensor(call.program, [a], call.type, call.size_args))      # other args: stays
        bb.ret(Tuple([a, b, c]))
    mod = bb.get()
    after = cse(mod)
    assert body(after) == (
        '    gv0: Tensor((n, 4), "float32") = call_tensor(@relu, (x), sizes=(n,), out=Tensor((n, 4), "float32"))\n'
        '    gv2: Tensor((n, 4), "float32") = call_tensor(@relu, (gv0), sizes=(n,), out=Tensor((n, 4), "float32"))\n'
        "    return (gv0, gv0, gv2)")
    check_same_results(mod, after)


def test_extern_calls():
    x = Var("x", TensorType((n, 4)))
    t = TensorType((n, 4))
    bb = Builder()
    bb.add_extern(ExternDecl("scale", [t], t))
    with bb.function("main", [x]):
        a = bb.emit(CallExtern("scale", [x], t, {"params": (("k", 2),)}))
        b = bb.emit(CallExtern("scale", [x], t, {"params": (("k", 2),)}))
        c = bb.emit(CallExtern("scale", [x], t, {"params": (("k", 3),)}))   # other attrs: stays
        bb.ret(Tuple([a, b, c]))
    after = cse(bb.get())
    verify(after)
    assert body(after).endswith("    return (gv0, gv0, gv2)")
    assert len(after.functions["main"].body.blocks[0].bindings) == 2


@pytest.mark.parametrize("name,bounds", [("mlp", None), ("bert", {"seq": 64})])
def test_onnx_models(name, bounds):
    path, spec = get_model(name)
    mod = rxe.from_onnx(str(path), dim_bounds=bounds)
    after = cse(mod)
    verify(after)
    count = [sum(len(blk.bindings) for blk in m.functions["main"].body.blocks) for m in (mod, after)]
    assert count[1] <= count[0]
    for which in (0, 1):
        feeds = spec["make_inputs"](seed=which, **{d: s[which] for d, s in spec["dynamic"].items()})
        expected, actual = rxe.interpret(mod, *feeds.values()), rxe.interpret(after, *feeds.values())
        for e, a in zip(expected if isinstance(expected, tuple) else [expected],
                        actual if isinstance(actual, tuple) else [actual]):
            assert a.shape == e.shape and a.dtype == e.dtype
            np.testing.assert_allclose(a, e, rtol=1e-5, atol=1e-6)
