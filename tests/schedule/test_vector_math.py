"""kernel.h's float32 exp / erf / tanh (scalar and vector) against numpy's
float64 functions: dense sweeps and special cases through one C driver run
on the host and under QEMU, the ulp bounds of kernel.h's contract, vector
lanes bitwise equal to the scalar version; then scheduled one-operator
modules (softmax, gelu, tanh, sigmoid) compiled with the C and LLVM backends
against the numpy reference at sizes with and without vector remainders."""

import math
import re
import shutil
import subprocess

import numpy as np
import pytest

import relax_edge as rxe
from relax_edge.codegen.llvm import kernel as llvm_kernel
from relax_edge.op.registry import make_call
from relax_edge.toolchain import RUNTIME_DIR
from relax_edge.transform.legalize import legalize
from relax_edge.transform.schedule import schedule
from tests.legalize.harness import one_op_module

# kernel.h's documented bounds, in ulps of the float32 result
BOUNDS = {"exp": 1.5, "erf": 2.0, "tanh": 2.0}
FUNCTIONS = ("exp", "erf", "tanh")

DRIVER = r"""
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "relax_edge/kernel.h"
typedef float rxe_v4f32 __attribute__((vector_size(16)));
typedef int32_t rxe_v4f32_mask __attribute__((vector_size(16)));
typedef float rxe_v8f32 __attribute__((vector_size(32)));
typedef int32_t rxe_v8f32_mask __attribute__((vector_size(32)));
RXE_VECTOR_MATH_F32(rxe_v4f32)
RXE_VECTOR_MATH_F32(rxe_v8f32)

/* stdin: int64 n, n floats (n a multiple of 8); stdout: per function (exp,
   erf, tanh) the 4-lane, the 8-lane and the scalar results */
#define SWEEP(NAME)                                                   \
  for (i = 0; i < n; i += 4) {                                        \
    rxe_v4f32 v; memcpy(&v, x + i, sizeof v); v = rxe_v4f32_##NAME(v); \
    memcpy(y + i, &v, sizeof v);                                      \
  }                                                                   \
  fwrite(y, sizeof(float), (size_t)n, stdout);                        \
  for (i = 0; i < n; i += 8) {                                        \
    rxe_v8f32 v; memcpy(&v, x + i, sizeof v); v = rxe_v8f32_##NAME(v); \
    memcpy(y + i, &v, sizeof v);                                      \
  }                                                                   \
  fwrite(y, sizeof(float), (size_t)n, stdout);                        \
  for (i = 0; i < n; ++i) y[i] = rxe_f32_##NAME(x[i]);                \
  fwrite(y, sizeof(float), (size_t)n, stdout);

int main(void) {
  int64_t n, i;
  float *x, *y;
  if (fread(&n, sizeof n, 1, stdin) != 1 || n % 8) return 1;
  x = malloc((size_t)n * sizeof(float));
  y = malloc((size_t)n * sizeof(float));
  if (!x || !y || fread(x, sizeof(float), (size_t)n, stdin) != (size_t)n) return 1;
  SWEEP(exp)
  SWEEP(erf)
  SWEEP(tanh)
  return 0;
}
"""

SPECIAL = [np.inf, -np.inf, np.nan, 0.0, -0.0, 1e-45, -1e-45, 1e-40, -1e-40, 1e-30, 88.7228, 88.7229, 89.0, 100.0,
           1e30, -87.3, -100.0, -103.97, -103.98, -104.0, -200.0, -1e30, 0.921875, -0.921875, 0.625, -0.625, 3.925,
           -3.925, 3.9, 9.0, 9.1, -9.1, 20.0, -20.0, 0.5, -0.5, 1.0, -1.0]


def sweep_inputs():
    parts = [np.linspace(-104.0, 89.0, 200_000), np.linspace(-10.0, 10.0, 200_000), np.linspace(-1.0, 1.0, 100_000),
             np.geomspace(1e-38, 1e-2, 20_000), -np.geomspace(1e-38, 1e-2, 20_000), SPECIAL]
    x = np.concatenate(parts).astype(np.float32)
    return np.concatenate([x, np.zeros(-len(x) % 8, np.float32)])


def reference(name, x):
    wide = x.astype(np.float64)
    with np.errstate(over="ignore"):
        if name == "exp":
            return np.exp(wide)
        if name == "tanh":
            return np.tanh(wide)
    return np.frompyfunc(math.erf, 1, 1)(wide).astype(np.float64)


