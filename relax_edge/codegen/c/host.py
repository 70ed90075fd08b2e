"""The graph function's host code as C: codegen/host_program.py's operations
rendered by table (operation kind -> C statements).

For a graph function `main` with symbol PREFIX_main this renders:

1. `PREFIX_main_sizes_t` (the bound size variables, then those bound while
   running: data-dependent counts and match_cast sizes) and, under RXE_PROFILE,
   the per-kernel profile table `PREFIX_main_profile`.
2. `PREFIX_main_bind` (static): input checks, binding each size variable.
3. `PREFIX_main_layout` (static): the memory plan's offsets and total.
4. The public entries PREFIX_main_workspace_size, PREFIX_main_plan_shapes
   and PREFIX_main, each its operations in order, a fallible one returning
   its status when not RXE_OK.

A loop is a C `for` over `itD` (D: how many loops enclose it), its
condition tested before each iteration.

codegen/llvm/host.py renders the same operations as LLVM IR.
"""

from __future__ import annotations

from ...ir.shape import SizeVar
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
from .kernel import CRenderer, c_string, c_type

__all__ = ["CodegenError", "render_host_function"]

# parameter name -> its C declaration ({sizes}: the function's sizes struct)
C_PARAMS = {
    "inputs": "const rxe_tensor_t* inputs", "outputs": "rxe_tensor_t* outputs", "s": "{sizes}* s",
    "err": "rxe_error_t* err", "size_values": "const int64_t* size_values", "out_bytes": "uint64_t* out_bytes",
    "out_shapes": "int64_t* out_shapes", "out_workspace_bytes": "uint64_t* out_workspace_bytes",
    "workspace": "void* workspace", "workspace_bytes": "uint64_t workspace_bytes",
}
# operation kind -> method of CHostEmitter returning C lines
RENDER = {
    CheckTensor: "check_tensor", BindSize: "bind_size", CheckDim: "check_dim", CheckBroadcast: "check_broadcast",
    Bind: "bind", Layout: "layout", CheckWorkspace: "check_workspace", StoreShape: "store_shape", View: "view",
    ProfileBegin: "profile_begin", ProfileEnd: "profile_end", CallKernel: "call_kernel", Copy: "copy",
    Branch: "branch", EndBranch: "end_branch", StoreDim: "store_dim", SetSize: "set_size",
    LoopBegin: "loop_begin", LoopEnd: "loop_end", StoreCounter: "store_counter", CopySlot: "copy_slot",
}


class SizesRenderer(CRenderer):
    """Symbolic integers with each size variable read from `s->`."""

    def __init__(self, size_vars):
        super().__init__()
        self.fields = {v: self.name(v, v.name) for v in size_vars}

    def int_atom(self, atom) -> str:
        if isinstance(atom, SizeVar):
            return f"s->{self.fields[atom]}"
        return super().int_atom(atom)


