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
5. `VectorSkeleton` decides how each expression of a vector loop's body is
   built: uniform expressions (not using the loop variable) stay scalar
   (`scalar`) and are broadcast where a vector is needed (`broadcast`);
   float expressions become one lane-wise operation when the backend has
   one: a contiguous load (`vload`), + - * / (`varith`), min/max
   (`vminmax`), a float-to-float cast (`vcast`), a float32 intrinsic of
   `MATH` (`vmath`), a select on a uniform condition (`vselect`, the
   condition through `scalar_condition`) or on a float comparison
   (`vcompare`, then `vblend`); anything else is built lane by lane
   (`by_lanes`). `vector_type(dtype)` names the vector type and is asked
   before the operands are built.

A third backend (e.g. GLSL compute shaders) provides `begin`, `end`, the
four loop hooks (a parallel loop may become the dispatch grid, a vector
loop vec4 operations, the others plain loops) and the five statement
hooks, a `VectorSkeleton` subclass with the hooks of point 5 for its vector
loops, plus an expression table like codegen/c/kernel.py's CRenderer over
tir/render.py. A missing statement hook is a TypeError naming the backend
class and the statement class.
"""

from __future__ import annotations

from ..tir.analysis import VECTOR_DTYPES, at_lane, depends_on, stmts_of, stride, vectorizable
from ..tir.expr import BinOp, Cast, Compare, Intrinsic, Load, Select
from ..tir.stmt import For, Seq
from ..tir.visit import NodeFunctor

__all__ = ["KernelSkeleton", "VectorSkeleton"]


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

    def captured(self) -> list:
        """What an outlined parallel task needs from the kernel: the buffers,
        the size parameters and everything in scope, in that order."""
        return [*self.program.params, *self.program.size_params, *self.scope]

    def assert_message(self, s) -> str:
        """The printf format of a failed Assert: the program's name, then the
        message with its `{}` placeholders as %d of the int64 values."""
        return f"{self.program.name}: " + s.message.replace("%", "%%").replace("{}", "%d")

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
        """`s` (a constant extent) unrolled; its variable in scope for the body."""
        raise NotImplementedError

    def serial_loop(self, s: For) -> None:
        raise NotImplementedError


class VectorSkeleton:
    """The expressions of a vector loop over `var` with `lanes` lanes (point 5)."""

    ARITH = ("add", "sub", "mul", "div")
    MATH: tuple = ()   # float32 intrinsics with a lane-wise version in the backend

    def __init__(self, var, lanes: int):
        self.var, self.lanes = var, lanes

    def vec(self, e):
        """`e` as a vector of e.dtype (a uniform value broadcast)."""
        value, is_vector = self.expr(e)
        return value if is_vector else self.broadcast(value, e.dtype)

    def expr(self, e):
        """(value, is_vector): uniform expressions stay scalar."""
        if not depends_on(e, self.var):
            return self.scalar(e), False
        vt = self.vector_type(e.dtype) if e.dtype in VECTOR_DTYPES else None
        value = self.lane_wise(e, vt) if vt is not None else None
        return (value if value is not None else self.by_lanes(e, vt)), True

    def lane_wise(self, e, vt):
        """`e` (a float expression) as one vector operation, or None."""
        if isinstance(e, Load) and stride(e.buffer.flat_index(e.indices), self.var) == 1:
            return self.vload(e, vt)
        if isinstance(e, BinOp) and e.op in self.ARITH:
            return self.varith(e.op, self.vec(e.a), self.vec(e.b), vt)
        if isinstance(e, BinOp) and e.op in ("min", "max"):
            return self.vminmax(e.op, self.vec(e.a), self.vec(e.b), e.dtype, vt)
        if isinstance(e, Cast) and e.a.dtype in VECTOR_DTYPES:
            return self.vcast(self.vec(e.a), e.a.dtype, e.dtype, vt)
        if isinstance(e, Intrinsic) and e.dtype == "float32" and e.name in self.MATH:
            return self.vmath(e.name, self.vec(e.args[0]), vt)
        if isinstance(e, Select) and not depends_on(e.cond, self.var):
            return self.vselect(self.scalar_condition(e.cond), self.vec(e.a), self.vec(e.b), vt)
        if isinstance(e, Select) and isinstance(e.cond, Compare) and e.cond.a.dtype in VECTOR_DTYPES:
            mask = self.vcompare(e.cond.op, self.vec(e.cond.a), self.vec(e.cond.b), e.cond.a.dtype)
            return self.vblend(mask, self.vec(e.a), self.vec(e.b), vt)
        return None

    def first_lane(self, buffer, indices):
        """The flat offset of lane 0 of an access."""
        return at_lane(buffer.flat_index(indices), self.var, 0)

    # the backend's hooks ------------------------------------------------------
    def vector_type(self, dtype: str):
        raise NotImplementedError

    def scalar(self, e):
        raise NotImplementedError

    def scalar_condition(self, cond):
        raise NotImplementedError

    def broadcast(self, value, dtype: str):
        raise NotImplementedError

    def vload(self, e: Load, vt):
        raise NotImplementedError

    def varith(self, op: str, a, b, vt):
        raise NotImplementedError

    def vminmax(self, op: str, a, b, dtype: str, vt):
        raise NotImplementedError

    def vcast(self, x, src: str, dst: str, vt):
        raise NotImplementedError

    def vmath(self, name: str, x, vt):
        raise NotImplementedError

    def vselect(self, cond, a, b, vt):
        raise NotImplementedError

    def vcompare(self, op: str, a, b, dtype: str):
        raise NotImplementedError

    def vblend(self, mask, a, b, vt):
        raise NotImplementedError

    def by_lanes(self, e, vt):
        """`e` built lane by lane (vt: its vector type, None when it is not a float)."""
        raise NotImplementedError
