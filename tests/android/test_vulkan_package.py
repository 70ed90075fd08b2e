"""Vulkan inside the Android package: `rxe.package` of a Vulkan artifact
(and `relax-edge package --board android-arm64-vulkan`) writes libraries
that carry the SPIR-V and the Vulkan module and dlopen libvulkan.so at run
time. Checked here: the arm64-v8a library with llvm-readelf (the checks of
every app library, libvulkan in no DT_NEEDED, the loader's Android name and
a SPIR-V module inside), the folder file by file, model.json's backend; and
the package's own x86_64 library, the very file an emulator would load, run
in a desktop JVM (glibc standing in for bionic) on Mesa's lavapipe against
ONNX Runtime, the android-x86_64-vulkan board accepting a CPU device as an
emulator's SwiftShader is one. A loader that is not there is the Java
exception RXE_ERR_NO_VULKAN. No phone, no phone GPU and no Android loader
are exercised."""

import json
import os
import shutil
import struct
import subprocess

import numpy as np
import pytest

import relax_edge as rxe
from relax_edge.android.library import VULKAN_ABIS
from relax_edge.android.stubs import read_symbols
from relax_edge.cli import main as cli_main
from relax_edge.codegen import abi as rxe_abi
from relax_edge.errors import RelaxEdgeError
from tests.vulkan import vkrt

from .elf_checks import check_android_library, drop_ndk, exported_symbols, glibc_stand_ins, without_ndk  # noqa: F401 - without_ndk is an autouse fixture
from .jni_models import HAVE_JDK, JavaModel, mlp_weights, onnxruntime_outputs, save_mlp

HAVE_CLANG = all(shutil.which(t) for t in ("clang", "ld.lld", "llvm-readelf"))
REASON = vkrt.unavailable()
pytestmark = [pytest.mark.skipif(not HAVE_CLANG, reason="needs Debian's clang, lld and llvm (scripts/setup.sh)"),
              pytest.mark.skipif(REASON is not None, reason=str(REASON))]
needs_jdk = pytest.mark.skipif(not HAVE_JDK, reason="needs a JDK (openjdk-17-jdk-headless, scripts/setup.sh)")

PACKAGE = "com.example.vkmlp"
MODEL_API = {"vkmlp_main", "vkmlp_main_plan_shapes", "vkmlp_main_workspace_size", "vkmlp_module"}
SPIRV_MAGIC = struct.pack("<I", 0x07230203)


@pytest.fixture(scope="module")
def packaged(tmp_path_factory):
    """The MLP (n in 1..8) built for host-vulkan, packaged for both Vulkan ABIs."""
    folder = tmp_path_factory.mktemp("vulkan_package")
    onnx_path = save_mlp(folder / "vkmlp.onnx", mlp_weights())
    source = {"onnx": str(onnx_path), "dim_bounds": {"n": [1, 8]}, "max_context": None}
    art = rxe.build(rxe.from_onnx(onnx_path, dim_bounds={"n": (1, 8)}), board="host-vulkan", backend="vulkan",
                    out_dir=folder / "vkmlp", name="vkmlp", source=source, profile=False)
    with pytest.MonkeyPatch.context() as env:   # the path without an NDK, even where one is installed
        drop_ndk(env)
        return art, onnx_path, rxe.package(art, PACKAGE, folder / "out", abis="all")


def _files(root) -> set:
    return {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()}


