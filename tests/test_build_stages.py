"""rxe.build as named stages: each stage function called alone, its output
fed to the next, gives the artifact rxe.build gives; the memory plan is a
value that names the in-place kernels without writing into the IR; the
artifact records each stage's wall time in order."""

import json

import numpy as np
import pytest

import relax_edge as rxe
from relax_edge import op
from relax_edge.build import Artifact, emit, kernel_prefix, optimize_module
from relax_edge.codegen.host_program import lower_host
from relax_edge.ir import Builder, SizeVar, TensorType, Var
from relax_edge.memory import plan_module
from relax_edge.target import load_board
from relax_edge.toolchain import Packager, Products, Toolchain

STAGES = ["optimize", "plan_memory", "lower_host", "emit", "toolchain"]


def chain():
    """exp, then tanh over exp's dying result (in place), then doubled into the output."""
    n = SizeVar("n", upper=64)
    x = Var("x", TensorType((n, 8), "float32"))
    bb = Builder()
    with bb.function("main", [x]):
        with bb.dataflow():
            e = bb.emit(op.exp(x))
            t = bb.emit(op.tanh(e))
            out = bb.emit_output(op.multiply(t, np.full((8,), 2.0, np.float32)))
        bb.ret(out)
    return bb.get()


def expected(x):
    return 2 * np.tanh(np.exp(x))


@pytest.fixture(scope="module")
def x():
    return np.random.default_rng(0).standard_normal((5, 8)).astype(np.float32)


def test_memory_plan_names_the_in_place_kernels_and_leaves_the_ir_alone():
    mod = optimize_module(chain(), load_board("host"), optimize=False)
    plans = plan_module(mod)
    steps = plans["main"].liveness.steps
    inplace = [s for s in steps if s.inplace_over is not None]
    assert [mod.tensor_programs[s.call.program.name].attrs["op"] for s in inplace] == ["tanh"]
    assert plans.inplace == {inplace[0].call.program.name}
    assert all("inplace" not in program.attrs for program in mod.tensor_programs.values())
    host = lower_host(mod, plans, "m")
    assert host.inplace == {f"k_{inplace[0].call.program.name}"}
    assert all("inplace" not in program.attrs for program in mod.tensor_programs.values())


@pytest.mark.parametrize("backend", ["c", "llvm"])
def test_stages_called_one_by_one_build_a_working_artifact(backend, x, tmp_path):
    board = load_board("host")
    mod = optimize_module(chain(), board, optimize=True)
    plans = plan_module(mod)
    host = lower_host(mod, plans, "chain", kernel_prefix(backend, "chain"))
    sources = emit(host, backend, board)
    tc = Toolchain.for_board(board)
    products = Products.of(tmp_path, host.prefix, tc, board)
    sizes = Packager(tc, board, tmp_path, products).package(sources, backend)
    assert products.exist() and sizes["model"]["text"] > 0
    art = Artifact(tmp_path, host.prefix, board.name, backend, products.shared, products.static,
                   tmp_path / "chain.h", host.signature, runner=products.runner, server=products.server)
    (result,) = rxe.connect("host").load(art).run(x)
    np.testing.assert_allclose(result, expected(x), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(result, rxe.interpret(chain(), x), rtol=1e-5, atol=1e-6)


def test_stage_seconds_name_the_stages_in_order(x, tmp_path):
    art = rxe.build(chain(), board="host", out_dir=tmp_path, name="chain", profile=False)
    assert list(art.stage_seconds) == STAGES
    assert all(seconds >= 0 for seconds in art.stage_seconds.values())
    assert list(json.loads((tmp_path / "artifact.json").read_text())["stage_seconds"]) == STAGES
    assert list(Artifact.load(tmp_path).stage_seconds) == STAGES
    again = rxe.build(chain(), board="host", out_dir=tmp_path, name="chain", profile=False)
    assert again.cached and list(again.stage_seconds) == STAGES[:-1]
    (result,) = rxe.connect("host").load(again).run(x)
    np.testing.assert_allclose(result, expected(x), rtol=1e-5, atol=1e-6)


def test_stages_are_printed_unless_quiet(tmp_path, capfd):
    rxe.build(chain(), board="host", out_dir=tmp_path, name="chain", quiet=False, profile=False)
    lines = [line for line in capfd.readouterr().err.splitlines() if line.startswith("[relax-edge] stage ")]
    assert [line.split()[2].rstrip(":") for line in lines] == STAGES
    assert all(line.endswith("s") and float(line.split()[3][:-1]) >= 0 for line in lines)


def test_runtime_objects_compile_once_for_concurrent_builds(tmp_path, monkeypatch):
    """Two processes' worth of builds (threads with their own lock handles) asking for one flag set at once: each
    source is compiled once, the second waits for the first and reuses its objects, which both get."""
    import concurrent.futures
    import threading

    from relax_edge import toolchain
    monkeypatch.setenv("RXE_CACHE_DIR", str(tmp_path / "cache"))
    sources = []
    for k in range(3):
        src = tmp_path / f"unit{k}.c"
        src.write_text(f"int rxe_unit{k}(int x) {{ return x + {k}; }}\n")
        sources.append(src)
    compiled, lock, real = [], threading.Lock(), toolchain.run_tool

    def counting(cmd, what):
        with lock:
            compiled.append(what)
        real(cmd, what)

    monkeypatch.setattr(toolchain, "run_tool", counting)
    cc = toolchain.host_compiler()
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        first, second = pool.map(lambda _: toolchain.cached_objects(cc, ["-O1"], sources), range(2))
    assert first == second and all(o.exists() for o in first)
    assert sorted(compiled) == [f"compiling unit{k}.c" for k in range(3)]


def test_a_compiler_crash_on_generated_code_is_compiled_again_without_the_vectorizer(tmp_path):
    """A compiler that crashes (internal compiler error) unless -fno-tree-vectorize is given: the generated file
    is compiled once more with it, with a warning naming the file; an ordinary error is raised as it is."""
    from relax_edge import toolchain
    fake = tmp_path / "cc"
    fake.write_text("#!/bin/sh\ncase \" $* \" in *\" -fno-tree-vectorize \"*) touch \"$OUT\"; exit 0;; esac\n"
                    "case \" $* \" in *\" bad.c \"*) echo 'bad.c:1:1: error: expected identifier' >&2; exit 1;; esac\n"
                    "echo 'm.c:329:14: internal compiler error: in vectorizable_live_operation' >&2; exit 1\n")
    fake.chmod(0o755)
    out = tmp_path / "m.o"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("OUT", str(out))
        with pytest.warns(RuntimeWarning, match="compiling m.c: the C compiler crashed"):
            toolchain.compile_generated([fake, "-O3", "-c", "m.c", "-o", out], "compiling m.c")
        assert out.exists()
        with pytest.raises(toolchain.BuildError, match="expected identifier"):
            toolchain.compile_generated([fake, "-O3", "-c", "bad.c", "-o", out], "compiling bad.c")
