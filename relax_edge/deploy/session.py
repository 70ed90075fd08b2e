"""The one interface of every way to run a model, and what the transports share.

    with rxe.connect(board) as dev:            # a Device
        with dev.load(art) as m:               # a LoadedModel
            outs = m.run(x)                    # list of numpy arrays
            stats = m.benchmark(x, repeat=20)  # timed on the device
            rows = m.profile(x)                # per-kernel times of one run
            ws = m.workspace_bytes(seq=100)    # bytes to allocate for those sizes
            res = m.generate(ids, max_new_tokens=32)   # a KV-cache decoder's tokens (GenerateResult)

Every transport implements `Device` and `LoadedModel`: the host in process
(ctypes), a local server process (sanitized artifacts), qemu-user and
qemu-system (semihosting), ssh and adb. A model that cannot do an
operation on its board raises DeviceError naming the board and what is
missing; it never lacks the method.

This module also holds what several transports need and that must not
depend on any of them: the errors, the input checks every entry point
makes before the device sees the inputs (`prepare_inputs`: non-contiguous
or byte-swapped arrays are copied into compact native order, and the
input count and the dtype fail with the status and message the C side
uses), the thread-count option, the lookup of status names.
"""

from __future__ import annotations

import abc

import numpy as np

from ..codegen import abi
from ..errors import RelaxEdgeError

MAX_REPEAT = 100000        # benchmark limits, the RPC server's (rpc/protocol.c): warmup and repeat,
MAX_REPEAT_MS = 3600000    # and min_repeat_ms
INTERNAL_STATUS = 10   # RXE_ERR_INTERNAL: a status name this relax_edge does not know


class DeviceError(RelaxEdgeError):
    """The device or its server failed (a crash, a timeout, a lost connection),
    or the loaded model cannot do the operation asked on its board."""


class RuntimeCheckError(RelaxEdgeError):
    """The compiled model rejected its inputs (or failed) with a status."""

    def __init__(self, status: int, message: str):
        self.status = abi.STATUS_NAMES.get(status, str(status))
        super().__init__(f"{self.status}: {message}")


def status_code(name: str) -> int:
    """The runtime's status number for a status name such as RXE_ERR_SHAPE."""
    return next((code for code, known in abi.STATUS_NAMES.items() if known == name), INTERNAL_STATUS)


def tail(text: str, lines: int = 12) -> str:
    """The last lines of what a device or a server printed, for an error message."""
    return "\n".join(text.strip().splitlines()[-lines:])


def _dtype_name(dtype: np.dtype) -> str:
    return "bool" if dtype == np.bool_ else dtype.name


def count_message(signature: dict, given: int) -> str:
    """The input-count error, worded as the runner and the RPC client word it."""
    names = [i["name"] for i in signature["inputs"]]
    return f"takes {len(names)} inputs ({', '.join(names)}), got {given}"


def prepare_inputs(signature: dict, inputs) -> list:
    """The inputs as compact, native-order numpy arrays, or a
    RuntimeCheckError: the input count (RXE_ERR_ARGUMENT_COUNT), a value that
    is not an array or whose dtype the ABI cannot describe (RXE_ERR_DTYPE),
    a rank beyond RXE_MAX_NDIM (RXE_ERR_RANK), in the words of the runtime's
    own checks. Dtype, rank, bounds and shapes are otherwise checked by the
    generated plan function, the one source of those messages."""
    infos = signature["inputs"]
    if len(inputs) != len(infos):
        raise RuntimeCheckError(1, count_message(signature, len(inputs)))
    arrays = []
    for info, x in zip(infos, inputs):
        what = f"input {info['name']}"
        try:
            arr = np.asarray(x)
        except (ValueError, TypeError) as err:
            raise RuntimeCheckError(2, f"{what}: not an array of {info['dtype']} ({err})") from None
        name = _dtype_name(arr.dtype)
        if name not in abi.DTYPES:
            raise RuntimeCheckError(2, f"{what}: dtype {name}, expected {info['dtype']}")
        if arr.ndim > abi.MAX_NDIM:
            rank = len([d for d in info["shape"].strip("()").split(",") if d.strip()])
            raise RuntimeCheckError(3, f"{what}: rank {arr.ndim}, expected {rank}")
        if not arr.dtype.isnative:
            arr = arr.astype(arr.dtype.newbyteorder("="))
        arrays.append(np.ascontiguousarray(arr).reshape(arr.shape))  # ascontiguousarray makes 0-d 1-d
    return arrays


