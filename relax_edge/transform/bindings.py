"""What graph rewrites ask of a function's bindings: the constant a variable
is bound to, each value's binding, how many bindings read each variable
(and which one last), and which variables the function returns. An `if`
or a `loop` reads every variable its branches or body refer to."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..ir.expr import Constant, Function, If, Loop, Var, VarBinding
from ..ir.visitor import ExprVisitor


@dataclass
class Bindings:
    constants: dict = field(default_factory=dict)   # Var -> the Constant it is bound to
    values: dict = field(default_factory=dict)      # Var -> its bound value
    uses: dict = field(default_factory=dict)        # Var -> number of bindings' arguments / fields reading it
    users: dict = field(default_factory=dict)       # Var -> the last binding that reads it
    outputs: set = field(default_factory=set)       # variables the function returns

    def constant(self, e):
        """The Constant `e` is or is bound to, else None."""
        while isinstance(e, Var) and e in self.constants:
            e = self.constants[e]
        return e if isinstance(e, Constant) else None

    def single_use(self, v) -> bool:
        """`v` is read by one binding and is not returned."""
        return isinstance(v, Var) and self.uses.get(v, 0) == 1 and v not in self.outputs


def scan(func: Function) -> Bindings:
    info = Bindings()
    for blk in func.body.blocks:
        for b in blk.bindings:
            if isinstance(b, VarBinding):
                info.values[b.var] = b.value
                if isinstance(b.value, Constant):
                    info.constants[b.var] = b.value
            reads = _Reads.of(b.value) if isinstance(b.value, (If, Loop)) else \
                getattr(b.value, "args", ()) or getattr(b.value, "fields", ())
            for a in reads:
                if isinstance(a, Var):
                    info.uses[a] = info.uses.get(a, 0) + 1
                    info.users[a] = b
    body = func.body.body
    info.outputs = {e for e in getattr(body, "fields", (body,)) if isinstance(e, Var)}
    return info


class _Reads(ExprVisitor):
    """Every variable an expression refers to, nested bodies included."""

    def __init__(self):
        self.vars: list = []

    def visit_Var(self, v):
        self.vars.append(v)

    @classmethod
    def of(cls, e) -> list:
        reads = cls()
        reads.visit(e)
        return reads.vars
