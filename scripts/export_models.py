"""Export the reference models of tests/onnx_models.py into a directory and
print, for each, its opset, interface and op-type histogram.

    python scripts/export_models.py -o DIR [NAME ...]
"""

from __future__ import annotations

import argparse
import collections
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests import onnx_models  # noqa: E402


def op_histogram(model):
    """Counts of each op type over the graph and any subgraphs."""
    counts = collections.Counter()
    stack = [model.graph]
    while stack:
        graph = stack.pop()
        for node in graph.node:
            counts[node.op_type] += 1
            stack.extend(attr.g for attr in node.attribute if attr.HasField("g"))
            for attr in node.attribute:
                stack.extend(attr.graphs)
    return counts


def describe_tensors(tensors):
    return ", ".join(f"{name}: {t['dtype']}[{', '.join(map(str, t['shape']))}]"
                     for name, t in tensors.items())


def report(name, path, spec, seconds):
    import onnx
    model = onnx.load(str(path))
    opsets = ", ".join(f"{o.domain or 'ai.onnx'} {o.version}" for o in model.opset_import)
    counts = op_histogram(model)
    print(f"== {name}: {path.name}, {path.stat().st_size / 1e6:.1f} MB, exported in {seconds:.1f} s")
    print(f"   opset: {opsets}")
    print(f"   inputs: {describe_tensors(spec['inputs'])}")
    print(f"   outputs: {describe_tensors(spec['outputs'])}")
    print(f"   nodes: {sum(counts.values())} ({len(counts)} op types)")
    for op_type, count in counts.most_common():
        print(f"     {op_type:<22} {count}")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-o", "--output", required=True, type=Path, help="directory to write into")
    parser.add_argument("names", nargs="*", metavar="NAME",
                        help=f"models to export (default: all of {', '.join(onnx_models.MODEL_NAMES)})")
    args = parser.parse_args(argv)
    unknown = sorted(set(args.names) - set(onnx_models.MODEL_NAMES))
    if unknown:
        parser.error(f"unknown model(s): {', '.join(unknown)}")
    args.output.mkdir(parents=True, exist_ok=True)
    for name in args.names or onnx_models.MODEL_NAMES:
        start = time.perf_counter()
        path, spec = onnx_models.export_model(name, args.output / f"{name}.onnx")
        report(name, path, spec, time.perf_counter() - start)
    return 0


if __name__ == "__main__":
    sys.exit(main())
