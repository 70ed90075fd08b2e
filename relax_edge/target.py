"""Targets and boards.

A **target** is what the compiler needs: triples (GNU for the toolchain,
LLVM for llvmlite), CPU, features, vector width, float ABI, operating system
(linux / android / none), compiler and flags. A **board** is a target plus how
to reach it: a transport (local, qemu, ssh, adb) and its connection fields.
An optional `tuning:` field names the board's tuning table
(relax_edge/tuning.py; default boards/tuning/NAME.json). An optional
`vulkan:` section describes the board's Vulkan device for the Vulkan
runtime (runtime_c/vulkan/): the ICD file to pin, whether a CPU device such
as lavapipe is accepted, the workgroup size, the matmul shader's register
tile and lavapipe's thread count.
An optional `android:` section describes the app library of an Android board
(relax_edge/android/library.py): the ABI's name as jniLibs/ spells it, the
NDK's target triple for it (checked against the ABI), the minimum API level
(default 24) and the library's own compiler flags; `target:` stays what the
static executables for `adb shell` are built with.

Boards are YAML files in `boards/` (or any path), loaded with
`yaml.safe_load` and validated: an unknown key, a missing field, a bad triple
or an absent toolchain gets a message naming the file, the field and what to
do about it. The default board, where none is named, is `qemu-aarch64`.
"""

from __future__ import annotations

import dataclasses
import os
import re
import shutil
from pathlib import Path

import yaml

from .errors import RelaxEdgeError
from .resources import boards_dir

BOARDS_DIR = boards_dir()   # the checkout's boards/, or the wheel's copy
DEFAULT_BOARD = "qemu-aarch64"

TRANSPORTS = ("local", "qemu", "ssh", "adb")
OPERATING_SYSTEMS = ("linux", "android", "none")
FLOAT_ABIS = ("hard", "softfp", "soft")
_TRIPLE = re.compile(r"^[a-z0-9_]+(-[a-z0-9_.]+){1,3}$")
# target.features by architecture family (of llvm_triple): what LLVM gets as +feature (GCC spellings are
# renamed in codegen/llvm/target.py). The C kernels choose their paths from the macros that target.cflags
# (-mcpu / -march) define, so a board lists here what its cflags enable: dotprod -> __ARM_FEATURE_DOTPROD
# (the int8 kernels' sdot path), dsp -> __ARM_FEATURE_DSP (their SMLAD path).
KNOWN_FEATURES = {
    "aarch64": ("neon", "dotprod", "fp16", "i8mm", "bf16", "crc", "crypto", "sve", "sve2", "lse", "rcpc"),
    "arm": ("neon", "vfpv3", "vfpv4", "fpv4-sp-d16", "fp-armv8", "dsp", "fp16", "dotprod", "thumb2"),
    "riscv64": ("m", "a", "f", "d", "c", "v", "zba", "zbb", "zbs", "zfh", "zvfh"),
    "riscv32": ("m", "a", "f", "d", "c", "v", "zba", "zbb", "zbs"),
    "x86_64": ("sse4.2", "avx", "avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512vl", "avx512vnni", "avxvnni"),
}


class BoardError(RelaxEdgeError):
    """A board file is invalid, or its toolchain is missing."""


@dataclasses.dataclass(frozen=True)
class Target:
    triple: str                      # GNU triple of the toolchain, or "native"
    llvm_triple: str                 # four-part LLVM triple
    os: str = "linux"
    cpu: str = "generic"
    features: tuple = ()
    vector_bits: int = 0
    float_abi: str = "hard"
    compiler: str = "cc"
    cflags: tuple = ()
    ldflags: tuple = ()
    size_tool: str = "size"
    packages: tuple = ()             # Debian packages that provide the toolchain

    @property
    def freestanding(self) -> bool:
        return self.os == "none"


