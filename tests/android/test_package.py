"""`rxe.package` and `relax-edge package`: the folder an Android app drops in,
checked file by file: each ABI's library read with llvm-readelf (machine,
DT_NEEDED, JNI_OnLoad and the model's API exported, nothing else), the Java
compiled with javac, model.json against the artifact, the README's Gradle,
CMake and adb lines. The x86_64 library, the very file the package ships,
is then loaded into a desktop JVM (glibc standing in for bionic's libc.so)
and run against ONNX Runtime. Nothing here is a phone."""

import hashlib
import json
import os
import re
import shutil
import subprocess

import numpy as np
import pytest

import relax_edge as rxe
from relax_edge.android.library import ABIS
from relax_edge.cli import main as cli_main
from relax_edge.errors import RelaxEdgeError

from .elf_checks import drop_ndk, glibc_stand_ins, without_ndk  # noqa: F401 - without_ndk is an autouse fixture
from .jni_models import CHECK_SOURCE, HAVE_JDK, build_token_model, onnxruntime_outputs

HAVE_CLANG = all(shutil.which(t) for t in ("clang", "ld.lld", "llvm-readelf"))
pytestmark = [pytest.mark.skipif(not HAVE_CLANG, reason="needs Debian's clang, lld and llvm (scripts/setup.sh)"),
              pytest.mark.skipif(not HAVE_JDK, reason="needs a JDK (openjdk-17-jdk-headless, scripts/setup.sh)")]

MACHINES = {"arm64-v8a": "AArch64", "armeabi-v7a": "ARM", "x86_64": "Advanced Micro Devices X86-64"}
SYSTEM_LIBRARIES = {"libc.so", "libm.so", "libdl.so", "liblog.so"}
PACKAGE = "com.example.tokens"


@pytest.fixture(scope="module")
def packaged(tmp_path_factory):
    folder = tmp_path_factory.mktemp("package")
    art, onnx_path = build_token_model(folder)
    with pytest.MonkeyPatch.context() as env:   # the path without an NDK, even where one is installed
        drop_ndk(env)
        return art, onnx_path, rxe.package(art, PACKAGE, folder / "out", abis="all")


