"""rxe.build(..., profile=False): no profiled copy of the model (half the compiler work of a build); the
artifact runs, benchmarks and generates as usual, and a profile is refused naming the profiler."""

import numpy as np
import pytest

import relax_edge as rxe
from relax_edge import op
from relax_edge.deploy import RuntimeCheckError
from relax_edge.ir import Builder, TensorType, Var
from relax_edge.target import load_board, toolchain_problems

W = np.random.default_rng(0).standard_normal((8, 4)).astype(np.float32)
X = np.random.default_rng(1).standard_normal((3, 8)).astype(np.float32)


def _module():
    x = Var("x", TensorType((3, 8), "float32"))
    b = Builder()
    with b.function("main", [x]):
        b.ret(b.emit(op.relu(op.matmul(x, W))))
    return b.get()


@pytest.mark.parametrize("backend", ["c", "llvm"])
def test_host_build_without_the_profiler(tmp_path, backend):
    plain = rxe.build(_module(), board="host", backend=backend, out_dir=tmp_path / "plain", profile=False)
    full = rxe.build(_module(), board="host", backend=backend, out_dir=tmp_path / "full")
    with rxe.connect("host") as dev:
        m = dev.load(plain)
        np.testing.assert_allclose(m.run(X)[0], np.maximum(X @ W, 0), rtol=1e-5, atol=1e-6)
        assert m.benchmark(X, warmup=0, repeat=2)["repeat"] == 2
        with pytest.raises(RuntimeCheckError, match="without the profiler"):
            m.profile(X)
        assert dev.load(full).profile(X)["rows"]   # the default build keeps it
    assert rxe.build(_module(), board="host", backend=backend, out_dir=tmp_path / "plain").cached is False


@pytest.mark.emu
@pytest.mark.skipif(bool(toolchain_problems(load_board("qemu-cortex-m4"))), reason="no Cortex-M4 toolchain or QEMU")
def test_bare_metal_runner_without_the_profiler(tmp_path):
    art = rxe.build(_module(), board="qemu-cortex-m4", out_dir=tmp_path / "m4", profile=False)
    with rxe.connect("qemu-cortex-m4") as dev:
        m = dev.load(art)
        assert m.benchmark(X, warmup=0, repeat=1)["unit"] == "instructions"
        with pytest.raises(RuntimeCheckError, match="without the profiler"):
            m.profile(X)
