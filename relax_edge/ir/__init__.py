# ruff: noqa: F401
"""The cross-level IR: symbolic shapes, types, graph functions, builder,
verifier and printer."""

from .builder import Builder
from .expr import (
                   Binding,
                   BindingBlock,
                   Call,
                   CallExtern,
                   CallTensor,
                   Constant,
                   DataflowBlock,
                   DataflowVar,
                   Expr,
                   ExternDecl,
                   Function,
                   GlobalVar,
                   If,
                   IRModule,
                   Loop,
                   MatchCast,
                   SeqExpr,
                   ShapeExpr,
                   Tuple,
                   TupleGetItem,
                   Var,
                   VarBinding,
)
from .printer import print_function, print_module
from .shape import (
                   IntExpr,
                   Proof,
                   SizeVar,
                   as_expr,
                   bounds,
                   evaluate,
                   floordiv,
                   floormod,
                   free_vars,
                   max_expr,
                   min_expr,
                   prove_equal,
                   prove_le,
                   prove_lt,
                   substitute,
)
from .types import DTYPES, FuncType, ObjectType, ShapeType, TensorType, TupleType, Type, normalize_dtype
from .verify import verify, well_formed
from .visitor import ExprMutator, ExprVisitor

__all__ = [name for name in dir() if not name.startswith("_")]
