"""Board files: every shipped board loads and its toolchain is installed; a
bad board file, an unknown board or an absent toolchain gets a BoardError
naming the file, the field and what to do; and a board YAML given by path
works end to end (build, run under QEMU, the command line)."""

import inspect
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

import relax_edge as rxe
from relax_edge import cli, op
from relax_edge import target as target_module
from relax_edge.ir import Builder, SizeVar, TensorType, Var
from relax_edge.ir.expr import Constant
from relax_edge.target import (
    BOARDS_DIR,
    DEFAULT_BOARD,
    OPERATING_SYSTEMS,
    TRANSPORTS,
    Board,
    BoardError,
    board_names,
    load_board,
    require_toolchain,
    toolchain_problems,
)

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = sorted(p.stem for p in (ROOT / "boards").glob("*.yaml"))
REQUIRED_TOP = ("name", "transport", "target")
REQUIRED_TARGET = ("triple", "llvm_triple", "os", "compiler")


def run_cli(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "relax_edge.cli", *map(str, args)], check=False,
                          capture_output=True, text=True, timeout=120, cwd=cwd)


def base_board() -> dict:
    """The raw YAML of the default board, to mutate into bad ones."""
    return yaml.safe_load((ROOT / "boards" / f"{DEFAULT_BOARD}.yaml").read_text())


def write_board(directory: Path, data, name: str = "custom") -> Path:
    path = directory / f"{name}.yaml"
    path.write_text(data if isinstance(data, str) else yaml.safe_dump(data, sort_keys=False))
    return path


def board_error(path) -> str:
    with pytest.raises(BoardError) as info:
        load_board(str(path))
    return str(info.value)


def tiny_module(seed: int = 0):
    """relu(x @ w) with a symbolic (bounded) batch."""
    w = np.random.default_rng(seed).standard_normal((8, 4)).astype(np.float32)
    batch = SizeVar("batch", upper=16)
    x = Var("x", TensorType((batch, 8)))
    bb = Builder()
    with bb.function("main", [x]):
        y = bb.emit(op.matmul(x, Constant(w)))
        bb.ret(bb.emit(op.relu(y)))
    return bb.get()


def first_output(result):
    return result[0] if isinstance(result, (list, tuple)) else result


# ---------------------------------------------------------------- 1. shipped boards

def test_board_names_are_the_shipped_files():
    assert BOARDS_DIR == ROOT / "boards"
    assert SHIPPED, "no board files in boards/"
    assert board_names() == SHIPPED


def test_default_board_exists_and_is_the_default_everywhere():
    assert DEFAULT_BOARD == "qemu-aarch64"
    assert DEFAULT_BOARD in SHIPPED
    board = load_board(DEFAULT_BOARD)
    assert board.transport == "qemu" and board.target.llvm_triple == "aarch64-unknown-linux-gnu"
    assert inspect.signature(rxe.build).parameters["board"].default == DEFAULT_BOARD
    assert inspect.signature(rxe.connect).parameters["board"].default == DEFAULT_BOARD


@pytest.mark.parametrize("name", SHIPPED)
def test_shipped_board_loads_and_is_complete(name):
    path = ROOT / "boards" / f"{name}.yaml"
    raw = yaml.safe_load(path.read_text())
    for key in REQUIRED_TOP:
        assert key in raw, f"{path}: missing {key}"
    for key in REQUIRED_TARGET:
        assert key in raw["target"], f"{path}: missing target.{key}"

    board = load_board(name)
    assert isinstance(board, Board)
    assert board.name == name, f"{path}: name {board.name!r} does not match the file name"
    assert Path(board.path) == path
    assert load_board(str(path)) == board          # by path, the same board
    assert load_board(path) == board               # a Path object too
    assert load_board(board) is board
    assert board.description.strip()
    assert board.transport in TRANSPORTS
    assert board.timeout_s > 0
    if board.transport != "local":
        assert getattr(board, board.transport), f"{path}: {board.transport} section is empty"
    if board.transport == "qemu":
        assert board.qemu["command"] and all(isinstance(c, str) for c in board.qemu["command"])

    t = board.target
    assert t.os in OPERATING_SYSTEMS
    assert t.compiler and t.triple and t.llvm_triple
    assert t.freestanding == (t.os == "none")
    assert all(isinstance(v, str) for v in (*t.features, *t.cflags, *t.ldflags, *t.packages))
    if t.llvm_triple == "native":
        assert t.triple == "native" and board.transport == "local"
        return
    parts = t.llvm_triple.split("-")
    assert len(parts) == 4 and all(parts), f"{path}: llvm_triple {t.llvm_triple!r} is not arch-vendor-os-abi"
    arch, _vendor, os_part, abi = parts
    assert 2 <= len(t.triple.split("-")) <= 4
    # the operating system of the triple agrees with target.os
    expected_os = {"linux": "linux", "android": "linux", "none": "none"}[t.os]
    assert os_part == expected_os, (t.llvm_triple, t.os)
    assert abi.startswith("android") == (t.os == "android")
    # a 32-bit ARM board with hard float must say so in its triple (else llvm emits soft-float calls)
    if arch.startswith(("arm", "thumb")) and t.float_abi == "hard":
        assert abi.endswith("hf"), f"{path}: float_abi hard but llvm_triple {t.llvm_triple!r} is soft-float"
    # the GNU compiler is the triple's
    if t.compiler != "cc":
        assert t.compiler.startswith(t.triple + "-"), (t.compiler, t.triple)


