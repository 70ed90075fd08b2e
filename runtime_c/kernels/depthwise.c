/* Depthwise 2-D convolution (see relax_edge/kernels.h). Each output row is
 * a segment of columns whose taps are all inside the input row (vectorized
 * over the columns for strides 1 and 2, with the taps of the kernel rows
 * that fall inside the input) and border columns computed with bounds
 * checks. With AVX2, 3x3 kernels of column stride 1 or 2 and dilation 1
 * take a path of their own: blocks of 8 outputs, the input columns outside
 * the row read as zeros by masked loads, no copy. Rows of all planes are
 * split over the thread pool; a row is computed the same way whatever
 * thread runs it. */
#include "relax_edge/kernels.h"
#include "relax_edge/runtime.h"
#include "relax_edge/threads.h"

#if defined(__GNUC__)
#define DW_INLINE static inline __attribute__((always_inline))
#else
#define DW_INLINE static inline
#endif

/* Below this many multiply-adds the kernel runs on its caller only (a tuning table may set it). */
#ifndef RXE_DEPTHWISE_PARALLEL_MIN_MACS
#define RXE_DEPTHWISE_PARALLEL_MIN_MACS 32768
#endif
#define PARALLEL_MIN_MACS ((int64_t)RXE_DEPTHWISE_PARALLEL_MIN_MACS)

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#define VL 8
#define VEC_MASKED_TAIL /* the last columns of a segment as one masked block */
typedef __m256 vec_t;
#define vec_set(s) _mm256_set1_ps(s)
#define vec_load(p) _mm256_loadu_ps(p)
#define vec_store(p, v) _mm256_storeu_ps(p, v)
#define vec_fma(acc, a, b) _mm256_fmadd_ps(a, b, acc)
#define vec_max(a, b) _mm256_max_ps(a, b)
#define vec_min(a, b) _mm256_min_ps(a, b)
/* the even elements of the 16 floats lo, hi */
static inline vec_t vec_even(__m256 lo, __m256 hi) {
  __m256 pairs = _mm256_shuffle_ps(lo, hi, _MM_SHUFFLE(2, 0, 2, 0));
  return _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(pairs), _MM_SHUFFLE(3, 1, 2, 0)));
}
/* p[0], p[2], ..., p[14] (reads p[0..16)) */
#define vec_load_even(p) vec_even(_mm256_loadu_ps(p), _mm256_loadu_ps((p) + 8))
/* lanes whose index first + j is below n */
static inline __m256i lanes_below(int64_t n, int first) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32((int)(n < 16 ? n : 16)),
                            _mm256_add_epi32(_mm256_set1_epi32(first), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7)));
}
#elif defined(__aarch64__)
#include <arm_neon.h>
#define VL 4
typedef float32x4_t vec_t;
#define vec_set(s) vdupq_n_f32(s)
#define vec_load(p) vld1q_f32(p)
#define vec_store(p, v) vst1q_f32(p, v)
#define vec_fma(acc, a, b) vfmaq_f32(acc, a, b)
#define vec_max(a, b) vmaxq_f32(a, b)
#define vec_min(a, b) vminq_f32(a, b)
#define vec_load_even(p) (vld2q_f32(p).val[0]) /* reads p[0..8) */
#endif

typedef struct {
  const float* x;
  const float* w;
  const float* bias;
  float* y;
  int64_t c, in_h, in_w, kh, kw, oh, ow, sh, sw, pt, pl, dh, dw, act;
  int64_t c0, c1; /* interior columns: every tap inside the input row */
  int fast3;      /* 3x3, column stride 1 or 2, dilation 1: dw3_plane */
} dw_args_t;

DW_INLINE float act_scalar(float v, int64_t act) {
  if (act != RXE_ACT_NONE) v = v < 0.0f ? 0.0f : v;
  if (act == RXE_ACT_RELU6) v = v > 6.0f ? 6.0f : v;
  return v;
}

#ifdef VL
DW_INLINE vec_t act_vec(vec_t v, int64_t act) {
  if (act != RXE_ACT_NONE) v = vec_max(v, vec_set(0.0f));
  if (act == RXE_ACT_RELU6) v = vec_min(v, vec_set(6.0f));
  return v;
}
#endif

