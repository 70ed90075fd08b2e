"""Int4 decode and prefill tokens/s of relax_edge against llama.cpp and ONNX Runtime on the same weights, 1
thread, greedy, the same prompt token ids, side by side in one run: the engines take turns round after round
(--rounds) so that the load of a shared machine hits them alike; each figure is the median over rounds with
the spread (min..max), a round's prefill the median of its run and of up to 9 more prefill-only runs.

--model smollm2 (default): SmolLM2-135M-Instruct's GGUF (Q4_1, the Q8_0 embedding tied to the LM head),
relax_edge's build of it (m.generate, the runtime's loop in C, f32 activations).
--model llama: the tiny test Llama of scripts/bench_llm.py (2 layers, width 64, vocab 256), its float
weights written as a Q4_0 GGUF (scripts/llm_bench_models.q4_0_gguf), relax_edge's build of that file.

Peers (each joins the rounds):
- --llamacpp: llama.cpp (llama-cpp-python) on the same GGUF, in a child process (a crash in llama.cpp is
  printed as that engine's row instead of ending the run), timed by llama.cpp's own counters (no Python,
  no sampling; relax_edge's times are its runtime's, which include its sampling); --llamacpp-no-extra-bufts
  loads it without its extra buffer types (no weight repacking, no AMX buffers). A llama.cpp built by GCC
  12.2 with -march=native on an AMX CPU dies (SIGSEGV) on any prompt of 2 tokens or more of a Q4_0 / Q4_1 /
  Q8_0 file: GCC drops the stores that fill the AMX tile configuration before ldtilecfg, which then loads
  garbage; this flag, or a clang 14 build (its -march=native enables no AMX here), runs;
- --ort: ONNX Runtime (the Python loop that feeds the presents back) on the ONNX export quantized by its
  MatMulNBitsQuantizer (4 bits, block 32, symmetric: the Q4_0 scheme with float32 scales, so the same
  nibbles as the Q4_0 GGUF; accuracy_level 4), and relax_edge's build of that very file;
- --genai: onnxruntime-genai's int4 model of the same checkpoint (its model builder, offline: MatMulNBits
  block 32, int8 activations) and relax_edge's build of that folder (rxe.from_genai);
- --also DIR: more relax_edge builds of the GGUF as they are (e.g. of an older kernel); the main build (--build,
  default build/<model>_gguf) is always brought up to date with the current sources first.

--faithful (SmolLM2) prints, for 4 prompts, the greedy text of transformers (fp32, the GGUF dequantized),
relax_edge and llama.cpp, how many leading tokens agree with transformers', and the max |logit diff| to
transformers over every position of the prompt followed by transformers' greedy tokens.

Nothing is promised about speed: it depends on the machine and its load.

    python scripts/bench_gguf_decode.py [--model smollm2|llama] [--rounds 5] [--llamacpp] [--ort] [--genai]
                                        [--build DIR] [--also DIR ...] [--faithful] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

import llm_engines  # noqa: E402

from tests import llm_models  # noqa: E402

FAITHFUL_PROMPTS = ("Once upon a time", "The capital of France is", "def fibonacci(n):",
                    "The three primary colors are")
FAITHFUL_TOKENS = 24
SAME_FILE = {"ORT MatMulNBits": "nbits", "relax_edge on the MatMulNBits": "nbits", "ORT GenAI int4": "genai",
             "relax_edge on the genai int4": "genai"}   # the others run the GGUF
TITLES = {"smollm2": "SmolLM2-135M-Instruct GGUF Q4_1 (Q8_0 embedding)",
          "llama": "tiny Llama (2 layers, width 64), Q4_0 GGUF / MatMulNBits block 32"}


def say(msg: str) -> None:
    print(f"[bench_gguf_decode] {msg}", file=sys.stderr, flush=True)


def relax_edge_engine(build_dir: Path, gguf: Path, max_context: int, as_built: bool = False):
    """relax_edge's build of the GGUF in ``build_dir``, made from the current compiler and runtime (rxe.build
    skips the toolchain when the directory holds the same build), so that an older build left there is never
    timed as today's; ``as_built`` (--also) loads the directory's build as it is, made only when missing."""
    import relax_edge as rxe
    from relax_edge.build import Artifact
    if as_built and (build_dir / "artifact.json").exists():
        return llm_engines.RelaxEdge(Artifact.load(build_dir), threads=1)
    art = rxe.build(rxe.from_gguf(str(gguf), max_context=max_context), board="host", out_dir=build_dir, quiet=True)
    return llm_engines.RelaxEdge(art, threads=1)


def model_gguf(model: str) -> Path:
    if model == "smollm2":
        return llm_models.smollm2_gguf()
    import llm_bench_models
    return llm_bench_models.q4_0_gguf(llm_bench_models.get_model("llama"))


def prompt_ids(model: str, length: int) -> list:
    if model == "smollm2":
        return [int(t) for t in np.random.default_rng(0).integers(100, 40000, length)]
    import llm_bench_models
    return llm_bench_models.get_model("llama").prompt(length)


def llamacpp_engine(gguf: Path, max_context: int, extra_bufts: bool = True, logits_all: bool = False):
    """llama.cpp in a child process (InChild), or the reason it cannot run as a string."""
    try:
        return llm_engines.InChild(llm_engines.LlamaCpp, gguf, 1, max_context, extra_bufts=extra_bufts,
                                   logits_all=logits_all)
    except llm_engines.Unavailable as exc:
        return str(exc)


def genai_engines(model: str, max_context: int) -> dict:
    """onnxruntime-genai on its builder's int4 model of the checkpoint, and relax_edge's build of the same
    folder."""
    import llm_bench_models

    import relax_edge as rxe
    folder = llm_bench_models.genai_folder(llm_bench_models.get_model(model), "int4")
    build_dir = ROOT / "build" / f"{model}_genai_int4"
    art = rxe.build(rxe.from_genai(str(folder), max_context=max_context), board="host", out_dir=build_dir,
                    quiet=True, profile=False)
    return {"ORT GenAI int4": llm_engines.GenAI(folder, threads=1),
            "relax_edge on the genai int4": llm_engines.RelaxEdge(art, threads=1)}


def ort_engines(model: str, max_context: int) -> dict:
    """ONNX Runtime's loop on the MatMulNBits export, and relax_edge's build of that file."""
    import llm_bench_models
    bench = llm_bench_models.get_model(model)
    path = llm_bench_models.nbits_onnx(bench)
    art = llm_engines.build_relax_edge(path, max_context, ROOT / "build" / f"{model}_nbits32")
    return {"ORT MatMulNBits": llm_engines.OrtLoop(path, bench.cache_shape, threads=1),
            "relax_edge on the MatMulNBits": llm_engines.RelaxEdge(art, threads=1)}


def make_engines(args) -> tuple[dict, dict]:
    """``(engines, unavailable)``: the engines asked for by name, and the reason of each that cannot run."""
    gguf = model_gguf(args.model)
    build = args.build or ROOT / "build" / f"{args.model}_gguf"
    say(f"relax_edge: {build}")
    engines = {"relax_edge": relax_edge_engine(build, gguf, args.max_context)}
    unavailable = {}
    for extra in args.also:
        engines[f"relax_edge {extra.name}"] = relax_edge_engine(extra, gguf, args.max_context, as_built=True)
    if args.llamacpp:
        say(f"llama.cpp: {gguf.name} in a child process")
        engine = llamacpp_engine(gguf, args.max_context, extra_bufts=not args.llamacpp_no_extra_bufts)
        (unavailable if isinstance(engine, str) else engines)["llama.cpp"] = engine
    if args.ort:
        say("ONNX Runtime: MatMulNBits export (and relax_edge's build of it)")
        engines.update(ort_engines(args.model, args.max_context))
    if args.genai:
        say("onnxruntime-genai: its builder's int4 model (and relax_edge's build of it)")
        engines.update(genai_engines(args.model, args.max_context))
    return engines, unavailable


def timed_rounds(engines: dict, unavailable: dict, prompt, new_tokens: int, rounds: int) -> dict:
    """Every engine warmed up, then ``rounds`` interleaved rounds (each in a rotated order): per engine the
    runs' decode and prefill tok/s and the last run's tokens. An engine that crashes leaves the rounds with
    its reason in ``unavailable``."""
    from bench_llm import prefill_samples
    runs = {name: {"decode": [], "prefill": [], "tokens": None} for name in engines}

    def attempt(name, what):
        try:
            return what(engines[name])
        except llm_engines.EngineCrashed as exc:
            unavailable[name] = str(exc)
            del engines[name], runs[name]
            say(f"{name}: {exc}")
            return None

    def timed(engine):
        gen = engine.run(prompt, new_tokens)
        return gen, statistics.median(prefill_samples(engine, prompt, gen.prefill_s))
    for name in list(engines):
        attempt(name, lambda engine: engine.run(prompt, 8))
    for r in range(rounds):
        names = list(engines)
        for name in names[r % len(names):] + names[:r % len(names)]:
            done = attempt(name, timed)
            if done is None:
                continue
            gen, ttft = done
            runs[name]["decode"].append(gen.decode_tok_s)
            runs[name]["prefill"].append(len(prompt) / ttft)
            runs[name]["tokens"] = gen.tokens
            say(f"round {r + 1}/{rounds} {name}: decode {gen.decode_tok_s:.1f} tok/s, prefill {len(prompt) / ttft:.1f}")
    return runs


def _spread(values) -> str:
    return f"{np.median(values):9.1f} ({min(values):.1f}..{max(values):.1f})"


def report(title: str, runs: dict, unavailable: dict) -> list:
    lines = [title]
    for name, row in runs.items():
        lines.append(f"  {name:30s} decode {_spread(row['decode'])} tok/s   prefill {_spread(row['prefill'])} tok/s")
    for name, reason in unavailable.items():
        lines.append(f"  {name:30s} {reason}")
    names = list(runs)
    mine = [n for n in names if n.startswith("relax_edge")]
    for a in mine:
        for b in (n for n in names if not n.startswith("relax_edge")):
            lines.append(f"  {a} / {b}: decode {np.median(runs[a]['decode']) / np.median(runs[b]['decode']):.2f}x, "
                         f"prefill {np.median(runs[a]['prefill']) / np.median(runs[b]['prefill']):.2f}x")
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            if SAME_FILE.get(a, "gguf") == SAME_FILE.get(b, "gguf"):
                same = leading_agreement(runs[b]["tokens"], runs[a]["tokens"])
                lines.append(f"  greedy tokens of {a} and {b} (the same file) agree on the first {same} of "
                             f"{len(runs[a]['tokens'])}")
    return lines


# faithfulness -----------------------------------------------------------------------------
def leading_agreement(got, want) -> int:
    return next((i for i, (a, b) in enumerate(zip(got, want)) if a != b), min(len(got), len(want)))


def transformers_greedy(model, ids, new_tokens: int):
    """transformers' greedy tokens after ``ids`` (its own KV cache), and the logits of every position of ``ids``
    followed by those tokens (one forward pass)."""
    import torch
    with torch.no_grad():
        out = model(torch.tensor([ids]), use_cache=True)
        past, tokens = out.past_key_values, []
        for _ in range(new_tokens):
            tokens.append(int(out.logits[0, -1].argmax()))
            out = model(torch.tensor([[tokens[-1]]]), past_key_values=past, use_cache=True)
            past = out.past_key_values
        logits = model(torch.tensor([list(ids) + tokens[:-1]])).logits[0].numpy()
    return tokens, logits


def relax_edge_logits(engine, model, ids) -> np.ndarray:
    """The artifact's main on ``ids`` with an empty cache: the logits of every position."""
    feeds = llm_models.step_feeds(list(ids), llm_models.empty_cache(model))
    return engine.loaded.run(*feeds.values())[0][0]


