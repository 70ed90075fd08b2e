"""The RPC protocol core under AddressSanitizer + UndefinedBehaviorSanitizer:
the stateful fuzz target (runtime_c/fuzz/rpc_fuzz.c) replays the checked-in
regression inputs (tests/runtime/rpc_corpus) and a generated corpus of
malformed frames, and traces stateful cases whose replies are checked here;
the target itself aborts when an ERROR reply changes the server's state. A
short libFuzzer run of the target (scripts/fuzz_rpc.sh runs it longer)."""

import random
import shutil
import struct
import subprocess
from pathlib import Path

import numpy as np
import pytest

from relax_edge.deploy import tensorfile
from relax_edge.toolchain import RUNTIME_DIR

ROOT = RUNTIME_DIR.parent
CORPUS = Path(__file__).parent / "rpc_corpus"
SOURCES = [RUNTIME_DIR / "fuzz" / "rpc_fuzz.c", RUNTIME_DIR / "fuzz" / "fuzz_module.c",
           RUNTIME_DIR / "rpc" / "protocol.c",
           *[RUNTIME_DIR / "src" / s for s in ("status.c", "check.c", "module.c", "generate.c", "sample.c")]]

# the ops of the fuzz target's input (see runtime_c/fuzz/rpc_fuzz.c)
RAW, SET_INPUT, BAD_INPUT, RUN, GET_OUTPUT, TIME, PROFILE, WORKSPACE, SELECT, OTHER, FAIL, SHUTDOWN = range(12)
BAD_SHAPE_1000_WITH_8_BYTES = 7


def frame(kind, payload=b"", length=None, magic=b"RX", flags=0):
    return magic + bytes([kind, flags]) + struct.pack("<I", len(payload) if length is None else length) + payload


def raw(data: bytes) -> bytes:
    """A RAW op carrying `data` (frames, headers included)."""
    return bytes([RAW]) + struct.pack("<H", len(data)) + data


def tensor(array) -> bytes:
    return tensorfile.encode([np.asarray(array)])[8:]


def frame_corpus():
    """Raw frame streams, each as RAW ops."""
    good = tensor(np.ones(4, np.float32))
    hello = frame(1, struct.pack("<I", 2))
    session = [hello, frame(4, struct.pack("<I", 0) + good), frame(5), frame(6, struct.pack("<I", 0)),
               frame(7, struct.pack("<III", 1, 3, 0)), frame(8), frame(9, struct.pack("<q", 5)), frame(10)]
    yield "valid_session", b"".join(raw(f) for f in session)
    yield "bad_magic", raw(b"XX" + hello[2:])
    yield "bad_flags", raw(frame(1, struct.pack("<I", 2), flags=7))
    yield "huge_length", raw(frame(4, b"", length=0xFFFFFFFF))
    yield "length_past_end", raw(frame(4, b"\x00" * 10, length=5000))
    yield "truncated_header", raw(b"RX\x01")
    yield "wrong_version", raw(frame(1, struct.pack("<I", 99)))
    yield "set_input_huge_dims", raw(frame(4, struct.pack("<I", 0) + b"\x02\x20\x02\x00"
                                           + struct.pack("<qq", 2**40, 2**40)))
    yield "set_input_negative_dim", raw(frame(4, struct.pack("<I", 0) + b"\x02\x20\x01\x00" + struct.pack("<q", -3)))
    yield "set_input_rank_9", raw(frame(4, struct.pack("<I", 0) + b"\x02\x20\x09\x00" + b"\x01" * 72))
    yield "set_input_bad_bits", raw(frame(4, struct.pack("<I", 0) + b"\x02\x03\x01\x00" + struct.pack("<q", 1) + b"x"))
    yield "set_input_index_out_of_range", raw(frame(4, struct.pack("<I", 4000) + good))
    yield "set_input_short_data", raw(frame(4, struct.pack("<I", 0) + good[:-3]))
    yield "set_input_wrong_dtype_then_run", b"".join(raw(f) for f in (
        frame(4, struct.pack("<I", 0) + b"\x00\x40\x01\x00" + struct.pack("<q", 2) + b"\x00" * 16), frame(5), frame(8)))
    yield "get_output_before_run", raw(frame(6, struct.pack("<I", 0)))
    yield "time_extremes", raw(frame(4, struct.pack("<I", 0) + good)) + \
        raw(frame(7, struct.pack("<III", 10**9, 10**9, 10**9)))
    yield "workspace_wrong_count", raw(frame(9, struct.pack("<qq", 1, 2))) + raw(frame(9, struct.pack("<q", -5)))
    yield "select_long_name", raw(frame(3, struct.pack("<I", 1000) + b"a" * 1000)) + \
        raw(frame(3, struct.pack("<I", 4) + b"main"))
    yield "select_bad_length", raw(frame(3, struct.pack("<I", 0xFFFFFFFF)))
    yield "unknown_types", b"".join(raw(frame(k)) for k in (0, 11, 128, 255))
    rng = random.Random(0)
    for k in range(40):
        yield f"random_ops_{k}", bytes(rng.getrandbits(8) for _ in range(rng.randint(0, 300)))
        payload = bytes(rng.getrandbits(8) for _ in range(rng.randint(0, 64)))
        yield f"random_frame_{k}", raw(frame(rng.choice([4, 7, 9, 3, 6]), payload))


