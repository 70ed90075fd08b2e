"""The engines scripts/bench_llm.py runs side by side, each behind one interface.

``engine.run(prompt, new_tokens) -> Generation``: greedy decoding of ``new_tokens`` tokens after the
``prompt`` (a list of ids), on an empty cache, with the prefill (the prompt's step plus picking its token)
and the decode (every later token) timed apart. An engine that cannot run here raises ``Unavailable`` with
the reason, which the table prints instead of numbers.

- ``OrtLoop``: ONNX Runtime on the ONNX export in the usual Python greedy loop (``PythonLoop``): the
  presents of a step are fed back as the next step's pasts (intra-op threads = N, sequential execution,
  all optimizations).
- ``GenAI``: onnxruntime-genai on its model builder's fp32 CPU model of the same checkpoint.
- ``LlamaCpp``: llama.cpp on an F32 GGUF through llama-cpp-python's generate() (greedy), when installed.
- ``RelaxEdge``: the export imported with ``max_context`` and built for the host (``build_relax_edge``),
  loaded with ``threads``, and ``m.generate(...)`` (the runtime's generation loop in C: no Python between
  tokens). Its times are the ones the runtime reports (device clock), its memory the artifact's state,
  arena and weights bytes (``artifact_memory``).
- ``RelaxEdgeMainLoop``: the same artifact's ``main`` in the Python loop, as ONNX Runtime runs it.

``peak_rss_growth(kind, ...)`` runs one generation of ``OrtLoop`` or ``GenAI`` in a child process and
returns how much its peak RSS (VmHWM) grew over its RSS after loading.
"""

from __future__ import annotations

import dataclasses
import json
import multiprocessing
import time
from pathlib import Path

import numpy as np


class Unavailable(Exception):
    """The engine cannot run here; the message says why (and how to get it)."""


@dataclasses.dataclass
class Generation:
    tokens: list
    prompt_tokens: int
    prefill_s: float            # time to first token: the prompt's step and picking its token
    decode_s: float             # every later token
    token_s: list | None = None  # per decoded token (after the first), where the engine gives them
    wall_s: float | None = None  # the whole call, on this process's clock (relax_edge's other times: the device's)

    @property
    def prefill_tok_s(self) -> float:
        return self.prompt_tokens / self.prefill_s

    @property
    def decode_tok_s(self) -> float:
        return (len(self.tokens) - 1) / self.decode_s if len(self.tokens) > 1 and self.decode_s > 0 else 0.0

    @property
    def decode_ms_per_token(self) -> float:
        """The median time of one decoded token (over ``token_s``, else the mean)."""
        if self.token_s:
            return float(np.median(self.token_s)) * 1e3
        return 1e3 / self.decode_tok_s if self.decode_tok_s else float("nan")


# ONNX Runtime ----------------------------------------------------------------------------
def ort_session(path, threads: int):
    import onnxruntime as ort
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    return ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])


class PythonLoop:
    """The usual Python greedy loop over a step function ``step(feeds) -> [logits, *presents]``: the presents
    of a step are the next step's pasts."""
    label = "loop"

    def __init__(self, step, cache_shape):
        self.step, self.cache_shape = step, cache_shape

    def run(self, prompt, new_tokens: int) -> Generation:
        from tests.llm_models import step_feeds
        layers, kv_heads, head_dim = self.cache_shape
        past = [np.zeros((1, kv_heads, 0, head_dim), np.float32) for _ in range(2 * layers)]
        tokens, times = [], []
        ids = list(prompt)
        start = time.perf_counter()
        prefill = 0.0
        for i in range(new_tokens):
            t0 = time.perf_counter()
            out = self.step(step_feeds(ids, past))
            past = out[1:]
            ids = [int(np.argmax(out[0][0, -1]))]
            tokens.append(ids[0])
            if i == 0:
                prefill = time.perf_counter() - start
            else:
                times.append(time.perf_counter() - t0)
        return Generation(tokens, len(prompt), prefill, sum(times), times)

    def close(self):
        self.step = None


class OrtLoop(PythonLoop):
    label = "ORT loop"

    def __init__(self, onnx_path, cache_shape, threads: int):
        session = ort_session(onnx_path, threads)
        super().__init__(lambda feeds: session.run(None, feeds), cache_shape)