class CHostEmitter:
    """One graph function's host entries as C (codegen/llvm/host.py's
    LLVMHostEmitter emits the same operations as LLVM IR)."""

    def __init__(self, fn: HostFunction, weights_symbol: str):
        self.fn = fn
        self.p = fn.symbol
        self.weights = weights_symbol
        self.r = SizesRenderer(fn.struct_sizes)

    def render(self) -> str:
        fn, p = self.fn, self.p
        fields = [f"  int64_t {name};" for name in self.r.fields.values()] or ["  int64_t unused;"]
        lines = ["typedef struct {", *fields, f"}} {p}_sizes_t;", ""]
        lines += self.profile_table()
        lines += self.entry("bind", f"static rxe_status_t {p}_bind") + [""]
        plan = fn.memory_plan
        lines.append(f"/* memory plan: {plan.mode} mode ({plan.algorithm}), {len(plan.buffers)} buffers */")
        lines.append(f"static uint64_t {p}_layout(const {p}_sizes_t* s, uint64_t* offsets) {{")
        for k, (name, off) in enumerate(fn.offsets):
            lines.append(f"  offsets[{k}] = (uint64_t)({self.r.int_expr(off)});  /* {name} */")
        lines += ["  (void)s;", "  (void)offsets;", f"  return (uint64_t)({self.r.int_expr(fn.total)});", "}", ""]
        for kind in ("workspace", "plan", "run"):
            lines += self.entry(kind, f"rxe_status_t {p}{ENTRIES[kind][0]}") + [""]
        return "\n".join(lines)

    def entry(self, kind: str, head: str) -> list:
        ops = self.fn.entries[kind]
        params = ENTRIES[kind][1]
        decls = ", ".join(C_PARAMS[name].format(sizes=f"{self.p}_sizes_t") for name in params)
        lines = [f"{head}({decls}) {{"]
        if "s" not in params:
            lines += [f"  {self.p}_sizes_t sizes;", f"  {self.p}_sizes_t* s = &sizes;",
                      f"  uint64_t offsets[{max(len(self.fn.offsets), 1)}];"]
        lines.append("  rxe_status_t st;")
        if any(isinstance(op, Layout) and op.out is None for op in ops):
            lines.append("  uint64_t needed;")
        if "workspace" in params:
            lines.append("  uint8_t* ws = (uint8_t*)workspace;")
        if any(isinstance(op, ProfileBegin) for op in ops):
            lines += ["#ifdef RXE_PROFILE", "  uint64_t t0;", "#endif"]
        for op in ops:
            lines += getattr(self, RENDER[type(op)])(op)
            if isinstance(op, FALLIBLE):
                lines.append("  if (st != RXE_OK) return st;")
        unused = ["st", "s", "err"] + (["offsets"] if "s" not in params else []) + \
            (["ws"] if "workspace" in params else [])
        lines += [f"  (void){name};" for name in unused]
        lines += ["  return RXE_OK;", "}"]
        return lines

    # values ---------------------------------------------------------------
    def value(self, v) -> str:
        if isinstance(v, Dim):
            return f"{v.tensor}[{v.index}].shape[{v.axis}]"
        if isinstance(v, SizeValue):
            return f"size_values[{v.index}]"
        return self.r.int_expr(v)   # a symbolic integer of bound sizes

    def address(self, a: Address) -> str:
        if a.base in ("inputs", "outputs"):
            where = f"RXE_DATA({a.base}[{a.index}])"
        elif a.base == "weights":
            where = f"{self.weights} + {a.index}"
        elif a.base == "sizes":
            where = f"&s->{self.r.fields[self.fn.run_sizes[a.index]]}"
        else:
            where = f"ws + offsets[{a.index}]"
        if a.dtype is None:
            return where
        return f"({'const ' if a.const else ''}{c_type(a.dtype)}*)({where})"

    # operations -------------------------------------------------------------
    def check_tensor(self, op: CheckTensor) -> list:
        return [f"  st = rxe_tensor_check(&{op.tensor}[{op.index}], {c_string(op.what)}, {op.code}, {op.bits}, "
                f"{op.ndim}, err);"]

    def bind_size(self, op: BindSize) -> list:
        var = op.var
        lower = "INT64_MIN" if var.lower is None else str(var.lower)
        upper = "-1" if var.upper is None else str(var.upper)
        if op.upper is not None:
            upper = self.r.int_expr(op.upper)
        if op.lower is not None:
            lower = self.r.int_expr(op.lower)
        return [f"  st = rxe_dim_bind({self.value(op.value)}, {c_string(op.what)}, {c_string(var.name)}, {lower}, "
                f"{upper}, &s->{self.r.fields[var]}, err);"]

    def check_dim(self, op: CheckDim) -> list:
        expr = "NULL" if op.expr is None else c_string(op.expr)
        return [f"  st = rxe_dim_check({self.value(op.value)}, {self.r.int_expr(op.expected)}, {c_string(op.what)}, "
                f"{expr}, err);"]

    def check_broadcast(self, op: CheckBroadcast) -> list:
        a, b = self.r.int_expr(op.a), self.r.int_expr(op.b)
        return [f"  st = rxe_dim_check_broadcast({a}, {b}, {c_string(op.what)}, err);"]

    def bind(self, op: Bind) -> list:
        return [f"  st = {self.p}_bind(inputs, s, err);"]

    def layout(self, op: Layout) -> list:
        return [f"  {'needed' if op.out is None else '*' + op.out} = {self.p}_layout(s, offsets);"]

    def check_workspace(self, op: CheckWorkspace) -> list:
        return ["  if (needed > 0 && (workspace == NULL || workspace_bytes < needed)) {",
                f"    return rxe_error_set(err, RXE_ERR_WORKSPACE, {c_string(op.too_small)}, "
                "(int64_t)workspace_bytes, (int64_t)needed);", "  }",
                f"  if (needed > 0 && ((uintptr_t)workspace % {op.alignment}) != 0) {{",
                f"    return rxe_error_set(err, RXE_ERR_WORKSPACE, {c_string(op.misaligned)}, "
                f"(int64_t){op.alignment});", "  }"]

    def store_shape(self, op: StoreShape) -> list:
        return [f"  out_shapes[{op.index}] = {self.r.int_expr(op.value)};"]

    def store_dim(self, op: StoreDim) -> list:
        return [f"  outputs[{op.index}].shape[{op.axis}] = {self.r.int_expr(op.value)};"]

    def set_size(self, op: SetSize) -> list:
        return [f"  s->{self.r.fields[op.var]} = {self.r.int_expr(op.value)};"]

    def view(self, op: View) -> list:
        return [f"  /* {op.name}: a view of {op.of}, no kernel */"]

    def profile_begin(self, op: ProfileBegin) -> list:
        return ["#ifdef RXE_PROFILE", "  t0 = rxe_profile_now_ns();", "#endif"]

    def profile_end(self, op: ProfileEnd) -> list:
        row = f"{self.p}_profile[{op.row}]"
        return ["#ifdef RXE_PROFILE", f"  {row}.total_ns += rxe_profile_now_ns() - t0;", f"  {row}.calls += 1;",
                "#endif"]

    def call_kernel(self, op: CallKernel) -> list:
        args = [self.address(a) for a in op.buffers] + [self.r.int_expr(s) for s in op.sizes] + ["err"]
        note = f"  /* {op.note} */" if op.note else ""
        return [f"  st = {op.symbol}({', '.join(args)});{note}"]

    def branch(self, op: Branch) -> list:
        test = "!=" if op.taken else "=="
        return [f"  if (*{self.address(op.cond)} {test} 0) {{  /* {op.what} */"]

    def end_branch(self, op: EndBranch) -> list:
        return ["  }"]

    def loop_begin(self, op: LoopBegin) -> list:
        it = f"it{op.depth}"
        if op.count is None:
            test = ""
        elif isinstance(op.count, Address):
            test = f"{it} < *{self.address(op.count)}"
        else:
            test = f"{it} < (int64_t)({self.r.int_expr(op.count)})"
        lines = [f"  for (int64_t {it} = 0; {test}; ++{it}) {{  /* {op.what} */"]
        if op.cond is not None:
            lines.append(f"  if (*{self.address(op.cond)} == 0) break;")
        return lines

    def loop_end(self, op: LoopEnd) -> list:
        return ["  }"]

    def store_counter(self, op: StoreCounter) -> list:
        return [f"  *{self.address(op.dst)} = it{op.depth}{f' + {op.plus}' if op.plus else ''};"]

    def copy_slot(self, op: CopySlot) -> list:
        size = f"(uint64_t)({self.r.int_expr(op.bytes)})"
        return [f"  rxe_mem_copy((uint8_t*)({self.address(op.dst)}) + (uint64_t)it{op.depth} * {size}, "
                f"{self.address(op.src)}, {size});"]

    def copy(self, op: Copy) -> list:
        return [f"  rxe_mem_copy({self.address(op.dst)}, {self.address(op.src)}, "
                f"(uint64_t)({self.r.int_expr(op.bytes)}));"]

    # the profile table -----------------------------------------------------------
    def profile_table(self) -> list:
        rows = self.fn.profile_rows or [("(none)", "")]
        lines = ["#ifdef RXE_PROFILE", f"#define {self.p.upper()}_NUM_PROFILE {len(self.fn.profile_rows)}",
                 f"static rxe_profile_entry_t {self.p}_profile[] = {{"]
        lines += [f"  {{{c_string(kernel)}, {c_string(span)}, 0, 0}}," for kernel, span in rows]
        return lines + ["};", "#endif", ""]


def render_host_function(fn: HostFunction, weights_symbol: str) -> str:
    """The C of one graph function's host code (see the module docstring)."""
    return CHostEmitter(fn, weights_symbol).render()


def c_arg_info(info) -> str:
    """An rxe_arg_info_t initializer."""
    return f"{{{c_string(info.name)}, {{{info.code}, {info.bits}, 1}}, {info.ndim}, {c_string(info.shape)}}}"
