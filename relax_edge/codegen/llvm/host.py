"""The graph's host functions and the module's entry table as LLVM IR.

1. The operations are codegen/host_program.py's, walked the way the C
   renderer (codegen/c/host.py) walks them; what differs is the table from
   operation kind to IRBuilder calls. Per graph function: an internal bind
   and layout, and the public PREFIX_main_workspace_size,
   PREFIX_main_plan_shapes and PREFIX_main; a fallible operation returns its
   status from the entry when it is not RXE_OK.
2. Checks, copies and the clock are calls into runtime_c (RUNTIME: name ->
   signature), declared with the C ABI's argument extensions (uint8_t
   zeroext, int32_t and the status enum signext, as riscv64 requires);
   rxe_error_set is variadic with int64_t arguments.
3. Integers of size variables are lowered like the kernels' index
   arithmetic (kernel.IndexArithmetic), each size read from the entry's
   sizes array (the C build's sizes struct).
4. The ABI's structs (rxe_tensor_t, rxe_arg_info_t, rxe_function_t,
   rxe_module_t, ...) are LLVM types made from the ctypes mirror
   (llvm/abi.py) and laid out by the target's data layout: 32-bit pointers
   on armv7 and Cortex-M. `PREFIX_module` is the exported entry table.
5. `profile=True` is the C build's RXE_PROFILE: a mutable table of
   rxe_profile_entry_t that the entry table points at, and
   rxe_profile_now_ns() read around each kernel call. Without it the
   profile operations emit nothing and the table is (0, NULL).
"""

from __future__ import annotations

from llvmlite import ir

from .. import abi as mirror
from ..host_program import (
    ENTRIES,
    FALLIBLE,
    Address,
    Bind,
    BindSize,
    Branch,
    CallKernel,
    CheckBroadcast,
    CheckDim,
    CheckTensor,
    CheckWorkspace,
    CodegenError,
    Copy,
    CopySlot,
    Dim,
    EndBranch,
    HostFunction,
    HostModule,
    Layout,
    LoopBegin,
    LoopEnd,
    ProfileBegin,
    ProfileEnd,
    SetSize,
    SizeValue,
    StoreCounter,
    StoreDim,
    StoreShape,
    View,
)
from . import abi
from .kernel import I8, I32, I64, IndexArithmetic

PTR = abi.PTR
I16 = ir.IntType(16)
VOID = ir.VoidType()
STATUS = {name: code for code, name in mirror.STATUS_NAMES.items()}
INT64_MIN = -2 ** 63

# runtime_c function -> (return, parameters, variadic); (type, attribute) where
# the C ABI widens the argument
U8, S32 = (I8, "zeroext"), (I32, "signext")
RUNTIME = {
    "rxe_tensor_check": (S32, [PTR, PTR, U8, U8, S32, PTR], False),
    "rxe_dim_bind": (S32, [I64, PTR, PTR, I64, I64, PTR, PTR], False),
    "rxe_dim_check": (S32, [I64, I64, PTR, PTR, PTR], False),
    "rxe_dim_check_broadcast": (S32, [I64, I64, PTR, PTR], False),
    "rxe_error_set": (S32, [PTR, S32, PTR], True),
    "rxe_mem_copy": (VOID, [PTR, PTR, I64], False),
    "rxe_profile_now_ns": (I64, [], False),
}
# entry parameter -> LLVM type
PARAMS = {"inputs": PTR, "outputs": PTR, "s": PTR, "err": PTR, "size_values": PTR, "out_bytes": PTR,
          "out_shapes": PTR, "out_workspace_bytes": PTR, "workspace": PTR, "workspace_bytes": I64}
# operation kind -> method of LLVMHostEmitter (the C renderer's table, codegen/c/host.py)
RENDER = {
    CheckTensor: "check_tensor", BindSize: "bind_size", CheckDim: "check_dim", CheckBroadcast: "check_broadcast",
    Bind: "bind", Layout: "layout", CheckWorkspace: "check_workspace", StoreShape: "store_shape", View: "view",
    ProfileBegin: "profile_begin", ProfileEnd: "profile_end", CallKernel: "call_kernel", Copy: "copy",
    Branch: "branch", EndBranch: "end_branch", StoreDim: "store_dim", SetSize: "set_size",
    LoopBegin: "loop_begin", LoopEnd: "loop_end", StoreCounter: "store_counter", CopySlot: "copy_slot",
}


def _type(spec):
    return spec[0] if isinstance(spec, tuple) else spec


