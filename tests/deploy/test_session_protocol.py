"""Every transport speaks the one interface of relax_edge/deploy/session.py:
a Device whose `load` gives a LoadedModel that runs, benchmarks, sizes its
workspace and closes; what a model cannot do raises DeviceError naming the
board and the operation; each deploy module imports alone, with no cycle."""

import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import relax_edge as rxe
from relax_edge import op
from relax_edge.deploy import (
    AdbDevice,
    Device,
    HostDevice,
    LoadedModel,
    LoadedModule,
    QemuDevice,
    RpcModule,
    RunnerModule,
    RuntimeCheckError,
    SshDevice,
)
from relax_edge.ir import Builder, SizeVar, TensorType, Var
from relax_edge.target import load_board, toolchain_problems

ROOT = Path(__file__).resolve().parents[2]
MAX_BATCH, FEATURES, HIDDEN, CLASSES = 4, 8, 16, 4
DEPLOY_MODULES = ["session", "host", "rpc", "remote", "emulator", "ssh", "adb", "tensorfile"]

_rng = np.random.default_rng(7)
W1 = _rng.standard_normal((FEATURES, HIDDEN)).astype(np.float32)
B1 = _rng.standard_normal(HIDDEN).astype(np.float32)
W2 = _rng.standard_normal((HIDDEN, CLASSES)).astype(np.float32)
X = _rng.standard_normal((3, FEATURES)).astype(np.float32)


def two_layers():
    """relu(x @ W1 + B1) @ W2 over a batch of at most MAX_BATCH rows."""
    x = Var("x", TensorType((SizeVar("n", upper=MAX_BATCH), FEATURES), "float32"))
    bb = Builder()
    with bb.function("main", [x]):
        with bb.dataflow():
            hidden = bb.emit(op.relu(op.add(op.matmul(x, W1), B1)))
            out = bb.emit_output(op.matmul(hidden, W2))
        bb.ret(out)
    return bb.get()


def expected(x):
    return np.maximum(x @ W1 + B1, 0) @ W2


def check_model(m: LoadedModel) -> int:
    """Run, benchmark and size the workspace of `m` against numpy; the workspace bytes."""
    (y,) = m.run(X)
    np.testing.assert_allclose(y, expected(X), rtol=1e-5, atol=1e-5)
    stats = m.benchmark(X, warmup=1, repeat=3)
    assert stats["repeat"] == 3 and stats["warmup"] == 1 and len(stats["samples_ms"]) == 3
    assert 0 <= stats["min_ms"] <= stats["median_ms"] <= stats["max_ms"]
    ws = m.workspace_bytes(n=MAX_BATCH)
    assert ws >= MAX_BATCH * HIDDEN * 4   # the hidden activations live in the workspace
    return ws


@pytest.fixture(scope="module")
def host_art(tmp_path_factory):
    return rxe.build(two_layers(), board="host", out_dir=tmp_path_factory.mktemp("two-host"), name="two")


@pytest.mark.parametrize("cls", [HostDevice, QemuDevice, SshDevice, AdbDevice])
def test_every_device_class_implements_device(cls):
    assert issubclass(cls, Device)
    assert not cls.__abstractmethods__


@pytest.mark.parametrize("cls", [LoadedModule, RpcModule, RunnerModule])
def test_every_model_class_implements_loaded_model(cls):
    assert issubclass(cls, LoadedModel)
    assert not cls.__abstractmethods__


def test_host_model_in_process(host_art):
    with rxe.connect("host") as dev:
        assert isinstance(dev, Device)
        with dev.load(host_art) as m:
            assert isinstance(m, LoadedModule)
            ws = check_model(m)
            assert ws == m.plan(np.zeros((MAX_BATCH, FEATURES), np.float32))[1]
        assert m._rpc_module is None   # closed with the context: the benchmark server is stopped


def test_host_model_in_a_server_process(host_art):
    from relax_edge.deploy.host import server_module
    with server_module(host_art, "main", None, "host") as m, rxe.connect("host") as dev:
        assert isinstance(m, RpcModule)
        assert check_model(m) == dev.load(host_art).workspace_bytes(n=MAX_BATCH)
    assert m.client is None


