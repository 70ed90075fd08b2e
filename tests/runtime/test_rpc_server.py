"""The RPC server (rpc/server_posix.c) over the hand-written module of
runtime_c/fuzz/fuzz_module.h, under AddressSanitizer + UndefinedBehaviorSanitizer,
driven by the Python client: failed requests leave the state as it was, and
each request runs the model once whatever the size of its reply (the `count`
function adds its run count to its input, so the outputs tell)."""

import shutil
import struct
import subprocess
import time

import numpy as np
import pytest

import relax_edge as rxe
from relax_edge.codegen import abi
from relax_edge.deploy import rpc
from relax_edge.deploy.rpc import ProcessStream, RpcClient
from relax_edge.toolchain import RUNTIME_DIR

SOURCES = [RUNTIME_DIR / "rpc" / "server_posix.c", RUNTIME_DIR / "rpc" / "protocol.c",
           RUNTIME_DIR / "fuzz" / "fuzz_module.c",
           *[RUNTIME_DIR / "src" / s
             for s in ("status.c", "check.c", "module.c", "threads.c", "generate.c", "sample.c")]]
SAN = ["-fsanitize=address,undefined", "-fno-sanitize-recover=all", "-fno-omit-frame-pointer"]


def build_server(out, *defines):
    cc = shutil.which("gcc") or shutil.which("clang")
    if cc is None:
        pytest.skip("no C compiler")
    subprocess.run([cc, "-std=c99", "-g", "-O1", "-Wall", "-Wextra", "-Werror", *SAN, f"-I{RUNTIME_DIR / 'include'}",
                    "-DRXE_MODULE=rxe_fuzz_module", *defines, *map(str, SOURCES), "-o", str(out), "-lpthread"],
                   check=True)
    return out


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    return build_server(tmp_path_factory.mktemp("rpc_server") / "server")


@pytest.fixture(scope="module")
def small_reply_server(tmp_path_factory):
    """The server with a reply buffer of 272 bytes (the least) between requests."""
    return build_server(tmp_path_factory.mktemp("rpc_server_small") / "server", "-DRXE_RPC_REPLY_BYTES=272")


class Session:
    def __init__(self, exe):
        self.stream = ProcessStream([str(exe)], what="fuzz module server")
        self.client = RpcClient(self.stream, timeout_s=60)

    def __getattr__(self, name):
        return getattr(self.client, name)

    def select(self, name):
        self.client.request(rpc.SELECT, struct.pack("<I", len(name)) + name.encode())

    def fails(self, status, match, kind, payload=b""):
        with pytest.raises(rxe.RuntimeCheckError, match=f"{status}: {match}"):
            self.client.request(kind, payload)

    def close(self):
        self.client.close()
        assert self.stream.proc.returncode == 0, self.stream.stderr.decode()[-3000:]
        text = self.stream.stderr.decode()
        assert "AddressSanitizer" not in text and "runtime error" not in text, text[-3000:]


@pytest.fixture
def session(server):
    s = Session(server)
    yield s
    s.close()


def test_malformed_set_input_after_a_good_one_leaves_the_input(session):
    x = np.arange(4, dtype=np.float32)
    session.set_input(0, x)
    shape_1000_with_8_bytes = struct.pack("<I", 0) + b"\x02\x20\x01\x00" + struct.pack("<q", 1000) + b"\x00" * 8
    session.fails("RXE_ERR_PROTOCOL", "malformed SET_INPUT: 8 bytes of data, the shape and dtype take 4000",
                  rpc.SET_INPUT, shape_1000_with_8_bytes)
    session.request(rpc.RUN)
    np.testing.assert_array_equal(session.get_output(0), x)


