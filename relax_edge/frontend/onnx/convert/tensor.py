"""Converters for ONNX shape and data-movement operators.

On import-time values (known arrays and symbolic shape values) these are
evaluated at import time; on graph values they become reshape,
strided_slice, take, broadcast_to, ... with symbolic attributes, so a
Reshape whose target is computed from `Shape(x)` gets a symbolic target."""

from __future__ import annotations

import numpy as np

from ....ir.shape import IntExpr, as_expr, bounds
from ....op.manipulate import arange_length
from ..context import converter
from ..values import SymInts, from_static, static_array


def _dims(ctx, value):
    """The shape of any value as a tuple of IntExpr."""
    return tuple(ctx.type_of(value).shape)


def _static_move(fn, data):
    """Apply a numpy data-movement function to import-time contents."""
    out = fn(static_array(data))
    if isinstance(data, SymInts):
        return from_static(np.asarray(out, dtype=object), data.dtype)
    return np.asarray(out)


def _axes_input(ctx, inputs, index, attr="axes"):
    """Axes given as an attribute (older opsets) or as input `index`."""
    if ctx.has_attr(attr):
        return [int(a) for a in ctx.attr(attr)]
    if len(inputs) > index and inputs[index] is not None:
        return ctx.integers(inputs[index], index, attr)
    return None


def _norm_axes(ctx, axes, rank):
    out = []
    for a in axes:
        if not -rank <= a < rank:
            raise ctx.error(f"axis {a} out of range for rank {rank}")
        out.append(a % rank)
    return out


_CONSTANT_ATTRS = ("value", "value_float", "value_floats", "value_int", "value_ints",
                   "value_string", "value_strings", "sparse_value")


@converter("Constant")
def convert_constant(ctx, inputs):
    given = [a for a in _CONSTANT_ATTRS if ctx.has_attr(a)]
    if len(given) != 1:
        raise ctx.error(f"a Constant needs exactly one value attribute, got {len(given)}"
                        f"{' (' + ', '.join(given) + ')' if given else ''}")
    for name in ("value", "value_float", "value_floats", "value_int", "value_ints"):
        if ctx.has_attr(name):
            v = ctx.attr(name)
            if name.startswith("value_float"):
                return np.asarray(v, np.float32)
            if name.startswith("value_int"):
                return np.asarray(v, np.int64)
            return np.asarray(v)
    raise ctx.error("only tensor, float(s) and int(s) constants are supported")


@converter("Shape")
def convert_shape(ctx, inputs):
    dims = _dims(ctx, inputs[0])
    start, end = ctx.attr("start", 0, int), ctx.attr("end", None, int)
    dims = dims[slice(start, end)]
    arr = np.empty(len(dims), dtype=object)
    arr[:] = dims
    return from_static(arr)


@converter("Size")
def convert_size(ctx, inputs):
    total = as_expr(1)
    for d in _dims(ctx, inputs[0]):
        total = total * d
    return from_static(np.array(total, dtype=object))


def reshape_target(ctx, data_dims, target, allowzero):
    """An ONNX Reshape target (0 copies, -1 infers) as symbolic dims."""
    out = []
    for i, t in enumerate(target.reshape(-1)):
        t = as_expr(t) if not isinstance(t, IntExpr) else t
        if t.is_const and t.value < -1:
            raise ctx.error(f"target dimension {i} is {t.value}; only -1 (infer) may be negative")
        if t == 0 and not allowzero:
            if i >= len(data_dims):
                raise ctx.error(f"target dimension {i} is 0 (copy) but the input has rank {len(data_dims)}")
            out.append(data_dims[i])
        else:
            out.append(t)
    return tuple(out)


