"""Per-board tuning tables: the runtime kernels' compile-time constants
(block sizes, parallel thresholds, the thread pool's spin count) chosen by
measuring candidates on the board, stored with it as boards/tuning/NAME.json.

    from relax_edge import tuning
    tuning.KNOBS                          # {kernel: {knob: [candidate values]}}
    tuning.load_table("host")             # {kernel: {knob: value}} or {} (validated)
    r = tuning.measure("host", "gemm", "medium", {"KC": 128})
    chosen = tuning.best([r, ...])        # per kernel and bucket, with the noise rule
    tuning.write_table("host", chosen)    # atomic

1. A *knob* is one C macro of runtime_c (`MACROS`), overridable because the
   sources define it under #ifndef. A *kernel* groups knobs that the same
   probes measure. KC and NC are also mirrored in Python
   (relax_edge/library/kernels.py's scratch sizes): `mirrors` sets them for
   the optimize stage. `check_value` refuses what a kernel cannot take (NC
   not a multiple of the NR-wide panels, blocks whose stack buffers exceed
   the bounds kernels.h states on bare-metal boards).
2. `rxe.build(mod, board=B)` and `rxe.optimize` read B's table: the YAML's
   `tuning:` path, else boards/tuning/B.json, else none. `cflags` gives the
   -D flags of the values that differ from the defaults; they are part of the
   toolchain's flags and so of the build key and the runtime object cache.
3. A *bucket* is a probe shape (`buckets(kernel)`): a dense layer, a conv
   layer, a depthwise layer or a chain of dense layers, with a thread count.
   `measure` builds the probe with a candidate config, loads it with
   rxe.connect(board) (host, qemu, ssh, adb), checks its output against
   numpy once, and benchmarks it on the board's clock.
4. `best` keeps the default unless a candidate is faster by more than the
   measured noise: the larger of the two configs' noise, each the larger of
   the pooled samples' relative interquartile range and the spread of the
   medians of its separate measurements (builds and server processes differ
   by more than runs of one process do: measure the default more than once),
   and at least MIN_GAIN. Per kernel it picks one config for all buckets: the
   lowest geometric mean of median / default median, refused when any bucket
   gets slower by more than its noise.

Table file: {"board": NAME, "version": 1, "kernels": {kernel: {knob: int}},
"measured": {kernel: {"buckets": {bucket: {...}}, ...}}}; "measured" is
provenance (what best saw) and is validated only for its names.
"""

from __future__ import annotations

import contextlib
import json
import math
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

from .errors import RelaxEdgeError
from .files import write_atomic
from .library import kernels as lib_kernels
from .target import BOARDS_DIR, Board, load_board

TABLE_VERSION = 1
TABLES_DIR = BOARDS_DIR / "tuning"
MIN_GAIN = 0.03   # a candidate must beat the default by at least 3 % (and by more than the noise)

# kernel -> knob -> candidate values (the default first); DEFAULTS are the C sources' values
KNOBS = {
    "gemm": {"KC": [256, 128, 192, 384, 512], "NC": [512, 256, 1024, 2048],
             "PARALLEL_WORK": [262144, 32768, 2097152]},
    "gemv": {"PARALLEL_MIN_MACS": [262144, 65536, 1048576]},
    "depthwise": {"PARALLEL_MIN_MACS": [32768, 8192, 131072]},
    "threads": {"SPIN_ROUNDS": [300, 100, 1000, 3000]},
}
DEFAULTS = {kernel: {knob: values[0] for knob, values in knobs.items()} for kernel, knobs in KNOBS.items()}
MACROS = {
    ("gemm", "KC"): "RXE_GEMM_KC",                       # runtime_c/include/relax_edge/kernels.h
    ("gemm", "NC"): "RXE_GEMM_NC",                       # kernels.h
    ("gemm", "PARALLEL_WORK"): "RXE_GEMM_PARALLEL_WORK",  # kernels/gemm.c (m*n*k above which threads split)
    ("gemv", "PARALLEL_MIN_MACS"): "RXE_GEMV_PARALLEL_MIN_MACS",            # kernels/gemv.c
    ("depthwise", "PARALLEL_MIN_MACS"): "RXE_DEPTHWISE_PARALLEL_MIN_MACS",  # kernels/depthwise.c
    ("threads", "SPIN_ROUNDS"): "RXE_THREADS_SPIN_ROUNDS",                  # src/threads.c
}
# knob -> (lowest, highest, multiple of, highest on bare-metal boards, why)
_RULES = {
    ("gemm", "KC"): (16, 1024, 1, 256, "the MR x KC A micro-panel is on the stack (6 KB at KC 256, "
                                       "the bound kernels.h states)"),
    ("gemm", "NC"): (lib_kernels.NR, 4096, lib_kernels.NR, 512, "pack_im2col keeps a row of NC floats on the stack"),
    ("gemm", "PARALLEL_WORK"): (0, 2**40, 1, None, ""),
    ("gemv", "PARALLEL_MIN_MACS"): (0, 2**40, 1, None, ""),
    ("depthwise", "PARALLEL_MIN_MACS"): (0, 2**40, 1, None, ""),
    ("threads", "SPIN_ROUNDS"): (0, 1_000_000, 1, None, ""),
}
_TABLE_KEYS = ("board", "version", "kernels", "measured", "command", "note")

