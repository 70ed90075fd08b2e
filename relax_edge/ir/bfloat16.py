"""bfloat16 without a numpy dtype: a bfloat16 tensor is held as a uint16
array of its bits (an ml_dtypes bfloat16 array is accepted and viewed so),
computed in float32 and rounded to nearest even when narrowed, NaN kept
quiet, as runtime_c/src/half.c does in compiled kernels. Results handed
back (`public`) are ml_dtypes bfloat16 arrays when the caller has loaded
ml_dtypes (relax_edge never imports it), else the uint16 bits."""

from __future__ import annotations

import sys

import numpy as np

from .types import TensorType

__all__ = ["is_bfloat16_array", "is_bfloat16_type", "bits", "widen", "narrow", "public", "involved",
           "call_in_float32"]


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
        u = np.array(x, dtype=np.float32, ndmin=0).view(np.uint32)
    rounded = ((u.astype(np.uint64) + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    quiet_nan = ((u >> 16) | 0x40).astype(np.uint16)
    return np.where((u & 0x7FFFFFFF) > 0x7F800000, quiet_nan, rounded)


def public(b) -> np.ndarray:
    """bfloat16 bits as handed back to the caller: an ml_dtypes bfloat16 view when ml_dtypes is loaded."""
    ml_dtypes = sys.modules.get("ml_dtypes")
    return b.view(ml_dtypes.bfloat16) if ml_dtypes is not None else b


def is_bfloat16_type(t) -> bool:
    return isinstance(t, TensorType) and t.dtype == "bfloat16"


def involved(call) -> bool:
    """Whether an operator call takes, makes or casts to bfloat16."""
    return is_bfloat16_type(call.type) or call.attrs.get("dtype") == "bfloat16" \
        or any(is_bfloat16_type(getattr(a, "type", None)) for a in call.args)


def call_in_float32(call, args, attrs):
    """The operator's numpy reference on bfloat16 arguments (bits) widened to float32, a bfloat16
    result narrowed back to bits."""
    args = [widen(x) if is_bfloat16_type(getattr(a, "type", None)) else x for a, x in zip(call.args, args)]
    if attrs.get("dtype") == "bfloat16":
        attrs = {**attrs, "dtype": "float32"}
    with np.errstate(all="ignore"):
        out = np.asarray(call.op.reference(*args, **attrs))
    return narrow(out) if is_bfloat16_type(call.type) else out
