"""Fuzz the ONNX importer: mutate real models and check that `from_onnx`
either imports them or refuses them with a RelaxEdgeError, within a time
limit per input and under a memory limit.

    python scripts/fuzz_onnx.py --runs N [--seed S] [--time-limit 10] [--mem-mb 3072]
                                [--real mlp,bert,gpt2] [--real-share 0.02] [--out build/fuzz_onnx]

Seeds are the ONNX backend node tests shipped in the onnx package whose
operators relax_edge converts, plus exported real models from the cache of
tests/onnx_models.py (`--real`: mlp is exported if missing; the others are
used only if already cached). Each run takes a seed model and applies one
to four mutations, field-level on the ModelProto (dims, element types, raw
data, attribute types and values, names, node order, op types, opsets,
graph inputs and outputs, initializer values) or byte-level on its
serialized form (flips, insertions, deletions, truncation, splices).

A finding is anything but a clean result: an exception that is not a
RelaxEdgeError, a RelaxEdgeError raised by the importer's last-resort
handler for an unexpected exception (its __cause__ says which), a run past
the time limit, or memory exhausted. Findings are grouped by exception type
and the innermost relax_edge frame, and one input per group is saved to
--out. The summary lists each group with its count.
"""

from __future__ import annotations

import argparse
import copy
import hashlib
import random
import signal
import sys
import time
import traceback
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import onnx
from onnx import AttributeProto, TensorProto

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from relax_edge.errors import RelaxEdgeError  # noqa: E402
from relax_edge.frontend.onnx import convert, from_onnx  # noqa: E402,F401  (convert registers the converters)
from relax_edge.frontend.onnx.context import CONVERTERS  # noqa: E402

# keeps every fuzzed constant small, so memory stays bounded
FUZZ_MAX_CONSTANT_BYTES = 1 << 26

INTERESTING_INTS = [0, 1, -1, 2, -2, 3, 7, 255, 1 << 16, 1 << 31, (1 << 31) - 1, -(1 << 31), 1 << 32,
                    (1 << 62), (1 << 63) - 1, -(1 << 63), 10 ** 12]
DTYPES = list(TensorProto.DataType.values()) + [0, 99, -1]
ATTR_TYPES = list(AttributeProto.AttributeType.values())


class FuzzTimeout(BaseException):
    """An input ran past its time limit (a BaseException, so no handler swallows it)."""


# seeds ------------------------------------------------------------------------

def _inputs_as_initializers(case):
    """The case's model with its graph inputs turned into initializers holding
    the case's first input data (everything then folds at import time)."""
    if not case.data_sets:
        return None
    inputs = case.data_sets[0][0]
    m = copy.deepcopy(case.model)
    if len(inputs) != len(m.graph.input):
        return None
    for vi, value in zip(list(m.graph.input), inputs):
        if not hasattr(value, "dtype") or value.dtype.kind not in "biuf":
            return None
        m.graph.initializer.append(onnx.numpy_helper.from_array(value, vi.name))
    m.graph.ClearField("input")
    return m


def node_test_seeds(limit: int | None = None, rng_seed: int = 0) -> list[bytes]:
    """Serialized node-test models whose every operator relax_edge converts,
    each as shipped and with its inputs made initializers."""
    from onnx.backend.test.case.node import collect_testcases
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cases = collect_testcases(None)
    cases = [c for c in sorted(cases, key=lambda c: c.name) if c.model is not None and all(
        n.op_type in CONVERTERS and n.domain in ("", "ai.onnx") for n in c.model.graph.node)]
    if limit is not None and len(cases) > limit:
        cases = random.Random(rng_seed).sample(cases, limit)
    out = []
    for case in cases:
        out.append(case.model.SerializeToString())
        folded = _inputs_as_initializers(case)
        if folded is not None:
            out.append(folded.SerializeToString())
    return out


def real_model_seeds(names) -> list[bytes]:
    """Exported models from the tests' cache (mlp exported when missing)."""
    from tests import onnx_models
    out = []
    for name in names:
        path = onnx_models.cache_dir() / f"{name}-{onnx_models.cache_key()}.onnx"
        if not path.exists() and name == "mlp":
            path, _ = onnx_models.get_model(name)
        if path.exists():
            out.append(Path(path).read_bytes())
        else:
            print(f"fuzz_onnx: {name} is not in the model cache; skipped", file=sys.stderr)
    return out


