"""Tables of farm results, regressions and run comparisons.

A cell is identified by (model hash, board, backend, threads). A
**regression** is a measurement slower than the previous ok measurement of
the same cell by more than the noise measured: new median > previous median
x (1 + noise), where noise is the larger relative spread (interquartile
range over median) of the two measurements. `compare(a, b)` applies the
same rule between two runs.
"""

from __future__ import annotations

import datetime
import io
import re

from .config import FarmError

_AGO = re.compile(r"^(\d+)([smhdw])$")
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def since_time(text: str | None, now: datetime.datetime | None = None) -> str | None:
    """An ISO date or time, or an age such as 90m, 12h, 7d, as the ISO UTC time it names."""
    if text is None:
        return None
    match = _AGO.match(text.strip())
    if match:
        now = now or datetime.datetime.now(datetime.timezone.utc)
        return (now - datetime.timedelta(seconds=int(match.group(1)) * _UNIT_SECONDS[match.group(2)])).isoformat()
    try:
        when = datetime.datetime.fromisoformat(text.strip())
    except ValueError:
        raise FarmError(f"--since {text!r}: give an ISO date or time (2026-12-01, 2026-12-01T08:00) or an age "
                        "(30m, 12h, 7d)") from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=datetime.timezone.utc)
    return when.astimezone(datetime.timezone.utc).isoformat()


def cell_key(row: dict) -> tuple:
    return (row["model_hash"], row["board"], row["backend"], row["threads"])


def slower(previous: dict, current: dict) -> bool:
    """`current` is slower than `previous` by more than the noise either measured."""
    noise = max(previous.get("noise") or 0.0, current.get("noise") or 0.0)
    return current["median"] > previous["median"] * (1.0 + noise)


def regressions(rows: list) -> list:
    """(previous, current) pairs of ok rows of one cell, in time order, where current is slower."""
    last, found = {}, []
    for row in sorted(rows, key=lambda r: (r["created_at"], r["cell_id"])):
        if row["status"] != "ok" or row.get("kind", "bench") != "bench":
            continue
        key = cell_key(row)
        if key in last and last[key].get("unit") == row.get("unit") and slower(last[key], row):
            found.append((last[key], row))
        last[key] = row
    return found


def _value(row: dict) -> str:
    if row["status"] != "ok":
        return "failed"
    if row.get("unit") == "instructions":
        return f"{row['median']:,.0f} instr"
    return f"{row['median']:.3f} ms"


def _table(header: list, lines: list) -> str:
    widths = [max(len(str(x)) for x in column) for column in zip(header, *lines)]
    out = io.StringIO()
    for line in [header, *lines]:
        out.write("  ".join(str(x).ljust(w) for x, w in zip(line, widths)).rstrip() + "\n")
    return out.getvalue()


def cells_table(rows: list, reason_chars: int = 90) -> str:
    """One line per row: model, board, backend, threads, median, noise, and the reason of a failure."""
    lines = []
    for r in sorted(rows, key=lambda r: (r["model"] or "", r["board"], r["backend"] or "", r["threads"] or 0)):
        noise = f"{r['noise']:.1%}" if r["status"] == "ok" and r.get("noise") is not None else ""
        reason = " ".join((r.get("reason") or "").split())
        if len(reason) > reason_chars:
            reason = reason[:reason_chars - 3] + "..."
        lines.append([r["model"] or "", r["board"], r["backend"] or "", r["threads"] or "", _value(r), noise, reason])
    return _table(["model", "board", "backend", "threads", "median", "noise", "reason"], lines)


def latest(rows: list) -> list:
    """The newest row of each cell."""
    newest = {}
    for row in sorted(rows, key=lambda r: (r["created_at"], r["cell_id"])):
        newest[cell_key(row)] = row
    return list(newest.values())


def runs_table(runs: list, rows: list) -> str:
    lines = []
    for run in runs:
        mine = [r for r in rows if r["run_id"] == run["run_id"]]
        ok = sum(r["status"] == "ok" for r in mine)
        lines.append([run["run_id"], run["kind"], run["started_at"][:19], ok, len(mine) - ok,
                      _commit(run.get("git_commit") or "")])
    return _table(["run", "kind", "started (UTC)", "ok", "failed", "commit"], lines)


def _commit(commit: str) -> str:
    return commit[:12] + ("-dirty" if commit.endswith("-dirty") else "")


