"""Legalized operators (interpreted tensor programs) equal the numpy
reference at several sizes of each symbolic dim, including 1."""

import numpy as np
import pytest

from relax_edge.op.registry import make_call
from tests.legalize import elementwise_cases
from tests.legalize.harness import check_legalized
from tests.numeric.test_ops_vs_onnxruntime import CASES

SIZES = [{"n": 1, "m": 1}, {"n": 2, "m": 3}, {"n": 4, "m": 2}]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_m1_operators_legalize(case):
    name, templates, dtypes, _, _, _, build = case
    dtypes = dtypes or ["float32"] * len(templates)

    def arrays(t, d, sizes, seed):
        from tests.legalize.harness import random_arrays
        out = random_arrays(t, d, sizes, seed)
        if name == "div_int_truncates":
            out[1][out[1] == 0] = 3
        return out
    check_legalized(templates, dtypes, build, SIZES, arrays)


F = "float32"
UNARY = ["log", "sqrt", "erf", "floor", "ceil", "reciprocal", "negative", "abs", "hard_swish"]
UNARY += elementwise_cases.UNARY
EXTRA = [
    ("leaky_relu", [("n", 5)], [F], lambda x: make_call("leaky_relu", [x], {"alpha": 0.1})),
    ("hard_sigmoid", [("n", 5)], [F], lambda x: make_call("hard_sigmoid", [x], {"alpha": 0.3, "beta": 0.4})),
    ("gelu", [("n", 5)], [F], lambda x: make_call("gelu", [x])),
    ("gelu_tanh", [("n", 5)], [F], lambda x: make_call("gelu", [x], {"approximate": "tanh"})),
    ("clip", [("n", 5)], [F], lambda x: make_call("clip", [x], {"min": -0.5, "max": 0.25})),
    ("cast_int", [("n", 5)], [F], lambda x: make_call("cast", [x], {"dtype": "int32"})),
    ("cast_bool", [("n", 5)], ["int64"], lambda x: make_call("cast", [x], {"dtype": "bool"})),
    ("power", [("n", 3), (3,)], [F, F], lambda a, b: make_call("power", [make_call("abs", [a]), b])),
    ("power_int", [("n", 3), (3,)], ["int32", "int32"], lambda a, b: make_call("power", [a, make_call("abs", [b])])),
    ("max_min", [("n", 3), (1, 3)], [F, F], lambda a, b: make_call("maximum", [a, b])),
    ("compare", [("n", 3), ("m", 1, 3)], ["int32", "int32"], lambda a, b: make_call("less_equal", [a, b])),
    ("logical", [("n", 3), (3,)], ["bool", "bool"], lambda a, b: make_call("logical_xor", [a, b])),
    ("not", [("n", 3)], ["bool"], lambda a: make_call("logical_not", [a])),
    ("where", [("n", 1, 3), ("m", 3), (1,)], ["bool", F, F], lambda c, a, b: make_call("where", [c, a, b])),
    ("slice_symbolic", [("n", 7)], [F],
     lambda x: make_call("strided_slice", [x], {"begin": (1,), "end": (x.type.shape[0],), "axes": (0,)})),
    ("slice_reverse_step", [("n", 7)], [F],
     lambda x: make_call("strided_slice", [x], {"begin": (-1,), "end": (-2 ** 63,), "strides": (-2,), "axes": (1,)})),
    ("take", [("n", 6), ("m", 2)], [F, "int64"], lambda x, i: make_call("take", [x, i], {"axis": 1})),
    ("gather_elements", [("n", 6), ("n", 3)], [F, "int64"],
     lambda x, i: make_call("gather_elements", [x, i], {"axis": 1})),
    ("broadcast_to", [("n", 1)], [F], lambda x: make_call("broadcast_to", [x], {"shape": (2, x.type.shape[0], 3)})),
    ("tile", [("n", 2)], [F], lambda x: make_call("tile", [x], {"repeats": (2, 3)})),
    ("pad_constant", [("n", 3)], [F], lambda x: make_call("pad", [x], {"pads": (1, 0, 2, -1), "value": 1.5})),
    ("pad_edge", [("n", 3)], [F], lambda x: make_call("pad", [x], {"pads": (1, 2, 2, 1), "mode": "edge"})),
    ("pad_reflect", [(4, 5)], [F], lambda x: make_call("pad", [x], {"pads": (2, 1, 3, 4), "mode": "reflect"})),
    ("pad_wrap", [(4, 5)], [F], lambda x: make_call("pad", [x], {"pads": (2, 1, 3, 4), "mode": "wrap"})),
    ("trilu", [("n", 4, 5)], [F], lambda x: make_call("trilu", [x], {"k": 1, "upper": False})),
    ("full", [("n",)], [F], lambda x: make_call("full", [], {"shape": (x.type.shape[0], 2), "value": 3.0})),
    ("arange", [("n",)], [F], lambda x: make_call("arange", [], {"start": 2, "stop": x.type.shape[0] * 3, "step": 2})),
    ("shape_to_tensor", [("n", "m")], [F], lambda x: make_call("shape_to_tensor", [], {"values": x.type.shape})),
]
EXTRA += elementwise_cases.EXTRA


