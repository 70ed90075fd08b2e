"""ONNX frontend: `from_onnx(model, dim_bounds=None, input_shapes=None, constant_inputs=None,
max_constant_bytes=None)`; every problem with a model raises OnnxImportError."""

from .context import OnnxImportError
from .importer import from_onnx

__all__ = ["from_onnx", "OnnxImportError"]
