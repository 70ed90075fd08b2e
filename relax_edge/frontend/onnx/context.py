"""The context a converter works in: one ONNX node at a time.

A converter is `fn(ctx, inputs) -> value | list of values`, registered for one
or more ONNX op types with `@converter("Add", "Sub")`. `inputs` holds, per
node input, a graph value, a known array, `SymInts`, or None for an omitted
optional input. Converters read attributes with `ctx.attr`, emit operator
calls with `ctx.emit` (which folds calls whose arguments are all known), and
report problems with `ctx.error`, which names the node and its op type.
"""

from __future__ import annotations

import re
from typing import Callable

import numpy as np
from onnx import helper, numpy_helper

from ...errors import RelaxEdgeError
from ...ir import bfloat16
from ...ir.builder import Builder
from ...ir.expr import Call, Constant, Expr, Var
from ...ir.shape import IntExpr, SizeVar
from ...ir.types import DTYPES, TensorType
from ...op import REQUIRED, get_op, make_call
from .static_inputs import STATIC_SLOTS
from .values import SymInts, from_static, static_array, to_object

# data-movement operators that may run on symbolic shape values at import time
_MOVE_OPS = {"reshape", "concat", "strided_slice", "transpose", "broadcast_to", "tile"}

CONVERTERS: dict[str, Callable] = {}

# the most bytes a constant computed at import time may take (from_onnx's max_constant_bytes)
DEFAULT_MAX_CONSTANT_BYTES = 1 << 30
# the highest tensor rank imported (numpy's own limit)
MAX_RANK = 64


class OnnxImportError(RelaxEdgeError):
    """The ONNX model cannot be imported; the message names the node."""


# op types of the default domain without an ONNX schema (ONNX Runtime's contrib operators registered there):
# validate.py leaves them to their converter
NO_ONNX_SCHEMA: set[str] = set()


def converter_key(domain: str, op_type: str) -> str:
    """The CONVERTERS key of an op type: itself in ONNX's domain, "domain.OpType" in another."""
    return op_type if domain in ("", "ai.onnx") else f"{domain}.{op_type}"


def converter(*op_types: str, static=(), domain: str = "", onnx_schema: bool = True):
    """Register `fn` for `op_types` of operator set `domain` (ONNX's by default; e.g.
    "com.microsoft"). `static` lists the indices of node inputs that must be known at
    compile time (see static_inputs.py): they are added to `STATIC_SLOTS`. Nodes of
    another domain, and those registered with `onnx_schema=False`, are checked by
    their converter, not against an ONNX schema."""
    def register(fn):
        for name in op_types:
            key = converter_key(domain, name)
            if key in CONVERTERS:
                raise ValueError(f"two converters for ONNX {key}")
            CONVERTERS[key] = fn
            if not onnx_schema:
                NO_ONNX_SCHEMA.add(key)
            if static:
                STATIC_SLOTS.setdefault(name, set()).update(static)
        return fn
    return register


# ONNX TensorProto element types that relax_edge supports
ONNX_DTYPES = {1: "float32", 10: "float16", 16: "bfloat16", 11: "float64", 3: "int8", 5: "int16", 6: "int32",
               7: "int64", 2: "uint8", 4: "uint16", 12: "uint32", 13: "uint64", 9: "bool"}
ONNX_DTYPE_NAMES = {1: "float", 2: "uint8", 3: "int8", 4: "uint16", 5: "int16", 6: "int32", 7: "int64",
                    8: "string", 9: "bool", 10: "float16", 11: "double", 12: "uint32", 13: "uint64",
                    14: "complex64", 15: "complex128", 16: "bfloat16", 17: "float8e4m3fn", 18: "float8e4m3fnuz",
                    19: "float8e5m2", 20: "float8e5m2fnuz", 21: "uint4", 22: "int4", 23: "float4e2m1",
                    24: "float8e8m0", 25: "uint2", 26: "int2"}


# 4- and 2-bit integers are held in int8 / uint8 (QuantizeLinear enforces their range, convert/quant.py)
HELD_NARROW = {21: ("uint8", 0, 15), 22: ("int8", -8, 7), 25: ("uint8", 0, 3), 26: ("int8", -2, 1)}


