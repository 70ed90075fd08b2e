"""The tensor-program IR: the compute language lowers to loops whose printed
form is stable, the verifier rejects ill-formed programs, and the generated C
of a kernel is what we expect."""

import numpy as np
import pytest

from relax_edge.codegen.c.kernel import render_kernel
from relax_edge.errors import VerifyError
from relax_edge.ir import SizeVar
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
from relax_edge.tir.verify import verify_program


def row_sum_program():
    n = SizeVar("n")
    a = placeholder((n, 4), "float32", "a")
    k = reduce_axis(4, "k")
    b = compute((n,), lambda i: reduce_sum(a[i, k.var] * 2.0, [k]), "b")
    return lower("row_sum", [a], [b])


def test_lowered_program_prints_stably():
    text = str(row_sum_program())
    assert text == (
        "# program row_sum(a: float32(n, 4)) -> (b: float32(n,)), sizes n\n"
        "for i0 in range(n):\n"
        "    b_acc = local float32[1]\n"
        "    b_acc[0] = 0.0\n"
        "    for k in range(4):\n"
        "        b_acc[0] = (b_acc[0] + (a[i0, k] * 2.0))\n"
        "    b[i0] = b_acc[0]\n")


def test_kernel_c_text():
    """The C of a reduction kernel: restrict pointers, int64 sizes, a local
    accumulator, a status return."""
    c = render_kernel(row_sum_program(), "k_row_sum", inplace=False)
    assert c.splitlines()[0] == ("static rxe_status_t k_row_sum(const float* restrict a, float* restrict b, "
                                 "int64_t n, rxe_error_t* err) {")
    assert "for (int64_t i0 = 0; i0 < n; ++i0) {" in c
    assert "b_acc[0] = (b_acc[0] + (a[(4 * i0 + k)] * 2.0f));" in c
    assert c.rstrip().endswith("return RXE_OK;\n}")


def test_interpreter_runs_the_program():
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    np.testing.assert_allclose(row_sum_program().interpret([a], None, [3]), a.sum(axis=1) * 2)


def test_symbolic_floor_division_in_c_uses_helpers():
    """Indices that may be negative use floor helpers, others plain / and %."""
    x = SizeVar("x", lower=None)
    n = SizeVar("n")
    a = placeholder((n,), "float32", "a")
    b = compute((n,), lambda i: a[(i + x) % n] + intrinsic("exp", a[i // 2]), "b")
    c = render_kernel(lower("shift", [a], [b], size_params=(n, x)), "k_shift", inplace=False)
    assert "rxe_floormod_i64((i0 + x), n)" in c
    assert "(i0 / 2)" in c


def test_verifier_rejects_ill_formed_programs():
    n = SizeVar("n")
    a = Buffer("a", "float32", (n,))
    out = Buffer("out", "float32", (n,))
    stranger = Buffer("stranger", "float32", (n,))
    i, j = loop_var("i"), loop_var("j")
    bad = [
        (Store(stranger, (i,), a[i]), "store to stranger: not a parameter or local buffer"),
        (Store(out, (i,), stranger[i]), "reads stranger, which is not a parameter or local buffer"),
        (Store(a, (i,), out[i]), "writes input buffer a"),
        (Store(out, (j,), a[i]), "uses j outside its loop"),
    ]
    for stmt, message in bad:
        program = TensorProgram("p", (a,), (out,), For(i, n, stmt), (n,))
        with pytest.raises(VerifyError, match=message):
            verify_program(program)
    twice = TensorProgram("p", (a,), (out,), Seq([For(i, n, Store(out, (i,), a[i])),
                                                  For(i, n, Store(out, (i,), a[i]))]), (n,))
    with pytest.raises(VerifyError, match="loop variable i is bound by two loops"):
        verify_program(twice)
    m = SizeVar("m")
    unbound = TensorProgram("p", (a,), (Buffer("o", "float32", (m,)),), Seq([]), (n,))
    with pytest.raises(VerifyError, match="shape uses m, which is not a size parameter"):
        verify_program(unbound)
    assert verify_program(row_sum_program())
