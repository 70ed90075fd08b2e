"""The `relax-edge` command line.

    relax-edge compile MODEL.onnx [--board B] [--backend c] [-o DIR] [--dim seq=1..512] [--show-memory]
    relax-edge run MODEL.onnx|DIR [--board B] [--inputs in.npz] [--dim seq=16] [--check] [--output out.npz]
    relax-edge bench MODEL.onnx|DIR [--board B] [--repeat N] [--profile] [--json out.json]
    relax-edge boards [--check]
    relax-edge ops

The board defaults to qemu-aarch64 (for `run DIR`, to the board it was built for).

Long steps print progress on stderr. Errors print one line naming the
problem and exit with status 1 (2 for usage errors).
"""

from __future__ import annotations

import argparse
import io
import json
import re
import sys
import time
from pathlib import Path

import numpy as np

from . import __version__
from .errors import RelaxEdgeError

from .target import DEFAULT_BOARD, load_board  # noqa: E402


def _say(msg: str) -> None:
    print(f"[relax-edge] {msg}", file=sys.stderr, flush=True)


def parse_dims(items) -> dict:
    """--dim NAME=LO..HI | NAME=..HI | NAME=N  ->  {name: (lo, hi) or n}"""
    out = {}
    for item in items or []:
        m = re.fullmatch(r"(\w+)=(?:(\d*)\.\.(\d+)|(\d+))", item)
        if not m:
            raise RelaxEdgeError(f"--dim {item!r}: expected NAME=LO..HI, NAME=..HI or NAME=N")
        name, lo, hi, exact = m.groups()
        out[name] = int(exact) if exact else (int(lo) if lo else 1, int(hi))
    return out


def _import(model: str, dims: dict):
    from .frontend import from_onnx
    bounds = {k: (v if isinstance(v, tuple) else (v, v)) for k, v in dims.items()}
    start = time.perf_counter()
    _say(f"importing {model}")
    mod = from_onnx(model, dim_bounds=bounds or None)
    _say(f"imported in {time.perf_counter() - start:.1f}s")
    return mod, {"onnx": str(Path(model).resolve()), "dim_bounds": {k: list(v) for k, v in bounds.items()}}


def _compile(model: str, board: str, backend: str, out_dir, dims: dict, name: str | None, emit_llvm=False,
             optimize=True):
    from .build import build
    mod, source = _import(model, dims)
    name = name or Path(model).stem
    out_dir = Path(out_dir) if out_dir else Path("build") / name
    art = build(mod, board=board, backend=backend, out_dir=out_dir, name=name, quiet=False, source=source,
                emit_llvm=emit_llvm, optimize=optimize)
    return mod, art


def cmd_compile(args) -> int:
    if args.emit_llvm and args.backend != "llvm":
        raise RelaxEdgeError("--emit-llvm needs --backend llvm")
    _, art = _compile(args.model, args.board or DEFAULT_BOARD, args.backend, args.output, parse_dims(args.dim),
                      args.name, args.emit_llvm, args.optimize)
    sig = art.signature["main"]
    print(f"compiled {args.model} for {art.board} ({art.backend}) into {art.out_dir}")
    print("  inputs:  " + ", ".join(f"{i['name']}: {i['dtype']}{i['shape']}" for i in sig["inputs"]))
    print("  outputs: " + ", ".join(f"{o['dtype']}{o['shape']}" for o in sig["outputs"]))
    print(f"  library: {art.shared_library.name} (shared), {art.static_library.name} (static), header {art.header.name}")
    if art.sizes:
        m, r = art.sizes["model"], art.sizes["runtime"]
        print(f"  size on {art.board}: model .text {m['text']} .data {m['data']} .bss {m['bss']}; "
              f"runtime .text {r['text']} .data {r['data']} .bss {r['bss']} (bytes)")
    if art.workspace_bytes is not None:
        print(f"  workspace: a fixed arena of {art.workspace_bytes} bytes ({art.prefix.upper()}_WORKSPACE_BYTES)")
    else:
        sizes = ", ".join(art.signature["main"]["sizes"])
        print(f"  workspace: depends on {sizes}; ask {art.prefix}_main_workspace_size() before the first run")
    if args.show_memory:
        print(art.memory_plan, end="")
    return 0


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


def _load_inputs(path: str, signature: dict) -> list:
    data = np.load(path)
    names = [i["name"] for i in signature["inputs"]]
    if all(n in data for n in names):
        return [data[n] for n in names]
    if all(f"arr_{k}" in data for k in range(len(names))):
        return [data[f"arr_{k}"] for k in range(len(names))]
    raise RelaxEdgeError(f"{path}: expected arrays named {', '.join(names)} (or arr_0, arr_1, ...), "
                         f"found {', '.join(data.files) or 'none'}")


