"""The `relax-edge` command line.

    relax-edge compile MODEL.onnx|MODEL.gguf [--board B] [--backend c] [-o DIR] [--dim seq=1..512] [--show-memory]
    relax-edge run MODEL.onnx|DIR [--board B] [--inputs in.npz] [--dim seq=16] [--check] [--output out.npz]
    relax-edge bench MODEL.onnx|DIR [--board B] [--repeat N] [--profile] [--json out.json]
    relax-edge bench MODEL.onnx|DIR --generate [--prompt-len L] [--new-tokens N] [--json out.json]
    relax-edge generate MODEL.onnx|MODEL.gguf|DIR --prompt-ids 1,2,3 | --prompt TEXT [--tokenizer tokenizer.json]
        [--max-new-tokens N] [--temperature T] [--top-k K] [--top-p P] [--seed S] [--stop 2,3]
    relax-edge farm bench --farm farm.yaml --models a.onnx b.onnx [--boards all] [--backend c llvm] [--resume]
    relax-edge farm report [--db results.db] [--since 7d] [--compare A B]
    relax-edge package MODEL.onnx|DIR --board android-arm64 [--abi all|arm64-v8a ...] --java-package com.example.model
        -o out/ [--dim seq=1..512] [--api-level 24]
    relax-edge boards [--check]
    relax-edge ops

The board defaults to qemu-aarch64 (for `run DIR`, to the board it was built for).
Microcontroller boards under an instruction-counting emulator (qemu-cortex-m4) bench
in instruction counts, labelled so.

Long steps print progress on stderr. Errors print one line,
`relax-edge: error: ...`, on stderr and exit with status 2 for usage errors
(bad flags or values, checked by the parser before any work), 130 when
interrupted, 1 for everything else; `--debug` adds the traceback. Results
(--output, --json, --plot) are written atomically.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import io
import json
import os
import re
import sys
import time
import traceback
import zipfile
import zlib
from pathlib import Path

import numpy as np

from . import __version__
from .cli_generate import add_bench_options, add_generate_parser
from .codegen.abi import MAX_THREADS
from .deploy.session import MAX_REPEAT
from .errors import RelaxEdgeError
from .farm.cli import add_farm_parser
from .target import DEFAULT_BOARD, load_board


def _say(msg: str) -> None:
    print(f"[relax-edge] {msg}", file=sys.stderr, flush=True)


class UsageError(Exception):
    """A bad command line: reported in one line, exit status 2."""


class Parser(argparse.ArgumentParser):
    """argparse whose errors have the command's one-line form
    (`relax-edge: error: ...`) instead of printing usage and exiting."""

    def error(self, message):
        # "argument --dim: 'x': ..." -> "--dim 'x': ...", "argument --repeat: ..." -> "--repeat: ..."
        message = re.sub(r"^argument (?:\S+/)?(\S+): (?=')", r"\1 ", message)
        message = re.sub(r"^argument (?:\S+/)?(\S+): ", r"\1: ", message)
        raise UsageError(f"{message} (see {self.prog} --help)")


def _dim_value(item: str):
    """NAME=LO..HI | NAME=..HI | NAME=N  ->  (name, (lo, hi) or n)"""
    m = re.fullmatch(r"([A-Za-z_]\w*)=(?:(\d*)\.\.(\d+)|(\d+))", item)
    if not m:
        raise RelaxEdgeError(f"--dim {item!r}: expected NAME=LO..HI, NAME=..HI or NAME=N")
    name, lo, hi, exact = m.groups()
    if exact:
        if not 1 <= int(exact) <= MAX_DIM:
            raise RelaxEdgeError(f"--dim {item!r}: a size must be in [1, {MAX_DIM}]")
        return name, int(exact)
    low, high = (int(lo) if lo else 1), int(hi)
    if not 1 <= high <= MAX_DIM or low > high:
        raise RelaxEdgeError(f"--dim {item!r}: expected LO <= HI and 1 <= HI <= {MAX_DIM}")
    return name, (low, high)


def _dim_arg(item: str) -> str:
    """The parser's check of one --dim (the value stays text for parse_dims)."""
    try:
        _dim_value(item)
    except RelaxEdgeError as err:
        raise argparse.ArgumentTypeError(str(err).removeprefix("--dim ")) from None
    return item


def parse_dims(items) -> dict:
    """--dim NAME=LO..HI | NAME=..HI | NAME=N  ->  {name: (lo, hi) or n}"""
    return dict(_dim_value(item) for item in items or [])