def test_folder_holds_the_vulkan_libraries(packaged):
    art, _, pkg = packaged
    java = f"java/{PACKAGE.replace('.', '/')}"
    sample = f"sample-app/src/main/{java}/sample"
    assert list(VULKAN_ABIS) == ["arm64-v8a", "x86_64"]   # "all": the ABIs with a Vulkan board
    assert _files(pkg.path) == {f"jniLibs/{abi}/librxe_vkmlp.so" for abi in VULKAN_ABIS} | {
        f"{java}/RelaxEdgeModel.java", f"{java}/RelaxEdgeException.java",
        "include/model.h", "include/relax_edge/abi.h", "README.md", "model.json", "sample-app/build.gradle.kts",
        "sample-app/src/main/AndroidManifest.xml", f"{sample}/MainActivity.kt", f"{sample}/ModelDemo.kt"}
    desc = json.loads((pkg.path / "model.json").read_text())
    assert desc["backend"] == "vulkan" and desc["verified_on_device"] is False
    assert {abi: e["board"] for abi, e in desc["abis"].items()} == {"arm64-v8a": "android-arm64-vulkan",
                                                                    "x86_64": "android-x86_64-vulkan"}
    assert "libvulkan.so" in desc["threads_note"] and "RXE_ERR_NO_VULKAN" in desc["threads_note"]
    assert desc["arena_bytes"] == art.workspace_bytes
    readme = (pkg.path / "README.md").read_text()
    assert "through Vulkan" in readme and "`RXE_ERR_NO_VULKAN`" in readme
    assert "RXE_ERR_NO_VULKAN" in (pkg.path / java / "RelaxEdgeModel.java").read_text()
    assert (pkg.path / "include" / "model.h").read_text() == art.header.read_text()


@pytest.mark.parametrize("abi", list(VULKAN_ABIS))
def test_vulkan_library_is_an_app_library_that_loads_vulkan_itself(packaged, abi):
    _, _, pkg = packaged
    lib = pkg.libraries[abi]
    assert lib.backend == "vulkan" and lib.board == VULKAN_ABIS[abi]
    needed = check_android_library(lib.path, abi)
    assert needed == set(lib.needed) and "libdl.so" in needed          # dlopen, not a link to libvulkan
    assert exported_symbols(lib.path) == MODEL_API | {"JNI_OnLoad"}
    data = lib.path.read_bytes()
    assert SPIRV_MAGIC in data                                          # the shaders ride inside
    assert b"libvulkan.so\0" in data and b"libvulkan.so.1" not in data  # the loader's Android name
    assert b"vkGetInstanceProcAddr\0" in data


def _nm(*args) -> dict:
    """{symbol: llvm-nm's type letter} of object files."""
    out = subprocess.run(["llvm-nm", *args, "--format=posix"], capture_output=True, text=True, check=True)
    return {line.split()[0]: line.split()[1] for line in out.stdout.splitlines()
            if len(line.split()) >= 2 and not line.split()[0].endswith(":")}


def test_vulkan_objects_need_only_libc_and_libdl(packaged):
    """What the linked objects (model, glue, runtime, Vulkan module) take from outside: listed
    libc.so and libdl.so functions (llvm-nm), no Vulkan function (those come from vkGetInstanceProcAddr)."""
    _, _, pkg = packaged
    objects = [str(o) for o in pkg.libraries["arm64-v8a"].objects]
    strong = {name for name, kind in _nm("-u", *objects).items() if kind == "U"}   # weak ones may stay unresolved
    outside = strong - set(_nm("--defined-only", "--extern-only", *objects))
    listed = read_symbols()
    assert {"dlopen", "dlsym", "dlclose", "getenv", "clock_gettime", "realloc"} <= outside
    assert {listed[name].library for name in outside} == {"libc.so", "libdl.so"}


