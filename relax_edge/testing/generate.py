"""Random well-typed graphs for differential testing of the compiler.

`generate_graph(rng)` returns a `Graph` (testing/graphs.py) of a few to a
dozen operator calls over one to a few inputs:

1. Dims are static (odd sizes and 1 among them) or bounded size variables;
   the run picks the sizes (`pick_sizes`: the lower bound, the upper bound,
   odd ones between). Inputs that meet an existing value are made to
   broadcast against it (dims dropped from the front or set to 1).
2. The dtype of the first input is drawn from `relax_edge.ir.types.DTYPES`
   as it is at run time (those numpy has: `numpy_dtypes`); casts bring in the others. An operator is only
   chosen when its type rule accepts the operands (make_call is tried), so
   a dtype an operator refuses is skipped, not an error.
3. Values stay small and safe: each value carries a bound on its magnitude
   and integer values whose operations could overflow a 32/64-bit integer
   (undefined in C) are not combined; 8/16-bit integers may wrap (numpy
   and C agree on that). Integer division only by positive constants.
   Float to integer and float to bool casts, float comparisons, floor and
   ceil apply only to exact values (inputs, constants and what only moves,
   selects or negates them), so rounding cannot flip the result.
4. No dimension can be 0 at run time and no value exceeds `MAX_ELEMENTS`.

The op families it draws from are `FAMILIES`; `Graph.ops()` lists what a
graph uses.
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from ..errors import TypeInferenceError
from ..ir import Constant, SizeVar, TensorType, Var
from ..ir.shape import Proof, as_expr, bounds, prove_equal
from ..op import make_call
from ..op.manipulate import _BIG
from .graphs import SHAPED, Graph, Step, numpy_dtypes, reshape_target

__all__ = ["generate_graph", "pick_sizes", "FAMILIES", "family_of", "MAX_ELEMENTS"]

MAX_ELEMENTS = 4096
BINARY = ("add", "subtract", "multiply", "maximum", "minimum")
COMPARE = ("less", "greater", "less_equal", "greater_equal", "equal")
LOGICAL = ("logical_and", "logical_or", "logical_xor")
UNARY = ("relu", "abs", "negative", "sigmoid", "tanh", "exp", "sqrt", "floor", "ceil", "logical_not", "clip")
REDUCE = ("sum", "mean", "max", "min")
FAMILIES = ("binary", "divide", "compare", "logical", "where", "unary", "cast", "concat", "strided_slice",
            "transpose", "reshape", "take", "broadcast_to", "tile", "pad", "trilu", "sum", "mean", "max", "min",
            "softmax", "matmul", "conv2d", "max_pool2d",
            "avg_pool2d")
# operators whose result is exactly one of their inputs' values (or its negation)
EXACT = {"relu", "abs", "negative", "maximum", "minimum", "max", "min", "transpose", "reshape", "concat", "take",
         "broadcast_to", "tile", "pad", "trilu",
         "strided_slice", "where", "clip", "floor", "ceil", "max_pool2d"}


def family_of(step: Step) -> str:
    if step.op in BINARY:
        return "binary"
    if step.op in COMPARE:
        return "compare"
    if step.op in LOGICAL:
        return "logical"
    if step.op in UNARY:
        return "unary"
    return step.op


def _kind(dtype: str) -> str:
    return np.dtype(dtype).kind


def _limit(dtype: str) -> float:
    """The largest magnitude a value of `dtype` may reach; 8/16-bit integers wrap."""
    dt = np.dtype(dtype)
    if dt.kind == "f":
        return {2: 2.0e3, 4: 1.0e6}.get(dt.itemsize, 1.0e12)
    if dt.kind == "b":
        return 1.0
    if dt.itemsize <= 2:
        return math.inf
    return 2.0 ** (8 * dt.itemsize - 4)


def _range(dtype: str) -> float:
    dt = np.dtype(dtype)
    if dt.kind in "iu":
        return float(max(abs(int(np.iinfo(dt).min)), int(np.iinfo(dt).max)))
    return 1.0 if dt.kind == "b" else float(np.finfo(dt).max)


def _broadcast_proved(shapes) -> bool:
    """Every pair of aligned dims is provably equal or a constant 1 (the
    rule also accepts dims that may differ at run time, checked there)."""
    rank = max(len(sh) for sh in shapes)
    padded = [(as_expr(1),) * (rank - len(sh)) + tuple(sh) for sh in shapes]
    for dims in zip(*padded):
        big = [d for d in dims if not (d.is_const and d.value == 1)]
        if any(prove_equal(big[0], d) is not Proof.YES for d in big[1:]):
            return False
    return True


class _Value:
    def __init__(self, expr, bound: float, exact: bool):
        self.expr, self.bound, self.exact = expr, bound, exact

    @property
    def name(self):
        return self.expr.name if isinstance(self.expr, Var) else None

    @property
    def type(self) -> TensorType:
        return self.expr.type

    @property
    def dtype(self) -> str:
        return self.expr.type.dtype


class _Generator:
    def __init__(self, rng: np.random.Generator, dtypes=None, max_steps: int = 12):
        self.rng = rng
        self.dtypes = tuple(numpy_dtypes(dtypes))
        self.max_steps = max_steps
        self.graph = Graph({}, [], {}, [], [])
        self.svars: dict = {}
        self.values: list = []          # _Value of inputs and steps (tensors the steps may use)
        self.const_names: dict = {}     # id(Constant) -> name

    # ------------------------------------------------------------ helpers
    def choice(self, seq):
        return seq[int(self.rng.integers(len(seq)))]

    def chance(self, p: float) -> bool:
        return bool(self.rng.random() < p)

    def size_var(self, lower: int = 1) -> SizeVar:
        name = f"{'nmkh'[len(self.svars) % 4]}{len(self.svars) // 4 or ''}"
        upper = int(self.choice((3, 5, 7, 9, 9, 33))) + lower - 1   # 33: vector loops and their tails
        var = SizeVar(name, upper=upper, lower=lower)
        self.svars[name] = var
        self.graph.size_vars[name] = (lower, upper)
        return var

    def dim(self, lower: int = 1):
        if self.svars and self.chance(0.35):
            fits = [v for v in self.svars.values() if v.lower >= lower]
            if fits:
                return self.choice(fits)
        if len(self.svars) < 3 and self.chance(0.3):
            return self.size_var(lower)
        if self.chance(0.08):
            return int(self.choice((16, 17, 31)))
        return int(self.choice([d for d in (1, 2, 3, 4, 5, 7, 9) if d >= lower]))

    def add_input(self, dims, dtype: str) -> _Value:
        name = f"x{len(self.graph.inputs)}"
        self.graph.inputs.append((name, [d.name if isinstance(d, SizeVar) else int(d) for d in dims], dtype))
        bound = {"f": 4.0, "b": 1.0}.get(_kind(dtype), 4.0)
        value = _Value(Var(name, TensorType(list(dims), dtype)), bound, True)
        self.values.append(value)
        return value

    def add_constant(self, data: np.ndarray) -> _Value:
        name = f"c{len(self.graph.constants)}"
        self.graph.constants[name] = data
        const = Constant(data)
        self.const_names[id(const)] = name
        bound = float(np.max(np.abs(data.astype(np.float64)))) if data.size else 0.0
        return _Value(const, bound, True)

    def random_data(self, shape, dtype: str, positive: bool = False) -> np.ndarray:
        kind = _kind(dtype)
        if kind == "f":
            data = self.rng.uniform(0.5, 2.0, shape) * (1 if positive else self.rng.choice((-1, 1), shape))
            return data.astype(dtype)
        if kind == "b":
            return self.rng.random(shape) < 0.5
        lo = 1 if positive else (0 if kind == "u" else -4)
        return self.rng.integers(lo, 5, shape).astype(dtype)

    def name_of(self, value: _Value) -> str:
        return value.name if value.name is not None else self.const_names[id(value.expr)]

    def emit(self, op: str, args: list, attrs: dict, bound: float, exact: bool | None = None) -> _Value | None:
        """Add a step when its type rule accepts it and its result is small and safe."""
        call_attrs = dict(attrs)
        if op in SHAPED:
            call_attrs["shape"] = reshape_target(attrs["shape"], args[0].type.shape)
        try:
            call = make_call(op, [a.expr for a in args], call_attrs)
        except TypeInferenceError:
            return None
        t = call.type
        if not isinstance(t, TensorType) or t.shape is None:
            return None
        if call.op.kind == "broadcast" and not _broadcast_proved([a.type.shape for a in args]):
            return None
        count = as_expr(1)
        for d in t.shape:
            if bounds(d)[0] < 1:
                return None
            count = count * d
        if bounds(count)[1] > MAX_ELEMENTS:
            return None
        if bound > _limit(t.dtype):
            return None
        bound = min(bound, _range(t.dtype))
        if exact is None:
            exact = op in EXACT and all(a.exact for a in args)
        name = f"v{len(self.graph.steps)}"
        self.graph.steps.append(Step(name, op, [self.name_of(a) for a in args], attrs))
        value = _Value(Var(name, t), bound, exact or _kind(t.dtype) in "iub")
        self.values.append(value)
        return value

    def representable(self, d):
        """d as an input's dim (an int or a plain size variable), else None."""
        d = as_expr(d)
        if d.is_const:
            return int(d.value)
        return d.as_var()

    # ------------------------------------------------------------ operands
    def partner(self, x: _Value, dtype: str | None = None, allow_input: bool = True) -> _Value:
        """A value that broadcasts against x: x itself, a pool value of its
        type, a scalar, or a new input / constant of x's shape with dims
        dropped from the front or set to 1."""
        dtype = dtype or x.dtype
        same = [v for v in self.values if v.type == TensorType(x.type.shape, dtype)]
        r = self.rng.random()
        if same and r < 0.3:
            return self.choice(same)
        if r < 0.45:
            return self.add_constant(self.random_data((), dtype))
        shape = list(x.type.shape)
        drop = int(self.rng.integers(0, len(shape) + 1)) if self.chance(0.4) else 0
        dims = []
        for d in shape[drop:]:
            rep = self.representable(d)
            dims.append(1 if rep is None or self.chance(0.3) else rep)
        static = all(isinstance(d, int) for d in dims)
        if static and (not allow_input or self.chance(0.5)):
            return self.add_constant(self.random_data(tuple(dims), dtype))
        return self.add_input(dims, dtype)

    def operand(self) -> _Value:
        if self.chance(0.6):
            return self.values[-1]
        return self.choice(self.values)

    # ------------------------------------------------------------ families
    def binary(self, x):
        # bool: the rules accept arithmetic, but subtract has no numpy reference and add miscompiles
        # (tests/fuzz/test_fuzz_regressions.py, test_bool_add_is_logical_or)
        op = self.choice(BINARY if x.dtype != "bool" else ("maximum", "minimum"))
        y = self.partner(x)
        bound = {"add": x.bound + y.bound, "subtract": x.bound + y.bound,
                 "multiply": x.bound * y.bound}.get(op, max(x.bound, y.bound))
        if op == "subtract" and _kind(x.dtype) == "u":
            bound = math.inf if _limit(x.dtype) == math.inf else _range(x.dtype)
        return self.emit(op, [x, y] if self.chance(0.7) else [y, x], {}, bound)

    def divide(self, x):
        """By a constant: nonzero floats of either sign, positive integers."""
        if _kind(x.dtype) == "b":
            return None
        shape = tuple(int(d.value) if d.is_const else 1 for d in x.type.shape[int(self.rng.integers(0, 2)):])
        data = self.random_data(shape if self.chance(0.7) else (), x.dtype, positive=_kind(x.dtype) != "f")
        bound = x.bound * 2 if _kind(x.dtype) == "f" else x.bound
        return self.emit("divide", [x, self.add_constant(data)], {}, bound, exact=False)

    def compare(self, x):
        if _kind(x.dtype) == "f" and not x.exact:
            return None
        op = self.choice(COMPARE)
        y = self.partner(x)
        if _kind(x.dtype) == "f" and not y.exact:
            return None
        return self.emit(op, [x, y], {}, 1.0)

    def logical(self, x):
        if x.dtype != "bool":
            return None
        if self.chance(0.3):
            return self.emit("logical_not", [x], {}, 1.0)
        return self.emit(self.choice(LOGICAL), [x, self.partner(x)], {}, 1.0)

    def where(self, x):
        conds = [v for v in self.values if v.dtype == "bool" and len(v.type.shape) <= len(x.type.shape)]
        if not conds:
            return None
        cond = self.choice(conds)
        y = self.partner(x)
        return self.emit("where", [cond, x, y], {}, max(x.bound, y.bound))

    def unary(self, x):
        kind = _kind(x.dtype)
        op = self.choice(UNARY)
        if kind == "b" and op not in ("relu", "logical_not"):
            return None
        if op == "clip":
            lo = float(self.rng.integers(-3, 1)) if kind != "u" else 0.0
            hi = lo + float(self.rng.integers(1, 5))
            if kind in "iu":
                lo, hi = int(lo), int(hi)
            return self.emit("clip", [x], {"min": lo, "max": hi}, max(abs(lo), abs(hi)))
        if op in ("floor", "ceil") and not x.exact:
            return None
        if op == "exp" and x.bound > 4:
            return None
        if op == "sqrt":
            if kind != "f":
                return None
            x = self.emit("abs", [x], {}, x.bound)
            if x is None:
                return None
            return self.emit("sqrt", [x], {}, math.sqrt(x.bound) + 1)
        bound = {"sigmoid": 1.0, "tanh": 1.0, "exp": math.exp(min(x.bound, 50.0)), "ceil": x.bound + 1}.get(op, x.bound)
        if op in ("negative", "abs") and kind in "iu":
            bound = _range(x.dtype) if kind == "u" and op == "negative" else x.bound
        return self.emit(op, [x], {}, bound)

    def cast(self, x):
        target = self.choice(self.dtypes)
        src, dst = _kind(x.dtype), _kind(target)
        if src == "f" and dst in "iub":
            if not x.exact or dst == "u" or (dst == "i" and x.bound >= _range(target)):
                return None
        bound = 1.0 if dst == "b" else min(x.bound, _range(target)) if dst in "iu" else x.bound
        if dst in "iu" and x.bound > _range(target) or src == "i" and dst == "u":   # wraps (negatives to huge)
            bound = _range(target)
        return self.emit("cast", [x], {"dtype": target}, bound, exact=x.exact)

    def concat(self, x):
        rank = len(x.type.shape)
        axis = int(self.rng.integers(-rank, rank))
        parts = [x]
        for _ in range(int(self.rng.integers(1, 3))):
            same = [v for v in self.values if v.type == x.type]
            if same and self.chance(0.4):
                parts.append(self.choice(same))
                continue
            dims = [self.representable(d) for d in x.type.shape]
            if any(d is None for i, d in enumerate(dims) if i != axis % rank):
                parts.append(x)
                continue
            dims[axis % rank] = self.dim()
            if all(isinstance(d, int) for d in dims) and self.chance(0.5):
                parts.append(self.add_constant(self.random_data(tuple(dims), x.dtype)))
            else:
                parts.append(self.add_input(dims, x.dtype))
        self.rng.shuffle(parts)
        return self.emit("concat", parts, {"axis": axis}, max(p.bound for p in parts))

    def strided_slice(self, x):
        rank = len(x.type.shape)
        axes = sorted(self.rng.choice(rank, size=int(self.rng.integers(1, rank + 1)), replace=False).tolist())
        begin, end, strides = [], [], []
        for _ in axes:
            step = int(self.choice((1, 1, 2, 3, -1, -2)))
            if step > 0:
                begin.append(int(self.choice((0, 0, 1, 2, -2, -3))))
                end.append(int(self.choice((_BIG, -1, 3, 5))))
            else:
                begin.append(int(self.choice((_BIG, -1, -2, 4))))
                end.append(int(self.choice((-_BIG, 0, 1))))
            strides.append(step)
        attrs = {"begin": tuple(begin), "end": tuple(end), "strides": tuple(strides), "axes": tuple(axes)}
        return self.emit("strided_slice", [x], attrs, x.bound)

    def transpose(self, x):
        rank = len(x.type.shape)
        if rank < 2:
            return None
        axes = None if self.chance(0.2) else tuple(int(a) for a in self.rng.permutation(rank))
        return self.emit("transpose", [x], {"axes": axes}, x.bound)

    def reshape(self, x):
        shape = x.type.shape
        rank = len(shape)
        r = self.rng.random()
        if rank == 0:
            spec = [1]
        elif r < 0.25 or rank == 1:
            spec = [tuple(range(rank))] if rank > 1 or self.chance(0.5) else [(0,), 1]
        elif r < 0.55:
            i = int(self.rng.integers(0, rank - 1))
            spec = [(a,) for a in range(i)] + [(i, i + 1)] + [(a,) for a in range(i + 2, rank)]
        elif r < 0.8:
            splits = [i for i, d in enumerate(shape) if d.is_const and any(d.value % p == 0 for p in (2, 3))
                      and d.value > 3]
            if not splits:
                return None
            i = self.choice(splits)
            p = 2 if shape[i].value % 2 == 0 else 3
            spec = [(a,) for a in range(i)] + [p, shape[i].value // p] + [(a,) for a in range(i + 1, rank)]
        else:
            i = int(self.rng.integers(0, rank + 1))
            spec = [(a,) for a in range(i)] + [1] + [(a,) for a in range(i, rank)]
        return self.emit("reshape", [x], {"shape": tuple(spec)}, x.bound)

    def take(self, x):
        rank = len(x.type.shape)
        axis = int(self.rng.integers(-rank, rank))
        lo = bounds(x.type.shape[axis])[0]
        shape = self.choice(((), (int(self.rng.integers(1, 4)),), (2, int(self.rng.integers(1, 3)))))
        data = self.rng.integers(-lo, lo, shape).astype(self.choice(("int32", "int64")))
        return self.emit("take", [x, self.add_constant(data)], {"axis": axis}, x.bound)

    def broadcast_to(self, x):
        """To x's shape with its constant-1 dims widened and leading dims added."""
        spec = [int(self.choice((1, 2, 3))) for _ in range(int(self.rng.integers(0, 2)))]
        for a, d in enumerate(x.type.shape):
            spec.append(int(self.choice((1, 3, 4))) if d.is_const and d.value == 1 else (a,))
        return self.emit("broadcast_to", [x], {"shape": tuple(spec)}, x.bound)

    def tile(self, x):
        repeats = tuple(int(self.choice((1, 1, 2, 3))) for _ in x.type.shape)
        return self.emit("tile", [x], {"repeats": repeats}, x.bound)

    def pad(self, x):
        rank = len(x.type.shape)
        mode = self.choice(("constant", "constant", "edge", "reflect", "wrap"))
        lowest = min(bounds(d)[0] for d in x.type.shape)
        most = {"reflect": lowest - 1, "wrap": lowest}.get(mode, 3)
        pads = [int(self.rng.integers(-1 if mode == "constant" else 0, most + 1)) if self.chance(0.6) else 0
                for _ in range(2 * rank)]
        value = self.random_data((), x.dtype).item()
        return self.emit("pad", [x], {"pads": tuple(pads), "mode": mode, "value": value},
                         max(x.bound, abs(float(value))))

    def trilu(self, x):
        if len(x.type.shape) < 2:
            return None
        return self.emit("trilu", [x], {"k": int(self.rng.integers(-1, 2)), "upper": self.chance(0.5)}, x.bound)

    def reduce(self, x, op):
        rank = len(x.type.shape)
        if self.chance(0.2):
            axis = None
        else:
            axes = sorted(self.rng.choice(rank, size=int(self.rng.integers(1, rank + 1)), replace=False).tolist())
            axis = int(axes[0]) if len(axes) == 1 and self.chance(0.5) else tuple(int(a) for a in axes)
        count = 1
        for d in x.type.shape:
            count *= bounds(d)[1]
        bound = x.bound * count if op == "sum" else x.bound
        return self.emit(op, [x], {"axis": axis, "keepdims": self.chance(0.5)}, bound)

    def softmax(self, x):
        rank = len(x.type.shape)
        return self.emit("softmax", [x], {"axis": int(self.rng.integers(-rank, rank))}, 1.0)

    def matmul(self, x):
        shape = x.type.shape
        k = shape[-1]
        n = self.dim()
        if len(shape) >= 3 and self.chance(0.4):
            batch = [self.representable(d) for d in shape[:-2]]
            dims = [b if b is not None else 1 for b in batch] + [self.representable(k), n]
        elif len(shape) > 1 or self.chance(0.5):
            dims = [self.representable(k), n] if len(shape) > 1 or self.chance(0.5) else [self.representable(k)]
        else:   # w @ x for a 1-D x
            dims = [n, self.representable(k)]
            if dims[1] is None:
                return None
            w = self.add_input(dims, x.dtype)
            return self.emit("matmul", [w, x], {}, x.bound * w.bound * bounds(k)[1])
        if dims[-2 if len(dims) > 1 else -1] is None:
            return None
        if all(isinstance(d, int) for d in dims) and self.chance(0.6):
            w = self.add_constant(self.random_data(tuple(dims), x.dtype))
        else:
            w = self.add_input(dims, x.dtype)
        kmax = bounds(k)[1]
        return self.emit("matmul", [x, w], {}, x.bound * w.bound * kmax)

    def conv2d(self, x):
        if len(x.type.shape) != 4 or not x.type.shape[1].is_const:
            return None
        c = int(x.type.shape[1].value)
        groups = c if c > 1 and self.chance(0.3) else 1
        out = c * int(self.choice((1, 2))) if groups > 1 else int(self.choice((1, 2, 3, 5)))
        kh, kw = int(self.choice((1, 2, 3))), int(self.choice((1, 3)))
        pads = [int(self.rng.integers(0, k)) if self.chance(0.5) else 0 for k in (kh, kw, kh, kw)]
        strides = (int(self.choice((1, 1, 2))), int(self.choice((1, 2))))
        dilation = (int(self.choice((1, 1, 2))), 1)
        if self.chance(0.7):
            w = self.add_constant(self.random_data((out, c // groups, kh, kw), x.dtype))
        else:
            w = self.add_input([out, c // groups, kh, kw], x.dtype)
        attrs = {"strides": strides, "padding": tuple(pads), "dilation": dilation, "groups": groups}
        y = self.emit("conv2d", [x, w], attrs, x.bound * w.bound * (c // groups) * kh * kw)
        if y is not None and self.chance(0.5):   # the library kernel's pattern: + per-channel bias, activation
            return self.epilogue(y, self.add_constant(self.random_data((out, 1, 1), x.dtype)))
        return y

    def epilogue(self, y, bias):
        y = self.emit("add", [y, bias], {}, y.bound + bias.bound)
        if y is None or self.chance(0.3):
            return y
        if self.chance(0.5):
            return self.emit("relu", [y], {}, y.bound)
        lo, hi = (0.0, 6.0) if _kind(y.dtype) == "f" else (0, 6)
        return self.emit("clip", [y], {"min": lo, "max": hi}, 6.0)

    def dense(self, x):
        """matmul by a constant (K, N) matrix, + a constant bias, relu or clip(0, 6)."""
        k = x.type.shape[-1]
        if len(x.type.shape) < 2 or not k.is_const:
            return None
        n = int(self.choice((1, 3, 4, 8)))
        w = self.add_constant(self.random_data((int(k.value), n), x.dtype))
        y = self.emit("matmul", [x, w], {}, x.bound * w.bound * int(k.value))
        if y is None:
            return None
        return self.epilogue(y, self.add_constant(self.random_data((n,), x.dtype)))

    def duplicate(self, x):
        """A step again, same operator, operands and attributes (for cse)."""
        if not self.graph.steps:
            return None
        step = self.choice(self.graph.steps)
        value = next(v for v in self.values if v.name == step.name)
        args = [next((v for v in self.values if v.name == a), None) for a in step.args]
        if any(a is None for a in args):
            return None
        return self.emit(step.op, args, dict(step.attrs), value.bound, value.exact)

    def folded(self, x):
        """An operator over a constant of x's shape (fold_constants computes it), then combined with x."""
        if any(not d.is_const for d in x.type.shape):
            return None
        c = self.add_constant(self.random_data(tuple(int(d.value) for d in x.type.shape), x.dtype))
        y = self.choice((self.unary, self.cast, self.transpose, self.reduce_any))(c)
        if y is None or y.type != x.type:
            return y
        return self.emit(self.choice(("add", "maximum")), [x, y], {}, x.bound + y.bound)

    def reduce_any(self, x):
        return self.reduce(x, self.choice(REDUCE)) if x.type.shape else None

    def pool(self, x, op):
        if len(x.type.shape) != 4 or x.dtype == "bool":   # bool: the rule accepts it, the reference fails
            return None
        kernel = (int(self.choice((1, 2, 3))), int(self.choice((2, 3))))
        pads = tuple(int(self.rng.integers(0, k)) if self.chance(0.4) else 0 for k in kernel + kernel)
        attrs = {"kernel_size": kernel, "strides": (int(self.choice((1, 2))), int(self.choice((1, 2)))),
                 "padding": pads, "ceil_mode": self.chance(0.3)}
        if op == "avg_pool2d":
            attrs["count_include_pad"] = self.chance(0.5)
        return self.emit(op, [x], attrs, x.bound)

    # ------------------------------------------------------------ the graph
    def step(self) -> bool:
        x = self.operand()
        family = self.choice(_WEIGHTED)
        if len(x.type.shape) == 4 and self.chance(0.25):
            family = self.choice(("conv2d", "conv2d", "max_pool2d", "avg_pool2d"))
        if not x.type.shape and family in _NEED_RANK:
            return False
        if family in REDUCE:
            return self.reduce(x, family) is not None
        if family in ("max_pool2d", "avg_pool2d"):
            return self.pool(x, family) is not None
        return getattr(self, family)(x) is not None

    def first_input(self) -> None:
        dtype = self.choice(self.dtypes)
        image = self.chance(0.2)
        while True:
            if image:
                dims = [self.dim(), int(self.choice((1, 2, 3))), self.dim(lower=3), self.dim(lower=3)]
            else:
                dims = [self.dim() for _ in range(int(self.rng.integers(1, 5)))]
            most = 1
            for d in dims:
                most *= d.upper if isinstance(d, SizeVar) else d
            if most <= MAX_ELEMENTS // 4:
                break
        self.add_input(dims, dtype)
        self.graph.size_vars = {d.name: (d.lower, d.upper) for d in dims if isinstance(d, SizeVar)}
        self.svars = {d.name: d for d in dims if isinstance(d, SizeVar)}

    def generate(self) -> Graph:
        self.first_input()
        want = int(self.rng.integers(2, self.max_steps + 1))
        for _ in range(want * 4):
            if len(self.graph.steps) >= want:
                break
            self.step()
        if not self.graph.steps:
            x = self.values[0]
            self.emit("reshape", [x], {"shape": tuple((a,) for a in range(len(x.type.shape)))}, x.bound)
        self.graph.outputs = [self.graph.steps[-1].name]
        used = {a for s in self.graph.steps for a in s.args}
        spare = [s.name for s in self.graph.steps[:-1] if s.name not in used or self.chance(0.15)]
        for name in spare[:int(self.rng.integers(0, 3))]:
            self.graph.outputs.insert(0, name)
        if self.chance(0.05):     # an input returned as it is, a value returned twice
            self.graph.outputs.append(self.graph.inputs[0][0])
        if self.chance(0.05):
            self.graph.outputs.append(self.graph.outputs[0])
        self.graph.dataflow = self.chance(0.85)
        self.prune_inputs()
        return self.graph

    def prune_inputs(self) -> None:
        """Drop inputs and constants no step uses (a failed step may leave them)."""
        used = {a for s in self.graph.steps for a in s.args}
        self.graph.inputs = [i for i in self.graph.inputs if i[0] in used or i is self.graph.inputs[0]]
        self.graph.constants = {n: a for n, a in self.graph.constants.items() if n in used}
        dims = {d for _, ds, _ in self.graph.inputs for d in ds if isinstance(d, str)}
        self.graph.size_vars = {n: b for n, b in self.graph.size_vars.items() if n in dims}


_WEIGHTS = {"binary": 6, "divide": 1, "compare": 2, "logical": 2, "where": 1, "unary": 5, "cast": 2, "concat": 2,
            "strided_slice": 2, "transpose": 2, "reshape": 2, "take": 1, "broadcast_to": 1, "tile": 1, "pad": 1,
            "trilu": 1, "sum": 1, "mean": 1, "max": 1, "min": 1,
            "softmax": 1, "matmul": 2, "conv2d": 2, "max_pool2d": 1, "avg_pool2d": 1, "dense": 1, "duplicate": 1,
            "folded": 1}
_NEED_RANK = {"dense", "folded", "take", "broadcast_to", "tile", "pad", "trilu", "concat", "strided_slice",
              "transpose", "sum", "mean", "max", "min", "softmax", "matmul", "conv2d", "max_pool2d", "avg_pool2d"}
_WEIGHTED = tuple(itertools.chain.from_iterable([f] * w for f, w in _WEIGHTS.items()))


def generate_graph(rng: np.random.Generator, dtypes=None, max_steps: int = 12) -> Graph:
    """One random graph; `dtypes` defaults to DTYPES as it is now."""
    return _Generator(rng, dtypes, max_steps).generate()


def pick_sizes(graph: Graph, rng: np.random.Generator, count: int = 3) -> list:
    """Size assignments: every variable at its lower bound, at its upper
    bound, then odd values within the bounds (or random ones)."""
    names = list(graph.size_vars)
    if not names:
        return [{}]
    out = [{n: graph.size_vars[n][0] for n in names}, {n: graph.size_vars[n][1] for n in names}]
    while len(out) < count:
        sizes = {}
        for n in names:
            lo, hi = graph.size_vars[n]
            odd = [v for v in range(lo, hi + 1) if v % 2]
            sizes[n] = int(rng.choice(odd)) if odd and rng.random() < 0.7 else int(rng.integers(lo, hi + 1))
        out.append(sizes)
    return out[:count]
