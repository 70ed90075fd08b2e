"""Running a farm's matrix: Ray tasks with board resources, or a local process pool.

    run_matrix(farm, builds, jobs, work, on_done, local=False)

`builds` maps a build key to a build job (work.build_model's argument);
`jobs` are the cells, each naming its farm board (`farm_board`) and its
build (`build`, or None); `work(job, built)` runs one of them in a worker;
`on_done(job, result)` is called in the driver as each finishes (the bench
stores it in the database there and then).

With Ray every farm board is a custom resource, `board:NAME`, with as many
units as the board has slots; a cell asks for one unit, so a physical board
(one slot) runs one cell at a time and an emulator with N slots runs N.
Emulator and host cells also take a CPU, ssh and adb cells none (the work
is on the board). Builds are Ray tasks too, one per build key, and a cell
waits for its build through Ray's object dependencies. The driver takes
results with `ray.wait` as they come. Ray retries a task whose worker died
up to RETRIES times; a failure inside a task is a failed cell, not retried.
`ray: local` starts Ray here (the farm's resources, num_cpus from the farm
or the machine, no dashboard) and shuts it down at the end; `auto` or a
`ray://` address joins a cluster whose nodes were started with the board
resources (`ray start --resources '{"board:qemu-aarch64": 2}'`): a board no
node offers gets its cells failed with that reason.

`local=True` runs the same builds and cells in a ProcessPoolExecutor,
keeping at most `slots` cells of a board in flight; a task whose worker
dies is retried the same number of times (the one that killed it: a pool
breaks as a whole, so the tasks in flight then run again one at a time
until it is found).
"""

from __future__ import annotations

import collections
import os
import sys
import time
from concurrent import futures

from .config import Farm, FarmError

RETRIES = 2
OBJECT_STORE_BYTES = 128 * 1024 * 1024   # a local Ray's object store: results are small


class Progress:
    """Cells ok, failed and in flight per board, printed on stderr as they change."""

    def __init__(self, jobs: list, quiet: bool = False):
        self.quiet = quiet
        self.total = len(jobs)
        self.left = collections.Counter(job["farm_board"] for job in jobs)
        self.ok = collections.Counter()
        self.failed = collections.Counter()
        self.start = time.monotonic()

    def done(self, job: dict, result: dict, running=None) -> None:
        """Count a finished cell; `running` {board: cells running} where the scheduler knows it (the local pool;
        Ray's cells are queued or running, the line then says so)."""
        board = job["farm_board"]
        self.left[board] -= 1
        (self.ok if result["status"] == "ok" else self.failed)[board] += 1
        if not self.quiet:
            print(self.line(running), file=sys.stderr, flush=True)

    def line(self, running=None) -> str:
        finished = sum(self.ok.values()) + sum(self.failed.values())
        parts = []
        for b in self.left:
            left = (f"{running[b]} running, {self.left[b] - running[b]} waiting" if running is not None
                    else f"{self.left[b]} running or queued")
            parts.append(f"{b} {self.ok[b]} ok, {self.failed[b]} failed, {left}")
        return (f"[farm] {finished}/{self.total} cells, {sum(self.failed.values())} failed, "
                f"{time.monotonic() - self.start:.0f}s | " + "; ".join(parts))


def run_matrix(farm: Farm, builds: dict, jobs: list, work, on_done, local: bool = False, quiet: bool = False) -> None:
    progress = Progress(jobs, quiet)

    def finished(job, result, running=None):
        on_done(job, result)
        progress.done(job, result, running)

    if local:
        _run_local(farm, builds, jobs, work, finished)
    else:
        _run_ray(farm, builds, jobs, work, finished)


def _failed(reason: str) -> dict:
    return {"status": "failed", "reason": reason}


def _ray():
    try:
        import ray
    except ImportError:
        raise FarmError("the farm runs on Ray: pip install 'relax-edge[farm]' (or run with --local for a "
                        "process pool on this machine)") from None
    return ray


def _connect(ray, farm: Farm) -> bool:
    """Connect to (or start) the farm's Ray; True when this call started it and must shut it down."""
    if ray.is_initialized():
        return False
    if farm.ray == "local":
        start_local_ray(farm)
    else:
        try:
            ray.init(address=farm.ray, log_to_driver=False, configure_logging=False)
        except Exception as err:  # noqa: BLE001 - ConnectionError and Ray's own errors, reported with the address
            raise FarmError(f"{farm.path}: cannot reach the Ray cluster at {farm.ray}: {err}") from None
    return True


def start_local_ray(farm: Farm, temp_dir: str | None = None) -> None:
    """Start Ray on this machine with the farm's board resources: num_cpus from the farm (or the machine's),
    no dashboard, a small object store; `temp_dir` is Ray's folder for its sessions (default Ray's own)."""
    ray = _ray()
    extra = {"_temp_dir": temp_dir} if temp_dir else {}
    ray.init(address="local", num_cpus=farm.num_cpus or os.cpu_count(), resources=ray_resources(farm),
             include_dashboard=False, object_store_memory=OBJECT_STORE_BYTES, log_to_driver=False,
             configure_logging=False, **extra)


def ray_resources(farm: Farm) -> dict:
    """The custom resources of the farm's boards: board:NAME -> slots."""
    return {b.resource: float(b.slots) for b in farm.boards}


