"""Python mirror of runtime_c/include/relax_edge/abi.h, and of RXE_MAX_THREADS
in threads.h (change both together)."""

from __future__ import annotations

import ctypes

ABI_VERSION = 3   # 3: data-dependent output dims (plan: the capacity; run writes the actual dims)
MAX_NDIM = 8
ERROR_MESSAGE_BYTES = 256
WORKSPACE_ALIGNMENT = 64
MAX_THREADS = 16   # RXE_MAX_THREADS (threads.h), the default: the runtime's pool runs at most this many threads

STATUS_NAMES = {
    0: "RXE_OK", 1: "RXE_ERR_ARGUMENT_COUNT", 2: "RXE_ERR_DTYPE", 3: "RXE_ERR_RANK", 4: "RXE_ERR_SHAPE",
    5: "RXE_ERR_BOUND", 6: "RXE_ERR_WORKSPACE", 7: "RXE_ERR_NULL", 8: "RXE_ERR_NOT_FOUND",
    9: "RXE_ERR_ABI", 10: "RXE_ERR_INTERNAL", 11: "RXE_ERR_INDEX", 12: "RXE_ERR_PROTOCOL", 13: "RXE_ERR_NO_MEMORY",
    14: "RXE_ERR_DEVICE", 15: "RXE_ERR_TIMEOUT", 16: "RXE_ERR_NO_VULKAN",
}

# dtype name -> (DLPack code, bits, C storage type); float16 and bfloat16 are bits, computed as float
DTYPES = {
    "float32": (2, 32, "float"),
    "float16": (2, 16, "uint16_t"),
    "float64": (2, 64, "double"),
    "bfloat16": (4, 16, "uint16_t"),
    "int8": (0, 8, "int8_t"),
    "int16": (0, 16, "int16_t"),
    "int32": (0, 32, "int32_t"),
    "int64": (0, 64, "int64_t"),
    "uint8": (1, 8, "uint8_t"),
    "uint16": (1, 16, "uint16_t"),
    "uint32": (1, 32, "uint32_t"),
    "uint64": (1, 64, "uint64_t"),
    "bool": (6, 8, "uint8_t"),
}


class DType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class Tensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32),
                ("ndim", ctypes.c_int32), ("dtype", DType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


class Error(ctypes.Structure):
    _fields_ = [("status", ctypes.c_int), ("message", ctypes.c_char * ERROR_MESSAGE_BYTES)]


class ArgInfo(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("dtype", DType), ("ndim", ctypes.c_int32), ("shape", ctypes.c_char_p)]


PLAN_FN = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(Tensor), ctypes.POINTER(ctypes.c_int64),
                           ctypes.POINTER(ctypes.c_uint64), ctypes.POINTER(Error))
RUN_FN = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(Tensor), ctypes.POINTER(Tensor), ctypes.c_void_p,
                          ctypes.c_uint64, ctypes.POINTER(Error))
WORKSPACE_FN = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(ctypes.c_int64), ctypes.POINTER(ctypes.c_uint64),
                                ctypes.POINTER(Error))


class ProfileEntry(ctypes.Structure):
    _fields_ = [("kernel", ctypes.c_char_p), ("span", ctypes.c_char_p), ("calls", ctypes.c_uint64),
                ("total_ns", ctypes.c_uint64)]


class Function(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("num_inputs", ctypes.c_int32), ("num_outputs", ctypes.c_int32),
                ("inputs", ctypes.POINTER(ArgInfo)), ("outputs", ctypes.POINTER(ArgInfo)),
                ("plan", PLAN_FN), ("run", RUN_FN), ("workspace", WORKSPACE_FN), ("num_sizes", ctypes.c_int32),
                ("size_names", ctypes.POINTER(ctypes.c_char_p)), ("fixed_workspace_bytes", ctypes.c_uint64),
                ("num_profile_entries", ctypes.c_int32), ("profile", ctypes.POINTER(ProfileEntry))]


class Module(ctypes.Structure):
    _fields_ = [("abi_version", ctypes.c_uint32), ("name", ctypes.c_char_p), ("num_functions", ctypes.c_int32),
                ("functions", ctypes.POINTER(Function))]
