"""Library micro-kernels of the runtime (runtime_c/kernels/): their
signatures, scratch sizes, compile-time weight packing and numpy references,
as the dispatch pass and the memory planner see them (kernels.py,
depthwise.py), and the kernels that legalize calls in place of a tensor
program (EXTERN_LIBRARIES)."""

import contextlib
import contextvars
import importlib

# modules of relax_edge.library whose `LOWERINGS` (operator name -> lowering)
# and `lower_call(call) -> (CallExtern, ExternDecl)` legalize uses for the
# operators that have no tensor program: a new family adds its module here
EXTERN_LIBRARIES = ("data_dependent", "kv_cache", "quant_weight", "qint8", "qeltwise", "qdynamic")


_TARGET = contextvars.ContextVar("lowering_target", default=None)


def lowering_target():
    """The target (relax_edge.target.Target) the module being legalized is built for, or None when it is
    not known (a lowering then sizes what it declares for every target)."""
    return _TARGET.get()


@contextlib.contextmanager
def lowering_for(target):
    """Lowerings inside the block see `target` as lowering_target()."""
    token = _TARGET.set(target)
    try:
        yield
    finally:
        _TARGET.reset(token)


def extern_lowerings() -> dict:
    """Operator name -> the library module that lowers its calls to a kernel."""
    out = {}
    for name in EXTERN_LIBRARIES:
        module = importlib.import_module(f"{__name__}.{name}")
        out.update(dict.fromkeys(module.LOWERINGS, module))
    return out


def pack(packer: str, data, groups: int = 1):
    """Constant weights in the layout a library kernel reads ("dense": a
    (K, N) matrix for rxe_lib_dense_f32, "conv2d": OIHW weights for
    rxe_lib_conv2d_f32), packed at compile time."""
    from . import kernels, qint8
    if packer in qint8.PACKERS:   # "qdense", "qconv2d", "qdepthwise": the int8 kernels' layouts
        return qint8.PACKERS[packer](data, groups)
    if packer == "dense":
        return kernels.pack_dense_weights(data)
    if packer == "conv2d":
        return kernels.pack_conv2d_weights(data, groups)
    raise ValueError(f"unknown weight packer {packer!r}")
