"""The int8 element-wise and pooling kernels of the C runtime
(runtime_c/kernels/qeltwise.c, header kernels_qeltwise.h) as `call_extern`s:
transform/legalize.py asks `lower_call` for qadd (relax_edge/op/quant_int8.py)
and max_pool2d (relax_edge/op/nn.py) calls.

1. The C convention is the library's (relax_edge/library/kernels.py): the
   pointers (the arguments, then the output), the int64 sizes, `rxe_error_t* err`.
   Zero points, multipliers, shifts, the clamp and `dtypes` (which operands are
   uint8) are sizes.
2. qadd: both inputs of one shape (a broadcasting add keeps its tensor
   program); max_pool2d: 2-D, int8 or uint8, a window row narrower than the
   kernel's 512-byte line (float pools and the rest keep their tensor
   programs: `lower_call` returns None).
3. The ExternDecl's reference is the operator's numpy reference (the
   interpreter runs the legalized module); "params" carries the attributes.
"""

from __future__ import annotations

from ..ir.expr import Call
from ..ir.shape import Proof, as_expr, prove_equal
from ..op.quant_int8 import QUANT_RANGES
from .data_dependent import runtime_call

QADD = "rxe_lib_qadd_s8"
MAX_POOL2D = "rxe_lib_max_pool2d_s8"
A_UNSIGNED, B_UNSIGNED, OUT_UNSIGNED = 1, 2, 4   # RXE_QELT_*_UNSIGNED
POOL_LINE = 512                                 # POOL_LINE (qeltwise.c)


def _count(shape):
    total = as_expr(1)
    for d in shape:
        total = total * d
    return total


def _qadd(call: Call):
    a, b = call.args
    sa, sb = a.type.shape, b.type.shape
    if len(sa) != len(sb) or any(prove_equal(x, y) is not Proof.YES for x, y in zip(sa, sb)):
        return None
    at = call.attrs
    dtypes = ((A_UNSIGNED if a.type.dtype == "uint8" else 0) | (B_UNSIGNED if b.type.dtype == "uint8" else 0)
              | (OUT_UNSIGNED if call.type.dtype == "uint8" else 0))
    lo, hi = QUANT_RANGES[call.type.dtype]
    act_min = lo if at.get("act_min") is None else int(at["act_min"])
    act_max = hi if at.get("act_max") is None else int(at["act_max"])
    sizes = [_count(sa), at["a_zero"], at["b_zero"], at["a_multiplier"], at["a_shift"], at["b_multiplier"],
             at["b_shift"], at["multiplier"], at["shift"], at["out_zero"], act_min, act_max, dtypes]
    return QADD, sizes


def _max_pool2d(call: Call):
    x = call.args[0]
    if x.type.dtype not in QUANT_RANGES or len(x.type.shape) != 4:
        return None
    at = call.attrs
    kh, kw = (int(k) for k in at["kernel_size"])
    sh, sw = (int(s) for s in (at["strides"] if at.get("strides") is not None else at["kernel_size"]))
    dh, dw = (int(d) for d in at.get("dilation", (1, 1)))
    pt, pl = (int(p) for p in at.get("padding", (0, 0, 0, 0))[:2])
    if (kw - 1) * dw >= POOL_LINE:
        return None
    n, c, h, w = x.type.shape
    _, _, oh, ow = call.type.shape
    return MAX_POOL2D, [n, c, h, w, kh, kw, oh, ow, sh, sw, pt, pl, dh, dw, int(x.type.dtype == "uint8")]


LOWERINGS = {"qadd": _qadd, "max_pool2d": _max_pool2d}


def lower_call(call: Call):
    """(CallExtern, ExternDecl) of the kernel for `call`, or None when it keeps its tensor program."""
    lowering = LOWERINGS.get(call.op.name)
    lowered = lowering(call) if lowering is not None else None
    if lowered is None:
        return None
    symbol, sizes = lowered
    return runtime_call(call, symbol, list(call.args), sizes, {"pack": ()})
