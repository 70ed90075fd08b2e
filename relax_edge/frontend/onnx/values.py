"""What an ONNX value is while importing.

1. A graph value (`relax_edge.ir.Expr`): known only at run time.
2. A known array (`numpy.ndarray`): an initializer, a Constant node, or a
   result folded at import time.
3. `SymInts`: an integer tensor known at import time whose entries may be
   symbolic (`IntExpr`), such as the output of `Shape` or anything computed
   from it by Gather, Slice, Concat, arithmetic and so on. Shape subgraphs of
   exported transformers are evaluated on these, so that a Reshape target
   like `concat(shape(x)[0:2], [12, 64])` becomes `(1, seq, 12, 64)`.

`static_array` gives the import-time contents of 2 or 3 as a numpy array
(object dtype holding IntExpr where symbolic); `from_static` turns such an
array back into the tightest kind (a plain array when every entry is a
constant).
"""

from __future__ import annotations

import numpy as np

from ...errors import ShapeError
from ...ir.shape import IntExpr, as_expr


class SymInts:
    """An import-time integer tensor with symbolic entries."""

    __slots__ = ("values", "dtype")

    def __init__(self, values: np.ndarray, dtype: str = "int64"):
        self.values = values
        self.dtype = dtype

    @property
    def shape(self):
        return self.values.shape

    def __repr__(self):
        return f"SymInts({self.values.tolist()}, {self.dtype})"


def to_object(arr: np.ndarray) -> np.ndarray:
    """An integer array as an object array of IntExpr."""
    out = np.empty(arr.shape, dtype=object)
    flat = out.reshape(-1)
    for i, v in enumerate(np.asarray(arr).reshape(-1)):
        flat[i] = as_expr(int(v))
    return out


def static_array(value):
    """Import-time contents: an ndarray (object dtype if symbolic), or None."""
    if isinstance(value, np.ndarray):
        return value
    if isinstance(value, SymInts):
        return value.values
    return None


def from_static(arr: np.ndarray, dtype: str = "int64"):
    """A known array if every entry is a constant, else SymInts."""
    if arr.dtype != object:
        return arr
    flat = arr.reshape(-1)
    if all(isinstance(v, IntExpr) and v.is_const for v in flat) or all(
            isinstance(v, (int, np.integer)) for v in flat):
        ints = [int(v) for v in flat]
        info = np.iinfo(dtype) if np.dtype(dtype).kind in "iu" else None
        if info is not None and any(not info.min <= v <= info.max for v in ints):
            bad = next(v for v in ints if not info.min <= v <= info.max)
            raise ShapeError(f"the value {bad} does not fit in {dtype}")
        return np.array(ints, dtype=dtype).reshape(arr.shape)
    out = np.empty(arr.shape, dtype=object)
    out.reshape(-1)[:] = [as_expr(v) if not isinstance(v, IntExpr) else v for v in flat]
    return SymInts(out, dtype)


def is_integer_static(value) -> bool:
    arr = static_array(value)
    return arr is not None and (arr.dtype == object or arr.dtype.kind in "iu")
