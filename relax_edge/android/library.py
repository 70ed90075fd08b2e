"""One Android shared library per ABI: the model, the C runtime and any extra
C sources (the JNI glue) linked into the .so an app puts under
jniLibs/<abi>/.

    lib = build_android_library(art, "arm64-v8a", "out/jniLibs/arm64-v8a/libmodel.so", exports=["JNI_OnLoad"])

1. The board of the ABI (ABIS; its `android:` section gives the NDK triple,
   the API level and the library's flags). An artifact built for another
   board is emitted again for this one (from `module`, or from the source
   model the artifact records), without the board's gcc toolchain.
2. The compiler: with ANDROID_NDK_HOME (or ANDROID_NDK_ROOT) the NDK's
   clang and sysroot ("ndk"); without, Debian's clang for the same
   `--target=<triple><api>` with lld, and stub libc.so / libm.so / libdl.so /
   liblog.so built from stub_symbols.txt ("clang-stubs", android/stubs.py).
3. The model and the runtime are compiled freestanding and position
   independent, with the stack protector of NDK builds, the runtime's own
   math (RXE_NO_LIBM) and without the thread pool (RXE_NO_THREADS):
   without the NDK there is no declaration of bionic's pthread ABI here,
   so the library runs on one thread
   (AndroidLibrary.threads == 1, and its note says so). The extra sources get
   the same flags (freestanding too without the NDK: only the compiler's
   own headers, stddef.h, stdint.h, stdarg.h, ...).
4. Before linking, every symbol the objects need from outside must be a
   stubbed system symbol or a helper of the compiler's runtime library (on
   armeabi-v7a: 64-bit division and conversions, from libgcc.a of the
   board's cross gcc, linked in hidden): any other is a BuildError naming
   it.
5. The link: SONAME, `-z max-page-size=16384` (16 KB pages), `-z
   noexecstack`, `--hash-style=both`, `--build-id`, `-z text` (no text
   relocations), `--gc-sections`, `--no-undefined`, and a version script
   that exports the model's API (the PREFIX_* names of its header) plus
   `exports` and hides the rest. The DT_NEEDED entries (only the system
   libraries used, --as-needed) and the exported symbols are read back with
   llvm-readelf into the returned AndroidLibrary, whose `objects` are the
   exact object files linked (a test links them into a QEMU launcher).
6. A Vulkan artifact (backend "vulkan") is emitted for the ABI's Vulkan
   board (VULKAN_ABIS: android-arm64-vulkan, android-x86_64-vulkan) and
   linked with the Vulkan module (runtime_c/vulkan/), which dlopens
   libvulkan.so at run time: the library never links it, so DT_NEEDED
   stays within the system libraries (libdl.so added). Without the NDK the
   module and the model compile against the bionic stand-ins of
   runtime_c/android/include (stdlib.h, string.h, stdio.h, ...) and a
   folder holding only the system's Vulkan headers (`vulkan_headers`); with
   it, against its sysroot, which has both.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import platform
import re
import shutil
import subprocess
from pathlib import Path

from ..build import emit, optimize_module
from ..codegen.host_program import lower_host
from ..files import write_atomic
from ..memory import plan_module
from ..target import ANDROID_ABIS, load_board
from ..toolchain import (
    RUNTIME_DIR,
    RUNTIME_SOURCES,
    VULKAN_SOURCES,
    BuildError,
    cache_root,
    cached_objects,
    library_sources,
    run_tool,
)
from . import stubs

ABIS = {"arm64-v8a": "android-arm64", "armeabi-v7a": "android-armv7", "x86_64": "android-x86_64"}  # abi -> board
VULKAN_ABIS = {"arm64-v8a": "android-arm64-vulkan", "x86_64": "android-x86_64-vulkan"}  # abi -> Vulkan board
BACKENDS = ("c", "vulkan")   # what an Android library compiles: the model's C, or its Vulkan host C and SPIR-V
PAGE_SIZE = 16384   # Android 15's 16 KB pages: every LOAD segment aligned to them
NDK_ENV = ("ANDROID_NDK_HOME", "ANDROID_NDK_ROOT")
THREADS_NOTE = ("the runtime's thread pool is compiled out (RXE_NO_THREADS): the library runs every kernel "
                "on the calling thread")
VULKAN_NOTE = ("; the kernels run on the GPU through Vulkan: the library dlopens the system's libvulkan.so at "
               "load (RXE_VULKAN_LIBRARY names another), and a device without it gets RXE_ERR_NO_VULKAN")


@dataclasses.dataclass
class AndroidLibrary:
    """An Android shared library built by build_android_library."""
    path: Path
    abi: str
    api_level: int
    threads: int            # 1: the thread pool is compiled out
    needed: list            # DT_NEEDED, e.g. ["libc.so"]
    exported: list          # the defined dynamic symbols, sorted
    toolchain: str          # "ndk" or "clang-stubs"
    objects: list = dataclasses.field(default_factory=list)   # the object files linked, in link order
    note: str = THREADS_NOTE
    backend: str = "c"      # "vulkan": the kernels run as SPIR-V through the Vulkan module
    board: str = ""         # the board the model was emitted for


@dataclasses.dataclass(frozen=True)
class AndroidCompiler:
    """How to compile and link for one ABI."""
    clang: str
    target: str             # --target=<triple><api>
    api_level: int
    kind: str               # "ndk" or "clang-stubs"
    cflags: tuple           # the ABI's flags from the board

    @property
    def command(self) -> list:
        return [self.clang, f"--target={self.target}", *self.cflags]


def ndk_root() -> Path | None:
    """The NDK that ANDROID_NDK_HOME or ANDROID_NDK_ROOT names, or None."""
    for name in NDK_ENV:
        value = os.environ.get(name)
        if value:
            root = Path(value)
            if not (root / "toolchains" / "llvm").is_dir():
                raise BuildError(f"{name}={value} is not an Android NDK (no toolchains/llvm in it); "
                                 f"point it at the NDK's folder or unset it to build with Debian's clang and stubs")
            return root
    return None


def ndk_clang(root: Path) -> str:
    tag = {"Linux": "linux-x86_64", "Darwin": "darwin-x86_64", "Windows": "windows-x86_64"}.get(platform.system())
    clang = root / "toolchains" / "llvm" / "prebuilt" / str(tag) / "bin" / "clang"
    if not clang.exists():
        raise BuildError(f"the NDK at {root} has no {clang.relative_to(root)}")
    return str(clang)


def board_name(abi: str, backend: str = "c") -> str:
    """The board an ABI's library is emitted for: ABIS, or VULKAN_ABIS for backend "vulkan"."""
    if abi not in ABIS:
        raise BuildError(f"unknown Android ABI {abi!r}; choose one of {', '.join(ABIS)}")
    if backend not in BACKENDS:
        raise BuildError(f"an Android library compiles the model's C or its Vulkan host code, not backend "
                         f"{backend!r}; build the artifact with backend c or vulkan")
    if backend == "vulkan":
        if abi not in VULKAN_ABIS:
            raise BuildError(f"ABI {abi}: no Android Vulkan board for it; a Vulkan library is built for "
                             f"{', '.join(VULKAN_ABIS)}")
        return VULKAN_ABIS[abi]
    return ABIS[abi]


