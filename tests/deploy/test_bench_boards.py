"""`relax-edge bench --profile` of MobileNetV2 on the host, on qemu-aarch64
and on qemu-aarch64 behind a loopback sshd; and the server's TCP mode."""

import getpass
import json
import socket
import struct
import subprocess
import sys
import time

import pytest

import relax_edge as rxe
from relax_edge.deploy.rpc import PROTOCOL_VERSION
from tests.deploy.sshd import Sshd
from tests.models import build_mlp, mlp_weights
from tests.onnx_models import get_model


@pytest.mark.emu
@pytest.mark.slow
def test_bench_mobilenet_on_three_boards(tmp_path):
    path, _ = get_model("mobilenet_v2")
    server = Sshd(tmp_path / "sshd").start()
    try:
        ssh_board = server.board_file(tmp_path / "ssh-qemu-aarch64.yaml", user=getpass.getuser())
        for k, board in enumerate(["host", "qemu-aarch64", str(ssh_board)]):
            out = tmp_path / f"bench{k}.json"
            proc = subprocess.run([sys.executable, "-m", "relax_edge.cli", "bench", str(path), "--board", board,
                                   "--build-dir", str(tmp_path / f"b{k}"), "--warmup", "0", "--repeat", "1",
                                   "--profile", "--json", str(out)], capture_output=True, text=True, timeout=900)
            assert proc.returncode == 0, proc.stderr[-2000:]
            assert "top kernels" in proc.stdout and "rxe_lib_conv2d_f32" in proc.stdout
            data = json.loads(out.read_text())
            prof = data["profile"]
            assert abs(prof["kernels_ms"] - prof["run_ms"]) <= 0.10 * prof["run_ms"]
            assert data["benchmark"]["median_ms"] > 0
    finally:
        server.stop()


def test_server_tcp_mode_binds_loopback(tmp_path):
    art = rxe.build(build_mlp(mlp_weights()), board="host", out_dir=tmp_path / "mlp", name="mlp")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([str(art.server), "--tcp", str(port)], stderr=subprocess.PIPE)
    try:
        deadline = time.time() + 10
        while True:
            try:
                conn = socket.create_connection(("127.0.0.1", port), timeout=1)
                break
            except OSError:
                assert time.time() < deadline, "the server did not listen"
                time.sleep(0.05)
        with conn:
            conn.sendall(b"RX\x01\x00" + struct.pack("<I", 4) + struct.pack("<I", PROTOCOL_VERSION))
            head = conn.recv(8, socket.MSG_WAITALL)
            assert head[:2] == b"RX" and head[2] == 0x80
            conn.recv(struct.unpack("<I", head[4:])[0], socket.MSG_WAITALL)  # protocol, ABI, module name
            conn.sendall(b"RX\x0a\x00" + struct.pack("<I", 0))  # shutdown
            assert conn.recv(8, socket.MSG_WAITALL)[:3] == b"RX\x80"
        assert proc.wait(timeout=10) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
    assert b"listening on 127.0.0.1:" in proc.stderr.read()