@pytest.mark.parametrize("name", UNARY)
def test_unary_legalize(name):
    def arrays(t, d, sizes, seed):
        x = np.random.default_rng(seed).uniform(0.1, 3.0, (sizes["n"], 5)).astype(np.float32)
        return [x]
    check_legalized([("n", 5)], [F], lambda x: make_call(name, [x]), SIZES, arrays)


@pytest.mark.parametrize("case", EXTRA, ids=[c[0] for c in EXTRA])
def test_more_operators_legalize(case):
    _, templates, dtypes, build = case
    check_legalized(templates, dtypes, build, SIZES)


REDUCTIONS = [
    ("reduce_max_keep", [("n", 4, "m")], [F], lambda x: make_call("max", [x], {"axis": (0, 2), "keepdims": True})),
    ("reduce_min_int", [("n", 4)], ["int32"], lambda x: make_call("min", [x], {"axis": 1})),
    ("reduce_sum_all", [("n", 3)], [F], lambda x: make_call("sum", [x])),
    ("argmax_first", [("n", 5)], ["int32"], lambda x: make_call("argmax", [x], {"axis": 1, "keepdims": False})),
    ("argmax_last", [("n", 5)], ["int32"],
     lambda x: make_call("argmax", [x], {"axis": 0, "keepdims": True, "select_last_index": True})),
    ("log_softmax", [("n", 5)], [F], lambda x: make_call("log_softmax", [x], {"axis": 1})),
    ("matmul_batch_broadcast", [("n", 1, 2, 3), (4, 3, "m")], [F, F], lambda a, b: make_call("matmul", [a, b])),
    ("reduce_prod_keep", [("n", 3, "m")], [F], lambda x: make_call("prod", [x], {"axis": (1,), "keepdims": True})),
    ("reduce_prod_int", [("n", 3)], ["int32"], lambda x: make_call("prod", [x], {"axis": (-1,)})),
    ("reduce_sum_square_int", [("n", 4)], ["int32"], lambda x: make_call("sum_square", [x], {"axis": 0})),
    ("reduce_l1_all_keep", [("n", 3, "m")], [F], lambda x: make_call("l1", [x], {"keepdims": True})),
    ("reduce_l1_int", [("n", 4)], ["int32"], lambda x: make_call("l1", [x], {"axis": 1})),
    ("reduce_l2", [("n", 3, "m")], [F], lambda x: make_call("l2", [x], {"axis": (0, 2)})),
    ("reduce_log_sum", [("n", 4)], [F],
     lambda x: make_call("log_sum", [make_call("abs", [x])], {"axis": (1,), "keepdims": True})),
    ("reduce_log_sum_exp", [("n", 3, "m")], [F], lambda x: make_call("log_sum_exp", [x], {"axis": (1, 2)})),
    ("reduce_mean_int_truncates", [("n", 3, "m")], ["int32"],
     lambda x: make_call("mean", [x], {"axis": (1, 2), "keepdims": True})),
    ("argmin_first", [("n", 5)], ["int32"], lambda x: make_call("argmin", [x], {"axis": 1, "keepdims": False})),
    ("argmin_last_float", [("n", 5)], [F],
     lambda x: make_call("argmin", [x], {"axis": 0, "keepdims": True, "select_last_index": True})),
]


@pytest.mark.parametrize("case", REDUCTIONS, ids=[c[0] for c in REDUCTIONS])
def test_reductions_legalize(case):
    _, templates, dtypes, build = case
    check_legalized(templates, dtypes, build, SIZES)
