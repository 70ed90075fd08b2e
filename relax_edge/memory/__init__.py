"""The memory planner: algorithms over (size, first use, last use), a plan
verifier and a plan dump; liveness.py turns a graph function into buffers,
graph.py a module into its memory plans."""

from .dump import dump_plan
from .graph import FunctionMemory, MemoryPlans, plan_function, plan_module
from .plan import Buffer, Plan, lower_bound, plan_bounded, plan_memory, plan_symbolic
from .verify import PlanError, verify_plan

__all__ = ["Buffer", "FunctionMemory", "MemoryPlans", "Plan", "PlanError", "dump_plan", "lower_bound",
           "plan_bounded", "plan_function", "plan_memory", "plan_module", "plan_symbolic", "verify_plan"]
