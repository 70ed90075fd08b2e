"""Tensor programs to LLVM IR functions, built with llvmlite's IRBuilder.

1. The statement walk is codegen/kernel_skeleton.py's, shared with the C
   emitter (codegen/c/kernel.py): the same statements and loop decisions;
   what differs is the hooks and the tables below, from node kind to
   IRBuilder call.
2. A kernel has the C kernel's signature: buffers as pointers (`noalias`
   unless the kernel runs in place), the size parameters as i64, the error
   record last; it returns an i32 status (0 is RXE_OK). A failed Assert
   returns `rxe_error_set(err, RXE_ERR_INDEX, "<message with %d>", ...)`.
3. Integers: index arithmetic (canonical `IntExpr`s) is i64 with `nsw`, as
   C's signed overflow is undefined; floor division and modulo are plain
   `sdiv`/`srem` where the prover shows the operands non-negative, else the
   correction sequence of kernel.h's rxe_floordiv_i64 / rxe_floormod_i64.
   `IndexArithmetic` is this lowering alone: the primitive operations under
   tir/render.py's IndexLowering (the decomposition every backend shares);
   the host functions (host.py) use it too, with the sizes read from their
   sizes array.
4. Booleans are i1 in registers and one byte (0 or 1) in memory.
5. Scheduled loops: a vectorized loop (constant extent L) becomes <L x T>
   IR (VectorEmitter): contiguous loads and stores as vectors, arithmetic,
   min/max and float compares/selects lane-wise, anything else built lane
   by lane; an unrolled loop is emitted once per iteration; a parallel loop
   is outlined into `SYMBOL.parK(ctx, begin, end, thread)` over a context
   of every value it uses and run by rxe_threads_parallel_for, the first failed
   Assert of any task recording the kernel's status.
6. Floats follow IEEE like the C build (no fast-math flags): min/max are
   `a < b ? a : b` / `a > b ? a : b` (RXE_MIN/RXE_MAX), math goes to LLVM
   intrinsics where they exist and to libm otherwise (tanh, erf); on targets
   without an OS every math function but fabs is the runtime's portable
   rxe_* version, as kernel.h selects with RXE_NO_LIBM. float32 exp, erf
   and tanh are inline code (F32Math), scalar and vector alike: kernel.h's
   RXE_F32_MATH template operation for operation, with its constants, so C
   and LLVM kernels agree.
"""

from __future__ import annotations

from llvmlite import ir

from ...errors import RelaxEdgeError
from ...ir.shape import SizeVar
from ...tir.analysis import at_lane
from ...tir.expr import BinOp, Cast, Compare, Const, Index, Intrinsic, Load, Logical, Not, ScalarVar, Select, is_float
from ...tir.program import TensorProgram
from ...tir.render import IndexLowering
from ...tir.stmt import Allocate, Assert, For, IfThenElse, Let, Store
from ..kernel_skeleton import KernelSkeleton, VectorSkeleton

I1, I8, I16, I32, I64 = ir.IntType(1), ir.IntType(8), ir.IntType(16), ir.IntType(32), ir.IntType(64)
PTR = ir.PointerType()
RXE_OK, RXE_ERR_INDEX = 0, 11

# dtype -> type in registers; bool is stored as a byte
TYPES = {"float32": ir.FloatType(), "float64": ir.DoubleType(), "int8": I8, "int16": I16, "int32": I32,
         "int64": I64, "uint8": I8, "uint16": I16, "uint32": I32, "uint64": I64, "bool": I1}
BITS = {"float32": 32, "float64": 64, "int8": 8, "int16": 16, "int32": 32, "int64": 64, "uint8": 8, "uint16": 16,
        "uint32": 32, "uint64": 64, "bool": 1}
