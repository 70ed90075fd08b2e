"""Tokens/s of relax_edge against ONNX Runtime, onnxruntime-genai and llama.cpp, side by side in one run.

    python scripts/bench_llm.py [--models llama smollm2] [--threads 1] [--rounds 3] [--quick] [--json out.json]

For each model (the tiny test Llama with a 1024-token context, SmolLM2-135M-Instruct in fp32; see
scripts/llm_bench_models.py) and each engine (scripts/llm_engines.py: relax_edge's m.generate, relax_edge's
``main`` in the Python loop, ONNX Runtime in the Python greedy loop that feeds the presents back,
onnxruntime-genai's fp32 model of the same checkpoint, llama.cpp on an F32 GGUF of the same weights when
llama-cpp-python is installed), on ``--threads`` threads:

- greedy decoding of ``new`` tokens (256 for the Llama, 128 for SmolLM2) after a 128-token prompt, in
  ``--rounds`` interleaved rounds (each round runs every engine once, in turn, after one warm-up run each):
  the median decode tok/s and prefill tok/s with their spread (min-max over the rounds), and relax_edge's
  ratio to each peer (above 1: relax_edge is faster); a round's prefill is the median of its run's and of
  at least 2 and up to 9 more prefill-only runs (more than 2 while they take under 0.25 s in all);
- "same tokens": whether the engine's greedy tokens equal ONNX Runtime's (else how many leading ones do);
- GB/s reached by decode: the export's weight bytes (each initializer once, less the embedding table that
  a token gathers one row of) x decode tok/s;
- the flat-cost check: the median decode ms/token at a context of ~16 and of ~1000 (needs max_context >=
  1024) and their ratio, beside the ratio that reading the growing cache alone would explain when decode is
  bound by memory ((weights + cache at 1000) / (weights + cache at 16));
- memory: relax_edge's state + arena + weights bytes from its artifact; ONNX Runtime's and
  onnxruntime-genai's peak RSS growth during one generation, measured in a child process (VmHWM).

The table is printed; ``--json`` writes every number and sample. ``--quick`` makes a small run (fewer new
tokens, the flat-cost check at a short context). An engine that cannot run here prints why in its row.
"""

from __future__ import annotations

import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import json  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import traceback  # noqa: E402
from pathlib import Path  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
import llm_bench_models as models  # noqa: E402
import llm_engines as engines  # noqa: E402

ENGINES = ("relax_edge", "rxe_loop", "ort", "genai", "llamacpp")
LABELS = {"relax_edge": "relax_edge", "rxe_loop": "relax_edge main loop", "ort": "ORT loop", "genai": "ORT GenAI",
          "llamacpp": "llama.cpp"}
SHORT_CONTEXT, LONG_CONTEXT = 16, 1000
FLAT_TOKENS = 16
PREFILL_BUDGET_S, PREFILL_MORE, PREFILL_LEAST = 0.25, 9, 2


def say(msg: str) -> None:
    print(f"[bench_llm] {msg}", file=sys.stderr, flush=True)


_ARTIFACTS: dict = {}


def relax_edge_artifact(model, args):
    """relax_edge's build of ``model`` (once per run; kept under the cache folder, where an unchanged build
    skips the toolchain)."""
    if model.name not in _ARTIFACTS:
        out = models.bench_dir() / f"rxe-{model.name}-ctx{args.max_context}-{args.backend}"
        say(f"{model.name}: building relax_edge (max_context={args.max_context}, {args.backend})")
        try:
            _ARTIFACTS[model.name] = engines.build_relax_edge(model.onnx, args.max_context, out, args.backend,
                                                              not args.legalize_only)
        except Exception as exc:  # both relax_edge columns report it; the build is not tried twice
            _ARTIFACTS[model.name] = exc
    if isinstance(_ARTIFACTS[model.name], Exception):
        raise _ARTIFACTS[model.name]
    return _ARTIFACTS[model.name]


