"""quantize_dynamic: ONNX Runtime's dynamic-quantization chains into the
operators of op/qdynamic.py (run by the quantize pass, before its QDQ
rewrites).

1. `add(multiply(cast(matmul(Xq, W), float32), S), bias)` (either operand
   order; the add optional), where Xq is `subtract(cast(q, int32),
   cast(zero, int32))` of DynamicQuantizeLinear's outputs q and zero of a
   float32 x as frontend/onnx imports them (the min / max / where / divide /
   round / clip chain, checked node by node against x), S is
   `multiply(scale, w_scale)` of that DynamicQuantizeLinear's scale and a
   float32 constant (scalar or per column), W a constant int32 (K, N) (the
   weight less its zero points, as MatMulInteger imports; a cast / subtract
   of constants too) and bias a float32 constant (N,)
   -> `dynamic_qdense(x, w, w_zero, w_scale[, bias])`: the same float32
   operations in the same order, so the result is bit for bit the chain's.
2. `matmul(cast(q, int32) [- zero], W)` of int8 / uint8 q with a constant
   scalar zero point and the constant W above -> `matmul_integer` (int32).
3. Each weight column's integers d (W's column) become int8 v = d + z with
   a per-column zero point z (0 when d fits int8; else the z nearest 0 that
   fits): a column whose values span more than 255 stays as it was.
4. The chains' other readers (the DynamicQuantizeLinear shared by the Q, K
   and V projections) keep their values; what nobody reads any more is left
   to `dce`. Each dynamic_qdense quantizes its x itself.
Not matched (stays the generic int32 form, correct and slower): weights
that are not constants of known shape or not 2-D, K above
library/qdynamic.py's MAX_K, a scale that is not the DynamicQuantizeLinear's
times a constant.
"""

from __future__ import annotations

import numpy as np

from ..ir.expr import Call, Constant, Function, IRModule, SeqExpr, Var, VarBinding
from ..library.qdynamic import MAX_K
from ..op.registry import make_call
from .bindings import scan

__all__ = ["quantize_dynamic"]