def declare(module: ir.Module, name: str) -> ir.Function:
    """A runtime_c function, declared once per module."""
    fn = module.globals.get(name)
    if fn is not None:
        return fn
    ret, params, variadic = RUNTIME[name]
    fn = ir.Function(module, ir.FunctionType(_type(ret), [_type(p) for p in params], var_arg=variadic), name)
    if isinstance(ret, tuple):
        fn.return_value.add_attribute(ret[1])
    for arg, p in zip(fn.args, params):
        if isinstance(p, tuple):
            arg.add_attribute(p[1])
    return fn


class Strings:
    """Private NUL-terminated string constants, one per text."""

    def __init__(self, module: ir.Module, prefix: str):
        self.module, self.prefix, self.made = module, prefix, {}

    def __call__(self, text: str) -> ir.GlobalVariable:
        if text not in self.made:
            data = bytearray(text.encode() + b"\0")
            t = ir.ArrayType(I8, len(data))
            g = ir.GlobalVariable(self.module, t, f"{self.prefix}.str{len(self.made)}")
            g.global_constant, g.linkage, g.unnamed_addr = True, "private", True
            g.initializer = ir.Constant(t, data)
            self.made[text] = g
        return self.made[text]


def opaque(g: ir.GlobalVariable) -> ir.Constant:
    """A global as a plain `ptr` (llvmlite types globals' pointers)."""
    return ir.FormattedConstant(PTR, g.get_reference())


def i32(v: int) -> ir.Constant:
    return ir.Constant(I32, v)


def i64(v: int) -> ir.Constant:
    return ir.Constant(I64, v)