def faithfulness(args) -> dict:
    """Greedy text and max |logit diff| against transformers of relax_edge and llama.cpp on SmolLM2."""
    model, tokenizer = llm_models.smollm2_model()
    gguf = llm_models.smollm2_gguf()
    mine = relax_edge_engine(args.build or ROOT / "build" / "smollm2_gguf", gguf, args.max_context)
    peer = llamacpp_engine(gguf, args.max_context, extra_bufts=not args.llamacpp_no_extra_bufts, logits_all=True)
    engines = {"relax_edge": (mine, lambda ids: relax_edge_logits(mine, model, ids))}
    if isinstance(peer, str):
        print(f"llama.cpp: {peer}")
    else:
        engines["llama.cpp"] = (peer, peer.logits)
    results = []
    print(f"faithfulness against transformers fp32 (the GGUF dequantized), {FAITHFUL_TOKENS} greedy tokens, "
          f"max |logit diff| over the prompt and transformers' greedy tokens")
    for text in FAITHFUL_PROMPTS:
        ids = tokenizer(text)["input_ids"]
        want, ref_logits = transformers_greedy(model, ids, FAITHFUL_TOKENS)
        row = {"prompt": text, "transformers": tokenizer.decode(want), "max_abs_logit": float(np.abs(ref_logits).max())}
        print(f"  {text!r}: max |logit| {row['max_abs_logit']:.2f}")
        print(f"    {'transformers':12s} {row['transformers']!r}")
        for name, (engine, logits) in engines.items():
            try:
                tokens = engine.run(ids, FAITHFUL_TOKENS).tokens
                diff = float(np.abs(logits(list(ids) + want[:-1]) - ref_logits).max())
            except llm_engines.EngineCrashed as exc:
                row[name] = {"error": str(exc)}
                print(f"    {name:12s} {exc}")
                continue
            row[name] = {"text": tokenizer.decode(tokens), "agree": leading_agreement(tokens, want),
                         "max_logit_diff": diff}
            print(f"    {name:12s} {row[name]['text']!r}  ({row[name]['agree']}/{FAITHFUL_TOKENS} tokens agree, "
                  f"max |logit diff| {diff:.2e})")
        results.append(row)
    for engine, _ in engines.values():
        engine.close()
    return {"faithfulness": results}


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="smollm2", choices=sorted(TITLES))
    parser.add_argument("--build", type=Path, help="relax_edge's build of the GGUF (rebuilt there when the "
                                                   "sources changed; default build/<model>_gguf)")
    parser.add_argument("--also", type=Path, nargs="*", default=[],
                        help="more relax_edge builds to time alike, loaded as built")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--prompt-tokens", type=int, default=128)
    parser.add_argument("--new-tokens", type=int, help="default 64 (smollm2), 256 (llama)")
    parser.add_argument("--max-context", type=int, default=512)
    parser.add_argument("--llamacpp", action="store_true", help="also llama.cpp on the same GGUF")
    parser.add_argument("--llamacpp-no-extra-bufts", action="store_true",
                        help="llama.cpp without its extra buffer types (no repacking, no AMX buffers)")
    parser.add_argument("--ort", action="store_true",
                        help="also ONNX Runtime on the MatMulNBits export and relax_edge's build of it")
    parser.add_argument("--genai", action="store_true",
                        help="also onnxruntime-genai's int4 model and relax_edge's build of it")
    parser.add_argument("--faithful", action="store_true",
                        help="only the faithfulness check against transformers (smollm2; llama.cpp when installed)")
    parser.add_argument("--json", type=Path, help="write every number here")
    args = parser.parse_args(argv)
    if args.new_tokens is None:
        args.new_tokens = 64 if args.model == "smollm2" else 256
    if args.rounds < 1 or args.prompt_tokens < 1 or args.new_tokens < 2:
        parser.error("--rounds and --prompt-tokens must be positive, --new-tokens at least 2")
    if args.prompt_tokens + args.new_tokens > args.max_context:
        parser.error(f"prompt + new tokens exceed --max-context {args.max_context}")
    if args.faithful and args.model != "smollm2":
        parser.error("--faithful compares SmolLM2 (--model smollm2)")
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.faithful:
        out = faithfulness(args)
    else:
        prompt = prompt_ids(args.model, args.prompt_tokens)
        engines, unavailable = make_engines(args)
        runs = timed_rounds(engines, unavailable, prompt, args.new_tokens, args.rounds)
        title = (f"{TITLES[args.model]}, 1 thread, prompt {args.prompt_tokens}, {args.new_tokens} new tokens, "
                 f"median over {args.rounds} interleaved rounds (min..max)")
        print("\n".join(report(title, runs, unavailable)))
        for engine in engines.values():
            engine.close()
        out = {"runs": runs, "unavailable": unavailable}
    if args.json:
        args.json.write_text(json.dumps({"args": {k: str(v) for k, v in vars(args).items()}, **out}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
