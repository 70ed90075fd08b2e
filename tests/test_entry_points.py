"""Bad inputs give the same status and message at every entry point: the
Python API on the host (ctypes), the RPC server over stdin/stdout, the runner
executable (directly and under qemu-aarch64), the command line, a QEMU board
(RPC, and the runner on tensor files), an adb board (a stand-in adb) and an
SSH board (marked slow: it starts sshd). Non-contiguous, Fortran-ordered and
byte-swapped arrays are accepted everywhere (copied) and give the right
result.

The model takes x and y, both (n, 4) float32 with n <= 8, and returns
2 * x + y; it is compiled once per board."""

import getpass
import re
import struct
import subprocess

import numpy as np
import pytest

import relax_edge as rxe
from relax_edge import op
from relax_edge.cli import main as cli_main
from relax_edge.deploy import QemuDevice, tensorfile
from relax_edge.deploy.rpc import ProcessStream, RpcModule
from relax_edge.ir import Builder, SizeVar, TensorType, Var
from relax_edge.target import load_board

X = np.arange(12, dtype=np.float32).reshape(3, 4)
Y = np.full((3, 4), 0.5, np.float32)


def build_pair():
    n = SizeVar("n", upper=8)
    x = Var("x", TensorType((n, 4), "float32"))
    y = Var("y", TensorType((n, 4), "float32"))
    bb = Builder()
    with bb.function("main", [x, y]):
        with bb.dataflow():
            out = bb.emit_output(op.add(op.multiply(x, np.float32(2.0)), y))
        bb.ret(out)
    return bb.get()


# case: (inputs, expected) where expected is ("ok", output) or (status, message)
CASES = {
    "wrong dtype": ((X.astype(np.float64), Y), ("RXE_ERR_DTYPE", "input x: dtype float64, expected float32")),
    "dtype the ABI lacks": ((X, Y.astype(np.int16)), ("RXE_ERR_DTYPE", "input y: dtype int16, expected float32")),
    "wrong rank": ((X[None], Y), ("RXE_ERR_RANK", "input x: rank 3, expected 2")),
    "beyond the bound": ((np.zeros((9, 4), np.float32), np.zeros((9, 4), np.float32)),
                         ("RXE_ERR_BOUND", "input x dimension 0: n = 9 exceeds its upper bound 8")),
    "sizes disagree": ((X, Y[:2]), ("RXE_ERR_SHAPE", "input y dimension 0 is 2, but it must equal n = 3")),
    "missing input": ((X,), ("RXE_ERR_ARGUMENT_COUNT", "takes 2 inputs (x, y), got 1")),
    "extra input": ((X, Y, Y), ("RXE_ERR_ARGUMENT_COUNT", "takes 2 inputs (x, y), got 3")),
    "non-contiguous": ((np.repeat(X, 2, axis=1)[:, ::2], Y), ("ok", 2 * X + Y)),
    "fortran order": ((np.asfortranarray(X), Y), ("ok", 2 * X + Y)),
    "byte-swapped": ((X.astype(">f4"), Y), ("ok", 2 * X + Y)),
}

_CODES = {"f": 2, "i": 0, "u": 1, "b": 6}
_ERROR_LINE = re.compile(r"RXE_ERROR (RXE_\w+): (.*)")


def raw_tensor_file(arrays) -> bytes:
    """An .rxt of exactly these arrays (any count, any numpy dtype): what a
    caller other than relax_edge could hand the runner."""
    parts = [b"RXT1", struct.pack("<I", len(arrays))]
    for a in arrays:
        a = np.ascontiguousarray(a, dtype=a.dtype.newbyteorder("<"))
        parts += [struct.pack("<BBH", _CODES[a.dtype.kind], a.dtype.itemsize * 8, a.ndim),
                  struct.pack(f"<{a.ndim}q", *a.shape), a.tobytes()]
    return b"".join(parts)


def outcome(call):
    """("ok", first output) or (status name, message) of a run."""
    try:
        return "ok", call()[0]
    except rxe.RuntimeCheckError as err:
        return err.status, str(err).removeprefix(f"{err.status}: ")


def runner_outcome(proc: subprocess.CompletedProcess, read_output):
    match = _ERROR_LINE.search(proc.stderr)
    if proc.returncode == 3 and match:
        return match.group(1), match.group(2).strip()
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return "ok", tensorfile.decode(read_output())[0]


def assert_outcome(got, expected):
    if expected[0] == "ok":
        assert got[0] == "ok", got
        np.testing.assert_allclose(got[1], expected[1], rtol=1e-6)
    else:
        assert got == expected


@pytest.fixture(scope="module")
def host_art(tmp_path_factory):
    return rxe.build(build_pair(), board="host", out_dir=tmp_path_factory.mktemp("pair-host"), name="pair",
                     profile=False)


@pytest.fixture(scope="module")
def qemu_art(tmp_path_factory):
    return rxe.build(build_pair(), board="qemu-aarch64", out_dir=tmp_path_factory.mktemp("pair-qemu"), name="pair",
                     profile=False)


@pytest.fixture(scope="module")
def ssh_board(tmp_path_factory):
    from tests.deploy.sshd import Sshd
    server = Sshd(tmp_path_factory.mktemp("sshd")).start()
    board = server.board_file(tmp_path_factory.mktemp("board") / "ssh-qemu-aarch64.yaml", user=getpass.getuser())
    art = rxe.build(build_pair(), board=str(board), out_dir=tmp_path_factory.mktemp("pair-ssh"), name="pair",
                    profile=False)
    with rxe.connect(str(board)) as dev:
        yield dev.load(art)
    server.stop()


