"""Weight-only quantized operators: a matmul and an embedding gather whose
weights stay packed in blocks of 4- or 8-bit integers with per-block scales.

These are what an int4/int8 LLM is made of: ONNX Runtime's MatMulNBits and
GatherBlockQuantized, and GGUF's Q4_0, Q4_1 and Q8_0 tensors, all map onto
one layout without re-quantization (frontend/onnx, frontend/gguf):

- `qweight` uint8 (N, n_blocks, block_size * bits / 8): row n of the weight
  (output channel n; K input features) in n_blocks = ceil(K / block_size)
  blocks. For 4 bits, byte j of a block holds element 2j in its low nibble
  and element 2j + 1 in its high nibble (MatMulNBits' order); for 8 bits,
  byte j holds element j. Elements past K in the last block are padding.
- `scales` float32 (N, n_blocks).
- the zero, by the attribute `zero`:
  - "default": none stored; the zero point is 2^(bits-1) (8 or 128), so
    w = (q - 8) * s for 4 bits (GGUF Q4_0, MatMulNBits without zero points)
    and w = (q - 128) * s for 8 bits (Q8_0's int8 stored as q + 128);
  - "uint8": zero points uint8 (N, n_blocks), unpacked: w = (q - zp) * s;
  - "float": float32 offsets m (N, n_blocks): w = q * s + m (GGUF Q4_1).

1. `matmul_nbits(x, qweight, scales[, zero][, bias]; K, N, bits, block_size,
   zero, has_bias, act)`: y = x @ W^T (+ bias) for x (..., K) float32, W the
   dequantized (N, K) weight: y is (..., N) float32. `act` = "f32" computes
   with float32 activations (the default, ONNX Runtime's accuracy_level 0-3);
   "int8" quantizes each row of x to int8 per block first, as ONNX Runtime's
   accuracy_level 4 and llama.cpp's Q8 activations do (an option; the
   reference below then quantizes x the same way).
2. `gather_nbits(qweight, scales[, zero], indices; K, bits, block_size,
   zero)`: the dequantized rows W[indices] (..., K) float32: an embedding
   table kept quantized (GatherBlockQuantized, GGUF token_embd). With tied
   embeddings the same constants also feed the output head's matmul_nbits.

The numpy references below are the definition: the interpreter runs them and
the C kernels (runtime_c/kernels) are tested against them.
"""

from __future__ import annotations

import numpy as np

from ..ir.shape import Proof, as_expr, prove_equal
from ..ir.types import TensorType
from .registry import REQUIRED, Op, RuleError, register
from .rules import tensor

__all__ = ["dequantize_blocks", "quantize_rows_int8", "matmul_nbits_reference", "gather_nbits_reference",
           "ZERO_MODES"]

ZERO_MODES = ("default", "uint8", "float")


def _check_attrs(attrs) -> tuple[int, int, int, str]:
    bits, block, k, zero = attrs["bits"], attrs["block_size"], attrs["K"], attrs["zero"]
    if bits not in (4, 8):
        raise RuleError(f"bits must be 4 or 8, got {bits}")
    if not isinstance(block, int) or block < 16 or block & (block - 1):
        raise RuleError(f"block_size must be a power of two of at least 16, got {block}")
    if not isinstance(k, int) or k <= 0:
        raise RuleError(f"K must be a positive int, got {k}")
    if zero not in ZERO_MODES:
        raise RuleError(f"zero must be one of {', '.join(ZERO_MODES)}, got {zero!r}")
    return bits, block, k, zero


