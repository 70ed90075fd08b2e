"""bfloat16 without a numpy dtype: a bfloat16 tensor is held as a uint16
array of its bits (an ml_dtypes bfloat16 array is accepted and viewed so),
computed in float32 and rounded to nearest even when narrowed, NaN kept
quiet, as runtime_c/src/half.c does in compiled kernels."""

from __future__ import annotations

import numpy as np

__all__ = ["is_bfloat16_array", "bits", "widen", "narrow"]


def is_bfloat16_array(arr) -> bool:
    """An array of a bfloat16 numpy dtype (ml_dtypes')."""
    return isinstance(arr, np.ndarray) and arr.dtype.name == "bfloat16"


def bits(arr) -> np.ndarray:
    """The uint16 bits of a bfloat16 tensor given as bits or as an ml_dtypes array."""
    arr = np.asarray(arr)
    return arr.view(np.uint16) if is_bfloat16_array(arr) else arr


def widen(b) -> np.ndarray:
    """bfloat16 bits -> float32 values (exact)."""
    return (np.asarray(bits(b)).astype(np.uint32) << 16).view(np.float32)


def narrow(x) -> np.ndarray:
    """float values -> bfloat16 bits: rounded to float32, then to nearest even bfloat16."""
    with np.errstate(over="ignore"):
        u = np.ascontiguousarray(np.asarray(x, dtype=np.float32)).view(np.uint32)
    rounded = ((u.astype(np.uint64) + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    quiet_nan = ((u >> 16) | 0x40).astype(np.uint16)
    return np.where((u & 0x7FFFFFFF) > 0x7F800000, quiet_nan, rounded)
