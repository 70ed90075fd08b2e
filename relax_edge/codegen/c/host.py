"""The graph function as an ahead-of-time C host function.

For a legalized graph function `main` this emits, with PREFIX the model's
symbol prefix:

1. `PREFIX_main_bind`: checks every input's dtype, rank and dims against the
   signature, binding each size variable from the first dimension that is
   exactly it (with its bounds) and checking every other dimension, so a
   mismatch returns a status and a message naming the input and dimension.
2. `PREFIX_main_layout`: places every intermediate tensor and kernel scratch
   buffer in the caller's workspace (one after the other, 64-byte aligned;
   the memory planner replaces this placement) and returns the bytes needed.
3. `PREFIX_main_plan` (output shapes and workspace size) and
   `PREFIX_main_run` (checks, run-time broadcast checks, kernel calls; the
   last kernel writing an output writes straight into it).

Not supported here yet: `if`, match_cast, calls between graph functions and
external kernels.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np

from ...errors import RelaxEdgeError
from ...ir.expr import CallTensor, Constant, DataflowVar, Function, IRModule, MatchCast, Tuple, Var
from ...ir.shape import IntExpr, as_expr, substitute
from ...ir.types import TensorType, TupleType, shape_str
from ...legalize.common import broadcast_checks
from ..abi import DTYPES, WORKSPACE_ALIGNMENT
from .kernel import CRenderer, c_type


class CodegenError(RelaxEdgeError):
    """The module cannot be emitted as C."""


def c_string(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


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


def _numel(t: TensorType) -> IntExpr:
    total = as_expr(1)
    for d in t.shape:
        total = total * d
    return total


def _itemsize(dtype: str) -> int:
    return DTYPES[dtype][1] // 8


class HostEmitter:
    def __init__(self, mod: IRModule, func: Function, prefix: str, kernels: dict, weights: WeightsBlob):
        self.mod = mod
        self.func = func
        self.prefix = f"{prefix}_{func.name}"
        self.kernels = kernels      # program name -> C symbol
        self.weights = weights
        self.r = CRenderer()
        self.size_vars = []         # in binding order
        self.location: dict = {}    # Var -> C pointer expression
        self.ws_slots: list = []    # (label, bytes IntExpr)
        self.lines: list = []

    # helpers ---------------------------------------------------------------
    def bind_name(self, var) -> str:
        name = self.r.name(var, var.name)
        if var not in self.size_vars:
            self.size_vars.append(var)
        return name

    def pointer(self, e, dtype: str) -> str:
        if isinstance(e, Constant):
            offset = self.weights.add(e)
            return f"(const {c_type(dtype)}*)({self.weights.symbol} + {offset})"
        if isinstance(e, Var):
            if e not in self.location:
                raise CodegenError(f"function {self.func.name}: {e.name} has no storage")
            return f"({c_type(dtype)}*)({self.location[e]})"
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
                    name = self.bind_name(var)
                    lower = "INT64_MIN" if var.lower is None else str(var.lower)
                    upper = "-1" if var.upper is None else str(var.upper)
                    out.append(f"  st = rxe_bind_dim(inputs[{i}].shape[{d}], {c_string(f'{what} dimension {d}')}, "
                               f"{c_string(var.name)}, {lower}, {upper}, &s->{name}, err);")
                    out.append("  if (st != RXE_OK) return st;")
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

    def struct_expr(self, e) -> str:
        """A symbolic integer with each size variable read from `s->`."""
        text = self.r.int_expr(as_expr(e))
        for var in self.size_vars:
            name = self.r.name(var, var.name)
            text = _replace_word(text, name, f"s->{name}")
        return text

    # layout and body ----------------------------------------------------------
    def plan_storage(self):
        """Decide where each value lives; returns the kernel call records."""
        for i, p in enumerate(self.func.params):
            self.location[p] = f"RXE_DATA(inputs[{i}])"
        outputs = self.output_vars()
        producers = {}
        calls = []
        for block in self.func.body.blocks:
            for b in block.bindings:
                if isinstance(b, MatchCast):
                    raise CodegenError(f"function {self.func.name}: match_cast ({b.var.name}) is not supported "
                                       "by the C backend yet")
                v = b.value
                if isinstance(v, CallTensor):
                    if not isinstance(v.type, TensorType):
                        raise CodegenError(f"{b.var.name}: tuple-valued tensor programs are not supported yet")
                    producers[b.var] = v
                    calls.append((b.var, v))
                elif isinstance(v, (Var, Tuple, Constant)):
                    producers[b.var] = v
                else:
                    raise CodegenError(f"function {self.func.name}: binding {b.var.name} "
                                       f"({type(v).__name__}) is not supported by the C backend yet")
        claimed = {}
        for k, var in enumerate(outputs):
            root = var
            while isinstance(producers.get(root), Var):
                root = producers[root]
            if isinstance(producers.get(root), CallTensor) and root not in claimed:
                claimed[root] = k
        for var, call in calls:
            if var in claimed:
                self.location[var] = f"RXE_DATA(outputs[{claimed[var]}])"
            else:
                self.location[var] = self.slot(var.name, _numel(call.type) * _itemsize(call.type.dtype))
        for block in self.func.body.blocks:
            for b in block.bindings:
                if isinstance(b.value, Var):
                    self.location[b.var] = self.location[b.value]
                elif isinstance(b.value, Constant):
                    self.location[b.var] = f"{self.weights.symbol} + {self.weights.add(b.value)}"
        return calls, outputs, claimed

    def slot(self, label: str, nbytes) -> str:
        self.ws_slots.append((label, as_expr(nbytes)))
        return f"ws + offsets[{len(self.ws_slots) - 1}]"

    def output_vars(self) -> list:
        body = self.func.body.body
        if isinstance(body, Var) and isinstance(body.type, TupleType):
            bound = {b.var: b.value for blk in self.func.body.blocks for b in blk.bindings}
            body = bound.get(body, body)
        values = body.fields if isinstance(body, Tuple) else (body,)
        out = []
        for v in values:
            if not isinstance(v, Var) or isinstance(v, DataflowVar):
                raise CodegenError(f"function {self.func.name}: outputs must be variables")
            if not isinstance(v.type, TensorType) or v.type.shape is None:
                raise CodegenError(f"function {self.func.name}: output {v.name} must be a tensor of known shape")
            out.append(v)
        return out

    def kernel_call(self, var: Var, call: CallTensor) -> list:
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
        args = [self.pointer(x, x.type.dtype) for x in call.args]
        args.append(f"({c_type(call.type.dtype)}*)({self.location[var]})")
        for buf in program.scratch:
            mapping = dict(zip(program.size_params, call.size_args))
            nbytes = substitute(buf.numel(), mapping) * _itemsize(buf.dtype)
            args.append(f"({c_type(buf.dtype)}*)({self.slot(f'{var.name}_{buf.name}', nbytes)})")
        args += [self.struct_expr(s) for s in call.size_args]
        args.append("err")
        lines.append(f"  st = {self.kernels[call.program.name]}({', '.join(args)});")
        lines.append("  if (st != RXE_OK) return st;")
        return lines

    def emit(self) -> str:
        bind = self.emit_bind()
        calls, outputs, claimed = self.plan_storage()
        kernel_lines = []
        for var, call in calls:
            kernel_lines += self.kernel_call(var, call)
        p = self.prefix
        fields = [f"  int64_t {self.r.name(v, v.name)};" for v in self.size_vars] or ["  int64_t unused;"]
        lines = [f"typedef struct {{", *fields, f"}} {p}_sizes_t;", ""]
        lines += bind + [""]
        n_slots = max(len(self.ws_slots), 1)
        lines.append(f"static uint64_t {p}_layout(const {p}_sizes_t* s, uint64_t* offsets) {{")
        lines.append("  uint64_t total = 0;")
        for k, (label, nbytes) in enumerate(self.ws_slots):
            lines.append(f"  offsets[{k}] = total;  /* {label} */")
            lines.append(f"  total += RXE_ALIGN_UP((uint64_t)({self.struct_expr(nbytes)}));")
        lines += ["  (void)s;", "  (void)offsets;", "  return total;", "}", ""]
        # plan
        lines.append(f"static rxe_status_t {p}_plan(const rxe_tensor_t* inputs, int64_t* out_shapes, "
                     "uint64_t* out_workspace_bytes, rxe_error_t* err) {")
        lines += [f"  {p}_sizes_t sizes;", f"  {p}_sizes_t* s = &sizes;", f"  uint64_t offsets[{n_slots}];",
                  f"  rxe_status_t st = {p}_bind(inputs, s, err);", "  if (st != RXE_OK) return st;"]
        k = 0
        for v in outputs:
            for d in v.type.shape:
                lines.append(f"  out_shapes[{k}] = {self.struct_expr(d)};")
                k += 1
        lines += [f"  *out_workspace_bytes = {p}_layout(s, offsets);", "  return RXE_OK;", "}", ""]
        # run
        lines.append(f"static rxe_status_t {p}_run(const rxe_tensor_t* inputs, rxe_tensor_t* outputs, "
                     "void* workspace, uint64_t workspace_bytes, rxe_error_t* err) {")
        lines += [f"  {p}_sizes_t sizes;", f"  {p}_sizes_t* s = &sizes;", f"  uint64_t offsets[{n_slots}];",
                  "  uint64_t needed;", "  uint8_t* ws = (uint8_t*)workspace;",
                  f"  rxe_status_t st = {p}_bind(inputs, s, err);", "  if (st != RXE_OK) return st;",
                  f"  needed = {p}_layout(s, offsets);",
                  "  if (needed > 0 && (workspace == NULL || workspace_bytes < needed)) {",
                  "    return rxe_error_set(err, RXE_ERR_WORKSPACE, \"workspace of %d bytes, %d needed\", "
                  "(int64_t)workspace_bytes, (int64_t)needed);", "  }",
                  "  if (needed > 0 && ((uintptr_t)workspace % RXE_WORKSPACE_ALIGNMENT) != 0) {",
                  "    return rxe_error_set(err, RXE_ERR_WORKSPACE, \"workspace is not aligned to %d bytes\", "
                  "(int64_t)RXE_WORKSPACE_ALIGNMENT);", "  }"]
        for k, v in enumerate(outputs):
            code, bits, _ = DTYPES[v.type.dtype]
            what = c_string(f"output {k}")
            lines.append(f"  st = rxe_check_tensor(&outputs[{k}], {what}, {code}, {bits}, {len(v.type.shape)}, err);")
            lines.append("  if (st != RXE_OK) return st;")
            for d, dim in enumerate(v.type.shape):
                lines.append(f"  st = rxe_check_dim(outputs[{k}].shape[{d}], {self.struct_expr(dim)}, "
                             f"{c_string(f'output {k} dimension {d}')}, NULL, err);")
                lines.append("  if (st != RXE_OK) return st;")
        lines += kernel_lines
        for k, v in enumerate(outputs):
            root_claimed = self.location.get(v) == f"RXE_DATA(outputs[{k}])"
            if not root_claimed:
                nbytes = self.struct_expr(_numel(v.type) * _itemsize(v.type.dtype))
                lines.append(f"  rxe_copy_bytes(RXE_DATA(outputs[{k}]), {self.location[v]}, (uint64_t)({nbytes}));")
        lines += ["  (void)ws;", "  (void)s;", "  return RXE_OK;", "}", ""]
        return "\n".join(lines)

    def arg_info(self) -> tuple:
        def info(name, t):
            code, bits, _ = DTYPES[t.dtype]
            return f"{{{c_string(name)}, {{{code}, {bits}, 1}}, {len(t.shape)}, {c_string(shape_str(t.shape))}}}"
        ins = [info(p.name, p.type) for p in self.func.params]
        outs = [info(f"output{k}" if len(self.output_vars()) > 1 else "output", v.type)
                for k, v in enumerate(self.output_vars())]
        return ins, outs


def _replace_word(text: str, word: str, new: str) -> str:
    return re.sub(rf"(?<![\w>.]){re.escape(word)}(?!\w)", new, text)


def check_supported_types(func: Function) -> None:
    ret = func.ret_type
    if isinstance(ret, TupleType) and not all(isinstance(f, TensorType) for f in ret.fields):
        raise CodegenError(f"function {func.name}: nested tuple outputs are not supported")