def _save_npz_atomic(path: str, arrays: dict) -> None:
    from .build import write_atomic
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    write_atomic(Path(path), buf.getvalue())


def cmd_run(args) -> int:
    from .deploy import connect
    dims = parse_dims(args.dim)
    art, board = _artifact_for(args, dims)
    sizes = _default_sizes(art, {k: v for k, v in dims.items() if isinstance(v, int)})
    if args.inputs:
        inputs = _load_inputs(args.inputs, art.signature["main"])
    else:
        inputs = _random_inputs(art.signature["main"], sizes, args.seed)
        _say("random inputs with " + (", ".join(f"{k}={v}" for k, v in sizes.items()) or "static shapes"))
    with connect(args.board or art.board_file or board) as dev:
        loaded = dev.load(art, threads=args.threads)
        start = time.perf_counter()
        outputs = loaded.run(*inputs)
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
    from .frontend import from_onnx
    source = art.source or {}
    if "onnx" not in source:
        raise RelaxEdgeError(f"{art.out_dir}: --check needs the source model, which this artifact does not record")
    bounds = {k: tuple(v) for k, v in source.get("dim_bounds", {}).items()}
    reference = interpret(from_onnx(source["onnx"], dim_bounds=bounds or None), *inputs)
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
        art = Artifact.load(target)
    else:
        compile_dims = {k: v for k, v in dims.items() if isinstance(v, tuple)}
        _, art = _compile(args.model, args.board or DEFAULT_BOARD, "c", args.build_dir, compile_dims, None)
    board = load_board(args.board).name if args.board else art.board
    if board != art.board:
        raise RelaxEdgeError(f"{art.out_dir} was built for board {art.board}, not {board}; "
                             f"rebuild with relax-edge compile --board {board}")
    return art, board


def cmd_bench(args) -> int:
    from .deploy import connect
    dims = parse_dims(args.dim)
    art, board = _artifact_for(args, dims)
    sizes = _default_sizes(art, {k: v for k, v in dims.items() if isinstance(v, int)})
    inputs = _load_inputs(args.inputs, art.signature["main"]) if args.inputs else \
        _random_inputs(art.signature["main"], sizes, args.seed)
    _say(f"deploying {art.prefix} to {board}")
    with connect(args.board or art.board_file or board) as dev:
        m = dev.load(art, threads=args.threads)
        if not hasattr(m, "benchmark"):
            raise RelaxEdgeError(f"board {board}: benchmarking needs the RPC server, which this board's "
                                 "artifacts do not have")
        _say(f"running {args.warmup} warm-up and {args.repeat} timed repeats")
        stats = m.benchmark(*inputs, warmup=args.warmup, repeat=args.repeat)
        prof = m.profile(*inputs) if args.profile else None
        if hasattr(m, "close"):
            m.close()
    shape = ", ".join(f"{k}={v}" for k, v in sizes.items()) or "static shapes"
    print(f"{art.prefix} on {board} ({shape}), {stats['repeat']} repeats after {stats['warmup']} warm-up, "
          "timed on the device")
    print(f"  median {stats['median_ms']:.3f} ms   mean {stats['mean_ms']:.3f} ms   std {stats['std_ms']:.3f} ms   "
          f"min {stats['min_ms']:.3f} ms   max {stats['max_ms']:.3f} ms")
    result = {"model": art.prefix, "board": board, "sizes": sizes, "benchmark": stats}
    if prof is not None:
        print(f"profile: one run {prof['run_ms']:.3f} ms, kernels {prof['kernels_ms']:.3f} ms; top kernels:")
        print(f"  {'kernel':<28}{'node':<32}{'calls':>6}{'total ms':>10}{'share':>8}")
        for row in prof["rows"][:args.top]:
            print(f"  {row['kernel'][:27]:<28}{row['node'][:31]:<32}{row['calls']:>6}{row['total_ms']:>10.3f}"
                  f"{row['share']:>8.1%}")
        result["profile"] = prof
    if args.json:
        from .build import write_atomic
        write_atomic(Path(args.json), json.dumps(result, indent=1))
        print(f"  wrote {args.json}")
    if args.plot:
        if prof is None:
            raise RelaxEdgeError("--plot draws the profile: add --profile")
        plot_profile(prof, f"{art.prefix} on {board} ({shape})", Path(args.plot), args.top)
        print(f"  wrote {args.plot}")
    return 0


