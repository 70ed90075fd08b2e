"""Android shared libraries built without the NDK (Debian clang, lld and the
stub system libraries), read back with llvm-readelf: the machine, DT_NEEDED
within Android's system libraries, no glibc symbol versions, LOAD segments
aligned to 16 KB pages, no text relocations, no TLS, and exactly the model's
API plus the requested exports in the dynamic symbol table. The x86_64
library also runs on this machine, glibc standing in for bionic. An
undefined symbol outside the stub list is a BuildError that names it."""

import os
import platform
import re
import shutil
import subprocess
import sys

import numpy as np
import pytest

import relax_edge as rxe
from relax_edge.android.library import ABIS, build_android_library
from relax_edge.build import BuildError
from tests.models import build_mlp, mlp_weights, save_tiny_onnx

from .elf_checks import check_android_library, drop_ndk, exported_symbols, glibc_stand_ins, readelf, without_ndk  # noqa: F401 - without_ndk is an autouse fixture

pytestmark = pytest.mark.skipif(not (shutil.which("clang") and shutil.which("ld.lld") and shutil.which("llvm-readelf")),
                                reason="needs Debian's clang, lld and llvm (scripts/setup.sh)")

MODEL_API = {"mlp_main", "mlp_main_workspace_size", "mlp_main_plan_shapes", "mlp_module"}
GLUE = """
#include <stdint.h>
int32_t JNI_OnLoad(void* vm, void* reserved) { (void)vm; (void)reserved; return 0x00010006; }
int32_t glue_helper(int32_t x) { return x + 1; }   /* not exported */
"""


@pytest.fixture(scope="module")
def mlp(tmp_path_factory):
    """The MLP built for the host, and its module."""
    mod = build_mlp(mlp_weights())
    return rxe.build(mod, board="host", out_dir=tmp_path_factory.mktemp("host") / "mlp", name="mlp", profile=False), mod


@pytest.fixture(scope="module")
def libraries(tmp_path_factory, mlp):
    root = tmp_path_factory.mktemp("android")
    art, mod = mlp
    glue = root / "glue.c"
    glue.write_text(GLUE)
    with pytest.MonkeyPatch.context() as env:   # the path without an NDK, even where one is installed
        drop_ndk(env)
        return {abi: build_android_library(art, abi, root / "jniLibs" / abi / "libmlp.so", module=mod,
                                           extra_sources=[glue], exports=["JNI_OnLoad"])
                for abi in ABIS}


@pytest.mark.parametrize("abi", list(ABIS))
def test_library_as_android_loads_it(libraries, abi):
    lib = libraries[abi]
    assert lib.path.exists() and lib.abi == abi and lib.api_level == 24
    assert lib.toolchain == "clang-stubs" and lib.threads == 1
    assert set(lib.needed) == check_android_library(lib.path, abi)
    exported = exported_symbols(lib.path)
    assert exported == MODEL_API | {"JNI_OnLoad"}
    assert sorted(exported) == lib.exported


def test_armv7_library_uses_androids_float_abi(libraries):
    """armeabi-v7a passes floats in integer registers (softfp), as the NDK's code."""
    lib = libraries["armeabi-v7a"]
    flags = int(re.search(r"Flags:\s+(0x[0-9a-f]+)", readelf("-h", lib.path)).group(1), 16)
    assert flags & 0xFF000000 == 0x05000000          # EABI version 5
    assert flags & 0x600 == 0x200                    # EF_ARM_ABI_FLOAT_SOFT, not EF_ARM_ABI_FLOAT_HARD
    attributes = readelf("-A", lib.objects[0])
    assert "ABI_VFP_args" not in attributes and "Advanced_SIMD_arch" in attributes


RUN_IN_HOST = """
import dataclasses, sys
from pathlib import Path
import numpy as np
import relax_edge as rxe
from relax_edge.build import Artifact
art = dataclasses.replace(Artifact.load(sys.argv[1]), shared_library=Path(sys.argv[2]))
with rxe.connect("host") as dev:
    (out,) = dev.load(art).run(np.load(sys.argv[3]))
np.save(sys.argv[4], out)
"""


