"""ONNX operators imported over existing ones (convert/misc.py, einsum.py,
signal.py): LpPool, CumProd, Einsum, CenterCropPad, Col2Im, AffineGrid,
ReverseSequence, Upsample, Det, MaxUnpool, BitCast, the Hann / Hamming /
Blackman windows and MelWeightMatrix.

Their ONNX backend node cases; one-node models, most over a symbolic batch
`n`, interpreted at several sizes against numpy references written from the
ONNX spec (checked against ONNX Runtime where it runs the form); the cases
merged into one model compiled on the host with the C and LLVM backends (and,
slow, for qemu-aarch64); bad input refused with the node named."""

import itertools
import re
import zlib
from dataclasses import dataclass, field

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

import relax_edge as rxe
from relax_edge.frontend.onnx import node_tests
from tests.frontend.one_node import assert_matches, compiled

PREFIXES = ("test_lppool", "test_cumprod", "test_einsum", "test_center_crop_pad", "test_col2im", "test_affine_grid",
            "test_reversesequence", "test_upsample", "test_det", "test_maxunpool", "test_bitcast",
            "test_hannwindow", "test_hammingwindow", "test_blackmanwindow", "test_melweightmatrix", "test_dft",
            "test_stft")
# none refused: run-time float BitCast runs through the bitcast operator (tests/frontend/test_onnx_bitcast.py)
REFUSED: set = set()
# stored from a complex64 numpy ifft: its float32 rounding (about 2e-6 on entries that are 0) exceeds the
# cases' atol of 1e-7, for ONNX Runtime too; checked here against the stored outputs within 1e-5
NEAR = {"test_dft_inverse_opset19", "test_dft_inverse"}
NODE_CASES = [c for c in node_tests.collect_cases()
              if c.name.startswith(PREFIXES) and not node_tests.scope_problem(c.model)]


def test_every_operator_has_node_cases():
    names = {c.name for c in NODE_CASES}
    assert len(NODE_CASES) >= 70
    for prefix in PREFIXES:
        assert any(n.startswith(prefix) for n in names), prefix


@pytest.mark.parametrize("case", NODE_CASES, ids=[c.name for c in NODE_CASES])
def test_node_case(case):
    result = node_tests.run_case(case)
    if case.name in REFUSED:
        assert result.status == "unsupported" and "known only at run time is not supported" in result.detail
    elif case.name in NEAR:
        error = re.fullmatch(r"output 0: values differ \(max abs error (.*)\)", result.detail)
        assert result.status == "fail" and error and float(error.group(1)) < 1e-5, (result.status, result.detail)
    else:
        assert result.status == "pass", (result.status, result.detail)


# ------------------------------------------------ numpy references written from the ONNX spec