# mutations on the ModelProto --------------------------------------------------

def _tensors(m):
    ts = list(m.graph.initializer)
    for node in m.graph.node:
        for a in node.attribute:
            if a.HasField("t"):
                ts.append(a.t)
    return ts


def _names(m):
    names = {i.name for i in m.graph.input} | {i.name for i in m.graph.initializer}
    for n in m.graph.node:
        names.update(n.input)
        names.update(n.output)
    return sorted(names)


def _int(rng):
    return rng.choice(INTERESTING_INTS) if rng.random() < 0.7 else rng.randint(-10, 10)


def mut_dims(m, rng):
    ts = _tensors(m)
    if not ts:
        return False
    t = rng.choice(ts)
    dims = list(t.dims)
    r = rng.random()
    if dims and r < 0.6:
        dims[rng.randrange(len(dims))] = _int(rng)
    elif dims and r < 0.8:
        dims.pop(rng.randrange(len(dims)))
    else:
        dims.insert(rng.randrange(len(dims) + 1), _int(rng))
    t.ClearField("dims")
    t.dims.extend(dims)
    return True


def mut_dtype(m, rng):
    ts = _tensors(m)
    targets = ts + [v.type.tensor_type for v in list(m.graph.input) + list(m.graph.output)
                    if v.type.HasField("tensor_type")]
    if not targets:
        return False
    t = rng.choice(targets)
    new = rng.choice(DTYPES)
    try:
        if isinstance(t, TensorProto):
            t.data_type = new
        else:
            t.elem_type = new
    except ValueError:
        return False
    return True


def mut_raw(m, rng):
    ts = [t for t in _tensors(m) if t.HasField("raw_data")]
    if not ts:
        return False
    t = rng.choice(ts)
    raw = bytearray(t.raw_data)
    r = rng.random()
    if raw and r < 0.4:
        del raw[rng.randrange(len(raw)):]
    elif r < 0.6:
        raw += bytes(rng.randrange(256) for _ in range(rng.randint(1, 16)))
    elif raw:
        i = rng.randrange(len(raw))
        raw[i] = rng.randrange(256)
    t.raw_data = bytes(raw)
    return True


def mut_values(m, rng):
    """Set an integer initializer's entries to interesting values (shapes, axes, indices)."""
    ints = [t for t in m.graph.initializer if t.data_type in (TensorProto.INT64, TensorProto.INT32)]
    if not ints:
        return False
    t = rng.choice(ints)
    arr = onnx.numpy_helper.to_array(t).copy()
    if arr.size == 0:
        return False
    info = np.iinfo(arr.dtype)
    arr.reshape(-1)[rng.randrange(arr.size)] = min(max(_int(rng), info.min), info.max)
    t.CopyFrom(onnx.numpy_helper.from_array(arr, t.name))
    return True


def mut_attr(m, rng):
    nodes = [n for n in m.graph.node]
    if not nodes:
        return False
    node = rng.choice(nodes)
    r = rng.random()
    if node.attribute and r < 0.25:
        del node.attribute[rng.randrange(len(node.attribute))]
        return True
    if node.attribute and r < 0.5:
        a = rng.choice(node.attribute)
        a.type = rng.choice(ATTR_TYPES)
        return True
    if node.attribute and r < 0.85:
        a = rng.choice(node.attribute)
        if a.type == AttributeProto.INT:
            a.i = _int(rng)
        elif a.type == AttributeProto.INTS:
            vals = list(a.ints) or [0]
            vals[rng.randrange(len(vals))] = _int(rng)
            if rng.random() < 0.3:
                vals.append(_int(rng))
            a.ClearField("ints")
            a.ints.extend(vals)
        elif a.type == AttributeProto.FLOAT:
            a.f = rng.choice([0.0, -1.0, 1e30, float("nan"), float("inf"), -float("inf")])
        elif a.type == AttributeProto.STRING:
            a.s = rng.choice([b"", b"NOTSET", b"\xff\xfe", b"constant", b"edge", b"reflect", b"wrap"])
        elif a.type == AttributeProto.TENSOR:
            a.t.dims.append(_int(rng))
        else:
            a.i = _int(rng)
        return True
    # add an attribute of a random type under a name the schema knows
    try:
        schema = onnx.defs.get_schema(node.op_type, 22, "")
        names = sorted(schema.attributes) or ["axis"]
    except onnx.defs.SchemaError:
        names = ["axis"]
    a = node.attribute.add(name=rng.choice(names))
    kind = rng.choice(["i", "f", "ints", "s"])
    if kind == "i":
        a.type, a.i = AttributeProto.INT, _int(rng)
    elif kind == "f":
        a.type, a.f = AttributeProto.FLOAT, rng.choice([0.0, 1.5, -3.0])
    elif kind == "ints":
        a.type = AttributeProto.INTS
        a.ints.extend(_int(rng) for _ in range(rng.randint(0, 5)))
    else:
        a.type, a.s = AttributeProto.STRING, b"x"
    return True


