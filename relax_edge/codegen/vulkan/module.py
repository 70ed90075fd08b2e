"""A host module as C that runs its kernels through the Vulkan runtime
(runtime_c/vulkan/): `emit_vulkan(host, board)` -> CSources.

Every kernel is emitted as GLSL (kernel.py), compiled to SPIR-V and checked
(spirv.py), and embedded in PREFIX.c as a uint32 array with its
rxe_vk_kernel_t record; the module's rxe_vk_requirements_t is the maximum
over its kernels. The host functions are the C backend's (codegen/c/host.py:
the same operations, the same input and shape checks, the same entry table)
except where the work happens:

- `PREFIX_vk_init(options, err)` opens a device (options NULL: the board's
  defaults), checks the requirements, creates every pipeline
  (rxe_vk_load) and uploads the weights into one device buffer;
  `PREFIX_vk_close()` frees everything; `PREFIX_vk_context()` is the open
  context (NULL before init). A run initializes with the defaults when no
  one did (the runner and the RPC server).
- A run binds the sizes and lays out the memory plan as the C host does;
  the arena is one device storage buffer (grown when a run needs more), each
  input and output one device buffer (grown likewise). The inputs are
  written, one command buffer records an rxe_vk_dispatch per kernel call
  (views: buffer, the planned byte offset; the call's size values checked to
  fit int32; items computed from them), the run is submitted with a timeout
  (RXE_VK_TIMEOUT_NS, default 60 s) and the outputs are read back.
- int64 tensors: every int64 value in device memory must lie in [-2^30,
  2^30) (kernel.py, DATA64): a run checks each int64 input before upload
  (`PREFIX_vk_check64`: RXE_ERR_BOUND naming the input and the value) and
  the build checks the int64 weights the kernels read (CodegenError naming
  the kernel). Outputs come back as the kernels wrote them (sign-extended
  pairs); bool tensors are bytes on both sides.
- Asserts (kernel.py): the module has one status buffer, a block of
  STATUS_WORDS words per kernel with asserts (`PREFIX_vk_status`), zeroed
  before each run and bound as that kernel's last view. After the submit
  the run reads it back (`PREFIX_vk_status_check`): the first kernel whose
  block is set fails the run with RXE_ERR_INDEX and its assert's message
  and values, the C backend's text (e.g. "take: index 1000 out of range
  [-4, 4) on axis 1"); the outputs are not read.
- The host workspace the ABI passes is not used (the arena lives on the
  device).
- `PREFIX_FUNC_vk_rows` names each dispatch of a run in order (kernel
  symbol, node: NULL-terminated pairs), for the profile built from
  rxe_vk_times.

- int64 value ranges: a kernel's int64 loads are known to lie in [-2^30,
  2^30) unless more is known (`int64_ranges`): an int64 weight holds the
  values the blob has, a workspace value the ones its producing kernel
  proved it stored (its record's `stored`), in the order of the run; each
  kernel is emitted with the union over its calls. So shape arithmetic
  (total_seq - seq, positions from arange plus a stored offset) is proven
  to fit on the device.
- KV-cache decoders (kv.py): kv_append and kv_attention dispatch their
  shaders. A `step` function's state inputs (state_<N>, transform/
  kv_state.py), and any input that kv_append writes in place, live in
  device buffers of their fixed size, made at init and kept across runs
  (`PREFIX_FUNC_vk_state`). By default a run keeps the C build's in-place
  state without moving the cache per token: a host shadow of each state
  says what the device holds, so a run writes the state input only when
  the caller's bytes differ from it (memcmp), and after the submit reads
  back only the rows its kv_append wrote (kv_heads ranges of seq x
  head_dim; the whole state where other kernels touch it), into the input
  and the shadow; a failed run leaves the shadow invalid (the next run
  writes the state); after `PREFIX_vk_keep_state(1)` (what
  `m.generate` sets around rxe_generate) the device buffers are the state:
  nothing of it crosses to the host, a run reads back only the logits.

Refused (CodegenError naming the node): library kernels other than the
matmul and the KV-cache ones, copies between values, `if`
and `loop` control flow, and kernels with a serial loop that may run more
than MAX_SERIAL_ITERATIONS times in one invocation (lavapipe stops any
shader loop after 65,535 iterations without an error).
"""

from __future__ import annotations

import tempfile

import numpy as np

from ...errors import RelaxEdgeError
from ...ir.shape import bounds, substitute
from ...tir.stmt import For
from ...tir.visit import StmtVisitor
from ..c.host import CHostEmitter
from ..c.kernel import c_string
from ..c.module import _ENV, CSources, _context, support_files
from ..host_program import Address, CodegenError, HostFunction, HostModule
from . import conv, kv, matmul
from .grid import map_grid
from .kernel import DATA64, STATUS_VALUES, STATUS_WORDS, GlslUnsupported, emit_glsl
from .spirv import compile_spirv

__all__ = ["emit_vulkan", "MAX_SERIAL_ITERATIONS"]

MAX_SERIAL_ITERATIONS = 65535


class _Serial(StmtVisitor):
    """The longest loop's bound (and its variable) in a statement."""

    def __init__(self):
        super().__init__()
        self.worst = 0
        self.name = ""

    def visit_For(self, s: For):
        hi = bounds(s.extent)[1]
        hi = float("inf") if hi is None else hi
        if hi > self.worst:
            self.worst, self.name = hi, getattr(s.var, "name", str(s.var))
        super().visit_For(s)


def check_loops(symbol: str, program) -> None:
    """Refuse a kernel whose serial loops (those inside one invocation) may
    run past the device's loop limit."""
    checker = _Serial()
    checker.visit(map_grid(program).body)
    if checker.worst > MAX_SERIAL_ITERATIONS:
        raise CodegenError(f"kernel {symbol}: a serial loop ({checker.name}) may run {checker.worst} iterations in "
                           f"one invocation, past the {MAX_SERIAL_ITERATIONS} a Vulkan shader loop may run on "
                           "lavapipe; bound the sizes lower (--dim NAME=LO..HI)")


