"""High-level operators. Each function builds a typed `Call`; the records
(type rule, numpy reference, ...) are in `OPS`.

    from relax_edge import op
    y = op.matmul(x, w)          # Call with type Tensor((n, 10), "float32")
"""

from __future__ import annotations

from . import (  # noqa: F401  (register the records)
    bitcast,
    detect,
    elementwise,
    kv_cache,
    linalg,
    manipulate,
    nn,
    qdynamic,
    quant_int8,
    quant_weight,
    random,
    reduce,
    scatter,
)
from .norm import *  # noqa: F401,F403
from .norm import __all__ as _norm_all
from .reduce import *  # noqa: F401,F403
from .reduce import __all__ as _reduce_all
from .registry import OPS, REQUIRED, Op, get_op, infer_type, make_call, register
from .resize import *  # noqa: F401,F403
from .resize import __all__ as _resize_all

__all__ = [
    "OPS", "Op", "REQUIRED", "get_op", "infer_type", "make_call", "register",
    "add", "subtract", "multiply", "divide", "relu", "sigmoid", "tanh", "exp",
    "matmul", "reshape", "transpose", "concat", "conv2d", "max_pool2d",
    "avg_pool2d", "softmax", "sum", "mean",
] + _norm_all + _reduce_all + _resize_all


def add(a, b, span=None): return make_call("add", [a, b], span=span)
def subtract(a, b, span=None): return make_call("subtract", [a, b], span=span)
def multiply(a, b, span=None): return make_call("multiply", [a, b], span=span)
def divide(a, b, span=None): return make_call("divide", [a, b], span=span)
def relu(x, span=None): return make_call("relu", [x], span=span)
def sigmoid(x, span=None): return make_call("sigmoid", [x], span=span)
def tanh(x, span=None): return make_call("tanh", [x], span=span)
def exp(x, span=None): return make_call("exp", [x], span=span)
def matmul(a, b, span=None): return make_call("matmul", [a, b], span=span)


def reshape(x, shape, span=None):
    """`shape` may hold ints, -1 (once) and symbolic dims."""
    return make_call("reshape", [x], {"shape": tuple(shape)}, span=span)


def transpose(x, axes=None, span=None):
    return make_call("transpose", [x], {"axes": axes}, span=span)


def concat(tensors, axis=0, span=None):
    return make_call("concat", list(tensors), {"axis": axis}, span=span)


def conv2d(x, weight, strides=(1, 1), padding=(0, 0, 0, 0), dilation=(1, 1), groups=1, span=None):
    """NCHW input, OIHW weight; padding is (top, left, bottom, right)."""
    return make_call("conv2d", [x, weight], {"strides": strides, "padding": padding,
                                             "dilation": dilation, "groups": groups}, span=span)


def max_pool2d(x, kernel_size, strides=None, padding=(0, 0, 0, 0), dilation=(1, 1),
               ceil_mode=False, span=None):
    return make_call("max_pool2d", [x], {"kernel_size": kernel_size, "strides": strides,
                                         "padding": padding, "dilation": dilation,
                                         "ceil_mode": ceil_mode}, span=span)


def avg_pool2d(x, kernel_size, strides=None, padding=(0, 0, 0, 0), dilation=(1, 1),
               ceil_mode=False, count_include_pad=False, span=None):
    return make_call("avg_pool2d", [x], {"kernel_size": kernel_size, "strides": strides,
                                         "padding": padding, "dilation": dilation,
                                         "ceil_mode": ceil_mode,
                                         "count_include_pad": count_include_pad}, span=span)


def softmax(x, axis=-1, span=None): return make_call("softmax", [x], {"axis": axis}, span=span)


def sum(x, axis=None, keepdims=False, span=None):  # noqa: A001  (mirrors numpy)
    return make_call("sum", [x], {"axis": axis, "keepdims": keepdims}, span=span)


def mean(x, axis=None, keepdims=False, span=None):
    return make_call("mean", [x], {"axis": axis, "keepdims": keepdims}, span=span)
