"""The farm end to end: a local Ray (2 CPUs, no dashboard) started and
stopped here, two qemu-aarch64 slots, one qemu-riscv64, the loopback-sshd
board and a board that is down; two tiny models x those boards x the C and
LLVM backends, repeat 3. Then runs killed after some cells (a --local driver
and its pool; a Ray driver and the Ray it started), resumed."""

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
import ray

import relax_edge as rxe
from relax_edge.farm.db import ResultsDB
from relax_edge.farm.scheduler import RETRIES, run_matrix, start_local_ray
from tests.deploy.sshd import Sshd
from tests.farm.farm_fixtures import gated_board, models, ssh_boards, write_farm
from tests.farm.worker_faults import die_once

ROOT = Path(__file__).resolve().parents[2]
WAIT_S = 300   # the ceiling of every wait below (a loaded 2-core machine); each ends on its event first
BENCH_BOARDS = ["qemu-aarch64", "qemu-riscv64", "ssh-loopback", "ssh-down"]


@pytest.fixture(scope="module")
def farm_env(tmp_path_factory):
    folder = tmp_path_factory.mktemp("farm")
    sshd = Sshd(folder / "sshd").start()
    try:
        yield {"folder": folder, "models": models(folder), "boards": ssh_boards(sshd, folder),
               "cache": folder / "cache", "sshd": sshd}
    finally:
        sshd.stop()


