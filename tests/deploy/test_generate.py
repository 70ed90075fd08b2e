"""m.generate on every way a decoder runs: in process (ctypes calling
rxe_generate, on_token through a ctypes callback), through the local RPC
server (GENERATE, TOKEN frames) and on qemu-aarch64, over the hand-made
`step` of tests/deploy/toy_decoder.py, against its numpy greedy loop; the
argument checks before anything is sent; a function of 63 inputs (a
SmolLM2-sized state) and one of 130 through the server."""

import numpy as np
import pytest

import relax_edge as rxe
from relax_edge import op
from relax_edge.deploy.host import server_module
from relax_edge.ir import Builder, TensorType, Var

from .toy_decoder import CONTEXT, VOCAB, greedy, toy_decoder

PROMPT = [1, 2, 3]


@pytest.fixture(scope="module")
def art(tmp_path_factory):
    return rxe.build(toy_decoder(), board="host", out_dir=tmp_path_factory.mktemp("toy") / "toy", name="toy",
                     quiet=True, optimize=False, profile=False)


@pytest.fixture(scope="module")
def host_model(art):
    with rxe.connect("host") as dev:
        yield dev.load(art)


@pytest.fixture(scope="module")
def server_model(art):
    m = server_module(art, "main", None, "host")
    yield m
    m.close()


@pytest.fixture(params=["in_process", "server"])
def model(request, host_model, server_model):
    return host_model if request.param == "in_process" else server_model


def test_greedy_tokens_match_numpy(model):
    seen = []
    res = model.generate(PROMPT, max_new_tokens=8, on_token=seen.append)
    assert isinstance(res, rxe.GenerateResult)
    assert res.tokens == greedy(PROMPT, 8) and seen == res.tokens
    assert res.prompt_tokens == 3 and res.stopped_by == "max_new_tokens"
    assert len(res.token_ms) == 8 and res.ttft_ms > 0 and res.token_ms[0] == res.ttft_ms
    assert res.prefill_tok_s > 0 and res.decode_tok_s > 0
    assert model.generate(np.array([PROMPT], np.int32), max_new_tokens=3).tokens == greedy(PROMPT, 3)


def test_stop_tokens_and_sampling(model, host_model):
    ref = greedy(PROMPT, 8)
    res = model.generate(PROMPT, max_new_tokens=8, stop=[ref[2]])
    assert res.tokens == ref[:ref.index(ref[2]) + 1] and res.stopped_by == "stop_token"
    sampled = model.generate(PROMPT, max_new_tokens=10, temperature=1.5, top_k=5, top_p=0.95, seed=42)
    assert all(0 <= t < VOCAB for t in sampled.tokens) and len(sampled.tokens) == 10
    # the same seed, the same tokens, in process and in the server
    assert host_model.generate(PROMPT, max_new_tokens=10, temperature=1.5, top_k=5, top_p=0.95,
                               seed=42).tokens == sampled.tokens
    assert model.generate(PROMPT, max_new_tokens=6, temperature=1.0, top_k=1).tokens == greedy(PROMPT, 6)


def test_runtime_errors(model):
    with pytest.raises(rxe.RuntimeCheckError, match=f"RXE_ERR_BOUND: .*max_context={CONTEXT}") as info:
        model.generate(PROMPT, max_new_tokens=40)
    assert info.value.tokens == greedy(PROMPT, len(info.value.tokens)) and len(info.value.tokens) >= CONTEXT - 3
    with pytest.raises(rxe.RuntimeCheckError, match=f"RXE_ERR_BOUND: .*max_context={CONTEXT}"):
        model.generate([1] * (CONTEXT + 1), max_new_tokens=2)
    with pytest.raises(rxe.RuntimeCheckError, match="RXE_ERR_SHAPE"):
        model.generate([], max_new_tokens=2)
    assert model.generate(PROMPT, max_new_tokens=2).tokens == greedy(PROMPT, 2)


