"""The LLVM backend for tensor programs (kernels), through llvmlite.

kernel.py turns tensor programs into LLVM IR functions with the C kernels'
signature; target.py makes a TargetMachine from a board and compiles the
module to an object. The graph's host function is still C (codegen/c),
which declares these kernels `extern` (generate_c(extern_kernels=True)).
"""

from .kernel import emit_kernels
from .target import CompiledKernels, LLVMCodegenError, compile_module, machine_spec, prepare_module

__all__ = ["CompiledKernels", "LLVMCodegenError", "compile_module", "emit_kernels", "machine_spec",
           "prepare_module"]
