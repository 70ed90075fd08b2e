"""The SSH transport against a real OpenSSH server on 127.0.0.1: the board
is qemu-aarch64 behind sshd (the runner runs under qemu-aarch64 on the far
side). Results, content-hash uploads, and the faults users meet."""

import getpass

import numpy as np
import pytest

import relax_edge as rxe
from tests.deploy.sshd import Sshd, keygen
from tests.models import build_mlp, mlp_weights


@pytest.fixture(scope="module")
def sshd(tmp_path_factory):
    server = Sshd(tmp_path_factory.mktemp("sshd")).start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def mlp(sshd, tmp_path_factory):
    board = sshd.board_file(tmp_path_factory.mktemp("board") / "ssh-qemu-aarch64.yaml", user=getpass.getuser())
    mod = build_mlp(mlp_weights())
    art = rxe.build(mod, board=str(board), out_dir=tmp_path_factory.mktemp("mlp"), name="mlp", profile=False)
    return board, mod, art


@pytest.mark.emu
def test_run_over_ssh_matches_the_reference_and_uploads_once(mlp):
    board, mod, art = mlp
    x = np.random.default_rng(0).standard_normal((3, 784)).astype(np.float32)
    with rxe.connect(str(board)) as dev:
        m = dev.load(art)
        np.testing.assert_allclose(m.run(x)[0], rxe.interpret(mod, x), rtol=1e-5, atol=1e-6)
        assert m.workspace_bytes(n=3) > 0
        first = dev.uploads
    with rxe.connect(str(board)) as dev:
        m = dev.load(art)  # unchanged runner: not uploaded again
        assert dev.uploads == 0 and first == 1
        np.testing.assert_allclose(m.run(x[:1])[0], rxe.interpret(mod, x[:1]), rtol=1e-5, atol=1e-6)
        with pytest.raises(rxe.RuntimeCheckError, match="input x dimension 1 is 5, but it must be 784"):
            m.run(np.zeros((1, 5), np.float32))


@pytest.mark.emu
def test_wrong_key_is_refused_with_advice(sshd, mlp, tmp_path):
    other = keygen(tmp_path / "other_key")
    board = sshd.board_file(tmp_path / "b.yaml", key=other, user=getpass.getuser())
    with pytest.raises(rxe.DeviceError, match="was refused; add its public key to the board's ~/.ssh/authorized_keys"):
        rxe.connect(str(board))


def test_host_key_mismatch_and_unknown_host(sshd, tmp_path):
    keygen(tmp_path / "fake_host")
    pub = (tmp_path / "fake_host.pub").read_text().split()
    (tmp_path / "kh").write_text(f"[127.0.0.1]:{sshd.port} {pub[0]} {pub[1]}\n")
    board = sshd.board_file(tmp_path / "b.yaml", known_hosts=tmp_path / "kh", user=getpass.getuser())
    with pytest.raises(rxe.DeviceError, match="the host key differs"):
        rxe.connect(str(board))
    (tmp_path / "empty").write_text("")
    board = sshd.board_file(tmp_path / "c.yaml", known_hosts=tmp_path / "empty", user=getpass.getuser())
    with pytest.raises(rxe.DeviceError, match="unknown host key; add it"):
        rxe.connect(str(board))


def test_unreachable_board(sshd, tmp_path):
    board = sshd.board_file(tmp_path / "b.yaml", port=1, user=getpass.getuser())
    with pytest.raises(rxe.DeviceError, match="cannot reach the board"):
        rxe.connect(str(board))


@pytest.mark.emu
def test_sshd_killed_mid_session(tmp_path):
    server = Sshd(tmp_path / "sshd").start()
    try:
        board = server.board_file(tmp_path / "b.yaml", user=getpass.getuser())
        art = rxe.build(build_mlp(mlp_weights()), board=str(board), out_dir=tmp_path / "mlp", name="mlp", profile=False)
        dev = rxe.connect(str(board))
        m = dev.load(art)
        m.run(np.zeros((1, 784), np.float32))
        server.kill_sessions()  # sshd and its sessions die
        server.stop()
        with pytest.raises(rxe.DeviceError, match="connection was lost"):
            m.run(np.zeros((1, 784), np.float32))
    finally:
        server.stop()