def compiler_for(abi: str, api_level: int | None = None, backend: str = "c") -> tuple:
    """(board, AndroidCompiler) for an ABI (and its Vulkan board for backend "vulkan")."""
    board = load_board(board_name(abi, backend))
    section = board.android
    if not section or section["abi"] != abi:
        raise BuildError(f"board {board.name} ({board.path}) has no android: section for ABI {abi}")
    api = section["api_level"] if api_level is None else api_level
    if not isinstance(api, int) or api < 21:
        raise BuildError(f"ABI {abi}: API level {api!r} is below 21, the oldest the NDK supports")
    root = ndk_root()
    if root is not None:
        clang, kind = ndk_clang(root), "ndk"
    else:
        missing = [tool for tool in ("clang", "ld.lld") if not shutil.which(tool)]
        if missing:
            raise BuildError(f"ABI {abi}: {' and '.join(missing)} not found; install Debian's clang and lld "
                             f"(apt-get install clang lld llvm) or set ANDROID_NDK_HOME to an NDK")
        clang, kind = "clang", "clang-stubs"
    return board, AndroidCompiler(clang, f"{ANDROID_ABIS[abi]}{api}", api, kind, tuple(section["cflags"]))


def model_cflags(compiler: AndroidCompiler) -> list:
    """The flags of the model and the runtime: freestanding, PIC, no libm,
    no threads, and the NDK's stack protector (-fstack-protector-strong:
    bionic's __stack_chk_fail, and on armeabi-v7a its __stack_chk_guard; the
    64-bit ABIs read the canary from bionic's thread control block)."""
    return [*compiler.command, "-std=c99", "-ffreestanding", "-nostdlibinc", "-fPIC", "-fno-math-errno",
            "-ffunction-sections", "-fdata-sections", "-fstack-protector-strong", "-DRXE_NO_LIBM",
            "-DRXE_NO_THREADS", f"-I{RUNTIME_DIR / 'include'}"]