def _int_arg(low: int, high: int | None = None):
    """An argparse type: an integer in [low, high]."""
    def parse(text: str) -> int:
        try:
            value = int(text, 10)
        except ValueError:
            value = None
        if value is None or value < low or (high is not None and value > high):
            span = f"an integer >= {low}" if high is None else f"an integer in [{low}, {high}]"
            raise argparse.ArgumentTypeError(f"expected {span}, got {text!r}")
        return value
    return parse


MAX_DIM = 2**31 - 1   # the largest --dim: sizes, products and byte counts stay far inside int64


# files ----------------------------------------------------------------------
def _os_message(err: OSError, with_path: bool = True) -> str:
    """One line for an OSError: what failed on which path."""
    what = err.strerror or str(err)
    if err.errno == errno.ENOSPC:
        what = "no space left on the device"
    return f"{err.filename}: {what}" if err.filename and with_path else what


def _check_output_file(path: str, flag: str) -> None:
    """Fail before any work when `path` cannot be written."""
    target = Path(path)
    if target.is_dir():
        raise RelaxEdgeError(f"{flag} {path}: is a folder, expected a file name")
    folder = target.parent
    if folder.exists() and not folder.is_dir():
        raise RelaxEdgeError(f"{flag} {path}: {folder} is not a folder")
    if not folder.is_dir():
        raise RelaxEdgeError(f"{flag} {path}: the folder {folder} does not exist")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise RelaxEdgeError(f"{flag} {path}: the folder {folder} is not writable")


def _check_output_dir(path, flag: str) -> None:
    """Fail before any work when the folder `path` cannot be made or written."""
    target = Path(path)
    existing = target
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        raise RelaxEdgeError(f"{flag} {path}: {existing} is not a folder")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise RelaxEdgeError(f"{flag} {path}: {existing} is not writable")


def _write_atomic(path, data: bytes) -> None:
    """A result file, written atomically and synced (files.write_atomic);
    a failure is one error line naming the file."""
    from .files import write_atomic
    try:
        write_atomic(path, data, durable=True)
    except OSError as err:
        raise RelaxEdgeError(f"cannot write {path}: {_os_message(err, with_path=False)}") from None


def _check_model(path: str) -> None:
    if not Path(path).exists():
        raise RelaxEdgeError(f"{path}: no such file or directory (expected an ONNX file or a directory made "
                             "by relax-edge compile)")


def _from_file(path, **kwargs):
    """The model file imported: from_gguf for a .gguf, from_onnx otherwise."""
    if str(path).endswith(".gguf"):
        from .frontend.gguf import from_gguf
        return from_gguf(path, **kwargs)
    from .frontend import from_onnx
    return from_onnx(path, **kwargs)


def _import(model: str, dims: dict, max_context=None):
    bounds = {k: (v if isinstance(v, tuple) else (v, v)) for k, v in dims.items()}
    start = time.perf_counter()
    _say(f"importing {model}")
    mod = _from_file(model, dim_bounds=bounds or None, max_context=max_context)
    _say(f"imported in {time.perf_counter() - start:.1f}s")
    return mod, {"onnx": str(Path(model).resolve()), "dim_bounds": {k: list(v) for k, v in bounds.items()},
                 "max_context": max_context}


def _compile(model: str, board: str, backend: str, out_dir, dims: dict, name: str | None, emit_llvm=False,
             optimize=True, sanitize=False, max_context=None):
    """The imported module and its artifact; the import's wall time is the
    first entry of the returned stage times, the build's stages follow."""
    from .build import build
    start = time.perf_counter()
    mod, source = _import(model, dims, max_context)
    imported = time.perf_counter() - start
    name = name or Path(model).stem
    out_dir = Path(out_dir) if out_dir else Path("build") / name
    art = build(mod, board=board, backend=backend, out_dir=out_dir, name=name, quiet=False, source=source,
                emit_llvm=emit_llvm, optimize=optimize, sanitize=sanitize)
    return mod, art, {"import": imported, **art.stage_seconds}


def _stage_table(stage_seconds: dict, cached: bool) -> list:
    """Lines of `compile --stages`: each stage's seconds and share of the total."""
    total = sum(stage_seconds.values())
    lines = ["  stages" + (" (up to date: not compiled again)" if cached else "") + ":"]
    for stage, seconds in stage_seconds.items():
        share = 100.0 * seconds / total if total > 0 else 0.0
        lines.append(f"    {stage:<12}{seconds:>9.3f} s{share:>6.1f}%")
    lines.append(f"    {'total':<12}{total:>9.3f} s")
    return lines


