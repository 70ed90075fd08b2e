#!/usr/bin/env python3
"""A stand-in for `adb` over a local folder: push/pull copy files, `shell`
runs the command with sh on this machine, `get-state` answers "device",
`devices` lists one device.
Device paths are local paths."""

import os
import shutil
import sys

args = sys.argv[1:]
if args[:1] == ["-s"]:
    args = args[2:]
command, rest = args[0], args[1:]
if command == "get-state":
    print("device")
elif command == "devices":
    print("List of devices attached\nfake-phone\tdevice\n")
elif command in ("push", "pull"):
    try:
        shutil.copyfile(rest[0], rest[1])
    except OSError as err:
        print(f"adb: error: {err}", file=sys.stderr)
        sys.exit(1)
elif command == "shell":
    if rest[:1] == ["-T"]:
        rest = rest[1:]
    os.execvp("sh", ["sh", "-c", " ".join(rest)])
else:
    print(f"fake adb: unknown command {command}", file=sys.stderr)
    sys.exit(1)
