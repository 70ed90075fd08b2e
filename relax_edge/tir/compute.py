"""A small tensor-expression language that lowers to tensor programs.

    n = SizeVar("n")
    a = placeholder((n, 4), "float32", "a")
    b = compute((n,), lambda i: reduce_sum(a[i, k] * 2.0, [k := reduce_axis(4, "k")]), "b")
    program = lower("row_sum", [a], [b])

1. `placeholder` is an input; `compute(shape, fn)` defines each element of a
   new tensor from loop variables (SizeVars >= 0) and loads of other tensors.
2. A compute body may contain one reduction (`reduce_sum`, `reduce_max`,
   `reduce_min`, or `Reduce` with any combiner) over reduction axes, possibly
   wrapped in more arithmetic (`reduce_sum(...) / n` for a mean).
3. `lower` gives every computed tensor its own loop nest in dependency
   order. Outputs are the program's output buffers; other computed tensors
   become scratch buffers that the caller provides (so a kernel never
   allocates). Reductions accumulate in a one-element local buffer.

Nothing here schedules: loops are plain serial nests, in the shape's order.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass

from ..errors import RelaxEdgeError
from ..ir.shape import IntExpr, SizeVar, as_expr, free_vars
from .expr import Load, PrimExpr, binop, const, is_float, wrap
from .program import TensorProgram
from .stmt import Allocate, Assert, Buffer, For, Seq, Store, loop_var
from .visit import map_expr

__all__ = ["Tensor", "placeholder", "compute", "reduce_axis", "Reduce", "reduce_sum", "reduce_max",
           "reduce_min", "lower"]


# the tensor that computes each buffer, so lowering finds producers from loads
_PRODUCERS: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


class Tensor:
    """A tensor of the expression language: a placeholder or a computed one."""

    def __init__(self, name, shape, dtype, axes=None, body=None, asserts=()):
        self.buffer = Buffer(name, dtype, shape)
        self.axes = axes
        self.body = body
        self.asserts = tuple(asserts)
        if body is not None:
            _PRODUCERS[self.buffer] = self

    @property
    def name(self):
        return self.buffer.name

    @property
    def shape(self):
        return self.buffer.shape

    @property
    def dtype(self):
        return self.buffer.dtype

    @property
    def is_placeholder(self) -> bool:
        return self.body is None

    def __getitem__(self, indices) -> Load:
        if not isinstance(indices, tuple):
            indices = (indices,)
        return Load(self.buffer, indices)


def placeholder(shape, dtype: str, name: str) -> Tensor:
    return Tensor(name, shape, dtype)


@dataclass(frozen=True)
class ReduceAxis:
    var: SizeVar
    extent: IntExpr


def reduce_axis(extent, name: str) -> ReduceAxis:
    return ReduceAxis(loop_var(name), as_expr(extent))


@dataclass(frozen=True, eq=False)
class Reduce(PrimExpr):
    """combine(acc, source) folded over `axes` starting from `init`."""
    combiner: str          # add | max | min
    source: PrimExpr
    axes: tuple
    init: PrimExpr
    dtype: str

    def __hash__(self):
        return id(self)


def _lowest(dtype):
    import numpy as np
    if is_float(dtype):
        return float("-inf")
    if dtype == "bool":
        return 0
    return int(np.iinfo(dtype).min)


def _highest(dtype):
    import numpy as np
    if is_float(dtype):
        return float("inf")
    if dtype == "bool":
        return 1
    return int(np.iinfo(dtype).max)


def reduce_sum(source, axes) -> Reduce:
    return Reduce("add", source, tuple(axes), const(0, source.dtype), source.dtype)


def reduce_max(source, axes) -> Reduce:
    return Reduce("max", source, tuple(axes), const(_lowest(source.dtype), source.dtype), source.dtype)


def reduce_min(source, axes) -> Reduce:
    return Reduce("min", source, tuple(axes), const(_highest(source.dtype), source.dtype), source.dtype)


_counter = [0]


def compute(shape, fn, name: str, dtype: str | None = None, asserts=None) -> Tensor:
    """`asserts(*axes)` may return [(condition, message, values)] checked
    for each element before it is stored (e.g. an index read from a tensor
    is in range)."""
    shape = tuple(as_expr(d) for d in shape)
    axes = tuple(loop_var(f"i{k}") for k in range(len(shape)))
    body = wrap(fn(*axes), dtype or "float32")
    if dtype is not None and body.dtype != dtype:
        raise RelaxEdgeError(f"compute {name}: body has dtype {body.dtype}, declared {dtype}")
    checks = [Assert(c, m, tuple(v)) for c, m, v in (asserts(*axes) if asserts else [])]
    return Tensor(name, shape, body.dtype, axes, body, checks)


# ------------------------------------------------------------------ lowering

def _reduces(expr) -> list:
    found = []

    def visit(e):
        if isinstance(e, Reduce):
            found.append(e)
            return e
        return None
    map_expr(expr, visit)
    return found


def _loads(expr) -> list:
    found = []

    def visit(e):
        if isinstance(e, Load):
            found.append(e.buffer)
        return None
    map_expr(expr, visit)
    return found


def _nest(axes, extents, body, kind="serial"):
    for var, extent in reversed(list(zip(axes, extents))):
        body = For(var, extent, body, kind)
    return body


def _lower_stage(t: Tensor):
    reductions = _reduces(t.body)
    if len(reductions) > 1:
        raise RelaxEdgeError(f"compute {t.name}: at most one reduction per tensor")
    if not reductions:
        return _nest(t.axes, t.shape, Seq([*t.asserts, Store(t.buffer, t.axes, t.body)]))
    red = reductions[0]
    acc = Buffer(f"{t.name}_acc", red.dtype, (1,))
    combined = binop(red.combiner, Load(acc, (0,)), red.source)
    inner = _nest([a.var for a in red.axes], [a.extent for a in red.axes], Store(acc, (0,), combined))
    result = map_expr(t.body, lambda e: Load(acc, (0,)) if e is red else None)
    body = Allocate(acc, Seq([Store(acc, (0,), red.init), inner, *t.asserts, Store(t.buffer, t.axes, result)]))
    return _nest(t.axes, t.shape, body)


def _stages(outputs) -> list:
    """Computed tensors reachable from `outputs`, producers first."""
    order, seen = [], set()

    def visit(t: Tensor):
        if t.is_placeholder or id(t) in seen:
            return
        seen.add(id(t))
        for buf in _loads(t.body):
            producer = _PRODUCERS.get(buf)
            if producer is not None:
                visit(producer)
        order.append(t)

    for t in outputs:
        visit(t)
    return order


def lower(name: str, inputs, outputs, size_params=None) -> TensorProgram:
    """A tensor program computing `outputs` from `inputs`."""
    stages = _stages(outputs)
    input_buffers = tuple(t.buffer for t in inputs)
    known = set(input_buffers) | {s.buffer for s in stages}
    for s in stages:
        for buf in _loads(s.body):
            if buf not in known and not buf.name.endswith("_acc"):
                raise RelaxEdgeError(f"program {name}: {s.name} reads {buf.name}, which is neither "
                                     "an input nor computed here")
    output_buffers = tuple(t.buffer for t in outputs)
    scratch = tuple(s.buffer for s in stages if s.buffer not in output_buffers)
    body = Seq([_lower_stage(s) for s in stages])
    if size_params is None:
        found = set()
        for buf in input_buffers + output_buffers + scratch:
            for d in buf.shape:
                found |= free_vars(d)
        size_params = tuple(sorted(found, key=lambda v: v.name))
    return TensorProgram(name, input_buffers, output_buffers, body, tuple(size_params), scratch)