def extra_cflags(compiler: AndroidCompiler, include_dirs) -> list:
    """The extra sources' flags: the model's, hosted on the NDK's sysroot."""
    flags = model_cflags(compiler)
    if compiler.kind == "ndk":
        flags = [f for f in flags if f not in ("-ffreestanding", "-nostdlibinc")]
    return flags + [f"-I{d}" for d in include_dirs]


def vulkan_headers() -> Path:
    """A folder holding only the Vulkan headers (links to vulkan/ and
    vk_video/ of $VULKAN_SDK/include or /usr/include), for a compile without
    libc headers that must not see glibc's."""
    roots = [Path(os.environ["VULKAN_SDK"]) / "include"] if os.environ.get("VULKAN_SDK") else []
    root = next((r for r in [*roots, Path("/usr/include")] if (r / "vulkan" / "vulkan.h").is_file()), None)
    if root is None:
        raise BuildError("the Vulkan headers (vulkan/vulkan.h) are not installed: a Vulkan Android library compiles "
                         "against them (apt-get install libvulkan-dev, or set VULKAN_SDK)")
    out = cache_root() / "android" / f"vulkan-headers-{hashlib.sha256(str(root).encode()).hexdigest()[:12]}"
    if not out.is_dir():
        tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        for name in ("vulkan", "vk_video"):
            if (root / name).is_dir():
                (tmp / name).symlink_to(root / name, target_is_directory=True)
        try:
            os.replace(tmp, out)
        except OSError:   # made meanwhile by another build
            shutil.rmtree(tmp, ignore_errors=True)
    return out


def vulkan_cflags(compiler: AndroidCompiler) -> list:
    """The flags of the Vulkan module and of a Vulkan model: the model's,
    with the bionic stand-ins and the Vulkan headers alone (no NDK), or
    hosted on the NDK's sysroot."""
    flags = model_cflags(compiler)
    if compiler.kind == "ndk":
        return [f for f in flags if f not in ("-ffreestanding", "-nostdlibinc")]
    return flags + [f"-I{RUNTIME_DIR / 'android' / 'include'}", f"-I{vulkan_headers()}"]


def _sources_for_board(art, board, module, workdir: Path) -> Path:
    """The folder holding PREFIX.c, PREFIX.h and the weights for `board`:
    the artifact's own, or emitted again for this board (with the
    artifact's backend, c or vulkan)."""
    if art.backend not in BACKENDS:
        raise BuildError(f"{art.out_dir}: built with backend {art.backend!r}; an Android library compiles the "
                         "model's C or its Vulkan host code (build it with backend='c' or 'vulkan')")
    if art.board == board.name and (Path(art.out_dir) / f"{art.prefix}.c").exists():
        return Path(art.out_dir)
    if module is None:
        source = art.source or {}
        if "onnx" not in source:
            raise BuildError(f"{art.out_dir}: built for board {art.board}, not {board.name}, and it records no "
                             f"source model; pass module=, or build the artifact for {board.name}")
        from ..frontend import from_onnx
        bounds = {k: tuple(v) for k, v in source.get("dim_bounds", {}).items()}
        module = from_onnx(source["onnx"], dim_bounds=bounds or None, max_context=source.get("max_context"))
    mod = optimize_module(module, board, backend=art.backend)
    host = lower_host(mod, plan_module(mod), art.prefix, "k_")
    if host.prefix != art.prefix:
        raise BuildError(f"the model emitted for {board.name} is named {host.prefix}, not {art.prefix}")
    sources = emit(host, art.backend, board)
    out = workdir / "sources"
    out.mkdir(exist_ok=True)
    for fname, text in sources.files.items():
        write_atomic(out / fname, text)
    write_atomic(out / f"{art.prefix}_weights.bin", sources.weights)
    return out


