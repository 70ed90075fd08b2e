"""quantize: DequantizeLinear -> float op -> QuantizeLinear chains into the
integer operators of op/quant_int8.py.

1. Each `quantize(v, s, z)` with a constant scalar scale and zero point
   (per-tensor output, int8 or uint8) is matched backwards from v: an
   optional `relu` or constant `clip` (becomes the output clamp), then
   - conv2d / matmul (+ a bias add) of `dequantize(x)` (constant scalar
     scale and zero point) and `dequantize(W)` of a constant int8 / uint8
     weight (per-tensor, or per output channel with zero point 0; a
     matmul's weight (K, N) per column, or transposed (N, K) per row as Gemm
     imports), the bias `dequantize` of a constant int32 (re-expressed in
     units of scale_x * scale_w) -> qconv2d / qdense (groups included);
   - add / multiply of two dequantized activations -> qadd / qmul;
   - mean over H and W (GlobalAveragePool) and avg_pool2d without padding
     -> qglobal_avg_pool / qavg_pool2d (static window sizes);
   - max_pool2d, reshape, transpose, squeeze, unsqueeze and concat of
     dequantized activations -> the same operator on the integers, each
     input rescaled with qrequantize where its scale or zero point differs;
   - an element-wise float function (sigmoid, tanh, leaky_relu, gelu, ...)
     of one dequantized activation -> qlut with its 256-entry table computed
     in float64;
   - a dequantize itself -> qrequantize (or the value, when the parameters
     agree).
   The quantize's variable is then bound to the integer result; the float
   operators and dequantizes nobody reads any more are left to `dce`.
2. Anything else stays in float (correct, only slower): a non-constant or
   per-axis activation scale, a weight zero point that is not 0 with
   per-channel scales, a bias that does not fit int32, a symbolic pooling
   window. Leftover quantize / dequantize legalize as float arithmetic.
3. Results: within one quantization step of the float chain (integer
   requantization rounds once, halves away from zero; the float chain
   rounds the float32 result half to even).

Run it before fold_constants: that would fold dequantize(W) into a float
weight.
"""

from __future__ import annotations

import numpy as np

from ..ir.expr import Call, Constant, Function, IRModule, SeqExpr, Var, VarBinding
from ..op import quant_int8 as q8
from ..op.registry import OPS, make_call
from .bindings import scan
from .quantize_dynamic import quantize_dynamic

__all__ = ["quantize_int8"]

_PASS_THROUGH = ("reshape", "transpose", "squeeze", "unsqueeze", "max_pool2d", "flatten")
_TABLES = ("sigmoid", "tanh", "erf", "leaky_relu", "hard_sigmoid", "hard_swish", "gelu", "exp", "abs", "negative")
_Q8 = ("int8", "uint8")


class _Act:
    """A dequantized activation: its integers and their (scale, zero)."""

    def __init__(self, value, scale, zero, dtype):
        self.value, self.scale, self.zero, self.dtype = value, scale, zero, dtype


