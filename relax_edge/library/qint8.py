"""The int8 kernels of the C runtime (runtime_c/kernels/qgemm.c, qconv.c) as
`call_extern`s of qdense and qconv2d (relax_edge/op/quant_int8.py):
transform/legalize.py asks `lower_call` for them.

1. The C convention is the library's (relax_edge/library/kernels.py): the
   pointers (x, the packed weights, bias, multiplier, shift, the output,
   then the scratch when there is one), the int64 sizes, `rxe_error_t* err`.
   The zero points, the clamp and `dtypes` (1: x is uint8, 2: the output
   is uint8) are sizes.
2. The weights are packed by the code generator (attrs "pack", through
   library.pack): int8, uint8 weights stored as w - 128 with w_zero - 128
   (the kernels see only int8 weights), in the panel layout of
   runtime_c/include/relax_edge/kernels_qint8.h, led by the column sums that
   fold x_zero into the bias at run time. One layout for every target.
3. Depthwise convolutions (groups == c == o) of up to 64 taps take their
   own kernel (no packing beyond the uint8 fold; scratch for the image
   channels last when the output plane is small, else for one channel's
   window as int16, `depthwise_scratch_bytes`); others
   (larger depthwise kernels too, one channel per group) go through im2col
   into the int8 GEMM with scratch for one block of output pixels (an NHWC
   slice of the input and the block's im2col rows, `conv_scratch_bytes`,
   which the memory planner sees; a 1x1 stride-1 kernel needs the slice
   only). The convolution weights' k order is (ky, kx, ci).
4. The ExternDecl's reference is the operator's numpy reference (the
   interpreter runs the legalized module); "params" carries the attributes.

Refused (a clear error naming the node): weights of unknown shape, x
or weights of other than int8 / uint8, a reduction depth (C/groups * kh *
kw, or K) above MAX_K.
"""

from __future__ import annotations

import numpy as np

from ..errors import RelaxEdgeError
from ..ir.expr import Call
from ..ir.shape import as_expr, min_expr
from . import lowering_target
from .data_dependent import runtime_call

NR, KG = 8, 4            # RXE_QINT8_NR, RXE_QINT8_KG
MAX_K = 65536            # RXE_QINT8_MAX_K
CONV_PIXELS = 64         # RXE_QCONV_PIXELS
DEPTHWISE_MAX_TAPS = 64  # DW_MAX_TAPS (qconv.c)
DEPTHWISE_NHWC_PIXELS, DEPTHWISE_NHWC_TAPS = 1024, 25   # RXE_QDEPTHWISE_NHWC_PIXELS / _TAPS
X_UNSIGNED, OUT_UNSIGNED = 1, 2
DW_PLANES_ONLY = 4        # RXE_QINT8_DW_PLANES_ONLY: the depthwise scratch holds the phase planes alone
DENSE = "rxe_lib_qdense_s8"
CONV2D = "rxe_lib_qconv2d_s8"
DEPTHWISE = "rxe_lib_qdepthwise_conv2d_s8"
_RANGES = {"int8": (-128, 127), "uint8": (0, 255)}
_INT8 = tuple(_RANGES)


class QInt8LowerError(RelaxEdgeError):
    """A qdense / qconv2d call that the int8 kernels do not cover."""


# ------------------------------------------------------------------ packing

def signed_weights(w: np.ndarray) -> np.ndarray:
    """int8 weights as they are; uint8 weights as w - 128 (int8)."""
    if w.dtype == np.uint8:
        return (w.astype(np.int16) - 128).astype(np.int8)
    if w.dtype != np.int8:
        raise ValueError(f"int8 kernels take int8 or uint8 weights, got {w.dtype}")
    return w


