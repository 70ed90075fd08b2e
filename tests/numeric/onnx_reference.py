"""Run one ONNX node under ONNX Runtime: the outside reference for operators."""

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper

_ONNX_DTYPE = {np.dtype("float32"): TensorProto.FLOAT, np.dtype("int32"): TensorProto.INT32,
               np.dtype("int64"): TensorProto.INT64, np.dtype("bool"): TensorProto.BOOL}


def run_node(op_type, inputs, attrs=None, constants=None, opset=17):
    """Run one node whose data inputs are `inputs` (numpy) and whose extra
    inputs are `constants` (numpy, passed as initializers); one output."""
    names = [f"in{i}" for i in range(len(inputs))]
    const_names = [f"c{i}" for i in range(len(constants or []))]
    node = helper.make_node(op_type, names + const_names, ["out"], **(attrs or {}))
    graph = helper.make_graph(
        [node], "single",
        [helper.make_tensor_value_info(nm, _ONNX_DTYPE[x.dtype], x.shape) for nm, x in zip(names, inputs)],
        [helper.make_tensor_value_info("out", _ONNX_DTYPE[inputs[0].dtype], None)],
        initializer=[onnx.numpy_helper.from_array(np.asarray(c), nm)
                     for nm, c in zip(const_names, constants or [])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, dict(zip(names, inputs)))[0]
