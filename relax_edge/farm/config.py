"""Farm files: the boards of a farm and how many jobs each runs at once.

    ray: local                 # local (start Ray here), auto (join a running cluster), ray://host:10001
    num_cpus: 2                # with ray: local, the CPUs Ray may use (default: the machine's)
    boards:                    # board name or board YAML file -> slots (jobs at once)
      qemu-aarch64: 2
      qemu-riscv64: 1
    ssh: [raspberry-pi-4, lab/pi5.yaml]     # physical boards: one job at a time
    android:                   # an adb board and the serials of its phones, one job at a time each
      android-arm64: [R58M123, emulator-5554]

A farm file is loaded with `yaml.safe_load` and validated like a board file:
an unknown key, a wrong type, a bad slot count or an unknown board gets a
message naming the file and the field. Emulator and host boards may have
several slots; a physical board (ssh, adb) is exclusive, so its slot count is
1 and a second slot is refused. An android phone becomes the farm board
`BOARD@SERIAL`, built for BOARD once and run on each phone.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import yaml

from ..errors import RelaxEdgeError
from ..target import Board, BoardError, load_board

RAY_MODES = ("local", "auto")
_RAY_URL = re.compile(r"ray://[A-Za-z0-9_.-]+:(\d{1,5})")
_FIELDS = {"ray": str, "num_cpus": int, "boards": dict, "ssh": list, "android": dict}
PHYSICAL = ("ssh", "adb")   # transports of boards that run one job at a time


class FarmError(RelaxEdgeError):
    """A farm file is invalid, or a farm run cannot start."""


@dataclasses.dataclass(frozen=True)
class FarmBoard:
    """One board of a farm: the name its cells carry, the board to connect
    to, the board its models are built for (the same but for a phone's
    serial) and its slots."""
    name: str
    board: Board
    slots: int

    @property
    def physical(self) -> bool:
        return self.board.transport in PHYSICAL

    @property
    def resource(self) -> str:
        """The Ray custom resource of this board (slots units on the farm's node)."""
        return f"board:{self.name}"


@dataclasses.dataclass(frozen=True)
class Farm:
    path: str
    boards: tuple          # FarmBoard, in the file's order
    ray: str = "local"
    num_cpus: int | None = None

    def board(self, name: str) -> FarmBoard:
        for b in self.boards:
            if b.name == name:
                return b
        raise FarmError(f"{self.path}: no board {name!r} in this farm (boards: {', '.join(self.names())})")

    def names(self) -> list:
        return [b.name for b in self.boards]

    def select(self, boards) -> list:
        """The farm boards named (or all of them for "all" / None), in the farm's order."""
        if boards is None or boards == "all" or list(boards) == ["all"]:
            return list(self.boards)
        wanted = [boards] if isinstance(boards, str) else list(boards)
        chosen = [self.board(name) for name in wanted]
        return [b for b in self.boards if b in chosen]


def _board(where: str, ref, base: Path) -> Board:
    if not isinstance(ref, str) or not ref:
        raise FarmError(f"{where}: a board is a board name or a YAML path, got {ref!r}")
    candidate = base / ref
    if ref.endswith((".yaml", ".yml")) and not Path(ref).is_absolute() and candidate.exists():
        ref = str(candidate)   # relative to the farm file
    try:
        return load_board(ref)
    except BoardError as err:
        raise FarmError(f"{where}: {err}") from None


def _slots(where: str, value) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise FarmError(f"{where}: slots must be a positive integer, got {value!r}")
    return value


def parse_farm(data, path: str = "<farm>") -> Farm:
    """A Farm from the loaded YAML `data` (board paths relative to `path`'s folder)."""
    if not isinstance(data, dict):
        raise FarmError(f"{path}: expected a mapping with boards:, ssh: or android:, got {type(data).__name__}")
    for key, value in data.items():
        if key not in _FIELDS:
            raise FarmError(f"{path}: unknown field '{key}' (known: {', '.join(_FIELDS)})")
        kind = _FIELDS[key]
        if not isinstance(value, kind) or isinstance(value, bool):
            raise FarmError(f"{path}: field '{key}' must be {'an integer' if kind is int else 'a ' + kind.__name__}"
                            f", got {value!r}")
    mode = data.get("ray", "local")
    url = _RAY_URL.fullmatch(mode)
    if mode not in RAY_MODES and not (url and 1 <= int(url.group(1)) <= 65535):
        raise FarmError(f"{path}: field 'ray' is {mode!r}; use local, auto or ray://HOST:PORT (a port 1-65535)")
    if "num_cpus" in data and data["num_cpus"] < 1:
        raise FarmError(f"{path}: field 'num_cpus' must be at least 1, got {data['num_cpus']!r}")
    base = Path(path).parent
    boards = []
    for ref, slots in data.get("boards", {}).items():
        where = f"{path}: boards.{ref}"
        board = _board(where, ref, base)
        slots = _slots(where, slots)
        if board.transport in PHYSICAL and slots != 1:
            raise FarmError(f"{where}: a {board.transport} board runs one job at a time; give it 1 slot "
                            f"(or list it under ssh:)")
        boards.append(FarmBoard(board.name, board, slots))
    for i, ref in enumerate(data.get("ssh", [])):
        where = f"{path}: ssh[{i}]"
        board = _board(where, ref, base)
        if board.transport != "ssh":
            raise FarmError(f"{where}: board {board.name} has transport {board.transport}, not ssh")
        boards.append(FarmBoard(board.name, board, 1))
    for ref, serials in data.get("android", {}).items():
        where = f"{path}: android.{ref}"
        board = _board(where, ref, base)
        if board.transport != "adb":
            raise FarmError(f"{where}: board {board.name} has transport {board.transport}, not adb")
        if not isinstance(serials, list) or not serials or not all(isinstance(s, str) and s for s in serials):
            raise FarmError(f"{where}: give a list of device serials (adb devices), got {serials!r}")
        for serial in serials:
            phone = dataclasses.replace(board, adb={**board.adb, "serial": serial})
            boards.append(FarmBoard(f"{board.name}@{serial}", phone, 1))
    if not boards:
        raise FarmError(f"{path}: the farm has no boards (add boards:, ssh: or android:)")
    seen = set()
    for b in boards:
        if b.name in seen:
            raise FarmError(f"{path}: board {b.name} is listed twice")
        seen.add(b.name)
    return Farm(path=path, boards=tuple(boards), ray=mode, num_cpus=data.get("num_cpus"))


def load_farm(path) -> Farm:
    """The farm described by a YAML file (a Farm is returned as it is)."""
    if isinstance(path, Farm):
        return path
    path = Path(path)
    if not path.is_file():
        raise FarmError(f"{path}: no such farm file" if not path.exists() else f"{path}: not a file")
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as err:   # its text says where: "... in "<unicode string>", line 2, column 1"
        raise FarmError(f"{path}: not valid YAML ({' '.join(str(err).split())})") from None
    except UnicodeDecodeError as err:
        raise FarmError(f"{path}: not a text file (byte {err.start} is not UTF-8)") from None
    except OSError as err:
        raise FarmError(f"{path}: cannot read the farm file ({err.strerror or err})") from None
    return parse_farm(data, str(path))
