"""`relax-edge farm`: bench and report (relax_edge/cli.py adds this subcommand).

    relax-edge farm bench --farm farm.yaml --models a.onnx b.onnx [--boards all|NAME...] [--backend c llvm]
        [--threads 1 2] [--repeat N] [--warmup N] [--profile] [--db results.db] [--json out.json]
        [--plot heatmap.png] [--local] [--resume [RUN]] [--cache DIR]
    relax-edge farm report [--db results.db] [--since 7d|2026-12-01] [--compare A B] [--run RUN]
    relax-edge farm tune --farm farm.yaml [--boards all|NAME...] [--kernels gemm ...] [--buckets small ...]
        [--knob gemm.KC=256,128] [--repeat N] [--warmup N] [--rounds N] [--db results.db] [--local]
        [--tables DIR] [--no-write]
"""

from __future__ import annotations

import json
from pathlib import Path


def add_farm_parser(sub, repeats, threads) -> None:
    p = sub.add_parser("farm", help="benchmark models on every board of a farm (Ray), results in a database")
    farm_sub = p.add_subparsers(dest="farm_command", metavar="FARM_COMMAND", parser_class=type(p))
    p.set_defaults(func=lambda args: p.error("choose a farm command: bench or report"))

    b = farm_sub.add_parser("bench", help="run the model x board x backend x threads matrix on the farm")
    b.add_argument("--farm", help="the farm file (YAML); with --resume, default the run's")
    b.add_argument("--models", nargs="+", help="ONNX (or GGUF) files; with --resume, default the run's")
    b.add_argument("--boards", nargs="+", default=["all"], help="farm board names, or all (default)")
    b.add_argument("--backend", nargs="+", choices=["c", "llvm"], help="backends (default c)")
    b.add_argument("--threads", nargs="+", type=threads, help="thread counts (default 1)")
    b.add_argument("--repeat", type=repeats, help="timed repeats per cell (default 20)")
    b.add_argument("--warmup", type=repeats, help="warm-up runs per cell (default 3)")
    b.add_argument("--profile", action="store_true", default=None, help="also store each cell's per-kernel profile")
    b.add_argument("--db", default="results.db", help="SQLite path or SQLAlchemy URL (default results.db)")
    b.add_argument("--json", help="write the run's cells to this file, atomically")
    b.add_argument("--plot", help="draw a heatmap of median latency, model x board, into this PNG")
    b.add_argument("--local", action="store_true", help="a process pool on this machine instead of Ray")
    b.add_argument("--resume", nargs="?", const=True, metavar="RUN",
                   help="continue a run (default the latest bench run): cells it holds are not run again")
    b.add_argument("--cache", help="the build cache (default build/farm)")
    b.add_argument("--quiet", action="store_true", help="no progress lines")
    b.set_defaults(func=cmd_farm_bench)

    t = farm_sub.add_parser("tune", help="measure kernel knob candidates on the farm's boards, write tuning tables")
    t.add_argument("--farm", required=True, help="the farm file (YAML)")
    t.add_argument("--boards", nargs="+", default=["all"], help="farm board names, or all (default)")
    t.add_argument("--kernels", nargs="+", default=["gemm"], help="kernels to tune (default gemm)")
    t.add_argument("--buckets", nargs="+", help="bucket names to measure (default every bucket of each kernel)")
    t.add_argument("--knob", action="append", metavar="KERNEL.KNOB=V1,V2",
                   help="limit the candidates of a knob (repeatable; default every knob's values)")
    t.add_argument("--repeat", type=repeats, default=20, help="timed repeats per measurement (default 20)")
    t.add_argument("--warmup", type=repeats, default=3, help="warm-up runs per measurement (default 3)")
    t.add_argument("--rounds", type=repeats, default=2, help="measurements of the default config (default 2)")
    t.add_argument("--db", default="results.db", help="SQLite path or SQLAlchemy URL (default results.db)")
    t.add_argument("--local", action="store_true", help="a process pool on this machine instead of Ray")
    t.add_argument("--tables", help="write BOARD.json here (default each board's own tuning table)")
    t.add_argument("--no-write", dest="write", action="store_false", help="measure and choose, write no table")
    t.add_argument("--quiet", action="store_true", help="no progress lines")
    t.set_defaults(func=cmd_farm_tune)

    r = farm_sub.add_parser("report", help="tables of the results database and the regressions")
    r.add_argument("--db", default="results.db", help="SQLite path or SQLAlchemy URL (default results.db)")
    r.add_argument("--since", help="only results from this time (ISO date/time) or age (30m, 12h, 7d)")
    r.add_argument("--compare", nargs=2, metavar=("A", "B"), help="compare run B with run A")
    r.add_argument("--run", help="only this run")
    r.set_defaults(func=cmd_farm_report)


