"""The C runtime's sampler (runtime_c/src/sample.c, relax_edge/generate.h)
against transformers' warpers: rxe_sampling_probs is the distribution that
TemperatureLogitsWarper, TopKLogitsWarper and TopPLogitsWarper leave (in
that order, as generate applies them), renormalized; rxe_sampling_draw draws from it
with a seeded SplitMix64, the same tokens for the same seed, at frequencies
within a chi-square bound (fixed seeds: no flakes), and bit-identical on
aarch64, armv7 and riscv64 under qemu-user and with clang (which may fuse
multiply-adds) on the host. The generation loop itself is tested in C
(runtime_c/tests/test_generate.c, through ctest in test_c_runtime.py)."""

import ctypes
import shutil
import subprocess

import numpy as np
import pytest
import torch
from transformers.generation.logits_process import TemperatureLogitsWarper, TopKLogitsWarper, TopPLogitsWarper

from relax_edge.toolchain import RUNTIME_DIR

SOURCES = [RUNTIME_DIR / "src" / name for name in ("sample.c", "status.c")]
INCLUDE = f"-I{RUNTIME_DIR / 'include'}"
RXE_ERR_BOUND, RXE_ERR_WORKSPACE, RXE_ERR_INTERNAL = 5, 6, 10


class Sampling(ctypes.Structure):
    _fields_ = [("temperature", ctypes.c_float), ("top_k", ctypes.c_int32), ("top_p", ctypes.c_float),
                ("seed", ctypes.c_uint64)]


class Error(ctypes.Structure):
    _fields_ = [("status", ctypes.c_int), ("message", ctypes.c_char * 256)]


class Rng(ctypes.Structure):
    _fields_ = [("state", ctypes.c_uint64)]


def run(cmd):
    return subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=300)


class Sampler:
    """The sampler built into a shared library with the host compiler."""

    def __init__(self, path):
        built = run(["cc", "-std=c99", "-O2", "-shared", "-fPIC", "-Wall", "-Wextra", "-Werror", INCLUDE, *SOURCES,
                     "-o", path])
        assert built.returncode == 0, built.stderr
        self.lib = ctypes.CDLL(str(path))
        self.lib.rxe_sampling_scratch_bytes.restype = ctypes.c_uint64
        self.lib.rxe_sampling_scratch_bytes.argtypes = [ctypes.c_int64]
        self.lib.rxe_rng_next.restype = ctypes.c_uint64
        ptr = ctypes.c_void_p
        self.lib.rxe_sampling_probs.argtypes = [ptr, ctypes.c_int64, ptr, ptr, ctypes.c_uint64, ptr, ptr]
        self.lib.rxe_sampling_draw.argtypes = [ptr, ctypes.c_int64, ptr, ptr, ptr, ctypes.c_uint64, ptr, ptr]

    def scratch(self, vocab):
        """A 64-byte aligned scratch block: (keep-alive array, address, bytes)."""
        size = self.lib.rxe_sampling_scratch_bytes(vocab)
        raw = np.zeros(size + 64, np.uint8)
        return raw, raw.ctypes.data + (-raw.ctypes.data) % 64, size

    def probs(self, logits, temperature=1.0, top_k=0, top_p=1.0):
        """(status, message, probabilities)."""
        logits = np.ascontiguousarray(logits, np.float32)
        out = np.zeros(logits.size, np.float32)
        raw, scratch, size = self.scratch(logits.size)
        cfg, err = Sampling(temperature, top_k, top_p, 0), Error()
        st = self.lib.rxe_sampling_probs(logits.ctypes.data, logits.size, ctypes.byref(cfg), scratch, size,
                                         out.ctypes.data, ctypes.byref(err))
        return st, err.message.decode(), out

    def draws(self, logits, n, seed, temperature=1.0, top_k=0, top_p=1.0):
        logits = np.ascontiguousarray(logits, np.float32)
        raw, scratch, size = self.scratch(logits.size)
        cfg, err, rng, token = Sampling(temperature, top_k, top_p, seed), Error(), Rng(), ctypes.c_int64()
        self.lib.rxe_rng_seed(ctypes.byref(rng), ctypes.c_uint64(seed))
        tokens = []
        for _ in range(n):
            st = self.lib.rxe_sampling_draw(logits.ctypes.data, logits.size, ctypes.byref(cfg), ctypes.byref(rng),
                                            scratch, size, ctypes.byref(token), ctypes.byref(err))
            assert st == 0, err.message
            tokens.append(token.value)
        return np.array(tokens)


@pytest.fixture(scope="module")
def sampler(tmp_path_factory):
    return Sampler(tmp_path_factory.mktemp("sampler") / "libsample.so")


