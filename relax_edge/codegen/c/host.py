"""The graph function as an ahead-of-time C host function.

For a legalized graph function `main` this emits, with PREFIX the model's
symbol prefix:

1. `PREFIX_main_bind`: checks every input's dtype, rank and dims against the
   signature, binding each size variable from the first dimension that is
   exactly it (with its bounds) and checking every other dimension, so a
   mismatch returns a status and a message naming the input and dimension.
2. `PREFIX_main_layout`: the memory plan (relax_edge/memory): constant
   offsets and a fixed arena when every size is bounded, offsets computed
   from the sizes otherwise; returns the workspace bytes.
3. `PREFIX_main_plan` (output shapes and workspace size),
   `PREFIX_main_workspace` (workspace size from size values alone) and
   `PREFIX_main_run` (checks, run-time broadcast checks, kernel calls;
   views run no kernel, in-place kernels write over a dying input, and the
   kernel producing an output writes straight into it).

Not supported here yet: `if`, match_cast, calls between graph functions and
external kernels.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np

from ...errors import RelaxEdgeError
from ...ir.expr import Constant, Function, IRModule, Var
from ...ir.shape import as_expr
from ...ir.types import TensorType, shape_str
from ...legalize.common import broadcast_checks
from ...memory import plan_memory, verify_plan
from ...memory.liveness import analyze, nbytes
from ..abi import DTYPES, WORKSPACE_ALIGNMENT
from .kernel import CRenderer, c_string, c_type


class CodegenError(RelaxEdgeError):
    """The module cannot be emitted as C."""


@dataclass
class WeightsBlob:
    """Constants packed into one binary blob, each 64-byte aligned."""
    symbol: str
    chunks: list = field(default_factory=list)
    offsets: dict = field(default_factory=dict)
    size: int = 0

    def add(self, const: Constant) -> int:
        key = id(const)
        if key not in self.offsets:
            data = np.ascontiguousarray(const.data)
            if data.dtype == np.bool_:
                data = data.astype(np.uint8)
            start = -(-self.size // WORKSPACE_ALIGNMENT) * WORKSPACE_ALIGNMENT
            self.chunks.append((start, data.tobytes()))
            self.offsets[key] = start
            self.size = start + data.nbytes
        return self.offsets[key]

    def tobytes(self) -> bytes:
        out = bytearray(max(self.size, 1))
        for start, raw in self.chunks:
            out[start:start + len(raw)] = raw
        return bytes(out)


def _replace_word(text: str, word: str, new: str) -> str:
    return re.sub(rf"(?<![\w>.]){re.escape(word)}(?!\w)", new, text)


class HostEmitter:
    def __init__(self, mod: IRModule, func: Function, prefix: str, kernels: dict, weights: WeightsBlob):
        self.mod = mod
        self.func = func
        self.prefix = f"{prefix}_{func.name}"
        self.kernels = kernels      # program name -> C symbol
        self.weights = weights
        self.r = CRenderer()
        self.size_vars = []         # in binding order
        try:
            self.live = analyze(mod, func)
        except RelaxEdgeError as err:
            raise CodegenError(str(err)) from None
        self.plan = verify_plan(plan_memory(self.live.buffers), samples=40)
        self.profile_rows: list = []   # (kernel symbol, span) per kernel call

    # helpers ---------------------------------------------------------------
    def struct_expr(self, e) -> str:
        """A symbolic integer with each size variable read from `s->`."""
        text = self.r.int_expr(as_expr(e))
        for var in self.size_vars:
            name = self.r.name(var, var.name)
            text = _replace_word(text, name, f"s->{name}")
        return text

    def location(self, var: Var) -> str:
        kind, where = self.live.storage[var]
        if kind == "input":
            return f"RXE_DATA(inputs[{where}])"
        if kind == "output":
            return f"RXE_DATA(outputs[{where}])"
        if kind == "const":
            return f"{self.weights.symbol} + {self.weights.add(where)}"
        return f"ws + offsets[{where}]"

    def pointer(self, e, dtype: str, const: bool = False) -> str:
        if isinstance(e, Constant):
            return f"(const {c_type(dtype)}*)({self.weights.symbol} + {self.weights.add(e)})"
        if isinstance(e, Var):
            if self.live.storage.get(e) is None:
                raise CodegenError(f"function {self.func.name}: {e.name} has no storage")
            qual = "const " if const else ""
            return f"({qual}{c_type(dtype)}*)({self.location(e)})"
        raise CodegenError(f"function {self.func.name}: argument {type(e).__name__} is not supported")

    # bind ------------------------------------------------------------------
    def emit_bind(self) -> list:
        out = [f"static rxe_status_t {self.prefix}_bind(const rxe_tensor_t* inputs, {self.prefix}_sizes_t* s, "
               "rxe_error_t* err) {", "  rxe_status_t st;"]
        bound, binding_dims = set(), set()
        for i, p in enumerate(self.func.params):
            t = p.type
            if not isinstance(t, TensorType) or t.shape is None:
                raise CodegenError(f"function {self.func.name}: parameter {p.name} must be a tensor of known rank")
            code, bits, _ = DTYPES[t.dtype]
            what = f"input {p.name}"
            out.append(f"  st = rxe_check_tensor(&inputs[{i}], {c_string(what)}, {code}, {bits}, {len(t.shape)}, err);")
            out.append("  if (st != RXE_OK) return st;")
            for d, dim in enumerate(t.shape):
                var = dim.as_var()
                if var is not None and var not in bound:
                    bound.add(var)
                    binding_dims.add((i, d))
                    out += self.bind_var(var, f"inputs[{i}].shape[{d}]", f"{what} dimension {d}")
        for i, p in enumerate(self.func.params):
            for d, dim in enumerate(p.type.shape):
                if (i, d) in binding_dims:
                    continue  # this dimension defined its variable
                expr = "NULL" if dim.is_const else c_string(str(dim))
                out.append(f"  st = rxe_check_dim(inputs[{i}].shape[{d}], {self.struct_expr(dim)}, "
                           f"{c_string(f'input {p.name} dimension {d}')}, {expr}, err);")
                out.append("  if (st != RXE_OK) return st;")
        out += ["  return RXE_OK;", "}"]
        return out

    def bind_var(self, var, value: str, what: str) -> list:
        name = self.r.name(var, var.name)
        if var not in self.size_vars:
            self.size_vars.append(var)
        lower = "INT64_MIN" if var.lower is None else str(var.lower)
        upper = "-1" if var.upper is None else str(var.upper)
        return [f"  st = rxe_bind_dim({value}, {c_string(what)}, {c_string(var.name)}, {lower}, {upper}, "
                f"&s->{name}, err);", "  if (st != RXE_OK) return st;"]

    # body ------------------------------------------------------------------
    def kernel_call(self, step) -> list:
        call, var = step.call, step.var
        program = self.mod.tensor_programs[call.program.name]
        lines = []
        skip = program.attrs.get("broadcast_skip")
        if skip is not None:
            for a, d, o, dim, out_dim in broadcast_checks([x.type for x in call.args], call.type, skip):
                what = c_string(f"{program.attrs.get('op', call.program.name)} ({call.span or var.name}) "
                                f"argument {a} dimension {d}")
                lines.append(f"  st = rxe_check_broadcast({self.struct_expr(dim)}, {self.struct_expr(out_dim)}, "
                             f"{what}, err);")
                lines.append("  if (st != RXE_OK) return st;")
        if step.view_of is not None:
            lines.append(f"  /* {var.name}: a view of {step.view_of.name}, no kernel */")
            return lines
        args = [self.pointer(x, x.type.dtype) for x in call.args]
        args.append(f"({c_type(call.type.dtype)}*)({self.location(var)})")
        for k, buf in zip(step.scratch, program.scratch):
            args.append(f"({c_type(buf.dtype)}*)(ws + offsets[{k}])")
        args += [self.struct_expr(s) for s in call.size_args]
        args.append("err")
        note = f"  /* in place over {step.inplace_over.name} */" if step.inplace_over is not None else ""
        k = len(self.profile_rows)
        self.profile_rows.append((self.kernels[call.program.name], call.span or var.name))
        lines += ["#ifdef RXE_PROFILE", "  t0 = rxe_profile_clock_ns();", "#endif"]
        lines.append(f"  st = {self.kernels[call.program.name]}({', '.join(args)});{note}")
        lines += ["#ifdef RXE_PROFILE", f"  {self.prefix}_profile[{k}].total_ns += rxe_profile_clock_ns() - t0;",
                  f"  {self.prefix}_profile[{k}].calls += 1;", "#endif"]
        lines.append("  if (st != RXE_OK) return st;")
        return lines

    def emit_profile_table(self) -> list:
        rows = self.profile_rows or [("(none)", "")]
        lines = ["#ifdef RXE_PROFILE", f"#define {self.prefix.upper()}_NUM_PROFILE {len(self.profile_rows)}",
                 f"static rxe_profile_entry_t {self.prefix}_profile[] = {{"]
        lines += [f"  {{{c_string(kernel)}, {c_string(span)}, 0, 0}}," for kernel, span in rows]
        lines += ["};", "#endif", ""]
        return lines

    def emit(self) -> str:
        bind = self.emit_bind()
        kernel_lines = []
        for step in self.live.steps:
            kernel_lines += self.kernel_call(step)
        p, plan = self.prefix, self.plan
        fields = [f"  int64_t {self.r.name(v, v.name)};" for v in self.size_vars] or ["  int64_t unused;"]
        lines = ["typedef struct {", *fields, f"}} {p}_sizes_t;", ""]
        lines += self.emit_profile_table()
        lines += bind + [""]
        n_slots = max(len(plan.buffers), 1)
        lines.append(f"/* memory plan: {plan.mode} mode ({plan.algorithm}), {len(plan.buffers)} buffers */")
        lines.append(f"static uint64_t {p}_layout(const {p}_sizes_t* s, uint64_t* offsets) {{")
        for k, (b, off) in enumerate(zip(plan.buffers, plan.offsets)):
            lines.append(f"  offsets[{k}] = (uint64_t)({self.struct_expr(off)});  /* {b.name} */")
        lines += ["  (void)s;", "  (void)offsets;", f"  return (uint64_t)({self.struct_expr(plan.total)});", "}", ""]
        lines += self.emit_workspace_entry(n_slots)
        lines += self.emit_plan_entry(n_slots)
        lines += self.emit_run_entry(n_slots, kernel_lines)
        return "\n".join(lines)

    def emit_workspace_entry(self, n_slots) -> list:
        p = self.prefix
        lines = [f"static rxe_status_t {p}_workspace(const int64_t* size_values, uint64_t* out_bytes, "
                 "rxe_error_t* err) {", f"  {p}_sizes_t sizes;", f"  {p}_sizes_t* s = &sizes;",
                 f"  uint64_t offsets[{n_slots}];", "  rxe_status_t st;"]
        for k, var in enumerate(self.size_vars):
            lines += self.bind_var(var, f"size_values[{k}]", f"size {var.name}")
        lines += [f"  *out_bytes = {p}_layout(s, offsets);", "  (void)st;", "  (void)err;", "  return RXE_OK;", "}", ""]
        return lines

    def emit_plan_entry(self, n_slots) -> list:
        p = self.prefix
        lines = [f"static rxe_status_t {p}_plan(const rxe_tensor_t* inputs, int64_t* out_shapes, "
                 "uint64_t* out_workspace_bytes, rxe_error_t* err) {",
                 f"  {p}_sizes_t sizes;", f"  {p}_sizes_t* s = &sizes;", f"  uint64_t offsets[{n_slots}];",
                 f"  rxe_status_t st = {p}_bind(inputs, s, err);", "  if (st != RXE_OK) return st;"]
        k = 0
        for v in self.live.outputs:
            for d in v.type.shape:
                lines.append(f"  out_shapes[{k}] = {self.struct_expr(d)};")
                k += 1
        lines += [f"  *out_workspace_bytes = {p}_layout(s, offsets);", "  return RXE_OK;", "}", ""]
        return lines

    def emit_run_entry(self, n_slots, kernel_lines) -> list:
        p = self.prefix
        lines = [f"static rxe_status_t {p}_run(const rxe_tensor_t* inputs, rxe_tensor_t* outputs, "
                 "void* workspace, uint64_t workspace_bytes, rxe_error_t* err) {",
                 f"  {p}_sizes_t sizes;", f"  {p}_sizes_t* s = &sizes;", f"  uint64_t offsets[{n_slots}];",
                 "  uint64_t needed;", "  uint8_t* ws = (uint8_t*)workspace;",
                 "#ifdef RXE_PROFILE", "  uint64_t t0;", "#endif",
                 f"  rxe_status_t st = {p}_bind(inputs, s, err);", "  if (st != RXE_OK) return st;",
                 f"  needed = {p}_layout(s, offsets);",
                 "  if (needed > 0 && (workspace == NULL || workspace_bytes < needed)) {",
                 "    return rxe_error_set(err, RXE_ERR_WORKSPACE, \"workspace of %d bytes, %d needed\", "
                 "(int64_t)workspace_bytes, (int64_t)needed);", "  }",
                 "  if (needed > 0 && ((uintptr_t)workspace % RXE_WORKSPACE_ALIGNMENT) != 0) {",
                 "    return rxe_error_set(err, RXE_ERR_WORKSPACE, \"workspace is not aligned to %d bytes\", "
                 "(int64_t)RXE_WORKSPACE_ALIGNMENT);", "  }"]
        for k, v in enumerate(self.live.outputs):
            code, bits, _ = DTYPES[v.type.dtype]
            lines.append(f"  st = rxe_check_tensor(&outputs[{k}], {c_string(f'output {k}')}, {code}, {bits}, "
                         f"{len(v.type.shape)}, err);")
            lines.append("  if (st != RXE_OK) return st;")
            for d, dim in enumerate(v.type.shape):
                lines.append(f"  st = rxe_check_dim(outputs[{k}].shape[{d}], {self.struct_expr(dim)}, "
                             f"{c_string(f'output {k} dimension {d}')}, NULL, err);")
                lines.append("  if (st != RXE_OK) return st;")
        lines += kernel_lines
        for k, v in self.live.copies:
            size = self.struct_expr(nbytes(v.type))
            lines.append(f"  rxe_copy_bytes(RXE_DATA(outputs[{k}]), {self.location(v)}, (uint64_t)({size}));")
        lines += ["  (void)ws;", "  (void)s;", "  return RXE_OK;", "}", ""]
        return lines

    # metadata -----------------------------------------------------------------
    def arg_info(self) -> tuple:
        def info(name, t):
            code, bits, _ = DTYPES[t.dtype]
            return f"{{{c_string(name)}, {{{code}, {bits}, 1}}, {len(t.shape)}, {c_string(shape_str(t.shape))}}}"
        outs = self.live.outputs
        return ([info(p.name, p.type) for p in self.func.params],
                [info(f"output{k}" if len(outs) > 1 else "output", v.type) for k, v in enumerate(outs)])

    def fixed_workspace(self) -> int | None:
        """The arena's bytes when the plan is bounded (a constant), else None."""
        return self.plan.total.value if self.plan.is_bounded else None
