"""The C runtime: unit tests through CMake/ctest (plain and under
AddressSanitizer + UndefinedBehaviorSanitizer, with the library itself shown
to be instrumented), a freestanding build for an Android and a Cortex-M
target, and a whole model run under the sanitizers."""

import json
import shutil
import subprocess

import numpy as np
import pytest

import relax_edge as rxe
from relax_edge.deploy import tensorfile
from relax_edge.toolchain import (
    GENERATE_SOURCES,
    KERNEL_SOURCES,
    RUNTIME_DIR,
    RUNTIME_SOURCES,
    SOURCE_LISTS,
    THREAD_SOURCES,
    build_runner,
)
from tests.models import build_cnn, cnn_weights

ROOT = RUNTIME_DIR.parent


def run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, **kw)


@pytest.mark.parametrize("sanitize", ["OFF", "ON"], ids=["plain", "asan_ubsan"])
def test_runtime_unit_tests_under_ctest(sanitize, tmp_path):
    cfg = run(["cmake", "-S", str(ROOT), "-B", str(tmp_path), f"-DRXE_SANITIZE={sanitize}",
               "-DCMAKE_EXPORT_COMPILE_COMMANDS=ON"])
    assert cfg.returncode == 0, cfg.stderr
    commands = json.loads((tmp_path / "compile_commands.json").read_text())
    assert commands and all("-std=c99" in c["command"].split() for c in commands), "not ISO C99 (gnu99?)"
    built = run(["cmake", "--build", str(tmp_path), "-j", "2"])
    assert built.returncode == 0, built.stdout + built.stderr
    tested = run(["ctest", "--test-dir", str(tmp_path), "--output-on-failure"])
    assert tested.returncode == 0, tested.stdout
    assert "100% tests passed, 0 tests failed out of 7" in tested.stdout
    out = run([str(tmp_path / "test_runtime")]).stdout
    assert "RXE_TESTS_PASSED" in out
    members = archive_symbols(tmp_path / "librxe_runtime.a")
    assert {"module.c.o", "threads.c.o", "gemm.c.o", "conv.c.o", "depthwise.c.o"} <= set(members)
    # CMake and relax_edge/toolchain.py build the same files: runtime_c/sources.cmake
    built_from = set(run(["ar", "t", str(tmp_path / "librxe_runtime.a")]).stdout.split())
    assert built_from == {src.name + ".o" for src in (*RUNTIME_SOURCES, *THREAD_SOURCES, *KERNEL_SOURCES,
                                                      *GENERATE_SOURCES)}
    instrumented = {m for m, symbols in members.items() if any(s.startswith("__asan_") for s in symbols)}
    if sanitize == "ON":
        assert instrumented == set(members), f"not instrumented: {sorted(set(members) - instrumented)}"
        assert any(s.startswith("__ubsan_handle_") for symbols in members.values() for s in symbols)
        probe = out_of_bounds_probe(tmp_path / "librxe_runtime.a", tmp_path / "probe")
        assert probe.returncode != 0
        assert "ERROR: AddressSanitizer: heap-buffer-overflow" in probe.stderr, probe.stderr
        assert "READ of size" in probe.stderr
    else:
        assert not instrumented


def test_source_lists_name_every_runtime_file():
    """runtime_c/sources.cmake lists each .c file of src/, kernels/ and rpc/
    once, and every file it lists exists."""
    listed = [src for files in SOURCE_LISTS.values() for src in files]
    assert len(listed) == len(set(listed))
    assert all(src.is_file() for src in listed), [str(s) for s in listed if not s.is_file()]
    on_disk = {src for folder in ("src", "kernels", "rpc") for src in (RUNTIME_DIR / folder).glob("*.c")}
    assert set(listed) == on_disk


def archive_symbols(archive):
    """{member object: the symbols it defines or references} of a static library."""
    proc = run(["nm", "-A", str(archive)])
    assert proc.returncode == 0, proc.stderr
    members = {}
    for line in proc.stdout.splitlines():
        where, _, rest = line.rpartition(":")
        if where:
            members.setdefault(where.rsplit(":", 1)[-1], set()).add(rest.split()[-1])
    return members


# A library kernel reads past the end of its input. The probe itself is built
# without sanitizers (only linked with their run time): ASan can report the
# read only if the library's own code is instrumented.
PROBE = r"""
#include <stdio.h>
#include <stdlib.h>
#include "relax_edge/kernels.h"

int main(void) {
  enum { M = 1, N = 16, K = 8 };
  float* a = (float*)malloc(sizeof(float) * (M * K - 1)); /* one float short */
  float* w = (float*)calloc(N * K, sizeof(float));
  float* c = (float*)malloc(sizeof(float) * M * N);
  rxe_error_t err;
  int i;
  for (i = 0; i < M * K - 1; ++i) a[i] = 1.0f;
  rxe_lib_dense_f32(a, w, NULL, c, M, N, K, RXE_ACT_NONE, &err);
  printf("probe finished: %f\n", (double)c[0]);
  free(a);
  free(w);
  free(c);
  return 0;
}
"""


