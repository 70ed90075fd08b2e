"""The elementwise ONNX operators added for models (activations,
trigonometry, Sign, Round, IsNaN, IsInf, PRelu, Mod, Hardmax, bit operations), each imported as a
one-node ONNX model with a symbolic batch dim, interpreted at several sizes
and compared with ONNX Runtime (onnx.reference where ONNX Runtime lacks the
opset); and the import errors for bad attributes."""

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

import relax_edge as rxe
from relax_edge.frontend import OnnxImportError

_TYPES = {np.dtype("float32"): TensorProto.FLOAT, np.dtype("int32"): TensorProto.INT32,
          np.dtype("int64"): TensorProto.INT64, np.dtype("bool"): TensorProto.BOOL,
          np.dtype("int8"): TensorProto.INT8, np.dtype("uint8"): TensorProto.UINT8}
SIZES = (1, 3, 7)


def one_node_model(op_type, templates, dtypes, attrs, opset, out_dtype=None):
    """A model of one node whose inputs have the templates' dims ("n" symbolic)."""
    names = [f"x{i}" for i in range(len(templates))]
    infos = [helper.make_tensor_value_info(name, _TYPES[np.dtype(dt)], list(t))
             for name, t, dt in zip(names, templates, dtypes)]
    node = helper.make_node(op_type, names, ["y"], **attrs)
    out = helper.make_tensor_value_info("y", _TYPES[np.dtype(out_dtype or dtypes[0])], None)
    graph = helper.make_graph([node], "one", infos, [out])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 10
    return model


def reference(model, inputs):
    feeds = {f"x{i}": x for i, x in enumerate(inputs)}
    try:
        sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    except Exception:   # an opset or type ONNX Runtime does not implement
        return ReferenceEvaluator(model).run(None, feeds)[0]
    return sess.run(None, feeds)[0]


def _floats(lo, hi):
    return lambda rng, shape: rng.uniform(lo, hi, shape).astype(np.float32)


def _ints(lo, hi, dtype="int32", nonzero=False):
    def draw(rng, shape):
        x = rng.integers(lo, hi, shape).astype(dtype)
        if nonzero:
            x[x == 0] = 3
        return x
    return draw


def _specials(rng, shape):
    x = rng.standard_normal(shape).astype(np.float32)
    flat = x.reshape(-1)
    flat[::3] = np.inf
    flat[1::4] = -np.inf
    flat[2::5] = np.nan
    return x


