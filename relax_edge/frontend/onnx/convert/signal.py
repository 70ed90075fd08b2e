"""ONNX import: signal operators whose results depend only on constants.

1. HannWindow, HammingWindow, BlackmanWindow (opset 17): the window of the
   constant `size`, computed at import in float64 and rounded once to
   output_datatype (periodic: N = size, symmetric: N = size - 1), as the ONNX
   reference writes them.
2. MelWeightMatrix (opset 17): the (dft_length // 2 + 1, num_mel_bins)
   triangular filter bank of constant inputs, computed at import as the ONNX
   reference does (mel points spread over num_mel_bins + 2 steps, bins
   rounded down by integer division).
3. DFT (opsets 17, 20) as one matmul of the signal (components before
   samples, flattened: [re..., im...]) by a constant (c * n_in, c_out * k)
   matrix of cosines and sines, computed in float64 and rounded once: the
   axis moved last, truncated or zero-padded to dft_length first; inverse
   scales by 1 / n; onesided keeps n // 2 + 1 bins, and inverse onesided is
   the inverse real transform (real output, bins 1 .. n/2 - 1 counted twice,
   the imaginary parts of bins 0 and n/2 ignored, as numpy's irfft). The
   transformed axis must be static; dft_length and axis must be constants.
4. STFT (opset 17): the frames gathered by a constant index (a take), times
   the window, then the DFT along the frame axis; the signal length, the
   frame step and the frame length must be static.
"""

from __future__ import annotations

import numpy as np

from ....ir.shape import as_expr
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


# --------------------------------------------------------------------------------------------- DFT

def dft_matrix(n_in: int, n: int, components: int, inverse: bool, onesided: bool) -> np.ndarray:
    """The float64 matrix taking [re (n_in), im (n_in)] (or re only) to [re (k), im (k)], or to a
    real signal of n samples for the inverse onesided transform (n_in bins, n_in <= n // 2 + 1)."""
    sign = 1.0 if inverse else -1.0
    if inverse and onesided:
        k = np.arange(n_in)[:, None]
        angle = 2 * np.pi * k * np.arange(n)[None, :] / n
        weight = np.where((k == 0) | (2 * k == n), 1.0, 2.0)
        rows = [weight * np.cos(angle), -weight * np.sin(angle)]
        return np.concatenate(rows[:components], axis=0) / n
    bins = n // 2 + 1 if onesided else n
    angle = 2 * np.pi * np.arange(n_in)[:, None] * np.arange(bins)[None, :] / n
    cos, sin = np.cos(angle), np.sin(angle)
    rows = [np.concatenate([cos, sign * sin], axis=1)]          # what re contributes to (re, im)
    if components == 2:
        rows.append(np.concatenate([-sign * sin, cos], axis=1))  # what im contributes
    out = np.concatenate(rows, axis=0)
    return out / n if inverse else out


