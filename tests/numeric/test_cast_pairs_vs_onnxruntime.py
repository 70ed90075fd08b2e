"""ONNX Cast between every pair of the element types relax_edge imports
(bfloat16 aside), against ONNX Runtime: imported and interpreted, and the
pairs from or to a dtype added in M11 (float16 aside: its kernels are not
generated) in one model compiled on the host with the C and LLVM backends.
Values stay where C defines the conversion (no negative float to an
unsigned type, no float out of the target's range); integer to integer
wraps, as ONNX Runtime's static_cast."""

import numpy as np
import pytest
from onnx import TensorProto, helper

import relax_edge as rxe
from tests.frontend.one_node import assert_matches, compiled

ort = pytest.importorskip("onnxruntime")

ELEM = {"float32": TensorProto.FLOAT, "float16": TensorProto.FLOAT16, "float64": TensorProto.DOUBLE,
        "int8": TensorProto.INT8, "int16": TensorProto.INT16, "int32": TensorProto.INT32,
        "int64": TensorProto.INT64, "uint8": TensorProto.UINT8, "uint16": TensorProto.UINT16,
        "uint32": TensorProto.UINT32, "uint64": TensorProto.UINT64, "bool": TensorProto.BOOL}
DTYPES = list(ELEM)
COMPILED = [d for d in DTYPES if d != "float16"]
NEW = ("float64", "int16", "uint16", "uint32", "uint64")


def values(src: str, dst: str, rows: int) -> np.ndarray:
    """(rows, 6) values of `src` that convert to `dst` without undefined behaviour."""
    if src == "bool":
        return np.array([[True, False, True, True, False, r % 2 == 0] for r in range(rows)])
    if src.startswith("float"):
        if dst.startswith("u"):
            base = [0.0, 1.0, 2.5, 7.9, 100.25, 127.0]
        elif dst.startswith("int"):
            base = [0.0, -1.0, -2.5, 7.9, 100.25, -127.0]
        else:
            base = [0.0, -1.0, -2.5, 7.9, 100.25, 3.0e4]
    else:
        info = np.iinfo(src)
        if dst.startswith("float") or dst == "bool":   # exact in every float type, float16 included
            base = [0, 1, min(info.max, 2000), max(info.min, -2000), 100, 7]
        else:
            base = [0, 1, info.max, info.min, 100, info.max // 3]
    return np.array([base[:4] + [base[4] + r, base[5]] for r in range(rows)], dtype=object).astype(src)


def cast_model(pairs):
    """Inputs x_SRC (n, 6), outputs SRC_to_DST = Cast(x_SRC, to=DST) for each pair."""
    sources = sorted({s for s, _ in pairs}, key=DTYPES.index)
    nodes = [helper.make_node("Cast", [f"x_{s}"], [f"{s}_to_{d}"], to=ELEM[d]) for s, d in pairs]
    graph = helper.make_graph(nodes, "cast", [helper.make_tensor_value_info(f"x_{s}", ELEM[s], ["n", 6])
                                              for s in sources],
                              [helper.make_tensor_value_info(f"{s}_to_{d}", ELEM[d], ["n", 6]) for s, d in pairs])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)]), sources


def ort_run(model, feeds):
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)


@pytest.mark.parametrize("src", DTYPES)
def test_cast_from_every_dtype_interpreted(src):
    pairs = [(src, d) for d in DTYPES]
    model, _ = cast_model(pairs)
    mod = rxe.from_onnx(model)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    for rows in (1, 3):
        for k, dst in enumerate(DTYPES):   # the values depend on the target: one run per target
            x = values(src, dst, rows)
            assert_matches(rxe.interpret(mod, x)[k], session.run(None, {f"x_{src}": x})[k])


@pytest.mark.parametrize("backend", ["c", "llvm"])
def test_cast_pairs_compiled(backend, tmp_path):
    """Every pair from or to a dtype added in M11 (float16 aside), in one model."""
    pairs = [(s, d) for s in COMPILED for d in COMPILED if s != d and (s in NEW or d in NEW)]
    model, sources = cast_model(pairs)

    def safe(src, rows):   # values every target takes: floats non-negative and small, integers exact in floats
        return values(src, "uint8" if src.startswith("float") else "float32", rows)
    with compiled(model, backend, tmp_path) as loaded:
        for rows in (1, 4):
            feeds = {f"x_{s}": safe(s, rows) for s in sources}
            want = ort_run(model, feeds)
            got = loaded.run(*feeds.values())
            assert len(got) == len(want) == len(pairs)
            for g, w in zip(got, want):
                assert_matches(g, w)
