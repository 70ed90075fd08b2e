"""Running artifacts under QEMU: the model's runner executable on tensor
files in a work directory.

    with rxe.connect("qemu-aarch64") as dev:
        m = dev.load(art)
        outs = m.run(x)

Linux boards run under qemu-user (`qemu-aarch64 -L <sysroot> runner in out`);
microcontroller boards under qemu-system-arm with semihosting (the runner
reads and writes the host's files). Every run has a timeout; a model error
comes back as RuntimeCheckError with the runtime's status and message, a
crash or a timeout as DeviceError with the tail of what the device printed.
"""

from __future__ import annotations

import re
import shutil
import signal
import subprocess
import tempfile
from pathlib import Path

from ..errors import RelaxEdgeError
from ..target import Board, require_toolchain
from . import tensorfile
from .host import RuntimeCheckError, prepare_inputs
from .rpc import DeviceError, ProcessStream, RpcModule

_ERROR = re.compile(r"RXE_ERROR (RXE_\w+): (.*)")


def _tail(text: str, lines: int = 12) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])


class RunnerModule:
    """A model loaded on a device that runs its runner executable on tensor
    files. The device provides: stage(local path) -> program, write(name,
    bytes), read(name) -> bytes | None, execute(program, args) -> completed
    process, and `board`."""

    def __init__(self, device: "QemuDevice", artifact, function: str = "main"):
        self.device = device
        self.artifact = artifact
        self.function = function
        self.signature = artifact.signature[function]
        self.runner = device.stage(artifact.runner)

    def _call(self, args: list) -> subprocess.CompletedProcess:
        return self.device.execute(self.runner, ["-f", self.function, *args] if self.function != "main" else args)

    def run(self, *inputs) -> list:
        self.device.write("in.rxt", tensorfile.encode(prepare_inputs(self.signature, inputs)))
        self.device.remove("out.rxt")
        self._check(self._call(["in.rxt", "out.rxt"]))
        data = self.device.read("out.rxt")
        if data is None:
            raise DeviceError(f"{self.device.board.name}: the runner wrote no outputs")
        return tensorfile.decode(data)

    def workspace_bytes(self, **sizes) -> int:
        names = self.signature.get("sizes", [])
        if sorted(sizes) != sorted(names):
            raise RelaxEdgeError(f"workspace_bytes takes the sizes {', '.join(names) or '(none)'}")
        proc = self._call(["-w", *[str(int(sizes[n])) for n in names]])
        self._check(proc)
        match = re.search(r"RXE_WORKSPACE (\d+)", proc.stdout + proc.stderr)
        if not match:
            raise DeviceError(f"{self.device.board.name}: no workspace size in the runner's answer")
        return int(match.group(1))

    def _check(self, proc: subprocess.CompletedProcess) -> None:
        text = proc.stdout + proc.stderr
        if proc.returncode == 0:
            return
        match = _ERROR.search(text)
        if proc.returncode == 3 and match:
            status = next((k for k, v in _status_names().items() if v == match.group(1)), 10)
            raise RuntimeCheckError(status, match.group(2).strip())
        if proc.returncode < 0 or proc.returncode > 128:
            signum = -proc.returncode if proc.returncode < 0 else proc.returncode - 128
            try:
                name = signal.Signals(signum).name
            except ValueError:
                name = f"signal {signum}"
            raise DeviceError(f"{self.device.board.name}: the model crashed with {name}:\n{_tail(text)}")
        raise DeviceError(f"{self.device.board.name}: the runner failed (exit {proc.returncode}):\n{_tail(text)}")


def _status_names():
    from ..codegen.abi import STATUS_NAMES
    return STATUS_NAMES


def thread_args(threads) -> list:
    """The RPC server's command-line option for a thread count (1..MAX_THREADS,
    the runtime's RXE_MAX_THREADS)."""
    from ..codegen.abi import MAX_THREADS
    if threads is None:
        return []
    if not isinstance(threads, int) or isinstance(threads, bool) or not 1 <= threads <= MAX_THREADS:
        raise RelaxEdgeError(f"threads must be an integer in [1, {MAX_THREADS}], got {threads!r}")
    return ["--threads", str(threads)]


