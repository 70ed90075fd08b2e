"""Hand-written Vulkan shaders for the conv2d library call: what
rxe_lib_conv2d_f32 (the `dispatch` pass, target "vulkan": a float32 NCHW
conv2d with constant OIHW weights and one group, with its bias and relu /
relu6 epilogue) becomes on the device.

The call's buffers are (x, w, bias, out), its sizes (batch, c, h, w, o, kh,
kw, oh, ow, stride_h, stride_w, pad_top, pad_left, dilation_h, dilation_w,
groups, act), the shader ABI of kernel.py (push constants groups_x, items,
off[4], size[17]; 23 words).

An implicit GEMM, register-blocked like matmul.py: out[n] (o x oh*ow) =
W (o x c*kh*kw) @ the input's patches (c*kh*kw x oh*ow). A workgroup of L
invocations (specialization constant 0, the record's 64) owns a tile of
ROWS x COLS * L outputs of one image, invocation t the columns t + L j.
The rows' operand at a given k is the same for every invocation (a uniform
load), the columns' operand is COLS loads per invocation, each used ROWS
times from registers. A pointwise convolution (1 x 1, stride 1, no
padding) reads the image as the (c x oh*ow) matrix directly, K in steps of
UNROLL; the other shapes walk (channel, kh, kw) in nested loops with each
pixel's window origin kept in registers, and a tap outside the image reads
element 0 and adds 0.

- `rxe_vk_conv2d_wide_f32`: rows are 8 output channels, columns 8 pixels
  per invocation (512 pixels per workgroup): images of at least 512 output
  pixels (the early layers);
- `rxe_vk_conv2d_tall<S>_f32` (transposed): rows are 8 pixels (the patch
  elements uniform), columns S channels per workgroup: 8 per invocation in
  workgroups of 64 (S = 512) or 32 (256), 4 or 2 in workgroups of 32 (128,
  64): images of fewer pixels (the late layers), the widest tile whose
  channel tiles leave at most a fifth of their columns idle.

- `rxe_vk_depthwise_conv2d_f32` (rxe_lib_depthwise_conv2d_f32: every
  channel its own group): a workgroup per (image, channel) and 256 output
  pixels, 4 per invocation (t + 64 j); the channel's taps are uniform loads,
  each tap one load of the image per pixel.

The host picks one at run time from oh * ow and o (so a symbolic image size
gets the tile its run needs). Shared memory: none; no barrier (a workgroup
past the last tile returns at once). Serial loops: c * kh * kw / UNROLL
iterations (pointwise), c, kh and kw (the others), bounded by the dispatch
pass against lavapipe's loop limit.
"""

from __future__ import annotations

from .matmul import THREADS, UNROLL, ShaderRecord

__all__ = ["CONV_SYMBOL", "DEPTHWISE_SYMBOL", "WIDE", "DEPTHWISE", "SHADERS", "SHADERS_DEPTHWISE", "NUM_SIZES",
           "dispatch_lines", "depthwise_lines"]

CONV_SYMBOL = "rxe_lib_conv2d_f32"
WIDE = "rxe_vk_conv2d_wide_f32"
# name -> (rows, columns per invocation, the transposed form (rows are pixels), workgroup size)
BLOCKS = {WIDE: (8, 8, False, THREADS), "rxe_vk_conv2d_tall512_f32": (8, 8, True, THREADS),
          "rxe_vk_conv2d_tall256_f32": (8, 8, True, 32), "rxe_vk_conv2d_tall128_f32": (8, 4, True, 32),
          "rxe_vk_conv2d_tall64_f32": (8, 2, True, 32)}
TALL = [name for name in BLOCKS if BLOCKS[name][2]]   # widest first
NUM_SIZES = 17
WIDE_PIXELS = 8 * THREADS    # from this many output pixels: the wide shader


def _span(name: str) -> int:
    return BLOCKS[name][1] * BLOCKS[name][3]


