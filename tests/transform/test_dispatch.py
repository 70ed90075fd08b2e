"""dispatch: matmul / conv2d patterns become library kernels (call_extern),
with their bias and activation epilogues, only where the pattern's
conditions hold; the interpreter gives the same numbers before and after,
and the compiled kernels equal numpy at several sizes of the symbolic dims."""

import numpy as np
import pytest

import relax_edge as rxe
from relax_edge import op
from relax_edge.ir import Builder, Constant, SizeVar, TensorType, Var, print_module, verify
from relax_edge.op.registry import make_call
from relax_edge.transform.dispatch import dispatch

F = "float32"
RNG = np.random.default_rng(7)


def const(*shape):
    return Constant(RNG.standard_normal(shape).astype(np.float32))


def clip(x, lo, hi):
    return make_call("clip", [x], {"min": lo, "max": hi})


def module(params, body):
    bb = Builder()
    with bb.function("main", params):
        with bb.dataflow():
            out = body(bb, *params)
            out = bb.emit_output(out)
        bb.ret(out)
    return bb.get()


def externs(mod):
    return [b.value for blk in mod.functions["main"].body.blocks for b in blk.bindings
            if type(b.value).__name__ == "CallExtern"]


def operators(mod):
    return [b.value.op.name for blk in mod.functions["main"].body.blocks for b in blk.bindings
            if type(b.value).__name__ == "Call"]


def same_numbers(before, after, arrays_list):
    for arrays in arrays_list:
        np.testing.assert_allclose(rxe.interpret(after, *arrays), rxe.interpret(before, *arrays), rtol=1e-5,
                                   atol=1e-5)


def dense_module(act="relu", bias_shape=(24,), out_too=False):
    n = SizeVar("n")
    x = Var("x", TensorType((n, 16), F))
    w, b = const(16, 24), const(*bias_shape)

    def body(bb, x):
        y = bb.emit(op.matmul(x, w))
        z = bb.emit(op.add(y, b))
        if act == "relu":
            z = bb.emit(op.relu(z))
        elif act is not None:
            z = bb.emit(clip(z, *act))
        if out_too:   # the matmul result is used twice: no epilogue
            z = bb.emit(op.add(z, y))
        return z
    return module([x], body)


def test_dense_bias_relu_is_one_kernel():
    mod = dense_module()
    after = dispatch(mod)
    verify(after)
    (call,) = externs(after)
    assert call.name == "rxe_lib_dense_f32" and dict(call.attrs["params"])["act"] == 1
    assert operators(after) == []
    assert 'call_extern("rxe_lib_dense_f32"' in print_module(after)
    same_numbers(mod, after, [[RNG.standard_normal((k, 16)).astype(F)] for k in (1, 5)])


@pytest.mark.parametrize("bounds, act", [((0.0, 6.0), 2), ((0.0, 5.0), 0)])
def test_clip_becomes_relu6_only_for_0_6(bounds, act):
    after = dispatch(dense_module(act=bounds))
    (call,) = externs(after)
    assert dict(call.attrs["params"])["act"] == act
    assert operators(after) == ([] if act == 2 else ["clip"])


def test_shared_intermediate_keeps_its_consumers():
    mod = dense_module(out_too=True)
    after = dispatch(mod)
    (call,) = externs(after)
    assert operators(after) == ["add", "relu", "add"]    # the bias add could not be absorbed
    same_numbers(mod, after, [[RNG.standard_normal((3, 16)).astype(F)]])


def test_bias_that_broadcasts_wider_is_not_absorbed():
    after = dispatch(dense_module(act=None, bias_shape=(4, 1, 24)))   # (n, 24) + (4, 1, 24) grows the result
    assert operators(after) == ["add"]


def test_batched_matmul_and_broadcast_b():
    n, m = SizeVar("n"), SizeVar("m")
    a = Var("a", TensorType((2, n, 8), F))
    b = Var("b", TensorType((2, 8, m), F))
    w = Var("w", TensorType((8, m), F))
    mod = module([a, b, w], lambda bb, a, b, w: bb.emit(op.add(bb.emit(op.matmul(a, b)), bb.emit(op.matmul(a, w)))))
    after = dispatch(mod)
    calls = externs(after)
    assert [c.name for c in calls] == ["rxe_lib_matmul_f32"] * 2
    strides = [str(c.attrs["sizes"][-1]) for c in calls]
    assert strides[1] == "0" and strides[0] != "0"
    arrays = [RNG.standard_normal(s).astype(F) for s in ((2, 3, 8), (2, 8, 5), (8, 5))]
    same_numbers(mod, after, [arrays])