def api_symbols(header: Path, prefix: str) -> list:
    """The model's entry points and module as its header declares them (PREFIX_*, lower case)."""
    text = re.sub(r"/\*.*?\*/", "", header.read_text(), flags=re.S)
    text = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#"))
    return sorted(set(re.findall(rf"\b({re.escape(prefix)}_[a-z0-9_]+)\s*[(;\[]", text)))


def version_script(symbols) -> str:
    body = "".join(f"    {s};\n" for s in symbols)
    return f"{{\n  global:\n{body}  local:\n    *;\n}};\n"


def builtins_archive(compiler: AndroidCompiler, board) -> Path | None:
    """The compiler's runtime library for helpers such as __aeabi_uldivmod:
    the NDK links its own; without it, clang's compiler-rt for the triple if
    installed, else libgcc.a of the board's cross gcc. On 32-bit ARM its
    build attributes are removed (a copy in the cache): they name the
    hard-float convention of Debian's armhf build, which would mark the
    library hard-float, while the __aeabi_ helpers, the only ones taken from
    it there (`builtin_symbols`), use the base convention on every ARM ABI."""
    if compiler.kind == "ndk":
        return None
    for cmd in ([*compiler.command, "--rtlib=compiler-rt", "-print-libgcc-file-name"],
                [board.target.compiler, "-print-libgcc-file-name"]):
        if not shutil.which(cmd[0]):
            continue
        proc = subprocess.run(cmd, capture_output=True, text=True)
        path = Path(proc.stdout.strip())
        if proc.returncode == 0 and path.is_absolute() and path.exists():
            return _without_arm_attributes(path) if compiler.target.startswith("arm") else path
    return None


def _without_arm_attributes(archive: Path) -> Path:
    digest = hashlib.sha256(archive.read_bytes()).hexdigest()[:16]
    out = cache_root() / "android" / f"builtins-{digest}.a"
    if not out.exists():
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
        run_tool([tool("llvm-objcopy"), "--remove-section=.ARM.attributes", archive, tmp],
                 f"copying {archive.name} without its ARM attributes")
        os.replace(tmp, out)
    return out


def builtin_symbols(compiler: AndroidCompiler, archive: Path | None) -> set:
    """The helpers the library may take from the compiler's runtime library:
    on 32-bit ARM only the run-time ABI's __aeabi_ functions (a libgcc.a of
    another float ABI passes other helpers' floats in other registers)."""
    if archive is None:
        return set()
    defined = stubs.defined_symbols([archive])
    if compiler.target.startswith("arm"):
        return {s for s in defined if s.startswith("__aeabi_")}
    return defined


def link_flags(soname: str, script: Path) -> list:
    return [f"-Wl,-soname,{soname}", f"-Wl,-z,max-page-size={PAGE_SIZE}", "-Wl,-z,noexecstack",
            "-Wl,--hash-style=both", "-Wl,--build-id", "-Wl,-z,text", "-Wl,--gc-sections", "-Wl,--no-undefined",
            "-Wl,--exclude-libs=ALL", f"-Wl,--version-script={script}"]


def _link(compiler: AndroidCompiler, abi: str, out: Path, objects: list, script: Path, builtins, stub_libs) -> None:
    cmd = [*compiler.command, "-shared", "-fuse-ld=lld", *link_flags(out.name, script), "-o", out, *objects]
    if compiler.kind == "ndk":
        cmd += ["-Wl,--as-needed", "-lm", "-ldl", "-llog"]
    else:
        cmd += ["-nostdlib", *([builtins] if builtins else []), "-Wl,--as-needed", *stub_libs]
    proc = subprocess.run([str(c) for c in cmd], capture_output=True, text=True)
    if proc.returncode != 0:
        missing = sorted(set(re.findall(r"undefined symbol: (\S+)", proc.stderr)))
        if missing:
            raise BuildError(f"ABI {abi}: linking {out.name}: undefined symbol {', '.join(missing)} (needed by the "
                             f"compiler's runtime library or the objects); add it to {stubs.SYMBOL_LIST}")
        raise BuildError(f"ABI {abi}: linking {out.name} failed:\n" + "\n".join(proc.stderr.strip().splitlines()[-20:]))


def tool(name: str) -> str:
    """An LLVM tool (llvm-readelf, llvm-objcopy), plain or clang-14's."""
    for candidate in (name, f"{name}-14"):
        if shutil.which(candidate):
            return candidate
    raise BuildError(f"{name} not found: it builds and checks Android libraries (apt-get install llvm)")


