"""ONNX RNN, GRU and LSTM: the ONNX backend node cases; one-node models over
a symbolic batch `n` (every direction, activations with alpha / beta, clip,
sequence_lens, initial states, peepholes, input_forget, linear_before_reset,
layout 1, float16) imported and interpreted at batch 1 and 3 and compiled on
the host with the C and LLVM backends, against ONNX Runtime (the numpy
reference of rnn_reference.py, written from the spec, where ONNX Runtime
lacks the form: layout 1, float16); small PyTorch keyword spotters (LSTM,
GRU) against ONNX Runtime; bad input rejected with the node named."""

import zlib
from dataclasses import dataclass, field, replace

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import relax_edge as rxe
from relax_edge.frontend.onnx import node_tests
from relax_edge.ir.expr import CallExtern
from tests.frontend.one_node import compiled
from tests.frontend.rnn_reference import GATES, recurrent_reference
from tests.rnn_models import CELLS, FEATURES, FRAMES, get_kws

NODE_CASES = [c for c in node_tests.collect_cases()
              if any(n.op_type in GATES for n in c.model.graph.node)]


def test_node_cases_are_collected():
    ops = {n.op_type for c in NODE_CASES for n in c.model.graph.node}
    assert ops == set(GATES) and len(NODE_CASES) >= 18


@pytest.mark.parametrize("case", NODE_CASES, ids=[c.name for c in NODE_CASES])
def test_node_case(case):
    result = node_tests.run_case(case)
    assert result.status == "pass", (result.status, result.detail)


# ------------------------------------------------ one-node models over a symbolic batch

BATCHES = [1, 3]
_ONNX_TYPE = {"float32": TensorProto.FLOAT, "float16": TensorProto.FLOAT16}


@dataclass
class Case:
    name: str
    op: str
    hidden: int = 4
    input_size: int = 3
    seq: int = 7
    attrs: dict = field(default_factory=dict)
    inputs: tuple = ()            # among B, sequence_lens, initial_h, initial_c, P
    outputs: tuple = ("Y", "Y_h", "Y_c")
    layout: int = 0
    dtype: str = "float32"
    opset: int = 14

    @property
    def directions(self):
        return 2 if self.attrs.get("direction") == "bidirectional" else 1

    @property
    def ort(self):  # ONNX Runtime runs neither layout 1 nor float16 recurrences
        return self.layout == 0 and self.dtype == "float32"


_SLOTS = ("X", "W", "R", "B", "sequence_lens", "initial_h", "initial_c", "P")


def _weights(case: Case):
    """The initializers: W, R, B, P, seeded by the case name."""
    rng = np.random.default_rng(zlib.crc32(case.name.encode()))
    g, h, nd = GATES[case.op], case.hidden, case.directions
    scale = 1 / np.sqrt(h)
    out = {"W": rng.uniform(-scale, scale, (nd, g * h, case.input_size)),
           "R": rng.uniform(-scale, scale, (nd, g * h, h))}
    if "B" in case.inputs:
        out["B"] = rng.uniform(-scale, scale, (nd, 2 * g * h))
    if "P" in case.inputs:
        out["P"] = rng.uniform(-scale, scale, (nd, 3 * h))
    return {k: v.astype(case.dtype) for k, v in out.items()}


def _state_shape(case: Case):
    return ["n", case.directions, case.hidden] if case.layout else [case.directions, "n", case.hidden]


