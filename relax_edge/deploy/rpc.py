"""The RPC client: talks to the model's server (runtime_c/rpc) over a byte
stream (a local process, an emulator's stdin/stdout, an SSH exec channel).

    m = dev.load(art)
    outs = m.run(x)
    stats = m.benchmark(x, warmup=3, repeat=20)   # median_ms, mean_ms, std_ms, min_ms, max_ms, samples_ms
    rows = m.profile(x)                           # per kernel: kernel, node, calls, total_ms, mean_ms, share
    res = m.generate([1, 2, 3], max_new_tokens=8)  # a decoder's `step` on the device (GENERATE, TOKEN frames)

Times are measured on the device with its monotonic clock, per repeat. Frames
are read with a deadline; a server that dies (a crash: the signal and the
tail of its stderr are reported) is restarted once for the next request; a
server that does not answer in time is killed.
"""

from __future__ import annotations

import os
import select
import signal
import statistics
import struct
import subprocess
import sys
import threading
import time

import numpy as np

from ..codegen import abi
from ..errors import RelaxEdgeError
from . import tensorfile
from .generate import STEP, GenerateRequest, GenerateResult, check_request, result
from .session import (
    MAX_REPEAT,
    MAX_REPEAT_MS,
    DeviceError,
    LoadedModel,
    RuntimeCheckError,
    prepare_inputs,
    size_values,
    tail,
)

PROTOCOL_VERSION = 3   # runtime_c/include/relax_edge/rpc.h RXE_RPC_VERSION
HELLO, LIST, SELECT, SET_INPUT, RUN, GET_OUTPUT, TIME, PROFILE, WORKSPACE, SHUTDOWN, GENERATE = range(1, 12)
OK, TOKEN, ERROR = 0x80, 0x81, 0xFF
MAX_FRAME = 256 * 1024 * 1024


def check_timing(warmup, repeat, min_repeat_ms) -> None:
    """The TIME request's arguments, checked before anything is sent."""
    for name, value, low in (("warmup", warmup, 0), ("repeat", repeat, 1), ("min_repeat_ms", min_repeat_ms, 0)):
        high = MAX_REPEAT if name != "min_repeat_ms" else MAX_REPEAT_MS
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            raise RelaxEdgeError(f"benchmark: {name} must be an integer in [{low}, {high}], got {value!r}")


class ProcessStream:
    """A server process whose stdin/stdout carry the frames."""

    def __init__(self, cmd, cwd=None, what="server", hint=""):
        self.what = what
        self.hint = hint
        self.proc = subprocess.Popen(cmd, cwd=cwd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE)
        self.stderr = bytearray()
        self._drain = threading.Thread(target=self._read_stderr, daemon=True)
        self._drain.start()

    def _read_stderr(self):
        for chunk in iter(lambda: self.proc.stderr.read(4096), b""):
            self.stderr += chunk

    def send(self, data: bytes) -> None:
        try:
            self.proc.stdin.write(data)
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            raise self.died() from None

    def recv(self, n: int, deadline: float) -> bytes:
        out = bytearray()
        fd = self.proc.stdout.fileno()
        poller = select.poll()  # poll, not select: no limit on descriptor numbers
        poller.register(fd, select.POLLIN | select.POLLHUP | select.POLLERR)
        while len(out) < n:
            left = deadline - time.monotonic()
            if left <= 0 or not poller.poll(left * 1000):
                self.close(kill=True)
                raise DeviceError(f"{self.what}: no answer in time; the server was stopped{self.hint}")
            chunk = os.read(fd, n - len(out))
            if not chunk:
                raise self.died()
            out += chunk
        return bytes(out)

    def died(self) -> DeviceError:
        try:
            code = self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            code = None
        self._drain.join(timeout=2)
        text = self.stderr.decode(errors="replace")
        if code is not None and code < 0:
            try:
                name = signal.Signals(-code).name
            except ValueError:
                name = f"signal {-code}"
            return DeviceError(f"{self.what}: the model crashed with {name}:\n{tail(text)}")
        return DeviceError(f"{self.what}: the server stopped (exit {code}):\n{tail(text)}")

    def close(self, kill: bool = False) -> None:
        """Stop the server (at once with `kill`); its stderr is then complete."""
        self._close_process(kill)
        self._drain.join(timeout=2)
        for pipe in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            try:
                pipe.close()
            except OSError:
                pass

    def _close_process(self, kill: bool) -> None:
        if self.proc.poll() is None:
            if kill:
                self.proc.kill()
            else:
                try:
                    self.proc.stdin.close()
                except OSError:
                    pass
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


