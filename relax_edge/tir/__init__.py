# ruff: noqa: F401
"""Tensor programs (loop level): expressions, statements, a small compute
language that lowers to loop nests, a printer, a verifier and a numpy
interpreter."""

from .compute import Reduce, Tensor, compute, lower, placeholder, reduce_axis, reduce_max, reduce_min, reduce_sum
from .expr import (
                   Cast,
                   Const,
                   Index,
                   Load,
                   PrimExpr,
                   Reinterpret,
                   ScalarVar,
                   cast,
                   const,
                   eq,
                   intrinsic,
                   logical_and,
                   logical_not,
                   logical_or,
                   maximum,
                   minimum,
                   ne,
                   reinterpret,
                   select,
                   wrap,
)
from .printer import print_program
from .program import TensorProgram
from .stmt import Allocate, Buffer, For, IfThenElse, Let, Seq, Store, loop_var

__all__ = [name for name in dir() if not name.startswith("_")]