def out_of_bounds_probe(library, out):
    """Build and run PROBE against `library`; the completed process."""
    src = out.with_suffix(".c")
    src.write_text(PROBE)
    built = run(["cc", "-std=c99", "-O1", f"-I{RUNTIME_DIR / 'include'}", str(src), str(library),
                 "-fsanitize=address,undefined", "-lm", "-lpthread", "-o", str(out)])
    assert built.returncode == 0, built.stderr
    return run([str(out)], env={"ASAN_OPTIONS": "detect_leaks=0"})


FREESTANDING = {
    "android_aarch64": ["clang", "--target=aarch64-linux-android24", "-ffreestanding", "-nostdlibinc"],
    "cortex_m4": ["arm-none-eabi-gcc", "-ffreestanding", "-mcpu=cortex-m4", "-mthumb", "-mfloat-abi=hard",
                  "-mfpu=fpv4-sp-d16"],
}


@pytest.mark.parametrize("target", list(FREESTANDING))
def test_runtime_core_compiles_freestanding(target, tmp_path):
    cmd = FREESTANDING[target]
    assert shutil.which(cmd[0]), f"{cmd[0]} is missing: scripts/setup.sh installs it"
    for src in (*RUNTIME_SOURCES, *GENERATE_SOURCES):   # the token loop is freestanding too
        obj = tmp_path / (src.name + ".o")
        proc = run([*cmd, "-std=c99", "-O2", "-Wall", "-Wextra", "-Werror", "-DRXE_NO_LIBM",
                    f"-I{RUNTIME_DIR / 'include'}", "-c", str(src), "-o", str(obj)])
        assert proc.returncode == 0, proc.stderr
        assert obj.stat().st_size > 0


@pytest.mark.parametrize("target", list(FREESTANDING))
def test_generated_model_compiles_freestanding(target, tmp_path):
    art = rxe.build(build_cnn(cnn_weights()), board="host", out_dir=tmp_path / "cnn", name="cnn", profile=False)
    proc = run([*FREESTANDING[target], "-std=c99", "-O2", "-Wall", "-Wextra", "-Werror", "-DRXE_NO_LIBM",
                f"-I{RUNTIME_DIR / 'include'}", "-c", str(art.out_dir / "cnn.c"), "-o", str(tmp_path / "cnn.o")])
    assert proc.returncode == 0, proc.stderr


def test_whole_model_under_sanitizers(tmp_path):
    """A CNN with a symbolic batch runs in a runner built with ASan + UBSan:
    right answers at two batch sizes, and a clean error for a wrong shape."""
    weights = cnn_weights()
    mod = build_cnn(weights)
    art = rxe.build(mod, board="host", out_dir=tmp_path / "cnn", name="cnn", profile=False)
    flags = ["-fsanitize=address,undefined", "-fno-omit-frame-pointer", "-fno-sanitize-recover=all"]
    runner = build_runner(art, tmp_path / "runner", extra_cflags=flags, extra_ldflags=flags[:1])
    env = {"ASAN_OPTIONS": "detect_leaks=1:abort_on_error=0", "UBSAN_OPTIONS": "print_stacktrace=1"}
    for batch in (1, 3):
        x = np.random.default_rng(batch).standard_normal((batch, 1, 16, 16)).astype(np.float32)
        (tmp_path / "in.rxt").write_bytes(tensorfile.encode([x]))
        proc = run([str(runner), str(tmp_path / "in.rxt"), str(tmp_path / "out.rxt")], env=env)
        assert proc.returncode == 0 and "RXE_OK" in proc.stdout, proc.stderr
        (out,) = tensorfile.decode((tmp_path / "out.rxt").read_bytes())
        np.testing.assert_allclose(out, rxe.interpret(mod, x), rtol=1e-5, atol=1e-6)
    bad = np.zeros((2, 1, 16, 15), np.float32)
    (tmp_path / "bad.rxt").write_bytes(tensorfile.encode([bad]))
    proc = run([str(runner), str(tmp_path / "bad.rxt"), str(tmp_path / "out.rxt")], env=env)
    assert proc.returncode == 3, proc.stderr
    assert "RXE_ERROR RXE_ERR_SHAPE: input x dimension 3 is 15, but it must be 16" in proc.stderr
    assert "AddressSanitizer" not in proc.stderr and "runtime error" not in proc.stderr
