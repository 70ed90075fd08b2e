"""The ONNX importer: dynamic dims, shape subgraphs, spans, and bad input."""

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import relax_edge as rxe
from relax_edge.frontend.onnx import OnnxImportError
from relax_edge.ir import Call
from tests.numeric.onnx_reference import run_node  # noqa: F401  (keeps ORT import errors visible)


def make_model(nodes, inputs, outputs, inits=(), opset=17):
    graph = helper.make_graph(nodes, "g", inputs, outputs,
                              initializer=[numpy_helper.from_array(np.asarray(v), k) for k, v in dict(inits).items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return model


def vi(name, shape, dtype=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, dtype, shape)


def ort(model, *inputs):
    import onnxruntime
    sess = onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, {i.name: x for i, x in zip(model.graph.input, inputs)})


def test_named_dims_are_shared_and_bounded():
    model = make_model([helper.make_node("Add", ["a", "b"], ["c"], name="add_ab")],
                       [vi("a", ["batch", 4]), vi("b", ["batch", 4])], [vi("c", ["batch", 4])])
    mod = rxe.from_onnx(model, dim_bounds={"batch": 32})
    main = mod.functions["main"]
    (da, _), (db, _) = (p.type.shape for p in main.params)
    assert da is not None and da == db and da.as_var().upper == 32
    assert "# size batch: 1 <= batch <= 32" in str(mod)
    with pytest.raises(rxe.InterpretError, match="batch = 33 exceeds its upper bound 32"):
        rxe.interpret(mod, np.zeros((33, 4), np.float32), np.zeros((33, 4), np.float32))


def test_unnamed_dims_get_fresh_variables_and_pins_apply():
    model = make_model([helper.make_node("Relu", ["x"], ["y"])], [vi("x", [None, None])], [vi("y", [None, None])])
    mod = rxe.from_onnx(model)
    d0, d1 = mod.functions["main"].params[0].type.shape
    assert d0.as_var() is not None and d1.as_var() is not None and d0 != d1
    pinned = rxe.from_onnx(model, input_shapes={"x": (2, "width")})
    shape = pinned.functions["main"].params[0].type.shape
    assert shape[0] == 2 and shape[1].as_var().name == "width"


def test_shape_subgraph_becomes_symbolic_reshape():
    """Shape -> Gather -> Unsqueeze -> Concat -> Reshape, as exporters write it."""
    nodes = [helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("Gather", ["s", "one"], ["seq"], axis=0),
             helper.make_node("Unsqueeze", ["seq", "zero"], ["seq1"]),
             helper.make_node("Concat", ["batch1", "seq1", "heads", "minus1"], ["target"], axis=0),
             helper.make_node("Reshape", ["x", "target"], ["r"], name="split_heads"),
             helper.make_node("Transpose", ["r"], ["y"], perm=[0, 2, 1, 3])]
    inits = {"one": np.array(1, np.int64), "zero": np.array([0], np.int64), "batch1": np.array([1], np.int64),
             "heads": np.array([4], np.int64), "minus1": np.array([-1], np.int64)}
    model = make_model(nodes, [vi("x", [1, "seq", 32])], [vi("y", None)], inits)
    mod = rxe.from_onnx(model)
    text = str(mod)
    assert 'Tensor((1, seq, 4, 8), "float32") = reshape(x, shape=(1, seq, 4, -1))' in text
    assert '-> Tensor((1, 4, seq, 8), "float32")' in text
    for seq in (1, 9):
        x = np.random.default_rng(seq).standard_normal((1, seq, 32)).astype(np.float32)
        np.testing.assert_array_equal(rxe.interpret(mod, x), ort(model, x)[0])


def test_range_and_constant_of_shape_stay_symbolic():
    nodes = [helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("Gather", ["s", "one"], ["n"], axis=0),
             helper.make_node("Range", ["zero", "n", "step"], ["pos"]),
             helper.make_node("Shape", ["x"], ["s2"]),
             helper.make_node("ConstantOfShape", ["s2"], ["ones"],
                              value=numpy_helper.from_array(np.ones(1, np.float32))),
             helper.make_node("Add", ["x", "ones"], ["y"])]
    inits = {"one": np.array(1, np.int64), "zero": np.array(0, np.int64), "step": np.array(1, np.int64)}
    model = make_model(nodes, [vi("x", [2, "seq"])], [vi("pos", None, TensorProto.INT64), vi("y", None)], inits)
    mod = rxe.from_onnx(model)
    assert "arange(" in str(mod) and "Tensor((seq,), \"int64\")" in str(mod)
    x = np.ones((2, 5), np.float32)
    pos, y = rxe.interpret(mod, x)
    ref_pos, ref_y = ort(model, x)
    np.testing.assert_array_equal(pos, ref_pos)
    np.testing.assert_array_equal(y, ref_y)


def test_node_names_become_spans():
    model = make_model([helper.make_node("Relu", ["x"], ["y"], name="encoder/relu_3")],
                       [vi("x", [2])], [vi("y", [2])])
    mod = rxe.from_onnx(model)
    calls = [b.value for blk in mod.functions["main"].body.blocks for b in blk.bindings if isinstance(b.value, Call)]
    assert [c.span for c in calls] == ["encoder/relu_3"]


# ----------------------------------------------------------------- bad input

def test_truncated_and_non_onnx_files(tmp_path):
    model = make_model([helper.make_node("Relu", ["x"], ["y"])], [vi("x", [2])], [vi("y", [2])],
                       {"w": np.ones((64, 64), np.float32)})
    data = model.SerializeToString()
    truncated = tmp_path / "truncated.onnx"
    truncated.write_bytes(data[: len(data) // 2])
    with pytest.raises(OnnxImportError, match="truncated.onnx: not a readable ONNX model"):
        rxe.from_onnx(str(truncated))
    text = tmp_path / "notes.onnx"
    text.write_text("this is not a model\n" * 20)
    with pytest.raises(OnnxImportError, match="notes.onnx: not a readable ONNX model"):
        rxe.from_onnx(str(text))
    with pytest.raises(OnnxImportError, match="no such file"):
        rxe.from_onnx(str(tmp_path / "absent.onnx"))


def test_unsupported_operators_listed_at_once():
    nodes = [helper.make_node("Bellows", ["x", "k"], ["nz", "ix"]), helper.make_node("FooBar", ["x"], ["a"]),
             helper.make_node("FooBar", ["a"], ["b"]), helper.make_node("Relu", ["b"], ["y"])]
    model = make_model(nodes, [vi("x", [3])], [vi("y", [3]), vi("nz", None, TensorProto.INT64)])
    with pytest.raises(OnnxImportError) as info:
        rxe.from_onnx(model)
    assert str(info.value) == "unsupported ONNX operators: Bellows (1 node), FooBar (2 nodes)"


def test_missing_initializer_names_node_and_input():
    model = make_model([helper.make_node("MatMul", ["x", "weight"], ["y"], name="fc1")],
                       [vi("x", [2, 3])], [vi("y", None)])
    with pytest.raises(OnnxImportError, match=r"node fc1 \(MatMul\): input 'weight' is not produced by any"):
        rxe.from_onnx(model)


def test_attribute_of_the_wrong_type():
    node = helper.make_node("Concat", ["x", "x"], ["y"], name="cat", axis="zero")
    model = make_model([node], [vi("x", [2, 3])], [vi("y", None)])
    with pytest.raises(OnnxImportError, match=r"node cat \(Concat\): attribute axis must be int, got str"):
        rxe.from_onnx(model)


def test_opset_out_of_range():
    """Opset 5 is accepted only for operators unchanged since opset 7 (Relu changed)."""
    model = make_model([helper.make_node("Relu", ["x"], ["y"])], [vi("x", [2])], [vi("y", [2])], opset=5)
    with pytest.raises(OnnxImportError, match="opset 5; relax_edge imports opsets 7 to 28, and older ones only "
                                              "for operators unchanged since; these changed: Relu"):
        rxe.from_onnx(model)


def test_declared_input_shape_contradicts_graph():
    w = np.ones((4, 2, 3, 3), np.float32)
    model = make_model([helper.make_node("Conv", ["x", "w"], ["y"], name="stem_conv")],
                       [vi("x", [1, 3, 8, 8])], [vi("y", None)], {"w": w})
    with pytest.raises(OnnxImportError) as info:
        rxe.from_onnx(model)
    msg = str(info.value)
    assert msg.startswith("node stem_conv (Conv): conv2d")
    assert "input channels differ from weight channels * groups: 3 vs 2" in msg


def test_unsupported_dtype_names_input():
    model = make_model([helper.make_node("Relu", ["x"], ["y"])], [vi("x", [2], TensorProto.COMPLEX64)],
                       [vi("y", [2], TensorProto.COMPLEX64)])
    with pytest.raises(OnnxImportError, match="input x: element type complex64 is not supported"):
        rxe.from_onnx(model)


def test_dim_bounds_for_an_unknown_dim():
    model = make_model([helper.make_node("Relu", ["x"], ["y"])], [vi("x", ["batch"])], [vi("y", None)])
    with pytest.raises(OnnxImportError, match="dim_bounds names seq, which no input dimension uses"):
        rxe.from_onnx(model, dim_bounds={"seq": 128})


def test_runtime_value_in_a_static_slot_is_explained():
    model = make_model([helper.make_node("Expand", ["x", "shape"], ["y"], name="expand_dyn")],
                       [vi("x", [2, 1]), vi("shape", [2], TensorProto.INT64)], [vi("y", None)])
    with pytest.raises(OnnxImportError, match=r"node expand_dyn \(Expand\): input 1 \(shape, 'shape'\) "
                                              "must be known at compile time"):
        rxe.from_onnx(model)
    mod = rxe.from_onnx(model, constant_inputs={"shape": np.array([2, 3], np.int64)})
    assert rxe.interpret(mod, np.ones((2, 1), np.float32)).shape == (2, 3)


def test_data_dependent_shapes_become_match_casts():
    """NonZero and a Reshape whose target is read from a tensor get fresh size
    variables bound at run time; later shapes use them symbolically."""
    nodes = [helper.make_node("NonZero", ["x"], ["nz"], name="find"),
             helper.make_node("Transpose", ["nz"], ["t"]),
             helper.make_node("Reshape", ["y", "shape"], ["r"], name="dyn")]
    model = make_model(nodes, [vi("x", [3, 4]), vi("y", [6]), vi("shape", [2], TensorProto.INT64)],
                       [vi("t", None, TensorProto.INT64), vi("r", None)])
    mod = rxe.from_onnx(model)
    text = str(mod)
    assert 'match_cast(lv0, Tensor((2, find_count1), "int64"))' in text
    assert 'Tensor((find_count1, 2), "int64") = transpose' in text
    assert "match_cast(lv3, Tensor((dyn_reshape0, dyn_reshape1)" in text
    x = np.array([[0, 1, 0, 2], [3, 0, 0, 0], [0, 0, 5, 0]], np.float32)
    for shape in ([3, -1], [1, 6]):
        args = (x, np.arange(6, dtype=np.float32), np.array(shape, np.int64))
        for ours, ref in zip(rxe.interpret(mod, *args), ort(model, *args)):
            np.testing.assert_array_equal(ours, ref)
    with pytest.raises(rxe.InterpretError, match="cannot reshape"):
        rxe.interpret(mod, x, np.arange(6, dtype=np.float32), np.array([4, -1], np.int64))
