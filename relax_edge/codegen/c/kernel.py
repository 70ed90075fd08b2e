"""Tensor programs to C99 functions.

The expression walk is tir/render.py's; this file is the C table: operator
formats, dtype names, integer floor division through kernel.h helpers
(plain `/` and `%` where the prover shows the operands non-negative), exact
float constants as hexadecimal literals, and math through RXE_* macros so a
target without libm can use the runtime's own. float32 exp, erf and tanh
call kernel.h's libm-free rxe_f32_* functions, and their vector versions in
vectorized loops, so every element gets the same result wherever it falls.
"""

from __future__ import annotations

import math

from ...errors import RelaxEdgeError
from ...tir.analysis import at_lane
from ...tir.expr import Load, is_float
from ...tir.program import TensorProgram
from ...tir.render import IndentedLines, Renderer
from ...tir.stmt import Allocate, Assert, For, IfThenElse, Let, Store
from ..abi import DTYPES
from ..kernel_skeleton import KernelSkeleton, VectorSkeleton

C_KEYWORDS = frozenset("""auto break case char const continue default do double else enum extern float for
goto if inline int long register restrict return short signed sizeof static struct switch typedef union
unsigned void volatile while _Bool int8_t int16_t int32_t int64_t uint8_t uint16_t uint32_t uint64_t size_t main
err ctx task begin end thread""".split())
# libm's functions (RXE_EXP is `exp` on hosted targets): a buffer must not shadow them
LIBM_NAMES = ("exp", "log", "sqrt", "tanh", "erf", "pow", "fabs", "floor", "ceil", "rint", "sin", "cos", "tan",
              "asin", "acos", "atan", "sinh", "cosh", "asinh", "acosh", "atanh", "fmod")
C_KEYWORDS |= frozenset(LIBM_NAMES) | frozenset(name + "f" for name in LIBM_NAMES)