_HEAD = """#version 450
layout(local_size_x_id = 0) in;
layout(std430, set = 0, binding = 0) readonly buffer B0 { float v[]; } b0;   /* x: n, c, h, w */
layout(std430, set = 0, binding = 1) readonly buffer B1 { float v[]; } b1;   /* w: o, c, kh, kw */
layout(std430, set = 0, binding = 2) readonly buffer B2 { float v[]; } b2;   /* bias: o */
layout(std430, set = 0, binding = 3) writeonly buffer B3 { float v[]; } b3;  /* out: n, o, oh, ow */
layout(push_constant) uniform PC { uint groups_x; uint items; uint off[4]; int size[17]; } pc;

uint workgroup_index() {
  return (gl_WorkGroupID.y + gl_WorkGroupID.z * gl_NumWorkGroups.y) * pc.groups_x + gl_WorkGroupID.x;
}
"""

_BODY = """
const uint R = {rows}u, C = {cols}u;

/* one k of the pointwise case: C loads of the image, R uniform loads of the weights */
void step(inout float acc[R][C], uint wrow[R], uint col[C], uint k, uint P) {{
  float bv[C];
  for (uint j = 0u; j < C; ++j) bv[j] = b0.v[col[j] + k * P];
  for (uint i = 0u; i < R; ++i) {{
    float av = b1.v[wrow[i] + k];
    for (uint j = 0u; j < C; ++j) acc[i][j] = fma(av, bv[j], acc[i][j]);
  }}
}}

void main() {{
  uint NB = uint(pc.size[0]), CI = uint(pc.size[1]), H = uint(pc.size[2]), W = uint(pc.size[3]);
  uint CO = uint(pc.size[4]), KH = uint(pc.size[5]), KW = uint(pc.size[6]), OW = uint(pc.size[8]);
  int SH = pc.size[9], SW = pc.size[10], PT = pc.size[11], PL = pc.size[12], DH = pc.size[13], DW = pc.size[14];
  int act = pc.size[16];
  uint P = uint(pc.size[7]) * OW, K = CI * KH * KW;
  uint L = gl_WorkGroupSize.x, span = C * L;
  uint tiles_m = (CO + R - 1u) / R, tiles_n = (P + span - 1u) / span, per = tiles_m * tiles_n;
  uint wg = workgroup_index();
  if (wg >= NB * per) return;   /* a whole workgroup past the last tile (no barrier below) */
  uint n = wg / per, r = wg % per, t = gl_LocalInvocationID.x;
  uint m0 = (r / tiles_n) * R, n0 = (r % tiles_n) * span;
  uint xb = pc.off[0] + n * CI * H * W;
  uint wrow[R];
  for (uint i = 0u; i < R; ++i) wrow[i] = pc.off[1] + min(m0 + i, CO - 1u) * K;
  float acc[R][C];
  for (uint i = 0u; i < R; ++i) for (uint j = 0u; j < C; ++j) acc[i][j] = 0.0;
  if (KH == 1u && KW == 1u && SH == 1 && SW == 1 && PT == 0 && PL == 0) {{
    /* pointwise: the input image is the (c x h*w) B matrix */
    uint col[C];
    for (uint j = 0u; j < C; ++j) col[j] = xb + min(n0 + t + L * j, P - 1u);
    uint k = 0u;
    for (; k + {unroll}u <= K; k += {unroll}u) {{
      for (uint u = 0u; u < {unroll}u; ++u) step(acc, wrow, col, k + u, P);
    }}
    for (; k < K; ++k) step(acc, wrow, col, k, P);
  }} else {{
    int ih0[C], iw0[C];
    for (uint j = 0u; j < C; ++j) {{
      uint p = min(n0 + t + L * j, P - 1u);
      ih0[j] = int(p / OW) * SH - PT;
      iw0[j] = int(p % OW) * SW - PL;
    }}
    uint k = 0u;
    for (uint ci = 0u; ci < CI; ++ci) {{
      uint plane = xb + ci * H * W;
      for (uint kh = 0u; kh < KH; ++kh) {{
        for (uint kw = 0u; kw < KW; ++kw) {{
          float bv[C];
          for (uint j = 0u; j < C; ++j) {{
            int ih = ih0[j] + int(kh) * DH, iw = iw0[j] + int(kw) * DW;
            bool inside = uint(ih) < H && uint(iw) < W;
            float v = b0.v[plane + (inside ? uint(ih) * W + uint(iw) : 0u)];
            bv[j] = inside ? v : 0.0;
          }}
          for (uint i = 0u; i < R; ++i) {{
            float av = b1.v[wrow[i] + k];
            for (uint j = 0u; j < C; ++j) acc[i][j] = fma(av, bv[j], acc[i][j]);
          }}
          ++k;
        }}
      }}
    }}
  }}
  uint ob = pc.off[3] + n * CO * P;
  for (uint i = 0u; i < R; ++i) {{
    uint co = m0 + i;
    if (co >= CO) continue;
    float bias = b2.v[pc.off[2] + co];
    for (uint j = 0u; j < C; ++j) {{
      uint p = n0 + t + L * j;
      float y = acc[i][j] + bias;
      if (act >= 1) y = max(y, 0.0);
      if (act == 2) y = min(y, 6.0);
      if (p < P) b3.v[ob + co * P + p] = y;
    }}
  }}
}}
"""



