"""The command line never shows a traceback: bad arguments, unreadable,
truncated or pickled tensor files, unwritable outputs, a missing artifact, a
full disk and Ctrl-C each give one line `relax-edge: error: ...` on stderr and
exit 2 (usage errors, found by the parser before any work), 130 (interrupted)
or 1 (everything else). Only --debug adds the traceback."""

import errno
import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import relax_edge as rxe
from relax_edge.cli import main
from tests.test_entry_points import build_pair

X = np.ones((3, 4), np.float32)


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """A tiny host artifact and tensor files good and bad."""
    root = tmp_path_factory.mktemp("cli")
    art = rxe.build(build_pair(), board="host", out_dir=root / "art", name="pair")
    np.savez(root / "good.npz", x=X, y=X)
    np.savez(root / "pickled.npz", x=np.array([{"a": 1}], dtype=object), y=X)
    np.save(root / "pickled.npy", np.array([{"a": 1}], dtype=object))
    np.save(root / "one.npy", X)
    whole = (root / "good.npz").read_bytes()
    (root / "truncated.npz").write_bytes(whole[:len(whole) // 2])
    (root / "truncated.npy").write_bytes((root / "one.npy").read_bytes()[:70])
    (root / "junk.npz").write_bytes(b"this is not numpy")
    (root / "empty.npz").write_bytes(b"")
    (root / "a_file").write_text("not a folder")
    (root / "no_artifact").mkdir()
    (root / "bad_artifact").mkdir()
    (root / "bad_artifact" / "artifact.json").write_text('{"board": ')
    return {"root": root, "art": art.out_dir}


def run_cli(capsys, argv, files):
    argv = [str(a).format(**files) for a in argv]
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


USAGE = [
    (["bench", "{art}", "--repeat", "0"], "--repeat: expected an integer in [1, 100000], got '0' "
     "(see relax-edge bench --help)"),
    (["bench", "{art}", "--warmup", "-1"], "--warmup: expected an integer in [0, 100000], got '-1' "
     "(see relax-edge bench --help)"),
    (["run", "{art}", "--threads", "0"], "--threads: expected an integer in [1, 16], got '0' "
     "(see relax-edge run --help)"),
    (["bench", "{art}", "--threads", "many"], "--threads: expected an integer in [1, 16], got 'many' "
     "(see relax-edge bench --help)"),
    (["run", "{art}", "--seed", "-3"], "--seed: expected an integer >= 0, got '-3' (see relax-edge run --help)"),
    (["compile", "m.onnx", "--dim", "seq=8..2"], "--dim 'seq=8..2': expected LO <= HI and 1 <= HI <= 2147483647 "
                                                 "(see relax-edge compile --help)"),
    (["compile", "m.onnx", "--dim", "seq=..2147483648"], "--dim 'seq=..2147483648': expected LO <= HI and "
                                                         "1 <= HI <= 2147483647 (see relax-edge compile --help)"),
    (["run", "{art}", "--dim", "n"], "--dim 'n': expected NAME=LO..HI, NAME=..HI or NAME=N "
     "(see relax-edge run --help)"),
    (["run", "{art}", "--dim", "n=0"], "--dim 'n=0': a size must be in [1, 2147483647] (see relax-edge run --help)"),
    (["run"], "the following arguments are required: model (see relax-edge run --help)"),
    (["frob"], "COMMAND: invalid choice: 'frob' (choose from 'compile', 'run', 'bench', 'generate', 'farm', "
               "'package', 'boards', 'ops') (see relax-edge --help)"),
    (["ops", "--bogus"], "unrecognized arguments: --bogus (see relax-edge --help)"),
    (["compile", "m.onnx", "--backend", "cuda"], "--backend: invalid choice: 'cuda' (choose from 'c', 'llvm', "
                                                 "'vulkan') (see relax-edge compile --help)"),
    (["compile", "m.onnx", "--emit-llvm"], "--emit-llvm needs --backend llvm"),
    (["bench", "{art}", "--plot", "p.png"], "--plot draws the profile: add --profile"),
]

FAILURES = [
    (["run", "{root}/nothing"], "{root}/nothing: no such file or directory (expected an ONNX file or a directory "
                                "made by relax-edge compile)"),
    (["compile", "{root}/nothing.onnx"], "{root}/nothing.onnx: no such file or directory (expected an ONNX file "
                                         "or a directory made by relax-edge compile)"),
    (["bench", "{root}/no_artifact"], "{root}/no_artifact: no artifact.json (is this a relax-edge build directory?)"),
    (["run", "{root}/bad_artifact"], "{root}/bad_artifact/artifact.json: not a readable artifact description "
                                     "(JSONDecodeError: Expecting value: line 1 column 11 (char 10)); rebuild with "
                                     "relax-edge compile"),
    (["run", "{art}", "--inputs", "{root}/missing.npz"], "--inputs {root}/missing.npz: no such file"),
    (["run", "{art}", "--inputs", "{root}"], "--inputs {root}: is a folder, expected an .npz or .npy file"),
    (["run", "{art}", "--inputs", "{root}/pickled.npz"], "{root}/pickled.npz: holds pickled (object) arrays, which "
                                                         "are not loaded; save plain numeric arrays with numpy.savez"),
    (["bench", "{art}", "--inputs", "{root}/pickled.npy"], "{root}/pickled.npy: holds pickled (object) arrays, which "
                                                           "are not loaded; save plain numeric arrays "
                                                           "with numpy.savez"),
    (["run", "{art}", "--inputs", "{root}/truncated.npz"], "{root}/truncated.npz: not a readable .npz or .npy file "
                                                           "(truncated or corrupt: File is not a zip file)"),
    (["run", "{art}", "--inputs", "{root}/junk.npz"], "{root}/junk.npz: not an .npz or .npy file"),
    (["run", "{art}", "--inputs", "{root}/empty.npz"], "{root}/empty.npz: not an .npz or .npy file"),
    (["run", "{art}", "--inputs", "{root}/one.npy"], "RXE_ERR_ARGUMENT_COUNT: takes 2 inputs (x, y), got 1"),
    (["run", "{art}", "--output", "{root}/no/such/out.npz"], "--output {root}/no/such/out.npz: the folder "
                                                             "{root}/no/such does not exist"),
    (["run", "{art}", "--output", "{root}/a_file/out.npz"], "--output {root}/a_file/out.npz: {root}/a_file is not "
                                                            "a folder"),
    (["bench", "{art}", "--json", "{root}"], "--json {root}: is a folder, expected a file name"),
    (["bench", "{art}", "--json", "/proc/1/b.json"], "--json /proc/1/b.json: the folder /proc/1 is not writable"),
    (["compile", "{root}/junk.npz", "-o", "/proc/1/out"], "-o /proc/1/out: /proc/1 is not writable"),
    (["compile", "{root}/nothing.onnx", "-o", "{root}/x"], "{root}/nothing.onnx: no such file or directory "
                                                          "(expected an ONNX file or a directory made by relax-edge "
                                                          "compile)"),
    (["compile", "{root}/junk.npz", "-o", "{root}/a_file/sub"], "-o {root}/a_file/sub: {root}/a_file is not a folder"),
    (["run", "{art}", "--board", "qemu-aarch64"], "{art} was built for board host, not qemu-aarch64; rebuild with "
                                                  "relax-edge compile --board qemu-aarch64"),
    (["run", "{art}", "--output", "/dev/full"], "cannot write /dev/full: no space left on the device"),
]


@pytest.mark.parametrize("argv, message", USAGE, ids=[" ".join(a) for a, _ in USAGE])
def test_usage_errors_exit_2_with_one_line(files, capsys, argv, message):
    code, _, err = run_cli(capsys, argv, files)
    assert code == 2
    assert err == f"relax-edge: error: {message.format(**files)}\n"


@pytest.mark.parametrize("argv, message", FAILURES, ids=[" ".join(a) for a, _ in FAILURES])
def test_failures_exit_1_with_one_line(files, capsys, argv, message):
    code, _, err = run_cli(capsys, argv, files)
    assert code == 1
    assert err.splitlines()[-1] == f"relax-edge: error: {message.format(**files)}"
    assert all(line.startswith("[relax-edge]") for line in err.splitlines()[:-1])  # progress lines only


def test_results_are_written_atomically(files, capsys, tmp_path):
    code, out, _ = run_cli(capsys, ["bench", "{art}", "--repeat", "2", "--warmup", "0", "--json",
                                    tmp_path / "b.json"], files)
    assert code == 0 and "wrote" in out
    assert json.loads((tmp_path / "b.json").read_text())["benchmark"]["repeat"] == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == ["b.json"]


def test_a_full_disk_leaves_the_old_result_and_no_temporary_file(files, capsys, tmp_path, monkeypatch):
    (tmp_path / "out.npz").write_bytes(b"previous")

    def full(fd):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    monkeypatch.setattr(os, "fsync", full)
    code, _, err = run_cli(capsys, ["run", "{art}", "--inputs", "{root}/good.npz", "--output", tmp_path / "out.npz"],
                           files)
    assert code == 1
    target = tmp_path / "out.npz"
    assert err.splitlines()[-1] == f"relax-edge: error: cannot write {target}: no space left on the device"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.npz"]
    assert (tmp_path / "out.npz").read_bytes() == b"previous"


def test_ctrl_c_is_one_line_and_exit_130(files, capsys, monkeypatch):
    def interrupted(*args, **kw):
        raise KeyboardInterrupt
    monkeypatch.setattr("relax_edge.deploy.connect", interrupted)
    code, _, err = run_cli(capsys, ["run", "{art}"], files)
    assert (code, err.splitlines()[-1]) == (130, "relax-edge: error: interrupted")
    assert "Traceback" not in err


def test_an_unexpected_exception_is_one_line_unless_debug(files, capsys, monkeypatch):
    def broken(*args, **kw):
        raise ValueError("boom")
    monkeypatch.setattr("relax_edge.deploy.connect", broken)
    code, _, err = run_cli(capsys, ["run", "{art}"], files)
    assert code == 1 and "Traceback" not in err
    assert err.splitlines()[-1] == "relax-edge: error: unexpected ValueError: boom (run with --debug for the traceback)"
    for argv in (["--debug", "run", "{art}"], ["run", "{art}", "--debug"]):  # a global flag, before or after
        code, _, err = run_cli(capsys, argv, files)
        assert code == 1 and "Traceback (most recent call last)" in err and 'raise ValueError("boom")' in err


def cli_process(*args, **kw):
    return subprocess.run([sys.executable, "-m", "relax_edge.cli", *map(str, args)], capture_output=True,
                          text=True, timeout=120, **kw)


def test_exit_codes_through_a_real_process(files):
    proc = cli_process("bench", files["art"], "--repeat", "0")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.startswith("relax-edge: error: --repeat: expected an integer in [1, 100000], got '0'")
    proc = cli_process("run", files["art"], "--inputs", files["root"] / "pickled.npz")
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert proc.stderr.strip().endswith("holds pickled (object) arrays, which are not loaded; save plain numeric "
                                        "arrays with numpy.savez")


def test_stdout_on_a_full_disk(files):
    with open("/dev/full", "w") as full:
        proc = subprocess.run([sys.executable, "-m", "relax_edge.cli", "ops"], stdout=full, stderr=subprocess.PIPE,
                              text=True, timeout=120)
    assert proc.returncode == 1
    assert proc.stderr == "relax-edge: error: cannot write the output: no space left on the device\n"


# a fuzz of the command line over a small alphabet ---------------------------
SWITCHES = {"compile": ["--emit-llvm", "--show-memory", "--no-optimize"], "run": ["--check"],
            "bench": ["--profile"], "boards": ["--check"], "ops": []}
OPTIONS = {"compile": ["--board", "--backend", "-o", "--dim", "--name"],
           "run": ["--board", "--inputs", "--dim", "--seed", "--output", "--threads", "--build-dir"],
           "bench": ["--board", "--repeat", "--warmup", "--top", "--threads", "--json", "--plot", "--inputs", "--dim",
                     "--seed", "--build-dir"],
           "boards": [], "ops": []}
MODELS = ["{art}", "{root}/nothing", "{root}/no_artifact", "{root}/bad_artifact", "{root}/junk.npz", "{root}/a_file"]
VALUES = ["0", "1", "2", "-1", "100001", "x", "", "n=3", "n=1..8", "n=..4", "n=9", "=", "n=8..2", "host",
          "qemu-aarch64", "nosuch", "c", "llvm", "{art}", "{root}/good.npz", "{root}/pickled.npz",
          "{root}/truncated.npy", "{root}/one.npy", "{root}/junk.npz", "{root}/nothing", "{root}/a_file/o",
          "{root}/out.json", "{root}/out.npz", "{root}/plot.png", "/dev/full"]


@st.composite
def command_lines(draw):
    """A subcommand, mostly with a model path, then options with values from
    VALUES, switches, and now and then a stray token."""
    command = draw(st.sampled_from(list(SWITCHES)))
    argv = [command]
    if OPTIONS[command] and draw(st.integers(0, 9)) > 0:
        argv.append(draw(st.sampled_from(MODELS)))
    flags = OPTIONS[command] + SWITCHES[command] + ["--debug", "--help"]
    for _ in range(draw(st.integers(0, 4))):
        flag = draw(st.sampled_from(flags)) if flags else "--debug"
        argv.append(flag)
        if flag in OPTIONS[command]:
            argv.append(draw(st.sampled_from(VALUES)))
    if draw(st.integers(0, 9)) == 0:
        argv.insert(draw(st.integers(0, len(argv))), draw(st.sampled_from(VALUES + ["--", "-o", "--version"])))
    return argv


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(argv=command_lines())
def test_fuzzed_command_lines_never_show_a_traceback(files, capsys, monkeypatch, argv):
    monkeypatch.chdir(files["root"])  # whatever the fuzz writes stays in the test's folder
    code, _, err = run_cli(capsys, argv, files)
    assert code in (0, 1, 2, 130)
    assert "unexpected" not in err, err
    assert "--debug" in argv or "Traceback" not in err, err
    errors = [line for line in err.splitlines() if "error:" in line and not line.startswith(" ")]
    assert all(line.startswith("relax-edge: error: ") for line in errors), err
    assert code != 2 or len(errors) == 1, err


def _as_from_a_terminal():
    """The child's SIGINT as a shell gives it: handled by default and not blocked, whatever the test process
    inherited or was left with (an ignored or blocked SIGINT passes to children through exec)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


def test_ctrl_c_during_a_benchmark_stops_the_server_at_once(tmp_path):
    from tests.models import build_mlp, mlp_weights
    art = rxe.build(build_mlp(mlp_weights()), board="host", out_dir=tmp_path / "mlp", name="mlp")
    proc = subprocess.Popen([sys.executable, "-m", "relax_edge.cli", "bench", art.out_dir, "--dim", "n=64",
                             "--repeat", "100000", "--warmup", "0"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, preexec_fn=_as_from_a_terminal)
    try:
        lines = []
        while not any("timed repeats" in line for line in lines):  # the server is timing now
            lines.append(proc.stderr.readline())
            assert lines[-1], "".join(lines)
        time.sleep(0.5)
        # Ctrl-C as a user presses it, again after 4 s if the first did not stop it
        code = None
        for _ in range(5):
            proc.send_signal(signal.SIGINT)
            try:
                code = proc.wait(timeout=4)  # not the minutes the repeats would take
                break
            except subprocess.TimeoutExpired:
                continue
    finally:
        if proc.poll() is None:
            proc.kill()
    err = proc.stderr.read()
    assert code == 130, (code, err)
    assert err.endswith("relax-edge: error: interrupted\n") and err.count("relax-edge: error:") == 1, err