def cmd_compile(args) -> int:
    if args.emit_llvm and args.backend != "llvm":
        raise UsageError("--emit-llvm needs --backend llvm")
    _check_model(args.model)
    if args.output:
        _check_output_dir(args.output, "-o")
    _, art, stage_seconds = _compile(args.model, args.board or DEFAULT_BOARD, args.backend, args.output,
                                     parse_dims(args.dim), args.name, args.emit_llvm, args.optimize, args.sanitize,
                                     args.max_context)
    sig = art.signature["main"]
    print(f"compiled {args.model} for {art.board} ({art.backend}) into {art.out_dir}")
    print("  tuning table: " + (art.tuning or "none (the kernels' defaults)"))
    print("  inputs:  " + ", ".join(f"{i['name']}: {i['dtype']}{i['shape']}" for i in sig["inputs"]))
    print("  outputs: " + ", ".join(f"{o['dtype']}{o['shape']}" for o in sig["outputs"]))
    shared = f"{art.shared_library.name} (shared), " if art.shared_library is not None else ""
    print(f"  library: {shared}{art.static_library.name} (static), header {art.header.name}")
    if art.sanitize:
        print(f"  sanitized (ASan + UBSan): {art.runner.name}" + (f", {art.server.name}" if art.server else ""))
    if art.sizes:
        m, r = art.sizes["model"], art.sizes["runtime"]
        print(f"  size on {art.board}: model .text {m['text']} .data {m['data']} .bss {m['bss']}; "
              f"runtime .text {r['text']} .data {r['data']} .bss {r['bss']} (bytes)")
    if art.workspace_bytes is not None:
        print(f"  workspace: a fixed arena of {art.workspace_bytes} bytes ({art.prefix.upper()}_WORKSPACE_BYTES)")
    else:
        sizes = ", ".join(art.signature["main"]["sizes"])
        print(f"  workspace: depends on {sizes}; ask {art.prefix}_main_workspace_size() before the first run")
    if art.decoder:
        _print_decoder_bill(art)
    if args.show_memory:
        print(art.memory_plan, end="")
    if args.stages:
        print("\n".join(_stage_table(stage_seconds, art.cached)))
    return 0


def _print_decoder_bill(art) -> None:
    """A KV-cache decoder's RAM at its context bound: the weights, the step's arena, the state."""
    d, arena = art.decoder, art.signature["step"]["fixed_workspace_bytes"] or 0
    vocab = d["vocab"]
    total = art.weights_bytes + arena + art.state_bytes
    print(f"  decoder (generate): step, context bound {d['max_context']}, vocab {vocab}, "
          f"{len(d['states'])} cache tensors of {tuple(d['states'][0])}")
    print(f"  RAM at the bound: weights {_mb(art.weights_bytes)} + arena {_mb(arena)} + state {_mb(art.state_bytes)} "
          f"({art.prefix.upper()}_STATE_BYTES) = {_mb(total)}, and the loop's scratch (rxe_decoder_scratch_bytes: "
          "about 12 bytes a vocabulary entry)")


def _mb(n: int) -> str:
    return f"{n} B" if n < 10_000 else f"{n / 1e6:.2f} MB"


def _random_inputs(signature: dict, sizes: dict, seed: int) -> list:
    rng = np.random.default_rng(seed)
    arrays = []
    for info in signature["inputs"]:
        dims = [d.strip() for d in info["shape"].strip("(),").split(",") if d.strip()]
        shape = []
        for d in dims:
            if d.isdigit():
                shape.append(int(d))
            elif d in sizes:
                shape.append(sizes[d])
            else:
                raise RelaxEdgeError(f"input {info['name']}: dimension {d} needs a value: pass --dim {d}=N")
        dtype = info["dtype"]
        if dtype.startswith("float"):
            arrays.append(rng.standard_normal(shape).astype(dtype))
        elif dtype == "bool":
            arrays.append(rng.random(shape) > 0.5)
        else:
            arrays.append(rng.integers(0, 10, shape).astype(dtype))
    return arrays


def _default_sizes(art, given: dict) -> dict:
    sizes = {k: (v if isinstance(v, int) else v[1]) for k, v in given.items()}
    bounds = (art.source or {}).get("dim_bounds", {})
    for info in art.signature["main"]["inputs"]:
        for d in info["shape"].strip("(),").split(","):
            d = d.strip()
            if d and not d.isdigit() and d not in sizes:
                sizes[d] = min(bounds[d][1], 8) if d in bounds else 8
    return sizes


