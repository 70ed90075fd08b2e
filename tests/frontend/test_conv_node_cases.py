"""The ONNX backend node test cases of Conv, ConvTranspose, MaxPool and
AveragePool (alone, or with Identity / Constant), imported and interpreted
against the outputs stored in each case; then ConvTranspose's output_shape
and auto_pad rules in cases the node tests leave out, against ONNX Runtime.

Cases that need a feature relax_edge does not have are listed with the
reason and must report "unsupported", so the list stays honest."""

import numpy as np
import pytest
from onnx import helper

import relax_edge as rxe
from relax_edge.frontend.onnx.node_tests import collect_cases, run_case
from tests.frontend.test_onnx_import import make_model, ort, vi

CONV_OPS = {"Conv", "ConvTranspose", "MaxPool", "AveragePool"}

KNOWN_UNSUPPORTED = {
}


def _ops(case):
    return {n.op_type for n in case.model.graph.node}


SELECTED = [c for c in collect_cases() if _ops(c) & CONV_OPS and _ops(c) <= CONV_OPS | {"Identity", "Constant"}]


def test_selection_covers_the_3d_and_output_shape_cases():
    names = {c.name for c in SELECTED}
    assert len(SELECTED) >= 50 and set(KNOWN_UNSUPPORTED) <= names
    assert {"test_convtranspose_3d", "test_maxpool_3d_default", "test_averagepool_3d_default",
            "test_convtranspose_output_shape", "test_convtranspose_autopad_same"} <= names


@pytest.mark.parametrize("case", SELECTED, ids=[c.name for c in SELECTED])
def test_node_case(case):
    result = run_case(case)
    if case.name in KNOWN_UNSUPPORTED:
        assert result.status == "unsupported", (result.status, result.detail)
    else:
        assert result.status == "pass", result.detail


# ------------------------------------ ConvTranspose pads from the output size

@pytest.mark.parametrize("attrs", [
    {"strides": [2], "auto_pad": "SAME_LOWER"},
    {"strides": [3], "auto_pad": "SAME_UPPER"},              # total -1: a zero appended at the end
    {"strides": [2], "output_shape": [6]},                   # odd total: the larger half at the begin
    {"strides": [2], "output_shape": [6], "auto_pad": "SAME_UPPER"},
    {"strides": [2], "output_shape": [6], "auto_pad": "SAME_LOWER"},
    {"strides": [2], "output_shape": [7], "pads": [3, 0]},   # pads are ignored
    {"strides": [3], "output_shape": [12], "output_padding": [1]},
    {"strides": [2], "auto_pad": "VALID"},
], ids=str)
def test_conv_transpose_1d_padding_rules_match_onnxruntime(attrs):
    x = np.arange(1, 9, dtype=np.float32).reshape(2, 1, 4)
    w = np.arange(1, 7, dtype=np.float32).reshape(1, 2, 3)
    b = np.array([0.5, -1.0], np.float32)
    model = make_model([helper.make_node("ConvTranspose", ["x", "w", "b"], ["y"], **attrs)],
                       [vi("x", ["n", 1, 4])], [vi("y", None)], inits={"w": w, "b": b})
    expected = ort(model, x)[0]
    ours = rxe.interpret(rxe.from_onnx(model), x)
    assert ours.shape == expected.shape
    np.testing.assert_allclose(ours, expected, rtol=1e-6)


@pytest.mark.parametrize("attrs", [
    {"strides": [2, 1, 2], "auto_pad": "SAME_LOWER", "group": 2},
    {"strides": [2, 2, 1], "output_shape": [5, 6, 4], "dilations": [1, 2, 1]},
], ids=str)
def test_conv_transpose_3d_padding_rules_match_onnxruntime(attrs):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 2, 3, 3, 4)).astype(np.float32)
    w = rng.standard_normal((2, 2, 2, 3, 2)).astype(np.float32)
    model = make_model([helper.make_node("ConvTranspose", ["x", "w"], ["y"], **attrs)],
                       [vi("x", ["n", 2, 3, 3, 4])], [vi("y", None)], inits={"w": w})
    expected = ort(model, x)[0]
    ours = rxe.interpret(rxe.from_onnx(model), x)
    assert ours.shape == expected.shape
    np.testing.assert_allclose(ours, expected, rtol=1e-5, atol=1e-5)
