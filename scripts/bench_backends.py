"""Host latency of real models with the C and the LLVM backends, measured side
by side in one run (times taken by the model's server on the device clock).

    python scripts/bench_backends.py [--repeat 20]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import relax_edge as rxe  # noqa: E402
from tests.onnx_models import get_model  # noqa: E402

MODELS = [("mobilenet_v2", {}, {}), ("bert_long", {"dim_bounds": {"seq": 512}}, {"seq": 32}),
          ("bert_long", {"dim_bounds": {"seq": 512}}, {"seq": 128})]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args(argv)
    print(f"{'model':<22}{'C ms':>10}{'LLVM ms':>10}{'LLVM / C':>10}")
    with tempfile.TemporaryDirectory() as tmp:
        for name, import_args, sizes in MODELS:
            path, spec = get_model(name)
            mod = rxe.from_onnx(str(path), **import_args)
            feeds = spec["make_inputs"](seed=0, **sizes)
            medians = {}
            for backend in ("c", "llvm"):
                art = rxe.build(mod, board="host", backend=backend, out_dir=Path(tmp) / f"{name}-{backend}",
                                name=name)
                m = rxe.connect("host").load(art)
                medians[backend] = m.benchmark(*feeds.values(), warmup=3, repeat=args.repeat)["median_ms"]
                m.close()
            label = name + (f" seq={sizes['seq']}" if sizes else "")
            print(f"{label:<22}{medians['c']:>10.3f}{medians['llvm']:>10.3f}{medians['llvm'] / medians['c']:>10.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
