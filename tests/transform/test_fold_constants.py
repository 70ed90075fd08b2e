"""fold_constants: small modules for each rule and each case that must not
fold, by their printed text before and after, the verifier, and the
interpreter's results before and after at two sizes of every size
variable; then the ONNX mlp and bert models."""

import numpy as np
import pytest

import relax_edge as rxe
from relax_edge import op
from relax_edge.ir import Builder, Constant, SizeVar, TensorType, Var, evaluate, verify
from relax_edge.op import make_call
from relax_edge.transform.fold_constants import fold_constants
from relax_edge.transform.legalize import legalize
from tests.onnx_models import get_model

n = SizeVar("n")
RNG = np.random.default_rng(0)


def weights(*shape, dtype="float32"):
    return Constant(RNG.standard_normal(shape).astype(dtype))


def module(params, build):
    """`main(params)` returning build(bb, *params), all in one dataflow block."""
    bb = Builder()
    with bb.function("main", params):
        with bb.dataflow():
            out = bb.emit_output(build(bb, *params), "out")
        bb.ret(out)
    return bb.get()


def inputs(mod, sizes, seed):
    rng = np.random.default_rng(seed)
    out = []
    for p in mod.functions["main"].params:
        shape = tuple(evaluate(d, sizes) for d in p.type.shape)
        out.append(rng.standard_normal(shape).astype(p.type.dtype))
    return out


def check_same_results(before, after, sizes=({n: 1}, {n: 5})):
    verify(after)
    for seed, size in enumerate(sizes):
        args = inputs(before, size, seed)
        expected, actual = rxe.interpret(before, *args), rxe.interpret(after, *args)
        assert actual.dtype == expected.dtype and actual.shape == expected.shape
        np.testing.assert_allclose(actual, expected, rtol=1e-5, atol=1e-6)


def bindings(mod):
    return [b for blk in mod.functions["main"].body.blocks for b in blk.bindings]


def test_weight_chain_folds_to_one_constant_in_one_pass():
    w = weights(4, 3)
    x = Var("x", TensorType((n, 3)))
    mod = module([x], lambda bb, x: op.matmul(x, bb.emit(op.reshape(bb.emit(op.transpose(w)), (3, 4)))))
    folded = fold_constants(mod)
    assert str(folded) == (
        "# size n: 1 <= n\n"
        'def main(x: Tensor((n, 3), "float32")) -> Tensor((n, 4), "float32"):\n'
        "    with dataflow():\n"
        '        out: Tensor((n, 4), "float32") = matmul(x, meta[0])\n'
        "    return out\n\n"
        '# meta[0]: Tensor((3, 4), "float32")\n')
    np.testing.assert_array_equal(bindings(folded)[0].value.args[1].data, w.data.T)
    check_same_results(mod, folded)
    assert len(bindings(mod)) == 3, "the input module is not changed"


def test_conv_weight_times_batch_norm_scale_and_cast_keep_dtype_and_shape():
    w, scale = weights(8, 3, 3, 3), weights(8)
    bias = Constant(np.arange(8, dtype=np.int64))
    x = Var("x", TensorType((n, 3, 6, 6)))

    def build(bb, x):
        w_scaled = bb.emit(op.multiply(w, bb.emit(op.reshape(scale, (8, 1, 1, 1)))))
        b = bb.emit(op.reshape(bb.emit(make_call("cast", [bias], {"dtype": "float32"})), (1, 8, 1, 1)))
        return op.add(bb.emit(op.conv2d(x, w_scaled, padding=(1, 1, 1, 1))), b)

    mod = module([x], build)
    folded = fold_constants(mod)
    assert [b.value.op.name for b in bindings(folded)] == ["conv2d", "add"]
    w_folded, b_folded = bindings(folded)[0].value.args[1], bindings(folded)[1].value.args[1]
    assert w_folded.data.dtype == np.float32 and w_folded.data.shape == (8, 3, 3, 3)
    assert b_folded.data.dtype == np.float32 and b_folded.data.shape == (1, 8, 1, 1)
    np.testing.assert_array_equal(b_folded.data.reshape(-1), np.arange(8, dtype=np.float32))
    np.testing.assert_allclose(w_folded.data, w.data * scale.data.reshape(8, 1, 1, 1), rtol=1e-6)
    check_same_results(mod, folded)


