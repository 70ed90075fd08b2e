"""Run the ONNX backend node tests shipped in the installed `onnx` package
through relax_edge's importer and interpreter; print per-operator pass /
fail / unsupported counts and the total over the in-scope cases.

    python scripts/onnx_node_tests.py [--failures] [--op Conv | --ops Conv,Relu] [--json out.json]
    python scripts/onnx_node_tests.py --all [--no-ort] [--ops ...] [--json out.json]

`--all` runs every case of the collection (in scope or not) and, when ONNX
Runtime is installed, the same cases through it: per operator the cases,
relax_edge's passes and ONNX Runtime's, then the totals and the share of
ONNX Runtime's passes that relax_edge passes too.
"""

from __future__ import annotations

import argparse
import json
import sys

from relax_edge.files import write_atomic
from relax_edge.frontend.onnx.node_tests import (
    case_ops,
    collect_cases,
    compare_with_ort,
    ort_available,
    run_case,
    run_case_ort,
    summarize,
)


def _selected_ops(args) -> set:
    ops = set(filter(None, (args.ops or "").split(",")))
    if args.op:
        ops.add(args.op)
    return ops


def _print_in_scope(results) -> None:
    s = summarize(results)
    print(f"{'operator':<22}{'pass':>6}{'fail':>6}{'unsup':>7}")
    for op in sorted(s["per_op"]):
        c = s["per_op"][op]
        print(f"{op:<22}{c['pass']:>6}{c['fail']:>6}{c['unsupported']:>7}")
    t = s["totals"]
    print(f"\nin scope: {s['in_scope']} cases ({t['out_of_scope']} out of scope: other operators or dtypes)")
    print(f"pass {t['pass']}, fail {t['fail']}, unsupported {t['unsupported']}: "
          f"{100 * s['pass_rate']:.1f}% pass")


def _print_side_by_side(results, ort_results) -> None:
    """The --all table; without ONNX Runtime (`ort_results` None) its column reads "-"."""
    s = compare_with_ort(results, results if ort_results is None else ort_results)
    print(f"{'operator':<26}{'cases':>7}{'relax_edge':>12}{'ORT':>7}")
    for op in sorted(s["per_op"]):
        c = s["per_op"][op]
        theirs = "-" if ort_results is None else c["ort"]
        print(f"{op:<26}{c['cases']:>7}{c['ours']:>12}{theirs:>7}")
    t = s["totals"]
    print(f"\n{t['cases']} cases ({t['in_scope']} in scope for relax_edge): relax_edge passes {t['ours']}")
    if ort_results is not None:
        print(f"ONNX Runtime passes {t['ort']}, both pass {t['both']}")
        print(f"of the cases ORT passes, relax_edge passes {100 * s['of_ort_passes']:.1f}%")
        print(f"leaving out the {t['left_out']} cases of operators left out by design or not comparable (strings, "
              f"sequences and optionals, training, ai.onnx.ml, image decoding, random values; see README.md): "
              f"ORT passes {t['ort_kept']}, "
              f"relax_edge passes {t['both_kept']} of them, {100 * s['of_ort_passes_kept']:.1f}%")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--all", action="store_true",
                        help="every case of the collection, side by side with ONNX Runtime when installed")
    parser.add_argument("--no-ort", action="store_true", help="with --all: leave ONNX Runtime out")
    parser.add_argument("--failures", action="store_true", help="list every failing or unsupported case")
    parser.add_argument("--op", help="only cases that use this operator")
    parser.add_argument("--ops", help="only cases that use one of these operators (comma-separated)")
    parser.add_argument("--json", help="write every case's result to this file (atomically)")
    args = parser.parse_args(argv)
    ops = _selected_ops(args)
    cases = [c for c in collect_cases() if not ops or case_ops(c) & ops]
    with_ort = args.all and not args.no_ort and ort_available()
    if args.all and not args.no_ort and not with_ort:
        print("ONNX Runtime is not installed: relax_edge's column only", file=sys.stderr)
    results, ort_results = [], []
    for i, case in enumerate(cases):
        results.append(run_case(case))
        if with_ort:
            ort_results.append(run_case_ort(case))
        if (i + 1) % 200 == 0:
            print(f"... {i + 1}/{len(cases)} cases", file=sys.stderr)
    if args.all:
        _print_side_by_side(results, ort_results if with_ort else None)
    else:
        _print_in_scope(results)
    if args.failures:
        for r in results:
            if r.status in ("fail", "unsupported"):
                print(f"{r.status:<12}{r.name}: {r.detail}")
    if args.json:
        payload = [dict(r.__dict__) for r in results]
        for row, theirs in zip(payload, ort_results):
            row.update(ort_status=theirs.status, ort_detail=theirs.detail)
        write_atomic(args.json, json.dumps(payload, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