@needs_jdk
@pytest.mark.skipif(os.uname().machine != "x86_64", reason="runs the x86_64 library in this machine's JVM")
def test_x86_64_vulkan_library_runs_on_lavapipe_from_java(packaged, tmp_path):
    art, onnx_path, pkg = packaged
    env = {"LD_LIBRARY_PATH": str(glibc_stand_ins(tmp_path / "libs")), "VK_DRIVER_FILES": vkrt.BOARD.vulkan["icd"],
           "VK_ICD_FILENAMES": vkrt.BOARD.vulkan["icd"], "LP_NUM_THREADS": "1"}
    java = JavaModel(art, PACKAGE, tmp_path / "jvm", library=pkg.libraries["x86_64"].path,
                     java_sources=pkg.path / "java" / PACKAGE.replace(".", "/"), env=env)
    rng = np.random.default_rng(11)
    x2, x8, x9 = (rng.standard_normal((n, 16)).astype(np.float32) for n in (2, 8, 9))
    results = java.run("load\nfloats x2\ntensors x8:float32:8,16\nbuffers x2:float32:2,16\ntensors x9:float32:9,16\n"
                       "close\nload\nfloats x2\nclose\n", {"x2": x2, "x8": x8, "x9": x9})
    assert results[0] == ("OK", [str(art.workspace_bytes), "fixed_arena_(every_size_bounded)"])
    (expected2,), (expected8,) = (onnxruntime_outputs(onnx_path, {"x": x}) for x in (x2, x8))
    np.testing.assert_allclose(results[1][1][0].reshape(2, 4), expected2, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(results[2][1][0], expected8, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(results[3][1][0], expected2, rtol=1e-4, atol=1e-6)
    assert results[4][:3] == ("ERROR", 5, "RXE_ERR_BOUND")             # n = 9 past its bound 8, on the host
    assert results[5] == results[8] == ("OK", [])
    np.testing.assert_allclose(results[7][1][0].reshape(2, 4), expected2, rtol=1e-4, atol=1e-6)   # device reopened


@needs_jdk
@pytest.mark.skipif(os.uname().machine != "x86_64", reason="runs the x86_64 library in this machine's JVM")
def test_missing_vulkan_is_the_named_java_exception(packaged, tmp_path):
    art, _, pkg = packaged
    missing = tmp_path / "no-such-dir" / "libvulkan.so"
    env = {"LD_LIBRARY_PATH": str(glibc_stand_ins(tmp_path / "libs")), "RXE_VULKAN_LIBRARY": str(missing)}
    java = JavaModel(art, PACKAGE, tmp_path / "jvm", library=pkg.libraries["x86_64"].path,
                     java_sources=pkg.path / "java" / PACKAGE.replace(".", "/"), env=env)
    x = np.zeros((1, 16), np.float32)
    results = java.run("load\nload\n", {"x": x})
    status = next(k for k, name in rxe_abi.STATUS_NAMES.items() if name == "RXE_ERR_NO_VULKAN")
    for result in results:   # each load tries again, and fails the same way
        assert result[:3] == ("ERROR", status, "RXE_ERR_NO_VULKAN")
        assert f"cannot load the Vulkan loader {missing}" in result[3]


def test_abis_without_a_vulkan_board_are_refused(packaged, tmp_path):
    art = packaged[0]
    with pytest.raises(RelaxEdgeError, match="ABI armeabi-v7a: no Vulkan library for it"):
        rxe.package(art, PACKAGE, tmp_path / "a", abis=["arm64-v8a", "armeabi-v7a"])
    assert not (tmp_path / "a").exists()


def test_cli_packages_an_onnx_model_for_the_phone_board(packaged, tmp_path, capsys):
    _, onnx_path, _ = packaged
    out = tmp_path / "out"
    code = cli_main(["package", str(onnx_path), "--board", "android-arm64-vulkan", "--dim", "n=1..8",
                     "--java-package", PACKAGE, "--build-dir", str(tmp_path / "build"), "-o", str(out)])
    assert code == 0, capsys.readouterr().err
    desc = json.loads((out / "model.json").read_text())
    assert desc["backend"] == "vulkan" and list(desc["abis"]) == ["arm64-v8a"]
    assert desc["abis"]["arm64-v8a"]["board"] == "android-arm64-vulkan"
    assert "vulkan" in capsys.readouterr().out
    # a C artifact is not packaged as if it were a Vulkan one
    c_art = rxe.build(rxe.from_onnx(onnx_path, dim_bounds={"n": (1, 8)}), board="host", out_dir=tmp_path / "c",
                      name="vkmlp", profile=False)
    assert cli_main(["package", str(c_art.out_dir), "--board", "android-arm64-vulkan", "--java-package", PACKAGE,
                     "-o", str(tmp_path / "out_c")]) == 1
    assert "built with backend c, and board android-arm64-vulkan packages backend vulkan" in capsys.readouterr().err
