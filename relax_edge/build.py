"""Build a module into an artifact: generated C plus the runtime, compiled
with the board's toolchain.

    art = rxe.build(mod, board="qemu-aarch64", backend="c", out_dir="build/mlp")

With backend="llvm" there is no generated C for the model: LLVM (codegen/llvm)
compiles the kernels into PREFIX_kernels.o and the host functions with the
module's entry table into PREFIX_host.o (PREFIX_host_profiled.o with the
per-kernel profiler, for the RPC server), and PREFIX_KIND.ll (the optimized
IR) with emit_llvm=True; the board's toolchain assembles the weights and
links everything into the same files.

The output directory keeps everything a user needs to embed the model:
PREFIX.c (C backend) / PREFIX.h / PREFIX_weights.{S,bin}, a static library with the
runtime inside (libPREFIX.a), a shared library on Linux targets
(libPREFIX.so; the host loads it in process), the runner executable that runs
the model on tensor files (PREFIX_runner, what emulators and boards run),
and `artifact.json`. Files are written atomically. An unchanged model is not
recompiled: the build is keyed by a hash of the sources, the board and the
flags. Object sizes (.text, .data, .bss) of the model and the runtime are
recorded on the artifact.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from .errors import RelaxEdgeError
from .ir.expr import Call, IRModule
from .resources import runtime_dir
from .target import DEFAULT_BOARD, Board, load_board, require_toolchain

RUNTIME_DIR = runtime_dir()   # the checkout's runtime_c/, or the wheel's copy


def read_source_lists(path: Path) -> dict:
    """The set(NAME path...) blocks of runtime_c/sources.cmake, the list
    CMakeLists.txt also builds from: {NAME: (runtime_c/path, ...)}."""
    text = "\n".join(line.split("#", 1)[0] for line in path.read_text().splitlines())
    lists = {name: tuple(path.parent / f for f in files.split())
             for name, files in re.findall(r"set\(\s*(RXE_\w+)\s+([^)]*)\)", text)}
    missing = {"RXE_CORE_SOURCES", "RXE_THREAD_SOURCES", "RXE_KERNEL_SOURCES", "RXE_RPC_SOURCES"} - set(lists)
    if missing:
        raise RelaxEdgeError(f"{path} sets no {', '.join(sorted(missing))}")
    return lists


SOURCE_LISTS = read_source_lists(RUNTIME_DIR / "sources.cmake")
RUNTIME_SOURCES = SOURCE_LISTS["RXE_CORE_SOURCES"]      # the core
THREAD_SOURCES = SOURCE_LISTS["RXE_THREAD_SOURCES"]     # the thread pool (serial under RXE_NO_THREADS)
KERNEL_SOURCES = SOURCE_LISTS["RXE_KERNEL_SOURCES"]     # the library micro-kernels
RPC_SOURCES = SOURCE_LISTS["RXE_RPC_SOURCES"]
RUNNER_SOURCE = RUNTIME_DIR / "tools" / "runner.c"


class BuildError(RelaxEdgeError):
    """Compiling or linking the generated code failed."""


@dataclasses.dataclass
class Artifact:
    out_dir: Path
    prefix: str
    board: str
    backend: str
    shared_library: Path | None
    static_library: Path
    header: Path
    signature: dict
    build_seconds: float = 0.0
    cached: bool = False
    source: dict | None = None           # how the module was imported, for `relax-edge run --check`
    workspace_bytes: int | None = None   # the fixed arena when every size is bounded
    memory_plan: str = ""                # the plan dump (relax-edge compile --show-memory)
    runner: Path | None = None           # the executable that runs the model on tensor files
    server: Path | None = None           # the RPC server (Linux boards; profiled build)
    sizes: dict | None = None            # {"model": {"text":..}, "runtime": {...}} in bytes
    board_file: str = ""
    sanitize: bool = False               # built with ASan + UBSan (no shared library then)

    _PATHS = ("shared_library", "static_library", "header", "runner", "server")

    def to_json(self) -> dict:
        d = dataclasses.asdict(self)
        d["out_dir"] = "."
        for k in self._PATHS:
            d[k] = None if d[k] is None else str(Path(d[k]).relative_to(self.out_dir))
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
        for k in cls._PATHS:
            d[k] = None if d.get(k) is None else out_dir / d[k]
        d["cached"] = True
        return cls(**d)


def _progress(msg: str, quiet: bool) -> None:
    if not quiet:
        print(f"[relax-edge] {msg}", file=sys.stderr, flush=True)


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
    proc = subprocess.run([str(c) for c in cmd], capture_output=True, text=True)
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-25:]
        raise BuildError(f"{what} failed ({' '.join(str(c) for c in cmd[:3])} ...):\n" + "\n".join(tail))


def _archiver(cc: str) -> str:
    """The `ar` of the compiler's binutils (aarch64-linux-gnu-gcc -> aarch64-linux-gnu-ar)."""
    if cc.endswith("gcc") and shutil.which(cc[:-3] + "ar"):
        return cc[:-3] + "ar"
    return "ar"


