"""Whole models built by rxe.build(..., sanitize=True): the runner and the RPC
server with AddressSanitizer + UndefinedBehaviorSanitizer on the runtime, the
library kernels and (C backend) the model. A BERT encoder with a symbolic
seq, C and LLVM backends, runs on tensor files at two sequence lengths
against ONNX Runtime; the artifact's library is shown to be instrumented by
an out-of-bounds read that ASan catches inside a library kernel; the runner's
allocation failures are clean errors."""

import struct

import numpy as np
import onnxruntime as ort
import pytest

import relax_edge as rxe
from relax_edge.build import BuildError
from relax_edge.deploy import tensorfile
from relax_edge.deploy.rpc import ProcessStream, RpcModule
from tests.onnx_models import get_model
from tests.runtime.test_c_runtime import archive_symbols, out_of_bounds_probe, run

RTOL, ATOL = 1e-4, 1e-5
SANITIZER_ENV = {"ASAN_OPTIONS": "detect_leaks=1:abort_on_error=0", "UBSAN_OPTIONS": "print_stacktrace=1"}
RUNTIME_MEMBERS = ("rxe_module.o", "rxe_check.o", "rxe_threads.o", "rxe_gemm.o", "rxe_conv.o")


def sanitizer_free(stderr: str) -> bool:
    return "AddressSanitizer" not in stderr and "LeakSanitizer" not in stderr and "runtime error" not in stderr


@pytest.fixture(scope="module", params=["c", "llvm"])
def bert(request, tmp_path_factory):
    path, spec = get_model("bert")
    mod = rxe.from_onnx(str(path), dim_bounds={"seq": 64})
    out = tmp_path_factory.mktemp(f"bert_{request.param}_asan")
    art = rxe.build(mod, board="host", backend=request.param, out_dir=out, name="bert", sanitize=True, profile=False)
    return path, spec, art


@pytest.mark.slow
def test_sanitized_runner_matches_onnxruntime_at_two_lengths(bert, tmp_path):
    path, spec, art = bert
    assert art.sanitize and art.shared_library is None
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    lengths = spec["dynamic"]["seq"]
    for seed, seq in enumerate(lengths):
        feeds = spec["make_inputs"](seed=seed, seq=seq)
        feeds["attention_mask"][0, -2:] = 0   # padded positions take the masked path
        (tmp_path / "in.rxt").write_bytes(tensorfile.encode(list(feeds.values())))
        proc = run([str(art.runner), str(tmp_path / "in.rxt"), str(tmp_path / "out.rxt")], env=SANITIZER_ENV)
        assert proc.returncode == 0 and "RXE_OK" in proc.stdout, proc.stderr[-3000:]
        assert sanitizer_free(proc.stderr), proc.stderr[-3000:]
        outs = tensorfile.decode((tmp_path / "out.rxt").read_bytes())
        expected = session.run(None, feeds)
        assert [o.shape for o in outs] == [e.shape for e in expected] == [(1, seq, 64), (1, 64)]
        for ours, ref in zip(outs, expected):
            np.testing.assert_allclose(ours, ref, rtol=RTOL, atol=ATOL)
    bad = spec["make_inputs"](seed=0, seq=65)   # past the bound
    (tmp_path / "bad.rxt").write_bytes(tensorfile.encode(list(bad.values())))
    proc = run([str(art.runner), str(tmp_path / "bad.rxt"), str(tmp_path / "out.rxt")], env=SANITIZER_ENV)
    assert proc.returncode == 3 and "RXE_ERROR RXE_ERR_BOUND" in proc.stderr, proc.stderr[-3000:]
    assert sanitizer_free(proc.stderr)


@pytest.mark.slow
def test_sanitized_server_answers_at_two_lengths(bert):
    path, spec, art = bert
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    streams = []

    def spawn():
        streams.append(ProcessStream([str(art.server)], what="sanitized server"))
        return streams[-1]

    module = RpcModule(spawn, art, 120.0)
    for seed, seq in enumerate(reversed(spec["dynamic"]["seq"])):   # long first: buffers shrink, then regrow
        feeds = spec["make_inputs"](seed=seed, seq=seq)
        for ours, ref in zip(module.run(*feeds.values()), session.run(None, feeds)):
            np.testing.assert_allclose(ours, ref, rtol=RTOL, atol=ATOL)
    module.close()
    (stream,) = streams
    assert stream.proc.wait(timeout=30) == 0
    stream._drain.join(timeout=5)
    assert sanitizer_free(stream.stderr.decode(errors="replace")), stream.stderr.decode(errors="replace")[-3000:]


@pytest.mark.slow
def test_sanitized_artifact_library_is_instrumented(bert, tmp_path):
    _, _, art = bert
    members = archive_symbols(art.static_library)
    for member in RUNTIME_MEMBERS:
        assert any(s.startswith("__asan_") for s in members[member]), member
    model = [m for m in members if m.startswith("bert_")]
    instrumented = {m for m in model if any(s.startswith("__asan_") for s in members[m])}
    if art.backend == "c":
        assert "bert_c.o" in instrumented
    else:   # kernels and host functions from LLVM are not instrumented
        assert {"bert_kernels.o", "bert_host.o"} <= set(model)
        assert not {"bert_kernels.o", "bert_host.o"} & instrumented
    probe = out_of_bounds_probe(art.static_library, tmp_path / "probe")
    assert probe.returncode != 0
    assert "ERROR: AddressSanitizer: heap-buffer-overflow" in probe.stderr, probe.stderr


@pytest.mark.slow
def test_sanitized_runner_reports_allocation_failures(bert, tmp_path):
    _, _, art = bert
    huge = b"RXT1" + struct.pack("<I", 2)
    huge += struct.pack("<BBH", 0, 64, 2) + struct.pack("<2q", 1, 1 << 40)   # 8 TiB of int64
    (tmp_path / "huge.rxt").write_bytes(huge)
    env = {**SANITIZER_ENV, "ASAN_OPTIONS": SANITIZER_ENV["ASAN_OPTIONS"] + ":allocator_may_return_null=1"}
    proc = run([str(art.runner), str(tmp_path / "huge.rxt"), str(tmp_path / "out.rxt")], env=env)
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert f"out of memory: {8 << 40} bytes for input 0" in proc.stderr
    assert "AddressSanitizer" not in proc.stderr.replace("WARNING: AddressSanitizer failed to allocate", "")
    (tmp_path / "overflow.rxt").write_bytes(b"RXT1" + struct.pack("<I", 1) + struct.pack("<BBH", 0, 64, 2)
                                            + struct.pack("<2q", 1 << 40, 1 << 40))
    proc = run([str(art.runner), str(tmp_path / "overflow.rxt"), str(tmp_path / "out.rxt")], env=env)
    assert proc.returncode == 2 and "input 0: the shape is negative or too large" in proc.stderr, proc.stderr
    assert sanitizer_free(proc.stderr)


@pytest.mark.emu
def test_sanitize_is_refused_for_static_and_bare_metal_boards(tmp_path):
    from tests.models import build_mlp, mlp_weights
    mod = build_mlp(mlp_weights())
    for board, why in (("qemu-aarch64", "links with -static"), ("qemu-cortex-m4", "has no C library")):
        expected = f"sanitize=True needs a Linux board that links dynamically; {board} {why}"
        with pytest.raises(BuildError, match=expected):
            rxe.build(mod, board=board, out_dir=tmp_path / board, sanitize=True, profile=False)
