"""Library kernels with data-dependent result sizes (runtime_c/kernels/detect.c):
nonzero, non_max_suppression and unique, as `call_extern`s.

1. They have no tensor program: transform/legalize.py asks `lower_call` for
   these operators and gets a `CallExtern` of a runtime kernel (and its
   `ExternDecl`, whose reference is the operator's numpy reference, so the
   interpreter still runs the legalized module).
2. The C convention is the library's (relax_edge/library/kernels.py): the
   pointers (inputs, the output, then `int64_t* out_count`, then the scratch
   when there is one), the int64 sizes, `rxe_error_t* err`. The kernel
   writes its compact result (laid out for the count it found) into an
   output buffer planned at capacity, and the count into `*out_count`.
3. The call's attrs tell the memory planner and the host code what they need:
   "count" (the axis of the result that is the count), "capacity" (the
   result's shape with the count at its largest: the buffer's size),
   "sizes", "scratch_bytes" (when it has scratch) and "params" (the
   operator's attributes, for the reference). The match_cast that follows
   the call (frontend) binds its fresh size from the count at run time
   (memory/liveness.py, codegen/host_program.py).

Refused (a clear error naming the node): inputs of unknown shape, NMS of
other than float32, unique of float16 / bfloat16 / bool.
"""

from __future__ import annotations

import numpy as np

from ..errors import RelaxEdgeError
from ..ir.expr import Call, CallExtern, Constant, ExternDecl
from ..ir.shape import as_expr, min_expr
from ..ir.types import TensorType
from ..op.registry import OPS

MAX_NDIM = 8   # RXE_MAX_NDIM: nonzero takes the input's dims padded to this many

# element kind -> symbol suffix: nonzero tests floats by value (-0.0 is zero), other types by their bits
_NONZERO = {"float32": "f32", "float64": "f64", "float16": "h16", "bfloat16": "h16", "bool": "b8",
            "int8": "b8", "uint8": "b8", "int16": "b16", "uint16": "b16", "int32": "b32", "uint32": "b32",
            "int64": "b64", "uint64": "b64"}
_UNIQUE = {"float32": "f32", "float64": "f64", "int8": "i8", "int16": "i16", "int32": "i32", "int64": "i64",
           "uint8": "u8", "uint16": "u16", "uint32": "u32", "uint64": "u64"}
UNIQUE_SCRATCH_WORDS = 5   # int64 words of scratch per slice (RXE_LIB_UNIQUE_SCRATCH_BYTES)
NMS_SCRATCH_WORDS = 2      # per box (RXE_LIB_NMS_SCRATCH_BYTES)


class LibraryLowerError(RelaxEdgeError):
    """A data-dependent operator call that the library kernels do not cover."""


def _product(dims):
    total = as_expr(1)
    for d in dims:
        total = total * d
    return total


def _where(call: Call) -> str:
    return f"{call.op.name}" + (f" (node {call.span})" if call.span else "")


def _input(call: Call, i: int = 0) -> TensorType:
    t = call.args[i].type
    if not isinstance(t, TensorType) or t.shape is None:
        raise LibraryLowerError(f"{_where(call)}: input {i} must have a known shape to be compiled, got {t}")
    return t


def _nonzero(call: Call):
    x = _input(call)
    if len(x.shape) > MAX_NDIM:
        raise LibraryLowerError(f"{_where(call)}: rank {len(x.shape)} is above {MAX_NDIM}")
    numel = _product(x.shape)
    dims = list(x.shape) + [as_expr(1)] * (MAX_NDIM - len(x.shape))
    return (f"rxe_lib_nonzero_{_NONZERO[x.dtype]}", list(call.args), [numel, len(x.shape), *dims],
            {"count": 1, "capacity": (as_expr(len(x.shape)), numel)})


def _non_max_suppression(call: Call):
    boxes, scores = _input(call, 0), _input(call, 1)
    if boxes.dtype != "float32" or scores.dtype != "float32":
        raise LibraryLowerError(f"{_where(call)}: only float32 boxes and scores are compiled")
    batch, classes, n = scores.shape
    a = call.attrs
    score = a["score_threshold"]
    thresholds = Constant(np.array([a["iou_threshold"], 0.0 if score is None else score,
                                    0.0 if score is None else 1.0], np.float32))
    selected = batch * classes * min_expr(n, as_expr(int(a["max_output"])))
    sizes = [batch, classes, n, int(a["max_output"]), int(a["center_point_box"])]
    return ("rxe_lib_nms_f32", [*call.args, thresholds], sizes,
            {"count": 0, "capacity": (selected, as_expr(3)), "scratch_bytes": NMS_SCRATCH_WORDS * 8 * n})


def _unique(call: Call):
    x = _input(call)
    if x.dtype not in _UNIQUE:
        raise LibraryLowerError(f"{_where(call)}: unique of {x.dtype} is not compiled "
                                f"(supported: {', '.join(_UNIQUE)})")
    axis, which = call.attrs["axis"], int(call.attrs["output"])
    if axis is None:
        outer, n, inner = as_expr(1), _product(x.shape), as_expr(1)
        values_capacity = (n,)
    else:
        axis %= len(x.shape)
        outer, n, inner = _product(x.shape[:axis]), x.shape[axis], _product(x.shape[axis + 1:])
        values_capacity = tuple(x.shape)
    capacity = values_capacity if which == 0 else (n,)
    count = axis if which == 0 and axis is not None else 0
    return (f"rxe_lib_unique_{_UNIQUE[x.dtype]}", list(call.args),
            [outer, n, inner, which, int(bool(call.attrs["sorted"]))],
            {"count": count, "capacity": capacity, "scratch_bytes": UNIQUE_SCRATCH_WORDS * 8 * n})


LOWERINGS = {"nonzero": _nonzero, "non_max_suppression": _non_max_suppression, "unique": _unique}


def call_reference(op_name: str, n_args: int):
    """The operator's numpy reference over the call's own arguments (not the kernel's extra constants)."""
    op = OPS[op_name]

    def run(*arrays, **params):
        return op.reference(*arrays[:n_args], **params)
    return run


def runtime_call(call: Call, symbol: str, args, sizes, attrs: dict, reference=None):
    """The (CallExtern, ExternDecl) pair every library lowering returns: `symbol` called on `args` with the
    kernel's int64 `sizes`, the operator's attributes as "params", a "scratch_bytes" (dropped when None) as
    an expression, and the declaration of a runtime kernel whose reference is the operator's numpy one
    (or `reference`)."""
    attrs = dict(attrs, sizes=tuple(as_expr(s) for s in sizes), params=tuple(call.attrs.items()))
    if attrs.get("scratch_bytes") is None:
        attrs.pop("scratch_bytes", None)
    else:
        attrs["scratch_bytes"] = as_expr(attrs["scratch_bytes"])
    if reference is None:
        reference = call_reference(call.op.name, len(call.args))
    decl = ExternDecl(symbol, [a.type for a in args], call.type, "runtime", reference=reference)
    return CallExtern(symbol, args, call.type, attrs, call.span), decl


def lower_call(call: Call):
    """(CallExtern, ExternDecl) of the library kernel for a data-dependent
    operator call, or None when `call` is not one."""
    lowering = LOWERINGS.get(call.op.name)
    if lowering is None:
        return None
    symbol, args, sizes, attrs = lowering(call)
    attrs["count"] = int(attrs["count"])
    attrs["capacity"] = tuple(as_expr(d) for d in attrs["capacity"])
    return runtime_call(call, symbol, args, sizes, attrs)
