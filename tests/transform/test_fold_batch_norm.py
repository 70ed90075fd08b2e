"""fold_batch_norm: conv + batch norm becomes a conv with scaled weights and
a bias (then one library kernel with its activation); a batch norm alone
becomes a scale and a shift; the interpreter agrees before and after."""

import numpy as np

import relax_edge as rxe
from relax_edge import op
from relax_edge.ir import Builder, Constant, SizeVar, TensorType, Var, verify
from relax_edge.op.registry import make_call
from relax_edge.transform.dce import dce
from relax_edge.transform.dispatch import dispatch
from relax_edge.transform.fold_batch_norm import fold_batch_norm

RNG = np.random.default_rng(3)
n = SizeVar("n")


def bn_params(c):
    return [Constant(RNG.standard_normal(c).astype(np.float32)), Constant(RNG.standard_normal(c).astype(np.float32)),
            Constant(RNG.standard_normal(c).astype(np.float32)), Constant(RNG.random(c).astype(np.float32) + 0.5)]


def module(build, shape):
    x = Var("x", TensorType(shape, "float32"))
    bb = Builder()
    with bb.function("main", [x]):
        with bb.dataflow():
            out = bb.emit_output(build(bb, x))
        bb.ret(out)
    return bb.get()


def ops(mod):
    return [getattr(b.value, "op", None) and b.value.op.name or type(b.value).__name__
            for blk in mod.functions["main"].body.blocks for b in blk.bindings]


def same(before, after, shape):
    verify(after)
    for k in (1, 3):
        x = RNG.standard_normal((k, *shape[1:])).astype(np.float32)
        np.testing.assert_allclose(rxe.interpret(after, x), rxe.interpret(before, x), rtol=1e-4, atol=1e-5)


def test_conv_batch_norm_relu_becomes_one_kernel():
    w = Constant(RNG.standard_normal((6, 3, 3, 3)).astype(np.float32))
    shape = (n, 3, 8, 8)

    def build(bb, x):
        y = bb.emit(op.conv2d(x, w, padding=(1, 1, 1, 1)))
        y = bb.emit(make_call("batch_norm", [y, *bn_params(6)], {"epsilon": 1e-3}))
        return op.relu(y)
    mod = module(build, shape)
    folded = dce(fold_batch_norm(mod))
    assert ops(folded) == ["conv2d", "add", "relu"]
    same(mod, folded, shape)
    assert ops(dispatch(folded)) == ["CallExtern"]


def test_batch_norm_alone_is_a_scale_and_shift():
    shape = (n, 4, 5)

    def build(bb, x):
        return make_call("batch_norm", [bb.emit(op.exp(x)), *bn_params(4)])
    mod = module(build, shape)
    folded = fold_batch_norm(mod)
    assert ops(folded) == ["exp", "multiply", "add"]
    same(mod, folded, shape)


def test_conv_used_twice_keeps_its_weights():
    w = Constant(RNG.standard_normal((4, 2, 1, 1)).astype(np.float32))
    shape = (n, 2, 4, 4)

    def build(bb, x):
        y = bb.emit(op.conv2d(x, w))
        z = bb.emit(make_call("batch_norm", [y, *bn_params(4)]))
        return op.add(y, z)
    mod = module(build, shape)
    folded = fold_batch_norm(mod)
    assert ops(folded) == ["conv2d", "multiply", "add", "add"]
    same(mod, folded, shape)
