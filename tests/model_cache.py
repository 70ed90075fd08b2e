"""One on-disk cache for the models the tests export (tests/onnx_models.py,
zoo_models.py, rnn_models.py).

``export_once(stem, key, export)`` returns the path of ``stem-KEY.onnx`` in
``cache_dir()``, calling ``export(path)`` the first time. A file lock
serializes concurrent test processes (pytest-xdist workers export a model
once), the file appears only once complete (written to a temporary name,
then renamed), and exports of ``stem`` under other keys are removed.
``cached_export(stem, source, export)`` keys the export by the file
``source`` (the module that defines the model), tests/onnx_models.py (the
builders it rests on) and the exporting packages' versions.
"""

import contextlib
import fcntl
import hashlib
import importlib.metadata
import os
import shutil
from pathlib import Path

_VERSIONED_PACKAGES = ("torch", "torchvision", "transformers", "onnx")
_BUILDERS = Path(__file__).with_name("onnx_models.py")


def cache_dir() -> Path:
    """$RXE_MODEL_CACHE, or ~/.cache/relax_edge/onnx_models."""
    default = Path.home() / ".cache" / "relax_edge" / "onnx_models"
    return Path(os.environ.get("RXE_MODEL_CACHE") or default)


def source_key(*sources) -> str:
    """16 hex digits that change with the files ``sources`` and the exporting packages' versions."""
    h = hashlib.sha256()
    for source in sources:
        h.update(Path(source).read_bytes())
    for pkg in _VERSIONED_PACKAGES:
        try:
            h.update(f"{pkg}=={importlib.metadata.version(pkg)}".encode())
        except importlib.metadata.PackageNotFoundError:
            h.update(f"{pkg} missing".encode())
    return h.hexdigest()[:16]


def export_once(stem: str, key: str, export) -> Path:
    """The path of ``stem-KEY.onnx``, ``export(path)`` called under the lock where it is missing."""
    directory = cache_dir()
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{stem}-{key}.onnx"
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


def cached_export(stem: str, source, export) -> Path:
    """export_once keyed by ``source``, tests/onnx_models.py and the packages' versions."""
    return export_once(stem, source_key(source, _BUILDERS), export)


@contextlib.contextmanager
def private_copy(path: Path, beside: Path):
    """A copy of the cached model `path` next to `beside` (an export's own file), removed after: onnxruntime's
    quantize_static writes a NAME-inferred.onnx beside its input and removes it, so two workers quantizing
    one cached model at once must not give it the same input."""
    copy = Path(beside).with_name(Path(beside).stem + "-input.onnx")
    shutil.copyfile(path, copy)
    try:
        yield copy
    finally:
        copy.unlink(missing_ok=True)
