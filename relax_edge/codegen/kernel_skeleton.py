"""The statement walk shared by every kernel emitter (C text, LLVM IR).

A backend is a subclass of `KernelSkeleton` that says what each statement
becomes; the skeleton owns the walk and the loop decisions, so every
backend visits a tensor program the same way:

1. `emit()` calls `begin()`, visits the program's body and returns `end()`.
2. A `Seq` visits its statements in order. A `For` becomes, in this order
   of preference: `parallel_loop(s)` when it is marked parallel and the
   walk is not already inside an outlined task (`self.task` is None);
   `vector_loop(s, lanes, stores)` when it is marked vectorized and
   tir/analysis.py's `vectorizable` holds (one vector operation per store);
   `unrolled_loop(s)` when it is marked unrolled with a constant extent;
   otherwise `serial_loop(s)`.
3. Every other statement goes to the backend's own hook, by class name:
   `visit_Store`, `visit_Assert`, `visit_Let`, `visit_Allocate`,
   `visit_IfThenElse`. A hook that nests a body visits it with
   `self.visit`, or with `self.scoped(var, body)` when it binds a loop
   variable or a scalar, so that `self.scope` lists what an outlined task
   must capture.
4. `self.inplace` says whether an output aliases an input (no restrict /
   noalias on the buffers).

A third backend (e.g. GLSL compute shaders) provides `begin`, `end`, the
four loop hooks (a parallel loop may become the dispatch grid, a vector
loop vec4 operations, the others plain loops) and the five statement
hooks, plus an expression table like codegen/c/kernel.py's CRenderer over
tir/render.py. A missing hook is a TypeError naming the backend class and
the statement class.
"""

from __future__ import annotations

from ..tir.analysis import stmts_of, vectorizable
from ..tir.stmt import For, Seq
from ..tir.visit import NodeFunctor

__all__ = ["KernelSkeleton", "runs_in_place"]


def runs_in_place(program, inplace) -> bool:
    """Whether the kernel's output aliases an input: `inplace` when given,
    else the program's "inplace" attribute (set by memory/liveness.py)."""
    return bool(program.attrs.get("inplace", False)) if inplace is None else bool(inplace)


class KernelSkeleton(NodeFunctor):
    """Walks a tensor program's statements; subclasses emit each one."""

    def __init__(self, program, symbol: str, inplace: bool):
        self.program = program
        self.symbol = symbol
        self.inplace = inplace
        self.scope: list = []   # loop variables and scalars bound around the current statement
        self.task = None        # inside an outlined parallel loop: the backend's record of it

    def emit(self):
        self.begin()
        self.visit(self.program.body)
        return self.end()

    def scoped(self, var, body) -> None:
        """Visit `body` with `var` (a loop variable or scalar) in scope."""
        self.scope.append(var)
        self.visit(body)
        self.scope.pop()

    def visit_Seq(self, s: Seq):
        for x in s.stmts:
            self.visit(x)

    def visit_For(self, s: For):
        if s.kind == "parallel" and self.task is None:
            self.parallel_loop(s)
        elif s.kind == "vectorized" and vectorizable(s):
            self.vector_loop(s, int(s.extent), stmts_of(s.body))
        elif s.kind == "unrolled" and s.extent.is_const:
            self.unrolled_loop(s)
        else:
            self.serial_loop(s)

    # the backend's hooks ------------------------------------------------------
    def begin(self) -> None:
        """Start the kernel function (signature, entry)."""
        raise NotImplementedError

    def end(self):
        """Finish the kernel function; its result is emit()'s."""
        raise NotImplementedError

    def parallel_loop(self, s: For) -> None:
        """Run the iterations of `s` as tasks (set `self.task` while emitting the task's body)."""
        raise NotImplementedError

    def vector_loop(self, s: For, lanes: int, stores: tuple) -> None:
        """`stores` (contiguous float stores in `s.var`) as one vector operation each."""
        raise NotImplementedError

    def unrolled_loop(self, s: For) -> None:
        raise NotImplementedError

    def serial_loop(self, s: For) -> None:
        raise NotImplementedError
