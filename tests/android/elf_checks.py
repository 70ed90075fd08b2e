"""What every Android app library must show to llvm-readelf, checked the
same way for the C and the Vulkan libraries: the machine, a shared object,
its SONAME, DT_NEEDED within Android's system libraries, no glibc symbol
versions, LOAD segments aligned to 16 KB pages, no text relocations, no TLS,
a non-executable stack, both hash tables, a build ID and the stack
protector's imports (bionic's __stack_chk_fail); and the loading of
an x86_64 library into a desktop JVM, glibc standing in for bionic."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

MACHINES = {"arm64-v8a": "AArch64", "armeabi-v7a": "ARM", "x86_64": "Advanced Micro Devices X86-64"}
SYSTEM_LIBRARIES = {"libc.so", "libm.so", "libdl.so", "liblog.so"}


NDK_VARIABLES = ("ANDROID_NDK_HOME", "ANDROID_NDK_ROOT")


def drop_ndk(mp) -> None:
    """Take the build down the path without an NDK, even where one is installed."""
    for name in NDK_VARIABLES:
        mp.delenv(name, raising=False)


@pytest.fixture(autouse=True)
def without_ndk(monkeypatch):
    """Imported by a test module, every test there builds without an NDK."""
    drop_ndk(monkeypatch)


def readelf(*args) -> str:
    proc = subprocess.run(["llvm-readelf", "-W", *map(str, args)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def _dynamic_symbols(path, defined: bool) -> set:
    names = set()
    for line in readelf("--dyn-syms", path).splitlines():
        fields = line.split()
        if len(fields) >= 8 and fields[0][:-1].isdigit() and fields[4] in ("GLOBAL", "WEAK") \
                and (fields[6] != "UND") == defined:
            names.add(fields[7].split("@")[0])
    return names


def exported_symbols(path) -> set:
    """The defined global and weak dynamic symbols."""
    return _dynamic_symbols(path, True)


def imported_symbols(path) -> set:
    """The undefined dynamic symbols, left to the system libraries."""
    return _dynamic_symbols(path, False)


def check_android_library(path, abi: str) -> set:
    """Assert the checks above on one library; its DT_NEEDED names."""
    header = readelf("-h", path)
    assert re.search(rf"Machine:\s+{re.escape(MACHINES[abi])}$", header, re.M), header
    assert re.search(r"Type:\s+DYN", header)
    dynamic = readelf("-d", path)
    needed = set(re.findall(r"\(NEEDED\)\s+Shared library: \[(.+?)\]", dynamic))
    assert needed <= SYSTEM_LIBRARIES, needed
    assert f"Library soname: [{Path(path).name}]" in dynamic
    assert "TEXTREL" not in dynamic                       # neither DT_TEXTREL nor DF_TEXTREL in DT_FLAGS
    assert "GLIBC_" not in readelf("-V", "--dyn-syms", path)
    program = readelf("-l", path)
    loads = [line.split() for line in program.splitlines() if line.strip().startswith("LOAD")]
    assert loads and all(int(fields[-1], 16) >= 16384 for fields in loads), loads
    assert " TLS " not in program
    stack = [line for line in program.splitlines() if "GNU_STACK" in line]
    assert stack and stack[0].split()[6] == "RW"        # -z noexecstack: read-write, not executable
    sections = readelf("-S", path)
    assert ".gnu.hash" in sections and ".hash" in sections
    assert "Build ID" in readelf("-n", path)
    imported = imported_symbols(path)
    assert "__stack_chk_fail" in imported                # -fstack-protector-strong, as NDK builds
    assert ("__stack_chk_guard" in imported) == (abi == "armeabi-v7a")   # the 64-bit ABIs: the TCB's canary
    return needed


ERRNO_SHIM = "#include <errno.h>\nint* __errno(void) { return &errno; }   /* bionic's name of glibc's slot */\n"


def glibc_stand_ins(folder: Path) -> Path:
    """A folder of libraries named as Android's system libraries, for
    LD_LIBRARY_PATH: glibc's dynamic linker then resolves an x86_64 app
    library's DT_NEEDED to the C library the process already runs on.
    libdl.so, liblog.so and libm.so are links to glibc's libc.so.6 and
    libm.so.6; libc.so is a small library on top of libc.so.6 that adds
    bionic's __errno, which glibc calls __errno_location."""
    folder.mkdir(parents=True, exist_ok=True)
    found = {}
    for name in ("libc.so.6", "libm.so.6"):
        found[name] = subprocess.run(["cc", f"-print-file-name={name}"], capture_output=True, text=True,
                                     check=True).stdout.strip()
    for name, target in (("libdl.so", "libc.so.6"), ("liblog.so", "libc.so.6"), ("libm.so", "libm.so.6")):
        os.symlink(os.path.realpath(found[target]), folder / name)
    (folder / "errno_shim.c").write_text(ERRNO_SHIM)
    subprocess.run(["cc", "-shared", "-fPIC", "-Wl,-soname,libc.so", "-o", str(folder / "libc.so"),
                    str(folder / "errno_shim.c")], check=True, capture_output=True)
    return folder
