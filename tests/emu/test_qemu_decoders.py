"""The Llama and Qwen2 test decoders' step (the KV cache as state) cross-
compiled with the C backend for qemu-aarch64 and qemu-riscv64: 32 greedy
tokens equal PyTorch's (transformers' generate).

The step is driven over RPC, call by call, as rxe_generate would drive it:
the first call sends every input, the state arrays included; later calls
send only the token inputs (input_ids, attention_mask, position_ids, the
step's first inputs). The server keeps each input's buffer until it is set
again, and the step writes the new positions into those buffers in place,
so the state lives on the device between calls. (Sending the host's state
arrays on every call would not work here: the device's writes to them are
not sent back.) The last call's logits are also checked against ONNX
Runtime's for the same tokens, presents fed back.
"""

import numpy as np
import pytest

import relax_edge as rxe
from relax_edge.deploy.rpc import RUN
from relax_edge.frontend.onnx import from_onnx
from tests.llm_models import MAX_CONTEXT, VOCAB, cache_shape, empty_cache, get_llm, step_feeds, torch_greedy

PROMPT = [3, 17, 42, 99, 5]
NEW_TOKENS = 32
TOKEN_INPUTS = ("input_ids", "attention_mask", "position_ids")


def token_inputs(names, tokens, past):
    seq = len(tokens)
    values = {"input_ids": np.asarray(tokens, np.int64).reshape(1, seq),
              "attention_mask": np.ones((1, past + seq), np.int64),
              "position_ids": np.arange(past, past + seq, dtype=np.int64).reshape(1, seq)}
    return [values[n] for n in names if n in TOKEN_INPUTS]


def device_greedy(m, names, prompt, new_tokens, states):
    """Greedy tokens and the last logits, the state kept on the device (see the module doc)."""
    assert names[:3] == list(TOKEN_INPUTS), names   # the token inputs come first

    def step_on_device(feeds):
        def go(client):
            for index, x in enumerate(feeds):
                client.set_input(index, x)
            client.request(RUN)
            return client.get_output(0)
        return m._call(go)

    ids, past, tokens, logits = list(prompt), 0, [], None
    for k in range(new_tokens):
        feeds = token_inputs(names, ids, past)
        logits = m.run(*feeds, *states)[0] if k == 0 else step_on_device(feeds)
        assert logits.shape == (1, 1, VOCAB)
        past += len(ids)
        ids = [int(np.argmax(logits[0, -1]))]
        tokens.append(ids[0])
    return tokens, logits


@pytest.mark.slow
@pytest.mark.emu
@pytest.mark.parametrize("board", ["qemu-aarch64", "qemu-riscv64"])
@pytest.mark.parametrize("name", ["llama", "qwen2"])
def test_decoder_step_greedy_on_qemu(name, board, tmp_path):
    import onnxruntime as ort
    path, model = get_llm(name)
    art = rxe.build(from_onnx(path, max_context=MAX_CONTEXT), board=board, backend="c", out_dir=tmp_path / "art",
                    name="llm", quiet=True, profile=False)
    names = [i["name"] for i in art.signature["step"]["inputs"]]
    layers, kv_heads, head_dim = cache_shape(model)
    states = [np.full((1, kv_heads, MAX_CONTEXT, head_dim), 1234.5, np.float32) for _ in range(2 * layers)]
    want = torch_greedy(model, PROMPT, NEW_TOKENS)
    assert len(set(want)) > 4, f"{name}: PyTorch's greedy tokens {want} say little"
    with rxe.connect(board) as dev:
        m = dev.load(art, function="step")
        got, last = device_greedy(m, names, PROMPT, NEW_TOKENS, states)
    assert got == want
    # the last step (total_seq = 5 + 31) against ORT's, its past the presents of the same tokens
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    past, ids = empty_cache(model), list(PROMPT)
    for token in [None, *want[:-1]]:
        ids = ids if token is None else [token]
        out = sess.run(None, step_feeds(ids, past))
        past = out[1:]
    assert past[0].shape[2] == len(PROMPT) + NEW_TOKENS - 1
    np.testing.assert_allclose(last, out[0][:, -1:], rtol=1e-4, atol=2e-5)