def held_array(array: np.ndarray) -> np.ndarray:
    """An int4 / uint4 / int2 / uint2 array (ml_dtypes, from numpy_helper) as its int8 / uint8 holder."""
    name = array.dtype.name
    if name not in ("int4", "uint4", "int2", "uint2"):
        return array
    return array.astype(np.uint8 if name.startswith("uint") else np.int8)


def onnx_dtype(elem_type: int, what: str) -> str:
    if elem_type in HELD_NARROW:
        return HELD_NARROW[elem_type][0]
    if elem_type not in ONNX_DTYPES:
        name = ONNX_DTYPE_NAMES.get(elem_type, f"type {elem_type}")
        raise OnnxImportError(f"{what}: element type {name} is not supported "
                              f"(supported: {', '.join(DTYPES)})")
    return ONNX_DTYPES[elem_type]


def _concrete_attrs(attrs) -> bool:
    def ok(v):
        if isinstance(v, IntExpr):
            return v.is_const
        if isinstance(v, tuple):
            return all(ok(x) for x in v)
        return True
    return all(ok(v) for v in attrs.values())


def _concrete(v):
    if isinstance(v, IntExpr):
        return v.value
    if isinstance(v, tuple):
        return tuple(_concrete(x) for x in v)
    return v


def _dims_text(shape) -> str:
    return "(" + ", ".join(str(d) for d in shape) + ")"