_BODY_T = """
const uint R = {rows}u, C = {cols}u;

/* one k: R uniform loads of the pixels' patch elements (av), C loads of the channels' weights */
void step(inout float acc[R][C], float av[R], uint wcol[C], uint k) {{
  float bv[C];
  for (uint j = 0u; j < C; ++j) bv[j] = b1.v[wcol[j] + k];
  for (uint i = 0u; i < R; ++i) for (uint j = 0u; j < C; ++j) acc[i][j] = fma(av[i], bv[j], acc[i][j]);
}}

void main() {{
  uint NB = uint(pc.size[0]), CI = uint(pc.size[1]), H = uint(pc.size[2]), W = uint(pc.size[3]);
  uint CO = uint(pc.size[4]), KH = uint(pc.size[5]), KW = uint(pc.size[6]), OW = uint(pc.size[8]);
  int SH = pc.size[9], SW = pc.size[10], PT = pc.size[11], PL = pc.size[12], DH = pc.size[13], DW = pc.size[14];
  int act = pc.size[16];
  uint P = uint(pc.size[7]) * OW, K = CI * KH * KW;
  uint L = gl_WorkGroupSize.x, span = C * L;
  uint tiles_m = (P + R - 1u) / R, tiles_n = (CO + span - 1u) / span, per = tiles_m * tiles_n;
  uint wg = workgroup_index();
  if (wg >= NB * per) return;   /* a whole workgroup past the last tile (no barrier below) */
  uint n = wg / per, r = wg % per, t = gl_LocalInvocationID.x;
  uint p0 = (r / tiles_n) * R, c0 = (r % tiles_n) * span;
  uint xb = pc.off[0] + n * CI * H * W;
  uint wcol[C];
  for (uint j = 0u; j < C; ++j) wcol[j] = pc.off[1] + min(c0 + t + L * j, CO - 1u) * K;
  float acc[R][C];
  for (uint i = 0u; i < R; ++i) for (uint j = 0u; j < C; ++j) acc[i][j] = 0.0;
  float av[R];
  if (KH == 1u && KW == 1u && SH == 1 && SW == 1 && PT == 0 && PL == 0) {{
    /* pointwise: pixel p's element k is x[n, k, p] */
    uint row[R];
    for (uint i = 0u; i < R; ++i) row[i] = xb + min(p0 + i, P - 1u);
    uint k = 0u;
    for (; k + {unroll}u <= K; k += {unroll}u) {{
      for (uint u = 0u; u < {unroll}u; ++u) {{
        for (uint i = 0u; i < R; ++i) av[i] = b0.v[row[i] + (k + u) * P];
        step(acc, av, wcol, k + u);
      }}
    }}
    for (; k < K; ++k) {{
      for (uint i = 0u; i < R; ++i) av[i] = b0.v[row[i] + k * P];
      step(acc, av, wcol, k);
    }}
  }} else {{
    int ih0[R], iw0[R];
    for (uint i = 0u; i < R; ++i) {{
      uint p = min(p0 + i, P - 1u);
      ih0[i] = int(p / OW) * SH - PT;
      iw0[i] = int(p % OW) * SW - PL;
    }}
    uint k = 0u;
    for (uint ci = 0u; ci < CI; ++ci) {{
      uint plane = xb + ci * H * W;
      for (uint kh = 0u; kh < KH; ++kh) {{
        for (uint kw = 0u; kw < KW; ++kw) {{
          for (uint i = 0u; i < R; ++i) {{
            int ih = ih0[i] + int(kh) * DH, iw = iw0[i] + int(kw) * DW;
            bool inside = uint(ih) < H && uint(iw) < W;
            float v = b0.v[plane + (inside ? uint(ih) * W + uint(iw) : 0u)];
            av[i] = inside ? v : 0.0;
          }}
          step(acc, av, wcol, k);
          ++k;
        }}
      }}
    }}
  }}
  uint ob = pc.off[3] + n * CO * P;
  for (uint j = 0u; j < C; ++j) {{
    uint co = c0 + t + L * j;
    if (co >= CO) continue;
    float bias = b2.v[pc.off[2] + co];
    for (uint i = 0u; i < R; ++i) {{
      uint p = p0 + i;
      float y = acc[i][j] + bias;
      if (act >= 1) y = max(y, 0.0);
      if (act == 2) y = min(y, 6.0);
      if (p < P) b3.v[ob + co * P + p] = y;
    }}
  }}
}}
"""


