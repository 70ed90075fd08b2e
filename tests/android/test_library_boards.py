"""The android: section of a board file: the shipped Android boards name
their ABI, NDK triple and API level, and a wrong section is refused with a
message naming the field."""

import pytest
import yaml

from relax_edge.android.library import ABIS
from relax_edge.target import BOARDS_DIR, BoardError, load_board

EXPECTED = {"arm64-v8a": "aarch64-linux-android", "armeabi-v7a": "armv7a-linux-androideabi",
            "x86_64": "x86_64-linux-android"}


@pytest.mark.parametrize("abi", list(ABIS))
def test_shipped_android_boards(abi):
    board = load_board(ABIS[abi])
    assert board.transport == "adb" and "-static" in board.target.ldflags   # the adb shell binary stays static
    assert board.android["abi"] == abi and board.android["ndk_triple"] == EXPECTED[abi]
    assert board.android["api_level"] == 24


def _board_with(tmp_path, **android):
    data = yaml.safe_load((BOARDS_DIR / "android-arm64.yaml").read_text())
    data["android"] = android
    path = tmp_path / "phone.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.mark.parametrize("android, message", [
    ({"abi": "mips", "ndk_triple": "mipsel-linux-android"}, "field 'abi' is 'mips'; choose one of arm64-v8a"),
    ({"abi": "arm64-v8a"}, "android: missing field 'ndk_triple'"),
    ({"abi": "arm64-v8a", "ndk_triple": "armv7a-linux-androideabi"},
     "'android.ndk_triple' is 'armv7a-linux-androideabi', but ABI arm64-v8a is 'aarch64-linux-android'"),
    ({"abi": "arm64-v8a", "ndk_triple": "aarch64-linux-android", "api_level": 16},
     "'android.api_level' must be an Android API level from 21"),
    ({"abi": "arm64-v8a", "ndk_triple": "aarch64-linux-android", "api": 24}, "unknown field 'api'"),
])
def test_bad_android_section(tmp_path, android, message):
    with pytest.raises(BoardError, match=message):
        load_board(_board_with(tmp_path, **android))


def test_default_api_level(tmp_path):
    board = load_board(_board_with(tmp_path, abi="arm64-v8a", ndk_triple="aarch64-linux-android"))
    assert board.android["api_level"] == 24 and board.android["cflags"] == []
