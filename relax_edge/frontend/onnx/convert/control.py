"""ONNX import: control flow (If, Loop, Scan).

1. If: a condition known at import time picks the branch, which is converted
   in place (folded). Otherwise the IR's `If` is emitted, each branch a
   SeqExpr; the result types are joined across the branches: a dim that
   differs becomes a fresh size variable bound by a match_cast after the if.
   Branches must agree on each output's dtype and rank.
2. Loop: unrolled at import. The trip count M must be known at compile time
   (or absent). While the condition (the initial one, then the body's
   `cond` output) is known, each copy is inlined and a false one stops the
   loop; once it is computed at run time, each further copy runs inside an
   if on it (its else branch passes the carried values on), which needs a
   trip count and no scan outputs (their length would be a run-time value).
   Carried values flow from one copy to the next; scan outputs are the
   per-iteration values stacked on a new axis 0.
3. Scan (opset 8 with its batch axis and sequence_lens, opset 9+ with
   scan_input_axes/directions and scan_output_axes/directions): unrolled at
   import over the scanned axis, whose length must be known at compile
   time; opset 8's sequence_lens must be known and equal the full length.
4. At most MAX_UNROLL body copies per node; beyond it a clear error.

Subgraphs see the enclosing scopes' names (importer.run_graph); sequence and
optional values are refused there as everywhere.
"""

from __future__ import annotations

import numpy as np

from ....ir.expr import Tuple, TupleGetItem
from ....ir.shape import Proof, as_expr, bounds, prove_equal
from ....ir.types import TensorType
from ..context import converter

# the most body copies one Loop or Scan node may unroll to
MAX_UNROLL = 4096


# ------------------------------------------------------------------ If

@converter("If")
def convert_if(ctx, inputs):
    branches = {name: ctx.graph_attr(name) for name in ("then_branch", "else_branch")}
    n_out = len(ctx.node.output)
    for name, graph in branches.items():
        if len(graph.output) != n_out:
            raise ctx.error(f"{name} gives {len(graph.output)} outputs, the node has {n_out}")
    known = ctx.known(inputs[0])
    if known is not None:
        if known.size != 1:
            raise ctx.error(f"the condition must hold one value, got shape {known.shape}")
        name = "then_branch" if bool(known.reshape(-1)[0]) else "else_branch"
        return ctx.run_graph(branches[name], [], name)
    def branch(name):
        return lambda: ctx.run_graph(branches[name], [], name)
    return emit_if(ctx, inputs[0], branch("then_branch"), branch("else_branch"), n_out)


def emit_if(ctx, cond, then_values, else_values, n_out: int) -> list:
    """The IR's if on the runtime `cond`, each branch the values its callback
    converts; the outputs, a fresh size where the branches disagree on a dim."""
    cond = _scalar_condition(ctx, cond)
    common: dict = {}
    uppers: dict = {}   # output -> each dim's larger bound over the branches

    def join(then_type, else_type):
        fields = (then_type.fields, else_type.fields) if n_out > 1 else ((then_type,), (else_type,))
        joined = [_join_types(ctx, i, a, b, common, uppers) for i, (a, b) in enumerate(zip(*fields))]
        return joined[0] if n_out == 1 else type(then_type)(joined)

    def build(values, name):
        def body(_builder):
            outs = values()
            if any(v is None for v in outs):
                raise ctx.error(f"the {name} branch leaves an output empty; optional values are not supported")
            exprs = [ctx.tensor(v) for v in outs]
            return exprs[0] if n_out == 1 else Tuple(exprs)
        return body

    result = ctx.emit_if(cond, build(then_values, "then"), build(else_values, "else"), join)
    outs = [result] if n_out == 1 else [ctx.builder.emit(TupleGetItem(result, i)) for i in range(n_out)]
    for i, value in enumerate(outs):
        if i in common:  # the branches disagree on a dim: fresh size variables, checked at run time
            outs[i] = ctx.match_cast_fresh(value, f"out{i}_", lower=0, known=common[i], upper=uppers[i])
    return outs


