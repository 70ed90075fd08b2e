"""Verifier of tensor programs.

1. Every buffer a statement reads or writes is a parameter of the program
   or a local allocation in scope; outputs and scratch are written, inputs
   are never written.
2. Every size and loop variable used in an index, an extent or a buffer
   shape is a size parameter or an enclosing loop's variable; a loop
   variable is bound by one loop only.
3. Every scalar variable is bound by an enclosing Let; conditions are bool.

Problems are reported together in one VerifyError naming the program.
It does not prove that indices stay within bounds.
"""

from __future__ import annotations

from ..errors import VerifyError
from ..ir.shape import free_vars
from .expr import Compare, Logical, Not
from .stmt import Allocate, Assert, For, IfThenElse, Let, Store
from .visit import ExprVisitor, StmtVisitor

__all__ = ["verify_program"]


class _Uses(ExprVisitor):
    """Reports variables and buffers an expression uses outside their scope."""

    def __init__(self, checker: "_Checker", where: str):
        self.c, self.where = checker, where

    def visit_Index(self, e):
        for v in free_vars(e.value) - self.c.loop_vars:
            self.c.errors.append(f"{self.where}: uses {v.name} outside its loop (not a size parameter)")

    def generic_visit(self, e):
        self.c.errors.append(f"{self.where}: {type(e).__name__} {e!r:.60} is not a tensor-program expression")

    def visit_Load(self, e):
        if e.buffer not in self.c.buffers:
            self.c.errors.append(f"{self.where}: reads {e.buffer.name}, which is not a parameter or local buffer")
        super().visit_Load(e)

    def visit_ScalarVar(self, e):
        if e not in self.c.scalars:
            self.c.errors.append(f"{self.where}: uses scalar {e.name} outside its let")


class _Checker(StmtVisitor):
    """Walks the body with the variables and buffers in scope at each statement."""

    def __init__(self, program):
        self.errors: list[str] = []
        self.inputs = set(program.inputs)
        self.loop_vars = set(program.size_params)    # size parameters and enclosing loops' variables
        self.buffers = set(program.params)           # parameters and enclosing allocations
        self.scalars: set = set()
        self.seen_loops: set = set()

    def check_expr(self, e, where: str) -> None:
        _Uses(self, where).visit(e)

    def check_cond(self, e, where: str) -> None:
        if e.dtype != "bool" and not isinstance(e, (Compare, Logical, Not)):
            self.errors.append(f"{where}: condition has dtype {e.dtype}, not bool")

    def within(self, scope: set, item, body) -> None:
        """Visit `body` with `item` added to `scope`."""
        added = item not in scope
        scope.add(item)
        self.visit(body)
        if added:
            scope.discard(item)

    def visit_Store(self, s: Store):
        where = f"store to {s.buffer.name}"
        if s.buffer not in self.buffers:
            self.errors.append(f"{where}: not a parameter or local buffer")
        if s.buffer in self.inputs:
            self.errors.append(f"{where}: writes input buffer {s.buffer.name}")
        for e in (*s.indices, s.value):
            self.check_expr(e, where)

    def visit_For(self, s: For):
        if s.var in self.seen_loops:
            self.errors.append(f"loop variable {s.var.name} is bound by two loops")
        self.seen_loops.add(s.var)
        for v in free_vars(s.extent) - self.loop_vars:
            self.errors.append(f"loop {s.var.name}: extent uses {v.name} outside its scope")
        self.within(self.loop_vars, s.var, s.body)

    def visit_IfThenElse(self, s: IfThenElse):
        self.check_cond(s.cond, "if")
        self.check_expr(s.cond, "if condition")
        self.visit(s.then_body)
        if s.else_body is not None:
            self.visit(s.else_body)

    def visit_Let(self, s: Let):
        self.check_expr(s.value, f"let {s.var.name}")
        self.within(self.scalars, s.var, s.body)

    def visit_Allocate(self, s: Allocate):
        self.within(self.buffers, s.buffer, s.body)

    def visit_Assert(self, s: Assert):
        self.check_cond(s.cond, "assert")
        for e in (s.cond, *s.values):
            self.check_expr(e, "assert")

    def generic_visit(self, s):
        self.errors.append(f"unknown statement {type(s).__name__}")


def verify_program(program):
    """`program` (a TensorProgram) when it is well-formed (see above), else a VerifyError listing every problem."""
    checker = _Checker(program)
    sizes = set(program.size_params)
    for buf in program.params:
        for d in buf.shape:
            for v in free_vars(d) - sizes:
                checker.errors.append(f"buffer {buf.name}: shape uses {v.name}, which is not a size parameter")
    checker.visit(program.body)
    if checker.errors:
        unique = list(dict.fromkeys(checker.errors))
        raise VerifyError(f"tensor program {program.name} is ill-formed:\n  " + "\n  ".join(unique))
    return program
