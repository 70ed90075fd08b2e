"""The numpy interpreter of tensor programs: the executable meaning of a
program, so that legalization is testable without a C compiler.

The program is rendered as Python source (the same expression walk as the
C backend, through a Python table), executed once per call on flat numpy
views of the buffers. Arithmetic happens in Python floats (float64) and is
rounded when stored; integer division and modulo follow the IR's floor
semantics, `div` on integers truncates as C does. float32 arithmetic is
rounded to float32 after every operation and store, as C computes it, so
rounding ties (e.g. resize coordinates) fall the same way. It runs element
by element: use it on small shapes.
"""

from __future__ import annotations

import math
import struct

import numpy as np

from ..errors import InterpretError
from ..ir import bfloat16
from ..ir.shape import evaluate
from .expr import is_float
from .render import IndentedLines, Renderer
from .stmt import Allocate, Assert, For, IfThenElse, Let, Seq, Store
from .visit import StmtVisitor


def _tdiv(a, b):
    if isinstance(a, float) or isinstance(b, float):
        return a / b
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


class _Failed(Exception):
    pass


_F32, _F16, _BITS32 = struct.Struct("<f"), struct.Struct("<e"), struct.Struct("<I")


def _rounded(fmt: struct.Struct, x):
    """x rounded to the float format (to nearest even; inf and nan kept, beyond the range inf)."""
    try:
        return fmt.unpack(fmt.pack(x))[0]
    except OverflowError:
        return math.copysign(math.inf, x)


def _f32(x):
    return _rounded(_F32, x)


def _f16(x):
    return _rounded(_F16, x)


def _bf16(x):
    """x rounded to float32, then to bfloat16 (to nearest even), as runtime_c/src/half.c."""
    u = _BITS32.unpack(_F32.pack(_f32(x)))[0]
    if (u & 0x7FFFFFFF) > 0x7F800000:
        return x
    u = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16) << 16
    return _F32.unpack(_BITS32.pack(u & 0xFFFFFFFF))[0]


# float16 and bfloat16 compute in float32 and are rounded when stored or cast, as the kernels do
_NARROW = {"float16": "_f16", "bfloat16": "_bf16"}
_SINGLE = ("float32", "float16", "bfloat16")   # arithmetic rounded to float32

_RUNTIME = {"_Failed": _Failed, "_f32": _f32, "_f16": _f16, "_bf16": _bf16, "math": math, "_tdiv": _tdiv,
            "_min": min, "_max": max,
            "_fmin": lambda a, b: a if a < b or a != a else b,
            "_fmax": lambda a, b: a if a > b or a != a else b,
            "_erf": math.erf, "_exp": lambda x: math.exp(x) if x < 709 else math.inf,
            "_pow": lambda a, b: math.pow(a, b) if not (a < 0 and b != int(b)) else math.nan,
            "_log": lambda x: math.log(x) if x > 0 else (-math.inf if x == 0 else math.nan),
            "_sqrt": lambda x: math.sqrt(x) if x >= 0 else math.nan,
            "_int": lambda x: int(x) if x == x and abs(x) != math.inf else 0}


def _libm(ufunc):
    """A float64 numpy ufunc as a function of Python floats: NaN and inf as C's libm, no exceptions."""
    def call(*args):
        with np.errstate(all="ignore"):
            return float(ufunc(*args))
    return call


# intrinsic -> numpy ufunc, run as "_NAME(...)"
_LIBM_UFUNCS = {"sin": np.sin, "cos": np.cos, "tan": np.tan, "asin": np.arcsin, "acos": np.arccos,
                "atan": np.arctan, "sinh": np.sinh, "cosh": np.cosh, "asinh": np.arcsinh, "acosh": np.arccosh,
                "atanh": np.arctanh, "fmod": np.fmod}
_RUNTIME.update({f"_{name}": _libm(fn) for name, fn in _LIBM_UFUNCS.items()})

# integer bit operations, wrapped to the dtype's width as C and LLVM compute them
_INT_WIDTH = {"int8": (8, True), "uint8": (8, False), "int16": (16, True), "uint16": (16, False),
              "int32": (32, True), "uint32": (32, False), "int64": (64, True), "uint64": (64, False)}
