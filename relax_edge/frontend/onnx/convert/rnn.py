"""ONNX import: recurrent networks (RNN, GRU, LSTM; opsets 1 to 22), unrolled
over a sequence length known at import time, each time step expressed over
existing graph operators; a symbolic or long sequence length makes the
IR's loop (7).

1. Per direction, the input projection of every time step is one matmul,
   (T * batch, input) x (input, gates * hidden), plus the biases that sit
   outside the recurrence (Wb + Rb; for GRU with linear_before_reset, Rb of
   the hidden gate stays inside the reset product), so that the dispatch
   pass sends it to the library dense kernel when W is a constant.
2. Each step slices its rows of that projection, adds the recurrent matmul
   (batch, hidden) x (hidden, gates * hidden) of the previous hidden state,
   slices the gates and applies clip and the activations elementwise. A
   zero initial state (initial_h / initial_c omitted) skips the terms it
   would multiply. Y is a concat of the steps' hidden states, Y_h (Y_c) the
   last states; outputs the node leaves out are not built.
3. sequence_lens (a run-time input): a step at time t updates batch element
   b only where t < sequence_lens[b] and writes zeros to Y elsewhere. The
   forward direction's final state is therefore the one at the sequence's
   length; the reverse direction runs from T - 1 down to 0, so its state
   stays the initial one until t < sequence_lens[b].
4. layout 1 (opset 14): X, initial_h / initial_c and the outputs have the
   batch first; they are transposed at the start and at the end.
5. Activations (case-insensitive names) take activation_alpha /
   activation_beta in order, each function consuming the values it uses
   (as ONNX Runtime does); a function past the end of a list takes the
   default of the ONNX operator of that name (Affine 1 and 0). ScaledTanh
   has no default: it needs both values.
6. float16 is computed in float32 and rounded once at the outputs.

7. A symbolic sequence length, or one longer than MAX_UNROLLED_STEPS: per
   direction one `loop` over the time
   steps (ir/expr.py `Loop`), carrying h (and c), each iteration one cell
   over its rows of the projection (`take`), the hidden states stacked as
   the loop's scan output (reversed after the loop for the reverse
   direction); an omitted initial state starts as zeros.

Not supported (a clear error): a sequence length of 0, dtypes other than float32 and float16, activation
lists of the wrong length, more alpha / beta values than the activations use.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ....ir.expr import TupleGetItem
from ....ir.shape import as_expr
from ..context import converter

_GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}
_DEFAULT_ACTIVATIONS = {"RNN": ("Tanh",), "GRU": ("Sigmoid", "Tanh"), "LSTM": ("Sigmoid", "Tanh", "Tanh")}
_DIRECTIONS = {"forward": ("forward",), "reverse": ("reverse",), "bidirectional": ("forward", "reverse")}
_DTYPES = ("float32", "float16")
_NO_DEFAULT = object()
# a longer sequence (or a symbolic one) is the IR's loop rather than unrolled steps
MAX_UNROLLED_STEPS = 64

# activation -> (defaults of the alpha and beta it uses, or None where it uses none)
_ACTIVATION_PARAMS = {
    "relu": (None, None), "tanh": (None, None), "sigmoid": (None, None), "softsign": (None, None),
    "softplus": (None, None), "affine": (1.0, 0.0), "leakyrelu": (0.01, None), "thresholdedrelu": (1.0, None),
    "scaledtanh": (_NO_DEFAULT, _NO_DEFAULT), "hardsigmoid": (0.2, 0.5), "elu": (1.0, None),
}


def _activation_fn(ctx, name, alpha, beta):
    """`x -> activation(x)` over graph operators."""
    plain = {"relu": "relu", "tanh": "tanh", "sigmoid": "sigmoid", "softsign": "softsign", "softplus": "softplus"}
    if name in plain:
        return lambda x: ctx.emit(plain[name], [x])
    if name == "leakyrelu":
        return lambda x: ctx.emit("leaky_relu", [x], {"alpha": alpha})
    if name == "thresholdedrelu":
        return lambda x: ctx.emit("thresholded_relu", [x], {"alpha": alpha})
    if name == "elu":
        return lambda x: ctx.emit("elu", [x], {"alpha": alpha})
    if name == "hardsigmoid":
        return lambda x: ctx.emit("hard_sigmoid", [x], {"alpha": alpha, "beta": beta})
    a, b = np.array(alpha, np.float32), np.array(beta, np.float32)
    if name == "affine":
        return lambda x: ctx.emit("add", [ctx.emit("multiply", [x, a]), b])
    return lambda x: ctx.emit("multiply", [ctx.emit("tanh", [ctx.emit("multiply", [x, b])]), a])  # scaledtanh


def _activations(ctx, kind: str, directions: int):
    """Per direction, the list of activation functions (f, g, h as the op uses them)."""
    per_direction = len(_DEFAULT_ACTIVATIONS[kind])
    names = ctx.attr("activations", None, list)
    if names is None:
        names = list(_DEFAULT_ACTIVATIONS[kind]) * directions
    if len(names) != per_direction * directions:
        raise ctx.error(f"attribute activations has {len(names)} functions, {kind} with {directions} "
                        f"direction(s) needs {per_direction * directions}")
    alphas = [float(v) for v in ctx.attr("activation_alpha", [], list)]
    betas = [float(v) for v in ctx.attr("activation_beta", [], list)]
    used_alpha = used_beta = 0
    fns = []
    for name in names:
        key = str(name).lower()
        if key not in _ACTIVATION_PARAMS:
            raise ctx.error(f"activation {name!r} is not supported (supported: Relu, Tanh, Sigmoid, Affine, "
                            "LeakyRelu, ThresholdedRelu, ScaledTanh, HardSigmoid, Elu, Softsign, Softplus)")
        alpha_default, beta_default = _ACTIVATION_PARAMS[key]
        alpha = beta = None
        if alpha_default is not None:
            alpha = alphas[used_alpha] if used_alpha < len(alphas) else alpha_default
            used_alpha += 1
        if beta_default is not None:
            beta = betas[used_beta] if used_beta < len(betas) else beta_default
            used_beta += 1
        if alpha is _NO_DEFAULT or beta is _NO_DEFAULT:
            raise ctx.error(f"activation {name} needs its alpha and beta (activation_alpha, activation_beta); "
                            "it has no default")
        fns.append(_activation_fn(ctx, key, alpha, beta))
    for attr, given, used in (("activation_alpha", alphas, used_alpha), ("activation_beta", betas, used_beta)):
        if len(given) > used:
            raise ctx.error(f"attribute {attr} has {len(given)} values, the activations {names} use {used}")
    return [fns[d * per_direction:(d + 1) * per_direction] for d in range(directions)]


@dataclass
class _Node:
    """What one RNN / GRU / LSTM node asks for, checked."""
    kind: str
    hidden: int
    steps: object          # int (unrolled) or a symbolic IntExpr (the IR's loop)
    batch: object          # IntExpr
    layout: int
    directions: tuple
    clip: float | None
    dtype: str
    activations: list
    input_forget: bool = False
    linear_before_reset: bool = False


def _dims(ctx, value, index, what, rank):
    t = ctx.type_of(value)
    if len(t.shape) != rank:
        raise ctx.error(f"input {index} ({what}) must have rank {rank}, got shape {tuple(t.shape)}")
    return t.shape


def _expect_shape(ctx, value, index, what, want):
    got = ctx.type_of(value).shape
    ok = len(got) == len(want) and all(
        not (g.is_const and w.is_const) or int(g) == int(w) for g, w in zip(got, (as_expr(d) for d in want)))
    if not ok:
        raise ctx.error(f"input {index} ({what}) must have shape ({', '.join(str(d) for d in want)}), "
                        f"got ({', '.join(str(d) for d in got)})")


def _read_node(ctx, inputs) -> _Node:
    kind = ctx.node.op_type
    x, w, r = inputs[:3]
    if any(v is None for v in (x, w, r)):
        raise ctx.error("inputs X, W and R are required")
    dtype = ctx.type_of(x).dtype
    if dtype not in _DTYPES:
        raise ctx.error(f"X of type {dtype} is not supported (supported: {', '.join(_DTYPES)})")
    for i, v in ((1, w), (2, r)):
        if ctx.type_of(v).dtype != dtype:
            raise ctx.error(f"input {i} has type {ctx.type_of(v).dtype}, X has {dtype}")
    layout = ctx.attr("layout", 0, int) if ctx.opset >= 14 else 0
    if layout not in (0, 1):
        raise ctx.error(f"attribute layout must be 0 or 1, got {layout}")
    x_dims = _dims(ctx, x, 0, "X", 3)
    steps, batch = (x_dims[0], x_dims[1]) if layout == 0 else (x_dims[1], x_dims[0])
    if steps.is_const and int(steps) < 1:
        raise ctx.error("a sequence length of 0 is not supported")
    direction = ctx.attr("direction", "forward", str)
    if direction not in _DIRECTIONS:
        raise ctx.error(f"attribute direction {direction!r} is not supported (forward, reverse or bidirectional)")
    directions = _DIRECTIONS[direction]
    gates = _GATES[kind]
    r_dims = _dims(ctx, r, 2, "R", 3)
    if not r_dims[2].is_const:
        raise ctx.error(f"the hidden size (dim 2 of R, {r_dims[2]}) must be static")
    hidden = ctx.attr("hidden_size", int(r_dims[2]), int)
    if hidden < 1:
        raise ctx.error(f"attribute hidden_size must be positive, got {hidden}")
    input_size = x_dims[2]
    _expect_shape(ctx, w, 1, "W", (len(directions), gates * hidden, input_size))
    _expect_shape(ctx, r, 2, "R", (len(directions), gates * hidden, hidden))
    clip = ctx.attr("clip", None, float)
    if clip is not None and not clip > 0:
        raise ctx.error(f"attribute clip must be positive, got {clip}")
    unrolled = steps.is_const and int(steps) <= MAX_UNROLLED_STEPS
    node = _Node(kind, hidden, int(steps) if unrolled else steps, batch, layout, directions, clip, dtype,
                 _activations(ctx, kind, len(directions)))
    if kind == "LSTM":
        node.input_forget = bool(_flag(ctx, "input_forget"))
    if kind == "GRU":
        node.linear_before_reset = bool(_flag(ctx, "linear_before_reset"))
    _check_optional_inputs(ctx, inputs, node)
    return node


def _flag(ctx, name):
    value = ctx.attr(name, 0, int)
    if value not in (0, 1):
        raise ctx.error(f"attribute {name} must be 0 or 1, got {value}")
    return value


def _check_optional_inputs(ctx, inputs, node: _Node):
    nd, gates, hidden = len(node.directions), _GATES[node.kind], node.hidden
    state = (nd, node.batch, hidden) if node.layout == 0 else (node.batch, nd, hidden)
    shapes = {3: ("B", (nd, 2 * gates * hidden)), 5: ("initial_h", state)}
    if node.kind == "LSTM":
        shapes.update({6: ("initial_c", state), 7: ("P", (nd, 3 * hidden))})
    for index, (what, want) in shapes.items():
        if index < len(inputs) and inputs[index] is not None:
            if ctx.type_of(inputs[index]).dtype != node.dtype:
                raise ctx.error(f"input {index} ({what}) has type {ctx.type_of(inputs[index]).dtype}, "
                                f"X has {node.dtype}")
            _expect_shape(ctx, inputs[index], index, what, want)
    if len(inputs) > 4 and inputs[4] is not None:
        t = ctx.type_of(inputs[4])
        if t.dtype not in ("int32", "int64"):
            raise ctx.error(f"input 4 (sequence_lens) must be int32 (or int64), got {t.dtype}")
        _expect_shape(ctx, inputs[4], 4, "sequence_lens", (node.batch,))
    most = 8 if node.kind == "LSTM" else 6
    if len(inputs) > most:
        raise ctx.error(f"{node.kind} has at most {most} inputs, got {len(inputs)}")


# ------------------------------------------------------------------ graph helpers

class _Steps:
    """Emits the operators of one node's recurrence."""

    def __init__(self, ctx, node: _Node):
        self.ctx, self.node = ctx, node

    def emit(self, op, args, attrs=None):
        return self.ctx.emit(op, args, attrs)

    def add(self, a, b):
        """a + b, where None is zero."""
        return a if b is None else b if a is None else self.emit("add", [a, b])

    def mul(self, a, b):
        """a * b, where None is zero."""
        return None if a is None or b is None else self.emit("multiply", [a, b])

    def cols(self, v, k, width=None):
        """Columns [k * hidden, k * hidden + width) of a 2-D value."""
        if v is None:
            return None
        width = width or self.node.hidden
        return self.emit("strided_slice", [v], {"begin": (k * self.node.hidden,),
                                                "end": (k * self.node.hidden + width,), "axes": (1,)})

    def direction(self, v, d):
        """Direction d of a (directions, ...) value, without that dim."""
        if v is None:
            return None
        dims = list(self.ctx.type_of(v).shape)
        part = self.emit("strided_slice", [v], {"begin": (d,), "end": (d + 1,), "axes": (0,)})
        return self.emit("reshape", [part], {"shape": tuple(dims[1:])})

    def view(self, v):
        """v reshaped to (1, *shape) and back: free views in the host code, which the fuse pass does not try
        to inline. Used for the cell state and the step masks, which kernels of two steps read (inlining
        them would recompute them, so fuse refuses, but it would try again at every later fusion: quadratic
        in the number of steps)."""
        if v is None:
            return None
        shape = tuple(self.ctx.type_of(v).shape)
        return self.emit("reshape", [self.emit("reshape", [v], {"shape": (1,) + shape})], {"shape": shape})

    def activate(self, fn, x):
        clip = self.node.clip
        if clip is not None:
            x = self.emit("clip", [x], {"min": -clip, "max": clip})
        return fn(x)

    def transposed(self, v):
        return self.emit("transpose", [v], {"axes": (1, 0)})

    def matmul(self, h, r_t):
        return None if h is None else self.emit("matmul", [h, r_t])

    def keep(self, mask, new, old):
        """new where the step is inside the sequence, else old (None: zero)."""
        if mask is None:
            return new
        zero = np.array(0, "float32")
        return self.emit("where", [mask, new, zero if old is None else old])


