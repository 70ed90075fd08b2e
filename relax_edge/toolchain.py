"""The compile and link side of a build: the board's C toolchain over the
generated sources and the C runtime.

1. `Toolchain.for_board` is the board's compiler and flags (the host's `cc`
   on the local board; -DRXE_NO_LIBM -DRXE_NO_THREADS when freestanding;
   the -D flags of the board's tuning table, relax_edge/tuning.py);
   `sanitized` adds ASan + UBSan to every C object and to the link.
2. The runtime core, the thread pool, the library kernels, the runner and
   the RPC server's objects are model-independent (or depend only on flags
   such as -DRXE_MODULE) and compiled once into the cache (`cached_objects`,
   RXE_CACHE_DIR, default ~/.cache/relax_edge).
3. `Packager.package` is the build's last stage: it writes the sources,
   compiles the weights and the model (PREFIX.c, or the LLVM modules through
   codegen/llvm/target.py), links libPREFIX.so (hosted targets,
   unsanitized), archives libPREFIX.a, links PREFIX_runner (`.elf` with
   semihosting on bare metal) and PREFIX_server (hosted targets), and
   returns the objects' sizes. Products are built in a temporary folder and
   renamed into place.
4. `build_runner` builds a host runner of an artifact with extra flags.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import dataclasses
import hashlib
import os
import re
import shutil
import subprocess
import tempfile
import threading
import warnings
from pathlib import Path

from .errors import RelaxEdgeError
from .files import write_atomic
from .resources import runtime_dir
from .target import Board

RUNTIME_DIR = runtime_dir()   # the checkout's runtime_c/, or the wheel's copy


class BuildError(RelaxEdgeError):
    """Compiling or linking the generated code failed."""


def read_source_lists(path: Path) -> dict:
    """The set(NAME path...) blocks of runtime_c/sources.cmake, the list
    CMakeLists.txt also builds from: {NAME: (runtime_c/path, ...)}."""
    text = "\n".join(line.split("#", 1)[0] for line in path.read_text().splitlines())
    lists = {name: tuple(path.parent / f for f in files.split())
             for name, files in re.findall(r"set\(\s*(RXE_\w+)\s+([^)]*)\)", text)}
    missing = {"RXE_CORE_SOURCES", "RXE_THREAD_SOURCES", "RXE_KERNEL_SOURCES", "RXE_GENERATE_SOURCES",
               "RXE_RPC_SOURCES"} - set(lists)
    if missing:
        raise RelaxEdgeError(f"{path} sets no {', '.join(sorted(missing))}")
    return lists


SOURCE_LISTS = read_source_lists(RUNTIME_DIR / "sources.cmake")
RUNTIME_SOURCES = SOURCE_LISTS["RXE_CORE_SOURCES"]      # the core
THREAD_SOURCES = SOURCE_LISTS["RXE_THREAD_SOURCES"]     # the thread pool (serial under RXE_NO_THREADS)
KERNEL_SOURCES = SOURCE_LISTS["RXE_KERNEL_SOURCES"]     # the library micro-kernels
GENERATE_SOURCES = SOURCE_LISTS["RXE_GENERATE_SOURCES"]   # the token loop and the sampler (generate.h)
RPC_SOURCES = SOURCE_LISTS["RXE_RPC_SOURCES"]
RUNNER_SOURCE = RUNTIME_DIR / "tools" / "runner.c"
LINKED_MODULE_SOURCE = RUNTIME_DIR / "tools" / "linked_module.c"   # rxe_linked_module -> PREFIX_module
VULKAN_SOURCES = tuple(sorted((RUNTIME_DIR / "vulkan").glob("*.c")))   # the Vulkan module (backend "vulkan")
# -g1: the line tables that the sanitizers' reports name (file:line); without -g's variable locations, whose
# tracking was a third of the time GCC took over the library's kernels. -O1 (after the board's -O level), as the
# sanitizers' documentation advises: GCC took 66 s over matmul_nbits.c instrumented at -O3, 21 s at -O1
SANITIZE_FLAGS = ("-fsanitize=address,undefined", "-fno-omit-frame-pointer", "-fno-sanitize-recover=all", "-g1",
                  "-O1")
SANITIZE_LDFLAGS = ("-fsanitize=address,undefined",)
LLVM_OBJECTS = ("kernels", "host", "host_profiled")   # the LLVM build's PREFIX_STEM.o


def host_compiler() -> str:
    """The host's C compiler: $CC, cc, gcc or clang, the first found."""
    for cc in (os.environ.get("CC"), "cc", "gcc", "clang"):
        if cc and shutil.which(cc):
            return cc
    raise BuildError("no C compiler found for the host board (install gcc: apt-get install build-essential)")