@converter("Reshape")
def convert_reshape(ctx, inputs):
    data, shape = inputs
    allowzero = ctx.attr("allowzero", 0, int)
    if static_array(shape) is None:  # a shape read from a tensor: bound at run time
        out = ctx.emit("reshape_dynamic", [data, shape], {"allowzero": bool(allowzero)})
        return ctx.match_cast_fresh(out, "reshape")
    target = ctx.require_static(shape, 1, "shape")
    dims = reshape_target(ctx, _dims(ctx, data), target, allowzero)
    return ctx.emit("reshape", [data], {"shape": dims})


@converter("NonZero")
def convert_nonzero(ctx, inputs):
    dims = _dims(ctx, inputs[0])
    numel = as_expr(1)
    for d in dims:
        numel = numel * d
    return ctx.match_cast_fresh(ctx.emit("nonzero", inputs), "count", lower=0, known=[len(dims), None],
                                upper=bounds(numel)[1])   # at most every element: the compiled plan's capacity


@converter("Flatten")
def convert_flatten(ctx, inputs):
    dims = _dims(ctx, inputs[0])
    axis = ctx.attr("axis", 1, int)
    if not -len(dims) <= axis <= len(dims):
        raise ctx.error(f"axis {axis} out of range for rank {len(dims)}")
    if axis < 0:
        axis += len(dims)
    outer, inner = as_expr(1), as_expr(1)
    for d in dims[:axis]:
        outer = outer * d
    for d in dims[axis:]:
        inner = inner * d
    return ctx.emit("reshape", [inputs[0]], {"shape": (outer, inner)})


@converter("Squeeze")
def convert_squeeze(ctx, inputs):
    dims = _dims(ctx, inputs[0])
    axes = _axes_input(ctx, inputs, 1)
    if axes is None:
        axes = [i for i, d in enumerate(dims) if d == 1]
    axes = _norm_axes(ctx, axes, len(dims))
    for a in axes:
        if dims[a].is_const and dims[a].value != 1:
            raise ctx.error(f"cannot squeeze axis {a} of size {dims[a]}")
    new = tuple(d for i, d in enumerate(dims) if i not in axes)
    return ctx.emit("reshape", [inputs[0]], {"shape": new})


@converter("Unsqueeze")
def convert_unsqueeze(ctx, inputs):
    dims = list(_dims(ctx, inputs[0]))
    axes = _axes_input(ctx, inputs, 1)
    if axes is None:
        raise ctx.error("axes are required")
    rank = len(dims) + len(axes)
    for a in sorted(_norm_axes(ctx, axes, rank)):
        dims.insert(a, as_expr(1))
    return ctx.emit("reshape", [inputs[0]], {"shape": tuple(dims)})


@converter("Concat")
def convert_concat(ctx, inputs):
    axis = ctx.attr("axis", kind=int)
    parts = [v for v in inputs if v is not None]
    return ctx.emit("concat", parts, {"axis": axis})


@converter("Transpose")
def convert_transpose(ctx, inputs):
    perm = ctx.attr("perm")
    return ctx.emit("transpose", inputs, {"axes": None if perm is None else tuple(perm)})


@converter("Slice")
def convert_slice(ctx, inputs):
    data = inputs[0]
    rank = len(_dims(ctx, data))
    if ctx.opset < 10:
        starts, ends = ctx.attr("starts"), ctx.attr("ends")
        axes = ctx.attr("axes", list(range(len(starts))))
        steps = [1] * len(starts)
    else:
        starts = list(ctx.require_static(inputs[1], 1, "starts").reshape(-1))
        ends = list(ctx.require_static(inputs[2], 2, "ends").reshape(-1))
        axes = list(range(len(starts)))
        if len(inputs) > 3 and inputs[3] is not None:
            axes = ctx.integers(inputs[3], 3, "axes")
        steps = [1] * len(starts)
        if len(inputs) > 4 and inputs[4] is not None:
            steps = ctx.integers(inputs[4], 4, "steps")
    if any(s == 0 for s in steps):
        raise ctx.error("slice step must not be 0")
    attrs = {"begin": tuple(as_expr(b) for b in starts), "end": tuple(as_expr(e) for e in ends),
             "strides": tuple(steps), "axes": tuple(_norm_axes(ctx, axes, rank))}
    return ctx.emit("strided_slice", [data], attrs)


