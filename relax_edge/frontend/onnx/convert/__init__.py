"""ONNX op type -> converter, one module per operator family."""

from . import conv, elementwise, nn, quant, reduce, resize, tensor  # noqa: F401  (register the converters)
from .onehot_cumsum import convert_cum_sum, convert_one_hot  # noqa: F401
