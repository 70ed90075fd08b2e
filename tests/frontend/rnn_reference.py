"""numpy references of ONNX RNN, GRU and LSTM written from the operator
specification: each batch element runs its own recurrence over its first
sequence_lens[b] steps (reversed for the reverse direction), the rest of Y
is zero, and the final states are those of its last step."""

import numpy as np


def _sigmoid(x):
    return 1 / (1 + np.exp(-x))


ACTIVATIONS = {  # name -> (fn(x, alpha, beta), default alpha, default beta); None: not used
    "relu": (lambda x, a, b: np.maximum(x, 0), None, None),
    "tanh": (lambda x, a, b: np.tanh(x), None, None),
    "sigmoid": (lambda x, a, b: _sigmoid(x), None, None),
    "affine": (lambda x, a, b: a * x + b, 1.0, 0.0),
    "leakyrelu": (lambda x, a, b: np.where(x >= 0, x, a * x), 0.01, None),
    "thresholdedrelu": (lambda x, a, b: np.where(x > a, x, 0), 1.0, None),
    "scaledtanh": (lambda x, a, b: a * np.tanh(b * x), "required", "required"),
    "hardsigmoid": (lambda x, a, b: np.clip(a * x + b, 0, 1), 0.2, 0.5),
    "elu": (lambda x, a, b: np.where(x >= 0, x, a * (np.exp(np.minimum(x, 0)) - 1)), 1.0, None),
    "softsign": (lambda x, a, b: x / (1 + np.abs(x)), None, None),
    "softplus": (lambda x, a, b: np.logaddexp(x, 0), None, None),
}
DEFAULTS = {"RNN": ["Tanh"], "GRU": ["Sigmoid", "Tanh"], "LSTM": ["Sigmoid", "Tanh", "Tanh"]}
GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}


def _functions(op, directions, activations, alpha, beta):
    """Per direction the activation functions, alpha and beta taken in order by the functions that use them."""
    names = activations or DEFAULTS[op] * directions
    alpha, beta = list(alpha or []), list(beta or [])
    fns = []
    for name in names:
        fn, a0, b0 = ACTIVATIONS[name.lower()]
        a = (alpha.pop(0) if alpha else a0) if a0 is not None else None
        b = (beta.pop(0) if beta else b0) if b0 is not None else None
        fns.append(lambda x, fn=fn, a=a, b=b: fn(x, a, b))
    n = len(DEFAULTS[op])
    return [fns[d * n:(d + 1) * n] for d in range(directions)]


def _cell(op, x, h, c, w, r, wb, rb, p, fns, clip, input_forget, linear_before_reset):
    """One step of one batch element (vectors), as the spec's equations."""
    H = h.shape[0]

    def act(fn, v):
        return fn(np.clip(v, -clip, clip) if clip is not None else v)

    if op == "RNN":
        return act(fns[0], w @ x + r @ h + wb + rb), None
    if op == "GRU":
        f, g = fns
        z = act(f, w[:H] @ x + r[:H] @ h + wb[:H] + rb[:H])
        rr = act(f, w[H:2 * H] @ x + r[H:2 * H] @ h + wb[H:2 * H] + rb[H:2 * H])
        if linear_before_reset:
            hh = act(g, w[2 * H:] @ x + rr * (r[2 * H:] @ h + rb[2 * H:]) + wb[2 * H:])
        else:
            hh = act(g, w[2 * H:] @ x + r[2 * H:] @ (rr * h) + rb[2 * H:] + wb[2 * H:])
        return (1 - z) * hh + z * h, None
    f, g, hf = fns
    gates = w @ x + r @ h + wb + rb
    gi, go, gf, gc = (gates[k * H:(k + 1) * H] for k in range(4))
    pi, po, pf = p[:H], p[H:2 * H], p[2 * H:]
    i = act(f, gi + pi * c)
    ft = 1 - i if input_forget else act(f, gf + pf * c)
    cell = ft * c + i * act(g, gc)
    o = act(f, go + po * cell)
    return o * hf(cell), cell


def recurrent_reference(op, X, W, R, B=None, sequence_lens=None, initial_h=None, initial_c=None, P=None, *,
                        direction="forward", activations=None, activation_alpha=None, activation_beta=None,
                        clip=None, layout=0, input_forget=0, linear_before_reset=0, hidden_size=None):
    """(Y, Y_h, Y_c) of one node (Y_c None except for LSTM), computed in float64, given in X's dtype."""
    dtype = X.dtype
    nd = 2 if direction == "bidirectional" else 1
    X = X.astype(np.float64)
    if layout:
        X = X.transpose(1, 0, 2)
        initial_h = None if initial_h is None else initial_h.transpose(1, 0, 2)
        initial_c = None if initial_c is None else initial_c.transpose(1, 0, 2)
    T, batch, _ = X.shape
    H = R.shape[-1]
    G = GATES[op]
    B = np.zeros((nd, 2 * G * H)) if B is None else B.astype(np.float64)
    P = np.zeros((nd, 3 * H)) if P is None else P.astype(np.float64)
    h0 = np.zeros((nd, batch, H)) if initial_h is None else initial_h.astype(np.float64)
    c0 = np.zeros((nd, batch, H)) if initial_c is None else initial_c.astype(np.float64)
    lens = np.full(batch, T) if sequence_lens is None else sequence_lens
    fns = _functions(op, nd, activations, activation_alpha, activation_beta)
    Y, Yh, Yc = np.zeros((T, nd, batch, H)), np.zeros((nd, batch, H)), np.zeros((nd, batch, H))
    for d in range(nd):
        reverse = direction == "reverse" or d == 1
        w, r = W[d].astype(np.float64), R[d].astype(np.float64)
        wb, rb = B[d, :G * H], B[d, G * H:]
        for b in range(batch):
            h, c = h0[d, b], c0[d, b]
            steps = range(int(lens[b]))
            for t in (reversed(steps) if reverse else steps):
                h, c = _cell(op, X[t, b], h, c, w, r, wb, rb, P[d], fns[d], clip, input_forget,
                             linear_before_reset)
                Y[t, d, b] = h
            Yh[d, b] = h
            Yc[d, b] = 0 if c is None else c
    if layout:
        Y, Yh, Yc = Y.transpose(2, 0, 1, 3), Yh.transpose(1, 0, 2), Yc.transpose(1, 0, 2)
    return Y.astype(dtype), Yh.astype(dtype), (Yc.astype(dtype) if op == "LSTM" else None)
