"""scripts/onnx_node_tests.py and node_tests' runner: the scope is the
converter registry (a converter registered is counted at once), `--ops`
filters before running, `--all` puts ONNX Runtime's column beside ours and
`--json` writes every case's result atomically."""

import dataclasses
import json
import runpy
from pathlib import Path

import pytest

from relax_edge.frontend.onnx import node_tests
from relax_edge.frontend.onnx.context import CONVERTERS, converter

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "onnx_node_tests.py"


@pytest.fixture(scope="module")
def script():
    return runpy.run_path(str(SCRIPT))["main"]


def _case(name):
    return next(c for c in node_tests.collect_cases() if c.name == name)


def test_a_registered_converter_is_in_scope_at_once():
    assert "RxeTestOnlyOp" not in node_tests.SUPPORTED_OPS
    converter("RxeTestOnlyOp")(lambda ctx, inputs: inputs[0])
    try:
        assert "RxeTestOnlyOp" in node_tests.SUPPORTED_OPS
        assert node_tests.scope_problem(_case("test_relu").model) == ""
    finally:
        del CONVERTERS["RxeTestOnlyOp"]
    assert "RxeTestOnlyOp" not in node_tests.SUPPORTED_OPS


def test_a_case_outside_the_registry_names_its_operators():
    case = _case("test_string_concat")
    assert node_tests.scope_problem(case.model) == "operators StringConcat"
    result = node_tests.run_case(case)
    assert result.status == "out_of_scope" and "string tensors" in result.left_out


@pytest.mark.parametrize("name,reason", [
    ("test_string_concat", "StringConcat: string tensors"),
    ("test_sequence_insert_at_back", "sequence and optional types"),
    ("test_adagrad", "training operator"),
    ("test_ai_onnx_ml_binarizer", "ai.onnx.ml operator"),
    ("test_batchnorm_example_training_mode", "training-mode"),
    ("test_relu", ""),
    ("test_dropout_default", ""),
])
def test_cases_left_out_by_design_say_why(name, reason):
    got = node_tests.left_out_reason(name, _case(name).model)
    assert (reason in got) if reason else got == ""


def test_ort_runs_a_case_and_reports_a_wrong_expectation():
    assert node_tests.ort_available()
    case = _case("test_relu")
    assert node_tests.run_case_ort(case).status == "pass"
    inputs, outputs = case.data_sets[0]
    wrong = dataclasses.replace(case, data_sets=[(inputs, [outputs[0] + 1])])
    result = node_tests.run_case_ort(wrong)
    assert result.status == "fail" and "values differ" in result.detail


def test_side_by_side_counts_per_operator_and_the_share_of_ort_passes():
    R = node_tests.CaseResult
    ours = [R("a", ("Relu",), "pass"), R("b", ("Relu", "Add"), "fail"), R("c", ("Det",), "out_of_scope")]
    theirs = [R("a", ("Relu",), "pass"), R("b", ("Relu", "Add"), "pass"), R("c", ("Det",), "fail")]
    s = node_tests.compare_with_ort(ours, theirs)
    assert dict(s["per_op"]["Relu"]) == {"cases": 2, "ours": 1, "ort": 2, "both": 1, "in_scope": 2,
                                         "ort_kept": 2, "both_kept": 1}
    assert s["per_op"]["Det"]["cases"] == 1 and s["per_op"]["Det"]["ort"] == 0
    assert (s["totals"]["cases"], s["totals"]["ours"], s["totals"]["ort"], s["totals"]["in_scope"]) == (3, 1, 2, 2)
    assert s["of_ort_passes"] == 0.5 and s["of_ort_passes_kept"] == 0.5
    left = [R("s", ("StringConcat",), "out_of_scope", left_out="strings")]
    kept = node_tests.compare_with_ort(ours + left, theirs + [R("s", ("StringConcat",), "pass")])
    assert kept["of_ort_passes"] == 1 / 3 and kept["of_ort_passes_kept"] == 0.5
    assert kept["totals"]["left_out"] == 1


def test_default_run_filtered_by_ops_keeps_its_table(script, capsys):
    assert script(["--ops", "Relu,LeakyRelu"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"{'operator':<22}{'pass':>6}{'fail':>6}{'unsup':>7}")
    assert "\nRelu " in out and "\nLeakyRelu " in out and "\nConv " not in out and "ORT" not in out
    assert "% pass" in out


def test_all_with_ort_and_json(script, capsys, tmp_path):
    out_file = tmp_path / "results.json"
    assert script(["--all", "--ops", "Relu,StringConcat", "--json", str(out_file)]) == 0
    out = capsys.readouterr().out
    assert "relax_edge" in out.splitlines()[0] and "ORT" in out.splitlines()[0]
    assert "of the cases ORT passes, relax_edge passes" in out
    rows = json.loads(out_file.read_text())
    by_name = {r["name"]: r for r in rows}
    assert by_name["test_relu"]["status"] == "pass" and by_name["test_relu"]["ort_status"] == "pass"
    strings = [r for r in rows if r["ops"] == ["StringConcat"]]
    assert strings and all(r["status"] == "out_of_scope" and "string" in r["left_out"] for r in strings)
    assert "left out by design" in out
    assert [p.name for p in tmp_path.iterdir()] == ["results.json"]   # no temporary file left


def test_all_without_ort_has_no_ort_column_numbers(script, capsys):
    assert script(["--all", "--no-ort", "--op", "Relu"]) == 0
    out = capsys.readouterr().out
    relu = next(line for line in out.splitlines() if line.startswith("Relu "))
    assert relu.split()[-1] == "-" and "of the cases ORT passes" not in out
