"""ONNX import: operators expressed over existing ones (pooling, cropping, ...).

1. LpPool (opsets 2, 11, 18): (sum over the window of |x|^p)^(1/p), the sum an
   average pool that counts its zero padding, times the kernel size; in ceil
   mode the end padding is first widened (static spatial sizes) so that every
   window is whole: the zeros it adds change no sum.
2. CumProd (opset 26): CumSum's cumulative (onehot_cumsum.py), a mask of the inputs each
   output takes, the others replaced by 1, and a product: O(n^2) in the axis.
3. CenterCropPad (opset 18): per axis a centred slice (crop) or a zero pad
   (more of it at the end, as the ONNX reference); the target shape and the
   axes' sizes must be static.
4. Col2Im (opset 18): the adjoint of im2col, a grouped transposed convolution
   of the (N, C*K, blocks...) columns with one-hot kernels (one per block
   element); image and block shapes must be constants, C static.
5. AffineGrid (opset 20): the base grid of the static output size as a
   constant, times theta by a matmul. An axis of size 1 with align_corners=1
   sits at -1, as the ONNX reference puts it (ONNX Runtime: 1, PyTorch: 0).
6. ReverseSequence (opset 10): a gather along the time axis of the index
   t < len ? len - 1 - t : t, sequence_lens read at run time.
7. Upsample (opsets 7, 9; deprecated): Resize-10's reading (resize.py).
8. Det (opset 11): static n; the Leibniz sum over the n! permutations up to
   n = 3, Gaussian elimination with partial pivoting (argmax, gathered row
   swaps, n steps of graph operators) up to n = 16; larger ones are refused.
9. MaxUnpool (opsets 9, 11): out[p] = the value whose index is p (0 where none),
   a comparison of every index with every output position: O(in * out); a
   larger output_shape pads the result at the end, as the ONNX reference.
10. BitCast (opset 26): constants reinterpreted at import; at run time only
   integer (or bool) to integer of the same width, a wrapping cast; float
   reinterpretation of a run-time tensor is refused.
The signal operators (windows, MelWeightMatrix, DFT, STFT) are in signal.py,
Einsum in einsum.py; both register from here.
"""

from __future__ import annotations

import itertools

import numpy as np

from ....ir.shape import as_expr
from ....op.bitcast import BIT_WIDTHS
from ..context import ONNX_DTYPE_NAMES, ONNX_DTYPES, converter
from . import einsum, signal  # noqa: F401  (register their converters)
from .conv import _emit_spatial, _per_axis, _spatial_rank, _window
from .onehot_cumsum import _insert_unit_dim, _positions, cumulative
from .resize import _resize_10

_FLOATS = ("float32", "float16", "float64")


def _float_input(ctx, x, what="the input"):
    dtype = ctx.type_of(x).dtype
    if dtype not in _FLOATS:
        raise ctx.error(f"{what} of type {dtype} is not supported (supported: {', '.join(_FLOATS)})")
    return dtype


def _static_dim(ctx, d, what):
    if not d.is_const:
        raise ctx.error(f"{what} must be static, got {d}")
    return int(d.value)


# ------------------------------------------------------------------------------------------ LpPool

