"""The Python API checks its own arguments before a device sees them."""

import numpy as np
import pytest

import relax_edge as rxe
from relax_edge.errors import RelaxEdgeError
from tests.models import build_mlp, mlp_weights


@pytest.fixture(scope="module")
def mlp(tmp_path_factory):
    return rxe.build(build_mlp(mlp_weights()), board="host", out_dir=tmp_path_factory.mktemp("mlp"), name="mlp")


@pytest.mark.parametrize("kwargs, message", [
    ({"repeat": 0}, r"repeat must be an integer in \[1, 100000\], got 0"),
    ({"repeat": 100001}, r"repeat must be an integer in \[1, 100000\], got 100001"),
    ({"warmup": -1}, r"warmup must be an integer in \[0, 100000\], got -1"),
    ({"repeat": 2.5}, r"repeat must be an integer .* got 2.5"),
    ({"min_repeat_ms": -5}, r"min_repeat_ms must be an integer in \[0, 3600000\], got -5"),
])
def test_benchmark_arguments_are_checked_before_the_device(mlp, kwargs, message):
    x = np.zeros((2, 784), np.float32)
    with rxe.connect("host") as dev:
        m = dev.load(mlp)
        with pytest.raises(RelaxEdgeError, match=message):
            m.benchmark(x, **kwargs)
        assert m.benchmark(x, warmup=0, repeat=2)["repeat"] == 2   # the session is still usable


def test_sanitized_artifact_runs_through_its_sanitized_server(tmp_path):
    mod = build_mlp(mlp_weights())
    art = rxe.build(mod, board="host", out_dir=tmp_path / "san", name="mlp", sanitize=True)
    assert art.shared_library is None or not art.shared_library.exists()
    x = np.random.default_rng(1).standard_normal((3, 784)).astype(np.float32)
    with rxe.connect("host") as dev:
        m = dev.load(art)
        (y,) = m.run(x)
        np.testing.assert_allclose(y, rxe.interpret(mod, x), rtol=1e-4, atol=1e-6)
        with pytest.raises(rxe.RuntimeCheckError, match="RXE_ERR_SHAPE"):
            m.run(np.zeros((3, 783), np.float32))
        assert m.benchmark(x, warmup=0, repeat=2)["repeat"] == 2
