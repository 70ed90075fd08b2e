"""The engines scripts/bench_llm.py runs side by side, each behind one interface.

``engine.run(prompt, new_tokens) -> Generation``: greedy decoding of ``new_tokens`` tokens after the
``prompt`` (a list of ids), on an empty cache, with the prefill (the prompt's step plus picking its token)
and the decode (every later token) timed apart. An engine that cannot run here raises ``Unavailable`` with
the reason, which the table prints instead of numbers.

- ``OrtLoop``: ONNX Runtime on the ONNX export in the usual Python greedy loop (``PythonLoop``): the
  presents of a step are fed back as the next step's pasts (intra-op threads = N, sequential execution,
  all optimizations).
- ``GenAI``: onnxruntime-genai on its model builder's fp32 CPU model of the same checkpoint.
- ``LlamaCpp``: llama.cpp on a GGUF through llama-cpp-python's generate() (greedy), when installed, timed by
  llama.cpp's own counters; ``InChild(LlamaCpp, ...)`` runs it in a child process, so that a crash in
  llama.cpp is reported (``EngineCrashed``) instead of ending the benchmark.
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
def _llama_default_params_without_extra_bufts(module):
    """``module.llama_model_default_params`` with use_extra_bufts off (no weight repacking, no AMX buffers)."""
    default = module.llama_model_default_params

    def params():
        p = default()
        p.use_extra_bufts = False
        return p
    return params


class LlamaCpp:
    """llama-cpp-python's generate() with its greedy sampler (temp=0, no repetition penalty), the cache
    reset before each run so that no prompt prefix is reused.

    Its times are llama.cpp's own (llama_perf_context: the prompt's llama_decode and the one-token ones,
    no Python, no sampling) where the library gives them, else this process's clock around generate().
    ``extra_bufts=False`` loads the weights without llama.cpp's extra buffer types (its runtime repacking
    of Q4_0 / IQ4_NL / Q8_0 and the AMX buffers): where those crash, the plain ggml-cpu kernels still run.
    ``logits_all=True`` keeps every position's logits, for ``logits(ids)``."""
    label = "llama.cpp"

    def __init__(self, gguf_path, threads: int, n_ctx: int, extra_bufts: bool = True, n_batch: int = 512,
                 logits_all: bool = False):
        try:
            import llama_cpp
        except ImportError:
            raise Unavailable("not installed (pip install llama-cpp-python)") from None
        self.module = getattr(llama_cpp, "llama_cpp", None)   # the ctypes bindings (absent in a stand-in)
        if not extra_bufts:
            if self.module is None or not hasattr(self.module, "llama_model_default_params"):
                raise Unavailable("this llama-cpp-python cannot turn off the extra buffer types")
            self.module.llama_model_default_params = _llama_default_params_without_extra_bufts(self.module)
        kwargs = dict(logits_all=True) if logits_all else {}
        self.llm = llama_cpp.Llama(model_path=str(gguf_path), n_ctx=n_ctx, n_batch=n_batch, n_threads=threads,
                                   n_threads_batch=threads, verbose=False, **kwargs)

    def _perf(self):
        """llama.cpp's perf counters of the context, or None where this build or stand-in has none."""
        ctx = getattr(getattr(self.llm, "_ctx", None), "ctx", None)
        if ctx is None or self.module is None or not hasattr(self.module, "llama_perf_context"):
            return None
        return self.module.llama_perf_context(ctx)

    def run(self, prompt, new_tokens: int) -> Generation:
        self.llm.reset()
        if self._perf() is not None:
            self.module.llama_perf_context_reset(self.llm._ctx.ctx)
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
        gen = Generation(tokens, len(prompt), prefill, sum(times), times, wall_s=time.perf_counter() - start)
        perf = self._perf()   # each time from its counters where they counted this run's tokens
        if perf is not None and perf.n_p_eval == len(prompt):
            gen.prefill_s = perf.t_p_eval_ms / 1e3
        if perf is not None and len(tokens) > 1 and perf.n_eval == len(tokens) - 1:
            gen.decode_s = perf.t_eval_ms / 1e3
            gen.token_s = None
        return gen

    def logits(self, ids) -> np.ndarray:
        """The logits of every position of ``ids`` run as one prompt on an empty cache ([len(ids), vocab])."""
        self.llm.reset()
        self.llm.eval(list(ids))
        return np.array(self.llm.scores[:len(ids)], np.float32)

    def close(self):
        self.llm = None


