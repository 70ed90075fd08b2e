"""Type rules over symbolic dims, and their failures."""

import numpy as np
import pytest

import relax_edge as rxe
from relax_edge import op
from relax_edge.errors import TypeInferenceError
from relax_edge.ir import SizeVar, TensorType, Var, as_expr, evaluate


def T(*shape, dtype="float32"):
    return Var("t", TensorType(shape, dtype))


def test_broadcast_symbolic():
    n, m = SizeVar("n"), SizeVar("m")
    assert op.add(T(n, 1, 4), T(m, 4)).type == TensorType((n, m, 4))
    assert op.multiply(T(1, 4), T(n, 1)).type == TensorType((n, 4))
    assert op.subtract(T(n, 4), T(n, 4)).type == TensorType((n, 4))


def test_broadcast_provable_mismatch_names_op_and_shapes():
    with pytest.raises(TypeInferenceError, match=r"add: .*cannot broadcast dimension 3 with 4.*\(2, 3\)"):
        op.add(T(2, 3), T(4))
    n = SizeVar("n", lower=2)
    with pytest.raises(TypeInferenceError, match=r"cannot broadcast dimension n \+ 1 with n"):
        op.add(T(n + 1), T(n))


def test_broadcast_dtype_mismatch():
    with pytest.raises(TypeInferenceError, match="dtypes differ: float32 vs int32"):
        op.add(T(3), T(3, dtype="int32"))


def test_matmul_batched_symbolic():
    b, n, k, m = (SizeVar(s) for s in "bnkm")
    assert op.matmul(T(b, n, k), T(k, m)).type == TensorType((b, n, m))
    assert op.matmul(T(n, k), T(k)).type == TensorType((n,))
    assert op.matmul(T(k), T(b, k, m)).type == TensorType((b, m))
    assert op.matmul(T(b, 1, n, k), T(3, k, m)).type == TensorType((b, 3, n, m))


def test_matmul_inner_mismatch_fails_with_name_and_shapes():
    n, k, m = SizeVar("n"), SizeVar("k"), SizeVar("m")
    with pytest.raises(TypeInferenceError) as info:
        op.matmul(T(n, k), T(k + 1, m))
    msg = str(info.value)
    assert msg.startswith("matmul")
    assert "k vs k + 1" in msg and "(n, k)" in msg and "(k + 1, m)" in msg


def test_reshape_symbolic_proves_element_count():
    n = SizeVar("n")
    assert op.reshape(T(n, 12, 64), (n, 768)).type == TensorType((n, 768))
    assert op.reshape(T(n, 12, 64), (n, -1)).type == TensorType((n, 768))
    assert op.reshape(T(n, 768), (n, 12, -1)).type == TensorType((n, 12, 64))
    assert op.reshape(T(n * 4, 3), (-1,)).type == TensorType((n * 12,))


def test_reshape_wrong_count_fails():
    n = SizeVar("n")
    with pytest.raises(TypeInferenceError, match=r"reshape: cannot reshape \(n, 12, 64\) \(n \* 768 elements\)"):
        op.reshape(T(n, 12, 64), (n, 767))
    with pytest.raises(TypeInferenceError, match="cannot prove"):
        op.reshape(T(n), (-1, 4))


@pytest.mark.parametrize("k,s,p,d", [(3, 1, 1, 1), (3, 2, 1, 1), (5, 2, 2, 1), (3, 1, 2, 2), (1, 1, 0, 1)])
def test_conv2d_output_height_symbolic(k, s, p, d):
    h, w = SizeVar("h", lower=8), SizeVar("w", lower=8)
    x = T(1, 4, h, w)
    wt = Var("w", TensorType((6, 4, k, k)))
    t = op.conv2d(x, wt, strides=(s, s), padding=(p, p, p, p), dilation=(d, d)).type
    expected = (as_expr(h) + 2 * p - d * (k - 1) - 1) // s + 1
    assert t.shape[2] == expected
    # and the symbolic height evaluates to what the convolution really produces
    for hv in (8, 9, 13):
        assert evaluate(t.shape[2], {h: hv}) == (hv + 2 * p - d * (k - 1) - 1) // s + 1