/* y[i] = act(b + sum over taps of w[ky][kx] * x0[ky*dh*in_w + i*sw + kx*dw])
 * for i in [0, count) and ky < kh (the kernel rows inside the input), every
 * tap in range; `avail` columns are readable from x0 on each row. Constant
 * arguments specialize it when inlined. */
DW_INLINE void dw_segment(const float* restrict x0, int64_t in_w, const float* restrict wp, float b,
                          float* restrict y, int64_t count, int64_t avail, int64_t kh, int64_t kw, int64_t wstride,
                          int64_t sw, int64_t dh, int64_t dw, int64_t act) {
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
          acc = vec_fma(acc, vec_set(wp[ky * wstride + kx]), xv);
        }
      }
      vec_store(y + i, act_vec(acc, act));
    }
#ifdef VEC_MASKED_TAIL
    for (; i < count; i += VL) { /* masked loads read only the columns needed */
      int64_t rest = count - i;
      __m256i lo = lanes_below(sw == 1 ? rest : 2 * rest - 1, 0), hi = lanes_below(2 * rest - 1, 8);
      vec_t acc = vec_set(b);
      for (ky = 0; ky < kh; ++ky) {
        const float* row = x0 + ky * dh * in_w + i * sw;
        for (kx = 0; kx < kw; ++kx) {
          const float* p = row + kx * dw;
          vec_t xv = sw == 1 ? _mm256_maskload_ps(p, lo) : vec_even(_mm256_maskload_ps(p, lo),
                                                                    _mm256_maskload_ps(p + 8, hi));
          acc = vec_fma(acc, vec_set(wp[ky * wstride + kx]), xv);
        }
      }
      _mm256_maskstore_ps(y + i, lanes_below(rest, 0), act_vec(acc, act));
    }
#endif
  }
#else
  (void)avail;
#endif
  for (; i < count; ++i) {
    const float* s = x0 + i * sw;
    float acc = b;
    for (ky = 0; ky < kh; ++ky)
      for (kx = 0; kx < kw; ++kx) acc += wp[ky * wstride + kx] * s[ky * dh * in_w + kx * dw];
    y[i] = act_scalar(acc, act);
  }
}

/* One output from kernel rows [ky0, ky1) (those inside the input for input
 * row iy = oy * sh - pt); columns outside the input are skipped. */
static float dw_point(const dw_args_t* a, const float* xp, const float* wp, float b, int64_t iy, int64_t ky0,
                      int64_t ky1, int64_t ox) {
  int64_t ix = ox * a->sw - a->pl, ky, kx;
  float acc = b;
  for (ky = ky0; ky < ky1; ++ky) {
    const float* row = xp + (iy + ky * a->dh) * a->in_w;
    for (kx = 0; kx < a->kw; ++kx) {
      int64_t col = ix + kx * a->dw;
      if (col >= 0 && col < a->in_w) acc += wp[ky * a->kw + kx] * row[col];
    }
  }
  return act_scalar(acc, a->act);
}

/* dw_segment on kernel rows [0, kh) of wp, input rows `pitch` floats apart
 * for one step of the kernel; specialized for the common cases. */
static void dw_interior(const dw_args_t* a, const float* x0, int64_t pitch, int64_t dh, const float* wp, int64_t kh,
                        float b, float* y, int64_t count, int64_t avail) {
  int64_t kw = a->kw, act = a->act;
  int plain3x3 = kh == 3 && kw == 3 && dh == 1 && a->dw == 1;
  if (plain3x3 && a->sw == 1)
    dw_segment(x0, pitch, wp, b, y, count, avail, 3, 3, 3, 1, 1, 1, act);
  else if (plain3x3 && a->sw == 2)
    dw_segment(x0, pitch, wp, b, y, count, avail, 3, 3, 3, 2, 1, 1, act);
  else if (a->sw == 1)
    dw_segment(x0, pitch, wp, b, y, count, avail, kh, kw, kw, 1, dh, a->dw, act);
  else if (a->sw == 2)
    dw_segment(x0, pitch, wp, b, y, count, avail, kh, kw, kw, 2, dh, a->dw, act);
  else
    dw_segment(x0, pitch, wp, b, y, count, avail, kh, kw, kw, a->sw, dh, a->dw, act);
}