def run_tool(cmd, what: str) -> None:
    """Run a compiler, archiver or linker; its last lines of output on failure."""
    proc = subprocess.run([str(c) for c in cmd], capture_output=True, text=True)
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-25:]
        raise BuildError(f"{what} failed ({' '.join(str(c) for c in cmd[:3])} ...):\n" + "\n".join(tail))


# GCC's auto-vectorizer has crashed on generated code (GCC 12's "internal compiler error: in
# vectorizable_live_operation" at -march=znver4): the model's C is compiled again without it once
ICE_RETRY_FLAGS = ("-fno-tree-vectorize",)


def compile_generated(cmd, what: str) -> None:
    """run_tool for a generated C file: a compiler crash (an internal compiler error, never a diagnostic of
    the code) is retried once with ICE_RETRY_FLAGS after the other flags, with a warning naming it; the
    explicit vector types of the kernels stay vectorized."""
    try:
        run_tool(cmd, what)
    except BuildError as err:
        if "internal compiler error" not in str(err):
            raise
        warnings.warn(f"{what}: the C compiler crashed (internal compiler error); compiling again with "
                      f"{' '.join(ICE_RETRY_FLAGS)}", RuntimeWarning, stacklevel=2)
        cmd = list(cmd)
        at = cmd.index("-c") if "-c" in cmd else len(cmd)
        run_tool([*cmd[:at], *ICE_RETRY_FLAGS, *cmd[at:]], what)


def archiver(cc: str) -> str:
    """The `ar` of the compiler's binutils (aarch64-linux-gnu-gcc -> aarch64-linux-gnu-ar)."""
    if cc.endswith("gcc") and shutil.which(cc[:-3] + "ar"):
        return cc[:-3] + "ar"
    return "ar"


def cache_root() -> Path:
    """Where compiled runtime objects are kept between builds."""
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
    def for_board(cls, board: Board, opt_level: str | None = None, table: dict | None = None) -> "Toolchain":
        """`table`: a validated tuning table (tuning.resolve); None reads the board's."""
        from . import tuning
        t = board.target
        local = board.transport == "local"
        cc = host_compiler() if t.compiler == "cc" and local else t.compiler
        flags = [f for f in t.cflags if not (opt_level and f.startswith("-O"))]
        if opt_level:
            flags.insert(0, opt_level)
        flags += tuning.cflags(tuning.load_table(board) if table is None else table)
        # -fno-math-errno: sqrt and friends inline as instructions (nothing reads errno)
        base = ["-std=c99", "-Wall", "-Wextra", "-fno-math-errno", f"-I{RUNTIME_DIR / 'include'}"]
        if t.freestanding:
            base += ["-DRXE_NO_LIBM", "-DRXE_NO_THREADS", "-ffunction-sections", "-fdata-sections"]
        else:
            base.append("-fPIC")
        size_tool = t.size_tool if shutil.which(t.size_tool) else "size"
        return cls(cc, tuple(base + flags), tuple(t.ldflags), size_tool, not t.freestanding, local)

    def sanitized(self, board: Board) -> "Toolchain":
        """This toolchain with AddressSanitizer and UndefinedBehaviorSanitizer
        on every C object (the model's C, the runtime, the library kernels,
        the runner, the RPC server) and on the link. No shared library: a
        sanitized one cannot be loaded into an uninstrumented process."""
        if board.target.freestanding or "-static" in self.ldflags:
            raise BuildError(f"sanitize=True needs a Linux board that links dynamically; {board.name} "
                             f"{'has no C library' if board.target.freestanding else 'links with -static'}")
        return dataclasses.replace(self, cflags=self.cflags + SANITIZE_FLAGS,
                                   ldflags=self.ldflags + SANITIZE_LDFLAGS, shared=False)


