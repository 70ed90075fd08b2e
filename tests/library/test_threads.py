"""The runtime's thread pool (runtime_c/src/threads.c): its C unit tests
(runtime_c/tests/test_threads.c) built with the host cc, with threads, with
RXE_NO_THREADS, with RXE_MAX_THREADS configured (and refused beyond the
pool's chunk limit) and under ThreadSanitizer where this machine supports it,
and for aarch64 and riscv64 under qemu-user;
warning-free builds for every cross compiler; and the thread count as a run
option of the runner and the RPC server (--threads N, RXE_NUM_THREADS)."""

import shutil
import subprocess

import numpy as np
import pytest

import relax_edge as rxe
from relax_edge.deploy import tensorfile
from relax_edge.toolchain import RUNTIME_DIR
from tests.models import build_cnn, cnn_weights

THREADS_C = RUNTIME_DIR / "src" / "threads.c"
TEST_C = RUNTIME_DIR / "tests" / "test_threads.c"
WARNINGS = ["-std=c99", "-Wall", "-Wextra", "-pedantic", "-Werror"]
INCLUDE = f"-I{RUNTIME_DIR / 'include'}"


def run(cmd, **kw):
    return subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=300, **kw)


def build_unit_tests(out, *flags):
    proc = run(["cc", "-O2", "-g", *WARNINGS, *flags, INCLUDE, TEST_C, THREADS_C, "-o", out])
    assert proc.returncode == 0, proc.stderr
    return out


def test_unit_tests_with_threads(tmp_path):
    proc = run([build_unit_tests(tmp_path / "test_threads", "-pthread")])
    assert proc.returncode == 0 and "RXE_TESTS_PASSED" in proc.stdout, proc.stdout + proc.stderr


@pytest.mark.parametrize("max_threads", [4, 31])
def test_unit_tests_with_configured_max_threads(max_threads, tmp_path):
    """RXE_MAX_THREADS is compile-time configuration, up to the pool's
    31-chunk limit."""
    out = build_unit_tests(tmp_path / "test_threads", "-pthread", f"-DRXE_MAX_THREADS={max_threads}")
    proc = run([out])
    assert proc.returncode == 0 and "RXE_TESTS_PASSED" in proc.stdout, proc.stdout + proc.stderr


@pytest.mark.parametrize("max_threads", [0, 32])
def test_max_threads_beyond_the_chunk_limit_does_not_compile(max_threads, tmp_path):
    proc = run(["cc", *WARNINGS, f"-DRXE_MAX_THREADS={max_threads}", INCLUDE, "-c", THREADS_C,
                "-o", tmp_path / "threads.o"])
    assert proc.returncode != 0 and "RXE_MAX_THREADS must be in [1, RXE_THREADS_CHUNK_LIMIT]" in proc.stderr, \
        proc.stderr


def test_unit_tests_without_threads_refer_to_no_pthread(tmp_path):
    exe = build_unit_tests(tmp_path / "test_threads", "-DRXE_NO_THREADS")
    proc = run([exe])
    assert proc.returncode == 0 and "RXE_TESTS_PASSED" in proc.stdout, proc.stdout + proc.stderr
    obj = tmp_path / "threads.o"
    assert run(["cc", "-O2", *WARNINGS, "-DRXE_NO_THREADS", INCLUDE, "-c", THREADS_C, "-o", obj]).returncode == 0
    assert "pthread" not in run(["nm", obj]).stdout


def test_unit_tests_under_thread_sanitizer(tmp_path):
    exe = tmp_path / "test_threads_tsan"
    built = run(["cc", "-O1", "-g", "-fsanitize=thread", *WARNINGS, INCLUDE, TEST_C, THREADS_C, "-o", exe])
    if built.returncode != 0:
        pytest.skip(f"no ThreadSanitizer with this cc: {built.stderr[-300:]}")
    proc = run([exe], env={"TSAN_OPTIONS": "halt_on_error=1:die_after_fork=0"})
    if "FATAL: ThreadSanitizer" in proc.stderr:   # e.g. an address-space layout it does not support
        pytest.skip(f"ThreadSanitizer cannot run here: {proc.stderr[-300:]}")
    assert proc.returncode == 0 and "RXE_TESTS_PASSED" in proc.stdout, proc.stdout + proc.stderr
    assert "ThreadSanitizer" not in proc.stderr, proc.stderr