# kernel -> the probe shapes its knobs are measured on (threads: the pool size the probe runs with)
BUCKETS = {
    "gemm": [
        {"name": "small", "op": "dense", "m": 64, "n": 64, "k": 64, "threads": 1},
        {"name": "medium", "op": "dense", "m": 256, "n": 256, "k": 256, "threads": 1},
        {"name": "large", "op": "dense", "m": 256, "n": 1024, "k": 1024, "threads": 1},
        {"name": "conv", "op": "conv2d", "c": 64, "o": 64, "h": 28, "w": 28, "kh": 3, "kw": 3, "threads": 1},
        {"name": "small-2t", "op": "dense", "m": 64, "n": 64, "k": 64, "threads": 2},
        {"name": "medium-2t", "op": "dense", "m": 256, "n": 256, "k": 256, "threads": 2},
    ],
    "gemv": [
        {"name": "row-1m", "op": "dense", "m": 1, "n": 1024, "k": 1024, "threads": 2},
        {"name": "row-128k", "op": "dense", "m": 1, "n": 512, "k": 256, "threads": 2},
    ],
    "depthwise": [
        {"name": "c32-28", "op": "depthwise", "c": 32, "h": 28, "w": 28, "kh": 3, "kw": 3, "threads": 2},
        {"name": "c96-14", "op": "depthwise", "c": 96, "h": 14, "w": 14, "kh": 3, "kw": 3, "threads": 2},
    ],
    "threads": [
        {"name": "chain", "op": "chain", "m": 64, "n": 256, "k": 256, "layers": 4, "threads": 2},
    ],
}
_BUCKET_FIELDS = {"dense": ("m", "n", "k"), "conv2d": ("c", "o", "h", "w", "kh", "kw"),
                  "depthwise": ("c", "h", "w", "kh", "kw"), "chain": ("m", "n", "k", "layers")}


class TuningError(RelaxEdgeError):
    """A tuning table, a knob value, a bucket or a measurement is invalid."""


# ------------------------------------------------------------------ knobs

def check_value(kernel: str, knob: str, value, board: Board | None = None, where: str = "") -> int:
    """`value` as an int if `kernel`'s `knob` can take it (on `board`), else a
    TuningError naming `where` (a file and field) and the rule."""
    where = where or f"{kernel}.{knob}"
    if kernel not in KNOBS:
        raise TuningError(f"{where}: unknown kernel {kernel!r} (known: {', '.join(KNOBS)})")
    if knob not in KNOBS[kernel]:
        raise TuningError(f"{where}: unknown knob {knob!r} of {kernel} (known: {', '.join(KNOBS[kernel])})")
    if not isinstance(value, int) or isinstance(value, bool):
        raise TuningError(f"{where}: {knob} must be an integer, got {value!r}")
    low, high, multiple, bare_max, why = _RULES[(kernel, knob)]
    if not low <= value <= high:
        raise TuningError(f"{where}: {knob} {value} is outside [{low}, {high}]")
    if value % multiple:
        raise TuningError(f"{where}: {knob} {value} is not a multiple of {multiple} (the NR-wide panels of "
                          "the packed operands)")
    if board is not None and board.target.freestanding and bare_max is not None and value > bare_max:
        raise TuningError(f"{where}: {knob} {value} is more than {bare_max} on the bare-metal board "
                          f"{board.name}: {why}")
    return value