def cache_root() -> Path:
    return Path(os.environ.get("RXE_CACHE_DIR", Path.home() / ".cache" / "relax_edge"))


@dataclasses.dataclass(frozen=True)
class Toolchain:
    """How to compile for one board."""
    cc: str
    cflags: tuple        # for the model and the runtime
    ldflags: tuple
    size_tool: str
    shared: bool         # can build a shared library
    local: bool          # runs in this process (host)

    @classmethod
    def for_board(cls, board: Board, opt_level: str | None = None) -> "Toolchain":
        t = board.target
        local = board.transport == "local"
        cc = host_compiler() if t.compiler == "cc" and local else t.compiler
        flags = [f for f in t.cflags if not (opt_level and f.startswith("-O"))]
        if opt_level:
            flags.insert(0, opt_level)
        # -fno-math-errno: sqrt and friends inline as instructions (nothing reads errno)
        base = ["-std=c99", "-Wall", "-Wextra", "-fno-math-errno", f"-I{RUNTIME_DIR / 'include'}"]
        if t.freestanding:
            base += ["-DRXE_NO_LIBM", "-DRXE_NO_THREADS", "-ffunction-sections", "-fdata-sections"]
        else:
            base.append("-fPIC")
        size_tool = t.size_tool if shutil.which(t.size_tool) else "size"
        return cls(cc, tuple(base + flags), tuple(t.ldflags), size_tool, not t.freestanding, local)


def cached_objects(cc: str, cflags, sources) -> list:
    """Object files of runtime sources (model-independent, or depending only
    on flags such as -DRXE_MODULE) compiled once into the cache, keyed by a
    hash of the compiler, the flags and every runtime source and header."""
    cflags = list(cflags)
    digest = hashlib.sha256(" ".join([cc] + cflags).encode())
    for path in [*sorted(RUNTIME_DIR.rglob("*.c")), *sorted((RUNTIME_DIR / "include").rglob("*.h"))]:
        digest.update(path.read_bytes())
    where = cache_root() / "runtime" / digest.hexdigest()[:16]
    objects = [where / f"rxe_{Path(s).stem}.o" for s in sources]
    if all(o.exists() for o in objects):
        return objects
    where.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=where, prefix=".tmp-") as tmp:
        for src, obj in zip(sources, objects):
            _run([cc, *cflags, "-c", str(src), "-o", str(Path(tmp) / obj.name)], f"compiling {Path(src).name}")
        for obj in objects:
            os.replace(Path(tmp) / obj.name, obj)
    return objects


def runtime_objects_for(cc: str, cflags) -> list:
    """The runtime core's objects for this compiler and flags (cached)."""
    return cached_objects(cc, cflags, RUNTIME_SOURCES)


def library_sources() -> list:
    """The thread pool and the library micro-kernels (runtime_c/kernels)."""
    return [*THREAD_SOURCES, *KERNEL_SOURCES]


def library_objects_for(cc: str, cflags) -> list:
    """The thread pool's and the library kernels' objects (cached); a static
    link keeps only the kernels a model calls."""
    return cached_objects(cc, cflags, library_sources())


