/* Depthwise 2-D convolution (see relax_edge/kernels.h). Each output row is
 * an interior segment, whose taps are all in range (vectorized over the
 * output columns for strides 1 and 2), and border columns computed with
 * bounds checks. Rows of all planes are split over the thread pool; a row
 * is computed the same way whatever thread runs it. */
#include "relax_edge/kernels.h"
#include "relax_edge/runtime.h"
#include "relax_edge/threads.h"

#if defined(__GNUC__)
#define DW_INLINE static inline __attribute__((always_inline))
#else
#define DW_INLINE static inline
#endif

/* Below this many multiply-adds the kernel runs on its caller only. */
#define PARALLEL_MIN_MACS 32768

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#define VL 8
typedef __m256 vec_t;
#define vec_set(s) _mm256_set1_ps(s)
#define vec_load(p) _mm256_loadu_ps(p)
#define vec_store(p, v) _mm256_storeu_ps(p, v)
#define vec_fma(acc, a, b) _mm256_fmadd_ps(a, b, acc)
/* p[0], p[2], ..., p[14] (reads p[0..16)) */
static inline vec_t vec_load_even(const float* p) {
  __m256 pairs = _mm256_shuffle_ps(_mm256_loadu_ps(p), _mm256_loadu_ps(p + 8), _MM_SHUFFLE(2, 0, 2, 0));
  return _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(pairs), _MM_SHUFFLE(3, 1, 2, 0)));
}
#elif defined(__aarch64__)
#include <arm_neon.h>
#define VL 4
typedef float32x4_t vec_t;
#define vec_set(s) vdupq_n_f32(s)
#define vec_load(p) vld1q_f32(p)
#define vec_store(p, v) vst1q_f32(p, v)
#define vec_fma(acc, a, b) vfmaq_f32(acc, a, b)
#define vec_load_even(p) (vld2q_f32(p).val[0]) /* reads p[0..8) */
#endif

typedef struct {
  const float* x;
  const float* w;
  const float* bias;
  float* y;
  int64_t c, in_h, in_w, kh, kw, oh, ow, sh, sw, pt, pl, dh, dw, act;
} dw_args_t;

/* y[i] = b + sum over taps of w[ky][kx] * x0[ky*dh*in_w + i*sw + kx*dw]
 * for i in [0, count), every tap in range; `avail` columns are readable
 * from x0 on each row. Constant arguments specialize it when inlined. */
DW_INLINE void dw_segment(const float* restrict x0, int64_t in_w, const float* restrict wp, float b,
                          float* restrict y, int64_t count, int64_t avail, int64_t kh, int64_t kw, int64_t sw,
                          int64_t dh, int64_t dw) {
  int64_t i = 0, ky, kx;
#ifdef VL
  if (sw == 1 || sw == 2) {
    int64_t span = (sw == 1 ? VL : 2 * VL) + (kw - 1) * dw; /* columns a block reads from i * sw */
    for (; i + VL <= count && i * sw + span <= avail; i += VL) {
      vec_t acc = vec_set(b);
      for (ky = 0; ky < kh; ++ky) {
        const float* row = x0 + ky * dh * in_w + i * sw;
        for (kx = 0; kx < kw; ++kx) {
          vec_t xv = sw == 1 ? vec_load(row + kx * dw) : vec_load_even(row + kx * dw);
          acc = vec_fma(acc, vec_set(wp[ky * kw + kx]), xv);
        }
      }
      vec_store(y + i, acc);
    }
  }
#else
  (void)avail;
#endif
  for (; i < count; ++i) {
    const float* s = x0 + i * sw;
    float acc = b;
    for (ky = 0; ky < kh; ++ky)
      for (kx = 0; kx < kw; ++kx) acc += wp[ky * kw + kx] * s[ky * dh * in_w + kx * dw];
    y[i] = acc;
  }
}

/* One output with bounds checks (reads outside the plane are zeros). */
static float dw_point(const dw_args_t* a, const float* xp, const float* wp, float b, int64_t oy, int64_t ox) {
  float acc = b;
  int64_t ky, kx;
  for (ky = 0; ky < a->kh; ++ky) {
    int64_t iy = oy * a->sh - a->pt + ky * a->dh;
    if (iy < 0 || iy >= a->in_h) continue;
    for (kx = 0; kx < a->kw; ++kx) {
      int64_t ix = ox * a->sw - a->pl + kx * a->dw;
      if (ix >= 0 && ix < a->in_w) acc += wp[ky * a->kw + kx] * xp[iy * a->in_w + ix];
    }
  }
  return acc;
}

static void dw_interior(const dw_args_t* a, const float* x0, const float* wp, float b, float* y, int64_t count,
                        int64_t avail) {
  if (a->kh == 3 && a->kw == 3 && a->dh == 1 && a->dw == 1 && a->sw == 1)
    dw_segment(x0, a->in_w, wp, b, y, count, avail, 3, 3, 1, 1, 1);
  else if (a->kh == 3 && a->kw == 3 && a->dh == 1 && a->dw == 1 && a->sw == 2)
    dw_segment(x0, a->in_w, wp, b, y, count, avail, 3, 3, 2, 1, 1);
  else if (a->sw == 1)
    dw_segment(x0, a->in_w, wp, b, y, count, avail, a->kh, a->kw, 1, a->dh, a->dw);
  else if (a->sw == 2)
    dw_segment(x0, a->in_w, wp, b, y, count, avail, a->kh, a->kw, 2, a->dh, a->dw);
  else
    dw_segment(x0, a->in_w, wp, b, y, count, avail, a->kh, a->kw, a->sw, a->dh, a->dw);
}

