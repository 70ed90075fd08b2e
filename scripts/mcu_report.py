"""The keyword-spotting DS-CNN (tests/frontend/kws_model.py) on the Cortex-M4F
(qemu-cortex-m4): int8 (ONNX Runtime's quantize_static, QDQ, per-channel)
against fp32 (the same ONNX before quantization), in flash, RAM and
instructions, with the int8 library kernels' Cortex-M DSP path (SMLAD)
against their generic C path on a copy of the board without `dsp`.

    python scripts/mcu_report.py [--no-nodsp] [--repeat N]

Figures (no times: under qemu-system-arm -icount shift=0 the runner's clock
counts instructions, to 40 instructions):

- flash: text+data of the model object (its code and the weights blob) and
  of the linked runner image (model, runtime, the kernels it links, the
  runner and picolibc's semihosting startup, the same in every build);
- RAM: the fixed arena (and the memory plan's lower bound), the state (none
  here) and the stack of one call of the model: the deepest sum of frames from
  the entry through the kernels by -fstack-usage (C builds; the runner's own
  frames and its heap-allocated tensors are not counted);
- instructions: the median of timed runs and the profile's per-kernel rows,
  with instructions per multiply-add of each layer kind.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import relax_edge as rxe  # noqa: E402
from relax_edge.target import load_board  # noqa: E402
from tests.emu import test_cortex_m4 as m4  # noqa: E402
from tests.frontend import kws_model  # noqa: E402

BOARD = "qemu-cortex-m4"
# multiply-adds per layer kind at batch 1 (test_cortex_m4's shapes: 25 x 5 outputs after the first conv)
PIXELS = 25 * 5
MACS = {"conv 10x4 (1 -> 64)": m4.CHANNELS * 40 * PIXELS,
        "depthwise 3x3 (x4)": m4.BLOCKS * m4.CHANNELS * 9 * PIXELS,
        "pointwise 1x1 64 -> 64 (x4)": m4.BLOCKS * m4.CHANNELS * m4.CHANNELS * PIXELS,
        "dense 64 -> 12": m4.CHANNELS * m4.CLASSES}


def layer_kind(row) -> str | None:
    """The MACS key of a profile row: by its kernel, the first conv by its node (the int8 graph names it
    after its output's QuantizeLinear, the fp32 one after the exporter's /conv1/Conv)."""
    kernel, node = row["kernel"], row["node"]
    if "depthwise" in kernel:
        return "depthwise 3x3 (x4)"
    if "dense" in kernel:
        return "dense 64 -> 12"
    if "conv" in kernel:
        first = node.startswith("/conv1/") or node == "/Relu_output_0_QuantizeLinear"
        return "conv 10x4 (1 -> 64)" if first else "pointwise 1x1 64 -> 64 (x4)"
    return None


def elf_flash(art) -> int:
    out = subprocess.run(["arm-none-eabi-size", str(art.runner)], capture_output=True, text=True, check=True).stdout
    text, data = out.splitlines()[1].split()[:2]
    return int(text) + int(data)


NODE = re.compile(r'node: \{ title: "([^"]+)" label: "[^\\"]*\\n([^:"]+):\d+:\d+(?:\\n(\d+) bytes)?')
EDGE = re.compile(r'edge: \{ sourcename: "([^"]+)" targetname: "([^"]+)"')


def call_graph(sources, flags, folder: Path):
    """{function: (frame bytes, defining file)} and {function: callees} by -fstack-usage -fcallgraph-info=su;
    a static function is named FILE:NAME, as GCC's call graph names it."""
    frames, calls = {}, {}
    for src in sources:
        obj = folder / f"{src.stem}.o"
        subprocess.run(["arm-none-eabi-gcc", "-O2", "-std=c99", f"-I{ROOT / 'runtime_c' / 'include'}",
                        "-fstack-usage", "-fcallgraph-info=su", *flags, "-c", str(src), "-o", str(obj)],
                       check=True, capture_output=True, text=True, cwd=folder, timeout=120)
        text = obj.with_suffix(".ci").read_text()
        for title, where, size in NODE.findall(text):
            if size:
                frames[title] = (int(size), where)
        for a, b in EDGE.findall(text):
            calls.setdefault(a, set()).add(b)
    return frames, calls


def deepest(fn: str, frames, calls, path=()) -> tuple[int, list[str]]:
    """The largest sum of frames along a call path from fn; the pool's indirect call goes to the *_task
    functions of the file that called rxe_threads_parallel_for."""
    callees = set(calls.get(fn, ()))
    if "__indirect_call" in callees:
        caller_file = frames.get(path[-1], (0, ""))[1] if path else ""
        callees = (callees - {"__indirect_call"}) | {t for t, (_, f) in frames.items()
                                                     if t.endswith("_task") and f == caller_file}
    best, best_path = 0, []
    for callee in sorted(callees - set(path) - {fn}):
        size, sub = deepest(callee, frames, calls, (*path, fn))
        if size > best:
            best, best_path = size, sub
    return frames.get(fn, (0, ""))[0] + best, [fn, *best_path]


def call_stack(art, board) -> tuple[int, list[str]]:
    """The deepest frame sum from PREFIX_main through the kernels (the board's flags)."""
    flags = [f for f in load_board(board).target.cflags if not f.startswith("-O")]
    sources = [art.out_dir / f"{art.prefix}.c", *sorted((ROOT / "runtime_c" / "kernels").glob("*.c")),
               *(ROOT / "runtime_c" / "src" / f for f in ("check.c", "status.c", "threads.c"))]
    with tempfile.TemporaryDirectory() as d:
        frames, calls = call_graph(sources, [*flags, "-DRXE_NO_THREADS", "-DRXE_NO_LIBM", f"-I{art.out_dir}"],
                                   Path(d))
    return deepest(f"{art.prefix}_main", frames, calls)