def test_matmul_broadcasting_a_is_left_to_generated_code():
    n = SizeVar("n")
    a = Var("a", TensorType((1, n, 8), F))
    b = Var("b", TensorType((3, 8, 4), F))
    after = dispatch(module([a, b], lambda bb, a, b: bb.emit(op.matmul(a, b))))
    assert externs(after) == []


def conv_module(groups, cin, cout, act=True):
    n = SizeVar("n")
    x = Var("x", TensorType((n, cin, 9, 9), F))
    w, bias = const(cout, cin // groups, 3, 3), const(1, cout, 1, 1)

    def body(bb, x):
        y = bb.emit(op.conv2d(x, w, strides=(2, 2), padding=(1, 1, 1, 1), groups=groups))
        y = bb.emit(op.add(y, bias))
        return bb.emit(op.relu(y)) if act else y
    return module([x], body)


@pytest.mark.parametrize("groups, cin, cout, symbol", [(1, 3, 8, "rxe_lib_conv2d_f32"),
                                                       (2, 4, 6, "rxe_lib_conv2d_f32"),
                                                       (6, 6, 6, "rxe_lib_depthwise_conv2d_f32")])
def test_conv_bias_relu(groups, cin, cout, symbol):
    mod = conv_module(groups, cin, cout)
    after = dispatch(mod)
    (call,) = externs(after)
    assert call.name == symbol and operators(after) == []
    assert ("scratch_bytes" in call.attrs) == (symbol == "rxe_lib_conv2d_f32")
    same_numbers(mod, after, [[RNG.standard_normal((k, cin, 9, 9)).astype(F)] for k in (1, 2)])


def test_families_can_be_turned_off():
    after = dispatch(conv_module(6, 6, 6), kernels=("dense",))
    assert externs(after) == [] and operators(after) == ["conv2d", "add", "relu"]
    with pytest.raises(ValueError, match="unknown kernel families"):
        dispatch(conv_module(1, 3, 8), kernels=("winograd",))


@pytest.mark.parametrize("backend", ["c", "llvm"])
def test_compiled_library_kernels_equal_numpy(tmp_path, backend):
    """Dense + relu, a batched matmul and a conv with bias + relu6 in one
    module, through the whole pipeline, at three batch sizes."""
    n = SizeVar("n", upper=64)
    x = Var("x", TensorType((n, 16), F))
    img = Var("img", TensorType((n, 3, 9, 9), F))
    w, bias, cw = const(16, 24), const(24), const(8, 3, 3, 3)

    def body(bb, x, img):
        h = bb.emit(op.relu(bb.emit(op.add(bb.emit(op.matmul(x, w)), bias))))
        hh = bb.emit(op.matmul(bb.emit(op.reshape(h, (n, 4, 6))), bb.emit(op.reshape(h, (n, 6, 4)))))
        c = bb.emit(clip(bb.emit(op.conv2d(img, cw, padding=(1, 1, 1, 1))), 0.0, 6.0))
        s = bb.emit(op.sum(hh, axis=(1, 2), keepdims=False))
        return bb.emit(op.add(bb.emit(op.sum(c, axis=(1, 2, 3), keepdims=False)), s))
    mod = module([x, img], body)
    optimized = rxe.optimize(mod, "host")
    assert {c.name for c in externs(optimized)} == {"rxe_lib_dense_f32", "rxe_lib_matmul_f32",
                                                     "rxe_lib_conv2d_f32"}
    art = rxe.build(mod, board="host", backend=backend, out_dir=tmp_path, name="lib", profile=False)
    with rxe.connect("host") as dev:
        m = dev.load(art)
        for k in (1, 3, 64):
            arrays = [RNG.standard_normal((k, 16)).astype(F), RNG.standard_normal((k, 3, 9, 9)).astype(F)]
            np.testing.assert_allclose(m.run(*arrays)[0], rxe.interpret(mod, *arrays), rtol=1e-4, atol=1e-3)
