"""GLSL 450 compute shaders from tensor programs (the Vulkan backend's kernels).

`emit_glsl(program)` turns one TensorProgram into shader text and its kernel
record (kernel.py; the ABI is the one runtime_c/vulkan binds: storage
buffers in params order, a push-constant block of sizes and offsets, a 1-D
dispatch folded into y and z); grid.py decides which loops become the
dispatch grid; `compile_spirv` runs glslc and spirv-val (spirv.py).
Constructs not handled yet raise `GlslUnsupported`, naming the construct.
"""

from .grid import Grid, map_grid
from .kernel import GlslUnsupported, KernelRecord, emit_glsl
from .spirv import ShaderCompileError, compile_spirv

__all__ = ["emit_glsl", "compile_spirv", "KernelRecord", "GlslUnsupported", "ShaderCompileError", "Grid",
           "map_grid"]