@dataclasses.dataclass(frozen=True)
class Board:
    name: str
    description: str
    target: Target
    transport: str
    path: str
    qemu: dict = dataclasses.field(default_factory=dict)
    ssh: dict = dataclasses.field(default_factory=dict)
    adb: dict = dataclasses.field(default_factory=dict)
    timeout_s: float = 120.0
    vulkan: dict = dataclasses.field(default_factory=dict)
    android: dict = dataclasses.field(default_factory=dict)   # abi, ndk_triple, api_level, cflags
    tuning: str = ""    # the tuning table's path (YAML field `tuning`), else boards/tuning/NAME.json


# field -> (required, type, allowed values or None)
_TARGET_FIELDS = {
    "triple": (True, str, None), "llvm_triple": (True, str, None), "os": (True, str, OPERATING_SYSTEMS),
    "cpu": (False, str, None), "features": (False, list, None), "vector_bits": (False, int, None),
    "float_abi": (False, str, FLOAT_ABIS), "compiler": (True, str, None), "cflags": (False, list, None),
    "ldflags": (False, list, None), "size_tool": (False, str, None), "packages": (False, list, None),
}
_BOARD_FIELDS = {
    "name": (True, str, None), "description": (False, str, None), "target": (True, dict, None),
    "transport": (True, str, TRANSPORTS), "qemu": (False, dict, None), "ssh": (False, dict, None),
    "adb": (False, dict, None), "timeout_s": (False, (int, float), None), "vulkan": (False, dict, None),
    "android": (False, dict, None),
    "tuning": (False, str, None),   # the board's tuning table (relax_edge/tuning.py), relative to the YAML file
}
# icd: the driver manifest (VK_DRIVER_FILES); allow_cpu: accept a CPU device; workgroup_size: the kernels'
# local_size_x; lp_num_threads: LP_NUM_THREADS for lavapipe (0: the machine's cores); matmul_tile: [rows, columns]
# of C each invocation of the tiled matmul shader keeps in registers (codegen/vulkan/matmul.py; default [8, 8])
_VULKAN_FIELDS = {"icd": (False, str, None), "allow_cpu": (False, bool, None), "workgroup_size": (False, int, None),
                  "lp_num_threads": (False, int, None), "matmul_tile": (False, list, None)}
MAX_TILE_SIDE, MAX_TILE_ACCUMULATORS = 16, 128
# Android ABI (the jniLibs/ folder name) -> the NDK's target triple, without the API level
ANDROID_ABIS = {"arm64-v8a": "aarch64-linux-android", "armeabi-v7a": "armv7a-linux-androideabi",
                "x86_64": "x86_64-linux-android"}
DEFAULT_ANDROID_API = 24
MIN_ANDROID_API = 21   # the NDK's oldest supported API level for 64-bit ABIs
_ANDROID_FIELDS = {"abi": (True, str, tuple(ANDROID_ABIS)), "ndk_triple": (True, str, None),
                   "api_level": (False, int, None), "cflags": (False, list, None)}
_TRANSPORT_FIELDS = {
    "qemu": {"command": (True, list, None), "system": (False, bool, None), "icount_shift": (False, int, None)},
    "ssh": {"host": (True, str, None), "port": (False, int, None), "user": (True, str, None),
            "key": (False, str, None), "workdir": (True, str, None), "known_hosts": (False, str, None),
            "trust_on_first_use": (False, bool, None), "command_prefix": (False, list, None)},
    "adb": {"serial": (False, str, None), "workdir": (True, str, None)},
    "local": {},
}


_TYPE_NAMES = {str: "a string", int: "an integer", bool: "true or false", list: "a list", dict: "a mapping",
               (int, float): "a number"}


def _check(where: str, data: dict, fields: dict) -> None:
    if not isinstance(data, dict):
        raise BoardError(f"{where}: expected a mapping, got {type(data).__name__}")
    for key in data:
        if key not in fields:
            raise BoardError(f"{where}: unknown field '{key}' (known: {', '.join(fields)})")
    for key, (required, kind, allowed) in fields.items():
        if key not in data:
            if required:
                raise BoardError(f"{where}: missing field '{key}'")
            continue
        value = data[key]
        numeric = kind is int or kind == (int, float)
        if not isinstance(value, kind) or (numeric and isinstance(value, bool)):
            name = _TYPE_NAMES.get(kind, getattr(kind, "__name__", "value"))
            raise BoardError(f"{where}: field '{key}' must be {name}, got {value!r}")
        if allowed is not None and value not in allowed:
            raise BoardError(f"{where}: field '{key}' is {value!r}; choose one of {', '.join(allowed)}")
        if kind is list and not all(isinstance(item, str) for item in value):
            raise BoardError(f"{where}: field '{key}' must be a list of strings, got {value!r}")