def regressions_table(found: list) -> str:
    lines = [[cur["model"], cur["board"], cur["backend"], cur["threads"], f"{prev['median']:.3f}",
              f"{cur['median']:.3f}", f"{cur['median'] / prev['median']:.2f}x",
              f"{max(prev.get('noise') or 0, cur.get('noise') or 0):.1%}", cur["run_id"]] for prev, cur in found]
    return _table(["model", "board", "backend", "threads", "before", "now", "ratio", "noise", "run"], lines)


def compare(rows_a: list, rows_b: list) -> list:
    """Cells ok in both runs: (row of A, row of B, verdict slower/faster/same)."""
    a = {cell_key(r): r for r in latest(rows_a) if r["status"] == "ok"}
    out = []
    for r in latest(rows_b):
        key = cell_key(r)
        if r["status"] != "ok" or key not in a:
            continue
        verdict = "slower" if slower(a[key], r) else "faster" if slower(r, a[key]) else "same"
        out.append((a[key], r, verdict))
    return out


def compare_table(pairs: list) -> str:
    lines = [[b["model"], b["board"], b["backend"], b["threads"], f"{a['median']:.3f}", f"{b['median']:.3f}",
              f"{b['median'] / a['median']:.2f}x", verdict] for a, b, verdict in pairs]
    return _table(["model", "board", "backend", "threads", "A", "B", "B/A", "verdict"], lines)


def report(db, since: str | None = None, compare_runs: tuple | None = None, run_id: str | None = None) -> str:
    """The text of `relax-edge farm report`."""
    since = since_time(since)
    if compare_runs:
        a, b = (db.run(r)["run_id"] for r in compare_runs)
        pairs = compare(db.cells(run_id=a), db.cells(run_id=b))
        slow = sum(v == "slower" for _, _, v in pairs)
        return (f"run {a} (A) against run {b} (B): {len(pairs)} cells in both, {slow} slower beyond noise\n"
                + compare_table(pairs))
    rows = [r for r in db.cells(run_id=run_id, since=since) if r["kind"] == "bench"]
    with_rows = {r["run_id"] for r in rows}
    runs = [r for r in db.runs() if since is None or r["run_id"] in with_rows]
    if run_id:
        runs = [r for r in runs if r["run_id"] == run_id]
    text = "runs\n" + runs_table(runs, rows)
    text += "\nlatest measurement of each cell\n" + cells_table(latest(rows))
    found = regressions(db.cells(since=None, kind="bench")) if rows else []
    if since is not None:
        found = [(p, c) for p, c in found if c["created_at"] >= since]
    text += (f"\nregressions (slower than the previous median by more than the noise): {len(found)}\n"
             + (regressions_table(found) if found else ""))
    return text


def plot_heatmap(rows: list, path) -> None:
    """A heatmap of median latency, model (and backend, threads) x board, written atomically as PNG."""
    from ..files import write_atomic
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        import numpy as np
    except ImportError:
        raise FarmError("--plot needs matplotlib: pip install 'relax-edge[plot]'") from None
    rows = latest(rows)
    boards = sorted({r["board"] for r in rows})
    labels = sorted({(r["model"], r["backend"], r["threads"]) for r in rows})
    grid = np.full((len(labels), len(boards)), np.nan)
    for r in rows:
        if r["status"] == "ok":
            grid[labels.index((r["model"], r["backend"], r["threads"])), boards.index(r["board"])] = r["median"]
    fig, ax = plt.subplots(figsize=(1.6 * len(boards) + 3, 0.45 * len(labels) + 1.8))
    image = ax.imshow(grid, cmap="viridis_r", aspect="auto")
    ax.set_xticks(range(len(boards)), boards, rotation=30, ha="right")
    ax.set_yticks(range(len(labels)), [f"{m} [{b}, {t} thr]" for m, b, t in labels])
    for i in range(len(labels)):
        for j in range(len(boards)):
            ax.text(j, i, "failed" if np.isnan(grid[i, j]) else f"{grid[i, j]:.3g}", ha="center", va="center",
                    fontsize=8, color="red" if np.isnan(grid[i, j]) else "white")
    fig.colorbar(image, ax=ax, label="median per run (ms; instructions on counting emulators)")
    ax.set_title("farm: median latency per model x board", fontsize=10)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100)
    plt.close(fig)
    write_atomic(path, buf.getvalue())