def test_cli_lists_every_board():
    proc = run_cli("boards")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert [line.split()[0] for line in lines] == SHIPPED
    for line, name in zip(lines, SHIPPED):
        board = load_board(name)
        assert line.split()[1] == board.transport and line.split()[2] == board.target.llvm_triple
        assert board.description in line
        assert "INVALID" not in line


@pytest.mark.emu
def test_cli_check_finds_every_toolchain():
    """scripts/setup.sh installs every board's toolchain and emulator."""
    proc = run_cli("boards", "--check")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.count("toolchain ok") == len(SHIPPED), proc.stdout
    assert "MISSING" not in proc.stdout and "INVALID" not in proc.stdout
    for name in SHIPPED:
        assert toolchain_problems(load_board(name)) == [], name


# ---------------------------------------------------------------- 2. bad board files

def _set(*keys_and_value):
    *keys, value = keys_and_value

    def mutate(d):
        for k in keys[:-1]:
            d = d[k]
        d[keys[-1]] = value
    return mutate


def _delete(*keys):
    def mutate(d):
        for k in keys[:-1]:
            d = d[k]
        del d[keys[-1]]
    return mutate


def _both(*mutations):
    def mutate(d):
        for m in mutations:
            m(d)
    return mutate


# (id, mutation of the qemu-aarch64 YAML, fragments the message must contain besides the file path)
BAD = [
    ("unknown_top_level_key", _set("colour", "red"), ["unknown", "colour"]),
    ("unknown_target_key", _set("target", "fpu", "neon"), ["unknown", "target", "fpu"]),
    ("unknown_qemu_key", _set("qemu", "gdb", 1234), ["unknown", "qemu", "gdb"]),
    ("missing_target_compiler", _delete("target", "compiler"), ["missing", "target", "compiler"]),
    ("missing_target_triple", _delete("target", "triple"), ["missing", "target", "triple"]),
    ("missing_name", _delete("name"), ["missing", "name"]),
    ("missing_target", _delete("target"), ["missing", "target"]),
    ("missing_qemu_command", _set("qemu", {"system": False}), ["missing", "qemu", "command"]),
    ("timeout_not_a_number", _set("timeout_s", "fast"), ["timeout_s", "fast"]),
    ("features_not_a_list", _set("target", "features", "neon"), ["target", "features", "neon"]),
    ("vector_bits_not_an_int", _set("target", "vector_bits", "128"), ["target", "vector_bits"]),
    ("vector_bits_bool", _set("target", "vector_bits", True), ["target", "vector_bits"]),
    ("target_not_a_mapping", _set("target", "aarch64-linux-gnu"), ["target"]),
    ("one_part_triple", _set("target", "triple", "aarch64"), ["target.triple", "'aarch64'"]),
    ("one_part_llvm_triple", _set("target", "llvm_triple", "aarch64"), ["target.llvm_triple", "'aarch64'"]),
    ("triple_with_spaces", _set("target", "triple", "aarch64 linux gnu"), ["target.triple"]),
    ("three_part_llvm_triple_is_soft_float",
     _set("target", "llvm_triple", "arm-linux-gnueabihf"), ["llvm_triple", "arm-linux-gnueabihf", "four parts"]),
    ("five_part_llvm_triple", _set("target", "llvm_triple", "aarch64-unknown-linux-gnu-extra"), ["llvm_triple"]),
    ("os_not_allowed", _set("target", "os", "windows"), ["os", "windows", "linux", "android", "none"]),
    ("float_abi_not_allowed", _set("target", "float_abi", "hardfp"), ["float_abi", "hardfp", "hard, softfp, soft"]),
    ("transport_not_allowed", _set("transport", "serial"), ["transport", "serial", "local, qemu, ssh, adb"]),
    ("qemu_transport_without_qemu_section", _delete("qemu"), ["qemu", "missing"]),
    ("ssh_transport_without_ssh_section", _set("transport", "ssh"), ["ssh", "missing"]),
    ("adb_transport_without_adb_section", _set("transport", "adb"), ["adb", "missing"]),
    ("ssh_section_missing_host",
     _both(_set("transport", "ssh"), _set("ssh", {"user": "pi", "workdir": "/tmp"})), ["ssh", "missing", "host"]),
]