def full_config(kernel: str, config: dict | None, board: Board | None = None, where: str = "") -> dict:
    """The kernel's defaults overridden by `config` (checked)."""
    if kernel not in KNOBS:
        raise TuningError(f"{where or 'config'}: unknown kernel {kernel!r} (known: {', '.join(KNOBS)})")
    if config is not None and not isinstance(config, dict):
        raise TuningError(f"{where or kernel}: a config must be a mapping of knob to value, got {config!r}")
    out = dict(DEFAULTS[kernel])
    for knob, value in (config or {}).items():
        out[knob] = check_value(kernel, knob, value, board, f"{where}.{knob}" if where else f"{kernel}.{knob}")
    return out


def config_id(config: dict) -> str:
    """A short name of a config: knob=value joined, in knob order."""
    return ",".join(f"{k}={config[k]}" for k in sorted(config)) or "default"


# ------------------------------------------------------------------ tables

def table_path(board) -> Path:
    """Where `board`'s table is: its YAML's `tuning:` path, else boards/tuning/NAME.json."""
    b = load_board(board)
    return Path(b.tuning) if b.tuning else TABLES_DIR / f"{b.name}.json"


def check_table(data, board, where: str = "the tuning table") -> dict:
    """A table document (the parsed JSON) validated for `board`:
    {kernel: full config} of the kernels it sets."""
    b = load_board(board)
    if not isinstance(data, dict):
        raise TuningError(f"{where}: expected a JSON object, got {type(data).__name__}")
    for key in data:
        if key not in _TABLE_KEYS:
            raise TuningError(f"{where}: unknown field {key!r} (known: {', '.join(_TABLE_KEYS)})")
    if data.get("version", TABLE_VERSION) != TABLE_VERSION:
        raise TuningError(f"{where}: field 'version' is {data['version']!r}; this relax_edge reads {TABLE_VERSION}")
    if "board" in data and data["board"] != b.name:
        raise TuningError(f"{where}: field 'board' is {data['board']!r} but the table is read for board {b.name}")
    kernels = data.get("kernels", {})
    if not isinstance(kernels, dict):
        raise TuningError(f"{where}: field 'kernels' must be a mapping of kernel to {{knob: value}}")
    table = {}
    for kernel, config in kernels.items():
        if kernel not in KNOBS:
            raise TuningError(f"{where}: kernels.{kernel}: unknown kernel (known: {', '.join(KNOBS)})")
        if not isinstance(config, dict):
            raise TuningError(f"{where}: kernels.{kernel} must be a mapping of knob to value, got {config!r}")
        table[kernel] = full_config(kernel, config, b, f"{where}: kernels.{kernel}")
    measured = data.get("measured", {})
    if not isinstance(measured, dict):
        raise TuningError(f"{where}: field 'measured' must be a mapping of kernel to its measurements")
    for kernel, record in measured.items():
        if kernel not in KNOBS:
            raise TuningError(f"{where}: measured.{kernel}: unknown kernel (known: {', '.join(KNOBS)})")
        known = [bk["name"] for bk in BUCKETS[kernel]]
        for bucket in (record or {}).get("buckets", {}) if isinstance(record, dict) else ():
            if bucket not in known:
                raise TuningError(f"{where}: measured.{kernel}.buckets.{bucket}: unknown bucket "
                                  f"(known: {', '.join(known)})")
    return table


def load_table(board, path=None) -> dict:
    """`board`'s table (or the one at `path`), validated: {kernel: {knob:
    value}}, {} when the board has none. A YAML `tuning:` path must exist."""
    b = load_board(board)
    p = Path(path) if path is not None else table_path(b)
    if not p.exists():
        if path is not None or b.tuning:
            raise TuningError(f"{p}: no such tuning table (named by "
                              f"{'path=' if path is not None else b.path + ' field tuning'})")
        return {}
    try:
        data = json.loads(p.read_text())
    except json.JSONDecodeError as err:
        raise TuningError(f"{p}: not valid JSON (line {err.lineno}, column {err.colno}: {err.msg})") from None
    return check_table(data, b, str(p))