def make_engine(kind: str, model, args):
    """The engine ``kind`` for ``model``, or raises engines.Unavailable."""
    if kind == "ort":
        return engines.OrtLoop(model.onnx, model.cache_shape, args.threads)
    if kind == "genai":
        try:
            import onnxruntime_genai  # noqa: F401
        except ImportError:
            raise engines.Unavailable("not installed (pip install onnxruntime-genai)") from None
        return engines.GenAI(models.genai_folder(model), args.threads)
    if kind == "llamacpp":
        try:
            import llama_cpp  # noqa: F401
        except ImportError:
            raise engines.Unavailable("not installed (pip install llama-cpp-python)") from None
        return engines.LlamaCpp(models.f32_gguf(model), args.threads, args.max_context)
    if kind in ("relax_edge", "rxe_loop"):
        art = relax_edge_artifact(model, args)
        if kind == "rxe_loop":
            return engines.RelaxEdgeMainLoop(art, model.cache_shape, args.threads)
        return engines.RelaxEdge(art, args.threads)
    raise KeyError(kind)


def same_tokens(got, want) -> str:
    if list(got) == list(want):
        return "yes"
    lead = next((i for i, (g, w) in enumerate(zip(got, want)) if g != w), min(len(got), len(want)))
    return f"no ({lead}/{len(want)} first agree)"


def spread(values) -> dict:
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def flat_cost(engine, model, quick: bool, max_context: int) -> dict:
    """Decode ms/token at a context of ~16 and of ~1000 (or ~100 with quick), beside the ratio that reading
    the cache alone would explain."""
    long_context = min(LONG_CONTEXT if not quick else 100, max_context - FLAT_TOKENS - 1)
    short = engine.run(model.prompt(SHORT_CONTEXT), FLAT_TOKENS + 1)
    long = engine.run(model.prompt(long_context), FLAT_TOKENS + 1)
    layers, kv_heads, head_dim = model.cache_shape
    per_position = layers * 2 * kv_heads * head_dim * 4
    weights = model.weight_bytes()
    mid = FLAT_TOKENS // 2
    explained = (weights + per_position * (long_context + mid)) / (weights + per_position * (SHORT_CONTEXT + mid))
    return {"short_context": SHORT_CONTEXT, "long_context": long_context,
            "short_ms": short.decode_ms_per_token, "long_ms": long.decode_ms_per_token,
            "ratio": long.decode_ms_per_token / short.decode_ms_per_token, "cache_explains": explained}


def prepare(kind: str, model, args, prompt):
    """``(engine, None)`` made and warmed up, or ``(None, reason)``."""
    say(f"{model.name}: preparing {LABELS[kind]}")
    engine = None
    try:
        engine = make_engine(kind, model, args)
        engine.run(prompt, 2)  # warm-up
        return engine, None
    except engines.Unavailable as exc:
        return None, str(exc)
    except Exception as exc:  # relax_edge's column reports a failed build or generate; the others raise
        if kind not in ("relax_edge", "rxe_loop"):
            raise
        traceback.print_exc()
        if engine is not None:
            engine.close()
        return None, f"generate not available ({type(exc).__name__}: {exc})"


def prefill_samples(engine, prompt, first_s: float) -> list:
    """Times to first token: ``first_s`` (the round's run) and more prefill-only runs, at least PREFILL_LEAST
    and more while they add up to less than PREFILL_BUDGET_S (at most PREFILL_MORE): one prefill is at the
    mercy of the scheduler (SmolLM2's takes longer than the budget, and a single loaded sample was its
    round's figure)."""
    samples = [first_s]
    while len(samples) <= PREFILL_LEAST or (len(samples) <= PREFILL_MORE and sum(samples) < PREFILL_BUDGET_S):
        samples.append(engine.run(prompt, 1).prefill_s)
    return samples


def summarize(row: dict, reference, weight_bytes: int) -> None:
    """The medians and spreads of ``row["runs"]``, GB/s and the token check against ``reference``."""
    runs = row["runs"]
    row["decode_tok_s"] = spread([x["decode_tok_s"] for x in runs])
    row["prefill_tok_s"] = spread([x["prefill_tok_s"] for x in runs])
    row["gb_s"] = weight_bytes * row["decode_tok_s"]["median"] / 1e9
    row["tokens"] = runs[0]["tokens"]
    row["same_tokens"] = same_tokens(runs[0]["tokens"], reference) if reference is not None else "(no ORT)"
    if any(x["tokens"] != runs[0]["tokens"] for x in runs):
        row["same_tokens"] += ", differ between rounds"