def _union(a, b):
    return b if a is None else (min(a[0], b[0]), max(a[1], b[1]))


def _weight_range(param, a: Address, blob: bytes):
    n = int(param.numel())
    values = np.frombuffer(blob, dtype="<i8", count=n, offset=int(a.index))
    return (int(values.min()), int(values.max())) if n else (0, 0)


def int64_ranges(host: HostModule, local: int, blob: bytes, rounds: int = 6) -> dict:
    """symbol -> {int64 parameter name: (lo, hi)}: what each kernel's int64
    loads hold over all its calls, from the weights and from what the kernels
    before proved they stored (the module docstring); {} for a kernel without
    int64 parameters. Rounds until nothing widens; if that takes more than
    `rounds`, no ranges (every load in [-2^30, 2^30), always sound)."""
    int64 = {symbol: p for symbol, p in host.kernels.items() if any(b.dtype == "int64" for b in p.params)}
    ranges: dict = {symbol: {} for symbol in int64}
    default = (-DATA64, DATA64 - 1)
    for _ in range(rounds):
        before = {k: dict(v) for k, v in ranges.items()}
        for fn in host.functions:
            known: dict = {}   # (base, index) -> the range of the int64 values last stored there
            for op in fn.entries.get("run", []):
                if not hasattr(op, "buffers"):
                    continue
                if op.symbol not in int64:
                    for a in op.buffers:   # a library call: whatever it writes is only known to be in range
                        known.pop((a.base, a.index), None)
                    continue
                program = int64[op.symbol]
                for param, a in zip(program.params, op.buffers):
                    if param.dtype != "int64" or param not in program.inputs:
                        continue
                    r = _weight_range(param, a, blob) if a.base == "weights" else known.get((a.base, a.index),
                                                                                           default)
                    ranges[op.symbol][param.name] = _union(ranges[op.symbol].get(param.name), r)
                try:
                    _, record = emit_glsl(program, local, inplace=op.symbol in host.inplace,
                                          ranges=ranges[op.symbol])
                    stored = record.stored
                except GlslUnsupported:
                    stored = {}
                for param, a in zip(program.params, op.buffers):
                    if param in program.outputs:
                        known[(a.base, a.index)] = stored.get(param.name, default)
        if ranges == before:
            return ranges
    return {}


def check_int64_weights(symbol: str, program, addresses, blob: bytes) -> None:
    """Refuse a kernel reading an int64 weight with a value outside the
    device's int64 range (kernel.py's DATA64)."""
    for param, a in zip(program.params, addresses):
        if param.dtype != "int64" or a.base != "weights":
            continue
        n = int(param.numel())
        values = np.frombuffer(blob, dtype="<i8", count=n, offset=int(a.index))
        if n and (values.min() < -DATA64 or values.max() >= DATA64):
            raise CodegenError(f"kernel {symbol}: the int64 constant {param.name} holds values outside [-2^30, 2^30), "
                               "the range of int64 values on the Vulkan device")


def _constant_shape(text: str) -> bool:
    """An ArgInfo's printed shape "(1, 2, 64, 16)" has only constant dims."""
    dims = [d.strip() for d in text.strip("()").split(",") if d.strip()]
    return all(d.isdigit() for d in dims)


def _spirv_array(name: str, spirv: bytes) -> str:
    words = np.frombuffer(spirv, dtype="<u4")
    rows = [", ".join(f"0x{int(w):08x}u" for w in words[i:i + 8]) for i in range(0, len(words), 8)]
    return f"static const uint32_t {name}[{len(words)}] = {{\n  " + ",\n  ".join(rows) + "\n};"


