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

static int64_t clamp(int64_t v, int64_t lo, int64_t hi) { return v < lo ? lo : v > hi ? hi : v; }

static void zero(float* o, int64_t n) {
  int64_t t;
  for (t = 0; t < n; ++t) o[t] = 0.0f;
}

/* Row (ci, ky, kx) of B for nr output pixels from (oy, ox) on, into out:
 * runs of pixels in one output row, each a copy of input row iy (zeros
 * where iy or the input column is outside the input). */
static void im2col_row(const im2col_t* s, const float* xc, int64_t ky, int64_t kx, int64_t oy, int64_t ox,
                       int64_t nr, float* out) {
  int64_t sw = s->stride_w, ix0 = kx * s->dil_w - s->pad_left; /* the input column of ox = 0 */
  /* ox in [lo, hi) reads an input column in [0, w) */
  int64_t hi = clamp((s->w - ix0 + sw - 1) / sw, 0, s->ow), lo = clamp((-ix0 + sw - 1) / sw, 0, hi);
  int64_t j, len, t;
  for (j = 0; j < nr; j += len, ox = 0, ++oy) {
    int64_t iy = oy * s->stride_h - s->pad_top + ky * s->dil_h, a, b;
    const float* src;
    float* o = out + j;
    len = s->ow - ox < nr - j ? s->ow - ox : nr - j;
    if (iy < 0 || iy >= s->h) {
      zero(o, len);
      continue;
    }
    a = clamp(lo - ox, 0, len);
    b = clamp(hi - ox, a, len);
    src = xc + iy * s->w + ix0 + (ox + a) * sw;
    zero(o, a);
    if (sw == 1) {
      for (t = 0; t < b - a; ++t) o[a + t] = src[t];
    } else if (sw == 2) {
      for (t = 0; t < b - a; ++t) o[a + t] = src[2 * t];
    } else {
      for (t = 0; t < b - a; ++t) o[a + t] = src[t * sw];
    }
    zero(o + b, len - b);
  }
}

/* Copy row p of a run of panels from row, nr floats (zeros past nr). */
static void scatter_row(const float* row, int64_t nr, int64_t kc, int64_t p, float* dst) {
  int64_t q, j;
  for (q = 0; (q + 1) * NR <= nr; ++q) {
    for (j = 0; j < NR; ++j) dst[(q * kc + p) * NR + j] = row[q * NR + j];
  }
  if (q * NR < nr) {
    float* out = dst + (q * kc + p) * NR;
    for (j = 0; j < NR; ++j) out[j] = q * NR + j < nr ? row[q * NR + j] : 0.0f;
  }
}

/* Rows of B are (channel, ky, kx); columns are output pixels (oy, ox).
 * Each row is built whole in a buffer, then cut into the panels. */
static void pack_im2col(const void* ctx, int64_t p0, int64_t kc, int64_t j0, int64_t nr, float* dst) {
  const im2col_t* s = (const im2col_t*)ctx;
  float row[RXE_GEMM_NC];
  int64_t ci = p0 / (s->kh * s->kw), ky = p0 / s->kw % s->kh, kx = p0 % s->kw, p, j;
  for (j = 0; j < nr; j += RXE_GEMM_NC) {
    int64_t len = nr - j < RXE_GEMM_NC ? nr - j : RXE_GEMM_NC, c = ci, y = ky, x = kx;
    for (p = 0; p < kc; ++p) {
      im2col_row(s, s->x + c * s->h * s->w, y, x, (j0 + j) / s->ow, (j0 + j) % s->ow, len, row);
      scatter_row(row, len, kc, p, dst + j / NR * kc * NR);
      if (++x == s->kw) {
        x = 0;
        if (++y == s->kh) {
          y = 0;
          ++c;
        }
      }
    }
  }
}

/* 1x1, stride 1, no padding: B is the group's input, (cg, h*w) row-major. */
static void pack_pointwise(const void* ctx, int64_t p0, int64_t kc, int64_t j0, int64_t nr, float* dst) {
  const im2col_t* s = (const im2col_t*)ctx;
  int64_t p;
  for (p = 0; p < kc; ++p) scatter_row(s->x + (p0 + p) * s->h * s->w + j0, nr, kc, p, dst);
}

rxe_status_t rxe_lib_conv2d_f32(const float* x, const float* w_packed, const float* bias, float* y,
                                float* scratch, int64_t n, int64_t c, int64_t h, int64_t w, int64_t o,
                                int64_t kh, int64_t kw, int64_t oh, int64_t ow, int64_t stride_h,
                                int64_t stride_w, int64_t pad_top, int64_t pad_left, int64_t dil_h,
                                int64_t dil_w, int64_t groups, int64_t act, rxe_error_t* err) {
  rxe_gemm_t g;
  im2col_t src;
  int64_t cg, og, kg, ni, gi;
  int pointwise, in_place;
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
  pointwise = kh == 1 && kw == 1 && stride_h == 1 && stride_w == 1 && pad_top == 0 && pad_left == 0 && oh == h &&
              ow == w;
  /* B is x itself: whole panels are read in place, a last partial one packed
   * (below 4 panels, B is small and a packed copy reads faster) */
  in_place = pointwise && (h * w % NR == 0 || h * w >= 4 * NR);
  g.b_packed = NULL;
  g.b_panel_stride = in_place ? NR : 0;
  g.ldb = in_place ? h * w : NR;
  g.pack_b = pointwise ? pack_pointwise : pack_im2col;
  g.b_ctx = &src;
  g.scratch = scratch;
  g.ldc = oh * ow;
  g.col_bias = NULL;
  g.act = (int)act;
  for (ni = 0; ni < n; ++ni) {
    for (gi = 0; gi < groups; ++gi) {
      src.x = x + (ni * c + gi * cg) * h * w;
      if (in_place) g.b_packed = src.x;
      g.a_packed = w_packed + gi * ((og + RXE_GEMM_MR - 1) / RXE_GEMM_MR) * g.a_panel_stride;
      g.c = y + (ni * o + gi * og) * oh * ow;
      g.row_bias = bias ? bias + gi * og : NULL;
      rxe_gemm_run(&g);
    }
  }
  return RXE_OK;
}
