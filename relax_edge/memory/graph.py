"""The memory plan of a module's graph functions, as a value.

1. Each graph function's liveness (liveness.py: buffers, views, in-place
   kernels, scratch) is placed by the planner (plan.py) and the placement
   checked by the verifier (verify.py) at sampled sizes.
2. The result also names the tensor programs that run in place (their
   output written over a dying input) in at least one call: the emitters
   must not declare those kernels' pointers restrict / noalias.
3. The IR is not changed: nothing is written into the module's attributes.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..ir.expr import CallTensor, Function, IRModule
from .liveness import Liveness, analyze
from .plan import Plan, plan_memory
from .verify import verify_plan

VERIFY_SAMPLES = 40   # size assignments the plan verifier tries per function


@dataclass(frozen=True)
class FunctionMemory:
    """One graph function's liveness and its planned arena."""
    liveness: Liveness
    plan: Plan


@dataclass(frozen=True)
class MemoryPlans:
    """The memory of every graph function of a module."""
    functions: dict          # graph function name -> FunctionMemory
    inplace: frozenset       # names of the tensor programs called in place

    def __getitem__(self, name: str) -> FunctionMemory:
        return self.functions[name]


def plan_function(mod: IRModule, func: Function) -> FunctionMemory:
    """Liveness of `func` and its verified plan."""
    live = analyze(mod, func)
    return FunctionMemory(live, verify_plan(plan_memory(live.buffers), samples=VERIFY_SAMPLES))


def inplace_programs(live: Liveness) -> set:
    """The tensor programs a step calls in place."""
    return {s.call.program.name for s in live.steps if s.inplace_over is not None and isinstance(s.call, CallTensor)}


def plan_module(mod: IRModule) -> MemoryPlans:
    """The memory plans of a legalized module's graph functions."""
    functions = {name: plan_function(mod, func) for name, func in mod.functions.items()}
    inplace = set().union(*(inplace_programs(f.liveness) for f in functions.values()))
    return MemoryPlans(functions, frozenset(inplace))