class VulkanHostEmitter(CHostEmitter):
    """The C host entries with each kernel call a dispatch of the Vulkan runtime."""

    def __init__(self, fn: HostFunction, weights_symbol: str, prefix: str, kernels: dict, weights: bytes = b"",
                 slots: dict | None = None, matmul_shape: tuple = (matmul.THREADS, matmul.BLOCKS[matmul.TILED])):
        super().__init__(fn, weights_symbol)
        self.matmul_shape = matmul_shape   # (workgroup size, tiled block) of the matmul shaders
        self.workgroup = matmul_shape[0]   # the board's workgroup size (the KV-cache shaders' too)
        self.slots = slots or {}   # symbol -> its block in the status buffer (kernels with asserts)
        self.weights = weights
        self.prefix = prefix
        self.kernels = kernels   # symbol -> (index, KernelRecord, TensorProgram)
        self.io = len(fn.inputs) + len(fn.outputs)
        self.begun = False
        # the state inputs (a decoder step's state_<N>, any input kv_append writes in place; constant shapes):
        # input index -> its slot in PREFIX_FUNC_vk_state
        appended = {op.buffers[0].index for op in fn.entries.get("run", []) if getattr(op, "symbol", None) ==
                    kv.APPEND_SYMBOL and op.buffers and op.buffers[0].base == "inputs"}
        chosen = [i for i, a in enumerate(fn.inputs) if (fn.name == "step" and a.name.startswith("state_"))
                  or i in appended]
        self.states = {i: k for k, i in enumerate(i for i in chosen if _constant_shape(fn.inputs[i].shape))}
        self.rows_only = self.appended_once()

    def render(self) -> str:
        p = self.p
        io = max(self.io, 1)
        head = [f"static rxe_vk_buffer_t* {p}_vk_io[{io}];", f"static uint64_t {p}_vk_io_bytes[{io}];", ""]
        rows = [f"{c_string(kernel)}, {c_string(span)}," for kernel, span in self.fn.profile_rows]
        names = ["/* per dispatch of a run, in order: (kernel, node) */", f"const char* const {p}_vk_rows[] = {{",
                 *(f"  {row}" for row in rows), "  NULL};", ""]
        return "\n".join(head + self.state_head()) + super().render() + "\n" + self.release() + "\n".join(names)

    def appended_once(self) -> set:
        """The state slots that one kv_append writes and only kv_attention reads
        as its keys or values: after a run only the appended rows come back."""
        appends, other = {}, set()
        for op in self.fn.entries.get("run", []):
            for position, a in enumerate(getattr(op, "buffers", None) or []):
                if a.base != "inputs" or a.index not in self.states:
                    continue
                k = self.states[a.index]
                if op.symbol == kv.APPEND_SYMBOL and position == 0:
                    appends[k] = appends.get(k, 0) + 1
                elif not ((op.symbol == kv.APPEND_SYMBOL and position == 2)
                          or (op.symbol == kv.ATTENTION_SYMBOL and position in (1, 2))):
                    other.add(k)
        return {k for k, n in appends.items() if n == 1 and k not in other}

    def state_bytes(self, i: int) -> int:
        shape = [int(d) for d in self.fn.inputs[i].shape.strip("()").split(",") if d.strip()]
        return 4 * int(np.prod(shape))

    def state_head(self) -> list:
        """The state buffers and their allocation at init (empty without states)."""
        if not self.states:
            return []
        p, g, n = self.p, self.prefix, len(self.states)
        lines = [f"static rxe_vk_buffer_t* {p}_vk_state[{n}];",
                 "/* what the host and the device both hold of each state (valid when shadow_ok) */",
                 f"static uint8_t* {p}_vk_shadow[{n}];", f"static int {p}_vk_shadow_ok[{n}];",
                 "/* this run's kv_append of each state: kv_heads, max_context, seq, head_dim, offset",
                 "   (seq -1: none) */",
                 f"static int64_t {p}_vk_appended[{n}][5];",
                 "/* the device buffers of the state inputs and their host shadows, made at init, kept across runs */",
                 f"static rxe_status_t {p}_vk_state_new(rxe_error_t* err) {{", "  rxe_status_t st = RXE_OK;"]
        for i, k in self.states.items():
            lines += [f"  if (st == RXE_OK) st = rxe_vk_buffer_new({g}_vk, {self.state_bytes(i)}u, "
                      f"&{p}_vk_state[{k}], err);",
                      f"  if (st == RXE_OK && ({p}_vk_shadow[{k}] = (uint8_t*)calloc({self.state_bytes(i)}u, 1)) "
                      "== NULL) {",
                      f"    st = rxe_error_set(err, RXE_ERR_NO_MEMORY, \"no host memory for the shadow of state "
                      f"input %d\", (int64_t){i});", "  }", f"  {p}_vk_shadow_ok[{k}] = 0;"]
        return lines + ["  return st;", "}", ""]

    def state_upload(self, i: int, k: int) -> list:
        """Before a run: the state input written to its device buffer unless the
        device already holds it (the shadow says so), or kept (PREFIX_vk_keep_state);
        the shadow invalid until the run's rows are back."""
        p, g, nbytes = self.p, self.prefix, self.state_bytes(i)
        return [f"  if ({g}_vk_keep) {{", f"    {p}_vk_shadow_ok[{k}] = 0;",
                f"  }} else if (!{p}_vk_shadow_ok[{k}] || memcmp(RXE_DATA(inputs[{i}]), {p}_vk_shadow[{k}], "
                f"{nbytes}u) != 0) {{",
                f"    st = rxe_vk_buffer_write({g}_vk, {p}_vk_state[{k}], 0, RXE_DATA(inputs[{i}]), {nbytes}u, "
                "err);",
                "    if (st != RXE_OK) return st;",
                f"    memcpy({p}_vk_shadow[{k}], RXE_DATA(inputs[{i}]), {nbytes}u);",
                "  }", f"  {p}_vk_shadow_ok[{k}] = 0;", f"  {p}_vk_appended[{k}][2] = -1;"]

    def state_download(self, i: int, k: int) -> list:
        """After the submit: the rows this run appended (or the whole state)
        back into the caller's input and the shadow, unless kept."""
        p, g, nbytes = self.p, self.prefix, self.state_bytes(i)
        whole = [f"      st = rxe_vk_buffer_read({g}_vk, {p}_vk_state[{k}], 0, RXE_DATA(inputs[{i}]), {nbytes}u, "
                 "err);", "      if (st != RXE_OK) return st;",
                 f"      memcpy({p}_vk_shadow[{k}], RXE_DATA(inputs[{i}]), {nbytes}u);"]
        lines = [f"  if (!{g}_vk_keep) {{"]
        if k in self.rows_only:
            r = f"{p}_vk_appended[{k}]"
            lines += [f"    if ({r}[2] >= 0) {{", f"      for (int64_t h = 0; h < {r}[0]; ++h) {{",
                      f"        uint64_t at = (uint64_t)((h * {r}[1] + {r}[4]) * {r}[3]) * 4u, "
                      f"n = (uint64_t)({r}[2] * {r}[3]) * 4u;",
                      f"        st = rxe_vk_buffer_read({g}_vk, {p}_vk_state[{k}], at, RXE_DATA(inputs[{i}]) + at, "
                      "n, err);",
                      "        if (st != RXE_OK) return st;",
                      f"        memcpy({p}_vk_shadow[{k}] + at, RXE_DATA(inputs[{i}]) + at, n);", "      }",
                      "    } else {", *whole, "    }"]
        else:
            lines += [x[2:] for x in whole]
        return lines + [f"    {p}_vk_shadow_ok[{k}] = 1;", "  }"]

    def release(self) -> str:
        p = self.p
        return "\n".join([f"static void {p}_vk_release(void) {{",
                          f"  for (uint32_t i = 0; i < {max(self.io, 1)}u; ++i) {{",
                          f"    rxe_vk_buffer_free({self.prefix}_vk, {p}_vk_io[i]);",
                          f"    {p}_vk_io[i] = NULL;", f"    {p}_vk_io_bytes[i] = 0;", "  }",
                          *(f"  rxe_vk_buffer_free({self.prefix}_vk, {p}_vk_state[{k}]);\n"
                            f"  {p}_vk_state[{k}] = NULL;\n  free({p}_vk_shadow[{k}]);\n  {p}_vk_shadow[{k}] = NULL;\n"
                            f"  {p}_vk_shadow_ok[{k}] = 0;" for k in self.states.values()), "}", ""])

    def entry(self, kind: str, head: str) -> list:
        self.begun = False
        lines = super().entry(kind, head)
        if kind != "run" or not self.begun:
            return lines
        g = self.prefix
        tail = [f"  st = rxe_vk_submit({g}_vk, (uint64_t)RXE_VK_TIMEOUT_NS, err);", "  if (st != RXE_OK) return st;"]
        if self.slots:
            tail += [f"  st = {g}_vk_status_check(err);", "  if (st != RXE_OK) return st;"]
        for i, k in self.states.items():   # the in-place state back to the caller, unless it stays on the device
            tail += self.state_download(i, k)
        for k in range(len(self.fn.outputs)):
            slot = len(self.fn.inputs) + k
            tail += [f"  st = rxe_vk_buffer_read({g}_vk, {self.p}_vk_io[{slot}], 0, RXE_DATA(outputs[{k}]), "
                     f"{g}_vk_tensor_bytes(&outputs[{k}]), err);", "  if (st != RXE_OK) return st;"]
        at = max(i for i, line in enumerate(lines) if line == "  return RXE_OK;")
        return lines[:at] + tail + lines[at:]

    def check_workspace(self, op) -> list:
        g = self.prefix
        return [f"  st = {g}_vk_init(NULL, err);", "  if (st != RXE_OK) return st;",
                f"  st = {g}_vk_reserve(&{g}_vk_arena, &{g}_vk_arena_bytes, needed, err);",
                "  if (st != RXE_OK) return st;"]

    def prologue(self) -> list:
        """Device buffers for the inputs and outputs, the inputs written, the recording begun."""
        g, p = self.prefix, self.p
        lines = []
        lines += self.check_int64_inputs()
        for i in range(len(self.fn.inputs)):
            if i in self.states:
                lines += self.state_upload(i, self.states[i])
                continue
            lines += [f"  st = {g}_vk_reserve(&{p}_vk_io[{i}], &{p}_vk_io_bytes[{i}], "
                      f"{g}_vk_tensor_bytes(&inputs[{i}]), err);", "  if (st != RXE_OK) return st;",
                      f"  st = rxe_vk_buffer_write({g}_vk, {p}_vk_io[{i}], 0, RXE_DATA(inputs[{i}]), "
                      f"{g}_vk_tensor_bytes(&inputs[{i}]), err);", "  if (st != RXE_OK) return st;"]
        for k in range(len(self.fn.outputs)):
            slot = len(self.fn.inputs) + k
            lines += [f"  st = {g}_vk_reserve(&{p}_vk_io[{slot}], &{p}_vk_io_bytes[{slot}], "
                      f"{g}_vk_tensor_bytes(&outputs[{k}]), err);", "  if (st != RXE_OK) return st;"]
        if self.slots:
            lines += [f"  st = {g}_vk_status_clear(err);", "  if (st != RXE_OK) return st;"]
        return lines + [f"  st = rxe_vk_begin({g}_vk, err);", "  if (st != RXE_OK) return st;"]

    def check_int64_inputs(self) -> list:
        """Each int64 input checked to lie in the device's int64 range (kernel.py's DATA64)."""
        lines = []
        for i, arg in enumerate(self.fn.inputs):
            if (arg.code, arg.bits) == (0, 64):
                lines += [f"  st = {self.prefix}_vk_check64(&inputs[{i}], {c_string(arg.name)}, err);",
                          "  if (st != RXE_OK) return st;"]
        return lines

    def view(self, op) -> list:
        return [f"  /* {op.name}: a view of {op.of}, no kernel */"]

    def device_view(self, a: Address) -> str:
        g, p = self.prefix, self.p
        if a.base == "inputs" and a.index in self.states:
            return f"{{{p}_vk_state[{self.states[a.index]}], 0, 0}}"
        if a.base == "inputs":
            return f"{{{p}_vk_io[{a.index}], 0, 0}}"
        if a.base == "outputs":
            return f"{{{p}_vk_io[{len(self.fn.inputs) + a.index}], 0, 0}}"
        if a.base == "weights":
            return f"{{{g}_vk_weights, {a.index}u, 0}}"
        if a.base == "workspace":
            return f"{{{g}_vk_arena, offsets[{a.index}], 0}}"
        raise CodegenError(f"function {self.fn.name}: a kernel argument in the run-time sizes is not supported on "
                           "Vulkan yet")

    def call_kernel(self, op) -> list:
        if op.symbol == matmul.MATMUL_SYMBOL:
            return self.call_matmul(op)
        if op.symbol == kv.APPEND_SYMBOL:
            return self.call_append(op)
        if op.symbol == kv.ATTENTION_SYMBOL:
            return self.call_attention(op)
        if op.symbol in (conv.CONV_SYMBOL, conv.DEPTHWISE_SYMBOL):
            lines = [] if self.begun else self.prologue()
            self.begun = True
            emit = conv.dispatch_lines if op.symbol == conv.CONV_SYMBOL else conv.depthwise_lines
            return lines + emit(self.prefix, ", ".join(self.device_view(a) for a in op.buffers),
                                               ", ".join(f"(int64_t)({self.r.int_expr(s)})" for s in op.sizes),
                                               self.kernels)
        if op.symbol not in self.kernels:
            raise CodegenError(f"function {self.fn.name}: the library kernel {op.symbol} ({op.note or 'call'}) cannot "
                               "run on Vulkan; build without library kernels")
        index, record, program = self.kernels[op.symbol]
        lines = [] if self.begun else self.prologue()
        self.begun = True
        status = []
        if record.status:   # the status block of this kernel (kernel.py's Assert)
            status = [f"{{{self.prefix}_vk_status, {4 * STATUS_WORDS * self.slots[op.symbol]}u, {4 * STATUS_WORDS}u}}"]
        if len(op.buffers) + len(status) != record.num_buffers or len(op.sizes) != len(record.size_params):
            raise CodegenError(f"kernel {op.symbol}: {len(op.buffers)} buffers and {len(op.sizes)} sizes, its shader "
                               f"takes {record.num_buffers} and {len(record.size_params)}")
        check_int64_weights(op.symbol, program, op.buffers, self.weights)
        items = substitute(record.items, dict(zip(program.size_params, op.sizes)))
        views = ", ".join([self.device_view(a) for a in op.buffers] + status)
        ns = len(op.sizes)
        lines += ["  {", f"    const rxe_vk_view_t v[{record.num_buffers}] = {{{views}}};"]
        if ns:
            values = ", ".join(f"(int64_t)({self.r.int_expr(s)})" for s in op.sizes)
            lines += [f"    const int64_t z64[{ns}] = {{{values}}};", f"    int32_t z[{ns}];",
                      f"    st = {self.prefix}_vk_sizes32(z64, z, {ns}u, {c_string(op.symbol)}, err);"]
            sizes = "z"
        else:
            lines.append("    st = RXE_OK;")
            sizes = "NULL"
        lines += [f"    if (st == RXE_OK) st = rxe_vk_dispatch({self.prefix}_vk, {index}u, v, {sizes}, "
                  f"(uint64_t)({self.r.int_expr(items)}), err);", "  }"]
        return lines

    def call_matmul(self, op) -> list:
        """The matmul library call as a dispatch of the tiled shader, or of the
        GEMV when its m is 1 at run time (sizes: batch, m, n, k, a_stride, b_stride)."""
        if len(op.buffers) != 3 or len(op.sizes) != 6:
            raise CodegenError(f"function {self.fn.name}: {op.symbol} with {len(op.buffers)} buffers and "
                               f"{len(op.sizes)} sizes; the Vulkan matmul takes 3 and 6")
        lines = [] if self.begun else self.prologue()
        self.begun = True
        tiled, gemv = self.kernels[matmul.TILED][0], self.kernels[matmul.GEMV][0]
        views = ", ".join(self.device_view(a) for a in op.buffers)
        values = ", ".join(f"(int64_t)({self.r.int_expr(s)})" for s in op.sizes)
        items_tiled, items_gemv = matmul.items_c("z64[0]", "z64[1]", "z64[2]", *self.matmul_shape)
        return lines + ["  {", f"    const rxe_vk_view_t v[3] = {{{views}}};",
                        f"    const int64_t z64[6] = {{{values}}};", "    int32_t z[6];",
                        f"    st = {self.prefix}_vk_sizes32(z64, z, 6u, {c_string(op.symbol)}, err);",
                        f"    if (st == RXE_OK) st = z64[1] == 1 ? rxe_vk_dispatch({self.prefix}_vk, {gemv}u, v, z, "
                        f"(uint64_t){items_gemv}, err) : rxe_vk_dispatch({self.prefix}_vk, {tiled}u, v, z, "
                        f"(uint64_t){items_tiled}, err);", "  }"]

    def dispatch_library(self, op, shader: str, views: list, items: str, checks: list) -> list:
        """A library call as one dispatch of `shader` over `views` with the
        call's sizes, after the host-side `checks` (C lines over z64)."""
        lines = [] if self.begun else self.prologue()
        self.begun = True
        index = self.kernels[shader][0]
        ns = len(op.sizes)
        values = ", ".join(f"(int64_t)({self.r.int_expr(s)})" for s in op.sizes)
        return lines + ["  {", f"    const rxe_vk_view_t v[{len(views)}] = {{{', '.join(views)}}};",
                        f"    const int64_t z64[{ns}] = {{{values}}};", f"    int32_t z[{ns}];", *checks,
                        f"    st = {self.prefix}_vk_sizes32(z64, z, {ns}u, {c_string(op.symbol)}, err);",
                        f"    if (st == RXE_OK) st = rxe_vk_dispatch({self.prefix}_vk, {index}u, v, z, "
                        f"(uint64_t){items}, err);", "  }"]

    def call_append(self, op) -> list:
        """kv_append (buffers state, new, out; sizes kv_heads, max_context, seq,
        head_dim, offset): its result must be the state's storage."""
        if len(op.buffers) != 3 or len(op.sizes) != 5:
            raise CodegenError(f"function {self.fn.name}: {op.symbol} with {len(op.buffers)} buffers and "
                               f"{len(op.sizes)} sizes; the Vulkan kv_append takes 3 and 5")
        state, new, out = op.buffers
        if (state.base, state.index) != (out.base, out.index):
            raise CodegenError(f"function {self.fn.name}: {op.symbol} ({op.note or 'kv_append'}) writes its result "
                               "outside the state's storage (a copy of the whole cache); on Vulkan the state must "
                               "be updated in place")
        bound = ["    if (z64[4] < 0 || z64[2] < 0 || z64[4] + z64[2] > z64[1]) {",
                 "      return rxe_error_set(err, RXE_ERR_BOUND, \"kv_append: positions [%d, %d) are outside the "
                 "cache's context bound max_context=%d\", z64[4], z64[4] + z64[2], z64[1]);", "    }"]
        if state.base == "inputs" and self.states.get(state.index) in self.rows_only:
            k = self.states[state.index]
            bound += [f"    for (int j = 0; j < 5; ++j) {self.p}_vk_appended[{k}][j] = z64[j];"]
        return self.dispatch_library(op, kv.APPEND, [self.device_view(out), self.device_view(new)],
                                     kv.append_items_c("z64[0]", "z64[2]", "z64[3]"), bound)

    def call_attention(self, op) -> list:
        """kv_attention (buffers q, k, v, mask, scale, out[, scratch: unused
        here]; sizes heads, kv_heads, seq, kv_len, max_context, head_dim,
        has_mask, mask strides)."""
        if len(op.buffers) < 6 or len(op.sizes) != 9:
            raise CodegenError(f"function {self.fn.name}: {op.symbol} with {len(op.buffers)} buffers and "
                               f"{len(op.sizes)} sizes; the Vulkan kv_attention takes 6 (and scratch) and 9")
        checks = ["    if (z64[1] <= 0 || z64[0] % z64[1] != 0) {",
                  "      return rxe_error_set(err, RXE_ERR_SHAPE, \"kv_attention: %d query heads are not a multiple of "
                  "%d KV heads\", z64[0], z64[1]);", "    }",
                  "    if (z64[3] < 0 || z64[3] > z64[4]) {",
                  "      return rxe_error_set(err, RXE_ERR_BOUND, \"kv_attention: %d positions exceed the context "
                  "bound max_context=%d\", z64[3], z64[4]);", "    }"]
        return self.dispatch_library(op, kv.ATTENTION, [self.device_view(a) for a in op.buffers[:6]],
                                     kv.attention_items_c("z64[0]", "z64[2]", self.workgroup), checks)

    def copy(self, op) -> list:
        raise CodegenError(f"function {self.fn.name}: a copy of {op.bytes} bytes between values is not supported on "
                           "Vulkan yet")

    def copy_slot(self, op) -> list:
        raise CodegenError(f"function {self.fn.name}: loops are not supported on Vulkan yet")

    def loop_begin(self, op) -> list:
        raise CodegenError(f"function {self.fn.name}: {op.what} is not supported on Vulkan yet")

    def branch(self, op) -> list:
        raise CodegenError(f"function {self.fn.name}: {op.what} is not supported on Vulkan yet")


