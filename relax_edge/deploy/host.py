"""Running artifacts on the host: the shared library loaded with ctypes.

    with rxe.connect("host") as dev:
        m = dev.load(art)
        outs = m.run(x)          # list of numpy arrays

`run` asks the module's plan entry for the output shapes and workspace size,
allocates them (the only allocation, on the Python side), and calls run.
A status other than RXE_OK becomes a RuntimeCheckError with the runtime's
message (naming the input and dimension).

Its inputs are prepared by `session.prepare_inputs`, as on every other
transport. A Vulkan artifact (backend "vulkan", board host-vulkan) is a
`VulkanModule`: at load the board's ICD is pinned (VK_DRIVER_FILES, unless
RXE_VK_ANY_DEVICE=1), then PREFIX_vk_init opens the device, checks the
module's requirements, creates the pipelines and uploads the weights;
`close` frees the device. `dev.load(art, pipeline_cache=PATH)` (or
RXE_VK_PIPELINE_CACHE, which the runner and the server read too) names a
pipeline cache file the load seeds the driver's cache from and saves it to;
a bad file is ignored with a line on stderr and replaced, and
`m.pipeline_cache()` reports what happened (runtime_c/include/relax_edge/
vulkan.h). `generate` keeps a decoder's KV cache in device
buffers for the whole request (only the logits come back per step); a plain
`run` of `step` updates the caller's state arrays in place (the appended rows
read back; the arrays written to the device when their bytes changed). Its
per-kernel profile is measured in process:
one run, then the GPU's time of each dispatch (rxe_vk_times, from
timestamps) under the kernel and node that PREFIX_FUNC_vk_rows names.

Benchmarks (and the C artifacts' profiles) go to the model's server, started
as a local process; a sanitized artifact (no shared library: ASan cannot be
loaded into Python) goes there for everything.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import tempfile

import numpy as np

from ..codegen import abi
from ..errors import RelaxEdgeError
from .generate import GenerateResult, check_request
from .generate_abi import generate_in_process
from .rpc import ProcessStream, RpcModule
from .session import Device, LoadedModel, RuntimeCheckError, compact_output, prepare_inputs, thread_args


def _tensor(arr: np.ndarray, keep: list) -> abi.Tensor:
    code, bits, _ = abi.DTYPES[arr.dtype.name if arr.dtype != np.bool_ else "bool"]
    shape = (ctypes.c_int64 * max(arr.ndim, 1))(*arr.shape)
    keep.append(shape)
    t = abi.Tensor()
    t.data = arr.ctypes.data if arr.size else ctypes.cast(shape, ctypes.c_void_p).value
    t.device_type, t.device_id, t.ndim = 1, 0, arr.ndim
    t.dtype = abi.DType(code, bits, 1)
    t.shape = shape
    t.strides = None
    t.byte_offset = 0
    return t


_BY_PATH: dict = {}    # path -> the file the dynamic loader mapped under that name (it never forgets it)
_BY_INODE: dict = {}   # (st_dev, st_ino) -> the file mapped from that inode


def _identity(st: os.stat_result) -> tuple:
    return st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns


def load_library(path) -> ctypes.CDLL:
    """dlopen `path`, never getting an older library back. The dynamic loader
    returns the library it already mapped for a path it has opened, or for a
    file with the same device and inode number: a rebuild into the same
    out_dir, or a new file on the inode of a deleted one (test folders are
    removed after each test), would run the old model. Such a library is
    loaded from a private copy (a new inode, a new name), removed once
    mapped."""
    path = os.path.abspath(path)
    ident = _identity(os.stat(path))
    stale = _BY_PATH.get(path, ident) != ident or _BY_INODE.get(ident[:2], ident) != ident
    if not stale:
        lib = ctypes.CDLL(path)
        _BY_PATH.setdefault(path, ident)
        _BY_INODE[ident[:2]] = ident
        return lib
    folder, name = os.path.split(path)
    try:
        fd, copy = tempfile.mkstemp(prefix=f".{name}-", suffix=".so", dir=folder)
    except OSError:   # a read-only artifact folder
        fd, copy = tempfile.mkstemp(prefix=f".{name}-", suffix=".so")
    try:
        with os.fdopen(fd, "wb") as out, open(path, "rb") as src:
            shutil.copyfileobj(src, out)
        lib = ctypes.CDLL(copy)
        mapped = _identity(os.stat(copy))
        _BY_INODE[mapped[:2]] = mapped
    finally:
        os.unlink(copy)
    return lib


class LoadedModule(LoadedModel):
    """An artifact's function in this process, through its shared library."""

    def __init__(self, artifact, function: str = "main", threads: int | None = None):
        self.artifact = artifact
        self.function = function
        self.threads = threads
        thread_args(threads)   # checked before the library is loaded
        self._rpc_module = None
        if artifact.shared_library is None or not artifact.shared_library.exists():
            raise RelaxEdgeError(f"{artifact.out_dir}: no shared library to load in process; "
                                 "rebuild it for the host board")
        self.lib = load_library(artifact.shared_library)
        self.module = module = abi.Module.in_dll(self.lib, f"{artifact.prefix}_module")
        if module.abi_version != abi.ABI_VERSION:   # before any runtime symbol, whose names follow the ABI
            raise RelaxEdgeError(f"{artifact.shared_library}: built for ABI {module.abi_version}, "
                                 f"this relax_edge speaks ABI {abi.ABI_VERSION}; rebuild it")
        if threads is not None:   # the runtime's pool, shared by the modules of this process
            self.lib.rxe_threads_set_count(ctypes.c_int(threads))
        names = [module.functions[i].name.decode() for i in range(module.num_functions)]
        if function not in names:
            raise RelaxEdgeError(f"the module has no function {function!r} (it has {', '.join(names)})")
        self.fn = module.functions[names.index(function)]
        self.signature = artifact.signature[function]

    def _prepare(self, inputs):
        keep = []
        arrays = prepare_inputs(self.signature, inputs)
        tensors = (abi.Tensor * max(len(arrays), 1))(*[_tensor(a, keep) for a in arrays])
        return arrays, tensors, keep

    def plan(self, *inputs):
        """Output shapes and workspace bytes for these inputs."""
        _, tensors, _ = self._prepare(inputs)
        dims = sum(o["ndim"] for o in self.signature["outputs"])
        shapes = (ctypes.c_int64 * max(dims, 1))()
        ws = ctypes.c_uint64()
        err = abi.Error()
        status = self.fn.plan(tensors, shapes, ctypes.byref(ws), ctypes.byref(err))
        if status != 0:
            raise RuntimeCheckError(status, err.message.decode(errors="replace"))
        out, k = [], 0
        for o in self.signature["outputs"]:
            out.append(tuple(shapes[k:k + o["ndim"]]))
            k += o["ndim"]
        return out, ws.value

    def run(self, *inputs) -> list:
        arrays, tensors, keep = self._prepare(inputs)
        out_shapes, ws_bytes = self.plan(*arrays)
        outputs = [np.empty(shape, dtype=np.bool_ if o["dtype"] == "bool" else o["dtype"])
                   for shape, o in zip(out_shapes, self.signature["outputs"])]
        out_tensors = (abi.Tensor * len(outputs))(*[_tensor(a, keep) for a in outputs])
        raw = np.empty(ws_bytes + abi.WORKSPACE_ALIGNMENT, dtype=np.uint8)
        start = (-raw.ctypes.data) % abi.WORKSPACE_ALIGNMENT
        workspace = raw.ctypes.data + start if ws_bytes else None
        err = abi.Error()
        status = self.fn.run(tensors, out_tensors, workspace, ws_bytes, ctypes.byref(err))
        if status != 0:
            raise RuntimeCheckError(status, err.message.decode(errors="replace"))
        actual = [tuple(t.shape[d] for d in range(t.ndim)) for t in out_tensors]   # data-dependent dims (ABI 3)
        return [compact_output(a, shape) for a, shape in zip(outputs, actual)]

    def generate(self, prompt_ids, max_new_tokens: int = 32, temperature: float = 0.0, top_k=None, top_p=None,
                 seed: int = 0, stop=None, on_token=None) -> GenerateResult:
        """rxe_generate in this process (ctypes), on_token called from its
        callback as each token comes."""
        req = check_request(self.artifact.signature, prompt_ids, max_new_tokens, temperature, top_k, top_p, seed, stop)
        return generate_in_process(self.lib, self.module, req, on_token)

    def _rpc(self) -> RpcModule:
        """The same model as a local server process, for on-device timing."""
        if self._rpc_module is None:
            self._rpc_module = server_module(self.artifact, self.function, self.threads, "host")
        return self._rpc_module

    def benchmark(self, *inputs, warmup: int = 3, repeat: int = 20, min_repeat_ms: int = 0) -> dict:
        """Per-repeat times measured by the model's server with a monotonic clock."""
        return self._rpc().benchmark(*inputs, warmup=warmup, repeat=repeat, min_repeat_ms=min_repeat_ms)

    def profile(self, *inputs) -> dict:
        """Per-kernel times of one run (the server is built with the profiler)."""
        return self._rpc().profile(*inputs)

    def close(self) -> None:
        """Stop the benchmark server, if one was started."""
        if self._rpc_module is not None:
            self._rpc_module.close()
            self._rpc_module = None

    def workspace_bytes(self, **sizes) -> int:
        """Workspace bytes for values of the size variables, e.g.
        `m.workspace_bytes(seq=100)`: what to allocate before the first run."""
        names = [self.fn.size_names[i].decode() for i in range(self.fn.num_sizes)]
        missing = [n for n in names if n not in sizes]
        unknown = sorted(set(sizes) - set(names))
        if missing or unknown:
            raise RelaxEdgeError(f"workspace_bytes takes the sizes {', '.join(names) or '(none)'}"
                                 + (f"; missing {', '.join(missing)}" if missing else "")
                                 + (f"; unknown {', '.join(unknown)}" if unknown else ""))
        values = (ctypes.c_int64 * max(len(names), 1))(*[int(sizes[n]) for n in names])
        out = ctypes.c_uint64()
        err = abi.Error()
        status = self.fn.workspace(values, ctypes.byref(out), ctypes.byref(err))
        if status != 0:
            raise RuntimeCheckError(status, err.message.decode(errors="replace"))
        return out.value


