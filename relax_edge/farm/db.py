"""The results database: one row per finished cell of a farm run.

    db = ResultsDB("results.db")             # a path, sqlite:///path, or a SQLAlchemy URL
    run = db.start_run("bench", farm="farm.yaml", spec={...})
    db.add_cell(run, {...})                  # committed at once: a killed run keeps it
    db.cells(run_id=run)                     # rows as dicts (samples, profile, config decoded)

A path or a `sqlite:///` URL uses sqlite3 from the standard library (WAL
journal, so a report can read while a run writes); any other URL (e.g.
postgresql://...) goes through SQLAlchemy, which must then be installed.
Both run the same SQL with named parameters. Every write is its own
transaction. A cell row holds the model (name and content hash), the board,
the backend, the thread count, the relax_edge version and git commit, the
time (ISO 8601, UTC), the status (ok or failed) and the reason of a failure,
the statistics (unit, median, minimum, maximum, mean, std, noise, repeats,
warm-up, the samples as JSON), the profile as JSON, and for tuning
measurements the kernel, bucket and config as JSON.
"""

from __future__ import annotations

import datetime
import json
import sqlite3
import subprocess
import uuid
from pathlib import Path

from ..version import __version__
from .config import FarmError

SCHEMA = (
    "CREATE TABLE IF NOT EXISTS runs (run_id TEXT PRIMARY KEY, kind TEXT NOT NULL, started_at TEXT NOT NULL, "
    "farm TEXT, spec TEXT, relax_edge_version TEXT, git_commit TEXT)",
    "CREATE TABLE IF NOT EXISTS cells (cell_id TEXT PRIMARY KEY, run_id TEXT NOT NULL, kind TEXT NOT NULL, "
    "model TEXT, model_hash TEXT, board TEXT NOT NULL, backend TEXT, threads INTEGER, relax_edge_version TEXT, "
    "git_commit TEXT, created_at TEXT NOT NULL, status TEXT NOT NULL, reason TEXT, unit TEXT, median REAL, "
    "minimum REAL, maximum REAL, mean REAL, std REAL, noise REAL, repeats INTEGER, warmup INTEGER, samples TEXT, "
    "profile TEXT, config TEXT, attempts INTEGER)",
    "CREATE INDEX IF NOT EXISTS cells_by_run ON cells (run_id)",
    "CREATE INDEX IF NOT EXISTS cells_by_key ON cells (model_hash, board, backend, threads, created_at)",
)
CELL_COLUMNS = ("cell_id", "run_id", "kind", "model", "model_hash", "board", "backend", "threads",
                "relax_edge_version", "git_commit", "created_at", "status", "reason", "unit", "median", "minimum",
                "maximum", "mean", "std", "noise", "repeats", "warmup", "samples", "profile", "config", "attempts")
_JSON_COLUMNS = ("samples", "profile", "config")
STATUSES = ("ok", "failed")


def now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="microseconds")


def git_commit() -> str:
    """The commit of the relax_edge checkout ("-dirty" with uncommitted changes), or "" outside one."""
    root = Path(__file__).resolve().parents[2]
    try:
        head = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True,
                              timeout=10)
        if head.returncode != 0:
            return ""
        dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "-uno"], capture_output=True,
                               text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return head.stdout.strip() + ("-dirty" if dirty else "")


class _Sqlite:
    def __init__(self, path: str):
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        try:
            self.conn = sqlite3.connect(path, timeout=30, isolation_level=None)
            self.conn.execute("PRAGMA journal_mode=WAL")
        except sqlite3.Error as err:
            raise FarmError(f"{path}: cannot open the results database ({err})") from None
        self.conn.row_factory = sqlite3.Row

    def write(self, statements) -> None:
        """The (sql, params) statements in one transaction."""
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            for sql, params in statements:
                self.conn.execute(sql, params)
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise
        self.conn.execute("COMMIT")

    def read(self, sql: str, params: dict) -> list:
        return [dict(row) for row in self.conn.execute(sql, params)]

    def close(self) -> None:
        self.conn.close()