def resolve(board, table=None) -> tuple:
    """(table, source) for a build: the given table (validated; source
    "given"), else the board's (source: its path, or "" when none)."""
    b = load_board(board)
    if table is not None:
        if isinstance(table, dict) and "kernels" not in table:   # {kernel: config}
            table = {"kernels": table}
        return check_table(table, b, "tuning="), "given"
    loaded = load_table(b)
    return loaded, (str(table_path(b)) if loaded or b.tuning else "")


def cflags(table: dict) -> list:
    """The -D flags of a (validated) table's values that differ from the defaults."""
    flags = []
    for kernel in sorted(table):
        for knob in sorted(table[kernel]):
            value = table[kernel][knob]
            if value != DEFAULTS[kernel][knob]:
                flags.append(f"-D{MACROS[(kernel, knob)]}={value}")
    return flags


def mirrors(table: dict):
    """A context in which the Python mirrors (library/kernels.py's scratch
    sizes) use the table's KC and NC."""
    gemm = table.get("gemm", DEFAULTS["gemm"])
    return lib_kernels.using_blocking(gemm["KC"], gemm["NC"])


def board_mirrors(board):
    """The mirrors of `board`'s table, unless a build has set them already."""
    if lib_kernels.blocking_is_set():
        return contextlib.nullcontext()
    return mirrors(load_table(board))


def write_table(board, chosen: dict, path=None) -> Path:
    """Write `chosen` (best's result, or {kernel: config}) into `board`'s
    table (or `path`), atomically, keeping the kernels it does not name."""
    b = load_board(board)
    p = Path(path) if path is not None else table_path(b)
    old = json.loads(p.read_text()) if p.exists() else {}
    if old:
        check_table(old, b, str(p))
    kernels, measured = dict(old.get("kernels", {})), dict(old.get("measured", {}))
    for kernel, entry in chosen.items():
        config = entry["config"] if isinstance(entry, dict) and "config" in entry else entry
        kernels[kernel] = full_config(kernel, config, b, f"chosen.{kernel}")
        if isinstance(entry, dict) and "buckets" in entry:
            measured[kernel] = {k: entry[k] for k in ("gain", "noise", "buckets") if k in entry}
            measured[kernel]["date"] = time.strftime("%Y-%m-%d", time.gmtime())
    doc = {"board": b.name, "version": TABLE_VERSION, "kernels": kernels, "measured": measured}
    check_table(doc, b, str(p))
    p.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(p, json.dumps(doc, indent=1, sort_keys=True) + "\n")
    return p


# ---------------------------------------------------------------- buckets

def buckets(kernel: str) -> list:
    """The shape buckets `kernel`'s knobs are measured on."""
    if kernel not in BUCKETS:
        raise TuningError(f"unknown kernel {kernel!r} (known: {', '.join(BUCKETS)})")
    return [dict(b) for b in BUCKETS[kernel]]


def _bucket(kernel: str, bucket) -> dict:
    """A bucket by name, or a bucket dict checked."""
    if isinstance(bucket, str):
        for b in buckets(kernel):
            if b["name"] == bucket:
                return b
        raise TuningError(f"unknown bucket {bucket!r} of {kernel} "
                          f"(known: {', '.join(b['name'] for b in buckets(kernel))})")
    if not isinstance(bucket, dict) or bucket.get("op") not in _BUCKET_FIELDS:
        raise TuningError(f"a bucket is a name or a mapping with op one of {', '.join(_BUCKET_FIELDS)}, "
                          f"got {bucket!r}")
    for f in _BUCKET_FIELDS[bucket["op"]]:
        v = bucket.get(f)
        if not isinstance(v, int) or isinstance(v, bool) or v < 1:
            raise TuningError(f"bucket {bucket.get('name', bucket)}: field {f!r} must be a positive integer, "
                              f"got {v!r}")
    return {"name": "custom", "threads": 1, **bucket}