class RpcClient:
    def __init__(self, stream, timeout_s: float):
        self.stream = stream
        self.timeout_s = timeout_s
        _, abi_version = struct.unpack_from("<II", self.request(HELLO, struct.pack("<I", PROTOCOL_VERSION)))
        if abi_version != abi.ABI_VERSION:
            raise DeviceError(f"the server speaks ABI {abi_version}, this relax_edge ABI {abi.ABI_VERSION}")

    def request(self, kind: int, payload: bytes = b"") -> bytes:
        self.send(kind, payload)
        return self.reply()

    def send(self, kind: int, payload: bytes = b"") -> None:
        self.stream.send(struct.pack("<2sBBI", b"RX", kind, 0, len(payload)) + payload)

    def reply(self, streamed: bool = False):
        """The next frame's payload (an OK's); with `streamed`, (type, payload)
        and a TOKEN frame allowed. An ERROR frame raises RuntimeCheckError."""
        deadline = time.monotonic() + self.timeout_s
        magic, rtype, flags, length = struct.unpack("<2sBBI", self.stream.recv(8, deadline))
        if magic != b"RX" or flags != 0 or length > MAX_FRAME:
            raise DeviceError("the server sent a malformed frame")
        body = self.stream.recv(length, deadline) if length else b""
        if rtype == ERROR:
            status, n = struct.unpack_from("<II", body)
            raise RuntimeCheckError(status, body[8:8 + n].decode(errors="replace"))
        if rtype != OK and not (streamed and rtype == TOKEN):
            raise DeviceError(f"the server answered with frame type {rtype}")
        return (rtype, body) if streamed else body

    def generate(self, req: GenerateRequest, on_token=None) -> GenerateResult:
        """GENERATE: the TOKEN frames as they come (on_token(id) for each), then
        the statistics. An exception in on_token is raised once the reply was
        read to its end, so the stream stays in step."""
        name = STEP.encode()
        payload = b"".join([struct.pack("<I", len(name)), name, struct.pack(f"<I{len(req.prompt)}q", len(req.prompt),
                            *req.prompt), struct.pack("<IfifQ", req.max_new_tokens, req.temperature, req.top_k,
                                                      req.top_p, req.seed),
                            struct.pack(f"<I{len(req.stop)}q", len(req.stop), *req.stop)])
        self.send(GENERATE, payload)
        tokens, token_ns, raised = [], [], []
        while True:
            try:
                rtype, body = self.reply(streamed=True)
            except RuntimeCheckError as exc:
                exc.tokens = tokens   # those made before the error (a context bound reached)
                raise
            if rtype == OK:
                break
            token, _index, ns = struct.unpack("<qIQ", body)
            tokens.append(token)
            token_ns.append(ns)
            if on_token is not None and not raised:
                try:
                    on_token(token)
                except Exception as exc:   # noqa: BLE001 - raised below, after the last frame
                    raised.append(exc)
        if raised:
            raise raised[0]
        n, prompt_tokens, prefill_ns, decode_ns, stopped_by = struct.unpack("<IIQQI", body)
        if n != len(tokens):
            raise DeviceError(f"GENERATE: the server counted {n} tokens and sent {len(tokens)}")
        return result(tokens, token_ns, prompt_tokens, prefill_ns, decode_ns, stopped_by)

    def set_input(self, index: int, array: np.ndarray) -> None:
        encoded = tensorfile.encode([array])[8:]  # the same tensor layout, without the file header
        self.request(SET_INPUT, struct.pack("<I", index) + encoded)

    def get_output(self, index: int) -> np.ndarray:
        """Output `index` of the last run, at its actual shape: the reply carries
        the dims the run wrote (a data-dependent one below its capacity, ABI 3)."""
        body = self.request(GET_OUTPUT, struct.pack("<I", index))
        return tensorfile.decode(b"RXT1" + struct.pack("<I", 1) + body)[0]

    def close(self) -> None:
        try:
            self.request(SHUTDOWN)
        except RelaxEdgeError:
            pass
        self.stream.close()


def _strings(body: bytes, pos: int, n: int):
    out = []
    for _ in range(n):
        (length,) = struct.unpack_from("<I", body, pos)
        out.append(body[pos + 4:pos + 4 + length].decode())
        pos += 4 + length
    return out, pos