def _read_tensor_file(path: str) -> dict:
    """The arrays of an .npz (by name) or an .npy (as arr_0); never unpickles."""
    try:
        with open(path, "rb") as f:
            magic = f.read(6)
            if not (magic.startswith(b"PK") or magic == b"\x93NUMPY"):  # a zip (.npz) or an .npy
                raise RelaxEdgeError(f"{path}: not an .npz or .npy file")
            f.seek(0)
            data = np.load(f, allow_pickle=False)
            if isinstance(data, np.ndarray):
                return {"arr_0": data}
            with data:
                return {name: data[name] for name in data.files}
    except OSError as err:
        raise RelaxEdgeError(f"cannot read {path}: {err.strerror or err}") from None
    except ValueError as err:
        if "pickle" in str(err).lower():
            raise RelaxEdgeError(f"{path}: holds pickled (object) arrays, which are not loaded; save plain numeric "
                                 "arrays with numpy.savez") from None
        raise RelaxEdgeError(f"{path}: not a readable .npz or .npy file ({err})") from None
    except (zipfile.BadZipFile, zlib.error, EOFError, KeyError, NotImplementedError) as err:
        raise RelaxEdgeError(f"{path}: not a readable .npz or .npy file (truncated or corrupt: {err})") from None


def _load_inputs(path: str, signature: dict) -> list:
    """The model's inputs from a tensor file: arrays named after the inputs,
    or arr_0, arr_1, ... in order (an .npy is arr_0). A file with too few or
    too many arrays fails as a run with that many inputs would."""
    from .deploy.session import RuntimeCheckError, count_message
    data = _read_tensor_file(path)
    names = [i["name"] for i in signature["inputs"]]
    files = list(data)
    if any(f in names for f in files):
        order = [data[n] for n in names if n in data]
        extra = [data[f] for f in files if f not in names]
    elif sorted(files) == sorted(f"arr_{k}" for k in range(len(files))):
        order, extra = [data[f"arr_{k}"] for k in range(len(files))], []
    else:
        raise RelaxEdgeError(f"{path}: expected arrays named {', '.join(names)} (or arr_0, arr_1, ...), "
                             f"found {', '.join(files) or 'none'}")
    if len(files) != len(names):
        raise RuntimeCheckError(1, count_message(signature, len(files)))
    if extra:
        missing = [n for n in names if n not in data]
        raise RelaxEdgeError(f"{path}: no array named {', '.join(missing)} (it holds {', '.join(files)})")
    return order


def _save_npz_atomic(path: str, arrays: dict) -> None:
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    _write_atomic(Path(path), buf.getvalue())


def _check_paths(args) -> None:
    """Every path a run or a benchmark reads or writes, before any work."""
    _check_model(args.model)
    if args.inputs and not Path(args.inputs).is_file():
        raise RelaxEdgeError(f"--inputs {args.inputs}: " + ("is a folder, expected an .npz or .npy file"
                                                             if Path(args.inputs).is_dir() else "no such file"))
    for flag in ("output", "json", "plot"):
        if getattr(args, flag, None):
            _check_output_file(getattr(args, flag), f"--{flag}")
    if args.build_dir and not Path(args.model).is_dir():
        _check_output_dir(args.build_dir, "--build-dir")


def cmd_run(args) -> int:
    from .deploy import connect
    _check_paths(args)
    dims = parse_dims(args.dim)
    art, board = _artifact_for(args, dims)
    sizes = _default_sizes(art, {k: v for k, v in dims.items() if isinstance(v, int)})
    if args.inputs:
        inputs = _load_inputs(args.inputs, art.signature["main"])
    else:
        inputs = _random_inputs(art.signature["main"], sizes, args.seed)
        _say("random inputs with " + (", ".join(f"{k}={v}" for k, v in sizes.items()) or "static shapes"))
    with connect(args.board or art.board_file or board) as dev, dev.load(art, threads=args.threads) as model:
        start = time.perf_counter()
        outputs = model.run(*inputs)
        ms = (time.perf_counter() - start) * 1e3
    print(f"ran {art.prefix} on {board} in {ms:.2f} ms (wall clock, including the transfer)")
    for k, out in enumerate(outputs):
        flat = out.reshape(-1)
        print(f"  output {k}: {out.dtype}{tuple(out.shape)} first values {np.array2string(flat[:4], precision=4)}")
    if args.output:
        _save_npz_atomic(args.output, {f"output{k}": o for k, o in enumerate(outputs)})
        print(f"  saved to {args.output}")
    if args.check:
        return _check(art, inputs, outputs)
    return 0