def probe(bucket: dict, seed: int = 0):
    """(IRModule, inputs, numpy reference output) of a bucket's probe model."""
    from . import op
    from .ir import Builder, TensorType, Var
    rng = np.random.default_rng(seed)
    kind = bucket["op"]

    def rand(*shape):
        return (rng.standard_normal(shape) / math.sqrt(shape[-1] if len(shape) < 3 else np.prod(shape[1:])))\
            .astype(np.float32)

    if kind in ("dense", "chain"):
        m, n, k = bucket["m"], bucket["n"], bucket["k"]
        layers = bucket.get("layers", 1)
        x_value = rng.standard_normal((m, k)).astype(np.float32)
        weights = [rand(k if i == 0 else n, n) for i in range(layers)]
        x = Var("x", TensorType((m, k), "float32"))
        reference = x_value
        for w in weights:
            reference = reference.astype(np.float64) @ w
    else:
        c, h, wd, kh, kw = bucket["c"], bucket["h"], bucket["w"], bucket["kh"], bucket["kw"]
        groups = c if kind == "depthwise" else 1
        o = c if kind == "depthwise" else bucket["o"]
        x_value = rng.standard_normal((1, c, h, wd)).astype(np.float32)
        weights = [rand(o, c // groups, kh, kw)]
        x = Var("x", TensorType((1, c, h, wd), "float32"))
        pad = (kh // 2, kw // 2, kh // 2, kw // 2)
        reference = lib_kernels.conv2d_reference(x_value, weights[0], padding=pad, groups=groups)
    bb = Builder()
    with bb.function("main", [x]):
        with bb.dataflow():
            y = x
            for i, w in enumerate(weights):
                if kind in ("dense", "chain"):
                    call = op.matmul(y, w)
                else:
                    call = op.conv2d(y, w, padding=pad, groups=groups)
                y = bb.emit_output(call) if i == len(weights) - 1 else bb.emit(call)
        bb.ret(y)
    return bb.get(), [x_value], np.asarray(reference, np.float32)


# ---------------------------------------------------------------- measure

def stats(samples) -> dict:
    """The shared statistics of a list of per-run times in ms: median, min,
    max and noise (the interquartile range over the median)."""
    samples = [float(s) for s in samples]
    if not samples:
        raise TuningError("no samples to summarize")
    median = statistics.median(samples)
    if len(samples) >= 4:
        q = statistics.quantiles(samples, n=4, method="inclusive")
        spread = q[2] - q[0]
    else:
        spread = max(samples) - min(samples)
    return {"median_ms": median, "min_ms": min(samples), "max_ms": max(samples), "samples": samples,
            "noise": spread / median if median > 0 else 0.0}


def measure(board, kernel: str, bucket, config: dict | None, *, repeat: int = 20, warmup: int = 3,
            backend: str = "c", out_dir=None) -> dict:
    """Build `bucket`'s probe with `kernel` set to `config` (the other kernels
    as the board's table has them), load it on `board`, check its output
    against numpy, and benchmark it: {"median_ms", "min_ms", "max_ms",
    "samples", "noise"} plus what was measured ("board", "kernel", "bucket",
    "config", "threads", "repeat", "warmup")."""
    from .build import build
    from .deploy import connect
    b = load_board(board)
    bk = _bucket(kernel, bucket)
    cfg = full_config(kernel, config, b)
    if not isinstance(repeat, int) or repeat < 1 or not isinstance(warmup, int) or warmup < 0:
        raise TuningError(f"repeat must be a positive integer and warmup >= 0, got {repeat!r}, {warmup!r}")
    table = dict(load_table(b))
    table[kernel] = cfg
    mod, inputs, reference = probe(bk)
    with contextlib.ExitStack() as stack:
        root = Path(out_dir) if out_dir is not None else Path(stack.enter_context(
            tempfile.TemporaryDirectory(prefix="rxe-tune-")))
        where = root / f"{kernel}-{bk['name']}-{config_id(cfg).replace(',', '-').replace('=', '')}"
        art = build(mod, board=b, backend=backend, out_dir=where, name="probe", tuning=table)
        with connect(b) as dev:
            m = dev.load(art, threads=bk.get("threads"))
            try:
                (out,) = m.run(*inputs)
                error = float(np.max(np.abs(out - reference)) / (np.max(np.abs(reference)) + 1e-30))
                if not error < 1e-4:
                    raise TuningError(f"{kernel} {config_id(cfg)} on {b.name}, bucket {bk['name']}: output differs "
                                      f"from numpy (relative error {error:.2e})")
                timing = m.benchmark(*inputs, warmup=warmup, repeat=repeat)
            finally:
                m.close()
    result = stats(timing["samples_ms"])
    result.update({"board": b.name, "kernel": kernel, "bucket": bk["name"], "config": cfg,
                   "threads": bk.get("threads"), "repeat": repeat, "warmup": warmup})
    return result


# ------------------------------------------------------------------- best

def _pooled(results: list) -> dict:
    """{(kernel, bucket): {config_id: stats of every sample of that config}}."""
    groups: dict = {}
    for r in results:
        for key in ("kernel", "bucket", "config", "samples"):
            if key not in r:
                raise TuningError(f"a result without {key!r} (measure's results carry it): {sorted(r)}")
        cfg = full_config(r["kernel"], r["config"])
        entry = groups.setdefault((r["kernel"], r["bucket"]), {}).setdefault(
            config_id(cfg), {"config": cfg, "samples": [], "medians": []})
        entry["samples"].extend(r["samples"])
        entry["medians"].append(stats(r["samples"])["median_ms"])
    out: dict = {}
    for key, by_config in groups.items():
        out[key] = {}
        for cid, e in by_config.items():
            s = stats(e["samples"])
            medians = e["medians"]   # between measurements (separate builds and server processes)
            between = (max(medians) - min(medians)) / statistics.median(medians) if len(medians) > 1 else 0.0
            out[key][cid] = {**s, "config": e["config"], "noise": max(s["noise"], between)}
    return out


def best(results: list) -> dict:
    """The chosen config per kernel and per (kernel, bucket) from measure's
    results (repeated measurements of a config are pooled):
    {kernel: {"config", "gain", "noise", "buckets": {bucket: {"config",
    "median_ms", "default_ms", "gain", "noise"}}}}. A candidate replaces
    the default only when it is faster by more than the noise (and MIN_GAIN)."""
    pooled = _pooled(results)
    out: dict = {}
    for (kernel, bucket), by_config in sorted(pooled.items()):
        default = by_config.get(config_id(DEFAULTS[kernel]))
        if default is None:
            raise TuningError(f"{kernel}, bucket {bucket}: no measurement of the default config "
                              f"({config_id(DEFAULTS[kernel])}) to compare with")
        winner = min(by_config.values(), key=lambda s: s["median_ms"])
        gain = 1.0 - winner["median_ms"] / default["median_ms"]
        margin = max(MIN_GAIN, default["noise"], winner["noise"])
        pick = winner if gain > margin else default
        out.setdefault(kernel, {"buckets": {}})["buckets"][bucket] = {
            "config": pick["config"], "median_ms": pick["median_ms"], "default_ms": default["median_ms"],
            "gain": 1.0 - pick["median_ms"] / default["median_ms"], "noise": margin}
    for kernel, entry in out.items():
        entry.update(_one_config(kernel, {b: pooled[(kernel, b)] for b in entry["buckets"]}))
    return out


def _one_config(kernel: str, by_bucket: dict) -> dict:
    """The one config of `kernel` for all its buckets (see the module notes)."""
    default_id = config_id(DEFAULTS[kernel])
    common = set.intersection(*(set(v) for v in by_bucket.values()))
    margins = {b: max(MIN_GAIN, v[default_id]["noise"]) for b, v in by_bucket.items()}
    choice = {"config": dict(DEFAULTS[kernel]), "gain": 0.0,
              "noise": statistics.median(margins.values())}
    best_score = 1.0
    for cid in sorted(common - {default_id}):
        ratios = {b: v[cid]["median_ms"] / v[default_id]["median_ms"] for b, v in by_bucket.items()}
        noise = {b: max(margins[b], v[cid]["noise"]) for b, v in by_bucket.items()}
        if any(ratios[b] > 1.0 + noise[b] for b in ratios):   # slower somewhere, beyond the noise
            continue
        score = math.exp(statistics.fmean(math.log(r) for r in ratios.values()))
        if 1.0 - score > statistics.median(noise.values()) and score < best_score:
            best_score = score
            choice = {"config": next(iter(by_bucket.values()))[cid]["config"], "gain": 1.0 - score,
                      "noise": statistics.median(noise.values())}
    return choice
