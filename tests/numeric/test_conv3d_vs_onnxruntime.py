"""conv3d, conv3d_transpose, max_pool3d and avg_pool3d, built over a symbolic
batch dim `n` and interpreted at n = 1 and n = 3, against ONNX Runtime
running the equivalent ONNX node; then their symbolic output sizes against
the sizes ONNX Runtime really produces."""

import zlib

import numpy as np
import pytest

from relax_edge import op
from relax_edge.errors import TypeInferenceError
from relax_edge.ir import SizeVar, TensorType, Var, evaluate
from tests.numeric.onnx_reference import run_node
from tests.numeric.test_ops_vs_onnxruntime import random_inputs, run_ours

BATCH = [1, 3]

# our keyword -> ONNX attribute
_ONNX_NAMES = {"strides": "strides", "padding": "pads", "dilation": "dilations", "groups": "group",
               "output_padding": "output_padding", "ceil_mode": "ceil_mode",
               "count_include_pad": "count_include_pad"}


def _onnx_attrs(kw):
    return {_ONNX_NAMES[k]: list(v) if isinstance(v, tuple) else int(v) for k, v in kw.items()}


def conv(name, x, w, **kw):
    return name, [x, w], "Conv", _onnx_attrs(kw), 17, lambda a, b: op.conv3d(a, b, **kw)


def conv_t(name, x, w, **kw):
    return name, [x, w], "ConvTranspose", _onnx_attrs(kw), 17, lambda a, b: op.conv3d_transpose(a, b, **kw)


def max_pool(name, x, kernel, **kw):
    attrs = {"kernel_shape": list(kernel), **_onnx_attrs(kw)}
    return name, [x], "MaxPool", attrs, 17, lambda a: op.max_pool3d(a, kernel, **kw)


def avg_pool(name, x, kernel, **kw):
    attrs = {"kernel_shape": list(kernel), **_onnx_attrs(kw)}
    # AveragePool has dilations from opset 19
    return name, [x], "AveragePool", attrs, 19, lambda a: op.avg_pool3d(a, kernel, **kw)


CASES = [
    conv("conv_plain", ("n", 2, 4, 5, 6), (3, 2, 3, 3, 3)),
    conv("conv_stride_pad", ("n", 3, 7, 6, 5), (4, 3, 3, 2, 3), strides=(2, 1, 3),
         padding=(1, 0, 2, 0, 1, 1)),
    conv("conv_dilated", ("n", 2, 7, 7, 6), (2, 2, 2, 3, 2), dilation=(3, 2, 1), padding=(1, 1, 1, 1, 1, 1)),
    conv("conv_grouped", ("n", 4, 5, 5, 5), (6, 2, 3, 3, 1), groups=2, strides=(1, 2, 1)),
    conv("conv_depthwise", ("n", 3, 6, 5, 4), (3, 1, 2, 2, 2), groups=3, strides=(2, 2, 2),
         padding=(0, 1, 0, 1, 0, 1)),
    conv_t("convt_plain", ("n", 2, 3, 4, 2), (2, 3, 2, 3, 3)),
    conv_t("convt_stride_pad", ("n", 2, 3, 3, 4), (2, 2, 3, 3, 2), strides=(2, 3, 1),
           padding=(1, 0, 0, 0, 2, 1)),
    conv_t("convt_output_padding", ("n", 2, 3, 2, 3), (2, 2, 3, 3, 3), strides=(2, 3, 2),
           output_padding=(1, 2, 0)),
    conv_t("convt_dilated", ("n", 2, 3, 4, 3), (2, 1, 2, 2, 3), dilation=(2, 3, 1), padding=(1, 0, 1, 0, 1, 0)),
    conv_t("convt_grouped", ("n", 4, 3, 2, 3), (4, 2, 2, 3, 2), groups=2, strides=(1, 2, 2),
           output_padding=(0, 1, 1)),
    max_pool("max_stride_pad", ("n", 2, 7, 6, 5), (3, 3, 2), strides=(2, 2, 1), padding=(1, 1, 0, 1, 0, 1)),
    max_pool("max_ceil", ("n", 2, 8, 7, 6), (3, 2, 3), strides=(2, 2, 2), ceil_mode=True),
    max_pool("max_ceil_pad", ("n", 1, 6, 7, 5), (2, 3, 3), strides=(3, 2, 2), padding=(1, 1, 1, 0, 1, 1),
             ceil_mode=True),
    max_pool("max_dilated", ("n", 2, 7, 7, 7), (2, 2, 2), strides=(1, 1, 1), dilation=(2, 3, 1)),
    avg_pool("avg_exclude_pad", ("n", 2, 7, 6, 5), (3, 3, 3), strides=(2, 2, 2), padding=(1, 1, 1, 1, 1, 1)),
    avg_pool("avg_include_pad", ("n", 2, 7, 6, 5), (3, 3, 3), strides=(2, 2, 2), padding=(1, 0, 1, 1, 2, 1),
             count_include_pad=True),
    avg_pool("avg_ceil", ("n", 2, 8, 7, 6), (3, 2, 3), strides=(2, 2, 2), ceil_mode=True),
    avg_pool("avg_ceil_pad_include", ("n", 1, 6, 7, 5), (2, 3, 3), strides=(3, 2, 2),
             padding=(1, 1, 1, 0, 1, 1), ceil_mode=True, count_include_pad=True),
    avg_pool("avg_ceil_pad_exclude", ("n", 1, 6, 7, 5), (2, 3, 3), strides=(3, 2, 2),
             padding=(1, 1, 1, 0, 1, 1), ceil_mode=True),
    avg_pool("avg_dilated", ("n", 2, 7, 6, 7), (2, 2, 3), strides=(1, 2, 1), dilation=(2, 2, 1),
             padding=(1, 0, 1, 1, 0, 1)),
]