def _check(art, inputs, outputs) -> int:
    from . import interpret
    source = art.source or {}
    if "onnx" not in source:
        raise RelaxEdgeError(f"{art.out_dir}: --check needs the source model, which this artifact does not record")
    bounds = {k: tuple(v) for k, v in source.get("dim_bounds", {}).items()}
    reference = interpret(_from_file(source["onnx"], dim_bounds=bounds or None,
                                     max_context=source.get("max_context")), *inputs)
    reference = list(reference) if isinstance(reference, tuple) else [reference]
    worst, ok = 0.0, True
    for ours, ref in zip(outputs, reference):
        if ours.shape != ref.shape:
            print(f"check: FAIL, shape {ours.shape} vs reference {ref.shape}")
            return 1
        if ours.dtype.kind == "f":
            worst = max(worst, float(np.max(np.abs(ours - ref))) if ours.size else 0.0)
            ok &= bool(np.allclose(ours, ref, rtol=1e-4, atol=1e-5))
        else:
            ok &= bool(np.array_equal(ours, ref))
    print(f"check against the numpy reference: {'PASS' if ok else 'FAIL'} (max abs error {worst:.3g})")
    return 0 if ok else 1


def _artifact_for(args, dims):
    from .build import Artifact
    target = Path(args.model)
    if target.is_dir():
        try:
            art = Artifact.load(target)
        except (ValueError, KeyError, TypeError) as err:  # a damaged or foreign artifact.json
            raise RelaxEdgeError(f"{target / 'artifact.json'}: not a readable artifact description "
                                 f"({type(err).__name__}: {err}); rebuild with relax-edge compile") from None
    else:
        compile_dims = {k: v for k, v in dims.items() if isinstance(v, tuple)}
        _, art, _ = _compile(args.model, args.board or DEFAULT_BOARD, "c", args.build_dir, compile_dims, None)
    board = load_board(args.board).name if args.board else art.board
    if board != art.board:
        raise RelaxEdgeError(f"{art.out_dir} was built for board {art.board}, not {board}; "
                             f"rebuild with relax-edge compile --board {board}")
    return art, board


def cmd_bench(args) -> int:
    from .deploy import connect
    if args.generate:
        from .cli_generate import bench_generate
        return bench_generate(args)
    if args.plot and not args.profile:
        raise UsageError("--plot draws the profile: add --profile")
    _check_paths(args)
    dims = parse_dims(args.dim)
    art, board = _artifact_for(args, dims)
    sizes = _default_sizes(art, {k: v for k, v in dims.items() if isinstance(v, int)})
    inputs = _load_inputs(args.inputs, art.signature["main"]) if args.inputs else \
        _random_inputs(art.signature["main"], sizes, args.seed)
    _say(f"deploying {art.prefix} to {board}")
    with connect(args.board or art.board_file or board) as dev, dev.load(art, threads=args.threads) as model:
        _say(f"running {args.warmup} warm-up and {args.repeat} timed repeats")
        stats = model.benchmark(*inputs, warmup=args.warmup, repeat=args.repeat)
        prof = model.profile(*inputs) if args.profile else None
    shape = ", ".join(f"{k}={v}" for k, v in sizes.items()) or "static shapes"
    counts = stats.get("unit") == "instructions"   # an instruction-counting emulator: counts, not times
    print(f"{art.prefix} on {board} ({shape}), {stats['repeat']} repeats after {stats['warmup']} warm-up, "
          + ("instructions counted by the emulator (not a time)" if counts else "timed on the device"))
    if counts:
        print(f"  median {stats['median_instructions']:,.0f} instructions   min {stats['min_instructions']:,} "
              f"  max {stats['max_instructions']:,}")
    else:
        print(f"  median {stats['median_ms']:.3f} ms   mean {stats['mean_ms']:.3f} ms   std {stats['std_ms']:.3f} ms"
              f"   min {stats['min_ms']:.3f} ms   max {stats['max_ms']:.3f} ms")
    result = {"model": art.prefix, "board": board, "sizes": sizes, "benchmark": stats}
    if prof is not None:
        key = "instructions" if counts else "ms"
        run, kernels = _amount(prof["run_" + key], counts), _amount(prof["kernels_" + key], counts)
        print(f"profile: one run {run}, kernels {kernels}; top kernels:")
        print(f"  {'kernel':<28}{'node':<32}{'calls':>6}{'instructions' if counts else 'total ms':>14}{'share':>8}")
        for row in prof["rows"][:args.top]:
            total = f"{row['total_instructions']:,}" if counts else f"{row['total_ms']:.3f}"
            print(f"  {row['kernel'][:27]:<28}{row['node'][:31]:<32}{row['calls']:>6}{total:>14}{row['share']:>8.1%}")
        result["profile"] = prof
    if args.json:
        _write_atomic(Path(args.json), json.dumps(result, indent=1).encode())
        print(f"  wrote {args.json}")
    if args.plot:
        plot_profile(prof, f"{art.prefix} on {board} ({shape})", Path(args.plot), args.top)
        print(f"  wrote {args.plot}")
    return 0


