"""The Vulkan runtime (runtime_c/vulkan/) compiled into a shared library and
driven through ctypes, with the test shaders compiled by glslc and checked by
spirv-val.

`unavailable()` says why the tests cannot run here (no gcc, glslc, spirv-val,
libvulkan or lavapipe), or None. The tests run on the host-vulkan board: its
ICD (lavapipe) pinned through VK_DRIVER_FILES and its LP_NUM_THREADS, unless
RXE_VK_ANY_DEVICE=1 (a machine with a real GPU: the runtime then prefers the
discrete one).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import shutil
import subprocess
from pathlib import Path

import numpy as np

from relax_edge.codegen import abi
from relax_edge.target import load_board

ROOT = Path(__file__).resolve().parents[2]
SHADERS = Path(__file__).resolve().parent / "shaders"
BOARD = load_board("host-vulkan")
SOURCES = sorted((ROOT / "runtime_c" / "vulkan").glob("*.c")) + [ROOT / "runtime_c" / "src" / "status.c"]
FP16 = 1
FP64 = 2   # shaderFloat64
STATUS = {name: code for code, name in abi.STATUS_NAMES.items()}


def unavailable() -> str | None:
    for tool, package in (("gcc", "build-essential"), ("glslc", "glslc"), ("spirv-val", "spirv-tools")):
        if shutil.which(tool) is None:
            return f"{tool} is not installed (apt-get install {package}; scripts/setup.sh installs it)"
    if ctypes.util.find_library("vulkan") is None:
        return "libvulkan is not installed (apt-get install libvulkan1; scripts/setup.sh installs it)"
    if not Path("/usr/include/vulkan/vulkan.h").exists():
        return "the Vulkan headers are not installed (apt-get install libvulkan-dev)"
    if os.environ.get("RXE_VK_ANY_DEVICE") != "1" and not Path(BOARD.vulkan["icd"]).exists():
        return f"Mesa's lavapipe is not installed: no {BOARD.vulkan['icd']} (apt-get install mesa-vulkan-drivers)"
    return None


def pin_driver() -> None:
    if os.environ.get("RXE_VK_ANY_DEVICE") != "1":
        os.environ["VK_DRIVER_FILES"] = BOARD.vulkan["icd"]
        os.environ["VK_ICD_FILENAMES"] = BOARD.vulkan["icd"]   # the name older loaders read
        os.environ["LP_NUM_THREADS"] = str(BOARD.vulkan["lp_num_threads"] or os.cpu_count() or 1)


def validation_installed() -> bool:
    return any(Path(d, "VkLayer_khronos_validation.json").exists()
               for d in ("/usr/share/vulkan/explicit_layer.d", "/etc/vulkan/explicit_layer.d"))


class Limits(ctypes.Structure):
    _fields_ = [(name, ctypes.c_uint32) for name in (
        "push_constant_bytes", "storage_buffers", "workgroup_size_x", "workgroup_invocations", "shared_bytes",
        "flags", "subgroup_size", "group_count_x")] + [("storage_buffer_range", ctypes.c_uint64)]


class Options(ctypes.Structure):
    _fields_ = [("allow_cpu", ctypes.c_int32), ("device_index", ctypes.c_int32), ("validation", ctypes.c_int32),
                ("force_staging", ctypes.c_int32), ("limits", ctypes.POINTER(Limits)), ("library", ctypes.c_char_p),
                ("max_dispatches_per_submit", ctypes.c_uint32), ("pipeline_cache", ctypes.c_char_p)]


class Kernel(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("spirv", ctypes.POINTER(ctypes.c_uint32)), ("spirv_words", ctypes.c_uint32),
                ("num_buffers", ctypes.c_uint32), ("push_words", ctypes.c_uint32), ("local_size_x", ctypes.c_uint32),
                ("shared_bytes", ctypes.c_uint32), ("flags", ctypes.c_uint32)]


class Requirements(ctypes.Structure):
    _fields_ = [(name, ctypes.c_uint32) for name in (
        "push_constant_bytes", "storage_buffers", "workgroup_size_x", "shared_bytes", "flags", "subgroup_size")]


class View(ctypes.Structure):
    _fields_ = [("buffer", ctypes.c_void_p), ("offset", ctypes.c_uint64), ("bytes", ctypes.c_uint64)]


class VulkanError(Exception):
    def __init__(self, status: int, message: str):
        super().__init__(f"{abi.STATUS_NAMES.get(status, status)}: {message}")
        self.status = abi.STATUS_NAMES.get(status, str(status))
        self.message = message


def assert_clean(m, validation: bool) -> None:
    """A loaded model ended with zero validation messages (when the layer is on)."""
    count, first = m.validation_messages()
    if validation:
        assert count == 0, first


def build_library(out_dir: Path) -> ctypes.CDLL:
    path = out_dir / "librxe_vk.so"
    cmd = ["gcc", "-std=c99", "-O1", "-g", "-Wall", "-Wextra", "-Werror", "-shared", "-fPIC",
           f"-I{ROOT / 'runtime_c' / 'include'}", *map(str, SOURCES), "-ldl", "-o", str(path)]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    assert proc.returncode == 0, f"{' '.join(cmd)}\n{proc.stderr}"
    lib = ctypes.CDLL(str(path))
    vp, u32, u64, err = ctypes.c_void_p, ctypes.c_uint32, ctypes.c_uint64, ctypes.POINTER(abi.Error)
    signatures = {
        "rxe_vk_open": ([ctypes.POINTER(Options), ctypes.POINTER(vp), err], ctypes.c_int),
        "rxe_vk_close": ([vp], None),
        "rxe_vk_check": ([vp, ctypes.POINTER(Requirements), err], ctypes.c_int),
        "rxe_vk_load": ([vp, ctypes.POINTER(Kernel), u32, err], ctypes.c_int),
        "rxe_vk_buffer_new": ([vp, u64, ctypes.POINTER(vp), err], ctypes.c_int),
        "rxe_vk_buffer_write": ([vp, vp, u64, vp, u64, err], ctypes.c_int),
        "rxe_vk_buffer_read": ([vp, vp, u64, vp, u64, err], ctypes.c_int),
        "rxe_vk_buffer_free": ([vp, vp], None),
        "rxe_vk_buffer_mapped": ([vp], ctypes.c_int32),
        "rxe_vk_begin": ([vp, err], ctypes.c_int),
        "rxe_vk_dispatch": ([vp, u32, ctypes.POINTER(View), ctypes.POINTER(ctypes.c_int32), u64, err], ctypes.c_int),
        "rxe_vk_submit": ([vp, u64, err], ctypes.c_int),
        "rxe_vk_wait": ([vp, u64, err], ctypes.c_int),
        "rxe_vk_times": ([vp, ctypes.POINTER(u64), u32], ctypes.c_int),
        "rxe_vk_dispatch_count": ([vp], u32),
        "rxe_vk_pipelines_created": ([vp], u64),
        "rxe_vk_validation_messages": ([vp], u64),
        "rxe_vk_validation_text": ([vp], ctypes.c_char_p),
        "rxe_vk_device_name": ([vp], ctypes.c_char_p),
        "rxe_vk_limits_get": ([vp, ctypes.POINTER(Limits)], None),
        "rxe_vk_cache_state": ([vp], ctypes.c_int32),
        "rxe_vk_cache_text": ([vp], ctypes.c_char_p),
    }
    for name, (args, result) in signatures.items():
        fn = getattr(lib, name)
        fn.argtypes, fn.restype = args, result
    return lib


def compile_shader(name: str, out_dir: Path) -> np.ndarray:
    """tests/vulkan/shaders/NAME.comp -> SPIR-V words, validated."""
    spv = out_dir / f"{name}.spv"
    for cmd in (["glslc", "-fshader-stage=compute", "--target-env=vulkan1.1", "-O", "-o", str(spv),
                 str(SHADERS / f"{name}.comp")],
                ["spirv-val", "--target-env", "vulkan1.1", str(spv)]):
        proc = subprocess.run(cmd, capture_output=True, text=True)
        assert proc.returncode == 0, f"{' '.join(cmd)}\n{proc.stdout}{proc.stderr}"
    return np.fromfile(spv, dtype=np.uint32)


def kernel(name: str, words: np.ndarray, num_buffers: int, num_sizes: int, local_size_x: int = 64,
           shared_bytes: int = 0, flags: int = 0) -> Kernel:
    k = Kernel(name.encode(), words.ctypes.data_as(ctypes.POINTER(ctypes.c_uint32)), words.size, num_buffers,
               2 + num_buffers + num_sizes, local_size_x, shared_bytes, flags)
    k._keep = words
    return k


class Context:
    """One rxe_vk_t; every call raises VulkanError on a failed status."""

    def __init__(self, lib, *, validation=True, limits: Limits | None = None, library: str | None = None,
                 force_staging=False, per_submit=0, allow_cpu=True, device_index=-1, pipeline_cache: str | None = None):
        self.lib = lib
        self.err = abi.Error()
        self.handle = ctypes.c_void_p()
        self._limits = limits
        options = Options(int(allow_cpu), device_index, int(validation), int(force_staging),
                          ctypes.pointer(limits) if limits is not None else None,
                          library.encode() if library else None, per_submit,
                          pipeline_cache.encode() if pipeline_cache is not None else None)
        self._call(lib.rxe_vk_open(ctypes.byref(options), ctypes.byref(self.handle), ctypes.byref(self.err)))
        self.buffers = []

    def _call(self, status: int) -> None:
        if status != 0:
            raise VulkanError(status, self.err.message.decode())

    @property
    def device_name(self) -> str:
        return self.lib.rxe_vk_device_name(self.handle).decode()

    def limits(self) -> Limits:
        out = Limits()
        self.lib.rxe_vk_limits_get(self.handle, ctypes.byref(out))
        return out

    def check(self, **fields) -> None:
        self._call(self.lib.rxe_vk_check(self.handle, ctypes.byref(Requirements(**fields)), ctypes.byref(self.err)))

    def load(self, kernels: list) -> None:
        array = (Kernel * len(kernels))(*kernels)
        self._call(self.lib.rxe_vk_load(self.handle, array, len(kernels), ctypes.byref(self.err)))

    def buffer(self, nbytes: int) -> ctypes.c_void_p:
        b = ctypes.c_void_p()
        self._call(self.lib.rxe_vk_buffer_new(self.handle, nbytes, ctypes.byref(b), ctypes.byref(self.err)))
        self.buffers.append(b)
        return b

    def write(self, b, array: np.ndarray, offset: int = 0) -> None:
        array = np.ascontiguousarray(array)
        self._call(self.lib.rxe_vk_buffer_write(self.handle, b, offset, array.ctypes.data, array.nbytes,
                                                ctypes.byref(self.err)))

    def read(self, b, count: int, dtype=np.float32, offset: int = 0) -> np.ndarray:
        out = np.empty(count, dtype=dtype)
        self._call(self.lib.rxe_vk_buffer_read(self.handle, b, offset, out.ctypes.data, out.nbytes,
                                               ctypes.byref(self.err)))
        return out

    def mapped(self, b) -> bool:
        return bool(self.lib.rxe_vk_buffer_mapped(b))

    def begin(self) -> None:
        self._call(self.lib.rxe_vk_begin(self.handle, ctypes.byref(self.err)))

    def dispatch(self, kernel_index: int, views: list, sizes: list, items: int) -> None:
        """views: (buffer, byte offset, bytes) triples."""
        v = (View * max(len(views), 1))(*[View(b.value, off, n) for b, off, n in views])
        s = (ctypes.c_int32 * max(len(sizes), 1))(*sizes)
        self._call(self.lib.rxe_vk_dispatch(self.handle, kernel_index, v, s, items, ctypes.byref(self.err)))

    def submit(self, timeout_ns: int = 60_000_000_000) -> None:
        self._call(self.lib.rxe_vk_submit(self.handle, timeout_ns, ctypes.byref(self.err)))

    def wait(self, timeout_ns: int = 60_000_000_000) -> None:
        self._call(self.lib.rxe_vk_wait(self.handle, timeout_ns, ctypes.byref(self.err)))

    def times(self) -> list:
        n = self.lib.rxe_vk_dispatch_count(self.handle)
        out = (ctypes.c_uint64 * max(n, 1))()
        status = self.lib.rxe_vk_times(self.handle, out, n)
        if status != 0:
            raise VulkanError(status, "rxe_vk_times")
        return list(out)[:n]

    @property
    def pipelines_created(self) -> int:
        return self.lib.rxe_vk_pipelines_created(self.handle)

    def cache(self) -> tuple:
        """(RXE_VK_CACHE_* of the last load, the runtime's line about the pipeline cache file)."""
        return self.lib.rxe_vk_cache_state(self.handle), (self.lib.rxe_vk_cache_text(self.handle) or b"").decode()

    def validation_messages(self) -> tuple:
        return (self.lib.rxe_vk_validation_messages(self.handle),
                (self.lib.rxe_vk_validation_text(self.handle) or b"").decode())

    def close(self) -> None:
        if self.handle:
            for b in self.buffers:
                self.lib.rxe_vk_buffer_free(self.handle, b)
            self.buffers = []
            self.lib.rxe_vk_close(self.handle)
            self.handle = ctypes.c_void_p()