@pytest.mark.parametrize("n", BATCH, ids=lambda n: f"n{n}")
@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_op_matches_onnxruntime(case, n):
    name, templates, onnx_op, attrs, opset, build = case
    dtypes = ["float32"] * len(templates)
    arrays = random_inputs(templates, dtypes, {"n": n}, seed=zlib.crc32(name.encode()))
    expected = run_node(onnx_op, arrays, attrs, opset=opset)
    ours = run_ours(templates, dtypes, build, arrays)
    assert ours.shape == expected.shape and ours.dtype == expected.dtype
    np.testing.assert_allclose(ours, expected, rtol=1e-5, atol=2e-6)


# ------------------------------------------------------------- type rules

def T(*shape):
    return Var("t", TensorType(shape, "float32"))


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_symbolic_depth_matches_real_depth(case):
    """With a symbolic depth, the output depth is an expression that
    evaluates to what ONNX Runtime produces."""
    _, templates, onnx_op, attrs, opset, build = case
    d = SizeVar("d")
    x, *rest = templates
    out = build(T(2, x[1], d, *x[3:]), *(T(*w) for w in rest)).type.shape
    assert not out[2].is_const and out[0] == 2
    for dv in (x[2], x[2] + 1, x[2] + 4):
        arrays = random_inputs([(2, *x[1:2], dv, *x[3:]), *rest], ["float32"] * len(templates), {}, seed=0)
        real = run_node(onnx_op, arrays, attrs, opset=opset).shape
        assert tuple(evaluate(e, {d: dv}) for e in out) == real


@pytest.mark.parametrize("build,message", [
    (lambda n: op.conv3d(T(n, 3, 4, 4, 4), T(2, 3, 3, 3)),
     r"conv3d: input must be NCDHW \(rank 5\) and weight OIDHW \(rank 5\), got ranks 5 and 4"),
    (lambda n: op.conv3d(T(n, 4, 4, 4, 4), T(2, 3, 3, 3, 3)), r"conv3d: input channels differ"),
    (lambda n: op.conv3d(T(n, 4, 4, 4, 4), T(2, 4, 3, 3, 3), padding=(1, 1, 1, 1)),
     r"padding \(front, top, left, back, bottom, right\) must be 6 integers"),
    (lambda n: op.conv3d_transpose(T(n, 2, 1, 4, 4), T(2, 3, 1, 3, 3), padding=(1, 0, 0, 1, 0, 0)),
     r"conv3d_transpose.*output depth -1 is not positive"),
    (lambda n: op.conv3d_transpose(T(n, 2, 4, 4, 4), T(2, 3, 3, 3, 3), strides=(2, 2, 2),
                                   output_padding=(0, 0, 2)),
     r"output_padding \(0, 0, 2\) must be non-negative and below"),
    (lambda n: op.max_pool3d(T(n, 3, 4, 4), (2, 2, 2)), r"max_pool3d: input must be NCDHW \(rank 5\)"),
    (lambda n: op.avg_pool3d(T(n, 3, 4, 4, 4), (2, 2)), r"kernel_size must be 3 integers"),
])
def test_bad_arguments_are_rejected(build, message):
    with pytest.raises(TypeInferenceError, match=message):
        build(SizeVar("n"))
