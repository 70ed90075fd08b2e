"""ONNX DepthToSpace (DCR and CRD), SpaceToDepth and EyeLike: the ONNX backend
node cases that use them; one-node models over a symbolic batch dim `n` (and
symbolic spatial dims where the blocksize does not divide them), imported and
interpreted at several sizes and compiled on the host with the C and LLVM
backends, against ONNX Runtime (numpy from the spec where ONNX Runtime lacks
the form); bad attributes rejected with the node named."""

import functools
import zlib
from dataclasses import dataclass, field

import numpy as np
import pytest
from onnx import TensorProto

import relax_edge as rxe
from relax_edge.frontend.onnx import node_tests
from relax_edge.frontend.onnx.context import ONNX_DTYPES
from tests.frontend.one_node import assert_matches, check_compiled, check_interpreted, one_node_model, reference_outputs

OPS = frozenset({"DepthToSpace", "SpaceToDepth", "EyeLike"})
PREFIXES = ("test_depthtospace", "test_spacetodepth", "test_eyelike")


def _supported(case) -> bool:
    graph = case.model.graph
    return case.name.startswith(PREFIXES) and all(
        v.type.tensor_type.elem_type in ONNX_DTYPES for v in list(graph.input) + list(graph.output))


NODE_CASES = [c for c in node_tests.collect_cases() if _supported(c)]


def test_every_operator_has_node_cases():
    names = {c.name for c in NODE_CASES}
    for prefix in ("test_depthtospace_crd", "test_depthtospace_example", "test_spacetodepth_crd",
                   "test_spacetodepth_example", "test_eyelike_populate_off_main_diagonal"):
        assert any(n.startswith(prefix) for n in names), prefix


@pytest.mark.parametrize("case", NODE_CASES, ids=[c.name for c in NODE_CASES])
def test_node_case(case):
    from relax_edge.frontend.onnx import convert  # noqa: F401  (registers the converters: the scope)
    result = node_tests.run_case(case)
    assert result.status == "pass", (result.status, result.detail)


# ------------------------------------------------ numpy references written from the ONNX spec