def _feature_family(llvm_triple: str) -> str | None:
    arch = llvm_triple.split("-")[0]
    if arch.startswith(("arm", "thumb")):
        return "arm"
    return arch if arch in KNOWN_FEATURES else None


def _check_features(where: str, t: dict) -> None:
    family = _feature_family(t["llvm_triple"])
    if family is None:   # native, or an architecture without a list: LLVM judges
        return
    known = KNOWN_FEATURES[family]
    for feature in t.get("features", []):
        if feature.lstrip("+") not in known:
            raise BoardError(f"{where}: target.features has unknown feature {feature!r} for {family} "
                             f"(known: {', '.join(known)})")


def _check_android(where: str, section) -> None:
    _check(f"{where}: android", section, _ANDROID_FIELDS)
    expected = ANDROID_ABIS[section["abi"]]
    if section["ndk_triple"] != expected:
        raise BoardError(f"{where}: field 'android.ndk_triple' is {section['ndk_triple']!r}, but ABI "
                         f"{section['abi']} is {expected!r} (without the API level)")
    api = section.get("api_level", DEFAULT_ANDROID_API)
    if not MIN_ANDROID_API <= api <= 99:
        raise BoardError(f"{where}: field 'android.api_level' must be an Android API level from "
                         f"{MIN_ANDROID_API} (e.g. 24 for Android 7.0), got {api!r}")


def _check_tile(where: str, tile) -> None:
    """vulkan.matmul_tile: [rows, columns], each from 1 to MAX_TILE_SIDE, at most MAX_TILE_ACCUMULATORS in all."""
    if (not isinstance(tile, list) or len(tile) != 2
            or not all(isinstance(v, int) and not isinstance(v, bool) and 1 <= v <= MAX_TILE_SIDE for v in tile)):
        raise BoardError(f"{where}: field 'vulkan.matmul_tile' must be [rows, columns] of C per invocation, two "
                         f"integers from 1 to {MAX_TILE_SIDE}, got {tile!r}")
    if tile[0] * tile[1] > MAX_TILE_ACCUMULATORS:
        raise BoardError(f"{where}: field 'vulkan.matmul_tile' is {tile[0]} x {tile[1]} = {tile[0] * tile[1]} "
                         f"accumulators per invocation, more than the {MAX_TILE_ACCUMULATORS} registers allow")


def _check_vulkan(where: str, section) -> None:
    if not isinstance(section, dict):
        raise BoardError(f"{where}: field 'vulkan' must be a mapping, got {section!r}")
    _check(f"{where}: vulkan", {k: v for k, v in section.items() if k != "matmul_tile"}, _VULKAN_FIELDS)
    size = section.get("workgroup_size", 64)
    if not 1 <= size <= 1024 or size & (size - 1):
        raise BoardError(f"{where}: field 'vulkan.workgroup_size' must be a power of two from 1 to 1024, got {size!r}")
    if section.get("lp_num_threads", 0) < 0:
        raise BoardError(f"{where}: field 'vulkan.lp_num_threads' must be 0 (the cores) or more")
    if "matmul_tile" in section:
        _check_tile(where, section["matmul_tile"])


def _android_section(section) -> dict:
    """The android: section with its defaults filled in ({} when absent)."""
    if not section:
        return {}
    return {"api_level": DEFAULT_ANDROID_API, "cflags": [], **section}


