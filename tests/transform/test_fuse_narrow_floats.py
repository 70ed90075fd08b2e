"""fuse keeps float16 / bfloat16 rounding at every operator's result: a
producer inlined into its consumer (or a consumer applied as an epilogue) is
rounded to its dtype, as its store did before fusion. (x + 1024) - 1024 in
float16 loses x's small bits; fused in float32 without the rounding it
would not."""

import ml_dtypes
import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import relax_edge as rxe
from tests.frontend.one_node import compiled


def _model(elem):
    dtype = np.float16 if elem == TensorProto.FLOAT16 else ml_dtypes.bfloat16
    big = numpy_helper.from_array(np.array(1024.0, dtype), "big")
    nodes = [helper.make_node("Add", ["x", "big"], ["a"]), helper.make_node("Sub", ["a", "big"], ["b"]),
             helper.make_node("Mul", ["b", "x"], ["y"])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", elem, ["n"])],
                              [helper.make_tensor_value_info("y", elem, ["n"])], initializer=[big])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model, dtype


@pytest.mark.parametrize("elem", [TensorProto.FLOAT16, TensorProto.BFLOAT16])
def test_fused_program_rounds_as_the_unfused_ones(elem, tmp_path):
    model, dtype = _model(elem)
    x = np.array([0.3, 1.7, -2.25, 3.0, 0.001], np.float32).astype(dtype)
    mod = rxe.from_onnx(model)
    want = np.asarray(rxe.interpret(mod, x)).view(np.uint16)
    # the answer: 1024 + x rounded to float16's steps of 1 (bfloat16's 8) near 1024, then 1024 taken off
    exact = ((x.astype(np.float32) + 1024).astype(dtype).astype(np.float32) - 1024).astype(dtype)
    np.testing.assert_array_equal(want, (exact.astype(np.float32) * x.astype(np.float32)).astype(dtype).view(np.uint16))
    fused = rxe.optimize(mod, verify=True)
    assert len([b for b in fused.functions["main"].body.blocks[0].bindings]) < 3   # the three ops fused
    np.testing.assert_array_equal(np.asarray(rxe.interpret(fused, x)).view(np.uint16), want)
    for backend in ("c", "llvm"):
        with compiled(model, backend, tmp_path / backend) as loaded:
            (y,) = loaded.run(x)
            np.testing.assert_array_equal(np.asarray(y).view(np.uint16), want, err_msg=backend)


@pytest.mark.parametrize("elem", [TensorProto.FLOAT16, TensorProto.BFLOAT16])
def test_epilogue_loading_twice_rounds(elem, tmp_path):
    """A reduction's float16 result applied as an epilogue that reads it twice (bound once by a let)."""
    dtype = np.float16 if elem == TensorProto.FLOAT16 else ml_dtypes.bfloat16
    nodes = [helper.make_node("ReduceSum", ["x"], ["s"], keepdims=0, axes=[1]),
             helper.make_node("Mul", ["s", "s"], ["y"])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", elem, ["n", 3])],
                              [helper.make_tensor_value_info("y", elem, ["n"])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11)])
    model.ir_version = 8
    x = np.array([[1024.0, 0.7, 0.6], [3.0, 0.3, -0.2]], np.float32).astype(dtype)
    mod = rxe.from_onnx(model)
    want = np.asarray(rxe.interpret(mod, x)).view(np.uint16)
    np.testing.assert_array_equal(np.asarray(rxe.interpret(rxe.optimize(mod, verify=True), x)).view(np.uint16), want)
    with compiled(model, "c", tmp_path) as loaded:
        (y,) = loaded.run(x)
        np.testing.assert_array_equal(np.asarray(y).view(np.uint16), want)
