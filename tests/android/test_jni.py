"""The JNI glue and the Java class on the host: the glue of a host artifact
built into a .so (cc -shared -fPIC against the JDK's jni.h), the generated
Java compiled with javac --release 8, and a JVM (System.loadLibrary, with
-Xcheck:jni) running the model; outputs compared with numpy and ONNX Runtime."""

import subprocess

import numpy as np
import pytest

from relax_edge.android import jni
from relax_edge.errors import RelaxEdgeError

from .jni_models import HAVE_JDK, JavaModel, build_mlp, build_token_model, mlp_reference, onnxruntime_outputs

needs_jdk = pytest.mark.skipif(not HAVE_JDK, reason="no JDK (javac, java, jni.h): scripts/setup.sh installs "
                                                    "openjdk-17-jdk-headless")


@pytest.fixture(scope="module")
def mlp(tmp_path_factory):
    folder = tmp_path_factory.mktemp("jni_mlp")
    art, weights, _ = build_mlp(folder)
    return art, weights, JavaModel(art, "org.relaxedge.check.mlp", folder / "jvm")


@pytest.fixture(scope="module")
def tokens(tmp_path_factory):
    folder = tmp_path_factory.mktemp("jni_tokens")
    art, onnx_path = build_token_model(folder)
    return art, onnx_path, JavaModel(art, "org.relaxedge.check.tokens", folder / "jvm")


@needs_jdk
def test_mlp_runs_from_java(mlp):
    art, weights, java = mlp
    rng = np.random.default_rng(0)
    x2, x8, x3 = (rng.standard_normal((n, 16)).astype(np.float32) for n in (2, 8, 3))
    results = java.run("load\nfloats x2.bin\ntensors x8.bin:float32:8,16\nbuffers x3.bin:float32:3,16\n"
                       "tensors x8.bin:float32:4,32\narena\nclose\n",
                       {"x2.bin": x2, "x8.bin": x8, "x3.bin": x3})
    assert results[0] == ("OK", [str(art.workspace_bytes), "fixed_arena_(every_size_bounded)"])
    (y2,) = results[1][1]                      # run(float[]...): the batch inferred from the length
    np.testing.assert_allclose(y2.reshape(2, 4), mlp_reference(weights, x2), rtol=1e-5, atol=1e-6)
    for (status, outs), x in ((results[2], x8), (results[3], x3)):
        assert status == "OK" and outs[0].shape == (len(x), 4)
        np.testing.assert_allclose(outs[0], mlp_reference(weights, x), rtol=1e-5, atol=1e-6)
    assert results[4][:3] == ("ERROR", 4, "RXE_ERR_SHAPE") and "16" in results[4][3]   # (4, 32) for (n, 16)
    assert results[5] == ("OK", [str(art.workspace_bytes)])


@needs_jdk
def test_symbolic_model_at_two_sizes_matches_onnxruntime(tokens):
    art, onnx_path, java = tokens
    ids5, mask5 = np.array([1, 5, 3, 0, 15], np.int64), np.array([1, 0, 1, 1, 0], np.uint8)
    ids3, mask3 = np.array([2, 2, 9], np.int64), np.array([0, 1, 0], np.uint8)
    ids7, mask7 = np.arange(7, dtype=np.int64)[::-1].copy(), np.ones(7, np.uint8)
    results = java.run("load\nbuffers ids5:int64:5 mask5:uint8:5\narena\ntensors ids3:int64:3 mask3:uint8:3\n"
                       "tensors ids7:int64:7 mask7:uint8:7\nclose\nload_sizes seq=7\n"
                       "tensors ids7:int64:7 mask7:uint8:7\n",
                       {"ids5": ids5, "mask5": mask5, "ids3": ids3, "mask3": mask3, "ids7": ids7, "mask7": mask7})
    assert results[0] == ("OK", ["0", "sized_by_the_first_run"])   # seq is unbounded: no arena before a run
    for k, ids, mask in ((1, ids5, mask5), (3, ids3, mask3), (7, ids7, mask7)):
        status, outs = results[k]
        assert status == "OK", results[k]
        expected = onnxruntime_outputs(onnx_path, {"ids": ids, "mask": mask})
        assert [o.dtype for o in outs] == [np.float32, np.int32, np.int64]
        np.testing.assert_allclose(outs[0], expected[0], rtol=1e-5, atol=1e-6)
        np.testing.assert_array_equal(outs[1], expected[1])
        np.testing.assert_array_equal(outs[2], expected[2])   # NonZero: the array cut to the dims the run reported
    first_arena = int(results[2][1][0])
    assert first_arena > 0
    # the arena sized by the first run (seq=5) serves seq=3 and refuses seq=7, which needs more
    assert results[4][:3] == ("ERROR", 6, "RXE_ERR_WORKSPACE") and str(first_arena) in results[4][3]
    assert results[6][0] == "OK" and int(results[6][1][0]) > first_arena   # load(Map.of("seq", 7L))