def server_module(artifact, function: str, threads: int | None, what: str) -> RpcModule:
    """The artifact's function in its RPC server, started as a local process
    (`what` names it in errors)."""
    server = artifact.server
    if server is None or not server.exists():
        raise RelaxEdgeError(f"{artifact.out_dir}: no RPC server was built; rebuild the artifact")
    cmd = [str(server), *thread_args(threads)]
    return RpcModule(lambda: ProcessStream(cmd, what=what), artifact, 600.0, function)


class VulkanOptions(ctypes.Structure):
    """rxe_vk_options_t (runtime_c/include/relax_edge/vulkan.h)."""
    _fields_ = [("allow_cpu", ctypes.c_int32), ("device_index", ctypes.c_int32), ("validation", ctypes.c_int32),
                ("force_staging", ctypes.c_int32), ("limits", ctypes.c_void_p), ("library", ctypes.c_char_p),
                ("max_dispatches_per_submit", ctypes.c_uint32), ("pipeline_cache", ctypes.c_char_p)]


# rxe_vk_cache_state's values (RXE_VK_CACHE_*)
PIPELINE_CACHE_STATES = ("none", "created", "used", "rejected")


def pin_vulkan_driver(board) -> None:
    """The board's ICD (lavapipe on host-vulkan) for this process and its
    children, and LP_NUM_THREADS; RXE_VK_ANY_DEVICE=1 leaves the loader free."""
    settings = board.vulkan or {}
    if os.environ.get("RXE_VK_ANY_DEVICE") == "1" or not settings.get("icd"):
        return
    os.environ["VK_DRIVER_FILES"] = settings["icd"]
    os.environ["VK_ICD_FILENAMES"] = settings["icd"]   # the name older loaders read
    os.environ.setdefault("LP_NUM_THREADS", str(settings.get("lp_num_threads") or os.cpu_count() or 1))


