"""`rxe.farm.bench`: every model on every board of a farm, into the results database.

    run = rxe.farm.bench(farm="farm.yaml", models=["a.onnx", "b.onnx"], boards="all",
                         backends=("c", "llvm"), threads=(1, 2), repeat=20, db="results.db")
    run.run_id, run.cells            # the run's rows (ok and failed), as stored

The matrix is model x board x backend x threads. Each model is built once
per (target, backend) into the build cache (`cache_dir`, default
build/farm: one folder per model content hash, target and backend, each
with its build key, so an unchanged model is not recompiled by the next
run); boards of the same target (an emulator, a board behind ssh, the
phones of one adb board) share the build. The cells then run on the farm
(relax_edge/farm/scheduler.py), and each finished cell is committed to the
database as it arrives. `resume=RUN_ID` (or True: the latest bench run)
continues a run: the cells it already holds, ok or failed, are not run
again, and models, boards, backends, threads and the timing settings come
from the stored run unless given.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from ..build import BACKENDS
from ..codegen.abi import MAX_THREADS
from ..deploy.session import MAX_REPEAT
from .config import FarmError, load_farm
from .db import ResultsDB, git_commit
from .scheduler import run_matrix
from .work import model_hash, run_cell, stats_columns

DEFAULT_CACHE = Path("build") / "farm"


@dataclasses.dataclass
class BenchRun:
    run_id: str
    db: str
    cells: list          # the run's rows, oldest first

    @property
    def failed(self) -> list:
        return [c for c in self.cells if c["status"] != "ok"]


def _models(models) -> dict:
    """{name: file or IRModule} from a list of files or a mapping."""
    if models is None:
        raise FarmError("give the models to benchmark (ONNX or GGUF files)")
    if isinstance(models, (str, Path)):
        models = [models]
    if isinstance(models, dict):
        items = list(models.items())
    else:
        items = [(Path(m).stem, m) for m in models]
    named = {}
    for name, model in items:
        if isinstance(model, (str, Path)) and not Path(model).is_file():
            raise FarmError(f"{model}: no such model file")
        if name in named:
            raise FarmError(f"two models are named {name!r}; pass a mapping {{name: file}} to tell them apart")
        named[name] = model
    if not named:
        raise FarmError("no models to benchmark")
    return named


def _check_matrix(backends, threads, repeat, warmup) -> None:
    for b in backends:
        if b not in BACKENDS:
            raise FarmError(f"unknown backend {b!r}; choose from {', '.join(BACKENDS)}")
    for t in threads:
        if not isinstance(t, int) or isinstance(t, bool) or not 1 <= t <= MAX_THREADS:
            raise FarmError(f"threads must be integers in [1, {MAX_THREADS}], got {t!r}")
    for name, value, low in (("repeat", repeat, 1), ("warmup", warmup, 0)):
        if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= MAX_REPEAT:
            raise FarmError(f"{name} must be an integer in [{low}, {MAX_REPEAT}], got {value!r}")


def _no_farm():
    raise FarmError("give the farm file (farm=... or --farm farm.yaml)")


def _stored(spec: dict, key: str, given, default):
    return given if given is not None else spec.get(key, default)


def bench(farm=None, models=None, boards="all", backends=None, threads=None, repeat=None, warmup=None,
          profile=None, db="results.db", local: bool = False, resume=None, cache_dir=None,
          quiet: bool = False) -> BenchRun:
    """Benchmark `models` on the farm's `boards` ("all" or names) for each backend and thread count."""
    if not resume:   # the arguments checked before the database is opened (or made)
        _check_matrix(backends or (), threads or (), repeat or 1, warmup or 0)
        load_farm(farm if farm is not None else _no_farm()).select(boards)
        _models(models)
    results = ResultsDB(db)
    try:
        spec = {}
        run_id = None
        if resume:
            stored = results.run(None if resume is True else str(resume), kind="bench" if resume is True else None)
            run_id, spec = stored["run_id"], stored["spec"]
            farm = farm or stored["farm"]
            if models is None and any(m is None for m in spec.get("models", {}).values()):
                raise FarmError(f"run {run_id} benchmarked modules given in Python; pass models= to resume it")
        farm = load_farm(farm if farm is not None else _no_farm())
        named = _models(models if models is not None else spec.get("models"))
        chosen = farm.select(boards if boards != "all" or not spec else spec.get("boards", "all"))
        backends = tuple(_stored(spec, "backends", backends, ("c",)))
        threads = tuple(_stored(spec, "threads", threads, (1,)))
        repeat, warmup = _stored(spec, "repeat", repeat, 20), _stored(spec, "warmup", warmup, 3)
        profile = bool(_stored(spec, "profile", profile, False))
        _check_matrix(backends, threads, repeat, warmup)
        if run_id is None:
            spec = {"models": {n: (str(Path(m).resolve()) if isinstance(m, (str, Path)) else None)
                               for n, m in named.items()},
                    "boards": [b.name for b in chosen], "backends": list(backends), "threads": list(threads),
                    "repeat": repeat, "warmup": warmup, "profile": profile}
            run_id = results.start_run("bench", farm=farm.path, spec=spec)
        builds, jobs = _matrix(named, chosen, backends, threads, repeat, warmup, profile,
                               Path(cache_dir) if cache_dir else DEFAULT_CACHE)
        done = {_key(c) for c in results.cells(run_id=run_id)}
        jobs = [j for j in jobs if _key(j) not in done]
        needed = {j["build"] for j in jobs}
        builds = {k: v for k, v in builds.items() if k in needed}
        commit = git_commit()

        def store(job: dict, result: dict) -> None:
            results.add_cell(run_id, _row(job, result, commit))

        run_matrix(farm, builds, jobs, run_cell, store, local=local, quiet=quiet)
        return BenchRun(run_id, results.location, results.cells(run_id=run_id))
    finally:
        results.close()


def _key(cell: dict) -> tuple:
    board = cell.get("farm_board", cell.get("board"))
    return (cell["model_hash"], board, cell["backend"], cell["threads"])


def _matrix(named: dict, chosen: list, backends, threads, repeat, warmup, profile, cache: Path):
    builds, jobs = {}, []
    for name, model in named.items():
        digest = model_hash(model)
        for fb in chosen:
            for backend in backends:
                # one build per model, target and backend: boards of one target share it
                key = f"{name}-{digest[:12]}-{backend}-{fb.board.name}{'-profiled' if profile else ''}"
                group = (digest, fb.board.target, fb.board.transport == "local", backend, profile)
                owner = next((k for k, job in builds.items() if job["group"] == group), None)
                if owner is None:
                    owner = key
                    builds[key] = {"group": group, "model": model, "name": name, "board": fb.board,
                                   "backend": backend, "out_dir": str(cache / key), "profile": profile}
                for t in threads:
                    jobs.append({"model": name, "model_hash": digest, "farm_board": fb.name, "board": fb.board,
                                 "backend": backend, "threads": t, "repeat": repeat, "warmup": warmup,
                                 "profile": profile, "build": owner})
    return builds, jobs


def _row(job: dict, result: dict, commit: str) -> dict:
    row = {"kind": "bench", "model": job["model"], "model_hash": job["model_hash"], "board": job["farm_board"],
           "backend": job["backend"], "threads": job["threads"], "git_commit": commit, "status": result["status"],
           "reason": result.get("reason"), "repeats": job["repeat"], "warmup": job["warmup"]}
    row.update(stats_columns(result.get("stats")))
    row["profile"] = result.get("profile")
    return row
