"""Code size of the C runtime core on every board whose compiler is installed.

    python scripts/size_report.py [--opt=-Os] [--board NAME ...]

The core (runtime_c/src: status.c, check.c, module.c, math.c) is compiled
with each board's toolchain and flags at the given optimization level
(freestanding boards get RXE_NO_LIBM and the runtime's own math), and the
.text, .data and .bss of its objects are summed with the board's `size`
tool. The last line sets the Cortex-M4 .text against the 8 KB goal, beside
what TensorFlow Lite Micro and ExecuTorch state for their cores.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from relax_edge.target import board_names, load_board, toolchain_problems  # noqa: E402
from relax_edge.toolchain import Toolchain, object_sizes, runtime_objects_for  # noqa: E402

CORTEX_M4_BOARD = "qemu-cortex-m4"
GOAL_BYTES = 8 * 1024
OTHERS = "TFLite Micro claims 16 KB; ExecuTorch's core is about 50 KB"


def measure(board, opt_level: str) -> dict:
    """The summed sizes of the runtime core's objects for one board."""
    tc = Toolchain.for_board(board, opt_level)
    sizes = object_sizes(tc.size_tool, runtime_objects_for(tc.cc, tc.cflags))
    t = board.target
    target = t.triple if t.triple != "native" else "native"
    if t.cpu != "generic":
        target += f" ({t.cpu})"
    return {"board": board.name, "target": target, "cc": tc.cc, **sizes}


def print_table(rows: list, opt_level: str) -> None:
    print(f"relax_edge runtime core (status.c check.c module.c math.c) at {opt_level}, bytes")
    header = f"{'board':<16} {'target':<32} {'text':>7} {'data':>6} {'bss':>6}"
    print(header)
    print("-" * len(header))
    for r in rows:
        print(f"{r['board']:<16} {r['target']:<32} {r['text']:>7} {r['data']:>6} {r['bss']:>6}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--opt", default="-Os", help="optimization level, written --opt=-O2 (default -Os)")
    parser.add_argument("--board", action="append", help="only these boards (repeatable)")
    args = parser.parse_args(argv)

    rows = []
    for name in args.board or board_names():
        board = load_board(name)
        if not shutil.which(Toolchain.for_board(board, args.opt).cc):
            print(f"skipped {name}: {'; '.join(toolchain_problems(board))}", file=sys.stderr)
            continue
        rows.append(measure(board, args.opt))
    if not rows:
        print("no board's compiler is installed (bash scripts/setup.sh installs them)", file=sys.stderr)
        return 1
    print_table(rows, args.opt)
    m4 = next((r for r in rows if r["board"] == CORTEX_M4_BOARD), None)
    if m4 is not None:
        verdict = "within" if m4["text"] <= GOAL_BYTES else "over"
        print(f"\nCortex-M4 .text: {m4['text']} bytes = {m4['text'] / 1024:.1f} KB, {verdict} the "
              f"{GOAL_BYTES // 1024} KB goal ({100 * m4['text'] / GOAL_BYTES:.0f}%); {OTHERS}.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
