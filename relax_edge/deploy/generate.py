"""Token generation with a KV-cache decoder's `step` function, shared by the
transports: the arguments of `m.generate` checked before anything is sent,
and the result object (generate_abi.py: the in-process run through ctypes).

    res = m.generate([1, 2, 3], max_new_tokens=32)        # greedy
    res.tokens, res.ttft_ms, res.prefill_tok_s, res.decode_tok_s

The runtime (rxe_generate) owns the loop: prefill is one call of `step` on
the whole prompt, each later token one call on one token; the times are the
device's (rxe_profile_now_ns), per step.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ..errors import RelaxEdgeError

STEP = "step"
MAX_NEW_TOKENS = 1000000   # rpc.h RXE_RPC_MAX_NEW_TOKENS
MAX_STOP = 64              # rpc.h RXE_RPC_MAX_STOP
STOPPED_BY = {0: "max_new_tokens", 1: "stop_token", 2: "callback", 3: "error"}   # generate.h RXE_STOP_*


@dataclass
class GenerateResult:
    """What `m.generate` returns: the new token ids and the device's times."""

    tokens: list = field(default_factory=list)    # the new ids (the stop token included when one ended it)
    prompt_tokens: int = 0
    ttft_ms: float = 0.0                           # the prompt's step and sampling its token
    decode_ms: float = 0.0                         # every later step
    token_ms: list = field(default_factory=list)   # per new token, its step's time
    stopped_by: str = "max_new_tokens"             # or "stop_token", "callback"

    @property
    def prefill_tok_s(self) -> float:
        """Prompt tokens per second of prefill."""
        return self.prompt_tokens / (self.ttft_ms / 1e3) if self.ttft_ms > 0 else math.inf

    @property
    def decode_tok_s(self) -> float | None:
        """(tokens - 1) per second of decode; None with fewer than two tokens."""
        if len(self.tokens) < 2:
            return None
        return (len(self.tokens) - 1) / (self.decode_ms / 1e3) if self.decode_ms > 0 else math.inf


@dataclass
class GenerateRequest:
    """m.generate's arguments, checked."""

    prompt: list
    max_new_tokens: int
    temperature: float
    top_k: int
    top_p: float
    seed: int
    stop: list


def _integer(name: str, value, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or not low <= int(value) <= high:
        raise RelaxEdgeError(f"generate: {name} must be an integer in [{low}, {high}], got {value!r}")
    return int(value)


def _ids(name: str, values) -> list:
    arr = np.asarray(values)
    if arr.size == 0 and arr.ndim <= 2:
        return []
    if arr.dtype == np.bool_ or not np.issubdtype(arr.dtype, np.integer):
        what = arr.dtype.name if arr.dtype != object else "values that are not all integers"
        raise RelaxEdgeError(f"generate: {name} must be integer token ids, got {what}")
    if arr.ndim == 2 and arr.shape[0] == 1:
        arr = arr[0]
    if arr.ndim != 1:
        raise RelaxEdgeError(f"generate: {name} must be a list of ids or an array of shape (n,) or (1, n), "
                             f"got shape {arr.shape}")
    if arr.size and (int(arr.min()) < -2**63 or int(arr.max()) > 2**63 - 1):
        raise RelaxEdgeError(f"generate: {name} must fit int64")
    return [int(v) for v in arr]


def check_request(signature: dict, prompt_ids, max_new_tokens, temperature, top_k, top_p, seed,
                  stop) -> GenerateRequest:
    """The arguments as a request, or a RelaxEdgeError naming the bad one;
    `signature` is the artifact's (a decoder's has a `step` function)."""
    if STEP not in signature:
        raise RelaxEdgeError(f"generate: the artifact has no `{STEP}` function (it has "
                             f"{', '.join(signature) or 'none'}): it was not built from a KV-cache decoder "
                             "(an ONNX model with past/present pairs, compiled with max_context)")
    prompt = _ids("prompt_ids", [] if prompt_ids is None else prompt_ids)
    stops = _ids("stop", [] if stop is None else ([stop] if isinstance(stop, (int, np.integer)) else list(stop)))
    if len(stops) > MAX_STOP:
        raise RelaxEdgeError(f"generate: at most {MAX_STOP} stop tokens, got {len(stops)}")
    max_new = _integer("max_new_tokens", max_new_tokens, 1, MAX_NEW_TOKENS)
    if isinstance(temperature, bool) or not isinstance(temperature, (int, float, np.floating)) \
            or not math.isfinite(temperature):
        raise RelaxEdgeError(f"generate: temperature must be a finite number (0: greedy), got {temperature!r}")
    k = 0 if top_k is None else _integer("top_k", top_k, 0, 2**31 - 1)
    p = 1.0 if top_p is None else top_p
    if isinstance(p, bool) or not isinstance(p, (int, float, np.floating)) or not 0.0 <= p <= 1.0:
        raise RelaxEdgeError(f"generate: top_p must be a number in [0, 1] (1: off), got {top_p!r}")
    return GenerateRequest(prompt, max_new, float(temperature), k, float(p), _integer("seed", seed, 0, 2**64 - 1),
                           stops)


def result(tokens, token_ns, prompt_tokens: int, prefill_ns: int, decode_ns: int, stopped_by: int) -> GenerateResult:
    return GenerateResult(tokens=[int(t) for t in tokens], prompt_tokens=int(prompt_tokens), ttft_ms=prefill_ns / 1e6,
                          decode_ms=decode_ns / 1e6, token_ms=[ns / 1e6 for ns in token_ns],
                          stopped_by=STOPPED_BY.get(int(stopped_by), str(stopped_by)))