def _amount(value, counts: bool) -> str:
    return f"{value:,.0f} instructions" if counts else f"{value:.3f} ms"


def plot_profile(prof: dict, title: str, path: Path, top: int) -> None:
    """A bar chart of the slowest kernels, written atomically as PNG."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise RelaxEdgeError("--plot needs matplotlib: pip install 'relax-edge[plot]'") from None
    rows = prof["rows"][:top][::-1]
    fig, ax = plt.subplots(figsize=(9, 0.35 * len(rows) + 1.5))
    key = "instructions" if prof.get("unit") == "instructions" else "ms"
    ax.barh([f"{r['kernel']}  ({r['node'][:40]})" for r in rows], [r[f"total_{key}"] for r in rows], color="#3b7dd8")
    ax.set_xlabel("instructions per run, counted by the emulator" if key == "instructions"
                  else "time per run (ms), measured on the device")
    ax.set_title(f"{title}: {_amount(prof['run_' + key], key == 'instructions')} per run", fontsize=10)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100)
    plt.close(fig)
    _write_atomic(path, buf.getvalue())


def _java_package_arg(text: str) -> str:
    """The parser's check of --java-package."""
    from .android.jni import check_java_package
    try:
        return check_java_package(text)
    except RelaxEdgeError as err:
        raise argparse.ArgumentTypeError(str(err).removeprefix("java package ")) from None


def cmd_package(args) -> int:
    """An Android app package: jniLibs/<abi>/*.so, the Java class, include/, README.md, model.json."""
    from .android.package import check_abis, package
    _check_model(args.model)
    _check_output_dir(args.output, "-o")
    board = load_board(args.board)
    if not board.android:
        raise RelaxEdgeError(f"board {board.name} builds no Android app library (no android: section); "
                             "use --board android-arm64, android-armv7 or android-x86_64")
    # a Vulkan board (android-arm64-vulkan): the model is built and checked for host-vulkan, then emitted
    # again for each ABI's Vulkan board by the package
    backend = "vulkan" if board.vulkan else "c"
    abis = check_abis(args.abi or [board.android["abi"]], backend)
    module = None
    if Path(args.model).is_dir():
        if args.dim:
            raise UsageError("--dim applies to an ONNX model; the directory is compiled already")
        args.board = None   # the artifact's own board; the Android libraries are emitted for each ABI
        art, _ = _artifact_for(args, {})
        if art.backend != backend:
            fix = ("compile it with --backend vulkan --board host-vulkan, or package it for android-arm64"
                   if backend == "vulkan" else "package it for android-arm64-vulkan or android-x86_64-vulkan")
            raise RelaxEdgeError(f"{art.out_dir} was built with backend {art.backend}, and board {board.name} "
                                 f"packages backend {backend}; {fix}")
    else:
        module, art, _ = _compile(args.model, "host-vulkan" if backend == "vulkan" else board.name, backend,
                                  args.build_dir, parse_dims(args.dim), args.name)
    pkg = package(art, args.java_package, args.output, abis, api_level=args.api_level, module=module, quiet=False)
    desc = pkg.model_json
    print(f"packaged {art.prefix} for Android into {pkg.path} (Java {desc['java_class']})")
    for abi, lib in pkg.libraries.items():
        print(f"  jniLibs/{abi}/{lib.path.name}: {desc['abis'][abi]['bytes']} bytes, API level {lib.api_level}, "
              f"{lib.toolchain}, {lib.backend}, needs {', '.join(lib.needed) or 'nothing'}, {lib.threads} thread(s)")
    arena = desc["arena_bytes"]
    print("  arena: " + (f"fixed, {arena} bytes" if arena is not None else "sized at load or by the first run"))
    print(f"  see {pkg.path / 'README.md'} for the Gradle and CMake lines; not run on a phone here")
    return 0