def _work(ctx, v):
    """An input in the working dtype (float32)."""
    if v is None or ctx.type_of(v).dtype == "float32":
        return v
    return ctx.emit("cast", [v], {"dtype": "float32"})


def _projection(s: _Steps, x_seq, w_t, bias):
    """X of all steps times W^T plus `bias`: (T * batch, gates * hidden), step t in rows
    [t * batch, (t + 1) * batch)."""
    dims = list(s.ctx.type_of(x_seq).shape)
    flat = s.emit("reshape", [x_seq], {"shape": (dims[0] * dims[1], dims[2])})
    return s.add(s.emit("matmul", [flat, w_t]), bias)


def _step_rows(s: _Steps, proj, t):
    batch = as_expr(s.node.batch)
    return s.emit("strided_slice", [proj], {"begin": (batch * t,), "end": (batch * (t + 1),), "axes": (0,)})


# ------------------------------------------------------------------ the cells

def _rnn_cell(s: _Steps, weights, acts, xp, h, _c):
    (f,) = acts
    return s.activate(f, s.add(xp, s.matmul(h, weights["r_t"]))), None


def _gru_cell(s: _Steps, weights, acts, xp, h, _c):
    f, g = acts
    if s.node.linear_before_reset:
        rec = s.matmul(h, weights["r_t"])                                   # (batch, 3 hidden)
        bias = weights["rec_bias"]
        if bias is not None:
            rec = s.add(rec, bias if rec is not None else s.emit("reshape", [bias], {"shape": (1, -1)}))
        z, r = (s.activate(f, s.add(s.cols(xp, k), s.cols(rec, k))) for k in (0, 1))
        candidate = s.activate(g, s.add(s.cols(xp, 2), s.mul(r, s.cols(rec, 2))))
    else:
        rec = s.matmul(h, weights["r_zr_t"])                                # (batch, 2 hidden)
        z, r = (s.activate(f, s.add(s.cols(xp, k), s.cols(rec, k))) for k in (0, 1))
        candidate = s.activate(g, s.add(s.cols(xp, 2), s.matmul(s.mul(r, h), weights["r_h_t"])))
    one = np.array(1, "float32")
    return s.add(s.mul(s.emit("subtract", [one, z]), candidate), s.mul(z, h)), None


