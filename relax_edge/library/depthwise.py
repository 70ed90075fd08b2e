"""The depthwise convolution kernel of the C runtime
(runtime_c/kernels/depthwise.c) as the compiler sees it: C symbol,
parameters (named as in C: the weights `w`, the input width `w_`) and a
numpy reference. It has no scratch buffer and reads the
(c, 1, kh, kw) weights as they are (no packing).

The reference is the meaning of the kernel, not a bit-exact copy of it: the
C kernel adds the taps to the bias one by one in (ky, kx) order in float32,
with fused multiply-adds on its AVX2 and NEON paths.
"""

from __future__ import annotations

import numpy as np

from .kernels import ACT_NONE, LibraryKernel, apply_act, conv2d_output_size

SYMBOL = "rxe_lib_depthwise_conv2d_f32"


def depthwise_conv2d_reference(x, w, bias=None, stride=(1, 1), padding=(0, 0, 0, 0), dilation=(1, 1),
                               act=ACT_NONE):
    """act(depthwise_conv2d(x (n,c,h,w), w (c,1,kh,kw)) + bias (c,)), NCHW;
    padding is (top, left, bottom, right)."""
    n, c, h, wd = x.shape
    if w.ndim != 4 or w.shape[:2] != (c, 1):
        raise ValueError(f"depthwise weights must be ({c}, 1, kh, kw) for {c} channels, got {w.shape}")
    kh, kw = w.shape[2:]
    (sh, sw), (dh, dw), (pt, pl, pb, pr) = stride, dilation, padding
    oh = conv2d_output_size(h, kh, sh, pt, pb, dh)
    ow = conv2d_output_size(wd, kw, sw, pl, pr, dw)
    if oh < 1 or ow < 1:
        raise ValueError(f"depthwise_conv2d: empty output {oh}x{ow} for input {h}x{wd} and kernel {kh}x{kw}")
    xp = np.pad(np.asarray(x, np.float64), ((0, 0), (0, 0), (pt, pb), (pl, pr)))
    y = np.zeros((n, c, oh, ow), np.float64)
    for ky in range(kh):
        for kx in range(kw):
            taps = xp[:, :, ky * dh: ky * dh + sh * (oh - 1) + 1: sh, kx * dw: kx * dw + sw * (ow - 1) + 1: sw]
            y += w[:, 0, ky, kx].reshape(1, c, 1, 1) * taps
    if bias is not None:
        y += np.asarray(bias, np.float64).reshape(1, c, 1, 1)
    return apply_act(y, act).astype(np.float32)


DEPTHWISE_CONV2D = LibraryKernel(
    SYMBOL, ("x", "w", "bias", "y"),
    ("n", "c", "h", "w_", "kh", "kw", "oh", "ow", "stride_h", "stride_w", "pad_top", "pad_left", "dil_h", "dil_w",
     "act"),
    None, depthwise_conv2d_reference)
