"""fold_batch_norm: inference batch normalization folded into what precedes it.

1. `batch_norm(conv2d(x, W), scale, bias, mean, var)` with constant
   parameters and weights, the convolution used by nothing else, becomes
   `conv2d(x, W * s) + (bias - mean * s)` with s = scale / sqrt(var + eps)
   per output channel (W * s computed at compile time), which `dispatch`
   then sends to the convolution kernel with its bias (and activation).
2. Any other `batch_norm` with constant parameters becomes `x * s + t`
   (two broadcast operations that `fuse` merges into their neighbours).

The folded weights are computed in float64 and rounded once, so results
differ from the unfolded graph by rounding only (a few ulps). Does not fold
training-mode normalization (not an operator here) or parameters that are
not constants.
"""

from __future__ import annotations

import numpy as np

from ..ir.expr import Call, Constant, Function, IRModule, SeqExpr, VarBinding
from ..op.registry import make_call
from .bindings import scan

__all__ = ["fold_batch_norm"]


def _fold(func: Function) -> Function:
    info = scan(func)
    changed, blocks = False, []
    for blk in func.body.blocks:
        out = []
        for b in blk.bindings:
            call = b.value
            if not (isinstance(b, VarBinding) and isinstance(call, Call) and call.op.name == "batch_norm"):
                out.append(b)
                continue
            params = [info.constant(a) for a in call.args[1:]]
            if any(p is None for p in params) or call.type.dtype not in ("float32", "float64"):
                out.append(b)
                continue
            scale, bias, mean, var = (p.data.astype(np.float64) for p in params)
            s = scale / np.sqrt(var + float(call.attrs["epsilon"]))
            shift = bias - mean * s
            x = call.args[0]
            dtype = np.dtype(call.type.dtype)
            along_c = (1, -1) + (1,) * (call.type.ndim - 2)
            producer = info.values.get(x)
            w = info.constant(producer.args[1]) if isinstance(producer, Call) and producer.op.name == "conv2d" \
                else None
            if w is not None and info.single_use(x):
                folded_w = (w.data.astype(np.float64) * s.reshape(-1, 1, 1, 1)).astype(w.data.dtype)
                conv = make_call("conv2d", [producer.args[0], Constant(folded_w)], dict(producer.attrs),
                                 span=producer.span)
                conv_var = type(x)(x.name, conv.type)
                out = [c for c in out if c.var is not x]
                out.append(VarBinding(conv_var, conv))
                shift_c = Constant(shift.astype(dtype).reshape(along_c))
                out.append(VarBinding(b.var, make_call("add", [conv_var, shift_c], span=call.span)))
            else:
                scaled = make_call("multiply", [x, Constant(s.astype(dtype).reshape(along_c))], span=call.span)
                scaled_var = type(b.var)(f"{b.var.name}_scaled", scaled.type)
                out.append(VarBinding(scaled_var, scaled))
                shift_c = Constant(shift.astype(dtype).reshape(along_c))
                out.append(VarBinding(b.var, make_call("add", [scaled_var, shift_c], span=call.span)))
            changed = True
        blocks.append(type(blk)(out))
    if not changed:
        return func
    return Function(func.params, SeqExpr(blocks, func.body.body), func.ret_type, func.name, func.attrs)


def fold_batch_norm(mod: IRModule) -> IRModule:
    """`mod` with every constant-parameter batch_norm folded (see above)."""
    return IRModule({name: _fold(f) for name, f in mod.functions.items()}, mod.tensor_programs, mod.externs)
