"""Every M1 operator, built over symbolic dims and interpreted at several
sizes, against ONNX Runtime running the equivalent ONNX node."""

import zlib

import numpy as np
import pytest

import relax_edge as rxe
from relax_edge import op
from relax_edge.ir import Builder, SizeVar, TensorType, Var
from tests.numeric.onnx_reference import run_node

SIZES = [{"n": 1, "m": 1}, {"n": 3, "m": 5}, {"n": 8, "m": 2}]


def run_ours(template_shapes, dtypes, build, arrays):
    """Build a one-op module whose inputs have the template's symbolic dims,
    then interpret it on `arrays`."""
    size_vars = {}

    def dim(d):
        if isinstance(d, str):
            return size_vars.setdefault(d, SizeVar(d))
        return d

    params = [Var(f"x{i}", TensorType([dim(d) for d in shape], dt))
              for i, (shape, dt) in enumerate(zip(template_shapes, dtypes))]
    bb = Builder()
    with bb.function("main", params):
        bb.ret(bb.emit(build(*params)))
    return rxe.interpret(bb.get(), *arrays)


def concrete(template, sizes):
    return tuple(sizes[d] if isinstance(d, str) else d for d in template)


def random_inputs(templates, dtypes, sizes, seed):
    rng = np.random.default_rng(seed)
    out = []
    for t, dt in zip(templates, dtypes):
        shape = concrete(t, sizes)
        if dt == "float32":
            out.append(rng.standard_normal(shape).astype(dt))
        else:
            out.append(rng.integers(-20, 20, shape).astype(dt))
    return out


