"""ONNX op type -> converter, one module per operator family."""

from . import elementwise, nn, reduce, tensor  # noqa: F401  (register the converters)
