"""`relax-edge generate` and `relax-edge bench --generate`: token generation
with a KV-cache decoder's `step` function on a board (cli.py's parser hands
these the parsed arguments).

    relax-edge generate MODEL|DIR --board B (--prompt-ids 1,2,3 | --prompt TEXT --tokenizer tokenizer.json)
        --max-new-tokens N [--temperature T --top-k K --top-p P --seed S --stop 2,3] [--max-context N]
    relax-edge bench MODEL|DIR --generate [--prompt-len L --new-tokens N --repeat R] [--json out.json]

Tokens are printed as they come (decoded text with a tokenizer, ids
otherwise), the statistics at the end; the times are the device's. A GGUF
model (MODEL.gguf, or a DIR compiled from one that is still there) brings
its own tokenizer for --prompt and stops at its end-of-sequence token unless
--stop is given.
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

from .errors import RelaxEdgeError


def ids_arg(text: str) -> list:
    """--prompt-ids / --stop: comma-separated non-negative integers."""
    try:
        ids = [int(t, 10) for t in text.split(",") if t.strip()]
    except ValueError:
        ids = None
    if not ids or min(ids) < 0 or max(ids) >= 2**63:
        import argparse
        raise argparse.ArgumentTypeError(f"expected comma-separated token ids (0, 1, ...), got {text!r}")
    return ids


def add_generate_parser(sub, threads) -> None:
    from .cli import _int_arg
    p = sub.add_parser("generate", help="generate tokens with a KV-cache decoder on a board")
    p.add_argument("model", help="an ONNX decoder (with past/present pairs) or a directory made by compile")
    p.add_argument("--board", help="a board name or YAML file (default: the artifact's board)")
    p.add_argument("--prompt-ids", type=ids_arg, metavar="1,2,3", help="the prompt as token ids")
    p.add_argument("--prompt", help="the prompt as text (needs --tokenizer, except for a GGUF model)")
    p.add_argument("--tokenizer", help="a tokenizer.json (the `tokenizers` library) or a .gguf file, for --prompt "
                                       "and the output (default for a GGUF model: the file's own)")
    p.add_argument("--max-new-tokens", type=_int_arg(1, 1000000), default=32, help="tokens to generate (default 32)")
    p.add_argument("--temperature", type=float, default=0.0, help="sampling temperature (default 0: greedy)")
    p.add_argument("--top-k", type=_int_arg(0), help="keep the k most likely tokens (default: off)")
    p.add_argument("--top-p", type=float, help="nucleus sampling threshold in [0, 1] (default: off)")
    p.add_argument("--seed", type=_int_arg(0, 2**64 - 1), default=0, help="the sampler's seed (default 0)")
    p.add_argument("--stop", type=ids_arg, metavar="2,3", help="stop tokens (generation ends after one)")
    p.add_argument("--max-context", type=_int_arg(1), default=None,
                   help="context bound when compiling an ONNX file (default 256)")
    p.add_argument("--threads", type=threads, help="threads of the runtime's pool (default 1)")
    p.add_argument("--build-dir", help="where to compile an ONNX file (default build/<model name>)")
    p.set_defaults(func=cmd_generate)


def add_bench_options(p) -> None:
    from .cli import _int_arg
    p.add_argument("--generate", action="store_true", help="benchmark token generation (a KV-cache decoder)")
    p.add_argument("--prompt-len", type=_int_arg(1), default=16, help="with --generate: prompt tokens (default 16)")
    p.add_argument("--new-tokens", type=_int_arg(1, 1000000), default=32,
                   help="with --generate: tokens generated per run (default 32)")


def decoder_artifact(args):
    """The artifact of MODEL|DIR for generation, compiled with a context bound
    when MODEL is an ONNX file; (artifact, board)."""
    from .build import Artifact
    from .cli import _check_model, _check_output_dir, _compile
    from .target import DEFAULT_BOARD, load_board
    _check_model(args.model)
    target = Path(args.model)
    if target.is_dir():
        if getattr(args, "max_context", None):
            from .cli import UsageError
            raise UsageError("--max-context is for compiling a model file; the directory is already compiled")
        try:
            art = Artifact.load(target)
        except (ValueError, KeyError, TypeError) as err:
            raise RelaxEdgeError(f"{target / 'artifact.json'}: not a readable artifact description "
                                 f"({type(err).__name__}: {err}); rebuild with relax-edge compile") from None
    else:
        if args.build_dir:
            _check_output_dir(args.build_dir, "--build-dir")
        _, art, _ = _compile(args.model, args.board or DEFAULT_BOARD, "c", args.build_dir, {}, None,
                             max_context=getattr(args, "max_context", None) or 256)
    board = load_board(args.board).name if args.board else art.board
    if board != art.board:
        raise RelaxEdgeError(f"{art.out_dir} was built for board {art.board}, not {board}; "
                             f"rebuild with relax-edge compile --board {board}")
    if "step" not in art.signature:
        raise RelaxEdgeError(f"{art.out_dir}: the artifact has no `step` function: it was not built from a "
                             "KV-cache decoder (an ONNX model with past/present pairs or a GGUF decoder, compiled "
                             "with --max-context)")
    return art, board


def _gguf_source(args):
    """The GGUF file MODEL is, or the one its artifact was compiled from (if it is still there); else None."""
    path = Path(args.model)
    if path.is_dir():
        try:
            source = json.loads((path / "artifact.json").read_text()).get("source") or {}
        except (OSError, ValueError):
            return None
        path = Path(str(source.get("onnx") or ""))
    return path if path.suffix == ".gguf" and path.is_file() else None


def _tokenizer(path: str):
    try:
        from tokenizers import Tokenizer
    except ImportError:
        raise RelaxEdgeError("--tokenizer needs the `tokenizers` library (pip install tokenizers)") from None
    if not Path(path).is_file():
        raise RelaxEdgeError(f"--tokenizer {path}: no such file")
    if path.endswith(".gguf"):   # the tokenizer inside a GGUF file
        from .frontend.gguf import gguf_tokenizer
        return gguf_tokenizer(path)
    try:
        return Tokenizer.from_file(path)
    except Exception as err:   # noqa: BLE001 - the library raises plain Exceptions for a bad file
        raise RelaxEdgeError(f"--tokenizer {path}: not a tokenizer.json ({err})") from None


class TokenPrinter:
    """on_token: each token as it comes, decoded text (the new characters of
    the decoded sequence) with a tokenizer, ids otherwise."""

    def __init__(self, tokenizer):
        self.tokenizer = tokenizer
        self.ids = []
        self.text = ""

    def __call__(self, token: int) -> None:
        self.ids.append(token)
        if self.tokenizer is None:
            print(token, end=" ", flush=True)
            return
        text = self.tokenizer.decode(self.ids)
        if not text.endswith("\ufffd"):   # wait for the rest of a multi-byte character
            print(text[len(self.text):], end="", flush=True)
            self.text = text


def _statistics(res) -> str:
    decode = f"{res.decode_tok_s:.1f} tok/s" if res.decode_tok_s is not None else "n/a (one token)"
    return (f"  {len(res.tokens)} tokens (prompt {res.prompt_tokens}, stopped by {res.stopped_by})   "
            f"TTFT {res.ttft_ms:.3f} ms   prefill {res.prefill_tok_s:.1f} tok/s   decode {decode}")


def cmd_generate(args) -> int:
    from .cli import UsageError, _say
    from .deploy import connect
    if (args.prompt_ids is None) == (args.prompt is None):
        raise UsageError("give the prompt as --prompt-ids 1,2,3 or as --prompt TEXT with --tokenizer")
    gguf = _gguf_source(args)   # a GGUF model carries its tokenizer and its end-of-sequence token
    if args.prompt is not None and not args.tokenizer and gguf is None:
        raise UsageError("--prompt TEXT needs --tokenizer tokenizer.json (or give --prompt-ids)")
    tokenizer = _tokenizer(args.tokenizer or str(gguf)) if args.tokenizer or gguf is not None else None
    prompt = args.prompt_ids if args.prompt is None else tokenizer.encode(args.prompt).ids
    stop = args.stop
    if stop is None and gguf is not None:
        from .frontend.gguf import GGUFReader
        eos = GGUFReader(gguf).metadata.get("tokenizer.ggml.eos_token_id")
        stop = [int(eos)] if isinstance(eos, int) else None
    art, board = decoder_artifact(args)
    _say(f"generating {args.max_new_tokens} tokens with {art.prefix} on {board} (prompt of {len(prompt)} tokens)")
    printer = TokenPrinter(tokenizer)
    with connect(args.board or art.board_file or board) as dev, dev.load(art, threads=args.threads) as model:
        res = model.generate(prompt, max_new_tokens=args.max_new_tokens, temperature=args.temperature,
                             top_k=args.top_k, top_p=args.top_p, seed=args.seed, stop=stop, on_token=printer)
    print(file=sys.stdout, flush=True)
    print(_statistics(res))
    return 0


def bench_generate(args) -> int:
    """bench --generate: prefill and decode tokens/s, medians over --repeat runs."""
    from .cli import UsageError, _check_output_file, _say, _write_atomic
    from .deploy import connect
    if args.profile or args.plot or args.inputs or args.dim:
        raise UsageError("bench --generate takes --prompt-len, --new-tokens, --repeat, --warmup, --seed, "
                             "--threads and --json (not --profile, --plot, --inputs or --dim)")
    if args.json:
        _check_output_file(args.json, "--json")
    args.max_context = None
    art, board = decoder_artifact(args)
    vocab = int(art.signature["step"]["outputs"][0]["shape"].strip("()").split(",")[-1])
    prompt = [(args.seed + 7 * i) % vocab for i in range(args.prompt_len)]
    runs = []
    _say(f"deploying {art.prefix} to {board}; {args.warmup} warm-up and {args.repeat} timed generations")
    with connect(args.board or art.board_file or board) as dev, dev.load(art, threads=args.threads) as model:
        for k in range(args.warmup + args.repeat):
            res = model.generate(prompt, max_new_tokens=args.new_tokens)
            if k >= args.warmup:
                runs.append(res)
    prefill = statistics.median(r.prefill_tok_s for r in runs)
    decodes = [r.decode_tok_s for r in runs if r.decode_tok_s is not None]
    decode = statistics.median(decodes) if decodes else None
    ttft = statistics.median(r.ttft_ms for r in runs)
    print(f"{art.prefix} on {board}: generation of {len(runs[0].tokens)} tokens after a prompt of {args.prompt_len}, "
          f"medians over {len(runs)} runs, timed on the device")
    print(f"  TTFT {ttft:.3f} ms   prefill {prefill:.1f} tok/s   decode "
          + (f"{decode:.1f} tok/s" if decode is not None else "n/a (one token)"))
    if args.json:
        result = {"model": art.prefix, "board": board, "generate": {
            "prompt_tokens": args.prompt_len, "new_tokens": len(runs[0].tokens), "repeat": len(runs),
            "warmup": args.warmup, "ttft_ms": ttft, "prefill_tok_s": prefill, "decode_tok_s": decode,
            "runs": [{"ttft_ms": r.ttft_ms, "prefill_tok_s": r.prefill_tok_s, "decode_tok_s": r.decode_tok_s,
                      "token_ms": r.token_ms} for r in runs]}}
        _write_atomic(Path(args.json), json.dumps(result, indent=1).encode())
        print(f"  wrote {args.json}")
    return 0