def _scalar_condition(ctx, cond):
    t = ctx.type_of(cond)
    if t.dtype != "bool":
        raise ctx.error(f"the condition must be bool, got {t.dtype}")
    if t.shape is None or not all(d.is_const for d in t.shape) or int(np.prod([d.value for d in t.shape])) != 1:
        raise ctx.error(f"the condition must hold one value, got shape {t}")
    return ctx.emit("reshape", [cond], {"shape": ()}) if t.ndim else cond


def _join_types(ctx, i, a, b, common, uppers):
    """The type of output `i` over both branches; records in `common` the dims
    both share when another dim differs (and in `uppers` each dim's larger bound)."""
    if not (isinstance(a, TensorType) and isinstance(b, TensorType)):
        raise ctx.error(f"output {i}: only tensor outputs are supported (got {a} and {b})")
    if a.dtype != b.dtype:
        raise ctx.error(f"output {i}: the branches give dtypes {a.dtype} and {b.dtype}")
    if a.ndim != b.ndim or a.shape is None or b.shape is None:
        raise ctx.error(f"output {i}: the branches give ranks {a.ndim} and {b.ndim}; "
                        "an If whose branches differ in rank is not supported")
    same = [prove_equal(x, y) is Proof.YES for x, y in zip(a.shape, b.shape)]
    if all(same):
        return a
    common[i] = [x if s else None for x, s in zip(a.shape, same)]
    uppers[i] = [max(bounds(x)[1], bounds(y)[1]) for x, y in zip(a.shape, b.shape)]   # the larger branch
    return TensorType(None, a.dtype, ndim=a.ndim)


# ---------------------------------------------------------------- Loop

@converter("Loop", static={0, 1})
def convert_loop(ctx, inputs):
    body = ctx.graph_attr("body")
    inputs = list(inputs) + [None] * (2 - len(inputs))
    trip, cond, carried = inputs[0], inputs[1], list(inputs[2:])
    n_carried = len(carried)
    if len(body.input) != n_carried + 2:
        raise ctx.error(f"the body takes {len(body.input)} inputs; it must take 2 + {n_carried} "
                        "(iteration number, condition, carried values)")
    if len(body.output) < n_carried + 1:
        raise ctx.error(f"the body gives {len(body.output)} outputs; it must give at least 1 + {n_carried}")
    if any(v is None for v in carried):
        raise ctx.error("an empty loop-carried value is not supported (optional values)")
    count = None if trip is None else int(ctx.scalar(trip, 0, "trip count M", integer=True))
    n_scans = len(body.output) - 1 - n_carried
    go = np.array(True) if cond is None else cond
    limit = MAX_UNROLL if count is None else min(count, MAX_UNROLL)
    scans: list = [[] for _ in range(n_scans)]
    i = 0
    while i < limit:
        known = _condition(ctx, go, "the initial condition (input 1)" if i == 0 else
                           f"the body's condition output at iteration {i - 1}")
        if known is False:
            break
        values = [np.array(i, np.int64), np.array(True)] + carried
        if known is None:   # a runtime condition: this copy runs only while it holds
            if count is None or n_scans:
                raise ctx.error(f"{'the initial condition' if i == 0 else f'the condition after iteration {i - 1}'}"
                                " is computed at run time; relax_edge unrolls such a Loop (each copy guarded) "
                                "only with a trip count M and no scan outputs (a runtime condition here is "
                                "not supported)")
            outs = emit_if(ctx, go, lambda values=values, i=i: _body(ctx, body, values, f"iter{i}")[:1 + n_carried],
                           lambda carried=carried: [np.array(False)] + carried, 1 + n_carried)
        else:
            outs = _body(ctx, body, values, f"iter{i}")
        go, carried = outs[0], outs[1:1 + n_carried]
        for acc, value in zip(scans, outs[1 + n_carried:]):
            acc.append(value)
        i += 1
    if i == MAX_UNROLL and (count is None or count > MAX_UNROLL) and \
            _condition(ctx, go, f"the body's condition output at iteration {i - 1}") is not False:
        raise ctx.error(f"the loop runs more than {MAX_UNROLL} iterations (trip count "
                        f"{'none' if count is None else count}); relax_edge unrolls at most {MAX_UNROLL} body copies")
    stacked = [_stack(ctx, acc, 0, body.output[1 + n_carried + k]) for k, acc in enumerate(scans)]
    return carried + stacked