# any engine in a child process --------------------------------------------------------------
class EngineCrashed(Unavailable):
    """The child process running the engine died (a segfault, an abort): the message says how and where."""


def _serve(factory, args, kwargs, pipe) -> None:
    try:
        engine = factory(*args, **kwargs)
    except Unavailable as exc:
        pipe.send(("unavailable", str(exc)))
        return
    except Exception as exc:
        pipe.send(("error", f"{type(exc).__name__}: {exc}"))
        return
    pipe.send(("ready", None))
    while True:
        method, call_args = pipe.recv()
        if method == "close":
            engine.close()
            return
        try:
            out = getattr(engine, method)(*call_args)
            pipe.send(("ok", dataclasses.asdict(out) if isinstance(out, Generation) else out))
        except Exception as exc:
            pipe.send(("error", f"{type(exc).__name__}: {exc}"))


def _death(exitcode) -> str:
    import signal
    if exitcode is not None and exitcode < 0:
        try:
            return f"killed by {signal.Signals(-exitcode).name}"
        except ValueError:
            return f"killed by signal {-exitcode}"
    return f"exited with status {exitcode}"


class InChild:
    """``factory(*args, **kwargs)`` (a module-level engine class) made and run in a spawned child process, so
    that a crash of a native library (a segfault in llama_decode) ends that engine, not the benchmark: the
    call that finds the child dead raises ``EngineCrashed``. ``run`` and ``logits`` go to the child's engine."""

    def __init__(self, factory, *args, timeout: float = 1800, **kwargs):
        self.label = getattr(factory, "label", factory.__name__)
        self.timeout = timeout
        ctx = multiprocessing.get_context("spawn")
        self.pipe, child = ctx.Pipe()
        self.proc = ctx.Process(target=_serve, args=(factory, args, kwargs, child), daemon=True)
        self.proc.start()
        child.close()
        status, payload = self._answer("loading")
        if status == "unavailable":
            self._reap()
            raise Unavailable(payload)

    def _reap(self):
        self.proc.join(10)
        if self.proc.is_alive():
            self.proc.kill()
            self.proc.join()

    def _answer(self, what: str):
        try:
            if not self.pipe.poll(self.timeout):
                raise TimeoutError(f"{self.label}: no answer in {self.timeout:.0f} s while {what}")
            status, payload = self.pipe.recv()
        except (EOFError, ConnectionError, OSError):
            self._reap()
            raise EngineCrashed(f"the {self.label} child process {_death(self.proc.exitcode)} while {what}") from None
        if status == "error":
            raise RuntimeError(f"{self.label} (child process), while {what}: {payload}")
        return status, payload

    def _call(self, method: str, *args):
        if not self.proc.is_alive():
            raise EngineCrashed(f"the {self.label} child process {_death(self.proc.exitcode)} earlier")
        self.pipe.send((method, args))
        return self._answer(f"in {method}()")[1]

    def run(self, prompt, new_tokens: int) -> Generation:
        return Generation(**self._call("run", [int(t) for t in prompt], int(new_tokens)))

    def logits(self, ids) -> np.ndarray:
        return self._call("logits", [int(t) for t in ids])

    def close(self):
        if self.proc.is_alive():
            try:
                self.pipe.send(("close", ()))
            except OSError:
                pass
        self._reap()


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