#ifdef VL
/* Rows with border columns are computed from a copy of their input rows,
 * zero-padded, when it fits in this many floats on the stack. */
#define ROW_BUFFER_FLOATS 2048

/* dst[j] = src[j - pl] for j in [0, width), zero outside [0, in_w); a
 * vector at a time where it can */
static void pad_row(const float* src, int64_t in_w, int64_t pl, float* dst, int64_t width) {
  int64_t j, col;
  for (j = 0; j < width; ++j) {
    col = j - pl;
    if (col >= 0 && col + VL <= in_w && j + VL <= width) {
      vec_store(dst + j, vec_load(src + col));
      j += VL - 1;
    } else { /* a select, not a branch: the index is clamped into the row */
      float v = src[col < 0 ? 0 : col >= in_w ? in_w - 1 : col];
      dst[j] = col >= 0 && col < in_w ? v : 0.0f;
    }
  }
}
#endif

#if defined(__AVX2__) && defined(__FMA__)
/* lanes j with 0 <= col + j < w */
DW_INLINE __m256i cols_inside(int64_t col, int64_t w) {
  __m256i idx = _mm256_add_epi32(_mm256_set1_epi32((int)col), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  return _mm256_andnot_si256(_mm256_cmpgt_epi32(_mm256_setzero_si256(), idx),
                             _mm256_cmpgt_epi32(_mm256_set1_epi32((int)w), idx));
}

/* row[col + j] for j < 8, zero where col + j is outside [0, w) when masked */
DW_INLINE __m256 load_cols(const float* row, int64_t col, int64_t w, int masked) {
  return masked ? _mm256_maskload_ps(row + col, cols_inside(col, w)) : _mm256_loadu_ps(row + col);
}

/* act(b + 3x3 taps) for outputs ox + j, j < 8, of one row: input columns
 * from start = ox * s - pl, kernel rows [k0, k1) read from r[ky], the sum
 * of each kernel row added to b in order of ky. Stride 2
 * accumulates in the lane order of _mm256_shuffle_ps (even elements of two
 * vectors: 0 2 8 10 4 6 12 14) and puts the lanes in order once at the
 * end. */
DW_INLINE __m256 dw3_block(const float* const* r, int k0, int k1, const __m256* wv, float b, int64_t start,
                           int64_t w, int s, int masked, int64_t act) {
  __m256 acc[3], sum;
  int ky;
  for (ky = k0; ky < k1; ++ky) { /* one sum per kernel row: three independent chains */
    const float* row = r[ky];
    if (s == 1) {
      acc[ky] = _mm256_mul_ps(wv[3 * ky], load_cols(row, start, w, masked));
      acc[ky] = _mm256_fmadd_ps(wv[3 * ky + 1], load_cols(row, start + 1, w, masked), acc[ky]);
      acc[ky] = _mm256_fmadd_ps(wv[3 * ky + 2], load_cols(row, start + 2, w, masked), acc[ky]);
    } else {
      __m256 lo = load_cols(row, start, w, masked), hi = load_cols(row, start + 8, w, masked);
      __m256 lo2 = load_cols(row, start + 2, w, masked), hi2 = load_cols(row, start + 10, w, masked);
      acc[ky] = _mm256_mul_ps(wv[3 * ky], _mm256_shuffle_ps(lo, hi, _MM_SHUFFLE(2, 0, 2, 0)));
      acc[ky] = _mm256_fmadd_ps(wv[3 * ky + 1], _mm256_shuffle_ps(lo, hi, _MM_SHUFFLE(3, 1, 3, 1)), acc[ky]);
      acc[ky] = _mm256_fmadd_ps(wv[3 * ky + 2], _mm256_shuffle_ps(lo2, hi2, _MM_SHUFFLE(2, 0, 2, 0)), acc[ky]);
    }
  }
  sum = _mm256_set1_ps(b);
  for (ky = k0; ky < k1; ++ky) sum = _mm256_add_ps(sum, acc[ky]);
  if (s == 2) sum = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(sum), _MM_SHUFFLE(3, 1, 2, 0)));
  return act_vec(sum, act);
}

