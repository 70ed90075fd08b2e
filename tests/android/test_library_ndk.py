"""The NDK side, without an NDK here: build_android_library picks the NDK's
clang when ANDROID_NDK_HOME names one and refuses a folder that is not an
NDK; the CMake toolchain file that wraps the NDK's own reads its settings
and adds relax_edge's link flags (run in CMake's script mode against a
stand-in NDK whose android.toolchain.cmake only prints what it was given)."""

import shutil
import subprocess

import pytest

from relax_edge.android.library import compiler_for
from relax_edge.build import BuildError
from relax_edge.toolchain import RUNTIME_DIR

TOOLCHAIN = RUNTIME_DIR.parent / "cmake" / "android-ndk.toolchain.cmake"
STAND_IN = """message(STATUS "NDK toolchain: ABI=${ANDROID_ABI} PLATFORM=${ANDROID_PLATFORM} STL=${ANDROID_STL} \
PAGES=${ANDROID_SUPPORT_FLEXIBLE_PAGE_SIZES}")
"""


@pytest.fixture
def fake_ndk(tmp_path):
    ndk = tmp_path / "ndk"
    (ndk / "build" / "cmake").mkdir(parents=True)
    (ndk / "build" / "cmake" / "android.toolchain.cmake").write_text(STAND_IN)
    clang = ndk / "toolchains" / "llvm" / "prebuilt" / "linux-x86_64" / "bin" / "clang"
    clang.parent.mkdir(parents=True)
    clang.write_text("#!/bin/sh\nexec clang \"$@\"\n")
    clang.chmod(0o755)
    return ndk


def test_ndk_clang_is_chosen(fake_ndk, monkeypatch):
    monkeypatch.setenv("ANDROID_NDK_HOME", str(fake_ndk))
    board, compiler = compiler_for("armeabi-v7a", api_level=26)
    assert board.name == "android-armv7" and compiler.kind == "ndk"
    assert compiler.clang.startswith(str(fake_ndk / "toolchains" / "llvm" / "prebuilt"))
    assert compiler.command[1] == "--target=armv7a-linux-androideabi26"
    assert "-mfloat-abi=softfp" in compiler.command


def test_not_an_ndk_is_named(tmp_path, monkeypatch):
    monkeypatch.delenv("ANDROID_NDK_HOME", raising=False)
    monkeypatch.setenv("ANDROID_NDK_ROOT", str(tmp_path))
    with pytest.raises(BuildError, match=f"ANDROID_NDK_ROOT={tmp_path} is not an Android NDK"):
        compiler_for("arm64-v8a")


def cmake_script(tmp_path, *defines, env=None):
    script = tmp_path / "check.cmake"
    script.write_text(f'include("{TOOLCHAIN}")\nmessage(STATUS "LINK=${{CMAKE_SHARED_LINKER_FLAGS_INIT}}")\n')
    proc = subprocess.run(["cmake", *defines, "-P", str(script)], capture_output=True, text=True, env=env)
    return proc.returncode, proc.stdout + proc.stderr, " ".join(proc.stderr.split())   # CMake wraps its errors


@pytest.mark.skipif(shutil.which("cmake") is None, reason="needs cmake")
def test_cmake_toolchain_wraps_the_ndks(fake_ndk, tmp_path):
    rc, out, _ = cmake_script(tmp_path, f"-DANDROID_NDK={fake_ndk}", "-DANDROID_ABI=armeabi-v7a")
    assert rc == 0, out
    assert "NDK toolchain: ABI=armeabi-v7a PLATFORM=24 STL=none PAGES=ON" in out
    link = next(line for line in out.splitlines() if "LINK=" in line)
    for flag in ("-z,max-page-size=16384", "-z,noexecstack", "-z,text", "--hash-style=both", "--build-id"):
        assert flag in link

    for defines, env, message in [
            ([f"-DANDROID_NDK={fake_ndk}", "-DANDROID_ABI=mips"], None, "ANDROID_ABI mips has no relax_edge board"),
            ([f"-DANDROID_NDK={tmp_path / 'nowhere'}"], None, "nowhere is not an Android NDK"),
            ([], {"PATH": "/usr/bin:/bin"}, "no NDK; pass -DANDROID_NDK=<ndk> or set ANDROID_NDK_HOME")]:
        rc, _, errors = cmake_script(tmp_path, *defines, env=env)
        assert rc != 0 and message in errors, errors
