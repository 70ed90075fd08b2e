"""The results database with hand-made cells: what is stored comes back,
bad cells are refused, runs are found for --resume, other URLs need SQLAlchemy."""

import sqlite3
import sys

import numpy as np
import pytest

from relax_edge.farm import FarmError, ResultsDB, summarize
from relax_edge.version import __version__


def _cell(**kw):
    return {"model": "tiny", "model_hash": "ab" * 32, "board": "qemu-aarch64", "backend": "c", "threads": 1,
            "status": "ok", "unit": "ms", "median": 1.5, "minimum": 1.0, "maximum": 2.0, "noise": 0.1,
            "samples": [1.0, 1.5, 2.0], **kw}


@pytest.mark.parametrize("url", ["path", "sqlite", "sqlalchemy"])
def test_cells_round_trip_and_each_is_committed(tmp_path, url):
    path = tmp_path / "r.db"
    # sqlite+pysqlite:// is not the built-in sqlite:/// form, so it goes through SQLAlchemy's engine
    location = {"path": path, "sqlite": f"sqlite:///{path}", "sqlalchemy": f"sqlite+pysqlite:///{path}"}[url]
    with ResultsDB(location) as db:
        assert type(db._db).__name__ == ("_SqlAlchemy" if url == "sqlalchemy" else "_Sqlite")
        run = db.start_run("bench", farm="farm.yaml", spec={"repeat": 3})
        db.add_cell(run, _cell(profile={"rows": [{"kernel": "k_matmul"}]}))
        db.add_cell(run, _cell(board="ssh-down", status="failed", reason="cannot reach the board", median=None))
        # another connection sees both cells: each was its own committed transaction
        other = sqlite3.connect(path)
        assert other.execute("SELECT count(*) FROM cells WHERE run_id = ?", (run,)).fetchone()[0] == 2
        other.close()
        rows = db.cells(run_id=run)
        assert [r["status"] for r in rows] == ["ok", "failed"]
        assert rows[0]["samples"] == [1.0, 1.5, 2.0] and rows[0]["profile"] == {"rows": [{"kernel": "k_matmul"}]}
        assert rows[0]["relax_edge_version"] == __version__ and rows[1]["reason"] == "cannot reach the board"
        assert db.run()["run_id"] == run and db.run(run)["spec"] == {"repeat": 3}
        later = db.start_run("tune")
        assert db.run(kind="bench")["run_id"] == run and db.run()["run_id"] == later


def test_bad_cells_and_unknown_runs(tmp_path):
    with ResultsDB(tmp_path / "r.db") as db:
        with pytest.raises(FarmError, match="no run to resume"):
            db.run()
        run = db.start_run("bench")
        with pytest.raises(FarmError, match="status must be ok or failed"):
            db.add_cell(run, _cell(status="maybe"))
        with pytest.raises(FarmError, match=r"unknown fields \['colour'\]"):
            db.add_cell(run, _cell(colour="red"))
        with pytest.raises(FarmError, match="no run 'nope'"):
            db.run("nope")
        assert db.cells(run_id=run) == []


def test_a_server_url_without_sqlalchemy_says_so(monkeypatch):
    monkeypatch.setitem(sys.modules, "sqlalchemy", None)
    with pytest.raises(FarmError, match="needs SQLAlchemy"):
        ResultsDB("postgresql://farm@db.lab/results")


def test_statistics_against_numpy():
    samples = [3.0, 1.0, 2.0, 10.0, 2.5]
    s = summarize(samples)
    q1, median, q3 = np.percentile(samples, [25, 50, 75])
    assert s["median_ms"] == pytest.approx(median) and s["min_ms"] == 1.0 and s["max_ms"] == 10.0
    assert s["mean_ms"] == pytest.approx(np.mean(samples)) and s["std_ms"] == pytest.approx(np.std(samples))
    assert s["noise"] == pytest.approx((q3 - q1) / median) and s["samples"] == samples
