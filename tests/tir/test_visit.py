"""The tensor-program visitors and mutators: one dispatch by class name,
identity kept when nothing changes, every occurrence rewritten when
something does, and an error naming a node class without a hook."""

import pytest

from relax_edge.ir import SizeVar
from relax_edge.ir.shape import as_expr, substitute
from relax_edge.tir import Allocate, Buffer, For, IfThenElse, Let, Seq, Store, TensorProgram, loop_var
from relax_edge.tir.expr import Index, Load, ScalarVar, intrinsic
from relax_edge.tir.stmt import Assert, Stmt
from relax_edge.tir.visit import ExprMutator, ExprVisitor, StmtMutator, StmtVisitor, map_expr, walk_stmt


def every_statement_kind():
    """A program using all seven statement classes:

        for i in range(n):
            assert (i < n), 'i out of range {}', i
            acc = local float32[1]
            acc[0] = a[i]
            t = exp(acc[0])
            if (a[i] > 0.0):
                b[i] = t
            else:
                b[i] = a[i]
    """
    n = SizeVar("n")
    a, b = Buffer("a", "float32", (n,)), Buffer("b", "float32", (n,))
    i = loop_var("i")
    acc = Buffer("acc", "float32", (1,))
    t = ScalarVar("t", "float32")
    branch = IfThenElse(a[i] > 0.0, Store(b, [i], t), Store(b, [i], a[i]))
    body = Seq([Assert(Index(as_expr(i)) < Index(as_expr(n)), "i out of range {}", (Index(as_expr(i)),)),
                Allocate(acc, Seq([Store(acc, [0], a[i]), Let(t, intrinsic("exp", acc[0]), branch)]))])
    return TensorProgram("kinds", (a,), (b,), For(i, n, body), (n,)), i


class Kinds(StmtVisitor):
    def __init__(self):
        self.seen = []

    def visit(self, node):
        self.seen.append(type(node).__name__)
        super().visit(node)


def test_visitor_reaches_every_statement_parents_first():
    program, _ = every_statement_kind()
    kinds = Kinds()
    kinds.visit(program.body)
    assert kinds.seen == ["For", "Seq", "Assert", "Allocate", "Seq", "Store", "Let", "IfThenElse", "Store", "Store"]


def test_mutator_that_changes_nothing_returns_the_same_objects():
    program, _ = every_statement_kind()
    assert StmtMutator().visit(program.body) is program.body

    class Exprs(StmtMutator):
        def visit_expr(self, e):
            return ExprMutator().visit(e)
    assert Exprs().visit(program.body) is program.body
    assert map_expr(program.body.body.stmts[0].cond, lambda e: None) is program.body.body.stmts[0].cond


class RenameLoopVar(StmtMutator):
    """Loop variable `old` becomes `new`, in loops and in every index."""

    class Indices(ExprMutator):
        def __init__(self, old, new):
            self.old, self.new = old, new

        def visit_Index(self, e):
            return Index(substitute(e.value, {self.old: as_expr(self.new)}))

    def __init__(self, old, new):
        self.old, self.new = old, new
        self.indices = self.Indices(old, new)

    def visit_expr(self, e):
        return self.indices.visit(e)

    def visit_For(self, s):
        return For(self.new if s.var is self.old else s.var, s.extent, self.visit(s.body), s.kind)


def test_mutator_renaming_a_loop_variable_rewrites_every_occurrence():
    program, i = every_statement_kind()
    j = loop_var("j")
    body = RenameLoopVar(i, j).visit(program.body)
    renamed = TensorProgram(program.name, program.inputs, program.outputs, body, program.size_params)
    assert str(renamed) == (
        "# program kinds(a: float32(n,)) -> (b: float32(n,)), sizes n\n"
        "for j in range(n):\n"
        "    assert (j < n), 'i out of range {}', j\n"
        "    acc = local float32[1]\n"
        "    acc[0] = a[j]\n"
        "    t = exp(acc[0])\n"
        "    if (a[j] > 0.0):\n"
        "        b[j] = t\n"
        "    else:\n"
        "        b[j] = a[j]\n"
    )


def test_expression_visitor_sees_nested_loads():
    n = SizeVar("n")
    idx, data = Buffer("idx", "int64", (n,)), Buffer("data", "float32", (n,))
    i = loop_var("i")
    e = Load(data, [Load(idx, [i])]) * 2.0

    class Loads(ExprVisitor):
        def __init__(self):
            self.names = []

        def visit_Load(self, load):
            self.names.append(load.buffer.name)
            super().visit_Load(load)
    loads = Loads()
    loads.visit(e)
    assert loads.names == ["data", "idx"]


class Barrier(Stmt):
    """A statement class no visitor knows."""


def test_a_node_class_without_a_hook_is_an_error_naming_it():
    with pytest.raises(TypeError, match="StmtVisitor cannot handle Barrier"):
        StmtVisitor().visit(Barrier())
    with pytest.raises(TypeError, match="Barrier"):
        walk_stmt(Seq([Barrier()]), lambda s: None)
    with pytest.raises(TypeError, match="ExprMutator cannot handle Barrier"):
        ExprMutator().visit(Barrier())