def ulp_error(actual, expected):
    """|actual - expected| in ulps of the float32-rounded expected value (the
    smallest subnormal at least); equal infinities and NaN against NaN are 0."""
    with np.errstate(over="ignore", invalid="ignore"):
        rounded = expected.astype(np.float32)
        spacing = np.maximum(np.spacing(np.abs(rounded)).astype(np.float64), 2.0 ** -149)
        error = np.abs(actual.astype(np.float64) - expected) / spacing
    same = (actual.astype(np.float64) == rounded.astype(np.float64)) | (np.isnan(actual) & np.isnan(expected))
    return np.where(same, 0.0, error)


def check_outputs(x, raw):
    """Every function's 4-lane, 8-lane and scalar results from the driver's output."""
    n = len(x)
    out = np.frombuffer(raw, np.float32).reshape(len(FUNCTIONS), 3, n)
    for name, (four, eight, scalar) in zip(FUNCTIONS, out):
        assert np.array_equal(four.view(np.int32), scalar.view(np.int32)), f"{name}: 4 lanes differ from scalar"
        assert np.array_equal(eight.view(np.int32), scalar.view(np.int32)), f"{name}: 8 lanes differ from scalar"
        expected = reference(name, x)
        if name == "exp":   # results below FLT_MIN flush to zero (kernel.h's contract)
            tiny = expected < 2.0 ** -126
            assert not np.any(scalar[tiny]), f"exp: {x[tiny][scalar[tiny] != 0][:3]} not flushed to 0"
            expected = np.where(tiny, 0.0, expected)
        error = ulp_error(scalar, expected)
        worst = int(np.argmax(error))
        assert error[worst] <= BOUNDS[name], f"{name}({x[worst]!r}) = {scalar[worst]!r}: {error[worst]:.2f} ulp"
        check_special(name, x, scalar)


def check_special(name, x, y):
    def at(v):
        return float(y[np.flatnonzero(x.view(np.int32) == np.float32(v).view(np.int32))[0]])
    assert math.isnan(at(math.nan))
    if name == "exp":
        assert at(math.inf) == math.inf and at(88.7229) == math.inf and at(1e30) == math.inf
        assert at(-math.inf) == 0.0 and at(-104.0) == 0.0 and at(-1e30) == 0.0
        assert at(-100.0) == 0.0 and at(-87.3) >= 2.0 ** -126   # flushed below FLT_MIN, normal above
        return
    for big in (math.inf, 20.0, 3.925 if name == "erf" else 9.1):   # saturated: exactly +-1
        assert at(big) == 1.0 and at(-big) == -1.0, (name, big)
    assert at(-0.0) == 0.0 and math.copysign(1.0, at(-0.0)) == -1.0
    assert at(1e-40) == float(np.float32(1e-40)) if name == "tanh" else at(1e-30) > float(np.float32(1e-30))