@converter("Split")
def convert_split(ctx, inputs):
    data = inputs[0]
    dims = _dims(ctx, data)
    axis = _norm_axes(ctx, [ctx.attr("axis", 0, int)], len(dims))[0]
    n_out = len(ctx.node.output)
    if ctx.attr("num_outputs", n_out, int) != n_out:
        raise ctx.error(f"num_outputs is {ctx.attr('num_outputs')}, the node has {n_out} outputs")
    if ctx.has_attr("split"):
        sizes = [as_expr(s) for s in ctx.attr("split")]
    elif len(inputs) > 1 and inputs[1] is not None:
        sizes = [as_expr(s) for s in ctx.require_static(inputs[1], 1, "split").reshape(-1)]
    else:
        n_out = ctx.attr("num_outputs", n_out, int)
        dim = dims[axis]
        chunk = (dim + n_out - 1) // n_out
        sizes = [chunk] * (n_out - 1) + [dim - chunk * (n_out - 1)]
    if len(sizes) != n_out:
        raise ctx.error(f"split gives {len(sizes)} sizes for {n_out} outputs")
    outs, begin = [], as_expr(0)
    for size in sizes:
        end = begin + size
        outs.append(ctx.emit("strided_slice", [data], {"begin": (begin,), "end": (end,), "axes": (axis,),
                                                        "strides": (1,)}))
        begin = end
    return outs


@converter("Gather")
def convert_gather(ctx, inputs):
    data, indices = inputs
    axis = ctx.attr("axis", 0, int)
    rank = len(_dims(ctx, data))
    axis = _norm_axes(ctx, [axis], rank)[0]
    idx = ctx.known(indices)
    dim = _dims(ctx, data)[axis]
    if idx is not None and idx.size and dim.is_const:
        if idx.dtype.kind not in "iu":
            raise ctx.error(f"indices must be integers, got {idx.dtype}")
        bad = idx[(idx < -dim.value) | (idx >= dim.value)]
        if bad.size:
            raise ctx.error(f"index {int(bad.reshape(-1)[0])} is out of range for axis {axis} of size {dim.value}")
    if idx is not None and static_array(data) is not None:
        dim = static_array(data).shape[axis]
        return _static_move(lambda a: np.take(a, np.where(idx < 0, idx + dim, idx), axis=axis), data)
    return ctx.emit("take", [data, indices], {"axis": axis})


@converter("Expand")
def convert_expand(ctx, inputs):
    data, shape = inputs
    target = tuple(as_expr(d) for d in ctx.require_static(shape, 1, "shape").reshape(-1))
    return ctx.emit("broadcast_to", [data], {"shape": target})


def _integers_or_sizes(ctx, value, index, what):
    """Input `index` as integers known at import, or as symbolic ones computed from shapes."""
    if ctx.known(value) is not None:
        return ctx.integers(value, index, what)
    return [as_expr(v) for v in ctx.require_static(value, index, what).reshape(-1)]


@converter("Tile")
def convert_tile(ctx, inputs):
    data, reps = inputs
    repeats = tuple(_integers_or_sizes(ctx, reps, 1, "repeats"))  # DeBERTa tiles by the batch size
    return ctx.emit("tile", [data], {"repeats": repeats})


@converter("ConstantOfShape")
def convert_constant_of_shape(ctx, inputs):
    shape = tuple(as_expr(d) for d in ctx.require_static(inputs[0], 0, "shape").reshape(-1))
    value = ctx.attr("value")
    if value is None:
        value = np.zeros(1, np.float32)
    value = np.asarray(value).reshape(-1)
    if value.size != 1:
        raise ctx.error(f"attribute value must hold one element, got {value.size}")
    if value.dtype == np.float64:
        raise ctx.error("value of type double is not supported")
    return ctx.emit("full", [], {"shape": shape, "value": value[0].item(), "dtype": value.dtype.name})


