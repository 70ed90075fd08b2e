"""Running artifacts on the host: the shared library loaded with ctypes.

    with rxe.connect("host") as dev:
        m = dev.load(art)
        outs = m.run(x)          # list of numpy arrays

`run` asks the module's plan entry for the output shapes and workspace size,
allocates them (the only allocation, on the Python side), and calls run.
A status other than RXE_OK becomes a RuntimeCheckError with the runtime's
message (naming the input and dimension).

Its inputs are prepared by `session.prepare_inputs`, as on every other
transport. Benchmarks and profiles go to the model's server, started as a
local process; a sanitized artifact (no shared library: ASan cannot be
loaded into Python) goes there for everything.
"""

from __future__ import annotations

import ctypes

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
        self.lib = ctypes.CDLL(str(artifact.shared_library))
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


class HostDevice(Device):
    """The machine relax_edge runs on."""

    name = "host"

    def close(self) -> None:
        self.close_models()

    def load(self, artifact, function: str = "main", threads: int | None = None) -> LoadedModel:
        """The artifact's function in this process; `threads` sets the runtime's
        thread pool (default 1) for in-process runs and the benchmark server."""
        if artifact.board != "host":
            raise RelaxEdgeError(f"artifact built for board {artifact.board}, not host")
        if getattr(artifact, "sanitize", False):   # no shared library: ASan cannot be loaded into Python
            module = server_module(artifact, function, threads, "host (sanitized)")
        else:
            module = LoadedModule(artifact, function, threads)
        return self.track(module)
