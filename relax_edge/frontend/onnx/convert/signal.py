"""ONNX import: signal operators whose results depend only on constants.

1. HannWindow, HammingWindow, BlackmanWindow (opset 17): the window of the
   constant `size`, computed at import in float64 and rounded once to
   output_datatype (periodic: N = size, symmetric: N = size - 1), as the ONNX
   reference writes them.
2. MelWeightMatrix (opset 17): the (dft_length // 2 + 1, num_mel_bins)
   triangular filter bank of constant inputs, computed at import as the ONNX
   reference does (mel points spread over num_mel_bins + 2 steps, bins
   rounded down by integer division).
"""

from __future__ import annotations

import numpy as np

from ..context import ONNX_DTYPE_NAMES, ONNX_DTYPES, converter

_WINDOW_DTYPES = ("float32", "float16", "int8", "uint8", "int32", "int64")


def _output_dtype(ctx, default=1):
    code = ctx.attr("output_datatype", default, int)
    if code not in ONNX_DTYPES or ONNX_DTYPES[code] == "bool":
        raise ctx.error(f"attribute output_datatype: element type {ONNX_DTYPE_NAMES.get(code, code)} "
                        "is not supported")
    return ONNX_DTYPES[code]


def _whole(ctx, value, index, what, least=0) -> int:
    n = ctx.scalar(value, index, what, integer=True).item()
    if not isinstance(n, (int, np.integer)):
        raise ctx.error(f"input {index} ({what}) must be a constant, got {n}")
    if n < least:
        raise ctx.error(f"input {index} ({what}) must be at least {least}, got {n}")
    return int(n)


def window(kind: str, size: int, periodic: bool) -> np.ndarray:
    """The ONNX window `kind` of `size` points, in float64."""
    n = np.arange(size, dtype=np.float64)
    length = size if periodic else size - 1
    with np.errstate(divide="ignore", invalid="ignore"):
        if kind == "HannWindow":
            return np.sin(n * np.pi / length) ** 2
        if kind == "HammingWindow":
            alpha = 25.0 / 46.0
            return alpha - np.cos(n * np.pi * 2 / length) * (1 - alpha)
        return 0.42 - 0.5 * np.cos(n * np.pi * 2 / length) + 0.08 * np.cos(n * np.pi * 4 / length)


@converter("HannWindow", "HammingWindow", "BlackmanWindow", static={0})
def convert_window(ctx, inputs):
    size = _whole(ctx, inputs[0], 0, "size")
    periodic = ctx.attr("periodic", 1, int)
    if periodic not in (0, 1):
        raise ctx.error(f"attribute periodic must be 0 or 1, got {periodic}")
    dtype = _output_dtype(ctx)
    ctx.check_constant_size([size], dtype, "the window")
    return window(ctx.node.op_type, size, bool(periodic)).astype(dtype)


def mel_weight_matrix(num_mel_bins, dft_length, sample_rate, lower_hz, upper_hz) -> np.ndarray:
    """The (dft_length // 2 + 1, num_mel_bins) filter bank, in float64."""
    bins = np.arange(num_mel_bins + 2)
    low_mel = 2595 * np.log1p(lower_hz / 700) / np.log(10)
    high_mel = 2595 * np.log1p(upper_hz / 700) / np.log(10)
    step = (high_mel - low_mel) / bins.shape[0]
    hz = 700 * np.expm1((bins * step + low_mel) / 2595 * np.log(10))
    points = (((dft_length + 1) * hz) // sample_rate).astype(int)
    out = np.zeros((dft_length // 2 + 1, num_mel_bins))
    for i in range(num_mel_bins):
        low, center, high = points[i:i + 3]
        if center == low:
            out[center, i] = 1
        else:
            for j in range(low, center + 1):
                out[j, i] = (j - low) / (center - low)
        for j in range(center, high):
            out[j, i] = (high - j) / (high - center)
    return out


@converter("MelWeightMatrix", static={0, 1, 2, 3, 4})
def convert_mel_weight_matrix(ctx, inputs):
    if len(inputs) < 5 or any(v is None for v in inputs[:5]):
        raise ctx.error("MelWeightMatrix needs its five inputs")
    num_mel_bins = _whole(ctx, inputs[0], 0, "num_mel_bins", 1)
    dft_length = _whole(ctx, inputs[1], 1, "dft_length", 1)
    sample_rate = _whole(ctx, inputs[2], 2, "sample_rate", 1)
    lower = float(ctx.scalar(inputs[3], 3, "lower_edge_hertz").item())
    upper = float(ctx.scalar(inputs[4], 4, "upper_edge_hertz").item())
    if not 0 <= lower < upper <= sample_rate / 2:
        raise ctx.error(f"the edges must satisfy 0 <= lower_edge_hertz ({lower}) < upper_edge_hertz ({upper}) "
                        f"<= sample_rate / 2 ({sample_rate / 2})")
    dtype = _output_dtype(ctx)
    ctx.check_constant_size([dft_length // 2 + 1, num_mel_bins], dtype, "the mel weight matrix")
    out = mel_weight_matrix(num_mel_bins, dft_length, sample_rate, lower, upper)
    if out.shape[0] <= 0 or not np.all(np.isfinite(out)):
        raise ctx.error("the mel weight matrix is empty or not finite")
    return out.astype(dtype)
