"""Hand-written Vulkan shaders for the matmul library call: what
rxe_lib_matmul_f32 (the `dispatch` pass, target "vulkan") becomes on the
device.

C[b, M, N] = A[b, M, K] @ B[b, K, N] (A's batch stride a_stride, B's
b_stride, 0 for a shared 2-D B), row-major float32; the call's buffers are
(a, b, c) and its sizes (batch, m, n, k, a_stride, b_stride), the shader ABI
of kernel.py (push constants groups_x, items, off[3], size[6]; 11 words).

- `rxe_vk_matmul_tiled_f32`: one workgroup of 256 invocations per 64x64
  tile of C (and batch); the A and B tiles go through shared memory in steps
  of 16 along K, each invocation accumulates a 4x4 block of outputs in
  registers (rows ty + 16 i, columns tx + 16 j). Rows, columns and K that do
  not fill a tile are bounded explicitly (loads of zeros, no stores).
  Shared memory: 2 x 16 x 64 floats = 8 KiB.
- `rxe_vk_matmul_gemv_f32` (M = 1, e.g. a decode step): one workgroup of
  256 per 64 columns (and batch); four invocations per column split K and a
  shared-memory reduction adds their sums. Shared memory: 1 KiB.

The host picks the GEMV when m == 1 at run time. Both shaders keep their
barriers in uniform control flow: a workgroup past the last tile (the folded
grid may round up) loads and stores nothing but reaches every barrier.
Serial loops: K / 16 (tiled) and K / 4 (GEMV) iterations per invocation,
bounded by the caller against lavapipe's loop limit.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["MATMUL_SYMBOL", "TILED", "GEMV", "SHADERS", "ShaderRecord", "glsl", "items_c", "max_k"]

MATMUL_SYMBOL = "rxe_lib_matmul_f32"
TILED, GEMV = "rxe_vk_matmul_tiled_f32", "rxe_vk_matmul_gemv_f32"
THREADS = 256
TILE = 64
STEP_K = 16
GEMV_SPLIT = 4


@dataclass(frozen=True)
class ShaderRecord:
    """The fields of rxe_vk_kernel_t that emit_vulkan's kernel table reads."""
    name: str
    num_buffers: int = 3
    push_words: int = 2 + 3 + 6
    local_size_x: int = THREADS
    shared_bytes: int = 0
    flags: int = 0
    push_in_buffer: bool = False


_HEAD = """#version 450
layout(local_size_x_id = 0) in;
layout(std430, set = 0, binding = 0) readonly buffer B0 { float v[]; } b0;
layout(std430, set = 0, binding = 1) readonly buffer B1 { float v[]; } b1;
layout(std430, set = 0, binding = 2) writeonly buffer B2 { float v[]; } b2;
layout(push_constant) uniform PC { uint groups_x; uint items; uint off[3]; int size[6]; } pc;

uint workgroup_index() {
  return (gl_WorkGroupID.y + gl_WorkGroupID.z * gl_NumWorkGroups.y) * pc.groups_x + gl_WorkGroupID.x;
}
"""

