"""Build a module into an artifact: generated C plus the runtime, compiled
with the board's toolchain.

    art = rxe.build(mod, board="qemu-aarch64", backend="c", out_dir="build/mlp")

`build` runs named stages, each a function from the previous one's output:

    optimize     optimize_module(mod, board, optimize) -> IRModule
    plan_memory  memory.plan_module(mod) -> MemoryPlans
    lower_host   codegen.host_program.lower_host(mod, plans, prefix, kernel_prefix) -> HostModule
    emit         emit(host, backend, board) -> CSources | LLVMSources, then build_key(...)
    toolchain    toolchain.Packager(...).package(sources, backend) -> object sizes

and records each one's wall time in `Artifact.stage_seconds`. Between emit
and toolchain the build key (a hash of the sources, the board, the flags and
the runtime's files) is compared with the output directory's `.build-key`:
an unchanged model is not recompiled.

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
and `artifact.json`. Files are written atomically. Object sizes (.text,
.data, .bss) of the model and the runtime are recorded on the artifact.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import sys
import tempfile
import time
from pathlib import Path

from .codegen.c.module import emit_c
from .codegen.host_program import HostModule, decoder_info, lower_host, symbol_prefix
from .files import write_atomic
from .ir.expr import Call, IRModule
from .memory import MemoryPlans, dump_plan, plan_module
from .target import DEFAULT_BOARD, Board, load_board, require_toolchain
from .toolchain import BuildError, Packager, Products, Toolchain, build_runner, runtime_files

__all__ = ["BACKENDS", "Artifact", "BuildError", "build", "build_runner", "emit", "optimize_module", "write_atomic"]

BACKENDS = ("c", "llvm", "vulkan")


@dataclasses.dataclass
class Artifact:
    """A built model: where its files are and what the build knows of it."""
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
    state_bytes: int | None = None       # a KV-cache decoder's state (its step function), else None
    decoder: dict | None = None          # its step function: max_context, vocab, states (host_program.decoder_info)
    weights_bytes: int = 0               # the constants' blob
    memory_plan: str = ""                # the plan dump (relax-edge compile --show-memory)
    runner: Path | None = None           # the executable that runs the model on tensor files
    server: Path | None = None           # the RPC server (Linux boards; profiled build)
    sizes: dict | None = None            # {"model": {"text":..}, "runtime": {...}} in bytes
    board_file: str = ""
    tuning: str = ""                     # the tuning table used: its path, "given" (build(tuning=...)) or ""
    tuning_flags: list = dataclasses.field(default_factory=list)   # its -D flags, for a runtime compiled apart
    sanitize: bool = False               # built with ASan + UBSan (no shared library then)
    stage_seconds: dict = dataclasses.field(default_factory=dict)   # stage name -> wall seconds, in order

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


class StageClock:
    """Runs a build's stages, keeping each one's wall time by name in order
    (printed as it ends unless quiet)."""

    def __init__(self, quiet: bool):
        self.quiet = quiet
        self.seconds: dict = {}

    def run(self, name: str, stage, *args):
        start = time.perf_counter()
        result = stage(*args)
        self.seconds[name] = time.perf_counter() - start
        _progress(f"stage {name}: {self.seconds[name]:.2f}s", self.quiet)
        return result


def needs_legalize(mod: IRModule) -> bool:
    """The module still calls operators (not only graph functions)."""
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


def optimize_module(mod: IRModule, board: Board, optimize: bool = True, backend: str = "c") -> IRModule:
    """The optimize stage: a module with operator calls through the pipeline
    for `board` (relax_edge/pipeline.py), or only legalized with
    optimize=False; a legalized module as it is. For backend "vulkan" the
    `dispatch` pass runs for the Vulkan target: matmuls become the library
    call the Vulkan host dispatches with its tiled / GEMV shaders, every
    other operator stays a tensor program, scheduled with no vector width
    and no threads."""
    from .pipeline import default_passes
    from .pipeline import optimize as run_pipeline
    from .transform.legalize import legalize
    if not needs_legalize(mod):
        return mod
    from .transform.dedupe import dedupe
    if not optimize:
        return dedupe(legalize(mod, board.target))
    passes = default_passes(board)
    if backend != "vulkan":
        return run_pipeline(mod, board, passes)
    from .codegen.vulkan import matmul
    from .codegen.vulkan.module import MAX_SERIAL_ITERATIONS
    from .ir.expr import IRModule
    from .transform.dispatch import VULKAN_FAMILIES, dispatch
    from .transform.schedule import schedule_program
    at = passes.index("dispatch")
    mod = dispatch(run_pipeline(mod, board, passes[:at]), VULKAN_FAMILIES, target="vulkan",
                   max_k=matmul.max_k(MAX_SERIAL_ITERATIONS))
    mod = run_pipeline(mod, board, [p for p in passes[at + 1:] if p != "schedule"])
    # no CPU vectors or threads: the shaders' reductions stay the plain loops the emitter maps to workgroups
    return IRModule(mod.functions, {n: schedule_program(p, 0, False) for n, p in mod.tensor_programs.items()},
                    mod.externs)


def kernel_prefix(backend: str, name: str) -> str:
    """How the backend names kernels: static k_NAME in PREFIX.c, exported
    PREFIX_k_NAME from the LLVM kernels' object."""
    return f"{symbol_prefix(name)}_k_" if backend == "llvm" else "k_"


