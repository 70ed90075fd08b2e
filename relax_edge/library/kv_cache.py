"""The KV-cache kernels of the C runtime (runtime_c/kernels/attention.c) as
`call_extern`s: transform/legalize.py asks `lower_call` for kv_append and
kv_attention (relax_edge/op/kv_cache.py).

1. The C convention is the library's (relax_edge/library/kernels.py): the
   pointers (the arguments, then the output), the int64 sizes, `rxe_error_t* err`.
2. kv_append's result is its state argument's storage: attrs["inplace_arg"]
   = 0 tells the memory planner (memory/liveness.py) to give the result the
   argument's storage (a caller's state input), so the kernel writes only
   the new positions and nothing is copied.
3. kv_attention's scale travels as a one-element float32 constant; without a
   mask the query stands in for the mask pointer and has_mask is 0. The mask
   broadcasts over heads and rows through strides of 0.
4. kv_attention has scratch (its split of the context at decode, see
   kernels_kv.h): RXE_KV_SCRATCH_FLOATS floats, planned like any kernel's.
5. The ExternDecl's reference is the operator's numpy reference, so the
   interpreter runs the legalized module; "params" carries the operator's
   attributes (symbolic ones are evaluated by the interpreter).
"""

from __future__ import annotations

import numpy as np

from ..ir.expr import Call, Constant
from ..ir.shape import Proof, as_expr, prove_equal
from .data_dependent import runtime_call

APPEND = "rxe_lib_kv_append_f32"
# the split of the context at decode (kernels_kv.h RXE_KV_MAX_SPLITS, RXE_KV_GROUP_CHUNK)
MAX_SPLITS = 8
GROUP_CHUNK = 16
ATTENTION = "rxe_lib_kv_attention_f32"


def _append(call: Call):
    state, new = call.args
    _, kv_heads, max_context, head_dim = state.type.shape
    sizes = (kv_heads, max_context, new.type.shape[2], head_dim, call.attrs["offset"])
    return APPEND, list(call.args), sizes, {"inplace_arg": 0}


def _attention(call: Call):
    q, k, v = call.args[:3]
    mask = call.args[3] if len(call.args) > 3 else None
    _, heads, seq, head_dim = q.type.shape
    kv_len = call.attrs["kv_len"]
    scale = Constant(np.array([call.attrs["scale"]], np.float32))
    if mask is None:
        strides = (0, 0, 0)
    else:
        _, mh, mr, _ = mask.type.shape
        row = as_expr(0) if prove_equal(mr, 1) is Proof.YES else as_expr(kv_len)
        head = as_expr(0) if prove_equal(mh, 1) is Proof.YES else as_expr(mr) * kv_len
        strides = (1, head, row)
    kv_heads = k.type.shape[1]
    sizes = (heads, kv_heads, seq, kv_len, k.type.shape[2], head_dim, *strides)
    group = as_expr(heads).value // as_expr(kv_heads).value
    chunks, per_chunk = -(-group // GROUP_CHUNK), min(group, GROUP_CHUNK)
    scratch = as_expr(kv_heads) * (chunks * MAX_SPLITS * per_chunk * 4) * (as_expr(head_dim) + 4)
    return ATTENTION, [q, k, v, mask if mask is not None else q, scale], sizes, \
        {"mask": mask is not None, "scratch_bytes": scratch}


LOWERINGS = {"kv_append": _append, "kv_attention": _attention}


def lower_call(call: Call):
    """(CallExtern, ExternDecl) of the KV-cache kernel for `call`, or None."""
    lowering = LOWERINGS.get(call.op.name)
    if lowering is None:
        return None
    symbol, args, sizes, attrs = lowering(call)
    return runtime_call(call, symbol, args, sizes, attrs)