def object_sizes(size_tool: str, objects) -> dict:
    """Summed .text, .data and .bss of object files (Berkeley `size`)."""
    proc = subprocess.run([size_tool, *map(str, objects)], capture_output=True, text=True)
    total = {"text": 0, "data": 0, "bss": 0}
    if proc.returncode != 0:
        return total
    for line in proc.stdout.splitlines()[1:]:
        parts = line.split()
        if len(parts) >= 3 and parts[0].isdigit():
            for key, value in zip(("text", "data", "bss"), parts[:3]):
                total[key] += int(value)
    return total


BACKENDS = ("c", "llvm")
SANITIZE_FLAGS = ("-fsanitize=address,undefined", "-fno-omit-frame-pointer", "-fno-sanitize-recover=all", "-g")
SANITIZE_LDFLAGS = ("-fsanitize=address,undefined",)


def sanitized(tc: Toolchain, board: Board) -> Toolchain:
    """The toolchain with AddressSanitizer and UndefinedBehaviorSanitizer on
    every C object (the model's C, the runtime, the library kernels, the
    runner, the RPC server) and on the link. No shared library: a sanitized
    one cannot be loaded into an uninstrumented process."""
    if board.target.freestanding or "-static" in tc.ldflags:
        raise BuildError(f"sanitize=True needs a Linux board that links dynamically; {board.name} "
                         f"{'has no C library' if board.target.freestanding else 'links with -static'}")
    return dataclasses.replace(tc, cflags=tc.cflags + SANITIZE_FLAGS, ldflags=tc.ldflags + SANITIZE_LDFLAGS,
                               shared=False)


def _check_fixed_arena(signature: dict) -> None:
    """A fixed arena must fit the ABI's 64-bit sizes (and any real memory)."""
    for fn, sig in signature.items():
        arena = sig.get("fixed_workspace_bytes")
        if arena is not None and arena >= 2**63:
            raise BuildError(f"function {fn}: the memory plan needs {arena:.3e} bytes at the size bounds, more "
                             "than 64-bit sizes hold; lower the bounds (--dim NAME=LO..HI)")


