"""The main job as it stands: take a real model (a BERT encoder exported from
PyTorch with seeded random weights and a dynamic sequence length), compile it
to native code with `relax-edge compile`, run it with `relax-edge run --check`
at two sequence lengths from the one artifact, and compare it with ONNX
Runtime side by side.

Cross-compilation for the default emulated board (qemu-aarch64), the remote
harness and benchmarking arrive in later stages; today's board is the host.
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
    cli("compile", path, "--board", "host", "-o", OUT / "bert", "--dim", "seq=1..64", "--name", "bert")
    for seq in (5, 32):
        cli("run", OUT / "bert", "--board", "host", "--dim", f"seq={seq}", "--check")

    art = rxe.Artifact.load(OUT / "bert")
    loaded = rxe.connect("host").load(art)
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    ok = True
    print(f"\n{'seq':>4} {'max |ours - onnxruntime|':>26} {'relax_edge ms':>14} {'onnxruntime ms':>15}")
    for seq in (5, 32, 64):
        feeds = spec["make_inputs"](seed=seq, seq=seq)
        ours = loaded.run(*feeds.values())
        ref = session.run(None, feeds)
        err = max(float(np.max(np.abs(a - b))) for a, b in zip(ours, ref))
        ok &= all(np.allclose(a, b, rtol=1e-4, atol=1e-5) for a, b in zip(ours, ref))
        t_ours = median_ms(lambda: loaded.run(*feeds.values()))
        t_ort = median_ms(lambda: session.run(None, feeds))
        print(f"{seq:>4} {err:>26.2e} {t_ours:>14.3f} {t_ort:>15.3f}")
    print("(kernels are unscheduled loops for now; speed is the subject of a later stage)")
    print("demo:", "PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