@pytest.mark.parametrize("mutate,fragments", [c[1:] for c in BAD], ids=[c[0] for c in BAD])
def test_bad_board_file_names_the_file_and_the_field(tmp_path, mutate, fragments):
    data = base_board()
    mutate(data)
    path = write_board(tmp_path, data)
    message = board_error(path)
    assert str(path) in message, message
    for fragment in fragments:
        assert fragment in message, f"{fragment!r} not in {message!r}"
    # the same error reaches rxe.build and rxe.connect before anything is written
    with pytest.raises(BoardError, match=re.escape(str(path))):
        rxe.build(tiny_module(), board=str(path), out_dir=tmp_path / "out", profile=False)
    assert not (tmp_path / "out").exists()
    with pytest.raises(BoardError, match=re.escape(str(path))):
        rxe.connect(str(path))


# Values that are wrong but that a type-only check lets through; each must be a
# BoardError naming the file and the field when the board is loaded, not a
# crash (IndexError, TypeError) later or a nonsense timeout.
WRONG_VALUES = [
    ("timeout_bool", _set("timeout_s", True), ["timeout_s"]),
    ("timeout_zero", _set("timeout_s", 0), ["timeout_s"]),
    ("timeout_negative", _set("timeout_s", -5), ["timeout_s"]),
    ("qemu_command_empty", _set("qemu", "command", []), ["qemu", "command"]),
    ("qemu_command_not_strings", _set("qemu", "command", [5]), ["qemu", "command"]),
    ("cflags_not_strings", _set("target", "cflags", [1]), ["target", "cflags"]),
    ("packages_not_strings", _set("target", "packages", [1]), ["target", "packages"]),
]


@pytest.mark.parametrize("mutate,fragments", [c[1:] for c in WRONG_VALUES], ids=[c[0] for c in WRONG_VALUES])
def test_wrong_values_are_rejected_when_loading(tmp_path, mutate, fragments):
    data = base_board()
    mutate(data)
    path = write_board(tmp_path, data)
    with pytest.raises(BoardError) as info:
        board = load_board(str(path))
        toolchain_problems(board)       # must not crash either, if it loads
    message = str(info.value)
    assert str(path) in message, message
    for fragment in fragments:
        assert fragment in message, f"{fragment!r} not in {message!r}"


def test_invalid_yaml(tmp_path):
    path = write_board(tmp_path, "name: qemu-aarch64\ntarget: [aarch64\n")
    message = board_error(path)
    assert str(path) in message and "not valid YAML" in message
    assert "line" in message  # where the parser stopped


@pytest.mark.parametrize("text,kind", [("- qemu-aarch64\n- host\n", "list"), ("just a string\n", "str"),
                                       ("", "NoneType"), ("42\n", "int")],
                         ids=["list", "string", "empty", "number"])
def test_document_that_is_not_a_mapping(tmp_path, text, kind):
    path = write_board(tmp_path, text)
    message = board_error(path)
    assert str(path) in message and "mapping" in message and kind in message


def test_missing_board_file(tmp_path):
    path = tmp_path / "nowhere.yaml"
    message = board_error(path)
    assert str(path) in message and "no such board file" in message
    message = board_error(tmp_path / "sub" / "board")   # a path without the .yaml suffix
    assert "no such board file" in message


def test_a_directory_is_not_a_board_file(tmp_path):
    directory = tmp_path / "boards.yaml"
    directory.mkdir()
    message = board_error(directory)
    assert str(directory) in message


