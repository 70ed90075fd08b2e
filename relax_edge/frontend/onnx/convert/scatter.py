"""ONNX import: scatter, gather-nd and sampling operators."""
