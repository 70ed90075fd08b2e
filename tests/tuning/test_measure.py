"""Tuning tables on a device: a model built under a non-default table still
matches numpy on the host (the table named by a board YAML) and under QEMU;
`measure` on the host; scripts/tune.py end to end with one knob."""

import importlib.util
import json
import re
from pathlib import Path

import numpy as np
import pytest

import relax_edge as rxe
from relax_edge import op, tuning
from relax_edge.ir import Builder, TensorType, Var
from relax_edge.ir.expr import Tuple
from relax_edge.library import kernels as K

ROOT = Path(__file__).resolve().parents[2]
HOST_TABLE = {"gemm": {"KC": 128}}   # the value the tune.py test measures too: one runtime build for both
QEMU_TABLE = {"gemm": {"KC": 64, "NC": 1024, "PARALLEL_WORK": 0}, "gemv": {"PARALLEL_MIN_MACS": 0},
              "depthwise": {"PARALLEL_MIN_MACS": 0}, "threads": {"SPIN_ROUNDS": 20}}


def weights(seed=0):
    rng = np.random.default_rng(seed)
    return {"w": rng.standard_normal((300, 700)).astype(np.float32) / 17,
            "conv": rng.standard_normal((24, 8, 3, 3)).astype(np.float32) / 8,
            "dw": rng.standard_normal((24, 1, 3, 3)).astype(np.float32) / 3}


def model(w):
    """A dense layer (packed weights, k across KC blocks, n across NC), a
    matmul of two inputs (the run-time packing in scratch), a conv and a
    depthwise conv."""
    x = Var("x", TensorType((40, 300), "float32"))
    b = Var("b", TensorType((300, 650), "float32"))
    img = Var("img", TensorType((1, 8, 20, 20), "float32"))
    bb = Builder()
    with bb.function("main", [x, b, img]):
        with bb.dataflow():
            dense = bb.emit_output(op.matmul(x, w["w"]))
            product = bb.emit_output(op.matmul(x, b))
            conv = bb.emit(op.conv2d(img, w["conv"], padding=(1, 1, 1, 1)))
            dw = bb.emit_output(op.conv2d(conv, w["dw"], padding=(1, 1, 1, 1), groups=24))
        bb.ret(Tuple([dense, product, dw]))
    return bb.get()


def inputs(seed=1):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(s).astype(np.float32) for s in ((40, 300), (300, 650), (1, 8, 20, 20))]


def expected(w, x, b, img):
    conv = K.conv2d_reference(img, w["conv"], padding=(1, 1, 1, 1))
    return [x.astype(np.float64) @ w["w"], x.astype(np.float64) @ b,
            K.conv2d_reference(conv, w["dw"], padding=(1, 1, 1, 1), groups=24)]


def check(outputs, refs):
    assert len(outputs) == len(refs)
    for got, ref in zip(outputs, refs):
        np.testing.assert_allclose(got, ref, rtol=2e-4, atol=2e-4)


def test_a_tuned_build_on_the_host_matches_numpy(tmp_path):
    board_file = tmp_path / "tuned-host.yaml"
    board_file.write_text((ROOT / "boards" / "host.yaml").read_text() + "tuning: tuned-host.json\n")
    (tmp_path / "tuned-host.json").write_text(json.dumps({"board": "host", "kernels": HOST_TABLE}))
    w, args = weights(), inputs()
    art = rxe.build(model(w), board=board_file, out_dir=tmp_path / "build", profile=False)
    assert art.tuning == str(tmp_path / "tuned-host.json") and art.tuning_flags == ["-DRXE_GEMM_KC=128"]
    with rxe.connect("host") as dev:
        m = dev.load(art, threads=2)
        check(m.run(*args), expected(w, *args))


@pytest.mark.emu
def test_a_tuned_build_under_qemu_matches_numpy(tmp_path):
    w, args = weights(), inputs()
    art = rxe.build(model(w), board="qemu-aarch64", out_dir=tmp_path / "build", tuning=QEMU_TABLE, profile=False)
    assert art.tuning == "given"
    with rxe.connect("qemu-aarch64") as dev:
        m = dev.load(art, threads=2)
        check(m.run(*args), expected(w, *args))


def test_measure_on_the_host_gives_the_shared_statistics(tmp_path):
    bucket = {"name": "tiny", "op": "dense", "m": 8, "n": 16, "k": 8}
    r = tuning.measure("host", "gemm", bucket, {}, repeat=3, warmup=1, out_dir=tmp_path)
    assert {"median_ms", "min_ms", "max_ms", "samples", "noise"} <= set(r)
    assert r["kernel"] == "gemm" and r["bucket"] == "tiny" and r["config"] == tuning.DEFAULTS["gemm"]
    assert len(r["samples"]) == 3 and r["min_ms"] <= r["median_ms"] <= r["max_ms"] and r["noise"] >= 0
    again = tuning.measure("host", "gemm", bucket, {}, repeat=3, warmup=1, out_dir=tmp_path)
    chosen = tuning.best([r, again])["gemm"]   # the same config twice: nothing to choose but the default
    assert chosen["config"] == tuning.DEFAULTS["gemm"] and set(chosen["buckets"]) == {"tiny"}


def test_measure_refuses_a_bad_bucket_and_a_bad_config():
    with pytest.raises(tuning.TuningError, match="unknown bucket 'huge' of gemm"):
        tuning.measure("host", "gemm", "huge", {})
    with pytest.raises(tuning.TuningError, match="NC 100 is not a multiple of 16"):
        tuning.measure("host", "gemm", "small", {"NC": 100})


def load_script():
    spec = importlib.util.spec_from_file_location("tune_script", ROOT / "scripts" / "tune.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_tune_script_end_to_end_with_one_knob(tmp_path, capsys):
    table, out = tmp_path / "host.json", tmp_path / "out.json"
    code = load_script().main(["--board", "host", "--knob", "gemm.KC=128", "--buckets", "small", "--repeat", "3",
                               "--verify", "1", "--write", "--table", str(table), "--json", str(out)])
    assert code == 0
    printed = capsys.readouterr()
    assert "| KC=128,NC=512,PARALLEL_WORK=262144 |" in printed.out and "chosen for gemm:" in printed.out
    assert "[tune] (1/" in printed.err
    report = json.loads(out.read_text())
    measured = {tuning.config_id(r["config"]) for r in report["results"]}
    assert measured == {"KC=256,NC=512,PARALLEL_WORK=262144", "KC=128,NC=512,PARALLEL_WORK=262144"}
    written = tuning.load_table("host", table)
    assert written["gemm"] == report["chosen"]["gemm"]["config"]


def test_tune_script_refuses_an_unknown_knob(capsys):
    with pytest.raises(SystemExit, match="unknown knob"):
        load_script().main(["--board", "host", "--knob", "gemm.MC=8"])


def test_tune_script_compares_a_config_with_the_default_in_interleaved_rounds(capsys):
    code = load_script().main(["--board", "host", "--compare", "gemm.KC=128", "--buckets", "small", "--repeat", "3",
                               "--verify", "2"])
    assert code == 0
    printed = capsys.readouterr()
    assert "interleaved re-measurement over 2 rounds" in printed.out
    assert re.search(r"\| small \| [\d.]+ ms \([\d.]+-[\d.]+\) \| [\d.]+ ms .* \| [\d.]+ \|", printed.out)
    rounds = re.findall(r"KC=(\d+),NC=512,PARALLEL_WORK=262144: .* (verify\d)", printed.err)
    assert rounds == [("256", "verify1"), ("128", "verify1"), ("128", "verify2"), ("256", "verify2")]