def test_conv2d_grouped_and_channel_mismatch():
    n = SizeVar("n")
    assert op.conv2d(T(n, 8, 10, 10), Var("w", TensorType((8, 1, 3, 3))), groups=8).type \
        == TensorType((n, 8, 8, 8))
    with pytest.raises(TypeInferenceError, match="conv2d: input channels differ"):
        op.conv2d(T(n, 3, 10, 10), Var("w", TensorType((8, 4, 3, 3))))


def test_pool_and_reduce_shapes():
    n, h = SizeVar("n"), SizeVar("h", lower=4)
    assert op.max_pool2d(T(n, 3, h, h), (2, 2)).type == TensorType((n, 3, h // 2, h // 2))
    assert op.avg_pool2d(T(n, 3, h, h), (3, 3), (2, 2), ceil_mode=True).type.shape[2] == h // 2
    assert op.sum(T(n, 3, h), axis=1).type == TensorType((n, h))
    assert op.mean(T(n, 3, h), axis=(1, 2), keepdims=True).type == TensorType((n, 1, 1))
    assert op.sum(T(n, 3)).type == TensorType(())


def test_concat_transpose_softmax():
    n, m = SizeVar("n"), SizeVar("m")
    assert op.concat([T(n, 4), T(m, 4), T(2, 4)], axis=0).type == TensorType((n + m + 2, 4))
    assert op.transpose(T(n, 3, m), (2, 0, 1)).type == TensorType((m, n, 3))
    assert op.softmax(T(n, m), axis=0).type == TensorType((n, m))
    with pytest.raises(TypeInferenceError, match="concat: input 1 dimension 1 differs: 4 vs 5"):
        op.concat([T(n, 4), T(n, 5)], axis=0)
    with pytest.raises(TypeInferenceError, match=r"transpose: axes \(0, 0\) are not a permutation"):
        op.transpose(T(n, m), (0, 0))


def test_unknown_attribute_and_arity():
    with pytest.raises(TypeInferenceError, match="softmax: unknown attribute"):
        op.make_call("softmax", [T(3)], {"dim": 0})
    with pytest.raises(TypeInferenceError, match="relu: takes 1 arguments, got 2"):
        op.make_call("relu", [T(3), T(3)])


def test_float_only_ops_reject_ints():
    with pytest.raises(TypeInferenceError, match="exp: argument 0 must be floating point"):
        op.exp(T(3, dtype="int32"))


def test_type_rules_agree_with_references_at_runtime():
    """The interpreter checks each value against its inferred type; a batch of
    ops with symbolic dims runs at several sizes without a disagreement."""
    n, m = SizeVar("n"), SizeVar("m")
    x, y = Var("x", TensorType((n, 1, 4))), Var("y", TensorType((m, 4)))
    bb = rxe.Builder()
    with bb.function("main", [x, y]):
        s = bb.emit(op.add(x, y))
        t = bb.emit(op.transpose(s, (1, 2, 0)))
        r = bb.emit(op.reshape(t, (m, -1)))
        c = bb.emit(op.concat([r, r], axis=1))
        bb.ret(op.sum(c, axis=0))
    mod = bb.get()
    for nv, mv in [(1, 1), (2, 5), (7, 3)]:
        xv = np.random.default_rng(nv).standard_normal((nv, 1, 4)).astype("float32")
        yv = np.random.default_rng(mv).standard_normal((mv, 4)).astype("float32")
        out = rxe.interpret(mod, xv, yv)
        ref = np.transpose(xv + yv, (1, 2, 0)).reshape(mv, -1)
        np.testing.assert_allclose(out, np.concatenate([ref, ref], 1).sum(0), rtol=1e-5)