# onnxruntime-genai -----------------------------------------------------------------------
class GenAI:
    label = "ORT GenAI"

    def __init__(self, folder, threads: int):
        try:
            import onnxruntime_genai as og
        except ImportError as exc:
            raise Unavailable(f"not installed (pip install onnxruntime-genai): {exc}") from None
        self.og = og
        config = og.Config(str(folder))
        config.overlay(json.dumps({"model": {"decoder": {"session_options": {
            "intra_op_num_threads": threads, "inter_op_num_threads": 1}}}}))
        self.model = og.Model(config)

    def run(self, prompt, new_tokens: int) -> Generation:
        og = self.og
        params = og.GeneratorParams(self.model)
        params.set_search_options(max_length=len(prompt) + new_tokens, do_sample=False)
        gen = og.Generator(self.model, params)
        tokens, times = [], []
        start = time.perf_counter()
        gen.append_tokens(np.asarray(prompt, dtype=np.int32))  # runs the prompt's step
        prefill = 0.0
        while not gen.is_done() and len(tokens) < new_tokens:
            t0 = time.perf_counter()
            gen.generate_next_token()  # runs the step of the previous token (none for the first), then picks
            tokens.append(int(gen.get_next_tokens()[0]))
            if len(tokens) == 1:
                prefill = time.perf_counter() - start
            else:
                times.append(time.perf_counter() - t0)
        return Generation(tokens, len(prompt), prefill, sum(times), times)

    def close(self):
        self.model = None


# llama.cpp -------------------------------------------------------------------------------
class LlamaCpp:
    """llama-cpp-python's generate() with its greedy sampler (temp=0, no repetition penalty), the cache
    reset before each run so that no prompt prefix is reused."""
    label = "llama.cpp"

    def __init__(self, gguf_path, threads: int, n_ctx: int):
        try:
            import llama_cpp
        except ImportError:
            raise Unavailable("not installed (pip install llama-cpp-python)") from None
        self.llm = llama_cpp.Llama(model_path=str(gguf_path), n_ctx=n_ctx, n_batch=512, n_threads=threads,
                                   n_threads_batch=threads, verbose=False)

    def run(self, prompt, new_tokens: int) -> Generation:
        self.llm.reset()
        tokens, times = [], []
        start = last = time.perf_counter()
        prefill = 0.0
        for token in self.llm.generate(list(prompt), temp=0.0, top_k=1, repeat_penalty=1.0, reset=True):
            now = time.perf_counter()  # the previous token's step and this token's sampling
            tokens.append(int(token))
            if len(tokens) == 1:
                prefill = now - start
            else:
                times.append(now - last)
            last = now
            if len(tokens) == new_tokens:
                break
        return Generation(tokens, len(prompt), prefill, sum(times), times)

    def close(self):
        self.llm = None


# relax_edge ------------------------------------------------------------------------------
def _loaded_generate(loaded):
    generate = getattr(loaded, "generate", None)
    if generate is None:
        raise Unavailable(f"generate not available ({type(loaded).__name__} has no generate() yet)")
    return generate


def rxe_generation(result, prompt_tokens: int) -> Generation:
    """A Generation from what ``m.generate`` returns: .tokens, .ttft_ms, .decode_ms (else .decode_tok_s) and
    .token_ms (per new token, the first one the prompt's step)."""
    tokens = [int(t) for t in result.tokens]
    token_ms = getattr(result, "token_ms", None)
    token_s = [float(t) / 1e3 for t in token_ms][1:] if token_ms is not None else None
    decode_ms = getattr(result, "decode_ms", None)
    if decode_ms is not None:
        decode_s = decode_ms / 1e3
    else:
        decode_s = (len(tokens) - 1) / result.decode_tok_s if result.decode_tok_s else 0.0
    return Generation(tokens, prompt_tokens, result.ttft_ms / 1e3, decode_s, token_s or None)


def build_relax_edge(onnx_path, max_context: int, out_dir: Path, backend: str = "c", optimize: bool = True):
    """The export imported with ``max_context`` and built for the host (the toolchain skipped when ``out_dir``
    holds the same build)."""
    import relax_edge as rxe
    mod = rxe.from_onnx(str(onnx_path), max_context=max_context)
    return rxe.build(mod, board="host", backend=backend, out_dir=out_dir, name="llm", quiet=True, optimize=optimize)


