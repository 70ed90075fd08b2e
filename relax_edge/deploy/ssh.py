"""Running artifacts on a board over SSH (paramiko): nothing listens on the
network but the board's own sshd.

    with rxe.connect("raspberry-pi-4") as dev:      # a board file with an ssh section
        outs = dev.load(art).run(x)

1. Key authentication only; the board's host key is checked against
   known_hosts, and trusted on first use only when the board file says so.
2. The runner executable is uploaded by SFTP into `workdir/<content hash>/`
   and not uploaded again while unchanged; tensors travel as files there.
3. Every remote command has the board's timeout; `command_prefix` (e.g. an
   emulator on a stand-in board) is put in front of the runner.
4. Failures say what to do: an unreachable host, a refused key, an unknown
   or changed host key, a full remote disk, a lost connection.
"""

from __future__ import annotations

import hashlib
import os
import shlex
import socket
import subprocess
import time
from pathlib import Path

from ..target import Board
from .remote import DeviceSession
from .session import DeviceError


def _expand(path: str | None) -> str | None:
    return None if path is None else os.path.expanduser(path)


class SshDevice(DeviceSession):
    """A board reached over SSH: the model's server over an exec channel, or
    its runner on tensor files in the upload folder."""

    def __init__(self, board: Board):
        import paramiko
        self.board = board
        cfg = board.ssh
        self.host, self.port, self.user = cfg["host"], int(cfg.get("port", 22)), cfg["user"]
        self.workdir = cfg["workdir"].rstrip("/")
        self.prefix = list(cfg.get("command_prefix", []))
        self.where = f"{self.user}@{self.host}:{self.port} (board {board.name})"
        client = paramiko.SSHClient()
        known = _expand(cfg.get("known_hosts", "~/.ssh/known_hosts"))
        if known and os.path.exists(known):
            client.load_host_keys(known)
        if cfg.get("trust_on_first_use", False):
            client.set_missing_host_key_policy(paramiko.AutoAddPolicy())
        else:
            client.set_missing_host_key_policy(paramiko.RejectPolicy())
        try:
            client.connect(self.host, port=self.port, username=self.user, key_filename=_expand(cfg.get("key")),
                           look_for_keys=False, allow_agent=False, timeout=min(board.timeout_s, 30),
                           banner_timeout=30, auth_timeout=30)
        except paramiko.BadHostKeyException:
            raise DeviceError(f"{self.where}: the host key differs from the one in {known}; if the board was "
                              f"reinstalled, remove its old key (ssh-keygen -R {self.host}), otherwise do not "
                              "connect") from None
        except paramiko.AuthenticationException:
            raise DeviceError(f"{self.where}: the key {cfg.get('key')} was refused; add its public key to the "
                              "board's ~/.ssh/authorized_keys or fix 'key' in the board file") from None
        except paramiko.SSHException as err:
            if "not found in known_hosts" in str(err):
                raise DeviceError(f"{self.where}: unknown host key; add it to {known} (ssh-keyscan -p {self.port} "
                                  f"{self.host} >> {known}) or set trust_on_first_use: true in "
                                  f"{board.path}") from None
            raise DeviceError(f"{self.where}: SSH failed: {err}") from None
        except (OSError, socket.timeout) as err:
            raise DeviceError(f"{self.where}: cannot reach the board ({err}); check the address, the port and "
                              "that sshd runs") from None
        if known and cfg.get("trust_on_first_use", False):
            client.save_host_keys(known)
        self.client = client
        self.sftp = client.open_sftp()
        self.session_dir = None
        self.uploads = 0

    def close(self) -> None:
        try:
            self.close_models()
        finally:
            if getattr(self, "client", None) is not None:
                self.client.close()
                self.client = None

    # files ---------------------------------------------------------------
    def _sftp(self, what: str, fn, *args):
        try:
            return fn(*args)
        except OSError as err:
            if "No space left" in str(err) or getattr(err, "errno", None) == 28:
                raise DeviceError(f"{self.where}: the board's disk is full while {what}; free space in "
                                  f"{self.workdir}") from None
            if not self.client.get_transport() or not self.client.get_transport().is_active():
                raise DeviceError(f"{self.where}: the connection was lost while {what}; check the board "
                                  "and connect again") from None
            raise DeviceError(f"{self.where}: {what} failed: {err}") from None
        except EOFError:
            raise DeviceError(f"{self.where}: the connection was lost while {what}") from None

    def _mkdirs(self, path: str) -> None:
        parts, cur = path.strip("/").split("/"), ""
        for part in parts:
            cur += "/" + part
            try:
                self.sftp.stat(cur)
            except FileNotFoundError:
                self._sftp(f"creating {cur}", self.sftp.mkdir, cur)

    def stage(self, path: Path) -> str:
        """Upload into workdir/<content hash>/ unless it is already there."""
        data = Path(path).read_bytes()
        digest = hashlib.sha256(data).hexdigest()[:16]
        remote_dir = f"{self.workdir}/{digest}"
        remote = f"{remote_dir}/{Path(path).name}"
        try:
            if self.sftp.stat(remote).st_size == len(data):
                self.session_dir = remote_dir
                return remote
        except FileNotFoundError:
            pass
        except (OSError, EOFError):
            raise DeviceError(f"{self.where}: the connection was lost while checking {remote}") from None
        self._mkdirs(remote_dir)
        tmp = remote + ".part"
        self._sftp(f"uploading {Path(path).name}", self.sftp.putfo, _Bytes(data), tmp)
        self._sftp("finishing the upload", self.sftp.posix_rename, tmp, remote)
        self._sftp("making the runner executable", self.sftp.chmod, remote, 0o755)
        self.uploads += 1
        self.session_dir = remote_dir
        return remote

    def write(self, name: str, data: bytes) -> None:
        self._sftp(f"sending {name}", self.sftp.putfo, _Bytes(data), f"{self.session_dir}/{name}")

    def read(self, name: str) -> bytes | None:
        import io
        buf = io.BytesIO()
        try:
            self.sftp.getfo(f"{self.session_dir}/{name}", buf)
        except FileNotFoundError:
            return None
        except (OSError, EOFError) as err:
            raise DeviceError(f"{self.where}: fetching {name} failed: {err}") from None
        return buf.getvalue()

    def remove(self, name: str) -> None:
        try:
            self.sftp.remove(f"{self.session_dir}/{name}")
        except FileNotFoundError:
            pass
        except (OSError, EOFError) as err:
            raise DeviceError(f"{self.where}: the connection was lost ({err})") from None

    # commands ------------------------------------------------------------
    def execute(self, program: str, args: list) -> subprocess.CompletedProcess:
        cmd = " ".join(shlex.quote(a) for a in [*self.prefix, program, *map(str, args)])
        full = f"cd {shlex.quote(self.session_dir)} && {cmd}"
        try:
            _, stdout, stderr = self.client.exec_command(full, timeout=self.board.timeout_s)
            out = stdout.read().decode(errors="replace")
            err = stderr.read().decode(errors="replace")
            code = stdout.channel.recv_exit_status()
        except socket.timeout:
            raise DeviceError(f"{self.where}: no answer within {self.board.timeout_s:.0f}s (raise timeout_s in "
                              f"{self.board.path} for slow models)") from None
        except (OSError, EOFError, AttributeError) as err:
            raise DeviceError(f"{self.where}: the connection was lost while running the model ({err})") from None
        if code == -1:
            raise DeviceError(f"{self.where}: the connection was lost while running the model")
        return subprocess.CompletedProcess(full, code, out, err)

    def spawn(self, program: str, args=()) -> "ChannelStream":
        """Start the RPC server over an exec channel that carries the frames."""
        import paramiko
        cmd = " ".join(shlex.quote(a) for a in [*self.prefix, program, *args])
        try:
            channel = self.client.get_transport().open_session()
            channel.exec_command(f"cd {shlex.quote(self.session_dir)} && exec {cmd}")
        except paramiko.ChannelException as err:
            raise DeviceError(f"{self.where}: the board's sshd refused another session ({err.text}); it allows "
                              "MaxSessions per connection: close modules no longer used (module.close())") from None
        except (OSError, EOFError, AttributeError, paramiko.SSHException) as err:
            raise DeviceError(f"{self.where}: the connection was lost while starting the server ({err})") from None
        return ChannelStream(channel, self.where)


