"""ONNX NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss: every ONNX
backend node case of both (the "expanded" ones included); one-node models over
a symbolic batch `n` and a symbolic extra dim `d`, interpreted at several
sizes, and one model of several loss nodes compiled on the host with the C and
LLVM backends (and, slow, for qemu-aarch64), against numpy references written
from the ONNX spec (themselves checked against ONNX Runtime); bad input
refused with the node named."""

import zlib

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

import relax_edge as rxe
from relax_edge.frontend.onnx import node_tests
from tests.frontend.one_node import assert_matches, compiled

PREFIXES = ("test_nllloss", "test_sce")
NODE_CASES = [c for c in node_tests.collect_cases() if c.name.startswith(PREFIXES)]


def test_every_form_has_node_cases():
    names = {c.name for c in NODE_CASES}
    assert len(NODE_CASES) >= 100
    for name in ("test_nllloss_NCd1d2_with_weight_reduction_mean", "test_nllloss_NCd1_mean_weight_negative_ii",
                 "test_sce_mean_weight_ii_4d_log_prob", "test_sce_NCd1d2d3_none_no_weight_negative_ii_expanded"):
        assert name in names, name


@pytest.mark.parametrize("case", NODE_CASES, ids=[c.name for c in NODE_CASES])
def test_node_case(case):
    result = node_tests.run_case(case)
    assert result.status == "pass", (result.status, result.detail)


# ------------------------------------------------ numpy references written from the ONNX spec

def nll_reference(x, target, weight=None, ignore_index=None, reduction="mean"):
    """loss[n, d] = -x[n, target[n, d], d] * weight[target[n, d]], 0 where target == ignore_index;
    mean divides the sum by the sum of the weights of the targets kept."""
    keep = np.ones(target.shape, bool) if ignore_index is None else target != ignore_index
    safe = np.where(keep, target, 0)
    picked = np.take_along_axis(x.astype(np.float64), safe[:, None], axis=1)[:, 0]
    w = np.ones(target.shape) if weight is None else weight.astype(np.float64)[safe]
    w = w * keep
    loss = -picked * w
    if reduction == "none":
        return loss.astype(x.dtype)
    if reduction == "sum":
        return np.array(loss.sum(), x.dtype)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.array(loss.sum() / w.sum(), x.dtype)


def log_softmax_reference(x, axis=1):
    x = x.astype(np.float64)
    shifted = x - x.max(axis=axis, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=axis, keepdims=True))


def sce_reference(x, labels, weight=None, ignore_index=None, reduction="mean"):
    log_prob = log_softmax_reference(x)
    loss = nll_reference(log_prob, labels, weight, ignore_index, reduction)
    return loss.astype(x.dtype), log_prob.astype(x.dtype)


# ------------------------------------------------ one-node models over a symbolic batch and extra dim

C = 4
SIZES = [(1, 1), (2, 3), (5, 2)]  # (n, d)


def _loss_model(op_type, attrs, weight, log_prob=False, opset=13, name="loss"):
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", C, "d"]),
              helper.make_tensor_value_info("t", TensorProto.INT64, ["n", "d"])]
    if weight:
        inputs.append(helper.make_tensor_value_info("w", TensorProto.FLOAT, [C]))
    outputs = ["y", "log_prob"] if log_prob else ["y"]
    node = helper.make_node(op_type, [i.name for i in inputs], outputs, name=name, **attrs)
    graph = helper.make_graph([node], name, inputs, [helper.make_empty_tensor_value_info(o) for o in outputs])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return model


def _data(seed, n, d, ignore_index=None):
    rng = np.random.default_rng(seed + 97 * n + d)
    x = rng.standard_normal((n, C, d)).astype(np.float32)
    t = rng.integers(0, C, (n, d)).astype(np.int64)
    if ignore_index is not None:
        t[rng.random((n, d)) < 0.3] = ignore_index
        t.reshape(-1)[0] = 0 if ignore_index != 0 else 1  # one target kept: the mean is defined
    w = rng.uniform(0.2, 2.0, C).astype(np.float32)
    return x, t, w


