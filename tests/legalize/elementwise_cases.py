"""The elementwise operators added for ONNX models (activations,
trigonometry, Sign, Round, IsNaN, IsInf, PRelu, Mod, bit operations), as rows of the
operator matrix: `test_legalize_basic` interprets them, `test_compiled_ops`,
`test_llvm_ops` and `tests/emu/test_qemu_ops.py` compile them. Expected
values come from each operator's numpy reference (op/elementwise.py)."""

from relax_edge.op.registry import make_call

F = "float32"

# on inputs drawn from [0.1, 3.0] (test_legalize_basic.test_unary_legalize)
UNARY = ["sin", "cos", "atan", "sinh", "cosh", "asinh", "round", "softplus", "softsign", "mish", "sign", "elu",
         "selu", "celu", "thresholded_relu", "swish"]


def _call(name, *args, **attrs):
    return make_call(name, list(args), attrs)


def _in_unit_interval(x):
    """x / (1 + |x|), in (-1, 1): the domain of asin, acos and atanh."""
    return _call("softsign", x)


def _odd(b):
    """2 b + 1: an integer divisor that is never 0, of either sign."""
    one = make_call("full", [], {"shape": tuple(b.type.shape), "value": 1, "dtype": b.type.dtype})
    return _call("add", _call("add", b, b), one)


def _times(x, k):
    full = make_call("full", [], {"shape": tuple(x.type.shape), "value": k, "dtype": x.type.dtype})
    return _call("multiply", x, full)


def _infinities(x):
    """x exp(100 x^2): inf of x's sign where |x| > 0.95, finite elsewhere."""
    hundred = make_call("full", [], {"shape": tuple(x.type.shape), "value": 100.0, "dtype": x.type.dtype})
    return _call("multiply", x, _call("exp", _call("multiply", _call("multiply", x, x), hundred)))


# (id, input templates, dtypes, builder) on standard normal floats / integers in [-5, 5]
EXTRA = [
    ("tan", [("n", 5)], [F], lambda x: _call("tan", _in_unit_interval(x))),
    ("asin", [("n", 5)], [F], lambda x: _call("asin", _in_unit_interval(x))),
    ("acos", [("n", 5)], [F], lambda x: _call("acos", _in_unit_interval(x))),
    ("atanh", [("n", 5)], [F], lambda x: _call("atanh", _in_unit_interval(x))),
    ("acosh", [("n", 5)], [F], lambda x: _call("acosh", _call("exp", _call("abs", x)))),
    ("trig_negative", [("n", 5)], [F], lambda x: _call("add", _call("sin", x), _call("cos", x))),
    ("sign_float", [("n", 5)], [F], lambda x: _call("sign", x)),
    ("sign_int", [("n", 5)], ["int32"], lambda x: _call("sign", x)),
    ("round_halves", [("n", 5)], [F], lambda x: _call("round", _call("multiply", x, x))),
    ("elu_alpha", [("n", 5)], [F], lambda x: _call("elu", x, alpha=0.5)),
    ("selu_attrs", [("n", 5)], [F], lambda x: _call("selu", x, alpha=1.5, gamma=2.0)),
    ("celu_alpha", [("n", 5)], [F], lambda x: _call("celu", x, alpha=2.0)),
    ("thresholded_relu_alpha", [("n", 5)], [F], lambda x: _call("thresholded_relu", x, alpha=0.3)),
    ("swish_alpha", [("n", 5)], [F], lambda x: _call("swish", x, alpha=0.5)),
    ("softplus_mish", [("n", 5)], [F], lambda x: _call("add", _call("softplus", x), _call("mish", x))),
    ("shrink", [("n", 5)], [F], lambda x: _call("shrink", x, bias=0.2, lambd=0.5)),
    ("shrink_int", [("n", 5)], ["int32"], lambda x: _call("shrink", x, bias=1.0, lambd=1.5)),
    ("isnan", [("n", 5)], [F], lambda x: _call("isnan", _call("log", x))),
    ("isinf", [("n", 5)], [F], lambda x: _call("isinf", _infinities(x))),
    ("isinf_negative", [("n", 5)], [F], lambda x: _call("isinf", _infinities(x), detect_positive=False)),
    ("isinf_positive", [("n", 5)], [F], lambda x: _call("isinf", _infinities(x), detect_negative=False)),
    ("prelu_channel", [("n", 3, 4), (4,)], [F, F], lambda x, s: _call("prelu", x, s)),
    ("prelu_column", [("n", 3, "m"), (3, 1)], [F, F], lambda x, s: _call("prelu", x, s)),
    ("prelu_int", [("n", 4), (4,)], ["int32", "int32"], lambda x, s: _call("prelu", x, s)),
    ("mod_int_floor", [("n", 4), ("n", 4)], ["int32", "int32"], lambda a, b: _call("mod", a, _odd(b))),
    ("mod_int_fmod", [("n", 4), (4,)], ["int64", "int64"], lambda a, b: _call("mod", a, _odd(b), fmod=True)),
    ("mod_float_fmod", [("n", 4), ("n", 4)], [F, F], lambda a, b: _call("mod", a, b, fmod=True)),
    ("mod_float_floor", [("n", 4), (4,)], [F, F], lambda a, b: _call("mod", a, b)),
    # shift amounts in [-10, 10] (int8: past the width), [-5, 5] wrapped (uint8), up to 30 (int32 overflows)
    ("bit_shift_left_int8", [("n", 4), ("n", 4)], ["int8", "int8"],
     lambda x, y: _call("bit_shift", x, _times(y, 2), direction="left")),
    ("bit_shift_right_int8", [("n", 4), ("n", 4)], ["int8", "int8"],
     lambda x, y: _call("bit_shift", x, _times(y, 2), direction="right")),
    ("bit_shift_left_uint8", [("n", 4), ("n", 4)], ["uint8", "uint8"],
     lambda x, y: _call("bit_shift", x, y, direction="left")),
    ("bit_shift_right_uint8", [("n", 4), (4,)], ["uint8", "uint8"],
     lambda x, y: _call("bit_shift", x, y, direction="right")),
    ("bit_shift_left_int32", [("n", 4), ("n", 4)], ["int32", "int32"],
     lambda x, y: _call("bit_shift", x, _times(y, 6), direction="left")),
    ("bit_shift_right_int64", [("n", 4), (4,)], ["int64", "int64"],
     lambda x, y: _call("bit_shift", x, _times(y, 13), direction="right")),
    ("bitwise_and", [("n", 4), (4,)], ["int32", "int32"], lambda a, b: _call("bitwise_and", a, b)),
    ("bitwise_or_uint8", [("n", 4), ("n", 4)], ["uint8", "uint8"], lambda a, b: _call("bitwise_or", a, b)),
    ("bitwise_xor_int64", [("n", 1, 4), ("m", 4)], ["int64", "int64"], lambda a, b: _call("bitwise_xor", a, b)),
    ("bitwise_not_int8", [("n", 4)], ["int8"], lambda x: _call("bitwise_not", x)),
    ("bitwise_not_uint8_then_shift", [("n", 4), ("n", 4)], ["uint8", "uint8"],
     lambda x, y: _call("bit_shift", _call("bitwise_not", x), y, direction="right")),
]