class _SqlAlchemy:
    def __init__(self, url: str):
        try:
            import sqlalchemy
        except ImportError:
            raise FarmError(f"the results database {url!r} needs SQLAlchemy (pip install sqlalchemy and the URL's "
                            "driver); a path or sqlite:///PATH needs nothing") from None
        self.text = sqlalchemy.text
        try:
            self.engine = sqlalchemy.create_engine(url)
        except Exception as err:  # noqa: BLE001 - a bad URL or a missing driver, reported by name
            raise FarmError(f"cannot open the results database {url!r}: {err}") from None

    def write(self, statements) -> None:
        with self.engine.begin() as conn:
            for sql, params in statements:
                conn.execute(self.text(sql), params)

    def read(self, sql: str, params: dict) -> list:
        with self.engine.connect() as conn:
            return [dict(row._mapping) for row in conn.execute(self.text(sql), params)]

    def close(self) -> None:
        self.engine.dispose()


def _backend(location):
    text = str(location)
    if text.startswith("sqlite:///"):
        return _Sqlite(text[len("sqlite:///"):] or ":memory:")
    if "://" in text:
        return _SqlAlchemy(text)
    return _Sqlite(text)


class ResultsDB:
    """The cells of farm runs in a SQL database (see the module docstring)."""

    def __init__(self, location="results.db"):
        self.location = str(location)
        self._db = _backend(location)
        self._db.write([(sql, {}) for sql in SCHEMA])

    def close(self) -> None:
        self._db.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def start_run(self, kind: str, farm: str = "", spec: dict | None = None, run_id: str | None = None) -> str:
        run_id = run_id or datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%d-%H%M%S-") + \
            uuid.uuid4().hex[:6]
        self._db.write([("INSERT INTO runs (run_id, kind, started_at, farm, spec, relax_edge_version, git_commit) "
                         "VALUES (:run_id, :kind, :started_at, :farm, :spec, :version, :commit)",
                         {"run_id": run_id, "kind": kind, "started_at": now(), "farm": str(farm),
                          "spec": json.dumps(spec or {}), "version": __version__, "commit": git_commit()})])
        return run_id

    def run(self, run_id: str | None = None, kind: str | None = None) -> dict:
        """A run's row (spec decoded); the latest run (of `kind`) when run_id is None."""
        if run_id is None:
            rows = self._db.read("SELECT * FROM runs WHERE (:kind IS NULL OR kind = :kind) "
                                 "ORDER BY started_at DESC LIMIT 1", {"kind": kind})
            if not rows:
                raise FarmError(f"{self.location}: no {kind + ' ' if kind else ''}run to resume")
        else:
            rows = self._db.read("SELECT * FROM runs WHERE run_id = :run_id", {"run_id": run_id})
            if not rows:
                raise FarmError(f"{self.location}: no run {run_id!r} (relax-edge farm report lists the runs)")
        row = rows[0]
        row["spec"] = json.loads(row["spec"] or "{}")
        return row

    def runs(self) -> list:
        return self._db.read("SELECT * FROM runs ORDER BY started_at", {})

    def add_cell(self, run_id: str, cell: dict) -> dict:
        """Store one finished cell (a dict with keys of CELL_COLUMNS; missing ones are empty), committed at once."""
        unknown = set(cell) - set(CELL_COLUMNS)
        if unknown:
            raise FarmError(f"cell has unknown fields {sorted(unknown)}")
        if cell.get("status") not in STATUSES:
            raise FarmError(f"cell status must be ok or failed, got {cell.get('status')!r}")
        row = {column: cell.get(column) for column in CELL_COLUMNS}
        row.update(cell_id=row["cell_id"] or uuid.uuid4().hex, run_id=run_id, kind=row["kind"] or "bench",
                   created_at=row["created_at"] or now(),
                   relax_edge_version=row["relax_edge_version"] or __version__)
        params = {k: (json.dumps(v) if k in _JSON_COLUMNS and v is not None else v) for k, v in row.items()}
        columns = ", ".join(CELL_COLUMNS)
        values = ", ".join(f":{c}" for c in CELL_COLUMNS)
        self._db.write([(f"INSERT INTO cells ({columns}) VALUES ({values})", params)])
        return row

    def cells(self, run_id: str | None = None, since: str | None = None, kind: str | None = None) -> list:
        """Cell rows, oldest first (JSON columns decoded)."""
        rows = self._db.read(
            "SELECT * FROM cells WHERE (:run_id IS NULL OR run_id = :run_id) AND (:since IS NULL OR created_at >= "
            ":since) AND (:kind IS NULL OR kind = :kind) ORDER BY created_at, cell_id",
            {"run_id": run_id, "since": since, "kind": kind})
        for row in rows:
            for column in _JSON_COLUMNS:
                row[column] = None if row[column] is None else json.loads(row[column])
        return rows