class ConvertContext:
    def __init__(self, builder: Builder, node, opset: int, span: str,
                 max_constant_bytes: int = DEFAULT_MAX_CONSTANT_BYTES):
        self.builder = builder
        self.node = node
        self.opset = opset
        self.span = span
        self.max_constant_bytes = max_constant_bytes
        self._attrs = {a.name: a for a in node.attribute}

    # errors -----------------------------------------------------------
    def error(self, msg: str) -> OnnxImportError:
        return OnnxImportError(f"node {self.span} ({self.node.op_type}): {msg}")

    def check_constant_size(self, shape, dtype, what: str = "the constant") -> None:
        """Refuse, before making it, a constant of `shape` larger than the cap.
        An empty constant is judged by its other dims too: computing it may
        still take memory along them (index arrays, intermediate results)."""
        count, nonzero = 1, 1
        for d in shape:
            d = int(d.value if isinstance(d, IntExpr) else d)
            if d < 0:
                raise self.error(f"{what} would have a negative dimension {d} (shape {_dims_text(shape)})")
            count *= d
            nonzero *= max(d, 1)
        itemsize = np.dtype(dtype).itemsize
        if count * itemsize > self.max_constant_bytes:
            raise self.error(f"{what} of shape {_dims_text(shape)} ({dtype}) would take {count * itemsize} bytes, "
                             f"more than max_constant_bytes={self.max_constant_bytes}")
        if nonzero * itemsize > self.max_constant_bytes:
            raise self.error(f"{what} of shape {_dims_text(shape)} ({dtype}) is empty, but its other dims "
                             f"({nonzero * itemsize} bytes) exceed max_constant_bytes={self.max_constant_bytes}")

    def scalar(self, value, index: int, what: str, integer: bool = False) -> np.ndarray:
        """Input `index` as a known one-element array (reshaped to a scalar)."""
        arr = self.require_static(value, index, what)
        if arr.dtype != object and arr.dtype.kind not in ("iu" if integer else "iuf") \
                and (integer or arr.dtype.name != "bfloat16"):
            raise self.error(f"input {index} ({what}) must be {'an integer' if integer else 'a number'}, "
                             f"got {arr.dtype}")
        if arr.size != 1:
            raise self.error(f"input {index} ({what}) must hold one value, got shape {arr.shape}")
        return arr.reshape(())

    def integers(self, value, index: int, what: str) -> list:
        """Input `index` as a known list of integers (axes, pads, repeats...)."""
        arr = self.require_known(value, index, what)
        if arr.dtype.kind not in "iu":
            raise self.error(f"input {index} ({what}) must hold integers, got {arr.dtype}")
        return [int(a) for a in arr.reshape(-1)]

    # attributes -------------------------------------------------------
    def has_attr(self, name: str) -> bool:
        return name in self._attrs

    def attr(self, name: str, default=None, kind: type | None = None):
        """An attribute's value (strings decoded, tensors as numpy)."""
        if name not in self._attrs:
            return default
        proto = self._attrs[name]
        try:
            value = helper.get_attribute_value(proto)
        except Exception as err:  # malformed attribute proto
            raise self.error(f"attribute {name} cannot be read: {err}") from None
        try:
            if isinstance(value, bytes):
                value = value.decode()
            elif isinstance(value, list):
                value = [v.decode() if isinstance(v, bytes) else v for v in value]
        except UnicodeDecodeError:
            raise self.error(f"attribute {name} is not valid UTF-8 text") from None
        if hasattr(value, "dims") and hasattr(value, "data_type"):
            value = numpy_helper.to_array(value)
        if kind is not None:
            checks = {int: lambda v: isinstance(v, int) and not isinstance(v, bool),
                      float: lambda v: isinstance(v, (float, int)) and not isinstance(v, bool),
                      str: lambda v: isinstance(v, str),
                      list: lambda v: isinstance(v, list)}
            if not checks[kind](value):
                raise self.error(f"attribute {name} must be {kind.__name__}, got {type(value).__name__} {value!r}")
            if kind is float:
                value = float(value)
        return value

    # values -----------------------------------------------------------
    def input_name(self, index: int) -> str:
        return self.node.input[index] if index < len(self.node.input) else f"#{index}"

    def known(self, value) -> np.ndarray | None:
        """The value as a concrete numpy array, if known at import time."""
        if isinstance(value, np.ndarray):
            return value
        if isinstance(value, SymInts):
            out = from_static(value.values, value.dtype)
            return out if isinstance(out, np.ndarray) else None
        return None

    def require_static(self, value, index: int, what: str) -> np.ndarray:
        """Import-time contents of input `index` (object dtype if symbolic)."""
        arr = static_array(value)
        if arr is None:
            raise self.error(f"input {index} ({what}, '{self.input_name(index)}') must be known at "
                             "compile time (an initializer, a Constant, or computed from shapes); "
                             "if it is a graph input, import with constant_inputs=")
        return arr

    def require_known(self, value, index: int, what: str) -> np.ndarray:
        arr = self.known(value)
        if arr is None:
            self.require_static(value, index, what)
            raise self.error(f"input {index} ({what}) must be a constant, got symbolic {value!r}")
        return arr

    def tensor(self, value) -> Expr:
        """A graph value for any import-time value."""
        if isinstance(value, Expr):
            return value
        if isinstance(value, np.ndarray):
            try:
                return Constant(value)
            except RelaxEdgeError as err:
                raise self.error(str(err)) from None
        if isinstance(value, SymInts):
            arr = value.values
            if arr.ndim > 1:
                raise self.error(f"cannot materialize a symbolic tensor of rank {arr.ndim}")
            t = self.emit("shape_to_tensor", [], {"values": tuple(arr.reshape(-1))})
            if value.dtype != "int64":
                t = self.emit("cast", [t], {"dtype": value.dtype})
            if arr.ndim == 0:
                t = self.emit("reshape", [t], {"shape": ()})
            return t
        if value is None:
            raise self.error("a required input is missing")
        raise self.error(f"unexpected value {value!r}")

    def emit(self, op_name: str, args, attrs=None):
        """Emit an operator call; fold it when every argument is known
        (data movement on symbolic shape values included)."""
        if op_name in _MOVE_OPS and any(isinstance(a, SymInts) for a in args) \
                and all(static_array(a) is not None for a in args):
            moved = self._move_static(op_name, args, attrs)
            if moved is not None:
                return moved
        args = [self.tensor(a) for a in args]
        try:
            call = make_call(op_name, args, attrs, span=self.span)
        except RelaxEdgeError as err:
            raise self.error(str(err)) from None
        if all(isinstance(a, Constant) for a in args) and _concrete_attrs(call.attrs):
            folded = self._fold(call)
            if folded is not None:
                return folded
        return self.builder.emit(call)

    def _move_static(self, op_name, args, attrs):
        op = get_op(op_name)
        full = {**{k: v for k, v in op.attrs.items() if v is not REQUIRED}, **(attrs or {})}
        if not _concrete_attrs(full):
            return None
        try:  # the operator's type rule judges the arguments first
            make_call(op_name, [Var("arg", self.type_of(a)) for a in args], attrs, span=self.span)
        except RelaxEdgeError as err:
            raise self.error(str(err)) from None
        if op_name in ("tile", "broadcast_to"):  # the only moves that grow their input
            if op_name == "tile":
                reps = [int(r) for r in _concrete(full["repeats"])]
                out = list(static_array(args[0]).shape) + reps  # as many elements as the tiled result
            else:
                out = [int(d) for d in _concrete(full["shape"])]
            self.check_constant_size(out, "int64", f"the result of {op_name}")
        arrays = [a.values if isinstance(a, SymInts) else to_object(a) for a in args]
        out = op.reference(*arrays, **{k: _concrete(v) for k, v in full.items()})
        dtype = next(a.dtype for a in args if isinstance(a, SymInts))
        return from_static(np.asarray(out, dtype=object), dtype)

    def _fold(self, call: Call):
        t = call.type
        if isinstance(t, TensorType) and t.shape is not None and all(d.is_const for d in t.shape):
            self.check_constant_size(t.shape, t.dtype, f"the result of {call.op.name}")
        attrs = {k: _concrete(v) for k, v in call.attrs.items()}
        try:
            if bfloat16.involved(call):   # computed in float32 on the bits, as the interpreter does
                out = bfloat16.call_in_float32(call, [bfloat16.bits(a.data) for a in call.args], attrs)
                if not bfloat16.is_bfloat16_type(call.type):
                    return out
                out = bfloat16.public(out)   # a bfloat16 constant needs ml_dtypes' dtype, else not folded
                return out if out.dtype != np.uint16 else None
            with np.errstate(all="ignore"):
                out = call.op.reference(*[a.data for a in call.args], **attrs)
        except Exception as err:
            raise self.error(f"evaluating {call.op.name} on constants failed: {err}") from None
        return np.asarray(out)

    def match_cast_fresh(self, value, what: str, lower: int = 1, known=None, upper=None):
        """Give a value of unknown shape (known rank) fresh size variables
        (except where `known` gives a dim), bound and checked at run time by
        a match_cast; `upper` (an int, or one per dim, None for none) bounds
        them, so a compiled model plans their buffers at that size."""
        if not isinstance(value, Expr):
            return value  # known at import time: its shape is known too
        t = value.type
        if t.ndim > MAX_RANK:
            raise self.error(f"the result would have rank {t.ndim}, more than {MAX_RANK}")
        base = re.sub(r"\W", "_", self.span)
        base = base if base[:1].isalpha() else f"d_{base}"
        known = known or [None] * t.ndim
        uppers = upper if isinstance(upper, (list, tuple)) else [upper] * t.ndim
        uppers = [None if u is None or u == float("inf") else int(u) for u in uppers]
        dims = [k if k is not None else SizeVar(f"{base}_{what}{i}", upper=u, lower=lower)
                for i, (k, u) in enumerate(zip(known, uppers))]
        return self.builder.match_cast(value, TensorType(dims, t.dtype))

    def type_of(self, value) -> TensorType:
        """The tensor type of any value (known arrays and SymInts included)."""
        if isinstance(value, Expr):
            if not isinstance(value.type, TensorType):
                raise self.error(f"expected a tensor, got {value.type}")
            return value.type
        if isinstance(value, np.ndarray):
            return TensorType(value.shape, value.dtype)
        if isinstance(value, SymInts):
            return TensorType(value.shape, value.dtype)
        raise self.error("a required input is missing")
