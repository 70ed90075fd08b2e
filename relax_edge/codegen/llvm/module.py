"""A legalized module for the LLVM backend: no generated C for the model.

1. The host description (codegen/host_program.py) is computed once; the
   kernels it calls become one LLVM module (kernel.py) and the host functions
   with the entry table another (host.py), plus a profiled variant of the
   host module for the RPC server (the C build's -DRXE_PROFILE).
2. The C interface (PREFIX.h) and the constants (PREFIX_weights.S over
   PREFIX_weights.bin) are the C backend's files (codegen/c/module.py).
3. Modules are returned unverified and target-free; target.py sets the triple
   and data layout, verifies, optimizes and emits objects.

`emit_llvm` renders a host module (codegen/host_program.py's `lower_host`);
`generate_llvm` runs the code generation stages from a legalized module.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...errors import RelaxEdgeError
from ...ir.expr import IRModule
from ...memory import plan_module
from ..c.module import support_files
from ..host_program import CodegenError, HostModule, lower_host, symbol_prefix
from .host import emit_host
from .kernel import emit_kernels


@dataclass
class LLVMSources:
    prefix: str
    files: dict        # file name -> text: PREFIX.h and PREFIX_weights.S
    weights: bytes     # written as PREFIX_weights.bin
    signature: dict    # function name -> {"inputs": [...], "outputs": [...], "sizes": [...], ...}
    modules: dict      # object stem ("kernels", "host", "host_profiled") -> llvmlite ir.Module


def generate_llvm(mod: IRModule, prefix: str = "model", freestanding: bool = False,
                  profiled: bool = True) -> LLVMSources:
    """LLVM modules for the kernels and the host functions of a legalized
    module, with `profiled` also the host functions with the profiler."""
    prefix = symbol_prefix(prefix)
    return emit_llvm(lower_host(mod, plan_module(mod), prefix, f"{prefix}_k_"), freestanding, profiled)


def emit_llvm(host: HostModule, freestanding: bool = False, profiled: bool = True) -> LLVMSources:
    """The kernels' and the host functions' LLVM modules of a host module
    (its kernels named PREFIX_k_NAME), with `profiled` also the host
    functions with the profiler."""
    prefix = host.prefix
    try:
        modules = {"kernels": emit_kernels(host.kernels, freestanding, f"{prefix}_kernels", inplace=host.inplace),
                   "host": emit_host(host, profile=False)}
        if profiled:
            modules["host_profiled"] = emit_host(host, profile=True)
    except RelaxEdgeError as err:
        raise CodegenError(str(err)) from None
    return LLVMSources(prefix, support_files(host), host.weights.tobytes(), host.signature, modules)
