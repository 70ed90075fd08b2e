"""Code generators: C (codegen/c), and the ABI mirror (abi.py)."""