SUPPORT = """\
#ifndef RXE_VK_TIMEOUT_NS
#define RXE_VK_TIMEOUT_NS 60000000000ull
#endif
static rxe_vk_t* {g}_vk = NULL;
static rxe_vk_buffer_t* {g}_vk_weights = NULL;
static rxe_vk_buffer_t* {g}_vk_arena = NULL;
static rxe_vk_buffer_t* {g}_vk_status = NULL;
static uint64_t {g}_vk_arena_bytes = 0;
static int {g}_vk_keep = 0;   /* 1: the state inputs stay on the device (PREFIX_vk_keep_state) */

/* keep = 1: a step's state lives in its device buffers, runs neither write nor read it back (generation);
   keep = 0 (the default): each run writes the state inputs and reads them back (in place, as in C) */
void {g}_vk_keep_state(int keep) {{ {g}_vk_keep = keep != 0; }}

static uint64_t {g}_vk_tensor_bytes(const rxe_tensor_t* t) {{
  uint64_t n = (uint64_t)((t->dtype.bits + 7) / 8);
  for (int32_t d = 0; d < t->ndim; ++d) n *= (uint64_t)t->shape[d];
  return n;
}}

/* *b holds at least `bytes` (at least 4, in 256-byte steps), a new buffer when it did not */
static rxe_status_t {g}_vk_reserve(rxe_vk_buffer_t** b, uint64_t* have, uint64_t bytes, rxe_error_t* err) {{
  rxe_status_t st;
  bytes = bytes < 4 ? 4 : (bytes + 255u) / 256u * 256u;
  if (*b != NULL && *have >= bytes) return RXE_OK;
  rxe_vk_buffer_free({g}_vk, *b);
  *b = NULL;
  *have = 0;
  st = rxe_vk_buffer_new({g}_vk, bytes, b, err);
  if (st == RXE_OK) *have = bytes;
  return st;
}}

/* the size values of a dispatch, each checked to fit int32 */
static rxe_status_t {g}_vk_sizes32(const int64_t* v, int32_t* out, uint32_t n, const char* kernel, rxe_error_t* err) {{
  for (uint32_t i = 0; i < n; ++i) {{
    if (v[i] < INT32_MIN || v[i] > INT32_MAX) {{
      return rxe_error_set(err, RXE_ERR_BOUND, "kernel %s: size value %d does not fit 32 bits", kernel, v[i]);
    }}
    out[i] = (int32_t)v[i];
  }}
  return RXE_OK;
}}

/* every value of int64 tensor t lies in [-2^30, 2^30), the range of int64 values on the device */
static rxe_status_t {g}_vk_check64(const rxe_tensor_t* t, const char* name, rxe_error_t* err) {{
  const int64_t* v = (const int64_t*)RXE_DATA(*t);
  uint64_t n = {g}_vk_tensor_bytes(t) / 8u;
  for (uint64_t i = 0; i < n; ++i) {{
    if (v[i] < -1073741824ll || v[i] >= 1073741824ll) {{
      return rxe_error_set(err, RXE_ERR_BOUND, "input %s: element %d is %d, outside [-2^30, 2^30), the range of "
                           "int64 values on the Vulkan device", name, (int64_t)i, v[i]);
    }}
  }}
  return RXE_OK;
}}

static const rxe_vk_requirements_t {g}_vk_requirements = {{{req}}};
"""

