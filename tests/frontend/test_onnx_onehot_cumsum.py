"""ONNX OneHot (opsets 9, 11) and CumSum (opsets 11, 14): the ONNX backend
node cases; one-node models over a symbolic dim `n`, imported and interpreted
at several sizes and compiled on the host with the C and LLVM backends,
against ONNX Runtime (onnx.reference where ONNX Runtime lacks the type
combination); bad input rejected with the node named."""

import functools
import zlib
from dataclasses import dataclass, field

import numpy as np
import pytest
from onnx import TensorProto, numpy_helper

import relax_edge as rxe
from relax_edge.frontend.onnx import node_tests
from tests.frontend.one_node import assert_matches, check_compiled, check_interpreted, one_node_model, reference_outputs

_TYPES = {"float32": TensorProto.FLOAT, "int32": TensorProto.INT32, "int64": TensorProto.INT64}
NODE_CASES = [c for c in node_tests.collect_cases() if c.name.startswith(("test_onehot_", "test_cumsum_"))
              and all(v.type.tensor_type.elem_type in _TYPES.values()
                      for v in list(c.model.graph.input) + list(c.model.graph.output))]


def test_node_cases_are_collected():
    names = {c.name for c in NODE_CASES}
    assert any(n.startswith("test_onehot_") for n in names) and any(n.startswith("test_cumsum_") for n in names)


@pytest.mark.parametrize("case", NODE_CASES, ids=[c.name for c in NODE_CASES])
def test_node_case(case):
    from relax_edge.frontend.onnx import convert  # noqa: F401  (registers the converters)
    result = node_tests.run_case(case)
    assert result.status == "pass", (result.status, result.detail)


# ------------------------------------------------ one-node models over a symbolic dim

SIZES = [1, 3, 6]


@dataclass
class Case:
    name: str
    op_type: str
    shape: tuple                  # the data / indices shape; "n" is symbolic
    dtype: str                    # data (CumSum) or indices (OneHot) dtype
    attrs: dict = field(default_factory=dict)
    opset: int = 14
    axis: int = 0                 # CumSum's axis input
    depth: object = 4             # OneHot's depth input (its dtype follows the value)
    values: tuple = (0.0, 1.0)    # OneHot's [off, on]
    values_dtype: str = "float32"
    values_input: bool = False    # OneHot's values as a graph input rather than an initializer
    ort: bool = True


def _model(case: Case):
    inputs = [("x", _TYPES[case.dtype], case.shape)]
    inits = []
    if case.op_type == "CumSum":
        names = ["x", "axis"]
        inits.append(numpy_helper.from_array(np.array(case.axis, np.int64), "axis"))
    else:
        names = ["x", "depth", "values"]
        depth_dtype = np.float32 if isinstance(case.depth, float) else np.int64
        inits.append(numpy_helper.from_array(np.array(case.depth, depth_dtype), "depth"))
        values = np.array(case.values, case.values_dtype)
        if case.values_input:
            inputs.append(("values", _TYPES[case.values_dtype], [2]))
        else:
            inits.append(numpy_helper.from_array(values, "values"))
    return one_node_model(case.op_type, inputs, opset=case.opset, node_inputs=names, attrs=case.attrs,
                          initializers=inits, graph_name=case.name)


def _arrays(case: Case, n: int):
    rng = np.random.default_rng(zlib.crc32(case.name.encode()) + n)
    shape = tuple(n if d == "n" else d for d in case.shape)
    if case.op_type == "OneHot":  # negative, in range and out of range
        depth = int(np.reshape(case.depth, -1)[0])
        x = rng.integers(-depth - 2, depth + 2, shape).astype(case.dtype)
    elif case.dtype == "float32":
        x = rng.standard_normal(shape).astype(case.dtype)
    else:
        x = rng.integers(-50, 50, shape).astype(case.dtype)
    out = [x]
    if case.values_input:
        out.append(np.array(case.values, case.values_dtype))
    return out


def _expected(case: Case, model, arrays):
    """ONNX Runtime's output, or onnx.reference's where ONNX Runtime lacks the type combination."""
    return reference_outputs(model, dict(zip(["x", "values"], arrays)), case.ort)[0]


def _example(case: Case, model, n: int):
    """The inputs at size n and the expected outputs."""
    arrays = _arrays(case, n)
    return arrays, [_expected(case, model, arrays)]


