"""Malformed and adversarial ONNX models: each is refused with an
OnnxImportError whose message names the problem, and a short seeded fuzz
run finds nothing but clean refusals.

The corpus in tests/frontend/malformed/ is written by
scripts/make_malformed_onnx.py; expected.json holds, per model, a fragment
its error message must contain.
"""

import importlib.util
import json
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import relax_edge as rxe
from relax_edge.frontend.onnx import OnnxImportError

ROOT = Path(__file__).resolve().parents[2]
CORPUS = Path(__file__).parent / "malformed"
EXPECTED = json.loads((CORPUS / "expected.json").read_text())


def test_corpus_matches_its_generator():
    assert len(EXPECTED) >= 50
    assert sorted(p.name for p in CORPUS.glob("*.onnx")) == sorted(EXPECTED)


@pytest.mark.timeout(30)
@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_malformed_model_is_refused(name):
    with pytest.raises(OnnxImportError) as info:
        rxe.from_onnx(CORPUS / name)
    assert EXPECTED[name] in str(info.value)


def test_malformed_bytes_are_refused_as_bytes():
    data = (CORPUS / "init_negative_dim.onnx").read_bytes()
    with pytest.raises(OnnxImportError, match="initializer w: dimension 0 is -5"):
        rxe.from_onnx(data)


def test_external_data_needs_the_model_path():
    model = onnx.load(CORPUS / "external_past_end.onnx", load_external_data=False)
    with pytest.raises(OnnxImportError, match="initializer w: its data is in the external file 'external_short.bin'"):
        rxe.from_onnx(model)


def _add_model(init):
    graph = helper.make_graph([helper.make_node("Add", ["x", "w"], ["y"], name="add")], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3])], [init])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def test_external_data_inside_the_folder_is_read(tmp_path):
    weights = np.array([1.0, 2.0, 3.0], np.float32)
    (tmp_path / "w.bin").write_bytes(b"\0" * 4 + weights.tobytes())
    init = TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[3], data_location=TensorProto.EXTERNAL)
    for key, value in (("location", "w.bin"), ("offset", "4"), ("length", "12")):
        init.external_data.add(key=key, value=value)
    onnx.save(_add_model(init), tmp_path / "m.onnx")
    mod = rxe.from_onnx(tmp_path / "m.onnx")
    x = np.ones(3, np.float32)
    np.testing.assert_array_equal(rxe.interpret(mod, x), x + weights)


def test_external_data_through_a_symlink_out_of_the_folder(tmp_path):
    outside = tmp_path / "outside.bin"
    outside.write_bytes(b"\0" * 12)
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "w.bin").symlink_to(outside)
    init = TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[3], data_location=TensorProto.EXTERNAL)
    init.external_data.add(key="location", value="w.bin")
    onnx.save(_add_model(init), tmp_path / "model" / "m.onnx")
    with pytest.raises(OnnxImportError, match="initializer w: external data location 'w.bin' is outside"):
        rxe.from_onnx(tmp_path / "model" / "m.onnx")


def test_max_constant_bytes_is_a_keyword():
    shape = numpy_helper.from_array(np.array([64, 64], np.int64), "s")
    graph = helper.make_graph([helper.make_node("ConstantOfShape", ["s"], ["y"], name="fill")], "g", [],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [64, 64])], [shape])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    assert rxe.from_onnx(model) is not None  # 16 KiB: under the default cap
    with pytest.raises(OnnxImportError, match=r"node fill \(ConstantOfShape\): .* would take 16384 bytes, "
                                              r"more than max_constant_bytes=1000"):
        rxe.from_onnx(model, max_constant_bytes=1000)


def _model(nodes, inputs, outputs, inits=()):
    graph = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(inits))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def test_trailing_omitted_inputs_are_dropped():
    model = _model([helper.make_node("Exp", ["x", ""], ["y"], name="exp")],
                   [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    x = np.array([0.0, 1.0], np.float32)
    np.testing.assert_allclose(rxe.interpret(rxe.from_onnx(model), x), np.exp(x), rtol=1e-6)


def test_nonzero_of_a_constant_folds():
    model = _model([helper.make_node("NonZero", ["c"], ["y"], name="nz")], [],
                   [helper.make_tensor_value_info("y", TensorProto.INT64, None)],
                   [numpy_helper.from_array(np.array([0.0, 3.0, 0.0, 4.0], np.float32), "c")])
    np.testing.assert_array_equal(rxe.interpret(rxe.from_onnx(model)), [[1, 3]])


def test_range_with_a_tiny_step_the_wrong_way_is_empty():
    inits = [numpy_helper.from_array(np.array(v, np.float32), n) for n, v in
             (("s", 1.0), ("l", 5.0), ("d", -1.5e-36))]
    model = _model([helper.make_node("Range", ["s", "l", "d"], ["y"], name="rg")], [],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    assert rxe.interpret(rxe.from_onnx(model)).shape == (0,)


def test_an_unexpected_error_in_a_converter_names_the_node(monkeypatch):
    from relax_edge.frontend.onnx.context import CONVERTERS

    def broken(ctx, inputs):
        return {}["missing"]
    monkeypatch.setitem(CONVERTERS, "Relu", broken)
    model = _model([helper.make_node("Relu", ["x"], ["y"], name="act")],
                   [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    with pytest.raises(OnnxImportError, match=r"node act \(Relu\): cannot be imported \(KeyError: 'missing'\)") as info:
        rxe.from_onnx(model)
    assert isinstance(info.value.__cause__, KeyError)


def _load_fuzzer():
    spec = importlib.util.spec_from_file_location("fuzz_onnx", ROOT / "scripts" / "fuzz_onnx.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("fuzz_onnx", module)
    spec.loader.exec_module(module)
    return module


@pytest.mark.timeout(300)
def test_seeded_fuzz_run_finds_only_clean_refusals():
    fuzz = _load_fuzzer()
    seeds = fuzz.node_test_seeds(limit=60)
    report = fuzz.fuzz(seeds, runs=300, seed=1234, time_limit_s=10)
    assert report.runs == 300
    assert report.imported + report.refused == 300, report.describe()
    assert not report.findings, report.describe()
    assert report.refused > 0 and report.imported > 0


def test_external_data_of_undefined_type_is_named_before_it_is_read(tmp_path):
    (tmp_path / "w.bin").write_bytes(b"\0" * 64)
    weight = onnx.TensorProto(name="w", data_type=onnx.TensorProto.UNDEFINED, dims=[4],
                              data_location=onnx.TensorProto.EXTERNAL)
    weight.external_data.add(key="location", value="w.bin")
    graph = onnx.helper.make_graph(
        [onnx.helper.make_node("Add", ["x", "w"], ["y"])], "g",
        [onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [4])],
        [onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [4])], [weight])
    model = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 17)])
    (tmp_path / "m.onnx").write_bytes(model.SerializeToString())
    with pytest.raises(OnnxImportError, match=r"initializer w: the element type is undefined \(data_type 0\)"):
        rxe.from_onnx(str(tmp_path / "m.onnx"))