INIT = """\
rxe_vk_t* {g}_vk_context(void) {{ return {g}_vk; }}

void {g}_vk_close(void) {{
{release}  rxe_vk_buffer_free({g}_vk, {g}_vk_arena);
  rxe_vk_buffer_free({g}_vk, {g}_vk_weights);
  rxe_vk_buffer_free({g}_vk, {g}_vk_status);
  {g}_vk_status = NULL;
  {g}_vk_arena = NULL;
  {g}_vk_weights = NULL;
  {g}_vk_arena_bytes = 0;
  rxe_vk_close({g}_vk);
  {g}_vk = NULL;
}}

/* open the device (options NULL: the board's defaults), check the module's
   requirements, create the pipelines, upload the weights; once */
rxe_status_t {g}_vk_init(const rxe_vk_options_t* options, rxe_error_t* err) {{
  rxe_vk_options_t defaults;
  rxe_status_t st;
  if ({g}_vk != NULL) return RXE_OK;
  if (options == NULL) {{
    memset(&defaults, 0, sizeof defaults);
    defaults.allow_cpu = {allow_cpu};
    defaults.device_index = -1;
    options = &defaults;
  }}
  st = rxe_vk_open(options, &{g}_vk, err);
  if (st != RXE_OK) {{
    {g}_vk = NULL;
    return st;
  }}
  st = rxe_vk_check({g}_vk, &{g}_vk_requirements, err);
  if (st == RXE_OK && {count}u > 0) st = rxe_vk_load({g}_vk, {g}_vk_kernels, {count}u, err);
  if (st == RXE_OK) st = rxe_vk_buffer_new({g}_vk, {weights}u, &{g}_vk_weights, err);
  if (st == RXE_OK) st = rxe_vk_buffer_write({g}_vk, {g}_vk_weights, 0, {g}_weights, {weights}u, err);
  if (st == RXE_OK && {status}u > 0) st = rxe_vk_buffer_new({g}_vk, {status}u, &{g}_vk_status, err);
{states}  if (st != RXE_OK) {g}_vk_close();
  return st;
}}
"""