def dynamic_info(path: Path) -> tuple:
    """(DT_NEEDED names, defined global dynamic symbols) of a shared library."""
    proc = subprocess.run([tool("llvm-readelf"), "-dW", "--dyn-syms", str(path)], capture_output=True, text=True)
    if proc.returncode != 0:
        raise BuildError(f"llvm-readelf failed on {path}: {proc.stderr.strip()}")
    needed = re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", proc.stdout)
    exported = set()
    for line in proc.stdout.splitlines():
        parts = line.split()
        if len(parts) >= 8 and parts[0].endswith(":") and parts[4] in ("GLOBAL", "WEAK") and parts[6] != "UND":
            exported.add(parts[7].split("@")[0])
    return needed, sorted(exported)


def build_android_library(art, abi: str, out_path, *, extra_sources=(), include_dirs=(), exports=(),
                          api_level=None, quiet=True, module=None) -> AndroidLibrary:
    """Link the model of `art` (an Artifact with backend "c" or "vulkan";
    emitted again for the ABI's board when built for another, from `module`
    or the source model it records) plus `extra_sources` (C files, compiled
    with the same flags and `include_dirs`) into one Android shared library
    at out_path, exporting the model's API plus `exports` and nothing else."""
    backend = getattr(art, "backend", "c")
    board, compiler = compiler_for(abi, api_level, backend)
    out_path = Path(out_path)
    workdir = Path(art.out_dir) / "android" / abi
    workdir.mkdir(parents=True, exist_ok=True)
    src = _sources_for_board(art, board, module, workdir)
    prefix = art.prefix
    if not quiet:
        print(f"[relax-edge] {prefix}: Android library for {abi} ({compiler.target}, {compiler.kind})", flush=True)
    cflags = model_cflags(compiler)
    vk_flags = vulkan_cflags(compiler) if backend == "vulkan" else None
    objects = [workdir / f"{prefix}_c.o", workdir / f"{prefix}_weights_S.o"]
    run_tool([*(vk_flags or cflags), "-c", src / f"{prefix}.c", "-o", objects[0]], f"ABI {abi}: compiling {prefix}.c")
    run_tool([*compiler.command, "-fPIC", f"-Wa,-I{src}", "-c", src / f"{prefix}_weights.S", "-o", objects[1]],
             f"ABI {abi}: assembling {prefix}_weights.S")
    extra = [Path(s) for s in extra_sources]
    for i, path in enumerate(extra):
        if not path.exists():
            raise BuildError(f"ABI {abi}: extra source {path} does not exist")
        obj = workdir / f"extra{i}_{path.stem}.o"
        run_tool([*extra_cflags(compiler, include_dirs), "-c", path, "-o", obj], f"ABI {abi}: compiling {path.name}")
        objects.append(obj)
    objects += cached_objects(compiler.clang, cflags[1:], [*RUNTIME_SOURCES, *library_sources()])
    if vk_flags:   # the Vulkan module: libvulkan.so is dlopen'ed at run time, never linked
        objects += cached_objects(compiler.clang, vk_flags[1:], VULKAN_SOURCES)
    builtins = builtins_archive(compiler, board)
    provided = builtin_symbols(compiler, builtins)
    if compiler.kind == "clang-stubs":
        stubs.check_undefined(objects, f"ABI {abi}: {prefix}", provided)
    symbols = sorted({*api_symbols(src / f"{prefix}.h", prefix), *exports})
    defined = stubs.defined_symbols(objects)
    absent = [s for s in symbols if s not in defined]
    if absent:
        raise BuildError(f"ABI {abi}: exported symbol {', '.join(absent)} is defined by none of the sources")
    script = workdir / "exports.map"
    write_atomic(script, version_script(symbols))
    stub_libs = stubs.build_stubs(compiler.command[:2], workdir / "stubs") if compiler.kind == "clang-stubs" else []
    linked = workdir / out_path.name
    _link(compiler, abi, linked, objects, script, builtins, stub_libs)
    needed, exported = dynamic_info(linked)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    tmp = out_path.with_name(f".{out_path.name}.tmp")
    shutil.copyfile(linked, tmp)
    os.replace(tmp, out_path)
    note = THREADS_NOTE + (VULKAN_NOTE if backend == "vulkan" else "")
    return AndroidLibrary(out_path, abi, compiler.api_level, 1, needed, exported, compiler.kind, objects, note,
                          backend, board.name)