@pytest.fixture(scope="module")
def adb_module(tmp_path_factory):
    """The model on the stand-in adb of tests/deploy (a host-target board)."""
    import os

    from tests.deploy.adb_board import write_adb_board
    root = tmp_path_factory.mktemp("adb")
    board, bin_dir = write_adb_board(root)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
        art = rxe.build(build_pair(), board=board, out_dir=root / "pair", name="pair", profile=False)
        with rxe.connect(board) as dev:
            yield dev.load(art)


@pytest.fixture(scope="module")
def host_module(host_art):
    with rxe.connect("host") as dev:
        yield dev.load(host_art)


@pytest.fixture(scope="module")
def rpc_module(host_art):
    module = RpcModule(lambda: ProcessStream([str(host_art.server)], what="host"), host_art, 60.0)
    yield module
    module.close()


@pytest.fixture(scope="module")
def qemu_device():
    with rxe.connect("qemu-aarch64") as dev:
        yield dev


@pytest.mark.parametrize("case", CASES)
def test_python_api_on_the_host(host_module, case):
    inputs, expected = CASES[case]
    assert_outcome(outcome(lambda: host_module.run(*inputs)), expected)


@pytest.mark.parametrize("case", CASES)
def test_rpc_server_over_stdin_stdout(rpc_module, case):
    inputs, expected = CASES[case]
    assert_outcome(outcome(lambda: rpc_module.run(*inputs)), expected)


@pytest.mark.parametrize("case", CASES)
def test_runner_executable(host_art, tmp_path, case):
    inputs, expected = CASES[case]
    (tmp_path / "in.rxt").write_bytes(raw_tensor_file(inputs))
    proc = subprocess.run([str(host_art.runner), "in.rxt", "out.rxt"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=60)
    assert_outcome(runner_outcome(proc, (tmp_path / "out.rxt").read_bytes), expected)


@pytest.mark.parametrize("case", CASES)
def test_command_line(host_art, tmp_path, capsys, case):
    inputs, expected = CASES[case]
    np.savez(tmp_path / "in.npz", *inputs)  # arr_0, arr_1, ...: the inputs in order
    code = cli_main(["run", host_art.out_dir, "--inputs", tmp_path / "in.npz", "--output", tmp_path / "out.npz"])
    err = capsys.readouterr().err
    if expected[0] == "ok":
        assert code == 0, err
        np.testing.assert_allclose(np.load(tmp_path / "out.npz")["output0"], expected[1], rtol=1e-6)
    else:
        assert code == 1
        assert err.strip().splitlines()[-1] == f"relax-edge: error: {expected[0]}: {expected[1]}"
        assert not (tmp_path / "out.npz").exists()


def test_command_line_names_inputs_by_name(host_art, tmp_path, capsys):
    np.savez(tmp_path / "in.npz", y=Y[:2], x=X)  # by name, in any order
    assert cli_main(["run", host_art.out_dir, "--inputs", tmp_path / "in.npz"]) == 1
    assert capsys.readouterr().err.strip() == \
        "relax-edge: error: RXE_ERR_SHAPE: input y dimension 0 is 2, but it must equal n = 3"
    np.savez(tmp_path / "in.npz", x=X)
    assert cli_main(["run", host_art.out_dir, "--inputs", tmp_path / "in.npz"]) == 1
    assert capsys.readouterr().err.strip() == "relax-edge: error: RXE_ERR_ARGUMENT_COUNT: takes 2 inputs (x, y), got 1"


@pytest.mark.emu
@pytest.mark.parametrize("case", CASES)
def test_qemu_board_over_rpc(qemu_device, qemu_art, case):
    inputs, expected = CASES[case]
    m = qemu_device.load(qemu_art)
    assert isinstance(m, RpcModule)
    assert_outcome(outcome(lambda: m.run(*inputs)), expected)


@pytest.mark.emu
@pytest.mark.parametrize("case", CASES)
def test_qemu_board_with_the_runner(qemu_art, case):
    inputs, expected = CASES[case]
    dev = QemuDevice(load_board("qemu-aarch64"))
    dev.rpc = False  # the path of boards without an RPC server: the runner on tensor files
    with dev:
        assert_outcome(outcome(lambda: dev.load(qemu_art).run(*inputs)), expected)


@pytest.mark.emu
@pytest.mark.parametrize("case", CASES)
def test_runner_executable_under_qemu(qemu_device, qemu_art, case):
    inputs, expected = CASES[case]
    runner = qemu_device.stage(qemu_art.runner)
    qemu_device.write("in.rxt", raw_tensor_file(inputs))
    qemu_device.remove("out.rxt")
    proc = qemu_device.execute(runner, ["in.rxt", "out.rxt"])
    assert_outcome(runner_outcome(proc, lambda: qemu_device.read("out.rxt")), expected)


@pytest.mark.parametrize("case", CASES)
def test_adb_board(adb_module, case):
    inputs, expected = CASES[case]
    assert_outcome(outcome(lambda: adb_module.run(*inputs)), expected)


@pytest.mark.emu
@pytest.mark.slow
@pytest.mark.parametrize("case", CASES)
def test_ssh_board(ssh_board, case):
    inputs, expected = CASES[case]
    assert_outcome(outcome(lambda: ssh_board.run(*inputs)), expected)
