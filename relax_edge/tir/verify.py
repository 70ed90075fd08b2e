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
from .expr import Compare, Index, Load, Logical, Not, ScalarVar
from .stmt import Allocate, Assert, For, IfThenElse, Let, Seq, Store, TensorProgram
from .visit import map_expr

__all__ = ["verify_program"]


def verify_program(program: TensorProgram) -> TensorProgram:
    errors: list[str] = []
    params = set(program.params)
    inputs = set(program.inputs)
    sizes = set(program.size_params)
    for buf in program.params:
        for d in buf.shape:
            for v in free_vars(d) - sizes:
                errors.append(f"buffer {buf.name}: shape uses {v.name}, which is not a size parameter")
    seen_loops: set = set()

    def check_expr(e, scope_vars, scope_bufs, scalars, where):
        def visit(node):
            if isinstance(node, Index):
                for v in free_vars(node.value) - scope_vars:
                    errors.append(f"{where}: uses {v.name} outside its loop (not a size parameter)")
            elif isinstance(node, Load) and node.buffer not in scope_bufs:
                errors.append(f"{where}: reads {node.buffer.name}, which is not a parameter or local buffer")
            elif isinstance(node, ScalarVar) and node not in scalars:
                errors.append(f"{where}: uses scalar {node.name} outside its let")
            return None
        map_expr(e, visit)

    def check_cond(e, where):
        if e.dtype != "bool" and not isinstance(e, (Compare, Logical, Not)):
            errors.append(f"{where}: condition has dtype {e.dtype}, not bool")

    def walk(s, scope_vars, scope_bufs, scalars):
        if isinstance(s, Store):
            where = f"store to {s.buffer.name}"
            if s.buffer not in scope_bufs:
                errors.append(f"{where}: not a parameter or local buffer")
            if s.buffer in inputs:
                errors.append(f"{where}: writes input buffer {s.buffer.name}")
            for e in (*s.indices, s.value):
                check_expr(e, scope_vars, scope_bufs, scalars, where)
        elif isinstance(s, For):
            if s.var in seen_loops:
                errors.append(f"loop variable {s.var.name} is bound by two loops")
            seen_loops.add(s.var)
            for v in free_vars(s.extent) - scope_vars:
                errors.append(f"loop {s.var.name}: extent uses {v.name} outside its scope")
            walk(s.body, scope_vars | {s.var}, scope_bufs, scalars)
        elif isinstance(s, IfThenElse):
            check_cond(s.cond, "if")
            check_expr(s.cond, scope_vars, scope_bufs, scalars, "if condition")
            walk(s.then_body, scope_vars, scope_bufs, scalars)
            if s.else_body is not None:
                walk(s.else_body, scope_vars, scope_bufs, scalars)
        elif isinstance(s, Let):
            check_expr(s.value, scope_vars, scope_bufs, scalars, f"let {s.var.name}")
            walk(s.body, scope_vars, scope_bufs, scalars | {s.var})
        elif isinstance(s, Allocate):
            walk(s.body, scope_vars, scope_bufs | {s.buffer}, scalars)
        elif isinstance(s, Assert):
            check_cond(s.cond, "assert")
            for e in (s.cond, *s.values):
                check_expr(e, scope_vars, scope_bufs, scalars, "assert")
        elif isinstance(s, Seq):
            for x in s.stmts:
                walk(x, scope_vars, scope_bufs, scalars)
        else:
            errors.append(f"unknown statement {type(s).__name__}")

    walk(program.body, sizes, params, set())
    if errors:
        unique = list(dict.fromkeys(errors))
        raise VerifyError(f"tensor program {program.name} is ill-formed:\n  " + "\n  ".join(unique))
    return program