@pytest.fixture(scope="module")
def replay(tmp_path_factory):
    """The fuzz target's replay main() over the hand-written module, under
    AddressSanitizer + UndefinedBehaviorSanitizer."""
    cc = shutil.which("gcc") or shutil.which("clang")
    if cc is None:
        pytest.skip("no C compiler")
    exe = tmp_path_factory.mktemp("rpc_fuzz") / "rpc_replay"
    flags = ["-fsanitize=address,undefined", "-fno-sanitize-recover=all", "-fno-omit-frame-pointer"]
    subprocess.run([cc, "-std=c99", "-g", "-O1", "-Wall", "-Wextra", "-Werror", *flags, f"-I{RUNTIME_DIR / 'include'}",
                    *map(str, SOURCES), "-o", str(exe)], check=True)
    return exe


def run_replay(exe, *args):
    proc = subprocess.run([str(exe), *map(str, args)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    assert "ERROR: AddressSanitizer" not in proc.stderr and "runtime error" not in proc.stderr, proc.stderr[-3000:]
    return proc.stdout


def test_corpus_under_sanitizers(replay, tmp_path):
    checked_in = sorted(CORPUS.iterdir())
    assert len(checked_in) >= 8
    for name, data in frame_corpus():
        (tmp_path / f"{name}.bin").write_bytes(data)
    out = run_replay(replay, CORPUS, tmp_path)
    assert f"RXE_CORPUS_OK {len(checked_in) + len(list(tmp_path.iterdir()))} files" in out


def trace(replay, tmp_path, ops: bytes):
    """The replies to a sequence of ops: one 'OP type T -> STATUS...' line each."""
    path = tmp_path / "case.bin"
    path.write_bytes(ops)
    return [line for line in run_replay(replay, "--trace", path).splitlines()
            if " -> " in line]


def test_malformed_set_input_after_a_good_one_changes_nothing(replay, tmp_path):
    """A good SET_INPUT of 4 floats, then one for the same index with shape
    (1000) and 8 bytes of data, then RUN: the RUN sees the 4 floats."""
    four = tensor(np.arange(4, dtype=np.float32))
    bad = struct.pack("<I", 0) + b"\x02\x20\x01\x00" + struct.pack("<q", 1000) + b"\x00" * 8
    for ops in (raw(frame(4, struct.pack("<I", 0) + four)) + raw(frame(4, bad)) + raw(frame(5)) +
                raw(frame(6, struct.pack("<I", 0))),
                bytes([SET_INPUT, 0, 4, 1, BAD_INPUT, 0, BAD_SHAPE_1000_WITH_8_BYTES, 4, RUN, GET_OUTPUT, 0])):
        lines = trace(replay, tmp_path, ops)
        assert lines[0].endswith("-> OK 0 bytes")
        assert "RXE_ERR_PROTOCOL: malformed SET_INPUT: 8 bytes of data, the shape and dtype take 4000" in lines[1]
        assert lines[2].endswith("-> OK 8 bytes")
        assert lines[3].endswith("-> OK 28 bytes")   # a (4,) float32 tensor: 4 + 8 + 16 bytes


def test_requests_after_a_good_run_fail_cleanly(replay, tmp_path):
    good = bytes([SET_INPUT, 0, 4, 1, RUN])
    cases = {
        # a malformed SELECT, TIME with bad arguments, an output index past the end and 0xFFFFFFFF
        bytes([SELECT, 2, 0]): "RXE_ERR_PROTOCOL: malformed SELECT: a name of 200 bytes",
        bytes([SELECT, 3, 0]): "RXE_ERR_PROTOCOL: malformed SELECT: the payload is truncated",
        bytes([SELECT, 1, 0]): "RXE_ERR_NOT_FOUND: SELECT: module fuzz has no function nope",
        bytes([TIME, 0]): "RXE_ERR_PROTOCOL: malformed TIME: warmup 0, repeat 0",
        bytes([TIME, 0xC6]): "RXE_ERR_PROTOCOL: malformed TIME: warmup 0, repeat 1, min_repeat_ms 1000000000",
        bytes([GET_OUTPUT, 1]): "RXE_ERR_PROTOCOL: GET_OUTPUT: no output 1 (function main has 1)",
        bytes([GET_OUTPUT, 255]): "RXE_ERR_PROTOCOL: GET_OUTPUT: no output 4294967295",
        bytes([WORKSPACE, 2, 1, 2]): "RXE_ERR_PROTOCOL: malformed WORKSPACE: 16 bytes",
        bytes([OTHER, 5]): "RXE_ERR_PROTOCOL: malformed LIST: 1 bytes past the end",
        bytes([OTHER, 3]): "RXE_ERR_PROTOCOL: unknown request type 66",
        # a failing run (x[0] = -1), and runs whose allocations or reply fail
        bytes([SET_INPUT, 0, 4, 3, RUN]): "RXE_ERR_INDEX: copy: x[0] = -1 is not a valid index",
        bytes([FAIL, 0, RUN]): "RXE_ERR_NO_MEMORY: out of memory for 16 bytes of output 0",
        bytes([FAIL, 0, SET_INPUT, 0, 4, 2]): "RXE_ERR_NO_MEMORY: SET_INPUT: out of memory for 16 bytes of input 0",
    }
    for ops, expected in cases.items():
        lines = trace(replay, tmp_path, good + ops + bytes([GET_OUTPUT, 0]))
        assert lines[1].endswith("-> OK 8 bytes"), lines
        assert expected in lines[-2], (ops, lines)
        assert lines[-1].endswith("-> OK 28 bytes"), (ops, lines)   # the good run's output is still there


def test_a_reply_that_cannot_grow_fails_cleanly(replay, tmp_path):
    """384 floats do not fit the target's first reply buffer; when it cannot
    grow, GET_OUTPUT fails with RXE_ERR_NO_MEMORY and the output stays."""
    lines = trace(replay, tmp_path, bytes([SET_INPUT, 0, 255, 1, RUN, FAIL, 0x80, GET_OUTPUT, 0, GET_OUTPUT, 0]))
    assert "RXE_ERR_NO_MEMORY: out of memory for the reply to GET_OUTPUT" in lines[2]
    assert lines[3].endswith(f"-> OK {4 + 8 + 384 * 4} bytes")


def test_get_output_after_a_failed_first_run(replay, tmp_path):
    lines = trace(replay, tmp_path, bytes([SET_INPUT, 0, 4, 3, RUN, GET_OUTPUT, 0, RUN]))
    assert "RXE_ERR_INDEX" in lines[1]
    assert "RXE_ERR_PROTOCOL: GET_OUTPUT: no outputs yet (RUN first)" in lines[2]
    assert "RXE_ERR_INDEX" in lines[3]


def test_libfuzzer_short_run():
    if shutil.which("clang") is None:
        pytest.skip("libFuzzer needs clang")
    proc = subprocess.run(["bash", str(ROOT / "scripts" / "fuzz_rpc.sh"), "5", "handwritten"], capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    runs = [int(line.split()[-2]) for line in proc.stdout.splitlines() if line.startswith("== handwritten:")
            and line.endswith("executions")]
    assert runs and runs[0] > 1000, proc.stdout
    assert "ERROR" not in proc.stdout