@pytest.mark.skipif(platform.machine() != "x86_64", reason="loads the x86_64 library on this machine")
def test_x86_64_library_runs_on_this_machine(libraries, mlp, tmp_path):
    """The shipped x86_64 .so itself, loaded by the host's runtime in a Python process whose
    glibc stands in for bionic's libc.so (its one DT_NEEDED, for the stack protector's
    __stack_chk_fail); its MLP matches numpy."""
    art, _ = mlp
    lib = libraries["x86_64"]
    assert lib.needed == ["libc.so"]
    w1, b1, w2, b2, w3, b3 = mlp_weights()
    x = np.random.default_rng(3).standard_normal((4, 784)).astype(np.float32)
    logits = np.maximum(np.maximum(x @ w1 + b1, 0) @ w2 + b2, 0) @ w3 + b3
    expected = np.exp(logits - logits.max(-1, keepdims=True))
    expected /= expected.sum(-1, keepdims=True)
    np.save(tmp_path / "x.npy", x)
    env = dict(os.environ, LD_LIBRARY_PATH=str(glibc_stand_ins(tmp_path / "libs")))
    proc = subprocess.run([sys.executable, "-c", RUN_IN_HOST, str(art.out_dir), str(lib.path), str(tmp_path / "x.npy"),
                           str(tmp_path / "out.npy")], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr
    np.testing.assert_allclose(np.load(tmp_path / "out.npy"), expected, rtol=1e-5, atol=1e-7)


def test_undefined_symbol_outside_the_stubs_is_named(mlp, tmp_path):
    art, mod = mlp
    bad = tmp_path / "bad.c"
    bad.write_text("void* popen(const char*, const char*);\nvoid* open_log(void) { return popen(\"x\", \"r\"); }\n")
    with pytest.raises(BuildError, match=r"ABI arm64-v8a: mlp: undefined symbol popen: not in Android's"):
        build_android_library(art, "arm64-v8a", tmp_path / "libmlp.so", module=mod, extra_sources=[bad])
    assert not (tmp_path / "libmlp.so").exists()


def test_bad_requests_are_named(mlp, tmp_path):
    art, mod = mlp
    with pytest.raises(BuildError, match="unknown Android ABI 'mips'; choose one of arm64-v8a"):
        build_android_library(art, "mips", tmp_path / "lib.so")
    with pytest.raises(BuildError, match="built for board host, not android-arm64, and it records no source"):
        build_android_library(art, "arm64-v8a", tmp_path / "lib.so")
    with pytest.raises(BuildError, match="exported symbol JNI_OnLoad is defined by none of the sources"):
        build_android_library(art, "x86_64", tmp_path / "lib.so", module=mod, exports=["JNI_OnLoad"])
    with pytest.raises(BuildError, match="API level 19 is below 21"):
        build_android_library(art, "x86_64", tmp_path / "lib.so", module=mod, api_level=19)


def test_rebuilt_for_the_abi_from_the_recorded_onnx(tmp_path):
    """An artifact of another board is emitted again for the ABI's board from the ONNX file it records."""
    onnx_path = tmp_path / "tiny.onnx"
    save_tiny_onnx(onnx_path)
    art = rxe.build(rxe.from_onnx(str(onnx_path)), board="host", out_dir=tmp_path / "host", name="tiny",
                    source={"onnx": str(onnx_path), "dim_bounds": {}, "max_context": None}, profile=False)
    lib = build_android_library(art, "armeabi-v7a", tmp_path / "libtiny.so")
    assert lib.exported == ["tiny_main", "tiny_main_plan_shapes", "tiny_main_workspace_size", "tiny_module"]
    assert (tmp_path / "host" / "android" / "armeabi-v7a" / "sources" / "tiny.c").exists()
    assert "Machine:                           ARM" in readelf("-h", lib.path)
    with pytest.raises(BuildError, match="extra source .*nowhere.c does not exist"):
        build_android_library(art, "armeabi-v7a", tmp_path / "libtiny.so", extra_sources=[tmp_path / "nowhere.c"])