CASES = [
    Case("onehot_last_axis", "OneHot", ("n", 3), "int64", opset=11),
    Case("onehot_axis0", "OneHot", ("n", 2), "int64", {"axis": 0}, opset=11, depth=5, values=(-1.0, 3.5)),
    Case("onehot_axis1_rank3", "OneHot", (2, "n", 3), "int64", {"axis": 1}, opset=11, depth=3),
    Case("onehot_negative_axis", "OneHot", ("n", 4), "int32", {"axis": -2}, opset=11, depth=6, ort=False),
    Case("onehot_float_indices", "OneHot", ("n",), "float32", opset=9, depth=7.0, values=(2.0, 9.0),
         ort=False),
    Case("onehot_int_values", "OneHot", ("n", 2), "int64", opset=11, depth=3, values=(1, 5),
         values_dtype="int64", ort=False),
    Case("onehot_depth_vector", "OneHot", ("n", 2), "int64", opset=11, depth=[3]),
    Case("onehot_values_input", "OneHot", ("n", 3), "int64", opset=11, values=(0.5, -2.0), values_input=True),
    Case("cumsum_axis0", "CumSum", ("n", 3), "float32", axis=0),
    Case("cumsum_last_exclusive", "CumSum", (2, "n"), "float32", {"exclusive": 1}, axis=-1),
    Case("cumsum_reverse", "CumSum", ("n", 4), "float32", {"reverse": 1}, axis=1),
    Case("cumsum_reverse_exclusive", "CumSum", (3, "n", 2), "float32", {"reverse": 1, "exclusive": 1}, axis=1),
    Case("cumsum_int32", "CumSum", ("n", 5), "int32", axis=1, opset=11),
    Case("cumsum_int64_reverse", "CumSum", ("n",), "int64", {"reverse": 1}, axis=0),
    Case("cumsum_int64_exclusive_opset11", "CumSum", ("n", 3), "int64", {"exclusive": 1}, axis=0, opset=11),
]


def _check(actual, expected):
    assert_matches(actual, expected, tol=1e-5)


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_interpreted_matches_reference(case):
    model = _model(case)
    check_interpreted(model, SIZES, functools.partial(_example, case, model), _check)


@pytest.mark.parametrize("backend", ["c", "llvm"])
@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_compiled_matches_reference(case, backend, tmp_path):
    model = _model(case)
    check_compiled(model, backend, tmp_path, SIZES, functools.partial(_example, case, model), _check)


# ------------------------------------------------------------------------ bad input

def _bad(op_type, shape, attrs, consts, dtype=TensorProto.FLOAT, opset=14):
    inits = [numpy_helper.from_array(np.asarray(v), f"c{i}") for i, v in enumerate(consts)]
    return one_node_model(op_type, [("x", dtype, shape)], opset=opset, attrs=attrs, initializers=inits,
                          graph_name="bad", node_name="bad")


@pytest.mark.parametrize("model,message", [
    (_bad("CumSum", ("n", 3), {}, [np.array(2, np.int64)]), r"bad \(CumSum\).*axis 2 is out of range for rank 2"),
    (_bad("CumSum", ("n", 3), {"exclusive": 2}, [np.array(0, np.int64)]),
     r"bad \(CumSum\).*exclusive must be 0 or 1"),
    (_bad("CumSum", ("n", 3), {}, [np.array(0.0, np.float32)]), r"bad \(CumSum\).*axis\) must be an integer"),
    (_bad("CumSum", ("n",), {}, [np.array(0, np.int64)], TensorProto.BOOL), r"bad \(CumSum\).*bool is not supported"),
    (_bad("OneHot", ("n",), {}, [np.array([0], np.int64), np.array([0.0, 1.0], np.float32)], TensorProto.INT64, 11),
     r"bad \(OneHot\).*depth must be positive"),
    (_bad("OneHot", ("n",), {"axis": 2}, [np.array([3], np.int64), np.array([0.0, 1.0], np.float32)],
          TensorProto.INT64, 11), r"bad \(OneHot\).*axis 2 is out of range for rank 1"),
    (_bad("OneHot", ("n",), {}, [np.array([3], np.int64), np.array([0.0, 1.0, 2.0], np.float32)],
          TensorProto.INT64, 11), r"bad \(OneHot\).*values must be a 1-D tensor \[off_value, on_value\]"),
])
def test_bad_input_names_the_node(model, message):
    with pytest.raises(rxe.frontend.OnnxImportError, match=message):
        rxe.from_onnx(model)