_TILED = _HEAD + """
shared float As[16][64];   /* [k][row] of the A tile */
shared float Bs[16][64];   /* [k][col] of the B tile */

void main() {
  uint batch = uint(pc.size[0]), M = uint(pc.size[1]), N = uint(pc.size[2]), K = uint(pc.size[3]);
  uint tiles_m = (M + 63u) / 64u, tiles_n = (N + 63u) / 64u, per = tiles_m * tiles_n;
  uint wg = workgroup_index();
  bool live = wg < batch * per;
  uint bi = live ? wg / per : 0u, r = live ? wg % per : 0u;
  uint m0 = (r / tiles_n) * 64u, n0 = (r % tiles_n) * 64u;
  uint a0 = pc.off[0] + bi * uint(pc.size[4]), bb = pc.off[1] + bi * uint(pc.size[5]);
  uint c0 = pc.off[2] + bi * M * N;
  uint t = gl_LocalInvocationID.x, tx = t % 16u, ty = t / 16u;
  float acc[4][4];
  for (int i = 0; i < 4; ++i) for (int j = 0; j < 4; ++j) acc[i][j] = 0.0;
  for (uint k0 = 0u; k0 < K; k0 += 16u) {
    for (uint i = 0u; i < 4u; ++i) {
      uint e = t + 256u * i;
      uint row = e / 16u, kk = e % 16u;         /* A: 64 rows x 16 k */
      uint gm = m0 + row, gk = k0 + kk;
      As[kk][row] = (live && gm < M && gk < K) ? b0.v[a0 + gm * K + gk] : 0.0;
      uint kb = e / 64u, col = e % 64u;         /* B: 16 k x 64 columns */
      uint hk = k0 + kb, gn = n0 + col;
      Bs[kb][col] = (live && hk < K && gn < N) ? b1.v[bb + hk * N + gn] : 0.0;
    }
    barrier();
    for (uint kk = 0u; kk < 16u; ++kk) {
      float av[4], bv[4];
      for (uint i = 0u; i < 4u; ++i) { av[i] = As[kk][ty + 16u * i]; bv[i] = Bs[kk][tx + 16u * i]; }
      for (uint i = 0u; i < 4u; ++i) for (uint j = 0u; j < 4u; ++j) acc[i][j] = fma(av[i], bv[j], acc[i][j]);
    }
    barrier();
  }
  if (live) {
    for (uint i = 0u; i < 4u; ++i) {
      uint gm = m0 + ty + 16u * i;
      for (uint j = 0u; j < 4u; ++j) {
        uint gn = n0 + tx + 16u * j;
        if (gm < M && gn < N) b2.v[c0 + gm * N + gn] = acc[i][j];
      }
    }
  }
}
"""

_GEMV = _HEAD + """
shared float part[256];

void main() {
  uint batch = uint(pc.size[0]), N = uint(pc.size[2]), K = uint(pc.size[3]);
  uint blocks = (N + 63u) / 64u;
  uint wg = workgroup_index();
  bool live = wg < batch * blocks;
  uint bi = live ? wg / blocks : 0u;
  uint t = gl_LocalInvocationID.x, col = (live ? wg % blocks : 0u) * 64u + t % 64u, s = t / 64u;
  uint a0 = pc.off[0] + bi * uint(pc.size[4]), bb = pc.off[1] + bi * uint(pc.size[5]);
  float sum = 0.0;
  if (live && col < N) {
    for (uint k = s; k < K; k += 4u) sum = fma(b0.v[a0 + k], b1.v[bb + k * N + col], sum);
  }
  part[t] = sum;
  barrier();
  if (live && s == 0u && col < N) {
    b2.v[pc.off[2] + bi * N + col] = (part[t] + part[t + 64u]) + (part[t + 128u] + part[t + 192u]);
  }
}
"""

SHADERS = {
    TILED: (_TILED, ShaderRecord(TILED, shared_bytes=2 * STEP_K * TILE * 4)),
    GEMV: (_GEMV, ShaderRecord(GEMV, shared_bytes=THREADS * 4)),
}


def glsl(name: str) -> str:
    return SHADERS[name][0]


def items_c(batch: str, m: str, n: str) -> tuple:
    """C expressions (tiled items, GEMV items) for the size expressions given as C text."""
    tiled = f"(({batch}) * ((({m}) + 63) / 64) * ((({n}) + 63) / 64) * {THREADS})"
    gemv = f"(({batch}) * ((({n}) + 63) / 64) * {THREADS})"
    return tiled, gemv


def max_k(limit: int) -> int:
    """The largest K whose serial loops stay within `limit` iterations (the GEMV's is the longer)."""
    return limit * GEMV_SPLIT
