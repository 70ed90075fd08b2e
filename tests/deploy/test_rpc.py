"""The RPC server and client: run, benchmark and profile on the host, under
qemu-aarch64 and over SSH; malformed frames get clean error frames."""

import getpass
import json
import struct
import subprocess
import sys

import numpy as np
import pytest

import relax_edge as rxe
from relax_edge.deploy.rpc import ProcessStream, RpcClient
from tests.deploy.sshd import Sshd
from tests.models import build_cnn, cnn_weights


@pytest.fixture(scope="module")
def cnn():
    return build_cnn(cnn_weights())


@pytest.fixture(scope="module")
def sshd(tmp_path_factory):
    server = Sshd(tmp_path_factory.mktemp("sshd")).start()
    yield server
    server.stop()


def boards(sshd, tmp):
    return ["host", "qemu-aarch64", str(sshd.board_file(tmp / "ssh-qemu-aarch64.yaml", user=getpass.getuser()))]


@pytest.mark.emu
def test_run_benchmark_profile_everywhere(cnn, sshd, tmp_path):
    x = np.random.default_rng(0).standard_normal((2, 1, 16, 16)).astype(np.float32)
    ref = rxe.interpret(cnn, x)
    for k, board in enumerate(boards(sshd, tmp_path)):
        art = rxe.build(cnn, board=board, out_dir=tmp_path / f"b{k}", name="cnn")
        with rxe.connect(board) as dev:
            m = dev.load(art)
            np.testing.assert_allclose(m.run(x)[0], ref, rtol=1e-5, atol=1e-6)
            stats = m.benchmark(x, warmup=1, repeat=5)
            assert stats["repeat"] == 5 and len(stats["samples_ms"]) == 5
            assert stats["min_ms"] <= stats["median_ms"] <= stats["max_ms"] and stats["min_ms"] > 0
            prof = m.profile(x)
            names = {r["kernel"] for r in prof["rows"]}
            assert {"rxe_lib_conv2d_f32", "rxe_lib_dense_f32"} <= names and all(r["calls"] == 1 for r in prof["rows"])
            assert abs(sum(r["share"] for r in prof["rows"]) - 1) < 1e-9
            # the kernels account for the run: within 10% of the measured run time
            assert abs(prof["kernels_ms"] - prof["run_ms"]) <= 0.10 * prof["run_ms"]
            m.close()


def frames(stream, *raw):
    for data in raw:
        stream.send(data)


def test_malformed_frames_get_error_frames(cnn, tmp_path):
    art = rxe.build(cnn, board="host", out_dir=tmp_path / "h", name="cnn")
    stream = ProcessStream([str(art.server)], what="host")
    client = RpcClient(stream, timeout_s=30)
    with pytest.raises(rxe.RuntimeCheckError, match="unknown request type"):
        client.request(77)
    with pytest.raises(rxe.RuntimeCheckError, match="malformed SET_INPUT"):
        client.request(4, struct.pack("<I", 0) + b"\x02\x20\x01\x00" + struct.pack("<q", 10) + b"short")
    with pytest.raises(rxe.RuntimeCheckError, match="malformed SET_INPUT"):
        client.request(4, struct.pack("<I", 99))
    with pytest.raises(rxe.RuntimeCheckError, match="input 0 was not set"):
        client.request(5)
    with pytest.raises(rxe.RuntimeCheckError, match="malformed TIME"):
        client.request(7, struct.pack("<III", 0, 0, 0))
    # a header over the size limit: an error frame, then the server stops
    stream.send(b"RX\x05\x00" + struct.pack("<I", 0xFFFFFFF0))
    import time
    raw = stream.recv(8, time.monotonic() + 10)
    assert raw[:2] == b"RX" and raw[2] == 0xFF
    stream.close()
    assert "exceeds the limit" in stream.stderr.decode()


def test_bench_command_writes_json_atomically(tmp_path):
    from tests.onnx_models import get_model
    path, _ = get_model("mlp")
    out = tmp_path / "bench.json"
    proc = subprocess.run([sys.executable, "-m", "relax_edge.cli", "bench", str(path), "--board", "host",
                           "--build-dir", str(tmp_path / "b"), "--repeat", "7", "--profile", "--json", str(out),
                           "--plot", str(tmp_path / "profile.png"), "--dim", "batch=4"],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    assert "timed on the device" in proc.stdout and "top kernels" in proc.stdout
    assert "[relax-edge] running 3 warm-up and 7 timed repeats" in proc.stderr
    data = json.loads(out.read_text())
    assert data["benchmark"]["repeat"] == 7 and data["profile"]["rows"]
    assert not list(tmp_path.glob(".bench.json.*"))  # no partial file left
    assert (tmp_path / "profile.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
