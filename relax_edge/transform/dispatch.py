"""dispatch: library micro-kernels for the operators that have one.

Runs on operator-level graph functions (before legalize). In each binding
block (operators are pure, dataflow or not) it rewrites these patterns into `call_extern` of a kernel of
runtime_c/kernels (relax_edge/library), the intermediate values of a pattern
being used by the next operator only:

- dense: matmul(x, W) with W a constant float32 (K, N) matrix, optionally
  followed by `add` of a constant bias broadcast over the last axis and by
  relu or clip(0, 6): rxe_lib_dense_f32 (W packed at compile time; the
  kernel takes its matrix-vector path at run time when the rows, e.g. a
  decode step's seq = 1, are few, and the blocked GEMM otherwise);
- matmul(a, b) of float32 tensors whose batch dimensions are provably those
  of the result, `b` being 2-D or batched like `a`: rxe_lib_matmul_f32;
- conv2d(x, W) with W constant, optionally + a constant per-channel bias
  and relu / clip(0, 6): rxe_lib_depthwise_conv2d_f32 when every channel is
  its own group, else rxe_lib_conv2d_f32 (W packed at compile time).

The call keeps the operators' semantics and unpacked constants, so the
interpreter runs it by composing the operators' numpy references; what the
host code needs is in the call's attrs: "sizes" (the kernel's size
arguments, symbolic), "scratch_bytes" (its scratch buffer, when it has
one), "pack" ((argument index, packer) pairs applied to constants by the
code generator) and "params" (the operators' attributes).

A loop's body is dispatched like a function's (what it returns stays).

target="vulkan" (the Vulkan build): the matmul family, every float32
matmul (a constant W included, unpacked) whose K is at most `max_k` becoming
rxe_lib_matmul_f32 without a scratch buffer; the Vulkan host dispatches it with the shaders of
codegen/vulkan/matmul.py. And conv2d with one group (c * kh * kw at most
`max_k`): rxe_lib_conv2d_f32 with its bias and activation, the weights
unpacked, no scratch (codegen/vulkan/conv.py), and depthwise as
rxe_lib_depthwise_conv2d_f32 likewise.

Does not guarantee that the library is faster for every shape; the
`kernels` argument restricts which families are dispatched (the pipeline
keeps kernels with scratch buffers off microcontrollers).
"""

from __future__ import annotations

import numpy as np

from ..ir.expr import Call, CallExtern, Constant, ExternDecl, Function, IRModule, Loop, SeqExpr, VarBinding
from ..ir.shape import Proof, as_expr, bounds, prove_equal
from ..ir.types import TensorType
from ..op.registry import OPS
from .bindings import Bindings, scan

__all__ = ["dispatch", "KERNEL_FAMILIES"]

KERNEL_FAMILIES = ("dense", "matmul", "conv2d", "depthwise")
TARGETS = ("cpu", "vulkan")
VULKAN_FAMILIES = ("matmul", "conv2d", "depthwise")
ACT_NONE, ACT_RELU, ACT_RELU6 = 0, 1, 2


def _is_f32(t) -> bool:
    return isinstance(t, TensorType) and t.dtype == "float32" and t.shape is not None


def _act_of(call: Call) -> int | None:
    if call.op.name == "relu":
        return ACT_RELU
    if call.op.name == "clip":
        lo, hi = call.attrs.get("min"), call.attrs.get("max")
        if lo is not None and hi is not None and float(lo) == 0.0 and float(hi) == 6.0:
            return ACT_RELU6
    return None


def _product(dims):
    total = as_expr(1)
    for d in dims:
        total = total * d
    return total


def _reference(ops):
    """The numpy reference of a chain: ops[0] on the first arguments, then
    each later op on the previous result and its own extra argument."""
    def run(*arrays, act=0, **attrs):
        main = ops[0]
        out = OPS[main].reference(*arrays[:2], **{k: v for k, v in attrs.items() if k in OPS[main].attrs})
        if len(arrays) > 2:   # the per-channel bias
            out = out + (arrays[2] if main == "matmul" else arrays[2].reshape(1, -1, 1, 1))
        if act == ACT_RELU:
            out = np.maximum(out, np.float32(0))
        elif act == ACT_RELU6:
            out = np.clip(out, np.float32(0), np.float32(6))
        return out.astype(np.float32)
    return run


