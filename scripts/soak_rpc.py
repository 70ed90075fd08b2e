"""Soak one RPC server: a long run of valid and malformed requests against a
single server process, every reply checked, its memory and descriptors
watched.

    python scripts/soak_rpc.py [--requests 100000] [--seconds S] [--board host|BOARD.yaml] [--sanitize]

1. One server, started once: the host board's PREFIX_server as a local
   process, or, with an SSH board file, the board's server over an exec
   channel (its pid comes from the remote shell before it execs the server).
   --sanitize soaks a host server built with ASan + UBSan (rxe.build
   sanitize=True): a memory error ends it, a leak fails its exit status.
2. The model is an MLP over a symbolic batch (64 -> 96 relu -> 10 softmax);
   batches of 1 to 256 rows go through SET_INPUT / RUN / GET_OUTPUT / TIME /
   WORKSPACE, and every output is compared with the numpy interpreter.
3. Malformed frames are mixed in: payloads too short or too long for their
   shape, unsupported element sizes, ranks past the limit, negative
   dimensions, out-of-range input and output indices, unknown request types,
   bad TIME / WORKSPACE / SELECT / HELLO payloads; and well-formed inputs the
   model rejects (a wrong dtype code, a wrong feature size). Each must be
   answered by an ERROR frame with the expected status (RXE_ERR_PROTOCOL for
   a malformed frame), and must leave the server's state as it was (protocol
   2: the next GET_OUTPUT and RUN are checked against the last valid run and
   input).
   Bad frame headers are not sent: they end the stream by design.
4. The server's resident memory (VmRSS in /proc/PID/status) and open
   descriptors (/proc/PID/fd) are sampled during the run; after a warm-up
   (the first tenth of the samples) the largest RSS of the last quarter must
   be within max(4 MiB, 5%) of the largest of the first quarter, and the
   descriptor count must not grow.
5. At the end the server is asked to SHUTDOWN and must exit (0) and be gone.

Exit status 0 when every reply was right and the server stayed flat.
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import os
import shlex
import struct
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import relax_edge as rxe  # noqa: E402
from relax_edge import op  # noqa: E402
from relax_edge.codegen.abi import MAX_NDIM  # noqa: E402
from relax_edge.deploy.rpc import (  # noqa: E402
    GET_OUTPUT,
    HELLO,
    PROTOCOL_VERSION,
    RUN,
    SELECT,
    SET_INPUT,
    SHUTDOWN,
    TIME,
    WORKSPACE,
    ProcessStream,
    RpcClient,
)
from relax_edge.deploy.session import RuntimeCheckError  # noqa: E402
from relax_edge.ir import Builder, SizeVar, TensorType, Var  # noqa: E402

FEATURES, HIDDEN, CLASSES = 64, 96, 10
BATCHES = (1, 2, 3, 5, 8, 13, 16, 31, 64, 100, 256)
MAX_TENSORS = 16      # runtime_c/include/relax_edge/rpc.h RXE_RPC_MAX_TENSORS
MALFORMED_CASES = 15  # kinds of malformed frame (Soak.malformed_frame)


def soak_model(seed: int = 0):
    """An MLP over a symbolic batch n: (n, 64) -> 96 relu -> 10 softmax."""
    rng = np.random.default_rng(seed)
    w1 = (rng.standard_normal((FEATURES, HIDDEN)) / 8).astype(np.float32)
    b1 = (rng.standard_normal(HIDDEN) / 8).astype(np.float32)
    w2 = (rng.standard_normal((HIDDEN, CLASSES)) / 10).astype(np.float32)
    b2 = (rng.standard_normal(CLASSES) / 10).astype(np.float32)
    x = Var("x", TensorType((SizeVar("n"), FEATURES), "float32"))
    bb = Builder()
    with bb.function("main", [x]):
        with bb.dataflow():
            h = bb.emit(op.relu(op.add(op.matmul(x, w1), b1)))
            out = bb.emit_output(op.softmax(op.add(op.matmul(h, w2), b2), axis=-1))
        bb.ret(out)
    return bb.get()


# ---------------------------------------------------------------- servers

class LocalServer:
    """The server as a process on this machine; /proc read directly."""

    cheap_samples = True

    def __init__(self, program: Path, env: dict | None = None):
        settings = [f"{k}={v}" for k, v in (env or {}).items()]
        # `env` execs the server: the pid is the server's
        self.stream = ProcessStream(["env", *settings, str(program)], what="soak server")
        self.pid = self.stream.proc.pid

    def sample(self) -> tuple[int, int]:
        """(VmRSS in bytes, open descriptors)."""
        return _rss_bytes(Path(f"/proc/{self.pid}/status").read_text()), len(os.listdir(f"/proc/{self.pid}/fd"))

    def gone(self, timeout_s: float) -> bool:
        code = self.stream.proc.wait(timeout=timeout_s)
        self.stream._drain.join(timeout=5)
        self.stderr = self.stream.stderr.decode(errors="replace")
        return code == 0 and not Path(f"/proc/{self.pid}").exists()

    def close(self) -> None:
        self.stream.close(kill=True)


class SshServer:
    """The server on an SSH board: started by a remote shell that prints its
    pid and execs it (the pid stays the server's); /proc read by a second
    remote shell that answers each newline with one sample."""

    cheap_samples = False   # each sample is a round trip

    def __init__(self, device, program: str):
        from relax_edge.deploy.ssh import ChannelStream
        self.device = device
        cmd = " ".join(shlex.quote(a) for a in [*device.prefix, program])
        self.channel = device.client.get_transport().open_session()
        self.channel.exec_command(f"cd {shlex.quote(device.session_dir)} && echo $$ && exec {cmd}")
        line = b""
        self.channel.settimeout(30)
        while not line.endswith(b"\n"):
            chunk = self.channel.recv(1)
            if not chunk:
                raise rxe.DeviceError(f"{device.where}: the server did not start")
            line += chunk
        self.pid = int(line)
        self.stream = ChannelStream(self.channel, device.where)
        self.probe = device.client.get_transport().open_session()
        self.probe.exec_command(f"while read _; do grep VmRSS /proc/{self.pid}/status && "
                                f"ls /proc/{self.pid}/fd | wc -l || echo gone; done")
        self.probe_out = self.probe.makefile("r")

    def _remote(self, command: str) -> tuple[int, str]:
        _, out, _ = self.device.client.exec_command(command, timeout=30)
        text = out.read().decode()
        return out.channel.recv_exit_status(), text

    def sample(self) -> tuple[int, int]:
        self.probe.sendall(b"\n")
        rss = self.probe_out.readline()
        if not rss.startswith("VmRSS:"):
            raise rxe.DeviceError(f"{self.device.where}: server {self.pid} is gone")
        return _rss_bytes(rss), int(self.probe_out.readline())

    def gone(self, timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self._remote(f"kill -0 {self.pid} 2>/dev/null")[0] != 0:
                return self.channel.recv_exit_status() == 0
            time.sleep(0.05)
        return False

    def close(self) -> None:
        if self._remote(f"kill -0 {self.pid} 2>/dev/null")[0] == 0:
            self._remote(f"kill -9 {self.pid}")
        self.stream.close()
        self.probe.close()   # its shell ends at end of input


def _rss_bytes(status_text: str) -> int:
    for line in status_text.splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise ValueError("no VmRSS line in /proc/PID/status")


# ---------------------------------------------------------------- frames

def tensor_payload(index: int, code: int, bits: int, dims, data: bytes) -> bytes:
    return struct.pack("<IBBH", index, code, bits, len(dims)) + struct.pack(f"<{len(dims)}q", *dims) + data


def array_payload(index: int, x: np.ndarray) -> bytes:
    return tensor_payload(index, 2, 32, x.shape, x.tobytes())


@dataclasses.dataclass
class Report:
    """What a soak saw: counts, failures (each names its request) and samples."""
    requests: int = 0
    errors_expected: int = 0
    failures: list = dataclasses.field(default_factory=list)
    samples: list = dataclasses.field(default_factory=list)   # (request count, rss bytes, fds)
    malformed: collections.Counter = dataclasses.field(default_factory=collections.Counter)  # sent, by case
    seconds: float = 0.0
    protocol: int = 0
    server_gone: bool = False

    @property
    def rate(self) -> float:
        return self.requests / self.seconds if self.seconds else 0.0

    def flatness(self):
        """(first-quarter max RSS, last-quarter max RSS, first fds, last fds, flat) after warm-up."""
        steady = self.samples[max(1, len(self.samples) // 10):]
        if len(steady) < 4:
            return None
        q = max(1, len(steady) // 4)
        first_rss, last_rss = max(s[1] for s in steady[:q]), max(s[1] for s in steady[-q:])
        first_fds, last_fds = max(s[2] for s in steady[:q]), max(s[2] for s in steady[-q:])
        flat = last_rss - first_rss <= max(4 << 20, first_rss // 20) and last_fds <= first_fds
        return first_rss, last_rss, first_fds, last_fds, flat

    @property
    def ok(self) -> bool:
        flat = self.flatness()
        return not self.failures and flat is not None and flat[-1] and self.server_gone

    def summary(self) -> str:
        lines = [(f"requests {self.requests} in {self.seconds:.1f}s ({self.rate:.0f}/s), "
                  f"{self.errors_expected} answered with the expected error, protocol {self.protocol}, "
                  f"{len(self.samples)} samples")]
        flat = self.flatness()
        if flat is None:
            lines.append("too few samples to judge RSS and descriptors")
        else:
            first_rss, last_rss, first_fds, last_fds, ok = flat
            lines.append(f"RSS first-quarter max {first_rss / 2**20:.1f} MiB, last-quarter max "
                         f"{last_rss / 2**20:.1f} MiB; fds {first_fds} -> {last_fds}: "
                         f"{'flat' if ok else 'GROWING'}")
            (_, rss0, fds0), (_, rss1, fds1) = self.samples[0], self.samples[-1]
            lines.append(f"first sample RSS {rss0 / 2**20:.1f} MiB, {fds0} fds; "
                         f"last sample RSS {rss1 / 2**20:.1f} MiB, {fds1} fds")
        lines.append("server gone after SHUTDOWN" if self.server_gone else "THE SERVER DID NOT SHUT DOWN CLEANLY")
        lines += [f"FAIL {f}" for f in self.failures[:20]]
        return "\n".join(lines)


class Soak:
    """The request mix and the model of the server's state it checks against."""

    def __init__(self, client: RpcClient, mod, seed: int, protocol: int):
        self.client = client
        self.rng = np.random.default_rng(seed)
        self.protocol = protocol
        self.inputs = [self.rng.standard_normal((b, FEATURES)).astype(np.float32) for b in BATCHES]
        self.expected = [rxe.interpret(mod, x) for x in self.inputs]
        self.workspace = {}
        self.current_input = None     # index into inputs; "dtype"/"shape": a rejected input; None: not set
        self.current_output = None    # whose outputs GET_OUTPUT returns
        self.report = Report(protocol=protocol)

    # one request, its answer checked ---------------------------------------
    def ask(self, what: str, kind: int, payload: bytes = b"", error: str | None = None) -> bytes | None:
        self.report.requests += 1
        try:
            body = self.client.request(kind, payload)
        except rxe.DeviceError as err:
            self.fail(f"{what}: {err}")
            raise
        except RuntimeCheckError as err:
            if error is None or err.status != error:
                self.fail(f"{what}: {err} (expected {error or 'OK'})")
            else:
                self.report.errors_expected += 1
            return None
        if error is not None:
            self.fail(f"{what}: answered OK, expected {error}")
        return body

    def fail(self, message: str) -> None:
        self.report.failures.append(f"request {self.report.requests}: {message}")

    # valid requests ----------------------------------------------------------
    def set_input(self) -> None:
        k = int(self.rng.integers(len(self.inputs)))
        if self.ask(f"SET_INPUT batch {BATCHES[k]}", SET_INPUT, array_payload(0, self.inputs[k])) is not None:
            self.current_input = k

    def run(self) -> None:
        k = self.current_input
        error = {"dtype": "RXE_ERR_DTYPE", "shape": "RXE_ERR_SHAPE"}.get(k)
        if self.ask(f"RUN on {k}", RUN, error=error) is not None and error is None:
            self.current_output = k

    def get_output(self) -> None:
        k = self.current_output
        body = self.ask(f"GET_OUTPUT after a run on {k}", GET_OUTPUT, struct.pack("<I", 0),
                        error=None if k is not None else "RXE_ERR_PROTOCOL")
        if body is None or k is None:
            return
        code, bits, ndim = struct.unpack_from("<BBH", body)
        dims = struct.unpack_from(f"<{ndim}q", body, 4)
        got = np.frombuffer(body, np.float32, offset=4 + 8 * ndim)
        want = self.expected[k]
        if (code, bits, dims) != (2, 32, want.shape) or got.size != want.size:
            self.fail(f"GET_OUTPUT: dtype ({code}, {bits}) shape {dims}, expected float32 {want.shape}")
        elif not np.allclose(got.reshape(want.shape), want, rtol=1e-4, atol=1e-6):
            self.fail(f"GET_OUTPUT: batch {BATCHES[k]}: max error {np.abs(got.reshape(want.shape) - want).max()}")

    def time_runs(self) -> None:
        k = self.current_input
        repeat = int(self.rng.integers(1, 4))
        error = {"dtype": "RXE_ERR_DTYPE", "shape": "RXE_ERR_SHAPE"}.get(k)
        body = self.ask(f"TIME x{repeat}", TIME, struct.pack("<III", 0, repeat, 0), error=error)
        if body is not None:
            if struct.unpack_from("<I", body)[0] != repeat or len(body) != 4 + 8 * repeat:
                self.fail(f"TIME: {len(body)} bytes for {repeat} samples")
            if error is None:
                self.current_output = k

    def workspace_bytes(self) -> None:
        n = int(self.rng.choice(BATCHES))
        body = self.ask(f"WORKSPACE n={n}", WORKSPACE, struct.pack("<q", n))
        if body is not None:
            got = struct.unpack("<Q", body)[0]
            if self.workspace.setdefault(n, got) != got:
                self.fail(f"WORKSPACE n={n}: {got} bytes, earlier {self.workspace[n]}")

    # well-formed inputs the model rejects ----------------------------------------
    def wrong_dtype(self) -> None:
        x = self.inputs[int(self.rng.integers(len(self.inputs)))]
        code = int(self.rng.choice([0, 1, 5, 7]))   # int, uint, and codes no dtype has
        if self.ask(f"SET_INPUT dtype code {code}", SET_INPUT, tensor_payload(0, code, 32, x.shape, x.tobytes()),
                    error=None) is not None:
            self.current_input = "dtype"

    def wrong_shape(self) -> None:
        x = self.rng.standard_normal((int(self.rng.choice(BATCHES)), FEATURES - 1)).astype(np.float32)
        if self.ask("SET_INPUT 63 features", SET_INPUT, array_payload(0, x)) is not None:
            self.current_input = "shape"

    # malformed frames ------------------------------------------------------------
    def malformed_frame(self) -> None:
        x = self.inputs[int(self.rng.integers(len(self.inputs)))]
        data = x.tobytes()
        cut = int(self.rng.integers(1, 5))
        cases = [
            ("SET_INPUT data too short", SET_INPUT, tensor_payload(0, 2, 32, x.shape, data[:-cut])),
            ("SET_INPUT data too long", SET_INPUT, tensor_payload(0, 2, 32, x.shape, data + b"\0" * cut)),
            ("SET_INPUT 12-bit elements", SET_INPUT, tensor_payload(0, 2, 12, x.shape, data)),
            ("SET_INPUT rank 9", SET_INPUT, tensor_payload(0, 2, 32, (1,) * (MAX_NDIM + 1), b"\0" * 4)),
            ("SET_INPUT negative dimension", SET_INPUT, tensor_payload(0, 2, 32, (-x.shape[0], FEATURES), data)),
            ("SET_INPUT index out of range", SET_INPUT,
             tensor_payload(int(self.rng.choice([MAX_TENSORS, 1000, 2**32 - 1])), 2, 32, x.shape, data)),
            ("SET_INPUT truncated header", SET_INPUT, struct.pack("<IB", 0, 2)),
            ("GET_OUTPUT index out of range", GET_OUTPUT, struct.pack("<I", int(self.rng.choice([1, 999, 2**32 - 1])))),
            ("GET_OUTPUT no index", GET_OUTPUT, b""),
            ("TIME repeat 0", TIME, struct.pack("<III", 0, 0, 0)),
            ("TIME truncated", TIME, struct.pack("<I", 1)),
            ("WORKSPACE no sizes", WORKSPACE, b""),
            ("WORKSPACE two sizes", WORKSPACE, struct.pack("<qq", 1, 2)),
            ("SELECT name past the payload", SELECT, struct.pack("<I", 50) + b"main"),
            ("unknown request type", int(self.rng.choice([0, 11, 12, 77, 0x7F, 0xC0])), b"\x01\x02\x03"),
        ]
        assert len(cases) == MALFORMED_CASES
        what, kind, payload = cases[int(self.rng.integers(len(cases)))]
        self.report.malformed[what] += 1
        self.ask(what, kind, payload, error="RXE_ERR_PROTOCOL")

    def refused_requests(self) -> None:
        if self.rng.integers(2):
            self.ask("SELECT unknown function", SELECT, struct.pack("<I", 7) + b"nothere", error="RXE_ERR_NOT_FOUND")
        else:
            self.ask("HELLO wrong version", HELLO, struct.pack("<I", 99), error="RXE_ERR_ABI")

    # the mix ---------------------------------------------------------------------
    def step(self) -> None:
        """One group of requests: mostly a valid round, sometimes a bad frame."""
        if self.current_input is None:
            self.set_input()
            return
        roll = self.rng.random()
        if roll < 0.45:
            self.set_input()
            self.run()
            self.get_output()
        elif roll < 0.55:
            self.time_runs()
            self.get_output()
        elif roll < 0.60:
            self.workspace_bytes()
        elif roll < 0.64:
            self.wrong_dtype()
            self.run()
        elif roll < 0.68:
            self.wrong_shape()
            self.run()
        elif roll < 0.70:
            self.refused_requests()
        else:
            self.malformed_frame()
            if self.rng.random() < 0.3:
                self.get_output()    # a failed request changes nothing
                if isinstance(self.current_input, int):
                    self.run()
                    self.get_output()


def soak(server, mod, requests: int, seconds: float | None, seed: int = 0, sample_every_s: float = 0.25,
         timeout_s: float = 60.0, log=None) -> Report:
    """Drive `server` (LocalServer or SshServer) with `requests` requests, or
    for `seconds` if that comes first; shut it down and check it is gone."""
    client = RpcClient(server.stream, timeout_s)
    hello = client.request(HELLO, struct.pack("<I", PROTOCOL_VERSION))
    soak_run = Soak(client, mod, seed, struct.unpack_from("<I", hello)[0])
    report = soak_run.report
    report.requests = 2
    start = last_sample = time.monotonic()
    step = max(50, requests // 400) if server.cheap_samples else requests   # a fast local server: by count too
    report.samples.append((0, *server.sample()))
    try:
        while report.requests < requests and (seconds is None or time.monotonic() - start < seconds):
            soak_run.step()
            now = time.monotonic()
            if now - last_sample >= sample_every_s or report.requests - report.samples[-1][0] >= step:
                report.samples.append((report.requests, *server.sample()))
                last_sample = now
                if log and len(report.samples) % 40 == 0:
                    log(f"{report.requests} requests, RSS {report.samples[-1][1] / 2**20:.1f} MiB, "
                        f"fds {report.samples[-1][2]}")
        report.seconds = time.monotonic() - start
        report.samples.append((report.requests, *server.sample()))
        soak_run.ask("SHUTDOWN", SHUTDOWN)
        report.server_gone = server.gone(30)
    except rxe.DeviceError:   # recorded by ask(): the server crashed or stopped answering
        report.seconds = time.monotonic() - start
    finally:
        server.close()
    return report


# a sanitized server: errors end it, leaks fail its exit, and freed memory is
# quarantined only up to a bound (so that RSS can level off)
SANITIZER_ENV = {"ASAN_OPTIONS": "detect_leaks=1:quarantine_size_mb=16:abort_on_error=0",
                 "UBSAN_OPTIONS": "print_stacktrace=1"}


def start_server(board: str, out_dir: Path, sanitize: bool = False):
    """(server, module, device or None): the soak model built for `board`
    (sanitize: with ASan + UBSan, host only), its server started."""
    mod = soak_model()
    art = rxe.build(mod, board=board, out_dir=out_dir, name="soak", sanitize=sanitize)
    if art.board == "host":
        return LocalServer(art.server, SANITIZER_ENV if sanitize else None), mod, None
    device = rxe.connect(board)
    if not hasattr(device, "client"):
        raise SystemExit(f"board {board}: the soak drives host or SSH boards")
    return SshServer(device, device.stage(art.server)), mod, device


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=100000, help="requests to send (default 100000)")
    parser.add_argument("--seconds", type=float, default=None, help="stop after this many seconds")
    parser.add_argument("--board", default="host", help="host, or an SSH board file")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--sample-every", type=float, default=None, help="seconds between RSS/fd samples")
    parser.add_argument("--sanitize", action="store_true", help="a server built with ASan + UBSan (host)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="soak-rpc-") as tmp:
        server, mod, device = start_server(args.board, Path(tmp) / "soak", args.sanitize)
        every = args.sample_every or (0.25 if device is None else 0.5)
        print(f"server pid {server.pid} on {args.board}", flush=True)
        try:
            report = soak(server, mod, args.requests, args.seconds, args.seed, every,
                          log=lambda m: print(m, flush=True))
        finally:
            if device is not None:
                device.close()
    print(report.summary())
    if not report.server_gone and getattr(server, "stderr", ""):
        print(server.stderr[-3000:])
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