@pytest.mark.parametrize("arch", ["aarch64", "riscv64"])
def test_unit_tests_under_qemu_user(arch, tmp_path):
    cc, qemu = f"{arch}-linux-gnu-gcc", f"qemu-{arch}"
    for tool in (cc, qemu):
        assert shutil.which(tool), f"{tool} is missing: scripts/setup.sh installs it"
    exe = tmp_path / "test_threads"
    built = run([cc, "-O2", *WARNINGS, "-static", "-pthread", "-DRXE_TEST_SKIP_FORK", INCLUDE, TEST_C, THREADS_C,
                 "-o", exe])
    assert built.returncode == 0, built.stderr
    proc = run([qemu, exe])
    assert proc.returncode == 0 and "RXE_TESTS_PASSED" in proc.stdout, proc.stdout + proc.stderr


CROSS = {
    "aarch64": ["aarch64-linux-gnu-gcc", "-mcpu=cortex-a72"],
    "armv7": ["arm-linux-gnueabihf-gcc", "-march=armv7-a", "-mfpu=neon", "-mfloat-abi=hard"],
    "riscv64": ["riscv64-linux-gnu-gcc", "-march=rv64gc", "-mabi=lp64d"],
    "cortex_m4_freestanding": ["arm-none-eabi-gcc", "-ffreestanding", "-mcpu=cortex-m4", "-mthumb",
                               "-mfloat-abi=hard", "-mfpu=fpv4-sp-d16", "-DRXE_NO_THREADS"],
}


@pytest.mark.parametrize("target", list(CROSS))
def test_pool_compiles_warning_free(target, tmp_path):
    cc = CROSS[target]
    assert shutil.which(cc[0]), f"{cc[0]} is missing: scripts/setup.sh installs it"
    obj = tmp_path / "threads.o"
    proc = run([*cc, "-O2", *WARNINGS, INCLUDE, "-c", THREADS_C, "-o", obj])
    assert proc.returncode == 0, proc.stderr
    symbols = run([cc[0].replace("-gcc", "-nm"), obj]).stdout
    assert "rxe_threads_parallel_for" in symbols
    assert ("pthread" in symbols) == ("-DRXE_NO_THREADS" not in cc), symbols


@pytest.fixture(scope="module")
def cnn(tmp_path_factory):
    weights = cnn_weights()
    mod = build_cnn(weights)
    art = rxe.build(mod, board="host", out_dir=tmp_path_factory.mktemp("cnn"), name="cnn", profile=False)
    return mod, art


def test_runner_threads_option(cnn, tmp_path):
    mod, art = cnn
    x = np.random.default_rng(0).standard_normal((3, 1, 16, 16)).astype(np.float32)
    (tmp_path / "in.rxt").write_bytes(tensorfile.encode([x]))
    for args, env in ((["--threads", "2"], {}), ([], {"RXE_NUM_THREADS": "3"}), (["--threads", "1"], {})):
        proc = run([art.runner, *args, tmp_path / "in.rxt", tmp_path / "out.rxt"], env=env)
        assert proc.returncode == 0 and "RXE_OK" in proc.stdout, proc.stderr
        (out,) = tensorfile.decode((tmp_path / "out.rxt").read_bytes())
        np.testing.assert_allclose(out, rxe.interpret(mod, x), rtol=1e-5, atol=1e-5)
    bad = [(["--threads", "0"], {}, "--threads"), (["--threads", "2x"], {}, "--threads"),
           (["--threads", "17"], {}, "--threads"), ([], {"RXE_NUM_THREADS": "many"}, "RXE_NUM_THREADS")]
    for args, env, named in bad:
        proc = run([art.runner, *args, tmp_path / "in.rxt", tmp_path / "out.rxt"], env=env)
        assert proc.returncode == 2, proc.stdout + proc.stderr
        assert f"{named} must be an integer in [1, 16]" in proc.stderr, proc.stderr


def test_server_threads_option(cnn):
    _, art = cnn
    proc = run([art.server, "--threads", "2"], stdin=subprocess.DEVNULL)   # no frames: a clean exit
    assert proc.returncode == 0, proc.stderr
    proc = run([art.server, "--threads", "-1"], stdin=subprocess.DEVNULL)
    assert proc.returncode == 2 and "--threads must be an integer in [1, 16], got '-1'" in proc.stderr, proc.stderr
    proc = run([art.server], stdin=subprocess.DEVNULL, env={"RXE_NUM_THREADS": "0"})
    assert proc.returncode == 2 and "RXE_NUM_THREADS must be an integer" in proc.stderr, proc.stderr
    proc = run([art.server, "--threads"], stdin=subprocess.DEVNULL)
    assert proc.returncode == 2 and "usage:" in proc.stderr, proc.stderr
