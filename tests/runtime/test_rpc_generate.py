"""GENERATE over RPC against the hand-written module of runtime_c/fuzz/fuzz_module.h
(its `step` is a toy KV-cache decoder: vocab 5, context 8, the next greedy
token (sum of the state + 1) % 5), under AddressSanitizer + UndefinedBehaviorSanitizer:
the server (rpc/server_posix.c) streams a TOKEN frame per token, good,
malformed and truncated frames and sequences of requests; the fuzz target
(rpc_fuzz.c) replays GENERATE ops and checks every reply's frames."""

import math
import random
import shutil
import struct
import subprocess

import numpy as np
import pytest

import relax_edge as rxe
from relax_edge.deploy import rpc
from relax_edge.deploy.generate import check_request
from relax_edge.deploy.rpc import ProcessStream, RpcClient
from relax_edge.toolchain import RUNTIME_DIR

RUNTIME = [RUNTIME_DIR / "src" / s for s in ("status.c", "check.c", "module.c", "generate.c", "sample.c")]
SERVER = [RUNTIME_DIR / "rpc" / "server_posix.c", RUNTIME_DIR / "rpc" / "protocol.c",
          RUNTIME_DIR / "fuzz" / "fuzz_module.c", RUNTIME_DIR / "src" / "threads.c", *RUNTIME]
REPLAY = [RUNTIME_DIR / "fuzz" / "rpc_fuzz.c", RUNTIME_DIR / "fuzz" / "fuzz_module.c",
          RUNTIME_DIR / "rpc" / "protocol.c", *RUNTIME]
SAN = ["-fsanitize=address,undefined", "-fno-sanitize-recover=all", "-fno-omit-frame-pointer"]
SIGNATURE = {"main": {}, "step": {}}   # what check_request looks at
GENERATE_OP = 12                       # rpc_fuzz.c's op kinds: 3 RUN, 1 SET_INPUT, 10 FAIL, 12 GENERATE


def compile_c(out, sources, *extra):
    cc = shutil.which("gcc") or shutil.which("clang")
    if cc is None:
        pytest.skip("no C compiler")
    subprocess.run([cc, "-std=c99", "-g", "-O1", "-Wall", "-Wextra", "-Werror", *SAN, f"-I{RUNTIME_DIR / 'include'}",
                    *extra, *map(str, sources), "-o", str(out), "-lpthread"], check=True)
    return out


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    return compile_c(tmp_path_factory.mktemp("gen_server") / "server", SERVER, "-DRXE_MODULE=rxe_fuzz_module")


@pytest.fixture(scope="module")
def replay(tmp_path_factory):
    return compile_c(tmp_path_factory.mktemp("gen_replay") / "replay", REPLAY)


@pytest.fixture
def client(server):
    stream = ProcessStream([str(server)], what="fuzz module server")
    c = RpcClient(stream, timeout_s=60)
    yield c
    c.close()
    text = stream.stderr.decode()
    assert stream.proc.returncode == 0, text[-3000:]
    assert "AddressSanitizer" not in text and "runtime error" not in text, text[-3000:]


def toy_greedy(prompt, n):
    """The toy step's greedy tokens, from its definition in fuzz_module.h."""
    state, out = list(prompt), []
    for _ in range(n):
        out.append((sum(state) + 1) % 5)
        state.append(out[-1])
    return out


def request(prompt, max_new, temperature=0.0, top_k=None, top_p=None, seed=0, stop=None):
    return check_request(SIGNATURE, prompt, max_new, temperature, top_k, top_p, seed, stop)


def payload(name=b"step", prompt=(2, 3), max_new=4, temperature=0.0, top_k=0, top_p=1.0, seed=0, stop=(),
            prompt_count=None, stop_count=None, temperature_bits=None):
    temp = struct.pack("<f", temperature) if temperature_bits is None else struct.pack("<I", temperature_bits)
    return b"".join([struct.pack("<I", len(name)), name,
                     struct.pack("<I", len(prompt) if prompt_count is None else prompt_count),
                     struct.pack(f"<{len(prompt)}q", *prompt), struct.pack("<I", max_new), temp,
                     struct.pack("<ifQ", top_k, top_p, seed),
                     struct.pack("<I", len(stop) if stop_count is None else stop_count),
                     struct.pack(f"<{len(stop)}q", *stop)])