@converter("Range")
def convert_range(ctx, inputs):
    start, limit, delta = (ctx.scalar(v, i, n) for i, (v, n) in
                           enumerate(zip(inputs, ("start", "limit", "delta"))))
    dtype = ctx.type_of(inputs[0]).dtype
    dtypes = [ctx.type_of(v).dtype for v in inputs[:3]]
    if len(set(dtypes)) > 1:
        raise ctx.error(f"start, limit and delta must have one type, got {', '.join(dtypes)}")
    step = delta.item()
    if isinstance(step, IntExpr):
        if not step.is_const:
            raise ctx.error("a symbolic Range step is not supported")
        step = step.value
    s, e = start.item(), limit.item()
    if step == 0:
        raise ctx.error("delta must not be 0")
    if dtype.startswith("float"):
        s, e, step = float(s), float(e), float(step)
        if not all(np.isfinite([s, e, step])):
            raise ctx.error(f"start, limit and delta must be finite, got {s}, {e}, {step}")
        count = (e - s) / step
        count = min(max(np.ceil(count), 0), 2.0 ** 62) if np.isfinite(count) else 2.0 ** 62
        ctx.check_constant_size([int(count)], dtype, "the Range")
        if count == 0:  # numpy refuses some empty ranges (a tiny step the wrong way)
            return np.zeros(0, dtype=dtype)
        return np.arange(s, e, step, dtype=dtype)
    if isinstance(inputs[0], SymInts) or isinstance(inputs[1], SymInts) or \
            isinstance(s, IntExpr) or isinstance(e, IntExpr):
        return ctx.emit("arange", [], {"start": as_expr(s), "stop": as_expr(e), "step": int(step), "dtype": dtype})
    length = int(arange_length(int(s), int(e), int(step)))
    ctx.check_constant_size([length], dtype, "the Range")
    return np.arange(int(s), int(s) + length * int(step), int(step), dtype=dtype)[:length]


@converter("Trilu")
def convert_trilu(ctx, inputs):
    k = 0
    if len(inputs) > 1 and inputs[1] is not None:
        k = int(ctx.scalar(inputs[1], 1, "k", integer=True))
    return ctx.emit("trilu", [inputs[0]], {"k": k, "upper": bool(ctx.attr("upper", 1, int))})


@converter("Pad")
def convert_pad(ctx, inputs):
    data = inputs[0]
    rank = len(_dims(ctx, data))
    mode = ctx.attr("mode", "constant", str)
    if ctx.opset < 11:
        pads, value = list(ctx.attr("pads")), ctx.attr("value", 0.0, float)
    else:
        pads = _integers_or_sizes(ctx, inputs[1], 1, "pads")  # swin_t pads to whole windows of any size
        value = 0
        if len(inputs) > 2 and inputs[2] is not None:
            value = ctx.scalar(inputs[2], 2, "constant_value").item()
        if len(inputs) > 3 and inputs[3] is not None:
            axes = _norm_axes(ctx, ctx.integers(inputs[3], 3, "axes"), rank)
            if len(pads) != 2 * len(axes):
                raise ctx.error(f"pads has {len(pads)} values, {len(axes)} axes need {2 * len(axes)}")
            full = [0] * (2 * rank)
            for j, a in enumerate(axes):
                full[a], full[a + rank] = pads[j], pads[j + len(axes)]
            pads = full
    if len(pads) != 2 * rank:
        raise ctx.error(f"pads has {len(pads)} values, rank {rank} needs {2 * rank}")
    return ctx.emit("pad", [data], {"pads": tuple(pads), "mode": mode, "value": value})



@converter("GatherElements")
def convert_gather_elements(ctx, inputs):
    return ctx.emit("gather_elements", inputs, {"axis": ctx.attr("axis", 0, int)})


