"""Run the ONNX backend node tests shipped in the installed `onnx` package
through relax_edge's importer and interpreter; print per-operator pass /
fail / unsupported counts and the total over the in-scope cases.

    python scripts/onnx_node_tests.py [--failures] [--op Conv] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile

from relax_edge.frontend.onnx.node_tests import collect_cases, run_case, summarize


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--failures", action="store_true", help="list every failing or unsupported case")
    parser.add_argument("--op", help="only cases that use this operator")
    parser.add_argument("--json", help="write every case's result to this file")
    args = parser.parse_args(argv)
    cases = collect_cases()
    results = []
    for i, case in enumerate(cases):
        r = run_case(case)
        if args.op and args.op not in r.ops:
            continue
        results.append(r)
        if (i + 1) % 200 == 0:
            print(f"... {i + 1}/{len(cases)} cases", file=sys.stderr)
    s = summarize(results)
    print(f"{'operator':<22}{'pass':>6}{'fail':>6}{'unsup':>7}")
    for op in sorted(s["per_op"]):
        c = s["per_op"][op]
        print(f"{op:<22}{c['pass']:>6}{c['fail']:>6}{c['unsupported']:>7}")
    t = s["totals"]
    print(f"\nin scope: {s['in_scope']} cases ({t['out_of_scope']} out of scope: other operators or dtypes)")
    print(f"pass {t['pass']}, fail {t['fail']}, unsupported {t['unsupported']}: "
          f"{100 * s['pass_rate']:.1f}% pass")
    if args.failures:
        for r in results:
            if r.status in ("fail", "unsupported"):
                print(f"{r.status:<12}{r.name}: {r.detail}")
    if args.json:
        payload = [r.__dict__ for r in results]
        fd, tmp = tempfile.mkstemp(dir=os.path.dirname(os.path.abspath(args.json)) or ".")
        with os.fdopen(fd, "w") as f:
            json.dump(payload, f, indent=1)
        os.replace(tmp, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
