"""The math of the elementwise operators without libm: each trigonometric
and hyperbolic intrinsic and fmod compiled for the Cortex-M4F board
(RXE_NO_LIBM: the C backend's kernel.h macros and the LLVM backend's
FREESTANDING_MATH both call runtime_c/src/math.c's rxe_* functions), run
under qemu-system-arm, against the numpy reference."""

import pytest

from tests.legalize import elementwise_cases as cases
from tests.legalize.harness import check_compiled

BOARD = "qemu-cortex-m4"
SIZES = [{"n": 1, "m": 1}, {"n": 3, "m": 2}]
BY_NAME = {c[0]: c for c in cases.EXTRA}
F = "float32"
DIRECT = [(name, [("n", 5)], [F], (lambda n: lambda x: cases._call(n, x))(name))
          for name in ("sin", "cos", "atan", "sinh", "cosh", "asinh")]
FREESTANDING = DIRECT + [BY_NAME[n] for n in ("tan", "asin", "acos", "atanh", "acosh", "mod_float_fmod",
                                               "mod_float_floor")]


@pytest.mark.parametrize("backend", ["c", "llvm"])
@pytest.mark.parametrize("case", FREESTANDING, ids=[c[0] for c in FREESTANDING])
def test_math_without_libm(case, backend, tmp_path):
    _, templates, dtypes, build = case
    check_compiled(templates, dtypes, build, SIZES, tmp_path, rtol=2e-5, atol=1e-5, board=BOARD, backend=backend)