def _readelf(*args) -> str:
    proc = subprocess.run(["llvm-readelf", "-W", *map(str, args)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def _files(root) -> set:
    return {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()}


def test_folder_holds_exactly_the_package(packaged):
    art, _, pkg = packaged
    java = f"java/{PACKAGE.replace('.', '/')}"
    sample = f"sample-app/src/main/{java}/sample"
    expected = {f"jniLibs/{abi}/librxe_tokens.so" for abi in ABIS} | {
        f"{java}/RelaxEdgeModel.java", f"{java}/RelaxEdgeException.java",
        "include/model.h", "include/relax_edge/abi.h", "README.md", "model.json", "sample-app/build.gradle.kts",
        "sample-app/src/main/AndroidManifest.xml", f"{sample}/MainActivity.kt", f"{sample}/ModelDemo.kt"}
    assert _files(pkg.path) == expected
    assert [p.name for p in pkg.path.parent.iterdir() if p.name.startswith(".")] == []   # no temp folder left
    assert (pkg.path / "include" / "model.h").read_text() == art.header.read_text()


@pytest.mark.parametrize("abi", list(ABIS))
def test_each_library_is_a_jni_library_for_its_abi(packaged, abi):
    _, _, pkg = packaged
    so = pkg.path / "jniLibs" / abi / "librxe_tokens.so"
    header = _readelf("-h", so)
    assert f"Machine:                           {MACHINES[abi]}" in header and "DYN (Shared object file)" in header
    dynamic = _readelf("-d", so)
    needed = set(re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", dynamic))
    assert needed and needed <= SYSTEM_LIBRARIES, needed
    assert "librxe_tokens.so" in dynamic   # SONAME: the name System.loadLibrary("rxe_tokens") finds
    exported = {line.split()[7] for line in _readelf("--dyn-syms", so).splitlines()
                if len(line.split()) >= 8 and line.split()[4] in ("GLOBAL", "WEAK") and line.split()[6] != "UND"}
    assert exported == {"JNI_OnLoad", "tokens_main", "tokens_main_plan_shapes", "tokens_main_workspace_size",
                        "tokens_module"}
    assert not any(name.startswith("Java_") for name in exported)


def test_model_json_matches_the_artifact(packaged):
    art, _, pkg = packaged
    desc = json.loads((pkg.path / "model.json").read_text())
    sig = art.signature["main"]
    assert desc["signature"] == {"inputs": sig["inputs"], "outputs": sig["outputs"], "sizes": sig["sizes"]}
    assert desc["arena_bytes"] == art.workspace_bytes is None and "first run" in desc["arena"]
    assert desc["bounds"] == {"seq": None}     # unbounded: the ONNX import recorded no bounds
    assert desc["java_class"] == f"{PACKAGE}.RelaxEdgeModel" and desc["load_library"] == "rxe_tokens"
    assert desc["threads"] == 1 and desc["verified_on_device"] is False
    assert set(desc["abis"]) == set(ABIS)
    for entry in desc["abis"].values():
        so = pkg.path / entry["path"]
        assert entry["bytes"] == so.stat().st_size and entry["sha256"] == hashlib.sha256(so.read_bytes()).hexdigest()
        assert entry["api_level"] == 24 and entry["toolchain"] == "clang-stubs" and "JNI_OnLoad" in entry["exported"]


def test_java_and_sample_compile(packaged, tmp_path):
    _, _, pkg = packaged
    sources = sorted(map(str, (pkg.path / "java").rglob("*.java")))
    proc = subprocess.run(["javac", "--release", "8", "-Xlint:all,-options", "-Werror", "-d", str(tmp_path), *sources],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / PACKAGE.replace(".", "/") / "RelaxEdgeModel.class").exists()
    demo = next(pkg.path.joinpath("sample-app").rglob("ModelDemo.kt"))
    if shutil.which("kotlinc"):   # the Kotlin demo the sample activity calls
        proc = subprocess.run(["kotlinc", "-cp", str(tmp_path), str(demo), "-d", str(tmp_path / "kt")],
                              capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr
    assert f"import {PACKAGE}.RelaxEdgeModel" in demo.read_text()


def test_readme_has_the_lines_to_add(packaged):
    _, _, pkg = packaged
    readme = (pkg.path / "README.md").read_text()
    for line in ['jniLibs.srcDirs("../tokens-android/jniLibs")', 'java.srcDirs("../tokens-android/java")',
                 "sourceSets", "add_library(rxe_tokens SHARED IMPORTED)",
                 "${RXE_MODEL_DIR}/jniLibs/${ANDROID_ABI}/librxe_tokens.so",
                 f"adb shell am start -n {PACKAGE}.sample/.MainActivity", "./gradlew :sample-app:installDebug",
                 "None of this was run on a real phone"]:
        assert line in readme, line
    gradle = (pkg.path / "sample-app" / "build.gradle.kts").read_text()
    assert 'jniLibs.srcDirs("../jniLibs")' in gradle and f'applicationId = "{PACKAGE}.sample"' in gradle


def test_shipped_x86_64_library_runs_in_a_desktop_jvm(packaged, tmp_path):
    """The package's own x86_64 .so (JNI glue, model, runtime) loaded by
    glibc's dynamic linker into a JVM; its DT_NEEDED libc.so resolved to glibc."""
    _, onnx_path, pkg = packaged
    stand_in = glibc_stand_ins(tmp_path / "libs")
    src = tmp_path / "java"
    shutil.copytree(pkg.path / "java", src)
    check = src / PACKAGE.replace(".", "/") / "JniCheck.java"
    check.write_text(CHECK_SOURCE.read_text().replace("package PACKAGE;", f"package {PACKAGE};"))
    subprocess.run(["javac", "--release", "8", "-nowarn", "-d", str(tmp_path / "classes"),
                    *map(str, src.rglob("*.java"))], check=True, capture_output=True)
    ids, mask = np.array([3, 1, 4, 1, 5, 9], np.int64), np.array([1, 1, 0, 1, 0, 1], np.uint8)
    ids.tofile(tmp_path / "ids"), mask.tofile(tmp_path / "mask")
    (tmp_path / "script.txt").write_text("load\ntensors ids:int64:6 mask:uint8:6\ntensors ids:int64:6 mask:uint8:5\n")
    env = dict(os.environ, LD_LIBRARY_PATH=str(stand_in))
    proc = subprocess.run(["java", "-Xcheck:jni", f"-Djava.library.path={pkg.path / 'jniLibs' / 'x86_64'}", "-cp",
                           str(tmp_path / "classes"), f"{PACKAGE}.JniCheck", str(tmp_path / "script.txt")],
                          capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("0 OK") and lines[2].startswith("2 ERROR 4 RXE_ERR_SHAPE"), proc.stdout
    outputs = [item.split(":") for item in lines[1].split()[2:]]
    expected = onnxruntime_outputs(onnx_path, {"ids": ids, "mask": mask})
    for (_, dtype, shape, name), ref in zip(outputs, expected, strict=True):
        got = np.fromfile(tmp_path / name, dtype=dtype).reshape([int(d) for d in shape.split(",")])
        np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-6)


def test_bad_requests_fail_before_any_build(packaged, tmp_path):
    art = packaged[0]
    with pytest.raises(RelaxEdgeError, match="'1bad' starts with a digit"):
        rxe.package(art, "com.1bad", tmp_path / "a")
    with pytest.raises(RelaxEdgeError, match="unknown Android ABI 'mips'"):
        rxe.package(art, PACKAGE, tmp_path / "b", abis=["mips"])
    other = tmp_path / "c"
    other.mkdir()
    (other / "notes.txt").write_text("mine")
    with pytest.raises(RelaxEdgeError, match="not a relax-edge package"):
        rxe.package(art, PACKAGE, other)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c"] and (other / "notes.txt").read_text() == "mine"


def test_cli_replaces_an_earlier_package(packaged, tmp_path, capsys):
    art, _, pkg = packaged
    out = tmp_path / "out"
    shutil.copytree(pkg.path, out)   # an earlier package with three ABIs
    code = cli_main(["package", str(art.out_dir), "--board", "android-arm64", "--java-package", "com.example.tok",
                     "-o", str(out)])
    assert code == 0, capsys.readouterr().err
    assert sorted(p.name for p in (out / "jniLibs").iterdir()) == ["arm64-v8a"]   # the board's ABI only
    assert json.loads((out / "model.json").read_text())["java_class"] == "com.example.tok.RelaxEdgeModel"
    assert (out / "java" / "com" / "example" / "tok" / "RelaxEdgeModel.java").exists()
    assert not (out / "java" / "com" / "example" / "tokens").exists()
    assert [p.name for p in tmp_path.iterdir()] == ["out"]
    assert "packaged tokens for Android" in capsys.readouterr().out
    assert cli_main(["package", str(art.out_dir), "--java-package", "com.class.x", "-o", str(out)]) == 2
    assert "'class' is a Java keyword" in capsys.readouterr().err