def _block_dims(ctx, data, what):
    """The four dims (N, C, H, W) of a DepthToSpace / SpaceToDepth input and its blocksize."""
    dims = _dims(ctx, data)
    if len(dims) != 4:
        raise ctx.error(f"the input must have rank 4 (N, C, H, W), got rank {len(dims)}")
    b = ctx.attr("blocksize", None, int)
    if b is None:
        raise ctx.error("attribute blocksize is required")
    if b < 1:
        raise ctx.error(f"blocksize must be positive, got {b}")
    for axis, div in what:
        d = dims[axis]
        if not d.is_const:
            raise ctx.error(f"dim {axis} ({d}) must be static: blocksize {b} must divide it")
        if d.value % div:
            raise ctx.error(f"blocksize {b} does not divide dim {axis} of size {d.value}"
                            f"{' (needs a multiple of ' + str(div) + ')' if div != b else ''}")
    return dims, b


@converter("DepthToSpace")
def convert_depth_to_space(ctx, inputs):
    data = inputs[0]
    b = ctx.attr("blocksize", 1, int)
    (n, c, h, w), b = _block_dims(ctx, data, [(1, max(b, 1) ** 2)])
    mode = ctx.attr("mode", "DCR", str)
    c_out = as_expr(c.value // (b * b))
    if mode == "DCR":
        split, perm = (n, as_expr(b), as_expr(b), c_out, h, w), (0, 3, 4, 1, 5, 2)
    elif mode == "CRD":
        split, perm = (n, c_out, as_expr(b), as_expr(b), h, w), (0, 1, 4, 2, 5, 3)
    else:
        raise ctx.error(f"mode {mode!r} is not supported (DCR or CRD)")
    x = ctx.emit("reshape", [data], {"shape": split})
    x = ctx.emit("transpose", [x], {"axes": perm})
    return ctx.emit("reshape", [x], {"shape": (n, c_out, h * b, w * b)})


@converter("SpaceToDepth")
def convert_space_to_depth(ctx, inputs):
    data = inputs[0]
    b = max(ctx.attr("blocksize", 1, int), 1)
    (n, c, h, w), b = _block_dims(ctx, data, [(2, b), (3, b)])
    hb, wb = as_expr(h.value // b), as_expr(w.value // b)
    mode = ctx.attr("mode", "DCR", str)  # an attribute since opset 28; DCR before
    if mode not in ("DCR", "CRD"):
        raise ctx.error(f"mode {mode!r} is not supported (DCR or CRD)")
    x = ctx.emit("reshape", [data], {"shape": (n, c, hb, as_expr(b), wb, as_expr(b))})
    x = ctx.emit("transpose", [x], {"axes": (0, 3, 5, 1, 2, 4) if mode == "DCR" else (0, 1, 3, 5, 2, 4)})
    return ctx.emit("reshape", [x], {"shape": (n, c * (b * b), hb, wb)})


@converter("EyeLike")
def convert_eye_like(ctx, inputs):
    """Ones on the diagonal j - i == k: a tensor of ones kept by an upper and a lower Trilu at k."""
    from ..context import ONNX_DTYPE_NAMES, ONNX_DTYPES
    t = ctx.type_of(inputs[0])
    if len(t.shape) != 2:
        raise ctx.error(f"the input must have rank 2, got rank {len(t.shape)}")
    dtype = t.dtype
    if ctx.has_attr("dtype"):
        code = ctx.attr("dtype", kind=int)
        if code not in ONNX_DTYPES:
            name = ONNX_DTYPE_NAMES.get(code, f"type {code}")
            raise ctx.error(f"attribute dtype: element type {name} is not supported")
        dtype = ONNX_DTYPES[code]
    k = ctx.attr("k", 0, int)
    one = True if dtype == "bool" else (1.0 if dtype.startswith("float") else 1)
    ones = ctx.emit("full", [], {"shape": tuple(t.shape), "value": one, "dtype": dtype})
    upper = ctx.emit("trilu", [ones], {"k": k, "upper": True})
    return ctx.emit("trilu", [upper], {"k": k, "upper": False})