def lp_pool_reference(x, kernel_shape, p=2, strides=None, pads=None, dilations=None):
    """y = (sum over the window of |x|^p) ^ (1/p), the padding zeros."""
    nd = len(kernel_shape)
    strides, dilations = strides or [1] * nd, dilations or [1] * nd
    pads = pads or [0] * (2 * nd)
    xp = np.pad(np.abs(x.astype(np.float64)) ** p, [(0, 0), (0, 0)] + [(pads[i], pads[nd + i]) for i in range(nd)])
    out = [(xp.shape[2 + i] - dilations[i] * (kernel_shape[i] - 1) - 1) // strides[i] + 1 for i in range(nd)]
    y = np.zeros(x.shape[:2] + tuple(out))
    for pos in itertools.product(*map(range, out)):
        for tap in itertools.product(*map(range, kernel_shape)):
            at = tuple(pos[i] * strides[i] + tap[i] * dilations[i] for i in range(nd))
            y[(..., *pos)] += xp[(..., *at)]
    return (y ** (1.0 / p)).astype(x.dtype)


def cumprod_reference(x, axis, exclusive=0, reverse=0):
    y = np.flip(x, axis) if reverse else x
    if exclusive:
        ones = np.ones_like(np.take(y, [0], axis=axis))
        y = np.concatenate([ones, np.take(y, range(y.shape[axis] - 1), axis=axis)], axis=axis)
    y = np.cumprod(y, axis=axis, dtype=x.dtype)
    return np.flip(y, axis) if reverse else y


def center_crop_pad_reference(x, shape, axes=None):
    """Per axis: a centred crop starting at (dim - size) // 2, or zeros around, (size - dim) // 2 before."""
    axes = [a % x.ndim for a in (axes if axes is not None else range(x.ndim))]
    for a, size in zip(axes, shape):
        dim = x.shape[a]
        if size < dim:
            x = np.take(x, range((dim - size) // 2, (dim - size) // 2 + size), axis=a)
        elif size > dim:
            widths = [(0, 0)] * x.ndim
            widths[a] = ((size - dim) // 2, size - dim - (size - dim) // 2)
            x = np.pad(x, widths)
    return x


def col2im_reference(cols, image_shape, block_shape, strides=None, pads=None, dilations=None):
    """Every element of every column added back to the image position it was taken from."""
    nd = len(image_shape)
    strides, dilations = strides or [1] * nd, dilations or [1] * nd
    pads = pads or [0] * (2 * nd)
    n, ck, _ = cols.shape
    k = int(np.prod(block_shape))
    blocks = [(image_shape[i] + pads[i] + pads[nd + i] - dilations[i] * (block_shape[i] - 1) - 1) // strides[i] + 1
              for i in range(nd)]
    image = np.zeros((n, ck // k, *image_shape), np.float64)
    for ch in range(ck):
        c, tap = divmod(ch, k)
        tap = np.unravel_index(tap, block_shape)
        for b, pos in enumerate(itertools.product(*map(range, blocks))):
            at = [pos[i] * strides[i] + tap[i] * dilations[i] - pads[i] for i in range(nd)]
            if all(0 <= at[i] < image_shape[i] for i in range(nd)):
                image[(slice(None), c, *at)] += cols[:, ch, b]
    return image.astype(cols.dtype)


def affine_grid_reference(theta, size, align_corners=0):
    """grid[n, (d,) h, w] = theta[n] @ (x_w, y_h, (z_d,) 1): normalized coordinates in [-1, 1]."""
    def coords(length):
        i = np.arange(length, dtype=np.float64)
        if align_corners:
            return -1 + 2 * i / (length - 1) if length > 1 else np.array([-1.0])  # as the ONNX reference
        return -1 + (2 * i + 1) / length
    spatial = size[2:]
    grid = np.zeros((theta.shape[0], *spatial, len(spatial)))
    for pos in itertools.product(*map(range, spatial)):
        point = [coords(spatial[i])[pos[i]] for i in reversed(range(len(spatial)))] + [1.0]
        grid[(slice(None), *pos)] = theta.astype(np.float64) @ np.array(point)
    return grid.astype(theta.dtype)


def reverse_sequence_reference(x, lens, batch_axis=1, time_axis=0):
    y = x.copy()
    for b, length in enumerate(lens):
        src = [slice(None)] * x.ndim
        src[batch_axis], src[time_axis] = b, slice(length - 1, None, -1) if length else slice(0, 0)
        dst = [slice(None)] * x.ndim
        dst[batch_axis], dst[time_axis] = b, slice(0, length)
        y[tuple(dst)] = x[tuple(src)]
    return y


def max_unpool_reference(x, indices, kernel_shape, strides=None, pads=None, output_shape=None):
    nd = len(kernel_shape)
    strides, pads = strides or [1] * nd, pads or [0] * (2 * nd)
    shape = [*x.shape[:2], *((x.shape[2 + i] - 1) * strides[i] + kernel_shape[i] - pads[i] - pads[nd + i]
                             for i in range(nd))]
    y = np.zeros(int(np.prod(shape)), x.dtype)
    y[indices.reshape(-1)] = x.reshape(-1)
    y = y.reshape(shape)
    if output_shape is not None:
        y = np.pad(y, [(0, want - have) for want, have in zip(output_shape, shape)])
    return y


def window_reference(kind, size, periodic=1):
    """Hann 0.5 - 0.5 cos(2 pi n / N), Hamming 25/46 - 21/46 cos(2 pi n / N),
    Blackman 0.42 - 0.5 cos(2 pi n / N) + 0.08 cos(4 pi n / N); N = size (periodic) or size - 1."""
    n = np.arange(size, dtype=np.float64)
    length = size if periodic else size - 1
    arg = 2 * np.pi * n / length
    if kind == "HannWindow":
        return (0.5 - 0.5 * np.cos(arg)).astype(np.float32)
    if kind == "HammingWindow":
        return (25 / 46 - 21 / 46 * np.cos(arg)).astype(np.float32)
    return (0.42 - 0.5 * np.cos(arg) + 0.08 * np.cos(2 * arg)).astype(np.float32)


def upsample_nearest_reference(x, scales):
    for axis, s in enumerate(scales):
        x = np.repeat(x, int(s), axis=axis)
    return x


def dft_reference(x, axis, n=None, inverse=False, onesided=False):
    """numpy.fft along `axis` of the complex signal x[..., 0] (+ i x[..., 1]), as (re, im) last."""
    signal = x[..., 0].astype(np.float64) + (1j * x[..., 1] if x.shape[-1] == 2 else 0)
    axis = axis % x.ndim
    if inverse and onesided:
        return np.fft.irfft(signal, n=n, axis=axis)[..., None].astype(x.dtype)
    y = (np.fft.ifft if inverse else np.fft.fft)(signal, n=n, axis=axis)
    if onesided:
        y = np.take(y, range(y.shape[axis] // 2 + 1), axis=axis)
    return np.stack([y.real, y.imag], axis=-1).astype(x.dtype)


def stft_reference(signal, step, window, onesided=True):
    frame = window.shape[0]
    count = (signal.shape[1] - frame) // step + 1
    frames = np.stack([signal[:, i * step:i * step + frame] for i in range(count)], axis=1)
    return dft_reference(frames * window[:, None], 2, onesided=onesided)


def det_reference(x):
    return np.linalg.det(x.astype(np.float64)).astype(x.dtype)


# ------------------------------------------------ one-node models

F32, I64 = TensorProto.FLOAT, TensorProto.INT64
_NP = {F32: np.float32, I64: np.int64, TensorProto.INT32: np.int32, TensorProto.DOUBLE: np.float64,
       TensorProto.UINT16: np.uint16, TensorProto.INT8: np.int8}


@dataclass
class Case:
    name: str
    op_type: str
    inputs: list                  # (name, element type, shape with "n" symbolic) of graph inputs
    attrs: dict = field(default_factory=dict)
    constants: dict = field(default_factory=dict)  # name -> array, inputs known at import (initializers)
    order: tuple = ()             # every node input name in order ("" for an omitted one); default inputs
    opset: int = 18
    reference: object = None      # fn(*graph input arrays) -> expected output
    ort: bool = True              # ONNX Runtime runs the form (its numbers checked against the reference)
    tol: float = 1e-5
    make: object = None           # fn(rng, n) -> graph input arrays; default random normal / small ints
    sizes: tuple = (1, 2, 3)


def _node(case, prefix=""):
    names = case.order or tuple(i[0] for i in case.inputs) + tuple(case.constants)
    return helper.make_node(case.op_type, [prefix + x if x else "" for x in names], [prefix + "y"],
                            name=prefix + case.name, **case.attrs)


def _initializers(case, prefix=""):
    return [numpy_helper.from_array(np.asarray(v), prefix + k) for k, v in case.constants.items()]


def _value_infos(case, prefix=""):
    return [helper.make_tensor_value_info(prefix + name, elem, list(shape)) for name, elem, shape in case.inputs]


def _model(cases, prefixed=False):
    nodes, inputs, inits, outputs = [], [], [], []
    for c in cases:
        prefix = c.name + "_" if prefixed else ""
        nodes.append(_node(c, prefix))
        inputs += _value_infos(c, prefix)
        inits += _initializers(c, prefix)
        outputs.append(helper.make_empty_tensor_value_info(prefix + "y"))
    graph = helper.make_graph(nodes, "misc", inputs, outputs, initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", max(c.opset for c in cases))])
    model.ir_version = 10
    return model


def _arrays(case, n):
    rng = np.random.default_rng(zlib.crc32(case.name.encode()) + n)
    if case.make is not None:
        return case.make(rng, n)
    out = []
    for _, elem, shape in case.inputs:
        dims = tuple(n if d == "n" else d for d in shape)
        if elem in (F32, TensorProto.DOUBLE):
            out.append(rng.standard_normal(dims).astype(_NP[elem]))
        else:
            out.append(rng.integers(-3, 4, dims).astype(_NP[elem]))
    return out


def _max_pool_with_indices(rng, n, c=2, size=(4, 6)):
    """A MaxPool 2x2 stride 2 of random data, its values and flat indices (as MaxPool's Indices output)."""
    x = rng.permutation(n * c * size[0] * size[1]).astype(np.float32).reshape(n, c, *size)
    h, w = size[0] // 2, size[1] // 2
    windows = x.reshape(n, c, h, 2, w, 2).transpose(0, 1, 2, 4, 3, 5).reshape(n, c, h, w, 4)
    arg = windows.argmax(-1)
    rows = np.arange(h)[:, None] * 2 + arg // 2
    cols = np.arange(w)[None, :] * 2 + arg % 2
    planes = np.arange(n * c).reshape(n, c, 1, 1)
    return [windows.max(-1), (planes * size[0] * size[1] + rows * size[1] + cols).astype(np.int64)]


def _det_matrices(rng, n):
    """Random 4x4 matrices, the first a permutation (zero pivots unless rows swap), the second singular."""
    x = rng.standard_normal((n + 2, 4, 4)).astype(np.float32)
    x[0] = np.eye(4, dtype=np.float32)[[1, 0, 3, 2]]
    x[1, 3] = 2 * x[1, 1]
    return [x[-n:] if n < 2 else x[:n]]


def _sequences(rng, n):
    x = rng.standard_normal((5, n, 3)).astype(np.float32)
    return [x, rng.integers(0, 6, n).astype(np.int64)]


def _theta(rng, n, nd=2):
    return [rng.standard_normal((n, nd, nd + 1)).astype(np.float32)]


CASES = [
    Case("lppool_2d_p3_pads_strides", "LpPool", [("x", F32, ("n", 2, 5, 6))],
         {"kernel_shape": [2, 3], "p": 3, "pads": [1, 0, 0, 1], "strides": [2, 1]},
         reference=lambda x: lp_pool_reference(x, [2, 3], 3, [2, 1], [1, 0, 0, 1]), tol=2e-5),
    Case("lppool_1d_p2_dilations", "LpPool", [("x", F32, ("n", 3, 9))],
         {"kernel_shape": [3], "dilations": [2]},
         reference=lambda x: lp_pool_reference(x, [3], 2, dilations=[2]), opset=18),
    Case("lppool_2d_p1_ceil", "LpPool", [("x", F32, ("n", 1, 5, 5))],
         {"kernel_shape": [2, 2], "p": 1, "strides": [2, 2], "ceil_mode": 1},
         reference=lambda x: lp_pool_reference(x, [2, 2], 1, [2, 2], [0, 0, 1, 1])),
    Case("lppool_3d_same_upper", "LpPool", [("x", F32, ("n", 1, 3, 4, 2))],
         {"kernel_shape": [2, 2, 2], "auto_pad": "SAME_UPPER"},
         reference=lambda x: lp_pool_reference(x, [2, 2, 2], 2, pads=[0, 0, 0, 1, 1, 1])),
    Case("cumprod_axis1", "CumProd", [("x", F32, ("n", 4))], constants={"axis": np.array(1, np.int32)},
         opset=26, reference=lambda x: cumprod_reference(x, 1), tol=1e-5),
    Case("cumprod_axis0_exclusive_reverse_int64", "CumProd", [("x", I64, ("n", 3))],
         {"exclusive": 1, "reverse": 1}, constants={"axis": np.array(0, np.int64)}, opset=26,
         reference=lambda x: cumprod_reference(x, 0, 1, 1)),
    Case("cumprod_float64_reverse", "CumProd", [("x", TensorProto.DOUBLE, (3, "n", 2))],
         {"reverse": 1}, constants={"axis": np.array(-2, np.int64)}, opset=26,
         reference=lambda x: cumprod_reference(x, 1, 0, 1)),
    Case("einsum_batch_matmul", "Einsum", [("a", F32, ("n", 2, 3)), ("b", F32, ("n", 3, 4))],
         {"equation": "bij,bjk->bik"}, opset=12, reference=lambda a, b: np.einsum("bij,bjk->bik", a, b)),
    Case("einsum_implicit_transpose", "Einsum", [("a", F32, ("n", 3, 2))], {"equation": "ijk"}, opset=12,
         reference=lambda a: np.einsum("ijk", a)),
    Case("einsum_diagonal_ellipsis", "Einsum", [("a", F32, ("n", 2, 3, 3))], {"equation": "...ii->...i"},
         opset=12, reference=lambda a: np.einsum("...ii->...i", a)),
    Case("einsum_trace_sum", "Einsum", [("a", F32, (3, 3))], {"equation": "ii"}, opset=12,
         reference=lambda a: np.einsum("ii", a), sizes=(1,)),
    Case("einsum_three_operands", "Einsum", [("a", F32, ("n", 3)), ("b", F32, (3, 4)), ("c", F32, (4, 2))],
         {"equation": "ij,jk,kl->il"}, opset=12, reference=lambda a, b, c: np.einsum("ij,jk,kl->il", a, b, c),
         tol=2e-5),
    Case("einsum_outer_ellipsis_int32", "Einsum",
         [("a", TensorProto.INT32, ("n", 1, 2)), ("b", TensorProto.INT32, (4,))],
         {"equation": "...i,j->...ij"}, opset=12, reference=lambda a, b: np.einsum("...i,j->...ij", a, b)),
    Case("einsum_sum_out_and_inner", "Einsum", [("a", F32, ("n", 4, 3)), ("b", F32, (3, 2))],
         {"equation": "nij,jk->n"}, opset=12, reference=lambda a, b: np.einsum("nij,jk->n", a, b), tol=2e-5),
    Case("center_crop_pad_mixed", "CenterCropPad", [("x", F32, ("n", 5, 4))],
         constants={"shape": np.array([3, 7], np.int64)}, attrs={"axes": [1, 2]},
         reference=lambda x: center_crop_pad_reference(x, [3, 7], [1, 2])),
    Case("center_crop_pad_negative_axis", "CenterCropPad", [("x", F32, (6, "n"))],
         constants={"shape": np.array([3], np.int64)}, attrs={"axes": [-2]},
         reference=lambda x: center_crop_pad_reference(x, [3], [-2])),
    Case("col2im_strides_pads_dilations", "Col2Im", [("x", F32, ("n", 8, 9))],
         constants={"image_shape": np.array([5, 4], np.int64), "block_shape": np.array([2, 2], np.int64)},
         attrs={"strides": [2, 1], "pads": [0, 1, 1, 0], "dilations": [1, 2]},
         reference=lambda x: col2im_reference(x, [5, 4], [2, 2], [2, 1], [0, 1, 1, 0], [1, 2])),
    Case("col2im_uncovered_end", "Col2Im", [("x", F32, ("n", 2, 2))],
         constants={"image_shape": np.array([6], np.int64), "block_shape": np.array([2], np.int64)},
         attrs={"strides": [3]}, reference=lambda x: col2im_reference(x, [6], [2], [3])),
    Case("col2im_3d", "Col2Im", [("x", F32, ("n", 8, 8))],
         constants={"image_shape": np.array([3, 3, 3], np.int64), "block_shape": np.array([2, 2, 2], np.int64)},
         reference=lambda x: col2im_reference(x, [3, 3, 3], [2, 2, 2])),
    # size (N, C, ...) is a constant: theta's batch is static too
    Case("affine_grid_2d", "AffineGrid", [("theta", F32, (2, 2, 3))],
         constants={"size": np.array([2, 1, 3, 4], np.int64)}, opset=20,
         make=lambda rng, n: _theta(rng, 2), reference=lambda t: affine_grid_reference(t, [2, 1, 3, 4]), sizes=(1,)),
    Case("affine_grid_3d_align_corners", "AffineGrid", [("theta", F32, (1, 3, 4))],
         constants={"size": np.array([1, 1, 2, 3, 2], np.int64)}, attrs={"align_corners": 1}, opset=20,
         make=lambda rng, n: _theta(rng, 1, 3), reference=lambda t: affine_grid_reference(t, [1, 1, 2, 3, 2], 1),
         sizes=(1,)),
    Case("reverse_sequence_time_major", "ReverseSequence", [("x", F32, (5, "n", 3)), ("lens", I64, ("n",))],
         opset=10, make=_sequences, reference=lambda x, lens: reverse_sequence_reference(x, lens)),
    Case("reverse_sequence_batch_major", "ReverseSequence", [("x", F32, ("n", 4)), ("lens", I64, ("n",))],
         {"batch_axis": 0, "time_axis": 1}, opset=10,
         make=lambda rng, n: [rng.standard_normal((n, 4)).astype(np.float32), rng.integers(1, 5, n)],
         reference=lambda x, lens: reverse_sequence_reference(x, lens, 0, 1)),
    Case("upsample_nearest", "Upsample", [("x", F32, ("n", 2, 2, 3))],
         constants={"scales": np.array([1, 1, 2, 3], np.float32)}, opset=9,
         reference=lambda x: upsample_nearest_reference(x, [1, 1, 2, 3])),
    Case("dft_real_axis1_opset17", "DFT", [("x", F32, ("n", 8, 1))], {"axis": 1}, opset=17,
         reference=lambda x: dft_reference(x, 1), tol=1e-4),
    Case("dft_complex_inverse_truncated_opset20", "DFT", [("x", F32, ("n", 8, 2))], {"inverse": 1},
         constants={"dft_length": np.array(6, np.int64), "axis": np.array(-2, np.int64)}, opset=20,
         reference=lambda x: dft_reference(x, 1, 6, inverse=True), tol=1e-5),
    Case("dft_rfft_padded_axis1", "DFT", [("x", F32, (3, 7, "n", 1))], {"onesided": 1},
         constants={"dft_length": np.array(10, np.int64), "axis": np.array(1, np.int64)}, opset=20,
         reference=lambda x: dft_reference(x, 1, 10, onesided=True), tol=1e-4),
    Case("dft_irfft_default_length", "DFT", [("x", F32, ("n", 5, 2))], {"onesided": 1, "inverse": 1},
         opset=20, ort=False, reference=lambda x: dft_reference(x, 1, inverse=True, onesided=True), tol=1e-5),
    Case("stft_hann_window", "STFT", [("x", F32, ("n", 16, 1)), ("w", F32, (8,))],
         constants={"step": np.array(4, np.int64), "frame": np.array(8, np.int64)}, opset=17,
         order=("x", "step", "w", "frame"), tol=1e-4,
         make=lambda rng, n: [rng.standard_normal((n, 16, 1)).astype(np.float32),
                              window_reference("HannWindow", 8)],
         reference=lambda x, w: stft_reference(x, 4, w)),
    Case("det_3x3", "Det", [("x", F32, ("n", 3, 3))], opset=11, reference=det_reference, tol=1e-4),
    Case("det_4x4_pivots", "Det", [("x", F32, ("n", 4, 4))], opset=11, reference=det_reference, tol=1e-4,
         make=_det_matrices),
    Case("det_6x6", "Det", [("x", F32, (2, "n", 6, 6))], opset=11, reference=det_reference, tol=1e-4),
    Case("max_unpool_2d", "MaxUnpool", [("x", F32, ("n", 2, 2, 3)), ("i", I64, ("n", 2, 2, 3))],
         {"kernel_shape": [2, 2], "strides": [2, 2]}, opset=11, make=_max_pool_with_indices,
         reference=lambda x, i: max_unpool_reference(x, i, [2, 2], [2, 2])),
    Case("bitcast_uint16_to_int16", "BitCast", [("x", TensorProto.UINT16, ("n", 3))],
         {"to": TensorProto.INT16}, opset=26, ort=False,
         make=lambda rng, n: [rng.integers(0, 65536, (n, 3)).astype(np.uint16)],
         reference=lambda x: x.view(np.int16)),
    Case("bitcast_int8_to_uint8", "BitCast", [("x", TensorProto.INT8, ("n",))], {"to": TensorProto.UINT8},
         opset=26, make=lambda rng, n: [rng.integers(-128, 128, n).astype(np.int8)],
         reference=lambda x: x.view(np.uint8)),
    Case("hann_window_periodic", "HannWindow", [], constants={"size": np.array(10, np.int32)}, opset=17,
         reference=lambda: window_reference("HannWindow", 10), sizes=(1,)),
    Case("hamming_window_symmetric", "HammingWindow", [], constants={"size": np.array(7, np.int64)},
         attrs={"periodic": 0}, opset=17, reference=lambda: window_reference("HammingWindow", 7, 0), sizes=(1,)),
    Case("blackman_window_periodic", "BlackmanWindow", [], constants={"size": np.array(9, np.int32)}, opset=17,
         reference=lambda: window_reference("BlackmanWindow", 9), sizes=(1,)),
]

# the cases merged into one model for the compiled checks: every one with graph inputs but repeated forms
# (and DFT-17, whose axis attribute the merged model's opset no longer has)
COMPILED = [c for c in CASES if c.inputs and c.name not in {
    "lppool_1d_p2_dilations", "lppool_3d_same_upper", "einsum_implicit_transpose", "einsum_trace_sum",
    "einsum_three_operands", "center_crop_pad_negative_axis", "col2im_3d", "affine_grid_3d_align_corners",
    "cumprod_float64_reverse", "det_6x6", "dft_real_axis1_opset17", "dft_rfft_padded_axis1"}]


def _run_ort(case, arrays):
    sess = ort.InferenceSession(_model([case]).SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, {name: a for (name, _, _), a in zip(case.inputs, arrays)})[0]


def _check(case, actual, expected):
    assert_matches(np.asarray(actual), np.asarray(expected), tol=case.tol)


@pytest.mark.parametrize("case", [c for c in CASES if c.ort], ids=[c.name for c in CASES if c.ort])
def test_references_agree_with_onnx_runtime(case):
    for n in case.sizes:
        arrays = _arrays(case, n)
        _check(case, case.reference(*arrays), _run_ort(case, arrays))


def test_mel_weight_matrix_matches_onnx_reference():
    """MelWeightMatrix is computed at import: the ONNX reference gives the numbers."""
    consts = {"bins": np.array(8, np.int32), "dft": np.array(32, np.int32), "rate": np.array(16000, np.int32),
              "low": np.array(100.0, np.float32), "high": np.array(6000.0, np.float32)}
    case = Case("mel", "MelWeightMatrix", [], constants=consts, opset=17)
    model = _model([case])
    want = ReferenceEvaluator(model).run(None, {})[0]
    _check(case, rxe.interpret(rxe.from_onnx(model)), want)
    np.testing.assert_allclose(want, _run_ort(case, []), atol=1e-6)


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_interpreted_matches_reference(case):
    mod = rxe.from_onnx(_model([case]))
    for n in case.sizes:
        arrays = _arrays(case, n)
        _check(case, rxe.interpret(mod, *arrays), case.reference(*arrays))


# about one case per operator for the emulated board: the RPC server takes at most 16 inputs
EMULATED = [c for c in COMPILED if c.name in {
    "lppool_2d_p3_pads_strides", "cumprod_axis1", "einsum_batch_matmul", "center_crop_pad_mixed",
    "col2im_strides_pads_dilations", "affine_grid_2d", "reverse_sequence_time_major", "upsample_nearest",
    "det_3x3", "max_unpool_2d", "bitcast_int8_to_uint8", "dft_complex_inverse_truncated_opset20"}]


def _run_merged(loaded, cases, sizes):
    for n in sizes:
        arrays = [_arrays(c, n) for c in cases]
        outputs = loaded.run(*[a for group in arrays for a in group])
        for case, group, actual in zip(cases, arrays, outputs, strict=True):
            _check(case, actual, case.reference(*group))


@pytest.mark.parametrize("backend", ["c", "llvm"])
def test_compiled_matches_reference(backend, tmp_path):
    with compiled(_model(COMPILED, prefixed=True), backend, tmp_path) as loaded:
        _run_merged(loaded, COMPILED, (1, 3))


@pytest.mark.slow
@pytest.mark.emu
def test_compiled_for_qemu_aarch64(tmp_path):
    assert len(EMULATED) == 12
    art = rxe.build(rxe.from_onnx(_model(EMULATED, prefixed=True)), board="qemu-aarch64", backend="llvm",
                    out_dir=tmp_path, name="m", profile=False)
    with rxe.connect("qemu-aarch64") as dev:
        _run_merged(dev.load(art), EMULATED, (2,))


# ------------------------------------------------------------------------ bad input

def _bad(op_type, inputs, attrs=None, constants=None, opset=18):
    return _model([Case("bad", op_type, inputs, attrs or {}, constants or {}, opset=opset)])


@pytest.mark.parametrize("model,message", [
    (_bad("Det", [("x", F32, ("n", 17, 17))]), r"bad \(Det\).*matrices of size 17 are not supported \(1 to 16\)"),
    (_bad("Det", [("x", F32, ("n", 2, 3))]), r"bad \(Det\).*must be square"),
    (_bad("Det", [("x", F32, ("n", "m", "m"))]), r"bad \(Det\).*the matrix size must be static"),
    (_bad("Einsum", [("a", F32, ("n", 3))], {"equation": "ijk->i"}, opset=12),
     r"bad \(Einsum\).*operand 0 has rank 2, the equation term 'ijk' names 3 dims"),
    (_bad("Einsum", [("a", F32, ("n", 3))], {"equation": "ij->k"}, opset=12),
     r"bad \(Einsum\).*output label 'k' .* is in no operand"),
    (_bad("Einsum", [("a", F32, ("n", 3))], {"equation": "i1->i"}, opset=12),
     r"bad \(Einsum\).*labels must be letters"),
    (_bad("Einsum", [("a", F32, ("n", 3)), ("b", F32, (3,))], {"equation": "ij->ij"}, opset=12),
     r"bad \(Einsum\).*equation 'ij->ij' has 1 operands, the node 2"),
    (_bad("CenterCropPad", [("x", F32, ("n", 4))], constants={"shape": np.array([2, 2], np.int64)}),
     r"bad \(CenterCropPad\).*dim 0 must be static"),
    (_bad("CenterCropPad", [("x", F32, (3, 4))], {"axes": [0]}, {"shape": np.array([2, 2], np.int64)}),
     r"bad \(CenterCropPad\).*shape has 2 values for 1 axes"),
    (_bad("Col2Im", [("x", F32, ("n", 6, 4))],
          constants={"image_shape": np.array([3, 3], np.int64), "block_shape": np.array([2, 2], np.int64)}),
     r"bad \(Col2Im\).*dim 1 of the input \(6\) is not a multiple of prod\(block_shape\) = 4"),
    (_bad("Col2Im", [("x", F32, ("n", 4, 5))],
          constants={"image_shape": np.array([3, 3], np.int64), "block_shape": np.array([2, 2], np.int64)}),
     r"bad \(Col2Im\).*dim 2 of the input \(5\) must be the block count 2 \* 2"),
    (_bad("LpPool", [("x", F32, ("n", 1, 4, 4))], {"kernel_shape": [2, 2], "p": 0}),
     r"bad \(LpPool\).*attribute p must be positive"),
    (_bad("LpPool", [("x", F32, ("n", 1, "h", 4))], {"kernel_shape": [2, 2], "ceil_mode": 1}),
     r"bad \(LpPool\).*spatial dim 0 \(ceil_mode\) must be static"),
    (_bad("LpPool", [("x", TensorProto.INT32, ("n", 1, 4, 4))], {"kernel_shape": [2, 2]}),
     r"bad \(LpPool\).*the input of type int32 is not supported"),
    (_bad("AffineGrid", [("theta", F32, ("n", 2, 2))], constants={"size": np.array([1, 1, 3, 3], np.int64)},
          opset=20), r"bad \(AffineGrid\).*theta must have shape \(N, 2, 3\)"),
    (_bad("AffineGrid", [("theta", F32, (3, 2, 3))], constants={"size": np.array([2, 1, 3, 3], np.int64)},
          opset=20), r"bad \(AffineGrid\).*size\[0\] \(2\) must be theta's batch \(3\)"),
    (_bad("ReverseSequence", [("x", F32, (4, "n")), ("lens", I64, ("n",))], {"batch_axis": 1, "time_axis": 1},
          opset=10), r"bad \(ReverseSequence\).*must be 0 and 1, one each"),
    (_bad("BitCast", [("x", F32, ("n",))], {"to": TensorProto.INT64}, opset=26),
     r"bad \(BitCast\).*float32 and int64 differ in width"),
    (_bad("CumProd", [("x", TensorProto.INT8, ("n",))], constants={"axis": np.array(0, np.int64)}, opset=26),
     r"bad \(CumProd\).*x of type int8 is not supported"),
    (_bad("MaxUnpool", [("x", F32, ("n", 1, 2, 2)), ("i", I64, ("n", 1, 2, 2))], {"kernel_shape": [2]}, opset=11),
     r"bad \(MaxUnpool\).*kernel_shape must hold 2 sizes"),
    (_bad("DFT", [("x", F32, ("n", 8, 2))], {"axis": 2}, opset=17),
     r"bad \(DFT\).*axis 2 must name a signal axis of the rank-3 input"),
    (_bad("DFT", [("x", F32, (2, "m", 2))], {"axis": 1}, opset=17),
     r"bad \(DFT\).*the transformed axis 1 must be static"),
    (_bad("DFT", [("x", F32, (2, 8, 3))], {"axis": 1}, opset=17),
     r"bad \(DFT\).*the last dim must be 1 \(real\) or 2 \(complex\)"),
    (_bad("STFT", [("x", F32, ("n", 6, 1))], constants={"step": np.array(2, np.int64), "w": np.ones(8, np.float32)},
          opset=17), r"bad \(STFT\).*frame_length 8 is longer than the signal \(6\)"),
    (_bad("MaxUnpool", [("x", F32, (1, 1, 2, 2)), ("i", I64, (1, 1, 2, 2))],
          {"kernel_shape": [2, 2], "strides": [2, 2]}, {"shape": np.array([1, 2, 4, 4], np.int64)}, opset=11),
     r"bad \(MaxUnpool\).*output_shape \[1, 2, 4, 4\] must keep dim 1 of the input \(1\)"),
    (_bad("HannWindow", [], constants={"size": np.array(-1, np.int64)}, opset=17),
     r"bad \(HannWindow\).*size\) must be at least 0"),
])
def test_bad_input_names_the_node(model, message):
    with pytest.raises(rxe.frontend.OnnxImportError, match=message):
        rxe.from_onnx(model)


def test_bitcast_of_a_constant_reinterprets_at_import():
    """Any same-width BitCast of a constant folds at import (float32 bits to int32 here)."""
    x = np.array([1.0, -2.5, np.inf], np.float32)
    case = Case("bc", "BitCast", [], {"to": TensorProto.INT32}, {"x": x}, opset=26)
    out = rxe.interpret(rxe.from_onnx(_model([case])))
    np.testing.assert_array_equal(out, x.view(np.int32))
