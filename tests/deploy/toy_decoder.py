"""A hand-made module with a KV-cache decoder's `step` function (the step
contract: input_ids (1, seq), attention_mask (1, total), state_0.. of a fixed
(1, 2, CONTEXT, 4); logits (1, 1, VOCAB)), for testing the generation loop
and its transports without a compiled LLM: the logits are the summed
embeddings of the new tokens times a matrix (the state is not read)."""

import numpy as np

from relax_edge import op
from relax_edge.ir import Builder, SizeVar, TensorType, Var

VOCAB, DIM, CONTEXT = 11, 6, 16
_rng = np.random.default_rng(0)
EMBEDDING = _rng.standard_normal((VOCAB, DIM)).astype(np.float32)
PROJECTION = _rng.standard_normal((DIM, VOCAB)).astype(np.float32)


def toy_decoder(num_state: int = 2, with_step: bool = True):
    """`main` and (with_step) `step`, the same graph; build with optimize=False
    (the optimizer's dce keeps only what `main` reaches)."""
    bb = Builder()
    for name in ("main", "step") if with_step else ("main",):
        ids = Var("input_ids", TensorType((1, SizeVar("seq", lower=1, upper=CONTEXT)), "int64"))
        mask = Var("attention_mask", TensorType((1, SizeVar("total", lower=1, upper=CONTEXT)), "int64"))
        states = [Var(f"state_{k}", TensorType((1, 2, CONTEXT, 4), "float32")) for k in range(num_state)]
        with bb.function(name, [ids, mask, *states]):
            with bb.dataflow():
                rows = bb.emit(op.make_call("take", [EMBEDDING, ids], {"axis": 0}))
                summed = bb.emit(op.sum(rows, axis=1, keepdims=True))
                out = bb.emit_output(op.matmul(summed, PROJECTION))
            bb.ret(out)
    return bb.get()


def logits(ids) -> np.ndarray:
    return EMBEDDING[list(ids)].sum(0) @ PROJECTION


def greedy(prompt, n: int) -> list:
    """The numpy reference of the greedy loop: prefill on the prompt, then one token a step."""
    out, ids = [], list(prompt)
    for _ in range(n):
        out.append(int(np.argmax(logits(ids))))
        ids = [out[-1]]
    return out