class DeviceSession:
    """What every device session shares: it closes the servers it started,
    and it loads an artifact over RPC when the artifact has a server and the
    session can start one (`spawn`), else through the runner on tensor files.
    Subclasses provide `board`, `stage`, `spawn` and the runner's file calls."""

    board: Board
    rpc = True

    def track(self, module):
        self.__dict__.setdefault("_modules", []).append(module)
        return module

    def close_modules(self) -> None:
        for module in self.__dict__.pop("_modules", []):
            module.close()

    def load(self, artifact, function: str = "main", threads: int | None = None):
        """The artifact's function on this board; `threads` sets the size of
        the runtime's thread pool (default: the server's, 1)."""
        if artifact.board != self.board.name:
            raise RelaxEdgeError(f"artifact built for board {artifact.board}, not {self.board.name}")
        args = thread_args(threads)
        if self.rpc and artifact.server is not None and Path(artifact.server).exists():
            server = self.stage(artifact.server)
            return self.track(RpcModule(lambda: self.spawn(server, args), artifact, self.board.timeout_s, function))
        if artifact.runner is None or not Path(artifact.runner).exists():
            raise RelaxEdgeError(f"{artifact.out_dir}: the artifact has no runner executable; rebuild it")
        return RunnerModule(self, artifact, function)


class QemuDevice(DeviceSession):
    """A board emulated by QEMU on this machine: RPC under qemu-user, the
    runner over semihosting files under qemu-system."""

    def __init__(self, board: Board):
        require_toolchain(board)
        self.board = board
        self.rpc = not board.qemu.get("system")
        self._tmp = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    @property
    def workdir(self) -> Path:
        if self._tmp is None:
            self._tmp = tempfile.TemporaryDirectory(prefix=f"relax-edge-{self.board.name}-")
        return Path(self._tmp.name)

    def close(self) -> None:
        self.close_modules()
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

    def stage(self, path: Path) -> Path:
        """Copy a file into the work directory (the emulator's view)."""
        target = self.workdir / Path(path).name
        shutil.copy2(path, target)
        return target

    def write(self, name: str, data: bytes) -> None:
        (self.workdir / name).write_bytes(data)

    def read(self, name: str) -> bytes | None:
        path = self.workdir / name
        return path.read_bytes() if path.exists() else None

    def remove(self, name: str) -> None:
        (self.workdir / name).unlink(missing_ok=True)

    def command(self, program: Path, args: list) -> list:
        cmd = list(self.board.qemu["command"])
        if self.board.qemu.get("system"):
            semihosting = ",".join(["enable=on", "target=native", f"arg={program.name}", *[f"arg={a}" for a in args]])
            return cmd + ["-semihosting-config", semihosting, "-kernel", str(program)]
        return cmd + [str(program), *args]

    def execute(self, program: Path, args: list) -> subprocess.CompletedProcess:
        cmd = self.command(program, args)
        try:
            return subprocess.run(cmd, cwd=self.workdir, capture_output=True, text=True,
                                  timeout=self.board.timeout_s)
        except subprocess.TimeoutExpired as err:
            out = (err.stdout or b"").decode(errors="replace") if isinstance(err.stdout, bytes) else (err.stdout or "")
            raise DeviceError(f"{self.board.name}: no answer within {self.board.timeout_s:.0f}s; the emulator "
                              f"was stopped (raise timeout_s in {self.board.path} for slow models)\n{_tail(out)}") \
                from None

    def spawn(self, program: Path, args=()) -> ProcessStream:
        """Start the RPC server under the emulator; frames on its stdin/stdout."""
        return ProcessStream(self.command(program, list(args)), cwd=self.workdir, what=self.board.name,
                             hint=f" (after {self.board.timeout_s:g}s; raise timeout_s in {self.board.path} "
                                  "for slow models)")