def cached_objects(cc: str, cflags, sources) -> list:
    """Object files of runtime sources (model-independent, or depending only
    on flags such as -DRXE_MODULE) compiled once into the cache. Each object
    is keyed by a hash of the compiler, every runtime source and header (the
    private ones, such as runtime_c/vulkan/vk_internal.h, and the Android
    stand-ins of runtime_c/android/include among them), its own path and its
    flags less the -DRXE_ macros that neither it nor a header it includes names:
    a tuning table's -DRXE_GEMM_KC=... recompiles gemm.c and conv.c, not the
    rest of the library. The sources compile in parallel, under a lock on
    the set: a second process (a test worker) asking for the same set waits
    and reuses them."""
    cflags = list(cflags)
    files = {path: path.read_bytes() for path in [*sorted(RUNTIME_DIR.rglob("*.c")), *sorted(RUNTIME_DIR.rglob("*.h"))]}
    tree = hashlib.sha256(cc.encode())
    for data in files.values():
        tree.update(data)
    objects = []
    for src in map(Path, sources):
        text = _included_text(src, files)
        flags = [f for f in cflags if not (f.startswith("-DRXE_") and _macro_name(f) not in text)]
        key = hashlib.sha256(tree.digest() + "\0".join([str(src), *flags]).encode()).hexdigest()[:16]
        objects.append(cache_root() / "runtime" / key / f"rxe_{src.stem}.o")
    if all(o.exists() for o in objects):
        return objects
    (cache_root() / "runtime").mkdir(parents=True, exist_ok=True)
    whole = hashlib.sha256("\0".join(map(str, objects)).encode()).hexdigest()[:16]
    with _exclusive(cache_root() / "runtime" / f".{whole}.lock"):   # the same set compiling: wait, then reuse
        missing = sorted(((Path(src), obj) for src, obj in zip(sources, objects) if not obj.exists()),
                         key=lambda pair: -pair[0].stat().st_size)   # the longest compiles first
        if missing:
            tag = f".{os.getpid()}-{threading.get_ident()}-"   # unique to this call: no other writer's file
            jobs = [(src, obj, obj.parent / (tag + obj.name)) for src, obj in missing]
            for _, obj, _ in jobs:
                obj.parent.mkdir(exist_ok=True)
            with concurrent.futures.ThreadPoolExecutor(min(len(jobs), os.cpu_count() or 1)) as pool:
                for done in [pool.submit(run_tool, [cc, *cflags, "-c", str(src), "-o", str(tmp)],
                                         f"compiling {src.name}") for src, _, tmp in jobs]:
                    done.result()
            for _, obj, tmp in jobs:   # atomic: another set sharing an object may be writing it too
                os.replace(tmp, obj)
    return objects


_INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def _macro_name(flag: str) -> str:
    return flag[2:].split("=", 1)[0]


def _included_text(src: Path, files: dict) -> str:
    """`src` and every runtime header it includes ("..." includes, followed through the headers), as one
    text; `files`: the runtime's files as read (path -> bytes)."""
    seen, todo, texts = set(), [src], []
    while todo:
        path = todo.pop()
        if path in seen:
            continue
        seen.add(path)
        data = files.get(Path(os.path.normpath(path)))
        if data is None:
            continue
        text = data.decode(errors="replace")
        texts.append(text)
        todo += [where / name for name in _INCLUDE.findall(text)
                 for where in (path.parent, RUNTIME_DIR / "include", RUNTIME_DIR)]
    return "\n".join(texts)


