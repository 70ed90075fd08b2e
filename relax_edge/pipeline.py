"""The optimizing pipeline: a readable list of named passes per target.

    mod = rxe.optimize(mod, board="qemu-aarch64")       # every pass below, in order
    rxe.optimize(mod, board="host", passes=["fold_constants", "legalize"])

Graph level (operators): fold_constants (compile-time evaluation of
constant subgraphs, weight transforms included), fold_batch_norm
(inference batch norm into the convolution before it), dce, cse, dispatch
(library micro-kernels of runtime_c/kernels through call_extern);
legalize (the rest into tensor programs); fuse (merges tensor programs as
their access patterns allow); dce again; schedule (per-target loop
transformations: vector width, unrolling, threads).

`rxe.build` runs this pipeline on modules that still have operator calls
(`optimize=False` legalizes only). With `verify=True` the IR verifier runs
after every pass, naming the pass whose output is ill-formed. Each pass is
one file under relax_edge/transform/ with a description of what it does and
does not guarantee.
"""

from __future__ import annotations

import sys
import time

from .errors import RelaxEdgeError
from .ir.expr import IRModule
from .target import DEFAULT_BOARD, load_board

__all__ = ["optimize", "default_passes", "PASSES"]


def _dispatch(mod, board):
    from .transform.dispatch import KERNEL_FAMILIES, dispatch
    # microcontrollers: only kernels without scratch (their arena stays at the lower bound)
    families = ("dense", "depthwise") if board.target.freestanding else KERNEL_FAMILIES
    return dispatch(mod, families)


def _schedule(mod, board):
    from .transform.schedule import schedule
    return schedule(mod, board.target)


def _plain(module_name: str, fn_name: str):
    def run(mod, board):
        import importlib
        return getattr(importlib.import_module(f"relax_edge.transform.{module_name}"), fn_name)(mod)
    return run


# name -> fn(mod, board) -> mod
PASSES = {
    "fold_constants": _plain("fold_constants", "fold_constants"),
    "fold_batch_norm": _plain("fold_batch_norm", "fold_batch_norm"),
    "dce": _plain("dce", "dce"),
    "cse": _plain("cse", "cse"),
    "dispatch": _dispatch,
    "legalize": _plain("legalize", "legalize"),
    "fuse": _plain("fuse", "fuse"),
    "schedule": _schedule,
}


def default_passes(board=DEFAULT_BOARD) -> list:
    """The pass names `optimize` runs for `board`, in order."""
    return ["fold_constants", "fold_batch_norm", "dce", "cse", "dispatch", "legalize", "fuse", "dce", "schedule"]


def optimize(mod: IRModule, board=DEFAULT_BOARD, passes=None, verify: bool = False,
             quiet: bool = True) -> IRModule:
    """`mod` through the pipeline for `board` (a name, a YAML path or a Board)."""
    from .ir.verify import verify as verify_module
    board = load_board(board)
    names = list(passes) if passes is not None else default_passes(board)
    unknown = [n for n in names if n not in PASSES]
    if unknown:
        raise RelaxEdgeError(f"unknown passes {', '.join(unknown)}; known: {', '.join(PASSES)}")
    for name in names:
        start = time.perf_counter()
        mod = PASSES[name](mod, board)
        if verify:
            try:
                verify_module(mod)
            except RelaxEdgeError as err:
                raise RelaxEdgeError(f"after pass {name}: {err}") from None
        if not quiet:
            print(f"[relax-edge] {name}: {time.perf_counter() - start:.2f}s", file=sys.stderr, flush=True)
    return mod