def test_symbolic_results_and_attributes_do_not_fold():
    table = Constant(np.arange(12, dtype=np.int64).reshape(1, 12))
    x = Var("x", TensorType((1, n), "int64"))

    def build(bb, x):
        sliced = bb.emit(make_call("strided_slice", [table], {"begin": (0,), "end": (n,), "axes": (1,)}))
        size = bb.emit(op.reshape(bb.emit(make_call("shape_to_tensor", [], {"values": (n,)})), ()))
        return op.add(op.add(x, sliced), size)

    mod = module([x], build)
    folded = fold_constants(mod)
    assert str(folded) == str(mod)
    check_same_results(mod, folded, ({n: 1}, {n: 12}))


def constant_bytes(mod):
    seen = {}
    for b in bindings(mod):
        for a in getattr(b.value, "args", ()):
            if isinstance(a, Constant):
                seen[id(a)] = a.data.nbytes
    return sum(seen.values())


def test_large_results_fold_only_when_they_replace_their_inputs():
    small = Constant(np.arange(4, dtype=np.float32).reshape(4, 1))
    w, shared, w3 = weights(256, 4), weights(4, 256), weights(256, 4)    # 4 KiB each
    x = Var("x", TensorType((n, 4)))

    def build(bb, x):
        grown = bb.emit(make_call("broadcast_to", [small], {"shape": (4, 256)}))    # grows: stays
        reduced = bb.emit(op.sum(bb.emit(make_call("broadcast_to", [small], {"shape": (4, 256)})), axis=1))
        moved = bb.emit(op.transpose(w))                                             # replaces w
        doubled = bb.emit(op.multiply(shared, 2.0))                                  # shared stays used
        moved3 = bb.emit(op.transpose(w3))
        twice, thrice = bb.emit(op.multiply(moved3, 2.0)), bb.emit(op.multiply(moved3, 3.0))
        terms = [op.matmul(x, grown), op.matmul(bb.emit(op.add(x, reduced)), moved), op.matmul(x, shared),
                 op.matmul(x, doubled), op.matmul(x, twice), op.matmul(x, thrice)]
        out = terms[0]
        for t in terms[1:]:
            out = op.add(bb.emit(out), bb.emit(t))
        return out

    mod = module([x], build)
    folded = fold_constants(mod, max_bytes=1024)
    kept = [b.value.op.name for b in bindings(folded) if b.value.op.name not in ("matmul", "add")]
    assert kept == ["broadcast_to", "multiply", "multiply", "multiply"]
    assert [b.value.args[0].type for b in bindings(folded) if b.value.op.name == "multiply"] == \
        [TensorType((4, 256))] * 3
    assert constant_bytes(folded) <= constant_bytes(mod) + 1024
    check_same_results(mod, folded)
    everything = fold_constants(mod)
    assert {b.value.op.name for b in bindings(everything)} == {"matmul", "add"}
    check_same_results(mod, everything)


def test_exact_identities():
    x = Var("x", TensorType((n, 4)))
    ints = Var("i", TensorType((n, 4), "int32"))
    cube = Var("c", TensorType((2, n, 3)))

    def build(bb, x, ints, cube):
        y = bb.emit(op.multiply(x, Constant(np.ones(4, np.float32))))
        y = bb.emit(op.add(Constant(np.zeros((1, 4), np.float32)), y))
        y = bb.emit(op.reshape(y, (n, 4)))
        k = bb.emit(op.add(ints, Constant(np.zeros((), np.int32))))
        c = bb.emit(op.transpose(bb.emit(op.transpose(cube, (1, 2, 0))), (2, 0, 1)))
        c = bb.emit(op.transpose(bb.emit(op.transpose(c)), (2, 1, 0)))
        s = bb.emit(op.sum(c, axis=(0, 2)))
        scaled = bb.emit(op.multiply(y, bb.emit(make_call("cast", [k], {"dtype": "float32"}))))
        return op.add(scaled, bb.emit(op.reshape(s, (n, 1))))

    mod = module([x, ints, cube], build)
    folded = fold_constants(mod)
    assert str(folded).split("with dataflow():\n")[1] == (
        '        lv4: Tensor((n, 3, 2), "float32") = transpose(c, axes=(1, 2, 0))\n'   # dead now (dce)
        '        lv6: Tensor((3, n, 2), "float32") = transpose(c)\n'
        '        lv8: Tensor((n,), "float32") = sum(c, axis=(0, 2))\n'
        '        lv9: Tensor((n, 4), "float32") = cast(i, dtype="float32")\n'
        '        lv10: Tensor((n, 4), "float32") = multiply(x, lv9)\n'
        '        lv11: Tensor((n, 1), "float32") = reshape(lv8, shape=(n, 1))\n'
        '        out: Tensor((n, 4), "float32") = add(lv10, lv11)\n'
        "    return out\n")
    check_same_results(mod, folded)