def _lstm_cell(s: _Steps, weights, acts, xp, h, c):
    """Gates i, o, f, c; each sliced from the projection and the recurrent product before they are added,
    so that no gate sum feeds several kernels."""
    f, g, hact = acts
    p_i, p_o, p_f = weights["p_i"], weights["p_o"], weights["p_f"]
    rec = s.matmul(h, weights["r_t"])                                       # (batch, 4 hidden)
    i_pre, o_pre, f_pre, c_pre = (s.add(s.cols(xp, k), s.cols(rec, k)) for k in range(4))
    i = s.activate(f, s.add(i_pre, s.mul(p_i, c)))
    if s.node.input_forget:
        forget = s.emit("subtract", [np.array(1, "float32"), i])
    else:
        forget = s.activate(f, s.add(f_pre, s.mul(p_f, c)))
    cell = s.add(s.mul(forget, c), s.mul(i, s.activate(g, c_pre)))
    o = s.activate(f, s.add(o_pre, s.mul(p_o, cell)))
    return s.mul(o, hact(cell)), cell


_CELLS = {"RNN": _rnn_cell, "GRU": _gru_cell, "LSTM": _lstm_cell}


def _weights(s: _Steps, inputs, d):
    """Direction d's transposed weights, projection bias and peepholes."""
    node, ctx = s.node, s.ctx
    hidden, gates = node.hidden, _GATES[node.kind]
    w = _work(ctx, s.direction(inputs[1], d))
    r = _work(ctx, s.direction(inputs[2], d))
    b = _work(ctx, s.direction(inputs[3], d)) if len(inputs) > 3 else None
    out = {"w_t": s.transposed(w), "bias": None}
    wb = rb = None
    if b is not None:
        wb = s.emit("strided_slice", [b], {"begin": (0,), "end": (gates * hidden,), "axes": (0,)})
        rb = s.emit("strided_slice", [b], {"begin": (gates * hidden,), "end": (2 * gates * hidden,), "axes": (0,)})
    if node.kind == "GRU" and node.linear_before_reset:
        out["r_t"] = s.transposed(r)
        out["rec_bias"] = None
        if b is not None:  # Rb of the hidden gate is applied inside the reset product
            zeros = np.zeros(2 * hidden, "float32")
            rb_h = s.emit("strided_slice", [rb], {"begin": (2 * hidden,), "end": (3 * hidden,), "axes": (0,)})
            rb_zr = s.emit("strided_slice", [rb], {"begin": (0,), "end": (2 * hidden,), "axes": (0,)})
            out["bias"] = s.add(wb, s.emit("concat", [rb_zr, np.zeros(hidden, "float32")], {"axis": 0}))
            out["rec_bias"] = s.emit("concat", [zeros, rb_h], {"axis": 0})
    else:
        out["bias"] = s.add(wb, rb)
        if node.kind == "GRU":
            r_t = s.transposed(r)
            out["r_zr_t"] = s.emit("strided_slice", [r_t], {"begin": (0,), "end": (2 * hidden,), "axes": (1,)})
            out["r_h_t"] = s.emit("strided_slice", [r_t], {"begin": (2 * hidden,), "end": (3 * hidden,),
                                                           "axes": (1,)})
        else:
            out["r_t"] = s.transposed(r)
    if node.kind == "LSTM":
        p = _work(ctx, s.direction(inputs[7], d)) if len(inputs) > 7 else None
        for k, name in enumerate(("p_i", "p_o", "p_f")):
            out[name] = None if p is None else s.emit(
                "strided_slice", [p], {"begin": (k * hidden,), "end": ((k + 1) * hidden,), "axes": (0,)})
    # one Constant per weight, shared by every step (the weights blob and the kernels' packing are per Constant)
    return {k: ctx.tensor(v) if isinstance(v, np.ndarray) else v for k, v in out.items()}


