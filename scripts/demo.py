"""The main job: take a real model (a BERT encoder exported from PyTorch with
seeded random weights and a dynamic sequence length), cross-compile it for
the default board (qemu-aarch64: 64-bit ARM Linux under QEMU) with
`relax-edge compile`, run it there with `relax-edge run --check` at two
sequence lengths from the one artifact, compare the board's outputs with
ONNX Runtime, then benchmark and profile it on the board with
`relax-edge bench --profile` (times measured on the device). Last, the same
model natively on the host, timed side by side with ONNX Runtime.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import relax_edge as rxe  # noqa: E402
from tests.onnx_models import get_model  # noqa: E402

OUT = ROOT / "build" / "demo"


def cli(*args) -> None:
    cmd = [sys.executable, "-m", "relax_edge.cli", *map(str, args)]
    print("$ relax-edge " + " ".join(map(str, args)), flush=True)
    subprocess.run(cmd, check=True)


def median_ms(fn, repeat=20) -> float:
    fn()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


def main() -> int:
    import onnxruntime as ort
    OUT.mkdir(parents=True, exist_ok=True)
    path, spec = get_model("bert")
    print(f"model: BERT encoder (2 layers, hidden 64) exported to {path}")
    cli("compile", path, "--board", "qemu-aarch64", "-o", OUT / "bert-aarch64", "--dim", "seq=1..64",
        "--name", "bert")
    for seq in (5, 32):
        cli("run", OUT / "bert-aarch64", "--board", "qemu-aarch64", "--dim", f"seq={seq}", "--check")

    cli("bench", OUT / "bert-aarch64", "--board", "qemu-aarch64", "--dim", "seq=32", "--repeat", "10",
        "--profile", "--top", "5", "--json", OUT / "bench-qemu-aarch64.json")

    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    ok = True
    with rxe.connect("qemu-aarch64") as dev:
        board = dev.load(rxe.Artifact.load(OUT / "bert-aarch64"))
        print(f"\n{'seq':>4} {'max |qemu-aarch64 - onnxruntime|':>34}")
        for seq in (5, 32, 64):
            feeds = spec["make_inputs"](seed=seq, seq=seq)
            ours, ref = board.run(*feeds.values()), session.run(None, feeds)
            err = max(float(np.max(np.abs(a - b))) for a, b in zip(ours, ref))
            ok &= all(np.allclose(a, b, rtol=1e-4, atol=1e-5) for a, b in zip(ours, ref))
            print(f"{seq:>4} {err:>34.2e}")

    art = rxe.build(rxe.from_onnx(str(path), dim_bounds={"seq": 64}), board="host", out_dir=OUT / "bert-host",
                    name="bert")
    host = rxe.connect("host").load(art)
    print(f"\n{'seq':>4} {'relax_edge on host, ms':>24} {'onnxruntime, ms':>16}")
    for seq in (5, 32, 64):
        feeds = spec["make_inputs"](seed=seq, seq=seq)
        ok &= all(np.allclose(a, b, rtol=1e-4, atol=1e-5)
                  for a, b in zip(host.run(*feeds.values()), session.run(None, feeds)))
        t_ours = median_ms(lambda feeds=feeds: host.run(*feeds.values()))
        t_ort = median_ms(lambda feeds=feeds: session.run(None, feeds))
        print(f"{seq:>4} {t_ours:>24.3f} {t_ort:>16.3f}")
    print("(both timed from Python around one call: relax_edge on one thread, ONNX Runtime with its default\n"
          " threads; scripts/bench_vs_ort.py compares them at equal thread counts)")
    print("demo:", "PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