def reference_probs(logits, temperature, top_k, top_p):
    """transformers' warpers in generate's order, then softmax."""
    scores = torch.tensor(logits, dtype=torch.float32)[None]
    scores = TemperatureLogitsWarper(temperature)(None, scores)
    if top_k > 0:
        scores = TopKLogitsWarper(top_k)(None, scores)
    if top_p < 1.0:
        scores = TopPLogitsWarper(top_p)(None, scores)
    return torch.softmax(scores, dim=-1)[0].numpy()


def top_p_margin(logits, temperature, top_k, top_p):
    """How far top_p is from every cumulative probability (float64) where the cut could fall."""
    if top_p >= 1.0:
        return 1.0
    s = np.asarray(logits, np.float64) / temperature
    if top_k > 0:
        s = np.where(s >= np.sort(s)[::-1][min(top_k, s.size) - 1], s, -np.inf)
    p = np.sort(np.exp(s - s.max()) / np.exp(s - s.max()).sum())[::-1]
    before = np.cumsum(p)[:-1]  # what the tokens before rank 1, 2, ... hold (rank 0 is always kept)
    return float(np.min(np.abs(before - top_p))) if before.size else 1.0


SETTINGS = [(t, k, p) for t in (0.5, 1.0, 1.7) for k in (0, 1, 3, 20, 10_000) for p in (1.0, 0.95, 0.6, 0.2, 1e-6, 0.0)]


@pytest.mark.parametrize("vocab", [1, 2, 9, 300])
def test_probs_equal_transformers_warpers(sampler, vocab):
    """Random logits at many (temperature, top_k, top_p): the same tokens
    kept, the same renormalized probabilities. A top_p within 1e-4 of a
    cumulative probability (where float rounding decides) is avoided by
    drawing the next logits."""
    checked = 0
    for n, (temperature, top_k, top_p) in enumerate(SETTINGS):
        rng = np.random.default_rng(1000 * vocab + n)
        logits = (rng.standard_normal(vocab) * 3).astype(np.float32)
        while top_p_margin(logits, temperature, top_k, top_p) < 1e-4:
            logits = (rng.standard_normal(vocab) * 3).astype(np.float32)
        st, msg, ours = sampler.probs(logits, temperature, top_k, top_p)
        assert st == 0, msg
        ref = reference_probs(logits, temperature, top_k, top_p)
        assert np.array_equal(ours > 0, ref > 0), (temperature, top_k, top_p)
        np.testing.assert_allclose(ours, ref, rtol=2e-5, atol=1e-7, err_msg=str((temperature, top_k, top_p)))
        checked += 1
    assert checked == len(SETTINGS)


def float64_probs(logits, temperature, top_k, top_p):
    """The three warpers written in float64 from transformers' definitions
    (the comparison at a large vocabulary, where torch's float32 cumsum
    itself drifts by more than the gaps between cumulative sums)."""
    s = np.asarray(logits, np.float64) / np.float32(temperature)
    if top_k > 0:
        s = np.where(s >= np.sort(s)[::-1][min(top_k, s.size) - 1], s, -np.inf)
    p = np.exp(s - s.max())
    p /= p.sum()
    if top_p < 1.0:
        order = np.lexsort((-np.arange(s.size), -s))  # descending, the higher id first among equal ones
        before = np.concatenate([[0.0], np.cumsum(p[order])[:-1]])
        keep = before < top_p
        keep[0] = True
        p[order[~keep]] = 0.0
        p /= p.sum()
    return p


@pytest.mark.parametrize("temperature,top_k,top_p", [(0.8, 0, 0.9), (1.0, 50, 0.95), (0.7, 0, 0.5), (1.2, 1000, 1.0)])
def test_large_vocabulary(sampler, temperature, top_k, top_p):
    """A Qwen2-sized vocabulary (151,936): top-k by one pass, top-p over the
    octaves that can hold its cut; the same kept tokens as the float64
    definition (top_p kept 1e-6 away from every cumulative sum)."""
    rng = np.random.default_rng(int(temperature * 10) + top_k)
    logits = (rng.standard_normal(151_936) * 2.5).astype(np.float32)
    while top_p_margin(logits, temperature, top_k, top_p) < 1e-6:
        logits = (rng.standard_normal(151_936) * 2.5).astype(np.float32)
    st, msg, ours = sampler.probs(logits, temperature, top_k, top_p)
    assert st == 0, msg
    ref = float64_probs(logits, temperature, top_k, top_p)
    assert np.array_equal(ours > 0, ref > 0) and (ours > 0).sum() > 40
    np.testing.assert_allclose(ours, ref, rtol=1e-4, atol=1e-12)
    tokens = sampler.draws(logits, 50, 11, temperature, top_k, top_p)
    assert (ref[tokens] > 0).all()