class VulkanModule(LoadedModule):
    """A Vulkan artifact's function in this process: the device opened at load
    (with the validation layer when `validation`, or RXE_VK_VALIDATION=1).
    `pipeline_cache` names a pipeline cache file (runtime_c/include/
    relax_edge/vulkan.h) the load reads and writes; None leaves it to
    RXE_VK_PIPELINE_CACHE, "" turns it off."""

    def __init__(self, artifact, function: str = "main", threads: int | None = None, validation: bool | None = None,
                 pipeline_cache=None):
        from ..target import load_board
        board = load_board(artifact.board_file or artifact.board)
        pin_vulkan_driver(board)
        super().__init__(artifact, function, threads)
        p = artifact.prefix
        self._init = getattr(self.lib, f"{p}_vk_init")
        self._init.argtypes = [ctypes.POINTER(VulkanOptions), ctypes.POINTER(abi.Error)]
        self._init.restype = ctypes.c_int
        self._close = getattr(self.lib, f"{p}_vk_close")
        self._close.argtypes, self._close.restype = [], None
        self._context = getattr(self.lib, f"{p}_vk_context")
        self._context.argtypes, self._context.restype = [], ctypes.c_void_p
        for name, result in (("rxe_vk_pipelines_created", ctypes.c_uint64),
                             ("rxe_vk_validation_messages", ctypes.c_uint64),
                             ("rxe_vk_validation_text", ctypes.c_char_p), ("rxe_vk_device_name", ctypes.c_char_p),
                             ("rxe_vk_dispatch_count", ctypes.c_uint32), ("rxe_vk_cache_state", ctypes.c_int32),
                             ("rxe_vk_cache_text", ctypes.c_char_p)):
            getattr(self.lib, name).argtypes, getattr(self.lib, name).restype = [ctypes.c_void_p], result
        self.lib.rxe_vk_times.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_uint64), ctypes.c_uint32]
        self.lib.rxe_vk_times.restype = ctypes.c_int
        if validation is None:
            validation = os.environ.get("RXE_VK_VALIDATION") == "1"
        cache = None if pipeline_cache is None else os.fsencode(pipeline_cache)
        options = VulkanOptions(int(bool((board.vulkan or {}).get("allow_cpu"))), -1, int(validation), 0, None, None, 0,
                                cache)
        err = abi.Error()
        status = self._init(ctypes.byref(options), ctypes.byref(err))
        if status != 0:
            raise RuntimeCheckError(status, err.message.decode(errors="replace"))

    def _ctx(self):
        ctx = self._context()
        if not ctx:
            raise RelaxEdgeError(f"{self.artifact.out_dir}: the Vulkan device is closed")
        return ctx

    @property
    def device_name(self) -> str:
        return self.lib.rxe_vk_device_name(self._ctx()).decode()

    def pipelines_created(self) -> int:
        """Pipelines created by the device context since load (all at load)."""
        return self.lib.rxe_vk_pipelines_created(self._ctx())

    def pipeline_cache(self) -> dict:
        """What the load did with the pipeline cache file: state (none,
        created, used or rejected) and the runtime's line about it."""
        ctx = self._ctx()
        return {"state": PIPELINE_CACHE_STATES[self.lib.rxe_vk_cache_state(ctx)],
                "text": (self.lib.rxe_vk_cache_text(ctx) or b"").decode(errors="replace")}

    def validation_messages(self) -> tuple:
        """(count, the first one's text) of the validation layer's messages since load."""
        ctx = self._ctx()
        return (self.lib.rxe_vk_validation_messages(ctx), (self.lib.rxe_vk_validation_text(ctx) or b"").decode())

    def generate(self, prompt_ids, max_new_tokens: int = 32, temperature: float = 0.0, top_k=None, top_p=None,
                 seed: int = 0, stop=None, on_token=None) -> GenerateResult:
        """rxe_generate in this process with the KV cache kept on the device
        (PREFIX_vk_keep_state(1)): each step reads back only its logits."""
        req = check_request(self.artifact.signature, prompt_ids, max_new_tokens, temperature, top_k, top_p, seed, stop)
        self._ctx()
        keep = getattr(self.lib, f"{self.artifact.prefix}_vk_keep_state", None)
        if keep is None:
            raise RelaxEdgeError(f"{self.artifact.shared_library}: no {self.artifact.prefix}_vk_keep_state; "
                                 "rebuild the artifact")
        keep.argtypes, keep.restype = [ctypes.c_int], None
        keep(1)
        try:
            return generate_in_process(self.lib, self.module, req, on_token)
        finally:
            keep(0)

    def profile(self, *inputs) -> dict:
        """One run; each dispatch's GPU time (timestamps), summed per kernel
        and node, sorted by time; run_ms is the run's wall time on the host."""
        import time
        ctx = self._ctx()
        start = time.perf_counter_ns()
        self.run(*inputs)
        run_ns = time.perf_counter_ns() - start
        count = self.lib.rxe_vk_dispatch_count(ctx)
        times = (ctypes.c_uint64 * max(count, 1))()
        if self.lib.rxe_vk_times(ctx, times, count) != 0:
            raise RelaxEdgeError(f"{self.artifact.out_dir}: the device gave no dispatch times")
        names = []
        try:
            table_address = getattr(self.lib, f"{self.artifact.prefix}_{self.function}_vk_rows")
        except AttributeError:
            raise RelaxEdgeError(f"{self.artifact.shared_library}: no dispatch names to profile with; "
                                 "rebuild the artifact") from None
        rows_ptr = ctypes.cast(table_address, ctypes.POINTER(ctypes.c_char_p))
        while rows_ptr[len(names)] is not None:
            names.append(rows_ptr[len(names)].decode())
        pairs = list(zip(names[0::2], names[1::2]))
        if len(pairs) != count:
            raise RelaxEdgeError(f"{self.artifact.out_dir}: {count} dispatches ran, the module names {len(pairs)}")
        table: dict = {}
        for key, ns in zip(pairs, times):
            calls, total = table.get(key, (0, 0))
            table[key] = (calls + 1, total + ns)
        rows = [{"kernel": k, "node": n, "calls": c, "total_ms": t / 1e6, "mean_ms": t / 1e6 / c}
                for (k, n), (c, t) in table.items()]
        kernel_ms = sum(r["total_ms"] for r in rows)
        for r in rows:
            r["share"] = r["total_ms"] / kernel_ms if kernel_ms else 0.0
        rows.sort(key=lambda r: -r["total_ms"])
        return {"run_ms": run_ns / 1e6, "kernels_ms": kernel_ms, "rows": rows}

    def close(self) -> None:
        """Free the device (and stop the benchmark server)."""
        super().close()
        if self._context():
            self._close()