def mut_names(m, rng):
    nodes = list(m.graph.node)
    if not nodes:
        return False
    node = rng.choice(nodes)
    names = _names(m) + ["", "ghost"]
    r = rng.random()
    if node.input and r < 0.5:
        node.input[rng.randrange(len(node.input))] = rng.choice(names)
    elif node.output and r < 0.8:
        node.output[rng.randrange(len(node.output))] = rng.choice(names)
    elif r < 0.9:
        node.input.append(rng.choice(names))
    else:
        node.output.append(rng.choice(names))
    return True


def mut_nodes(m, rng):
    nodes = list(m.graph.node)
    if not nodes:
        return False
    r = rng.random()
    if r < 0.3 and len(nodes) > 1:
        i, j = rng.randrange(len(nodes)), rng.randrange(len(nodes))
        nodes[i], nodes[j] = nodes[j], nodes[i]
    elif r < 0.5:
        nodes.pop(rng.randrange(len(nodes)))
    elif r < 0.7:
        nodes.insert(rng.randrange(len(nodes) + 1), copy.deepcopy(rng.choice(nodes)))
    else:
        rng.choice(nodes).op_type = rng.choice(sorted(CONVERTERS) + ["", "If", "Loop"])
    m.graph.ClearField("node")
    m.graph.node.extend(nodes)
    return True


def mut_graph_io(m, rng):
    r = rng.random()
    ios = list(m.graph.input) + list(m.graph.output)
    if r < 0.3 and ios:
        v = rng.choice(ios)
        if v.type.tensor_type.shape.dim:
            d = rng.choice(v.type.tensor_type.shape.dim)
            if rng.random() < 0.7:
                d.dim_value = _int(rng)
            else:
                d.dim_param = rng.choice(["n", "seq", "", "1x"])
        else:
            v.type.tensor_type.ClearField("shape")
        return True
    if r < 0.5 and m.graph.output:
        del m.graph.output[rng.randrange(len(m.graph.output))]
        return True
    if r < 0.7 and m.graph.input:
        m.graph.input.append(copy.deepcopy(rng.choice(m.graph.input)))
        return True
    if r < 0.85 and m.graph.input:
        del m.graph.input[rng.randrange(len(m.graph.input))]
        return True
    if m.graph.initializer:
        del m.graph.initializer[rng.randrange(len(m.graph.initializer))]
        return True
    return False


def mut_model(m, rng):
    r = rng.random()
    if r < 0.5 and m.opset_import:
        m.opset_import[0].version = rng.choice([0, 1, 6, 7, 10, 13, 17, 21, 28, 29, 1000, -1])
    elif r < 0.7:
        m.ir_version = rng.choice([0, 1, 2, 3, 8, 100, -5])
    elif r < 0.85 and m.opset_import:
        m.opset_import[0].domain = rng.choice(["", "ai.onnx", "com.example", "ai.onnx.ml"])
    else:
        for node in m.graph.node:
            if rng.random() < 0.2:
                node.domain = rng.choice(["com.example", "ai.onnx", ""])
    return True


PROTO_MUTATIONS = [mut_dims, mut_dtype, mut_raw, mut_values, mut_attr, mut_attr, mut_names, mut_nodes,
                   mut_graph_io, mut_model]


# mutations on bytes -----------------------------------------------------------