_BIT_OPS = {"bitand": "({a} & {b})", "bitor": "({a} | {b})", "bitxor": "({a} ^ {b})", "shl": "({a} << {b})",
            "shr": "({a} >> {b})"}


def _wrap_int(value: int, bits: int, signed: bool) -> int:
    value = int(value) & ((1 << bits) - 1)   # int(): a float handed in for an integer buffer truncates
    return value - (1 << bits) if signed and value >> (bits - 1) else value


_RUNTIME["_wrap_int"] = _wrap_int


def _reinterpret(x, src: str, dst: str):
    """The bits of value `x` of `src` read as `dst` (float16 / bfloat16 through their 16 bits)."""
    if src == "bfloat16":
        bits = bfloat16.narrow(np.float32(x))
    elif src in _INT_WIDTH:
        bits = np.array(_wrap_int(x, *_INT_WIDTH[src]), src)
    else:
        bits = np.array(x, src)
    if dst == "bfloat16":
        return float(bfloat16.widen(bits.view(np.uint16)))
    return bits.view(dst).item()


_RUNTIME["_reinterpret"] = _reinterpret


class PythonRenderer(Renderer):
    BINARY = {"add": "({a} + {b})", "sub": "({a} - {b})", "mul": "({a} * {b})",
              "floordiv": "({a} // {b})", "floormod": "({a} % {b})", "pow": "_pow({a}, {b})"}
    LOGICAL = {"and": "({a} and {b})", "or": "({a} or {b})"}
    NOT = "(not {a})"
    SELECT = "({a} if {c} else {b})"
    INTRINSICS = {"exp": "_exp({0})", "log": "_log({0})", "sqrt": "_sqrt({0})", "tanh": "math.tanh({0})",
                  "erf": "_erf({0})", "pow": "_pow({0}, {1})", "fabs": "abs({0})",
                  "floor": "float(math.floor({0}))", "ceil": "float(math.ceil({0}))",
                  "round": "float(round({0}))"}
    INTRINSICS = {**INTRINSICS, **{name: f"_{name}({{0}})" for name in _LIBM_UFUNCS}, "fmod": "_fmod({0}, {1})"}
    RESERVED = frozenset({"math", "abs", "min", "max", "float", "int", "bool", "round", "lambda", "in",
                          "if", "else", "for", "and", "or", "not", "is", "def", "return"})

    def int_division(self, kind, x, y, nonneg):
        return f"({x} // {y})" if kind == "div" else f"({x} % {y})"

    def int_minmax(self, kind, x, y):
        return f"_{kind}({x}, {y})"

    def binary(self, op, a, b, dtype):
        if op == "div":
            text = f"({a} / {b})" if is_float(dtype) else f"_tdiv({a}, {b})"
        elif op in ("min", "max"):
            text = f"_f{op}({a}, {b})" if is_float(dtype) else f"_{op}({a}, {b})"
        elif op in _BIT_OPS:
            text = f"_wrap_int({_BIT_OPS[op].format(a=a, b=b)}, {_INT_WIDTH[dtype][0]}, {_INT_WIDTH[dtype][1]})"
        else:
            text = super().binary(op, a, b, dtype)
        return f"_f32({text})" if dtype in _SINGLE else text

    def constant(self, value, dtype):
        if isinstance(value, float) and (value != value or value in (math.inf, -math.inf)):
            return f"float('{value}')"
        return repr(value)

    def cast(self, x, src, dst):
        if dst == "float32":
            return f"_f32(float({x}))"
        if dst in _NARROW:
            return f"{_NARROW[dst]}(float({x}))"
        if is_float(dst):
            return f"float({x})"
        if dst == "bool":
            return f"bool({x})"
        value = f"_int({x})" if is_float(src) else f"int({x})"
        if dst == "int64" and src != "uint64":   # every other value fits
            return value
        return f"_wrap_int({value}, {_INT_WIDTH[dst][0]}, {_INT_WIDTH[dst][1]})"

    def reinterpret(self, x, src, dst):
        return f"_reinterpret({x}, {src!r}, {dst!r})"

    def intrinsic(self, name, args, dtype):
        text = self.INTRINSICS[name].format(*args)
        return f"_f32({text})" if dtype in _SINGLE else text


