"""The GEMM-family library kernels of the C runtime (runtime_c/kernels/gemm.c,
conv.c), as the compiler sees them: C symbol, parameters, scratch bytes,
compile-time weight packing and a numpy reference.

1. `KERNELS` maps each C symbol to a `LibraryKernel`. The C calling
   convention is: the pointers (in `pointers` order), then the int64 sizes
   (in `sizes` order), then `rxe_error_t* err`; the kernel returns a status.
2. The packers give the exact layout the C kernels read
   (runtime_c/include/relax_edge/kernels.h); MR, NR, KC and NC mirror the
   RXE_GEMM_* macros there and must change with them. KC and NC are the
   defaults: a board's tuning table (relax_edge/tuning.py) may set others,
   which the build passes to C as -D flags and to the scratch mirrors
   through `blocking` (active inside `using_blocking`); the scratch is the
   larger of its size under the table's blocks and under the defaults, so
   that it fits a runtime compiled either way. One packed W serves
   both paths of rxe_lib_dense_f32 (m is known only at run time): the
   blocked GEMM and, up to GEMV_MAX_M rows, the matrix-vector path.
3. The scratch functions mirror RXE_LIB_*_SCRATCH_BYTES: they take ints
   (and return an int) or symbolic sizes (and return an IntExpr).
4. The references compute from UNPACKED weights with numpy; they are the
   meaning of the kernels, not bit-exact copies of them (the C kernels sum in
   blocks of KC and use fused multiply-adds where the target has them).
"""

from __future__ import annotations

import contextlib
import contextvars
from dataclasses import dataclass, field
from typing import Callable, Mapping

import numpy as np

from ..ir.shape import as_expr, floordiv, max_expr, min_expr

MR, NR, KC, NC = 6, 16, 256, 512   # RXE_GEMM_MR, _NR, _KC, _NC
GEMV_MAX_M = 4   # RXE_GEMV_MAX_M: rxe_lib_dense_f32 takes its matrix-vector path (gemv.c) up to this m
ACT_NONE, ACT_RELU, ACT_RELU6 = 0, 1, 2
_BLOCKING = contextvars.ContextVar("gemm_blocking", default=None)   # (KC, NC) of the build under way


def blocking() -> tuple:
    """The (KC, NC) the scratch mirrors use now: the build's tuning table's,
    else the defaults."""
    return _BLOCKING.get() or (KC, NC)


def blocking_is_set() -> bool:
    """A caller (a build with a tuning table) has set the blocking."""
    return _BLOCKING.get() is not None


@contextlib.contextmanager
def using_blocking(kc: int, nc: int):
    """The scratch mirrors use KC = kc and NC = nc inside the block (the C
    kernels must be compiled with -DRXE_GEMM_KC=kc -DRXE_GEMM_NC=nc)."""
    token = _BLOCKING.set((int(kc), int(nc)))
    try:
        yield
    finally:
        _BLOCKING.reset(token)


# ------------------------------------------------------------------ scratch

def _sized(expr, *sizes):
    """An int when every size is an int, else the symbolic expression."""
    return int(expr) if all(isinstance(s, int) for s in sizes) else expr


def _gemm_scratch(k, n):
    # the larger of the bytes under the table's KC and NC and under the defaults: the scratch then also
    # fits a runtime built without the table's flags (CMake's rxe_runtime, a runner built apart)
    columns = floordiv(as_expr(n) + (NR - 1), NR) * NR
    kc, nc = blocking()
    tuned = 4 * min_expr(k, kc) * min_expr(columns, nc)
    return tuned if (kc, nc) == (KC, NC) else max_expr(tuned, 4 * min_expr(k, KC) * min_expr(columns, NC))


def matmul_scratch_bytes(m, n, k):
    """Bytes of scratch for rxe_lib_matmul_f32 (RXE_LIB_MATMUL_SCRATCH_BYTES)."""
    return _sized(_gemm_scratch(k, n), m, n, k)


def conv2d_scratch_bytes(c, kh, kw, oh, ow, groups):
    """Bytes of scratch for rxe_lib_conv2d_f32 (RXE_LIB_CONV2D_SCRATCH_BYTES)."""
    depth = floordiv(c, groups) * kh * kw
    return _sized(_gemm_scratch(depth, as_expr(oh) * ow), c, kh, kw, oh, ow, groups)


# ------------------------------------------------------------------ packing

