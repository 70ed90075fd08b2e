"""Sessions on another machine or an emulator (qemu, ssh, adb): a model is
loaded over RPC when its artifact has a server and the session can start
one, and otherwise runs through its runner executable on tensor files.

The runner runs a model, sizes its workspace and generates with a
decoder's step (runtime_c/tools/runner.c: `runner IN OUT`, `runner -w
SIZE...`, `runner -g REQUEST RESULT`: the whole rxe_generate loop on the
device, the microcontroller's path; its tokens come back at the end, so
on_token is called after it, and the times are 0 without a clock), and
times and profiles it (`runner -t WARMUP REPEAT`, `-p`: a bare-metal build's
runner holds the profiled model). Under an instruction-counting emulator
(QemuDevice.timed_unit "instructions": qemu-system-arm -icount) `benchmark`
and `profile` report instruction counts, labelled so (`unit`,
`*_instructions`), never as times. A model error comes back as
RuntimeCheckError with the runtime's status and message, a crash as
DeviceError with the tail of what the device printed.
"""

from __future__ import annotations

import re
import signal
import statistics
import subprocess
from pathlib import Path

from ..errors import RelaxEdgeError
from ..target import Board
from . import tensorfile
from .rpc import RpcModule
from .session import (
    Device,
    DeviceError,
    LoadedModel,
    RuntimeCheckError,
    prepare_inputs,
    size_values,
    status_code,
    tail,
    thread_args,
)

_ERROR = re.compile(r"RXE_ERROR (RXE_\w+): (.*)")
_TIME = re.compile(r"^RXE_TIME (\d+)$", re.M)
_PROFILE_RUN = re.compile(r"^RXE_PROFILE_RUN (\d+)$", re.M)
_PROFILE_ROW = re.compile(r"^RXE_PROFILE (\d+) (\d+) (\S+)\t(.*)$", re.M)


