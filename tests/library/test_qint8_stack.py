"""The stack use stated in relax_edge/kernels_qint8.h against -fstack-usage,
measured as tests/library/test_stack_usage.py measures kernels.h's: the
largest sum of frames along a call path from each entry point (through the
thread pool's task, which the caller runs too), on the host
(generic C, AVX2, -march=native), aarch64 (NEON, dotprod), armv7 and the
Cortex-M4."""

import re

import pytest

from tests.library import test_stack_usage
from tests.library.test_stack_usage import CORTEX_M4, ROOT, deepest, measure

HEADER = ROOT / "runtime_c" / "include" / "relax_edge" / "kernels_qint8.h"
SOURCES = [ROOT / "runtime_c" / "kernels" / f for f in ("qgemm.c", "qconv.c", "qdepthwise_dsp.c")]
COMPILERS = {
    "host": ("gcc", [], False), "host_avx2": ("gcc", ["-mavx2", "-mfma"], False),
    "host_native": ("gcc", ["-march=native"], False),
    "aarch64": ("aarch64-linux-gnu-gcc", [], True),
    "aarch64_dotprod": ("aarch64-linux-gnu-gcc", ["-march=armv8.2-a+dotprod"], True),
    "armv7": ("arm-linux-gnueabihf-gcc", ["-march=armv7-a", "-mfpu=neon", "-mfloat-abi=hard"], True),
    "cortex_m4": ("arm-none-eabi-gcc", CORTEX_M4, True),
}


def stated() -> dict:
    text = HEADER.read_text()
    return {m.group(2): int(m.group(1))
            for m in re.finditer(r"/\* stack: at most (\d+) bytes.*?\*/\s*rxe_status_t (rxe_lib_\w+)\(", text, re.S)}


def test_header_states_every_entry_point():
    assert set(stated()) == set(re.findall(r"rxe_status_t (rxe_lib_\w+)\(", HEADER.read_text())) == {
        "rxe_lib_qdense_s8", "rxe_lib_qconv2d_s8", "rxe_lib_qdepthwise_conv2d_s8"}


@pytest.mark.parametrize("which", [pytest.param(k, marks=[pytest.mark.emu] if v[2] else [])
                                   for k, v in COMPILERS.items()])
def test_stack_usage_within_stated_bounds(which, tmp_path, monkeypatch):
    compiler, flags, _ = COMPILERS[which]
    monkeypatch.setattr(test_stack_usage, "SOURCES", SOURCES)   # the int8 kernels' sources only
    frames, calls = measure(compiler, flags, tmp_path)
    calls["rxe_threads_parallel_for"] = {"qgemm_task"}   # the caller runs chunk 0 of the pool's task itself
    unbounded = {fn: q for fn, (_, q) in frames.items() if q.startswith("dynamic") and "bounded" not in q}
    assert not unbounded, f"VLA or alloca: {unbounded}"
    for entry, bound in stated().items():
        size, path = deepest(entry, frames, calls, [])
        assert size <= bound, f"{entry}: {size} bytes along {' -> '.join(path)} > {bound}"