STATUS = """\
/* the status blocks of the kernels with asserts (kernel.py): zeroed before a run */
static rxe_status_t {g}_vk_status_clear(rxe_error_t* err) {{
  static const uint32_t zero[{words}] = {{0}};
  return rxe_vk_buffer_write({g}_vk, {g}_vk_status, 0, zero, sizeof zero, err);
}}

/* after a run: the first kernel whose block records a failed assert fails the run with its message */
static rxe_status_t {g}_vk_status_check(rxe_error_t* err) {{
  static const char* const kernels[{slots}] = {{{kernels}}};
  static const uint32_t first[{slots}] = {{{first}}};
  static const uint32_t count[{slots}] = {{{count}}};
  static const char* const messages[{messages}] = {{
{message_rows}}};
  uint32_t w[{words}];
  rxe_status_t st = rxe_vk_buffer_read({g}_vk, {g}_vk_status, 0, w, sizeof w, err);
  if (st != RXE_OK) return st;
  for (uint32_t s = 0; s < {slots}u; ++s) {{
    const uint32_t* b = w + s * {block}u;
    int64_t v[{values}];
    if (b[0] == 0u) continue;
    if (b[2] >= count[s]) {{
      return rxe_error_set(err, RXE_ERR_INTERNAL, "kernel %s: its status block names assert %d of %d", kernels[s],
                           (int64_t)b[2], (int64_t)count[s]);
    }}
    for (uint32_t i = 0; i < {values}u; ++i) v[i] = (int64_t)(int32_t)b[3 + i];
    return rxe_error_set(err, RXE_ERR_INDEX, messages[first[s] + b[2]], {args});
  }}
  return RXE_OK;
}}
"""


