"""The statement walk every kernel emitter shares (codegen/kernel_skeleton.py):
which loop hook a scheduled loop reaches, what a backend must provide, the
one vectorize test, and the explicit in-place parameter of the C and LLVM
emitters; the vector expression decisions (VectorSkeleton) through a tracing backend."""

import pytest

from relax_edge.codegen.c.kernel import declare_kernel, render_kernel
from relax_edge.codegen.kernel_skeleton import KernelSkeleton, VectorSkeleton
from relax_edge.codegen.llvm.kernel import emit_kernels
from relax_edge.errors import RelaxEdgeError, VerifyError
from relax_edge.ir import SizeVar
from relax_edge.tir import Buffer, For, Seq, Store, TensorProgram, loop_var
from relax_edge.tir.analysis import at_lane, depends_on, stride, vectorizable
from relax_edge.tir.expr import Index, Intrinsic, PrimExpr, cast, intrinsic, maximum, select
from relax_edge.tir.verify import verify_program


class Trace(KernelSkeleton):
    """A backend that names the hook each statement reaches."""

    def begin(self):
        self.trace = []

    def end(self):
        return self.trace

    def visit_Store(self, s):
        self.trace.append(f"store {s.buffer.name}")

    def serial_loop(self, s):
        self.trace.append(f"serial {s.var.name}")
        self.scoped(s.var, s.body)

    def unrolled_loop(self, s):
        self.trace.append(f"unrolled {s.var.name}")

    def vector_loop(self, s, lanes, stores):
        self.trace.append(f"vector {s.var.name} x{lanes}: {len(stores)} stores")

    def parallel_loop(self, s):
        self.trace.append(f"parallel {s.var.name}")
        self.task = "task"
        self.visit(s)        # inside the task the same loop is serial
        self.task = None


def add_program(kind_outer="serial", kind_inner="vectorized", inner_extent=4, inner_dtype="float32"):
    n = SizeVar("n")
    a = Buffer("a", inner_dtype, (n, inner_extent))
    b = Buffer("b", inner_dtype, (n, inner_extent))
    i, j = loop_var("i"), loop_var("j")
    inner = For(j, inner_extent, Store(b, [i, j], a[i, j] + a[i, j]), kind_inner)
    return TensorProgram("add", (a,), (b,), For(i, n, Seq([inner]), kind_outer), (n,))


def test_each_scheduled_loop_reaches_its_hook():
    assert Trace(add_program(), "k", False).emit() == ["serial i", "vector j x4: 1 stores"]
    assert Trace(add_program("parallel", "unrolled"), "k", False).emit() == \
        ["parallel i", "serial i", "unrolled j"]


def test_a_vectorized_loop_the_backends_cannot_vectorize_is_a_plain_loop():
    program = add_program(inner_extent=SizeVar("m"))      # no constant lane count
    assert Trace(program, "k", False).emit() == ["serial i", "serial j", "store b"]
    program = add_program(inner_dtype="int32")             # not a float store
    assert Trace(program, "k", False).emit() == ["serial i", "serial j", "store b"]


def test_a_backend_without_a_statement_hook_is_an_error_naming_both():
    class NoStores(Trace):
        visit_Store = None
    with pytest.raises(TypeError, match="NoStores cannot handle Store"):
        NoStores(add_program(kind_inner="serial"), "k", False).emit()


def test_index_analysis():
    i, j = loop_var("i"), loop_var("j")
    flat = Index(i * 8 + j * 2 + 1)
    assert stride(flat, j) == 2 and stride(flat, i) == 8
    assert stride(Index(i * j), j) is None
    assert depends_on(flat, i) and not depends_on(Index(j + 1), i)
    assert at_lane(flat, j, 3).value == i * 8 + 7
    inner = add_program().body.body.stmts[0]
    assert vectorizable(inner)


def test_in_place_is_a_parameter_of_the_c_emitter():
    program = add_program()
    assert "restrict" in render_kernel(program, "k_add", inplace=False)
    assert "restrict" not in render_kernel(program, "k_add", inplace=True)
    assert "restrict" not in declare_kernel(program, "k_add", inplace=True)
    program.attrs["inplace"] = True      # an attribute of the IR says nothing: the memory plan does
    assert "restrict" in render_kernel(program, "k_add", inplace=False)
    assert "restrict" in declare_kernel(program, "k_add", inplace=False)
    with pytest.raises(TypeError, match="inplace"):   # no default: the memory plan must say
        render_kernel(program, "k_add")