CASES = [  # (name, op type, attributes, with weight, log_prob output)
    ("nll_mean", "NegativeLogLikelihoodLoss", {}, False, False),
    ("nll_none_weight", "NegativeLogLikelihoodLoss", {"reduction": "none"}, True, False),
    ("nll_sum_ii", "NegativeLogLikelihoodLoss", {"reduction": "sum", "ignore_index": 2}, False, False),
    ("nll_mean_weight_ii", "NegativeLogLikelihoodLoss", {"ignore_index": 1}, True, False),
    ("nll_mean_weight_ii_outside", "NegativeLogLikelihoodLoss", {"ignore_index": -5}, True, False),
    ("nll_none_ii_high", "NegativeLogLikelihoodLoss", {"reduction": "none", "ignore_index": 10}, False, False),
    ("sce_mean", "SoftmaxCrossEntropyLoss", {}, False, False),
    ("sce_none_log_prob", "SoftmaxCrossEntropyLoss", {"reduction": "none"}, False, True),
    ("sce_sum_weight_ii", "SoftmaxCrossEntropyLoss", {"reduction": "sum", "ignore_index": 0}, True, False),
    ("sce_mean_weight_ii_log_prob", "SoftmaxCrossEntropyLoss", {"ignore_index": 3}, True, True),
]


def _reference(op_type, attrs, x, t, w):
    args = dict(weight=w, ignore_index=attrs.get("ignore_index"), reduction=attrs.get("reduction", "mean"))
    if op_type == "NegativeLogLikelihoodLoss":
        return [nll_reference(x, t, **args)]
    return list(sce_reference(x, t, **args))


def _feeds(case, n, d):
    name, _, attrs, weight, _ = case
    x, t, w = _data(zlib.crc32(name.encode()), n, d, attrs.get("ignore_index"))
    return [x, t, w] if weight else [x, t], (x, t, w if weight else None)


def _check(actual, expected):
    assert_matches(actual, expected, tol=2e-5)


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_references_agree_with_onnx_runtime(case):
    name, op_type, attrs, weight, log_prob = case
    sess = ort.InferenceSession(_loss_model(op_type, attrs, weight, log_prob).SerializeToString(),
                                providers=["CPUExecutionProvider"])
    for n, d in SIZES:
        feeds, (x, t, w) = _feeds(case, n, d)
        got = sess.run(None, dict(zip(["x", "t", "w"], feeds)))
        for ours, theirs in zip(_reference(op_type, attrs, x, t, w), got):
            _check(ours, theirs)


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_interpreted_matches_reference(case):
    name, op_type, attrs, weight, log_prob = case
    mod = rxe.from_onnx(_loss_model(op_type, attrs, weight, log_prob))
    for n, d in SIZES:
        feeds, (x, t, w) = _feeds(case, n, d)
        out = rxe.interpret(mod, *feeds)
        out = list(out) if isinstance(out, tuple) else [out]
        expected = _reference(op_type, attrs, x, t, w)[:1 + log_prob]
        assert len(out) == len(expected)
        for actual, want in zip(out, expected):
            _check(np.asarray(actual), want)


def test_every_target_ignored_gives_nan_mean():
    """reduction mean with every target ignored is 0 / 0, as the ONNX reference gives."""
    mod = rxe.from_onnx(_loss_model("NegativeLogLikelihoodLoss", {"ignore_index": 1}, True))
    x, _, w = _data(7, 2, 3)
    out = np.asarray(rxe.interpret(mod, x, np.ones((2, 3), np.int64), w))
    assert out.shape == () and np.isnan(out)