@needs_jdk
def test_bad_input_is_an_exception_with_the_status(tokens):
    _, _, java = tokens
    ids5, mask5, mask3 = np.arange(5, dtype=np.int64), np.ones(5, np.uint8), np.ones(3, np.uint8)
    script = "\n".join([
        "load",
        "tensors ids5:int32:5 mask5:uint8:5",        # an int[] for an int64 input
        "tensors ids5:int64:4 mask5:uint8:5",        # 5 values for a shape of 4
        "tensors ids5:int64:5 mask3:uint8:3",        # seq bound to 5 by ids, 3 by mask
        "tensors ids5:int64:5,1 mask5:uint8:5",      # rank 2 for rank 1
        "tensors ids5:int64:-5 mask5:uint8:5",       # a negative dim
        "heap ids5:int64:5 mask5:uint8:5",           # a heap ByteBuffer
        "no_inputs", "null_input", "null_tensor", "null_inputs",
        "float_output",                             # an int32 output read as floats
        "load_sizes len=7",                         # a size the model does not have
        "load", "close", "close",                   # close is idempotent
        "tensors ids5:int64:5 mask5:uint8:5", "arena",   # use after close
        "load", "tensors empty:int64:0 empty:uint8:0", "buffers empty:int64:0 empty:uint8:0",   # seq = 0 < 1
    ]) + "\n"
    r = java.run(script, {"ids5": ids5, "mask5": mask5, "mask3": mask3, "empty": np.zeros(0, np.int64)})
    names = [x[2] if x[0] == "ERROR" else "OK" for x in r]
    assert names == ["OK", "RXE_ERR_DTYPE", "RXE_ERR_SHAPE", "RXE_ERR_SHAPE", "RXE_ERR_RANK", "RXE_ERR_SHAPE",
                     "RXE_ERR_NULL", "RXE_ERR_ARGUMENT_COUNT", "RXE_ERR_ARGUMENT_COUNT", "RXE_ERR_NULL",
                     "RXE_ERR_NULL", "RXE_ERR_DTYPE", "RXE_ERR_ARGUMENT_COUNT", "OK", "OK", "OK",
                     "RXE_ERR_NULL", "RXE_ERR_NULL", "OK", "RXE_ERR_BOUND", "RXE_ERR_BOUND"]
    assert "input ids: got int[], expected long[]" in r[1][3]
    assert "5 values for shape (4,)" in r[2][3]
    assert "mask" in r[3][3] and "seq" in r[3][3]       # the runtime's own message, through the exception
    assert "direct" in r[6][3]
    assert "run takes 2 inputs (ids, mask), got 0" in r[7][3]
    assert "unknown len" in r[12][3] or "missing seq" in r[12][3]
    assert r[16][3] == r[17][3] == "the model is closed"
    assert all(x[1] == {"RXE_ERR_DTYPE": 2, "RXE_ERR_SHAPE": 4, "RXE_ERR_RANK": 3, "RXE_ERR_NULL": 7,
                        "RXE_ERR_ARGUMENT_COUNT": 1, "RXE_ERR_BOUND": 5}[x[2]] for x in r if x[0] == "ERROR")


@needs_jdk
def test_bound_is_checked_by_the_runtime(mlp):
    _, _, java = mlp
    x9 = np.zeros((9, 16), np.float32)
    r = java.run("load\ntensors x9:float32:9,16\nfloats x9\n", {"x9": x9})
    assert r[1][:3] == ("ERROR", 5, "RXE_ERR_BOUND") and "n" in r[1][3]
    assert r[2][:3] == ("ERROR", 5, "RXE_ERR_BOUND")


@needs_jdk
def test_glue_exports_only_jni_onload(tokens, tmp_path):
    art = tokens[0]
    (glue,) = jni.write_sources(jni.glue_sources(art, "org.relaxedge.check.tokens"), tmp_path)
    obj = tmp_path / "glue.o"
    subprocess.run(["cc", "-std=c99", "-Wall", "-Wextra", "-Werror", "-fPIC", "-c", str(glue), "-o", str(obj),
                    *[f"-I{d}" for d in [jni.runtime_dir() / "include", *jni.jni_include_dirs()]]], check=True)
    nm = subprocess.run(["nm", "--defined-only", "--extern-only", str(obj)], capture_output=True, text=True,
                        check=True).stdout.split()
    assert [w for w in nm if not len(w) == 1 and not all(c in "0123456789abcdef" for c in w)] == ["JNI_OnLoad"]
    text = glue.read_text()
    assert "Java_" not in text and "RegisterNatives" in text


@needs_jdk
@pytest.mark.parametrize("target", ["aarch64-linux-android24", "armv7a-linux-androideabi24"])
def test_glue_compiles_without_libc_headers(tokens, tmp_path, target):
    """As an Android library without the NDK compiles it: freestanding, no
    libc headers; the stand-in <stdio.h> satisfies the JDK's jni.h."""
    (glue,) = jni.write_sources(jni.glue_sources(tokens[0], "org.relaxedge.check.tokens"), tmp_path)
    includes = [f"-I{d}" for d in [jni.runtime_dir() / "include", *jni.jni_include_dirs(freestanding=True)]]
    subprocess.run(["clang", f"--target={target}", "-std=c99", "-ffreestanding", "-nostdlibinc", "-fPIC", "-Wall",
                    "-Werror", *includes, "-c", str(glue), "-o", str(tmp_path / "glue.o")], check=True)
    undefined = subprocess.run(["llvm-nm", "-u", str(tmp_path / "glue.o")], capture_output=True, text=True,
                               check=True).stdout.split()
    libc = {u for u in undefined if u not in ("U", "tokens_module") and not u.startswith("__aeabi_")}
    assert libc <= {"malloc", "free", "memset", "memcpy"}, libc


@pytest.mark.parametrize("name, problem", [("com.1bad", "starts with a digit"), ("com..model", "is empty"),
                                           ("com.class.x", "keyword"), ("com.ex-ample", "not a Java identifier"),
                                           ("", "expected a name")])
def test_java_package_is_checked(name, problem):
    with pytest.raises(RelaxEdgeError, match=problem):
        jni.check_java_package(name)


def test_java_package_accepted():
    assert jni.check_java_package("com.example.model_2") == "com.example.model_2"
    assert jni.shape_dims("(n, 784)") == [None, 784] and jni.shape_dims("(5,)") == [5] and jni.shape_dims("()") == []
