"""Limits the build checks before compiling: a fixed arena must fit 64-bit sizes."""

import pytest

import relax_edge as rxe
from relax_edge.build import BuildError
from relax_edge.ir import SizeVar
from tests.models import build_mlp, mlp_weights


def test_arena_beyond_64_bits_is_refused(tmp_path):
    # 784 float32 per row at n = 10**18 is about 3e21 bytes: no 64-bit size holds it
    mod = build_mlp(mlp_weights(), batch=SizeVar("n", upper=10**18))
    with pytest.raises(BuildError, match=r"function main: the memory plan needs .* bytes .* lower the bounds"):
        rxe.build(mod, board="host", out_dir=tmp_path / "huge", optimize=False, profile=False)


def test_arena_within_64_bits_builds(tmp_path):
    art = rxe.build(build_mlp(mlp_weights(), batch=SizeVar("n", upper=1000)), board="host",
                    out_dir=tmp_path / "ok", optimize=False, profile=False)
    # the inputs are the caller's; the 256-wide hidden layer alone takes 1000 * 256 float32
    assert 1000 * 256 * 4 <= art.workspace_bytes < 2**63
