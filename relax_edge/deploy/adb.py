"""Running artifacts on an Android phone over adb.

The runner and the RPC server are pushed into `workdir/<content hash>/`
(`adb push`, skipped when the file is already there), tensors travel as
files, and the RPC frames ride `adb shell -T` (no terminal, binary-safe).
A fully static aarch64 binary runs from `adb shell` without the NDK.

The phone is chosen from `adb devices`: the board's `adb.serial`, or the one
device attached. No device, an unauthorized or offline one, several without
a serial in the board, or a serial that is not attached is a DeviceError
saying what to do.

Checked here against stand-in `adb` programs (tests/deploy/fake_adb.py,
tests/android/test_adb_devices.py); not yet against a real phone.
"""

from __future__ import annotations

import hashlib
import shlex
import shutil
import subprocess
import tempfile
from pathlib import Path

from ..target import Board, require_toolchain
from .remote import DeviceSession
from .rpc import ProcessStream
from .session import DeviceError


def parse_devices(text: str) -> dict:
    """{serial: state} from the output of `adb devices` (state: device,
    unauthorized, offline, ...)."""
    devices = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) >= 2 and not line.startswith(("List of devices", "*")):
            devices[parts[0]] = parts[1]
    return devices


class AdbDevice(DeviceSession):
    """An Android phone over adb: the model's server over `adb shell -T`, or
    its runner on tensor files in the push folder."""

    def __init__(self, board: Board):
        require_toolchain(board)
        self.board = board
        self.serial = board.adb.get("serial")
        self.workdir = board.adb["workdir"].rstrip("/")
        self.session_dir = self.workdir
        self.uploads = 0
        self.serial = self._choose_device()

    def _choose_device(self) -> str:
        """The serial of the phone to use, from `adb devices`."""
        board = self.board
        try:
            listing = subprocess.run(["adb", "devices"], capture_output=True, text=True, timeout=board.timeout_s)
        except subprocess.TimeoutExpired:
            raise DeviceError(f"board {board.name}: adb devices gave no answer within {board.timeout_s:g}s "
                              "(adb kill-server restarts the adb daemon)") from None
        devices = parse_devices(listing.stdout) if listing.returncode == 0 else {}
        if not devices:
            said = (listing.stderr or listing.stdout).strip().splitlines()
            why = said[-1] if listing.returncode != 0 and said else "adb devices lists none"
            raise DeviceError(f"board {board.name}: no device over adb ({why}); plug the phone in, enable USB "
                              f"debugging, or set adb.serial in {board.path}")
        names = ", ".join(f"{serial} ({state})" for serial, state in devices.items())
        if self.serial is None:
            if len(devices) > 1:
                raise DeviceError(f"board {board.name}: {len(devices)} devices over adb: {names}; name the phone "
                                  f"as adb.serial in {board.path}")
            serial = next(iter(devices))
        elif self.serial in devices:
            serial = self.serial
        else:
            raise DeviceError(f"board {board.name}: adb.serial {self.serial} is not attached (adb devices lists "
                              f"{names}); fix adb.serial in {board.path} or plug that phone in")
        state = devices[serial]
        if state == "unauthorized":
            raise DeviceError(f"board {board.name}: device {serial} has not authorized this computer; unlock the "
                              "phone and accept the 'Allow USB debugging?' prompt (adb kill-server, then replug, "
                              "brings it back)")
        if state != "device":
            raise DeviceError(f"board {board.name}: device {serial} is {state}, not ready; replug it or run "
                              "adb reconnect")
        return serial

    def close(self) -> None:
        self.close_models()

    def _adb(self, args, check=True, timeout=None) -> subprocess.CompletedProcess:
        cmd = ["adb", *(["-s", self.serial] if self.serial else []), *args]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout or self.board.timeout_s)
        except subprocess.TimeoutExpired:
            raise DeviceError(f"board {self.board.name}: adb {args[0]} gave no answer within "
                              f"{timeout or self.board.timeout_s:g}s") from None
        if check and proc.returncode != 0:
            raise DeviceError(f"board {self.board.name}: adb {' '.join(args[:2])} failed: "
                              f"{(proc.stderr or proc.stdout).strip()[-500:]}")
        return proc

    def _shell(self, command: str, check=True) -> subprocess.CompletedProcess:
        return self._adb(["shell", "-T", command], check=check)

    def stage(self, path: Path) -> str:
        data = Path(path).read_bytes()
        remote_dir = f"{self.workdir}/{hashlib.sha256(data).hexdigest()[:16]}"
        remote = f"{remote_dir}/{Path(path).name}"
        self.session_dir = remote_dir
        if self._shell(f"test -x {shlex.quote(remote)}", check=False).returncode == 0:
            return remote
        self._shell(f"mkdir -p {shlex.quote(remote_dir)}")
        self._adb(["push", str(path), remote])
        self._shell(f"chmod 755 {shlex.quote(remote)}")
        self.uploads += 1
        return remote

    def write(self, name: str, data: bytes) -> None:
        with tempfile.NamedTemporaryFile() as tmp:
            tmp.write(data)
            tmp.flush()
            self._adb(["push", tmp.name, f"{self.session_dir}/{name}"])

    def read(self, name: str) -> bytes | None:
        with tempfile.TemporaryDirectory() as tmp:
            local = Path(tmp) / name
            if self._adb(["pull", f"{self.session_dir}/{name}", str(local)], check=False).returncode != 0:
                return None
            return local.read_bytes()

    def remove(self, name: str) -> None:
        self._shell(f"rm -f {shlex.quote(self.session_dir + '/' + name)}", check=False)

    def execute(self, program: str, args: list) -> subprocess.CompletedProcess:
        cmd = " ".join(shlex.quote(a) for a in [program, *map(str, args)])
        return self._shell(f"cd {shlex.quote(self.session_dir)} && {cmd}", check=False)

    def spawn(self, program: str, args=()) -> ProcessStream:
        adb = shutil.which("adb") or "adb"
        server = " ".join(shlex.quote(a) for a in [program, *args])
        cmd = [adb, *(["-s", self.serial] if self.serial else []), "shell", "-T",
               f"cd {shlex.quote(self.session_dir)} && exec {server}"]
        return ProcessStream(cmd, what=f"board {self.board.name}")
