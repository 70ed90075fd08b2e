"""The differential check of the compiler and the reducer of its failures.

1. `check_graph` builds a `Graph` (testing/graphs.py), interprets the
   unoptimized module at each size assignment (the reference), compiles it
   once per backend with `rxe.build` for a board (the whole pipeline: fold,
   dispatch, legalize, fuse, schedule, codegen, toolchain), runs the build
   at the same sizes and compares: integers and bools exactly, floats
   within `TOLERANCE` of the dtype (relative to the largest magnitude of
   the expected value), NaN where NaN is expected.
2. A `Failure` is a build failure (the exception from `rxe.build` or
   `load`), a run failure (the compiled model raised where the interpreter
   did not, or, on the host where builds run in a spawned child, killed
   it) or a mismatch; an interpreter failure is the generator's fault
   and is reported as such, not as the compiler's.
3. `reduce_graph` is delta debugging over the graph's data: it drops
   outputs, replaces a step by one of its operands of the same type,
   makes a size variable a constant, and leaves the dataflow block, for as
   long as the same kind of failure persists on the same backend.
"""

from __future__ import annotations

import dataclasses
import multiprocessing
import re
import shutil
import signal
import tempfile
import traceback
from pathlib import Path

import numpy as np

from ..build import build
from ..deploy import connect
from ..errors import InterpretError, RelaxEdgeError
from ..interp import interpret
from ..ir.types import DTYPES
from .graphs import Graph, Step, build_module, input_arrays, numpy_dtypes

__all__ = ["Failure", "check_graph", "compare", "failure_persists", "graph_tolerance", "locate", "reduce_graph",
           "supported_dtypes", "TOLERANCE"]

TOLERANCE = {"float16": 2e-2, "float32": 1e-4, "float64": 1e-9}


@dataclasses.dataclass
class Failure:
    kind: str            # build | run | mismatch | interp
    backend: str
    message: str
    sizes: dict
    error: str = ""      # the exception's class for build and run failures
    clear: bool = False  # raised on purpose (a RelaxEdgeError), not a crash

    @property
    def signature(self) -> str:
        """The failure without its numbers and names, to group repeats."""
        return self.kind + ":" + self.error + ":" + re.sub(r"[0-9]+|'[^']*'|\b[a-z]+_[a-z_]+\b", "#",
                                                             self.message)[:120]

    def same_as(self, other: "Failure") -> bool:
        return self.kind == other.kind and self.backend == other.backend and self.error == other.error


def compare(actual, expected, tol: float = 0.0) -> str | None:
    """Why `actual` differs from `expected` (tuples field by field), or None;
    floats within the larger of `tol` and their dtype's tolerance."""
    if isinstance(expected, tuple):
        if not isinstance(actual, (tuple, list)) or len(actual) != len(expected):
            return f"expected {len(expected)} outputs, got {len(actual)}"
        for i, (a, e) in enumerate(zip(actual, expected)):
            why = compare(a, e, tol)
            if why:
                return f"output {i}: {why}"
        return None
    actual, expected = np.asarray(actual), np.asarray(expected)
    if actual.shape != expected.shape or actual.dtype != expected.dtype:
        return f"got {actual.dtype}{list(actual.shape)}, expected {expected.dtype}{list(expected.shape)}"
    if expected.dtype.kind != "f":
        bad = actual != expected
    else:
        tol = max(tol, TOLERANCE.get(expected.dtype.name, 1e-4))
        a, e = actual.astype(np.float64), expected.astype(np.float64)
        finite = np.isfinite(e)
        scale = max(1.0, float(np.max(np.abs(e[finite]))) if finite.any() else 1.0)
        with np.errstate(invalid="ignore"):
            close = np.abs(a - e) <= tol * (np.abs(e) + scale)
        bad = ~(np.where(finite, close, (a == e) | (np.isnan(a) & np.isnan(e))))
    if not bad.any():
        return None
    where = tuple(int(i) for i in np.argwhere(bad)[0])
    return (f"{int(bad.sum())} of {bad.size} elements differ; at {list(where)}: got {actual[where]!r}, "
            f"expected {expected[where]!r}")


def _short(err: BaseException) -> str:
    text = f"{type(err).__name__}: {err}".strip()
    if not isinstance(err, RelaxEdgeError):
        frames = traceback.extract_tb(err.__traceback__)
        if frames:
            f = frames[-1]
            text += f" [{Path(f.filename).name}:{f.lineno} {f.name}]"
    return text[:600]


