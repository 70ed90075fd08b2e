"""Running artifacts under QEMU on this machine, in a work directory: the
model's RPC server under qemu-user, its runner on tensor files under
qemu-system.

    with rxe.connect("qemu-aarch64") as dev:
        m = dev.load(art)
        outs = m.run(x)

Linux boards run under qemu-user (`qemu-aarch64 -L <sysroot> server`);
microcontroller boards under qemu-system-arm with semihosting (the runner
reads and writes the host's files). A board whose `qemu` names
`icount_shift: N` is timed under `-icount shift=N`: the virtual clock then
advances 2^N ns per instruction, so the runner's timed and profiled runs
(`runner -t`, `-p`, read through the core's SysTick) count instructions,
which is what they report (`timed_unit`). Every run has a timeout; a
model error comes back as RuntimeCheckError with the runtime's status and
message, a crash or a timeout as DeviceError with the tail of what the
device printed.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

from ..target import Board, require_toolchain
from .remote import DeviceSession
from .rpc import ProcessStream
from .session import DeviceError, tail


class QemuDevice(DeviceSession):
    """A board emulated by QEMU on this machine: RPC under qemu-user, the
    runner over semihosting files under qemu-system."""

    def __init__(self, board: Board):
        require_toolchain(board)
        self.board = board
        self.rpc = not board.qemu.get("system")
        self._tmp = None

    @property
    def workdir(self) -> Path:
        if self._tmp is None:
            self._tmp = tempfile.TemporaryDirectory(prefix=f"relax-edge-{self.board.name}-")
        return Path(self._tmp.name)

    def close(self) -> None:
        try:
            self.close_models()
        finally:
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

    @property
    def timed_unit(self) -> str:
        """What the runner's timed runs measure on this board: "instructions" under -icount, else "ns"."""
        return "instructions" if self.board.qemu.get("icount_shift") is not None else "ns"

    @property
    def timed_per_ns(self) -> float:
        """Units of `timed_unit` per nanosecond of the emulator's clock: 2^-shift instructions under -icount."""
        shift = self.board.qemu.get("icount_shift")
        return 1.0 if shift is None else 2.0 ** -shift

    def command(self, program: Path, args: list, icount: bool = False) -> list:
        cmd = list(self.board.qemu["command"])
        shift = self.board.qemu.get("icount_shift")
        if icount and shift is not None:
            cmd += ["-icount", f"shift={shift}"]
        if self.board.qemu.get("system"):
            semihosting = ",".join(["enable=on", "target=native", f"arg={program.name}", *[f"arg={a}" for a in args]])
            return cmd + ["-semihosting-config", semihosting, "-kernel", str(program)]
        return cmd + [str(program), *args]

    def execute(self, program: Path, args: list, icount: bool = False) -> subprocess.CompletedProcess:
        cmd = self.command(program, args, icount)
        try:
            return subprocess.run(cmd, cwd=self.workdir, capture_output=True, text=True,
                                  timeout=self.board.timeout_s)
        except subprocess.TimeoutExpired as err:
            out = (err.stdout or b"").decode(errors="replace") if isinstance(err.stdout, bytes) else (err.stdout or "")
            raise DeviceError(f"{self.board.name}: no answer within {self.board.timeout_s:.0f}s; the emulator "
                              f"was stopped (raise timeout_s in {self.board.path} for slow models)\n{tail(out)}") \
                from None

    def spawn(self, program: Path, args=()) -> ProcessStream:
        """Start the RPC server under the emulator; frames on its stdin/stdout."""
        return ProcessStream(self.command(program, list(args)), cwd=self.workdir, what=self.board.name,
                             hint=f" (after {self.board.timeout_s:g}s; raise timeout_s in {self.board.path} "
                                  "for slow models)")
