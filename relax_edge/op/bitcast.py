"""bitcast: the bits of each element read as another element type of the
same width (ONNX BitCast), no value conversion; the shape is kept.

The numpy reference is `ndarray.view`. bfloat16 has no numpy dtype: the
interpreter hands its elements to references widened to float32 and narrows
a bfloat16 result (ir/bfloat16.py), so the reference turns a widened
float32 back into its 16 bits and widens the bits it makes; that round trip
is exact except that a signalling NaN pattern comes back quiet (as in
compiled float16 / bfloat16 kernels, which hold values as float)."""

from __future__ import annotations

import numpy as np

from ..ir import bfloat16
from ..ir.types import TensorType
from .registry import REQUIRED, Op, RuleError, register
from .rules import tensor

__all__ = ["BIT_WIDTHS"]

# element types with a defined bit pattern, and their widths
BIT_WIDTHS = {"float16": 16, "bfloat16": 16, "float32": 32, "float64": 64, "int8": 8, "uint8": 8, "int16": 16,
              "uint16": 16, "int32": 32, "uint32": 32, "int64": 64, "uint64": 64}


def _bitcast_rule(types, attrs):
    x, to = tensor(types[0]), attrs["to"]
    for dtype in (x.dtype, to):
        if dtype not in BIT_WIDTHS:
            raise RuleError(f"{dtype} has no bit pattern to reinterpret (supported: {', '.join(BIT_WIDTHS)})")
    if BIT_WIDTHS[x.dtype] != BIT_WIDTHS[to]:
        raise RuleError(f"{x.dtype} ({BIT_WIDTHS[x.dtype]} bits) and {to} ({BIT_WIDTHS[to]} bits) differ in width")
    return TensorType(x.shape, to)


def _bitcast_ref(x, to):
    x = np.asarray(x)
    if x.dtype == np.float32 and BIT_WIDTHS[to] == 16:   # a bfloat16 input, widened by the interpreter
        x = bfloat16.narrow(x)
    if to == "bfloat16":   # its bits, widened for the interpreter to narrow back
        return bfloat16.widen(x.view(np.uint16))
    return x.view(to)


register(Op("bitcast", _bitcast_rule, _bitcast_ref, attrs={"to": REQUIRED}, kind="elementwise",
            doc="the bits of each element as dtype `to` of the same width (ONNX BitCast)"))
