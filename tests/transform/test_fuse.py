"""fuse: small legalized modules before and after (which calls merge, the
fused programs' text and attributes), the interpreter's results before and
after at several sizes of every size variable, a fused module compiled on
the host against the numpy reference, and the ONNX bert model fused and
compiled once, run at two sequence lengths against ONNX Runtime."""

import math

import numpy as np
import onnxruntime as ort
import pytest

import relax_edge as rxe
from relax_edge import op
from relax_edge.ir import Builder, CallTensor, Constant, SizeVar, TensorType, Tuple, Var, evaluate, verify
from relax_edge.op import make_call
from relax_edge.tir.verify import verify_program
from relax_edge.transform.fuse import fuse
from relax_edge.transform.legalize import legalize
from tests.onnx_models import get_model

n, m = SizeVar("n"), SizeVar("m")
RNG = np.random.default_rng(0)
SIZES = ({n: 1, m: 1}, {n: 3, m: 2}, {n: 6, m: 5})


def weights(*shape):
    return Constant(RNG.standard_normal(shape).astype("float32"))


def scalar(v):
    return Constant(np.float32(v))


def module(params, build):
    """`main(params)` returning build(bb, *params), all in one dataflow block."""
    bb = Builder()
    with bb.function("main", params):
        with bb.dataflow():
            out = build(bb, *params)
            out = bb.emit_output(Tuple(out) if isinstance(out, tuple) else out, "out")
        bb.ret(out)
    return bb.get()


def inputs(mod, sizes, seed):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(tuple(evaluate(d, sizes) for d in p.type.shape)).astype(p.type.dtype)
            for p in mod.functions["main"].params]


def fused(mod, sizes=SIZES):
    """The legalized module fused, checked by the verifiers and against the
    unfused module's interpreter results (the numpy reference) at `sizes`."""
    after = fuse(legalize(mod))
    verify(after)
    for program in after.tensor_programs.values():
        verify_program(program)
    for seed, size in enumerate(sizes):
        args = inputs(mod, size, seed)
        expected, actual = rxe.interpret(mod, *args), rxe.interpret(after, *args)
        for e, a in zip(expected if isinstance(expected, tuple) else (expected,),
                        actual if isinstance(actual, tuple) else (actual,)):
            assert a.dtype == e.dtype and a.shape == e.shape
            np.testing.assert_allclose(a, e, rtol=1e-5, atol=1e-6)
    return after


def calls(mod):
    """(ops, pattern) of each tensor-program call of main, in order."""
    out = []
    for blk in mod.functions["main"].body.blocks:
        for b in blk.bindings:
            if isinstance(b.value, CallTensor):
                attrs = mod.tensor_programs[b.value.program.name].attrs
                out.append((attrs.get("ops", (attrs["op"],)), attrs.get("pattern")))
    return out


def only_program(mod):
    (program,) = mod.tensor_programs.values()
    return program


def gelu(bb, x):
    """GELU as exporters write it: five elementwise operators."""
    e = bb.emit(make_call("erf", [bb.emit(op.divide(x, scalar(math.sqrt(2.0))))]))
    return op.multiply(bb.emit(op.multiply(x, bb.emit(op.add(e, scalar(1.0))))), scalar(0.5))


def test_gelu_chain_becomes_one_kernel_generic_in_n():
    x = Var("x", TensorType((n, 8)))
    after = fused(module([x], gelu))
    assert calls(after) == [(("divide", "erf", "add", "multiply", "multiply"), "broadcast")]
    program = only_program(after)
    assert program.name == "fused_divide_erf_add_multiply_multiply"
    assert [v.name for v in program.size_params] == ["n"]
    (binding,) = after.functions["main"].body.blocks[0].bindings
    assert binding.value.size_args == (n,)


def test_matmul_bias_relu_is_one_kernel_with_the_epilogue_at_the_final_store():
    x = Var("x", TensorType((n, 8)))
    mod = module([x], lambda bb, x: op.relu(bb.emit(op.add(bb.emit(op.matmul(x, weights(8, 6))), weights(6)))))
    after = fused(mod)
    assert calls(after) == [(("matmul", "add", "relu"), "output_fusable")]
    lines = str(only_program(after)).splitlines()
    assert lines[0] == ("# program fused_matmul_add_relu(x0: float32(n, 8), x1: float32(8, 6), x2: float32(6,)) "
                        "-> (relu: float32(n, 6)), sizes n")
    assert lines[1:3] == ["for i0 in range(n):", "    for i1 in range(6):"]
    assert lines[-1] == "        relu[i0, i1] = max((float32(matmul_acc[0]) + x2[i1]), 0.0)" or \
        lines[-1] == "        relu[i0, i1] = max((matmul_acc[0] + x2[i1]), 0.0)", "the epilogue at the final store"