def peak_memory(kind: str, model, args, prompt, new: int) -> dict:
    if kind == "ort":
        what = (model.onnx, model.cache_shape, args.threads)
    else:
        what = (models.genai_folder(model), args.threads)
    say(f"{model.name}: peak RSS of one {LABELS[kind]} generation (child process)")
    try:
        return engines.peak_rss_growth(kind, what, prompt, new)
    except (RuntimeError, TimeoutError) as exc:
        return {"error": str(exc)}


def bench_model(name: str, args) -> dict:
    model = models.get_model(name)
    prompt = model.prompt(args.prompt_tokens)
    new = args.new_tokens or (min(model.new_tokens, 32) if args.quick else model.new_tokens)
    weight_bytes = model.weight_bytes()
    say(f"{name}: {args.prompt_tokens}-token prompt, {new} new tokens, {weight_bytes / 1e6:.1f} MB of weights, "
        f"{args.threads} thread(s)")
    loaded, rows = {}, {}
    for kind in args.engines:
        engine, reason = prepare(kind, model, args, prompt)
        if engine is None:
            say(f"{name}: {LABELS[kind]}: {reason}")
            rows[kind] = {"unavailable": reason}
        else:
            loaded[kind], rows[kind] = engine, {"runs": []}
    for r in range(args.rounds):  # interleaved: each round runs every engine once, in turn
        for kind, engine in loaded.items():
            gen = engine.run(prompt, new)
            ttft = statistics.median(prefill_samples(engine, prompt, gen.prefill_s))
            rows[kind]["runs"].append({"tokens": gen.tokens, "prefill_tok_s": len(prompt) / ttft,
                                       "decode_tok_s": gen.decode_tok_s, "ttft_ms": ttft * 1e3,
                                       "wall_s": gen.wall_s})
            say(f"{name}: round {r + 1}/{args.rounds} {LABELS[kind]}: decode {gen.decode_tok_s:.1f} tok/s, "
                f"prefill {len(prompt) / ttft:.1f} tok/s")
    reference = rows["ort"]["runs"][0]["tokens"] if "ort" in loaded else None
    for kind, engine in loaded.items():
        summarize(rows[kind], reference, weight_bytes)
        if args.flat:
            say(f"{name}: flat-cost check of {LABELS[kind]}")
            rows[kind]["flat"] = flat_cost(engine, model, args.quick, args.max_context)
        if kind == "relax_edge":
            rows[kind]["memory"] = engine.memory()
        engine.close()
    if "relax_edge" in loaded:
        mine = rows["relax_edge"]
        for kind in loaded.keys() - {"relax_edge", "rxe_loop"}:
            for what in ("decode", "prefill"):
                rows[kind][f"rxe_ratio_{what}"] = (mine[f"{what}_tok_s"]["median"]
                                                   / rows[kind][f"{what}_tok_s"]["median"])
    if args.memory:
        for kind in loaded.keys() & {"ort", "genai"}:
            rows[kind]["memory"] = peak_memory(kind, model, args, prompt, new)
    return {"model": name, "prompt_tokens": args.prompt_tokens, "new_tokens": new, "weight_bytes": weight_bytes,
            "threads": args.threads, "engines": rows}


def _rate(s: dict) -> str:
    return f"{s['median']:.1f} ({s['min']:.1f}-{s['max']:.1f})"


def _mb(n) -> str:
    return "?" if n is None else f"{n / 1e6:.1f}"


def _memory(row: dict) -> str:
    mem = row.get("memory") or {}
    if "error" in mem:
        return "error"
    if "growth_bytes" in mem:
        return f"+{_mb(mem['growth_bytes'])} MB peak RSS"
    if mem:
        return f"{_mb(mem['state_bytes'])}+{_mb(mem['arena_bytes'])}+{_mb(mem['weights_bytes'])} MB s+a+w"
    return "-"


