"""Two small models for the JNI tests, and a driver that runs JniCheck.java
(a script of commands against the generated RelaxEdgeModel) in a JVM.

- the MLP (ONNX): x (n <= 8, 16) float32 -> dense 32, relu -> dense 4,
  softmax (every size bounded: a fixed arena); its reference is numpy.
- the token model (ONNX): ids int64 (seq,), mask uint8 (seq,), seq unbounded
  -> Gather of a 16x8 table, MatMul 8x4, times the mask (float32 (seq, 4)),
  the ids as int32 (seq,), NonZero(mask) int64 (1, nz) (a data-dependent dim);
  its reference is ONNX Runtime with graph optimizations off.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import numpy as np

import relax_edge as rxe
from relax_edge.android import jni

CHECK_SOURCE = Path(__file__).with_name("JniCheck.java")
HAVE_JDK = shutil.which("javac") is not None and shutil.which("java") is not None and jni.jdk_home() is not None


def mlp_weights(seed: int = 3) -> list:
    rng = np.random.default_rng(seed)
    shapes = [(16, 32), (32,), (32, 4), (4,)]
    return [(rng.standard_normal(s) / np.sqrt(s[0])).astype(np.float32) for s in shapes]


def mlp_reference(weights, x: np.ndarray) -> np.ndarray:
    w1, b1, w2, b2 = (w.astype(np.float64) for w in weights)
    logits = np.maximum(x @ w1 + b1, 0) @ w2 + b2
    e = np.exp(logits - logits.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def _save_onnx(path: Path, nodes: list, inputs: list, outputs: list, constants: dict) -> Path:
    """An opset-17 model of (op, inputs, outputs, attrs) nodes; inputs and
    outputs as (name, TensorProto type, dims)."""
    import onnx
    from onnx import helper, numpy_helper
    graph = helper.make_graph([helper.make_node(o, i, r, **a) for o, i, r, a in nodes], path.stem,
                              [helper.make_tensor_value_info(*v) for v in inputs],
                              [helper.make_tensor_value_info(*v) for v in outputs],
                              [numpy_helper.from_array(v, k) for k, v in constants.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    return path


def save_mlp(path: Path, weights) -> Path:
    from onnx import TensorProto
    nodes = [("MatMul", ["x", "w1"], ["a1"], {}), ("Add", ["a1", "b1"], ["z1"], {}), ("Relu", ["z1"], ["h"], {}),
             ("MatMul", ["h", "w2"], ["a2"], {}), ("Add", ["a2", "b2"], ["z2"], {}),
             ("Softmax", ["z2"], ["y"], {"axis": -1})]
    return _save_onnx(path, nodes, [("x", TensorProto.FLOAT, ["n", 16])], [("y", TensorProto.FLOAT, ["n", 4])],
                      dict(zip(["w1", "b1", "w2", "b2"], weights)))


def save_token_model(path: Path) -> Path:
    from onnx import TensorProto
    rng = np.random.default_rng(5)
    constants = {"table": rng.standard_normal((16, 8)).astype(np.float32),
                 "w": rng.standard_normal((8, 4)).astype(np.float32), "axis": np.array([-1], np.int64)}
    nodes = [("Gather", ["table", "ids"], ["emb"], {}), ("MatMul", ["emb", "w"], ["mm"], {}),
             ("Cast", ["mask"], ["mf"], {"to": TensorProto.FLOAT}), ("Unsqueeze", ["mf", "axis"], ["mu"], {}),
             ("Mul", ["mm", "mu"], ["y"], {}), ("Cast", ["ids"], ["ids32"], {"to": TensorProto.INT32}),
             ("NonZero", ["mask"], ["nz"], {})]
    return _save_onnx(path, nodes, [("ids", TensorProto.INT64, ["seq"]), ("mask", TensorProto.UINT8, ["seq"])],
                      [("y", TensorProto.FLOAT, ["seq", 4]), ("ids32", TensorProto.INT32, ["seq"]),
                       ("nz", TensorProto.INT64, [1, None])], constants)


def onnxruntime_outputs(path: Path, feeds: dict) -> list:
    import onnxruntime as ort
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


def _build(onnx_path: Path, out_dir: Path, name: str, bounds: dict):
    source = {"onnx": str(onnx_path), "dim_bounds": {k: list(v) for k, v in bounds.items()}, "max_context": None}
    return rxe.build(rxe.from_onnx(onnx_path, dim_bounds=bounds or None), board="host", out_dir=out_dir, name=name,
                     source=source, profile=False)


def build_mlp(folder: Path):
    """The MLP with n bounded to 1..8: (artifact, weights, ONNX path)."""
    weights = mlp_weights()
    onnx_path = save_mlp(folder / "jnimlp.onnx", weights)
    return _build(onnx_path, folder / "jnimlp", "jnimlp", {"n": (1, 8)}), weights, onnx_path


def build_token_model(folder: Path):
    """The token model, seq unbounded: (artifact, ONNX path)."""
    onnx_path = save_token_model(folder / "tokens.onnx")
    return _build(onnx_path, folder / "tokens", "tokens", {}), onnx_path


class JavaModel:
    """A host JNI library of `art`, its Java classes and JniCheck, compiled
    into `folder`; `run(script, tensors)` writes the tensors, runs the
    script in a JVM and returns one parsed result per command."""

    def __init__(self, art, java_package: str, folder: Path, library: Path | None = None,
                 java_sources: Path | None = None, env: dict | None = None):
        """`library` (and `java_sources`, the Java folder of a package): a
        library built elsewhere, e.g. an x86_64 Android library, run with
        `env` added to the JVM's environment; else the host JNI library."""
        self.folder = folder
        self.env = env or {}
        self.library = library or jni.build_host_library(art, java_package, folder / "native")
        src = folder / "java" / Path(*java_package.split("."))
        if java_sources is None:
            jni.write_sources(jni.java_sources(art, java_package), src)
        else:
            shutil.copytree(java_sources, src)
        check = CHECK_SOURCE.read_text().replace("package PACKAGE;", f"package {java_package};")
        (src / "JniCheck.java").write_text(check)
        self.main = f"{java_package}.JniCheck"
        javac = subprocess.run(["javac", "--release", "8", "-Xlint:all,-options", "-Werror", "-d",
                                str(folder / "classes"), *map(str, sorted(src.glob("*.java")))],
                               capture_output=True, text=True)
        assert javac.returncode == 0, javac.stderr

    def run(self, script: str, tensors: dict) -> list:
        work = self.folder / "work"
        work.mkdir(exist_ok=True)
        for name, arr in tensors.items():
            np.ascontiguousarray(arr).tofile(work / name)
        (work / "script.txt").write_text(script)
        proc = subprocess.run(["java", "-Xcheck:jni", f"-Djava.library.path={self.library.parent}", "-cp",
                               str(self.folder / "classes"), self.main, str(work / "script.txt")],
                              capture_output=True, text=True, timeout=120, env={**os.environ, **self.env})
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert "WARNING" not in proc.stderr, proc.stderr   # -Xcheck:jni's complaints
        results = []
        for line in proc.stdout.splitlines():
            _, status, *rest = line.split(" ")
            if status == "OK":
                results.append(("OK", [self._output(work, item) for item in rest if item.count(":") == 3] or rest))
            else:
                assert status == "ERROR", line   # a THROWABLE: a Java exception other than RelaxEdgeException
                results.append(("ERROR", int(rest[0]), rest[1], " ".join(rest[2:])))
        assert len(results) == len([x for x in script.splitlines() if x.strip()]), proc.stdout
        return results

    @staticmethod
    def _output(work: Path, item: str) -> np.ndarray:
        _, dtype, shape, name = item.split(":")
        data = np.fromfile(work / name, dtype=dtype)
        return data if shape == "-" else data.reshape([int(d) for d in shape.split(",") if d])