def test_float64_and_int32_targets():
    """float64 log probabilities and int32 targets (both ONNX types of the operator)."""
    inputs = [helper.make_tensor_value_info("x", TensorProto.DOUBLE, ["n", 3]),
              helper.make_tensor_value_info("t", TensorProto.INT32, ["n"])]
    node = helper.make_node("NegativeLogLikelihoodLoss", ["x", "t"], ["y"], reduction="sum")
    graph = helper.make_graph([node], "g", inputs, [helper.make_empty_tensor_value_info("y")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    mod = rxe.from_onnx(model)
    rng = np.random.default_rng(3)
    x, t = rng.standard_normal((4, 3)), np.array([0, 2, 1, 2], np.int32)
    out = np.asarray(rxe.interpret(mod, x, t))
    assert out.dtype == np.float64
    np.testing.assert_allclose(out, nll_reference(x, t, reduction="sum"), rtol=1e-12)


# ------------------------------------------------ compiled: several loss nodes in one model

def _compiled_model():
    """NLL (none, weight, ignore_index 1) and (mean), SCE (mean, weight, ignore_index 3, log_prob) and (sum)."""
    nodes = [helper.make_node("NegativeLogLikelihoodLoss", ["x", "t", "w"], ["nll_none"], reduction="none",
                              ignore_index=1),
             helper.make_node("NegativeLogLikelihoodLoss", ["x", "t"], ["nll_mean"]),
             helper.make_node("SoftmaxCrossEntropyLoss", ["x", "t", "w"], ["sce_mean", "log_prob"], ignore_index=3),
             helper.make_node("SoftmaxCrossEntropyLoss", ["x", "t"], ["sce_sum"], reduction="sum")]
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", C, "d"]),
              helper.make_tensor_value_info("t", TensorProto.INT64, ["n", "d"]),
              helper.make_tensor_value_info("w", TensorProto.FLOAT, [C])]
    outputs = ["nll_none", "nll_mean", "sce_mean", "log_prob", "sce_sum"]
    graph = helper.make_graph(nodes, "losses", inputs, [helper.make_empty_tensor_value_info(o) for o in outputs])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    return model


def _compiled_expected(x, t, w):
    sce_mean, log_prob = sce_reference(x, t, w, 3)
    return [nll_reference(x, t, w, 1, "none"), nll_reference(x, t), sce_mean, log_prob,
            sce_reference(x, t, reduction="sum")[0]]


def _run_compiled(loaded, sizes):
    for n, d in sizes:
        x, t, w = _data(11, n, d, ignore_index=3)
        t[t == 3] = np.where(np.arange((t == 3).sum()) % 2, 1, 3)  # both ignore indices occur
        for actual, want in zip(loaded.run(x, t, w), _compiled_expected(x, t, w)):
            _check(actual, want)


@pytest.mark.parametrize("backend", ["c", "llvm"])
def test_compiled_matches_reference(backend, tmp_path):
    with compiled(_compiled_model(), backend, tmp_path) as loaded:
        _run_compiled(loaded, SIZES)


@pytest.mark.slow
@pytest.mark.emu
def test_compiled_for_qemu_aarch64(tmp_path):
    art = rxe.build(rxe.from_onnx(_compiled_model()), board="qemu-aarch64", backend="c", out_dir=tmp_path, name="m",
                    profile=False)
    with rxe.connect("qemu-aarch64") as dev:
        _run_compiled(dev.load(art), SIZES[1:])


# ------------------------------------------------------------------------ bad input

def _bad(op_type, x_type, t_type, attrs, weight_shape=None):
    inputs = [helper.make_tensor_value_info("x", x_type[0], x_type[1]),
              helper.make_tensor_value_info("t", t_type[0], t_type[1])]
    if weight_shape is not None:
        inputs.append(helper.make_tensor_value_info("w", TensorProto.FLOAT, weight_shape))
    node = helper.make_node(op_type, [i.name for i in inputs], ["y"], name="bad", **attrs)
    graph = helper.make_graph([node], "bad", inputs, [helper.make_empty_tensor_value_info("y")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    return model


F, I64 = TensorProto.FLOAT, TensorProto.INT64


@pytest.mark.parametrize("model,message", [
    (_bad("NegativeLogLikelihoodLoss", (F, ["n", 3]), (I64, ["n"]), {"reduction": "avg"}),
     r"bad \(NegativeLogLikelihoodLoss\).*reduction 'avg' is not supported \(none, sum, mean\)"),
    (_bad("NegativeLogLikelihoodLoss", (F, ["n", 3]), (F, ["n"]), {}),
     r"bad \(NegativeLogLikelihoodLoss\).*target must be int32 or int64, got float32"),
    (_bad("NegativeLogLikelihoodLoss", (F, ["n"]), (I64, ["n"]), {}),
     r"bad \(NegativeLogLikelihoodLoss\).*input must have rank >= 2"),
    (_bad("NegativeLogLikelihoodLoss", (F, ["n", 3, 2]), (I64, ["n"]), {}),
     r"bad \(NegativeLogLikelihoodLoss\).*target must have rank 2"),
    (_bad("SoftmaxCrossEntropyLoss", (F, ["n", 3]), (I64, ["n"]), {}, [3, 1]),
     r"bad \(SoftmaxCrossEntropyLoss\).*weight must have rank 1"),
    (_bad("SoftmaxCrossEntropyLoss", (TensorProto.INT32, ["n", 3]), (I64, ["n"]), {}),
     r"bad \(SoftmaxCrossEntropyLoss\).*scores of type int32 is not supported"),
])
def test_bad_input_names_the_node(model, message):
    with pytest.raises(rxe.frontend.OnnxImportError, match=message):
        rxe.from_onnx(model)
