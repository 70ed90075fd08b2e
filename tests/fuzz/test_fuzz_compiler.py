"""The compiler fuzzer (relax_edge/testing, scripts/fuzz_compiler.py): a few
seeded graphs agree between the interpreter and the C build, the generator
covers what it promises, the reducer shrinks, a kept snippet runs."""

import collections
import importlib.util
import json
import os
import signal
from pathlib import Path

import numpy as np
import pytest

import relax_edge as rxe
from relax_edge.ir.types import DTYPES
from relax_edge.testing import differential
from relax_edge.testing.differential import Failure, check_graph, compare, reduce_graph
from relax_edge.testing.generate import FAMILIES, family_of, generate_graph, pick_sizes
from relax_edge.testing.graphs import build_module, input_arrays, numpy_dtypes, to_snippet

# the dtypes every backend compiled before the dtype work of M11; the script probes the rest itself
COMPILED_DTYPES = [d for d in ("float32", "float64", "int8", "uint8", "int32", "int64", "bool") if d in DTYPES]
ELEMENTWISE = {"binary", "unary", "compare", "logical", "cast", "divide", "where"}


def _graph(index: int, dtypes=None):
    rng = np.random.default_rng([7, index])
    graph = generate_graph(rng, dtypes)
    return graph, pick_sizes(graph, rng, 2), int(rng.integers(2 ** 31))


@pytest.mark.parametrize("index", range(5))
def test_generated_graph_agrees_with_the_c_build(index, tmp_path):
    graph, sizes, seed = _graph(index, COMPILED_DTYPES)
    with rxe.connect("host") as dev:
        assert check_graph(graph, dev, "host", ["c"], sizes, seed, tmp_path) == []


def _features(graph) -> set:
    _, types = build_module(graph)
    out = {family_of(s) for s in graph.steps} | {types[s.name].dtype for s in graph.steps}
    out |= {dt for _, _, dt in graph.inputs}
    if graph.size_vars:
        out.add("symbolic")
    if any(isinstance(s.attrs.get("keepdims"), bool) and s.attrs["keepdims"] for s in graph.steps):
        out.add("keepdims")
    for s in graph.steps:
        if family_of(s) in ("binary", "compare") and len({types[a].shape for a in s.args}) > 1:
            out.add("broadcast")
        if family_of(s) in ELEMENTWISE and any(
                p.name in s.args and family_of(p) in ELEMENTWISE for p in graph.steps):
            out.add("elementwise chain")
    return out


def test_generator_covers_every_family_and_dtype():
    seen = collections.Counter()
    for i in range(200):
        seen.update(_features(_graph(i)[0]))
    wanted = set(FAMILIES) | set(numpy_dtypes()) | {"symbolic", "keepdims", "broadcast", "elementwise chain"}
    assert wanted <= set(seen), sorted(wanted - set(seen))


def test_generated_graphs_interpret_at_every_size():
    for i in range(200):
        graph, sizes_list, seed = _graph(i)
        mod, _ = build_module(graph)
        for sizes in sizes_list:
            assert all(lo <= sizes[n] <= hi for n, (lo, hi) in graph.size_vars.items())
            rxe.interpret(mod, *input_arrays(graph, sizes, seed))


def test_compare_by_dtype():
    f32 = np.array([1.0, 2.0], np.float32)
    assert compare(f32 + 1e-6, f32) is None
    assert "1 of 2" in compare(f32 + np.array([0, 1e-2], np.float32), f32)
    assert compare(np.array([1, 2]), np.array([1, 3])) is not None
    assert compare(np.array([np.nan]), np.array([np.nan])) is None
    assert "expected int64" in compare(np.zeros(2, np.int32), np.zeros(2, np.int64))
    assert compare(np.float64(1.0 + 1e-6), np.float64(1.0), tol=1e-4) is None
    assert compare(np.float64(1.0 + 1e-6), np.float64(1.0)) is not None


def test_reducer_keeps_the_failing_operator_and_drops_the_rest():
    graph = next(g for g in (_graph(i)[0] for i in range(100))
                 if "softmax" in g.ops() and len(g.steps) >= 6)
    reduced = reduce_graph(graph, lambda g: "softmax" in g.ops())
    assert "softmax" in reduced.ops() and len(reduced.steps) < len(graph.steps)
    assert len(reduced.outputs) == 1 and not reduced.size_vars
    build_module(reduced)


def test_snippet_rebuilds_the_graph_and_runs_it(tmp_path, monkeypatch):
    graph, sizes, seed = _graph(3, COMPILED_DTYPES)
    code = to_snippet(graph, sizes[-1], seed, "a test")
    monkeypatch.chdir(tmp_path)
    namespace = {}
    exec(compile(code, "snippet.py", "exec"), namespace)  # noqa: S102  (our own generated code)
    expected = rxe.interpret(build_module(graph)[0], *input_arrays(graph, sizes[-1], seed))
    assert compare(namespace["expected"], expected) is None
    actual = namespace["actual"]
    assert compare(actual[0] if len(actual) == 1 else tuple(actual), expected) is None


def test_script_summary(tmp_path):
    spec = importlib.util.spec_from_file_location(
        "fuzz_compiler", Path(__file__).resolve().parents[2] / "scripts" / "fuzz_compiler.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    out = tmp_path / "fuzz.json"
    script.main(["2", "--seed", "3", "--backend", "c", "--dtypes", "float32,int32", "--json", str(out),
                 "--keep", str(tmp_path)])
    report = json.loads(out.read_text())
    summary = report["summary"]
    assert summary["graphs"] == 2 and summary["ops"] > 0 and summary["builds"] == 2
    assert summary["mismatches"] + summary["build_failures"] + summary["run_failures"] == \
        len([f for f in report["failures"] if f["kind"] != "interp"])


@pytest.mark.slow
@pytest.mark.emu
def test_generated_graphs_agree_on_qemu_aarch64(tmp_path):
    with rxe.connect("qemu-aarch64") as dev:
        for index in range(2):
            graph, sizes, seed = _graph(index, COMPILED_DTYPES)
            found = check_graph(graph, dev, "qemu-aarch64", ["c", "llvm"], sizes, seed, tmp_path)
            assert found == [], [f.message for f in found]


def test_failure_signature_groups_repeats():
    a = Failure("build", "c", "KeyError: 'int16' [host_program.py:380 bind_entry]", {}, "KeyError")
    b = Failure("build", "llvm", "KeyError: 'uint64' [host_program.py:380 bind_entry]", {}, "KeyError")
    assert a.signature == b.signature and not a.same_as(b)


def _dies(graph, mod, dev, *rest):
    os.kill(os.getpid(), signal.SIGFPE)


def _agrees(graph, mod, dev, *rest):
    return None


def test_a_build_that_kills_its_process_is_a_run_failure():
    """On the host, builds run in a spawned child: a kernel's SIGFPE is reported, the fuzzer goes on."""
    failure = differential._isolated(_dies, (None, "host", "c"), "c", {"n": 1})
    assert failure.kind == "run" and failure.error == "SIGFPE" and "died: SIGFPE" in failure.message
    assert differential._isolated(_agrees, (None, "host", "c"), "c", {}) is None