def test_device_close_closes_its_models(host_art):
    dev = rxe.connect("host")
    m = dev.load(host_art)
    m.benchmark(X, warmup=0, repeat=1)
    assert m._rpc_module is not None
    dev.close()
    assert m._rpc_module is None


def test_runner_model_times_runs_and_refuses_a_profile_by_name(adb_board, tmp_path):
    """Through the runner on tensor files, a hosted build is timed by the runner's clock (runner -t);
    its runner holds the model without the profiler (the server has it), so a profile is refused by name."""
    art = rxe.build(two_layers(), board=adb_board, out_dir=tmp_path / "two", name="two")
    with rxe.connect(adb_board) as dev:
        assert isinstance(dev, AdbDevice)
        rpc_ws = check_model(dev.load(art))
        dev.rpc = False   # the path of boards without a server: the runner on tensor files
        with dev.load(art) as m:
            assert isinstance(m, RunnerModule)
            np.testing.assert_allclose(m.run(X)[0], expected(X), rtol=1e-5, atol=1e-5)
            assert m.workspace_bytes(n=MAX_BATCH) == rpc_ws
            stats = m.benchmark(X, warmup=1, repeat=3)
            assert stats["unit"] == "ms" and len(stats["samples_ms"]) == 3 and min(stats["samples_ms"]) > 0
            with pytest.raises(RuntimeCheckError, match="built without the profiler"):
                m.profile(X)


needs_qemu_user = pytest.mark.skipif(shutil.which("qemu-aarch64") is None, reason="qemu-aarch64 is not installed")


@pytest.mark.emu
@needs_qemu_user
def test_qemu_user_model_over_rpc_and_the_runner(tmp_path):
    art = rxe.build(two_layers(), board="qemu-aarch64", out_dir=tmp_path / "two", name="two")
    with rxe.connect("qemu-aarch64") as dev:
        assert isinstance(dev, QemuDevice)
        with dev.load(art) as m:
            assert isinstance(m, RpcModule)
            rpc_ws = check_model(m)
        dev.rpc = False
        with dev.load(art) as m:
            assert isinstance(m, RunnerModule)
            np.testing.assert_allclose(m.run(X)[0], expected(X), rtol=1e-5, atol=1e-5)
            assert m.workspace_bytes(n=MAX_BATCH) == rpc_ws
            stats = m.benchmark(X, warmup=0, repeat=2)
            assert stats["unit"] == "ms" and stats["repeat"] == 2 and stats["min_ms"] > 0


@pytest.mark.emu
@pytest.mark.skipif(bool(toolchain_problems(load_board("qemu-cortex-m4"))), reason="no Cortex-M4 toolchain or QEMU")
def test_semihosting_board_benchmarks_in_instructions_from_the_cli(tmp_path, capsys):
    from relax_edge.cli import main as cli_main
    art = rxe.build(two_layers(), board="qemu-cortex-m4", out_dir=tmp_path / "two", name="two")
    assert cli_main(["bench", art.out_dir, "--dim", "n=3", "--repeat", "2", "--warmup", "0", "--profile"]) == 0
    out = capsys.readouterr().out
    assert "instructions counted by the emulator (not a time)" in out and " ms" not in out, out


@pytest.mark.parametrize("module", DEPLOY_MODULES)
def test_each_deploy_module_imports_alone(module):
    proc = subprocess.run([sys.executable, "-c", f"import relax_edge.deploy.{module}"], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr


def test_no_import_cycle_in_deploy():
    spec = importlib.util.spec_from_file_location("code_metrics", ROOT / "scripts" / "code_metrics.py")
    metrics = sys.modules.setdefault("code_metrics", importlib.util.module_from_spec(spec))
    spec.loader.exec_module(metrics)
    graph = metrics.import_graph(ROOT / "relax_edge")["all"]
    assert "relax_edge.deploy.session" in graph
    cycles = metrics.strongly_connected(graph)
    assert [c for c in cycles if any(m.startswith("relax_edge.deploy") for m in c)] == []
