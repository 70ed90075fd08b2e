"""Decode tokens/s of SmolLM2-135M-Instruct from its GGUF (Q4_1, the Q8_0
embedding tied to the LM head): relax_edge's build of the GGUF (m.generate,
the runtime's loop in C, f32 activations), with --llamacpp against llama.cpp
(llama-cpp-python) on the same file in the same process, 1 thread, greedy, the same prompt token ids; the engines
take turns round after round (--rounds) so that the load of a shared machine
hits both alike; each figure is the median over rounds with the spread
(min..max). Extra relax_edge builds (--also DIR, e.g. one of an older
kernel) join the rounds. --genai adds onnxruntime-genai's int4 model of the
same checkpoint (its model builder, offline, from the fp32 checkpoint:
MatMulNBits block 32, int8 activations) and relax_edge's build of that very
folder (rxe.from_genai, f32 activations), so the int4 weights are the same
for that pair. Nothing is promised about speed: it depends on the machine
and its load.

    python scripts/bench_gguf_decode.py [--build /tmp/smol] [--also /tmp/smol_old] [--rounds 5] [--llamacpp]
                                        [--genai]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

import llm_engines  # noqa: E402

from tests import llm_models  # noqa: E402


def relax_edge_engine(build_dir: Path, gguf: Path, max_context: int):
    import relax_edge as rxe
    from relax_edge.build import Artifact
    if not (build_dir / "artifact.json").exists():
        rxe.build(rxe.from_gguf(str(gguf), max_context=max_context), board="host", out_dir=build_dir, quiet=True)
    return llm_engines.RelaxEdge(Artifact.load(build_dir), threads=1)


def genai_engines(max_context: int) -> dict:
    """onnxruntime-genai on its builder's int4 model of SmolLM2, and relax_edge's build of the same folder."""
    import llm_bench_models

    import relax_edge as rxe
    folder = llm_bench_models.genai_folder(llm_bench_models.get_model("smollm2"), "int4")
    build_dir = ROOT / "build" / "smollm2_genai_int4"
    art = rxe.build(rxe.from_genai(str(folder), max_context=max_context), board="host", out_dir=build_dir,
                    quiet=True, profile=False)
    return {"ORT GenAI int4": llm_engines.GenAI(folder, threads=1),
            "relax_edge on the genai int4": llm_engines.RelaxEdge(art, threads=1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--build", type=Path, default=ROOT / "build" / "smollm2_gguf",
                        help="relax_edge's build of the GGUF (made there when missing)")
    parser.add_argument("--also", type=Path, nargs="*", default=[], help="more relax_edge builds to time alike")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--prompt-tokens", type=int, default=128)
    parser.add_argument("--new-tokens", type=int, default=64)
    parser.add_argument("--max-context", type=int, default=512)
    parser.add_argument("--llamacpp", action="store_true", help="also llama.cpp on the same GGUF")
    parser.add_argument("--genai", action="store_true",
                        help="also onnxruntime-genai's int4 model and relax_edge's build of it")
    args = parser.parse_args()
    gguf = llm_models.smollm2_gguf()
    prompt = [int(t) for t in np.random.default_rng(0).integers(100, 40000, args.prompt_tokens)]
    engines = {"relax_edge": relax_edge_engine(args.build, gguf, args.max_context)}
    for extra in args.also:
        engines[f"relax_edge {extra.name}"] = relax_edge_engine(extra, gguf, args.max_context)
    if args.llamacpp:
        engines["llama.cpp"] = llm_engines.LlamaCpp(gguf, threads=1, n_ctx=args.max_context)
    if args.genai:
        engines.update(genai_engines(args.max_context))
    for engine in engines.values():   # warm-up
        engine.run(prompt, 8)
    decode = {name: [] for name in engines}
    prefill = {name: [] for name in engines}
    tokens = {}
    names = list(engines)
    for r in range(args.rounds):
        for name in names[r % len(names):] + names[:r % len(names)]:
            gen = engines[name].run(prompt, args.new_tokens)
            decode[name].append(gen.decode_tok_s)
            prefill[name].append(gen.prefill_tok_s)
            tokens[name] = gen.tokens
    print(f"SmolLM2-135M-Instruct GGUF Q4_1, 1 thread, prompt {args.prompt_tokens}, {args.new_tokens} new tokens, "
          f"median over {args.rounds} interleaved rounds (min..max)")
    for name in names:
        d, p = np.array(decode[name]), np.array(prefill[name])
        print(f"  {name:28s} decode {np.median(d):7.1f} tok/s ({d.min():.1f}..{d.max():.1f})   "
              f"prefill {np.median(p):7.1f} tok/s ({p.min():.1f}..{p.max():.1f})")
    first = tokens[names[0]]
    for name in names[1:]:
        same = next((i for i, (a, b) in enumerate(zip(first, tokens[name])) if a != b), len(first))
        print(f"  greedy tokens of {names[0]} and {name} agree on the first {same} of {len(first)}")
    for engine in engines.values():
        engine.close()


if __name__ == "__main__":
    main()
