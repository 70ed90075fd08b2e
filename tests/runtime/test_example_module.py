"""The hand-written example module (runtime_c/fuzz/fuzz_module.c): strict
ISO C99, linked with the runtime into the runner and into a driver it
computes what its header says, and it calls only runtime functions that the
compiler's generated C calls too."""

import re
import shutil
import subprocess

import numpy as np
import pytest

import relax_edge as rxe
from relax_edge import op
from relax_edge.deploy import tensorfile
from relax_edge.ir import Builder, SizeVar, TensorType, Tuple, Var
from relax_edge.resources import runtime_dir

RT = runtime_dir()
EXAMPLE = RT / "fuzz" / "fuzz_module.c"
STRICT = ["-std=c99", "-Wall", "-Wextra", "-Werror", "-pedantic"]
CC = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
pytestmark = pytest.mark.skipif(CC is None, reason="needs a C compiler")

# runs `count` three times on x = (0.5, 1.5, 2.5) through the module table, printing each y
DRIVER = r"""
#include <stdio.h>
#include "relax_edge/runtime.h"
#include "fuzz_module.h"

int main(void) {
  float x[3] = {0.5f, 1.5f, 2.5f}, y[3];
  int64_t x_shape[1] = {3}, y_shape[1];
  uint64_t ws_bytes;
  rxe_tensor_t in = {x, 1, 0, 1, {RXE_DTYPE_FLOAT, 32, 1}, x_shape, NULL, 0};
  rxe_tensor_t out = {y, 1, 0, 1, {RXE_DTYPE_FLOAT, 32, 1}, y_shape, NULL, 0};
  rxe_error_t err;
  const rxe_function_t* fn;
  int run, i;
  if (rxe_module_check(&rxe_fuzz_module, &err) != RXE_OK) return 1;
  fn = rxe_module_find(&rxe_fuzz_module, "count");
  if (fn == NULL || fn->plan(&in, y_shape, &ws_bytes, &err) != RXE_OK) return 2;
  for (run = 0; run < 3; ++run) {
    if (fn->run(&in, &out, NULL, 0, &err) != RXE_OK) return 3;
    for (i = 0; i < 3; ++i) printf("%g ", (double)y[i]);
    printf("\n");
  }
  return 0;
}
"""


def runtime_sources():
    """The runtime core and the thread pool (runtime_c/src, see sources.cmake)."""
    return sorted((RT / "src").glob("*.c"))


def compile_run(cmd):
    proc = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc


@pytest.fixture(scope="module")
def runner(tmp_path_factory):
    out = tmp_path_factory.mktemp("example") / "runner"
    compile_run([CC, *STRICT, f"-I{RT / 'include'}", "-DRXE_MODULE=rxe_fuzz_module", EXAMPLE, RT / "tools" / "runner.c",
                 *runtime_sources(), "-o", out, "-lm", "-lpthread"])
    return out


@pytest.mark.parametrize("profile", [[], ["-DRXE_PROFILE"]], ids=["plain", "profiled"])
def test_the_example_compiles_as_strict_c99(profile, tmp_path):
    compile_run([CC, *STRICT, *profile, f"-I{RT / 'include'}", "-c", EXAMPLE, "-o", tmp_path / "example.o"])


def run_runner(runner, tmp_path, function, x):
    (tmp_path / "x.rxt").write_bytes(tensorfile.encode([x]))
    return subprocess.run([str(runner), "-f", function, str(tmp_path / "x.rxt"), str(tmp_path / "y.rxt")],
                          capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("function, runs", [("main", 0), ("count", 1)])
def test_the_runner_computes_the_example(runner, tmp_path, function, runs):
    """main: y = x; count in a fresh process: y = x + 1 (its first run)."""
    x = np.random.default_rng(3).standard_normal(37).astype(np.float32)
    proc = run_runner(runner, tmp_path, function, x)
    assert proc.returncode == 0 and "RXE_OK" in proc.stdout, proc.stderr
    (y,) = tensorfile.decode((tmp_path / "y.rxt").read_bytes())
    np.testing.assert_array_equal(y, x + np.float32(runs))


def test_main_fails_on_the_data_dependent_index(runner, tmp_path):
    proc = run_runner(runner, tmp_path, "main", np.array([-1, 2, 3], np.float32))
    assert proc.returncode == 3
    assert "RXE_ERROR RXE_ERR_INDEX: copy: x[0] = -1 is not a valid index" in proc.stderr


def test_main_refuses_a_size_outside_its_bounds(runner, tmp_path):
    proc = run_runner(runner, tmp_path, "main", np.zeros(4097, np.float32))
    assert proc.returncode == 3
    assert "RXE_ERR_BOUND" in proc.stderr and "n = 4097" in proc.stderr


def test_count_adds_its_run_count(tmp_path):
    (tmp_path / "driver.c").write_text(DRIVER)
    compile_run([CC, *STRICT, f"-I{RT / 'include'}", f"-I{RT / 'fuzz'}", tmp_path / "driver.c", EXAMPLE,
                 *runtime_sources(), "-o", tmp_path / "driver", "-lm", "-lpthread"])
    printed = compile_run([tmp_path / "driver"]).stdout.split("\n")[:3]
    x = np.array([0.5, 1.5, 2.5], np.float32)
    for runs, line in enumerate(printed, start=1):
        np.testing.assert_array_equal(np.array(line.split(), np.float32), x + runs)


def runtime_calls(c_source: str) -> set:
    """The rxe_* functions that C text calls, comments left out."""
    code = re.sub(r"/\*.*?\*/", "", c_source, flags=re.S)
    return set(re.findall(r"\b(rxe_[a-z0-9_]+)\(", code))


def dense_tanh():
    """tanh(x @ w) over a symbolic batch: bind, checks, a library kernel, a parallel loop, the profiler."""
    n = SizeVar("n")
    x = Var("x", TensorType((n, 4), "float32"))
    bb = Builder()
    with bb.function("main", [x]):
        with bb.dataflow():
            out = bb.emit_output(op.tanh(op.matmul(x, np.ones((4, 3), np.float32))))
        bb.ret(out)
    return bb.get()


def one_value_twice():
    """relu(x), returned twice: the second output is copied (rxe_mem_copy)."""
    n = SizeVar("n")
    x = Var("x", TensorType((n, 4), "float32"))
    bb = Builder()
    with bb.function("main", [x]):
        with bb.dataflow():
            r = bb.emit(op.relu(x))
            out = bb.emit_output(Tuple([r, r]))
        bb.ret(out)
    return bb.get()


def test_the_example_calls_what_generated_code_calls(tmp_path):
    emitted = set()
    for name, make in (("dense_tanh", dense_tanh), ("twice", one_value_twice)):
        rxe.build(make(), board="host", out_dir=tmp_path / name, name=name, profile=False)
        emitted |= runtime_calls((tmp_path / name / f"{name}.c").read_text())
    used = runtime_calls(EXAMPLE.read_text())
    assert {"rxe_tensor_check", "rxe_dim_bind", "rxe_dim_check", "rxe_error_set"} <= used
    assert used <= emitted, f"the example calls what generated code does not: {sorted(used - emitted)}"
