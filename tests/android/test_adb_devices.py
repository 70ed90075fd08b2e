"""Choosing the phone over adb: stand-in `adb` programs on PATH print what
`adb devices` prints with no device, an unauthorized one, an offline one,
several, and one the board names; each case is a DeviceError that says what
to do, or a session on the right serial."""

import os

import pytest
import yaml

import relax_edge as rxe
from relax_edge.deploy.adb import parse_devices
from relax_edge.target import BOARDS_DIR

LISTING = "List of devices attached\n"


def stand_in_adb(tmp_path, monkeypatch, stdout="", stderr="", rc=0, serial=None):
    """A board on the host target with an adb transport, and an `adb` that
    answers `devices` with `stdout` and logs every call."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "adb.log"
    adb = bin_dir / "adb"
    adb.write_text(f"#!/bin/sh\necho \"$@\" >> {log}\ncat <<'OUT'\n{stdout}OUT\n"
                   f"printf '%s' '{stderr}' >&2\nexit {rc}\n")
    adb.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    data = yaml.safe_load((BOARDS_DIR / "host.yaml").read_text())
    data.update(name="phone", transport="adb", adb={"workdir": "/data/local/tmp/rxe", **({"serial": serial} if serial
                                                                                          else {})})
    board = tmp_path / "phone.yaml"
    board.write_text(yaml.safe_dump(data))
    return str(board), log


def test_parse_devices():
    text = ("* daemon not running; starting now at tcp:5037\n* daemon started successfully\n" + LISTING +
            "R58M12\tdevice\nemulator-5554\tunauthorized\n\n")
    assert parse_devices(text) == {"R58M12": "device", "emulator-5554": "unauthorized"}


@pytest.mark.parametrize("stdout, stderr, rc, serial, message", [
    (LISTING + "\n", "", 0, None, r"no device over adb \(adb devices lists none\); plug the phone in, enable USB"),
    ("", "adb: failed to start daemon", 1, None, r"no device over adb \(adb: failed to start daemon\)"),
    (LISTING + "R58M12\tunauthorized\n", "", 0, None,
     "device R58M12 has not authorized this computer; unlock the phone and accept the 'Allow USB debugging"),
    (LISTING + "R58M12\toffline\n", "", 0, None, "device R58M12 is offline, not ready; replug it"),
    (LISTING + "R58M12\tdevice\nemulator-5554\tdevice\n", "", 0, None,
     r"2 devices over adb: R58M12 \(device\), emulator-5554 \(device\); name the phone as adb.serial in .*phone.yaml"),
    (LISTING + "R58M12\tdevice\n", "", 0, "ZY22", r"adb.serial ZY22 is not attached \(adb devices lists "
                                                   r"R58M12 \(device\)\); fix adb.serial in"),
])
def test_device_problems_are_named(tmp_path, monkeypatch, stdout, stderr, rc, serial, message):
    board, _ = stand_in_adb(tmp_path, monkeypatch, stdout, stderr, rc, serial)
    with pytest.raises(rxe.DeviceError, match=message):
        rxe.connect(board)


def test_the_named_serial_is_used(tmp_path, monkeypatch):
    board, log = stand_in_adb(tmp_path, monkeypatch, LISTING + "R58M12\tdevice\nZY22\tdevice\n", serial="ZY22")
    with rxe.connect(board) as dev:
        assert dev.serial == "ZY22"
        dev.remove("x.rxt")
    assert log.read_text().splitlines()[-1].startswith("-s ZY22 shell -T rm -f")
