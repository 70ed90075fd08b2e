"""The optimizing pipeline: a readable list of named passes per target.

    mod = rxe.optimize(mod, board="qemu-aarch64")       # every pass below, in order
    rxe.optimize(mod, board="host", passes=["fold_constants", "legalize"])

Graph level (operators): quantize (QDQ chains into int8 operators, before
their weights fold into float), fold_constants (compile-time evaluation of
constant subgraphs, weight transforms included), fold_batch_norm
(inference batch norm into the convolution before it), dce, cse, dispatch
(library micro-kernels of runtime_c/kernels through call_extern);
legalize (the rest into tensor programs); fuse (merges tensor programs as
their access patterns allow); dedupe (one program for identical ones: a
model's repeated layers); dce again; schedule (per-target loop
transformations: vector width, unrolling, threads).

`rxe.build` runs this pipeline on modules that still have operator calls
(`optimize=False` legalizes only). With `verify=True` the graph-IR verifier
(ir/verify.py) and the tensor-program verifier (tir/verify.py, on every
tensor program of the module) run after every pass, naming the pass whose
output is ill-formed (and the program). Each pass is one file under
relax_edge/transform/ with a description of what it does and does not
guarantee.
"""

from __future__ import annotations

import sys
import time

from .errors import RelaxEdgeError
from .ir.expr import IRModule
from .ir.verify import verify as verify_module
from .target import DEFAULT_BOARD, load_board
from .tir.verify import verify_program
from .transform.cse import cse
from .transform.dce import dce
from .transform.dedupe import dedupe
from .transform.dispatch import KERNEL_FAMILIES, dispatch
from .transform.fold_batch_norm import fold_batch_norm
from .transform.fold_constants import fold_constants
from .transform.fuse import fuse
from .transform.legalize import legalize
from .transform.quantize import quantize_int8
from .transform.schedule import schedule

__all__ = ["optimize", "default_passes", "PASSES"]


def _dispatch(mod, board):
    # microcontrollers: only kernels without scratch (their arena stays at the lower bound)
    return dispatch(mod, ("dense", "depthwise") if board.target.freestanding else KERNEL_FAMILIES)


def _schedule(mod, board):
    return schedule(mod, board.target)


def _legalize(mod, board):
    return legalize(mod, board.target)


def _graph_pass(fn):
    """A pass that needs only the module, as a fn(mod, board)."""
    def run(mod, board):
        return fn(mod)
    return run


# name -> fn(mod, board) -> mod
PASSES = {
    "quantize": _graph_pass(quantize_int8),
    "fold_constants": _graph_pass(fold_constants),
    "fold_batch_norm": _graph_pass(fold_batch_norm),
    "dce": _graph_pass(dce),
    "cse": _graph_pass(cse),
    "dispatch": _dispatch,
    "legalize": _legalize,
    "fuse": _graph_pass(fuse),
    "dedupe": _graph_pass(dedupe),
    "schedule": _schedule,
}


def default_passes(board=DEFAULT_BOARD) -> list:
    """The pass names `optimize` runs for `board`, in order."""
    return ["quantize", "fold_constants", "fold_batch_norm", "dce", "cse", "dispatch", "legalize", "fuse", "dedupe",
            "dce", "schedule"]


def optimize(mod: IRModule, board=DEFAULT_BOARD, passes=None, verify: bool = False,
             quiet: bool = True) -> IRModule:
    """`mod` through the pipeline for `board` (a name, a YAML path or a Board);
    verify=True checks the graph IR and every tensor program after each pass."""
    from .tuning import board_mirrors
    board = load_board(board)
    names = list(passes) if passes is not None else default_passes(board)
    unknown = [n for n in names if n not in PASSES]
    if unknown:
        raise RelaxEdgeError(f"unknown passes {', '.join(unknown)}; known: {', '.join(PASSES)}")
    with board_mirrors(board):   # the scratch sizes of the board's tuning table (relax_edge/tuning.py)
        for name in names:
            start = time.perf_counter()
            mod = PASSES[name](mod, board)
            if verify:
                _verify_after(mod, name)
            if not quiet:
                print(f"[relax-edge] {name}: {time.perf_counter() - start:.2f}s", file=sys.stderr, flush=True)
    return mod


def _verify_after(mod: IRModule, pass_name: str) -> None:
    """Run the graph-IR verifier and the tensor-program verifier on `mod`, the
    output of pass `pass_name`; a RelaxEdgeError names the pass (and the program)."""
    try:
        verify_module(mod)
    except RelaxEdgeError as err:
        raise RelaxEdgeError(f"after pass {pass_name}: {err}") from None
    for program in mod.tensor_programs.values():
        try:
            verify_program(program)   # its error names the program
        except RelaxEdgeError as err:
            raise RelaxEdgeError(f"after pass {pass_name}: {err}") from None