def _check_weights(types, attrs, rows_name: str):
    """The (qweight, scales[, zero]) types against the attributes; the row count and the index past them."""
    bits, block, k, zero = _check_attrs(attrs)
    n_blocks = -(-k // block)
    qweight, scales = tensor(types[0], 0), tensor(types[1], 1)
    if qweight.dtype != "uint8" or len(qweight.shape) != 3:
        raise RuleError(f"qweight must be a uint8 (N, n_blocks, block bytes) tensor, got {qweight}")
    want = (n_blocks, block * bits // 8)
    for axis, w in zip((1, 2), want):
        if prove_equal(qweight.shape[axis], w) is not Proof.YES:
            raise RuleError(f"qweight axis {axis} is {qweight.shape[axis]}; K={k}, block_size={block} and "
                            f"bits={bits} need {w}")
    rows = qweight.shape[0]
    if scales.dtype != "float32" or len(scales.shape) != 2 or prove_equal(scales.shape[0], rows) is Proof.NO \
            or prove_equal(scales.shape[1], n_blocks) is not Proof.YES:
        raise RuleError(f"scales must be float32 ({rows_name}={rows}, n_blocks={n_blocks}), got {scales}")
    index = 2
    if zero != "default":
        if len(types) < 3:
            raise RuleError(f"zero={zero!r} needs the zeros as the argument after the scales")
        z = tensor(types[2], 2)
        dtype = "uint8" if zero == "uint8" else "float32"
        if z.dtype != dtype or len(z.shape) != 2 or prove_equal(z.shape[0], rows) is Proof.NO \
                or prove_equal(z.shape[1], n_blocks) is not Proof.YES:
            raise RuleError(f"zero={zero!r} needs {dtype} ({rows_name}={rows}, n_blocks={n_blocks}) zeros, got {z}")
        index = 3
    return rows, index


def _matmul_rule(types, attrs):
    rows, index = _check_weights(types[1:], attrs, "N")
    x = tensor(types[0], 0)
    if x.dtype != "float32" or not x.shape:
        raise RuleError(f"x must be a float32 tensor of rank >= 1, got {x}")
    if prove_equal(x.shape[-1], attrs["K"]) is Proof.NO:
        raise RuleError(f"x's last axis is {x.shape[-1]}, K is {attrs['K']}")
    n = attrs["N"]
    if prove_equal(rows, n) is not Proof.YES:
        raise RuleError(f"qweight has {rows} rows, N is {n}")
    if attrs["act"] not in ("f32", "int8"):
        raise RuleError(f"act must be 'f32' or 'int8', got {attrs['act']!r}")
    if attrs["has_bias"]:
        if len(types) != index + 2:
            raise RuleError("has_bias needs a bias argument after the weights")
        b = tensor(types[index + 1], index + 1)
        if b.dtype != "float32" or len(b.shape) != 1 or prove_equal(b.shape[0], n) is not Proof.YES:
            raise RuleError(f"the bias must be float32 (N={n},), got {b}")
    elif len(types) != index + 1:
        raise RuleError(f"{len(types)} arguments; the attributes need {index + 1}")
    return TensorType((*x.shape[:-1], as_expr(n)), "float32")


def _gather_rule(types, attrs):
    _, index = _check_weights(types, attrs, "rows")
    if len(types) != index + 1:
        raise RuleError(f"{len(types)} arguments; the attributes need {index + 1} (the weights, then the indices)")
    ids = tensor(types[index], index)
    if ids.dtype not in ("int32", "int64"):
        raise RuleError(f"the indices must be int32 or int64, got {ids.dtype}")
    return TensorType((*ids.shape, as_expr(attrs["K"])), "float32")


def dequantize_blocks(qweight, scales, zero=None, *, K, bits, block_size, mode="default"):
    """The float32 (rows, K) weight of the packed blocks (the layout in the module docstring)."""
    q = np.asarray(qweight, np.uint8)
    rows, n_blocks, _ = q.shape
    if bits == 4:
        vals = np.stack([q & 0x0F, q >> 4], axis=-1).reshape(rows, n_blocks, block_size)
    else:
        vals = q.reshape(rows, n_blocks, block_size)
    vals = vals.astype(np.float32)
    s = np.asarray(scales, np.float32)[:, :, None]
    if mode == "default":
        w = (vals - np.float32(1 << (bits - 1))) * s
    elif mode == "uint8":
        w = (vals - np.asarray(zero, np.uint8).astype(np.float32)[:, :, None]) * s
    elif mode == "float":
        w = vals * s + np.asarray(zero, np.float32)[:, :, None]
    else:
        raise ValueError(f"unknown zero mode {mode!r}")
    return np.ascontiguousarray(w.reshape(rows, n_blocks * block_size)[:, :K], dtype=np.float32)


def quantize_rows_int8(x, block_size):
    """x (..., K) float32 quantized per block of block_size along K to int8 with
    scale max|x| / 127 (round half to even), then dequantized again: the
    activations that act="int8" computes with."""
    x = np.asarray(x, np.float32)
    k = x.shape[-1]
    pad = -k % block_size
    xp = np.concatenate([x, np.zeros((*x.shape[:-1], pad), np.float32)], axis=-1) if pad else x
    blocks = xp.reshape(*x.shape[:-1], -1, block_size)
    amax = np.abs(blocks).max(axis=-1, keepdims=True)
    scale = (amax / np.float32(127)).astype(np.float32)
    safe = np.where(scale == 0, np.float32(1), scale)
    q = np.clip(np.rint(blocks / safe), -127, 127)
    return (q * scale).reshape(xp.shape)[..., :k].astype(np.float32)


def matmul_nbits_reference(x, qweight, scales, *rest, K, N, bits, block_size, zero="default", has_bias=False,
                           act="f32"):
    rest = list(rest)
    z = rest.pop(0) if zero != "default" else None
    bias = rest.pop(0) if has_bias else None
    w = dequantize_blocks(qweight, scales, z, K=K, bits=bits, block_size=block_size, mode=zero)
    x = np.asarray(x, np.float32)
    if act == "int8":
        x = quantize_rows_int8(x, block_size)
    y = np.matmul(x, w.T)
    if bias is not None:
        y = y + np.asarray(bias, np.float32)
    return y.astype(np.float32)


def gather_nbits_reference(qweight, scales, *rest, K, bits, block_size, zero="default"):
    rest = list(rest)
    z = rest.pop(0) if zero != "default" else None
    ids = np.asarray(rest[0]).astype(np.int64)
    rows = qweight.shape[0]
    if ids.size and (ids.min() < -rows or ids.max() >= rows):
        raise ValueError(f"an index is outside [-{rows}, {rows})")
    ids = np.where(ids < 0, ids + rows, ids)
    flat = ids.reshape(-1)
    w = dequantize_blocks(qweight[flat], scales[flat], None if z is None else z[flat], K=K, bits=bits,
                          block_size=block_size, mode=zero)
    return w.reshape(*ids.shape, K)


register(Op("matmul_nbits", _matmul_rule, matmul_nbits_reference,
            attrs={"K": REQUIRED, "N": REQUIRED, "bits": REQUIRED, "block_size": REQUIRED, "zero": "default",
                   "has_bias": False, "act": "f32"},
            kind="opaque", num_args=(3, 5), doc="x @ W^T with W packed in 4/8-bit blocks and per-block scales"))
register(Op("gather_nbits", _gather_rule, gather_nbits_reference,
            attrs={"K": REQUIRED, "bits": REQUIRED, "block_size": REQUIRED, "zero": "default"},
            kind="opaque", num_args=(3, 4), doc="rows of a table packed in 4/8-bit blocks, dequantized"))