def build(mod: IRModule, board=DEFAULT_BOARD, backend: str = "c", out_dir=None, name: str = "model",
          opt_level: str | None = None, quiet: bool = True, source: dict | None = None,
          emit_llvm: bool = False, optimize: bool = True, sanitize: bool = False) -> Artifact:
    """Compile `mod` for `board` (a name or a YAML path) into `out_dir`;
    `backend` "c" or "llvm" (kernels and host functions through LLVM). A
    module with operator calls goes through the optimizing pipeline
    (relax_edge/pipeline.py), or is only legalized with optimize=False.
    sanitize=True builds the runner and the server with ASan + UBSan
    (LLVM-generated kernels stay uninstrumented)."""
    from .codegen.c.module import generate_c
    from .memory import dump_plan
    from .pipeline import optimize as run_pipeline
    from .transform.legalize import legalize

    board = load_board(board)
    require_toolchain(board)
    if backend not in BACKENDS:
        raise BuildError(f"unknown backend {backend!r}; choose one of {', '.join(BACKENDS)}")
    start = time.perf_counter()
    out_dir = Path(out_dir) if out_dir is not None else Path(tempfile.mkdtemp(prefix="relax-edge-"))
    out_dir.mkdir(parents=True, exist_ok=True)
    if _needs_legalize(mod) and optimize:
        _progress(f"optimizing for {board.name}", quiet)
        mod = run_pipeline(mod, board)
    elif _needs_legalize(mod):
        _progress("legalizing operators into tensor programs", quiet)
        mod = legalize(mod)
    tc = Toolchain.for_board(board, opt_level)
    if sanitize:
        tc = sanitized(tc, board)
    digest = hashlib.sha256()
    llvm_modules = {}
    if backend == "llvm":
        from .codegen.llvm import generate_llvm, machine_spec
        _progress("generating LLVM IR", quiet)
        sources = generate_llvm(mod, name, board.target.freestanding, profiled=not board.target.freestanding)
        llvm_modules = sources.modules
        for stem in sorted(llvm_modules):
            digest.update(str(llvm_modules[stem]).encode())
        digest.update(repr((machine_spec(board.target), opt_level, emit_llvm)).encode())
    else:
        _progress("generating C", quiet)
        sources = generate_c(mod, name)
    prefix = sources.prefix
    _check_fixed_arena(sources.signature)
    for fname in sorted(sources.files):
        digest.update(sources.files[fname].encode())
    digest.update(sources.weights)
    digest.update(repr((board.name, tc)).encode())
    # every runtime file once: the source lists (runtime_c/sources.cmake name every .c) and the headers
    for path in [*RUNTIME_SOURCES, *sorted((RUNTIME_DIR / "include").rglob("*.h")), *library_sources(),
                 RUNNER_SOURCE, *RPC_SOURCES]:
        digest.update(path.read_bytes())
    key = digest.hexdigest()[:16]

    shared = out_dir / f"lib{prefix}.so" if tc.shared else None
    static = out_dir / f"lib{prefix}.a"
    runner = out_dir / (f"{prefix}_runner" + (".elf" if board.target.freestanding else ""))
    main_sig = sources.signature["main"]
    artifact = Artifact(out_dir, prefix, board.name, backend, shared, static, out_dir / f"{prefix}.h",
                        sources.signature, source=source, workspace_bytes=main_sig["fixed_workspace_bytes"],
                        memory_plan=dump_plan(sources.plans["main"]), runner=runner, board_file=board.path,
                        sanitize=sanitize)
    server = None if board.target.freestanding else out_dir / f"{prefix}_server"
    artifact.server = server
    stamp = out_dir / ".build-key"
    meta = out_dir / "artifact.json"
    if stamp.exists() and stamp.read_text() == key and meta.exists() and static.exists() and runner.exists() \
            and (server is None or server.exists()):
        artifact.cached = True
        artifact.sizes = json.loads(meta.read_text()).get("sizes")
        artifact.build_seconds = time.perf_counter() - start
        write_atomic(meta, json.dumps(artifact.to_json(), indent=1))
        _progress(f"{out_dir}: up to date", quiet)
        return artifact

    stale = (f"{prefix}.c",) if backend == "llvm" else tuple(f"{prefix}_{stem}.{ext}" for stem in LLVM_OBJECTS
                                                               for ext in ("o", "ll"))
    for fname in stale:   # another backend's build in this directory
        (out_dir / fname).unlink(missing_ok=True)
    for fname, text in sources.files.items():
        write_atomic(out_dir / fname, text)
    write_atomic(out_dir / f"{prefix}_weights.bin", sources.weights)
    core_objects = runtime_objects_for(tc.cc, tc.cflags)
    library_objects = library_objects_for(tc.cc, tc.cflags)
    runtime_objects = core_objects + library_objects
    _progress(f"compiling {prefix} for {board.name} with {tc.cc} "
              f"({len(sources.weights) / 1e6:.1f} MB of constants)", quiet)
    with tempfile.TemporaryDirectory(dir=out_dir, prefix=".obj-") as objdir:
        objdir = Path(objdir)
        weights_obj = objdir / f"{prefix}_weights_S.o"
        _run([tc.cc, *tc.cflags, f"-Wa,-I{out_dir}", "-c", out_dir / f"{prefix}_weights.S", "-o", weights_obj],
             f"compiling {prefix}_weights.S")
        if backend == "llvm":
            llvm_objects = {stem: _compile_llvm(module, board, opt_level, out_dir / f"{prefix}_{stem}", emit_llvm)
                            for stem, module in llvm_modules.items()}
            model_objects = [llvm_objects["host"], weights_obj, llvm_objects["kernels"]]
            profiled_objects = [llvm_objects.get("host_profiled"), weights_obj, llvm_objects["kernels"]]
        else:
            model_c = out_dir / f"{prefix}.c"
            model_objects = [objdir / f"{prefix}_c.o", weights_obj]
            _run([tc.cc, *tc.cflags, "-c", model_c, "-o", model_objects[0]], f"compiling {model_c.name}")
            profiled_objects = [objdir / "model_profiled.o", weights_obj]
            if server is not None:
                _run([tc.cc, *tc.cflags, "-DRXE_PROFILE", "-c", model_c, "-o", profiled_objects[0]],
                     "compiling the profiled model")
        objects = model_objects + list(runtime_objects)
        staged = []
        if shared is not None:
            _run([tc.cc, "-shared", "-o", objdir / shared.name, *objects, "-lm", "-lpthread"],
                 "linking the shared library")
            staged.append((objdir / shared.name, shared))
        _run([_archiver(tc.cc), "rcs", objdir / static.name, *objects], "archiving the static library")
        staged.append((objdir / static.name, static))
        specs = [f for f in tc.ldflags if f.startswith("--specs")]  # the C library's headers (picolibc)
        semihost = ["-DRXE_SEMIHOST"] if board.target.freestanding else []
        (runner_obj,) = cached_objects(tc.cc, [*tc.cflags, *specs, *semihost, f"-DRXE_MODULE={prefix}_module"],
                                       [RUNNER_SOURCE])
        libm = [] if board.target.freestanding else ["-lm", "-lpthread"]
        _run([tc.cc, *tc.cflags, *tc.ldflags, "-o", objdir / runner.name, runner_obj, *objects, *libm],
             "linking the runner")
        staged.append((objdir / runner.name, runner))
        if server is not None:
            _build_server(tc, objdir / server.name, profiled_objects, runtime_objects, prefix)
            staged.append((objdir / server.name, server))
        artifact.sizes = {"model": object_sizes(tc.size_tool, model_objects),
                          "runtime": object_sizes(tc.size_tool, core_objects),
                          "library": object_sizes(tc.size_tool, library_objects)}   # before the linker drops any
        for tmp, final in staged:
            os.replace(tmp, final)
    artifact.build_seconds = time.perf_counter() - start
    write_atomic(meta, json.dumps(artifact.to_json(), indent=1))
    write_atomic(stamp, key)
    _progress(f"built {prefix} for {board.name} in {artifact.build_seconds:.1f}s", quiet)
    return artifact