def _sequence_lens(s: _Steps, inputs):
    """sequence_lens, or None where every sequence is known to be full."""
    lens = inputs[4] if len(inputs) > 4 else None
    known = None if lens is None else s.ctx.known(lens)
    if known is not None and isinstance(s.node.steps, int) and (known == s.node.steps).all():
        return None
    return lens


def _run_direction(s: _Steps, inputs, x_seq, d, lens):
    """Direction d's hidden states per time step (inside the sequences; kept past their ends) and final states."""
    node = s.node
    weights = _weights(s, inputs, d)
    proj = _projection(s, x_seq, weights["w_t"], weights["bias"])
    h = _work(s.ctx, s.direction(_batch_second(s, inputs, 5), d))
    c = _work(s.ctx, s.direction(_batch_second(s, inputs, 6), d))
    column = None if lens is None else s.emit("reshape", [lens], {"shape": (node.batch, 1)})
    if not isinstance(node.steps, int):
        return _loop_direction(s, weights, proj, h, c, d, lens)
    order = range(node.steps) if node.directions[d] == "forward" else range(node.steps - 1, -1, -1)
    states = [None] * node.steps
    for t in order:
        mask = None if column is None else s.view(s.emit("less", [np.array(t, s.ctx.type_of(lens).dtype), column]))
        h_new, c_new = _CELLS[node.kind](s, weights, node.activations[d], _step_rows(s, proj, t), h, c)
        h, c = s.keep(mask, h_new, h), (None if c_new is None else s.view(s.keep(mask, c_new, c)))
        states[t] = h
    return states, h, c


