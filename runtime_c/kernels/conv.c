/* conv2d as GEMM (relax_edge/kernels.h): per image and group,
 * y (og, oh*ow) = W (og, cg*kh*kw) @ im2col(x) (cg*kh*kw, oh*ow), with the
 * im2col done while packing B panels into scratch. */
#include "gemm_internal.h"

#include "relax_edge/runtime.h"

#define NR RXE_GEMM_NR

typedef struct {
  const float* x; /* the group's first input channel */
  int64_t h, w, kh, kw, ow;
  int64_t stride_h, stride_w, pad_top, pad_left, dil_h, dil_w;
} im2col_t;

/* Columns t of a run of output pixels in one output row read input columns
 * ix + t*stride; those inside [0, w) are t in [lo, hi). */
static void copy_run(const float* row, int64_t ix, int64_t stride, int64_t w, int64_t len, float* out) {
  int64_t lo = ix >= 0 ? 0 : (-ix + stride - 1) / stride, hi = ix >= w ? 0 : (w - ix + stride - 1) / stride, t;
  if (hi > len) hi = len;
  if (lo > hi) lo = hi;
  for (t = 0; t < lo; ++t) out[t] = 0.0f;
  if (stride == 1) {
    for (t = lo; t < hi; ++t) out[t] = row[ix + t];
  } else {
    for (t = lo; t < hi; ++t) out[t] = row[ix + t * stride];
  }
  for (t = hi; t < len; ++t) out[t] = 0.0f;
}

/* Rows of B are (channel, ky, kx); columns are output pixels (oy, ox),
 * taken as runs that lie in one output row. */
static void pack_im2col(const void* ctx, int64_t p0, int64_t kc, int64_t j0, int64_t nr, float* dst) {
  const im2col_t* s = (const im2col_t*)ctx;
  int64_t run_start[NR + 1], run_iy[NR], run_ix[NR];
  int64_t ci = p0 / (s->kh * s->kw), ky = p0 / s->kw % s->kh, kx = p0 % s->kw, p, j, r, runs = 0;
  for (j = 0; j < nr; j += s->ow - (j0 + j) % s->ow) {
    run_start[runs] = j;
    run_iy[runs] = (j0 + j) / s->ow * s->stride_h - s->pad_top;
    run_ix[runs++] = (j0 + j) % s->ow * s->stride_w - s->pad_left;
  }
  run_start[runs] = nr;
  for (p = 0; p < kc; ++p) {
    const float* xc = s->x + ci * s->h * s->w;
    float* out = dst + p * NR;
    for (r = 0; r < runs; ++r) {
      int64_t iy = run_iy[r] + ky * s->dil_h, len = run_start[r + 1] - run_start[r];
      if (iy >= 0 && iy < s->h) {
        copy_run(xc + iy * s->w, run_ix[r] + kx * s->dil_w, s->stride_w, s->w, len, out + run_start[r]);
      } else {
        for (j = 0; j < len; ++j) out[run_start[r] + j] = 0.0f;
      }
    }
    for (j = nr; j < NR; ++j) out[j] = 0.0f;
    if (++kx == s->kw) {
      kx = 0;
      if (++ky == s->kh) {
        ky = 0;
        ++ci;
      }
    }
  }
}

/* 1x1, stride 1, no padding: B is the group's input, (cg, h*w) row-major. */
static void pack_pointwise(const void* ctx, int64_t p0, int64_t kc, int64_t j0, int64_t nr, float* dst) {
  const im2col_t* s = (const im2col_t*)ctx;
  int64_t hw = s->h * s->w, p, j;
  for (p = 0; p < kc; ++p) {
    const float* row = s->x + (p0 + p) * hw + j0;
    float* out = dst + p * NR;
    for (j = 0; j < NR; ++j) out[j] = j < nr ? row[j] : 0.0f;
  }
}

rxe_status_t rxe_lib_conv2d_f32(const float* x, const float* w_packed, const float* bias, float* y,
                                float* scratch, int64_t n, int64_t c, int64_t h, int64_t w, int64_t o,
                                int64_t kh, int64_t kw, int64_t oh, int64_t ow, int64_t stride_h,
                                int64_t stride_w, int64_t pad_top, int64_t pad_left, int64_t dil_h,
                                int64_t dil_w, int64_t groups, int64_t act, rxe_error_t* err) {
  rxe_gemm_t g;
  im2col_t src;
  int64_t cg, og, kg, ni, gi;
  if (!RXE_ACT_VALID(act)) {
    return rxe_error_set(err, RXE_ERR_INTERNAL,
                         "rxe_lib_conv2d_f32: act %d is not 0 (none), 1 (relu) or 2 (relu6)", act);
  }
  if (n < 0 || c < 0 || h < 0 || w < 0 || o < 0 || kh < 0 || kw < 0 || oh < 0 || ow < 0) {
    return rxe_error_set(err, RXE_ERR_SHAPE,
                         "rxe_lib_conv2d_f32: negative size (n %d, c %d, h %d, w %d, o %d, kh %d, kw %d, "
                         "oh %d, ow %d)", n, c, h, w, o, kh, kw, oh, ow);
  }
  if (stride_h < 1 || stride_w < 1 || dil_h < 1 || dil_w < 1) {
    return rxe_error_set(err, RXE_ERR_SHAPE,
                         "rxe_lib_conv2d_f32: strides (%d, %d) and dilations (%d, %d) must be at least 1",
                         stride_h, stride_w, dil_h, dil_w);
  }
  if (groups < 1 || c % groups != 0 || o % groups != 0) {
    return rxe_error_set(err, RXE_ERR_SHAPE,
                         "rxe_lib_conv2d_f32: groups %d must divide the input channels %d and the outputs %d",
                         groups, c, o);
  }
  cg = c / groups;
  og = o / groups;
  kg = cg * kh * kw;
  if (scratch == NULL && og * kg * oh * ow > 0) {
    return rxe_error_set(err, RXE_ERR_NULL, "rxe_lib_conv2d_f32: scratch is NULL");
  }
  src.h = h;
  src.w = w;
  src.kh = kh;
  src.kw = kw;
  src.ow = ow;
  src.stride_h = stride_h;
  src.stride_w = stride_w;
  src.pad_top = pad_top;
  src.pad_left = pad_left;
  src.dil_h = dil_h;
  src.dil_w = dil_w;
  g.m = og;
  g.n = oh * ow;
  g.k = kg;
  g.a = NULL;
  g.lda = 0;
  g.a_panel_stride = kg * RXE_GEMM_MR;
  g.b_packed = NULL;
  g.b_panel_stride = 0;
  g.pack_b = kh == 1 && kw == 1 && stride_h == 1 && stride_w == 1 && pad_top == 0 && pad_left == 0 &&
                     oh == h && ow == w ? pack_pointwise : pack_im2col;
  g.b_ctx = &src;
  g.scratch = scratch;
  g.ldc = oh * ow;
  g.col_bias = NULL;
  g.act = (int)act;
  for (ni = 0; ni < n; ++ni) {
    for (gi = 0; gi < groups; ++gi) {
      src.x = x + (ni * c + gi * cg) * h * w;
      g.a_packed = w_packed + gi * ((og + RXE_GEMM_MR - 1) / RXE_GEMM_MR) * g.a_panel_stride;
      g.c = y + (ni * o + gi * og) * oh * ow;
      g.row_bias = bias ? bias + gi * og : NULL;
      rxe_gemm_run(&g);
    }
  }
  return RXE_OK;
}
