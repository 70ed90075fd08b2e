"""A farm job that kills its own worker process (imported by Ray and pool workers by name)."""

import os
import signal
from pathlib import Path


def die_once(job: dict, built: dict) -> dict:
    """SIGKILL this worker the first time (or every time with job["always"]); then an ok result."""
    marker = Path(job["marker"])
    if job["always"] or not marker.exists():
        marker.touch()
        os.kill(os.getpid(), signal.SIGKILL)
    return {"status": "ok", "pid": os.getpid()}
