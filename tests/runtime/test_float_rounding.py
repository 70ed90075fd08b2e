"""kernel.h's single-precision floor / ceil / round (halves to even), the freestanding builds' RXE_FLOORF,
RXE_CEILF and RXE_ROUNDF: against numpy's floor, ceil and rint (the values; a zero's sign as documented:
+0.0 where the double functions give it) and bit for bit against the double-precision rxe_floor /
rxe_ceil / rxe_round they replace (NaN for NaN), over edge values and random bit patterns."""

import subprocess

import numpy as np

from relax_edge.resources import runtime_dir

RUNTIME = runtime_dir()
DRIVER = r"""
#include <stdio.h>
#include <string.h>
#include "relax_edge/kernel.h"
int main(int argc, char** argv) {
  FILE* in = fopen(argv[1], "rb");
  FILE* out = fopen(argv[2], "wb");
  float x, r[6];
  while (fread(&x, 4, 1, in) == 1) {
    r[0] = rxe_f32_floor(x);
    r[1] = rxe_f32_ceil(x);
    r[2] = rxe_f32_round(x);
    r[3] = (float)rxe_floor((double)x);
    r[4] = (float)rxe_ceil((double)x);
    r[5] = (float)rxe_round((double)x);
    fwrite(r, 4, 6, out);
  }
  fclose(in);
  return fclose(out) != 0;
}
"""


def test_single_precision_rounding(tmp_path):
    src = tmp_path / "round.c"
    src.write_text(DRIVER)
    exe = tmp_path / "round"
    subprocess.run(["cc", "-std=c99", "-O2", "-DRXE_NO_LIBM", f"-I{RUNTIME / 'include'}", str(src),
                    str(RUNTIME / "src" / "math.c"), "-o", str(exe)], check=True, capture_output=True)
    rng = np.random.default_rng(0)
    edges = [0.0, -0.0, 0.5, -0.5, 1.5, -1.5, 2.5, -2.5, 0.49999997, -0.49999997, 8388607.5, -8388607.5,
             8388608.0, -8388608.0, 16777217.0, 3e38, -3e38, np.inf, -np.inf, np.nan, 1e-45, -1e-45, 0.999999]
    halves = np.arange(-1000, 1000, dtype=np.float32) + np.float32(0.5)
    bits = rng.integers(0, 2**32, 200_000, dtype=np.uint64).astype(np.uint32).view(np.float32)
    small = (rng.standard_normal(100_000) * 1000).astype(np.float32)
    x = np.concatenate([np.array(edges, np.float32), halves, bits, small])
    (tmp_path / "in.bin").write_bytes(x.tobytes())
    subprocess.run([str(exe), str(tmp_path / "in.bin"), str(tmp_path / "out.bin")], check=True)
    r = np.frombuffer((tmp_path / "out.bin").read_bytes(), np.float32).reshape(-1, 6)
    # bit for bit as the double-precision functions they replace; a NaN stays NaN (the double round trip
    # quiets a signalling NaN's payload, the single-precision functions return it as it is)
    nan = np.isnan(r[:, :3])
    assert np.array_equal(nan, np.isnan(r[:, 3:])) and np.isnan(x).sum() * 3 == nan.sum()
    assert np.array_equal(r[:, :3].view(np.uint32)[~nan], r[:, 3:].view(np.uint32)[~nan])
    with np.errstate(invalid="ignore"):
        for got, want in ((r[:, 0], np.floor(x)), (r[:, 1], np.ceil(x)), (r[:, 2], np.rint(x))):
            assert np.array_equal(got, want, equal_nan=True)   # == treats -0.0 and +0.0 alike
