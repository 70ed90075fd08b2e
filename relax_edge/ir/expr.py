"""The graph IR (Relax level): immutable nodes.

1. Values: `Var` and `DataflowVar` (defined by a binding or a parameter),
   `Constant` (a numpy array), `ShapeExpr` (a shape value), `Tuple`,
   `TupleGetItem`, and calls: `Call` (an operator of relax_edge.op or a
   `GlobalVar` naming another graph function), `CallTensor` (a tensor
   program of the module, destination-passing style) and `CallExtern` (an
   external kernel declared in the module).
2. Structure: `VarBinding` and `MatchCast` bindings, grouped in a
   `BindingBlock` or a pure `DataflowBlock`; a `SeqExpr` is blocks then a
   result; `If` has two SeqExpr branches; `Loop` runs a SeqExpr body over
   explicit parameters (iteration number, condition, carried values) up to a
   trip count while its condition holds, its result the final carried values
   and the per-iteration scan values stacked on a new axis 0; a `Function`
   has parameters (whose shapes bind size variables), a SeqExpr body and a
   return type.
3. `IRModule` holds graph functions, tensor programs and extern declarations
   side by side, by name.

Every expression carries its type (`.type`). Nodes compare by identity;
variables are SSA (defined once). The builder (`ir/builder.py`) is the usual
way to make these; constructors do no type inference.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Mapping

import numpy as np

from ..errors import RelaxEdgeError
from .shape import SizeVar, as_expr
from .types import FuncType, ObjectType, ShapeType, TensorType, TupleType, Type, normalize_dtype

__all__ = [
    "Expr", "Var", "DataflowVar", "Constant", "ShapeExpr", "Tuple", "TupleGetItem",
    "GlobalVar", "Call", "CallTensor", "CallExtern", "If", "Loop", "SeqExpr", "Binding",
    "VarBinding", "MatchCast", "BindingBlock", "DataflowBlock", "Function",
    "ExternDecl", "IRModule", "freeze_attrs",
]

_ids = itertools.count()


def freeze_attrs(attrs: Mapping[str, Any] | None) -> Mapping[str, Any]:
    """An immutable copy of an attribute dict (lists become tuples, size
    variables become expressions)."""
    def freeze(v):
        if isinstance(v, (list, tuple)):
            return tuple(freeze(x) for x in v)
        if isinstance(v, SizeVar):
            return as_expr(v)
        return v
    return MappingProxyType({k: freeze(v) for k, v in (attrs or {}).items()})


class Expr:
    """Base class of graph IR expressions. `type` is set by every subclass."""

    type: Type

    def __hash__(self):
        return id(self)

    def __eq__(self, other):
        return self is other


@dataclass(frozen=True, eq=False)
class Var(Expr):
    name: str
    type: Type
    uid: int = field(default_factory=lambda: next(_ids), compare=False)

    def __repr__(self):
        return f"{type(self).__name__}({self.name}: {self.type})"


@dataclass(frozen=True, eq=False)
class DataflowVar(Var):
    """A variable local to one dataflow block; it must not be used outside it."""


@dataclass(frozen=True, eq=False)
class Constant(Expr):
    data: np.ndarray
    type: Type = None

    def __init__(self, data):
        arr = np.asarray(data)
        dtype = normalize_dtype(arr.dtype)
        arr = np.array(arr, copy=True)
        arr.setflags(write=False)
        object.__setattr__(self, "data", arr)
        object.__setattr__(self, "type", TensorType(arr.shape, dtype))

    def __repr__(self):
        return f"Constant({self.type})"


@dataclass(frozen=True, eq=False)
class ShapeExpr(Expr):
    values: tuple
    type: Type = None

    def __init__(self, values):
        vals = tuple(as_expr(v) for v in values)
        object.__setattr__(self, "values", vals)
        object.__setattr__(self, "type", ShapeType(vals))


@dataclass(frozen=True, eq=False)
class Tuple(Expr):
    fields: tuple
    type: Type = None

    def __init__(self, fields):
        fields = tuple(fields)
        object.__setattr__(self, "fields", fields)
        object.__setattr__(self, "type", TupleType(f.type for f in fields))


@dataclass(frozen=True, eq=False)
class TupleGetItem(Expr):
    tuple_value: Expr
    index: int
    type: Type = None

    def __init__(self, tuple_value: Expr, index: int):
        t = tuple_value.type
        if not isinstance(t, TupleType):
            raise RelaxEdgeError(f"tuple item {index} of a value of type {t}, which is not a tuple")
        if not 0 <= index < len(t.fields):
            raise RelaxEdgeError(f"tuple item {index} out of range for {t}")
        object.__setattr__(self, "tuple_value", tuple_value)
        object.__setattr__(self, "index", index)
        object.__setattr__(self, "type", t.fields[index])


@dataclass(frozen=True, eq=False)
class GlobalVar(Expr):
    """The name of a function of the module (graph function or tensor program)."""
    name: str
    type: Type = field(default_factory=ObjectType)

    def __repr__(self):
        return f"@{self.name}"


@dataclass(frozen=True, eq=False)
class Call(Expr):
    """A call to an operator (`relax_edge.op.Op`) or a graph function (GlobalVar)."""
    op: Any
    args: tuple
    attrs: Mapping[str, Any]
    type: Type
    span: str | None = None

    def __init__(self, op, args, attrs=None, type=None, span=None):
        object.__setattr__(self, "op", op)
        object.__setattr__(self, "args", tuple(args))
        object.__setattr__(self, "attrs", freeze_attrs(attrs))
        object.__setattr__(self, "type", type if type is not None else ObjectType())
        object.__setattr__(self, "span", span)


@dataclass(frozen=True, eq=False)
class CallTensor(Expr):
    """`call_tensor(program, args, out_type)`: the program writes its outputs
    into destinations the caller allocates (destination-passing style).
    `size_args` are extra symbolic integers passed to the program."""
    program: GlobalVar
    args: tuple
    type: Type
    size_args: tuple = ()
    span: str | None = None

    def __init__(self, program, args, out_type, size_args=(), span=None):
        object.__setattr__(self, "program", program)
        object.__setattr__(self, "args", tuple(args))
        object.__setattr__(self, "type", out_type)
        object.__setattr__(self, "size_args", tuple(as_expr(s) for s in size_args))
        object.__setattr__(self, "span", span)


@dataclass(frozen=True, eq=False)
class CallExtern(Expr):
    """A call into an external kernel declared in the module (`ExternDecl`)."""
    name: str
    args: tuple
    type: Type
    attrs: Mapping[str, Any] = None
    span: str | None = None

    def __init__(self, name, args, out_type, attrs=None, span=None):
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "args", tuple(args))
        object.__setattr__(self, "type", out_type)
        object.__setattr__(self, "attrs", freeze_attrs(attrs))
        object.__setattr__(self, "span", span)


# ------------------------------------------------------------- structure

@dataclass(frozen=True, eq=False)
class Binding:
    var: Var

    def __hash__(self):
        return id(self)


@dataclass(frozen=True, eq=False)
class VarBinding(Binding):
    value: Expr


@dataclass(frozen=True, eq=False)
class MatchCast(Binding):
    """Bind `var` to `value` after checking at run time that the value has
    `type`; size variables in `type` that are not yet bound are bound here."""
    value: Expr
    type: Type


@dataclass(frozen=True, eq=False)
class BindingBlock:
    bindings: tuple

    def __init__(self, bindings):
        object.__setattr__(self, "bindings", tuple(bindings))

    def __hash__(self):
        return id(self)


@dataclass(frozen=True, eq=False)
class DataflowBlock(BindingBlock):
    """A pure region: no side effects, no control flow; fusion and rewrites act here."""

    def __init__(self, bindings):
        super().__init__(bindings)

    def __hash__(self):
        return id(self)


@dataclass(frozen=True, eq=False)
class SeqExpr(Expr):
    blocks: tuple
    body: Expr
    type: Type = None

    def __init__(self, blocks, body):
        object.__setattr__(self, "blocks", tuple(blocks))
        object.__setattr__(self, "body", body)
        object.__setattr__(self, "type", body.type)


@dataclass(frozen=True, eq=False)
class If(Expr):
    cond: Expr
    then_branch: SeqExpr
    else_branch: SeqExpr
    type: Type

    def __init__(self, cond, then_branch, else_branch, type=None):
        object.__setattr__(self, "cond", cond)
        object.__setattr__(self, "then_branch", then_branch)
        object.__setattr__(self, "else_branch", else_branch)
        object.__setattr__(self, "type", type if type is not None else then_branch.type)


@dataclass(frozen=True, eq=False)
class Loop(Expr):
    """`loop`: the body runs for iterations 0, 1, ... while the iteration is
    below `trip_count` and the condition holds (checked before each one).

    - `trip_count`: an IntExpr (symbolic, known at shape level), an int64
      scalar tensor value (read at run time) or None (no limit).
    - `cond`: the initial condition (a bool scalar tensor value) or None (true).
    - `init`: the carried values' initial values.
    - `params`: the body's parameters: the iteration number (int64 scalar
      tensor), the condition (bool scalar tensor), one per carried value
      (each of its initial value's type).
    - `body`: a SeqExpr giving Tuple(condition, carried values..., scan
      values...); the condition decides whether the next iteration runs.
    - `type`: TupleType(final carried values..., scan values stacked on a new
      axis 0 whose length is the number of iterations run: the trip count
      when the condition cannot stop the loop early, else unknown (shape
      None, rank given; a match_cast after the loop names it)).
    """
    trip_count: Any
    cond: Expr | None
    init: tuple
    params: tuple
    body: SeqExpr
    type: Type

    def __init__(self, trip_count, cond, init, params, body, type):
        object.__setattr__(self, "trip_count", as_expr(trip_count) if isinstance(trip_count, (int, SizeVar))
                           else trip_count)
        object.__setattr__(self, "cond", cond)
        object.__setattr__(self, "init", tuple(init))
        object.__setattr__(self, "params", tuple(params))
        object.__setattr__(self, "body", body)
        object.__setattr__(self, "type", type)

    @property
    def num_carried(self) -> int:
        return len(self.init)

    @property
    def runtime_trip_count(self) -> bool:
        """The trip count is a tensor value read at run time."""
        return isinstance(self.trip_count, Expr)

    def operands(self) -> list:
        """The outer values the loop reads directly (not its body's captures)."""
        head = [x for x in (self.trip_count, self.cond) if isinstance(x, Expr)]
        return head + list(self.init)


@dataclass(frozen=True, eq=False)
class Function(Expr):
    params: tuple
    body: SeqExpr
    ret_type: Type
    name: str = "main"
    attrs: Mapping[str, Any] = None
    type: Type = None

    def __init__(self, params, body, ret_type=None, name="main", attrs=None):
        params = tuple(params)
        ret_type = ret_type if ret_type is not None else body.type
        object.__setattr__(self, "params", params)
        object.__setattr__(self, "body", body)
        object.__setattr__(self, "ret_type", ret_type)
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "attrs", freeze_attrs(attrs))
        object.__setattr__(self, "type", FuncType([p.type for p in params], ret_type))


@dataclass(frozen=True, eq=False)
class ExternDecl:
    """The signature of an external kernel and the library that provides it;
    `reference(*arrays, **params)` computes it with numpy (`params`: the
    call's attrs["params"]), for the interpreter."""
    name: str
    param_types: tuple
    ret_type: Type
    library: str = "runtime"
    reference: Any = None

    def __init__(self, name, param_types, ret_type, library="runtime", reference=None):
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "param_types", tuple(param_types))
        object.__setattr__(self, "ret_type", ret_type)
        object.__setattr__(self, "library", library)
        object.__setattr__(self, "reference", reference)