def _status_support(prefix: str, compiled: list, slots: dict) -> str:
    """The status buffer's clear and check functions (empty when no kernel has asserts)."""
    if not slots:
        return ""
    records = {symbol: record for symbol, record, _ in compiled}
    order = sorted(slots, key=slots.get)
    first, messages = [], []
    for symbol in order:
        first.append(len(messages))
        messages += records[symbol].asserts
    return STATUS.format(
        g=prefix, slots=len(order), words=STATUS_WORDS * len(order), block=STATUS_WORDS, values=STATUS_VALUES,
        kernels=", ".join(c_string(x) for x in order), first=", ".join(f"{x}u" for x in first),
        count=", ".join(f"{len(records[x].asserts)}u" for x in order), messages=len(messages),
        message_rows="".join(f"    {c_string(m)},\n" for m in messages),
        args=", ".join(f"v[{i}]" for i in range(STATUS_VALUES)))


def _kernel_table(prefix: str, compiled: list) -> str:
    rows = []
    for symbol, record, spirv in compiled:
        words = len(spirv) // 4
        rows.append(f"  {{{c_string(symbol)}, {prefix}_spv_{symbol}, {words}u, {record.num_buffers}u, "
                    f"{record.push_words}u, {record.local_size_x}u, {record.shared_bytes}u, {record.flags}u}},")
    rows = rows or ["  {\"(none)\", NULL, 0u, 0u, 2u, 1u, 0u, 0u},"]
    return f"static const rxe_vk_kernel_t {prefix}_vk_kernels[] = {{\n" + "\n".join(rows) + "\n};"


def _requirements(compiled: list) -> str:
    push = max([4 * min(r.push_words, 32) for _, r, _ in compiled] or [8])
    buffers = max([r.num_buffers + (1 if r.push_in_buffer else 0) for _, r, _ in compiled] or [0])
    wg = max([r.local_size_x for _, r, _ in compiled] or [1])
    shared = max([r.shared_bytes for _, r, _ in compiled] or [0])
    flags = 0
    for _, r, _ in compiled:
        flags |= r.flags
    return f"{push}u, {buffers}u, {wg}u, {shared}u, {flags}u, 0u"


def _calls(host: HostModule, symbol: str) -> list:
    """The CallKernel operations of `symbol` in every entry of every function."""
    return [op for fn in host.functions for ops in fn.entries.values() for op in ops
            if getattr(op, "symbol", None) == symbol]


def _constant(e, what: str, op) -> int:
    hi = bounds(e)[1]
    if hi is None or hi == float("inf"):
        raise CodegenError(f"{op.symbol} ({op.note or 'call'}): its {what} ({e}) is unbounded; the Vulkan shader "
                           "needs a bound")
    return int(hi)


