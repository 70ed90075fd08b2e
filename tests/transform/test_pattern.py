"""Pattern analysis reads the TIR: legalized programs of each operator
family and hand-written compute programs get the same patterns, and the
helpers that fusion uses (inline form, re-reads per element, cost) give the
numbers one counts by hand from the loops."""

import numpy as np
import pytest

from relax_edge import op
from relax_edge.ir import Builder, Constant, SizeVar, TensorType, Var
from relax_edge.op import make_call
from relax_edge.tir import (
    Buffer,
    For,
    Seq,
    Store,
    TensorProgram,
    compute,
    intrinsic,
    loop_var,
    lower,
    placeholder,
    reduce_axis,
    reduce_sum,
)
from relax_edge.transform.legalize import legalize
from relax_edge.transform.pattern import Pattern, analyze, arith_cost, inline_form, reads_per_element

F = "float32"


def legalized(shapes, build, dtypes=None):
    """The one tensor program of a one-call module over `shapes` ('n' symbolic)."""
    n = SizeVar("n")
    params = [Var(f"x{i}", TensorType([n if d == "n" else d for d in s], (dtypes or [F] * len(shapes))[i]))
              for i, s in enumerate(shapes)]
    bb = Builder()
    with bb.function("main", params):
        bb.ret(bb.emit(build(*params)))
    (program,) = legalize(bb.get()).tensor_programs.values()
    return program