def plot_profile(prof: dict, title: str, path: Path, top: int) -> None:
    """A bar chart of the slowest kernels, written atomically as PNG."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise RelaxEdgeError("--plot needs matplotlib: pip install 'relax-edge[plot]'") from None
    from .build import write_atomic
    rows = prof["rows"][:top][::-1]
    fig, ax = plt.subplots(figsize=(9, 0.35 * len(rows) + 1.5))
    ax.barh([f"{r['kernel']}  ({r['node'][:40]})" for r in rows], [r["total_ms"] for r in rows], color="#3b7dd8")
    ax.set_xlabel("time per run (ms), measured on the device")
    ax.set_title(f"{title}: {prof['run_ms']:.2f} ms per run", fontsize=10)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100)
    plt.close(fig)
    write_atomic(path, buf.getvalue())


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
    parser = argparse.ArgumentParser(
        prog="relax-edge",
        description="relax_edge: compile ML models with dynamic shapes for embedded and mobile boards.")
    parser.add_argument("--version", action="version", version=f"relax-edge {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    p = sub.add_parser("compile", help="compile an ONNX model to a library for a board")
    p.add_argument("model", help="the ONNX file")
    p.add_argument("--board", help=f"a board name or YAML file (default {DEFAULT_BOARD})")
    p.add_argument("--backend", default="c", choices=["c", "llvm"], help="code generator for the kernels (default c)")
    p.add_argument("--emit-llvm", action="store_true", help="with --backend llvm: keep the LLVM IR (.ll) of the kernels and host functions")
    p.add_argument("-o", "--output", help="output directory (default build/<model name>)")
    p.add_argument("--dim", action="append", metavar="NAME=LO..HI", help="bounds of a dynamic dimension")
    p.add_argument("--name", help="symbol prefix of the generated code (default: the file's stem)")
    p.add_argument("--show-memory", action="store_true", help="print the memory plan (table and timeline)")
    p.add_argument("--no-optimize", dest="optimize", action="store_false",
                   help="legalize only: no graph passes, fusion, library kernels or schedules")
    p.set_defaults(func=cmd_compile)

    p = sub.add_parser("run", help="run a model (compiling it first if given an ONNX file)")
    p.add_argument("model", help="an ONNX file or a directory made by `relax-edge compile`")
    p.add_argument("--board", help="a board name or YAML file (default: the artifact's board)")
    p.add_argument("--inputs", help=".npz with one array per input (by input name)")
    p.add_argument("--dim", action="append", metavar="NAME=N", help="size of a dynamic dimension for random inputs")
    p.add_argument("--seed", type=int, default=0, help="seed of the random inputs")
    p.add_argument("--check", action="store_true", help="compare with the numpy reference of the source model")
    p.add_argument("--output", help="write the outputs to this .npz")
    p.add_argument("--threads", type=int, help="threads of the runtime's pool (default 1)")
    p.add_argument("--build-dir", help="where to compile an ONNX file (default build/<model name>)")
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("bench", help="benchmark (and profile) a model on a board, timed on the device")
    p.add_argument("model", help="an ONNX file or a directory made by `relax-edge compile`")
    p.add_argument("--board", help="a board name or YAML file (default: the artifact's board)")
    p.add_argument("--repeat", type=int, default=20, help="timed repeats (default 20)")
    p.add_argument("--warmup", type=int, default=3, help="warm-up runs (default 3)")
    p.add_argument("--profile", action="store_true", help="also print the per-kernel profile of one run")
    p.add_argument("--top", type=int, default=10, help="kernels shown in the profile (default 10)")
    p.add_argument("--threads", type=int, help="threads of the runtime's pool (default 1)")
    p.add_argument("--json", help="write the statistics (and profile) to this file, atomically")
    p.add_argument("--plot", help="with --profile: draw the slowest kernels into this PNG")
    p.add_argument("--inputs", help=".npz with one array per input (by input name)")
    p.add_argument("--dim", action="append", metavar="NAME=N", help="size of a dynamic dimension")
    p.add_argument("--seed", type=int, default=0, help="seed of the random inputs")
    p.add_argument("--build-dir", help="where to compile an ONNX file (default build/<model name>)")
    p.set_defaults(func=cmd_bench)

    p = sub.add_parser("boards", help="list the boards (boards/*.yaml)")
    p.add_argument("--check", action="store_true", help="check each board's toolchain and emulator")
    p.set_defaults(func=cmd_boards)

    p = sub.add_parser("ops", help="list the operators relax_edge knows")
    p.set_defaults(func=cmd_ops)
    return parser


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 0
    try:
        return args.func(args)
    except RelaxEdgeError as err:
        print(f"relax-edge: error: {err}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("relax-edge: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