class RunnerModule(LoadedModel):
    """A model loaded on a device that runs its runner executable on tensor
    files. The device provides: stage(local path) -> program, write(name,
    bytes), read(name) -> bytes | None, remove(name), execute(program, args)
    -> completed process, and `board`."""

    def __init__(self, device: "DeviceSession", artifact, function: str = "main"):
        self.device = device
        self.artifact = artifact
        self.function = function
        self.signature = artifact.signature[function]
        self.runner = device.stage(artifact.runner)

    def _call(self, args: list) -> subprocess.CompletedProcess:
        return self.device.execute(self.runner, ["-f", self.function, *args] if self.function != "main" else args)

    def run(self, *inputs) -> list:
        self.device.write("in.rxt", tensorfile.encode(prepare_inputs(self.signature, inputs)))
        self.device.remove("out.rxt")
        self._check(self._call(["in.rxt", "out.rxt"]))
        data = self.device.read("out.rxt")
        if data is None:
            raise DeviceError(f"{self.device.board.name}: the runner wrote no outputs")
        return tensorfile.decode(data)

    def generate(self, prompt_ids, max_new_tokens: int = 32, temperature: float = 0.0, top_k=None, top_p=None,
                 seed: int = 0, stop=None, on_token=None):
        """The runner's generate mode (rxe_generate on the device) on tensor files."""
        import numpy as np

        from .generate import check_request, result
        req = check_request(self.artifact.signature, prompt_ids, max_new_tokens, temperature, top_k, top_p, seed, stop)
        knobs = np.array([req.max_new_tokens, req.top_k, 0], np.int64)
        knobs[2:] = np.array([req.seed], np.uint64).view(np.int64)
        self.device.write("generate.rxt", tensorfile.encode([
            np.array(req.prompt, np.int64), knobs, np.array([req.temperature, req.top_p], np.float32),
            np.array(req.stop, np.int64)]))
        self.device.remove("generated.rxt")
        args = ["-g", "generate.rxt", "generated.rxt"]
        proc = self.device.execute(self.runner, ["-f", self.function, *args] if self.function not in ("main", "step")
                                   else args)
        data = self.device.read("generated.rxt")
        try:
            self._check(proc)
        except RuntimeCheckError as exc:
            exc.tokens = [] if data is None else [int(t) for t in tensorfile.decode(data)[0]]
            raise
        if data is None:
            raise DeviceError(f"{self.device.board.name}: the runner wrote no generated tokens")
        tokens, token_ns, info = tensorfile.decode(data)
        if on_token is not None:
            for t in tokens:
                on_token(int(t))
        return result(tokens.tolist(), token_ns.tolist(), *info.tolist())

    @property
    def unit(self) -> str:
        """What timed runs measure here: "ns" (a clock) or "instructions" (an instruction-counting emulator)."""
        return getattr(self.device, "timed_unit", "ns")

    def _timed(self, inputs, args: list) -> str:
        """The runner's printout of a timed or profiled run of `inputs`."""
        self.device.write("in.rxt", tensorfile.encode(prepare_inputs(self.signature, inputs)))
        self.device.remove("out.rxt")
        full = [*(["-f", self.function] if self.function != "main" else []), *args, "in.rxt", "out.rxt"]
        proc = self.device.execute(self.runner, full, icount=True) if self.unit == "instructions" \
            else self.device.execute(self.runner, full)
        self._check(proc)
        return proc.stdout + proc.stderr   # semihosting prints on the emulator's stderr

    def benchmark(self, *inputs, warmup: int = 3, repeat: int = 20, min_repeat_ms: int = 0) -> dict:
        """Timed runs on the device (min_repeat_ms is not used: each run is counted). Under an
        instruction-counting emulator the statistics are instruction counts (keys *_instructions)."""
        from .rpc import check_timing
        check_timing(warmup, repeat, min_repeat_ms)
        per_ns = getattr(self.device, "timed_per_ns", 1.0)
        samples = [round(int(v) * per_ns) for v in _TIME.findall(self._timed(inputs, ["-t", str(warmup), str(repeat)]))]
        if len(samples) != repeat:
            raise DeviceError(f"{self.device.board.name}: the runner printed {len(samples)} of {repeat} timed runs")
        if self.unit == "instructions":
            return {"unit": "instructions", "median_instructions": statistics.median(samples),
                    "mean_instructions": statistics.fmean(samples), "std_instructions": statistics.pstdev(samples),
                    "min_instructions": min(samples), "max_instructions": max(samples), "repeat": repeat,
                    "warmup": warmup, "samples_instructions": samples}
        ms = [v / 1e6 for v in samples]
        return {"unit": "ms", "median_ms": statistics.median(ms), "mean_ms": statistics.fmean(ms),
                "std_ms": statistics.pstdev(ms), "min_ms": min(ms), "max_ms": max(ms), "repeat": repeat,
                "warmup": warmup, "samples_ms": ms}

    def profile(self, *inputs) -> dict:
        """One profiled run: per-kernel rows sorted by cost, and the run's total (instruction counts under
        an instruction-counting emulator: keys *_instructions, else *_ms)."""
        text = self._timed(inputs, ["-p"])
        run = _PROFILE_RUN.search(text)
        if run is None:
            raise DeviceError(f"{self.device.board.name}: no profile in the runner's answer:\n{tail(text)}")
        counts = self.unit == "instructions"
        per_ns = getattr(self.device, "timed_per_ns", 1.0)
        key, scale = ("instructions", per_ns) if counts else ("ms", 1e-6)
        rows = []
        for calls, total, kernel, node in _PROFILE_ROW.findall(text):
            value = round(int(total) * scale) if counts else int(total) * scale
            rows.append({"kernel": kernel, "node": node, "calls": int(calls), f"total_{key}": value,
                         f"mean_{key}": value / max(int(calls), 1)})
        kernels = sum(r[f"total_{key}"] for r in rows)
        for r in rows:
            r["share"] = r[f"total_{key}"] / kernels if kernels else 0.0
        rows.sort(key=lambda r: -r[f"total_{key}"])
        run_value = round(int(run.group(1)) * scale) if counts else int(run.group(1)) * scale
        return {"unit": key, f"run_{key}": run_value, f"kernels_{key}": kernels, "rows": rows}

    def workspace_bytes(self, **sizes) -> int:
        proc = self._call(["-w", *map(str, size_values(self.signature, sizes))])
        self._check(proc)
        match = re.search(r"RXE_WORKSPACE (\d+)", proc.stdout + proc.stderr)
        if not match:
            raise DeviceError(f"{self.device.board.name}: no workspace size in the runner's answer")
        return int(match.group(1))

    def close(self) -> None:
        """Nothing to release: the runner starts and ends with each call."""

    def _check(self, proc: subprocess.CompletedProcess) -> None:
        text = proc.stdout + proc.stderr
        if proc.returncode == 0:
            return
        match = _ERROR.search(text)
        if proc.returncode == 3 and match:
            raise RuntimeCheckError(status_code(match.group(1)), match.group(2).strip())
        if proc.returncode < 0 or proc.returncode > 128:
            signum = -proc.returncode if proc.returncode < 0 else proc.returncode - 128
            try:
                name = signal.Signals(signum).name
            except ValueError:
                name = f"signal {signum}"
            raise DeviceError(f"{self.device.board.name}: the model crashed with {name}:\n{tail(text)}")
        raise DeviceError(f"{self.device.board.name}: the runner failed (exit {proc.returncode}):\n{tail(text)}")


class DeviceSession(Device):
    """What every remote session shares: it closes the servers it started,
    and it loads an artifact over RPC when the artifact has a server and the
    session can start one (`spawn`), else through the runner on tensor files.
    Subclasses provide `board`, `stage`, `spawn` and the runner's file calls."""

    board: Board
    rpc = True

    def load(self, artifact, function: str = "main", threads: int | None = None) -> LoadedModel:
        """The artifact's function on this board; `threads` sets the size of
        the runtime's thread pool (default: the server's, 1)."""
        if artifact.board != self.board.name:
            raise RelaxEdgeError(f"artifact built for board {artifact.board}, not {self.board.name}")
        args = thread_args(threads)
        if self.rpc and artifact.server is not None and Path(artifact.server).exists():
            server = self.stage(artifact.server)
            return self.track(RpcModule(lambda: self.spawn(server, args), artifact, self.board.timeout_s, function))
        if artifact.runner is None or not Path(artifact.runner).exists():
            raise RelaxEdgeError(f"{artifact.out_dir}: the artifact has no runner executable; rebuild it")
        return self.track(RunnerModule(self, artifact, function))