CASES = [
    ("add", [("n", 4), ("n", 4)], lambda a, b: op.add(a, b), Pattern.ELEMENTWISE),
    ("add_bias", [("n", 4), (4,)], lambda a, b: op.add(a, b), Pattern.BROADCAST),
    ("add_leading_one", [(1, "n", 4), (4,)], lambda a, b: op.add(b, a), Pattern.BROADCAST),
    ("relu", [("n", 4)], op.relu, Pattern.ELEMENTWISE),
    ("transpose", [("n", 4)], lambda x: op.transpose(x, (1, 0)), Pattern.INJECTIVE),
    ("concat", [("n", 4), ("n", 2)], lambda a, b: op.concat([a, b], axis=1), Pattern.INJECTIVE),
    ("take", [(10, 4), ("n",)], lambda x, i: make_call("take", [x, i], {"axis": 0}), Pattern.INJECTIVE),
    ("sum", [("n", 4)], lambda x: op.sum(x, axis=(1,)), Pattern.REDUCTION),
    ("mean_keepdims", [("n", 4, 3)], lambda x: op.mean(x, axis=(1, 2), keepdims=True), Pattern.REDUCTION),
    ("softmax", [("n", 4)], op.softmax, Pattern.REDUCTION),
    ("layer_norm", [("n", 4), (4,), (4,)],
     lambda x, g, b: make_call("layer_norm", [x, g, b], {"axis": -1, "epsilon": 1e-5}), Pattern.REDUCTION),
    ("matmul", [("n", 4), (4, 6)], op.matmul, Pattern.OUTPUT_FUSABLE),
    ("conv2d", [("n", 3, 8, 8), (4, 3, 3, 3)], lambda x, w: op.conv2d(x, w, padding=(1, 1, 1, 1)),
     Pattern.OUTPUT_FUSABLE),
    ("depthwise_conv2d", [("n", 4, 8, 8), (4, 1, 3, 3)], lambda x, w: op.conv2d(x, w, groups=4),
     Pattern.OUTPUT_FUSABLE),
    ("max_pool2d", [("n", 3, 8, 8)], lambda x: op.max_pool2d(x, (2, 2)), Pattern.OUTPUT_FUSABLE),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_legalized_programs(case):
    _, shapes, build, expected = case
    dtypes = ["float32", "int64"] if case[0] == "take" else None
    assert analyze(legalized(shapes, build, dtypes)) is expected


def test_hand_written_compute_programs_are_analyzed_like_legalized_ones():
    n = SizeVar("n")
    a = placeholder((n, 4), F, "a")
    bias = placeholder((4,), F, "bias")
    w = placeholder((4, 6), F, "w")
    scaled = compute((n, 4), lambda i, j: a[i, j] * 2.0, "scaled")
    biased = compute((n, 4), lambda i, j: a[i, j] + bias[j], "biased")
    flipped = compute((4, n), lambda i, j: a[j, i], "flipped")
    k = reduce_axis(4, "k")
    product = compute((n, 6), lambda i, j: reduce_sum(a[i, k.var] * w[k.var, j], [k]), "product")
    r = reduce_axis(4, "r")
    row = compute((n,), lambda i: reduce_sum(intrinsic("exp", a[i, r.var]), [r]), "row")
    assert analyze(lower("scaled", [a], [scaled])) is Pattern.ELEMENTWISE
    assert analyze(lower("biased", [a, bias], [biased])) is Pattern.BROADCAST
    assert analyze(lower("flipped", [a], [flipped])) is Pattern.INJECTIVE
    assert analyze(lower("product", [a, w], [product])) is Pattern.OUTPUT_FUSABLE
    assert analyze(lower("row", [a], [row])) is Pattern.REDUCTION
    # same as the legalized matmul, though written independently
    assert analyze(legalized([("n", 4), (4, 6)], op.matmul)) is analyze(lower("product", [a, w], [product]))


def test_programs_fusion_does_not_understand_are_opaque():
    n = SizeVar("n")
    x, y = Buffer("x", F, (n,)), Buffer("y", F, (n,))
    i, j = loop_var("i"), loop_var("j")
    twice = TensorProgram("twice", (x,), (y,), Seq([For(i, n, Store(y, (i,), x[i])),
                                                   For(j, n, Store(y, (j,), x[j] * 2.0))]), (n,))
    assert analyze(twice) is Pattern.OPAQUE
    k = loop_var("k")
    shifted = TensorProgram("shifted", (x,), (y,), For(k, n - 1, Store(y, (k + 1,), x[k])), (n,))
    assert analyze(shifted) is Pattern.OPAQUE
    z = Buffer("z", F, (n,))
    m = loop_var("m")
    two_outputs = TensorProgram("two", (x,), (y, z), For(m, n, Seq([Store(y, (m,), x[m]), Store(z, (m,), x[m])])),
                                (n,))
    assert analyze(two_outputs) is Pattern.OPAQUE


def test_reads_per_element_counts_loops_that_do_not_index_the_buffer():
    add = legalized([("n", 4), ("n", 4)], op.add)
    assert [reads_per_element(add, b) for b in add.inputs] == [1, 1]
    bias_add = legalized([("n", 4), (4,)], op.add)
    assert reads_per_element(bias_add, bias_add.inputs[1]) is None      # once per row: n times
    fixed = legalized([(5, 4), (4, 6)], op.matmul)
    assert [reads_per_element(fixed, b) for b in fixed.inputs] == [6, 5]   # columns, rows
    conv = legalized([(1, 1, 8, 8), (1, 1, 3, 3)], lambda x, w: op.conv2d(x, w))
    assert reads_per_element(conv, conv.inputs[0]) == 9                 # a 3x3 window
    softmax = legalized([("n", 4)], op.softmax)
    assert reads_per_element(softmax, softmax.inputs[0]) == 3           # max, sum of exp, result


def test_inline_form_and_cost():
    relu = legalized([("n", 4)], op.relu)
    loops, value, asserts = inline_form(relu)
    assert len(loops) == 2 and asserts == () and arith_cost(value) == 1
    transpose = legalized([("n", 4)], lambda x: op.transpose(x, (1, 0)))
    assert arith_cost(inline_form(transpose)[1]) == 0
    take = legalized([(10, 4), ("n",)], lambda x, i: make_call("take", [x, i], {"axis": 0}), [F, "int64"])
    assert len(inline_form(take)[2]) == 1        # its index check comes along
    assert inline_form(legalized([("n", 4), (4, 6)], op.matmul)) is None
    assert inline_form(legalized([("n", 4)], op.softmax)) is None


def test_constant_arguments_do_not_change_the_pattern():
    program = legalized([("n", 4)], lambda x: op.multiply(x, Constant(np.float32(0.5))))
    assert analyze(program) is Pattern.BROADCAST


def test_a_row_of_the_same_tensor_is_not_a_broadcast():
    """x[i, j] + x[0, j] reads elements other than the one written: an
    in-place kernel would overwrite row 0 before the other rows read it."""
    n = SizeVar("n")
    x = placeholder((n, 4), F, "x")
    y = compute((n, 4), lambda i, j: x[i, j] + x[0, j], "y")
    assert analyze(lower("row0", [x], [y])) is Pattern.INJECTIVE
    row = placeholder((1, 4), F, "row")
    z = compute((n, 4), lambda i, j: x[i, j] + row[0, j], "z")
    assert analyze(lower("bias_row", [x, row], [z])) is Pattern.BROADCAST
