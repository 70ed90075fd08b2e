"""Random graphs as data: what the compiler fuzzer generates, builds, runs,
reduces and writes back as Builder code.

1. A `Graph` lists its size variables (bounds), inputs (dims are ints or
   size-variable names), constants (numpy arrays), steps (one operator call
   each, over earlier values by name) and outputs. It is plain data, so the
   reducer can drop parts of it and rebuild.
2. `build_module(graph)` turns it into an `IRModule` with the `Builder`;
   every call goes through `make_call`, so a graph that no longer types
   (after a reduction) raises `TypeInferenceError` there.
3. A reshape's (and broadcast_to's) target is written in the source's axes: each entry is a
   tuple of source axes (their product) or an int, so it survives a size
   variable becoming a constant.
4. `to_snippet(graph, ...)` is the same graph as standalone Python: the
   Builder code, the inputs and the comparison that failed.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from ..ir import Builder, Constant, SizeVar, TensorType, Tuple, Var
from ..ir.types import DTYPES
from ..op import make_call

__all__ = ["Graph", "Step", "build_module", "reshape_target", "to_snippet", "input_shape", "input_arrays",
           "numpy_dtypes"]


@dataclasses.dataclass
class Step:
    name: str
    op: str
    args: list
    attrs: dict


@dataclasses.dataclass
class Graph:
    size_vars: dict                 # name -> (lower, upper)
    inputs: list                    # (name, dims, dtype); a dim is an int or a size-variable name
    constants: dict                 # name -> ndarray
    steps: list                     # Step
    outputs: list                   # value names
    dataflow: bool = True

    def copy(self) -> "Graph":
        return Graph(dict(self.size_vars), [(n, list(d), t) for n, d, t in self.inputs], dict(self.constants),
                     [Step(s.name, s.op, list(s.args), dict(s.attrs)) for s in self.steps], list(self.outputs),
                     self.dataflow)

    def ops(self) -> list:
        return [s.op for s in self.steps]


SHAPED = ("reshape", "broadcast_to")   # operators whose "shape" attribute is kept as a reshape_target spec


def reshape_target(spec, shape) -> list:
    """A reshape's new shape from its axis-wise spec and the source's shape."""
    out = []
    for item in spec:
        if isinstance(item, tuple):
            d = 1
            for a in item:
                d = shape[a] * d
            out.append(d)
        else:
            out.append(item)
    return out


def _call(step: Step, args):
    attrs = dict(step.attrs)
    if step.op in SHAPED:
        attrs["shape"] = reshape_target(attrs["shape"], args[0].type.shape)
    return make_call(step.op, args, attrs)


def build_module(graph: Graph, verify: bool = True):
    """The graph as an IRModule (function main) and the type of every value."""
    svars = {n: SizeVar(n, upper=hi, lower=lo) for n, (lo, hi) in graph.size_vars.items()}
    params = [Var(n, TensorType([svars[d] if isinstance(d, str) else d for d in dims], dt))
              for n, dims, dt in graph.inputs]
    values = {p.name: p for p in params}
    values.update({n: Constant(a) for n, a in graph.constants.items()})
    bb = Builder()
    with bb.function("main", params):
        if graph.dataflow:
            with bb.dataflow():
                for step in graph.steps:
                    call = _call(step, [values[a] for a in step.args])
                    emit = bb.emit_output if step.name in graph.outputs else bb.emit
                    values[step.name] = emit(call, step.name)
        else:
            for step in graph.steps:
                values[step.name] = bb.emit(_call(step, [values[a] for a in step.args]), step.name)
        outs = [values[o] for o in graph.outputs]
        bb.ret(outs[0] if len(outs) == 1 else Tuple(outs))
    types = {n: v.type for n, v in values.items()}
    return bb.get(verify=verify), types


def numpy_dtypes(dtypes=None) -> list:
    """The dtypes (default: DTYPES as it is now) that numpy has, so that the
    fuzzer can make their data (bfloat16, for one, it has not; once ml_dtypes is
    imported numpy names it, as a type that is none of numpy's bool, int or float kinds)."""
    out = []
    for d in dtypes or DTYPES:
        try:
            kind = np.dtype(d).kind
        except TypeError:
            continue
        if kind in "biuf":
            out.append(d)
    return out


def input_shape(dims, sizes) -> tuple:
    return tuple(sizes[d] if isinstance(d, str) else d for d in dims)


def input_arrays(graph: Graph, sizes: dict, seed: int) -> list:
    """Seeded inputs: floats normal, signed ints in [-4, 4], unsigned in [0, 4], bools fair."""
    rng = np.random.default_rng(seed)
    out = []
    for _, dims, dtype in graph.inputs:
        shape = input_shape(dims, sizes)
        kind = np.dtype(dtype).kind
        if kind == "f":
            out.append(rng.standard_normal(shape).astype(dtype))
        elif kind == "b":
            out.append(rng.random(shape) < 0.5)
        else:
            out.append(rng.integers(0 if kind == "u" else -4, 5, shape).astype(dtype))
    return out


def _literal(value) -> str:
    if isinstance(value, tuple) and any(isinstance(v, tuple) for v in value):
        return "(" + ", ".join(_literal(v) for v in value) + ("," if len(value) == 1 else "") + ")"
    return repr(value)


def _array_code(a: np.ndarray) -> str:
    dtype = "bool" if a.dtype == np.bool_ else a.dtype.name
    return f"np.array({a.tolist()!r}, dtype={dtype!r})"


def _step_code(step: Step) -> str:
    args = ", ".join(step.args)
    attrs = dict(step.attrs)
    if step.op in SHAPED:
        src = step.args[0]
        dims = []
        for item in attrs.pop("shape"):
            if isinstance(item, tuple):
                dims.append(" * ".join(f"{src}.type.shape[{a}]" for a in item) if item else "1")
            else:
                dims.append(repr(item))
        attrs_code = "{" + ", ".join([f"'shape': [{', '.join(dims)}]"] + [f"{k!r}: {_literal(v)}"
                                                                          for k, v in attrs.items()]) + "}"
    else:
        attrs_code = "{" + ", ".join(f"{k!r}: {_literal(v)}" for k, v in attrs.items()) + "}"
    return f"make_call({step.op!r}, [{args}], {attrs_code})"


def to_snippet(graph: Graph, sizes: dict, seed: int, note: str, board: str = "host", backend: str = "c") -> str:
    """Standalone Python that builds the graph, runs it interpreted and
    compiled on `board` with `backend`, and prints both."""
    lines = [f'"""{note}"""', "", "import numpy as np", "", "import relax_edge as rxe",
             "from relax_edge.ir import Builder, Constant, SizeVar, TensorType, Tuple, Var",
             "from relax_edge.op import make_call", ""]
    for n, (lo, hi) in graph.size_vars.items():
        lines.append(f"{n} = SizeVar({n!r}, upper={hi}, lower={lo})")
    for n, dims, dt in graph.inputs:
        shape = ", ".join(str(d) for d in dims) + ("," if len(dims) == 1 else "")
        lines.append(f"{n} = Var({n!r}, TensorType(({shape}), {dt!r}))")
    for n, a in graph.constants.items():
        lines.append(f"{n} = Constant({_array_code(a)})")
    lines += ["", "bb = Builder()", f"with bb.function('main', [{', '.join(n for n, _, _ in graph.inputs)}]):"]
    indent = "        " if graph.dataflow else "    "
    if graph.dataflow:
        lines.append("    with bb.dataflow():")
    for step in graph.steps:
        emit = "emit_output" if graph.dataflow and step.name in graph.outputs else "emit"
        lines.append(f"{indent}{step.name} = bb.{emit}({_step_code(step)}, {step.name!r})")
    ret = graph.outputs[0] if len(graph.outputs) == 1 else f"Tuple([{', '.join(graph.outputs)}])"
    lines += [f"    bb.ret({ret})", "mod = bb.get()", "",
              f"sizes = {sizes!r}", f"rng = np.random.default_rng({seed})  # as relax_edge.testing.graphs.input_arrays",
              "inputs = []"]
    for n, dims, dt in graph.inputs:
        shape = "(" + ", ".join(f"sizes[{d!r}]" if isinstance(d, str) else str(d) for d in dims) \
            + ("," if len(dims) == 1 else "") + ")"
        kind = np.dtype(dt).kind
        if kind == "f":
            make = f"rng.standard_normal({shape}).astype({dt!r})"
        elif kind == "b":
            make = f"rng.random({shape}) < 0.5"
        else:
            make = f"rng.integers({0 if kind == 'u' else -4}, 5, {shape}).astype({dt!r})"
        lines.append(f"inputs.append({make})  # {n}")
    lines += ["expected = rxe.interpret(mod, *inputs)",
              f"art = rxe.build(mod, board={board!r}, backend={backend!r}, name='fuzz')",
              f"with rxe.connect({board!r}) as dev:",
              "    actual = dev.load(art).run(*inputs)",
              "print('interpreted:', expected)", "print('compiled:', actual)", ""]
    return "\n".join(lines)
