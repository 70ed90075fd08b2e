"""Library micro-kernels of the runtime (runtime_c/kernels/): their
signatures, scratch sizes, compile-time weight packing and numpy references,
as the dispatch pass and the memory planner see them (kernels.py,
depthwise.py), and the kernels of data-dependent result sizes that
legalize calls (data_dependent.py)."""


def pack(packer: str, data, groups: int = 1):
    """Constant weights in the layout a library kernel reads ("dense": a
    (K, N) matrix for rxe_lib_dense_f32, "conv2d": OIHW weights for
    rxe_lib_conv2d_f32), packed at compile time."""
    from . import kernels
    if packer == "dense":
        return kernels.pack_dense_weights(data)
    if packer == "conv2d":
        return kernels.pack_conv2d_weights(data, groups)
    raise ValueError(f"unknown weight packer {packer!r}")
