"""What a farm worker does: build a model for a target, and run one cell.

Both are plain functions of plain data (dicts, Boards, paths) so that a Ray
task and a process-pool job call them the same way, and both return a dict
instead of raising: a failure is data (`{"status": "failed", "reason": ...}`)
that the driver stores like a measurement, so one dead board never stops
the run. `statistics_of` turns a device's benchmark into the statistics every
farm measurement shares (bench cells and tuning probes alike):

    unit, median_ms, min_ms, max_ms, mean_ms, std_ms, samples, noise, repeat, warmup

(`_ms` keys hold instruction counts when unit is "instructions"). They are
relax_edge/tuning.py's `stats` (noise: the interquartile range over the
median, the range with fewer than four samples) plus the mean and std.
"""

from __future__ import annotations

import dataclasses
import hashlib
import statistics
import traceback
from pathlib import Path

REASON_CHARS = 2000   # a failure's reason as stored: its last characters


def statistics_of(bench: dict) -> dict:
    """The shared statistics of a LoadedModel.benchmark result (ms or instructions)."""
    unit = bench.get("unit", "ms")
    key = "instructions" if unit == "instructions" else "ms"
    samples = [float(v) for v in bench[f"samples_{key}"]]
    return summarize(samples, unit, bench.get("repeat", len(samples)), bench.get("warmup", 0))


def summarize(samples: list, unit: str = "ms", repeat: int | None = None, warmup: int = 0) -> dict:
    """tuning.stats (median, extremes, noise: the methodology tuning measures with) plus mean and std."""
    from ..tuning import stats
    if not samples:
        raise ValueError("no samples to summarize")
    out = stats(samples)
    return {"unit": unit, **out, "mean_ms": statistics.fmean(out["samples"]),
            "std_ms": statistics.pstdev(out["samples"]), "repeat": repeat or len(samples), "warmup": warmup}


def stats_columns(stats: dict | None) -> dict:
    """The results database's statistics columns of a measurement (none for a failed one)."""
    if not stats:
        return {}
    return {"unit": stats["unit"], "median": stats["median_ms"], "minimum": stats["min_ms"],
            "maximum": stats["max_ms"], "mean": stats["mean_ms"], "std": stats["std_ms"], "noise": stats["noise"],
            "samples": stats["samples"]}


def model_hash(model) -> str:
    """The content hash of a model file (or of an IRModule's printed text)."""
    digest = hashlib.sha256()
    if isinstance(model, (str, Path)):
        with open(model, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                digest.update(block)
    else:
        from ..ir import print_module
        digest.update(print_module(model).encode())
    return digest.hexdigest()


def _short(err: BaseException) -> str:
    text = f"{type(err).__name__}: {err}".strip()
    return text[-REASON_CHARS:]


def _import(model):
    if not isinstance(model, (str, Path)):
        return model, None
    from ..cli import _from_file
    return _from_file(str(model)), {"onnx": str(Path(model).resolve()), "dim_bounds": {}, "max_context": None}


def build_model(job: dict) -> dict:
    """Build job["model"] (a file or an IRModule) for job["board"] with job["backend"] into job["out_dir"]:
    {"artifact": out_dir} or {"error": reason}. The build directory's key makes a second build a no-op."""
    from ..build import build
    try:
        mod, source = _import(job["model"])
        art = build(mod, board=job["board"], backend=job["backend"], out_dir=job["out_dir"], name=job["name"],
                    source=source, profile=job.get("profile", False))
        return {"artifact": str(art.out_dir), "cached": art.cached, "build_seconds": art.build_seconds}
    except Exception as err:  # noqa: BLE001 - a failed build is the cells' reason, not a crash of the farm
        return {"error": f"build for {job['board'].name} ({job['backend']}) failed: {_short(err)}"}


def _inputs(art, seed: int = 0) -> list:
    from ..cli import _default_sizes, _random_inputs
    return _random_inputs(art.signature["main"], _default_sizes(art, {}), seed)


def run_cell(cell: dict, built: dict) -> dict:
    """Benchmark (and profile) one cell on its board: the statistics, or status failed with the reason."""
    if "error" in built:
        return {"status": "failed", "reason": built["error"]}
    from ..build import Artifact
    from ..deploy import connect
    board = cell["board"]
    try:
        art = Artifact.load(built["artifact"])
        # a build is shared by the boards of one target; each session checks the artifact names its board
        art = dataclasses.replace(art, board=board.name)
        inputs = _inputs(art)
        with connect(board) as dev, dev.load(art, threads=cell["threads"]) as m:
            stats = statistics_of(m.benchmark(*inputs, warmup=cell["warmup"], repeat=cell["repeat"]))
            profile = m.profile(*inputs) if cell["profile"] else None
    except Exception as err:  # noqa: BLE001 - the cell fails with the reason, the farm goes on
        reason = _short(err)
        if not reason.strip() or reason.endswith(": "):
            reason = traceback.format_exc()[-REASON_CHARS:]
        return {"status": "failed", "reason": f"{board.name}: {reason}"}
    return {"status": "ok", "stats": stats, "profile": profile}