# (id, input templates, dtypes, ONNX op, ONNX attrs, ONNX constant inputs, our builder)
CASES = [
    ("add_broadcast", [("n", 1, 4), ("m", 4)], None, "Add", {}, [], op.add),
    ("sub_broadcast", [(1, "m"), ("n", 1)], None, "Sub", {}, [], op.subtract),
    ("mul_scalar_row", [("n", 6), (6,)], None, "Mul", {}, [], op.multiply),
    ("div_float", [("n", 5), ("n", 5)], None, "Div", {}, [], op.divide),
    ("div_int_truncates", [("n", 5), ("n", 5)], ["int32", "int32"], "Div", {}, [], op.divide),
    ("relu", [("n", 7)], None, "Relu", {}, [], op.relu),
    ("sigmoid", [("n", 7)], None, "Sigmoid", {}, [], op.sigmoid),
    ("tanh", [("n", 7)], None, "Tanh", {}, [], op.tanh),
    ("exp", [("n", 7)], None, "Exp", {}, [], op.exp),
    ("matmul_2d", [("n", 9), (9, "m")], None, "MatMul", {}, [], op.matmul),
    ("matmul_batched", [("n", 1, 3, 4), (2, 4, "m")], None, "MatMul", {}, [], op.matmul),
    ("matmul_vector", [("n", 4), (4,)], None, "MatMul", {}, [], op.matmul),
    ("transpose", [("n", 3, "m")], None, "Transpose", {"perm": [2, 0, 1]}, [],
     lambda x: op.transpose(x, (2, 0, 1))),
    ("concat", [("n", 3), ("m", 3)], None, "Concat", {"axis": 0}, [],
     lambda a, b: op.concat([a, b], axis=0)),
    ("softmax_axis0", [("n", "m")], None, "Softmax", {"axis": 0}, [], lambda x: op.softmax(x, axis=0)),
    ("softmax_last", [("n", 3, 6)], None, "Softmax", {"axis": -1}, [], op.softmax),
    ("sum_axis", [("n", 3, "m")], None, "ReduceSum", {"keepdims": 0}, [np.array([1], np.int64)],
     lambda x: op.sum(x, axis=1)),
    ("sum_keepdims", [("n", 3, "m")], None, "ReduceSum", {"keepdims": 1}, [np.array([0, 2], np.int64)],
     lambda x: op.sum(x, axis=(0, 2), keepdims=True)),
    ("mean", [("n", 4, 5)], None, "ReduceMean", {"axes": [2], "keepdims": 0}, [],
     lambda x: op.mean(x, axis=2)),
    ("conv_stride_pad", [("n", 3, 9, 8), (4, 3, 3, 3)], None, "Conv",
     {"strides": [2, 2], "pads": [1, 0, 2, 1]}, [],
     lambda x, w: op.conv2d(x, w, strides=(2, 2), padding=(1, 0, 2, 1))),
    ("conv_dilated", [("n", 2, 10, 10), (3, 2, 3, 3)], None, "Conv", {"dilations": [2, 2]}, [],
     lambda x, w: op.conv2d(x, w, dilation=(2, 2))),
    ("conv_grouped", [("n", 6, 7, 7), (4, 3, 3, 3)], None, "Conv", {"group": 2, "pads": [1, 1, 1, 1]}, [],
     lambda x, w: op.conv2d(x, w, padding=(1, 1, 1, 1), groups=2)),
    ("conv_depthwise", [("n", 5, 6, 6), (5, 1, 3, 3)], None, "Conv", {"group": 5, "strides": [2, 2]}, [],
     lambda x, w: op.conv2d(x, w, strides=(2, 2), groups=5)),
    ("maxpool", [("n", 2, 9, 9)], None, "MaxPool", {"kernel_shape": [3, 3], "strides": [2, 2],
                                                    "pads": [1, 1, 1, 1]}, [],
     lambda x: op.max_pool2d(x, (3, 3), (2, 2), padding=(1, 1, 1, 1))),
    ("maxpool_ceil", [("n", 2, 8, 8)], None, "MaxPool", {"kernel_shape": [3, 3], "strides": [2, 2],
                                                         "ceil_mode": 1}, [],
     lambda x: op.max_pool2d(x, (3, 3), (2, 2), ceil_mode=True)),
    ("maxpool_dilated", [("n", 1, 9, 9)], None, "MaxPool", {"kernel_shape": [2, 2], "dilations": [2, 2]}, [],
     lambda x: op.max_pool2d(x, (2, 2), (1, 1), dilation=(2, 2))),
    ("avgpool_exclude_pad", [("n", 2, 7, 7)], None, "AveragePool",
     {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}, [],
     lambda x: op.avg_pool2d(x, (3, 3), (2, 2), padding=(1, 1, 1, 1))),
    ("avgpool_include_pad", [("n", 2, 7, 7)], None, "AveragePool",
     {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1], "count_include_pad": 1}, [],
     lambda x: op.avg_pool2d(x, (3, 3), (2, 2), padding=(1, 1, 1, 1), count_include_pad=True)),
    ("avgpool_ceil", [("n", 1, 8, 8)], None, "AveragePool",
     {"kernel_shape": [3, 3], "strides": [2, 2], "ceil_mode": 1}, [],
     lambda x: op.avg_pool2d(x, (3, 3), (2, 2), ceil_mode=True)),
]


@pytest.mark.parametrize("sizes", SIZES, ids=lambda s: "n{n}_m{m}".format(**s))
@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_op_matches_onnxruntime(case, sizes):
    name, templates, dtypes, onnx_op, attrs, constants, build = case
    dtypes = dtypes or ["float32"] * len(templates)
    arrays = random_inputs(templates, dtypes, sizes, seed=zlib.crc32(name.encode()))
    if onnx_op == "Div" and dtypes[0] != "float32":
        arrays[1][arrays[1] == 0] = 3
    expected = run_node(onnx_op, arrays, attrs, constants)
    ours = run_ours(templates, dtypes, build, arrays)
    assert ours.shape == expected.shape and ours.dtype == expected.dtype
    np.testing.assert_allclose(ours, expected, rtol=1e-5, atol=1e-6)


def test_reshape_with_symbolic_target_matches_onnxruntime():
    for nv in (1, 4, 6):
        x = np.random.default_rng(nv).standard_normal((nv, 12, 8)).astype(np.float32)
        expected = run_node("Reshape", [x], {}, [np.array([nv, -1, 4], np.int64)])
        n = SizeVar("n")
        ours = run_ours([(n, 12, 8)], ["float32"], lambda v, n=n: op.reshape(v, (n, -1, 4)), [x])
        np.testing.assert_array_equal(ours, expected)