class LLVMHostEmitter(IndexArithmetic):
    """One graph function's host entries as functions of `module`."""

    def __init__(self, module: ir.Module, fn: HostFunction, weights: ir.GlobalVariable, strings: Strings,
                 profile: bool):
        self.module = module
        self.fn = fn
        self.weights = weights
        self.string = strings
        self.slots = {var: k for k, var in enumerate(fn.struct_sizes)}
        self.profile = self.profile_table() if profile else None
        self.functions: dict = {}          # entry -> ir.Function
        self.b: ir.IRBuilder | None = None
        self.params: dict = {}
        self.s = self.offsets = self.needed = self.t0 = None
        self.joins: list = []              # the join block of each open Branch, innermost last
        self.loops: list = []              # (counter alloca, header block, exit block) of each open loop

    def emit(self) -> dict:
        self.functions["layout"] = self.emit_layout()
        for kind in ENTRIES:               # bind first: the others call it
            self.functions[kind] = self.emit_entry(kind)
        return self.functions

    # functions ------------------------------------------------------------
    def emit_layout(self) -> ir.Function:
        """i64 layout(sizes, offsets): each buffer's offset, the arena's total."""
        fn = ir.Function(self.module, ir.FunctionType(I64, [PTR, PTR]), f"{self.fn.symbol}_layout")
        fn.linkage = "internal"
        fn.attributes.add("nounwind")
        self.s, offsets = fn.args
        self.b = ir.IRBuilder(fn.append_basic_block("entry"))
        for k, (_, off) in enumerate(self.fn.offsets):
            self.b.store(self.int_expr(off), self.element(offsets, k))
        self.b.ret(self.int_expr(self.fn.total))
        return fn

    def emit_entry(self, kind: str) -> ir.Function:
        suffix, params = ENTRIES[kind]
        fn = ir.Function(self.module, ir.FunctionType(I32, [PARAMS[p] for p in params]), self.fn.symbol + suffix)
        fn.attributes.add("nounwind")
        fn.return_value.add_attribute("signext")
        if kind == "bind":
            fn.linkage = "internal"
        for name, arg in zip(params, fn.args):
            arg.name = name
        self.params = dict(zip(params, fn.args))
        self.b = ir.IRBuilder(fn.append_basic_block("entry"))
        self.needed = self.t0 = None
        self.s = self.params.get("s")
        if self.s is None:
            self.s = self.b.alloca(ir.ArrayType(I64, max(len(self.fn.struct_sizes), 1)), name="sizes")
            self.offsets = self.b.alloca(ir.ArrayType(I64, max(len(self.fn.offsets), 1)), name="offsets")
        for op in self.fn.entries[kind]:
            result = getattr(self, RENDER[type(op)])(op)
            if isinstance(op, FALLIBLE):
                self.return_unless_ok(result)
        self.b.ret(i32(STATUS["RXE_OK"]))
        return fn

    # helpers ---------------------------------------------------------------
    def return_if(self, cond, status) -> None:
        """`if (cond) return status();`, the failure unlikely."""
        b = self.b
        fail, ok = b.append_basic_block("fail"), b.append_basic_block("ok")
        b.cbranch(cond, fail, ok).set_weights([1, 99])
        b.position_at_end(fail)
        b.ret(status())
        b.position_at_end(ok)

    def return_unless_ok(self, status) -> None:
        self.return_if(self.b.icmp_signed("!=", status, i32(STATUS["RXE_OK"])), lambda: status)

    def call(self, name: str, args: list) -> ir.Value:
        return self.b.call(declare(self.module, name), args)

    def element(self, base, k, etype=I64) -> ir.Value:
        index = k if isinstance(k, ir.Value) else i64(k)
        return self.b.gep(base, [index], inbounds=True, source_etype=etype)

    def size_value(self, var) -> ir.Value:
        if var not in self.slots:
            raise CodegenError(f"function {self.fn.name}: size {var.name} is not bound")
        return self.b.load(self.element(self.s, self.slots[var]), typ=I64)

    def tensor_field(self, tensor: str, index: int, name: str, typ) -> ir.Value:
        """`tensor[index].name` (rxe_tensor_t)."""
        t = self.element(self.params[tensor], index, abi.TENSOR)
        where = self.b.gep(t, [i32(0), i32(abi.field(mirror.Tensor, name))], inbounds=True,
                           source_etype=abi.TENSOR)
        return self.b.load(where, typ=typ)

    def value(self, v) -> ir.Value:
        if isinstance(v, Dim):
            shape = self.tensor_field(v.tensor, v.index, "shape", PTR)
            return self.b.load(self.element(shape, v.axis), typ=I64)
        if isinstance(v, SizeValue):
            return self.b.load(self.element(self.params["size_values"], v.index), typ=I64)
        return self.int_expr(v)   # a symbolic integer of bound sizes

    def address(self, a: Address) -> ir.Value:
        if a.base in ("inputs", "outputs"):   # RXE_DATA: data + byte_offset
            data = self.tensor_field(a.base, a.index, "data", PTR)
            return self.element(data, self.tensor_field(a.base, a.index, "byte_offset", I64), I8)
        if a.base == "weights":
            return self.element(opaque(self.weights), a.index, I8)
        if a.base == "sizes":
            return self.element(self.s, self.slots[self.fn.run_sizes[a.index]])
        offset = self.b.load(self.element(self.offsets, a.index), typ=I64)
        return self.element(self.params["workspace"], offset, I8)

    def text(self, s: str | None) -> ir.Value:
        return ir.Constant(PTR, None) if s is None else self.string(s)

    # operations -------------------------------------------------------------
    def check_tensor(self, op: CheckTensor) -> ir.Value:
        t = self.element(self.params[op.tensor], op.index, abi.TENSOR)
        return self.call("rxe_tensor_check", [t, self.text(op.what), ir.Constant(I8, op.code),
                                              ir.Constant(I8, op.bits), i32(op.ndim), self.params["err"]])

    def bind_size(self, op: BindSize) -> ir.Value:
        var = op.var
        lower = i64(INT64_MIN if var.lower is None else var.lower) if op.lower is None else self.int_expr(op.lower)
        upper = i64(-1 if var.upper is None else var.upper) if op.upper is None else self.int_expr(op.upper)
        return self.call("rxe_dim_bind", [self.value(op.value), self.text(op.what), self.text(var.name), lower,
                                          upper, self.element(self.s, self.slots[var]), self.params["err"]])

    def check_dim(self, op: CheckDim) -> ir.Value:
        return self.call("rxe_dim_check", [self.value(op.value), self.int_expr(op.expected), self.text(op.what),
                                           self.text(op.expr), self.params["err"]])

    def check_broadcast(self, op: CheckBroadcast) -> ir.Value:
        return self.call("rxe_dim_check_broadcast", [self.int_expr(op.a), self.int_expr(op.b), self.text(op.what),
                                                 self.params["err"]])

    def bind(self, op: Bind) -> ir.Value:
        return self.b.call(self.functions["bind"], [self.params["inputs"], self.s, self.params["err"]])

    def layout(self, op: Layout) -> None:
        total = self.b.call(self.functions["layout"], [self.s, self.offsets])
        if op.out is None:
            self.needed = total
        else:
            self.b.store(total, self.params[op.out])

    def check_workspace(self, op: CheckWorkspace) -> None:
        b, needed, zero = self.b, self.needed, i64(0)
        workspace, given, err = self.params["workspace"], self.params["workspace_bytes"], self.params["err"]
        status = i32(STATUS["RXE_ERR_WORKSPACE"])
        some = b.icmp_unsigned(">", needed, zero)
        missing = b.or_(b.icmp_unsigned("==", workspace, ir.Constant(PTR, None)), b.icmp_unsigned("<", given, needed))
        self.return_if(b.and_(some, missing),
                       lambda: self.call("rxe_error_set", [err, status, self.text(op.too_small), given, needed]))
        alignment = i64(op.alignment)
        misaligned = b.icmp_unsigned("!=", b.urem(b.ptrtoint(workspace, I64), alignment), zero)
        self.return_if(b.and_(some, misaligned),
                       lambda: self.call("rxe_error_set", [err, status, self.text(op.misaligned), alignment]))

    def store_shape(self, op: StoreShape) -> None:
        self.b.store(self.int_expr(op.value), self.element(self.params["out_shapes"], op.index))

    def store_dim(self, op: StoreDim) -> None:
        shape = self.tensor_field("outputs", op.index, "shape", PTR)
        self.b.store(self.int_expr(op.value), self.element(shape, op.axis))

    def set_size(self, op: SetSize) -> None:
        where = self.element(self.s, self.slots[op.var])
        where.type = PTR   # llvmlite types the GEP by the sizes array; the IR pointer is opaque either way
        self.b.store(self.int_expr(op.value), where)

    def view(self, op: View) -> None:
        return None

    def profile_begin(self, op: ProfileBegin) -> None:
        if self.profile is not None:
            self.t0 = self.call("rxe_profile_now_ns", [])

    def profile_end(self, op: ProfileEnd) -> None:
        if self.profile is None:
            return
        b = self.b
        elapsed = b.sub(self.call("rxe_profile_now_ns", []), self.t0)
        for name, amount in (("total_ns", elapsed), ("calls", i64(1))):
            where = b.gep(opaque(self.profile), [i32(0), i32(op.row), i32(abi.field(mirror.ProfileEntry, name))],
                          inbounds=True, source_etype=self.profile.value_type)
            b.store(b.add(b.load(where, typ=I64), amount), where)

    def call_kernel(self, op: CallKernel) -> ir.Value:
        kernel = self.module.globals.get(op.symbol)
        if kernel is None:   # defined by the kernels' module (codegen/llvm/kernel.py)
            params = [PTR] * len(op.buffers) + [I64] * len(op.sizes) + [PTR]
            kernel = ir.Function(self.module, ir.FunctionType(I32, params), op.symbol)
        args = [self.address(a) for a in op.buffers] + [self.int_expr(s) for s in op.sizes] + [self.params["err"]]
        return self.b.call(kernel, args)

    def branch(self, op: Branch) -> None:
        b = self.b
        flag = b.load(self.address(op.cond), typ=I8)
        cond = b.icmp_unsigned("!=" if op.taken else "==", flag, ir.Constant(I8, 0))
        then, join = b.append_basic_block("branch"), b.append_basic_block("join")
        b.cbranch(cond, then, join)
        b.position_at_end(then)
        self.joins.append(join)

    def end_branch(self, op: EndBranch) -> None:
        join = self.joins.pop()
        self.b.branch(join)
        self.b.position_at_end(join)

    def loop_begin(self, op: LoopBegin) -> None:
        b = self.b
        with b.goto_entry_block():
            counter = b.alloca(I64, name=f"it{op.depth}")
        b.store(i64(0), counter)
        head, body, done = (b.append_basic_block(name) for name in ("loop", "loop_body", "loop_done"))
        b.branch(head)
        b.position_at_end(head)
        it = b.load(counter, typ=I64)
        test = ir.Constant(ir.IntType(1), 1)
        if op.count is not None:
            count = b.load(self.address(op.count), typ=I64) if isinstance(op.count, Address) \
                else self.int_expr(op.count)
            test = b.icmp_signed("<", it, count)
        if op.cond is not None:
            flag = b.load(self.address(op.cond), typ=I8)
            test = b.and_(test, b.icmp_unsigned("!=", flag, ir.Constant(I8, 0)))
        b.cbranch(test, body, done)
        b.position_at_end(body)
        self.loops.append((counter, head, done))

    def loop_end(self, op: LoopEnd) -> None:
        counter, head, done = self.loops.pop()
        b = self.b
        b.store(b.add(b.load(counter, typ=I64), i64(1)), counter)
        b.branch(head)
        b.position_at_end(done)

    def store_counter(self, op: StoreCounter) -> None:
        it = self.b.load(self.loops[op.depth][0], typ=I64)
        where = self.address(op.dst)
        where.type = PTR   # a sizes slot's GEP is typed by the sizes array (as in set_size)
        self.b.store(self.b.add(it, i64(op.plus)) if op.plus else it, where)

    def copy_slot(self, op: CopySlot) -> None:
        b = self.b
        size = self.int_expr(op.bytes)
        offset = b.mul(b.load(self.loops[op.depth][0], typ=I64), size)
        self.call("rxe_mem_copy", [self.element(self.address(op.dst), offset, I8), self.address(op.src), size])

    def copy(self, op: Copy) -> None:
        self.call("rxe_mem_copy", [self.address(op.dst), self.address(op.src), self.int_expr(op.bytes)])

    # the entry table ----------------------------------------------------------
    def profile_table(self) -> ir.GlobalVariable:
        rows = self.fn.profile_rows or [("(none)", "")]
        t = ir.ArrayType(abi.PROFILE_ENTRY, len(rows))
        g = ir.GlobalVariable(self.module, t, f"{self.fn.symbol}_profile")
        g.linkage = "internal"
        g.initializer = ir.Constant(t, [abi.struct(mirror.ProfileEntry, kernel=self.string(kernel),
                                                   span=self.string(span), calls=i64(0), total_ns=i64(0))
                                        for kernel, span in rows])
        return g

    def table_entry(self) -> ir.Constant:
        """This function's rxe_function_t."""
        fn, string = self.fn, self.string
        inputs = constant_array(self.module, f"{fn.symbol}_inputs", abi.ARG_INFO,
                                [arg_info(info, string) for info in fn.inputs])
        outputs = constant_array(self.module, f"{fn.symbol}_outputs", abi.ARG_INFO,
                                 [arg_info(info, string) for info in fn.outputs])
        size_names = constant_array(self.module, f"{fn.symbol}_size_names", PTR,
                                    [string(v.name) for v in fn.size_vars] + [ir.Constant(PTR, None)])
        profiled = self.profile is not None
        return abi.struct(
            mirror.Function, name=string(fn.name), num_inputs=i32(len(fn.inputs)), num_outputs=i32(len(fn.outputs)),
            inputs=inputs, outputs=outputs, plan=self.functions["plan"], run=self.functions["run"],
            workspace=self.functions["workspace"], num_sizes=i32(len(fn.size_vars)), size_names=size_names,
            fixed_workspace_bytes=i64(fn.fixed_workspace or 0),
            num_profile_entries=i32(len(fn.profile_rows) if profiled else 0),
            profile=self.profile if profiled else ir.Constant(PTR, None))