def graph_tolerance(types: dict) -> float:
    """The tolerance of the least precise float dtype a graph computes in
    (a float32 softmax cast to float64 is only float32-accurate)."""
    return max([TOLERANCE.get(t.dtype, 1e-4) for t in types.values()
                if getattr(t, "dtype", "").startswith("float")], default=0.0)


def _run_one(graph: Graph, mod, dev, board: str, backend: str, sizes_list, seed: int, work: Path,
             expected: list, tol: float) -> Failure | None:
    try:
        art = build(mod, board=board, backend=backend, out_dir=work, name="fuzz")
        loaded = dev.load(art)
    except Exception as err:  # noqa: BLE001  (every build failure is a finding)
        return Failure("build", backend, _short(err), sizes_list[0], type(err).__name__,
                       isinstance(err, RelaxEdgeError))
    try:
        for sizes, want in zip(sizes_list, expected):
            if want is None:
                continue
            try:
                got = loaded.run(*input_arrays(graph, sizes, seed))
            except Exception as err:  # noqa: BLE001
                return Failure("run", backend, _short(err), sizes, type(err).__name__,
                               isinstance(err, RelaxEdgeError))
            got = got[0] if len(got) == 1 and not isinstance(want, tuple) else tuple(got)
            why = compare(got, want, tol)
            if why:
                return Failure("mismatch", backend, why, sizes)
    finally:
        close = getattr(loaded, "close", None)
        if close is not None:
            close()
    return None


def _child(conn, fn, args) -> None:
    graph = args[0]
    mod = None if graph is None else build_module(graph)[0]  # rebuilt: the graph is plain data
    with connect("host") as dev:
        conn.send(fn(graph, mod, dev, *args[1:]))
    conn.close()


def _isolated(fn, args, backend: str, sizes: dict) -> Failure | None:
    """fn(graph, mod, dev, ...) in a child process with its own host device,
    so that a compiled model that kills its process (SIGFPE, SIGSEGV) is a
    finding rather than the end of the fuzzer. The child is spawned, not
    forked: a fork of a process whose other threads hold locks (ONNX Runtime's
    or torch's pools, in a test process) can deadlock."""
    ctx = multiprocessing.get_context("spawn")
    receive, send = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_child, args=(send, fn, args))
    proc.start()
    send.close()
    try:
        result = receive.recv()
    except EOFError:
        proc.join()
        code = proc.exitcode or 0
        why = signal.Signals(-code).name if code < 0 else f"exit status {code}"
        return Failure("run", backend, f"the process running the build died: {why}", sizes, why)
    proc.join()
    return result


def reference(graph: Graph, mod, sizes_list, seed: int) -> list:
    """The unoptimized module interpreted at each size (None where it fails)."""
    out = []
    for sizes in sizes_list:
        try:
            out.append(interpret(mod, *input_arrays(graph, sizes, seed)))
        except (InterpretError, FloatingPointError, ValueError):
            out.append(None)
    return out


def check_graph(graph: Graph, dev, board: str, backends, sizes_list, seed: int, work_dir=None) -> list:
    """Failures of `graph` on `board` with each backend (empty when all agree)."""
    mod, types = build_module(graph)
    expected = reference(graph, mod, sizes_list, seed)
    if all(e is None for e in expected):
        return [Failure("interp", "-", "the interpreter failed at every size", sizes_list[0])]
    root = Path(tempfile.mkdtemp(prefix="rxe-fuzz-", dir=work_dir))
    try:
        failures = []
        for backend in backends:
            args = (graph, mod, dev, board, backend, sizes_list, seed, root / backend, expected, graph_tolerance(types))
            if board == "host":   # the build runs in this process: in a child instead
                failure = _isolated(_run_one, args[:1] + args[3:], backend, sizes_list[0])
            else:
                failure = _run_one(*args)
            if failure is not None:
                failures.append(failure)
        return failures
    finally:
        shutil.rmtree(root, ignore_errors=True)


def failure_persists(failure: Failure, dev, board: str, seed: int, work_dir=None):
    """The reducer's test: does a graph still fail as `failure` did (same
    kind, backend and exception class, at the same sizes and seed)?"""
    def test(graph: Graph) -> bool:
        try:
            build_module(graph)
        except RelaxEdgeError:
            return False
        sizes = {n: v for n, v in failure.sizes.items() if n in graph.size_vars}
        found = check_graph(graph, dev, board, [failure.backend], [sizes], seed, work_dir)
        return any(f.same_as(failure) for f in found)
    return test