def _loop_direction(s: _Steps, weights, proj, h, c, d, lens):
    """Direction d over a symbolic sequence length: the IR's loop, one cell
    per iteration (time step t = the iteration, or counting back for the
    reverse direction); the states carried (an omitted one starts at zero);
    the hidden states stacked in time order, and the final states."""
    node, ctx = s.node, s.ctx
    steps, batch, hidden = as_expr(node.steps), as_expr(node.batch), node.hidden
    zeros = ctx.emit("broadcast_to", [np.zeros((), "float32")], {"shape": (batch, hidden)})
    h = zeros if h is None else h
    c = None if node.kind != "LSTM" else zeros if c is None else c
    rows = ctx.emit("reshape", [proj], {"shape": (steps, batch, _GATES[node.kind] * hidden)})
    backwards = None
    if node.directions[d] == "reverse":
        backwards = ctx.emit("arange", [], {"start": steps - 1, "stop": -1, "step": -1, "dtype": "int64"})
    column = None if lens is None else ctx.emit("reshape", [lens], {"shape": (batch, 1)})

    def body(_builder, iteration, _go, carried):
        h, c = carried[0], (carried[1] if len(carried) > 1 else None)
        t = iteration if backwards is None else ctx.emit("take", [backwards, iteration], {"axis": 0})
        mask = None
        if column is not None:
            t_lens = ctx.emit("cast", [t], {"dtype": ctx.type_of(lens).dtype})
            mask = s.view(ctx.emit("less", [t_lens, column]))
        xp = ctx.emit("take", [rows, t], {"axis": 0})
        h_new, c_new = _CELLS[node.kind](s, weights, node.activations[d], xp, h, c)
        h = s.keep(mask, h_new, h)
        carried = [h] if c is None else [h, s.keep(mask, c_new, c)]
        return ctx.tensor(np.array(True)), carried, [h]

    loop = ctx.emit_loop(steps, None, [h] if c is None else [h, c], body)
    outs = [ctx.builder.emit(TupleGetItem(loop, k)) for k in range(len(loop.type.fields))]
    states = outs[-1] if backwards is None else ctx.emit("take", [outs[-1], backwards], {"axis": 0})
    return states, outs[0], (outs[1] if c is not None else None)


