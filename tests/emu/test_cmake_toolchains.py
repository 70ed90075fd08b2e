"""The CMake toolchain files in cmake/toolchains/: each configures the
top-level CMakeLists.txt and builds rxe_runtime for its architecture (read
back with the cross objdump and readelf); the runtime's unit tests built
with them run under QEMU (aarch64 statically linked under qemu-aarch64, the
Cortex-M4 through ctest under qemu-system-arm)."""

import re
import shutil
import subprocess

import pytest

from relax_edge.toolchain import RUNTIME_DIR

ROOT = RUNTIME_DIR.parent
TOOLCHAINS = ROOT / "cmake" / "toolchains"

# toolchain file -> (binutils prefix, objdump architecture, readelf option, what readelf must show)
EXPECTED = {
    "aarch64-linux-gnu": ("aarch64-linux-gnu-", "aarch64", "-h", ["Machine:.*AArch64"]),
    "arm-linux-gnueabihf": ("arm-linux-gnueabihf-", "armv7", "-A",
                            ["Tag_CPU_arch_profile: Application", "Tag_Advanced_SIMD_arch: NEON",
                             "Tag_ABI_VFP_args: VFP registers"]),
    "riscv64-linux-gnu": ("riscv64-linux-gnu-", "riscv:rv64", "-h", ["double-float ABI"]),
    "cortex-m4": ("arm-none-eabi-", "armv7e-m", "-A",
                  ["Tag_CPU_arch_profile: Microcontroller", "Tag_FP_arch: VFPv4-D16",
                   "Tag_ABI_VFP_args: VFP registers"]),
}


def run(cmd, **kw):
    return subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=300, **kw)


def configure_and_build(toolchain: str, build_dir, *options, target=None):
    cfg = run(["cmake", "-S", ROOT, "-B", build_dir, f"-DCMAKE_TOOLCHAIN_FILE={TOOLCHAINS / toolchain}.cmake",
               *options])
    assert cfg.returncode == 0, cfg.stdout + cfg.stderr
    built = run(["cmake", "--build", build_dir, "-j", "2", *(["--target", target] if target else [])])
    assert built.returncode == 0, built.stdout + built.stderr


@pytest.mark.parametrize("toolchain", list(EXPECTED))
def test_toolchain_file_builds_the_runtime_for_its_architecture(toolchain, tmp_path):
    prefix, arch, readelf_option, attributes = EXPECTED[toolchain]
    assert shutil.which(f"{prefix}gcc"), f"{prefix}gcc is missing: scripts/setup.sh installs it"
    configure_and_build(toolchain, tmp_path, "-DRXE_BUILD_TESTS=OFF", target="rxe_runtime")
    library = tmp_path / "librxe_runtime.a"
    assert library.exists()
    dump = run([f"{prefix}objdump", "-f", library])
    assert dump.returncode == 0, dump.stderr
    found = set(re.findall(r"architecture: ([\w:-]+),", dump.stdout))
    assert found == {arch}, dump.stdout
    elf = run([f"{prefix}readelf", readelf_option, library]).stdout
    for pattern in attributes:
        assert re.search(pattern, elf), f"{pattern!r} not in readelf {readelf_option}:\n{elf[:2000]}"


def test_aarch64_unit_tests_run_under_qemu(tmp_path):
    assert shutil.which("qemu-aarch64"), "qemu-aarch64 is missing: scripts/setup.sh installs qemu-user"
    configure_and_build("aarch64-linux-gnu", tmp_path, "-DRXE_BUILD_TESTS=ON", "-DCMAKE_EXE_LINKER_FLAGS=-static",
                        target="test_runtime")
    proc = run(["qemu-aarch64", tmp_path / "test_runtime"])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "RXE_TESTS_PASSED" in proc.stdout


def test_cortex_m4_unit_tests_run_on_mps2_an386_through_ctest(tmp_path):
    assert shutil.which("qemu-system-arm"), "qemu-system-arm is missing: scripts/setup.sh installs it"
    configure_and_build("cortex-m4", tmp_path, "-DRXE_BUILD_TESTS=ON")
    cache = (tmp_path / "CMakeCache.txt").read_text()
    assert "RXE_NO_LIBM:BOOL=ON" in cache
    tested = run(["ctest", "--test-dir", tmp_path, "--output-on-failure"])
    assert tested.returncode == 0, tested.stdout + tested.stderr
    assert "100% tests passed, 0 tests failed out of 4" in tested.stdout
