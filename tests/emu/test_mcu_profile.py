"""Microcontrollers benchmark and profile in instruction counts: the runner's
timed (-t) and profiled (-p) runs under qemu-system-arm -icount, read
through the core's SysTick (runtime_c/tools/runner.c), labelled as
instruction counts, never as times.

The counts are checked for what an instruction count must do: repeat
exactly (the emulator is deterministic), scale with the work (a dense
layer with twice the reduction length costs about twice as much), not
depend on the emulator's clock rate (-icount shift 0 and 2 give the same
counts to the SysTick's resolution), and add up (the kernels' rows fit in
the run)."""

import dataclasses

import numpy as np
import pytest

import relax_edge as rxe
from relax_edge import op
from relax_edge.ir import Builder, TensorType, Var
from relax_edge.target import load_board, toolchain_problems

pytestmark = [pytest.mark.emu, pytest.mark.skipif(bool(toolchain_problems(load_board("qemu-cortex-m4"))),
                                                  reason="no Cortex-M4 toolchain or QEMU")]
RESOLUTION = 40   # instructions per SysTick tick: 1e9 / 25 MHz under -icount shift=0
ROWS, OUT = 4, 16


def dense(k: int, seed: int):
    rng = np.random.default_rng(seed)
    w = rng.standard_normal((k, OUT)).astype(np.float32)
    x = Var("x", TensorType((ROWS, k), "float32"))
    b = Builder()
    with b.function("main", [x]):
        b.ret(b.emit(op.tanh(op.matmul(x, w))))
    return b.get(), rng.standard_normal((ROWS, k)).astype(np.float32), w


@pytest.fixture(scope="module", params=["c", "llvm"])
def builds(request, tmp_path_factory):
    out = {}
    for k in (64, 128):
        mod, x, w = dense(k, k)
        out[k] = (rxe.build(mod, board="qemu-cortex-m4", backend=request.param, name=f"d{k}", quiet=True,
                            out_dir=tmp_path_factory.mktemp(f"d{k}")), x, w)
    return request.param, out


def test_counts_repeat_and_scale_with_the_work(builds):
    backend, arts = builds
    counts = {}
    with rxe.connect("qemu-cortex-m4") as dev:
        for k, (art, x, w) in arts.items():
            m = dev.load(art)
            stats = m.benchmark(x, warmup=1, repeat=3)
            assert stats["unit"] == "instructions" and "median_ms" not in stats
            assert max(stats["samples_instructions"]) - min(stats["samples_instructions"]) <= RESOLUTION, stats
            counts[k] = stats["median_instructions"]
            np.testing.assert_allclose(m.run(x)[0], np.tanh(x @ w), rtol=1e-4, atol=1e-5)
    ratio = counts[128] / counts[64]
    assert 1.6 < ratio < 2.2, f"{backend}: twice the reduction length costs {ratio:.2f}x the instructions ({counts})"


def test_profile_rows_fit_in_the_run(builds):
    _, arts = builds
    art, x, _ = arts[128]
    with rxe.connect("qemu-cortex-m4") as dev:
        prof = dev.load(art).profile(x)
    assert prof["unit"] == "instructions"
    assert prof["rows"] and all(r["calls"] == 1 for r in prof["rows"])
    assert 0 < prof["kernels_instructions"] <= prof["run_instructions"]
    assert sum(r["share"] for r in prof["rows"]) == pytest.approx(1.0)
    assert prof["rows"][0]["total_instructions"] >= prof["rows"][-1]["total_instructions"]   # sorted by cost


def test_counts_do_not_depend_on_the_clock_rate(builds, tmp_path):
    """The same run under -icount shift=2 (4 ns per instruction): the counts are converted back."""
    _, arts = builds
    art, x, _ = arts[64]
    board = load_board("qemu-cortex-m4")
    slow = dataclasses.replace(board, qemu={**board.qemu, "icount_shift": 2})
    with rxe.connect(board) as dev:
        base = dev.load(art).benchmark(x, warmup=0, repeat=1)["median_instructions"]
    with rxe.connect(slow) as dev:
        other = dev.load(art).benchmark(x, warmup=0, repeat=1)["median_instructions"]
    assert abs(other - base) <= RESOLUTION, (base, other)
