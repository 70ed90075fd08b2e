"""A real OpenSSH server on 127.0.0.1 for tests: temporary host and client
keys, started by the test, stopped by its pid."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from pathlib import Path

import yaml

from relax_edge.target import BOARDS_DIR


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def keygen(path: Path) -> Path:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)], check=True)
    return path


class Sshd:
    def __init__(self, root: Path):
        self.root = root
        root.mkdir(parents=True, exist_ok=True)
        self.host_key = keygen(root / "host_ed25519")
        self.client_key = keygen(root / "client_ed25519")
        (root / "authorized_keys").write_text((root / "client_ed25519.pub").read_text())
        self.port = free_port()
        self.pidfile = root / "sshd.pid"
        self.proc = None
        host_pub = (root / "host_ed25519.pub").read_text().split()
        self.known_hosts = root / "known_hosts"
        self.known_hosts.write_text(f"[127.0.0.1]:{self.port} {host_pub[0]} {host_pub[1]}\n")

    def start(self) -> "Sshd":
        Path("/run/sshd").mkdir(parents=True, exist_ok=True)
        cmd = ["/usr/sbin/sshd", "-D", "-e", "-f", "/dev/null", "-p", str(self.port),
               "-o", "ListenAddress=127.0.0.1", "-o", f"HostKey={self.host_key}", "-o", f"PidFile={self.pidfile}",
               "-o", f"AuthorizedKeysFile={self.root / 'authorized_keys'}", "-o", "StrictModes=no",
               "-o", "PasswordAuthentication=no", "-o", "KbdInteractiveAuthentication=no",
               "-o", "PermitRootLogin=prohibit-password", "-o", "UsePAM=no",
               "-o", "Subsystem=sftp internal-sftp"]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=open(self.root / "sshd.log", "w"))
        deadline = time.time() + 10
        while time.time() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return self
            except OSError:
                time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"sshd did not start: {(self.root / 'sshd.log').read_text()}")

    def kill_sessions(self) -> None:
        """Kill the per-connection sshd processes (as a crashing server would)."""
        if self.proc is not None:
            subprocess.run(["pkill", "-KILL", "-P", str(self.proc.pid)], check=False)

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
            self.proc = None

    def board_file(self, path: Path, name="ssh-qemu-aarch64", key=None, known_hosts=None, **ssh) -> Path:
        """A board like qemu-aarch64 reached over this sshd, running the
        aarch64 runner under qemu-aarch64 on the far side."""
        data = yaml.safe_load((BOARDS_DIR / "qemu-aarch64.yaml").read_text())
        data.pop("qemu")
        data.update(name=name, transport="ssh", description="qemu-aarch64 behind a loopback sshd")
        data["ssh"] = {"host": "127.0.0.1", "port": self.port, "user": os.environ.get("USER", "root") or "root",
                       "key": str(key or self.client_key), "workdir": str(self.root / "work"),
                       "known_hosts": str(known_hosts or self.known_hosts), "trust_on_first_use": False,
                       "command_prefix": ["qemu-aarch64", "-L", "/usr/aarch64-linux-gnu"], **ssh}
        path.write_text(yaml.safe_dump(data))
        return path
