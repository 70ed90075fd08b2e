"""Code generators: C (codegen/c), LLVM kernels (codegen/llvm), and the ABI mirror (abi.py)."""
