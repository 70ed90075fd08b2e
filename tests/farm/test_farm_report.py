"""The report on hand-made rows: regressions beyond the measured noise, run comparisons, --since."""

import datetime

import pytest

from relax_edge.farm import FarmError, ResultsDB, regressions, report
from relax_edge.farm.report import compare, since_time


def _row(run, median, noise, board="qemu-aarch64", status="ok", **kw):
    return {"model": "tiny", "model_hash": "h1", "board": board, "backend": "c", "threads": 1, "status": status,
            "unit": "ms", "median": median, "noise": noise, "samples": [median], **kw}


@pytest.fixture
def db(tmp_path):
    with ResultsDB(tmp_path / "r.db") as db:
        yield db


def test_regressions_are_beyond_the_noise(db):
    a = db.start_run("bench", run_id="a")
    db.add_cell(a, _row(a, 10.0, 0.05, created_at="2026-12-01T10:00:00+00:00"))
    db.add_cell(a, _row(a, 4.0, 0.02, board="qemu-riscv64", created_at="2026-12-01T10:00:01+00:00"))
    b = db.start_run("bench", run_id="b")
    db.add_cell(b, _row(b, 10.4, 0.05, created_at="2026-12-02T10:00:00+00:00"))   # +4% within 5% noise
    db.add_cell(b, _row(b, 4.5, 0.02, board="qemu-riscv64", created_at="2026-12-02T10:00:01+00:00"))  # +12.5%
    db.add_cell(b, _row(b, None, None, board="ssh-down", status="failed", reason="cannot reach the board",
                        created_at="2026-12-02T10:00:02+00:00"))
    found = regressions(db.cells())
    assert [(p["median"], c["median"], c["board"]) for p, c in found] == [(4.0, 4.5, "qemu-riscv64")]
    pairs = compare(db.cells(run_id="a"), db.cells(run_id="b"))
    assert sorted((r["board"], v) for _, r, v in pairs) == [("qemu-aarch64", "same"), ("qemu-riscv64", "slower")]
    text = report(db)
    assert "regressions (slower than the previous median by more than the noise): 1" in text
    assert "1.12x" in text and "cannot reach the board" in text and "ssh-down" in text
    text = report(db, compare_runs=("a", "b"))
    assert "2 cells in both, 1 slower beyond noise" in text
    runs_since = report(db, since="2026-12-02").split("latest measurement")[0].splitlines()[2:]
    assert [line.split()[0] for line in runs_since if line.strip()] == ["b"]


def test_since_forms():
    now = datetime.datetime(2026, 12, 2, 12, 0, tzinfo=datetime.timezone.utc)
    assert since_time("12h", now) == "2026-12-02T00:00:00+00:00"
    assert since_time("2026-12-01") == "2026-12-01T00:00:00+00:00"
    with pytest.raises(FarmError, match="give an ISO date or time"):
        since_time("yesterday")


def test_heatmap_of_hand_made_rows(db, tmp_path):
    from relax_edge.farm.report import plot_heatmap
    a = db.start_run("bench")
    db.add_cell(a, _row(a, 2.0, 0.01))
    db.add_cell(a, _row(a, 5.0, 0.01, board="qemu-riscv64"))
    db.add_cell(a, _row(a, None, None, board="ssh-down", status="failed", reason="down"))
    plot_heatmap(db.cells(), tmp_path / "heat.png")
    assert (tmp_path / "heat.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_progress_counts_each_boards_cells(capsys):
    import collections

    from relax_edge.farm.scheduler import Progress
    jobs = [{"farm_board": "qemu-aarch64"} for _ in range(3)] + [{"farm_board": "ssh-down"}]
    progress = Progress(jobs)
    running = collections.Counter({"qemu-aarch64": 1})
    progress.done(jobs[0], {"status": "ok"}, running)
    progress.done(jobs[3], {"status": "failed", "reason": "down"}, running)
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 2 and lines[1].startswith("[farm] 2/4 cells, 1 failed, ")
    assert lines[1].endswith("| qemu-aarch64 1 ok, 0 failed, 1 running, 1 waiting; "
                             "ssh-down 0 ok, 1 failed, 0 running, 0 waiting")
    assert progress.line().endswith("| qemu-aarch64 1 ok, 0 failed, 2 running or queued; "
                                    "ssh-down 0 ok, 1 failed, 0 running or queued")   # Ray's view


def test_report_command_line_since_and_compare(tmp_path, capsys):
    from relax_edge.cli import main
    path = tmp_path / "r.db"
    with ResultsDB(path) as db:
        a = db.start_run("bench", run_id="a")
        db.add_cell(a, _row(a, 4.0, 0.02, board="qemu-riscv64", created_at="2026-12-01T10:00:01+00:00"))
        b = db.start_run("bench", run_id="b")
        db.add_cell(b, _row(b, 4.5, 0.02, board="qemu-riscv64", created_at="2026-12-02T10:00:01+00:00"))
    assert main(["farm", "report", "--db", str(path), "--compare", "a", "b"]) == 0
    assert "1 cells in both, 1 slower beyond noise" in capsys.readouterr().out
    assert main(["farm", "report", "--db", str(path), "--since", "2026-12-02"]) == 0
    runs = capsys.readouterr().out.split("latest measurement")[0].splitlines()[2:]
    assert [line.split()[0] for line in runs if line.strip()] == ["b"]
    assert main(["farm", "report", "--db", str(path), "--compare", "a", "nope"]) != 0
    assert "nope" in capsys.readouterr().err
