"""Tensor programs to C99 functions.

The expression walk is tir/render.py's; this file is the C table: operator
formats, dtype names, integer floor division through kernel.h helpers
(plain `/` and `%` where the prover shows the operands non-negative), exact
float constants as hexadecimal literals, and math through RXE_* macros so a
target without libm can use the runtime's own.
"""

from __future__ import annotations

import math

from ...errors import RelaxEdgeError
from ...tir.expr import is_float
from ...tir.render import Renderer
from ...tir.stmt import Allocate, Assert, For, IfThenElse, Let, Seq, Store, TensorProgram
from ..abi import DTYPES

C_KEYWORDS = frozenset("""auto break case char const continue default do double else enum extern float for
goto if inline int long register restrict return short signed sizeof static struct switch typedef union
unsigned void volatile while _Bool int8_t int16_t int32_t int64_t uint8_t uint64_t size_t main""".split())


def c_string(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def c_type(dtype: str) -> str:
    ctype = DTYPES.get(dtype, (None, None, None))[2]
    if ctype is None:
        raise RelaxEdgeError(f"dtype {dtype} is not supported by the C backend")
    return ctype


class CRenderer(Renderer):
    BINARY = {"add": "({a} + {b})", "sub": "({a} - {b})", "mul": "({a} * {b})", "div": "({a} / {b})"}
    LOGICAL = {"and": "({a} && {b})", "or": "({a} || {b})"}
    NOT = "(!{a})"
    SELECT = "({c} ? {a} : {b})"
    RESERVED = C_KEYWORDS
    MATH = {"exp": "EXP", "log": "LOG", "sqrt": "SQRT", "tanh": "TANH", "erf": "ERF", "pow": "POW",
            "fabs": "FABS", "floor": "FLOOR", "ceil": "CEIL", "round": "ROUND"}

    def int_const(self, k):
        if k == -2 ** 63:
            return "INT64_MIN"
        return f"INT64_C({k})" if abs(k) >= 2 ** 31 else str(k)

    def int_division(self, kind, x, y, nonneg):
        if nonneg:
            return f"({x} / {y})" if kind == "div" else f"({x} % {y})"
        return f"rxe_floor{kind}_i64({x}, {y})"

    def int_minmax(self, kind, x, y):
        return f"rxe_{kind}_i64({x}, {y})"

    def binary(self, op, a, b, dtype):
        if op in ("floordiv", "floormod"):
            if is_float(dtype):
                raise RelaxEdgeError(f"{op} on {dtype} is not supported by the C backend")
            return f"rxe_{op}_i64({a}, {b})"
        if op in ("min", "max"):
            return f"RXE_{op.upper()}({a}, {b})"
        if op == "pow":
            return self.intrinsic("pow", [a, b], dtype)
        return super().binary(op, a, b, dtype)

    def constant(self, value, dtype):
        if dtype == "bool":
            return "1" if value else "0"
        if is_float(dtype):
            suffix = "f" if dtype == "float32" else ""
            if math.isnan(value):
                return "RXE_NAN"
            if math.isinf(value):
                return f"({'-' if value < 0 else ''}RXE_INFINITY)"
            return f"{float(value).hex()}{suffix}" if value != int(value) or abs(value) > 2 ** 53 \
                else f"{float(value)!r}{suffix}"
        return self.int_const(int(value))

    def cast(self, x, src, dst):
        if dst == "bool":
            return f"(uint8_t)({x} != 0)"
        return f"(({c_type(dst)})({x}))"

    def intrinsic(self, name, args, dtype):
        suffix = "F" if dtype == "float32" else ""
        return f"RXE_{self.MATH[name]}{suffix}({', '.join(args)})"


def _signature(program: TensorProgram, symbol: str, r: CRenderer) -> str:
    params = []
    inputs = set(program.inputs)
    restrict = "" if program.attrs.get("inplace") else " restrict"  # in place: output aliases an input
    for buf in program.params:
        qual = "const " if buf in inputs else ""
        params.append(f"{qual}{c_type(buf.dtype)}*{restrict} {r.name(buf, buf.name)}")
    params += [f"int64_t {r.name(v, v.name)}" for v in program.size_params]
    params.append("rxe_error_t* err")
    return f"rxe_status_t {symbol}({', '.join(params)})"


def declare_kernel(program: TensorProgram, symbol: str) -> str:
    """The declaration of a kernel defined elsewhere (by the LLVM backend)."""
    return f"extern {_signature(program, symbol, CRenderer())};\n"


def render_kernel(program: TensorProgram, symbol: str) -> str:
    """A static C function for `program`: buffers as pointers (inputs const),
    the size parameters as int64_t, and the error record; it returns a
    status (not RXE_OK only when an Assert fails)."""
    r = CRenderer()
    lines = [f"static {_signature(program, symbol, r)} {{", "  (void)err;"]

    def emit(s, depth):
        pad = "  " * depth
        if isinstance(s, Store):
            target = f"{r.name(s.buffer, s.buffer.name)}[{r.expr(s.buffer.flat_index(s.indices))}]"
            lines.append(f"{pad}{target} = {r.expr(s.value)};")
        elif isinstance(s, For):
            v = r.name(s.var, s.var.name)
            lines.append(f"{pad}for (int64_t {v} = 0; {v} < {r.int_expr(s.extent)}; ++{v}) {{")
            emit(s.body, depth + 1)
            lines.append(f"{pad}}}")
        elif isinstance(s, IfThenElse):
            lines.append(f"{pad}if ({r.expr(s.cond)}) {{")
            emit(s.then_body, depth + 1)
            if s.else_body is not None:
                lines.append(f"{pad}}} else {{")
                emit(s.else_body, depth + 1)
            lines.append(f"{pad}}}")
        elif isinstance(s, Let):
            lines.append(f"{pad}{{")
            lines.append(f"{pad}  const {c_type(s.var.dtype)} {r.name(s.var, s.var.name)} = {r.expr(s.value)};")
            emit(s.body, depth + 1)
            lines.append(f"{pad}}}")
        elif isinstance(s, Allocate):
            lines.append(f"{pad}{{")
            lines.append(f"{pad}  {c_type(s.buffer.dtype)} {r.name(s.buffer, s.buffer.name)}[{int(s.buffer.numel())}];")
            emit(s.body, depth + 1)
            lines.append(f"{pad}}}")
        elif isinstance(s, Seq):
            for x in s.stmts:
                emit(x, depth)
        elif isinstance(s, Assert):
            message = c_string(f"{program.name}: " + s.message.replace("%", "%%").replace("{}", "%d"))
            values = "".join(f", (int64_t)({r.expr(v)})" for v in s.values)
            lines.append(f"{pad}if (!{r.expr(s.cond)}) return rxe_error_set(err, RXE_ERR_INDEX, {message}{values});")
        else:
            raise RelaxEdgeError(f"C backend: cannot emit {type(s).__name__}")

    emit(program.body, 1)
    lines += ["  return RXE_OK;", "}"]
    return "\n".join(lines) + "\n"