def _batch_second(s: _Steps, inputs, index):
    """Input `index` (a state) as (directions, batch, hidden), None when omitted."""
    v = inputs[index] if len(inputs) > index else None
    if v is None or s.node.layout == 0:
        return v
    return s.emit("transpose", [v], {"axes": (1, 0, 2)})


def _sequence_output(s: _Steps, results, lens):
    """Y as (T, directions, batch, hidden): zero past each sequence's length."""
    node = s.node
    if isinstance(node.steps, int):
        per_dir = [_stacked(s, states, 0, (1, 1, node.batch, node.hidden)) for states, _, _ in results]
    else:   # the loop's stacked states, (T, batch, hidden)
        per_dir = [s.emit("reshape", [states], {"shape": (node.steps, 1, node.batch, node.hidden)})
                   for states, _, _ in results]
    y = per_dir[0] if len(per_dir) == 1 else s.emit("concat", per_dir, {"axis": 1})
    if lens is None:
        return y
    dtype = s.ctx.type_of(lens).dtype
    if isinstance(node.steps, int):
        times = np.arange(node.steps, dtype=dtype).reshape(node.steps, 1, 1, 1)
    else:
        times = s.emit("reshape", [s.emit("arange", [], {"start": 0, "stop": node.steps, "step": 1, "dtype": dtype})],
                       {"shape": (node.steps, 1, 1, 1)})
    inside = s.emit("less", [times, s.emit("reshape", [lens], {"shape": (1, 1, node.batch, 1)})])
    return s.emit("where", [inside, y, np.array(0, "float32")])