def add_kv_shaders(host: HostModule, compiled: list, kernels: dict, tmp, threads: int = kv.THREADS) -> None:
    """The KV-cache shaders (kv.py) in workgroups of `threads` when the
    module calls kv_append or kv_attention; the attention's shared memory
    sized by the largest context and head_dim of its calls."""
    if _calls(host, kv.APPEND_SYMBOL):
        source, record = kv.append_shader(threads)
        kernels[kv.APPEND] = (len(compiled), record, None)
        compiled.append((kv.APPEND, record, compile_spirv(source, tmp, kv.APPEND)))
    calls = _calls(host, kv.ATTENTION_SYMBOL)
    if not calls:
        return
    context = max(_constant(op.sizes[4], "max_context", op) for op in calls)
    dim = max(_constant(op.sizes[5], "head_dim", op) for op in calls)
    if context > kv.MAX_CONTEXT:
        raise CodegenError(f"{kv.ATTENTION_SYMBOL} ({calls[0].note or 'kv_attention'}): a context of {context} "
                           f"positions, past the {kv.MAX_CONTEXT} the Vulkan attention shader keeps in shared memory")
    source, record = kv.attention_shader(context, dim, threads)
    kernels[kv.ATTENTION] = (len(compiled), record, None)
    compiled.append((kv.ATTENTION, record, compile_spirv(source, tmp, kv.ATTENTION)))


def add_library_shaders(host: HostModule, compiled: list, kernels: dict, tmp,
                        matmul_shape: tuple = (matmul.THREADS, matmul.BLOCKS[matmul.TILED])) -> None:
    """The hand-written shaders (matmul.py, conv.py, kv.py) that the module's
    library calls need, compiled and appended to the kernel table (the
    matmul's in workgroups and blocks of `matmul_shape`, the KV-cache ones
    in its workgroups; the conv shaders keep their own); a matmul whose K
    may exceed what the device's loop limit allows is refused."""
    add_kv_shaders(host, compiled, kernels, tmp, matmul_shape[0])
    for symbol, shaders in ((conv.CONV_SYMBOL, conv.SHADERS), (conv.DEPTHWISE_SYMBOL, conv.SHADERS_DEPTHWISE)):
        for name, (source, record) in shaders.items() if _calls(host, symbol) else ():
            kernels[name] = (len(compiled), record, None)
            compiled.append((name, record, compile_spirv(source, tmp, name)))
    calls = _calls(host, matmul.MATMUL_SYMBOL)
    if not calls:
        return
    for op in calls:
        hi = bounds(op.sizes[3])[1]
        if hi is None or hi > matmul.max_k(MAX_SERIAL_ITERATIONS):
            raise CodegenError(f"{op.symbol}: its K ({op.sizes[3]}) may be {hi if hi is not None else 'unbounded'}, "
                               f"past the {matmul.max_k(MAX_SERIAL_ITERATIONS)} the Vulkan matmul shaders take "
                               "within lavapipe's loop limit; bound the sizes lower (--dim NAME=LO..HI)")
    chosen = matmul.shaders(*matmul_shape)
    for name in (matmul.TILED, matmul.GEMV):
        source, record = chosen[name]
        kernels[name] = (len(compiled), record, None)
        compiled.append((name, record, compile_spirv(source, tmp, name)))


def emit_vulkan(host: HostModule, board) -> CSources:
    """PREFIX.c (SPIR-V, kernel records, the Vulkan host entries), PREFIX.h and
    PREFIX_weights.S of a host module, for `board`'s `vulkan:` section."""
    settings = board.vulkan or {}
    local = int(settings.get("workgroup_size", 64))
    matmul_shape = (local, tuple(settings.get("matmul_tile", matmul.BLOCKS[matmul.TILED])))
    prefix = host.prefix
    compiled, kernels, slots = [], {}, {}
    ranges = int64_ranges(host, local, host.weights.tobytes())
    with tempfile.TemporaryDirectory(prefix="relax-edge-spirv-") as tmp:
        for index, (symbol, program) in enumerate(host.kernels.items()):
            try:
                glsl, record = emit_glsl(program, local, inplace=symbol in host.inplace, ranges=ranges.get(symbol))
                check_loops(symbol, program)
                spirv = compile_spirv(glsl, tmp, symbol)
            except CodegenError:
                raise
            except RelaxEdgeError as err:
                raise CodegenError(f"kernel {symbol} ({program.name}): {err}") from None
            compiled.append((symbol, record, spirv))
            kernels[symbol] = (index, record, program)
            if record.status:
                slots[symbol] = len(slots)
        add_library_shaders(host, compiled, kernels, tmp, matmul_shape)
    parts = ["#include <stdlib.h>", "#include <string.h>", "#include \"relax_edge/vulkan.h\"", ""]
    parts += [_spirv_array(f"{prefix}_spv_{symbol}", spirv) for symbol, _, spirv in compiled]
    parts += [_kernel_table(prefix, compiled), SUPPORT.format(g=prefix, req=_requirements(compiled)),
              _status_support(prefix, compiled, slots),
              f"rxe_status_t {prefix}_vk_init(const rxe_vk_options_t* options, rxe_error_t* err);"]
    context = _context(host)
    emitters = [VulkanHostEmitter(fn, host.weights.symbol, prefix, kernels, host.weights.tobytes(), slots, matmul_shape)
                for fn in host.functions]
    for entry, emitter in zip(context["functions"], emitters):
        entry["body"] = emitter.render()
    release = "".join(f"  {fn.symbol}_vk_release();\n" for fn in host.functions)
    states = "".join(f"  if (st == RXE_OK) st = {e.p}_vk_state_new(err);\n" for e in emitters if e.states)
    parts.append(INIT.format(g=prefix, release=release, allow_cpu=1 if settings.get("allow_cpu") else 0,
                             count=len(compiled), weights=host.weights.nbytes,
                             status=4 * STATUS_WORDS * len(slots), states=states))
    # the init and close functions after the host functions (they release their buffers)
    text = _ENV.get_template("model.c.j2").render(kernels=parts[:-1], **context)
    text += "\n" + parts[-1]
    files = {f"{prefix}.c": text, **support_files(host)}
    return CSources(prefix, files, host.weights.tobytes(), host.signature, {})
