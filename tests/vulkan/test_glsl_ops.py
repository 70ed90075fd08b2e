"""The GLSL emitter over the operator matrix: every legalized case emits a
compute shader that glslc compiles and spirv-val accepts for Vulkan 1.1, or
is refused with the named reason listed here. test_glsl_run.py runs a
selection of them through the Vulkan runtime."""

import collections

import pytest

from relax_edge.codegen.vulkan import GlslUnsupported, compile_spirv, emit_glsl
from tests.vulkan.glsl_cases import CASES, SHAPES, programs

pytestmark = pytest.mark.skipif(not __import__("shutil").which("glslc"), reason="glslc is not installed")

# case id -> the reasons its programs are refused (any shape); every other case must emit and validate
REFUSED = {
    # int64 results of data arithmetic that may leave the device's int64 range [-2^30, 2^30)
    **{n: {"int64 store may exceed 2^30"} for n in ("mod_int_fmod", "bit_shift_right_int64", "bitwise_xor_int64")},
    # argmax / argmin compare int64 indices through data-dependent selects the interval proof does not bound
    **{n: {"int64 arithmetic on data"} for n in ("argmax_first", "argmax_last", "argmin_first", "argmin_last_float")},
    # integer Pow goes through float64 pow (GLSL has double arithmetic, not double pow); the integer mean sums
    # in an int64 local
    "power_int": {"intrinsic pow on float64"}, "reduce_mean_int_truncates": {"int64 local"},
}
# resize: every mode computes int64 coordinates from data (float64 ones floored) that the interval proof does
# not bound
REFUSED.update({c[0]: {"int64 arithmetic on data"} for c in CASES
                if c[0].startswith(("nearest_", "linear_", "cubic_"))})


def emitted(case, shape):
    """[(program, glsl, record)] and {reason} of the case's programs at `shape`."""
    out, reasons = [], set()
    for p in programs(case, shape):
        try:
            out.append((p, *emit_glsl(p)))
        except GlslUnsupported as e:
            reasons.add(e.reason)
    return out, reasons


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_operator_emits_valid_spirv(case, tmp_path):
    for shape in SHAPES:
        kernels, reasons = emitted(case, shape)
        assert reasons <= REFUSED.get(case[0], set()), f"{shape}: refused for {reasons}"
        for p, glsl, record in kernels:
            spirv = compile_spirv(glsl, tmp_path, f"{p.name}_{shape}")
            assert len(spirv) > 20 and len(spirv) % 4 == 0
            assert record.num_buffers == len(p.params) + record.status   # the asserts' status block
            assert record.push_words == 2 + record.num_buffers + len(p.size_params)
    if case[0] in REFUSED:   # the listed refusal still happens (an entry here is not a stale pass)
        assert any(emitted(case, shape)[1] for shape in SHAPES), f"{case[0]} is no longer refused: drop it"


def test_operator_matrix_counts(capsys):
    """The counts over every case and shape: N emitted (validated by the test above), M refused by reason."""
    ok, refused = 0, collections.Counter()
    for case in CASES:
        for shape in SHAPES:
            kernels, reasons = emitted(case, shape)
            ok += len(kernels)
            refused.update(reasons)
    with capsys.disabled():
        print(f"\nGLSL operator matrix: {len(CASES)} cases x {len(SHAPES)} shapes: {ok} kernels emitted; refused: "
              + ", ".join(f"{r} x{k}" for r, k in refused.most_common()))
    assert ok > 250
    assert set(refused) <= set().union(*REFUSED.values())