def c_string(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def c_type(dtype: str) -> str:
    """The C type of a buffer element (float16 and bfloat16: their uint16_t bits)."""
    ctype = DTYPES.get(dtype, (None, None, None))[2]
    if ctype is None:
        raise RelaxEdgeError(f"dtype {dtype} is not supported by the C backend")
    return ctype


# float16 and bfloat16 in registers: float, widened after a load and narrowed before a store (kernel.h)
NARROW_FLOATS = {"float16": "rxe_half", "bfloat16": "rxe_bfloat"}


def c_value_type(dtype: str) -> str:
    """The C type of a value of `dtype` in an expression."""
    return "float" if dtype in NARROW_FLOATS else c_type(dtype)


def narrowed(value: str, dtype: str) -> str:
    """`value` as a buffer element of `dtype` stores it."""
    return f"{NARROW_FLOATS[dtype]}_narrow({value})" if dtype in NARROW_FLOATS else value


UNSIGNED = ("uint8", "uint16", "uint32", "uint64", "bool")
NARROW_UNSIGNED = ("uint8", "uint16")
F32_MATH = ("exp", "erf", "tanh")   # kernel.h's rxe_f32_NAME and, per vector type T, T_NAME


class CRenderer(Renderer):
    BINARY = {"add": "({a} + {b})", "sub": "({a} - {b})", "mul": "({a} * {b})", "div": "({a} / {b})"}
    # integer bit operations; << on uint64 (defined for every value), >> arithmetic on signed values
    BINARY = {**BINARY, "bitand": "({a} & {b})", "bitor": "({a} | {b})", "bitxor": "({a} ^ {b})",
              "shl": "((int64_t)((uint64_t)({a}) << {b}))", "shr": "({a} >> {b})"}
    LOGICAL = {"and": "({a} && {b})", "or": "({a} || {b})"}
    NOT = "(!{a})"
    SELECT = "({c} ? {a} : {b})"
    RESERVED = C_KEYWORDS
    MATH = {"exp": "EXP", "log": "LOG", "sqrt": "SQRT", "tanh": "TANH", "erf": "ERF", "pow": "POW",
            "fabs": "FABS", "floor": "FLOOR", "ceil": "CEIL", "round": "ROUND"}
    MATH = {**MATH, **{name: name.upper() for name in ("sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh",
                                                       "asinh", "acosh", "atanh", "fmod")}}

    def int_const(self, k):
        if k == -2 ** 63:
            return "INT64_MIN"
        if k >= 2 ** 63:   # a uint64 constant
            return f"UINT64_C({k})"
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
            if dtype in UNSIGNED:   # floor is truncation; uint64 does not fit the int64 helpers
                return f"({a} {'/' if op == 'floordiv' else '%'} {b})"
            return f"rxe_{op}_i64({a}, {b})"
        if op in ("min", "max"):
            return f"RXE_{op.upper()}({a}, {b})"
        if op == "pow":
            return self.intrinsic("pow", [a, b], dtype)
        if op == "mul" and dtype in NARROW_UNSIGNED:   # C promotes to int: 65535 * 65535 would overflow it
            return f"((uint32_t)({a}) * ({b}))"
        return super().binary(op, a, b, dtype)

    def constant(self, value, dtype):
        if dtype == "bool":
            return "1" if value else "0"
        if is_float(dtype):
            suffix = "" if dtype == "float64" else "f"
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
        if dst in NARROW_FLOATS:   # rounded to the narrow type, held as float
            return f"{NARROW_FLOATS[dst]}_widen({NARROW_FLOATS[dst]}_narrow((float)({x})))"
        return f"(({c_value_type(dst)})({x}))"

    def load(self, e):
        text = super().load(e)
        dtype = e.buffer.dtype
        return f"{NARROW_FLOATS[dtype]}_widen({text})" if dtype in NARROW_FLOATS else text

    def reinterpret(self, x, src, dst):
        """Through a union (C99 defines it; a pointer pun would break strict aliasing); float16 and
        bfloat16 values are their uint16_t bits, narrowed from and widened to float."""
        bits = narrowed(x, src)
        if c_type(src) != c_type(dst):
            bits = f"(((union {{ {c_type(src)} from; {c_type(dst)} to; }}){{ .from = {bits} }}).to)"
        return f"{NARROW_FLOATS[dst]}_widen({bits})" if dst in NARROW_FLOATS else bits

    def intrinsic(self, name, args, dtype):
        if dtype != "float64" and name in F32_MATH:
            return f"rxe_f32_{name}({args[0]})"
        suffix = "" if dtype == "float64" else "F"
        return f"RXE_{self.MATH[name]}{suffix}({', '.join(args)})"


def _signature(program: TensorProgram, symbol: str, r: CRenderer, inplace: bool) -> str:
    params = []
    inputs = set(program.inputs)
    restrict = "" if inplace else " restrict"  # in place: output aliases an input
    for buf in program.params:
        qual = "const " if buf in inputs else ""
        params.append(f"{qual}{c_type(buf.dtype)}*{restrict} {r.name(buf, buf.name)}")
    params += [f"int64_t {r.name(v, v.name)}" for v in program.size_params]
    params.append("rxe_error_t* err")
    return f"rxe_status_t {symbol}({', '.join(params)})"


def declare_kernel(program: TensorProgram, symbol: str, *, inplace: bool) -> str:
    """The declaration of a kernel defined elsewhere (by the LLVM backend);
    `inplace`: its output aliases an input (the memory plan says so)."""
    return f"extern {_signature(program, symbol, CRenderer(), inplace)};\n"


_VECTOR_TYPE = """#ifndef {T}_DEFINED
#define {T}_DEFINED
typedef {c} {T} __attribute__((vector_size({size})));
typedef {c} {T}_unaligned __attribute__((vector_size({size}), aligned(sizeof({c})), may_alias));
typedef {mask} {T}_mask __attribute__((vector_size({size})));
#define {T}_load(p) (*(const {T}_unaligned*)(p))
#define {T}_store(p, v) (*({T}_unaligned*)(p) = (v))
#define {T}_dup(x) (({T}){{{dups}}})
#define {T}_blend(m, a, b) (({T})((({T}_mask)(m) & ({T}_mask)(a)) | (~({T}_mask)(m) & ({T}_mask)(b))))
{math}#endif
"""
_VECTOR_BINARY = {"add": "+", "sub": "-", "mul": "*", "div": "/"}
_VECTOR_COMPARE = {"lt": "<", "le": "<=", "gt": ">", "ge": ">=", "eq": "==", "ne": "!="}
_MASKS = {"float32": "int32_t", "float64": "int64_t"}


class CVectorRenderer(VectorSkeleton):
    """Expressions of a vectorized loop's body as GCC/Clang vector-extension
    C: contiguous loads and stores as whole vectors (unaligned, may_alias), arithmetic,
    min/max, float compares/selects and float32 exp/erf/tanh (kernel.h)
    lane-wise; anything else (other math, gathers, integer work) element by
    element into a vector literal."""

    MATH = F32_MATH

    def __init__(self, r: CRenderer, var, lanes: int, types: dict):
        super().__init__(var, lanes)
        self.r, self.types = r, types

    def vector_type(self, dtype: str) -> str:
        name = f"rxe_v{self.lanes}{'f32' if dtype == 'float32' else 'f64'}"
        if name not in self.types:
            c = c_type(dtype)
            math = f"RXE_VECTOR_MATH_F32({name})\n" if dtype == "float32" else ""
            self.types[name] = _VECTOR_TYPE.format(T=name, c=c, mask=_MASKS[dtype],
                                                   dups=", ".join(["(x)"] * self.lanes),
                                                   size=self.lanes * (4 if dtype == "float32" else 8), math=math)
        return name

    def address(self, buffer, indices) -> str:
        return f"&{self.r.name(buffer, buffer.name)}[{self.r.expr(self.first_lane(buffer, indices))}]"

    def scalar(self, e) -> str:
        return self.r.expr(e)

    scalar_condition = scalar

    def broadcast(self, value: str, dtype: str) -> str:
        return f"{self.vector_type(dtype)}_dup({value})"

    def vload(self, e: Load, vt: str) -> str:
        return f"{vt}_load({self.address(e.buffer, e.indices)})"

    def varith(self, op, a, b, vt) -> str:
        return f"({a} {_VECTOR_BINARY[op]} {b})"

    def vminmax(self, op, a, b, dtype, vt) -> str:
        return f"{vt}_blend({a} {'<' if op == 'min' else '>'} {b}, {a}, {b})"

    def vcast(self, x, src, dst, vt) -> str:
        return f"__builtin_convertvector({x}, {vt})"

    def vmath(self, name, x, vt) -> str:
        return f"{vt}_{name}({x})"

    def vselect(self, cond, a, b, vt) -> str:
        # both arms cast to vt: a load has the unaligned type, a blend vt, and `?:` wants one type
        return f"({cond} ? ({vt})({a}) : ({vt})({b}))"

    def vcompare(self, op, a, b, dtype) -> str:
        return f"({a} {_VECTOR_COMPARE[op]} {b})"

    def vblend(self, mask, a, b, vt) -> str:
        return f"{vt}_blend({mask}, {a}, {b})"

    def by_lanes(self, e, vt) -> str:
        lanes = ", ".join(self.r.expr(at_lane(e, self.var, k)) for k in range(self.lanes))
        return f"(({vt}){{{lanes}}})"   # parenthesized: a macro argument may hold it

    def store(self, s: Store) -> str:
        return f"{self.vector_type(s.buffer.dtype)}_store({self.address(s.buffer, s.indices)}, {self.vec(s.value)});"


class CKernel(IndentedLines, KernelSkeleton):
    """One tensor program as C text (see render_kernel)."""

    INDENT = "  "

    def __init__(self, program: TensorProgram, symbol: str, inplace: bool):
        super().__init__(program, symbol, inplace)
        self.r = CRenderer()
        self.before: list = []   # the parallel loops' task functions
        self.types: dict = {}    # vector type name -> its definitions
        self.lines: list = []
        self.depth = 1

    def begin(self) -> None:
        self.lines += [f"static {_signature(self.program, self.symbol, self.r, self.inplace)} {{", "  (void)err;"]

    def end(self) -> str:
        self.lines += ["  return RXE_OK;", "}"]
        head = list(self.types.values())
        if self.before:
            head.insert(0, '#include "relax_edge/threads.h"\n')
        return "".join(head) + "".join(self.before) + "\n".join(self.lines) + "\n"

    def block(self, first: str, body, var=None) -> None:
        """`{ first; body }`, the body in scope of `var` when given."""
        self.line("{")
        self.line(f"  {first}")
        self.depth += 1
        if var is None:
            self.visit(body)
        else:
            self.scoped(var, body)
        self.depth -= 1
        self.line("}")

    # statements ------------------------------------------------------------
    def visit_Store(self, s: Store):
        r = self.r
        value = narrowed(r.expr(s.value), s.buffer.dtype)
        self.line(f"{r.name(s.buffer, s.buffer.name)}[{r.expr(s.buffer.flat_index(s.indices))}] = {value};")

    def visit_IfThenElse(self, s: IfThenElse):
        self.branch(s, f"if ({self.r.expr(s.cond)}) {{", "} else {", "}")

    def visit_Let(self, s: Let):
        r = self.r
        self.block(f"const {c_value_type(s.var.dtype)} {r.name(s.var, s.var.name)} = {r.expr(s.value)};", s.body,
                   s.var)

    def visit_Allocate(self, s: Allocate):
        b = s.buffer
        self.block(f"{c_type(b.dtype)} {self.r.name(b, b.name)}[{int(b.numel())}];", s.body)

    def visit_Assert(self, s: Assert):
        r = self.r
        message = c_string(self.assert_message(s))
        values = "".join(f", (int64_t)({r.expr(v)})" for v in s.values)
        error = f"rxe_error_set(err, RXE_ERR_INDEX, {message}{values})"
        if self.task is None:
            self.line(f"if (!{r.expr(s.cond)}) return {error};")
            return
        self.line(f"if (!{r.expr(s.cond)}) {{")
        self.line(f"  if (!__atomic_test_and_set(&ctx->failed, __ATOMIC_ACQ_REL)) ctx->status = {error};")
        self.line("  return;")
        self.line("}")

    # loops ------------------------------------------------------------
    def serial_loop(self, s: For):
        v = self.r.name(s.var, s.var.name)
        self.line(f"for (int64_t {v} = 0; {v} < {self.r.int_expr(s.extent)}; ++{v}) {{")
        self.depth += 1
        self.scoped(s.var, s.body)
        self.depth -= 1
        self.line("}")

    def unrolled_loop(self, s: For):
        self.line(f"#pragma GCC unroll {int(s.extent)}")
        self.serial_loop(s)

    def vector_loop(self, s: For, lanes: int, stores: tuple):
        vr = CVectorRenderer(self.r, s.var, lanes, self.types)
        self.line(f"{{  /* {s.var.name}: {lanes} lanes */")
        for x in stores:
            self.line(f"  {vr.store(x)}")
        self.line("}")

    def parallel_loop(self, s: For):
        """The parallel loop `s` as a task function SYMBOL_parK over a
        context struct of everything it uses; here, the call that runs it."""
        program, r = self.program, self.r
        name = f"{self.symbol}_par{len(self.before)}"
        inputs, buffers, sizes = set(program.inputs), len(program.params), len(program.size_params)

        def field_type(k: int, v) -> str:   # by position in captured(): buffers, sizes, then the scope
            if k < buffers:
                return f"const {c_type(v.dtype)}*" if v in inputs else f"{c_type(v.dtype)}*"
            if k < buffers + sizes:
                return "int64_t"
            return f"const {c_value_type(v.dtype)}" if hasattr(v, "dtype") else "int64_t"
        fields = [(field_type(k, v), r.name(v, v.name)) for k, v in enumerate(self.captured())]
        fields.append(("rxe_error_t*", "err"))
        struct = ["typedef struct {"] + [f"  {t} {n};" for t, n in fields] + \
                 ["  rxe_status_t status;", "  unsigned char failed;", f"}} {name}_ctx;"]
        restrict = "" if self.inplace else " restrict"
        fn = [f"static void {name}(void* task, int64_t begin, int64_t end, int thread) {{",
              f"  {name}_ctx* ctx = ({name}_ctx*)task;", "  (void)thread;"]
        fn += [f"  {t}{restrict if t.endswith('*') and n != 'err' else ''} {n} = ctx->{n}; (void){n};"
               for t, n in fields]
        v = r.name(s.var, s.var.name)
        fn.append(f"  for (int64_t {v} = begin; {v} < end; ++{v}) {{")
        outer = self.lines, self.depth
        self.lines, self.depth, self.task = fn, 2, name
        self.visit(s.body)
        (self.lines, self.depth), self.task = outer, None
        fn += ["  }", "}"]
        self.before.append("\n".join(struct + fn) + "\n")
        self.line("{")
        self.line(f"  {name}_ctx ctx = {{{', '.join(n for _, n in fields)}, RXE_OK, 0}};")
        self.line(f"  rxe_threads_parallel_for({r.int_expr(s.extent)}, {name}, &ctx);")
        self.line("  if (ctx.failed) return ctx.status;")
        self.line("}")


def render_kernel(program: TensorProgram, symbol: str, *, inplace: bool) -> str:
    """A static C function for `program`: buffers as pointers (inputs const,
    all restrict unless `inplace`: an output aliases an input, as the memory
    plan says), the size parameters as int64_t, and the error
    record; it returns a status (not RXE_OK only when an Assert fails).

    Scheduled loops (kernel_skeleton.py decides which): a vectorized loop
    becomes vector statements (CVectorRenderer), an unrolled one gets
    `#pragma GCC unroll`, and a parallel one is outlined into
    `SYMBOL_parK(ctx, begin, end, thread)` over a context struct of
    everything it uses, run by rxe_threads_parallel_for; the first failed
    Assert in any task is the kernel's status."""
    return CKernel(program, symbol, inplace).emit()
