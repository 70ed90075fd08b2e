"""Deploying and running artifacts: `connect(board)` gives the `Device` of a
board name or a board YAML path (default: qemu-aarch64), whose `load` gives a
`LoadedModel` (relax_edge/deploy/session.py, the interface of every transport)."""

from __future__ import annotations

from ..errors import RelaxEdgeError
from ..target import DEFAULT_BOARD, load_board
from .adb import AdbDevice
from .emulator import QemuDevice
from .generate import GenerateResult
from .host import HostDevice, LoadedModule
from .remote import RunnerModule
from .rpc import RpcModule
from .session import Device, DeviceError, LoadedModel, RuntimeCheckError
from .ssh import SshDevice

__all__ = ["connect", "Device", "LoadedModel", "HostDevice", "LoadedModule", "QemuDevice", "RunnerModule",
           "RpcModule", "SshDevice", "AdbDevice", "RuntimeCheckError", "DeviceError", "GenerateResult"]

_SESSIONS = {"qemu": QemuDevice, "ssh": SshDevice, "adb": AdbDevice}


def connect(board=DEFAULT_BOARD) -> Device:
    """A session on `board` (use as a context manager)."""
    b = load_board(board)
    if b.transport == "local":
        return HostDevice()
    if b.transport in _SESSIONS:
        return _SESSIONS[b.transport](b)
    raise RelaxEdgeError(f"board {b.name}: the {b.transport} transport is not available yet; "
                         "use an ssh, qemu or host board")