@pytest.mark.parametrize("top_k,top_p", [(1, 1.0), (2, 1.0), (5, 1.0), (0, 0.7), (0, 0.3), (4, 0.5), (0, 0.0)])
def test_ties(sampler, top_k, top_p):
    """Logits with many equal values: top-k keeps every token equal to the
    k-th; top-p keeps the same number of tokens of the same values (which of
    equal tokens at the cut transformers keeps depends on torch.sort)."""
    rng = np.random.default_rng(top_k * 100 + int(top_p * 10))
    logits = rng.integers(-3, 3, 40).astype(np.float32)
    while top_p_margin(logits, 1.0, top_k, top_p) < 1e-4:
        logits = rng.integers(-3, 3, 40).astype(np.float32)
    st, msg, ours = sampler.probs(logits, 1.0, top_k, top_p)
    assert st == 0, msg
    ref = reference_probs(logits, 1.0, top_k, top_p)
    if top_p >= 1.0:
        assert np.array_equal(ours > 0, ref > 0)
        assert (ours > 0).sum() >= top_k
        np.testing.assert_allclose(ours, ref, rtol=2e-5, atol=1e-7)
    else:
        assert np.array_equal(np.sort(logits[ours > 0]), np.sort(logits[ref > 0]))
        np.testing.assert_allclose(np.sort(ours), np.sort(ref), rtol=2e-5, atol=1e-7)


def test_top_k_above_vocab_and_tiny_top_p(sampler):
    logits = np.array([0.5, 2.0, -1.0, 1.5], np.float32)
    st, _, ours = sampler.probs(logits, 1.0, 100, 1.0)
    np.testing.assert_allclose(ours, reference_probs(logits, 1.0, 100, 1.0), rtol=2e-5)
    assert (ours > 0).all()
    st, _, ours = sampler.probs(logits, 0.8, 0, 1e-9)
    assert st == 0 and ours.tolist() == [0.0, 1.0, 0.0, 0.0]
    np.testing.assert_array_equal(ours, reference_probs(logits, 0.8, 0, 1e-9))


def test_greedy_is_the_first_argmax(sampler):
    logits = np.array([1.0, 4.0, 4.0, -2.0, 4.0], np.float32)
    for temperature in (0.0, -1.0):
        st, _, ours = sampler.probs(logits, temperature, 2, 0.5)
        assert st == 0 and ours.tolist() == [0.0, 1.0, 0.0, 0.0, 0.0]
        assert sampler.draws(logits, 3, 5, temperature).tolist() == [int(np.argmax(logits))] * 3


def test_bad_logits_and_settings(sampler):
    logits = np.array([0.0, np.nan, 1.0], np.float32)
    st, msg, _ = sampler.probs(logits)
    assert (st, msg) == (RXE_ERR_INTERNAL, "sampling: the logit of token 1 is NaN")
    st, msg, _ = sampler.probs(np.full(3, -np.inf, np.float32))
    assert (st, msg) == (RXE_ERR_INTERNAL, "sampling: every logit is -inf")
    st, msg, _ = sampler.probs(np.zeros(3, np.float32), top_p=float("nan"))
    assert (st, msg) == (RXE_ERR_BOUND, "sampling: top_p must be >= 0 (not NaN)")
    st, msg, _ = sampler.probs(np.zeros(3, np.float32), temperature=float("nan"))
    assert (st, msg) == (RXE_ERR_BOUND, "sampling: temperature is NaN")
    out, err = np.zeros(3, np.float32), Error()
    logits = np.zeros(3, np.float32)
    raw, scratch, size = sampler.scratch(3)
    st = sampler.lib.rxe_sampling_probs(logits.ctypes.data, 3, ctypes.byref(Sampling(1.0, 0, 1.0, 0)), scratch,
                                        size - 1, out.ctypes.data, ctypes.byref(err))
    assert st == RXE_ERR_WORKSPACE and b"needed for vocab 3" in err.message


def splitmix64(seed, n):
    out, state, mask = [], seed, (1 << 64) - 1
    for _ in range(n):
        state = (state + 0x9E3779B97F4A7C15) & mask
        z = state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & mask
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & mask
        out.append(z ^ (z >> 31))
    return out


def test_rng_is_splitmix64(sampler):
    rng = Rng()
    sampler.lib.rxe_rng_seed(ctypes.byref(rng), ctypes.c_uint64(2**63 + 12345))
    assert [sampler.lib.rxe_rng_next(ctypes.byref(rng)) for _ in range(5)] == splitmix64(2**63 + 12345, 5)