class ChannelStream:
    """Frames over an SSH exec channel."""

    def __init__(self, channel, where: str):
        self.channel = channel
        self.what = where

    def send(self, data: bytes) -> None:
        try:
            self.channel.sendall(data)
        except (OSError, EOFError):
            raise self.died() from None

    def recv(self, n: int, deadline: float) -> bytes:
        out = bytearray()
        while len(out) < n:
            left = deadline - time.monotonic()
            if left <= 0:
                self.close()
                raise DeviceError(f"{self.what}: no answer in time; the server was stopped")
            self.channel.settimeout(left)
            try:
                chunk = self.channel.recv(n - len(out))
            except socket.timeout:
                continue
            except (OSError, EOFError):
                raise self.died() from None
            if not chunk:
                raise self.died()
            out += chunk
        return bytes(out)

    def died(self) -> DeviceError:
        err = b""
        try:
            while self.channel.recv_stderr_ready():
                err += self.channel.recv_stderr(4096)
        except (OSError, EOFError):
            pass
        code = self.channel.exit_status if self.channel.exit_status_ready() else None
        text = err.decode(errors="replace")
        if code is None or code == -1:  # paramiko's exit status when the connection dropped
            return DeviceError(f"{self.what}: the connection was lost while the model was running")
        if code > 128:
            return DeviceError(f"{self.what}: the model crashed with signal {code - 128}:\n{text[-1500:]}")
        return DeviceError(f"{self.what}: the server stopped (exit {code}):\n{text[-1500:]}")

    def close(self, kill: bool = False) -> None:
        """Close the channel; sshd then ends the server (`kill` is implied)."""
        try:
            self.channel.close()
        except (OSError, EOFError):
            pass


class _Bytes:
    """A minimal readable file over bytes for SFTP putfo."""

    def __init__(self, data: bytes):
        import io
        self._io = io.BytesIO(data)

    def read(self, n=-1):
        return self._io.read(n)