class _Rewriter:
    def __init__(self, func: Function):
        self.info = scan(func)
        self.out: list = []
        self.count = 0

    # ------------------------------------------------------------ matching helpers

    def producer(self, e, *names):
        v = self.info.values.get(e) if isinstance(e, Var) else None
        return v if isinstance(v, Call) and (not names or v.op.name in names) else None

    def scalar(self, e):
        c = self.info.constant(e)
        return None if c is None or c.data.size != 1 else c.data.reshape(())

    def activation(self, e) -> _Act | None:
        return self.dequantized(self.producer(e, "dequantize"))

    def dequantized(self, dq) -> _Act | None:
        if dq is None or dq.args[0].type.dtype not in _Q8 or dq.attrs["compute"] != "float32":
            return None
        s, z = self.scalar(dq.args[1]), self.scalar(dq.args[2])
        if s is None or z is None or not float(s) > 0:
            return None
        return _Act(dq.args[0], float(s), int(z), dq.args[0].type.dtype)

    def weight(self, e, channel_axis):
        """(integers, per-channel scales, zero) of a dequantized constant weight, channels along channel_axis."""
        dq = self.producer(e, "dequantize")
        if dq is None:
            return None
        w, s, z = (self.info.constant(a) for a in dq.args)
        if w is None or s is None or z is None or w.data.dtype.name not in _Q8:
            return None
        w, s, z = w.data, s.data.astype(np.float64), z.data.astype(np.int64)
        channels = w.shape[channel_axis]
        scales, zeros = self.along(s, w.ndim, channel_axis, channels), self.along(z, w.ndim, channel_axis, channels)
        if scales is None or zeros is None or len(set(zeros.tolist())) != 1 or not (scales > 0).all():
            return None
        if len(set(scales.tolist())) > 1 and zeros[0] != 0:
            return None   # per-channel scales need the symmetric zero point
        return w, scales, int(zeros[0])

    @staticmethod
    def along(p, ndim, axis, channels):
        """A scalar or per-`axis` parameter as `channels` values, else None."""
        if p.size == 1:
            return np.full(channels, p.reshape(-1)[0])
        shape = [1] * ndim
        shape[axis] = channels
        if p.ndim != ndim or list(p.shape) != shape:
            return None
        return p.reshape(-1)

    def bias(self, e, channels):
        """The real (float64) bias (channels,) of a dequantized int32 constant, through reshapes."""
        while (r := self.producer(e, "reshape")) is not None:
            e = r.args[0]
        dq = self.producer(e, "dequantize")
        if dq is None:
            return None
        b, s, z = (self.info.constant(a) for a in dq.args)
        if b is None or s is None or z is None or b.data.size != channels:
            return None
        real = (b.data.astype(np.float64).reshape(-1) - z.data.astype(np.float64).reshape(-1)) * \
            s.data.astype(np.float64).reshape(-1)
        return real if real.shape == (channels,) else None

    # ------------------------------------------------------------ emission

    def emit(self, name, args, attrs=None, span=None):
        call = make_call(name, args, attrs, span=span)
        self.count += 1
        var = Var(f"q{self.count}_{name}", call.type)
        self.out.append(VarBinding(var, call))
        return var

    def rescale(self, act: _Act, scale, zero, dtype, lo, hi, span):
        """act's integers as (scale, zero, dtype) clamped to [lo, hi]."""
        full = q8.QUANT_RANGES[dtype]
        if act.dtype == dtype and act.zero == zero and abs(act.scale / scale - 1) < 1e-6 and (lo, hi) == full:
            return act.value
        m, s = q8.quantize_multiplier(act.scale / scale)
        return self.emit("qrequantize", [act.value], {"in_zero": act.zero, "multiplier": m, "shift": s,
                                                     "out_zero": zero, "out_dtype": dtype, "act_min": lo,
                                                     "act_max": hi}, span)

    # ------------------------------------------------------------ the rewrite of one quantize

    def rewrite(self, call: Call):
        """The integer value replacing quantize `call`, or None to leave it."""
        dtype = call.attrs["out_dtype"]
        scale, zero = self.scalar(call.args[1]), self.scalar(call.args[2])
        if dtype not in _Q8 or scale is None or zero is None or not float(scale) > 0 \
                or call.args[0].type.dtype != "float32" or (call.attrs["qmin"], call.attrs["qmax"]) \
                != q8.QUANT_RANGES[dtype]:
            return None
        out = {"scale": float(scale), "zero": int(zero), "dtype": dtype}
        v, (lo, hi) = call.args[0], q8.QUANT_RANGES[dtype]
        # a fused activation narrows the output range
        act = self.producer(v, "relu", "clip")
        if act is not None:
            amin = 0.0 if act.op.name == "relu" else act.attrs["min"]
            amax = None if act.op.name == "relu" else act.attrs["max"]
            if amin is not None:
                lo = max(lo, min(hi, out["zero"] + int(np.rint(float(amin) / out["scale"]))))
            if amax is not None:
                hi = min(hi, max(lo, out["zero"] + int(np.rint(float(amax) / out["scale"]))))
            v = act.args[0]
        out["lo"], out["hi"] = lo, hi
        src = self.info.values.get(v) if isinstance(v, Var) else None
        if not isinstance(src, Call):
            return None
        for match in (self.linear, self.binary, self.pool, self.structural, self.table, self.requant):
            result = match(src, out, call.span)
            if result is not None:
                return result
        return None

    def _out_attrs(self, out):
        return {"out_zero": out["zero"], "out_dtype": out["dtype"], "act_min": out["lo"], "act_max": out["hi"]}

    def linear(self, src, out, span):
        bias = None
        if src.op.name == "add":
            for i in (0, 1):
                core = self.producer(src.args[i], "conv2d", "matmul")
                if core is not None:
                    bias, src = src.args[1 - i], core
                    break
            else:
                return None
        if src.op.name not in ("conv2d", "matmul"):
            return None
        x = self.activation(src.args[0])
        if x is None:
            return None
        if src.op.name == "conv2d":
            w = self.weight(src.args[1], 0)
        else:
            t = self.producer(src.args[1], "transpose")
            if t is not None and tuple(t.attrs["axes"] or (1, 0)) == (1, 0):
                w = self.weight(t.args[0], 0)
            else:
                w = self.weight(src.args[1], 1)
                w = None if w is None else (np.ascontiguousarray(w[0].T), w[1], w[2])
        if w is None or (src.op.name == "matmul" and w[0].ndim != 2):
            return None
        wq, ws, wz = w
        channels = wq.shape[0]
        real_bias = np.zeros(channels) if bias is None else self.bias(bias, channels)
        if real_bias is None:
            return None
        acc_scale = x.scale * ws
        bias_q = np.rint(real_bias / acc_scale)
        if np.abs(bias_q).max(initial=0) >= 2 ** 31 - 2 ** 24:
            return None
        pairs = [q8.quantize_multiplier(r) for r in acc_scale / out["scale"]]
        mult, shift = (Constant(np.array([p[i] for p in pairs], np.int32)) for i in (0, 1))
        args = [x.value, Constant(wq), Constant(bias_q.astype(np.int32)), mult, shift]
        attrs = {"x_zero": x.zero, "w_zero": wz, **self._out_attrs(out)}
        if src.op.name == "conv2d":
            attrs.update({k: src.attrs[k] for k in ("strides", "padding", "dilation", "groups")})
            return self.emit("qconv2d", args, attrs, span)
        return self.emit("qdense", args, attrs, span)

    def binary(self, src, out, span):
        if src.op.name not in ("add", "multiply"):
            return None
        a, b = self.activation(src.args[0]), self.activation(src.args[1])
        if a is None or b is None:
            return None
        attrs = {"a_zero": a.zero, "b_zero": b.zero, **self._out_attrs(out)}
        if src.op.name == "add":
            (ma, sa), (mb, sb), (mo, so) = q8.add_multipliers(a.scale, b.scale, out["scale"])
            attrs.update({"a_multiplier": ma, "a_shift": sa, "b_multiplier": mb, "b_shift": sb,
                          "multiplier": mo, "shift": so})
            return self.emit("qadd", [a.value, b.value], attrs, span)
        m, s = q8.quantize_multiplier(a.scale * b.scale / out["scale"])
        return self.emit("qmul", [a.value, b.value], {**attrs, "multiplier": m, "shift": s}, span)

    def pool(self, src, out, span):
        if src.op.name not in ("mean", "avg_pool2d"):
            return None
        x = self.activation(src.args[0])
        if x is None or src.args[0].type.ndim != 4:
            return None
        if src.op.name == "mean":
            axis = src.attrs["axis"]
            axes = sorted(a % 4 for a in ((axis,) if isinstance(axis, int) else (axis or ())))
            hw = src.args[0].type.shape[2:]
            if axes != [2, 3] or not src.attrs["keepdims"] or not all(d.is_const for d in hw):
                return None
            count, name, extra = hw[0].value * hw[1].value, "qglobal_avg_pool", {}
        else:
            a = src.attrs
            if any(a["padding"]) or a["ceil_mode"] or tuple(a["dilation"]) != (1, 1):
                return None
            kernel = tuple(int(k) for k in a["kernel_size"])
            count, name = kernel[0] * kernel[1], "qavg_pool2d"
            extra = {"kernel_size": kernel, "strides": a["strides"]}
        m, s = q8.quantize_multiplier(x.scale / (out["scale"] * count))
        return self.emit(name, [x.value], {"x_zero": x.zero, "multiplier": m, "shift": s, **extra,
                                           **self._out_attrs(out)}, span)

    def structural(self, src, out, span):
        """Operators that move integers without arithmetic: the same operator on them, then a rescale."""
        name = src.op.name
        if name == "concat":
            acts = [self.activation(a) for a in src.args]
            if any(a is None for a in acts):
                return None
            full = q8.QUANT_RANGES[out["dtype"]]
            parts = [self.rescale(a, out["scale"], out["zero"], out["dtype"], *full, span) for a in acts]
            moved = _Act(self.emit("concat", parts, dict(src.attrs), span), out["scale"], out["zero"], out["dtype"])
        elif name in _PASS_THROUGH:
            x = self.activation(src.args[0])
            if x is None or len(src.args) != 1:
                return None
            moved = _Act(self.emit(name, [x.value], dict(src.attrs), span), x.scale, x.zero, x.dtype)
        else:
            return None
        return self.rescale(moved, out["scale"], out["zero"], out["dtype"], out["lo"], out["hi"], span)

    def table(self, src, out, span):
        if src.op.name not in _TABLES or len(src.args) != 1:
            return None
        x = self.activation(src.args[0])
        if x is None:
            return None
        fn = OPS[src.op.name].reference
        attrs = dict(src.attrs)
        lo, hi = q8.QUANT_RANGES[x.dtype]
        real = (np.arange(lo, hi + 1, dtype=np.float64) - x.zero) * x.scale
        with np.errstate(all="ignore"):
            values = np.asarray(fn(real, **attrs), np.float64)
        if not np.isfinite(values).all():
            return None
        table = q8.lut_table(lambda _: values, x.dtype, x.scale, x.zero, out["dtype"], out["scale"], out["zero"])
        table = np.clip(table, out["lo"], out["hi"]).astype(out["dtype"])
        return self.emit("qlut", [x.value, Constant(table)], None, span)

    def requant(self, src, out, span):
        x = self.dequantized(src) if src.op.name == "dequantize" else None
        if x is None:
            return None
        return self.rescale(x, out["scale"], out["zero"], out["dtype"], out["lo"], out["hi"], span)


def _rewrite(func: Function) -> Function:
    rw = _Rewriter(func)
    changed, blocks = False, []
    for blk in func.body.blocks:
        rw.out = []
        for b in blk.bindings:
            call = b.value
            if isinstance(b, VarBinding) and isinstance(call, Call) and call.op.name == "quantize":
                value = rw.rewrite(call)
                if value is not None:
                    rw.out.append(VarBinding(b.var, value))
                    rw.info.values[b.var] = value
                    changed = True
                    continue
            rw.out.append(b)
        blocks.append(type(blk)(rw.out))
    if not changed:
        return func
    return Function(func.params, SeqExpr(blocks, func.body.body), func.ret_type, func.name, func.attrs)


def quantize_int8(mod: IRModule) -> IRModule:
    """`mod` with its QDQ chains as integer operators (see above), after quantize_dynamic's chains
    (transform/quantize_dynamic.py)."""
    mod = quantize_dynamic(mod)
    return IRModule({name: _rewrite(f) for name, f in mod.functions.items()}, mod.tensor_programs, mod.externs)