def emit(host: HostModule, backend: str, board: Board, profile: bool = True):
    """The emit stage: the backend's sources (CSources or LLVMSources) of a
    host module; with `profile` the LLVM backend adds the profiled host
    module (the server's on hosted boards, the runner's on bare metal)."""
    if backend == "llvm":
        from .codegen.llvm import emit_llvm
        return emit_llvm(host, board.target.freestanding, profiled=profile)
    if backend == "vulkan":
        from .codegen.vulkan.module import emit_vulkan
        return emit_vulkan(host, board)
    return emit_c(host)


def _check_fixed_arena(plans: MemoryPlans) -> None:
    """A fixed arena must fit the ABI's 64-bit sizes (and any real memory)."""
    for fn, memory in plans.functions.items():
        plan = memory.plan
        if plan.is_bounded and plan.total.value >= 2**63:
            raise BuildError(f"function {fn}: the memory plan needs {plan.total.value:.3e} bytes at the size bounds, "
                             "more than 64-bit sizes hold; lower the bounds (--dim NAME=LO..HI)")


def build_key(sources, backend: str, board: Board, tc: Toolchain, opt_level: str | None, emit_llvm: bool,
              profile: bool = True) -> str:
    """The hash of everything the products depend on: the sources and the
    weights (the LLVM modules, the machine and its options), the board, the
    toolchain and every runtime file."""
    digest = hashlib.sha256()
    if backend == "llvm":
        from .codegen.llvm import machine_spec
        for stem in sorted(sources.modules):
            digest.update(str(sources.modules[stem]).encode())
        digest.update(repr((machine_spec(board.target), opt_level, emit_llvm)).encode())
    for fname in sorted(sources.files):
        digest.update(sources.files[fname].encode())
    digest.update(sources.weights)
    digest.update(repr((board.name, tc, profile)).encode())
    for path in runtime_files():
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def emit_keyed(host, backend: str, board: Board, tc: Toolchain, opt_level: str | None, emit_llvm: bool,
               profile: bool = True):
    """The emit stage: the sources of `host` and their build key."""
    sources = emit(host, backend, board, profile)
    return sources, build_key(sources, backend, board, tc, opt_level, emit_llvm, profile)


def _toolchain(board: Board, opt_level: str | None, sanitize: bool, table: dict) -> Toolchain:
    tc = Toolchain.for_board(board, opt_level, table)
    return tc.sanitized(board) if sanitize else tc


def _up_to_date(out_dir: Path, key: str, products: Products) -> bool:
    """The output directory holds a build with this key."""
    stamp = out_dir / ".build-key"
    return stamp.exists() and stamp.read_text() == key and (out_dir / "artifact.json").exists() and products.exist()


