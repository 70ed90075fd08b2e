"""A farm job that kills its own worker process (imported by Ray and pool workers by name)."""

import os
import signal
import time
from pathlib import Path

BYSTANDER_WAIT_S = 120   # a ceiling: the job it waits for dies within seconds


def die_once(job: dict, built: dict) -> dict:
    """SIGKILL this worker the first time (or every time with job["always"]); then an ok result. A job with
    "wait_for" is a bystander: it stays in flight until that file exists (the killer has died once), then
    returns ok without dying; one with "raises" raises ValueError with that text."""
    if job.get("raises"):
        raise ValueError(job["raises"])
    if job.get("wait_for"):
        deadline = time.monotonic() + BYSTANDER_WAIT_S
        while not Path(job["wait_for"]).exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        return {"status": "ok", "pid": os.getpid()}
    marker = Path(job["marker"])
    if job["always"] or not marker.exists():
        marker.touch()
        os.kill(os.getpid(), signal.SIGKILL)
    return {"status": "ok", "pid": os.getpid()}