_DEPTHWISE = """#version 450
layout(local_size_x_id = 0) in;
layout(std430, set = 0, binding = 0) readonly buffer B0 { float v[]; } b0;   /* x: n, c, h, w */
layout(std430, set = 0, binding = 1) readonly buffer B1 { float v[]; } b1;   /* w: c, 1, kh, kw */
layout(std430, set = 0, binding = 2) readonly buffer B2 { float v[]; } b2;   /* bias: c */
layout(std430, set = 0, binding = 3) writeonly buffer B3 { float v[]; } b3;  /* out: n, c, oh, ow */
layout(push_constant) uniform PC { uint groups_x; uint items; uint off[4]; int size[15]; } pc;

const uint C = %(cols)du;

void main() {
  uint wg = (gl_WorkGroupID.y + gl_WorkGroupID.z * gl_NumWorkGroups.y) * pc.groups_x + gl_WorkGroupID.x;
  uint NB = uint(pc.size[0]), CH = uint(pc.size[1]), H = uint(pc.size[2]), W = uint(pc.size[3]);
  uint KH = uint(pc.size[4]), KW = uint(pc.size[5]), OW = uint(pc.size[7]);
  int SH = pc.size[8], SW = pc.size[9], PT = pc.size[10], PL = pc.size[11], DH = pc.size[12], DW = pc.size[13];
  int act = pc.size[14];
  uint P = uint(pc.size[6]) * OW, L = gl_WorkGroupSize.x, span = C * L;
  uint tiles = (P + span - 1u) / span;
  if (wg >= NB * CH * tiles) return;   /* a whole workgroup past the last tile (no barrier below) */
  uint plane = wg / tiles, p0 = (wg %% tiles) * span, ch = plane %% CH, t = gl_LocalInvocationID.x;
  uint xb = pc.off[0] + plane * H * W, wb = pc.off[1] + ch * KH * KW;
  int ih0[C], iw0[C];
  float acc[C];
  for (uint j = 0u; j < C; ++j) {
    uint p = min(p0 + t + L * j, P - 1u);
    ih0[j] = int(p / OW) * SH - PT;
    iw0[j] = int(p %% OW) * SW - PL;
    acc[j] = 0.0;
  }
  for (uint kh = 0u; kh < KH; ++kh) {
    for (uint kw = 0u; kw < KW; ++kw) {
      float wv = b1.v[wb + kh * KW + kw];   /* the channel's tap: the same for the whole workgroup */
      for (uint j = 0u; j < C; ++j) {
        int ih = ih0[j] + int(kh) * DH, iw = iw0[j] + int(kw) * DW;
        bool inside = uint(ih) < H && uint(iw) < W;
        float v = b0.v[xb + (inside ? uint(ih) * W + uint(iw) : 0u)];
        acc[j] = fma(wv, inside ? v : 0.0, acc[j]);
      }
    }
  }
  float bias = b2.v[pc.off[2] + ch];
  uint ob = pc.off[3] + plane * P;
  for (uint j = 0u; j < C; ++j) {
    uint p = p0 + t + L * j;
    float y = acc[j] + bias;
    if (act >= 1) y = max(y, 0.0);
    if (act == 2) y = min(y, 6.0);
    if (p < P) b3.v[ob + p] = y;
  }
}
"""
DEPTHWISE_SYMBOL = "rxe_lib_depthwise_conv2d_f32"
DEPTHWISE = "rxe_vk_depthwise_conv2d_f32"
DEPTHWISE_COLS = 4      # output pixels per invocation (256 per workgroup of 64)
DEPTHWISE_SIZES = 15