def driver_binary(tmp_path, compiler, flags):
    src = tmp_path / "vector_math.c"
    src.write_text(DRIVER)
    exe = tmp_path / "vector_math"
    proc = subprocess.run([compiler, "-std=c99", "-Wall", "-Wextra", "-Werror", *flags, f"-I{RUNTIME_DIR / 'include'}",
                           str(src), "-o", str(exe)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    return exe


def run_driver(command, x):
    proc = subprocess.run([str(c) for c in command], input=np.int64(len(x)).tobytes() + x.tobytes(),
                          capture_output=True, timeout=300)
    assert proc.returncode == 0, proc.stderr.decode()
    return proc.stdout


@pytest.mark.parametrize("compiler", ["gcc", "clang"])
def test_host_functions_within_bounds(compiler, tmp_path):
    flags = ["-O2", "-march=native", "-Wno-psabi"]   # the 8-lane type is emulated on hosts without AVX
    x = sweep_inputs()
    check_outputs(x, run_driver([driver_binary(tmp_path, compiler, flags)], x))


EMULATED = {
    "aarch64": ("aarch64-linux-gnu-gcc", ["-O2", "-mcpu=cortex-a72", "-static"],
                ["qemu-aarch64", "-L", "/usr/aarch64-linux-gnu"]),
    "armv7": ("arm-linux-gnueabihf-gcc", ["-O2", "-march=armv7-a", "-mfpu=neon", "-mfloat-abi=hard", "-static"],
              ["qemu-arm", "-L", "/usr/arm-linux-gnueabihf"]),
    "riscv64": ("riscv64-linux-gnu-gcc", ["-O2", "-march=rv64gc", "-mabi=lp64d", "-static"],
                ["qemu-riscv64", "-L", "/usr/riscv64-linux-gnu"]),
}


@pytest.mark.slow
@pytest.mark.parametrize("arch", list(EMULATED))
def test_emulated_functions_within_bounds(arch, tmp_path):
    compiler, flags, qemu = EMULATED[arch]
    assert shutil.which(compiler) and shutil.which(qemu[0]), "scripts/setup.sh installs the cross tools"
    x = sweep_inputs()
    check_outputs(x, run_driver([*qemu, driver_binary(tmp_path, compiler, flags)], x))


@pytest.mark.emu
def test_freestanding_cortex_m4_compiles(tmp_path):
    """The scalar functions and a vector instance compile for a Cortex-M4 without libm."""
    src = tmp_path / "m4.c"
    src.write_text('#include "relax_edge/kernel.h"\n'
                   "typedef float rxe_v4f32 __attribute__((vector_size(16)));\n"
                   "typedef int32_t rxe_v4f32_mask __attribute__((vector_size(16)));\n"
                   "RXE_VECTOR_MATH_F32(rxe_v4f32)\n"
                   "float f(float x) { return rxe_f32_exp(x) + rxe_f32_erf(x) + rxe_f32_tanh(x); }\n"
                   "rxe_v4f32 g(rxe_v4f32 x) { return rxe_v4f32_exp(x) + rxe_v4f32_erf(x) + rxe_v4f32_tanh(x); }\n")
    proc = subprocess.run(["arm-none-eabi-gcc", "-ffreestanding", "-mcpu=cortex-m4", "-mthumb", "-mfloat-abi=hard",
                           "-mfpu=fpv4-sp-d16", "-std=c99", "-O2", "-Wall", "-Wextra", "-Werror", "-DRXE_NO_LIBM",
                           f"-I{RUNTIME_DIR / 'include'}", "-c", str(src), "-o", str(tmp_path / "m4.o")],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


def test_llvm_constants_are_kernel_h_constants():
    header = (RUNTIME_DIR / "include" / "relax_edge" / "kernel.h").read_text()
    template = header[header.index("#define RXE_F32_MATH"):header.index("RXE_F32_MATH(rxe_f32_")]
    in_header = set(re.findall(r"0x[0-9a-f.]+p[+-]?\d+", template))   # magnitudes: `+ -c` is written `- c`
    ours = [*llvm_kernel.F32_EXP_CONSTANTS.values(), *llvm_kernel.F32_EXP_POLY, *llvm_kernel.F32_ERF_SMALL,
            *llvm_kernel.F32_ERF_BIG, *llvm_kernel.F32_TANH_POLY]
    assert in_header == {c.lstrip("-") for c in ours}


OPS = {
    "softmax": lambda x: make_call("softmax", [x], {"axis": -1}),
    "log_softmax": lambda x: make_call("log_softmax", [x], {"axis": -1}),
    "gelu": lambda x: make_call("gelu", [x]),
    "gelu_tanh": lambda x: make_call("gelu", [x], {"approximate": "tanh"}),
    "tanh": lambda x: make_call("tanh", [x]),
    "sigmoid": lambda x: make_call("sigmoid", [x]),
    "exp": lambda x: make_call("exp", [x]),
}


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    """Each operator over a (3, n) input, scheduled for the host, built with both backends."""
    out = {}
    for name, build in OPS.items():
        mod = one_op_module([(3, "n")], ["float32"], build)
        scheduled = schedule(legalize(mod), "host")
        for backend in ("c", "llvm"):
            art = rxe.build(scheduled, board="host", backend=backend,
                            out_dir=tmp_path_factory.mktemp(f"{name}_{backend}"), name="op", profile=False)
            out[name, backend] = (mod, rxe.connect("host").load(art), art)
    return out


@pytest.mark.parametrize("name", list(OPS))
def test_scheduled_ops_equal_numpy_with_both_backends(name, compiled):
    rng = np.random.default_rng(0)
    for n in (1, 7, 8, 9, 33):
        x = (rng.standard_normal((3, n)) * 4).astype(np.float32)
        x[0, 0] = 0.3   # one element in the small-argument branches
        expected = rxe.interpret(compiled[name, "c"][0], x)
        c_out, llvm_out = (compiled[name, b][1].run(x)[0] for b in ("c", "llvm"))
        np.testing.assert_allclose(c_out, expected, rtol=2e-6, atol=1e-7, err_msg=f"{name} C n={n}")
        np.testing.assert_allclose(llvm_out, expected, rtol=2e-6, atol=1e-7, err_msg=f"{name} LLVM n={n}")
        np.testing.assert_allclose(llvm_out, c_out, rtol=3e-7, atol=0, err_msg=f"{name} C vs LLVM n={n}")


def test_vector_loops_call_vector_math(compiled):
    text = (compiled["gelu", "c"][2].out_dir / "op.c").read_text()
    assert re.search(r"rxe_v\d+f32_erf\(", text) and "rxe_f32_erf(" in text   # vector body and scalar remainder
    text = (compiled["softmax", "c"][2].out_dir / "op.c").read_text()
    assert re.search(r"rxe_v\d+f32_exp\(", text) and "EXP(" not in text
