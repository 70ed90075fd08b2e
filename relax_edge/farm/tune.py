"""`rxe.farm.tune`: relax_edge/tuning.py's kernel search as farm tasks.

    run = rxe.farm.tune(farm="farm.yaml", boards=["qemu-aarch64", "qemu-riscv64"], kernels=("gemm",),
                        repeat=20, db="results.db")
    run.tables        # {board: the tuning table written}

One task per (board, kernel, bucket, config), each `tuning.measure` (a
probe built with the config, checked against numpy, benchmarked on the
board), scheduled like bench cells (board resources on Ray, or --local).
The candidates are the kernel's default config and every knob value
changed one at a time from it; the default is measured `default_rounds`
times (separate builds and server processes), so that tuning.best counts
the spread between its measurements as noise. Every measurement is a row
of kind "tune" in the results database (model "KERNEL:BUCKET", its config
as JSON). Then, per board, tuning.best chooses and tuning.write_table
writes the board's table (into `tables_dir`/BOARD.json when given, else
the board's own table), unless write=False. Phones of one adb board share
one table: their measurements are pooled. Under QEMU the measurements time
the emulator, not a chip.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from .bench import DEFAULT_CACHE
from .config import FarmError, load_farm
from .db import ResultsDB, git_commit
from .scheduler import run_matrix
from .work import _short, stats_columns, summarize


@dataclasses.dataclass
class TuneRun:
    run_id: str
    db: str
    cells: list                     # every measurement's row
    chosen: dict                    # board -> tuning.best's result
    tables: dict                    # board -> the table path written (empty with write=False)


def candidates(kernel: str, knobs: dict | None = None) -> list:
    """The default config of `kernel`, then each knob value changed one at a time from it."""
    from .. import tuning
    space = (knobs or {}).get(kernel) or tuning.KNOBS[kernel]
    default = dict(tuning.DEFAULTS[kernel])
    out, seen = [default], {tuning.config_id(default)}
    for knob, values in space.items():
        for value in values:
            tuning.check_value(kernel, knob, value)
            config = {**default, knob: value}
            if tuning.config_id(config) not in seen:
                seen.add(tuning.config_id(config))
                out.append(config)
    return out


def measure_job(job: dict, built: dict) -> dict:
    """One tuning.measure on the job's board: its statistics, or status failed with the reason."""
    from .. import tuning
    try:
        r = tuning.measure(job["board"], job["kernel"], job["bucket"], job["config"], repeat=job["repeat"],
                           warmup=job["warmup"], backend=job["backend"], out_dir=job["out_dir"])
    except Exception as err:  # noqa: BLE001 - one failed measurement is a failed row, the search goes on
        return {"status": "failed", "reason": f"{job['farm_board']}: {_short(err)}"}
    stats = summarize(r["samples"], "ms", job["repeat"], job["warmup"])
    stats["noise"] = r["noise"]   # tuning's own noise estimate, the one best() uses
    return {"status": "ok", "stats": stats}


def tune(farm, boards="all", kernels=("gemm",), buckets=None, knobs=None, repeat: int = 20, warmup: int = 3,
         backend: str = "c", db="results.db", local: bool = False, write: bool = True, tables_dir=None,
         default_rounds: int = 2, cache_dir=None, quiet: bool = False) -> TuneRun:
    """Search the knobs of `kernels` on the farm's boards; `buckets` {kernel: [name or bucket dict]}
    limits the shapes (default tuning.buckets), `knobs` {kernel: {knob: [values]}} the candidates."""
    from .. import tuning
    farm = load_farm(farm)
    chosen_boards = farm.select(boards)
    kernels = [kernels] if isinstance(kernels, str) else list(kernels)
    for kernel in kernels:
        if kernel not in tuning.KNOBS:
            raise FarmError(f"unknown kernel {kernel!r} to tune (known: {', '.join(tuning.KNOBS)})")
    if not isinstance(default_rounds, int) or default_rounds < 1:
        raise FarmError(f"default_rounds must be a positive integer, got {default_rounds!r}")
    cache = Path(cache_dir) if cache_dir else DEFAULT_CACHE
    jobs = []
    for fb in chosen_boards:
        for kernel in kernels:
            shapes = [_bucket(kernel, b) for b in ((buckets or {}).get(kernel) or tuning.buckets(kernel))]
            known = {b["name"] for b in tuning.buckets(kernel)}
            custom = [b["name"] for b in shapes if b["name"] not in known]
            if write and custom:
                raise FarmError(f"buckets {', '.join(custom)} of {kernel} are not tuning.buckets({kernel!r}): a "
                                "table records only those; measure custom buckets with write=False")
            configs = candidates(kernel, knobs)
            for bucket in shapes:
                for i, config in enumerate([configs[0]] * (default_rounds - 1) + configs):
                    attempt = i if i < default_rounds else 0
                    jobs.append({"farm_board": fb.name, "board": fb.board, "kernel": kernel, "bucket": bucket,
                                 "config": config, "repeat": repeat, "warmup": warmup, "backend": backend,
                                 "round": attempt, "out_dir": str(cache / "tune" / fb.name / f"round{attempt}")})
    spec = {"boards": [b.name for b in chosen_boards], "kernels": kernels, "repeat": repeat, "warmup": warmup,
            "backend": backend, "default_rounds": default_rounds}
    with ResultsDB(db) as results:
        run_id = results.start_run("tune", farm=farm.path, spec=spec)
        commit = git_commit()
        measured = []

        def store(job: dict, result: dict) -> None:
            row = _row(job, result, commit)
            results.add_cell(run_id, row)
            if result["status"] == "ok":
                measured.append((job, result["stats"]))

        run_matrix(farm, {}, jobs, measure_job, store, local=local, quiet=quiet)
        cells = results.cells(run_id=run_id)
    chosen, tables = {}, {}
    for name in dict.fromkeys(fb.board.name for fb in chosen_boards):
        mine = [{"kernel": j["kernel"], "bucket": j["bucket"]["name"], "config": j["config"], "samples": s["samples"]}
                for j, s in measured if j["board"].name == name]
        if not mine:
            continue
        chosen[name] = tuning.best(mine)
        if write:
            path = Path(tables_dir) / f"{name}.json" if tables_dir else None
            tables[name] = tuning.write_table(_board_of(chosen_boards, name), chosen[name], path=path)
    return TuneRun(run_id, str(db), cells, chosen, tables)


def _bucket(kernel: str, bucket) -> dict:
    """A bucket of tuning.buckets(kernel) by name, or a bucket mapping (tuning.measure checks its fields)."""
    from .. import tuning
    if isinstance(bucket, dict):
        return {"name": "custom", "threads": 1, **bucket}
    known = tuning.buckets(kernel)
    for b in known:
        if b["name"] == bucket:
            return b
    raise FarmError(f"unknown bucket {bucket!r} of {kernel} (known: {', '.join(b['name'] for b in known)})")


def _board_of(farm_boards: list, name: str):
    return next(fb.board for fb in farm_boards if fb.board.name == name)


def _row(job: dict, result: dict, commit: str) -> dict:
    bucket = job["bucket"]
    row = {"kind": "tune", "model": f"{job['kernel']}:{bucket['name']}", "board": job["farm_board"],
           "backend": job["backend"], "threads": bucket.get("threads", 1), "git_commit": commit,
           "status": result["status"], "reason": result.get("reason"), "repeats": job["repeat"],
           "warmup": job["warmup"], "config": {"kernel": job["kernel"], "bucket": bucket, "config": job["config"],
                                                "round": job["round"]}}
    row.update(stats_columns(result.get("stats")))
    return row
