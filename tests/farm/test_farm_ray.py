"""The farm end to end: a local Ray (2 CPUs, no dashboard) started and
stopped here, two qemu-aarch64 slots, one qemu-riscv64, the loopback-sshd
board and a board that is down; two tiny models x those boards x the C and
LLVM backends, repeat 3. Then a run killed after some cells, resumed."""

import json
import os
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
from tests.farm.farm_fixtures import models, ssh_boards, write_farm
from tests.farm.worker_faults import die_once

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def farm_env(tmp_path_factory):
    folder = tmp_path_factory.mktemp("farm")
    sshd = Sshd(folder / "sshd").start()
    boards = ssh_boards(sshd, folder)
    yield {"folder": folder, "models": models(folder), "boards": boards, "cache": folder / "cache"}
    boards["hang_socket"].close()
    sshd.stop()


def _processes_under(folder: str) -> list:
    """Pids of processes whose command line names `folder` (Ray's session folder is in every one of them)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if folder.encode() in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


@pytest.fixture(scope="module")
def ray_farm(farm_env):
    """The farm file and a local Ray with its board resources (2 CPUs, no dashboard), stopped after the
    module's tests, which checks that none of Ray's processes remain."""
    b = farm_env["boards"]
    farm_file = write_farm(farm_env["folder"] / "farm.yaml", {"qemu-aarch64": 2, "qemu-riscv64": 1},
                           [b["sshd"], b["down"]])
    farm = rxe.farm.load_farm(farm_file)
    ray_dir = tempfile.mkdtemp(prefix="rxe-ray-", dir="/tmp")   # short: Ray's sockets live under it
    start_local_ray(farm, temp_dir=ray_dir)
    try:
        assert ray.cluster_resources()["CPU"] == 2 and ray.cluster_resources()["board:qemu-aarch64"] == 2
        yield farm
    finally:
        ray.shutdown()
    deadline = time.time() + 30
    while _processes_under(ray_dir) and time.time() < deadline:
        time.sleep(0.5)
    assert _processes_under(ray_dir) == [], "Ray left processes running"


@pytest.mark.emu
def test_ray_farm_stores_every_cell_and_the_down_boards_reasons(farm_env, ray_farm):
    db = farm_env["folder"] / "results.db"
    run = rxe.farm.bench(farm=ray_farm, models=farm_env["models"], backends=("c", "llvm"), repeat=3, warmup=1,
                         db=db, cache_dir=farm_env["cache"], quiet=True)
    with ResultsDB(db) as results:
        rows = results.cells(run_id=run.run_id)
    assert len(rows) == 2 * 4 * 2   # models x farm boards x backends, one thread count
    cells = {(r["model"], r["board"], r["backend"]) for r in rows}
    assert cells == {(m, board, backend) for m in ("tiny", "gemm")
                     for board in ("qemu-aarch64", "qemu-riscv64", "ssh-loopback", "ssh-down")
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


@pytest.mark.emu
def test_a_killed_run_keeps_its_cells_and_resume_completes_it(farm_env, tmp_path):
    b = farm_env["boards"]
    farm_file = write_farm(tmp_path / "farm.yaml", {"qemu-aarch64": 1}, [b["hang"]])
    db = tmp_path / "kill.db"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(_cli("bench", "--farm", farm_file, "--models", farm_env["models"][0], "--threads", 1, 2,
                                 "--repeat", 3, "--db", db, "--local", "--quiet", "--cache", farm_env["cache"]),
                            env=env, cwd=tmp_path, start_new_session=True, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)
    try:
        deadline = time.time() + 240
        done = []
        while time.time() < deadline and proc.poll() is None:   # the hanging board's cells never finish
            if db.exists():
                with ResultsDB(db) as results:
                    done = results.cells()
                if len(done) >= 2:
                    break
            time.sleep(0.3)
        assert proc.poll() is None, proc.stderr.read().decode()[-2000:]
        assert len(done) == 2 and all(r["board"] == "qemu-aarch64" and r["status"] == "ok" for r in done), done
    finally:
        os.killpg(proc.pid, signal.SIGKILL)   # the driver, its pool workers and their emulators
        proc.wait()
        proc.stderr.close()
    b["hang_socket"].close()   # the board is down now: its cells fail fast on resume

    out = subprocess.run(_cli("bench", "--resume", "--db", db, "--local", "--quiet", "--cache", farm_env["cache"],
                              "--json", tmp_path / "run.json"), env=env, cwd=tmp_path, capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 1, out.stderr   # 1: the run has failed cells
    assert len(json.loads((tmp_path / "run.json").read_text())["cells"]) == 4
    with ResultsDB(db) as results:
        rows = results.cells()
        assert len(results.runs()) == 1
    assert {r["cell_id"] for r in done} <= {r["cell_id"] for r in rows}   # the finished cells kept as they were
    assert sorted((r["board"], r["threads"], r["status"]) for r in rows) == [
        ("qemu-aarch64", 1, "ok"), ("qemu-aarch64", 2, "ok"), ("ssh-hang", 1, "failed"), ("ssh-hang", 2, "failed")]
    report = subprocess.run(_cli("report", "--db", db), env=env, cwd=tmp_path, capture_output=True, text=True)
    assert report.returncode == 0 and "ssh-hang" in report.stdout and "qemu-aarch64" in report.stdout


@pytest.mark.parametrize("local", [False, True], ids=["ray", "pool"])
def test_a_worker_killed_mid_task_is_retried_and_one_that_always_dies_fails_alone(ray_farm, tmp_path, local):
    jobs = [{"farm_board": "qemu-aarch64", "marker": str(tmp_path / "once"), "always": False},
            {"farm_board": "qemu-riscv64", "marker": str(tmp_path / "always"), "always": True}]
    results = []
    run_matrix(ray_farm, {}, jobs, die_once, lambda job, result: results.append((job["farm_board"], result)),
               local=local, quiet=True)
    outcome = dict(results)
    assert outcome["qemu-aarch64"]["status"] == "ok" and outcome["qemu-aarch64"]["pid"] != os.getpid()
    assert outcome["qemu-riscv64"]["status"] == "failed"
    assert outcome["qemu-riscv64"]["reason"].startswith(f"qemu-riscv64: gave up after {RETRIES} retries: ")


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