NORMAL = _floats(-3.0, 3.0)
# (id, ONNX op, attrs, opset, [(input shape after n, draw)], output dtype)
CASES = [
    *[(op.lower(), op, {}, 17, [((5,), NORMAL)], None)
      for op in ("Sin", "Cos", "Atan", "Sinh", "Cosh", "Asinh", "Softplus", "Softsign", "Sign", "Round")],
    *[(op.lower(), op, {}, 17, [((5,), _floats(-0.99, 0.99))], None) for op in ("Asin", "Acos", "Atanh")],
    ("tan", "Tan", {}, 17, [((5,), _floats(-1.4, 1.4))], None),
    ("acosh", "Acosh", {}, 17, [((5,), _floats(1.0, 20.0))], None),
    ("mish", "Mish", {}, 18, [((5,), NORMAL)], None),
    ("sin_opset7", "Sin", {}, 7, [((2, 3), NORMAL)], None),
    ("elu", "Elu", {"alpha": 0.7}, 6, [((4,), NORMAL)], None),
    ("selu", "Selu", {}, 6, [((4,), NORMAL)], None),
    ("celu", "Celu", {"alpha": 1.5}, 12, [((4,), NORMAL)], None),
    ("thresholded_relu", "ThresholdedRelu", {"alpha": 0.4}, 10, [((4,), NORMAL)], None),
    ("shrink", "Shrink", {"bias": 0.3, "lambd": 0.8}, 9, [((4,), NORMAL)], None),
    ("shrink_int", "Shrink", {"bias": 1.0, "lambd": 1.5}, 9, [((4,), _ints(-6, 6))], None),
    ("swish", "Swish", {"alpha": 0.6}, 24, [((4,), NORMAL)], None),
    ("prelu_channel", "PRelu", {}, 16, [((3, 4), NORMAL), ((4,), NORMAL)], None),
    ("prelu_opset7", "PRelu", {}, 7, [((3, 4), NORMAL), ((3, 1), NORMAL)], None),
    ("isnan", "IsNaN", {}, 13, [((6,), _specials)], "bool"),
    ("isinf", "IsInf", {}, 10, [((6,), _specials)], "bool"),
    ("isinf_negative", "IsInf", {"detect_positive": 0}, 10, [((6,), _specials)], "bool"),
    ("isinf_positive", "IsInf", {"detect_negative": 0}, 10, [((6,), _specials)], "bool"),
    ("mod_int", "Mod", {}, 13, [((4,), _ints(-20, 20)), ((4,), _ints(-7, 7, nonzero=True))], None),
    ("mod_int_fmod", "Mod", {"fmod": 1}, 13, [((4,), _ints(-20, 20, "int64")), ((4,), _ints(-7, 7, "int64", True))],
     None),
    ("mod_float_fmod", "Mod", {"fmod": 1}, 10, [((4,), _floats(-9, 9)), ((4,), _floats(0.5, 3))], None),
    ("hardmax", "Hardmax", {}, 13, [((3, 4), NORMAL)], None),
    ("hardmax_axis1", "Hardmax", {"axis": 1}, 13, [((3, 4), NORMAL)], None),
    ("hardmax_ties", "Hardmax", {"axis": 1}, 13, [((3, 4), _ints(0, 2, "float32"))], None),
    ("hardmax_2d_view_opset11", "Hardmax", {"axis": 1}, 11, [((3, 4), NORMAL)], None),
    ("bit_shift_left_uint8", "BitShift", {"direction": "LEFT"}, 11,
     [((4,), _ints(0, 256, "uint8")), ((4,), _ints(0, 8, "uint8"))], None),
    ("bit_shift_right_uint8", "BitShift", {"direction": "RIGHT"}, 11,
     [((4,), _ints(0, 256, "uint8")), ((4,), _ints(0, 8, "uint8"))], None),
    ("bit_shift_right_int32_any_amount", "BitShift", {"direction": "RIGHT"}, 28,
     [((4,), _ints(-1000, 1000)), ((4,), _ints(-3, 40))], None),
    ("bit_shift_left_int64_any_amount", "BitShift", {"direction": "LEFT"}, 28,
     [((4,), _ints(-1000, 1000, "int64")), ((4,), _ints(-3, 70, "int64"))], None),
    ("bitwise_and", "BitwiseAnd", {}, 18, [((4,), _ints(-99, 99)), ((4,), _ints(-99, 99))], None),
    ("bitwise_or", "BitwiseOr", {}, 18, [((4,), _ints(-99, 99, "int64")), ((4,), _ints(-99, 99, "int64"))], None),
    ("bitwise_xor", "BitwiseXor", {}, 18, [((4,), _ints(0, 256, "uint8")), ((4,), _ints(0, 256, "uint8"))], None),
    ("bitwise_not", "BitwiseNot", {}, 18, [((4,), _ints(-128, 128, "int8"))], None),
    ("mod_float_fmod_negative", "Mod", {"fmod": 1}, 10, [((4,), _floats(-9, 9)), ((4,), _floats(-3, -0.5))], None),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_imported_op_matches_reference(case):
    name, op_type, attrs, opset, specs, out_dtype = case
    rng = np.random.default_rng(len(name))
    templates = [("n", *shape) if i == 0 or len(shape) > 1 else shape for i, (shape, _) in enumerate(specs)]
    dtypes = [draw(rng, (1,)).dtype for _, draw in specs]
    model = one_node_model(op_type, templates, dtypes, attrs, opset, out_dtype)
    mod = rxe.from_onnx(model)
    for n in SIZES:
        inputs = [draw(rng, tuple(n if d == "n" else d for d in t)) for t, (_, draw) in zip(templates, specs)]
        expected = reference(model, inputs)
        ours = rxe.interpret(mod, *inputs)
        assert ours.shape == expected.shape and ours.dtype == expected.dtype
        np.testing.assert_allclose(ours, expected, rtol=2e-6, atol=1e-6)


def test_mod_of_constant_nodes_is_folded_at_import():
    """ViT exports take Mod of two Constant nodes: the importer folds it."""
    consts = [helper.make_node("Constant", [], [name], value=onnx.numpy_helper.from_array(np.array(v, np.int64)))
              for name, v in (("a", [7, -7, 9]), ("b", [3, 3, -4]))]
    mod_node = helper.make_node("Mod", ["a", "b"], ["m"])
    add = helper.make_node("Add", ["x", "m"], ["y"])
    graph = helper.make_graph([*consts, mod_node, add], "vit_mod",
                              [helper.make_tensor_value_info("x", TensorProto.INT64, ["n", 3])],
                              [helper.make_tensor_value_info("y", TensorProto.INT64, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    x = np.arange(6, dtype=np.int64).reshape(2, 3)
    np.testing.assert_array_equal(rxe.interpret(rxe.from_onnx(model), x), x + np.mod([7, -7, 9], [3, 3, -4]))


@pytest.mark.parametrize("op_type, attrs, message", [
    ("Mod", {"fmod": 2}, r"node n \(Mod\): attribute fmod must be 0 or 1, got 2"),
    ("Celu", {"alpha": 0.0}, r"node n \(Celu\): attribute alpha must not be 0"),
    ("Elu", {"alpha": "x"}, r"node n \(Elu\): attribute alpha must be float"),
    ("BitShift", {"direction": "UP"}, r"node n \(BitShift\): attribute direction must be 'LEFT' or 'RIGHT'"),
])
def test_bad_attribute_is_an_error_naming_the_node(op_type, attrs, message):
    inputs = ["x", "x"] if op_type in ("Mod", "BitShift") else ["x"]
    graph = helper.make_graph([helper.make_node(op_type, inputs, ["y"], name="n", **attrs)], "bad",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 3])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    with pytest.raises(OnnxImportError, match=message):
        rxe.from_onnx(model)


def test_sign_of_a_bool_tensor_is_an_error_naming_the_node():
    graph = helper.make_graph([helper.make_node("Sign", ["x"], ["y"], name="s")], "bad",
                              [helper.make_tensor_value_info("x", TensorProto.BOOL, ["n"])],
                              [helper.make_tensor_value_info("y", TensorProto.BOOL, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    with pytest.raises(OnnxImportError, match=r"node s \(Sign\)"):
        rxe.from_onnx(model)