def test_failed_requests_after_a_good_run_keep_its_output(session):
    x = np.array([3, 1, 4, 1, 5], np.float32)
    session.fails("RXE_ERR_PROTOCOL", r"GET_OUTPUT: no outputs yet \(RUN first\)", rpc.GET_OUTPUT, struct.pack("<I", 0))
    session.fails("RXE_ERR_PROTOCOL", r"input 0 was not set \(x\)", rpc.RUN)
    session.set_input(0, x)
    session.request(rpc.RUN)
    session.fails("RXE_ERR_PROTOCOL", "malformed SELECT: a name of 200 bytes", rpc.SELECT,
                  struct.pack("<I", 200) + b"a" * 200)
    session.fails("RXE_ERR_NOT_FOUND", "SELECT: module fuzz has no function nope", rpc.SELECT,
                  struct.pack("<I", 4) + b"nope")
    session.fails("RXE_ERR_PROTOCOL", "malformed TIME: warmup 1, repeat 0", rpc.TIME, struct.pack("<III", 1, 0, 0))
    session.fails("RXE_ERR_PROTOCOL", "malformed TIME: the payload is truncated", rpc.TIME, struct.pack("<II", 1, 1))
    session.fails("RXE_ERR_PROTOCOL", r"GET_OUTPUT: no output 4294967295 \(function main has 1\)", rpc.GET_OUTPUT,
                  struct.pack("<I", 0xFFFFFFFF))
    session.fails("RXE_ERR_PROTOCOL", "malformed WORKSPACE: 16 bytes", rpc.WORKSPACE, struct.pack("<qq", 1, 2))
    session.fails("RXE_ERR_PROTOCOL", "malformed RUN: 3 bytes past the end of the request", rpc.RUN, b"abc")
    session.fails("RXE_ERR_PROTOCOL", "unknown request type 77", 77)
    # a run that fails part way (x[0] = -1) keeps the last good outputs
    session.set_input(0, np.array([-1, 7], np.float32))
    session.fails("RXE_ERR_INDEX", "copy: x", rpc.RUN)
    session.fails("RXE_ERR_INDEX", "copy: x", rpc.TIME, struct.pack("<III", 0, 2, 0))
    np.testing.assert_array_equal(session.get_output(0), x)


def test_a_large_output_and_one_run_per_request(session):
    """count's output of 1.2 MB passes the 1 MiB reply buffer; RUN runs it
    once, TIME once plus its warm-ups and repeats, PROFILE once."""
    session.select("count")
    x = np.zeros(300_000, np.float32)
    session.set_input(0, x)
    session.request(rpc.RUN)
    np.testing.assert_array_equal(session.get_output(0), x + 1)
    body = session.request(rpc.TIME, struct.pack("<III", 2, 3, 0))
    assert struct.unpack_from("<I", body)[0] == 3
    np.testing.assert_array_equal(session.get_output(0), x + 7)   # 1 + (1 planned + 2 warm-up + 3 timed)
    session.request(rpc.PROFILE)
    np.testing.assert_array_equal(session.get_output(0), x + 8)


def test_replies_larger_than_the_buffer_run_once(small_reply_server):
    s = Session(small_reply_server)
    s.select("count")
    x = np.arange(100, dtype=np.float32)
    s.set_input(0, x)
    body = s.request(rpc.TIME, struct.pack("<III", 0, 200, 0))   # 4 + 1600 bytes
    assert struct.unpack_from("<I", body)[0] == 200
    np.testing.assert_array_equal(s.get_output(0), x + 201)          # 400 bytes of data
    listing = s.request(rpc.LIST)
    assert struct.unpack_from("<I", listing)[0] == 3   # main, count, step
    s.request(rpc.RUN)
    np.testing.assert_array_equal(s.get_output(0), x + 202)
    s.close()


def test_a_bad_header_gets_a_protocol_error_frame(server):
    stream = ProcessStream([str(server)], what="fuzz module server")
    stream.send(b"XY\x05\x00" + struct.pack("<I", 0))
    head = stream.recv(8, time.monotonic() + 30)
    assert head[:4] == b"RX\xff\x00"
    body = stream.recv(struct.unpack_from("<I", head, 4)[0], time.monotonic() + 30)
    status, n = struct.unpack_from("<II", body)
    assert abi.STATUS_NAMES[status] == "RXE_ERR_PROTOCOL"
    assert body[8:8 + n].decode() == 'bad frame magic: bytes 88 89 (expected "RX")'
    stream.close()
    assert stream.proc.returncode == 2
