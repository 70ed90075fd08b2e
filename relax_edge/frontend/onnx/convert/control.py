"""ONNX import: control flow (If, Loop, Scan).

1. If: a condition known at import time picks the branch, which is converted
   in place (folded). Otherwise the IR's `If` is emitted, each branch a
   SeqExpr; the result types are joined across the branches: a dim that
   differs becomes a fresh size variable bound by a match_cast after the if.
   Branches must agree on each output's dtype and rank.
2. Loop with a trip count M of at most UNROLL_LIMIT known at compile time
   and a known initial condition: unrolled at import while the condition
   (then the body's `cond` output) stays known, each copy inlined, a false
   one stopping the loop; a condition computed at run time drops the copies
   and makes the loop (4). Carried values flow from one copy to the next;
   scan outputs are the per-iteration values stacked on a new axis 0. A
   false initial condition gives the initial values and empty scans.
3. Scan (opset 8 with its batch axis and sequence_lens, opset 9+ with
   scan_input_axes/directions and scan_output_axes/directions): unrolled at
   import over a scanned axis of at most UNROLL_LIMIT known at compile
   time, else the loop (4; opset 9+ only: opset 8 needs static lengths);
   opset 8's sequence_lens must be known and equal the full length.
4. A Loop or Scan of more than UNROLL_LIMIT iterations, or of a number
   known only as a symbol or at run time, becomes the IR's `loop`
   (ir/expr.py `Loop`): the body converted once over its parameters, the
   trip count symbolic or a run-time tensor, the condition checked at run
   time; a scan output's length is then the trip count, or (a condition
   that can stop the loop early) a fresh size bound after the loop. A
   carried value whose shape changes across iterations is refused.

Subgraphs see the enclosing scopes' names (importer.run_graph); sequence and
optional values are refused there as everywhere.
"""

from __future__ import annotations

import numpy as np

from ....ir.expr import Tuple, TupleGetItem
from ....ir.shape import IntExpr, Proof, as_expr, bounds, prove_equal
from ....ir.types import TensorType
from ..context import converter
from ..values import static_array

# a Loop or Scan of at most this many iterations known at compile time is
# unrolled (each copy specialized to its iteration); longer ones become the IR's loop
UNROLL_LIMIT = 16
# a trip count at least this large bounds nothing (exporters write INT64_MAX for "no limit")
NO_LIMIT = 2 ** 62


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

class _RuntimeCondition(Exception):
    """Raised while unrolling a Loop whose condition turns out to be computed at run time."""


@converter("Loop", static={0, 1})   # known ones may unroll; run-time ones make the loop
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
    count = _trip_count(ctx, trip)
    start = True if cond is None else _condition(ctx, cond, "the initial condition (input 1)")
    if start is False or (isinstance(count, int) and count <= UNROLL_LIMIT and start is True):
        mark = ctx.builder.checkpoint()
        try:
            return _unroll_loop(ctx, body, count if start is True else 0, carried)
        except _RuntimeCondition:   # the loop construct instead; the copies made so far are dropped
            ctx.builder.rollback(mark)
    return _emit_loop(ctx, body, count, None if start is True else cond, carried)


def _trip_count(ctx, trip):
    """The trip count M: None (absent, or so large it cannot bound the loop), an
    int or a symbolic IntExpr (known at compile time), or the tensor value."""
    if trip is None:
        return None
    arr = static_array(trip)
    if arr is None:
        t = ctx.type_of(trip)
        if t.dtype != "int64" or t.shape is None or int(np.prod([d.value if d.is_const else 2
                                                                  for d in t.shape])) != 1:
            raise ctx.error(f"the trip count M must be an int64 tensor of one value, got {t}")
        return trip if t.ndim == 0 else ctx.emit("reshape", [trip], {"shape": ()})
    if arr.size != 1 or not (arr.dtype == object or arr.dtype.kind in "iu"):
        raise ctx.error(f"the trip count M must hold one integer, got {arr.dtype} of shape {arr.shape}")
    value = arr.reshape(-1)[0]
    if isinstance(value, IntExpr) and not value.is_const:
        return value
    count = int(value.value if isinstance(value, IntExpr) else value)
    return None if count >= NO_LIMIT else max(count, 0)


def _unroll_loop(ctx, body, count, carried):
    """The body inlined once per iteration while the condition is known (a
    known false one stops it); a condition computed at run time raises
    _RuntimeCondition."""
    n_carried = len(carried)
    n_scans = len(body.output) - 1 - n_carried
    go = np.array(True)
    scans: list = [[] for _ in range(n_scans)]
    for i in range(count):
        known = _condition(ctx, go, f"the body's condition output at iteration {i - 1}") if i else True
        if known is None:
            raise _RuntimeCondition
        if not known:
            break
        outs = _body(ctx, body, [np.array(i, np.int64), np.array(True)] + carried, f"iter{i}")
        go, carried = outs[0], outs[1:1 + n_carried]
        for acc, value in zip(scans, outs[1 + n_carried:]):
            acc.append(value)
    stacked = [_stack(ctx, acc, 0, body.output[1 + n_carried + k]) for k, acc in enumerate(scans)]
    return carried + stacked


