"""dedupe: identical tensor programs (a model's repeated layers) become one,
programs that differ in a constant, a dtype, a shape or a size bound stay
apart; results before and after by the interpreter, and the shared kernel
compiled on the host with both backends against numpy."""

import numpy as np
import pytest

import relax_edge as rxe
from relax_edge import op
from relax_edge.ir import Builder, Constant, SizeVar, TensorType, Var, verify
from relax_edge.ir.expr import CallTensor
from relax_edge.op import make_call
from relax_edge.transform.dedupe import dedupe, structural_key
from relax_edge.transform.fuse import fuse
from relax_edge.transform.legalize import legalize

n = SizeVar("n", upper=64)
RNG = np.random.default_rng(0)
LAYERS = [(RNG.standard_normal((8, 8)).astype(np.float32) * 0.5, RNG.standard_normal(8).astype(np.float32))
          for _ in range(3)]
HEAD = RNG.standard_normal((8, 4)).astype(np.float32)


def mlp():
    """Three identical silu(x @ W + b) layers (their own weights), then a sigmoid head of another width."""
    x = Var("x", TensorType((n, 8)))
    bb = Builder()
    with bb.function("main", [x]):
        with bb.dataflow():
            h = x
            for w, b in LAYERS:
                h = bb.emit(op.add(bb.emit(op.matmul(h, Constant(w))), Constant(b)))
                h = bb.emit(op.multiply(h, bb.emit(op.sigmoid(h))))
            out = bb.emit_output(op.sigmoid(bb.emit(op.matmul(h, Constant(HEAD)))))
        bb.ret(out)
    return bb.get()


def numpy_mlp(x):
    for w, b in LAYERS:
        x = x @ w + b
        x = x / (1 + np.exp(-x))
    return 1 / (1 + np.exp(-(x @ HEAD)))


def called(mod) -> list:
    return [b.value.program.name for blk in mod.functions["main"].body.blocks for b in blk.bindings
            if isinstance(b.value, CallTensor)]


def test_repeated_layers_share_one_program():
    before = fuse(legalize(mlp()))
    names = called(before)
    assert len(names) == 8 and len(set(names)) == 8    # fuse makes two programs per layer, then the head's two
    after = dedupe(before)
    verify(after)
    kept = called(after)
    assert kept[:6] == names[:2] * 3 and kept[6:] == names[6:]
    assert set(after.tensor_programs) == {*names[:2], *names[6:]}
    assert str(after.tensor_programs[names[0]]) == str(before.tensor_programs[names[0]])
    for size in (1, 5):
        x = np.random.default_rng(size).standard_normal((size, 8)).astype(np.float32)
        np.testing.assert_allclose(rxe.interpret(after, x), rxe.interpret(before, x), rtol=0, atol=0)
        np.testing.assert_allclose(rxe.interpret(after, x), numpy_mlp(x), rtol=1e-5, atol=1e-6)
    assert dedupe(after) is after   # nothing left to merge


def _program(x_type, call_fn):
    x = Var("x", x_type)
    bb = Builder()
    with bb.function("main", [x]):
        with bb.dataflow():
            out = bb.emit_output(call_fn(x))
        bb.ret(out)
    (program,) = legalize(bb.get()).tensor_programs.values()
    return program


def _key(program):
    return structural_key(program)[0]


def test_programs_that_differ_stay_apart():
    def leaky(alpha):
        return lambda x: make_call("leaky_relu", [x], {"alpha": alpha})
    base = _program(TensorType((n, 8)), leaky(0.1))
    assert _key(base) == _key(_program(TensorType((n, 8)), leaky(0.1)))           # another copy: the same
    others = [_program(TensorType((n, 8)), leaky(0.2)),                            # a constant in the body
              _program(TensorType((n, 8), "float64"), leaky(0.1)),                 # a dtype
              _program(TensorType((n, 9)), leaky(0.1)),                            # a shape
              _program(TensorType((SizeVar("n", upper=32), 8)), leaky(0.1)),       # a size bound
              _program(TensorType((SizeVar("m", upper=64), 8)), leaky(0.1)),       # a size's name
              _program(TensorType((n, 8)), op.relu)]                               # another operator
    keys = [_key(p) for p in others]
    assert _key(base) not in keys and len(set(keys)) == len(keys)


def test_zero_and_negative_zero_differ():
    def leaky(alpha):
        return lambda x: make_call("leaky_relu", [x], {"alpha": alpha})
    zero, negative = _program(TensorType((n, 8)), leaky(0.0)), _program(TensorType((n, 8)), leaky(-0.0))
    assert _key(zero) != _key(negative)


@pytest.mark.parametrize("backend", ["c", "llvm"])
def test_shared_kernel_compiled(tmp_path, backend):
    mod = mlp()
    optimized = rxe.optimize(mod, "host", verify=True)
    names = called(optimized)
    assert len(names) == 4 and len(set(names)) == 2     # the three layers' silu kernels are one (dense: extern)
    art = rxe.build(mod, board="host", backend=backend, out_dir=tmp_path, name="mlp", profile=False)
    with rxe.connect("host") as dev:
        loaded = dev.load(art)
        for size in (1, 7, 64):
            x = np.random.default_rng(size).standard_normal((size, 8)).astype(np.float32)
            (actual,) = loaded.run(x)
            assert actual.shape == (size, 4)
            np.testing.assert_allclose(actual, numpy_mlp(x), rtol=1e-5, atol=1e-6)
