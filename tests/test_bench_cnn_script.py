"""scripts/bench_cnn.py kept from rotting without running a benchmark: its argument checks, the blocks with
fake engines (a wrong answer not timed, an unavailable engine reported), the calibration on a fake clock,
the table and the atomic JSON. Nothing here times anything."""

import json
import sys
from pathlib import Path

import numpy as np
import pytest

SCRIPTS = Path(__file__).resolve().parent.parent / "scripts"
sys.path.insert(0, str(SCRIPTS))

import bench_cnn  # noqa: E402


@pytest.mark.parametrize("argv, says", [
    (["--models", "vgg"], "unknown model"),
    (["--engines", "tflite"], "unknown engine"),
    (["--threads", "0"], "--threads must be positive"),
    (["--rounds", "5", "--repeat", "2"], "--rounds"),
])
def test_bad_arguments_are_named(argv, says, capsys):
    with pytest.raises(SystemExit):
        bench_cnn.parse_args(argv)
    assert says in capsys.readouterr().err


def test_ort_is_always_run_and_llvm_is_optional():
    assert bench_cnn.parse_args(["--engines", "executorch"]).kinds == ["ort", "executorch"]
    assert bench_cnn.parse_args(["--llvm"]).kinds == ["rxe", "rxe-llvm", "ort", "executorch", "tvm"]


class FakeClock:
    """Each spin_once reads the clock twice; the alone runs take 10 ms, the parallel ones 19 ms."""
    def __init__(self):
        self.t, self.calls = 0.0, 0

    def __call__(self):
        self.calls += 1
        if self.calls % 2 == 0:
            self.t += 0.010 if self.calls % 4 == 2 else 0.019
        return self.t


def test_calibration_ratio_on_a_fake_clock():
    spun = []
    cal = bench_cnn.calibrate(spun.append, threads=2, n=7, repeat=3, clock=FakeClock())
    assert spun == [7] * 9   # per repeat: once alone, twice at once
    assert cal["alone_ms"] == pytest.approx([10.0] * 3) and cal["together_ms"] == pytest.approx([19.0] * 3)
    assert cal["ratio"] == pytest.approx(1.9)
    assert bench_cnn.verdict(cal["ratio"], 2) == "one core free"
    assert bench_cnn.verdict(1.05, 2) == "2 cores free" and bench_cnn.verdict(1.5, 2) == "cores partly busy"
    with pytest.raises(ValueError, match="at least 2 threads"):
        bench_cnn.calibrate(spun.append, threads=1, n=7)


class FakeEngine:
    def __init__(self, out, log, kind):
        self.out, self.log, self.kind = out, log, kind

    def run(self):
        return self.out

    def time(self, warmup, repeat):
        self.log.append(self.kind)
        return [{"rxe": 2.0, "ort": 4.0}[self.kind]] * repeat

    def close(self):
        pass


def test_blocks_wrong_answer_unavailable_table_and_json(tmp_path, monkeypatch, capsys):
    log = []
    ref = np.array([[1.0, -2.0]], np.float32)

    def make_engine(kind, case, threads, builds):
        if kind == "tvm":
            raise bench_cnn.Unavailable("tvm not installed (pip install apache-tvm)")
        out = ref + (1.0 if kind == "executorch" else 1e-6)
        return FakeEngine(out, log, kind)

    monkeypatch.setattr(bench_cnn, "make_engine", make_engine)
    monkeypatch.setattr(bench_cnn, "make_case", lambda label, root: bench_cnn.Case(label, None, None, None, root))
    monkeypatch.setattr(bench_cnn, "load_spin", lambda work: (lambda n: None))
    monkeypatch.setattr(bench_cnn, "calibrate", lambda spin, threads, n, repeat: {"ratio": 1.1})
    out = tmp_path / "cnn.json"
    assert bench_cnn.main(["--models", "resnet18", "--threads", "2", "--rounds", "3", "--repeat", "6",
                           "--settle-ms", "0", "--json", str(out)]) == 0
    assert log == ["rxe", "ort", "ort", "rxe", "rxe", "ort"]   # blocks, in a rotating order
    row = json.loads(out.read_text())["rows"][0]
    assert row["engines"]["rxe"]["median_ms"] == 2.0 and row["engines"]["rxe"]["n"] == 6
    assert "wrong answer" in row["engines"]["executorch"]["unavailable"]
    assert row["calibration"]["ratio_median"] == pytest.approx(1.1)
    table = capsys.readouterr().out
    assert "0.50" in table and "2 cores free" in table and "tvm not installed" in table


def test_executorch_missing_is_reported(monkeypatch):
    monkeypatch.setitem(sys.modules, "executorch", None)
    with pytest.raises(bench_cnn.Unavailable, match="executorch not installed"):
        bench_cnn.ExecuTorchEngine(None, 1)