def _emit_loop(ctx, body, count, cond, carried):
    """The IR's loop: the body converted once over its parameters."""
    n_carried = len(carried)
    init = [ctx.tensor(v) for v in carried]
    cond = None if cond is None else _scalar_condition(ctx, cond)
    scan_types: list = []

    def build(_builder, iteration, go, states):
        outs = _body(ctx, body, [iteration, go, *states], "body")
        done = ctx.known(outs[0])
        if done is not None:
            if done.size != 1 or done.dtype != np.bool_:
                raise ctx.error(f"the body's condition output must be one bool, got {done.dtype} {done.shape}")
            new_go = ctx.tensor(np.array(bool(done.reshape(-1)[0])))
        else:
            new_go = _scalar_condition(ctx, outs[0])
        new = [ctx.tensor(v) for v in outs[1:1 + n_carried]]
        for k, (state, value) in enumerate(zip(states, new)):
            if not _same_type(state.type, value.type):
                raise ctx.error(f"loop-carried value {k} ({body.output[1 + k].name}) enters the body as "
                                f"{state.type} and leaves it as {value.type}; a Loop whose carried value "
                                "changes shape (or dtype) across iterations is not supported")
        scans = [ctx.tensor(v) for v in outs[1 + n_carried:]]
        scan_types.extend(ctx.type_of(v) for v in scans)
        return new_go, new, scans

    loop = ctx.emit_loop(count, cond, init, build)
    outs = [ctx.builder.emit(TupleGetItem(loop, k)) for k in range(len(loop.type.fields))]
    for k in range(n_carried, len(outs)):
        if outs[k].type.shape is None:   # stopped by a run-time condition: its length is known at run time
            inner = scan_types[k - n_carried].shape
            outs[k] = ctx.match_cast_fresh(outs[k], f"scan{k - n_carried}_", lower=0, known=[None, *inner])
    return outs


def _same_type(a, b) -> bool:
    return (isinstance(a, TensorType) and isinstance(b, TensorType) and a.dtype == b.dtype
            and a.shape is not None and b.shape is not None and len(a.shape) == len(b.shape)
            and all(prove_equal(x, y) is Proof.YES for x, y in zip(a.shape, b.shape)))


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
    lengths = [_scanned_dim(ctx, v, a) for v, a in zip(scanned, axes)]
    if not all(prove_equal(n, lengths[0]) is Proof.YES for n in lengths):
        raise ctx.error(f"the scan inputs have different lengths {[str(n) for n in lengths]} along their "
                        "scanned axes")
    length = lengths[0]
    for name, dirs in (("scan_input_directions", in_dirs), ("scan_output_directions", out_dirs)):
        if any(d not in (0, 1) for d in dirs):
            raise ctx.error(f"{name} must be 0 (forward) or 1 (reverse), got {dirs}")
    if length.is_const and length.value == 0:
        raise ctx.error("the scanned axis has length 0; an empty Scan is not supported")
    if not length.is_const or length.value > UNROLL_LIMIT:
        return _scan_loop(ctx, body, states, scanned, axes, in_dirs, out_axes, out_dirs, length)
    length = length.value
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


def _scan_loop(ctx, body, states, scanned, axes, in_dirs, out_axes, out_dirs, length):
    """The IR's loop over the scanned axis: each iteration takes its element of
    every scan input (counting back for a reverse one); the loop stacks the
    scan outputs on axis 0, then they are reversed and moved to their axis."""
    n_state = len(states)
    backwards = None
    if any(in_dirs) or any(out_dirs):   # length - 1, ..., 0
        backwards = ctx.emit("arange", [], {"start": length - 1, "stop": -1, "step": -1, "dtype": "int64"})

    def build(_builder, iteration, go, carried):
        elems = []
        for v, a, d in zip(scanned, axes, in_dirs):
            index = ctx.emit("take", [backwards, iteration], {"axis": 0}) if d else iteration
            elems.append(ctx.emit("take", [v, index], {"axis": a}))
        outs = _body(ctx, body, list(carried) + elems, "body")
        new = [ctx.tensor(v) for v in outs[:n_state]]
        for k, (state, value) in enumerate(zip(carried, new)):
            if not _same_type(state.type, value.type):
                raise ctx.error(f"state {k} ({body.output[k].name}) enters the body as {state.type} and "
                                f"leaves it as {value.type}; a state that changes shape is not supported")
        return ctx.tensor(np.array(True)), new, [ctx.tensor(v) for v in outs[n_state:]]

    loop = ctx.emit_loop(length, None, [ctx.tensor(v) for v in states], build)
    outs = [ctx.builder.emit(TupleGetItem(loop, k)) for k in range(len(loop.type.fields))]
    for k, (axis, direction) in enumerate(zip(out_axes, out_dirs)):
        value = outs[n_state + k]
        if direction:
            value = ctx.emit("take", [value, backwards], {"axis": 0})
        rank = value.type.ndim
        axis = _norm_axis(ctx, axis, rank, f"scan output axis {axis}")
        if axis:
            perm = list(range(1, rank))
            perm.insert(axis, 0)
            value = ctx.emit("transpose", [value], {"axes": tuple(perm)})
        outs[n_state + k] = value
    return outs


def _scanned_dim(ctx, value, axis):
    dims = ctx.type_of(value).shape
    if axis >= len(dims):
        raise ctx.error(f"the scanned axis ({axis}) is out of range for rank {len(dims)}")
    return dims[axis]


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
        raise ctx.error(f"{what} has symbolic length {dims[axis]}; an opset-8 Scan (batch axis, "
                        "sequence_lens) needs its batch and scanned lengths known at compile time")
    return dims[axis].value


def _index(ctx, value, axis, i):
    """`value[..., i, ...]` along `axis`, that axis dropped."""
    dims = list(ctx.type_of(value).shape)
    part = ctx.emit("strided_slice", [value], {"begin": (as_expr(i),), "end": (as_expr(i + 1),),
                                               "strides": (1,), "axes": (axis,)})
    del dims[axis]
    return ctx.emit("reshape", [part], {"shape": tuple(dims)})
