"""The `relax-edge` command line.

Subcommands arrive with the stages that implement them (compile, run, bench,
boards); `relax-edge --help` lists what this version has.
"""

from __future__ import annotations

import argparse
import sys

from . import __version__
from .errors import RelaxEdgeError


def _cmd_ops(args) -> int:
    """List the registered operators with their pattern kind and attributes."""
    from .op import OPS
    for name in sorted(OPS):
        op = OPS[name]
        attrs = ", ".join(f"{k}={v!r}" for k, v in op.attrs.items()) or "-"
        print(f"{name:<14} {op.kind:<12} {attrs}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="relax-edge",
        description="relax_edge: compile ML models with dynamic shapes for embedded and mobile boards.",
    )
    parser.add_argument("--version", action="version", version=f"relax-edge {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    ops = sub.add_parser("ops", help="list the operators relax_edge knows")
    ops.set_defaults(func=_cmd_ops)
    return parser


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 0
    try:
        return args.func(args)
    except RelaxEdgeError as err:
        print(f"relax-edge: error: {err}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