static void dw_row(const dw_args_t* a, const float* xp, const float* wp, float b, float* y, int64_t oy) {
  int64_t iy = oy * a->sh - a->pt, c0 = 0, c1 = 0, ox;
  if (iy >= 0 && iy + (a->kh - 1) * a->dh < a->in_h) {
    /* interior columns: ox * sw - pl >= 0 and ox * sw - pl + (kw - 1) * dw < in_w */
    int64_t last = a->in_w - 1 - (a->kw - 1) * a->dw + a->pl;
    c0 = (a->pl + a->sw - 1) / a->sw;
    c1 = last < 0 ? 0 : last / a->sw + 1;
    c0 = c0 < a->ow ? c0 : a->ow;
    c1 = c1 < a->ow ? c1 : a->ow;
    if (c1 < c0) c1 = c0;
    if (c1 > c0)
      dw_interior(a, xp + iy * a->in_w + c0 * a->sw - a->pl, wp, b, y + c0, c1 - c0,
                  a->in_w - (c0 * a->sw - a->pl));
  }
  for (ox = 0; ox < c0; ++ox) y[ox] = dw_point(a, xp, wp, b, oy, ox);
  for (ox = c1; ox < a->ow; ++ox) y[ox] = dw_point(a, xp, wp, b, oy, ox);
  if (a->act == RXE_ACT_RELU) {
    for (ox = 0; ox < a->ow; ++ox) y[ox] = y[ox] < 0.0f ? 0.0f : y[ox];
  } else if (a->act == RXE_ACT_RELU6) {
    for (ox = 0; ox < a->ow; ++ox) y[ox] = y[ox] < 0.0f ? 0.0f : y[ox] > 6.0f ? 6.0f : y[ox];
  }
}

/* rows [begin, end) of all planes, row r = plane * oh + oy */
static void dw_rows(void* ctx, int64_t begin, int64_t end, int thread) {
  const dw_args_t* a = (const dw_args_t*)ctx;
  int64_t r;
  (void)thread;
  for (r = begin; r < end; ++r) {
    int64_t plane = r / a->oh, oy = r % a->oh, ch = plane % a->c;
    float b = a->bias != 0 ? a->bias[ch] : 0.0f;
    dw_row(a, a->x + plane * a->in_h * a->in_w, a->w + ch * a->kh * a->kw, b, a->y + (plane * a->oh + oy) * a->ow,
           oy);
  }
}

rxe_status_t rxe_lib_depthwise_conv2d_f32(const float* x, const float* w, const float* bias, float* y, int64_t n,
                                          int64_t c, int64_t h, int64_t w_, int64_t kh, int64_t kw, int64_t oh,
                                          int64_t ow, int64_t stride_h, int64_t stride_w, int64_t pad_top,
                                          int64_t pad_left, int64_t dil_h, int64_t dil_w, int64_t act,
                                          rxe_error_t* err) {
  dw_args_t a;
  int64_t rows = n * c * oh;
  if (act != RXE_ACT_NONE && act != RXE_ACT_RELU && act != RXE_ACT_RELU6)
    return rxe_error_set(err, RXE_ERR_INTERNAL,
                         "rxe_lib_depthwise_conv2d_f32: act %d is not 0 (none), 1 (relu) or 2 (relu6)", act);
  if (n < 0 || c < 0 || h < 0 || w_ < 0 || oh < 0 || ow < 0 || kh < 1 || kw < 1)
    return rxe_error_set(err, RXE_ERR_SHAPE,
                         "rxe_lib_depthwise_conv2d_f32: bad size (n %d, c %d, h %d, w %d, kh %d, kw %d, oh %d, ow %d)",
                         n, c, h, w_, kh, kw, oh, ow);
  if (stride_h < 1 || stride_w < 1 || dil_h < 1 || dil_w < 1 || pad_top < 0 || pad_left < 0)
    return rxe_error_set(err, RXE_ERR_SHAPE,
                         "rxe_lib_depthwise_conv2d_f32: bad stride (%d, %d), dilation (%d, %d) or padding (%d, %d)",
                         stride_h, stride_w, dil_h, dil_w, pad_top, pad_left);
  if (rows == 0 || ow == 0) return RXE_OK;
  if (x == 0 || w == 0 || y == 0)
    return rxe_error_set(err, RXE_ERR_NULL, "rxe_lib_depthwise_conv2d_f32: x, w or y is NULL");
  a.x = x;
  a.w = w;
  a.bias = bias;
  a.y = y;
  a.c = c;
  a.in_h = h;
  a.in_w = w_;
  a.kh = kh;
  a.kw = kw;
  a.oh = oh;
  a.ow = ow;
  a.sh = stride_h;
  a.sw = stride_w;
  a.pt = pad_top;
  a.pl = pad_left;
  a.dh = dil_h;
  a.dw = dil_w;
  a.act = act;
  if (rows * ow * kh * kw < PARALLEL_MIN_MACS)
    dw_rows(&a, 0, rows, 0);
  else
    rxe_parallel_for(rows, dw_rows, &a);
  return RXE_OK;
}
