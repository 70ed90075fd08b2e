"""The 32-bit-output integer matmuls of the C runtime
(runtime_c/kernels/qdynamic.c, relax_edge/kernels_qdynamic.h) as
`call_extern`s of matmul_integer and dynamic_qdense
(relax_edge/op/qdynamic.py): transform/legalize.py asks `lower_call`.

1. The C convention is the library's: the pointers (the arguments, the
   output, then the scratch when there is one), the int64 sizes, `rxe_error_t*
   err`. `flags` (a size) says x is uint8 (RXE_QDYN_X_UNSIGNED), whether the
   weight zero points are read (RXE_QDYN_W_ZERO: not when they are a
   constant of zeros) and whether there is a bias (RXE_QDYN_BIAS; without
   one, w_scale stands in for the pointer and is not read).
2. The weights are packed at compile time as rxe_lib_qdense_s8's
   (library/qint8.py, attrs "pack": "qdense").
3. dynamic_qdense's scratch is the quantized x (m * k bytes), which the
   memory planner sees; x's leading axes are m, symbolic ones too.
4. The ExternDecl's reference is the operator's numpy reference.

Refused (a clear error naming the node): weights of unknown shape, a
reduction depth K above MAX_K.
"""

from __future__ import annotations

import numpy as np

from ..errors import RelaxEdgeError
from ..ir.expr import Call, Constant
from ..ir.shape import as_expr
from .data_dependent import runtime_call

MAX_K = 33025     # RXE_QDYN_MAX_K: K * 255 * 255 < 2^31
X_UNSIGNED, W_ZERO, BIAS = 1, 2, 4
MATMUL_INTEGER = "rxe_lib_matmul_integer_i32"
DYNAMIC_QDENSE = "rxe_lib_dynamic_qdense_f32"


class QDynamicLowerError(RelaxEdgeError):
    """A matmul_integer / dynamic_qdense call that the kernels do not cover."""


def _where(call: Call) -> str:
    return call.op.name + (f" (node {call.span})" if call.span else "")


def _rows(call: Call):
    m = as_expr(1)
    for d in call.args[0].type.shape[:-1]:
        m = m * d
    return m


def _nk(call: Call):
    shape = call.args[1].type.shape
    if shape is None or not all(d.is_const for d in shape):
        raise QDynamicLowerError(f"{_where(call)}: the weights must be a constant of known shape")
    n, k = (d.value for d in shape)
    if k > MAX_K:
        raise QDynamicLowerError(f"{_where(call)}: reduction depth {k} is above {MAX_K} (int32 sums)")
    return n, k


def _zero_flag(call: Call) -> int:
    z = call.args[2]
    return 0 if isinstance(z, Constant) and not np.asarray(z.data).any() else W_ZERO


def _matmul_integer(call: Call):
    n, k = _nk(call)
    flags = _zero_flag(call) | (X_UNSIGNED if call.args[0].type.dtype == "uint8" else 0)
    return MATMUL_INTEGER, list(call.args), [_rows(call), n, k, int(call.attrs["x_zero"]), flags], None


def _dynamic_qdense(call: Call):
    n, k = _nk(call)
    args = list(call.args)
    has_bias = bool(call.attrs["has_bias"])
    if not has_bias:
        args.append(args[3])   # w_scale stands in for the bias pointer (not read)
    m = _rows(call)
    flags = _zero_flag(call) | (BIAS if has_bias else 0)
    return DYNAMIC_QDENSE, args, [m, n, k, flags], m * k


LOWERINGS = {"matmul_integer": _matmul_integer, "dynamic_qdense": _dynamic_qdense}


def lower_call(call: Call):
    """(CallExtern, ExternDecl) of the kernel for a matmul_integer / dynamic_qdense call, or None."""
    lowering = LOWERINGS.get(call.op.name)
    if lowering is None:
        return None
    symbol, args, sizes, scratch = lowering(call)
    return runtime_call(call, symbol, args, sizes, {"pack": ((1, "qdense"),), "scratch_bytes": scratch})