def build(mod: IRModule, board=DEFAULT_BOARD, backend: str = "c", out_dir=None, name: str = "model",
          opt_level: str | None = None, quiet: bool = True, source: dict | None = None,
          emit_llvm: bool = False, optimize: bool = True, sanitize: bool = False, profile: bool = True,
          tuning: dict | None = None) -> Artifact:
    """Compile `mod` for `board` (a name or a YAML path) into `out_dir`;
    `backend` "c", "llvm" (kernels and host functions through LLVM) or
    "vulkan" (kernels as SPIR-V compute shaders run by runtime_c/vulkan). A
    module with operator calls goes through the optimizing pipeline
    (relax_edge/pipeline.py), or is only legalized with optimize=False.
    sanitize=True builds the runner and the server with ASan + UBSan
    (LLVM-generated kernels stay uninstrumented). profile=False leaves out
    the per-kernel profiler (the server's, or the bare-metal runner's, copy
    of the model compiled with RXE_PROFILE): a build of half the compiler
    work whose `profile()` is refused by name; run, benchmark and generate
    are unchanged. The board's tuning table (relax_edge/tuning.py), or
    `tuning` ({kernel: {knob: value}}) when given, sets the runtime kernels'
    constants (-D flags, in the build key) and their Python mirrors."""
    from . import tuning as tuning_tables
    board = load_board(board)
    require_toolchain(board)
    if backend not in BACKENDS:
        raise BuildError(f"unknown backend {backend!r}; choose one of {', '.join(BACKENDS)}")
    if backend == "vulkan" and not board.vulkan:
        raise BuildError(f"board {board.name} has no vulkan: section; build for a Vulkan board (host-vulkan)")
    start = time.perf_counter()
    out_dir = Path(out_dir) if out_dir is not None else Path(tempfile.mkdtemp(prefix="relax-edge-"))
    out_dir.mkdir(parents=True, exist_ok=True)
    table, table_source = tuning_tables.resolve(board, tuning)
    tc = _toolchain(board, opt_level, sanitize, table)
    stages = StageClock(quiet)
    with tuning_tables.mirrors(table):
        mod = stages.run("optimize", optimize_module, mod, board, optimize, backend)
    plans = stages.run("plan_memory", plan_module, mod)
    _check_fixed_arena(plans)
    host = stages.run("lower_host", lower_host, mod, plans, name, kernel_prefix(backend, name))
    sources, key = stages.run("emit", emit_keyed, host, backend, board, tc, opt_level, emit_llvm, profile)
    products = Products.of(out_dir, host.prefix, tc, board)
    artifact = Artifact(out_dir, host.prefix, board.name, backend, products.shared, products.static,
                        out_dir / f"{host.prefix}.h", host.signature, source=source,
                        workspace_bytes=host.main.fixed_workspace, memory_plan=dump_plan(plans["main"].plan),
                        runner=products.runner, server=products.server, board_file=board.path, sanitize=sanitize,
                        stage_seconds=stages.seconds, decoder=decoder_info(host), weights_bytes=len(sources.weights),
                        tuning=table_source, tuning_flags=tuning_tables.cflags(table))
    artifact.state_bytes = artifact.decoder["state_bytes"] if artifact.decoder else None
    if _up_to_date(out_dir, key, products):
        artifact.cached = True
        artifact.sizes = json.loads((out_dir / "artifact.json").read_text()).get("sizes")
        _finish(artifact, start)
        _progress(f"{out_dir}: up to date", quiet)
        return artifact
    if table_source:
        _progress(f"tuning table: {table_source}", quiet)
    _progress(f"compiling {host.prefix} for {board.name} with {tc.cc} "
              f"({len(sources.weights) / 1e6:.1f} MB of constants)", quiet)
    packager = Packager(tc, board, out_dir, products, opt_level, emit_llvm, profile)
    artifact.sizes = stages.run("toolchain", packager.package, sources, backend)
    _finish(artifact, start)
    write_atomic(out_dir / ".build-key", key)
    _progress(f"built {host.prefix} for {board.name} in {artifact.build_seconds:.1f}s", quiet)
    return artifact


def _finish(artifact: Artifact, start: float) -> None:
    """The build's time on the artifact, and artifact.json."""
    artifact.build_seconds = time.perf_counter() - start
    write_atomic(artifact.out_dir / "artifact.json", json.dumps(artifact.to_json(), indent=1))