def mutate_bytes(data: bytes, rng, other: bytes) -> bytes:
    b = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        r = rng.random()
        if not b:
            b += bytes(rng.randrange(256) for _ in range(8))
        elif r < 0.35:
            b[rng.randrange(len(b))] ^= 1 << rng.randrange(8)
        elif r < 0.55:
            b[rng.randrange(len(b))] = rng.choice([0, 0xFF, 0x7F, 0x80, rng.randrange(256)])
        elif r < 0.7:
            i = rng.randrange(len(b))
            b[i:i] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 8)))
        elif r < 0.85:
            i = rng.randrange(len(b))
            del b[i:i + rng.randint(1, 16)]
        elif r < 0.93:
            del b[rng.randrange(len(b)):]
        else:  # splice in a slice of another seed
            i, j = rng.randrange(len(b)), rng.randrange(max(len(other), 1))
            b[i:] = other[j:j + rng.randint(1, 256)] + b[i:]
    return bytes(b)


def mutate(seed: bytes, rng, seeds) -> bytes:
    if rng.random() < 0.1:
        return mutate_bytes(seed, rng, rng.choice(seeds))
    m = onnx.ModelProto()
    try:
        m.ParseFromString(seed)
    except Exception:  # noqa: BLE001  (an input earlier byte mutations broke: keep mutating its bytes)
        return mutate_bytes(seed, rng, rng.choice(seeds))
    for _ in range(rng.randint(1, 4)):
        try:
            rng.choice(PROTO_MUTATIONS)(m, rng)
        except (ValueError, TypeError, IndexError, OverflowError):
            pass  # the mutation does not apply to what earlier ones left; the proto keeps the rest
    try:
        data = m.SerializeToString()
    except Exception:  # noqa: BLE001  (a mutation made the proto unserializable: fuzz the seed's bytes)
        return mutate_bytes(seed, rng, rng.choice(seeds))
    if rng.random() < 0.05:
        data = mutate_bytes(data, rng, rng.choice(seeds))
    return data


# running ---------------------------------------------------------------------

@dataclass
class Report:
    runs: int = 0
    imported: int = 0
    refused: int = 0
    findings: dict = field(default_factory=dict)  # key -> [count, message, saved path]
    seconds: float = 0.0

    def describe(self) -> str:
        lines = [f"{self.runs} runs in {self.seconds:.0f} s ({self.runs / max(self.seconds, 1e-9):.1f}/s): "
                 f"{self.imported} imported, {self.refused} refused cleanly, "
                 f"{sum(f[0] for f in self.findings.values())} findings in {len(self.findings)} groups"]
        for key, (count, message, saved) in sorted(self.findings.items(), key=lambda kv: -kv[1][0]):
            lines.append(f"  {count:6d}  {key}\n          {message[:300]}" + (f"\n          {saved}" if saved else ""))
        return "\n".join(lines)


def _where(err: BaseException) -> str:
    """The innermost frame of relax_edge (or onnx) in the error's traceback."""
    frames = traceback.extract_tb(err.__traceback__)
    for f in reversed(frames):
        if "relax_edge" in f.filename or "/onnx/" in f.filename:
            return f"{Path(f.filename).name}:{f.lineno}"
    return f"{Path(frames[-1].filename).name}:{frames[-1].lineno}" if frames else "?"


def classify(data: bytes, time_limit_s: float):
    """(outcome, finding key or None, message) for one input."""
    def on_alarm(signum, frame):
        raise FuzzTimeout()
    old = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, time_limit_s)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            from_onnx(data, max_constant_bytes=FUZZ_MAX_CONSTANT_BYTES)
        return "imported", None, ""
    except FuzzTimeout:
        return "finding", "timeout", f"ran past {time_limit_s} s"
    except RelaxEdgeError as err:
        cause = err.__cause__
        if cause is not None and not isinstance(cause, RelaxEdgeError):
            return "finding", f"handled {type(cause).__name__} at {_where(cause)}", str(err)
        return "refused", None, str(err)
    except MemoryError as err:
        return "finding", f"escaped MemoryError at {_where(err)}", "memory exhausted"
    except Exception as err:  # noqa: BLE001  (what the fuzzer looks for)
        return "finding", f"escaped {type(err).__name__} at {_where(err)}", f"{type(err).__name__}: {err}"
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def fuzz(seeds, runs: int, seed: int = 0, time_limit_s: float = 10.0, out_dir: Path | None = None,
         progress_every: int = 0, weights=None) -> Report:
    rng = random.Random(seed)
    report = Report()
    start = time.monotonic()
    if out_dir is not None:
        out_dir.mkdir(parents=True, exist_ok=True)
    for i in range(runs):
        base = rng.choices(seeds, weights=weights)[0] if weights else rng.choice(seeds)
        data = mutate(base, rng, seeds)
        outcome, key, message = classify(data, time_limit_s)
        report.runs += 1
        if outcome == "imported":
            report.imported += 1
        elif outcome == "refused":
            report.refused += 1
        else:
            entry = report.findings.setdefault(key, [0, message, None])
            entry[0] += 1
            if entry[2] is None and out_dir is not None:
                path = out_dir / f"finding-{hashlib.sha1(key.encode()).hexdigest()[:10]}.onnx"
                path.write_bytes(data)
                entry[2] = str(path)
        if progress_every and (i + 1) % progress_every == 0:
            report.seconds = time.monotonic() - start
            print(report.describe(), flush=True)
    report.seconds = time.monotonic() - start
    return report


