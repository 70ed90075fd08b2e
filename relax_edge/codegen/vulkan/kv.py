"""Hand-written Vulkan shaders for the KV-cache library calls
(relax_edge/library/kv_cache.py): what rxe_lib_kv_append_f32 and
rxe_lib_kv_attention_f32 become on the device, dispatched by the Vulkan host
(module.py) in place of the C kernels of runtime_c/kernels/attention.c.

- `rxe_vk_kv_append_f32`: bindings (state, new), sizes (kv_heads,
  max_context, seq, head_dim, offset); one invocation per element of `new`
  (1, kv_heads, seq, head_dim), written at position offset + s of its head in
  the state (1, kv_heads, max_context, head_dim). The call's result must be
  the state's own storage (the planner's in-place result): the shader writes
  only the new positions. The host checks offset >= 0 and offset + seq <=
  max_context before the dispatch (RXE_ERR_BOUND, the C kernel's message).
- `rxe_vk_kv_attention_f32`: bindings (q, k, v, mask, scale, out), sizes
  (heads, kv_heads, seq, kv_len, max_context, head_dim, has_mask,
  mask_head_stride, mask_row_stride); one workgroup of L invocations (the
  board's workgroup size, default THREADS = 64) per (query head, row).
  Query head h reads KV head h / (heads / kv_heads) (GQA).
  The row's query goes to shared memory; each invocation scores positions
  t, t + L, ... (dot product times scale, plus the additive mask at
  h * mask_head_stride + row * mask_row_stride + j when has_mask), keeping
  the scores in shared memory; a shared-memory tree gives the maximum over
  the positions that count (a score >= -3e38, as the C kernel skips the
  others), then the sum of exp(score - max); the invocations then share the
  head_dim outputs, each the weighted sum of v over the positions divided by
  the sum. A NaN score makes the row NaN, a row where no position counts is
  zeros (the C kernel's rules). The host checks heads % kv_heads == 0 and
  kv_len <= max_context before the dispatch.
  Shared memory: (context + head_dim + L) floats and one word, `context`
  and `head_dim` the largest over the module's calls (constants of the
  build: a state's shape is fixed); past MAX_CONTEXT positions the build is
  refused. Serial loops: kv_len / L, head_dim and kv_len iterations.

Both keep every barrier in uniform control flow: a workgroup past the last
row computes nothing but reaches each barrier.
"""

from __future__ import annotations

from .matmul import ShaderRecord

__all__ = ["APPEND_SYMBOL", "ATTENTION_SYMBOL", "APPEND", "ATTENTION", "MAX_CONTEXT", "THREADS", "append_shader",
           "attention_shader"]

APPEND_SYMBOL = "rxe_lib_kv_append_f32"        # library/kv_cache.py's APPEND
ATTENTION_SYMBOL = "rxe_lib_kv_attention_f32"  # library/kv_cache.py's ATTENTION
APPEND, ATTENTION = "rxe_vk_kv_append_f32", "rxe_vk_kv_attention_f32"
THREADS = 64
MAX_CONTEXT = 3072   # the scores of a row in shared memory: 12 KiB, within Vulkan's guaranteed 16 KiB

_INDEX = """
uint workgroup_index() {
  return (gl_WorkGroupID.y + gl_WorkGroupID.z * gl_NumWorkGroups.y) * pc.groups_x + gl_WorkGroupID.x;
}
"""

_APPEND = """#version 450
layout(local_size_x = THREADS, local_size_x_id = 0) in;
layout(std430, set = 0, binding = 0) writeonly buffer B0 { float v[]; } b0;   // the state, written in place
layout(std430, set = 0, binding = 1) readonly buffer B1 { float v[]; } b1;    // the new positions
layout(push_constant) uniform PC { uint groups_x; uint items; uint off[2]; int size[5]; } pc;
""" + _INDEX + """
void main() {
  uint gid = workgroup_index() * gl_WorkGroupSize.x + gl_LocalInvocationID.x;
  if (gid >= pc.items) return;
  uint C = uint(pc.size[1]), S = uint(pc.size[2]), D = uint(pc.size[3]), at = uint(pc.size[4]);
  uint d = gid % D, s = (gid / D) % S, h = gid / (D * S);
  b0.v[pc.off[0] + (h * C + at + s) * D + d] = b1.v[pc.off[1] + gid];
}
"""