def test_identities_that_would_lose_a_broadcast_or_a_value_stay():
    x = Var("x", TensorType((1, 4)))
    y = Var("y", TensorType((n, 4)))

    def build(bb, x, y):
        a = bb.emit(op.multiply(x, Constant(np.ones((3, 4), np.float32))))       # broadcasts x to (3, 4)
        b = bb.emit(op.add(y, Constant(np.array([0, 0, 0, 1e-3], np.float32))))  # not all zero
        c = bb.emit(op.transpose(bb.emit(op.transpose(a, (1, 0))), (1, 0)))       # identity: goes
        return op.add(op.sum(c, axis=0), op.sum(b, axis=0))

    mod = module([x, y], build)
    folded = fold_constants(mod)
    assert [b.value.op.name for b in bindings(folded)] == ["multiply", "add", "transpose", "sum", "sum", "add"]
    assert bindings(folded)[3].value.args[0] is bindings(folded)[0].var
    check_same_results(mod, folded)


def test_dataflow_output_that_becomes_a_dataflow_var_is_bound_to_it():
    x = Var("x", TensorType((n, 4)))
    mod = module([x], lambda bb, x: op.multiply(bb.emit(op.relu(x)), 1.0))
    folded = fold_constants(mod)
    assert 'out: Tensor((n, 4), "float32") = lv0\n' in str(folded)
    check_same_results(mod, folded)


def test_legalized_module_is_left_correct():
    w = weights(4, 3)
    x = Var("x", TensorType((n, 3)))
    mod = module([x], lambda bb, x: op.matmul(x, bb.emit(op.transpose(w))))
    lowered = legalize(mod)
    after = fold_constants(lowered)
    assert str(after) == str(lowered), "tensor-program calls are not folded"
    check_same_results(mod, after)
    check_same_results(mod, legalize(fold_constants(mod)))


@pytest.mark.parametrize("name,bounds", [("mlp", None), ("bert", {"seq": 64})])
def test_onnx_models(name, bounds):
    path, spec = get_model(name)
    mod = rxe.from_onnx(str(path), dim_bounds=bounds)
    folded = fold_constants(mod)
    verify(folded)
    assert len(bindings(folded)) <= len(bindings(mod))
    for which in (0, 1):
        feeds = spec["make_inputs"](seed=which, **{d: s[which] for d, s in spec["dynamic"].items()})
        expected, actual = rxe.interpret(mod, *feeds.values()), rxe.interpret(folded, *feeds.values())
        for e, a in zip(expected if isinstance(expected, tuple) else [expected],
                        actual if isinstance(actual, tuple) else [actual]):
            assert a.shape == e.shape and a.dtype == e.dtype
            np.testing.assert_allclose(a, e, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("exponent, ops", [(2.0, ["multiply"]), (3.0, ["multiply", "multiply"]), (0.5, ["sqrt"]),
                                           (1.5, ["power"])])
def test_power_by_a_small_constant_becomes_products(exponent, ops):
    x = Var("x", TensorType((n, 4)))
    mod = module([x], lambda bb, x: op.exp(bb.emit(make_call("power", [x, Constant(np.float32(exponent))]))))
    folded = fold_constants(mod)
    assert [b.value.op.name for b in bindings(folded)][:-1] == ops
    check_same_results(mod, folded)


def test_power_that_broadcasts_is_kept():
    x = Var("x", TensorType((n, 1)))
    mod = module([x], lambda bb, x: make_call("power", [x, Constant(np.full((1, 3), 2.0, np.float32))]))
    assert [b.value.op.name for b in bindings(fold_constants(mod))] == ["power"]
