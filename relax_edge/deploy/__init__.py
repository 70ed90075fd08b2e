"""Deploying and running artifacts: `connect(board)` gives a device session."""

from __future__ import annotations

from ..errors import RelaxEdgeError
from .host import HostDevice, LoadedModule, RuntimeCheckError

__all__ = ["connect", "HostDevice", "LoadedModule", "RuntimeCheckError"]


def connect(board: str = "host"):
    """A session on `board` (use as a context manager)."""
    if board == "host":
        return HostDevice()
    raise RelaxEdgeError(f"board {board!r} is not available yet: this version runs on the host board only")