class RpcModule(LoadedModel):
    """A model on a device, driven over the RPC protocol."""

    def __init__(self, spawn, artifact, timeout_s: float, function: str = "main"):
        self._spawn = spawn            # () -> a stream to a fresh server
        self.artifact = artifact
        self.signature = artifact.signature[function]
        self.function = function
        self.timeout_s = timeout_s
        self.client = None

    def _session(self) -> RpcClient:
        if self.client is None:
            stream = self._spawn()
            try:
                self.client = RpcClient(stream, self.timeout_s)
            except BaseException:  # a refused handshake, or Ctrl-C during it: the server goes with it
                stream.close(kill=True)
                raise
            if self.function != "main":
                name = self.function.encode()
                self.client.request(SELECT, struct.pack("<I", len(name)) + name)
        return self.client

    def _call(self, fn):
        """Run fn(client). After a crash or a timeout the error is raised and
        the next request starts a fresh server."""
        try:
            return fn(self._session())
        except DeviceError:
            self.client = None
            raise
        except KeyboardInterrupt:  # mid-request: stop the server now rather than wait for its answer
            client, self.client = self.client, None
            if client is not None:
                client.stream.close(kill=True)
            raise

    def _send_inputs(self, client, inputs):
        for k, x in enumerate(prepare_inputs(self.signature, inputs)):
            client.set_input(k, x)

    def run(self, *inputs) -> list:
        def go(client):
            self._send_inputs(client, inputs)
            client.request(RUN)
            return [client.get_output(k) for k in range(len(self.signature["outputs"]))]
        return self._call(go)

    def benchmark(self, *inputs, warmup: int = 3, repeat: int = 20, min_repeat_ms: int = 0) -> dict:
        check_timing(warmup, repeat, min_repeat_ms)

        def go(client):
            self._send_inputs(client, inputs)
            body = client.request(TIME, struct.pack("<III", warmup, repeat, min_repeat_ms))
            (n,) = struct.unpack_from("<I", body)
            return [ns / 1e6 for ns in struct.unpack_from(f"<{n}Q", body, 4)]
        samples = self._call(go)
        return {"median_ms": statistics.median(samples), "mean_ms": statistics.fmean(samples),
                "std_ms": statistics.pstdev(samples), "min_ms": min(samples), "max_ms": max(samples),
                "repeat": len(samples), "warmup": warmup, "samples_ms": samples}

    def profile(self, *inputs) -> dict:
        """One profiled run: per-kernel rows sorted by time, and the run's total."""
        def go(client):
            self._send_inputs(client, inputs)
            return client.request(PROFILE)
        body = self._call(go)
        run_ns, n = struct.unpack_from("<QI", body)
        pos, rows = 12, []
        for _ in range(n):
            (kernel, node), pos = _strings(body, pos, 2)
            calls, total = struct.unpack_from("<QQ", body, pos)
            pos += 16
            rows.append({"kernel": kernel, "node": node, "calls": calls, "total_ms": total / 1e6,
                         "mean_ms": total / 1e6 / max(calls, 1)})
        kernel_ms = sum(r["total_ms"] for r in rows)
        for r in rows:
            r["share"] = r["total_ms"] / kernel_ms if kernel_ms else 0.0
        rows.sort(key=lambda r: -r["total_ms"])
        return {"run_ms": run_ns / 1e6, "kernels_ms": kernel_ms, "rows": rows}

    def generate(self, prompt_ids, max_new_tokens: int = 32, temperature: float = 0.0, top_k=None, top_p=None,
                 seed: int = 0, stop=None, on_token=None) -> GenerateResult:
        """The decoder's `step` run by the server's loop (rxe_generate), the
        tokens streamed back one frame each."""
        req = check_request(self.artifact.signature, prompt_ids, max_new_tokens, temperature, top_k, top_p, seed, stop)
        return self._call(lambda client: client.generate(req, on_token))

    def workspace_bytes(self, **sizes) -> int:
        values = size_values(self.signature, sizes)
        payload = struct.pack(f"<{len(values)}q", *values)
        body = self._call(lambda c: c.request(WORKSPACE, payload))
        return struct.unpack("<Q", body)[0]

    def close(self) -> None:
        """Stop the server (the device session also does this when it ends)."""
        if self.client is not None:
            self.client.close()
            self.client = None

    def __del__(self):
        if sys.is_finalizing():   # the stderr drain thread is frozen holding its pipe; the server ends on stdin's EOF
            return
        try:
            self.close()
        except Exception:  # interpreter shutdown: nothing left to clean
            pass