@pytest.mark.parametrize("kwargs, match", [
    ({"prompt_ids": [1.0, 2.0]}, "prompt_ids must be integer token ids, got float64"),
    ({"prompt_ids": [True]}, "prompt_ids must be integer token ids, got bool"),
    ({"prompt_ids": [[1, 2], [3, 4]]}, r"got shape \(2, 2\)"),
    ({"max_new_tokens": 0}, r"max_new_tokens must be an integer in \[1, 1000000\]"),
    ({"temperature": float("nan")}, "temperature must be a finite number"),
    ({"top_p": 1.5}, r"top_p must be a number in \[0, 1\]"),
    ({"top_k": -1}, "top_k must be an integer"),
    ({"seed": -1}, "seed must be an integer"),
    ({"stop": [0.5]}, "stop must be integer token ids"),
    ({"stop": list(range(65))}, "at most 64 stop tokens"),
])
def test_bad_arguments_fail_before_anything_is_sent(model, kwargs, match):
    args = {"prompt_ids": PROMPT, "max_new_tokens": 4, **kwargs}
    with pytest.raises(rxe.RelaxEdgeError, match=match):
        model.generate(args.pop("prompt_ids"), **args)


def test_a_module_without_step(tmp_path):
    art = rxe.build(toy_decoder(with_step=False), board="host", out_dir=tmp_path / "nostep", name="nostep",
                    quiet=True, optimize=False, profile=False)
    with rxe.connect("host") as dev:
        for m in (dev.load(art), server_module(art, "main", None, "host")):
            with m, pytest.raises(rxe.RelaxEdgeError, match="not built from a KV-cache decoder"):
                m.generate(PROMPT, max_new_tokens=2)


def test_many_tensors_through_the_server(tmp_path):
    """A step of 63 inputs (SmolLM2-135M: 60 cache tensors) generates over
    RPC; a function of 130 inputs runs."""
    art = rxe.build(toy_decoder(num_state=60), board="host", out_dir=tmp_path / "wide_step", name="wide_step",
                    quiet=True, optimize=False, profile=False)
    with server_module(art, "main", None, "host") as m:
        assert m.generate(PROMPT, max_new_tokens=4).tokens == greedy(PROMPT, 4)
    xs = [Var(f"x{k}", TensorType((2,), "float32")) for k in range(130)]
    bb = Builder()
    with bb.function("main", xs):
        with bb.dataflow():
            acc = xs[0]
            for x in xs[1:]:
                acc = bb.emit(op.add(acc, x))
            out = bb.emit_output(op.multiply(acc, np.float32(1.0)))
        bb.ret(out)
    wide = rxe.build(bb.get(), board="host", out_dir=tmp_path / "wide", name="wide", quiet=True, optimize=False,
                     profile=False)
    inputs = [np.full(2, k, np.float32) for k in range(130)]
    with server_module(wide, "main", None, "host") as m:
        np.testing.assert_array_equal(m.run(*inputs)[0], np.full(2, sum(range(130)), np.float32))


@pytest.mark.slow
@pytest.mark.emu
def test_generate_on_qemu_aarch64(tmp_path, host_model):
    art = rxe.build(toy_decoder(), board="qemu-aarch64", out_dir=tmp_path / "toy_a64", name="toy", quiet=True,
                    optimize=False, profile=False)
    with rxe.connect("qemu-aarch64") as dev, dev.load(art) as m:
        seen = []
        res = m.generate(PROMPT, max_new_tokens=8, on_token=seen.append)
        assert res.tokens == greedy(PROMPT, 8) == seen and res.ttft_ms > 0
        sampled = m.generate(PROMPT, max_new_tokens=8, temperature=1.5, seed=7)
        assert sampled.tokens == host_model.generate(PROMPT, max_new_tokens=8, temperature=1.5, seed=7).tokens
        with pytest.raises(rxe.RuntimeCheckError, match="RXE_ERR_BOUND"):
            m.generate(PROMPT, max_new_tokens=40)
        dev.rpc = False   # a board without a server: the runner's generate mode on tensor files
        with dev.load(art) as runner:
            assert runner.generate(PROMPT, max_new_tokens=8).tokens == res.tokens