@contextlib.contextmanager
def _exclusive(path: Path):
    """An advisory lock on `path` held for the block (POSIX flock; no lock where there is none)."""
    try:
        import fcntl
    except ImportError:   # not POSIX: concurrent builds compile twice, each replacing the objects atomically
        yield
        return
    with open(path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def runtime_objects_for(cc: str, cflags) -> list:
    """The runtime core's objects for this compiler and flags (cached)."""
    return cached_objects(cc, cflags, RUNTIME_SOURCES)


def library_sources() -> list:
    """The thread pool, the library micro-kernels (runtime_c/kernels) and the token loop with its sampler."""
    return [*THREAD_SOURCES, *KERNEL_SOURCES, *GENERATE_SOURCES]


def library_objects_for(cc: str, cflags) -> list:
    """The thread pool's and the library kernels' objects (cached); a static
    link keeps only the kernels a model calls."""
    return cached_objects(cc, cflags, library_sources())


def runtime_files() -> list:
    """Every runtime file a build depends on, once: the source lists
    (runtime_c/sources.cmake names every .c), the headers and the runner."""
    return [*RUNTIME_SOURCES, *sorted((RUNTIME_DIR / "include").rglob("*.h")), *library_sources(), RUNNER_SOURCE,
            LINKED_MODULE_SOURCE, *RPC_SOURCES, *VULKAN_SOURCES]


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


@dataclasses.dataclass(frozen=True)
class Products:
    """The libraries and executables a build leaves in its output folder."""
    shared: Path | None      # libPREFIX.so (hosted, unsanitized)
    static: Path             # libPREFIX.a
    runner: Path             # PREFIX_runner (.elf on bare metal)
    server: Path | None      # PREFIX_server (hosted)

    @classmethod
    def of(cls, out_dir: Path, prefix: str, tc: Toolchain, board: Board) -> "Products":
        freestanding = board.target.freestanding
        return cls(out_dir / f"lib{prefix}.so" if tc.shared else None, out_dir / f"lib{prefix}.a",
                   out_dir / (f"{prefix}_runner" + (".elf" if freestanding else "")),
                   None if freestanding else out_dir / f"{prefix}_server")

    def exist(self) -> bool:
        """Every product is there (the shared library is not required)."""
        return self.static.exists() and self.runner.exists() and (self.server is None or self.server.exists())


class Packager:
    """The toolchain stage of one build: a backend's sources written into
    `out_dir`, compiled, linked and archived into `products`."""

    def __init__(self, tc: Toolchain, board: Board, out_dir: Path, products: Products,
                 opt_level: str | None = None, emit_llvm: bool = False, profile: bool = True):
        self.tc = tc
        self.profile = profile
        self.board = board
        self.out_dir = out_dir
        self.products = products
        self.opt_level = opt_level
        self.emit_llvm = emit_llvm
        self.libs = ("-lm", "-lpthread")   # hosted targets' libraries

    def package(self, sources, backend: str) -> dict:
        """Build every product from `sources` (codegen's CSources or
        LLVMSources); the object sizes of the model, the runtime core and
        the library, before the linker drops any."""
        tc = self.tc
        self.write_sources(sources, backend)
        core_objects = runtime_objects_for(tc.cc, tc.cflags)
        if backend == "vulkan":   # the Vulkan module, which dlopens libvulkan
            core_objects = core_objects + cached_objects(tc.cc, tc.cflags, VULKAN_SOURCES)
            self.libs = (*self.libs, "-ldl")
        library_objects = library_objects_for(tc.cc, tc.cflags)
        with tempfile.TemporaryDirectory(dir=self.out_dir, prefix=".obj-") as objdir:
            objdir = Path(objdir)
            weights = self.weights_object(sources.prefix, objdir)
            model, profiled = getattr(self, f"model_objects_{backend}")(sources, objdir, weights)
            staged = self.link(sources.prefix, objdir, model, profiled, core_objects + library_objects)
            sizes = {"model": object_sizes(tc.size_tool, model), "runtime": object_sizes(tc.size_tool, core_objects),
                     "library": object_sizes(tc.size_tool, library_objects)}
            for tmp, final in staged:
                os.replace(tmp, final)
        return sizes

    def write_sources(self, sources, backend: str) -> None:
        """The sources and the weights blob, without another backend's files."""
        prefix = sources.prefix
        stale = (f"{prefix}.c",) if backend == "llvm" else tuple(f"{prefix}_{stem}.{ext}" for stem in LLVM_OBJECTS
                                                                   for ext in ("o", "ll"))
        for fname in stale:
            (self.out_dir / fname).unlink(missing_ok=True)
        for fname, text in sources.files.items():
            write_atomic(self.out_dir / fname, text)
        write_atomic(self.out_dir / f"{prefix}_weights.bin", sources.weights)

    def weights_object(self, prefix: str, objdir: Path) -> Path:
        obj = objdir / f"{prefix}_weights_S.o"
        run_tool([self.tc.cc, *self.tc.cflags, f"-Wa,-I{self.out_dir}", "-c", self.out_dir / f"{prefix}_weights.S",
                  "-o", obj], f"compiling {prefix}_weights.S")
        return obj

    def model_objects_c(self, sources, objdir: Path, weights: Path) -> tuple:
        """PREFIX.c compiled, and again with -DRXE_PROFILE for the server (the
        runner on bare metal)."""
        tc, prefix = self.tc, sources.prefix
        model_c = self.out_dir / f"{prefix}.c"
        model = [objdir / f"{prefix}_c.o", weights]
        jobs = [([tc.cc, *tc.cflags, "-c", model_c, "-o", model[0]], f"compiling {model_c.name}")]
        profiled = [objdir / "model_profiled.o", weights]
        if not self.profile:   # no profiled copy: the server and the runner link the model as it is
            profiled = model
        elif self.products.server is not None or self.board.target.freestanding:
            jobs.append(([tc.cc, *tc.cflags, "-DRXE_PROFILE", "-c", model_c, "-o", profiled[0]],
                         "compiling the profiled model"))
        with concurrent.futures.ThreadPoolExecutor(len(jobs)) as pool:   # the two compiles at once
            for done in [pool.submit(compile_generated, cmd, what) for cmd, what in jobs]:
                done.result()
        return model, profiled

    model_objects_vulkan = model_objects_c   # PREFIX.c holds the SPIR-V and the Vulkan host code

    def model_objects_llvm(self, sources, objdir: Path, weights: Path) -> tuple:
        """The LLVM modules compiled into PREFIX_STEM.o."""
        objects = {stem: self.compile_llvm(module, self.out_dir / f"{sources.prefix}_{stem}")
                   for stem, module in sources.modules.items()}
        return ([objects["host"], weights, objects["kernels"]],
                [objects.get("host_profiled", objects["host"]), weights, objects["kernels"]])

    def compile_llvm(self, module, stem: Path) -> Path:
        """STEM.o (and, when asked, STEM.ll) from an LLVM module; only the
        kernels are hidden (the host module exports the entry points)."""
        from .codegen.llvm import compile_module
        try:
            compiled = compile_module(module, self.board.target, self.opt_level, hide=stem.name.endswith("_kernels"))
        except RelaxEdgeError as err:
            raise BuildError(f"compiling {stem.name} with LLVM: {err}") from None
        obj = stem.with_suffix(".o")
        write_atomic(obj, compiled.object_code)
        if self.emit_llvm:
            write_atomic(stem.with_suffix(".ll"), compiled.llvm_ir)
        return obj

    def link(self, prefix: str, objdir: Path, model: list, profiled: list, runtime: list) -> list:
        """The products linked in `objdir`, side by side (each copies the
        weights: half a gigabyte for VGG-19): (built file, its final path)."""
        tc, products = self.tc, self.products
        objects = model + list(runtime)
        jobs, staged = [], []
        if products.shared is not None:
            jobs.append(lambda: run_tool([tc.cc, "-shared", "-o", objdir / products.shared.name, *objects,
                                          *self.libs], "linking the shared library"))
            staged.append((objdir / products.shared.name, products.shared))
        jobs.append(lambda: run_tool([archiver(tc.cc), "rcs", objdir / products.static.name, *objects],
                                     "archiving the static library"))
        staged.append((objdir / products.static.name, products.static))
        # on bare metal the runner is what benchmarks and profiles (runner.c -t, -p): the profiled model
        runner_objects = profiled + list(runtime) if self.board.target.freestanding else objects
        jobs.append(lambda: self.link_runner(prefix, objdir / products.runner.name, runner_objects))
        staged.append((objdir / products.runner.name, products.runner))
        if products.server is not None:
            jobs.append(lambda: link_server(tc, objdir / products.server.name, profiled, runtime, prefix, self.libs))
            staged.append((objdir / products.server.name, products.server))
        with concurrent.futures.ThreadPoolExecutor(min(len(jobs), os.cpu_count() or 1)) as pool:
            for done in [pool.submit(job) for job in jobs]:
                done.result()
        return staged

    def link_runner(self, prefix: str, out: Path, objects: list) -> None:
        """The runner over tensor files (semihosting on bare metal)."""
        tc, freestanding = self.tc, self.board.target.freestanding
        specs = [f for f in tc.ldflags if f.startswith("--specs")]  # the C library's headers (picolibc)
        semihost = ["-DRXE_SEMIHOST"] if freestanding else []
        (runner_obj,) = cached_objects(tc.cc, [*tc.cflags, *specs, *semihost], [RUNNER_SOURCE])
        runner_obj = [runner_obj, linked_module_object(tc, prefix)]
        libm = [] if freestanding else list(self.libs)
        run_tool([tc.cc, *tc.cflags, *tc.ldflags, "-o", out, *runner_obj, *objects, *libm], "linking the runner")


def linked_module_object(tc: Toolchain, prefix: str) -> Path:
    """The one-line object that points the runner and the server (compiled once per toolchain and flags)
    at PREFIX_module (relax_edge/linked_module.h)."""
    (obj,) = cached_objects(tc.cc, [*tc.cflags, f"-DRXE_MODULE={prefix}_module"], [LINKED_MODULE_SOURCE])
    return obj


def link_server(tc: Toolchain, out: Path, profiled_objects, runtime_objects, prefix: str,
                libs=("-lm", "-lpthread")) -> None:
    """The RPC server: the model with the per-kernel profiler (the C build's
    -DRXE_PROFILE, the LLVM build's PREFIX_host_profiled.o), the protocol
    core and the POSIX I/O layer."""
    rpc_objects = [*cached_objects(tc.cc, tc.cflags, RPC_SOURCES), linked_module_object(tc, prefix)]
    run_tool([tc.cc, *tc.cflags, *tc.ldflags, "-o", out, *profiled_objects, *rpc_objects, *runtime_objects, *libs],
             "linking the RPC server")


def build_runner(artifact, out_path, cc: str | None = None, extra_cflags=(), extra_ldflags=()) -> Path:
    """A host runner executable for an Artifact's model, with extra flags
    (e.g. sanitizers) after the -D flags of the build's tuning table."""
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
           f"-DRXE_MODULE={artifact.prefix}_module", *getattr(artifact, "tuning_flags", ()), *extra_cflags,
           *map(str, sources), "-o", str(out_path), *extra_ldflags, "-lm", "-lpthread"]
    run_tool(cmd, "building the runner")
    return out_path
