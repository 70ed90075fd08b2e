"""Library micro-kernels of the runtime (runtime_c/kernels/): their
signatures, scratch sizes, compile-time weight packing and numpy references,
as the dispatch pass and the memory planner see them."""