def pack_dense_weights(w: np.ndarray) -> np.ndarray:
    """W (k, n) -> column panels of NR: ceil(n/NR) panels of k rows x NR
    floats, zero-padded past n, flattened (float32)."""
    k, n = w.shape
    panels = -(-n // NR)
    padded = np.zeros((k, panels * NR), np.float32)
    padded[:, :n] = w
    return np.ascontiguousarray(padded.reshape(k, panels, NR).transpose(1, 0, 2)).reshape(-1)


def unpack_dense_weights(packed: np.ndarray, k: int, n: int) -> np.ndarray:
    """The inverse of pack_dense_weights: W (k, n)."""
    panels = -(-n // NR)
    return packed.reshape(panels, k, NR).transpose(1, 0, 2).reshape(k, panels * NR)[:, :n].copy()


def pack_conv2d_weights(w: np.ndarray, groups: int) -> np.ndarray:
    """W (o, c/groups, kh, kw) -> per group, the (o/groups) x (c/groups*kh*kw)
    matrix in row panels of MR: ceil(og/MR) panels of K columns x MR floats,
    zero-padded past og, flattened (float32)."""
    o = w.shape[0]
    if o % groups:
        raise ValueError(f"pack_conv2d_weights: groups {groups} does not divide the {o} output channels")
    og, depth = o // groups, int(np.prod(w.shape[1:]))
    panels = -(-og // MR)
    padded = np.zeros((groups, panels * MR, depth), np.float32)
    padded[:, :og] = w.reshape(groups, og, depth)
    return np.ascontiguousarray(padded.reshape(groups, panels, MR, depth).transpose(0, 1, 3, 2)).reshape(-1)


def unpack_conv2d_weights(packed: np.ndarray, shape: tuple, groups: int) -> np.ndarray:
    """The inverse of pack_conv2d_weights: W of `shape` (o, c/groups, kh, kw)."""
    og, depth = shape[0] // groups, int(np.prod(shape[1:]))
    panels = -(-og // MR)
    matrix = packed.reshape(groups, panels, depth, MR).transpose(0, 1, 3, 2).reshape(groups, panels * MR, depth)
    return matrix[:, :og].reshape(shape).copy()


# --------------------------------------------------------------- references

def apply_act(y: np.ndarray, act: int) -> np.ndarray:
    if act not in (ACT_NONE, ACT_RELU, ACT_RELU6):
        raise ValueError(f"activation code {act} is not 0 (none), 1 (relu) or 2 (relu6)")
    if act == ACT_RELU:
        return np.maximum(y, 0)
    if act == ACT_RELU6:
        return np.clip(y, 0, 6)
    return y


def dense_reference(a, w, bias=None, act=ACT_NONE):
    """act(a (m, k) @ w (k, n) + bias (n,))."""
    y = np.matmul(a, w, dtype=np.float32)
    return apply_act(y if bias is None else y + bias, act).astype(np.float32)


def matmul_reference(a, b):
    """a (..., m, k) @ b (..., k, n), batch dimensions broadcast."""
    return np.matmul(a, b, dtype=np.float32)


def conv2d_output_size(size, kernel, stride, pad_before, pad_after, dilation):
    return (size + pad_before + pad_after - dilation * (kernel - 1) - 1) // stride + 1


def conv2d_reference(x, w, bias=None, stride=(1, 1), padding=(0, 0, 0, 0), dilation=(1, 1), groups=1,
                     act=ACT_NONE):
    """act(conv2d(x (n,c,h,w), w (o,c/groups,kh,kw)) + bias (o,)), NCHW;
    padding is (top, left, bottom, right)."""
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    (sh, sw), (dh, dw), (pt, pl, pb, pr) = stride, dilation, padding
    oh = conv2d_output_size(h, kh, sh, pt, pb, dh)
    ow = conv2d_output_size(wd, kw, sw, pl, pr, dw)
    xp = np.pad(x, ((0, 0), (0, 0), (pt, pb), (pl, pr)))
    cols = np.empty((n, c, kh, kw, oh, ow), np.float32)
    for ky in range(kh):
        for kx in range(kw):
            cols[:, :, ky, kx] = xp[:, :, ky * dh: ky * dh + sh * (oh - 1) + 1: sh,
                                    kx * dw: kx * dw + sw * (ow - 1) + 1: sw]
    cols = cols.reshape(n, groups, cg, kh, kw, oh, ow)
    og = o // groups
    y = np.einsum("gocij,ngcijyx->ngoyx", w.reshape(groups, og, cg, kh, kw), cols).reshape(n, o, oh, ow)
    if bias is not None:
        y = y + np.asarray(bias).reshape(1, o, 1, 1)
    return apply_act(y, act).astype(np.float32)


# -------------------------------------------------------------------- table

@dataclass(frozen=True)
class LibraryKernel:
    symbol: str
    pointers: tuple            # pointer parameters, in C order (inputs, output, scratch)
    sizes: tuple               # int64 parameters, in C order
    scratch_bytes: Callable | None
    reference: Callable        # numpy, from unpacked weights
    packers: Mapping[str, Callable] = field(default_factory=dict)   # pointer -> compile-time packer


KERNELS = {k.symbol: k for k in (
    LibraryKernel("rxe_lib_dense_f32", ("a", "w_packed", "bias", "c"), ("m", "n", "k", "act"),
                  None, dense_reference, {"w_packed": pack_dense_weights}),
    LibraryKernel("rxe_lib_matmul_f32", ("a", "b", "c", "scratch"),
                  ("batch", "m", "n", "k", "a_batch_stride", "b_batch_stride"),
                  matmul_scratch_bytes, matmul_reference),
    LibraryKernel("rxe_lib_conv2d_f32", ("x", "w_packed", "bias", "y", "scratch"),
                  ("n", "c", "h", "w", "o", "kh", "kw", "oh", "ow", "stride_h", "stride_w", "pad_top",
                   "pad_left", "dil_h", "dil_w", "groups", "act"),
                  conv2d_scratch_bytes, conv2d_reference, {"w_packed": pack_conv2d_weights}),
)}
