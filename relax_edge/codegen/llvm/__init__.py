"""The LLVM backend, through llvmlite: the model with no generated C.

kernel.py turns tensor programs into LLVM IR functions with the C kernels'
signature; host.py turns the graph's host operations (codegen/host_program.py,
which the C backend renders too) into the host functions and the module's
entry table; module.py puts them together; target.py makes a TargetMachine
from a board and compiles a module to an object.
"""

from .host import emit_host
from .kernel import emit_kernels
from .module import LLVMSources, emit_llvm, generate_llvm
from .target import CompiledKernels, LLVMCodegenError, compile_module, machine_spec, prepare_module

__all__ = ["CompiledKernels", "LLVMCodegenError", "LLVMSources", "compile_module", "emit_host", "emit_kernels",
           "emit_llvm", "generate_llvm", "machine_spec", "prepare_module"]