/* v to y[0, 8) when spill (the caller rewrites what follows y[count]),
 * else to y[0, count) */
DW_INLINE void store_block(float* y, __m256 v, int64_t count, int spill) {
  if (count >= 8 || spill)
    _mm256_storeu_ps(y, v);
  else
    _mm256_maskstore_ps(y, cols_inside(0, count), v);
}

/* One output row of a 3x3 kernel, column stride s (1 or 2), dilation 1:
 * kernel rows [k0, k1) are inside the input, r[ky] is input row ky of the
 * window. Blocks whose columns all lie inside the row use plain loads; the
 * last block may write 8 floats when spill. */
DW_INLINE void dw3_row(const float* const* r, int k0, int k1, const __m256* wv, float b, float* y, int64_t ow,
                       int64_t w, int64_t pl, int s, int64_t act, int spill) {
  int64_t span = s == 1 ? 10 : 18, ox = 0; /* columns a block reads from its start */
  for (; ox < ow && ox * s < pl; ox += 8)
    store_block(y + ox, dw3_block(r, k0, k1, wv, b, ox * s - pl, w, s, 1, act), ow - ox, spill);
  for (; ox + 8 <= ow && ox * s - pl + span <= w; ox += 8)
    _mm256_storeu_ps(y + ox, dw3_block(r, k0, k1, wv, b, ox * s - pl, w, s, 0, act));
  for (; ox < ow; ox += 8)
    store_block(y + ox, dw3_block(r, k0, k1, wv, b, ox * s - pl, w, s, 1, act), ow - ox, spill);
}

/* Output rows [oy0, oy1) of one plane (y points at row oy0), column stride
 * s, in order; rows with all three kernel rows inside the input take the
 * unrolled path. A row's last block may spill over the rows after it, which
 * are written later, when at least 8 floats of them follow. */
DW_INLINE void dw3_plane_s(const dw_args_t* a, const float* xp, const float* wp, float b, float* y, int64_t oy0,
                           int64_t oy1, int s) {
  int64_t oy, h = a->in_h, w = a->in_w, ow = a->ow, pl = a->pl, act = a->act;
  const float* r[3];
  __m256 wv[9];
  int k;
  for (k = 0; k < 9; ++k) wv[k] = _mm256_set1_ps(wp[k]);
  for (oy = oy0; oy < oy1; ++oy, y += ow) {
    int64_t iy = oy * a->sh - a->pt;
    int spill = (oy1 - 1 - oy) * ow >= 8;
    if (iy >= 0 && iy + 3 <= h) {
      r[0] = xp + iy * w;
      r[1] = r[0] + w;
      r[2] = r[1] + w;
      dw3_row(r, 0, 3, wv, b, y, ow, w, pl, s, act, spill);
    } else {
      int k0 = iy >= 0 ? 0 : iy <= -3 ? 3 : (int)-iy, k1 = h - iy >= 3 ? 3 : h - iy <= 0 ? 0 : (int)(h - iy);
      if (k1 < k0) k1 = k0;
      for (k = k0; k < k1; ++k) r[k] = xp + (iy + k) * w;
      dw3_row(r, k0, k1, wv, b, y, ow, w, pl, s, act, spill);
    }
  }
}

static void dw3_plane(const dw_args_t* a, const float* xp, const float* wp, float b, float* y, int64_t oy0,
                      int64_t oy1) {
  if (a->sw == 1)
    dw3_plane_s(a, xp, wp, b, y, oy0, oy1, 1);
  else
    dw3_plane_s(a, xp, wp, b, y, oy0, oy1, 2);
}
#define HAVE_DW3 1
#endif