def compact_output(buffer: np.ndarray, shape: tuple) -> np.ndarray:
    """An output allocated at its planned capacity, as the array of the
    actual `shape` the run reported (ABI 3: the data is compact at the start)."""
    shape = tuple(int(d) for d in shape)
    if shape == buffer.shape:
        return buffer
    n = int(np.prod(shape, dtype=np.int64))
    if len(shape) != buffer.ndim or n > buffer.size or min(shape, default=0) < 0:
        raise DeviceError(f"the run reported an output shape {shape} beyond its capacity {buffer.shape}")
    return buffer.reshape(-1)[:n].reshape(shape).copy()


def size_values(signature: dict, sizes: dict) -> list:
    """The values of the signature's size variables, in its order, from
    `workspace_bytes(**sizes)`; every size named, no other."""
    names = signature.get("sizes", [])
    if sorted(sizes) != sorted(names):
        raise RelaxEdgeError(f"workspace_bytes takes the sizes {', '.join(names) or '(none)'}")
    return [int(sizes[n]) for n in names]


def thread_args(threads) -> list:
    """The RPC server's command-line option for a thread count (1..MAX_THREADS,
    the runtime's RXE_MAX_THREADS)."""
    if threads is None:
        return []
    if not isinstance(threads, int) or isinstance(threads, bool) or not 1 <= threads <= abi.MAX_THREADS:
        raise RelaxEdgeError(f"threads must be an integer in [1, {abi.MAX_THREADS}], got {threads!r}")
    return ["--threads", str(threads)]


class LoadedModel(abc.ABC):
    """One function of an artifact, loaded on a device. Use it as a context
    manager or call `close()` (the device also closes it when it closes)."""

    @abc.abstractmethod
    def run(self, *inputs) -> list:
        """The outputs for these inputs, as numpy arrays; a RuntimeCheckError
        with the runtime's status and message when the model rejects them."""

    @abc.abstractmethod
    def benchmark(self, *inputs, warmup: int = 3, repeat: int = 20, min_repeat_ms: int = 0) -> dict:
        """Per-repeat times measured on the device with its monotonic clock:
        median_ms, mean_ms, std_ms, min_ms, max_ms, repeat, warmup, samples_ms."""

    @abc.abstractmethod
    def profile(self, *inputs) -> dict:
        """One profiled run: run_ms, kernels_ms, and per-kernel rows (kernel,
        node, calls, total_ms, mean_ms, share) sorted by time."""

    @abc.abstractmethod
    def workspace_bytes(self, **sizes) -> int:
        """Workspace bytes for values of the size variables, e.g.
        `m.workspace_bytes(seq=100)`: what to allocate before the first run."""

    @abc.abstractmethod
    def close(self) -> None:
        """Release what the model holds on the device (a server, a library)."""

    def generate(self, prompt_ids, max_new_tokens: int = 32, temperature: float = 0.0, top_k=None, top_p=None,
                 seed: int = 0, stop=None, on_token=None):
        """New tokens from a KV-cache decoder's `step` function (the runtime's
        rxe_generate loop on the device), as a GenerateResult: tokens, ttft_ms,
        prefill_tok_s, decode_tok_s, token_ms, prompt_tokens, stopped_by.
        temperature <= 0 is greedy; top_k None or 0 and top_p None or 1 are
        off; the same seed gives the same tokens on every target; a stop token
        ends it (and is in the tokens); on_token(id) is called as each comes.
        A transport without the loop raises DeviceError."""
        from .generate import check_request

        check_request(self.artifact.signature, prompt_ids, max_new_tokens, temperature, top_k, top_p, seed, stop)
        raise DeviceError(f"{type(self).__name__}: generate needs the model's RPC server or its shared library "
                          "in process; this model has neither")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False


class Device(abc.ABC):
    """A session on one board (`rxe.connect(board)`). Use it as a context
    manager or call `close()`: that closes every model it loaded."""

    @abc.abstractmethod
    def load(self, artifact, function: str = "main", threads: int | None = None) -> LoadedModel:
        """The artifact's function on this device; `threads` sets the size of
        the runtime's thread pool (default 1)."""

    @abc.abstractmethod
    def close(self) -> None:
        """Close the loaded models and end the session."""

    def track(self, model: LoadedModel) -> LoadedModel:
        """Remember a loaded model so that `close_models` closes it."""
        self.__dict__.setdefault("_models", []).append(model)
        return model

    def close_models(self) -> None:
        """Close every model this device loaded, all of them even when one
        fails to close; the first failure is raised afterwards."""
        first = None
        for model in self.__dict__.pop("_models", []):
            try:
                model.close()
            except Exception as err:   # noqa: BLE001 - the rest are still closed
                first = first or err
        if first is not None:
            raise first

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False