def packed_bytes(n: int, k: int) -> int:
    """RXE_QINT8_PACKED_BYTES(n, k)."""
    panels = -(-n // NR)
    return panels * NR * 4 + panels * (-(-k // KG)) * NR * KG


def pack_qdense_weights(w: np.ndarray) -> np.ndarray:
    """W (n, k) int8 / uint8 -> int8 bytes: ceil(n/8)*8 int32 column sums
    (of the signed weights), then ceil(n/8) panels of ceil(k/4) groups, each
    8 columns x 4 k (column c, k 4g+j at byte 4c+j), zeros past n and k."""
    ws = signed_weights(np.asarray(w))
    n, k = ws.shape
    panels, groups = -(-n // NR), -(-k // KG)
    padded = np.zeros((panels * NR, groups * KG), np.int8)
    padded[:n, :k] = ws
    sums = padded.astype(np.int32).sum(axis=1).astype("<i4")
    tiles = padded.reshape(panels, NR, groups, KG).transpose(0, 2, 1, 3)
    return np.concatenate([sums.view(np.int8), np.ascontiguousarray(tiles).reshape(-1)])


def unpack_qdense_weights(packed: np.ndarray, n: int, k: int) -> np.ndarray:
    """The signed weights (n, k) back from pack_qdense_weights."""
    panels, groups = -(-n // NR), -(-k // KG)
    tiles = packed[panels * NR * 4:].reshape(panels, groups, NR, KG).transpose(0, 2, 1, 3)
    return tiles.reshape(panels * NR, groups * KG)[:n, :k].copy()


def pack_qconv2d_weights(w: np.ndarray, groups: int) -> np.ndarray:
    """W (o, c/groups, kh, kw) -> per group the (o/groups, kh*kw*c/groups) matrix, k in the order
    (ky, kx, ci) (the kernel's NHWC im2col rows), packed as for qdense, one group after the other."""
    o = w.shape[0]
    if o % groups:
        raise ValueError(f"pack_qconv2d_weights: groups {groups} does not divide the {o} output channels")
    matrix = np.asarray(w).transpose(0, 2, 3, 1).reshape(groups, o // groups, -1)
    return np.concatenate([pack_qdense_weights(part) for part in matrix])


def pack_qdepthwise_weights(w: np.ndarray, groups: int = 1) -> np.ndarray:
    """W (c, 1, kh, kw) -> c*kh*kw int8 (uint8 as w - 128)."""
    del groups
    return np.ascontiguousarray(signed_weights(np.asarray(w))).reshape(-1)


def pack_qdense_for_codegen(w: np.ndarray, groups: int = 1) -> np.ndarray:
    del groups
    return pack_qdense_weights(w)


# library.pack's packer names -> (data, groups) -> packed bytes
PACKERS = {"qdense": pack_qdense_for_codegen, "qconv2d": pack_qconv2d_weights, "qdepthwise": pack_qdepthwise_weights}


def _block_rows_cols(oh, ow):
    """RXE_QCONV_BLOCK_ROWS / _COLS: whole rows of up to CONV_PIXELS pixels, or CONV_PIXELS columns."""
    if ow < CONV_PIXELS:
        return min(CONV_PIXELS // ow, oh), ow
    return 1, CONV_PIXELS


def conv_scratch_bytes(cg, kh, kw, oh, ow, strides=(1, 1), dilation=(1, 1)):
    """Bytes of scratch of rxe_lib_qconv2d_s8 (RXE_LIB_QCONV2D_SCRATCH_BYTES): a block's NHWC input
    slice, then (but for a 1x1 kernel of stride 1) its im2col rows. A bound when oh or ow is symbolic."""
    (sh, sw), (dh, dw) = strides, dilation
    pointwise = kh == 1 and kw == 1 and sh == 1 and sw == 1
    span_h, span_w = (kh - 1) * dh + 1, (kw - 1) * dw + 1
    if isinstance(oh, int) and isinstance(ow, int):
        rows, cols = _block_rows_cols(oh, ow)
        return ((rows - 1) * sh + span_h) * ((cols - 1) * sw + span_w) * cg + (0 if pointwise else
                                                                                 rows * cols * cg * kh * kw)
    # rows * cols <= CONV_PIXELS, rows, cols <= CONV_PIXELS
    pixels = min_expr(as_expr(oh) * ow, CONV_PIXELS)
    slice_bound = (CONV_PIXELS * (sh * sw + sh * span_w + sw * span_h) + span_h * span_w) * cg
    return slice_bound + (0 if pointwise else pixels * cg * kh * kw)


def depthwise_nhwc(kh, kw, oh, ow):
    """RXE_QDEPTHWISE_NHWC: does the depthwise kernel take its channels-last path (True, False, or None
    when oh / ow are symbolic)?"""
    if not (isinstance(oh, int) and isinstance(ow, int)):
        return None
    return oh * ow <= DEPTHWISE_NHWC_PIXELS and kh * kw <= DEPTHWISE_NHWC_TAPS


def depthwise_planes_only(target) -> bool:
    """Does `target`'s depthwise kernel take the phase planes for every size (a microcontroller whose cflags
    give __ARM_FEATURE_DSP without NEON: qdepthwise_dsp.c)? Then its scratch is sized for the planes alone and
    the call says so (RXE_QINT8_DW_PLANES_ONLY), which keeps any other path of the kernel off the
    channels-last one."""
    return (target is not None and target.os == "none" and "dsp" in target.features
            and "neon" not in target.features)


def depthwise_scratch_bytes(kh, kw, oh, ow, strides=(1, 1), dilation=(1, 1), c=None, h=None, w=None,
                            planes_only=False):
    """Bytes of scratch of rxe_lib_qdepthwise_conv2d_s8 (RXE_LIB_QDEPTHWISE_SCRATCH_BYTES): small output
    planes (depthwise_nhwc) one image NHWC as bytes, the channels padded to 16, or the planes where they
    are larger (a Cortex-M with DSP takes them for every size); others one channel's window as int16 in
    stride_h * stride_w phase planes of (oh + (kh-1)*dh // sh + 1) rows x (ow + (kw-1)*dw // sw)
    columns. With symbolic sizes, a bound (both together). c, h and w (the input's channels and size)
    are needed where the channels-last path may run; `planes_only`: the planes alone."""
    (sh, sw), (dh, dw) = strides, dilation
    oh, ow = _const(oh), _const(ow)
    planes = sh * sw * (as_expr(oh) + (kh - 1) * dh // sh + 1) * (as_expr(ow) + (kw - 1) * dw // sw) * 2
    path = False if planes_only else depthwise_nhwc(kh, kw, oh, ow)
    if path is not False and (c is None or h is None or w is None):
        raise ValueError(f"depthwise_scratch_bytes: a {oh}x{ow} output may take the channels-last path, "
                         "which needs the input's c, h and w")
    nhwc = None if path is False else as_expr(_const(h)) * _const(w) * ((as_expr(_const(c)) + 15) // 16 * 16)
    if path is False:
        total = planes
    elif nhwc.is_const and planes.is_const:   # either may run (a Cortex-M with DSP takes the planes)
        total = as_expr(max(nhwc.value, planes.value))
    else:
        total = nhwc + planes
    return total.value if total.is_const else total


# ------------------------------------------------------------------ lowering

def _where(call: Call) -> str:
    return call.op.name + (f" (node {call.span})" if call.span else "")


def _common(call: Call, k):
    """The checked dtypes and the zero-point / clamp / dtypes sizes."""
    x, w = call.args[0], call.args[1]
    xt, wt = x.type.dtype, w.type.dtype
    if xt not in _INT8 or wt not in _INT8 or call.type.dtype not in _INT8:
        raise QInt8LowerError(f"{_where(call)}: x {xt}, weights {wt} and result {call.type.dtype} "
                              "must be int8 or uint8")
    if not isinstance(k, int) or k > MAX_K:
        raise QInt8LowerError(f"{_where(call)}: reduction depth {k} is not a constant up to {MAX_K}")
    a = call.attrs
    w_zero = int(a.get("w_zero", 0)) - (128 if wt == "uint8" else 0)
    dtypes = (X_UNSIGNED if xt == "uint8" else 0) | (OUT_UNSIGNED if call.type.dtype == "uint8" else 0)
    lo, hi = _RANGES[call.type.dtype]
    act_min = lo if a.get("act_min") is None else int(a["act_min"])
    act_max = hi if a.get("act_max") is None else int(a["act_max"])
    return [int(a["x_zero"]), w_zero, int(a["out_zero"]), act_min, act_max, dtypes]


def _weight_shape(call: Call):
    w = call.args[1]
    if w.type.shape is None or not all(d.is_const for d in w.type.shape):
        raise QInt8LowerError(f"{_where(call)}: the weights must be a constant of known shape")
    return tuple(d.value for d in w.type.shape)


def _product(dims):
    total = as_expr(1)
    for d in dims:
        total = total * d
    return total


def _const(dim):
    """A dimension as an int when it is a constant."""
    d = as_expr(dim)
    return d.value if d.is_const else d


def _qdense(call: Call):
    n, k = _weight_shape(call)
    m = _product(call.args[0].type.shape[:-1])
    return DENSE, [m, n, k, *_common(call, k)], ((1, "qdense"),), None


def _qconv2d(call: Call):
    o, cg, kh, kw = _weight_shape(call)
    nb, c, h, wd = call.args[0].type.shape
    _, _, oh, ow = call.type.shape
    a = call.attrs
    (sh, sw), (pt, pl, _, _) = a.get("strides", (1, 1)), a.get("padding", (0, 0, 0, 0))
    (dh, dw), groups = a.get("dilation", (1, 1)), int(a.get("groups", 1))
    tail = _common(call, cg * kh * kw)
    if groups == o and cg == 1 and c.is_const and c.value == o and kh * kw <= DEPTHWISE_MAX_TAPS:
        planes_only = depthwise_planes_only(lowering_target())
        scratch = depthwise_scratch_bytes(kh, kw, oh, ow, (int(sh), int(sw)), (int(dh), int(dw)), c, h, wd,
                                          planes_only)
        if planes_only:
            tail[-1] |= DW_PLANES_ONLY
        return (DEPTHWISE, [nb, c, h, wd, kh, kw, oh, ow, sh, sw, pt, pl, dh, dw, *tail], ((1, "qdepthwise"),),
                scratch)
    scratch = conv_scratch_bytes(cg, kh, kw, _const(oh), _const(ow), (int(sh), int(sw)), (int(dh), int(dw)))
    return (CONV2D, [nb, c, h, wd, o, kh, kw, oh, ow, sh, sw, pt, pl, dh, dw, groups, *tail], ((1, "qconv2d"),),
            scratch)


LOWERINGS = {"qdense": _qdense, "qconv2d": _qconv2d}


def lower_call(call: Call):
    """(CallExtern, ExternDecl) of the int8 kernel for a qdense / qconv2d call, or None."""
    lowering = LOWERINGS.get(call.op.name)
    if lowering is None:
        return None
    symbol, sizes, pack, scratch = lowering(call)
    return runtime_call(call, symbol, list(call.args), sizes, {"pack": pack, "scratch_bytes": scratch})
