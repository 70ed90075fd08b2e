"""Build a module into an artifact: generated C plus the runtime, compiled
with the board's toolchain.

    art = rxe.build(mod, board="host", backend="c", out_dir="build/mlp")

The output directory keeps everything a user needs to embed the model:
PREFIX.c / PREFIX.h / PREFIX_weights.{S,bin}, a shared library (loaded by
`rxe.connect(...).load(art)`), a static library with the runtime inside,
and `artifact.json` describing the signature. Files are written atomically.
A build directory is reused: an unchanged model is not recompiled (the
build is keyed by a hash of the sources and flags).

Boards other than `host` arrive with cross-compilation support.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from .errors import RelaxEdgeError
from .ir.expr import Call, IRModule

RUNTIME_DIR = Path(__file__).resolve().parent.parent / "runtime_c"
RUNTIME_SOURCES = ("status.c", "check.c", "module.c", "math.c")  # runtime_c/src, the core


class BuildError(RelaxEdgeError):
    """Compiling or linking the generated code failed."""


@dataclasses.dataclass
class Artifact:
    out_dir: Path
    prefix: str
    board: str
    backend: str
    shared_library: Path
    static_library: Path
    header: Path
    signature: dict
    build_seconds: float = 0.0
    cached: bool = False
    source: dict | None = None   # how the module was imported, for `relax-edge run --check`
    workspace_bytes: int | None = None   # the fixed arena when every size is bounded
    memory_plan: str = ""                # the plan dump (relax-edge compile --show-memory)

    def to_json(self) -> dict:
        d = dataclasses.asdict(self)
        for k in ("out_dir", "shared_library", "static_library", "header"):
            d[k] = str(Path(d[k]).relative_to(self.out_dir)) if k != "out_dir" else "."
        return d

    @classmethod
    def load(cls, out_dir) -> "Artifact":
        """The artifact built earlier into `out_dir`."""
        out_dir = Path(out_dir)
        meta = out_dir / "artifact.json"
        if not meta.exists():
            raise BuildError(f"{out_dir}: no artifact.json (is this a relax-edge build directory?)")
        d = json.loads(meta.read_text())
        d["out_dir"] = out_dir
        for k in ("shared_library", "static_library", "header"):
            d[k] = out_dir / d[k]
        d["cached"] = True
        return cls(**d)


def _progress(msg: str, quiet: bool) -> None:
    if not quiet:
        print(f"[relax-edge] {msg}", file=sys.stderr, flush=True)


def write_atomic(path: Path, data) -> None:
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    with os.fdopen(fd, "wb" if isinstance(data, bytes) else "w") as f:
        f.write(data)
    os.replace(tmp, path)


def _needs_legalize(mod: IRModule) -> bool:
    from .ir.visitor import ExprVisitor

    class Finder(ExprVisitor):
        found = False

        def visit_Call(self, call: Call):
            if not type(call.op).__name__ == "GlobalVar":
                self.found = True
            super().visit_Call(call)

    finder = Finder()
    for f in mod.functions.values():
        finder.visit(f)
    return finder.found


def host_compiler() -> str:
    for cc in (os.environ.get("CC"), "cc", "gcc", "clang"):
        if cc and shutil.which(cc):
            return cc
    raise BuildError("no C compiler found for the host board (install gcc: apt-get install build-essential)")


def _run(cmd, what: str) -> None:
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-25:]
        raise BuildError(f"{what} failed ({' '.join(str(c) for c in cmd[:3])} ...):\n" + "\n".join(tail))


def cache_root() -> Path:
    return Path(os.environ.get("RXE_CACHE_DIR", Path.home() / ".cache" / "relax_edge"))


def runtime_objects_for(cc: str, cflags: list) -> list:
    """The runtime's object files for this compiler and flags, compiled once
    into the cache (keyed by a hash of the sources and flags)."""
    digest = hashlib.sha256(" ".join([cc] + cflags).encode())
    for path in sorted((RUNTIME_DIR / "src").glob("*.c")) + sorted((RUNTIME_DIR / "include").rglob("*.h")):
        digest.update(path.read_bytes())
    where = cache_root() / "runtime" / digest.hexdigest()[:16]
    objects = [where / f"rxe_{Path(s).stem}.o" for s in RUNTIME_SOURCES]
    if all(o.exists() for o in objects):
        return objects
    where.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=where, prefix=".tmp-") as tmp:
        for src, obj in zip(RUNTIME_SOURCES, objects):
            staged = Path(tmp) / obj.name
            _run([cc, *cflags, "-c", str(RUNTIME_DIR / "src" / src), "-o", str(staged)], f"compiling runtime {src}")
        for obj in objects:
            os.replace(Path(tmp) / obj.name, obj)
    return objects


def build(mod: IRModule, board: str = "host", backend: str = "c", out_dir=None, name: str = "model",
          opt_level: str = "-O2", quiet: bool = True, source: dict | None = None) -> Artifact:
    """Compile `mod` for `board` into `out_dir` and return the Artifact."""
    from .codegen.c.module import generate_c
    from .transform.legalize import legalize

    if board != "host":
        raise BuildError(f"board {board!r} is not available yet: this version builds for the host board only")
    if backend != "c":
        raise BuildError(f"backend {backend!r} is not available yet: this version has the C backend only")
    start = time.perf_counter()
    out_dir = Path(out_dir) if out_dir is not None else Path(tempfile.mkdtemp(prefix="relax-edge-"))
    out_dir.mkdir(parents=True, exist_ok=True)
    if _needs_legalize(mod):
        _progress("legalizing operators into tensor programs", quiet)
        mod = legalize(mod)
    _progress("generating C", quiet)
    sources = generate_c(mod, name)
    prefix = sources.prefix
    cc = host_compiler()
    cflags = ["-std=c99", opt_level, "-fPIC", "-Wall", "-Wextra", f"-I{RUNTIME_DIR / 'include'}"]
    digest = hashlib.sha256()
    for fname in sorted(sources.files):
        digest.update(sources.files[fname].encode())
    digest.update(sources.weights)
    digest.update(" ".join([cc] + cflags).encode())
    for path in sorted((RUNTIME_DIR / "src").glob("*.c")) + sorted((RUNTIME_DIR / "include").rglob("*.h")):
        digest.update(path.read_bytes())
    key = digest.hexdigest()[:16]

    shared = out_dir / f"lib{prefix}.so"
    static = out_dir / f"lib{prefix}.a"
    from .memory import dump_plan
    artifact = Artifact(out_dir, prefix, board, backend, shared, static, out_dir / f"{prefix}.h",
                        sources.signature, source=source,
                        workspace_bytes=sources.signature["main"]["fixed_workspace_bytes"],
                        memory_plan=dump_plan(sources.plans["main"]))
    stamp = out_dir / ".build-key"
    if stamp.exists() and stamp.read_text() == key and shared.exists() and static.exists():
        artifact.cached = True
        artifact.build_seconds = time.perf_counter() - start
        write_atomic(out_dir / "artifact.json", json.dumps(artifact.to_json(), indent=1))
        _progress(f"{out_dir}: up to date", quiet)
        return artifact

    for fname, text in sources.files.items():
        write_atomic(out_dir / fname, text)
    write_atomic(out_dir / f"{prefix}_weights.bin", sources.weights)
    runtime_objects = runtime_objects_for(cc, cflags)
    _progress(f"compiling {prefix} with {cc} ({len(sources.weights) / 1e6:.1f} MB of constants)", quiet)
    with tempfile.TemporaryDirectory(dir=out_dir, prefix=".obj-") as objdir:
        objects = []
        for src in (out_dir / f"{prefix}.c", out_dir / f"{prefix}_weights.S"):
            obj = Path(objdir) / f"{src.stem}{src.suffix.replace('.', '_')}.o"
            extra = [f"-Wa,-I{out_dir}"] if src.suffix == ".S" else []
            _run([cc, *cflags, *extra, "-c", str(src), "-o", str(obj)], f"compiling {src.name}")
            objects.append(str(obj))
        objects += [str(o) for o in runtime_objects]
        tmp_shared = Path(objdir) / shared.name
        _run([cc, "-shared", "-o", str(tmp_shared), *objects, "-lm"], "linking the shared library")
        tmp_static = Path(objdir) / static.name
        _run(["ar", "rcs", str(tmp_static), *objects], "archiving the static library")
        os.replace(tmp_shared, shared)
        os.replace(tmp_static, static)
    artifact.build_seconds = time.perf_counter() - start
    write_atomic(out_dir / "artifact.json", json.dumps(artifact.to_json(), indent=1))
    write_atomic(stamp, key)
    _progress(f"built {shared} in {artifact.build_seconds:.1f}s", quiet)
    return artifact


def build_runner(artifact: Artifact, out_path, cc: str | None = None, extra_cflags=(), extra_ldflags=()) -> Path:
    """A standalone executable that runs the artifact's model on tensor files
    (runtime_c/tools/runner.c); extra flags e.g. for sanitizers."""
    cc = cc or host_compiler()
    out_path = Path(out_path)
    d = artifact.out_dir
    sources = [d / f"{artifact.prefix}.c", d / f"{artifact.prefix}_weights.S", RUNTIME_DIR / "tools" / "runner.c"]
    sources += [RUNTIME_DIR / "src" / s for s in RUNTIME_SOURCES]
    cmd = [cc, "-std=c99", "-O1", "-g", f"-I{RUNTIME_DIR / 'include'}", f"-Wa,-I{d}",
           f"-DRXE_MODULE={artifact.prefix}_module", *extra_cflags, *map(str, sources), "-o", str(out_path),
           *extra_ldflags, "-lm"]
    _run(cmd, "building the runner")
    return out_path
