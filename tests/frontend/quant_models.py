"""Statically quantized test models: a small seeded float CNN (conv + relu,
depthwise conv, residual add, max / average / global average pooling,
concat, sigmoid, leaky relu, flatten, gemm) quantized by ONNX Runtime's
`quantize_static` in QDQ or QOperator format, cached on disk like
tests/onnx_models.py (tests/model_cache.py).

``get_float_model()`` and ``get_quant_model(fmt, activation, per_channel)``
return paths; ``make_input(seed)`` is a (1, 3, 16, 16) float32 input of the
calibration distribution.
"""

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from tests import model_cache

INPUT_SHAPE = (1, 3, 16, 16)
CLASSES = 10
_CALIBRATION = 16


def make_input(seed=0) -> np.ndarray:
    rng = np.random.default_rng(1000 + seed)
    return (rng.standard_normal(INPUT_SHAPE) * 0.8 + 0.2).astype(np.float32)


def _weights(rng, *shape, scale=None):
    fan_in = int(np.prod(shape[1:])) if len(shape) > 1 else shape[0]
    return (rng.standard_normal(shape) * (scale or np.sqrt(2.0 / fan_in))).astype(np.float32)


def build_float_model() -> onnx.ModelProto:
    rng = np.random.default_rng(7)
    inits, nodes = [], []

    def init(name, array):
        inits.append(numpy_helper.from_array(array, name))
        return name

    def node(op, inputs, **attrs):
        out = f"t{len(nodes)}_{op.lower()}"
        nodes.append(helper.make_node(op, inputs, [out], name=f"n{len(nodes)}_{op}", **attrs))
        return out

    def conv(x, cin, cout, k=3, group=1, stride=1):
        w = init(f"w{len(nodes)}", _weights(rng, cout, cin // group, k, k))
        b = init(f"b{len(nodes)}", (rng.standard_normal(cout) * 0.1).astype(np.float32))
        return node("Conv", [x, w, b], kernel_shape=[k, k], pads=[k // 2] * 4, group=group, strides=[stride] * 2)

    a = node("Relu", [conv("x", 3, 8)])                                    # 8 x 16 x 16
    d = node("Relu", [conv(a, 8, 8, group=8)])                             # depthwise
    p = conv(d, 8, 8, k=1)
    r = node("Add", [a, p])                                                # residual
    m = node("MaxPool", [r], kernel_shape=[2, 2], strides=[2, 2])          # 8 x 8 x 8
    s = node("Sigmoid", [conv(m, 8, 4, k=1)])
    lk = node("LeakyRelu", [conv(m, 8, 4, k=3)], alpha=0.1)
    c = node("Concat", [s, lk, m], axis=1)                                 # 16 x 8 x 8
    v = node("AveragePool", [c], kernel_shape=[2, 2], strides=[2, 2])      # 16 x 4 x 4
    g = node("GlobalAveragePool", [node("Relu", [conv(v, 16, 16, stride=2)])])
    f = node("Flatten", [g], axis=1)
    w = init("fc_w", _weights(rng, CLASSES, 16))
    b = init("fc_b", (rng.standard_normal(CLASSES) * 0.1).astype(np.float32))
    nodes.append(helper.make_node("Gemm", [f, w, b], ["logits"], name="fc", transB=1))
    graph = helper.make_graph(nodes, "qcnn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, INPUT_SHAPE)],
                              [helper.make_tensor_value_info("logits", TensorProto.FLOAT, (1, CLASSES))],
                              initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def _key(*parts):
    import importlib.metadata
    return model_cache.source_key(__file__) + "-" + "-".join(parts) + \
        importlib.metadata.version("onnxruntime").replace(".", "")


def get_float_model():
    return model_cache.export_once("qcnn_float", _key("f32"), lambda p: onnx.save(build_float_model(), str(p)))


def _quantize(out_path, fmt, activation, per_channel):
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.batches = iter([{"x": make_input(100 + i)} for i in range(_CALIBRATION)])

        def get_next(self):
            return next(self.batches, None)

    with model_cache.private_copy(get_float_model(), out_path) as src:
        quantize_static(str(src), str(out_path), Reader(),
                        quant_format=QuantFormat.QDQ if fmt == "qdq" else QuantFormat.QOperator,
                        activation_type=QuantType.QUInt8 if activation == "uint8" else QuantType.QInt8,
                        weight_type=QuantType.QInt8, per_channel=per_channel)


def get_quant_model(fmt="qdq", activation="uint8", per_channel=True):
    """The path of the float model quantized by quantize_static: fmt "qdq" or "qoperator"."""
    name = f"qcnn_{fmt}_{activation}_{'pc' if per_channel else 'pt'}"
    return model_cache.export_once(name, _key(name), lambda p: _quantize(p, fmt, activation, per_channel))