def _stacked(s: _Steps, values, axis, shape):
    parts = [s.emit("reshape", [v], {"shape": shape}) for v in values]
    return parts[0] if len(parts) == 1 else s.emit("concat", parts, {"axis": axis})


def _out(s: _Steps, v, axes):
    """An output in the node's layout and dtype."""
    if s.node.layout == 1:
        v = s.emit("transpose", [v], {"axes": axes})
    return v if s.node.dtype == "float32" else s.emit("cast", [v], {"dtype": s.node.dtype})


@converter("RNN", "GRU", "LSTM")
def convert_recurrent(ctx, inputs):
    node = _read_node(ctx, inputs)
    s = _Steps(ctx, node)
    wanted = list(ctx.node.output) + [""] * 3
    x_seq = _work(ctx, inputs[0])
    if node.layout == 1:
        x_seq = ctx.emit("transpose", [x_seq], {"axes": (1, 0, 2)})
    lens = _sequence_lens(s, inputs)
    results = [_run_direction(s, inputs, x_seq, d, lens) for d in range(len(node.directions))]
    state_shape = (1, node.batch, node.hidden)
    outs = [None, None, None]
    if wanted[0]:
        outs[0] = _out(s, _sequence_output(s, results, lens), (2, 0, 1, 3))
    outs[1] = _out(s, _stacked(s, [h for _, h, _ in results], 0, state_shape), (1, 0, 2))
    if node.kind == "LSTM" and wanted[2]:
        outs[2] = _out(s, _stacked(s, [c for _, _, c in results], 0, state_shape), (1, 0, 2))
    return outs if node.kind == "LSTM" else outs[:2]
