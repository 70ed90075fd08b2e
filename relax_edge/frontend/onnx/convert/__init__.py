"""ONNX op type -> converter, one module per operator family."""

from . import (  # noqa: F401  (register the converters)
    attention,
    contrib_llm,
    control,
    conv,
    detect,
    elementwise,
    loss,
    misc,
    nn,
    qoperator,
    quant,
    random,
    reduce,
    resize,
    rnn,
    scatter,
    tensor,
)
from .onehot_cumsum import convert_cum_sum, convert_one_hot  # noqa: F401
