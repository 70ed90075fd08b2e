"""Deploying and running artifacts: `connect(board)` gives a device session
for a board name or a board YAML path (default: qemu-aarch64)."""

from __future__ import annotations

from ..errors import RelaxEdgeError
from ..target import DEFAULT_BOARD, load_board
from .emulator import DeviceError, QemuDevice, RunnerModule
from .host import HostDevice, LoadedModule, RuntimeCheckError

__all__ = ["connect", "HostDevice", "LoadedModule", "QemuDevice", "RunnerModule", "RuntimeCheckError",
           "DeviceError"]


def connect(board=DEFAULT_BOARD):
    """A session on `board` (use as a context manager)."""
    b = load_board(board)
    if b.transport == "local":
        return HostDevice()
    if b.transport == "qemu":
        return QemuDevice(b)
    if b.transport == "ssh":
        from .ssh import SshDevice
        return SshDevice(b)
    if b.transport == "adb":
        from .adb import AdbDevice
        return AdbDevice(b)
    raise RelaxEdgeError(f"board {b.name}: the {b.transport} transport is not available yet; "
                         "use an ssh, qemu or host board")
