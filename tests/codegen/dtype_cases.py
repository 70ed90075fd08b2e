"""The element types beyond float32/int8/uint8/int32/int64 (float64, int16,
uint16, uint32, uint64) through a matrix of operators: one module per dtype
whose outputs are every operator applied to two inputs over a symbolic
batch dim, and the expected values from numpy written from the ONNX spec
(not from the operator records). Shared by tests/codegen/test_dtypes.py
(interpreter, host C and LLVM) and tests/emu/test_qemu_dtypes.py."""

from __future__ import annotations

import numpy as np

from relax_edge.ir import Builder, SizeVar, TensorType, Var
from relax_edge.ir.expr import Tuple
from relax_edge.op.registry import make_call

NEW_DTYPES = ("float64", "int16", "uint16", "uint32", "uint64")
NARROW_FLOATS = ("float16", "bfloat16")   # stored narrow, computed in float32 by the kernels
# float dtype -> (rtol, atol) against numpy (numpy computes float16 in float16, the kernels in float32)
TOLERANCE = {"float64": (1e-12, 0.0), "float32": (1e-6, 0.0), "float16": (2e-3, 2e-2), "bfloat16": (1.6e-2, 0.15)}


def is_float(dtype: str) -> bool:
    return dtype.startswith("float") or dtype == "bfloat16"


def numpy_dtype(dtype: str):
    """The numpy dtype of `dtype`; bfloat16 is ml_dtypes' (the tests that use it skip without it)."""
    if dtype == "bfloat16":
        import ml_dtypes
        return ml_dtypes.bfloat16
    return np.dtype(dtype)
WIDTH = 5   # the inputs are (n, WIDTH)


def _trunc_div(a, b):
    """C / ONNX integer Div: the quotient truncated towards zero."""
    if a.dtype.kind == "u":
        return a // b
    q = np.abs(a.astype(np.int64)) // np.abs(b.astype(np.int64))
    return (np.sign(a.astype(np.int64)) * np.sign(b.astype(np.int64)) * q).astype(a.dtype)


def _wrapping(fn):
    """An integer operation computed as the dtype wraps it (two's complement, modulo 2^bits)."""
    def call(a, b):
        with np.errstate(over="ignore"):
            return fn(a, b).astype(a.dtype)
    return call


def _shift(direction):
    def call(a, b):
        amount = b % np.array(a.dtype.itemsize * 8, a.dtype)   # inputs in range: the test keeps them so
        return (np.left_shift(a, amount) if direction == "left" else np.right_shift(a, amount)).astype(a.dtype)
    return call


# name -> (operator, attrs, arguments ("x", "y"), numpy of the arrays); every dtype
COMMON = {
    "add": ("add", {}, "xy", _wrapping(np.add)),
    "subtract": ("subtract", {}, "xy", _wrapping(np.subtract)),
    "multiply": ("multiply", {}, "xy", _wrapping(np.multiply)),
    "maximum": ("maximum", {}, "xy", np.maximum),
    "minimum": ("minimum", {}, "xy", np.minimum),
    "less": ("less", {}, "xy", np.less),
    "greater_equal": ("greater_equal", {}, "xy", np.greater_equal),
    "equal": ("equal", {}, "xy", np.equal),
    "sum": ("sum", {"axis": (1,), "keepdims": False}, "x",
            lambda x: np.sum(x, axis=1, dtype=x.dtype)),
    "max": ("max", {"axis": (1,), "keepdims": False}, "x", lambda x: np.max(x, axis=1)),
    "cast_float32": ("cast", {"dtype": "float32"}, "x", lambda x: x.astype(np.float32)),
    "cast_float64": ("cast", {"dtype": "float64"}, "x", lambda x: x.astype(np.float64)),
    "cast_int64": ("cast", {"dtype": "int64"}, "x", lambda x: x.astype(np.int64)),
}
INTEGER = {
    "divide": ("divide", {}, "xy", _trunc_div),
    "mod": ("mod", {"fmod": False}, "xy", np.mod),    # integer Mod takes the divisor's sign, as Python
    "bitwise_and": ("bitwise_and", {}, "xy", np.bitwise_and),
    "bitwise_or": ("bitwise_or", {}, "xy", np.bitwise_or),
    "bitwise_xor": ("bitwise_xor", {}, "xy", np.bitwise_xor),
    "bitwise_not": ("bitwise_not", {}, "x", np.invert),
    "shift_left": ("bit_shift", {"direction": "left"}, "xs", _shift("left")),
    "shift_right": ("bit_shift", {"direction": "right"}, "xs", _shift("right")),
    "cast_uint16": ("cast", {"dtype": "uint16"}, "x", lambda x: x.astype(np.uint16)),
    "cast_int16": ("cast", {"dtype": "int16"}, "x", lambda x: x.astype(np.int16)),
}
FLOAT = {
    "divide": ("divide", {}, "xy", np.divide),
    "exp": ("exp", {}, "x", np.exp),
    "log": ("log", {}, "p", np.log),
    "sqrt": ("sqrt", {}, "p", np.sqrt),
    "tanh": ("tanh", {}, "x", np.tanh),
    "sin": ("sin", {}, "x", np.sin),
    "fmod": ("mod", {"fmod": True}, "xy", np.fmod),
    "floor": ("floor", {}, "x", np.floor),
    "cast_int16": ("cast", {"dtype": "int16"}, "x", lambda x: np.trunc(x).astype(np.int16)),
    "cast_uint32": ("cast", {"dtype": "uint32"}, "p", lambda x: np.trunc(x).astype(np.uint32)),
}