# float16 and bfloat16: i16 bits in memory, float in registers; the runtime's NAME_widen after a
# load, NAME_narrow (round to nearest even) before a store (runtime_c/src/half.c, as the C backend)
NARROW_FLOATS = {"float16": "rxe_half", "bfloat16": "rxe_bfloat"}
TYPES.update({name: ir.FloatType() for name in NARROW_FLOATS})
BITS.update({name: 32 for name in NARROW_FLOATS})
MEMORY_BYTES = {**{name: max(bits // 8, 1) for name, bits in BITS.items()}, "float16": 2, "bfloat16": 2}
UNSIGNED = ("uint8", "uint16", "uint32", "uint64", "bool")

# node kind -> IRBuilder method, by operand kind
FLOAT_BINARY = {"add": "fadd", "sub": "fsub", "mul": "fmul", "div": "fdiv"}
INT_BINARY = {"add": "add", "sub": "sub", "mul": "mul", "div": "sdiv", "floordiv": "sdiv", "floormod": "srem"}
UINT_BINARY = {"add": "add", "sub": "sub", "mul": "mul", "div": "udiv", "floordiv": "udiv", "floormod": "urem"}
INT_BINARY.update({"bitand": "and_", "bitor": "or_", "bitxor": "xor", "shl": "shl", "shr": "ashr"})
UINT_BINARY.update({"bitand": "and_", "bitor": "or_", "bitxor": "xor", "shl": "shl", "shr": "lshr"})
# C's `a != b` is true for NaN (unordered); every other comparison is ordered
FLOAT_COMPARE = {"lt": ("fcmp_ordered", "<"), "le": ("fcmp_ordered", "<="), "gt": ("fcmp_ordered", ">"),
                 "ge": ("fcmp_ordered", ">="), "eq": ("fcmp_ordered", "=="), "ne": ("fcmp_unordered", "!=")}
INT_COMPARE = {"lt": "<", "le": "<=", "gt": ">", "ge": ">=", "eq": "==", "ne": "!="}
MINMAX = {"min": "lt", "max": "gt"}   # min = a < b ? a : b, as RXE_MIN and rxe_min_i64
LOGICAL = {"and": "and_", "or": "or_"}

# math: name -> (how, symbol). "intrinsic": llvm.NAME.fN; "call": SYMBOL (+ "f"
# for float32); "double": SYMBOL on double, the float32 value widened.
HOSTED_MATH = {
    "exp": ("intrinsic", "llvm.exp"), "log": ("intrinsic", "llvm.log"), "sqrt": ("intrinsic", "llvm.sqrt"),
    "pow": ("intrinsic", "llvm.pow"), "fabs": ("intrinsic", "llvm.fabs"), "floor": ("intrinsic", "llvm.floor"),
    "ceil": ("intrinsic", "llvm.ceil"), "round": ("intrinsic", "llvm.rint"),
    "tanh": ("call", "tanh"), "erf": ("call", "erf"),
}
FREESTANDING_MATH = {
    "exp": ("call", "rxe_exp"), "log": ("call", "rxe_log"), "sqrt": ("call", "rxe_sqrt"),
    "pow": ("call", "rxe_pow"), "tanh": ("call", "rxe_tanh"), "erf": ("call", "rxe_erf"),
    "fabs": ("intrinsic", "llvm.fabs"), "floor": ("double", "rxe_floor"), "ceil": ("double", "rxe_ceil"),
    "round": ("double", "rxe_round"),
}
LIBM_ONLY = ("sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "asinh", "acosh", "atanh", "fmod")
HOSTED_MATH.update({name: ("call", name) for name in LIBM_ONLY})          # libm's sin, sinf, ...
FREESTANDING_MATH.update({name: ("call", "rxe_" + name) for name in LIBM_ONLY})   # math.c's rxe_sin, rxe_sinf, ...
INTRINSIC_SUFFIX = {"float32": "f32", "float64": "f64"}

F32_INLINE_MATH = ("exp", "erf", "tanh")   # float32 math emitted inline (F32Math), scalar and vector
# kernel.h's RXE_F32_MATH constants (hexadecimal float32), polynomial coefficients highest degree first
F32_EXP_POLY = ("0x1.a0d2cep-13", "0x1.6e879cp-10", "0x1.11121p-7", "0x1.555382p-5", "0x1.555554p-3", "0x1p-1")
F32_ERF_SMALL = ("-0x1.39d988p-11", "0x1.472ae6p-8", "-0x1.b68828p-6", "0x1.ce1a2cp-4", "-0x1.8126e4p-2",
                 "0x1.06eba6p-3")
F32_ERF_BIG = ("0x1.b70a8p-20", "-0x1.81d0f8p-15", "0x1.3875c4p-11", "-0x1.379478p-8", "0x1.b0936ap-6",
               "-0x1.c2b988p-4", "-0x1.438532p-1", "-0x1.2154cep+0", "0x1.460c3ap-12")
F32_TANH_POLY = ("-0x1.75e1d4p-8", "0x1.52269cp-6", "-0x1.b83c5ap-5", "0x1.110726p-3", "-0x1.555532p-2")
F32_EXP_CONSTANTS = {"log2e": "0x1.715476p+0", "round": "0x1.8p23", "ln2_hi": "0x1.62e4p-1", "ln2_lo": "0x1.7f7d1cp-20",
                     "flush": "-0x1.5d589ep+6"}


def llvm_type(dtype: str) -> ir.Type:
    if dtype not in TYPES:
        raise RelaxEdgeError(f"dtype {dtype} is not supported by the LLVM backend")
    return TYPES[dtype]


def memory_type(dtype: str) -> ir.Type:
    if dtype in NARROW_FLOATS:
        return I16
    return I8 if dtype == "bool" else llvm_type(dtype)


class IndexArithmetic(IndexLowering):
    """Canonical IntExprs (index arithmetic, sizes) as i64 arithmetic at the
    builder `self.b`; a subclass says where each size variable's value is
    (`size_value`)."""

    b: ir.IRBuilder

    def int_const(self, k: int) -> ir.Value:
        return ir.Constant(I64, k)

    def int_mul(self, a, b) -> ir.Value:
        return self.b.mul(a, b, flags=["nsw"])

    def int_add(self, a, b) -> ir.Value:
        return self.b.add(a, b, flags=["nsw"])

    def int_division(self, kind: str, x, y, nonneg: bool) -> ir.Value:
        op = "floordiv" if kind == "div" else "floormod"
        return getattr(self.b, INT_BINARY[op])(x, y) if nonneg else self.floor_division(op, x, y)

    def int_minmax(self, kind: str, x, y) -> ir.Value:
        return self.b.select(self.b.icmp_signed(INT_COMPARE[MINMAX[kind]], x, y), x, y)

    def floor_division(self, op: str, a, b) -> ir.Value:
        """Python's a // b and a % b: truncate, then step down where the
        remainder is non-zero and its sign differs from the divisor's."""
        bld, zero = self.b, ir.Constant(a.type, 0)
        q, r = bld.sdiv(a, b), bld.srem(a, b)
        signs_differ = bld.icmp_signed("<", bld.xor(r, b), zero)
        adjust = bld.and_(bld.icmp_signed("!=", r, zero), signs_differ)
        if op == "floordiv":
            return bld.sub(q, bld.zext(adjust, a.type))
        return bld.add(r, bld.select(adjust, b, zero))


class KernelEmitter(KernelSkeleton, IndexArithmetic):
    """Emits one tensor program as a function of `module`: the statement
    hooks of the skeleton and, by the same dispatch, one hook per expression
    class; inside an outlined parallel loop, `task` is (context pointer, its
    struct type)."""

    def __init__(self, module: ir.Module, program: TensorProgram, symbol: str, math: dict, inplace: bool):
        super().__init__(program, symbol, inplace)
        self.module = module
        self.math = math
        self.values = {}     # id(size/loop variable, scalar, buffer) -> ir.Value
        self.strings = 0     # messages emitted so far
        self.b: ir.IRBuilder | None = None
        self.entry: ir.Block | None = None   # local buffers are allocated here
        self.start: ir.Block | None = None   # the body starts here
        self.function: ir.Function | None = None
        self.err: ir.Argument | None = None
        self.tasks = 0           # parallel loops outlined so far

    # function ------------------------------------------------------------
    def begin(self) -> None:
        p = self.program
        params = [PTR] * len(p.params) + [I64] * len(p.size_params) + [PTR]
        fn = self.function = ir.Function(self.module, ir.FunctionType(I32, params), self.symbol)
        fn.attributes.add("nounwind")
        args = list(fn.args)
        for buf, arg in zip(p.params, args):
            arg.name = buf.name
            if not self.inplace:   # in place: an output aliases an input
                arg.add_attribute("noalias")
            self.values[id(buf)] = arg
        for var, arg in zip(p.size_params, args[len(p.params):]):
            arg.name = var.name
            self.values[id(var)] = arg
        self.err = args[-1]
        self.err.name = "err"
        self.entry = fn.append_basic_block("entry")
        self.start = fn.append_basic_block("start")
        self.b = ir.IRBuilder(self.start)

    def end(self) -> ir.Function:
        self.b.ret(ir.Constant(I32, RXE_OK))
        ir.IRBuilder(self.entry).branch(self.start)
        return self.function

    # statements ------------------------------------------------------------
    def visit_Store(self, s: Store):
        value = self.expr(s.value)
        if s.buffer.dtype == "bool":
            value = self.b.zext(value, I8)
        elif s.buffer.dtype in NARROW_FLOATS:
            value = self.narrow(value, s.buffer.dtype)
        self.b.store(value, self.address(s.buffer, s.indices), align=self.align(s.buffer.dtype))

    def visit_IfThenElse(self, s: IfThenElse):
        b = self.b
        cond = self.truth(self.expr(s.cond), s.cond.dtype)
        if s.else_body is None:
            with b.if_then(cond):
                self.visit(s.then_body)
        else:
            with b.if_else(cond) as (then, otherwise):
                with then:
                    self.visit(s.then_body)
                with otherwise:
                    self.visit(s.else_body)

    def visit_Let(self, s: Let):
        self.values[id(s.var)] = self.expr(s.value)
        self.scoped(s.var, s.body)

    def visit_Allocate(self, s: Allocate):
        with self.b.goto_block(self.entry):
            self.values[id(s.buffer)] = self.b.alloca(memory_type(s.buffer.dtype), int(s.buffer.numel()),
                                                      name=s.buffer.name)
        self.visit(s.body)

    # loops ------------------------------------------------------------
    def vector_loop(self, s: For, lanes: int, stores: tuple) -> None:
        VectorEmitter(self, s.var, lanes).stores(stores)

    def unrolled_loop(self, s: For) -> None:
        """The body once per iteration, the variable a constant in each."""
        for k in range(int(s.extent)):
            self.values[id(s.var)] = ir.Constant(I64, k)
            self.scoped(s.var, s.body)

    def serial_loop(self, s: For) -> None:
        self.loop(s)

    def loop(self, s: For, begin=None, end=None) -> None:
        """for (int64_t i = begin; i < end; ++i), [0, extent) by default, the
        end computed once before."""
        b = self.b
        extent = self.int_expr(s.extent) if end is None else end
        before = b.block
        head = b.append_basic_block(f"{s.var.name}.head")
        body = b.append_basic_block(f"{s.var.name}.body")
        done = b.append_basic_block(f"{s.var.name}.done")
        b.branch(head)
        b.position_at_end(head)
        i = b.phi(I64, name=s.var.name)
        i.add_incoming(ir.Constant(I64, 0) if begin is None else begin, before)
        b.cbranch(b.icmp_signed("<", i, extent), body, done)
        b.position_at_end(body)
        self.values[id(s.var)] = i
        self.scoped(s.var, s.body)
        i.add_incoming(b.add(i, ir.Constant(I64, 1), flags=["nuw", "nsw"]), b.block)
        b.branch(head)
        b.position_at_end(done)

    def field(self, ctx, slots, k) -> ir.Value:
        """The address of slot `k` of the task context `ctx` (of struct type `slots`)."""
        k = k % len(slots.elements)
        address = self.b.gep(ctx, [ir.Constant(I32, 0), ir.Constant(I32, k)], inbounds=True, source_etype=slots)
        address.type = PTR   # llvmlite types a GEP by its element; the IR pointer is opaque either way
        return address

    def parallel_loop(self, s: For) -> None:
        """Outline `s` into a task function; run it with rxe_threads_parallel_for and
        return the recorded status when a task failed."""
        p = self.program
        captured = self.captured()
        values = [self.values[id(c)] for c in captured] + [self.err]
        slots = ir.LiteralStructType([v.type for v in values] + [I32, I8])
        self.tasks += 1
        task_fn = ir.Function(self.module, ir.FunctionType(ir.VoidType(), [PTR, I64, I64, I32]),
                              f"{self.symbol}.par{self.tasks}")
        task_fn.attributes.add("nounwind")
        inner = KernelEmitter(self.module, p, task_fn.name, self.math, self.inplace)
        inner.entry = task_fn.append_basic_block("entry")
        start = task_fn.append_basic_block("start")
        inner.b = ir.IRBuilder(inner.entry)
        ctx = task_fn.args[0]
        for k, c in enumerate(captured):
            inner.values[id(c)] = inner.b.load(inner.field(ctx, slots, k), typ=values[k].type)
        inner.err = inner.b.load(inner.field(ctx, slots, len(captured)), typ=PTR)
        inner.b.branch(start)
        inner.b = ir.IRBuilder(start)
        inner.task, inner.scope = (ctx, slots), list(self.scope)
        inner.loop(s, begin=task_fn.args[1], end=task_fn.args[2])
        inner.b.ret_void()
        b = self.b
        with b.goto_block(self.entry):
            ctx = b.alloca(slots, name="task")
        for k, v in enumerate(values):
            b.store(v, self.field(ctx, slots, k))
        b.store(ir.Constant(I32, RXE_OK), self.field(ctx, slots, -2))
        b.store(ir.Constant(I8, 0), self.field(ctx, slots, -1))
        run = self.runtime_function("rxe_threads_parallel_for", ir.VoidType(), [I64, PTR, PTR])
        b.call(run, [self.int_expr(s.extent), task_fn, ctx])
        failed = b.icmp_unsigned("!=", b.load(self.field(ctx, slots, -1), typ=I8), ir.Constant(I8, 0))
        with b.if_then(failed, likely=False):
            b.ret(b.load(self.field(ctx, slots, -2), typ=I32))

    def visit_Assert(self, s: Assert) -> None:
        b = self.b
        text = self.assert_message(s)
        values = [self.cast(self.expr(v), v.dtype, "int64") for v in s.values]
        with b.if_then(b.not_(self.truth(self.expr(s.cond), s.cond.dtype)), likely=False):
            error = self.runtime_function("rxe_error_set", I32, [PTR, I32, PTR], var_arg=True)
            args = [self.err, ir.Constant(I32, RXE_ERR_INDEX), self.string(text), *values]
            if self.task is None:
                b.ret(b.call(error, args))
                return
            ctx, slots = self.task   # first failure wins: claim the flag, record the status
            first = b.icmp_unsigned("==", b.atomic_rmw("xchg", self.field(ctx, slots, -1), ir.Constant(I8, 1),
                                                       "acq_rel"), ir.Constant(I8, 0))
            with b.if_then(first):
                b.store(b.call(error, args), self.field(ctx, slots, -2))
            b.ret_void()

    # expressions ------------------------------------------------------------
    def expr(self, e) -> ir.Value:
        """`e` as a value at the builder."""
        return self.visit(e)

    def visit_Index(self, e: Index):
        return self.int_expr(e.value)

    def visit_Const(self, e: Const):
        return self.constant(e.value, e.dtype)

    def visit_ScalarVar(self, e: ScalarVar):
        return self.values[id(e)]

    def visit_Load(self, e: Load):
        return self.load(e)

    def visit_BinOp(self, e: BinOp):
        return self.binary(e.op, self.expr(e.a), self.expr(e.b), e.dtype)

    def visit_Compare(self, e: Compare):
        return self.compare(e.op, self.expr(e.a), self.expr(e.b), e.a.dtype)

    def visit_Logical(self, e: Logical):
        a, b = self.truth(self.expr(e.a), e.a.dtype), self.truth(self.expr(e.b), e.b.dtype)
        return getattr(self.b, LOGICAL[e.op])(a, b)

    def visit_Not(self, e: Not):
        return self.b.not_(self.truth(self.expr(e.a), e.a.dtype))

    def visit_Select(self, e: Select):
        cond = self.truth(self.expr(e.cond), e.cond.dtype)
        return self.b.select(cond, self.expr(e.a), self.expr(e.b))

    def visit_Cast(self, e: Cast):
        return self.cast(self.expr(e.a), e.a.dtype, e.dtype)

    def visit_Reinterpret(self, e):   # tir.expr.Reinterpret
        return self.reinterpret(self.expr(e.a), e.a.dtype, e.dtype)

    def visit_Intrinsic(self, e: Intrinsic):
        return self.intrinsic(e.name, [self.expr(a) for a in e.args], e.dtype)

    def constant(self, value, dtype: str) -> ir.Constant:
        return ir.Constant(llvm_type(dtype), value if is_float(dtype) else int(value))

    def binary(self, op: str, a, b, dtype: str) -> ir.Value:
        if op in MINMAX:
            return self.b.select(self.compare(MINMAX[op], a, b, dtype), a, b)
        if op == "pow":
            return self.intrinsic("pow", [a, b], dtype)
        if is_float(dtype):
            if op not in FLOAT_BINARY:
                raise RelaxEdgeError(f"{op} on {dtype} is not supported by the LLVM backend")
            return getattr(self.b, FLOAT_BINARY[op])(a, b)
        if op in ("floordiv", "floormod") and dtype not in UNSIGNED:
            return self.floor_division(op, a, b)
        return getattr(self.b, (UINT_BINARY if dtype in UNSIGNED else INT_BINARY)[op])(a, b)

    def compare(self, op: str, a, b, dtype: str) -> ir.Value:
        if is_float(dtype):
            method, pred = FLOAT_COMPARE[op]
            return getattr(self.b, method)(pred, a, b)
        method = self.b.icmp_unsigned if dtype in UNSIGNED else self.b.icmp_signed
        return method(INT_COMPARE[op], a, b)

    def truth(self, value, dtype: str) -> ir.Value:
        """An i1 for a condition (C's `x != 0` for non-bool values)."""
        return value if dtype == "bool" else self.compare("ne", value, ir.Constant(value.type, 0), dtype)

    def narrow(self, value, dtype: str) -> ir.Value:
        """A float value as the i16 bits of float16 / bfloat16 `dtype`."""
        return self.b.call(self.runtime_function(f"{NARROW_FLOATS[dtype]}_narrow", I16, [ir.FloatType()]), [value])

    def widen(self, bits, dtype: str) -> ir.Value:
        return self.b.call(self.runtime_function(f"{NARROW_FLOATS[dtype]}_widen", ir.FloatType(), [I16]), [bits])

    def cast(self, value, src: str, dst: str) -> ir.Value:
        b, to = self.b, llvm_type(dst)
        if dst == "bool":
            return self.truth(value, src)
        if dst in NARROW_FLOATS:   # rounded to the narrow type, held as float (a float16 value too, as in C)
            single = value if src in NARROW_FLOATS else self.cast(value, src, "float32")   # narrow: float already
            return self.widen(self.narrow(single, dst), dst)
        if src == dst:
            return value
        if src in NARROW_FLOATS:
            src = "float32"
        if is_float(src) and is_float(dst):
            return (b.fpext if BITS[dst] > BITS[src] else b.fptrunc)(value, to)
        if is_float(dst):
            return (b.uitofp if src in UNSIGNED else b.sitofp)(value, to)
        if is_float(src):
            return (b.fptoui if dst in UNSIGNED else b.fptosi)(value, to)
        if BITS[dst] < BITS[src]:
            return b.trunc(value, to)
        if BITS[dst] > BITS[src]:
            return (b.zext if src in UNSIGNED else b.sext)(value, to)
        return value

    def reinterpret(self, value, src: str, dst: str) -> ir.Value:
        """`bitcast`; float16 and bfloat16 values are their i16 bits, narrowed from and widened to float."""
        bits = self.narrow(value, src) if src in NARROW_FLOATS else value
        bits = self.b.bitcast(bits, memory_type(dst)) if bits.type != memory_type(dst) else bits
        return self.widen(bits, dst) if dst in NARROW_FLOATS else bits

    def intrinsic(self, name: str, args: list, dtype: str) -> ir.Value:
        dtype = "float32" if dtype in NARROW_FLOATS else dtype
        if dtype == "float32" and name in F32Math.NAMES:
            return getattr(F32Math(self.b, args[0].type), name)(args[0])
        how, symbol = self.math[name]
        ftype = llvm_type(dtype)
        if how == "intrinsic":
            fn = self.runtime_function(f"{symbol}.{INTRINSIC_SUFFIX[dtype]}", ftype, [ftype] * len(args))
            return self.b.call(fn, args)
        if how == "call":
            fn = self.runtime_function(symbol + ("f" if dtype == "float32" else ""), ftype, [ftype] * len(args))
            return self.b.call(fn, args)
        double = ir.DoubleType()   # "double": the runtime's double version, rounded back
        wide = [self.cast(a, dtype, "float64") for a in args]
        result = self.b.call(self.runtime_function(symbol, double, [double] * len(args)), wide)
        return self.cast(result, "float64", dtype)

    def size_value(self, var: SizeVar) -> ir.Value:
        return self.values[id(var)]

    # memory ------------------------------------------------------------
    def address(self, buffer, indices) -> ir.Value:
        return self.flat_address(buffer, buffer.flat_index(indices))

    def flat_address(self, buffer, offset) -> ir.Value:
        offset = self.expr(offset)
        return self.b.gep(self.values[id(buffer)], [offset], inbounds=True, source_etype=memory_type(buffer.dtype))

    def load(self, e: Load) -> ir.Value:
        dtype = e.buffer.dtype
        value = self.b.load(self.address(e.buffer, e.indices), align=self.align(dtype), typ=memory_type(dtype))
        if dtype in NARROW_FLOATS:
            return self.widen(value, dtype)
        return self.b.icmp_unsigned("!=", value, ir.Constant(I8, 0)) if dtype == "bool" else value

    @staticmethod
    def align(dtype: str) -> int:
        return MEMORY_BYTES[dtype]

    # module-level symbols ------------------------------------------------------
    def runtime_function(self, name: str, ret, params, var_arg: bool = False) -> ir.Function:
        fn = self.module.globals.get(name)
        if fn is None:
            fn = ir.Function(self.module, ir.FunctionType(ret, params, var_arg=var_arg), name)
        return fn

    def string(self, text: str) -> ir.GlobalVariable:
        data = bytearray(text.encode() + b"\0")
        self.strings += 1
        g = ir.GlobalVariable(self.module, ir.ArrayType(I8, len(data)), f"{self.symbol}.message{self.strings}")
        g.global_constant, g.linkage, g.unnamed_addr = True, "private", True
        g.initializer = ir.Constant(ir.ArrayType(I8, len(data)), data)
        return g


class VectorEmitter(VectorSkeleton):
    """The body of a vectorized loop over `var` as <lanes x T> IR at the
    kernel emitter's builder; uniform expressions stay scalar."""

    def __init__(self, kernel: KernelEmitter, var, lanes: int):
        super().__init__(var, lanes)
        self.k = kernel

    MATH = F32_INLINE_MATH

    def vector_type(self, dtype):
        return ir.VectorType(llvm_type(dtype), self.lanes)

    def stores(self, stores) -> None:
        """Each store of a vectorized loop's body as one vector store."""
        for st in stores:
            value = self.vec(st.value)
            address = self.address(st.buffer, st.indices)
            address.type = PTR   # llvmlite types a GEP by its element; the IR pointer is opaque either way
            self.k.b.store(value, address, align=self.k.align(st.buffer.dtype))

    def address(self, buffer, indices):
        return self.k.flat_address(buffer, self.first_lane(buffer, indices))

    def scalar(self, e):
        return self.k.expr(e)

    def scalar_condition(self, cond):
        return self.k.truth(self.k.expr(cond), cond.dtype)

    def broadcast(self, value, dtype):
        b, vt = self.k.b, self.vector_type(dtype)
        one = b.insert_element(ir.Constant(vt, ir.Undefined), value, ir.Constant(I32, 0))
        zeros = ir.Constant(ir.VectorType(I32, self.lanes), [0] * self.lanes)
        return b.shuffle_vector(one, ir.Constant(vt, ir.Undefined), zeros)

    def vload(self, e, vt):
        return self.k.b.load(self.address(e.buffer, e.indices), typ=vt, align=self.k.align(e.dtype))

    def varith(self, op, a, b, vt):
        return getattr(self.k.b, FLOAT_BINARY[op])(a, b)

    def vminmax(self, op, a, b, dtype, vt):
        return self.k.b.select(self.k.compare(MINMAX[op], a, b, dtype), a, b)

    def vcast(self, x, src, dst, vt):
        if src == dst:
            return x
        return (self.k.b.fpext if BITS[dst] > BITS[src] else self.k.b.fptrunc)(x, vt)

    def vmath(self, name, x, vt):
        return self.k.intrinsic(name, [x], "float32")

    def vselect(self, cond, a, b, vt):
        return self.k.b.select(cond, a, b)

    vblend = vselect

    def vcompare(self, op, a, b, dtype):
        return self.k.compare(op, a, b, dtype)

    def by_lanes(self, e, vt):
        out = ir.Constant(self.vector_type(e.dtype), ir.Undefined)
        for lane in range(self.lanes):
            out = self.k.b.insert_element(out, self.k.expr(at_lane(e, self.var, lane)), ir.Constant(I32, lane))
        return out


class F32Math:
    """float32 exp, erf and tanh of a float or <L x float> value at builder
    `b`: kernel.h's RXE_F32_MATH, the same operations in the same order."""

    NAMES = F32_INLINE_MATH

    def __init__(self, b: ir.IRBuilder, ftype):
        self.b, self.ftype = b, ftype
        lanes = getattr(ftype, "count", None)
        self.itype = I32 if lanes is None else ir.VectorType(I32, lanes)

    def f(self, value) -> ir.Constant:
        value = float.fromhex(value) if isinstance(value, str) else float(value)
        return ir.Constant(self.ftype, [value] * self.ftype.count if isinstance(self.ftype, ir.VectorType) else value)

    def i(self, value: int) -> ir.Constant:
        return ir.Constant(self.itype, [value] * self.itype.count if isinstance(self.itype, ir.VectorType) else value)

    def select(self, pred: str, a, b, then, otherwise):
        return self.b.select(self.b.fcmp_ordered(pred, a, b), then, otherwise)

    def horner(self, coeffs, x):
        p = self.f(coeffs[0])
        for c in coeffs[1:]:
            p = self.b.fadd(self.b.fmul(p, x), self.f(c))
        return p

    def bits(self, x):
        return self.b.bitcast(x, self.itype)

    def exp(self, x):
        b, k = self.b, F32_EXP_CONSTANTS
        c = self.select(">", x, self.f(k["flush"]), x, self.f(k["flush"]))
        c = self.select("<", c, self.f(89.0), c, self.f(89.0))
        t = b.fadd(b.fmul(c, self.f(k["log2e"])), self.f(k["round"]))
        kf = b.fsub(t, self.f(k["round"]))
        n = b.sub(self.bits(t), self.i(0x4b400000))
        r = b.fsub(c, b.fmul(kf, self.f(k["ln2_hi"])))
        r = b.fsub(r, b.fmul(kf, self.f(k["ln2_lo"])))
        p = b.fadd(b.fmul(self.horner(F32_EXP_POLY, r), b.fmul(r, r)), r)
        p = b.fadd(p, self.f(1.0))
        n1 = b.ashr(n, self.i(1))
        y = b.fmul(p, b.bitcast(b.shl(b.add(n1, self.i(127)), self.i(23)), self.ftype))
        y = b.fmul(y, b.bitcast(b.shl(b.add(b.sub(n, n1), self.i(127)), self.i(23)), self.ftype))
        y = self.select(">", x, self.f(k["flush"]), y, self.f(0.0))
        return self.select("==", x, x, y, x)

    def _odd(self, x, small, big, split):
        """sign(x) * (|x| < split ? small(|x|) : big(|x|))"""
        b = self.b
        a = b.bitcast(b.and_(self.bits(x), self.i(0x7fffffff)), self.ftype)
        sign = b.xor(self.bits(x), self.bits(a))
        y = self.select("<", a, self.f(split), small(a), big(a))
        return b.bitcast(b.or_(self.bits(y), sign), self.ftype)

    def erf(self, x):
        b = self.b

        def small(a):
            return b.fadd(a, b.fmul(a, self.horner(F32_ERF_SMALL, b.fmul(a, a))))

        def big(a):
            c = self.select(">", a, self.f(3.925), self.f(3.925), a)
            return b.fsub(self.f(1.0), self.exp(self.horner(F32_ERF_BIG, c)))
        return self._odd(x, small, big, 0.921875)

    def tanh(self, x):
        b = self.b

        def small(a):
            z = b.fmul(a, a)
            return b.fadd(a, b.fmul(b.fmul(a, z), self.horner(F32_TANH_POLY, z)))

        def big(a):
            return b.fsub(self.f(1.0), b.fdiv(self.f(2.0), b.fadd(self.exp(b.fadd(a, a)), self.f(1.0))))
        return self._odd(x, small, big, 0.625)


def emit_kernels(programs: dict, freestanding: bool, name: str = "kernels", *, inplace) -> ir.Module:
    """An LLVM module with one function per (symbol -> program) entry; the
    caller sets the triple and data layout (codegen/llvm/target.py).
    `inplace`: the symbols whose output aliases an input (from the memory plan)."""
    module = ir.Module(name=name)
    math = FREESTANDING_MATH if freestanding else HOSTED_MATH
    for symbol, program in programs.items():
        aliases = symbol in inplace
        try:
            KernelEmitter(module, program, symbol, math, aliases).emit()
        except RelaxEdgeError as err:
            raise RelaxEdgeError(f"tensor program {program.name}: {err}") from None
    return module