static void dw_row(const dw_args_t* a, const float* xp, const float* wp, float b, float* y, int64_t oy) {
  int64_t iy = oy * a->sh - a->pt, below = a->in_h - 1 - iy, ky0, ky1, c0 = a->c0, c1 = a->c1, ox;
  /* kernel rows inside the input: iy + ky * dh in [0, in_h) for ky in [ky0, ky1) */
  ky0 = iy >= 0 ? 0 : (-iy + a->dh - 1) / a->dh;
  ky1 = below >= (a->kh - 1) * a->dh ? a->kh : below < 0 ? 0 : below / a->dh + 1;
  if (ky1 < ky0) ky1 = ky0;
#ifdef VL
  if (c0 > 0 || c1 < a->ow) {
    int64_t width = (a->ow - 1) * a->sw + (a->kw - 1) * a->dw + 1, k;
    if ((ky1 - ky0) * width <= ROW_BUFFER_FLOATS) {
      float rows[ROW_BUFFER_FLOATS];
      for (k = ky0; k < ky1; ++k)
        pad_row(xp + (iy + k * a->dh) * a->in_w, a->in_w, a->pl, rows + (k - ky0) * width, width);
      dw_interior(a, rows, width, 1, wp + ky0 * a->kw, ky1 - ky0, b, y, a->ow, width);
      return;
    }
  }
#endif
  if (c1 > c0)
    dw_interior(a, xp + (iy + ky0 * a->dh) * a->in_w + c0 * a->sw - a->pl, a->in_w, a->dh, wp + ky0 * a->kw,
                ky1 - ky0, b, y + c0, c1 - c0, a->in_w - (c0 * a->sw - a->pl));
  for (ox = 0; ox < c0; ++ox) y[ox] = dw_point(a, xp, wp, b, iy, ky0, ky1, ox);
  for (ox = c1; ox < a->ow; ++ox) y[ox] = dw_point(a, xp, wp, b, iy, ky0, ky1, ox);
}

/* rows [begin, end) of all planes, row r = plane * oh + oy */
static void dw_rows(void* ctx, int64_t begin, int64_t end, int thread) {
  const dw_args_t* a = (const dw_args_t*)ctx;
  int64_t r = begin, plane = begin / a->oh, oy = begin % a->oh, ch = plane % a->c, stop, k;
  (void)thread;
  while (r < end) {
    const float *xp = a->x + plane * a->in_h * a->in_w, *wp = a->w + ch * a->kh * a->kw;
    float b = a->bias != 0 ? a->bias[ch] : 0.0f;
    stop = end - r < a->oh - oy ? oy + (end - r) : a->oh; /* rows [oy, stop) of this plane */
#ifdef HAVE_DW3
    if (a->fast3)
      dw3_plane(a, xp, wp, b, a->y + r * a->ow, oy, stop);
    else
#endif
      for (k = oy; k < stop; ++k) dw_row(a, xp, wp, b, a->y + (r + k - oy) * a->ow, k);
    r += stop - oy;
    oy = 0;
    ++plane;
    ch = ch + 1 == a->c ? 0 : ch + 1;
  }
}

rxe_status_t rxe_lib_depthwise_conv2d_f32(const float* x, const float* w, const float* bias, float* y, int64_t n,
                                          int64_t c, int64_t h, int64_t w_, int64_t kh, int64_t kw, int64_t oh,
                                          int64_t ow, int64_t stride_h, int64_t stride_w, int64_t pad_top,
                                          int64_t pad_left, int64_t dil_h, int64_t dil_w, int64_t act,
                                          rxe_error_t* err) {
  dw_args_t a;
  int64_t rows = n * c * oh, last;
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
  a.fast3 = kh == 3 && kw == 3 && dil_h == 1 && dil_w == 1 && (stride_w == 1 || stride_w == 2);
  /* interior columns: ox * sw - pl >= 0 and ox * sw - pl + (kw - 1) * dw < w */
  last = w_ - 1 - (kw - 1) * dil_w + pad_left;
  a.c0 = (pad_left + stride_w - 1) / stride_w;
  a.c0 = a.c0 < ow ? a.c0 : ow;
  a.c1 = last < 0 ? 0 : last / stride_w + 1;
  a.c1 = a.c1 < ow ? a.c1 : ow;
  a.c1 = a.c1 > a.c0 ? a.c1 : a.c0;
  if (rows * ow * kh * kw < PARALLEL_MIN_MACS)
    dw_rows(&a, 0, rows, 0);
  else
    rxe_threads_parallel_for(rows, dw_rows, &a);
  return RXE_OK;
}