class _PythonStatements(IndentedLines, StmtVisitor):
    """Statements as indented Python lines over the expressions of `r`."""

    def __init__(self, r: PythonRenderer, depth: int):
        self.r, self.depth, self.lines = r, depth, []

    def visit_Store(self, s: Store):
        r = self.r
        target = f"{r.name(s.buffer, s.buffer.name)}[{r.expr(s.buffer.flat_index(s.indices))}]"
        value, dtype = r.expr(s.value), s.buffer.dtype
        if dtype == "float32":
            value = f"_f32({value})"
        elif dtype in _NARROW:
            value = f"{_NARROW[dtype]}({value})"
        elif dtype in _INT_WIDTH and dtype != "int64":   # stored integers wrap to their width, as in C and LLVM
            value = f"_wrap_int({value}, {_INT_WIDTH[dtype][0]}, {_INT_WIDTH[dtype][1]})"
        self.line(f"{target} = {value}")

    def visit_For(self, s: For):
        self.line(f"for {self.r.name(s.var, s.var.name)} in range({self.r.int_expr(s.extent)}):")
        self.nested(s.body)

    def visit_IfThenElse(self, s: IfThenElse):
        self.branch(s, f"if {self.r.expr(s.cond)}:", "else:")

    def visit_Let(self, s: Let):
        self.line(f"{self.r.name(s.var, s.var.name)} = {self.r.expr(s.value)}")
        self.visit(s.body)

    def visit_Allocate(self, s: Allocate):
        self.line(f"{self.r.name(s.buffer, s.buffer.name)} = [0] * {int(s.buffer.numel())}")
        self.visit(s.body)

    def visit_Seq(self, s: Seq):
        super().visit_Seq(s)
        if not s.stmts:
            self.line("pass")

    def visit_Assert(self, s: Assert):
        values = ", ".join(self.r.expr(v) for v in s.values)
        self.line(f"if not {self.r.expr(s.cond)}:")
        self.line(f"    raise _Failed({s.message!r}.format({values}))")


def render_python(program) -> tuple:
    """A TensorProgram as the source of one Python function; (source, its name)."""
    r = PythonRenderer()
    params = [r.name(b, b.name) for b in program.params] + [r.name(v, v.name) for v in program.size_params]
    name = r.name(program, "kernel")
    body = _PythonStatements(r, 1)
    body.visit(program.body)
    lines = [f"def {name}({', '.join(params)}):", *body.lines, "    pass"]
    return "\n".join(lines) + "\n", name


def _compiled(program):
    cached = program.attrs.get("_python")
    if cached is None:
        source, name = render_python(program)
        scope = dict(_RUNTIME)
        exec(compile(source, f"<tensor program {program.name}>", "exec"), scope)
        cached = program.attrs["_python"] = scope[name]
    return cached


def run_program(program, args, size_values):
    """Run `program` on numpy `args` (its inputs) with its size parameters
    given in order; returns the outputs (one array or a tuple)."""
    if len(args) != len(program.inputs):
        raise InterpretError(f"program {program.name} takes {len(program.inputs)} inputs, got {len(args)}")
    env = dict(zip(program.size_params, (int(v) for v in size_values)))
    flat = []
    for buf, arr in zip(program.inputs, args):
        arr = np.ascontiguousarray(arr)
        want = int(evaluate(buf.numel(), env))
        if arr.size != want:
            raise InterpretError(f"program {program.name}: input {buf.name} has {arr.size} elements, "
                                 f"its buffer {want}")
        flat.append((bfloat16.widen(arr) if buf.dtype == "bfloat16" else arr).reshape(-1).tolist())
    outs = []
    for buf in tuple(program.outputs) + tuple(program.scratch):
        outs.append([0] * int(evaluate(buf.numel(), env)))
    try:
        _compiled(program)(*flat, *outs, *[env[v] for v in program.size_params])
    except _Failed as err:
        raise InterpretError(f"program {program.name}: {err}") from None
    except (ZeroDivisionError, IndexError, OverflowError, ValueError) as err:
        raise InterpretError(f"program {program.name}: {type(err).__name__}: {err}") from None
    results = []
    for buf, data in zip(program.outputs, outs):
        shape = tuple(int(evaluate(d, env)) for d in buf.shape)
        out = bfloat16.narrow(np.array(data, np.float32)) if buf.dtype == "bfloat16" else np.array(data, buf.dtype)
        results.append(out.reshape(shape))
    return results[0] if len(results) == 1 else tuple(results)