def test_in_place_is_a_set_of_symbols_for_the_llvm_emitter():
    program = add_program()
    module = str(emit_kernels({"k_a": program, "k_b": program}, False, inplace={"k_b"}))
    head_a = next(line for line in module.splitlines() if line.startswith("define") and "@\"k_a\"(" in line)
    head_b = next(line for line in module.splitlines() if line.startswith("define") and "@\"k_b\"(" in line)
    assert head_a.count("noalias") == 2 and "noalias" not in head_b
    program.attrs["inplace"] = True
    assert "noalias" in str(emit_kernels({"k_a": program}, False, inplace=()))


class VectorTrace(VectorSkeleton):
    """Vector expressions as a description of the operation each one became."""

    MATH = ("exp",)

    def vector_type(self, dtype):
        return f"v{self.lanes}{dtype}"

    def scalar(self, e):
        return "scalar"

    def scalar_condition(self, cond):
        return "cond"

    def broadcast(self, value, dtype):
        return f"dup({value})"

    def vload(self, e, vt):
        return f"load({e.buffer.name})"

    def varith(self, op, a, b, vt):
        return f"{op}({a}, {b})"

    def vminmax(self, op, a, b, dtype, vt):
        return f"{op}({a}, {b})"

    def vcast(self, x, src, dst, vt):
        return f"{vt}({x})"

    def vmath(self, name, x, vt):
        return f"{name}({x})"

    def vselect(self, cond, a, b, vt):
        return f"select({cond}, {a}, {b})"

    def vcompare(self, op, a, b, dtype):
        return f"{op}({a}, {b})"

    def vblend(self, mask, a, b, vt):
        return f"blend({mask}, {a}, {b})"

    def by_lanes(self, e, vt):
        return f"lanes({vt})"


def test_vector_expressions_are_lane_wise_where_the_backend_can():
    n = SizeVar("n")
    i, j = loop_var("i"), loop_var("j")
    a, idx = Buffer("a", "float32", (n, 4)), Buffer("idx", "int64", (4,))
    wide = Buffer("w", "float64", (n, 4))
    v = VectorTrace(j, 4)
    assert v.vec(maximum(a[i, j], 0.0) * a[i, 0]) == "mul(max(load(a), dup(scalar)), dup(scalar))"
    assert v.vec(a[i, idx[j]] + intrinsic("exp", a[i, j])) == "add(lanes(v4float32), exp(load(a)))"
    assert v.vec(intrinsic("log", a[i, j])) == "lanes(v4float32)"
    assert v.vec(cast(wide[i, j], "float32")) == "v4float32(load(w))"
    assert v.vec(select(a[i, 0] > 0.0, a[i, j], 1.0)) == "select(cond, load(a), dup(scalar))"
    assert v.vec(select(a[i, j] > 0.0, a[i, j], 1.0)) == "blend(gt(load(a), dup(scalar)), load(a), dup(scalar))"


class Mystery(PrimExpr):
    """An expression class no backend knows."""

    dtype = "float32"


def mystery_program():
    n = SizeVar("n")
    a, b = Buffer("a", "float32", (n,)), Buffer("b", "float32", (n,))
    i = loop_var("i")
    return TensorProgram("odd", (a,), (b,), For(i, n, Store(b, [i], Mystery())), (n,))


def test_an_expression_a_backend_cannot_emit_is_an_error_naming_it_and_the_program():
    with pytest.raises(RelaxEdgeError, match="cannot handle Mystery"):
        render_kernel(mystery_program(), "k_odd", inplace=False)
    with pytest.raises(RelaxEdgeError, match="tensor program odd: .*cannot handle Mystery"):
        emit_kernels({"k_odd": mystery_program()}, False, inplace=())


def test_the_verifier_reports_a_value_that_is_not_an_expression():
    n = SizeVar("n")
    a, b = Buffer("a", "float32", (n,)), Buffer("b", "float32", (n,))
    i = loop_var("i")
    bad = Intrinsic("exp", (a[i], 1.5), "float32")   # a Python float where an expression belongs
    program = TensorProgram("bad", (a,), (b,), For(i, n, Store(b, [i], bad)), (n,))
    with pytest.raises(VerifyError, match="float 1.5 is not a tensor-program expression"):
        verify_program(program)
