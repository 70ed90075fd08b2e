"""Model importers. `from_onnx` turns an ONNX model into an IRModule whose
dynamic dimensions are symbolic."""

from .onnx import OnnxImportError, from_onnx

__all__ = ["from_onnx", "OnnxImportError"]