@pytest.mark.parametrize("temperature,top_k,top_p", [(1.0, 0, 1.0), (0.7, 6, 1.0), (1.3, 0, 0.8), (0.9, 8, 0.9)])
def test_draw_frequencies(sampler, temperature, top_k, top_p):
    """20000 draws (a fixed seed) against transformers' distribution: only
    kept tokens drawn, Pearson's chi-square within mean + 6 standard
    deviations of its distribution; the same seed gives the same tokens."""
    logits = (np.random.default_rng(7).standard_normal(24) * 1.5).astype(np.float32)
    assert top_p_margin(logits, temperature, top_k, top_p) > 1e-4
    ref = reference_probs(logits, temperature, top_k, top_p).astype(np.float64)
    n = 20000
    tokens = sampler.draws(logits, n, 2024, temperature, top_k, top_p)
    counts = np.bincount(tokens, minlength=logits.size)
    assert counts[ref == 0].sum() == 0
    kept = ref > 0
    chi2 = float((((counts[kept] - n * ref[kept]) ** 2) / (n * ref[kept])).sum())
    df = int(kept.sum()) - 1
    assert df >= 1 and chi2 < df + 6 * np.sqrt(2 * df), (chi2, df)
    assert np.array_equal(sampler.draws(logits, 200, 2024, temperature, top_k, top_p), tokens[:200])
    assert not np.array_equal(sampler.draws(logits, 200, 2025, temperature, top_k, top_p), tokens[:200])


# Draws for several settings from logits made by integer arithmetic (the same floats everywhere).
DRAWS_C = r"""
#include <stdio.h>
#include "relax_edge/generate.h"

static float logits[5000];
static unsigned char scratch[3 * 20480 + 64];

int main(void) {
  const rxe_sampling_t settings[4] = {{1.0f, 0, 1.0f, 1}, {0.6f, 40, 1.0f, 2}, {1.2f, 0, 0.9f, 3}, {0.8f, 50, 0.7f, 4}};
  void* s = scratch + (64 - (unsigned long)scratch % 64) % 64;
  unsigned long long x = 99;
  int i, j;
  for (i = 0; i < 5000; ++i) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    logits[i] = (float)(long long)(x >> 40) / 1048576.0f - 8.0f;
  }
  for (j = 0; j < 4; ++j) {
    rxe_rng_t rng;
    rxe_error_t err;
    rxe_rng_seed(&rng, settings[j].seed);
    for (i = 0; i < 300; ++i) {
      int64_t token;
      if (rxe_sampling_draw(logits, 5000, &settings[j], &rng, s, sizeof(scratch) - 64, &token, &err) != RXE_OK) {
        printf("error %s\n", err.message);
        return 1;
      }
      printf("%d ", (int)token);
    }
    printf("\n");
  }
  return 0;
}
"""

TARGETS = {
    "host_clang": (["clang", "-O2", "-march=native", "-ffp-contract=on"], []),  # FMA where the CPU has it
    "aarch64": (["aarch64-linux-gnu-gcc", "-O2", "-static", "-mcpu=cortex-a72"], ["qemu-aarch64"]),
    "armv7": (["arm-linux-gnueabihf-gcc", "-O2", "-static", "-march=armv7-a", "-mfpu=neon", "-mfloat-abi=hard"],
              ["qemu-arm"]),
    "riscv64": (["riscv64-linux-gnu-gcc", "-O2", "-static", "-march=rv64gc", "-mabi=lp64d"], ["qemu-riscv64"]),
}


def draws_on(target, tmp_path):
    cc, emulator = TARGETS[target] if target in TARGETS else (["cc", "-O2"], [])
    for tool in (cc[0], *emulator):
        assert shutil.which(tool), f"{tool} is missing: scripts/setup.sh installs it"
    (tmp_path / "draws.c").write_text(DRAWS_C)
    exe = tmp_path / f"draws_{target}"
    built = run([*cc, "-std=c99", "-Wall", "-Werror", INCLUDE, tmp_path / "draws.c", *SOURCES, "-o", exe])
    assert built.returncode == 0, built.stderr
    proc = run([*emulator, exe])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


@pytest.fixture(scope="module")
def host_draws(tmp_path_factory):
    return draws_on("host", tmp_path_factory.mktemp("draws"))


@pytest.mark.emu
@pytest.mark.parametrize("target", list(TARGETS))
def test_draws_are_identical_across_targets(target, host_draws, tmp_path):
    """The same logits and seed give the same 1200 tokens on every target:
    the draw is integer arithmetic over weights from + - * / only."""
    assert len(set(host_draws.split())) > 100
    assert draws_on(target, tmp_path) == host_draws