class HostDevice(Device):
    """The machine relax_edge runs on."""

    name = "host"

    def close(self) -> None:
        self.close_models()

    def load(self, artifact, function: str = "main", threads: int | None = None,
             pipeline_cache=None) -> LoadedModel:
        """The artifact's function in this process; `threads` sets the runtime's
        thread pool (default 1) for in-process runs and the benchmark server;
        `pipeline_cache` a Vulkan artifact's pipeline cache file (VulkanModule)."""
        if getattr(artifact, "backend", "c") == "vulkan":
            if artifact.board != "host-vulkan":
                raise RelaxEdgeError(f"Vulkan artifact built for board {artifact.board}, not host-vulkan")
            return self.track(VulkanModule(artifact, function, threads, pipeline_cache=pipeline_cache))
        if pipeline_cache is not None:
            raise RelaxEdgeError(f"{artifact.out_dir}: a pipeline cache is for Vulkan artifacts; this one's backend "
                                 f"is {getattr(artifact, 'backend', 'c')}")
        if artifact.board != "host":
            raise RelaxEdgeError(f"artifact built for board {artifact.board}, not host")
        if getattr(artifact, "sanitize", False):   # no shared library: ASan cannot be loaded into Python
            module = server_module(artifact, function, threads, "host (sanitized)")
        else:
            module = LoadedModule(artifact, function, threads)
        return self.track(module)
