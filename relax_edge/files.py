"""Writing files atomically: the build's outputs and the CLI's results."""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path


def write_atomic(path: Path, data, durable: bool = False) -> None:
    """Write `data` (str or bytes) to a temporary file beside `path`, then
    rename it over `path`: a failure (a full disk) leaves `path` as it was
    and no temporary file. `durable` syncs the file to disk before the
    rename, so a full disk is reported here. A device or a pipe
    (/dev/stdout) is written directly."""
    path = Path(path)
    mode = "wb" if isinstance(data, bytes) else "w"
    if path.exists() and not path.is_file() and not path.is_dir():
        with open(path, mode) as f:
            f.write(data)
        return
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".part")
    try:
        with os.fdopen(fd, mode) as f:
            f.write(data)
            if durable:
                f.flush()
                os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