class _Dispatcher:
    def __init__(self, mod: IRModule, kernels, target: str = "cpu", max_k: int | None = None):
        from ..library import kernels as lib  # noqa: F401  (fails early when the library is missing)
        self.lib = lib
        self.mod = mod
        self.kernels = set(kernels)
        self.target = target
        self.max_k = max_k
        self.externs = dict(mod.externs)
        self.count = 0
        self.biases: dict = {}  # one bias Constant per source constant (or per zero length): shared in the weights

    # -- the block ----------------------------------------------------------------
    def block(self, block, info: Bindings):
        bindings = list(block.bindings)
        in_block = {b.var for b in bindings}
        absorbed, replaced = set(), {}

        def single_user(v):   # a pattern stays within its block
            return info.single_use(v) and v in in_block

        for b in bindings:
            if not isinstance(b, VarBinding) or not isinstance(b.value, Call) or b.var in absorbed:
                continue
            chain = self.match(b, info, single_user)
            if chain is None:
                continue
            head, members, call = chain
            absorbed.update(members)
            replaced[head] = call
        if not replaced:
            return block
        out = []
        for b in bindings:
            if b.var in replaced:
                out.append(VarBinding(b.var, replaced[b.var]))
            elif b.var not in absorbed:
                out.append(b)
        return type(block)(out)

    def match(self, b, info: Bindings, single_user):
        """(binding var to replace, absorbed vars, call) for a pattern that
        starts at `b`, else None."""
        call = b.value
        name = call.op.name
        if name == "matmul" and _is_f32(call.type) and all(_is_f32(a.type) for a in call.args):
            w = info.constant(call.args[1])
            if w is not None and w.data.ndim == 2 and "dense" in self.kernels:
                return self.epilogue(b, info, single_user, self.dense, w)
            if "matmul" in self.kernels:
                ext = self.matmul(call)
                return None if ext is None else (b.var, (), ext)
        if name == "conv2d" and _is_f32(call.type) and _is_f32(call.args[0].type):
            w = info.constant(call.args[1])
            if w is not None and w.data.dtype == np.float32:
                return self.epilogue(b, info, single_user, self.conv, w)
        return None

    def epilogue(self, b, info: Bindings, single_user, make, w):
        """The longest chain b -> add(bias) -> activation that `make` takes."""
        call, var, members = b.value, b.var, []
        bias, act = None, ACT_NONE
        value_of = info.values

        def next_call(v):
            nxt = info.users.get(v)
            return nxt if nxt is not None and single_user(v) and isinstance(nxt.value, Call) else None

        nxt = next_call(var)
        if nxt is not None and nxt.value.op.name == "add":
            other = [a for a in nxt.value.args if a is not var]
            c = info.constant(other[0]) if len(other) == 1 else None
            if c is not None and self.bias_ok(call, c, nxt.value.type):
                bias = c
                members.append(var)
                var = nxt.var
                nxt = next_call(var)
        if nxt is not None:
            a = _act_of(nxt.value)
            if a is not None and nxt.value.type == value_of[var].type:
                act = a
                members.append(var)
                var = nxt.var
        ext = make(call, w, bias, act, value_of[var].type if var is not b.var else call.type)
        if ext is None:
            return None
        return var, tuple(members), ext

    def bias_ok(self, call, c, out_type) -> bool:
        """A constant vector along the output's channel axis (the last one for
        matmul, 1 for conv2d), broadcast over every other axis."""
        if c.data.dtype != np.float32 or out_type != call.type:
            return False
        shape, dims = call.type.shape, c.data.shape
        axis = len(shape) - 1 if call.op.name == "matmul" else 1
        pos = axis - (len(shape) - len(dims))     # the channel axis among the constant's (right-aligned) dims
        if not shape[axis].is_const or len(dims) > len(shape) or pos < 0:
            return False
        return dims[pos] == shape[axis].value and all(d == 1 for i, d in enumerate(dims) if i != pos)

    # -- kernels --------------------------------------------------------------------
    def extern(self, symbol, args, out_type, sizes, params, ops, scratch=None, pack=(), span=None):
        if symbol not in self.externs:
            self.externs[symbol] = ExternDecl(symbol, [a.type for a in args], out_type, "runtime",
                                              reference=_reference(ops))
        attrs = {"sizes": tuple(as_expr(s) for s in sizes), "params": tuple(params.items()), "pack": tuple(pack)}
        if scratch is not None:
            attrs["scratch_bytes"] = as_expr(scratch)
        self.count += 1
        return CallExtern(symbol, args, out_type, attrs, span)

    def bias_arg(self, bias, n):
        key = ("zeros", n) if bias is None else id(bias)
        if key not in self.biases:
            data = np.zeros(n, np.float32) if bias is None else np.ascontiguousarray(bias.data, np.float32).reshape(n)
            self.biases[key] = Constant(data)
        return self.biases[key]

    def dense(self, call, w, bias, act, out_type):
        k, n = w.data.shape
        x = call.args[0]
        if prove_equal(x.type.shape[-1], k) is not Proof.YES:
            return None
        m = _product(x.type.shape[:-1])
        ops = ["matmul"]
        return self.extern("rxe_lib_dense_f32", [x, call.args[1], self.bias_arg(bias, n)], out_type,
                           [m, n, k, act], {"act": act}, ops, pack=((1, "dense"),), span=call.span)

    def matmul(self, call):
        a, b = call.args
        ta, tb, out = a.type, b.type, call.type
        if len(ta.shape) < 2 or len(tb.shape) < 2 or len(out.shape) < 2:
            return None
        batch_out = out.shape[:-2]
        if len(ta.shape) != len(out.shape) or any(prove_equal(x, y) is not Proof.YES
                                                 for x, y in zip(ta.shape[:-2], batch_out)):
            return None
        m, k = ta.shape[-2:]
        n = tb.shape[-1]
        if prove_equal(tb.shape[-2], k) is not Proof.YES:
            return None
        if self.max_k is not None and (bounds(k)[1] is None or bounds(k)[1] > self.max_k):
            return None   # stays a tensor program (whose own limits are checked later)
        if all(d == 1 for d in tb.shape[:-2]):
            b_stride = as_expr(0)
        elif len(tb.shape) == len(out.shape) and all(prove_equal(x, y) is Proof.YES
                                                     for x, y in zip(tb.shape[:-2], batch_out)):
            b_stride = k * n
        else:
            return None
        batch = _product(batch_out)
        scratch = None if self.target == "vulkan" else self.lib.matmul_scratch_bytes(m, n, k)
        return self.extern("rxe_lib_matmul_f32", [a, b], out, [batch, m, n, k, m * k, b_stride], {}, ["matmul"],
                           scratch=scratch, span=call.span)

    def conv(self, call, w, bias, act, out_type):
        x = call.args[0]
        if len(x.type.shape) != 4 or w.data.ndim != 4:
            return None
        nb, c, h, wd = x.type.shape
        o, cg, kh, kw = w.data.shape
        _, _, oh, ow = call.type.shape
        groups = call.attrs["groups"]
        sh, sw = call.attrs["strides"]
        pt, pl, _, _ = call.attrs["padding"]
        dh, dw = call.attrs["dilation"]
        params = {"act": act, **{k: call.attrs[k] for k in ("strides", "padding", "dilation", "groups")}}
        args = [x, call.args[1], self.bias_arg(bias, o)]
        if groups == o and cg == 1 and c.is_const and c.value == o:
            if "depthwise" not in self.kernels:
                return None
            return self.extern("rxe_lib_depthwise_conv2d_f32", args, out_type,
                               [nb, c, h, wd, kh, kw, oh, ow, sh, sw, pt, pl, dh, dw, act], params, ["conv2d"],
                               span=call.span)
        if "conv2d" not in self.kernels:
            return None
        if self.target == "vulkan":
            taps = c * kh * kw
            if groups != 1 or self.max_k is not None and (bounds(taps)[1] is None or bounds(taps)[1] > self.max_k):
                return None
            return self.extern("rxe_lib_conv2d_f32", args, out_type,
                               [nb, c, h, wd, o, kh, kw, oh, ow, sh, sw, pt, pl, dh, dw, groups, act], params,
                               ["conv2d"], span=call.span)
        return self.extern("rxe_lib_conv2d_f32", args, out_type,
                           [nb, c, h, wd, o, kh, kw, oh, ow, sh, sw, pt, pl, dh, dw, groups, act], params,
                           ["conv2d"], scratch=self.lib.conv2d_scratch_bytes(c, kh, kw, oh, ow, groups),
                           pack=((1, "conv2d"),), span=call.span)

    # -- functions ------------------------------------------------------------------
    def function(self, f: Function) -> Function:
        body = self.seq(f)
        return f if body is f.body else Function(f.params, body, f.ret_type, f.name, f.attrs)

    def seq(self, f: Function) -> SeqExpr:
        """`f`'s body dispatched, and the body of each loop in it (the loop's result kept whole)."""
        info = scan(f)
        blocks = [self.block(self.loops(blk), info) for blk in f.body.blocks]
        if all(a is b for a, b in zip(blocks, f.body.blocks)):
            return f.body
        return SeqExpr(blocks, f.body.body)

    def loops(self, block):
        out = []
        for b in block.bindings:
            if isinstance(b, VarBinding) and isinstance(b.value, Loop):
                e = b.value
                body = self.seq(Function(e.params, e.body, name="loop body"))
                if body is not e.body:
                    b = VarBinding(b.var, Loop(e.trip_count, e.cond, e.init, e.params, body, e.type))
            out.append(b)
        return block if all(a is b for a, b in zip(out, block.bindings)) else type(block)(out)


def dispatch(mod: IRModule, kernels=KERNEL_FAMILIES, target: str = "cpu", max_k: int | None = None) -> IRModule:
    """`mod` with the matching operator calls replaced by library kernels
    (target "vulkan": the families the Vulkan host has shaders for); `max_k`
    leaves a matmul whose K may exceed it (or is unbounded) as it is."""
    if target not in TARGETS:
        raise ValueError(f"unknown dispatch target {target!r}; choose from {', '.join(TARGETS)}")
    families = KERNEL_FAMILIES if target == "cpu" else VULKAN_FAMILIES
    unknown = set(kernels) - set(families)
    if unknown:
        raise ValueError(f"unknown kernel families {sorted(unknown)} for target {target}; choose from "
                         f"{', '.join(families)}")
    d = _Dispatcher(mod, kernels, target, max_k)
    functions = {name: d.function(f) for name, f in mod.functions.items()}
    return IRModule(functions, mod.tensor_programs, d.externs)
