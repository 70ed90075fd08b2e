"""The stack use stated in relax_edge/kernels.h and kernels_kv.h against -fstack-usage.

Each kernel source (runtime_c/kernels/*.c) is compiled with -fstack-usage
and -fcallgraph-info=su (GCC 12) on the host (generic C, and the AVX2+FMA
path that -march=native picks on x86-64), aarch64 (NEON) and Cortex-M4
(generic C, the boards/qemu-cortex-m4.yaml flags). The .ci call graphs of
all sources are merged (rxe_lib_conv2d_f32 calls rxe_gemm_run in gemm.c) and
the figure of an entry point is the largest sum of frames along a call path
from it. Functions outside runtime_c/kernels/ (rxe_error_set,
rxe_threads_parallel_for, memset) count 0; the one indirect call, g->pack_b in
gemm.c, is resolved by PACK_B below. Every stated bound must hold on every
compiler, and no frame may be dynamic and unbounded (a VLA or alloca):
"dynamic,bounded" (x86-64 pushes of outgoing arguments) is accepted.
"""

import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
KERNELS = ROOT / "runtime_c" / "kernels"
HEADER = ROOT / "runtime_c" / "include" / "relax_edge" / "kernels.h"
KV_HEADER = ROOT / "runtime_c" / "include" / "relax_edge" / "kernels_kv.h"
SOURCES = sorted(KERNELS.glob("*.c"))
COMMON = ["-O2", "-std=c99", f"-I{ROOT / 'runtime_c' / 'include'}", "-fstack-usage", "-fcallgraph-info=su"]
CORTEX_M4 = ["-mcpu=cortex-m4", "-mthumb", "-mfloat-abi=hard", "-mfpu=fpv4-sp-d16", "-DRXE_NO_THREADS"]

# id -> (compiler, flags, needs a cross toolchain)
COMPILERS = {
    "host": ("gcc", [], False),
    "host_avx2": ("gcc", ["-mavx2", "-mfma"], False),
    "aarch64": ("aarch64-linux-gnu-gcc", [], True),
    "cortex_m4": ("arm-none-eabi-gcc", CORTEX_M4, True),
}

# What g->pack_b (gemm.c's one indirect call) can be for each entry point.
PACK_B = {
    "rxe_lib_dense_f32": [],
    "rxe_lib_matmul_f32": ["pack_row_major"],
    "rxe_lib_conv2d_f32": ["pack_im2col", "pack_pointwise"],
    "rxe_lib_depthwise_conv2d_f32": [],
}

# The KV-cache kernels (kernels_kv.h) and the functions they hand to the thread pool: with one thread the
# pool runs them on the caller's stack, so each counts as called by its entry point.
WORKERS = {
    "rxe_lib_kv_append_f32": [],
    "rxe_lib_kv_attention_f32": ["attention_rows", "attention_splits", "merge_splits"],
}

NODE = re.compile(r'node: \{ title: "([^"]+)" label: "([^"]*)"')
EDGE = re.compile(r'edge: \{ sourcename: "([^"]+)" targetname: "([^"]+)"')
FRAME = re.compile(r"(\d+) bytes \(([a-z,]+)\)")


def short(title: str) -> str:
    """A node title without its file: "runtime_c/kernels/gemm.c:tile" -> "tile"."""
    return title.rsplit(":", 1)[-1]


def stated() -> tuple[dict[str, int], dict[str, int]]:
    """From kernels.h: {entry: stated bound} and {internal function: stated frame bound}.

    Each rxe_lib_* prototype is preceded by a comment "stack: at most N bytes
    ... NAME (FILE.c) at most M ..."."""
    text = HEADER.read_text() + KV_HEADER.read_text()
    entries, frames = {}, {}
    for m in re.finditer(r"/\* stack: at most (\d+) bytes(.*?)\*/\s*rxe_status_t (rxe_lib_\w+)\(", text, re.S):
        entries[m.group(3)] = int(m.group(1))
        body = re.sub(r"\s*\n\s*\*\s*", " ", m.group(2))  # comment lines joined
        for name, size in re.findall(r"(\w+) \(\w+\.c\) at most (\d+)", body):
            frames[name] = int(size)
    return entries, frames


