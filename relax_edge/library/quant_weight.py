"""The weight-only quantized kernels of the C runtime
(runtime_c/kernels/matmul_nbits.c, relax_edge/kernels_quant.h) as
`call_extern`s: transform/legalize.py asks `lower_call` for matmul_nbits and
gather_nbits (relax_edge/op/quant_weight.py).

1. The kernels read the operators' packed layout as it is (qweight, scales,
   zeros): no compile-time repacking, so constants that two calls share
   (tied embeddings: the embedding's gather_nbits and the LM head's
   matmul_nbits) stay one Constant, and one copy in the weight blob, at their
   packed size (about bits/32 of the float32 weight, plus the scales).
2. The C convention is the library's: the pointers (the arguments, then the
   output, then the scratch when there is one), the int64 sizes, `rxe_error_t*
   err`. The kernel's argument list is fixed: an absent zeros or bias argument
   is stood in for by the scales (not read; the sizes say so).
3. matmul_nbits with act="int8" calls the q8 kernel, which quantizes x into
   its scratch first (q8_scratch_bytes, RXE_LIB_MATMUL_NBITS_Q8_SCRATCH_BYTES);
   x's leading axes are m (symbolic ones too: the kernel takes m at run time).
4. The ExternDecl's reference is the operator's numpy reference over the
   call's own arguments (the stand-ins dropped by the attributes in
   "params"), so the interpreter runs the legalized module.
"""

from __future__ import annotations

from ..ir.expr import Call
from ..ir.shape import as_expr
from ..op.registry import OPS
from .data_dependent import runtime_call

MATMUL = "rxe_lib_matmul_nbits_f32"
MATMUL_Q8 = "rxe_lib_matmul_nbits_q8_f32"
GATHER = "rxe_lib_gather_nbits_f32"
ZERO_CODES = {"default": 0, "uint8": 1, "float": 2}   # RXE_NBITS_ZERO_*
INDEX_BITS = {"int32": 32, "int64": 64}


def q8_scratch_bytes(m, k: int, block: int):
    """Bytes of the act="int8" kernel's scratch for m rows (RXE_LIB_MATMUL_NBITS_Q8_SCRATCH_BYTES): the larger
    of the quantized rows (int8 values, then two floats per block) and m * k floats (the prefill path)."""
    return m * max(4 * k, -(-k // block) * (block + 8))


def _product(dims):
    total = as_expr(1)
    for d in dims:
        total = total * d
    return total


def _weights(call: Call, first: int):
    """qweight, scales and the zeros (or the scales standing in) from argument `first` on; the index past them."""
    qweight, scales = call.args[first], call.args[first + 1]
    if call.attrs["zero"] == "default":
        return [qweight, scales, scales], first + 2
    return [qweight, scales, call.args[first + 2]], first + 3


def _matmul(call: Call):
    a = call.attrs
    x = call.args[0]
    weights, after = _weights(call, 1)
    bias = call.args[after] if a["has_bias"] else weights[1]
    m = _product(x.type.shape[:-1])
    sizes = (m, a["N"], a["K"], a["bits"], a["block_size"], ZERO_CODES[a["zero"]], int(bool(a["has_bias"])))
    if a["act"] == "int8":
        return MATMUL_Q8, [x, *weights, bias], sizes, {"scratch_bytes": q8_scratch_bytes(m, a["K"], a["block_size"])}
    return MATMUL, [x, *weights, bias], sizes, {}


def _gather(call: Call):
    a = call.attrs
    weights, after = _weights(call, 0)
    ids = call.args[after]
    sizes = (weights[0].type.shape[0], _product(ids.type.shape), a["K"], a["bits"], a["block_size"],
             ZERO_CODES[a["zero"]], INDEX_BITS[ids.type.dtype])
    return GATHER, [*weights, ids], sizes, {}


LOWERINGS = {"matmul_nbits": _matmul, "gather_nbits": _gather}


def _reference(op_name: str, first: int):
    """The operator's reference over the kernel's arguments: the stand-ins for absent zeros / bias dropped."""
    op = OPS[op_name]

    def run(*arrays, **params):
        args = list(arrays[:first + 2])
        if params["zero"] != "default":
            args.append(arrays[first + 2])
        rest = arrays[first + 3:]
        if op_name == "matmul_nbits":
            rest = rest[:1] if params["has_bias"] else ()
        else:
            rest = rest[:1]
        return op.reference(*args, *rest, **params)
    return run


def lower_call(call: Call):
    """(CallExtern, ExternDecl) of the quantized-weight kernel for `call`, or None."""
    lowering = LOWERINGS.get(call.op.name)
    if lowering is None:
        return None
    symbol, args, sizes, attrs = lowering(call)
    reference = _reference(call.op.name, 1 if call.op.name == "matmul_nbits" else 0)
    return runtime_call(call, symbol, args, sizes, attrs, reference)