def test_greedy_tokens_stream_one_frame_each(client):
    seen = []
    res = client.generate(request([2, 3], 5), on_token=seen.append)
    assert res.tokens == toy_greedy([2, 3], 5) == [1, 2, 4, 3, 1]
    assert seen == res.tokens
    assert res.prompt_tokens == 2 and res.stopped_by == "max_new_tokens"
    assert len(res.token_ms) == 5 and all(t >= 0 for t in res.token_ms)
    assert res.ttft_ms == res.token_ms[0] and math.isclose(res.decode_ms, sum(res.token_ms[1:]), rel_tol=1e-6)
    assert res.prefill_tok_s > 0 and res.decode_tok_s > 0


def test_stop_token_is_kept_and_ends(client):
    res = client.generate(request([2, 3], 6, stop=[4, 9]))
    assert res.tokens == [1, 2, 4] and res.stopped_by == "stop_token"


def test_sampling_is_reproducible_by_seed(client):
    first = client.generate(request([1], 7, temperature=1.0, seed=11))
    again = client.generate(request([1], 7, temperature=1.0, seed=11))
    assert first.tokens == again.tokens and all(0 <= t < 5 for t in first.tokens)
    draws = {tuple(client.generate(request([1], 7, temperature=2.0, seed=s)).tokens) for s in range(8)}
    assert len(draws) > 1   # the seed matters
    top1 = client.generate(request([1], 7, temperature=1.0, top_k=1, seed=3))
    assert top1.tokens == toy_greedy([1], 7)   # top-k 1 is greedy


def test_runtime_errors_come_back_with_the_tokens_made(client):
    with pytest.raises(rxe.RuntimeCheckError, match="RXE_ERR_BOUND: .*context bound max_context=8") as info:
        client.generate(request([4], 20))
    assert info.value.tokens == toy_greedy([4], 8)   # prompt 1 + 8 positions... the bound ends it
    with pytest.raises(rxe.RuntimeCheckError, match="RXE_ERR_SHAPE"):
        client.generate(request([], 3))
    with pytest.raises(rxe.RuntimeCheckError, match="RXE_ERR_BOUND: .*max_context"):
        client.generate(request([1] * 9, 3))
    with pytest.raises(rxe.RuntimeCheckError, match="RXE_ERR_INDEX: step: token 7"):
        client.generate(request([7], 3))
    assert client.generate(request([2, 3], 2)).tokens == [1, 2]   # the server goes on


def test_malformed_generate_frames(client):
    cases = [
        (payload(max_new=0), "RXE_ERR_PROTOCOL: malformed GENERATE: max_new_tokens 0"),
        (payload(max_new=2_000_000), "RXE_ERR_PROTOCOL: malformed GENERATE: max_new_tokens 2000000"),
        (payload(temperature_bits=0x7FC00000), "RXE_ERR_PROTOCOL: malformed GENERATE: temperature and top_p"),
        (payload(top_p=math.inf), "RXE_ERR_PROTOCOL: malformed GENERATE: temperature and top_p"),
        (payload(stop=tuple(range(65))), "RXE_ERR_PROTOCOL: malformed GENERATE: 65 stop tokens"),
        (payload(prompt_count=0xFFFFFFFF), "RXE_ERR_PROTOCOL: malformed GENERATE: a prompt of 4294967295 tokens"),
        (payload(stop_count=3), "RXE_ERR_PROTOCOL: malformed GENERATE: the payload is truncated"),
        (payload() + b"x", "RXE_ERR_PROTOCOL: malformed GENERATE: 1 bytes past the end"),
        (payload(name=b"a" * 200), "RXE_ERR_PROTOCOL: malformed GENERATE: a name of 200 bytes"),
        (payload(name=b"st\x00p"), "RXE_ERR_PROTOCOL: malformed GENERATE: a NUL byte"),
        (payload(name=b"nope"), "RXE_ERR_NOT_FOUND"),
        (payload(name=b"main"), "RXE_ERR_"),   # not a decoder: rxe_decoder_init refuses it
        (b"", "RXE_ERR_PROTOCOL: malformed GENERATE: the payload is truncated"),
    ]
    good = payload()
    cases += [(good[:cut], "RXE_ERR_PROTOCOL: malformed GENERATE") for cut in range(1, len(good), 5)]
    for body, match in cases:
        with pytest.raises(rxe.RuntimeCheckError, match=match):
            client.request(rpc.GENERATE, body)
    assert client.generate(request([2, 3], 3)).tokens == [1, 2, 4]