def arg_info(info, string: Strings) -> ir.Constant:
    """An rxe_arg_info_t."""
    dtype = ir.Constant(abi.DTYPE, [ir.Constant(I8, info.code), ir.Constant(I8, info.bits), ir.Constant(I16, 1)])
    return abi.struct(mirror.ArgInfo, name=string(info.name), dtype=dtype, ndim=i32(info.ndim),
                      shape=string(info.shape))


def constant_array(module: ir.Module, name: str, etype, items: list) -> ir.GlobalVariable:
    t = ir.ArrayType(etype, len(items))
    g = ir.GlobalVariable(module, t, name)
    g.global_constant, g.linkage = True, "internal"
    g.initializer = ir.Constant(t, items)
    return g


def emit_host(host: HostModule, profile: bool = False) -> ir.Module:
    """An LLVM module with the host functions of every graph function and
    the entry table `PREFIX_module` (with the profiler when `profile`); the
    kernels and PREFIX_weights are external. target.py sets the triple and
    data layout."""
    prefix = host.prefix
    module = ir.Module(name=f"{prefix}_host" + ("_profiled" if profile else ""))
    strings = Strings(module, prefix)
    weights = ir.GlobalVariable(module, ir.ArrayType(I8, 0), host.weights.symbol)
    weights.global_constant = True
    entries = []
    for fn in host.functions:
        emitter = LLVMHostEmitter(module, fn, weights, strings, profile)
        emitter.emit()
        entries.append(emitter.table_entry())
    functions = constant_array(module, f"{prefix}_functions", abi.FUNCTION, entries)
    table = ir.GlobalVariable(module, abi.MODULE, f"{prefix}_module")
    table.global_constant = True
    table.initializer = abi.struct(mirror.Module, abi_version=i32(mirror.ABI_VERSION), name=strings(prefix),
                                   num_functions=i32(len(entries)), functions=functions)
    return module
