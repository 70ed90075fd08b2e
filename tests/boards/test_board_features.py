"""Board `features`: validated against the architecture's known names (an
unknown one is named with the file and the choices), and consistent with the
board's cflags, which define the macros that choose the C kernels' paths:
dotprod -> __ARM_FEATURE_DOTPROD (the int8 GEMM's sdot), dsp ->
__ARM_FEATURE_DSP (its SMLAD). Each emulated board's int8 GEMM object holds
the instructions of its path."""

import subprocess
from pathlib import Path

import pytest
import yaml

from relax_edge.target import DEFAULT_BOARD, KNOWN_FEATURES, BoardError, board_names, load_board

ROOT = Path(__file__).resolve().parents[2]
RUNTIME = ROOT / "runtime_c"
MACROS = {"dotprod": "__ARM_FEATURE_DOTPROD", "dsp": "__ARM_FEATURE_DSP"}
WITH_MACROS = [n for n in board_names() if set(load_board(n).target.features) & set(MACROS)]


def test_an_unknown_feature_is_named(tmp_path):
    data = yaml.safe_load((ROOT / "boards" / f"{DEFAULT_BOARD}.yaml").read_text())
    data["target"]["features"] = ["neon", "dotprd"]
    path = tmp_path / "custom.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(BoardError) as info:
        load_board(str(path))
    message = str(info.value)
    assert str(path) in message and "'dotprd'" in message and "aarch64" in message and "dotprod" in message


def test_every_shipped_board_uses_known_features():
    for name in board_names():
        target = load_board(name).target
        family = "arm" if target.llvm_triple.startswith(("arm", "thumb")) else target.llvm_triple.split("-")[0]
        assert set(target.features) <= set(KNOWN_FEATURES.get(family, target.features)), name


def test_the_dotprod_and_dsp_boards_are_the_expected_ones():
    assert set(WITH_MACROS) >= {"raspberry-pi-5", "jetson-orin", "android-arm64", "qemu-aarch64-dotprod",
                                "qemu-cortex-m4"}


@pytest.mark.emu
@pytest.mark.parametrize("name", WITH_MACROS)
def test_the_cflags_define_the_features_macros(tmp_path, name):
    target = load_board(name).target
    program = tmp_path / "features.c"
    program.write_text("".join(f"#ifndef {MACROS[f]}\n#error {f} listed but {MACROS[f]} undefined\n#endif\n"
                               for f in target.features if f in MACROS))
    proc = subprocess.run([target.compiler, *target.cflags, "-E", str(program)], capture_output=True, text=True)
    assert proc.returncode == 0, f"{name}: {proc.stderr}"


PATHS = {"qemu-aarch64": ("sadalp", "sdot"), "qemu-aarch64-dotprod": ("sdot", None),
         "qemu-armv7": ("vpadal.s16", None), "qemu-cortex-m4": ("smlad", None), "qemu-riscv64": ("mul", None)}


@pytest.mark.emu
@pytest.mark.parametrize("name", list(PATHS))
def test_each_board_compiles_its_int8_path(tmp_path, name):
    target = load_board(name).target
    present, absent = PATHS[name]
    obj = tmp_path / "qgemm.o"
    subprocess.run([target.compiler, *target.cflags, f"-I{RUNTIME / 'include'}", "-c", str(RUNTIME / "kernels" /
                    "qgemm.c"), "-o", str(obj)], check=True)
    objdump = target.compiler.replace("gcc", "objdump")
    text = subprocess.run([objdump, "-d", str(obj)], capture_output=True, text=True, check=True).stdout
    mnemonics = {line.split("\t")[2].split()[0] for line in text.splitlines() if line.count("\t") >= 2}
    assert present in mnemonics, f"{name}: no {present}"
    assert absent is None or absent not in mnemonics, f"{name}: {absent} present"