def test_matmul_bias_gelu_keeps_the_math_calls_out_of_the_matmul_loops_unless_asked():
    x = Var("x", TensorType((n, 8)))
    mod = module([x], lambda bb, x: gelu(bb, bb.emit(op.add(bb.emit(op.matmul(x, weights(8, 6))), weights(6)))))
    after = fused(mod)
    assert [ops for ops, _ in calls(after)] == [("matmul", "add"), ("divide", "erf", "add", "multiply", "multiply")]
    merged = fuse(legalize(mod), vectorizable=False)
    assert [ops for ops, _ in calls(merged)] == [("matmul", "add", "divide", "erf", "add", "multiply", "multiply")]
    text = str(only_program(merged))
    assert text.count("matmul_acc[0] = 0.0") == 1 and "add_value = " in text, "x is computed once, bound by a let"
    args = inputs(mod, {n: 3}, 0)
    np.testing.assert_allclose(rxe.interpret(merged, *args), rxe.interpret(mod, *args), rtol=1e-5, atol=1e-6)


def test_transposes_are_inlined_into_a_matmul_only_when_asked():
    q, k = Var("q", TensorType((n, 2, 4))), Var("k", TensorType((n, 2, 4)))

    def build(bb, q, k):
        return op.matmul(bb.emit(op.transpose(q, (1, 0, 2))), bb.emit(op.transpose(k, (1, 2, 0))))
    mod = module([q, k], build)
    assert [ops for ops, _ in calls(fused(mod))] == [("transpose",), ("transpose",), ("matmul",)]
    merged = fuse(legalize(mod), vectorizable=False)
    assert calls(merged) == [(("transpose", "transpose", "matmul"), "output_fusable")]
    args = inputs(mod, {n: 3}, 0)
    np.testing.assert_allclose(rxe.interpret(merged, *args), rxe.interpret(mod, *args), rtol=1e-5, atol=1e-6)


def test_add_transpose_multiply_over_two_symbolic_dims():
    x, y, z = Var("x", TensorType((n, m))), Var("y", TensorType((n, m))), Var("z", TensorType((m, n)))
    after = fused(module([x, y, z], lambda bb, x, y, z: op.multiply(bb.emit(op.transpose(bb.emit(op.add(x, y)))), z)))
    assert calls(after) == [(("add", "transpose", "multiply"), "injective")]
    (binding,) = after.functions["main"].body.blocks[0].bindings
    assert set(binding.value.size_args) == {n, m} and len(only_program(after).size_params) == 2


def test_diamond_value_with_two_users_is_computed_once():
    """a feeds b and c; recomputing a (exp then tanh) in both is too costly,
    so b and c merge first, then a becomes their one producer."""
    x = Var("x", TensorType((n, 4)))

    def build(bb, x):
        a = bb.emit(op.tanh(bb.emit(op.exp(x))))
        return op.add(bb.emit(op.add(a, scalar(1.0))), bb.emit(op.multiply(a, scalar(2.0))))
    after = fused(module([x], build))
    assert [ops for ops, _ in calls(after)] == [("exp", "tanh", "add", "multiply", "add")]
    assert str(only_program(after)).count("tanh(") == 1


def test_cheap_value_is_inlined_into_a_reduction_and_its_other_user():
    x = Var("x", TensorType((n, 4)))

    def build(bb, x):
        a = bb.emit(op.exp(x))
        return op.divide(a, bb.emit(op.sum(a, axis=(1,), keepdims=True)))
    after = fused(module([x], build))
    assert calls(after) == [(("exp", "sum"), "reduction"), (("exp", "divide"), "broadcast")]


def test_graph_outputs_are_still_produced():
    x = Var("x", TensorType((n, 4)))
    after = fused(module([x], lambda bb, x: (a := bb.emit(op.exp(x)), bb.emit(op.add(a, scalar(1.0))))))
    assert [ops for ops, _ in calls(after)] == [("exp",), ("add",)]


def test_conv_bias_relu_and_softmax_times_value():
    x = Var("x", TensorType((n, 3, 6, 6)))
    w, bias = weights(4, 3, 3, 3), weights(4, 1, 1)
    after = fused(module([x], lambda bb, x: op.relu(bb.emit(op.add(bb.emit(op.conv2d(x, w, padding=(1, 1, 1, 1))),
                                                                     bias)))), SIZES[:2])
    assert calls(after) == [(("conv2d", "add", "relu"), "output_fusable")]
    y = Var("y", TensorType((n, m)))
    after = fused(module([y], lambda bb, y: op.multiply(bb.emit(op.softmax(y)), y)))
    assert calls(after) == [(("softmax", "multiply"), "reduction")]
    assert len(only_program(after).scratch) == 2, "softmax's max and sum stay scratch of the fused kernel"


def test_decomposed_layer_norm_becomes_three_kernels():
    x = Var("x", TensorType((n, 8)))
    g, b = weights(8), weights(8)

    def build(bb, x):
        d = bb.emit(op.subtract(x, bb.emit(op.mean(x, axis=(1,), keepdims=True))))
        var = bb.emit(op.mean(bb.emit(make_call("power", [d, scalar(2.0)])), axis=(1,), keepdims=True))
        s = bb.emit(make_call("sqrt", [bb.emit(op.add(var, scalar(1e-5)))]))
        return op.add(bb.emit(op.multiply(bb.emit(op.divide(d, s)), g)), b)
    after = fused(module([x], build))
    assert [ops for ops, _ in calls(after)] == [
        ("mean",), ("subtract", "power", "mean", "add", "sqrt"), ("subtract", "divide", "multiply", "add")]


