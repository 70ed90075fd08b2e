"""One on-disk cache for models exported by the tests.

``cached_export(stem, source, export)`` returns the path of ``stem-KEY.onnx``
in the cache folder of tests/onnx_models.py, calling ``export(path)`` the
first time. KEY changes with the file ``source`` (the module that defines the
model) and with the exporting packages' versions. A file lock serializes
concurrent test processes, the file appears only once complete (written to a
temporary name, then renamed), and exports under older keys are removed.
"""

import fcntl
import hashlib
import os
from pathlib import Path

from tests.onnx_models import cache_dir, cache_key


def cached_export(stem: str, source, export) -> Path:
    h = hashlib.sha256(Path(source).read_bytes())
    h.update(cache_key().encode())
    directory = cache_dir()
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{stem}-{h.hexdigest()[:16]}.onnx"
    if path.exists():
        return path
    with open(directory / f"{stem}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not path.exists():
            tmp = path.with_name(f".{path.stem}.{os.getpid()}.onnx")
            try:
                export(tmp)
                os.replace(tmp, path)
            finally:
                tmp.unlink(missing_ok=True)
            for old in directory.glob(f"{stem}-*.onnx"):
                if old != path:
                    old.unlink(missing_ok=True)
    return path
