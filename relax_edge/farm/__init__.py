"""The board farm: benchmark and tune many models on many boards at once,
on Ray or a local process pool, with every result in a SQL database.

    run = rxe.farm.bench(farm="farm.yaml", models=["a.onnx"], backends=("c", "llvm"), db="results.db")
    print(rxe.farm.report(rxe.farm.ResultsDB("results.db")))

config.py (farm files), db.py (the results database), work.py (what a
worker does: build, run a cell; the shared statistics), scheduler.py (Ray
tasks with board resources, or the process pool), bench.py
(rxe.farm.bench), tune.py (rxe.farm.tune: relax_edge/tuning.py's search as
farm tasks), report.py (tables, regressions, comparisons, heatmap),
cli.py (`relax-edge farm`). Ray is imported only when a farm runs on it.
"""

from .bench import BenchRun, bench
from .config import Farm, FarmBoard, FarmError, load_farm, parse_farm
from .db import ResultsDB
from .report import regressions, report
from .tune import TuneRun, tune
from .work import statistics_of, summarize

__all__ = ["bench", "BenchRun", "tune", "TuneRun", "Farm", "FarmBoard", "FarmError", "load_farm", "parse_farm",
           "ResultsDB", "regressions", "report", "statistics_of", "summarize"]
