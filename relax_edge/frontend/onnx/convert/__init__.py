"""ONNX op type -> converter, one module per operator family."""

from . import conv, elementwise, nn, reduce, resize, tensor  # noqa: F401  (register the converters)