def depth_to_space_reference(x, blocksize, mode="DCR"):
    n, c, h, w = x.shape
    b = blocksize
    if mode == "DCR":
        t = x.reshape(n, b, b, c // (b * b), h, w).transpose(0, 3, 4, 1, 5, 2)
    else:
        t = x.reshape(n, c // (b * b), b, b, h, w).transpose(0, 1, 4, 2, 5, 3)
    return t.reshape(n, c // (b * b), h * b, w * b)


def space_to_depth_reference(x, blocksize, mode="DCR"):
    n, c, h, w = x.shape
    b = blocksize
    t = x.reshape(n, c, h // b, b, w // b, b)
    t = t.transpose(0, 3, 5, 1, 2, 4) if mode == "DCR" else t.transpose(0, 1, 3, 5, 2, 4)
    return t.reshape(n, c * b * b, h // b, w // b)


def test_references_agree_with_a_hand_worked_example():
    """The DepthToSpace example of the ONNX operator docs (DCR and CRD), and
    SpaceToDepth (DCR) undoing DepthToSpace (DCR)."""
    x = np.arange(48, dtype=np.float32).reshape(1, 8, 2, 3)
    dcr = depth_to_space_reference(x, 2)
    assert dcr[0, 0, 0].tolist() == [0, 12, 1, 13, 2, 14]
    assert dcr[0, 0, 1].tolist() == [24, 36, 25, 37, 26, 38]
    crd = depth_to_space_reference(x, 2, "CRD")
    assert crd[0, 0, 0].tolist() == [0, 6, 1, 7, 2, 8]
    assert crd[0, 0, 1].tolist() == [12, 18, 13, 19, 14, 20]
    np.testing.assert_array_equal(space_to_depth_reference(dcr, 2), x)


def eye_like_reference(x, k=0, dtype=None):
    out = np.eye(x.shape[0], x.shape[1], k)
    return out.astype(ONNX_DTYPES[dtype] if dtype is not None else x.dtype)


# ------------------------------------------------ one-node models over symbolic dims

BATCH = [1, 2, 5]
_TYPES = {"float32": TensorProto.FLOAT, "int32": TensorProto.INT32, "int64": TensorProto.INT64,
          "uint8": TensorProto.UINT8, "bool": TensorProto.BOOL}


@dataclass
class Case:
    name: str
    op_type: str
    shape: tuple                  # "n" is the symbolic batch (or row) dim
    attrs: dict = field(default_factory=dict)
    opset: int = 13
    dtype: str = "float32"
    ort: bool = True              # False: the numpy reference gives the expected values
    reference: object = None


def _model(case: Case):
    return one_node_model(case.op_type, [("x", _TYPES[case.dtype], case.shape)], opset=case.opset, attrs=case.attrs,
                          graph_name=case.name)


def _array(case: Case, n: int):
    rng = np.random.default_rng(zlib.crc32(case.name.encode()) + n)
    shape = tuple(n if d == "n" else d for d in case.shape)
    if case.dtype == "float32":
        return rng.standard_normal(shape).astype(np.float32)
    if case.dtype == "bool":
        return rng.random(shape) > 0.5
    return rng.integers(0, 100, shape).astype(case.dtype)


def _expected(case: Case, model, x):
    if not case.ort:
        return case.reference(x, **case.attrs)
    return reference_outputs(model, {"x": x})[0]


CASES = [
    Case("d2s_opset1", "DepthToSpace", ("n", 4, 2, 3), {"blocksize": 2}, 1),
    Case("d2s_dcr_opset11", "DepthToSpace", ("n", 8, 3, 2), {"blocksize": 2, "mode": "DCR"}, 11),
    Case("d2s_crd_opset11", "DepthToSpace", ("n", 8, 3, 2), {"blocksize": 2, "mode": "CRD"}, 11),
    Case("d2s_default_opset13", "DepthToSpace", ("n", 18, 2, 2), {"blocksize": 3}, 13),
    Case("d2s_crd_b3", "DepthToSpace", ("n", 18, 4, 1), {"blocksize": 3, "mode": "CRD"}, 13),
    # ONNX Runtime has no integer or bool DepthToSpace / SpaceToDepth, nor a uint8 EyeLike: numpy gives those
    Case("d2s_crd_int32", "DepthToSpace", ("n", 12, 2, 3), {"blocksize": 2, "mode": "CRD"}, 13, "int32", ort=False,
         reference=depth_to_space_reference),
    Case("d2s_dcr_symbolic_hw", "DepthToSpace", ("n", 8, "h", "w"), {"blocksize": 2}, 13),
    Case("d2s_blocksize1", "DepthToSpace", ("n", 3, 2, 2), {"blocksize": 1, "mode": "CRD"}, 13),
    Case("s2d_opset1", "SpaceToDepth", ("n", 1, 4, 6), {"blocksize": 2}, 1),
    Case("s2d_opset13", "SpaceToDepth", ("n", 3, 6, 3), {"blocksize": 3}, 13),
    Case("s2d_int64", "SpaceToDepth", ("n", 2, 4, 4), {"blocksize": 2}, 13, "int64", ort=False,
         reference=space_to_depth_reference),
    Case("s2d_bool_b4", "SpaceToDepth", ("n", 2, 4, 8), {"blocksize": 4}, 13, "bool", ort=False,
         reference=space_to_depth_reference),
    # the mode attribute of SpaceToDepth-28 (ONNX Runtime stops before opset 28)
    Case("s2d_crd_opset28", "SpaceToDepth", ("n", 3, 4, 6), {"blocksize": 2, "mode": "CRD"}, 28, ort=False,
         reference=space_to_depth_reference),
    Case("s2d_dcr_opset28", "SpaceToDepth", ("n", 2, 6, 4), {"blocksize": 2, "mode": "DCR"}, 28, ort=False,
         reference=space_to_depth_reference),
    Case("d2s_crd_opset28", "DepthToSpace", ("n", 8, 2, 3), {"blocksize": 2, "mode": "CRD"}, 28, ort=False,
         reference=depth_to_space_reference),
    Case("eye_square", "EyeLike", ("n", "n"), {}, 9),
    Case("eye_k1_float", "EyeLike", ("n", 5), {"k": 1}, 9),
    Case("eye_k_neg2_int", "EyeLike", ("n", 4), {"k": -2}, 9, "int32"),
    Case("eye_dtype_int64", "EyeLike", (4, "n"), {"dtype": TensorProto.INT64, "k": 2}, 9),
    Case("eye_dtype_float_from_int", "EyeLike", ("n", 3), {"dtype": TensorProto.FLOAT, "k": -1}, 22, "int32"),
    Case("eye_dtype_bool", "EyeLike", ("n", 6), {"dtype": TensorProto.BOOL}, 9, ort=False,
         reference=eye_like_reference),
    Case("eye_k_beyond", "EyeLike", ("n", 3), {"k": 7}, 9),
    Case("eye_static", "EyeLike", (3, 4), {"k": 1}, 9),  # a static shape: the result is a constant
    Case("eye_uint8", "EyeLike", ("n", 2), {"k": 0}, 9, "uint8", ort=False, reference=eye_like_reference),
]


def _concrete(case: Case, n: int) -> Case:
    """The case with its symbolic h, w (DepthToSpace takes any) given sizes that vary with n."""
    if "h" not in case.shape:
        return case
    shape = tuple({"h": n + 1, "w": 2 * n}.get(d, d) if isinstance(d, str) and d != "n" else d
                  for d in case.shape)
    return Case(case.name, case.op_type, shape, case.attrs, case.opset, case.dtype, case.ort, case.reference)


def _check(actual, expected):
    assert_matches(actual, expected)


def test_references_agree_with_onnx_runtime():
    """The numpy references give ONNX Runtime's numbers where it runs the form."""
    for case in CASES:
        if not case.ort:
            continue
        for n in BATCH:
            c = _concrete(case, n)
            x = _array(c, n)
            if case.op_type == "EyeLike":
                want = eye_like_reference(x, **case.attrs)
            elif case.op_type == "DepthToSpace":
                want = depth_to_space_reference(x, **case.attrs)
            else:
                want = space_to_depth_reference(x, **case.attrs)
            _check(want, _expected(case, _model(c), x))


def _example(case: Case, n: int):
    """The input at size n, and the expected output (of the case with its symbolic h, w sized for n)."""
    sized = _concrete(case, n)
    x = _array(sized, n)
    return [x], [_expected(case, _model(sized), x)]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_interpreted_matches_reference(case):
    check_interpreted(_model(case), BATCH, functools.partial(_example, case), _check)


COMPILED = [c for c in CASES if c.name in {
    "d2s_dcr_opset11", "d2s_crd_opset11", "d2s_crd_int32", "d2s_dcr_symbolic_hw", "s2d_opset13", "s2d_int64",
    "s2d_crd_opset28", "eye_square", "eye_k1_float", "eye_k_neg2_int", "eye_dtype_float_from_int", "eye_dtype_bool",
    "eye_static"}]


@pytest.mark.parametrize("backend", ["c", "llvm"])
@pytest.mark.parametrize("case", COMPILED, ids=[c.name for c in COMPILED])
def test_compiled_matches_reference(case, backend, tmp_path):
    check_compiled(_model(case), backend, tmp_path, BATCH, functools.partial(_example, case), _check)


# ------------------------------------------------------------------------ bad input

def _bad(op_type, shape, attrs, opset=13, dtype=TensorProto.FLOAT):
    return one_node_model(op_type, [("x", dtype, shape)], opset=opset, attrs=attrs, graph_name="bad", node_name="bad")


@pytest.mark.parametrize("model,message", [
    (_bad("DepthToSpace", ("n", 6, 2, 2), {"blocksize": 2}),
     r"bad \(DepthToSpace\).*blocksize 2 does not divide dim 1 of size 6 \(needs a multiple of 4\)"),
    (_bad("DepthToSpace", ("n", 8, 2, 2), {"blocksize": 2, "mode": "RDC"}),
     r"bad \(DepthToSpace\).*mode 'RDC' is not supported \(DCR or CRD\)"),
    (_bad("DepthToSpace", ("n", "c", 2, 2), {"blocksize": 2}), r"bad \(DepthToSpace\).*dim 1 \(c\) must be static"),
    (_bad("DepthToSpace", ("n", 8, 2), {"blocksize": 2}), r"bad \(DepthToSpace\).*must have rank 4"),
    (_bad("DepthToSpace", ("n", 8, 2, 2), {"blocksize": 0}), r"bad \(DepthToSpace\).*blocksize must be positive"),
    (_bad("DepthToSpace", ("n", 8, 2, 2), {}), r"bad \(DepthToSpace\).*required attribute blocksize is missing"),
    (_bad("SpaceToDepth", ("n", 2, 4, 5), {"blocksize": 2}),
     r"bad \(SpaceToDepth\).*blocksize 2 does not divide dim 3 of size 5"),
    (_bad("SpaceToDepth", ("n", 2, "h", 4), {"blocksize": 2}), r"bad \(SpaceToDepth\).*dim 2 \(h\) must be static"),
    (_bad("SpaceToDepth", ("n", 2, 4, 4), {"blocksize": 2, "mode": "dcr"}, 28),
     r"bad \(SpaceToDepth\).*mode 'dcr' is not supported"),
    (_bad("SpaceToDepth", ("n", 2, 4, 4), {"blocksize": 2, "mode": "CRD"}, 13),
     r"bad \(SpaceToDepth\).*SpaceToDepth-13 has no attribute mode"),
    (_bad("EyeLike", ("n", 3, 3), {}), r"bad \(EyeLike\).*must have rank 2, got rank 3"),
    (_bad("EyeLike", ("n", 3), {"dtype": TensorProto.STRING}),
     r"bad \(EyeLike\).*attribute dtype: element type string is not supported"),
    (_bad("EyeLike", ("n", 3), {"k": 1.5}), r"bad \(EyeLike\).*attribute k must be int"),
])
def test_bad_input_names_the_node(model, message):
    with pytest.raises(rxe.frontend.OnnxImportError, match=message):
        rxe.from_onnx(model)


def test_space_ops_are_registered_with_the_importer():
    from relax_edge.frontend.onnx import convert  # noqa: F401  (registers the converters)
    from relax_edge.frontend.onnx.context import CONVERTERS
    assert OPS <= set(CONVERTERS)
