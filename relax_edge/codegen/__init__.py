"""Code generators: the graph's host code as data (host_program.py), rendered
by C (codegen/c) and LLVM (codegen/llvm, kernels too), and the ABI mirror
(abi.py)."""