def cmd_boards(args) -> int:
    from .target import board_names, load_board, toolchain_problems
    failed = 0
    for name in board_names():
        try:
            b = load_board(name)
        except RelaxEdgeError as err:
            print(f"{name:<16} INVALID: {err}")
            failed += 1
            continue
        line = f"{b.name:<16} {b.transport:<6} {b.target.llvm_triple:<32} {b.description}"
        if args.check:
            problems = toolchain_problems(b)
            line += "\n" + (" " * 17) + ("toolchain ok" if not problems else "MISSING: " + "; ".join(problems))
            failed += bool(problems)
        print(line)
    return 1 if (args.check and failed) else 0


def cmd_ops(args) -> int:
    from .op import OPS
    for name in sorted(OPS):
        op = OPS[name]
        attrs = ", ".join(f"{k}={v!r}" for k, v in op.attrs.items()) or "-"
        print(f"{name:<18} {op.kind:<12} {attrs}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="relax-edge",
        description="relax_edge: compile ML models with dynamic shapes for embedded and mobile boards.")
    parser.add_argument("--version", action="version", version=f"relax-edge {__version__}")
    parser.add_argument("--debug", action="store_true", help="show the traceback of an error")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    repeats, threads = _int_arg(1, MAX_REPEAT), _int_arg(1, MAX_THREADS)

    p = sub.add_parser("compile", help="compile an ONNX model to a library for a board")
    p.add_argument("model", help="the ONNX file")
    p.add_argument("--board", help=f"a board name or YAML file (default {DEFAULT_BOARD})")
    p.add_argument("--backend", default="c", choices=["c", "llvm", "vulkan"],
                   help="code generator for the kernels (default c; vulkan: SPIR-V shaders, a Vulkan board)")
    p.add_argument("--emit-llvm", action="store_true",
                   help="with --backend llvm: keep the LLVM IR (.ll) of the kernels and host functions")
    p.add_argument("-o", "--output", help="output directory (default build/<model name>)")
    p.add_argument("--dim", action="append", type=_dim_arg, metavar="NAME=LO..HI",
                   help="bounds of a dynamic dimension")
    p.add_argument("--name", help="symbol prefix of the generated code (default: the file's stem)")
    p.add_argument("--max-context", type=_int_arg(1), help="context bound of a KV-cache decoder (see from_onnx)")
    p.add_argument("--show-memory", action="store_true", help="print the memory plan (table and timeline)")
    p.add_argument("--stages", action="store_true",
                   help="print the wall time of each stage: import, optimize, plan_memory, lower_host, emit, "
                        "toolchain")
    p.add_argument("--no-optimize", dest="optimize", action="store_false",
                   help="legalize only: no graph passes, fusion, library kernels or schedules")
    p.add_argument("--sanitize", action="store_true",
                   help="build the runner and the RPC server with AddressSanitizer and UndefinedBehaviorSanitizer "
                        "(Linux boards that link dynamically; no shared library)")
    p.set_defaults(func=cmd_compile)

    p = sub.add_parser("run", help="run a model (compiling it first if given an ONNX file)")
    p.add_argument("model", help="an ONNX file or a directory made by `relax-edge compile`")
    p.add_argument("--board", help="a board name or YAML file (default: the artifact's board)")
    p.add_argument("--inputs", help=".npz with one array per input (by input name)")
    p.add_argument("--dim", action="append", type=_dim_arg, metavar="NAME=N",
                   help="size of a dynamic dimension for random inputs")
    p.add_argument("--seed", type=_int_arg(0), default=0, help="seed of the random inputs")
    p.add_argument("--check", action="store_true", help="compare with the numpy reference of the source model")
    p.add_argument("--output", help="write the outputs to this .npz")
    p.add_argument("--threads", type=threads, help=f"threads of the runtime's pool, 1..{MAX_THREADS} (default 1)")
    p.add_argument("--build-dir", help="where to compile an ONNX file (default build/<model name>)")
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("bench", help="benchmark (and profile) a model on a board, timed on the device")
    p.add_argument("model", help="an ONNX file or a directory made by `relax-edge compile`")
    p.add_argument("--board", help="a board name or YAML file (default: the artifact's board)")
    p.add_argument("--repeat", type=repeats, default=20, help=f"timed repeats, 1..{MAX_REPEAT} (default 20)")
    p.add_argument("--warmup", type=_int_arg(0, MAX_REPEAT), default=3, help="warm-up runs (default 3)")
    p.add_argument("--profile", action="store_true", help="also print the per-kernel profile of one run")
    p.add_argument("--top", type=_int_arg(1), default=10, help="kernels shown in the profile (default 10)")
    p.add_argument("--threads", type=threads, help=f"threads of the runtime's pool, 1..{MAX_THREADS} (default 1)")
    p.add_argument("--json", help="write the statistics (and profile) to this file, atomically")
    p.add_argument("--plot", help="with --profile: draw the slowest kernels into this PNG")
    p.add_argument("--inputs", help=".npz with one array per input (by input name)")
    p.add_argument("--dim", action="append", type=_dim_arg, metavar="NAME=N", help="size of a dynamic dimension")
    p.add_argument("--seed", type=_int_arg(0), default=0, help="seed of the random inputs")
    p.add_argument("--build-dir", help="where to compile an ONNX file (default build/<model name>)")
    add_bench_options(p)
    p.set_defaults(func=cmd_bench)
    add_generate_parser(sub, threads)
    add_farm_parser(sub, repeats, threads)

    p = sub.add_parser("package", help="an Android app package: a JNI library per ABI, the Java class, a README")
    p.add_argument("model", help="an ONNX file or a directory made by `relax-edge compile`")
    p.add_argument("--board", default="android-arm64",
                   help="an Android board: its ABI is the default --abi (default android-arm64)")
    p.add_argument("--abi", action="append", choices=["all", "arm64-v8a", "armeabi-v7a", "x86_64"],
                   help="an ABI to build (repeat it; all: every ABI; default: the board's)")
    p.add_argument("--java-package", required=True, type=_java_package_arg, metavar="NAME",
                   help="the Java package of the generated class, e.g. com.example.model")
    p.add_argument("-o", "--output", required=True, help="the package folder (replaced if an earlier package)")
    p.add_argument("--dim", action="append", type=_dim_arg, metavar="NAME=LO..HI",
                   help="bounds of a dynamic dimension (an ONNX model)")
    p.add_argument("--name", help="symbol prefix of the generated code (default: the file's stem)")
    p.add_argument("--api-level", type=_int_arg(21), help="the Android API level (default: the board's)")
    p.add_argument("--build-dir", help="where to compile an ONNX file (default build/<model name>)")
    p.set_defaults(func=cmd_package)

    p = sub.add_parser("boards", help="list the boards (boards/*.yaml)")
    p.add_argument("--check", action="store_true", help="check each board's toolchain and emulator")
    p.set_defaults(func=cmd_boards)

    p = sub.add_parser("ops", help="list the operators relax_edge knows")
    p.set_defaults(func=cmd_ops)
    for p in sub.choices.values():  # --debug also after the command's name
        p.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help=argparse.SUPPRESS)
    return parser