def test_unprovable_broadcast_and_reshape_are_left_alone():
    x, y = Var("x", TensorType((n, 4))), Var("y", TensorType((m, 4)))
    after = fused(module([x, y], lambda bb, x, y: op.relu(bb.emit(op.add(x, y)))), [{n: 3, m: 3}, {n: 3, m: 1}])
    assert [ops for ops, _ in calls(after)] == [("add",), ("relu",)]
    after = fused(module([x], lambda bb, x: op.relu(bb.emit(op.reshape(bb.emit(op.exp(x)), (-1,))))))
    assert [ops for ops, _ in calls(after)] == [("exp",), ("reshape",), ("relu",)]


# ------------------------------------------------------------ compiled

def test_fused_kernels_compiled_on_the_host_match_numpy(tmp_path):
    """matmul + bias + GELU (merged), an embedding lookup plus that value
    (its index check carried into the fused kernel), softmax * value: one
    artifact at several sizes."""
    x = Var("x", TensorType((n, 8)))
    ids = Var("ids", TensorType((n,), "int64"))
    table = weights(10, 6)

    def build(bb, x, ids):
        h = bb.emit(gelu(bb, bb.emit(op.add(bb.emit(op.matmul(x, weights(8, 6))), weights(6)))))
        e = bb.emit(op.add(bb.emit(make_call("take", [table, ids], {"axis": 0})), h))
        return op.multiply(bb.emit(op.softmax(e)), e)
    mod = module([x, ids], build)
    after = fuse(legalize(mod), vectorizable=False)
    assert len(calls(after)) == 2
    art = rxe.build(after, board="host", out_dir=tmp_path, name="fused", profile=False)
    with rxe.connect("host") as dev:
        loaded = dev.load(art)
        for k, size in enumerate([1, 4, 9]):
            args = [np.random.default_rng(k).standard_normal((size, 8)).astype("float32"),
                    np.random.default_rng(k).integers(-10, 10, size)]
            (actual,) = loaded.run(*args)
            np.testing.assert_allclose(actual, rxe.interpret(mod, *args), rtol=1e-5, atol=1e-6)
        with pytest.raises(rxe.RuntimeCheckError, match="out of range"):
            loaded.run(np.zeros((2, 8), np.float32), np.array([0, 12]))


# ------------------------------------------------------------ whole models

def kernel_count(mod) -> int:
    """Kernels run by main (reshapes are views: no kernel)."""
    return sum(1 for ops, _ in calls(mod) if ops != ("reshape",))


@pytest.fixture(scope="module")
def bert(tmp_path_factory):
    path, spec = get_model("bert")
    legal = legalize(rxe.from_onnx(str(path), dim_bounds={"seq": 64}))
    after = fuse(legal)
    verify(after)
    art = rxe.build(after, board="host", out_dir=tmp_path_factory.mktemp("bert_fused"), name="bert", profile=False)
    return path, spec, legal, after, art


def test_bert_fused_kernel_count(bert):
    _, _, legal, after, _ = bert
    before, fused_count = kernel_count(legal), kernel_count(after)
    print(f"bert kernels: {before} -> {fused_count}")
    assert fused_count <= before * 6 // 10
    assert ("matmul", "add", "add") in [ops for ops, _ in calls(after)], "matmul + bias + residual"
    assert ("divide", "erf", "add", "multiply", "multiply") in [ops for ops, _ in calls(after)], "GELU"


def test_bert_fused_matches_onnxruntime_at_two_lengths_from_one_artifact(bert):
    path, spec, _, after, art = bert
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    with rxe.connect("host") as dev:
        loaded = dev.load(art)
        for which in (0, 1):
            feeds = spec["make_inputs"](seed=which, **{d: pair[which] for d, pair in spec["dynamic"].items()})
            for ours, ref in zip(loaded.run(*feeds.values()), session.run(None, feeds)):
                assert ours.shape == ref.shape
                np.testing.assert_allclose(ours, ref, rtol=1e-4, atol=1e-5)
    feeds = spec["make_inputs"](seed=2, seq=3)
    for ours, ref in zip(rxe.interpret(after, *feeds.values()), session.run(None, feeds)):
        np.testing.assert_allclose(ours, ref, rtol=1e-4, atol=1e-5)


def test_mobilenet_v2_fused_kernel_count():
    path, _ = get_model("mobilenet_v2")
    legal = legalize(rxe.from_onnx(str(path), input_shapes={"input": ("batch", 3, 224, 224)}))
    after = fuse(legal)
    before, fused_count = kernel_count(legal), kernel_count(after)
    print(f"mobilenet_v2 kernels: {before} -> {fused_count}")
    assert fused_count <= before // 2
    assert not any(ops == ("clip",) for ops, _ in calls(after)), "every ReLU6 runs in its convolution's kernel"