def _parse(path: Path, data) -> Board:
    where = str(path)
    _check(where, data, _BOARD_FIELDS)
    _check(f"{where}: target", data["target"], _TARGET_FIELDS)
    t = data["target"]
    for key in ("triple", "llvm_triple"):
        if t[key] != "native" and not _TRIPLE.match(t[key]):
            raise BoardError(f"{where}: target.{key} {t[key]!r} is not a target triple "
                             "(like aarch64-linux-gnu or aarch64-unknown-linux-gnu)")
    if t["llvm_triple"] != "native" and len(t["llvm_triple"].split("-")) != 4:
        raise BoardError(f"{where}: target.llvm_triple {t['llvm_triple']!r} must have four parts "
                         "(arch-vendor-os-abi, e.g. armv7-unknown-linux-gnueabihf): short triples give wrong code")
    _check_features(where, t)
    transport = data["transport"]
    if transport != "local" and transport not in data:
        raise BoardError(f"{where}: transport is {transport} but the '{transport}' section is missing")
    for name in ("qemu", "ssh", "adb"):
        if name in data:
            _check(f"{where}: {name}", data[name], _TRANSPORT_FIELDS[name])
    if "qemu" in data and not data["qemu"]["command"]:
        raise BoardError(f"{where}: field 'qemu.command' is empty; give the emulator and its arguments")
    if "vulkan" in data:
        _check_vulkan(where, data["vulkan"])
    if "android" in data:
        _check_android(where, data["android"])
    if "timeout_s" in data and data["timeout_s"] <= 0:
        raise BoardError(f"{where}: field 'timeout_s' must be positive, got {data['timeout_s']!r}")
    target = Target(**{k: tuple(v) if isinstance(v, list) else v for k, v in t.items()})
    return Board(name=data["name"], description=data.get("description", ""), target=target,
                 transport=transport, path=where, qemu=data.get("qemu", {}), ssh=data.get("ssh", {}),
                 adb=data.get("adb", {}), timeout_s=float(data.get("timeout_s", 120.0)), vulkan=data.get("vulkan", {}),
                 android=_android_section(data.get("android")),
                 tuning=str((path.parent / data["tuning"]).resolve()) if data.get("tuning") else "")


def load_board(name_or_path) -> Board:
    """A board by name (boards/NAME.yaml) or by YAML path."""
    if isinstance(name_or_path, Board):
        return name_or_path
    text = str(name_or_path)
    path = Path(text)
    if not (text.endswith((".yaml", ".yml")) or os.sep in text):
        path = BOARDS_DIR / f"{text}.yaml"
        if not path.exists():
            raise BoardError(f"unknown board {text!r}; known boards: {', '.join(board_names())} "
                             "(or give a path to a board YAML file)")
    path = path.resolve()
    if not path.is_file():
        raise BoardError(f"{path}: no such board file" if not path.exists() else f"{path}: not a file")
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(err, "problem", None) or "syntax error"
        raise BoardError(f"{path}: not valid YAML{where} ({problem})") from None
    except UnicodeDecodeError as err:
        raise BoardError(f"{path}: not a text file (byte {err.start} is not UTF-8)") from None
    except OSError as err:
        raise BoardError(f"{path}: cannot read the board file ({err.strerror or err})") from None
    return _parse(path, data)


def board_names() -> list:
    return sorted(p.stem for p in BOARDS_DIR.glob("*.yaml"))


def toolchain_problems(board: Board) -> list:
    """What is missing to build for and run on this board, with what to install."""
    t = board.target
    problems = []
    hint = f" (apt-get install {' '.join(t.packages)})" if t.packages else ""
    if not shutil.which(t.compiler):
        problems.append(f"compiler {t.compiler} not found{hint}")
    if board.transport == "qemu":
        emulator = board.qemu["command"][0]
        if not shutil.which(emulator):
            package = "qemu-system-arm" if "system" in emulator else "qemu-user"
            problems.append(f"emulator {emulator} not found (apt-get install {package})")
    if board.transport == "adb" and not shutil.which("adb"):
        problems.append("adb not found (apt-get install adb)")
    return problems


def require_toolchain(board: Board) -> None:
    problems = toolchain_problems(board)
    if problems:
        raise BoardError(f"board {board.name} ({board.path}): " + "; ".join(problems))
