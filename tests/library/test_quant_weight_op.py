"""The weight-only quantized operators' definition (relax_edge/op/quant_weight.py):
the packed layout dequantized element by element, as written in the docstring
(GGUF's Q4_0 / Q4_1 / Q8_0 formulas and MatMulNBits' nibble order), and the
type rule's refusals."""

import numpy as np
import pytest

from relax_edge.errors import TypeInferenceError
from relax_edge.ir.expr import Constant, Var
from relax_edge.ir.shape import SizeVar
from relax_edge.ir.types import TensorType
from relax_edge.op.quant_weight import dequantize_blocks, gather_nbits_reference, matmul_nbits_reference
from relax_edge.op.registry import make_call


def _element(q, n, k, bits, block):
    b, j = divmod(k, block)
    if bits == 8:
        return int(q[n, b, j])
    byte = int(q[n, b, j // 2])
    return byte & 15 if j % 2 == 0 else byte >> 4


@pytest.mark.parametrize("bits,block,K,mode", [(4, 16, 40, "default"), (4, 32, 64, "float"), (8, 32, 50, "default"),
                                               (4, 64, 100, "uint8"), (8, 16, 16, "uint8")])
def test_dequantize_element_by_element(bits, block, K, mode):
    rng = np.random.default_rng(bits * K)
    N, nb = 5, -(-K // block)
    q = rng.integers(0, 256, (N, nb, block * bits // 8), dtype=np.uint8)
    s = rng.standard_normal((N, nb)).astype(np.float32)
    z = {"default": None, "uint8": rng.integers(0, 1 << bits, (N, nb), dtype=np.uint8),
         "float": rng.standard_normal((N, nb)).astype(np.float32)}[mode]
    w = dequantize_blocks(q, s, z, K=K, bits=bits, block_size=block, mode=mode)
    want = np.empty((N, K), np.float32)
    for n in range(N):
        for k in range(K):
            v, b = _element(q, n, k, bits, block), k // block
            if mode == "default":
                want[n, k] = np.float32(v - (1 << (bits - 1))) * s[n, b]
            elif mode == "uint8":
                want[n, k] = np.float32(v - int(z[n, b])) * s[n, b]
            else:
                want[n, k] = np.float32(v) * s[n, b] + z[n, b]
    np.testing.assert_array_equal(w, want)
    x = rng.standard_normal((3, K)).astype(np.float32)
    args = [x, q, s] + ([z] if z is not None else [])
    y = matmul_nbits_reference(*args, K=K, N=N, bits=bits, block_size=block, zero=mode)
    np.testing.assert_allclose(y, x.astype(np.float64) @ want.T.astype(np.float64), rtol=1e-5, atol=1e-5)
    ids = np.array([[4, 0], [-1, 2]])
    rows = gather_nbits_reference(*([q, s] + ([z] if z is not None else []) + [ids]), K=K, bits=bits,
                                  block_size=block, zero=mode)
    np.testing.assert_array_equal(rows, want[[[4, 0], [4, 2]]])


def _call(x_shape, q, s, **attrs):
    return make_call("matmul_nbits", [Var("x", TensorType(x_shape, "float32")), Constant(q), Constant(s)], attrs)


def test_type_rule():
    q, s = np.zeros((6, 2, 16), np.uint8), np.zeros((6, 2), np.float32)
    assert _call((1, SizeVar("seq"), 64), q, s, K=64, N=6, bits=4, block_size=32).type.shape[-1] == 6
    for attrs, message in [(dict(K=64, N=6, bits=3, block_size=32), "bits must be 4 or 8"),
                           (dict(K=64, N=6, bits=4, block_size=24), "power of two"),
                           (dict(K=64, N=7, bits=4, block_size=32), "N is 7"),
                           (dict(K=65, N=6, bits=4, block_size=32), "qweight axis 1"),
                           (dict(K=64, N=6, bits=4, block_size=32, zero="uint8"), "the zeros as the argument"),
                           (dict(K=64, N=6, bits=8, block_size=32), "qweight axis 2")]:
        with pytest.raises(TypeInferenceError, match=message):
            _call((2, 64), q, s, **attrs)
    with pytest.raises(TypeInferenceError, match="x's last axis"):
        _call((2, 60), q, s, K=64, N=6, bits=4, block_size=32)