def measure(compiler: str, flags: list[str], out: Path) -> tuple[dict[str, tuple[int, str]], dict[str, set[str]]]:
    """Compile every kernel source into out: {function: (frame, qualifier)} and its call graph."""
    frames: dict[str, tuple[int, str]] = {}
    calls: dict[str, set[str]] = {}
    for src in SOURCES:
        obj = out / (src.stem + ".o")
        subprocess.run(
            [compiler, *COMMON, *flags, "-c", str(src), "-o", str(obj)],
            check=True,
            cwd=out,
            capture_output=True,
            text=True,
            timeout=60,
        )
        su = obj.with_suffix(".su").read_text()
        for line in su.splitlines():
            where, size, qual = line.split("\t")
            frames[where.rsplit(":", 1)[-1]] = (int(size), qual)
        ci = obj.with_suffix(".ci").read_text()
        for title, label in NODE.findall(ci):
            calls.setdefault(short(title), set())
            m = FRAME.search(label)
            if m:
                assert frames[short(title)] == (int(m.group(1)), m.group(2)), (title, label)
        for src_title, dst_title in EDGE.findall(ci):
            calls.setdefault(short(src_title), set()).add(short(dst_title))
    return frames, calls


def deepest(fn: str, frames, calls, indirect: list[str], path: tuple[str, ...] = ()) -> tuple[int, list[str]]:
    """The largest sum of frames along a call path from fn, and that path."""
    assert fn not in path, f"recursion: {path + (fn,)}"
    callees = set(calls.get(fn, ()))
    if "__indirect_call" in callees:
        callees.discard("__indirect_call")
        callees.update(indirect)
    best, best_path = 0, []
    for callee in sorted(callees):
        size, sub = deepest(callee, frames, calls, indirect, path + (fn,))
        if size > best:
            best, best_path = size, sub
    return frames.get(fn, (0, "static"))[0] + best, [fn, *best_path]


def figures(compiler: str, flags: list[str], out: Path):
    frames, calls = measure(compiler, flags, out)
    for entry, workers in WORKERS.items():
        calls.setdefault(entry, set()).update(workers)
    indirect = {**PACK_B, **{entry: [] for entry in WORKERS}}
    return frames, {entry: deepest(entry, frames, calls, indirect[entry]) for entry in indirect}


def test_header_states_every_entry_point():
    entries, frames = stated()
    declared = set(re.findall(r"rxe_status_t (rxe_lib_\w+)\(", HEADER.read_text() + KV_HEADER.read_text()))
    assert declared == set(PACK_B) | set(WORKERS)
    assert set(entries) == declared
    assert {"compute_panels", "pack_im2col", "dw_row"} <= set(frames)


@pytest.mark.parametrize(
    "which",
    [pytest.param(k, marks=[pytest.mark.emu] if v[2] else []) for k, v in COMPILERS.items()],
)
def test_stack_usage_within_stated_bounds(which, tmp_path):
    compiler, flags, _ = COMPILERS[which]
    if shutil.which(compiler) is None:
        pytest.skip(f"{compiler} is not installed")
    entries, stated_frames = stated()
    frames, measured = figures(compiler, flags, tmp_path)
    unbounded = {fn: q for fn, (_, q) in frames.items() if q.startswith("dynamic") and "bounded" not in q}
    assert not unbounded, f"VLA or alloca: {unbounded}"
    for entry, (size, path) in measured.items():
        assert size <= entries[entry], f"{entry}: {size} bytes along {' -> '.join(path)} > {entries[entry]}"
    for fn, bound in stated_frames.items():
        if fn in frames:  # inlined into its caller on some targets
            assert frames[fn][0] <= bound, f"{fn}: frame {frames[fn][0]} > {bound}"


if __name__ == "__main__":  # print the figures: python tests/library/test_stack_usage.py
    import tempfile

    for which, (compiler, flags, _) in COMPILERS.items():
        if shutil.which(compiler) is None:
            continue
        with tempfile.TemporaryDirectory() as d:
            frames, measured = figures(compiler, flags, Path(d))
        print(f"== {which}")
        for entry, (size, path) in measured.items():
            print(f"  {entry}: {size}  {' -> '.join(f'{p}({frames.get(p, (0,))[0]})' for p in path)}")