def counts(art, board, repeat: int):
    x = kws_model.make_input(0)
    with rxe.connect(board) as dev:
        m = dev.load(art)
        stats = m.benchmark(x, warmup=1, repeat=repeat)
        prof = m.profile(x)
    kernels: dict = {}
    for row in prof["rows"]:
        k = kernels.setdefault(row["kernel"], {"calls": 0, "instructions": 0})
        k["calls"] += row["calls"]
        k["instructions"] += row["total_instructions"]
    return stats["median_instructions"], prof, kernels


def kind_totals(prof) -> dict:
    """{layer kind: instructions} of one profile, the rows no kind names under "other"."""
    totals = dict.fromkeys([*MACS, "other"], 0)
    for row in prof["rows"]:
        totals[layer_kind(row) or "other"] += row["total_instructions"]
    return totals


def print_kinds(profiles) -> None:
    """Instructions per layer kind side by side (and per multiply-add), one column a build."""
    keys = list(profiles)
    totals = {key: kind_totals(profiles[key][1]) for key in keys}
    print(f"\n{'instructions (per multiply-add)':<30}" + "".join(f"{' '.join(k):>26}" for k in keys))
    for kind in [*MACS, "other"]:
        cells = []
        for key in keys:
            n = totals[key][kind]
            cells.append(f"{n:>14,} ({n / MACS[kind]:5.2f})" if kind in MACS else f"{n:>22,}")
        print(f"{kind:<30}" + "".join(f"{c:>26}" for c in cells))
    print(f"{'run':<30}" + "".join(f"{profiles[k][0]:>22,}    " for k in keys))


def build(path: Path, board, backend: str, folder: Path, name: str):
    return rxe.build(rxe.from_onnx(str(path)), board=board, backend=backend, out_dir=folder / name, name="kws")


def report(args) -> int:
    quant, floating = kws_model.get_quant_model("int8"), kws_model.get_float_model()
    with tempfile.TemporaryDirectory() as d:
        folder = Path(d)
        boards = {"dsp": BOARD}
        if args.nodsp:
            boards["generic C"] = str(kws_model.board_without_dsp(folder))
        builds = {}
        for model, path in (("int8", quant), ("fp32", floating)):
            for backend in ("c", "llvm"):
                builds[(model, backend, "dsp")] = build(path, BOARD, backend, folder, f"{model}_{backend}")
        if args.nodsp:
            builds[("int8", "c", "generic C")] = build(quant, boards["generic C"], "c", folder, "int8_c_nodsp")
        print(f"{'build':<24}{'weights':>9}{'model t+d':>11}{'image t+d':>11}{'arena':>8}{'bound':>8}"
              f"{'stack':>7}{'RAM':>8}{'instructions':>14}")
        profiles, paths = {}, {}
        for (model, backend, path_kind), art in builds.items():
            board = boards[path_kind]
            sizes = art.sizes["model"]
            model_flash = sizes["text"] + sizes["data"]
            bound = kws_model.arena_lower_bound(quant if model == "int8" else floating, board)
            stack, stack_path = call_stack(art, board) if backend == "c" else (None, [])
            ram = art.workspace_bytes + (art.state_bytes or 0) + (stack or 0)
            total, prof, kernels = counts(art, board, args.repeat)
            profiles[(model, backend, path_kind)] = (total, prof, kernels)
            if stack_path:
                paths[(model, backend, path_kind)] = stack_path
            label = f"{model} {backend} ({path_kind})"
            print(f"{label:<24}{art.weights_bytes:>9,}{model_flash:>11,}{elf_flash(art):>11,}"
                  f"{art.workspace_bytes:>8,}{bound:>8,}{stack if stack is not None else '-':>7}"
                  f"{ram if stack is not None else '-':>8}{total:>14,}")
        print("\nRAM = arena + state (0) + the model call's stack (C builds; -fstack-usage), along:")
        for key, path in paths.items():
            print(f"  {' '.join(key)}: {' -> '.join(p.rsplit(':', 1)[-1] for p in path)}")
        print("\nmultiply-adds per layer kind: " + ", ".join(f"{k} {v:,}" for k, v in MACS.items()))
        print_kinds(profiles)
        for key, (total, prof, kernels) in profiles.items():
            print(f"\n== {' '.join(key)}: {total:,} instructions per run "
                  f"(kernels {prof['kernels_instructions']:,} of {prof['run_instructions']:,} profiled)")
            for name, k in sorted(kernels.items(), key=lambda kv: -kv[1]["instructions"]):
                print(f"  {name:<44}{k['calls']:>4} calls{k['instructions']:>14,}")
            per_kind = dict.fromkeys(MACS, 0)
            for row in prof["rows"]:
                if layer_kind(row):
                    per_kind[layer_kind(row)] += row["total_instructions"]
            for kind, n in per_kind.items():
                print(f"  {kind:<44}{n:>14,} instructions{n / MACS[kind]:>7.2f} per multiply-add")
            for row in prof["rows"]:
                print(f"    {row['total_instructions']:>12,}  {row['kernel']:<36} {row['node']}")
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-nodsp", dest="nodsp", action="store_false",
                        help="leave out the int8 build on the board copy without the dsp feature")
    parser.add_argument("--repeat", type=int, default=3, help="timed runs per build (default 3)")
    return report(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