def cases(dtype: str) -> dict:
    return {**COMMON, **(FLOAT if is_float(dtype) else INTEGER)}


def module(dtype: str, names=None):
    """One function main(x, y, s, p) of (n, WIDTH) tensors returning every case's output, in order."""
    selected = {k: v for k, v in cases(dtype).items() if names is None or k in names}
    n = SizeVar("n")
    params = [Var(v, TensorType((n, WIDTH), dtype)) for v in "xysp"]
    by_name = dict(zip("xysp", params))
    bb = Builder()
    with bb.function("main", params):
        outs = [bb.emit(make_call(op, [by_name[a] for a in args], attrs))
                for op, attrs, args, _ in selected.values()]
        bb.ret(Tuple(outs))
    return bb.get(), selected


def arrays(dtype: str, rows: int, seed: int = 0):
    """x and y over the dtype's whole range (integers) or standard normal; s: shift amounts
    within the width; p: positive values (log, sqrt, a cast to unsigned)."""
    rng = np.random.default_rng(seed)
    shape = (rows, WIDTH)
    if is_float(dtype):
        dt = numpy_dtype(dtype)
        x = (rng.standard_normal(shape) * 3).astype(dt)
        y = rng.standard_normal(shape)
        y[np.abs(y) < 0.1] = 0.5
        y = y.astype(dt)
        p = rng.uniform(0.1, 1000.0, shape).astype(dt)
        s = np.zeros(shape, dt)
    else:
        info = np.iinfo(dtype)
        x = rng.integers(info.min, info.max, shape, dtype=dtype, endpoint=True)
        y = rng.integers(info.min, info.max, shape, dtype=dtype, endpoint=True)
        y[:, 0] = rng.integers(1, 9, rows).astype(dtype)   # small divisors too
        y[:, 1] = x[:, 1]                                  # equal operands
        y[y == 0] = 3
        s = rng.integers(0, info.bits, shape).astype(dtype)
        p = rng.integers(0, min(info.max, 30000), shape).astype(dtype)
    return {"x": x, "y": y, "s": s, "p": p}


def expected(selected: dict, inputs: dict) -> list:
    with np.errstate(all="ignore"):
        return [np.asarray(ref(*(inputs[a] for a in args))) for _, _, args, ref in selected.values()]


def compare(selected: dict, got, want, what: str) -> None:
    assert len(got) == len(want) == len(selected)
    for name, g, w in zip(selected, got, want):
        assert g.dtype == w.dtype and g.shape == w.shape, (what, name, g.dtype, w.dtype, g.shape, w.shape)
        if is_float(g.dtype.name):
            rtol, atol = TOLERANCE[g.dtype.name]
            np.testing.assert_allclose(g.astype(np.float64), w.astype(np.float64), rtol=rtol, atol=atol,
                                       err_msg=f"{what}: {name}")
        else:
            np.testing.assert_array_equal(g, w, err_msg=f"{what}: {name}")




def combined_module(names_by_dtype: dict):
    """One function main over (x, y) of each dtype of `names_by_dtype` (cases of x and y only), returning
    the named cases of each dtype in order: one build for several dtypes. Returns the module and
    [(dtype, selected)] in the order of the inputs and outputs."""
    n = SizeVar("n")
    params, plan = [], []
    for dtype, names in names_by_dtype.items():
        x, y = (Var(f"{v}_{dtype}", TensorType((n, WIDTH), dtype)) for v in "xy")
        params += [x, y]
        selected = {k: v for k, v in cases(dtype).items() if k in names}
        assert all(set(args) <= set("xy") for _, _, args, _ in selected.values())
        plan.append((dtype, selected, {"x": x, "y": y}))
    bb = Builder()
    with bb.function("main", params):
        bb.ret(Tuple([bb.emit(make_call(op, [by_name[a] for a in args], attrs))
                      for _, selected, by_name in plan for op, attrs, args, _ in selected.values()]))
    return bb.get(), [(dtype, selected) for dtype, selected, _ in plan]