def _condition(ctx, value, what: str):
    """A condition's value when known at import time (True/False), else None."""
    arr = ctx.known(value)
    if arr is None:
        t = ctx.type_of(value)
        if t.dtype != "bool":
            raise ctx.error(f"{what} must be bool, got {t.dtype}")
        return None
    if arr.size != 1:
        raise ctx.error(f"{what} must hold one value, got shape {arr.shape}")
    return bool(arr.reshape(-1)[0])


def _body(ctx, body, values, label):
    outs = ctx.run_graph(body, values, label)
    if any(v is None for v in outs):
        raise ctx.error(f"the body ({label}) leaves an output empty; optional values are not supported")
    return outs


def _stack(ctx, values, axis, declared=None):
    """The values stacked along a new `axis` (an empty stack needs the body's declared static shape)."""
    if not values:
        shape = _declared_shape(declared)
        if shape is None:
            raise ctx.error(f"the scan output {getattr(declared, 'name', '')} has no iterations and the "
                            "body declares no static shape for it; an empty scan output is not supported")
        shape.insert(axis, 0)
        return np.zeros(shape, _declared_dtype(ctx, declared))
    parts = []
    for v in values:
        dims = list(ctx.type_of(v).shape)
        dims.insert(axis, as_expr(1))
        parts.append(ctx.emit("reshape", [v], {"shape": tuple(dims)}))
    return parts[0] if len(parts) == 1 else ctx.emit("concat", parts, {"axis": axis})


def _declared_shape(value_info):
    if value_info is None or not value_info.type.HasField("tensor_type"):
        return None
    tt = value_info.type.tensor_type
    if not tt.HasField("shape") or not all(d.HasField("dim_value") for d in tt.shape.dim):
        return None
    return [d.dim_value for d in tt.shape.dim]


def _declared_dtype(ctx, value_info):
    from ..context import onnx_dtype
    return onnx_dtype(value_info.type.tensor_type.elem_type, f"scan output {value_info.name}")


# ---------------------------------------------------------------- Scan

@converter("Scan")
def convert_scan(ctx, inputs):
    body = ctx.graph_attr("body")
    n_scan = ctx.attr("num_scan_inputs", None, int)
    if n_scan is None or n_scan < 1:
        raise ctx.error(f"num_scan_inputs must be at least 1, got {n_scan}")
    if ctx.opset < 9:
        return _scan8(ctx, body, inputs, n_scan)
    n_state = len(inputs) - n_scan
    if n_state < 0:
        raise ctx.error(f"num_scan_inputs is {n_scan}, the node has {len(inputs)} inputs")
    states, scanned = list(inputs[:n_state]), list(inputs[n_state:])
    n_out = len(body.output) - n_state
    in_axes = _per_input(ctx, "scan_input_axes", n_scan, 0)
    in_dirs = _per_input(ctx, "scan_input_directions", n_scan, 0)
    out_axes = _per_input(ctx, "scan_output_axes", n_out, 0)
    out_dirs = _per_input(ctx, "scan_output_directions", n_out, 0)
    return _scan(ctx, body, states, scanned, in_axes, in_dirs, out_axes, out_dirs, "")


def _scan8(ctx, body, inputs, n_scan):
    """Opset 8: axis 0 of every input and output is a batch axis, scanned along axis 1."""
    lens, rest = inputs[0], list(inputs[1:])
    n_state = len(rest) - n_scan
    if n_state < 0:
        raise ctx.error(f"num_scan_inputs is {n_scan}, the node has {len(rest)} inputs after sequence_lens")
    if any(v is None for v in rest):
        raise ctx.error("an empty state or scan input is not supported")
    batch = _static_dim(ctx, rest[0] if rest else None, 0, "the batch axis")
    for v in rest:
        if _static_dim(ctx, v, 0, "the batch axis") != batch:
            raise ctx.error("every state and scan input must have the same batch size")
    length = _static_dim(ctx, rest[n_state], 1, "the scanned axis")
    if lens is not None:
        given = ctx.integers(lens, 0, "sequence_lens")
        if any(n != length for n in given):
            raise ctx.error(f"sequence_lens {given} differ from the scanned length {length}; "
                            "shorter sequences are not supported")
    in_dirs = _per_input(ctx, "directions", n_scan, 0)
    n_out = len(body.output) - n_state
    per_batch = []
    for b in range(batch):
        rows = [_index(ctx, v, 0, b) for v in rest]
        per_batch.append(_scan(ctx, body, rows[:n_state], rows[n_state:], [0] * n_scan, in_dirs,
                               [0] * n_out, [0] * n_out, f"batch{b}_"))
    return [_stack(ctx, [outs[k] for outs in per_batch], 0) for k in range(len(body.output))]