def _error(message: str) -> None:
    print(f"relax-edge: error: {message}", file=sys.stderr, flush=True)


def _flush_stdout() -> None:
    """Flush stdout here, where a full disk or a closed pipe can be reported."""
    sys.stdout.flush()


def _stdout_error(err: OSError) -> str | None:
    """The message for a failed write to stdout (a full disk, a closed pipe),
    else None. Stdout then points at /dev/null so the exit flush is quiet."""
    if err.filename is not None or err.errno not in (errno.ENOSPC, errno.EPIPE, errno.EIO, errno.EFBIG):
        return None
    with contextlib.suppress(OSError, ValueError, AttributeError, io.UnsupportedOperation):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    return f"cannot write the output: {_os_message(err, with_path=False)}"


def main(argv=None) -> int:
    """The command line; returns the exit status (0, 1, 2 usage, 130 interrupted)."""
    argv = sys.argv[1:] if argv is None else [str(a) for a in argv]
    debug = False
    try:
        parser = build_parser()
        try:
            args = parser.parse_args(argv)
        except SystemExit as done:  # --help and --version
            _flush_stdout()
            return done.code if isinstance(done.code, int) else 0
        debug = args.debug
        if not getattr(args, "func", None):
            parser.print_help()
            _flush_stdout()
            return 0
        status = args.func(args)
        _flush_stdout()
        return status
    except UsageError as err:
        return _fail(str(err), 2, debug)
    except KeyboardInterrupt:
        return _fail("interrupted", 130, debug)
    except RelaxEdgeError as err:
        return _fail(str(err), 1, debug)
    except OSError as err:
        return _fail(_stdout_error(err) or _os_message(err), 1, debug)
    except Exception as err:  # noqa: BLE001 - the command line never shows a traceback
        return _fail(f"unexpected {type(err).__name__}: {err} (run with --debug for the traceback)", 1, debug)


def _fail(message: str, status: int, debug: bool) -> int:
    if debug:
        traceback.print_exc()
    _error(message)
    return status


if __name__ == "__main__":
    sys.exit(main())
