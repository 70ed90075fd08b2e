"""runtime_c/src/half.c, the float16 / bfloat16 conversions every compiled
kernel uses (C and LLVM): widening every one of the 65536 bit patterns, and
narrowing special values, the float16 overflow, subnormal and rounding
boundaries and random floats, against numpy's float16 cast and ml_dtypes'
bfloat16 (round to nearest even; NaN stays NaN)."""

import shutil
import subprocess

import numpy as np
import pytest

from relax_edge.toolchain import RUNTIME_DIR

DRIVER = r"""
#include <stdio.h>
#include <string.h>
#include "relax_edge/kernel.h"
int main(void) {
  unsigned i, u;
  float f;
  for (i = 0; i < 65536; ++i) { f = rxe_half_widen((uint16_t)i); memcpy(&u, &f, 4); printf("%u\n", u); }
  for (i = 0; i < 65536; ++i) { f = rxe_bfloat_widen((uint16_t)i); memcpy(&u, &f, 4); printf("%u\n", u); }
  while (scanf("%u", &u) == 1) { memcpy(&f, &u, 4); printf("%u %u\n", rxe_half_narrow(f), rxe_bfloat_narrow(f)); }
  return 0;
}
"""

SPECIAL = [0, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000, 0x7F800001, 0xFFC00001,   # zeros, infs, NaNs
           0x477FE000, 0x477FEFFF, 0x477FF000, 0x477FF001, 0x7F7FFFFF,                   # float16 max, overflow
           0x38800000, 0x387FFFFF, 0x33000000, 0x33000001, 0x32FFFFFF, 0x337FFFFF, 0x00000001,  # subnormals
           0x3F808000, 0x3F818000, 0x3F801000, 0x3F803000]                                # ties


@pytest.fixture(scope="module")
def conversions(tmp_path_factory):
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler")
    out = tmp_path_factory.mktemp("half")
    (out / "driver.c").write_text(DRIVER)
    exe = out / "driver"
    subprocess.run([cc, "-O2", "-std=c99", "-Wall", "-Wextra", "-Werror", f"-I{RUNTIME_DIR / 'include'}",
                    str(out / "driver.c"), str(RUNTIME_DIR / "src" / "half.c"), "-o", str(exe)], check=True)
    rng = np.random.default_rng(0)
    bits = np.concatenate([np.array(SPECIAL, np.uint32),
                           rng.integers(0, 2 ** 32, 20000, dtype=np.uint64).astype(np.uint32),
                           rng.integers(0x30000000, 0x48000000, 20000).astype(np.uint32),   # float16's range
                           np.arange(0x33000000, 0x38800000, 4099, dtype=np.uint32)])     # its subnormals
    text = subprocess.run([str(exe)], input="\n".join(map(str, bits.tolist())), capture_output=True, text=True,
                          check=True).stdout.split()
    widened = np.array(text[:2 * 65536], np.uint64).astype(np.uint32)
    narrowed = np.array(text[2 * 65536:], np.uint64).astype(np.uint16).reshape(-1, 2)
    return bits.view(np.float32), widened[:65536], widened[65536:], narrowed[:, 0], narrowed[:, 1]


def _same_floats(actual, expected):
    nan = np.isnan(expected)
    np.testing.assert_array_equal(np.isnan(actual), nan)
    np.testing.assert_array_equal(actual[~nan], expected[~nan])


def test_half_widen_every_pattern(conversions):
    _, half, _, _, _ = conversions
    _same_floats(half.view(np.float32), np.arange(65536, dtype=np.uint16).view(np.float16).astype(np.float32))


def test_half_narrow_rounds_as_numpy(conversions):
    floats, _, _, half, _ = conversions
    with np.errstate(over="ignore"):
        expected = floats.astype(np.float16)
    _same_floats(half.view(np.float16), expected)


def test_bfloat_widen_and_narrow_as_ml_dtypes(conversions):
    ml_dtypes = pytest.importorskip("ml_dtypes")
    floats, _, bfloat, _, narrowed = conversions
    every = np.arange(65536, dtype=np.uint16)
    _same_floats(bfloat.view(np.float32), every.view(ml_dtypes.bfloat16).astype(np.float32))
    with np.errstate(invalid="ignore"):
        expected = floats.astype(ml_dtypes.bfloat16)
    _same_floats(narrowed.view(ml_dtypes.bfloat16).astype(np.float32), expected.astype(np.float32))
    nan = np.isnan(floats)
    np.testing.assert_array_equal(narrowed[~nan], expected.view(np.uint16)[~nan])   # bits, -0 included