def fuzz_atheris(seeds, args) -> int:
    """The same check and mutations under atheris (libFuzzer, coverage guided):
    the corpus grows with inputs that reach new code; the first finding stops
    the run and libFuzzer saves it (crash-*)."""
    try:
        import atheris
    except ImportError:
        sys.exit("fuzz_onnx: --engine atheris needs atheris: pip install atheris")
    atheris.instrument_all()
    out = Path(args.out)
    corpus = out / "atheris_corpus"
    corpus.mkdir(parents=True, exist_ok=True)
    for i, data in enumerate(seeds):
        (corpus / f"seed-{i:04d}.onnx").write_bytes(data)

    def test_one(data: bytes):
        outcome, key, message = classify(data, args.time_limit)
        if outcome == "finding":
            raise RuntimeError(f"{key}: {message}")

    def custom_mutator(data: bytes, max_size: int, seed: int) -> bytes:
        rng = random.Random(seed)
        if rng.random() < 0.2:
            return atheris.Mutate(data, max_size)
        return mutate(data, rng, seeds)[:max_size]

    atheris.Setup([sys.argv[0], f"-runs={args.runs}", f"-rss_limit_mb={args.mem_mb}",
                   f"-max_len={max(len(s) for s in seeds)}", f"-artifact_prefix={out}/", str(corpus)],
                  test_one, custom_mutator=custom_mutator)
    atheris.Fuzz()
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--time-limit", type=float, default=10.0, help="seconds per input")
    parser.add_argument("--mem-mb", type=int, default=3072, help="address-space limit of this process")
    parser.add_argument("--node-seeds", type=int, default=200, help="how many node-test models to start from")
    parser.add_argument("--real", default="mlp", help="comma-separated models of tests/onnx_models.py")
    parser.add_argument("--real-share", type=float, default=0.02, help="fraction of runs on the real models")
    parser.add_argument("--out", default=str(ROOT / "build" / "fuzz_onnx"))
    parser.add_argument("--progress", type=int, default=5000)
    parser.add_argument("--engine", choices=("random", "atheris"), default="random",
                        help="random: this script's own loop, which records every finding and goes on; "
                             "atheris: coverage-guided libFuzzer (pip install atheris), stops at the first")
    args = parser.parse_args(argv)
    seeds = node_test_seeds(args.node_seeds, args.seed)
    real = real_model_seeds([n for n in args.real.split(",") if n]) if args.real else []
    # real models are slow to import: by default they get 1 run in 50
    share = 1.0 if not seeds else args.real_share
    weights = [(1 - share) / max(len(seeds), 1)] * len(seeds) + [share / max(len(real), 1)] * len(real)
    if args.engine == "atheris":
        return fuzz_atheris(seeds + real, args)
    if args.mem_mb:
        import resource
        limit = args.mem_mb << 20
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    print(f"fuzz_onnx: {len(seeds)} node-test seeds, {len(real)} real models, {args.runs} runs, "
          f"seed {args.seed}", flush=True)
    report = fuzz(seeds + real, args.runs, args.seed, args.time_limit, Path(args.out), args.progress, weights)
    print(report.describe(), flush=True)
    return 1 if report.findings else 0


if __name__ == "__main__":
    sys.exit(main())
