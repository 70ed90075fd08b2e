"""Quantized models as users make them with ONNX Runtime's own tools, cached
on disk (tests/model_cache.py).

- ``get_cnn(arch, size)``: torchvision's ``mobilenet_v2`` or ``resnet18``
  (seeded random weights and BatchNorm statistics, tests/onnx_models.py),
  exported at a fixed (1, 3, size, size) input and quantized by
  ``quantize_static``: QDQ, per-channel int8 weights, uint8 activations (ORT's
  default), calibrated on ``CALIBRATION`` seeded images.
- ``get_float_cnn(arch, size)``: the float export it was quantized from.
- ``get_bert(long)``: the BERT encoder of tests/onnx_models.py ("bert", or
  "bert_long" with room for 512 positions) quantized by ``quantize_dynamic``
  (int8 weights, DynamicQuantizeLinear -> MatMulInteger).
- ``make_image(size, seed)`` is an input of the calibration distribution.
"""

import importlib.metadata
import warnings
from pathlib import Path

import numpy as np

from tests import model_cache, onnx_models

CNNS = ("mobilenet_v2", "resnet18")
CALIBRATION = 8
CLASSES = 10   # random weights over 1000 classes leave near-ties at the top: a top-1 check would test noise


def make_image(size, seed=0) -> np.ndarray:
    return np.random.default_rng(5000 + seed).standard_normal((1, 3, size, size)).astype(np.float32)


def _key(*parts) -> str:
    version = importlib.metadata.version("onnxruntime").replace(".", "")
    return "-".join([model_cache.source_key(__file__, onnx_models.__file__), *map(str, parts), version])


def _vision_model(arch, size):
    """Seeded random weights; BatchNorm statistics measured on random images (made-up ones collapse the
    features to constants: every input would give the same logits)."""
    import torch
    torch.manual_seed(0)
    model = getattr(onnx_models._import_torchvision().models, arch)(num_classes=CLASSES)
    for bn in [m for m in model.modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)]:
        bn.reset_running_stats()
        bn.momentum = None
    model.train()
    with torch.no_grad():
        model(torch.from_numpy(np.concatenate([make_image(size, 900 + i) for i in range(8)])))
    return model.eval()


def _export_cnn(arch, size, path):
    import torch
    model = _vision_model(arch, size)
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, (torch.from_numpy(make_image(size)),), str(path), dynamo=False,
                          opset_version=onnx_models.OPSET, input_names=["input"], output_names=["logits"])


def get_float_cnn(arch, size=224) -> Path:
    if arch not in CNNS:
        raise KeyError(f"unknown CNN {arch!r}; known: {', '.join(CNNS)}")
    name = f"qzoo_{arch}_{size}_f32"
    return model_cache.export_once(name, _key(name), lambda p: _export_cnn(arch, size, p))


def _quantize_static(src, dst, size):
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.batches = iter([{"input": make_image(size, 100 + i)} for i in range(CALIBRATION)])

        def get_next(self):
            return next(self.batches, None)

    quantize_static(str(src), str(dst), Reader(), quant_format=QuantFormat.QDQ, activation_type=QuantType.QUInt8,
                    weight_type=QuantType.QInt8, per_channel=True)


def get_cnn(arch, size=224) -> Path:
    """``arch`` at ``size`` x ``size`` quantized by quantize_static (QDQ, per-channel int8, uint8 activations)."""
    src = get_float_cnn(arch, size)
    name = f"qzoo_{arch}_{size}_qdq"
    return model_cache.export_once(name, _key(name), lambda p: _quantize_static(src, p, size))


def _quantize_dynamic(src, dst):
    from onnxruntime.quantization import QuantType, quantize_dynamic
    quantize_dynamic(str(src), str(dst), weight_type=QuantType.QInt8)


def get_bert(long=False):
    """``(path, spec)``: the BERT of tests/onnx_models.py quantized by quantize_dynamic (int8 weights)."""
    src, spec = onnx_models.get_model("bert_long" if long else "bert")
    name = f"qzoo_bert{'_long' if long else ''}_dynamic"
    return model_cache.export_once(name, _key(name), lambda p: _quantize_dynamic(src, p)), spec