def _dce(graph: Graph) -> Graph:
    live = set(graph.outputs)
    steps = []
    for step in reversed(graph.steps):
        if step.name in live:
            steps.append(step)
            live.update(step.args)
    graph.steps = steps[::-1]
    graph.inputs = [i for i in graph.inputs if i[0] in live] or graph.inputs[:1]
    graph.constants = {n: a for n, a in graph.constants.items() if n in live}
    dims = {d for _, ds, _ in graph.inputs for d in ds if isinstance(d, str)}
    graph.size_vars = {n: b for n, b in graph.size_vars.items() if n in dims}
    return graph


def _candidates(graph: Graph, sizes: dict):
    """Smaller graphs, the biggest cuts first."""
    if len(graph.outputs) > 1:
        for i in range(len(graph.outputs)):
            g = graph.copy()
            del g.outputs[i]
            yield _dce(g)
    try:
        _, types = build_module(graph)
    except RelaxEdgeError:
        return
    for step in reversed(graph.steps):
        for arg in dict.fromkeys(step.args):
            if types.get(arg) != types[step.name] or (arg in graph.outputs and step.name in graph.outputs):
                continue
            g = graph.copy()
            g.steps = [s for s in g.steps if s.name != step.name]
            for s in g.steps:
                s.args = [arg if a == step.name else a for a in s.args]
            g.outputs = [arg if o == step.name else o for o in g.outputs]
            if arg in g.outputs and arg not in {s.name for s in g.steps}:
                continue   # an output must be a step's value
            yield _dce(g)
    for name in graph.size_vars:
        g = graph.copy()
        value = sizes.get(name, graph.size_vars[name][0])
        g.inputs = [(n, [value if d == name else d for d in dims], dt) for n, dims, dt in g.inputs]
        del g.size_vars[name]
        yield g
    if graph.dataflow:
        g = graph.copy()
        g.dataflow = False
        yield g


def reduce_graph(graph: Graph, still_fails, sizes: dict | None = None, max_checks: int = 200) -> Graph:
    """A smaller graph for which `still_fails(graph)` holds (greedy delta
    debugging, at most `max_checks` tests); `sizes` are the failing sizes,
    the values a size variable made constant takes."""
    checks = 0
    progress = True
    while progress and checks < max_checks:
        progress = False
        for candidate in _candidates(graph, sizes or {}):
            checks += 1
            if still_fails(candidate):
                graph, progress = candidate, True
                break
            if checks >= max_checks:
                break
    return graph


def locate(graph: Graph, failure: Failure, board: str, seed: int) -> str:
    """Where a mismatch arises: the optimized module (before code
    generation) run by the interpreters, against the unoptimized one."""
    from ..pipeline import optimize
    mod, types = build_module(graph)
    inputs = input_arrays(graph, {n: v for n, v in failure.sizes.items() if n in graph.size_vars}, seed)
    try:
        optimized = interpret(optimize(mod, board, verify=True), *inputs)
    except Exception as err:  # noqa: BLE001
        return f"the optimized module does not interpret: {_short(err)}"
    why = compare(optimized, interpret(mod, *inputs), graph_tolerance(types))
    if why:
        return f"the optimized module, interpreted, already differs (a pass is wrong): {why}"
    return "the optimized module, interpreted, agrees (code generation or the runtime is wrong)"


def supported_dtypes(dev, board: str, backends, dtypes=None) -> tuple:
    """(dtypes a one-operator graph of builds and runs right with every
    backend, {dtype: why} for the others)."""
    ok, refused = [], {}
    known = numpy_dtypes(dtypes)
    for dtype in dtypes or DTYPES:
        if dtype not in known:
            refused[dtype] = "numpy has no such dtype: the fuzzer cannot make its data"
            continue
        graph = Graph({}, [("x0", [3], dtype)], {}, [Step("v0", "maximum", ["x0", "x0"], {})], ["v0"])
        found = check_graph(graph, dev, board, backends, [{}], 0)
        if found:
            refused[dtype] = f"{found[0].kind} ({found[0].backend}): {found[0].message}"
        else:
            ok.append(dtype)
    return ok, refused