_ATTENTION = """#version 450
layout(local_size_x = THREADS, local_size_x_id = 0) in;
layout(std430, set = 0, binding = 0) readonly buffer B0 { float v[]; } b0;    // q (1, heads, seq, head_dim)
layout(std430, set = 0, binding = 1) readonly buffer B1 { float v[]; } b1;    // k state
layout(std430, set = 0, binding = 2) readonly buffer B2 { float v[]; } b2;    // v state
layout(std430, set = 0, binding = 3) readonly buffer B3 { float v[]; } b3;    // the additive mask
layout(std430, set = 0, binding = 4) readonly buffer B4 { float v[]; } b4;    // the scale, one float
layout(std430, set = 0, binding = 5) writeonly buffer B5 { float v[]; } b5;   // out (1, heads, seq, head_dim)
layout(push_constant) uniform PC { uint groups_x; uint items; uint off[6]; int size[9]; } pc;

shared float scores[CONTEXT];
shared float query[DIM];
shared float part[THREADS];
shared uint bad;
""" + _INDEX + """
void main() {
  uint H = uint(pc.size[0]), KH = uint(pc.size[1]), S = uint(pc.size[2]), L = uint(pc.size[3]);
  uint C = uint(pc.size[4]), D = uint(pc.size[5]);
  uint wg = workgroup_index(), t = gl_LocalInvocationID.x;
  bool live = wg < H * S;
  uint h = live ? wg / S : 0u, row = live ? wg % S : 0u, kh = h / (H / KH);
  uint q0 = pc.off[0] + (h * S + row) * D, k0 = pc.off[1] + kh * C * D, v0 = pc.off[2] + kh * C * D;
  uint m0 = pc.off[3] + h * uint(pc.size[7]) + row * uint(pc.size[8]);
  bool masked = pc.size[6] != 0;
  float scale = b4.v[pc.off[4]];
  if (t == 0u) bad = 0u;
  for (uint d = t; d < D; d += THREADSu) query[d] = live ? b0.v[q0 + d] : 0.0;
  barrier();
  float best = 0.0;
  bool any = false, nan = false;
  for (uint j = t; live && j < L; j += THREADSu) {
    float s = 0.0;
    for (uint d = 0u; d < D; ++d) s = fma(query[d], b1.v[k0 + j * D + d], s);
    s = s * scale + (masked ? b3.v[m0 + j] : 0.0);
    scores[j] = s;
    if (isnan(s)) {
      nan = true;
    } else if (s >= -3.0e38) {
      best = any ? max(best, s) : s;
      any = true;
    }
  }
  if (nan) atomicOr(bad, 1u);
  part[t] = any ? best : uintBitsToFloat(0xff800000u);
  barrier();
  for (uint w = HALFu; w > 0u; w >>= 1u) {
    if (t < w) part[t] = max(part[t], part[t + w]);
    barrier();
  }
  float top = part[0];
  barrier();
  float total = 0.0;
  for (uint j = t; live && j < L; j += THREADSu) {
    float s = scores[j];
    float p = s >= -3.0e38 ? exp(s - top) : 0.0;
    scores[j] = p;
    total += p;
  }
  part[t] = total;
  barrier();
  for (uint w = HALFu; w > 0u; w >>= 1u) {
    if (t < w) part[t] += part[t + w];
    barrier();
  }
  total = part[0];
  bool is_nan = bad != 0u;
  for (uint d = t; live && d < D; d += THREADSu) {
    float acc = 0.0;
    for (uint j = 0u; j < L; ++j) acc = fma(scores[j], b2.v[v0 + j * D + d], acc);
    b5.v[pc.off[5] + (h * S + row) * D + d] = is_nan ? uintBitsToFloat(0x7fc00000u) : total > 0.0 ? acc / total : 0.0;
  }
}
"""


def _threads(text: str, threads: int) -> str:
    """The template in workgroups of `threads` (a power of two: the trees halve it)."""
    if threads < 1 or threads & (threads - 1):
        raise ValueError(f"the KV-cache shaders need a power-of-two workgroup size, got {threads}")
    return text.replace("HALFu", f"{threads // 2}u").replace("THREADSu", f"{threads}u").replace("THREADS", str(threads))


def append_shader(threads: int = THREADS) -> tuple:
    """(GLSL text, ShaderRecord) of the append shader in workgroups of `threads`."""
    return _threads(_APPEND, threads), ShaderRecord(APPEND, num_buffers=2, push_words=2 + 2 + 5, local_size_x=threads)


def attention_shader(context: int, head_dim: int, threads: int = THREADS) -> tuple:
    """(GLSL text, ShaderRecord) of the attention shader for rows of at most
    `context` positions and `head_dim` query elements, in workgroups of `threads`."""
    context, head_dim = max(int(context), 1), max(int(head_dim), 1)
    text = _threads(_ATTENTION, threads).replace("CONTEXT", str(context)).replace("DIM]", f"{head_dim}]")
    shared = 4 * (context + head_dim + threads + 1)
    return text, ShaderRecord(ATTENTION, num_buffers=6, push_words=2 + 6 + 9, local_size_x=threads,
                              shared_bytes=shared)


def append_items_c(kv_heads: str, seq: str, head_dim: str) -> str:
    return f"(({kv_heads}) * ({seq}) * ({head_dim}))"


def attention_items_c(heads: str, seq: str, threads: int = THREADS) -> str:
    return f"(({heads}) * ({seq}) * {threads})"