def dft(ctx, x, axis: int, n: int | None, inverse: bool, onesided: bool):
    """The DFT of `x` (..., components) along `axis` (see the module's docstring)."""
    t = ctx.type_of(x)
    dims, rank = list(t.shape), len(t.shape)
    if t.dtype not in ("float32", "float16", "float64"):
        raise ctx.error(f"the input of type {t.dtype} is not supported (float32, float16, float64)")
    if rank < 2 or not -rank <= axis < rank or axis % rank == rank - 1:
        raise ctx.error(f"axis {axis} must name a signal axis of the rank-{rank} input (not its last, "
                        "the components)")
    axis %= rank
    components = dims[-1]
    if not components.is_const or int(components.value) not in (1, 2):
        raise ctx.error(f"the last dim must be 1 (real) or 2 (complex), got {components}")
    components = int(components.value)
    if not dims[axis].is_const:
        raise ctx.error(f"the transformed axis {axis} must be static, got {dims[axis]}")
    length = int(dims[axis].value)
    if n is None:
        n = 2 * (length - 1) if inverse and onesided else length
    if n < 1:
        raise ctx.error(f"dft_length must be positive, got {n}")
    n_in = n // 2 + 1 if inverse and onesided else n
    others = [i for i in range(rank - 1) if i != axis]
    perm = others + [rank - 1, axis]
    x = ctx.emit("transpose", [x], {"axes": tuple(perm)})
    if length > n_in:
        x = ctx.emit("strided_slice", [x], {"begin": (0,), "end": (n_in,), "axes": (rank - 1,)})
    elif length < n_in:
        x = ctx.emit("pad", [x], {"pads": (0,) * (2 * rank - 1) + (n_in - length,)})
    outer = [dims[i] for i in others]
    x = ctx.emit("reshape", [x], {"shape": (*outer, as_expr(components * n_in))})
    matrix = dft_matrix(n_in, n, components, inverse, onesided)
    ctx.check_constant_size(matrix.shape, "float64", "the DFT matrix")
    if t.dtype != "float64":
        x = ctx.emit("cast", [x], {"dtype": "float64"})
    y = ctx.emit("matmul", [x, matrix])
    if t.dtype != "float64":
        y = ctx.emit("cast", [y], {"dtype": t.dtype})
    out_components = 1 if inverse and onesided else 2
    bins = matrix.shape[1] // out_components
    y = ctx.emit("reshape", [y], {"shape": (*outer, as_expr(out_components), as_expr(bins))})
    return ctx.emit("transpose", [y], {"axes": tuple(int(i) for i in np.argsort(perm))})


def _flag(ctx, name):
    value = ctx.attr(name, 0, int)
    if value not in (0, 1):
        raise ctx.error(f"attribute {name} must be 0 or 1, got {value}")
    return bool(value)


def _optional(inputs, index):
    return inputs[index] if len(inputs) > index else None


@converter("DFT", static={1, 2})
def convert_dft(ctx, inputs):
    x = inputs[0]
    n = None
    if _optional(inputs, 1) is not None:
        n = _whole(ctx, inputs[1], 1, "dft_length", 1)
    if ctx.opset < 20:
        axis = ctx.attr("axis", 1, int)
    else:
        axis = -2
        if _optional(inputs, 2) is not None:
            axis = _whole(ctx, inputs[2], 2, "axis", -(1 << 62))
    return dft(ctx, x, axis, n, _flag(ctx, "inverse"), _flag(ctx, "onesided"))


@converter("STFT", static={1, 3})
def convert_stft(ctx, inputs):
    signal, window = inputs[0], _optional(inputs, 2)
    dims = ctx.type_of(signal).shape
    if len(dims) != 3:
        raise ctx.error(f"the signal must have rank 3 (batch, length, 1 or 2), got rank {len(dims)}")
    if not dims[1].is_const:
        raise ctx.error(f"the signal length must be static, got {dims[1]}")
    length = int(dims[1].value)
    step = _whole(ctx, inputs[1], 1, "frame_step", 1)
    if _optional(inputs, 3) is not None:
        frame = _whole(ctx, inputs[3], 3, "frame_length", 1)
    elif window is not None:
        frame = ctx.type_of(window).shape[0]
        if not frame.is_const:
            raise ctx.error(f"the window length must be static, got {frame}")
        frame = int(frame.value)
    else:
        frame = length
    if window is not None:
        wdims = ctx.type_of(window).shape
        if len(wdims) != 1 or not wdims[0].is_const or int(wdims[0].value) != frame:
            raise ctx.error(f"the window must have shape ({frame},), got {tuple(wdims)}")
    if frame > length:
        raise ctx.error(f"frame_length {frame} is longer than the signal ({length})")
    frames = (length - frame) // step + 1
    index = (np.arange(frames)[:, None] * step + np.arange(frame)[None, :]).astype(np.int64)
    x = ctx.emit("take", [signal, index], {"axis": 1})  # (batch, frames, frame, components)
    if window is not None:
        x = ctx.emit("multiply", [x, ctx.emit("reshape", [window], {"shape": (as_expr(frame), as_expr(1))})])
    onesided = ctx.attr("onesided", 1, int)
    if onesided not in (0, 1):
        raise ctx.error(f"attribute onesided must be 0 or 1, got {onesided}")
    return dft(ctx, x, 2, frame, False, bool(onesided))
