"""The ctypes mirror of runtime_c/include/relax_edge/generate.h and
`generate_in_process`: rxe_generate called on an artifact's shared library
loaded in this process (deploy/host.py's LoadedModule.generate), on_token
called from its token callback."""

from __future__ import annotations

import ctypes
import time

import numpy as np

from ..codegen import abi
from ..errors import RelaxEdgeError
from .generate import STEP, GenerateRequest, GenerateResult, result
from .session import RuntimeCheckError

CLOCK = ctypes.CFUNCTYPE(ctypes.c_uint64, ctypes.c_void_p)
_MONOTONIC = CLOCK(lambda _ctx: time.monotonic_ns())   # a shared library links no rxe_profile_now_ns


class Decoder(ctypes.Structure):
    _fields_ = [("step", ctypes.POINTER(abi.Function)), ("input_ids", ctypes.c_int32),
                ("attention_mask", ctypes.c_int32), ("position_ids", ctypes.c_int32),
                ("first_state", ctypes.c_int32), ("num_state", ctypes.c_int32), ("max_context", ctypes.c_int64),
                ("vocab", ctypes.c_int64), ("state_bytes", ctypes.c_uint64), ("workspace_bytes", ctypes.c_uint64)]


class Sampling(ctypes.Structure):
    _fields_ = [("temperature", ctypes.c_float), ("top_k", ctypes.c_int32), ("top_p", ctypes.c_float),
                ("seed", ctypes.c_uint64)]


class GenerateConfig(ctypes.Structure):
    _fields_ = [("max_new_tokens", ctypes.c_int32), ("stop_tokens", ctypes.POINTER(ctypes.c_int64)),
                ("num_stop_tokens", ctypes.c_int32), ("sampling", Sampling),
                ("clock_ns", CLOCK), ("clock_ctx", ctypes.c_void_p)]


class GenerateStats(ctypes.Structure):
    _fields_ = [("num_tokens", ctypes.c_int32), ("prompt_tokens", ctypes.c_int32), ("prefill_ns", ctypes.c_uint64),
                ("decode_ns", ctypes.c_uint64), ("stopped_by", ctypes.c_int32)]


TOKEN_CALLBACK = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int32, ctypes.c_uint64)


def _aligned(nbytes: int, keep: list, alignment: int = 64):
    raw = np.zeros(nbytes + alignment, dtype=np.uint8)
    keep.append(raw)
    return raw.ctypes.data + (-raw.ctypes.data) % alignment


def generate_in_process(lib, module, req: GenerateRequest, on_token=None) -> GenerateResult:
    """rxe_generate through ctypes on a loaded shared library (`module`: its
    abi.Module), the memory allocated here once for the whole request."""
    for name in ("rxe_decoder_init", "rxe_generate", "rxe_decoder_scratch_bytes"):
        if not hasattr(lib, name):
            raise RelaxEdgeError(f"the shared library has no {name}: rebuild the artifact with this relax_edge")
    err = abi.Error()
    d = Decoder()
    status = lib.rxe_decoder_init(ctypes.byref(d), ctypes.byref(module), STEP.encode(), ctypes.byref(err))
    if status != 0:
        raise RuntimeCheckError(status, err.message.decode(errors="replace"))
    lib.rxe_decoder_scratch_bytes.restype = ctypes.c_uint64
    scratch_bytes = lib.rxe_decoder_scratch_bytes(ctypes.byref(d))
    n_out = min(req.max_new_tokens, d.max_context + 1)   # the context bound ends a run before more
    keep = []
    state = _aligned(d.state_bytes, keep)
    workspace = _aligned(d.workspace_bytes, keep, max(64, abi.WORKSPACE_ALIGNMENT))
    scratch = _aligned(scratch_bytes, keep)
    prompt = (ctypes.c_int64 * max(len(req.prompt), 1))(*req.prompt)
    stops = (ctypes.c_int64 * max(len(req.stop), 1))(*req.stop)
    tokens = (ctypes.c_int64 * n_out)()
    token_ns = (ctypes.c_uint64 * n_out)()
    config = GenerateConfig(n_out, stops, len(req.stop), Sampling(req.temperature, req.top_k, req.top_p, req.seed),
                            _MONOTONIC, None)
    stats = GenerateStats()
    raised = []

    def call_back(_user, token, _index, _ns):
        try:
            on_token(int(token))
        except BaseException as exc:   # noqa: BLE001 - raised again after the C loop stopped
            raised.append(exc)
            return 1
        return 0
    callback = TOKEN_CALLBACK(call_back) if on_token is not None else TOKEN_CALLBACK()
    status = lib.rxe_generate(ctypes.byref(d), prompt, ctypes.c_int32(len(req.prompt)), ctypes.byref(config),
                              ctypes.c_void_p(state), ctypes.c_uint64(d.state_bytes), ctypes.c_void_p(workspace),
                              ctypes.c_uint64(d.workspace_bytes), ctypes.c_void_p(scratch),
                              ctypes.c_uint64(scratch_bytes), tokens, token_ns, ctypes.byref(stats), callback, None,
                              ctypes.byref(err))
    if raised:
        raise raised[0]
    n = stats.num_tokens
    if status != 0:
        error = RuntimeCheckError(status, err.message.decode(errors="replace"))
        error.tokens = list(tokens[:n])   # those made before the error (a context bound reached)
        raise error
    return result(tokens[:n], token_ns[:n], stats.prompt_tokens, stats.prefill_ns, stats.decode_ns, stats.stopped_by)