def cmd_farm_bench(args) -> int:
    from ..files import write_atomic
    from .bench import bench
    from .report import cells_table, plot_heatmap
    run = bench(farm=args.farm, models=args.models, boards=args.boards, backends=args.backend,
                threads=args.threads, repeat=args.repeat, warmup=args.warmup, profile=args.profile, db=args.db,
                local=args.local, resume=args.resume, cache_dir=args.cache, quiet=args.quiet)
    print(f"run {run.run_id}: {len(run.cells) - len(run.failed)} cells ok, {len(run.failed)} failed "
          f"(stored in {run.db})")
    print(cells_table(run.cells), end="")
    if args.json:
        write_atomic(Path(args.json), json.dumps({"run_id": run.run_id, "cells": run.cells}, indent=1))
        print(f"  wrote {args.json}")
    if args.plot:
        plot_heatmap(run.cells, Path(args.plot))
        print(f"  wrote {args.plot}")
    return 1 if run.failed else 0


def cmd_farm_report(args) -> int:
    from .db import ResultsDB
    from .report import report
    with ResultsDB(args.db) as db:
        print(report(db, since=args.since, compare_runs=args.compare, run_id=args.run), end="")
    return 0


def parse_knobs(specs) -> dict:
    """{kernel: {knob: [values]}} from KERNEL.KNOB=V1,V2 options."""
    from .config import FarmError
    space: dict = {}
    for spec in specs or []:
        name, _, values = spec.partition("=")
        kernel, _, knob = name.partition(".")
        try:
            space.setdefault(kernel, {})[knob] = [int(v) for v in values.split(",")]
        except ValueError:
            raise FarmError(f"--knob {spec!r}: give KERNEL.KNOB=V1,V2 with integer values") from None
        if not kernel or not knob:
            raise FarmError(f"--knob {spec!r}: give KERNEL.KNOB=V1,V2 with integer values")
    return space


def cmd_farm_tune(args) -> int:
    from .. import tuning
    from .tune import tune
    buckets = {k: args.buckets for k in args.kernels} if args.buckets else None
    run = tune(farm=args.farm, boards=args.boards, kernels=args.kernels, buckets=buckets,
               knobs=parse_knobs(args.knob), repeat=args.repeat, warmup=args.warmup, db=args.db, local=args.local,
               write=args.write, tables_dir=args.tables, default_rounds=args.rounds, quiet=args.quiet)
    failed = [c for c in run.cells if c["status"] != "ok"]
    print(f"run {run.run_id}: {len(run.cells) - len(failed)} measurements, {len(failed)} failed (stored in {run.db})")
    for board, chosen in run.chosen.items():
        for kernel, entry in chosen.items():
            print(f"  {board} {kernel}: {tuning.config_id(entry['config'])} (gain {entry['gain']:.1%}, "
                  f"noise {entry['noise']:.1%})" + (f" -> {run.tables[board]}" if board in run.tables else ""))
    for c in failed:
        print(f"  failed: {c['model']} on {c['board']}: {c['reason']}")
    return 1 if failed else 0
