"""scripts/soak_rpc.py against one server for a bounded time: the host
board's server as a local process (50,000 requests, and as many to a server
built with ASan + UBSan), and the qemu-aarch64 board's server behind a
loopback sshd (10,000 requests; qemu-user and the SSH round trips make it
slower). Every reply is checked by the soak; here: no
failures, every kind of malformed frame sent, RSS and descriptors flat, the
server gone afterwards, sshd stopped by its pid."""

import getpass
import importlib.util
import sys
from pathlib import Path

import pytest

from tests.deploy.sshd import Sshd

ROOT = Path(__file__).resolve().parent.parent.parent
_spec = importlib.util.spec_from_file_location("soak_rpc", ROOT / "scripts" / "soak_rpc.py")
soak_rpc = sys.modules.setdefault("soak_rpc", importlib.util.module_from_spec(_spec))
_spec.loader.exec_module(soak_rpc)

TIME_BOUND_S = 45


def check(report, pid):
    print(report.summary())
    assert not report.failures, report.summary()
    assert report.protocol >= 1 and report.errors_expected > 0
    assert len(report.malformed) == soak_rpc.MALFORMED_CASES, report.malformed
    flat = report.flatness()
    assert flat is not None, "too few RSS samples"
    assert flat[-1], report.summary()
    assert report.server_gone
    assert not Path(f"/proc/{pid}").exists()


@pytest.mark.slow
def test_soak_host_server(tmp_path):
    server, mod, device = soak_rpc.start_server("host", tmp_path / "soak")
    assert device is None
    report = soak_rpc.soak(server, mod, requests=50000, seconds=TIME_BOUND_S)
    check(report, server.pid)


@pytest.mark.slow
def test_soak_sanitized_host_server(tmp_path):
    """The same against a server built with ASan + UBSan: a memory error
    would end it; a leak fails its exit status, so `server_gone`."""
    server, mod, _ = soak_rpc.start_server("host", tmp_path / "soak", sanitize=True)
    report = soak_rpc.soak(server, mod, requests=50000, seconds=TIME_BOUND_S)
    check(report, server.pid)
    assert "Sanitizer" not in server.stderr and "runtime error" not in server.stderr, server.stderr[-3000:]


@pytest.mark.emu
@pytest.mark.slow
def test_soak_over_ssh(tmp_path):
    sshd = Sshd(tmp_path / "sshd").start()
    sshd_pid = sshd.proc.pid
    try:
        board = sshd.board_file(tmp_path / "ssh-qemu-aarch64.yaml", user=getpass.getuser())
        server, mod, device = soak_rpc.start_server(str(board), tmp_path / "soak")
        try:
            report = soak_rpc.soak(server, mod, requests=10000, seconds=TIME_BOUND_S, sample_every_s=0.25)
        finally:
            device.close()
    finally:
        sshd.stop()
    check(report, server.pid)
    assert not Path(f"/proc/{sshd_pid}").exists()


def test_flatness_flags_growth():
    """The judge itself: flat samples pass, a steady climb or a leaked
    descriptor does not."""
    report = soak_rpc.Report()
    report.samples = [(i, 20 << 20, 3) for i in range(40)]
    assert report.flatness()[-1]
    report.samples = [(i, (20 << 20) + i * (1 << 20), 3) for i in range(40)]
    assert not report.flatness()[-1]
    report.samples = [(i, 20 << 20, 3 + (i > 35)) for i in range(40)]
    assert not report.flatness()[-1]
    report.samples = report.samples[:3]
    assert report.flatness() is None