def _ratio(row: dict, key: str) -> str:
    return f"{row[key]:.2f}x" if key in row else "-"


def _flat(row: dict) -> str:
    f = row.get("flat")
    if not f:
        return "-"
    return (f"{f['short_ms']:.2f} / {f['long_ms']:.2f} ms @{f['short_context']}/{f['long_context']}: "
            f"x{f['ratio']:.2f} (cache x{f['cache_explains']:.2f})")


HEADER = ("model", "engine", "decode tok/s (min-max)", "prefill tok/s (min-max)", "rxe/peer dec", "rxe/peer pre",
          "GB/s", "same tokens", "decode ms/tok short / long", "memory")


def table(results) -> str:
    lines = []
    for res in results:
        for kind, row in res["engines"].items():
            label = f"{res['model']} ({res['prompt_tokens']}+{res['new_tokens']})"
            if "unavailable" in row:
                lines.append((label, LABELS[kind], f"{LABELS[kind]}: {row['unavailable'].splitlines()[0][:240]}"))
                continue
            lines.append((label, LABELS[kind], _rate(row["decode_tok_s"]), _rate(row["prefill_tok_s"]),
                          _ratio(row, "rxe_ratio_decode"), _ratio(row, "rxe_ratio_prefill"), f"{row['gb_s']:.2f}",
                          row["same_tokens"], _flat(row), _memory(row)))
    widths = [max(len(HEADER[i]), *(len(x[i]) for x in lines if len(x) > i and (i < 2 or len(x) == len(HEADER))))
              for i in range(len(HEADER))]
    out = ["  ".join(h.ljust(w) for h, w in zip(HEADER, widths))]
    for x in lines:
        if len(x) == len(HEADER):
            out.append("  ".join(c.ljust(w) for c, w in zip(x, widths)))
        else:
            out.append("  ".join(c.ljust(w) for c, w in zip(x[:2], widths)) + "  " + x[2])
    return "\n".join(out)


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=["llama", "smollm2"], choices=["llama", "smollm2"])
    parser.add_argument("--engines", nargs="+", default=list(ENGINES), choices=list(ENGINES))
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds (default 3)")
    parser.add_argument("--prompt-tokens", type=int, default=models.PROMPT_TOKENS)
    parser.add_argument("--new-tokens", type=int, help="default: 256 for the Llama, 128 for SmolLM2 (32 quick)")
    parser.add_argument("--max-context", type=int, default=models.LONG_CONTEXT,
                        help="relax_edge's context bound (default 1024)")
    parser.add_argument("--backend", default="c", choices=["c", "llvm"], help="relax_edge's backend")
    parser.add_argument("--legalize-only", action="store_true", help="build relax_edge with optimize=False")
    parser.add_argument("--quick", action="store_true", help="a small run: 32 new tokens, flat cost at ~100")
    parser.add_argument("--no-flat", dest="flat", action="store_false", help="skip the flat-cost check")
    parser.add_argument("--no-memory", dest="memory", action="store_false", help="skip the peak-RSS children")
    parser.add_argument("--json", help="write every number here")
    args = parser.parse_args(argv)
    if args.rounds < 1 or args.threads < 1 or args.prompt_tokens < 1:
        parser.error("--rounds, --threads and --prompt-tokens must be positive")
    if args.prompt_tokens + (args.new_tokens or 256) > args.max_context:
        parser.error(f"prompt + new tokens exceed --max-context {args.max_context}")
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    results = [bench_model(name, args) for name in args.models]
    print(f"{args.threads} thread(s), {args.rounds} interleaved round(s); ratios are relax_edge / peer "
          f"(above 1: relax_edge faster); relax_edge's times are the runtime's (device clock), the others' "
          f"this process's")
    print(table(results))
    if args.json:
        from relax_edge.files import write_atomic
        write_atomic(Path(args.json), json.dumps({"args": vars(args), "results": results}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