def test_generate_between_runs_changes_nothing(client):
    """SELECT count, SET_INPUT, RUN; GENERATE (good and bad); the outputs and
    the selected function are those of before."""
    client.request(rpc.SELECT, struct.pack("<I", 5) + b"count")
    x = np.arange(3, dtype=np.float32)
    client.set_input(0, x)
    client.request(rpc.RUN)
    assert client.generate(request([2], 4)).tokens == toy_greedy([2], 4)
    with pytest.raises(rxe.RuntimeCheckError):
        client.request(rpc.GENERATE, payload(max_new=0))
    np.testing.assert_array_equal(client.get_output(0), x + 1)
    client.request(rpc.RUN)
    np.testing.assert_array_equal(client.get_output(0), x + 2)


def test_an_exception_in_on_token_keeps_the_stream_in_step(client):
    def boom(token):
        raise ValueError(f"no thanks: {token}")
    with pytest.raises(ValueError, match="no thanks: 1"):
        client.generate(request([2, 3], 5), on_token=boom)
    assert client.generate(request([2, 3], 2)).tokens == [1, 2]


def test_tokens_arrive_before_the_generation_ends(server):
    """A TOKEN frame is on the stream before the next step runs: read the
    first frame of a request whose later tokens fail (the context bound)."""
    stream = ProcessStream([str(server)], what="fuzz module server")
    c = RpcClient(stream, timeout_s=60)
    c.send(rpc.GENERATE, payload(prompt=(4,), max_new=20))
    kinds = []
    while True:
        try:
            kind, body = c.reply(streamed=True)
        except rxe.RuntimeCheckError:
            kinds.append("ERROR")
            break
        kinds.append(kind)
    assert kinds == [rpc.TOKEN] * 8 + ["ERROR"]
    c.close()


def generate_ops(rng):
    """rpc_fuzz.c inputs of GENERATE ops among others (see its op list)."""
    ops = bytearray()
    for _ in range(rng.randint(1, 12)):
        kind = rng.choice([GENERATE_OP] * 4 + [1, 3, 10, 8, 9])
        ops += bytes([kind, rng.getrandbits(8), rng.getrandbits(8), rng.getrandbits(8)])
    return bytes(ops)


def test_generate_ops_in_the_fuzz_target(replay, tmp_path):
    rng = random.Random(5)
    for k in range(60):
        (tmp_path / f"gen_{k}.bin").write_bytes(generate_ops(rng))
    # every GENERATE variant (how % 8), with sampling, stops and failing allocations
    variants = b"".join(bytes([GENERATE_OP, how, a, b]) for how in range(64) for a, b in ((2, 5), (10, 11), (3, 0)))
    failing = bytes([10, 1, GENERATE_OP, 0, 2, 5, 10, 0x80, GENERATE_OP, 0, 2, 5])   # an allocation, a growth
    (tmp_path / "variants.bin").write_bytes(variants + failing)
    proc = subprocess.run([str(replay), str(tmp_path)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    assert "RXE_CORPUS_OK 61 files" in proc.stdout
    trace = subprocess.run([str(replay), "--trace", str(tmp_path / "variants.bin")], capture_output=True, text=True,
                           timeout=300).stdout
    assert "GENERATE tokens 1 2 4 3 1\nGENERATE type 11 -> OK 28 bytes" in trace
    assert "RXE_ERR_NO_MEMORY: GENERATE: out of memory" in trace
    assert "malformed GENERATE: 1000 stop tokens (the limit is 64)" in trace