def _build_server(tc: Toolchain, out: Path, profiled_objects, runtime_objects, prefix: str) -> None:
    """The RPC server: the model with the per-kernel profiler (the C build's
    -DRXE_PROFILE, the LLVM build's PREFIX_host_profiled.o), the protocol
    core and the POSIX I/O layer."""
    rpc_objects = cached_objects(tc.cc, [*tc.cflags, f"-DRXE_MODULE={prefix}_module"], RPC_SOURCES)
    _run([tc.cc, *tc.cflags, *tc.ldflags, "-o", out, *profiled_objects, *rpc_objects, *runtime_objects, "-lm",
          "-lpthread"], "linking the RPC server")


LLVM_OBJECTS = ("kernels", "host", "host_profiled")   # the LLVM build's PREFIX_STEM.o


def _compile_llvm(module, board: Board, opt_level, stem: Path, emit_llvm: bool) -> Path:
    """STEM.o (and, when asked, STEM.ll) from an LLVM module; only the
    kernels are hidden (the host module exports the entry points)."""
    from .codegen.llvm import compile_module
    kernels = stem.name.endswith("_kernels")
    try:
        compiled = compile_module(module, board.target, opt_level, hide=kernels)
    except RelaxEdgeError as err:
        raise BuildError(f"compiling {stem.name} with LLVM: {err}") from None
    obj = stem.with_suffix(".o")
    write_atomic(obj, compiled.object_code)
    if emit_llvm:
        write_atomic(stem.with_suffix(".ll"), compiled.llvm_ir)
    return obj


def build_runner(artifact: Artifact, out_path, cc: str | None = None, extra_cflags=(), extra_ldflags=()) -> Path:
    """A host runner executable for the artifact's model, with extra flags
    (e.g. sanitizers)."""
    cc = cc or host_compiler()
    out_path = Path(out_path)
    d = artifact.out_dir
    if artifact.backend == "llvm":
        model = [d / f"{artifact.prefix}_host.o", d / f"{artifact.prefix}_kernels.o"]
    else:
        model = [d / f"{artifact.prefix}.c"]
    sources = [*model, d / f"{artifact.prefix}_weights.S", RUNNER_SOURCE]
    sources += [*RUNTIME_SOURCES, *library_sources()]
    cmd = [cc, "-std=c99", "-O1", "-g", f"-I{RUNTIME_DIR / 'include'}", f"-Wa,-I{d}",
           f"-DRXE_MODULE={artifact.prefix}_module", *extra_cflags, *map(str, sources), "-o", str(out_path),
           *extra_ldflags, "-lm", "-lpthread"]
    _run(cmd, "building the runner")
    return out_path
