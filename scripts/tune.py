#!/usr/bin/env python3
"""Fill a board's tuning table (boards/tuning/BOARD.json) by measuring the
runtime kernels' knobs on the board, serially, through the RPC harness:

    python scripts/tune.py --board host --kernels gemm --repeat 20 --write

For each kernel, one knob at a time (the others at the best so far), every
candidate value is measured on every bucket of the kernel
(relax_edge.tuning.measure); tuning.best keeps the default unless a
candidate wins by more than the noise (the default is measured again after
each knob, so that the spread between its measurements counts). Then, with --verify N, the chosen
config and the default are measured again in N interleaved rounds, and the
table prints candidate -> median (min-max) per bucket and the choice.

--knob gemm.KC=256,128 limits the search to that knob and those values (the
default must be among them); --buckets small,medium to those buckets.
--write stores the choice (into --table PATH, default the board's table);
--json OUT keeps every measurement and the choice. --compare gemm.KC=512
skips the search and measures that config against the default in --verify
interleaved rounds (default 3).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from relax_edge import tuning  # noqa: E402
from relax_edge.errors import RelaxEdgeError  # noqa: E402
from relax_edge.target import load_board  # noqa: E402


def parse_knobs(specs, kernels) -> dict:
    """{kernel: {knob: [values]}} to search: KNOBS, or --knob KERNEL.KNOB=V1,V2 ..."""
    if not specs:
        return {k: dict(tuning.KNOBS[k]) for k in kernels}
    space: dict = {}
    for spec in specs:
        name, _, values = spec.partition("=")
        kernel, _, knob = name.partition(".")
        if kernel not in tuning.KNOBS or knob not in tuning.KNOBS[kernel]:
            known = ", ".join(f"{k}.{n}" for k in tuning.KNOBS for n in tuning.KNOBS[k])
            raise SystemExit(f"tune.py: --knob {spec!r}: unknown knob (known: {known})")
        try:
            chosen = [int(v) for v in values.split(",")] if values else list(tuning.KNOBS[kernel][knob])
        except ValueError:
            raise SystemExit(f"tune.py: --knob {spec!r}: values must be integers separated by commas") from None
        default = tuning.DEFAULTS[kernel][knob]
        if default not in chosen:
            chosen.insert(0, default)
        space.setdefault(kernel, {})[knob] = chosen
    return space


def parse_compare(specs) -> dict:
    """{kernel: full config} of --compare KERNEL.KNOB=VALUE ..."""
    configs: dict = {}
    for spec in specs:
        name, _, value = spec.partition("=")
        kernel, _, knob = name.partition(".")
        try:
            configs.setdefault(kernel, {})[knob] = int(value)
        except ValueError:
            raise SystemExit(f"tune.py: --compare {spec!r}: give KERNEL.KNOB=INTEGER") from None
    return {kernel: tuning.full_config(kernel, config) for kernel, config in configs.items()}


def pick_buckets(kernel: str, names) -> list:
    all_buckets = tuning.buckets(kernel)
    if not names:
        return all_buckets
    known = {b["name"] for b in all_buckets}
    unknown = [n for n in names if n not in known]
    if unknown:
        raise SystemExit(f"tune.py: unknown buckets {', '.join(unknown)} of {kernel} "
                         f"(known: {', '.join(sorted(known))})")
    return [b for b in all_buckets if b["name"] in names]


def fmt(r: dict) -> str:
    return f"{r['median_ms']:.4f} ms ({r['min_ms']:.4f}-{r['max_ms']:.4f})"


class Search:
    def __init__(self, board, args):
        self.board, self.args = board, args
        self.results: list = []
        self.count = 0

    def measure(self, kernel, bucket, config, total, tag="") -> dict:
        self.count += 1
        r = tuning.measure(self.board, kernel, bucket, config, repeat=self.args.repeat, warmup=self.args.warmup)
        r["round"] = tag
        self.results.append(r)
        print(f"[tune] ({self.count}/{total}) {kernel} {bucket['name']:<10} {tuning.config_id(r['config'])}: "
              f"{fmt(r)}, noise {100 * r['noise']:.1f}% {tag}", file=sys.stderr, flush=True)
        return r

    def kernel(self, kernel: str, knobs: dict, bucket_list: list) -> dict:
        current = dict(tuning.DEFAULTS[kernel])
        total = len(bucket_list) * (1 + sum(len(v) for v in knobs.values()))
        for bucket in bucket_list:
            self.measure(kernel, bucket, current, total)
        seen = {tuning.config_id(current)}
        for knob, values in knobs.items():
            for value in values:
                config = {**current, knob: value}
                if tuning.config_id(config) in seen:
                    continue
                seen.add(tuning.config_id(config))
                for bucket in bucket_list:
                    self.measure(kernel, bucket, config, total)
            for bucket in bucket_list:   # the default again: its spread between measurements is the noise floor
                self.measure(kernel, bucket, tuning.DEFAULTS[kernel], total)
            current = dict(tuning.best([r for r in self.results if r["kernel"] == kernel])[kernel]["config"])
        return current


def report(kernel: str, results: list, chosen: dict) -> None:
    """The table of candidate -> median (min-max) per bucket, and the choice."""
    rows = [r for r in results if r["kernel"] == kernel and not r.get("round")]
    bucket_names = list(dict.fromkeys(r["bucket"] for r in rows))
    configs = list(dict.fromkeys(tuning.config_id(r["config"]) for r in rows))
    default_id = tuning.config_id(tuning.DEFAULTS[kernel])
    print(f"\n{kernel}: candidate -> median (min-max) ms per bucket")
    print("| config | " + " | ".join(bucket_names) + " |")
    print("|---|" + "---|" * len(bucket_names))
    for cid in configs:
        cells = []
        for b in bucket_names:
            r = next((r for r in rows if r["bucket"] == b and tuning.config_id(r["config"]) == cid), None)
            cells.append(f"{r['median_ms']:.4f} ({r['min_ms']:.4f}-{r['max_ms']:.4f})" if r else "-")
        mark = " (default)" if cid == default_id else ""
        print(f"| {cid}{mark} | " + " | ".join(cells) + " |")
    c = chosen[kernel]
    verdict = "the default kept" if tuning.config_id(c["config"]) == default_id else "a new config"
    print(f"chosen for {kernel}: {tuning.config_id(c['config'])} ({verdict}; gain {100 * c['gain']:.1f}% "
          f"against a noise margin of {100 * c['noise']:.1f}%)")


def verify(search: Search, kernel: str, config: dict, bucket_list: list, rounds: int) -> dict:
    """Default and chosen measured again in interleaved rounds: {bucket: (default, chosen)} stats."""
    default = tuning.DEFAULTS[kernel]
    total = search.count + 2 * rounds * len(bucket_list)
    for i in range(rounds):
        for bucket in bucket_list:
            for cfg in ((default, config) if i % 2 == 0 else (config, default)):
                search.measure(kernel, bucket, cfg, total, tag=f"verify{i + 1}")
    out = {}
    print(f"\n{kernel}: interleaved re-measurement over {rounds} rounds, median (min-max) ms")
    print("| bucket | default | chosen | chosen / default |")
    print("|---|---|---|---|")
    def pooled(bucket, cfg):
        samples = [s for r in search.results if r["kernel"] == kernel and r["bucket"] == bucket["name"]
                   and r.get("round") and r["config"] == tuning.full_config(kernel, cfg) for s in r["samples"]]
        return tuning.stats(samples)
    for bucket in bucket_list:
        d, c = pooled(bucket, default), pooled(bucket, config)
        out[bucket["name"]] = {"default": {k: d[k] for k in ("median_ms", "min_ms", "max_ms", "noise")},
                               "chosen": {k: c[k] for k in ("median_ms", "min_ms", "max_ms", "noise")}}
        print(f"| {bucket['name']} | {fmt(d)} | {fmt(c)} | {c['median_ms'] / d['median_ms']:.3f} |")
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--board", required=True, help="a board name or YAML path")
    ap.add_argument("--kernels", nargs="+", default=None,
                    help=f"kernels to tune (default all: {', '.join(tuning.KNOBS)})")
    ap.add_argument("--knob", action="append", default=[], help="KERNEL.KNOB[=V1,V2,...]: search only these knobs")
    ap.add_argument("--buckets", default="", help="comma-separated bucket names to measure (default all)")
    ap.add_argument("--repeat", type=int, default=20, help="timed runs per measurement (default 20)")
    ap.add_argument("--warmup", type=int, default=3, help="untimed runs first (default 3)")
    ap.add_argument("--verify", type=int, default=3,
                    help="interleaved rounds of default vs chosen after the search (default 3; 0: none)")
    ap.add_argument("--write", action="store_true", help="store the choice in the board's table")
    ap.add_argument("--table", help="with --write: the table file (default the board's, boards/tuning/BOARD.json)")
    ap.add_argument("--json", help="write every measurement and the choice to this file")
    ap.add_argument("--compare", action="append", default=[],
                    help="KERNEL.KNOB=VALUE: no search; this config against the default in --verify rounds")
    args = ap.parse_args(argv)
    if args.repeat < 1 or args.warmup < 0 or args.verify < 0:
        ap.error("--repeat must be >= 1, --warmup and --verify >= 0")
    try:
        board = load_board(args.board)
        kernels = args.kernels or ([s.partition(".")[0] for s in args.knob] if args.knob else list(tuning.KNOBS))
        unknown = [k for k in kernels if k not in tuning.KNOBS]
        if unknown:
            ap.error(f"unknown kernels {', '.join(unknown)} (known: {', '.join(tuning.KNOBS)})")
        space = parse_knobs(args.knob, kernels)
        search = Search(board, args)
        chosen, checks = {}, {}
        if args.compare:
            for kernel, config in parse_compare(args.compare).items():
                bucket_list = pick_buckets(kernel, [b for b in args.buckets.split(",") if b])
                checks[kernel] = verify(search, kernel, config, bucket_list, args.verify or 3)
            kernels = []
        for kernel in dict.fromkeys(kernels):
            if kernel not in space:
                continue
            bucket_list = pick_buckets(kernel, [b for b in args.buckets.split(",") if b])
            print(f"[tune] {kernel} on {board.name}: knobs {', '.join(space[kernel])}, buckets "
                  f"{', '.join(b['name'] for b in bucket_list)}, repeat {args.repeat}", file=sys.stderr, flush=True)
            search.kernel(kernel, space[kernel], bucket_list)
            chosen[kernel] = tuning.best([r for r in search.results if r["kernel"] == kernel and not r.get("round")])[
                kernel]
            report(kernel, search.results, chosen)
            config = chosen[kernel]["config"]
            if args.verify and config != tuning.DEFAULTS[kernel]:
                checks[kernel] = verify(search, kernel, config, bucket_list, args.verify)
        if args.json:
            Path(args.json).write_text(json.dumps({"board": board.name, "chosen": chosen, "verify": checks,
                                                   "results": search.results}, indent=1))
        if args.write:
            path = tuning.write_table(board, chosen, path=args.table)
            print(f"wrote {path}")
    except RelaxEdgeError as err:
        print(f"tune.py: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