@converter("LpPool")
def convert_lp_pool(ctx, inputs):
    x = inputs[0]
    dtype = _float_input(ctx, x)
    nd = _spatial_rank(ctx, x)
    if not ctx.has_attr("kernel_shape"):
        raise ctx.error("attribute kernel_shape is required")
    kernel = tuple(ctx.attr("kernel_shape", kind=list))
    p = ctx.attr("p", 2, float)
    if p <= 0 or not np.isfinite(p):
        raise ctx.error(f"attribute p must be positive, got {p}")
    sizes = ctx.type_of(x).shape[2:]
    strides, pads, dilations = _window(ctx, nd, kernel, sizes)
    if ctx.attr("ceil_mode", 0, int):
        pads = list(pads)
        for i in range(nd):
            size = _static_dim(ctx, sizes[i], f"spatial dim {i} (ceil_mode)")
            span = size + pads[i] + pads[nd + i] - dilations[i] * (kernel[i] - 1) - 1
            out = min(-(-span // strides[i]) + 1, (size + pads[i] - 1) // strides[i] + 1)
            need = strides[i] * (out - 1) + dilations[i] * (kernel[i] - 1) + 1 - size - pads[i]
            pads[nd + i] = max(pads[nd + i], need)
        pads = tuple(pads)
    powered = ctx.emit("multiply", [x, x]) if p == 2 else \
        ctx.emit("power", [ctx.emit("abs", [x]), np.array(p, dtype)])
    mean = _emit_spatial(ctx, "avg_pool{}d", nd, [powered],
                         {"kernel_size": kernel, "strides": strides, "padding": pads, "dilation": dilations,
                          "count_include_pad": True})
    total = ctx.emit("multiply", [mean, np.array(np.prod(kernel), dtype)])
    if p == 2:
        return ctx.emit("sqrt", [total])
    return ctx.emit("power", [total, np.array(1.0 / p, dtype)])


# ----------------------------------------------------------------------------------------- CumProd

_CUMPROD_DTYPES = ("float32", "float16", "float64", "int32", "int64", "uint32", "uint64")


@converter("CumProd", static={1})
def convert_cum_prod(ctx, inputs):
    return cumulative(ctx, inputs, "prod", 1, _CUMPROD_DTYPES)


# ----------------------------------------------------------------------------------- CenterCropPad

def _axes_attr(ctx, rank, count):
    axes = ctx.attr("axes", None, list)
    if axes is None:
        axes = list(range(rank))
    out = []
    for a in axes:
        if not -rank <= a < rank:
            raise ctx.error(f"axis {a} is out of range for rank {rank}")
        out.append(a % rank)
    if len(set(out)) != len(out):
        raise ctx.error(f"axes {axes} repeat an axis")
    if len(out) != count:
        raise ctx.error(f"shape has {count} values for {len(out)} axes")
    return out


@converter("CenterCropPad", static={1})
def convert_center_crop_pad(ctx, inputs):
    x = inputs[0]
    dims = ctx.type_of(x).shape
    target = ctx.integers(inputs[1], 1, "shape")
    axes = _axes_attr(ctx, len(dims), len(target))
    pads = [0] * (2 * len(dims))
    for a, want in zip(axes, target):
        if want < 0:
            raise ctx.error(f"the target size {want} of axis {a} is negative")
        have = _static_dim(ctx, dims[a], f"dim {a}")
        if want < have:
            begin = (have - want) // 2
            x = ctx.emit("strided_slice", [x], {"begin": (begin,), "end": (begin + want,), "axes": (a,)})
        elif want > have:
            pads[a] = (want - have) // 2
            pads[a + len(dims)] = want - have - pads[a]
    if any(pads):
        x = ctx.emit("pad", [x], {"pads": tuple(pads)})
    return x


# ------------------------------------------------------------------------------------------ Col2Im

@converter("Col2Im", static={1, 2})
def convert_col2im(ctx, inputs):
    x = inputs[0]
    dtype = _float_input(ctx, x)
    image = ctx.integers(inputs[1], 1, "image_shape")
    block = ctx.integers(inputs[2], 2, "block_shape")
    nd = len(image)
    if len(block) != nd or nd not in (1, 2, 3):
        raise ctx.error(f"image_shape {image} and block_shape {block} must have one length, 1 to 3")
    if min(image) < 1 or min(block) < 1:
        raise ctx.error(f"image_shape {image} and block_shape {block} must be positive")
    dims = ctx.type_of(x).shape
    if len(dims) != 3:
        raise ctx.error(f"the input must have rank 3 (N, C * prod(block_shape), L), got rank {len(dims)}")
    k = int(np.prod(block))
    ck = _static_dim(ctx, dims[1], "dim 1 of the input")
    if ck % k:
        raise ctx.error(f"dim 1 of the input ({ck}) is not a multiple of prod(block_shape) = {k}")
    c = ck // k
    strides = _per_axis(ctx, "strides", [1] * nd, nd)
    dilations = _per_axis(ctx, "dilations", [1] * nd, nd)
    pads = _per_axis(ctx, "pads", [0] * (2 * nd), 2 * nd, least=0)
    if min(strides) < 1 or min(dilations) < 1:
        raise ctx.error(f"strides {strides} and dilations {dilations} must be positive")
    blocks = [(image[i] + pads[i] + pads[nd + i] - dilations[i] * (block[i] - 1) - 1) // strides[i] + 1
              for i in range(nd)]
    if min(blocks) < 1:
        raise ctx.error(f"no block fits: image_shape {image}, block_shape {block}, pads {pads}")
    length = dims[2]
    if length.is_const and int(length.value) != int(np.prod(blocks)):
        raise ctx.error(f"dim 2 of the input ({length.value}) must be the block count {' * '.join(map(str, blocks))}")
    cols = ctx.emit("reshape", [x], {"shape": (dims[0], as_expr(ck), *(as_expr(b) for b in blocks))})
    weight = np.zeros((ck, 1, *block), dtype)
    for channel in range(ck):
        weight[(channel, 0, *np.unravel_index(channel % k, block))] = 1
    # the transposed convolution's canvas, s * (blocks - 1) + d * (block - 1) + 1 long, falls short
    # of the padded image by `short` < s: take that much less end padding, or append zeros
    short = [image[i] + pads[i] + pads[nd + i] - strides[i] * (blocks[i] - 1) - dilations[i] * (block[i] - 1) - 1
             for i in range(nd)]
    ends = [max(pads[nd + i] - short[i], 0) for i in range(nd)]
    grow = [max(short[i] - pads[nd + i], 0) for i in range(nd)]
    y = _emit_spatial(ctx, "conv{}d_transpose", nd, [cols, weight],
                      {"strides": tuple(strides), "padding": tuple(pads[:nd] + ends),
                       "output_padding": (0,) * nd, "dilation": tuple(dilations), "groups": c})
    if any(grow):
        y = ctx.emit("pad", [y], {"pads": (0, 0) + (0,) * nd + (0, 0) + tuple(grow)})
    return y


# -------------------------------------------------------------------------------------- AffineGrid

def affine_base_grid(spatial, align_corners):
    """The (prod(spatial), nd + 1) homogeneous grid: x fastest, the last column 1."""
    axes = []
    for size in spatial:
        if align_corners:
            axes.append(np.linspace(-1, 1, size) if size > 1 else np.array([-1.0]))
        else:
            axes.append((2 * np.arange(size) + 1) / size - 1)
    mesh = np.meshgrid(*axes, indexing="ij")
    coords = [m.reshape(-1) for m in reversed(mesh)]  # x, y (, z)
    return np.stack(coords + [np.ones_like(coords[0])], axis=1)


@converter("AffineGrid", static={1})
def convert_affine_grid(ctx, inputs):
    theta = inputs[0]
    dtype = _float_input(ctx, theta, "theta")
    size = ctx.integers(inputs[1], 1, "size")
    nd = len(size) - 2
    if nd not in (2, 3):
        raise ctx.error(f"size must be (N, C, H, W) or (N, C, D, H, W), got {size}")
    if min(size[2:]) < 1:
        raise ctx.error(f"the spatial sizes {size[2:]} must be positive")
    align = ctx.attr("align_corners", 0, int)
    if align not in (0, 1):
        raise ctx.error(f"attribute align_corners must be 0 or 1, got {align}")
    tdims = ctx.type_of(theta).shape
    if len(tdims) != 3 or not all(d.is_const for d in tdims[1:]) or \
            (int(tdims[1].value), int(tdims[2].value)) != (nd, nd + 1):
        raise ctx.error(f"theta must have shape (N, {nd}, {nd + 1}) for size {size}, got {tuple(tdims)}")
    if tdims[0].is_const and int(tdims[0].value) != size[0]:
        raise ctx.error(f"size[0] ({size[0]}) must be theta's batch ({tdims[0].value})")
    base = affine_base_grid(size[2:], align).astype(dtype)
    ctx.check_constant_size(base.shape, dtype, "the base grid")
    grid = ctx.emit("matmul", [base, ctx.emit("transpose", [theta], {"axes": (0, 2, 1)})])
    return ctx.emit("reshape", [grid], {"shape": (tdims[0], *(as_expr(s) for s in size[2:]), as_expr(nd))})


# --------------------------------------------------------------------------------- ReverseSequence

@converter("ReverseSequence")
def convert_reverse_sequence(ctx, inputs):
    x, lens = inputs[0], inputs[1]
    dims = ctx.type_of(x).shape
    rank = len(dims)
    if rank < 2:
        raise ctx.error(f"the input must have rank >= 2, got rank {rank}")
    batch_axis, time_axis = ctx.attr("batch_axis", 1, int), ctx.attr("time_axis", 0, int)
    if sorted((batch_axis, time_axis)) != [0, 1]:
        raise ctx.error(f"batch_axis {batch_axis} and time_axis {time_axis} must be 0 and 1, one each")
    lt = ctx.type_of(lens)
    if lt.dtype not in ("int32", "int64") or len(lt.shape) != 1:
        raise ctx.error(f"sequence_lens must be a 1-D int64 tensor, got {lt.dtype} of rank {len(lt.shape)}")
    lens = lens if lt.dtype == "int64" else ctx.emit("cast", [lens], {"dtype": "int64"})
    shape = [as_expr(1)] * rank
    shape[batch_axis] = dims[batch_axis]
    seq = ctx.emit("reshape", [lens], {"shape": tuple(shape)})
    t = _positions(ctx, dims[time_axis], rank, time_axis)
    reversed_t = ctx.emit("subtract", [ctx.emit("subtract", [seq, t]), np.array(1, np.int64)])
    index = ctx.emit("where", [ctx.emit("less", [t, seq]), reversed_t, t])
    index = ctx.emit("broadcast_to", [index], {"shape": tuple(dims)})
    return ctx.emit("gather_elements", [x, index], {"axis": time_axis})


# ---------------------------------------------------------------------------------------- Upsample

@converter("Upsample", static={1})
def convert_upsample(ctx, inputs):
    x = inputs[0]
    rank = len(ctx.type_of(x).shape)
    if ctx.opset < 9:
        scales = ctx.attr("scales", None, list)
        if scales is None:
            raise ctx.error("attribute scales is required")
    else:
        if len(inputs) < 2 or inputs[1] is None:
            raise ctx.error("the scales input is required")
        scales = ctx.require_known(inputs[1], 1, "scales").reshape(-1).tolist()
    if len(scales) != rank:
        raise ctx.error(f"scales has {len(scales)} values for rank {rank}")
    if not all(np.isfinite(s) and s > 0 for s in scales):
        raise ctx.error(f"scales must be finite and positive, got {scales}")
    mode = ctx.attr("mode", "nearest", str)
    if mode not in ("nearest", "linear"):
        raise ctx.error(f"mode {mode!r} is not supported (nearest or linear)")
    return _resize_10(ctx, x, [float(s) for s in scales])


# --------------------------------------------------------------------------------------------- Det

_LEIBNIZ_MAX = 3   # larger matrices: elimination with partial pivoting
_DET_MAX = 16


def _permutation_sign(perm) -> int:
    inversions = sum(1 for i in range(len(perm)) for j in range(i + 1, len(perm)) if perm[i] > perm[j])
    return -1 if inversions % 2 else 1


def _det_leibniz(ctx, x, n, rank, batch):
    """The sum over the n! permutations of signed products of entries."""
    entries = {}
    for i, j in itertools.product(range(n), repeat=2):
        entries[i, j] = ctx.emit("reshape", [ctx.emit("strided_slice", [x], {
            "begin": (i, j), "end": (i + 1, j + 1), "axes": (rank - 2, rank - 1)})], {"shape": batch})
    total = None
    for perm in itertools.permutations(range(n)):
        term = entries[0, perm[0]]
        for i in range(1, n):
            term = ctx.emit("multiply", [term, entries[i, perm[i]]])
        if total is None:
            total = term if _permutation_sign(perm) > 0 else ctx.emit("negative", [term])
        else:
            total = ctx.emit("add" if _permutation_sign(perm) > 0 else "subtract", [total, term])
    return total


def _entry(ctx, a, rank, axis, index):
    """a[..., index] along `axis` (-2 rows, -1 columns), keeping the axis."""
    return ctx.emit("strided_slice", [a], {"begin": (index,), "end": (index + 1,), "axes": (rank + axis,)})


def _det_elimination(ctx, a, n, rank, batch):
    """Gaussian elimination with partial pivoting: at step k the row of the largest |a[i, k]|, i >= k,
    swaps with row k (a swap flips the sign), the pivot joins the product and the rows below lose
    their multiple of row k. A zero pivot (a singular matrix) gives 0."""
    dtype = ctx.type_of(a).dtype
    zero, one = np.array(0, dtype), np.array(1, dtype)
    rows = ctx.emit("reshape", [ctx.emit("arange", [], {"stop": as_expr(n)})], {"shape": (as_expr(n), as_expr(1))})
    det = None
    for k in range(n):
        column = _entry(ctx, a, rank, -1, k)                                     # (..., n, 1)
        if k < n - 1:
            score = ctx.emit("where", [ctx.emit("greater_equal", [rows, np.array(k, np.int64)]),
                                       ctx.emit("abs", [column]), np.array(-1, dtype)])
            p = ctx.emit("argmax", [score], {"axis": rank - 2, "keepdims": True})  # (..., 1, 1)
            row_p = ctx.emit("gather_elements", [a, ctx.emit("broadcast_to", [p], {
                "shape": (*batch, as_expr(1), as_expr(n))})], {"axis": rank - 2})
            row_k = _entry(ctx, a, rank, -2, k)
            is_k = ctx.emit("equal", [rows, np.array(k, np.int64)])
            is_p = ctx.emit("equal", [rows, p])
            a = ctx.emit("where", [is_k, row_p, ctx.emit("where", [is_p, row_k, a])])
            swapped = ctx.emit("reshape", [ctx.emit("where", [ctx.emit("equal", [p, np.array(k, np.int64)]),
                                                              one, np.array(-1, dtype)])], {"shape": batch})
            column = _entry(ctx, a, rank, -1, k)
        pivot_cell = _entry(ctx, _entry(ctx, a, rank, -2, k), rank, -1, k)       # (..., 1, 1)
        pivot = ctx.emit("reshape", [pivot_cell], {"shape": batch})
        det = pivot if det is None else ctx.emit("multiply", [det, pivot])
        if k < n - 1:
            det = ctx.emit("multiply", [det, swapped])
            safe = ctx.emit("where", [ctx.emit("equal", [pivot_cell, zero]), one, pivot_cell])
            below = ctx.emit("greater", [rows, np.array(k, np.int64)])
            factor = ctx.emit("where", [below, ctx.emit("divide", [column, safe]), zero])
            a = ctx.emit("subtract", [a, ctx.emit("multiply", [factor, _entry(ctx, a, rank, -2, k)])])
    return det


@converter("Det")
def convert_det(ctx, inputs):
    x = inputs[0]
    _float_input(ctx, x)
    dims = ctx.type_of(x).shape
    if len(dims) < 2:
        raise ctx.error(f"the input must have rank >= 2 (..., M, M), got rank {len(dims)}")
    n = _static_dim(ctx, dims[-1], "the matrix size")
    if _static_dim(ctx, dims[-2], "the matrix size") != n:
        raise ctx.error(f"the matrices must be square, got {dims[-2].value} x {n}")
    if not 1 <= n <= _DET_MAX:
        raise ctx.error(f"matrices of size {n} are not supported (1 to {_DET_MAX})")
    rank, batch = len(dims), tuple(dims[:-2])
    if n <= _LEIBNIZ_MAX:
        return _det_leibniz(ctx, x, n, rank, batch)
    return _det_elimination(ctx, x, n, rank, batch)


# ---------------------------------------------------------------------------------------- MaxUnpool

@converter("MaxUnpool", static={2})
def convert_max_unpool(ctx, inputs):
    x, indices = inputs[0], inputs[1]
    _float_input(ctx, x)
    dims = ctx.type_of(x).shape
    nd = len(dims) - 2
    if nd < 1:
        raise ctx.error(f"the input must have rank >= 3 (N, C, spatial...), got rank {len(dims)}")
    if ctx.type_of(indices).dtype != "int64":
        raise ctx.error(f"I must be int64, got {ctx.type_of(indices).dtype}")
    kernel = ctx.attr("kernel_shape", None, list)
    if kernel is None or len(kernel) != nd:
        raise ctx.error(f"attribute kernel_shape must hold {nd} sizes, got {kernel}")
    strides = _per_axis(ctx, "strides", [1] * nd, nd, least=1)
    pads = _per_axis(ctx, "pads", [0] * (2 * nd), 2 * nd, least=0)
    spatial = [(d - 1) * strides[i] + kernel[i] - pads[i] - pads[nd + i] for i, d in enumerate(dims[2:])]
    grow = None
    if len(inputs) > 2 and inputs[2] is not None:
        out_shape = ctx.integers(inputs[2], 2, "output_shape")
        if len(out_shape) != nd + 2:
            raise ctx.error(f"output_shape {out_shape} must have rank {nd + 2}")
        for i in (0, 1):
            if dims[i].is_const and int(dims[i].value) != out_shape[i]:
                raise ctx.error(f"output_shape {out_shape} must keep dim {i} of the input ({dims[i].value})")
        if not all(d.is_const for d in spatial):
            raise ctx.error(f"output_shape needs static spatial input sizes, got {tuple(dims[2:])}")
        grow = [want - int(d.value) for want, d in zip(out_shape[2:], spatial)]
        if min(grow) < 0:
            raise ctx.error(f"output_shape {out_shape} is smaller than the unpooled size {[int(d) for d in spatial]}")
    n, c = dims[0], dims[1]
    inner_in, inner_out = as_expr(1), as_expr(1)
    for d in dims[2:]:
        inner_in = inner_in * d
    for d in spatial:
        inner_out = inner_out * d
    # the flat index counts the whole (N, C, spatial) output: offset it to one plane
    plane = ctx.emit("multiply", [_positions(ctx, n * c, 2, 0), _sym_scalar(ctx, inner_out)])
    flat_idx = ctx.emit("reshape", [indices], {"shape": (n * c, inner_in)})
    local = ctx.emit("subtract", [flat_idx, plane])
    hit = ctx.emit("equal", [_insert_unit_dim(ctx, local, 2), _positions(ctx, inner_out, 3, 2)])
    values = _insert_unit_dim(ctx, ctx.emit("reshape", [x], {"shape": (n * c, inner_in)}), 2)
    picked = ctx.emit("where", [hit, values, np.array(0, ctx.type_of(x).dtype)])
    out = ctx.emit("sum", [picked], {"axis": (1,), "keepdims": False})
    out = ctx.emit("reshape", [out], {"shape": (n, c, *spatial)})
    if grow and any(grow):  # the unpooled values fill the leading corner of a larger output_shape
        out = ctx.emit("pad", [out], {"pads": (0, 0) + (0,) * nd + (0, 0) + tuple(grow)})
    return out


def _sym_scalar(ctx, value):
    """An int64 scalar of a (possibly symbolic) size."""
    if value.is_const:
        return np.array(int(value.value), np.int64)
    return ctx.emit("reshape", [ctx.emit("shape_to_tensor", [], {"values": (value,)})], {"shape": ()})


# ----------------------------------------------------------------------------------------- BitCast

@converter("BitCast")
def convert_bit_cast(ctx, inputs):
    """Same-width element types only (the spec's rule; the shape is kept). A constant is reinterpreted at
    import; at run time an integer or bool source to an integer is a wrapping cast (the same bits), the
    rest (floats, float16 and bfloat16 as their 16 bits) the `bitcast` operator."""
    x = inputs[0]
    to = ctx.attr("to", None, int)
    if to not in ONNX_DTYPES:
        raise ctx.error(f"attribute to: element type {ONNX_DTYPE_NAMES.get(to, to)} is not supported")
    target, source = ONNX_DTYPES[to], ctx.type_of(x).dtype
    width = {**BIT_WIDTHS, "bool": 8}
    if width[source] != width[target]:
        raise ctx.error(f"{source} and {target} differ in width ({width[source]} and {width[target]} bits); "
                        "BitCast needs element types of the same width")
    if source == target:
        return x
    known = ctx.known(x)
    if known is not None and "bfloat16" not in (source, target):
        if target == "bool" and not np.isin(known.view(np.uint8), (0, 1)).all():
            raise ctx.error("only bytes 0 and 1 reinterpret as bool")
        return np.asarray(known).view(target)
    if source not in ("float16", "bfloat16", "float32", "float64") and target.startswith(("int", "uint")):
        return ctx.emit("cast", [x], {"dtype": target})   # same width: the cast wraps, keeping the bits
    if target == "bool":
        raise ctx.error(f"BitCast from {source} to bool of a tensor known only at run time is not supported "
                        "(only bytes 0 and 1 are bools; a constant input is checked and converted)")
    return ctx.emit("bitcast", [x], {"to": target})
