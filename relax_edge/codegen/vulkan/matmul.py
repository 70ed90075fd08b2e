"""Hand-written Vulkan shaders for the matmul library call: what
rxe_lib_matmul_f32 (the `dispatch` pass, target "vulkan") becomes on the
device.

C[b, M, N] = A[b, M, K] @ B[b, K, N] (A's batch stride a_stride, B's
b_stride, 0 for a shared 2-D B), row-major float32; the call's buffers are
(a, b, c) and its sizes (batch, m, n, k, a_stride, b_stride), the shader ABI
of kernel.py (push constants groups_x, items, off[3], size[6]; 11 words).

Both shaders are one template, register-blocked with no shared memory and
no barrier: a workgroup of L invocations (specialization constant 0, the
board's workgroup size, default 64) owns ROWS rows of C and COLS * L
columns, invocation t the columns t + L j (j < COLS) of those rows, so that

- the A element of a row at a given k is the same for every invocation of
  the workgroup (a uniform load: one scalar load on a CPU driver, a
  broadcast on a GPU), read straight from the buffer;
- the B elements of a k are COLS loads per invocation, consecutive across
  invocations (coalesced), each used ROWS times from registers;
- each invocation keeps ROWS x COLS sums in registers and runs K in steps
  of UNROLL (a tail for the rest).

Rows and columns past the edge read a clamped (valid) element and store
nothing, so the inner loop has no bounds test.

- `rxe_vk_matmul_tiled_f32`: 8 rows x 8 columns per invocation (a tile of
  8 x 512 per workgroup of 64).
- `rxe_vk_matmul_gemv_f32` (M = 1, e.g. a decode step): 1 row x 8 columns
  per invocation (512 columns per workgroup).

The workgroup size L and the tiled shader's block come from the board
(`vulkan.workgroup_size`, `vulkan.matmul_tile: [rows, cols]`; `shaders`),
the GEMV keeps one row and the tile's columns; the defaults are above.
The host picks the GEMV when m == 1 at run time. On lavapipe (8 SIMD lanes
per subgroup) the blocking is what counts: a load whose address differs per
invocation is a gather there, so the tile is sized for few loads per fma.
Shared memory: none. Serial loop: K / UNROLL iterations per invocation,
bounded by the caller against lavapipe's loop limit.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["MATMUL_SYMBOL", "TILED", "GEMV", "SHADERS", "ShaderRecord", "glsl", "items_c", "max_k", "shaders"]

MATMUL_SYMBOL = "rxe_lib_matmul_f32"
TILED, GEMV = "rxe_vk_matmul_tiled_f32", "rxe_vk_matmul_gemv_f32"
THREADS = 64
UNROLL = 4
BLOCKS = {TILED: (8, 8), GEMV: (1, 8)}   # (rows, columns) per invocation


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

_BLOCKED = """
const uint R = {rows}u, C = {cols}u;

/* one k: COLS loads of B, then ROWS uniform loads of A, each used COLS times */
void step(inout float acc[R][C], uint arow[R], uint bcol[C], uint k, uint N) {{
  float bv[C];
  for (uint j = 0u; j < C; ++j) bv[j] = b1.v[bcol[j] + k * N];
  for (uint i = 0u; i < R; ++i) {{
    float av = b0.v[arow[i] + k];
    for (uint j = 0u; j < C; ++j) acc[i][j] = fma(av, bv[j], acc[i][j]);
  }}
}}

void main() {{
  uint batch = uint(pc.size[0]), M = uint(pc.size[1]), N = uint(pc.size[2]), K = uint(pc.size[3]);
  uint L = gl_WorkGroupSize.x, span = C * L;
  uint tiles_m = (M + R - 1u) / R, tiles_n = (N + span - 1u) / span, per = tiles_m * tiles_n;
  uint wg = workgroup_index();
  if (wg >= batch * per) return;   /* a whole workgroup past the last tile (no barrier below) */
  uint bi = wg / per, r = wg % per, t = gl_LocalInvocationID.x;
  uint m0 = (r / tiles_n) * R, n0 = (r % tiles_n) * span;
  uint a0 = pc.off[0] + bi * uint(pc.size[4]), bb = pc.off[1] + bi * uint(pc.size[5]);
  uint arow[R], bcol[C];
  for (uint i = 0u; i < R; ++i) arow[i] = a0 + min(m0 + i, M - 1u) * K;
  for (uint j = 0u; j < C; ++j) bcol[j] = bb + min(n0 + t + L * j, N - 1u);
  float acc[R][C];
  for (uint i = 0u; i < R; ++i) for (uint j = 0u; j < C; ++j) acc[i][j] = 0.0;
  uint k = 0u;
  for (; k + {unroll}u <= K; k += {unroll}u) {{
    for (uint u = 0u; u < {unroll}u; ++u) step(acc, arow, bcol, k + u, N);
  }}
  for (; k < K; ++k) step(acc, arow, bcol, k, N);
  uint c0 = pc.off[2] + bi * M * N;
  for (uint i = 0u; i < R; ++i) {{
    for (uint j = 0u; j < C; ++j) {{
      uint gm = m0 + i, gn = n0 + t + L * j;
      if (gm < M && gn < N) b2.v[c0 + gm * N + gn] = acc[i][j];
    }}
  }}
}}
"""


def _blocks(tile: tuple) -> dict:
    """The (rows, columns) per invocation of each shader for a tiled block `tile`."""
    return {TILED: tuple(tile), GEMV: (1, tile[1])}


def _source(rows: int, cols: int) -> str:
    return _HEAD + _BLOCKED.format(rows=rows, cols=cols, unroll=UNROLL)


def shaders(threads: int = THREADS, tile: tuple = BLOCKS[TILED]) -> dict:
    """name -> (GLSL, ShaderRecord) in workgroups of `threads` with the
    tiled shader's block `tile` (rows, columns per invocation)."""
    return {name: (_source(*block), ShaderRecord(name, local_size_x=threads))
            for name, block in _blocks(tile).items()}


SHADERS = shaders()


def glsl(name: str) -> str:
    return SHADERS[name][0]


def _items(block: tuple, threads: int, batch: str, m: str, n: str) -> str:
    rows, cols = block
    span = cols * threads
    return f"(({batch}) * ((({m}) + {rows - 1}) / {rows}) * ((({n}) + {span - 1}) / {span}) * {threads})"


def items_c(batch: str, m: str, n: str, threads: int = THREADS, tile: tuple = BLOCKS[TILED]) -> tuple:
    """C expressions (tiled items, GEMV items) for the size expressions given
    as C text, in workgroups of `threads` with the tiled block `tile`."""
    blocks = _blocks(tile)
    return _items(blocks[TILED], threads, batch, m, n), _items(blocks[GEMV], threads, batch, m, n)


def max_k(limit: int) -> int:
    """The largest K whose serial loop stays within `limit` iterations (K / UNROLL plus a tail below UNROLL)."""
    return limit * UNROLL
