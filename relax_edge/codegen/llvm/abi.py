"""The ABI's structs (runtime_c/include/relax_edge/abi.h) as LLVM types,
made from their ctypes mirror (codegen/abi.py), so the three agree.

Pointers of every kind are `ptr` and integers keep their width; the target's
data layout places the fields (module.data_layout, set by target.py), so the
same types give the 64-bit layout on aarch64 and the 32-bit one on armv7 and
Cortex-M, as a C compiler would."""

from __future__ import annotations

import ctypes

from llvmlite import ir

from .. import abi

PTR = ir.PointerType()
POINTER_KINDS = (ctypes._Pointer, ctypes._CFuncPtr, ctypes.c_void_p, ctypes.c_char_p)


def llvm_type(ctype) -> ir.Type:
    """The LLVM type of a ctypes type of the mirror."""
    if issubclass(ctype, ctypes.Structure):
        return ir.LiteralStructType([llvm_type(t) for _, t in ctype._fields_])
    if issubclass(ctype, ctypes.Array):
        return ir.ArrayType(llvm_type(ctype._type_), ctype._length_)
    if issubclass(ctype, POINTER_KINDS):
        return PTR
    return ir.IntType(8 * ctypes.sizeof(ctype))


def field(ctype, name: str) -> int:
    """The index of a struct's field, for GEPs and constants."""
    return [f for f, _ in ctype._fields_].index(name)


DTYPE = llvm_type(abi.DType)
TENSOR = llvm_type(abi.Tensor)
ARG_INFO = llvm_type(abi.ArgInfo)
PROFILE_ENTRY = llvm_type(abi.ProfileEntry)
FUNCTION = llvm_type(abi.Function)
MODULE = llvm_type(abi.Module)


def struct(ctype, **values) -> ir.Constant:
    """A constant of a mirrored struct, its fields by name (all given)."""
    names = [f for f, _ in ctype._fields_]
    missing = set(names) ^ set(values)
    if missing:
        raise KeyError(f"{ctype.__name__}: fields {sorted(missing)} missing or unknown")
    return ir.Constant(llvm_type(ctype), [values[n] for n in names])