@pytest.mark.parametrize("loader", [load_board, rxe.connect,
                                    lambda name: rxe.build(tiny_module(), board=name, profile=False)],
                         ids=["load_board", "connect", "build"])
def test_unknown_board_name_lists_the_known_boards(loader):
    with pytest.raises(BoardError) as info:
        loader("no-such-board")
    message = str(info.value)
    assert "unknown board 'no-such-board'" in message
    for name in SHIPPED:
        assert name in message
    assert "path" in message  # and says a YAML path works too


# ---------------------------------------------------------------- 3. absent toolchains

@pytest.mark.emu
def test_absent_compiler(tmp_path):
    data = base_board()
    data["name"] = "no-compiler"
    data["target"]["compiler"] = "nonexistent-gcc"
    data["target"]["packages"] = ["gcc-foo"]
    path = write_board(tmp_path, data, "no-compiler")
    board = load_board(str(path))

    problems = toolchain_problems(board)
    assert len(problems) == 1, problems
    assert "nonexistent-gcc" in problems[0] and "apt-get install gcc-foo" in problems[0]

    for action in (lambda: require_toolchain(board),
                   lambda: rxe.build(tiny_module(), board=str(path), out_dir=tmp_path / "out", profile=False),
                   lambda: rxe.connect(str(path))):
        with pytest.raises(BoardError) as info:
            action()
        message = str(info.value)
        assert "no-compiler" in message and str(path) in message
        assert "compiler nonexistent-gcc not found" in message and "apt-get install gcc-foo" in message
    assert not (tmp_path / "out").exists()


@pytest.mark.emu
def test_absent_compiler_hint_lists_every_package(tmp_path):
    data = base_board()
    data["target"]["compiler"] = "nonexistent-gcc"
    data["target"]["packages"] = ["gcc-foo", "libc6-dev-foo-cross"]
    problems = toolchain_problems(load_board(str(write_board(tmp_path, data))))
    assert problems == ["compiler nonexistent-gcc not found (apt-get install gcc-foo libc6-dev-foo-cross)"]


@pytest.mark.emu
@pytest.mark.parametrize("command,system,package", [
    (["nonexistent-qemu-aarch64", "-L", "/usr/aarch64-linux-gnu"], False, "qemu-user"),
    (["nonexistent-qemu-system-arm", "-M", "mps2-an386"], True, "qemu-system-arm"),
], ids=["qemu-user", "qemu-system"])
def test_absent_emulator(tmp_path, command, system, package):
    data = base_board()
    data["name"] = "no-emulator"
    data["qemu"] = {"command": command, "system": system}
    path = write_board(tmp_path, data, "no-emulator")
    board = load_board(str(path))
    problems = toolchain_problems(board)
    assert problems == [f"emulator {command[0]} not found (apt-get install {package})"]
    for action in (lambda: require_toolchain(board), lambda: rxe.connect(str(path)),
                   lambda: rxe.build(tiny_module(), board=str(path), out_dir=tmp_path / "out", profile=False)):
        with pytest.raises(BoardError) as info:
            action()
        message = str(info.value)
        assert "no-emulator" in message and command[0] in message and f"apt-get install {package}" in message


def test_absent_compiler_and_emulator_are_both_reported(tmp_path):
    data = base_board()
    data["target"]["compiler"] = "nonexistent-gcc"
    data["target"]["packages"] = ["gcc-foo"]
    data["qemu"]["command"] = ["nonexistent-qemu-aarch64"]
    board = load_board(str(write_board(tmp_path, data)))
    with pytest.raises(BoardError) as info:
        require_toolchain(board)
    message = str(info.value)
    assert "apt-get install gcc-foo" in message and "apt-get install qemu-user" in message
    assert "; " in message  # one line, problems separated