def _scan(ctx, body, states, scanned, in_axes, in_dirs, out_axes, out_dirs, label):
    n_state = len(states)
    if len(body.input) != n_state + len(scanned):
        raise ctx.error(f"the body takes {len(body.input)} inputs; the node gives {n_state} states and "
                        f"{len(scanned)} scan inputs")
    if len(body.output) < n_state:
        raise ctx.error(f"the body gives {len(body.output)} outputs, fewer than the {n_state} states")
    if any(v is None for v in states + scanned):
        raise ctx.error("an empty state or scan input is not supported")
    axes = [_norm_axis(ctx, a, len(ctx.type_of(v).shape), f"scan input axis {a}") for a, v in zip(in_axes, scanned)]
    lengths = [_static_dim(ctx, v, a, "the scanned axis") for v, a in zip(scanned, axes)]
    if len(set(lengths)) != 1:
        raise ctx.error(f"the scan inputs have different lengths {lengths} along their scanned axes")
    length = lengths[0]
    if length > MAX_UNROLL:
        raise ctx.error(f"the scanned length {length} would unroll to more than {MAX_UNROLL} body copies")
    for name, dirs in (("scan_input_directions", in_dirs), ("scan_output_directions", out_dirs)):
        if any(d not in (0, 1) for d in dirs):
            raise ctx.error(f"{name} must be 0 (forward) or 1 (reverse), got {dirs}")
    if length == 0:
        raise ctx.error("the scanned axis has length 0; an empty Scan is not supported")
    scans: list = [[] for _ in range(len(body.output) - n_state)]
    for t in range(length):
        elems = [_index(ctx, v, a, length - 1 - t if d else t) for v, a, d in zip(scanned, axes, in_dirs)]
        outs = _body(ctx, body, states + elems, f"{label}iter{t}")
        states = outs[:n_state]
        for acc, value in zip(scans, outs[n_state:]):
            acc.append(value)
    stacked = []
    for acc, axis, direction in zip(scans, out_axes, out_dirs):
        rank = len(ctx.type_of(acc[0]).shape) + 1
        stacked.append(_stack(ctx, acc[::-1] if direction else acc,
                              _norm_axis(ctx, axis, rank, f"scan output axis {axis}")))
    return states + stacked


def _per_input(ctx, name, count, default):
    values = ctx.attr(name, None)
    if values is None:
        return [default] * count
    values = [int(v) for v in values]
    if len(values) != count:
        raise ctx.error(f"{name} gives {len(values)} values for {count} {'inputs' if 'input' in name else 'outputs'}")
    return values


def _norm_axis(ctx, axis, rank, what):
    if not -rank <= axis < rank:
        raise ctx.error(f"{what} is out of range for rank {rank}")
    return axis % rank


def _static_dim(ctx, value, axis, what) -> int:
    if value is None:
        raise ctx.error("the node has no scan input")
    dims = ctx.type_of(value).shape
    if axis >= len(dims):
        raise ctx.error(f"{what} ({axis}) is out of range for rank {len(dims)}")
    if not dims[axis].is_const:
        raise ctx.error(f"{what} has symbolic length {dims[axis]}; relax_edge unrolls a Scan only over "
                        "an axis of length known at compile time")
    return dims[axis].value


def _index(ctx, value, axis, i):
    """`value[..., i, ...]` along `axis`, that axis dropped."""
    dims = list(ctx.type_of(value).shape)
    part = ctx.emit("strided_slice", [value], {"begin": (as_expr(i),), "end": (as_expr(i + 1),),
                                               "strides": (1,), "axes": (axis,)})
    del dims[axis]
    return ctx.emit("reshape", [part], {"shape": tuple(dims)})
