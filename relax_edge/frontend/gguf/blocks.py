"""GGUF tensors as the weight-only operators' packed blocks (op/quant_weight.py), without re-quantization.

A ggml block holds 32 consecutive elements of a row:

- Q8_0 (34 bytes): f16 scale d, 32 int8 q; w = q * d.
- Q4_0 (18 bytes): f16 d, 16 bytes; element j in the low nibble of byte j,
  element j + 16 in its high nibble; w = (q - 8) * d.
- Q4_1 (20 bytes): f16 d, f16 m, 16 bytes as Q4_0; w = q * d + m.

`packed_blocks(raw, type_name)` gives (qweight, scales, zero, attrs): qweight
uint8 (rows, n_blocks, 16 or 32) with 4-bit elements 2j / 2j + 1 in the low /
high nibble of byte j (the nibbles reordered), 8-bit elements stored q + 128;
scales float32 (F16 widened exactly); zero None ("default") or the float32
offsets m ("float"). `attrs` are matmul_nbits' / gather_nbits' bits,
block_size and zero. `float_weight` reads F32 / F16 / BF16 as float32.
"""

from __future__ import annotations

import numpy as np

from .reader import GGUFError

__all__ = ["packed_blocks", "float_weight", "BLOCK_TYPES"]

BLOCK_TYPES = ("Q8_0", "Q4_0", "Q4_1")


def _f16(raw, start: int) -> np.ndarray:
    return np.ascontiguousarray(raw[:, :, start:start + 2]).view("<f2")[:, :, 0].astype(np.float32)


def _interleave(nibbles: np.ndarray) -> np.ndarray:
    """GGUF's 16 bytes (j low, j + 16 high) -> the contract's (2j low, 2j + 1 high)."""
    vals = np.concatenate([nibbles & 0x0F, nibbles >> 4], axis=-1)   # elements 0..31 in order
    return (vals[..., 0::2] | (vals[..., 1::2] << 4)).astype(np.uint8)


def packed_blocks(raw: np.ndarray, type_name: str, what: str = "tensor"):
    """(qweight, scales, zero or None, attrs) of raw uint8 blocks (rows, n_blocks, block bytes)."""
    raw = np.asarray(raw, np.uint8)
    if type_name == "Q8_0":
        q = (raw[:, :, 2:34] ^ 0x80).astype(np.uint8)   # int8 two's complement + 128
        return q, _f16(raw, 0), None, {"bits": 8, "block_size": 32, "zero": "default"}
    if type_name == "Q4_0":
        return _interleave(raw[:, :, 2:18]), _f16(raw, 0), None, {"bits": 4, "block_size": 32, "zero": "default"}
    if type_name == "Q4_1":
        return (_interleave(raw[:, :, 4:20]), _f16(raw, 0), _f16(raw, 2),
                {"bits": 4, "block_size": 32, "zero": "float"})
    raise GGUFError(f"{what}: type {type_name} has no packed-block form (supported: {', '.join(BLOCK_TYPES)})")


def float_weight(data: np.ndarray, type_name: str, what: str = "tensor") -> np.ndarray:
    """An F32 / F16 / BF16 tensor's data as float32 (exact)."""
    if type_name == "F32":
        return np.asarray(data, np.float32)
    if type_name == "F16":
        return np.asarray(data).astype(np.float32)
    if type_name == "BF16":
        return (np.asarray(data, np.uint16).astype(np.uint32) << 16).view(np.float32)
    raise GGUFError(f"{what}: type {type_name} is not a float type")