def artifact_memory(art) -> dict:
    """The artifact's RAM bill at its context bound: state, arena (the step function's fixed workspace, else
    the artifact's) and weights bytes."""
    arena = art.signature.get("step", {}).get("fixed_workspace_bytes") or art.workspace_bytes
    weights = getattr(art, "weights_bytes", None)
    if weights is None:
        blob = art.out_dir / f"{art.prefix}_weights.bin"
        weights = blob.stat().st_size if blob.exists() else None
    return {"state_bytes": getattr(art, "state_bytes", None), "arena_bytes": arena, "weights_bytes": weights}


class RelaxEdge:
    """m.generate on the host: the runtime's loop in C, timed by the runtime."""
    label = "relax_edge"

    def __init__(self, art, threads: int, loaded=None):
        self.art, self.device = art, None
        if loaded is None:
            import relax_edge as rxe
            if "step" not in art.signature:
                functions = ", ".join(sorted(art.signature))
                raise Unavailable(f"generate not available (the artifact has no step function, only {functions})")
            self.device = rxe.connect("host")
            loaded = self.device.load(art, threads=threads)
        self.loaded = loaded
        self.generate = _loaded_generate(loaded)

    def run(self, prompt, new_tokens: int) -> Generation:
        start = time.perf_counter()
        result = self.generate(list(prompt), max_new_tokens=new_tokens, temperature=0.0)
        gen = rxe_generation(result, len(prompt))
        gen.wall_s = time.perf_counter() - start
        return gen

    def memory(self) -> dict:
        return artifact_memory(self.art) if self.art is not None else {}

    def close(self):
        self.loaded.close()
        if self.device is not None:
            self.device.close()


class RelaxEdgeMainLoop(PythonLoop):
    """The artifact's ``main`` (pasts in, presents out) in the Python loop, as ONNX Runtime runs it: what
    relax_edge's kernels give without the step function and the runtime's loop (wall time)."""
    label = "relax_edge main loop"

    def __init__(self, art, cache_shape, threads: int):
        import relax_edge as rxe
        self.device = rxe.connect("host")
        self.loaded = self.device.load(art, threads=threads)
        super().__init__(lambda feeds: self.loaded.run(*feeds.values()), cache_shape)

    def close(self):
        self.loaded.close()
        self.device.close()


# peak RSS of a generation, in a child process ----------------------------------------------
def _status_kb(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"/proc/self/status has no {field}")


def _reset_peak() -> bool:
    """Reset VmHWM to the current RSS (Linux: write 5 to clear_refs); False where that is refused."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
        return True
    except OSError:
        return False


def _child_peak(kind: str, args: tuple, prompt, new_tokens: int, pipe) -> None:
    try:
        engine = {"ort": OrtLoop, "genai": GenAI}[kind](*args)
        loaded_kb = _status_kb("VmRSS")
        reset = _reset_peak()
        engine.run(prompt, new_tokens)
        peak_kb = _status_kb("VmHWM")
        pipe.send({"loaded_bytes": loaded_kb * 1024, "peak_bytes": peak_kb * 1024,
                   "growth_bytes": (peak_kb - loaded_kb) * 1024, "peak_reset": reset})
    except Exception as exc:  # reported by the parent
        pipe.send({"error": f"{type(exc).__name__}: {exc}"})
    finally:
        pipe.close()


def peak_rss_growth(kind: str, args: tuple, prompt, new_tokens: int, timeout: float = 1800) -> dict:
    """The peak RSS growth of one generation by engine ``kind`` ("ort" or "genai", built from ``args``)
    over its RSS once loaded, measured in a fresh child process (spawned, so nothing of this one counts)."""
    ctx = multiprocessing.get_context("spawn")
    parent, child = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_child_peak, args=(kind, args, list(prompt), new_tokens, child))
    proc.start()
    child.close()
    try:
        if not parent.poll(timeout):
            raise TimeoutError(f"the {kind} memory child gave no answer in {timeout:.0f} s")
        result = parent.recv()
    finally:
        proc.join(10)
        if proc.is_alive():
            proc.kill()
            proc.join()
    if "error" in result:
        raise RuntimeError(f"{kind} memory child: {result['error']}")
    return result