def _processes_naming(text) -> list:
    """Pids of processes whose command line holds `text` (a folder: Ray's session folder is in every one of
    Ray's processes, a gate's path in the commands waiting for it)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if str(text).encode() in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


def _until(condition, what: str, ceiling: float = WAIT_S):
    """Poll `condition` until it is true (returned), failing after `ceiling` seconds with `what`."""
    deadline = time.monotonic() + ceiling
    while True:
        value = condition()
        if value:
            return value
        assert time.monotonic() < deadline, f"{what}: not within {ceiling:.0f}s"
        time.sleep(0.2)


def _no_process_left(text, what: str) -> None:
    """Wait until no process names `text`; else kill them (by pid, they are this test's) and fail."""
    deadline = time.monotonic() + 60
    while _processes_naming(text) and time.monotonic() < deadline:
        time.sleep(0.2)
    left = _processes_naming(text)
    for pid in left:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    assert left == [], f"{what} left processes running: {left}"


@pytest.fixture(scope="module")
def ray_farm(farm_env):
    """The farm and a local Ray with its board resources (2 CPUs, no dashboard, its own session folder),
    stopped after the module's tests, which checks that none of Ray's processes remain. The farm's
    ssh-gate board waits for the gate farm_env["gate"]; only the killed Ray run uses it."""
    b = farm_env["boards"]
    gate_board, farm_env["gate"] = gated_board(farm_env["sshd"], farm_env["folder"])
    farm_file = write_farm(farm_env["folder"] / "farm.yaml", {"qemu-aarch64": 2, "qemu-riscv64": 1},
                           [b["sshd"], b["down"], gate_board])
    farm = rxe.farm.load_farm(farm_file)
    ray_dir = tempfile.mkdtemp(prefix="rxe-ray-", dir="/tmp")   # short: Ray's sockets live under it
    start_local_ray(farm, temp_dir=ray_dir)
    try:
        assert ray.cluster_resources()["CPU"] == 2 and ray.cluster_resources()["board:qemu-aarch64"] == 2
        yield farm
    finally:
        ray.shutdown()
        farm_env["gate"].touch()
    _no_process_left(ray_dir, "the test's Ray")
    shutil.rmtree(ray_dir, ignore_errors=True)   # Ray's session logs


@pytest.mark.emu
def test_ray_farm_stores_every_cell_and_the_down_boards_reasons(farm_env, ray_farm):
    db = farm_env["folder"] / "results.db"
    run = rxe.farm.bench(farm=ray_farm, models=farm_env["models"], boards=BENCH_BOARDS, backends=("c", "llvm"),
                         repeat=3, warmup=1, db=db, cache_dir=farm_env["cache"], quiet=True)
    with ResultsDB(db) as results:
        rows = results.cells(run_id=run.run_id)
    assert len(rows) == 2 * 4 * 2   # models x farm boards x backends, one thread count
    cells = {(r["model"], r["board"], r["backend"]) for r in rows}
    assert cells == {(m, board, backend) for m in ("tiny", "gemm") for board in BENCH_BOARDS
                     for backend in ("c", "llvm")}
    down = [r for r in rows if r["board"] == "ssh-down"]
    assert all(r["status"] == "failed" and "ssh-down" in r["reason"] and "cannot reach the board" in r["reason"]
               for r in down), [r["reason"] for r in down]
    ok = [r for r in rows if r["board"] != "ssh-down"]
    assert all(r["status"] == "ok" for r in ok), [r["reason"] for r in ok if r["status"] != "ok"]
    for r in ok:
        assert len(r["samples"]) == 3 and r["minimum"] <= r["median"] <= r["maximum"] and r["median"] > 0
        assert r["model_hash"] and r["relax_edge_version"] == rxe.__version__ and r["unit"] == "ms"
    # one build per model, target and backend: the two ssh boards share qemu-aarch64's
    assert len([d for d in farm_env["cache"].iterdir() if d.is_dir()]) == 2 * 2 * 2

    with ResultsDB(db) as results:
        text = rxe.farm.report(results)
    assert run.run_id in text and "ssh-down" in text and "failed" in text and "qemu-riscv64" in text


def _cli(*args) -> list:
    return [sys.executable, "-m", "relax_edge.cli", "farm", *map(str, args)]


def _env(**extra) -> dict:
    """The environment of a farm command: this one's (RAY_AUTH_MODE as the module's Ray set it) but where Ray
    is and keeps its sessions, which `extra` may give."""
    env = {k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS", "RAY_TMPDIR")}
    return {**env, "PYTHONPATH": str(ROOT), **extra}


def _bench_until_two_cells(args: list, db: Path, env: dict, cwd: Path, **popen) -> tuple:
    """Start `relax-edge farm bench ARGS`; once qemu-aarch64's two cells are stored (the gated board's never
    are, its gate is shut), return (the still running process, the stored rows)."""
    proc = subprocess.Popen(_cli("bench", *args), env=env, cwd=cwd, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, **popen)

    def stored():
        assert proc.poll() is None, proc.stderr.read().decode()[-3000:]
        if not db.exists():
            return None
        with ResultsDB(db) as results:
            rows = results.cells()
        return rows if len(rows) >= 2 else None

    try:
        done = _until(stored, "qemu-aarch64's two cells")
    except BaseException:
        proc.kill()
        proc.wait()
        raise
    assert all(r["board"] == "qemu-aarch64" and r["status"] == "ok" for r in done), done
    return proc, done


def _check_resumed(db: Path, done: list, out: subprocess.CompletedProcess, json_file: Path) -> None:
    """The resumed run holds every cell exactly once, the ones stored before the kill as they were."""
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-3000:]
    assert len(json.loads(json_file.read_text())["cells"]) == 4
    with ResultsDB(db) as results:
        rows = results.cells()
        assert len(results.runs()) == 1
    assert {r["cell_id"] for r in done} <= {r["cell_id"] for r in rows}   # kept as they were
    assert sorted((r["board"], r["threads"], r["status"]) for r in rows) == [
        ("qemu-aarch64", 1, "ok"), ("qemu-aarch64", 2, "ok"), ("ssh-gate", 1, "ok"), ("ssh-gate", 2, "ok")]


@pytest.mark.emu
def test_a_killed_local_run_keeps_its_cells_and_resume_completes_it(farm_env, tmp_path):
    gate_board, gate = gated_board(farm_env["sshd"], tmp_path)
    farm_file = write_farm(tmp_path / "farm.yaml", {"qemu-aarch64": 1}, [gate_board])
    db, env = tmp_path / "kill.db", _env()
    common = ["--db", db, "--local", "--quiet", "--cache", farm_env["cache"]]
    try:
        proc, done = _bench_until_two_cells(["--farm", farm_file, "--models", farm_env["models"][0],
                                             "--threads", 1, 2, "--repeat", 3, *common], db, env, tmp_path,
                                            start_new_session=True)
        os.killpg(proc.pid, signal.SIGKILL)   # the driver, its pool workers and their emulators
        proc.wait()
        proc.stderr.close()
    finally:
        gate.touch()   # the gated board answers from now on; commands left waiting by the killed run go on
    out = subprocess.run(_cli("bench", "--resume", *common, "--json", tmp_path / "run.json"), env=env,
                         cwd=tmp_path, capture_output=True, text=True, timeout=WAIT_S)
    _check_resumed(db, done, out, tmp_path / "run.json")
    _no_process_left(gate, "the gated board")
    report = subprocess.run(_cli("report", "--db", db), env=env, cwd=tmp_path, capture_output=True, text=True,
                            timeout=WAIT_S)
    assert report.returncode == 0 and "ssh-gate" in report.stdout and "qemu-aarch64" in report.stdout


@pytest.mark.emu
def test_a_killed_ray_driver_leaves_no_ray_and_resume_on_a_running_cluster_completes_it(farm_env, ray_farm,
                                                                                         tmp_path):
    """The killed driver started its own Ray (ray: local): raylet, GCS and workers die with it. The resume
    joins the module's Ray (ray: auto, RAY_ADDRESS), whose nodes offer the board resources."""
    gate_board = farm_env["folder"] / "ssh-gate.yaml"
    local_farm = write_farm(tmp_path / "farm.yaml", {"qemu-aarch64": 1}, [gate_board])
    cluster_farm = write_farm(tmp_path / "cluster.yaml", {"qemu-aarch64": 1}, [gate_board], ray="auto")
    db = tmp_path / "kill.db"
    own_ray = tempfile.mkdtemp(prefix="rxe-ray-", dir="/tmp")
    common = ["--db", db, "--quiet", "--cache", farm_env["cache"]]
    try:
        proc, done = _bench_until_two_cells(["--farm", local_farm, "--models", farm_env["models"][0],
                                             "--threads", 1, 2, "--repeat", 3, *common], db,
                                            _env(RAY_TMPDIR=own_ray), tmp_path)
        names = {Path(f"/proc/{pid}/comm").read_text().strip() for pid in _processes_naming(own_ray)
                 if Path(f"/proc/{pid}/comm").exists()}
        assert {"raylet", "gcs_server"} <= names, names   # the driver's own Ray is running
        proc.send_signal(signal.SIGKILL)   # the driver alone
        proc.wait()
        proc.stderr.close()
        _no_process_left(own_ray, "the killed driver's Ray")
    finally:
        farm_env["gate"].touch()
        shutil.rmtree(own_ray, ignore_errors=True)
    env = _env(RAY_ADDRESS=ray.get_runtime_context().gcs_address)
    out = subprocess.run(_cli("bench", "--resume", "--farm", cluster_farm, *common, "--json", tmp_path / "run.json"),
                         env=env, cwd=tmp_path, capture_output=True, text=True, timeout=WAIT_S)
    _check_resumed(db, done, out, tmp_path / "run.json")
    _no_process_left(farm_env["gate"], "the gated board")


@pytest.mark.parametrize("local", [False, True], ids=["ray", "pool"])
def test_a_worker_killed_mid_task_is_retried_and_one_that_always_dies_fails_alone(ray_farm, tmp_path, local):
    always = str(tmp_path / "always")
    jobs = [{"name": "always", "farm_board": "qemu-riscv64", "marker": always, "always": True},
            {"name": "once", "farm_board": "qemu-aarch64", "marker": str(tmp_path / "once"), "always": False},
            # in flight when the first worker dies: a pool breaks as a whole, this job must not be blamed
            {"name": "bystander", "farm_board": "qemu-aarch64", "wait_for": always},
            {"name": "raises", "farm_board": "qemu-riscv64", "raises": "no such kernel"}]
    results = []
    run_matrix(ray_farm, {}, jobs, die_once, lambda job, result: results.append((job["name"], result)),
               local=local, quiet=True)
    outcome = dict(results)
    assert len(results) == 4, results
    assert outcome["once"]["status"] == "ok" and outcome["once"]["pid"] != os.getpid(), outcome["once"]
    assert outcome["bystander"]["status"] == "ok", outcome["bystander"]
    assert outcome["always"]["status"] == "failed"
    assert outcome["always"]["reason"].startswith(f"qemu-riscv64: gave up after {RETRIES} retries: ")
    assert outcome["raises"] == {"status": "failed", "reason": "qemu-riscv64: ValueError: no such kernel"}


@pytest.mark.emu
def test_tuning_on_two_emulated_boards_changes_their_tables(farm_env, ray_farm, tmp_path):
    """Under QEMU this measures the emulator, not a chip: the test checks the search and the tables, not a gain."""
    from relax_edge import tuning
    tables = tmp_path / "tables"
    tables.mkdir()
    boards = ["qemu-aarch64", "qemu-riscv64"]
    for name in boards:   # a table to change: KC 192 chosen earlier
        tuning.write_table(name, {"gemm": {"KC": 192}}, path=tables / f"{name}.json")
    run = rxe.farm.tune(farm=ray_farm, boards=boards, kernels=("gemm",), buckets={"gemm": ["small"]},
                        knobs={"gemm": {"KC": [16]}}, repeat=5, warmup=1, db=tmp_path / "tune.db", tables_dir=tables,
                        cache_dir=farm_env["cache"], quiet=True)
    assert sorted((c["board"], c["status"]) for c in run.cells) == [(b, "ok") for b in boards for _ in range(3)]
    with ResultsDB(tmp_path / "tune.db") as results:
        configs = sorted((r["board"], r["config"]["config"]["KC"]) for r in results.cells(kind="tune"))
    assert configs == [(b, kc) for b in boards for kc in (16, 256, 256)]   # the default measured twice
    for name in boards:
        table = tuning.load_table(name, path=tables / f"{name}.json")
        assert table["gemm"]["KC"] in (256, 16) and run.tables[name] == tables / f"{name}.json"
        assert run.chosen[name]["gemm"]["buckets"]["small"]["default_ms"] > 0
