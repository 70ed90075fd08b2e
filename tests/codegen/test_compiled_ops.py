"""Every operator compiled to C on the host equals its numpy reference at
several values of each size variable (including 1), from one build."""

import numpy as np
import pytest

from relax_edge.op.registry import make_call
from tests.legalize import test_legalize_basic as basic
from tests.legalize import test_legalize_nn as nn
from tests.legalize.harness import check_compiled, random_arrays

SIZES = basic.SIZES


def _int_div_safe(name):
    def arrays(t, d, sizes, seed):
        out = random_arrays(t, d, sizes, seed)
        if name == "div_int_truncates":
            out[1][out[1] == 0] = 3
        return out
    return arrays


BASIC = [(c[0], c[1], c[2] or ["float32"] * len(c[1]), c[6]) for c in basic.CASES]
ALL = BASIC + [tuple(c) for c in basic.EXTRA] + [tuple(c) for c in basic.REDUCTIONS]


@pytest.mark.parametrize("case", ALL, ids=[c[0] for c in ALL])
def test_operator_compiled(case, tmp_path):
    name, templates, dtypes, build = case
    check_compiled(templates, dtypes, build, SIZES, tmp_path, _int_div_safe(name), rtol=2e-5, atol=1e-5)


@pytest.mark.parametrize("name", basic.UNARY)
def test_unary_compiled(name, tmp_path):
    def arrays(t, d, sizes, seed):
        return [np.random.default_rng(seed).uniform(0.1, 3.0, (sizes["n"], 5)).astype(np.float32)]
    check_compiled([("n", 5)], ["float32"], lambda x: make_call(name, [x]), SIZES, tmp_path, arrays,
                   rtol=2e-5, atol=1e-6)


NN = nn.CONV + nn.POOL + nn.NORM


@pytest.mark.parametrize("case", NN, ids=[c[0] for c in NN])
def test_nn_operator_compiled(case, tmp_path):
    name, templates, dtypes, build = case[:4]
    check_compiled(templates, dtypes, build, nn.SIZES, tmp_path, rtol=2e-5, atol=1e-5)


def test_gather_index_out_of_range_is_an_error_not_a_read(tmp_path):
    """An index read from a tensor is checked: a status naming the range, in
    the interpreter of the legalized program and in the compiled kernel."""
    import relax_edge as rxe
    from relax_edge.transform.legalize import legalize
    from tests.legalize.harness import one_op_module
    mod = one_op_module([("n", 4), ("m",)], ["float32", "int64"],
                        lambda x, i: make_call("take", [x, i], {"axis": 1}))
    x = np.arange(8, dtype=np.float32).reshape(2, 4)
    for bad in (4, -5, 1000):
        idx = np.array([0, bad], np.int64)
        with pytest.raises(rxe.InterpretError, match=rf"index {bad} out of range \[-4, 4\) on axis 1"):
            rxe.interpret(legalize(mod), x, idx)
    loaded = rxe.connect("host").load(rxe.build(mod, board="host", out_dir=tmp_path, name="gather", profile=False))
    np.testing.assert_array_equal(loaded.run(x, np.array([3, -1], np.int64))[0], x[:, [3, -1]])
    expected = r"RXE_ERR_INDEX: take: index 1000 out of range \[-4, 4\) on axis 1"
    with pytest.raises(rxe.RuntimeCheckError, match=expected):
        loaded.run(x, np.array([1000], np.int64))