@pytest.mark.emu
def test_cli_boards_check_reports_missing_and_invalid_boards(tmp_path, monkeypatch, capsys):
    good = base_board()
    missing = base_board()
    missing["name"] = "missing-tools"
    missing["target"]["compiler"] = "nonexistent-gcc"
    missing["target"]["packages"] = ["gcc-foo"]
    invalid = base_board()
    invalid["name"] = "broken"
    invalid["target"]["llvm_triple"] = "arm-linux-gnueabihf"
    write_board(tmp_path, good, DEFAULT_BOARD)
    write_board(tmp_path, missing, "missing-tools")
    write_board(tmp_path, invalid, "broken")
    monkeypatch.setattr(target_module, "BOARDS_DIR", tmp_path)

    assert cli.main(["boards", "--check"]) == 1
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert [line.split()[0] for line in lines if not line.startswith(" ")] == [
        "broken", "missing-tools", DEFAULT_BOARD]
    assert re.search(r"^broken\s+INVALID: .*four parts", out, re.MULTILINE), out
    assert "MISSING: compiler nonexistent-gcc not found (apt-get install gcc-foo)" in out
    assert out.count("toolchain ok") == 1

    cli.main(["boards"])
    out = capsys.readouterr().out
    assert "INVALID" in out and "MISSING" not in out  # listing does not check toolchains


# ---------------------------------------------------------------- 4. a board YAML by path, end to end

def custom_board(directory: Path) -> Path:
    data = base_board()
    data["name"] = "my-arm64"
    data["description"] = "a copy of qemu-aarch64 under another name"
    return write_board(directory, data, "my-arm64")


@pytest.mark.emu
def test_custom_board_yaml_builds_and_runs(tmp_path):
    path = custom_board(tmp_path)
    board = load_board(str(path))
    assert board.name == "my-arm64" and board.description.startswith("a copy")
    assert board.target == load_board(DEFAULT_BOARD).target

    mod = tiny_module()
    art = rxe.build(mod, board=str(path), out_dir=tmp_path / "out", name="tiny", profile=False)
    assert art.board == "my-arm64" and Path(art.board_file) == path
    assert art.runner.exists() and art.static_library.exists()
    assert rxe.Artifact.load(tmp_path / "out").board_file == art.board_file

    rng = np.random.default_rng(1)
    with rxe.connect(str(path)) as dev:
        loaded = dev.load(art)
        for batch in (1, 5):
            x = rng.standard_normal((batch, 8)).astype(np.float32)
            expected = first_output(rxe.interpret(mod, x))
            got = first_output(loaded.run(x))
            assert got.shape == (batch, 4) and got.dtype == np.float32
            np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)
            np.testing.assert_allclose(expected, np.maximum(x @ _weights(), 0), rtol=1e-5, atol=1e-6)


def _weights():
    return np.random.default_rng(0).standard_normal((8, 4)).astype(np.float32)


@pytest.mark.emu
def test_relative_board_path_is_recorded_absolute(tmp_path, monkeypatch):
    """An artifact built with `board="my-arm64.yaml"` (relative) must still find
    its board file when run from another directory."""
    custom_board(tmp_path)
    monkeypatch.chdir(tmp_path)
    art = rxe.build(tiny_module(), board="my-arm64.yaml", out_dir=tmp_path / "out", name="tiny", profile=False)
    assert Path(art.board_file).is_absolute(), art.board_file
    proc = run_cli("run", tmp_path / "out", cwd="/")
    assert proc.returncode == 0, proc.stderr


def _tiny_onnx(path: Path) -> Path:
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper, numpy_helper
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"]), helper.make_node("Relu", ["y"], ["z"])], "tiny",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 8])],
        [helper.make_tensor_value_info("z", TensorProto.FLOAT, ["batch", 4])],
        [numpy_helper.from_array(_weights(), "w")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(path))
    return path


@pytest.mark.emu
def test_cli_compile_and_run_with_a_board_yaml_path(tmp_path):
    path = custom_board(tmp_path)
    model = _tiny_onnx(tmp_path / "tiny.onnx")
    out_dir = tmp_path / "out"
    proc = run_cli("compile", model, "--board", path, "-o", out_dir, "--dim", "batch=1..8")
    assert proc.returncode == 0, proc.stderr
    assert "for my-arm64" in proc.stdout
    # the board the artifact was built for, from the artifact
    proc = run_cli("run", out_dir, "--check")
    assert proc.returncode == 0, proc.stderr
    assert "check against the numpy reference: PASS" in proc.stdout
    # the same board named by the same path it was compiled with
    proc = run_cli("run", out_dir, "--board", path, "--check")
    assert proc.returncode == 0, proc.stderr
    assert "PASS" in proc.stdout
    # compile and run in one step
    proc = run_cli("run", model, "--board", path, "--build-dir", tmp_path / "out2", "--dim", "batch=1..8",
                   "--check")
    assert proc.returncode == 0, proc.stderr
    assert "PASS" in proc.stdout