class IRModule:
    """Graph functions, tensor programs and extern declarations, by name.

    Tensor programs are the loop-level IR (relax_edge.tir); the slot is
    here so a module can carry them beside the graph functions that call
    them with `CallTensor`.
    """

    def __init__(self, functions=None, tensor_programs=None, externs=None):
        self.functions: dict[str, Function] = dict(functions or {})
        self.tensor_programs: dict[str, Any] = dict(tensor_programs or {})
        self.externs: dict[str, ExternDecl] = dict(externs or {})
        names = list(self.functions) + list(self.tensor_programs) + list(self.externs)
        dup = {n for n in names if names.count(n) > 1}
        if dup:
            raise RelaxEdgeError(f"IRModule: name(s) used twice: {', '.join(sorted(dup))}")

    def __getitem__(self, name: str):
        for table in (self.functions, self.tensor_programs, self.externs):
            if name in table:
                return table[name]
        raise KeyError(f"no function named {name!r} in the module "
                       f"(it has: {', '.join(self.names()) or 'nothing'})")

    def __contains__(self, name: str) -> bool:
        return name in self.functions or name in self.tensor_programs or name in self.externs

    def names(self) -> list[str]:
        return list(self.functions) + list(self.tensor_programs) + list(self.externs)

    def with_function(self, func: Function) -> "IRModule":
        """A copy with `func` added or replaced (by its name)."""
        functions = dict(self.functions)
        functions[func.name] = func
        return IRModule(functions, self.tensor_programs, self.externs)

    def __str__(self):
        from .printer import print_module
        return print_module(self)

    def script(self) -> str:
        """The module's text form (see ir/printer.py)."""
        return str(self)