class _Matcher:
    def __init__(self, func: Function):
        self.info = scan(func)

    def producer(self, e, name):
        v = self.info.values.get(e) if isinstance(e, Var) else None
        return v if isinstance(v, Call) and v.op.name == name else None

    def const(self, e):
        c = self.info.constant(e)
        return None if c is None else np.asarray(c.data)

    def is_scalar(self, e, value):
        c = self.const(e)
        return c is not None and c.size == 1 and float(c.reshape(-1)[0]) == value

    def pair(self, call, first, second):
        """(a, b) of a commutative call whose operands satisfy first(a) and second(b) in some order."""
        for a, b in ((call.args[0], call.args[1]), (call.args[1], call.args[0])):
            if first(a) and second(b):
                return a, b
        return None

    # ------------------------------------------------------------ DynamicQuantizeLinear, as imported

    def range_of(self, e, extreme, clamp, x):
        """e == clamp(extreme(x), 0) (maximum(max(x), 0) or minimum(min(x), 0))."""
        c = self.producer(e, clamp)
        if c is None:
            return False
        got = self.pair(c, lambda a: self.is_scalar(a, 0.0), lambda a: True)
        r = None if got is None else self.producer(got[1], extreme)
        return r is not None and r.args[0] is x and r.attrs.get("axis") is None and not r.attrs.get("keepdims")

    def scale_source(self, scale):
        """x when `scale` is DynamicQuantizeLinear's scale of x."""
        d = self.producer(scale, "divide")
        w = None if d is None or not self.is_scalar(d.args[1], 255.0) else self.producer(d.args[0], "where")
        if w is None or not self.is_scalar(w.args[1], 1.0):
            return None
        eq, span = self.producer(w.args[0], "equal"), self.producer(w.args[2], "subtract")
        if eq is None or span is None or list(eq.args) != list(span.args):
            return None
        hi, lo = span.args
        m = self.producer(hi, "maximum")
        got = None if m is None else self.pair(m, lambda a: self.is_scalar(a, 0.0), lambda a: True)
        r = None if got is None else self.producer(got[1], "max")
        x = None if r is None else r.args[0]
        if x is None or x.type.dtype != "float32" or not self.range_of(hi, "max", "maximum", x) \
                or not self.range_of(lo, "min", "minimum", x):
            return None
        return x, lo

    def zero_source(self, zero, scale, lo):
        """zero == round(clip(0 - lo / scale, 0, 255)) (float32)."""
        r = self.producer(zero, "round")
        c = None if r is None else self.producer(r.args[0], "clip")
        s = None if c is None or (c.attrs["min"], c.attrs["max"]) != (0.0, 255.0) else self.producer(c.args[0],
                                                                                                      "subtract")
        d = None if s is None or not self.is_scalar(s.args[0], 0.0) else self.producer(s.args[1], "divide")
        return d is not None and d.args[0] is lo and d.args[1] is scale

    def dynamic(self, q, zq):
        """(x, scale) when q and zq are DynamicQuantizeLinear's uint8 values and zero point of x."""
        cu = self.producer(q, "cast")
        clip = None if cu is None or cu.attrs["dtype"] != "uint8" else self.producer(cu.args[0], "clip")
        if clip is None or (clip.attrs["min"], clip.attrs["max"]) != (0.0, 255.0):
            return None
        add = self.producer(clip.args[0], "add")
        if add is None:
            return None
        rnd, zf = self.producer(add.args[0], "round"), self.producer(add.args[1], "cast")
        div = None if rnd is None else self.producer(rnd.args[0], "divide")
        zc = self.producer(zq, "cast")
        if div is None or zf is None or zc is None or zc.attrs["dtype"] != "uint8" or zf.args[0] is not zc.args[0]:
            return None
        x, scale = div.args
        src = self.scale_source(scale)
        if src is None or src[0] is not x or not self.zero_source(zc.args[0], scale, src[1]):
            return None
        return x, scale

    # ------------------------------------------------------------ the integer matmul

    def int_const(self, e):
        """An integer constant, through casts and subtractions of constants."""
        c = self.const(e)
        if c is not None:
            return c.astype(np.int64) if c.dtype.kind in "iu" else None
        cast, sub = self.producer(e, "cast"), self.producer(e, "subtract")
        if cast is not None:
            return self.int_const(cast.args[0])
        if sub is not None:
            a, b = self.int_const(sub.args[0]), self.int_const(sub.args[1])
            return None if a is None or b is None else a - b
        return None

    def weights(self, e):
        """(v int8 (N, K), z int32 (N,)) with v - z the constant (K, N) integer weight's columns."""
        d = self.int_const(e)
        if d is None or d.ndim != 2 or d.shape[0] > MAX_K or d.size == 0:
            return None
        cols = d.T
        lo, hi = cols.min(axis=1), cols.max(axis=1)
        z = np.clip(0, -128 - lo, 127 - hi)
        v = cols + z[:, None]
        if (hi - lo > 255).any() or v.min() < -128 or v.max() > 127 or np.abs(z).max() > 128:
            return None
        return v.astype(np.int8), z.astype(np.int32)

    def matmul(self, e):
        """(the matmul call, its x operand (subtract or cast), (v, z)) of a matmul(int32 x, constant)."""
        mm = self.producer(e, "matmul")
        if mm is None or mm.type.dtype != "int32":
            return None
        w = self.weights(mm.args[1])
        return None if w is None else (mm, mm.args[0], w)

    def widened(self, e):
        """(q, zero point expression or None) of cast(q, int32) [- cast(zero, int32) or - a constant], q int8 /
        uint8, the zero point a scalar."""
        sub = self.producer(e, "subtract")
        zero = None
        if sub is not None:
            zc = self.producer(sub.args[1], "cast")
            zero = zc.args[0] if zc is not None else sub.args[1] if self.const(sub.args[1]) is not None else None
            if zero is None or zero.type.ndim != 0:
                return None
            e = sub.args[0]
        cast = self.producer(e, "cast")
        if cast is None or cast.args[0].type.dtype not in ("int8", "uint8"):
            return None
        return cast.args[0], zero

    # ------------------------------------------------------------ the rewrites

    def scaled(self, call):
        """(x, (v, z), w_scale (N,)) of multiply(cast(matmul), multiply(scale, w_scale)), or None."""
        if call.op.name != "multiply" or call.type.dtype != "float32":
            return None
        for acc_f, s in ((call.args[0], call.args[1]), (call.args[1], call.args[0])):
            cf = self.producer(acc_f, "cast")
            got = None if cf is None or cf.attrs["dtype"] != "float32" else self.matmul(cf.args[0])
            sm = self.producer(s, "multiply")
            if got is None or sm is None or call.type.shape != cf.type.shape:
                continue
            mm, xi, w = got
            wq = self.widened(xi)
            if wq is None or wq[1] is None:
                continue
            dq = self.dynamic(*wq)
            if dq is None:
                continue
            n = w[0].shape[0]
            for sx, sw in ((sm.args[0], sm.args[1]), (sm.args[1], sm.args[0])):
                ws = self.const(sw)
                if sx is dq[1] and ws is not None and ws.dtype == np.float32 and ws.shape in ((), (1,), (n,)):
                    return dq[0], w, np.broadcast_to(ws.reshape(-1), (n,)).astype(np.float32)
        return None

    def bias(self, e, n, ndim):
        b = self.const(e)
        if b is None or b.dtype != np.float32 or b.ndim > ndim or b.shape[-1:] != (n,) or b.size != n:
            return None
        return b.reshape(n)

    def dense(self, x, w, ws, bias, span):
        args = [x, Constant(w[0]), Constant(w[1]), Constant(ws)]
        if bias is not None:
            args.append(Constant(np.ascontiguousarray(bias)))
        return make_call("dynamic_qdense", args, {"has_bias": bias is not None}, span=span)

    def rewrite(self, var, call):
        """The replacement of binding `var = call`, or None."""
        name = call.op.name
        if name == "add" and call.type.dtype == "float32":
            for m, b in ((call.args[0], call.args[1]), (call.args[1], call.args[0])):
                mul = self.producer(m, "multiply")
                got = None if mul is None or not self.info.single_use(m) else self.scaled(mul)
                bias = None if got is None else self.bias(b, got[1][0].shape[0], call.type.ndim)
                if bias is not None and call.type.shape == mul.type.shape:
                    return self.dense(*got, bias, call.span)
            return None
        if name == "multiply":
            got = self.scaled(call)
            if got is None:
                return None
            user = self.info.users.get(var)
            if self.info.single_use(var) and user is not None and isinstance(user.value, Call) and \
                    self.rewrite(user.var, user.value) is not None:
                return None   # the bias add takes it
            return self.dense(*got, None, call.span)
        if name == "matmul":
            got = self.matmul(var)
            wq = None if got is None else self.widened(got[1])
            if wq is None:
                return None
            zero = 0 if wq[1] is None else self.const(wq[1])
            if zero is None:
                return None
            (v, z), q = got[2], wq[0]
            return make_call("matmul_integer", [q, Constant(v), Constant(z)], {"x_zero": int(np.asarray(zero))},
                             span=call.span)
        return None


def _rewrite(func: Function) -> Function:
    matcher = _Matcher(func)
    changed, blocks = False, []
    for blk in func.body.blocks:
        out = []
        for b in blk.bindings:
            new = matcher.rewrite(b.var, b.value) if isinstance(b, VarBinding) and isinstance(b.value, Call) else None
            if new is not None:
                out.append(VarBinding(b.var, new))
                changed = True
            else:
                out.append(b)
        blocks.append(type(blk)(out))
    if not changed:
        return func
    return Function(func.params, SeqExpr(blocks, func.body.body), func.ret_type, func.name, func.attrs)


def quantize_dynamic(mod: IRModule) -> IRModule:
    """`mod` with its dynamic-quantization chains as dynamic_qdense / matmul_integer (see above)."""
    return IRModule({name: _rewrite(f) for name, f in mod.functions.items()}, mod.tensor_programs, mod.externs)
