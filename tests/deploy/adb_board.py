"""A board file for the stand-in adb (fake_adb.py): the host board with an
adb transport, so that the stand-in can run the binaries it is handed."""

import shutil
from pathlib import Path

import yaml

from relax_edge.target import BOARDS_DIR

FAKE_ADB = Path(__file__).with_name("fake_adb.py")


def write_adb_board(root: Path) -> tuple:
    """(the board file, the folder holding the stand-in `adb`) under `root`;
    put the folder first on PATH while the board is used."""
    bin_dir = root / "bin"
    bin_dir.mkdir()
    shutil.copy(FAKE_ADB, bin_dir / "adb")
    (bin_dir / "adb").chmod(0o755)
    data = yaml.safe_load((BOARDS_DIR / "host.yaml").read_text())
    data.update(name="adb-stand-in", transport="adb", adb={"workdir": str(root / "phone")})
    board = root / "adb-stand-in.yaml"
    board.write_text(yaml.safe_dump(data))
    return str(board), bin_dir