def _run_ray(farm: Farm, builds: dict, jobs: list, work, finished) -> None:
    ray = _ray()
    started = _connect(ray, farm)
    try:
        offered = ray.cluster_resources()
        build_task = ray.remote(max_retries=RETRIES)(_build)
        work_task = ray.remote(max_retries=RETRIES)(work)
        build_refs = {key: build_task.options(num_cpus=1).remote(job) for key, job in builds.items()}
        pending = {}
        for job in jobs:
            fb = farm.board(job["farm_board"])
            if offered.get(fb.resource, 0) < 1:
                finished(job, _failed(f"{fb.name}: no node of the Ray cluster offers the resource {fb.resource} "
                                      f"(start one with ray start --resources '{{\"{fb.resource}\": 1}}')"))
                continue
            built = build_refs[job["build"]] if job.get("build") else {}
            ref = work_task.options(resources={fb.resource: 1}, num_cpus=0 if fb.physical else 1).remote(job, built)
            pending[ref] = job
        while pending:
            done, _ = ray.wait(list(pending), num_returns=1)
            for ref in done:
                job = pending.pop(ref)
                try:
                    result = ray.get(ref)
                except ray.exceptions.RayTaskError as err:   # raised in the task (not retried): its reason
                    cause = err.cause if isinstance(err.cause, BaseException) else err
                    result = _failed(f"{job['farm_board']}: {type(cause).__name__}: {str(cause)[-500:]}")
                except Exception as err:  # noqa: BLE001 - a worker that died RETRIES + 1 times
                    result = _failed(f"{job['farm_board']}: gave up after {RETRIES} retries: "
                                     f"{type(err).__name__}: {str(err)[-500:]}")
                finished(job, result)
    finally:
        if started:
            ray.shutdown()


def _build(job: dict) -> dict:
    from .work import build_model
    return build_model(job)


def _run_local(farm: Farm, builds: dict, jobs: list, work, finished) -> None:
    """The builds, then the cells as their builds finish, in a process pool (see the module docstring).

    A worker that dies breaks the whole pool: every task in flight fails with it, and nothing tells which
    one killed it. A task alone in the pool when it broke is charged an attempt; when several were in flight,
    none is, and each of them (a suspect) runs again alone, so that the one that kills its worker is found
    and charged, and a bystander never gives up for another task's death."""
    slots = {b.name: b.slots for b in farm.boards}
    workers = max(1, min(farm.num_cpus or os.cpu_count() or 1, sum(slots.values())))
    queued = collections.deque([("build", key) for key in builds] + [("cell", i) for i in range(len(jobs))])
    built, attempts, suspects = {}, collections.Counter(), set()
    in_flight = {}                         # future -> task
    running = collections.Counter()        # board -> its cells in flight

    def ready(task) -> bool:
        if task[0] == "build":
            return True
        job = jobs[task[1]]
        return running[job["farm_board"]] < slots[job["farm_board"]] and (not job.get("build")
                                                                           or job["build"] in built)

    def submit(task) -> None:
        queued.remove(task)
        if task[0] == "build":
            future = pool.submit(_build, builds[task[1]])
        else:
            job = jobs[task[1]]
            running[job["farm_board"]] += 1
            future = pool.submit(work, job, built.get(job.get("build"), {}))
        in_flight[future] = task

    def settle(task, value) -> None:
        if task[0] == "build":
            built[task[1]] = value
        else:
            finished(jobs[task[1]], value, running)

    def lost(task, why: str) -> None:
        """A task whose worker died (alone in the pool): run it again, or give up after RETRIES retries."""
        attempts[task] += 1
        if attempts[task] <= RETRIES:
            queued.appendleft(task)
        elif task[0] == "build":
            settle(task, {"error": f"the build gave up after {RETRIES} retries: {why}"})
        else:
            settle(task, _failed(f"{jobs[task[1]]['farm_board']}: gave up after {RETRIES} retries: {why}"))

    pool = _pool(workers)
    try:
        while queued or in_flight:
            if not any(task in suspects for task in in_flight.values()):
                isolate = [task for task in queued if task in suspects]
                if isolate:            # a suspect runs alone, once the pool has drained
                    if not in_flight:
                        submit(isolate[0])
                else:
                    for task in list(queued):
                        if ready(task):   # checked as each is submitted: a board's slots fill
                            submit(task)
            if not in_flight:
                raise FarmError(f"{farm.path}: {len(queued)} cells wait for builds that were never scheduled")
            done, _ = futures.wait(in_flight, return_when=futures.FIRST_COMPLETED)
            broken = []
            for future in done:
                task = in_flight.pop(future)
                if task[0] == "cell":
                    running[jobs[task[1]]["farm_board"]] -= 1
                try:
                    value = future.result()
                except futures.process.BrokenProcessPool:
                    broken.append(task)
                    continue
                except Exception as err:  # noqa: BLE001 - e.g. a job that cannot be pickled: a failed task
                    text = f"{type(err).__name__}: {err}"
                    value = ({"error": f"the build failed in its worker: {text}"} if task[0] == "build"
                             else _failed(f"{jobs[task[1]]['farm_board']}: {text}"))
                suspects.discard(task)
                settle(task, value)
            if broken:   # a new pool runs what was in flight
                for task in in_flight.values():
                    if task[0] == "cell":
                        running[jobs[task[1]]["farm_board"]] -= 1
                    broken.append(task)
                in_flight.clear()
                pool.shutdown(wait=False, cancel_futures=True)
                pool = _pool(workers)
                if len(broken) == 1:
                    lost(broken[0], "its worker process died")
                else:
                    suspects.update(broken)
                    queued.extendleft(reversed(broken))
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def _pool(workers: int) -> futures.ProcessPoolExecutor:
    import multiprocessing
    return futures.ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("spawn"))