def _model(case: Case):
    weights = _weights(case)
    x_shape = ["n", case.seq, case.input_size] if case.layout else [case.seq, "n", case.input_size]
    graph_inputs = [helper.make_tensor_value_info("X", _ONNX_TYPE[case.dtype], x_shape)]
    if "sequence_lens" in case.inputs:
        graph_inputs.append(helper.make_tensor_value_info("sequence_lens", TensorProto.INT32, ["n"]))
    for name in ("initial_h", "initial_c"):
        if name in case.inputs:
            graph_inputs.append(helper.make_tensor_value_info(name, _ONNX_TYPE[case.dtype], _state_shape(case)))
    present = {"X", "W", "R", *case.inputs}
    names = [n if n in present else "" for n in _SLOTS]
    while not names[-1]:
        names.pop()
    outputs = [o if o in case.outputs else "" for o in ("Y", "Y_h", "Y_c")[:3 if case.op == "LSTM" else 2]]
    attrs = dict(case.attrs, hidden_size=case.hidden)
    if case.layout:
        attrs["layout"] = 1
    node = helper.make_node(case.op, names, outputs, name="rnn", **attrs)
    graph = helper.make_graph([node], case.name, graph_inputs,
                              [helper.make_tensor_value_info(o, _ONNX_TYPE[case.dtype], None) for o in outputs if o],
                              [numpy_helper.from_array(v, k) for k, v in weights.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", case.opset)])
    model.ir_version = 8
    return model


def _feeds(case: Case, n: int):
    rng = np.random.default_rng(zlib.crc32(case.name.encode()) + n)
    x_shape = (n, case.seq, case.input_size) if case.layout else (case.seq, n, case.input_size)
    feeds = {"X": rng.standard_normal(x_shape).astype(case.dtype)}
    if "sequence_lens" in case.inputs:
        lens = rng.integers(1, case.seq + 1, n)
        lens[0] = max(1, case.seq - 2)  # at least one sequence shorter than the input
        feeds["sequence_lens"] = lens.astype(np.int32)
    state = tuple(n if d == "n" else d for d in _state_shape(case))
    for name in ("initial_h", "initial_c"):
        if name in case.inputs:
            feeds[name] = (0.5 * rng.standard_normal(state)).astype(case.dtype)
    return feeds


def _reference(case: Case, feeds):
    args = {**_weights(case), **feeds}
    y, y_h, y_c = recurrent_reference(case.op, args.pop("X"), args.pop("W"), args.pop("R"), **args,
                                      **case.attrs, layout=case.layout)
    return [v for name, v in zip(("Y", "Y_h", "Y_c"), (y, y_h, y_c)) if name in case.outputs and v is not None]


def _expected(case: Case, feeds):
    if not case.ort:
        return _reference(case, feeds)
    sess = ort.InferenceSession(_model(case).SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


H16 = dict(hidden=16, input_size=5)
CASES = [
    Case("rnn_forward_h4_seq7", "RNN", inputs=("B",)),
    Case("rnn_reverse_h16_seq1_init", "RNN", seq=1, attrs={"direction": "reverse"}, inputs=("B", "initial_h"),
         **H16),
    Case("rnn_bidir_relu_affine", "RNN", attrs={"direction": "bidirectional", "activations": ["Relu", "Affine"],
                                                "activation_alpha": [0.5], "activation_beta": [0.25]},
         inputs=("B", "initial_h")),
    Case("rnn_seq_lens_clip", "RNN", attrs={"clip": 0.7}, inputs=("B", "sequence_lens"), opset=7),
    Case("rnn_layout1_bidir_lens", "RNN", attrs={"direction": "bidirectional"},
         inputs=("B", "sequence_lens", "initial_h"), layout=1),
    Case("gru_forward_h16", "GRU", inputs=("B",), **H16),
    Case("gru_linear_before_reset_init", "GRU", attrs={"linear_before_reset": 1}, inputs=("B", "initial_h")),
    Case("gru_lbr_no_bias_zero_state", "GRU", attrs={"linear_before_reset": 1}, outputs=("Y_h",)),
    Case("gru_reverse_lens", "GRU", attrs={"direction": "reverse"}, inputs=("B", "sequence_lens", "initial_h")),
    Case("gru_bidir_lbr_lens_h16", "GRU", attrs={"direction": "bidirectional", "linear_before_reset": 1},
         inputs=("B", "sequence_lens"), **H16),
    Case("gru_activations_clip", "GRU", attrs={"activations": ["HardSigmoid", "LeakyRelu"],
                                               "activation_alpha": [0.3, 0.2], "activation_beta": [0.6],
                                               "clip": 1.5}, inputs=("B",), opset=7),
    Case("gru_layout1_lbr", "GRU", seq=1, attrs={"linear_before_reset": 1}, inputs=("B", "initial_h"), layout=1),
    Case("lstm_forward_h16_seq7", "LSTM", inputs=("B",), **H16),
    Case("lstm_reverse_seq1", "LSTM", seq=1, attrs={"direction": "reverse"}, inputs=("B", "initial_h", "initial_c")),
    Case("lstm_bidir_all_inputs", "LSTM", attrs={"direction": "bidirectional"},
         inputs=("B", "sequence_lens", "initial_h", "initial_c", "P")),
    Case("lstm_peepholes_lens_h16", "LSTM", inputs=("B", "sequence_lens", "initial_h", "initial_c", "P"), **H16),
    Case("lstm_input_forget_clip", "LSTM", attrs={"input_forget": 1, "clip": 0.8}, inputs=("B", "P")),
    Case("lstm_only_y_c", "LSTM", inputs=("B", "initial_c"), outputs=("Y_c",)),
    Case("lstm_layout1_bidir_peepholes", "LSTM", attrs={"direction": "bidirectional"},
         inputs=("B", "sequence_lens", "initial_h", "initial_c", "P"), layout=1),
    Case("lstm_float16", "LSTM", inputs=("B", "initial_h"), dtype="float16"),
    # every other activation, two per direction of a bidirectional LSTM (f, g, h)
    Case("lstm_activations_a", "LSTM", attrs={"direction": "bidirectional",
                                              "activations": ["Sigmoid", "ScaledTanh", "Softsign",
                                                              "HardSigmoid", "Elu", "Softplus"],
                                              "activation_alpha": [0.9, 0.25, 0.8], "activation_beta": [0.7, 0.4]},
         inputs=("B",)),
    Case("lstm_activations_b", "LSTM", attrs={"activations": ["Sigmoid", "ThresholdedRelu", "Affine"],
                                              "activation_alpha": [0.1, 0.9], "activation_beta": [0.05]},
         inputs=("B", "initial_c"), opset=7),
]
_TOL = {"float32": 2e-5, "float16": 2e-3}


def _check(case, actual, expected):
    assert len(actual) == len(expected)
    for a, e in zip(actual, expected):
        a = np.asarray(a)
        assert a.shape == e.shape and a.dtype == e.dtype, (a.shape, a.dtype, e.shape, e.dtype)
        np.testing.assert_allclose(a.astype(np.float32), e.astype(np.float32), rtol=_TOL[case.dtype],
                                   atol=_TOL[case.dtype])


def test_reference_agrees_with_onnx_runtime():
    """The spec-written numpy reference gives ONNX Runtime's numbers wherever ONNX Runtime runs the form."""
    for case in CASES:
        if case.ort:
            for n in BATCHES:
                feeds = _feeds(case, n)
                _check(case, _reference(case, feeds), _expected(case, feeds))


def test_cases_cover_the_sizes():
    assert {c.hidden for c in CASES} >= {4, 16} and {c.seq for c in CASES} >= {1, 7}
    assert {c.attrs.get("direction", "forward") for c in CASES} == {"forward", "reverse", "bidirectional"}
    for op in GATES:
        for slot in ("B", "sequence_lens", "initial_h"):
            assert any(c.op == op and slot in c.inputs for c in CASES), (op, slot)
    assert any("P" in c.inputs for c in CASES) and any("initial_c" in c.inputs for c in CASES)


def _interpret(mod, case, feeds):
    out = rxe.interpret(mod, *feeds.values())
    return list(out) if isinstance(out, tuple) else [out]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_interpreted_matches_onnx_runtime(case):
    mod = rxe.from_onnx(_model(case))
    for n in BATCHES:
        feeds = _feeds(case, n)
        _check(case, _interpret(mod, case, feeds), _expected(case, feeds))


def _dense_calls(mod):
    main = rxe.optimize(mod, board="host")["main"]
    return [b.value for block in main.body.blocks for b in block.bindings
            if isinstance(b.value, CallExtern) and b.value.name == "rxe_lib_dense_f32"]


@pytest.mark.parametrize("name,per_direction", [
    ("lstm_bidir_all_inputs", 1 + 7), ("gru_linear_before_reset_init", 1 + 7), ("rnn_forward_h4_seq7", 1 + 6)])
def test_gate_gemms_go_to_the_library_and_share_their_weights(name, per_direction):
    """Per direction one dense call projects the input of every step, then one per step multiplies the hidden
    state (none at a zero initial state); the steps share one packed R^T (and one bias) in the weights."""
    case = next(c for c in CASES if c.name == name)
    calls = _dense_calls(rxe.from_onnx(_model(case)))
    assert len(calls) == case.directions * per_direction
    assert len({id(c.args[1]) for c in calls}) == 2 * case.directions            # W^T and R^T per direction
    assert len({id(c.args[2]) for c in calls}) <= 2 * case.directions            # their biases


# compiled at 2 steps: an unrolled step costs about half a second of compile time per direction and backend
COMPILED = [replace(c, seq=2) for c in CASES if c.name in {
    "rnn_bidir_relu_affine", "gru_bidir_lbr_lens_h16", "gru_reverse_lens", "lstm_bidir_all_inputs",
    "lstm_layout1_bidir_peepholes", "lstm_float16"}]


@pytest.mark.parametrize("backend", ["c", "llvm"])
@pytest.mark.parametrize("case", COMPILED, ids=[c.name for c in COMPILED])
def test_compiled_matches_onnx_runtime(case, backend, tmp_path):
    with compiled(_model(case), backend, tmp_path) as loaded:
        for n in BATCHES:
            feeds = _feeds(case, n)
            _check(case, loaded.run(*feeds.values()), _expected(case, feeds))


# ------------------------------------------------ keyword spotters exported from PyTorch

def _kws_case(cell):
    path = get_kws(cell)
    x = np.random.default_rng(len(cell)).standard_normal((3, FRAMES, FEATURES)).astype(np.float32)
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return path, x, sess.run(None, {"mfcc": x})[0]


@pytest.mark.parametrize("cell", CELLS)
def test_kws_interpreted_matches_onnx_runtime(cell):
    path, x, want = _kws_case(cell)
    mod = rxe.from_onnx(str(path))
    for batch in (1, 3):
        got = np.asarray(rxe.interpret(mod, x[:batch]))
        np.testing.assert_allclose(got, want[:batch], rtol=1e-4, atol=1e-5)
    assert want.std() > 1e-2  # a real check, not constant logits


# one backend per cell (49 unrolled steps compile in about 15 s of CPU each)
@pytest.mark.parametrize("cell,backend", [("lstm", "c"), ("gru", "llvm")])
def test_kws_compiled_matches_onnx_runtime(cell, backend, tmp_path):
    path, x, want = _kws_case(cell)
    with compiled(onnx.load(str(path)), backend, tmp_path) as loaded:
        for batch in (1, 3):
            np.testing.assert_allclose(loaded.run(x[:batch])[0], want[:batch], rtol=1e-4, atol=1e-5)


# ------------------------------------------------------------------------ bad input

# ------------------------------------------------ a symbolic sequence length: the IR's loop

SYMBOLIC = [
    Case("lstm_symbolic_bidir_all_inputs", "LSTM", attrs={"direction": "bidirectional"},
         inputs=("B", "sequence_lens", "initial_h", "initial_c", "P")),
    Case("gru_symbolic_reverse_lbr", "GRU", attrs={"direction": "reverse", "linear_before_reset": 1},
         inputs=("B", "initial_h")),
    Case("rnn_symbolic_forward_zero_state", "RNN", inputs=("B",), outputs=("Y", "Y_h")),
]


def _symbolic_model(case: Case):
    """The case's model with the sequence dim of X named T."""
    model = _model(case)
    dim = model.graph.input[0].type.tensor_type.shape.dim[1 if case.layout else 0]
    dim.Clear()
    dim.dim_param = "T"
    return model


def _symbolic_check(case, model, run):
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    for t in (2, 9):
        feeds = _feeds(replace(case, seq=t), 2)
        _check(case, run(*feeds.values()), sess.run(None, feeds))


@pytest.mark.parametrize("case", SYMBOLIC, ids=[c.name for c in SYMBOLIC])
def test_symbolic_sequence_length_is_the_irs_loop(case):
    model = _symbolic_model(case)
    mod = rxe.from_onnx(model)
    assert str(mod).count("loop(trip_count=T") == case.directions
    _symbolic_check(case, model, lambda *arrays: _as_list(rxe.interpret(mod, *arrays)))


def test_a_long_sequence_is_the_irs_loop():
    case = Case("lstm_long_seq70_lens", "LSTM", seq=70, attrs={"direction": "reverse"}, inputs=("B", "sequence_lens"))
    mod = rxe.from_onnx(_model(case))
    assert "loop(trip_count=70" in str(mod)
    feeds = _feeds(case, 2)
    _check(case, _as_list(rxe.interpret(mod, *feeds.values())), _expected(case, feeds))


def test_symbolic_lstm_loop_bodies_are_dispatched_and_fused():
    """h @ R^T goes to the library dense kernel, one per direction; each cell's gates fuse into few kernels."""
    mod = rxe.optimize(rxe.from_onnx(_symbolic_model(SYMBOLIC[0])), verify=True)
    text = rxe.ir.print_function(mod["main"])
    bodies = text[text.index("loop("):]
    assert bodies.count('call_extern("rxe_lib_dense_f32", (rnn_state0') == 2
    first = bodies[:bodies.index("return")]
    assert first.count("call_tensor(@fused_") >= 1 and first.count("call_tensor(") <= 10


@pytest.mark.parametrize("backend", ["c", "llvm"])
def test_symbolic_lstm_compiled(backend, tmp_path):
    case = SYMBOLIC[0]
    model = _symbolic_model(case)
    with compiled(model, backend, tmp_path) as loaded:
        _symbolic_check(case, model, lambda *arrays: _as_list(loaded.run(*arrays)))


@pytest.mark.slow
@pytest.mark.emu
def test_symbolic_lstm_on_qemu_aarch64(tmp_path):
    """The loop cross-compiled (LLVM) and run under QEMU, at two sequence lengths."""
    case = SYMBOLIC[0]
    model = _symbolic_model(case)
    art = rxe.build(rxe.from_onnx(model), board="qemu-aarch64", backend="llvm", out_dir=tmp_path, name="m",
                    profile=False)
    with rxe.connect("qemu-aarch64") as dev:
        loaded = dev.load(art)
        _symbolic_check(case, model, lambda *arrays: _as_list(loaded.run(*arrays)))


def _as_list(out):
    return list(out) if isinstance(out, (list, tuple)) else [out]


def _bad(op="RNN", x_shape=(3, "n", 2), hidden=4, attrs=None, w_dirs=1, w_rows=None, opset=14, extra=()):
    g = GATES[op]
    w = np.zeros((w_dirs, w_rows or g * hidden, x_shape[-1]), np.float32)
    r = np.zeros((w_dirs, w_rows or g * hidden, hidden), np.float32)
    inits = [numpy_helper.from_array(w, "W"), numpy_helper.from_array(r, "R")]
    inits += [numpy_helper.from_array(v, k) for k, v in extra]
    node = helper.make_node(op, ["X", "W", "R", *[k for k, _ in extra]], ["Y"], name="bad",
                            **{"hidden_size": hidden, **(attrs or {})})
    graph = helper.make_graph([node], "bad", [helper.make_tensor_value_info("X", TensorProto.FLOAT, list(x_shape))],
                              [helper.make_tensor_value_info("Y", TensorProto.FLOAT, None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return model


@pytest.mark.parametrize("model,message", [
    (_bad(attrs={"direction": "sideways"}), r"bad \(RNN\).*direction 'sideways' is not supported"),
    (_bad(attrs={"direction": "bidirectional"}), r"bad \(RNN\).*input 1 \(W\) must have shape \(2, 4, 2\)"),
    (_bad(hidden=4, w_rows=5), r"bad \(RNN\).*input 1 \(W\) must have shape \(1, 4, 2\), got \(1, 5, 2\)"),
    (_bad(attrs={"activations": ["Tanh"], "direction": "bidirectional"}, w_dirs=2),
     r"bad \(RNN\).*activations has 1 functions, RNN with 2 direction\(s\) needs 2"),
    (_bad("GRU", attrs={"activations": ["Sigmoid", "Gelu"]}), r"bad \(GRU\).*activation 'Gelu' is not supported"),
    (_bad(attrs={"activations": ["ScaledTanh"], "activation_alpha": [1.0]}),
     r"bad \(RNN\).*activation ScaledTanh needs its alpha and beta"),
    (_bad("LSTM", attrs={"activation_alpha": [0.5]}),
     r"bad \(LSTM\).*activation_alpha has 1 values, the activations \['Sigmoid', 'Tanh', 'Tanh'\] use 0"),
    (_bad(attrs={"clip": -1.0}), r"bad \(RNN\).*clip must be positive, got -1.0"),
    (_bad("LSTM", attrs={"input_forget": 2}), r"bad \(LSTM\).*input_forget must be 0 or 1, got 2"),
    (_bad(attrs={"layout": 2}), r"bad \(RNN\).*layout must be 0 or 1, got 2"),
    (_bad(extra=[("B", np.zeros((1, 6), np.float32))]), r"bad \(RNN\).*input 3 \(B\) must have shape \(1, 8\)"),
    (_bad("LSTM", extra=[("B", np.zeros((1, 32), np.float32)), ("L", np.ones(2, np.int32)),
                         ("H0", np.zeros((1, 2, 4), np.float32)), ("C0", np.zeros((1, 2, 4), np.float32)),
                         ("P", np.zeros((1, 8), np.float32))], x_shape=(3, 2, 2)),
     r"bad \(LSTM\).*input 7 \(P\) must have shape \(1, 12\)"),
])
def test_bad_input_names_the_node(model, message):
    with pytest.raises(rxe.frontend.OnnxImportError, match=message):
        rxe.from_onnx(model)


def test_empty_sequence_is_refused():
    with pytest.raises(rxe.frontend.OnnxImportError, match=r"bad \(RNN\).*a sequence length of 0 is not supported"):
        rxe.from_onnx(_bad(x_shape=("T", 2, 2)), input_shapes={"X": (0, 2, 2)})