def depthwise_lines(prefix: str, views: str, values: str, kernels: dict) -> list:
    """The host's C block for one depthwise conv2d call (sizes: batch, c, h,
    w, kh, kw, oh, ow, strides, pads, dilations, act): a workgroup per
    channel of an image and 256 of its output pixels."""
    span = DEPTHWISE_COLS * THREADS
    items = f"(z64[0] * z64[1] * ((z64[6] * z64[7] + {span - 1}) / {span}) * {THREADS})"
    return ["  {", f"    const rxe_vk_view_t v[4] = {{{views}}};",
            f"    const int64_t z64[{DEPTHWISE_SIZES}] = {{{values}}};", f"    int32_t z[{DEPTHWISE_SIZES}];",
            f"    st = {prefix}_vk_sizes32(z64, z, {DEPTHWISE_SIZES}u, \"{DEPTHWISE_SYMBOL}\", err);",
            f"    if (st == RXE_OK) st = rxe_vk_dispatch({prefix}_vk, {kernels[DEPTHWISE][0]}u, v, z, "
            f"(uint64_t){items}, err);", "  }"]


def _source(name: str) -> str:
    rows, cols, transposed, _ = BLOCKS[name]
    return _HEAD + (_BODY_T if transposed else _BODY).format(rows=rows, cols=cols, unroll=UNROLL)


SHADERS = {name: (_source(name), ShaderRecord(name, num_buffers=4, push_words=2 + 4 + NUM_SIZES,
                                              local_size_x=BLOCKS[name][3])) for name in BLOCKS}
SHADERS_DEPTHWISE = {DEPTHWISE: (_DEPTHWISE % {"cols": DEPTHWISE_COLS},
                                 ShaderRecord(DEPTHWISE, num_buffers=4, push_words=2 + 4 + DEPTHWISE_SIZES))}


def _items(name: str, batch: str, o: str, pixels: str) -> str:
    rows, _, transposed, threads = BLOCKS[name]
    span = _span(name)
    m, n = (pixels, o) if transposed else (o, pixels)
    return f"(({batch}) * ((({m}) + {rows - 1}) / {rows}) * ((({n}) + {span - 1}) / {span}) * {threads})"


def dispatch_lines(prefix: str, views: str, values: str, kernels: dict) -> list:
    """The host's C block for one conv2d call: the sizes checked to fit int32,
    then the wide shader from WIDE_PIXELS output pixels, else the widest tall
    one whose channel tiles waste at most a fifth of their columns (the
    narrowest otherwise)."""
    pixels, o = "z64[7] * z64[8]", "z64[4]"

    def call(name):
        items = _items(name, "z64[0]", o, pixels)
        return f"rxe_vk_dispatch({prefix}_vk, {kernels[name][0]}u, v, z, (uint64_t){items}, err)"
    lines = ["  {", f"    const rxe_vk_view_t v[4] = {{{views}}};",
             f"    const int64_t z64[{NUM_SIZES}] = {{{values}}};", f"    int32_t z[{NUM_SIZES}];",
             f"    st = {prefix}_vk_sizes32(z64, z, {NUM_SIZES}u, \"{CONV_SYMBOL}\", err);",
             f"    if (st == RXE_OK) st = {pixels} >= {WIDE_PIXELS} ? {call(WIDE)}"]
    for name in TALL[:-1]:
        span = _span(name)
        lines.append(f"        : 4 * (({o} + {span - 1}) / {span}) * {span} <= 5 * {o} ? {call(name)}")
    return lines + [f"        : {call(TALL[-1])};", "  }"]
