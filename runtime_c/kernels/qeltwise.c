/* int8 element-wise and pooling kernels (see relax_edge/kernels_qeltwise.h).
 * rxe_lib_qadd_s8: TFLite's add arithmetic of relax_edge/op/quant_int8.py
 * (qadd_reference) in scalar int64, and, when no shift is a left shift, in
 * vector registers: srdhm(a, q) = floor((a*q + 2^30) / 2^31) for q >= 0 (the
 * nudge and the truncating division together), from 64-bit products of the
 * even and odd lanes; rdbpot by masks and compares. Blocks of QADD_UNIT
 * elements are the thread pool's units. rxe_lib_max_pool2d_s8: per plane and
 * output row, the column maxima over the window's rows in a stack line (runs
 * of contiguous bytes, which the compiler vectorizes), then the row maxima
 * over the line (stride 1 and 2 specialized); planes are the units. */
#include "relax_edge/kernels_qeltwise.h"
#include "relax_edge/runtime.h"
#include "relax_edge/threads.h"

#if defined(__AVX512F__) && defined(__AVX512BW__)
#define QELT_AVX512 1
#include <immintrin.h>
#elif defined(__AVX2__)
#define QELT_AVX2 1
#include <immintrin.h>
#elif defined(__ARM_NEON) && defined(__aarch64__)
#define QELT_NEON 1
#include <arm_neon.h>
#endif

#define QADD_UNIT 16384      /* elements per unit of the thread pool */
#define QADD_MIN_PARALLEL 32768
#define POOL_LINE 512        /* bytes of column maxima per pass */
#define ADD_LEFT_SHIFT 20

/* requant(acc, q, shift) of op/quant_int8.requantize: acc is an int64 holding at most 2^33 in magnitude. */
static int32_t qelt_requant(int64_t acc, int32_t q, int32_t shift) {
  int left = shift > 0 ? (int)shift : 0, right = shift > 0 ? 0 : (int)-shift;
  int64_t scaled = acc * ((int64_t)1 << left), ab, nudged;
  int32_t a = (int32_t)(scaled > INT32_MAX ? INT32_MAX : scaled < INT32_MIN ? INT32_MIN : scaled);
  int32_t high, mask, rem, threshold;
  if (a == INT32_MIN && q == INT32_MIN) {
    high = INT32_MAX;
  } else {
    ab = (int64_t)a * (int64_t)q;
    nudged = ab + (ab >= 0 ? ((int64_t)1 << 30) : 1 - ((int64_t)1 << 30));
    high = (int32_t)(nudged / ((int64_t)1 << 31)); /* toward zero */
  }
  mask = (int32_t)((1u << right) - 1u);
  rem = high & mask;
  threshold = (mask >> 1) + (high < 0 ? 1 : 0);
  return (high >> right) + (rem > threshold ? 1 : 0);
}

typedef struct {
  const uint8_t *a, *b;
  uint8_t* out;
  int64_t count;
  int32_t a_zero, b_zero, a_q, a_shift, b_q, b_shift, q, shift, out_zero, act_min, act_max;
  int a_unsigned, b_unsigned, out_unsigned, vector;
} qadd_t;

static inline int32_t load_value(const uint8_t* p, int64_t i, int is_unsigned) {
  return is_unsigned ? (int32_t)p[i] : (int32_t)(int8_t)p[i];
}

static void qadd_scalar(const qadd_t* t, int64_t begin, int64_t end) {
  int64_t i;
  for (i = begin; i < end; ++i) {
    int64_t da = (int64_t)(load_value(t->a, i, t->a_unsigned) - t->a_zero) * ((int64_t)1 << ADD_LEFT_SHIFT);
    int64_t db = (int64_t)(load_value(t->b, i, t->b_unsigned) - t->b_zero) * ((int64_t)1 << ADD_LEFT_SHIFT);
    int64_t sum = (int64_t)qelt_requant(da, t->a_q, t->a_shift) + qelt_requant(db, t->b_q, t->b_shift);
    int32_t v = qelt_requant(sum, t->q, t->shift) + t->out_zero;
    t->out[i] = (uint8_t)(v < t->act_min ? t->act_min : v > t->act_max ? t->act_max : v);
  }
}

#if defined(QELT_AVX512)
/* rdbpot(srdhm(x, q), e) on 16 lanes, e >= 0 (q, e broadcast; mask = 2^e - 1). */
static inline __m512i rq16(__m512i x, __m512i q, __m128i e, __m512i mask) {
  const __m512i half = _mm512_set1_epi64((int64_t)1 << 30), one = _mm512_set1_epi32(1);
  __m512i even = _mm512_srli_epi64(_mm512_add_epi64(_mm512_mul_epi32(x, q), half), 31);
  __m512i odd = _mm512_slli_epi64(_mm512_add_epi64(_mm512_mul_epi32(_mm512_srli_epi64(x, 32), q), half), 1);
  __m512i h = _mm512_mask_blend_epi32((__mmask16)0xaaaa, even, odd), half_mask = _mm512_srli_epi32(mask, 1);
  __m512i threshold = _mm512_mask_add_epi32(half_mask, _mm512_cmplt_epi32_mask(h, _mm512_setzero_si512()),
                                            half_mask, one);
  __m512i shifted = _mm512_sra_epi32(h, e);
  return _mm512_mask_add_epi32(shifted, _mm512_cmpgt_epi32_mask(_mm512_and_si512(h, mask), threshold), shifted, one);
}

static inline __m512i load16(const uint8_t* p, int is_unsigned) {
  __m128i v = _mm_loadu_si128((const __m128i*)(const void*)p);
  return is_unsigned ? _mm512_cvtepu8_epi32(v) : _mm512_cvtepi8_epi32(v);
}

static int64_t qadd_vector(const qadd_t* t, int64_t begin, int64_t end) {
  __m512i aq = _mm512_set1_epi32(t->a_q), bq = _mm512_set1_epi32(t->b_q), q = _mm512_set1_epi32(t->q);
  __m128i ae = _mm_cvtsi32_si128(-t->a_shift), be = _mm_cvtsi32_si128(-t->b_shift), e = _mm_cvtsi32_si128(-t->shift);
  __m512i am = _mm512_set1_epi32((int32_t)((1u << -t->a_shift) - 1u));
  __m512i bm = _mm512_set1_epi32((int32_t)((1u << -t->b_shift) - 1u));
  __m512i m = _mm512_set1_epi32((int32_t)((1u << -t->shift) - 1u));
  __m512i az = _mm512_set1_epi32(t->a_zero), bz = _mm512_set1_epi32(t->b_zero), oz = _mm512_set1_epi32(t->out_zero);
  __m512i lo = _mm512_set1_epi32(t->act_min), hi = _mm512_set1_epi32(t->act_max);
  int64_t i = begin;
  for (; i + 16 <= end; i += 16) {
    __m512i sa = rq16(_mm512_slli_epi32(_mm512_sub_epi32(load16(t->a + i, t->a_unsigned), az), ADD_LEFT_SHIFT), aq,
                      ae, am);
    __m512i sb = rq16(_mm512_slli_epi32(_mm512_sub_epi32(load16(t->b + i, t->b_unsigned), bz), ADD_LEFT_SHIFT), bq,
                      be, bm);
    __m512i v = _mm512_add_epi32(rq16(_mm512_add_epi32(sa, sb), q, e, m), oz);
    v = _mm512_min_epi32(_mm512_max_epi32(v, lo), hi);
    _mm_storeu_si128((__m128i*)(void*)(t->out + i), _mm512_cvtepi32_epi8(v));
  }
  return i;
}
#elif defined(QELT_AVX2)
/* rdbpot(srdhm(x, q), e) on 8 lanes, e >= 0 (q, e broadcast; mask = 2^e - 1). */
static inline __m256i rq8(__m256i x, __m256i q, __m128i e, __m256i mask) {
  const __m256i half = _mm256_set1_epi64x((int64_t)1 << 30);
  __m256i even = _mm256_srli_epi64(_mm256_add_epi64(_mm256_mul_epi32(x, q), half), 31);
  __m256i odd = _mm256_slli_epi64(_mm256_add_epi64(_mm256_mul_epi32(_mm256_srli_epi64(x, 32), q), half), 1);
  __m256i h = _mm256_blend_epi32(even, odd, 0xaa);
  __m256i threshold = _mm256_sub_epi32(_mm256_srli_epi32(mask, 1), _mm256_cmpgt_epi32(_mm256_setzero_si256(), h));
  return _mm256_sub_epi32(_mm256_sra_epi32(h, e), _mm256_cmpgt_epi32(_mm256_and_si256(h, mask), threshold));
}

static inline __m256i load8(const uint8_t* p, int is_unsigned) {
  __m128i v = _mm_loadl_epi64((const __m128i*)(const void*)p);
  return is_unsigned ? _mm256_cvtepu8_epi32(v) : _mm256_cvtepi8_epi32(v);
}

static int64_t qadd_vector(const qadd_t* t, int64_t begin, int64_t end) {
  __m256i aq = _mm256_set1_epi32(t->a_q), bq = _mm256_set1_epi32(t->b_q), q = _mm256_set1_epi32(t->q);
  __m128i ae = _mm_cvtsi32_si128(-t->a_shift), be = _mm_cvtsi32_si128(-t->b_shift), e = _mm_cvtsi32_si128(-t->shift);
  __m256i am = _mm256_set1_epi32((int32_t)((1u << -t->a_shift) - 1u));
  __m256i bm = _mm256_set1_epi32((int32_t)((1u << -t->b_shift) - 1u));
  __m256i m = _mm256_set1_epi32((int32_t)((1u << -t->shift) - 1u));
  __m256i az = _mm256_set1_epi32(t->a_zero), bz = _mm256_set1_epi32(t->b_zero), oz = _mm256_set1_epi32(t->out_zero);
  __m256i lo = _mm256_set1_epi32(t->act_min), hi = _mm256_set1_epi32(t->act_max);
  int64_t i = begin;
  for (; i + 16 <= end; i += 16) {
    __m256i v[2];
    __m256i packed;
    int half;
    for (half = 0; half < 2; ++half) {
      int64_t at = i + 8 * half;
      __m256i sa = rq8(_mm256_slli_epi32(_mm256_sub_epi32(load8(t->a + at, t->a_unsigned), az), ADD_LEFT_SHIFT), aq,
                       ae, am);
      __m256i sb = rq8(_mm256_slli_epi32(_mm256_sub_epi32(load8(t->b + at, t->b_unsigned), bz), ADD_LEFT_SHIFT), bq,
                       be, bm);
      __m256i r = _mm256_add_epi32(rq8(_mm256_add_epi32(sa, sb), q, e, m), oz);
      v[half] = _mm256_min_epi32(_mm256_max_epi32(r, lo), hi);
    }
    /* 16 int32 in [act_min, act_max] -> 16 bytes in order */
    packed = _mm256_permute4x64_epi64(_mm256_packs_epi32(v[0], v[1]), 0xd8);
    _mm_storeu_si128((__m128i*)(void*)(t->out + i),
                     t->out_unsigned ? _mm_packus_epi16(_mm256_castsi256_si128(packed), _mm256_extracti128_si256(packed, 1))
                                     : _mm_packs_epi16(_mm256_castsi256_si128(packed), _mm256_extracti128_si256(packed, 1)));
  }
  return i;
}
#elif defined(QELT_NEON)
/* rdbpot(srdhm(x, q), e) on 4 lanes: vqrdmulh is srdhm exactly. */
static inline int32x4_t rq4(int32x4_t x, int32x4_t q, int32x4_t neg_e, int32x4_t mask) {
  int32x4_t h = vqrdmulhq_s32(x, q);
  int32x4_t threshold = vaddq_s32(vshrq_n_s32(mask, 1), vreinterpretq_s32_u32(vshrq_n_u32(vreinterpretq_u32_s32(h), 31)));
  int32x4_t up = vreinterpretq_s32_u32(vshrq_n_u32(vcgtq_s32(vandq_s32(h, mask), threshold), 31));
  return vaddq_s32(vshlq_s32(h, neg_e), up);
}

static inline int32x4_t widen4(const uint8_t* p, int is_unsigned) {
  int32_t v[4];
  int j;
  for (j = 0; j < 4; ++j) v[j] = is_unsigned ? (int32_t)p[j] : (int32_t)(int8_t)p[j];
  return vld1q_s32(v);
}

static int64_t qadd_vector(const qadd_t* t, int64_t begin, int64_t end) {
  int32x4_t aq = vdupq_n_s32(t->a_q), bq = vdupq_n_s32(t->b_q), q = vdupq_n_s32(t->q);
  int32x4_t ae = vdupq_n_s32(t->a_shift), be = vdupq_n_s32(t->b_shift), e = vdupq_n_s32(t->shift);
  int32x4_t am = vdupq_n_s32((int32_t)((1u << -t->a_shift) - 1u)), bm = vdupq_n_s32((int32_t)((1u << -t->b_shift) - 1u));
  int32x4_t m = vdupq_n_s32((int32_t)((1u << -t->shift) - 1u));
  int32x4_t az = vdupq_n_s32(t->a_zero), bz = vdupq_n_s32(t->b_zero), oz = vdupq_n_s32(t->out_zero);
  int32x4_t lo = vdupq_n_s32(t->act_min), hi = vdupq_n_s32(t->act_max);
  int64_t i = begin;
  for (; i + 4 <= end; i += 4) {
    int32x4_t sa = rq4(vshlq_n_s32(vsubq_s32(widen4(t->a + i, t->a_unsigned), az), ADD_LEFT_SHIFT), aq, ae, am);
    int32x4_t sb = rq4(vshlq_n_s32(vsubq_s32(widen4(t->b + i, t->b_unsigned), bz), ADD_LEFT_SHIFT), bq, be, bm);
    int32x4_t v = vminq_s32(vmaxq_s32(vaddq_s32(rq4(vaddq_s32(sa, sb), q, e, m), oz), lo), hi);
    int32_t r[4];
    int j;
    vst1q_s32(r, v);
    for (j = 0; j < 4; ++j) t->out[i + j] = (uint8_t)r[j];
  }
  return i;
}
#endif

static void qadd_task(void* ctx, int64_t begin, int64_t end, int thread) {
  const qadd_t* t = (const qadd_t*)ctx;
  int64_t lo = begin * QADD_UNIT, hi = end * QADD_UNIT < t->count ? end * QADD_UNIT : t->count;
  (void)thread;
#if defined(QELT_AVX512) || defined(QELT_AVX2) || defined(QELT_NEON)
  if (t->vector) lo = qadd_vector(t, lo, hi);
#endif
  qadd_scalar(t, lo, hi);
}

static rxe_status_t check_zero(const char* what, const char* name, int64_t zero, int is_unsigned, rxe_error_t* err) {
  int64_t lo = is_unsigned ? 0 : -128;
  if (zero < lo || zero > lo + 255)
    return rxe_error_set(err, RXE_ERR_INTERNAL, "%s: %s %d is outside the %s range", what, name, zero,
                         is_unsigned ? "uint8" : "int8");
  return RXE_OK;
}

static rxe_status_t check_multiplier(const char* what, int64_t q, int64_t shift, rxe_error_t* err) {
  if (q < 0 || q > INT32_MAX || shift < -31 || shift > 30)
    return rxe_error_set(err, RXE_ERR_INTERNAL, "%s: multiplier %d / shift %d outside [0, 2^31) / [-31, 30]", what,
                         q, shift);
  return RXE_OK;
}

rxe_status_t rxe_lib_qadd_s8(const void* a, const void* b, void* out, int64_t count, int64_t a_zero, int64_t b_zero,
                             int64_t a_q, int64_t a_shift, int64_t b_q, int64_t b_shift, int64_t q, int64_t shift,
                             int64_t out_zero, int64_t act_min, int64_t act_max, int64_t dtypes, rxe_error_t* err) {
  const char* what = "rxe_lib_qadd_s8";
  qadd_t t;
  rxe_status_t st;
  int64_t out_lo;
  if (count < 0) return rxe_error_set(err, RXE_ERR_SHAPE, "%s: negative count %d", what, count);
  if (dtypes < 0 || dtypes > 7) return rxe_error_set(err, RXE_ERR_INTERNAL, "%s: dtypes %d is not 0..7", what, dtypes);
  if (count == 0) return RXE_OK;
  if (!a || !b || !out) return rxe_error_set(err, RXE_ERR_NULL, "%s: a pointer argument is NULL", what);
  t.a_unsigned = (dtypes & RXE_QELT_A_UNSIGNED) != 0;
  t.b_unsigned = (dtypes & RXE_QELT_B_UNSIGNED) != 0;
  t.out_unsigned = (dtypes & RXE_QELT_OUT_UNSIGNED) != 0;
  out_lo = t.out_unsigned ? 0 : -128;
  if ((st = check_zero(what, "a_zero", a_zero, t.a_unsigned, err)) != RXE_OK) return st;
  if ((st = check_zero(what, "b_zero", b_zero, t.b_unsigned, err)) != RXE_OK) return st;
  if ((st = check_zero(what, "out_zero", out_zero, t.out_unsigned, err)) != RXE_OK) return st;
  if ((st = check_multiplier(what, a_q, a_shift, err)) != RXE_OK) return st;
  if ((st = check_multiplier(what, b_q, b_shift, err)) != RXE_OK) return st;
  if ((st = check_multiplier(what, q, shift, err)) != RXE_OK) return st;
  if (act_min < out_lo || act_max > out_lo + 255 || act_min > act_max)
    return rxe_error_set(err, RXE_ERR_INTERNAL, "%s: clamp [%d, %d] outside the output range", what, act_min,
                         act_max);
  t.a = (const uint8_t*)a;
  t.b = (const uint8_t*)b;
  t.out = (uint8_t*)out;
  t.count = count;
  t.a_zero = (int32_t)a_zero;
  t.b_zero = (int32_t)b_zero;
  t.a_q = (int32_t)a_q;
  t.a_shift = (int32_t)a_shift;
  t.b_q = (int32_t)b_q;
  t.b_shift = (int32_t)b_shift;
  t.q = (int32_t)q;
  t.shift = (int32_t)shift;
  t.out_zero = (int32_t)out_zero;
  t.act_min = (int32_t)act_min;
  t.act_max = (int32_t)act_max;
  /* no left shift: every product of the vector srdhm is exact in 64 bits, every sum in 32 */
  t.vector = a_shift <= 0 && b_shift <= 0 && shift <= 0;
  if (count < QADD_MIN_PARALLEL)
    qadd_task(&t, 0, (count + QADD_UNIT - 1) / QADD_UNIT, 0);
  else
    rxe_threads_parallel_for((count + QADD_UNIT - 1) / QADD_UNIT, qadd_task, &t);
  return RXE_OK;
}

/* ------------------------------------------------------------------ max pooling */

typedef struct {
  const uint8_t* x;
  uint8_t* y;
  int64_t h, w, kh, kw, oh, ow, sh, sw, pt, pl, dh, dw;
  int is_unsigned;
} pool_t;

/* The pooling of one plane, in the element type T (uint8_t or int8_t) with minimum LOWEST. */
#define QELT_MAX(p, q) ((p) > (q) ? (p) : (q))
#define QELT_POOL_PLANE(NAME, T, LOWEST)                                                                          \
  static void NAME(const pool_t* p, const T* src, T* dst) {                                                        \
    T line[POOL_LINE];                                                                                            \
    int64_t span_extra = (p->kw - 1) * p->dw, chunk = (POOL_LINE - 1 - span_extra) / p->sw + 1, oy, ox0, j, ky;   \
    for (oy = 0; oy < p->oh; ++oy) {                                                                              \
      T* out = dst + oy * p->ow;                                                                                  \
      for (ox0 = 0; ox0 < p->ow; ox0 += chunk) {                                                                  \
        int64_t cols = p->ow - ox0 < chunk ? p->ow - ox0 : chunk, span = (cols - 1) * p->sw + span_extra + 1;     \
        int64_t ix0 = ox0 * p->sw - p->pl, lo = ix0 < 0 ? -ix0 : 0, hi = p->w - ix0 < span ? p->w - ix0 : span;  \
        int64_t ox, kx, first = 1;                                                                                \
        if (lo > span) lo = span;                                                                                 \
        if (hi < lo) hi = lo;                                                                                     \
        for (ky = 0; ky < p->kh; ++ky) { /* line[j] = max over the window's rows of column ix0 + j */            \
          int64_t iy = oy * p->sh + ky * p->dh - p->pt;                                                           \
          const T* row;                                                                                           \
          if (iy < 0 || iy >= p->h) continue;                                                                     \
          row = src + iy * p->w + ix0;                                                                            \
          if (first) {                                                                                            \
            for (j = 0; j < lo; ++j) line[j] = LOWEST;                                                            \
            for (j = lo; j < hi; ++j) line[j] = row[j];                                                           \
            for (j = hi; j < span; ++j) line[j] = LOWEST;                                                         \
            first = 0;                                                                                            \
          } else {                                                                                                \
            for (j = lo; j < hi; ++j) line[j] = QELT_MAX(line[j], row[j]);                                        \
          }                                                                                                       \
        }                                                                                                         \
        if (first)                                                                                                \
          for (j = 0; j < span; ++j) line[j] = LOWEST;                                                            \
        if (p->sw == 1 && p->dw == 1) {                                                                           \
          for (ox = 0; ox < cols; ++ox) out[ox0 + ox] = line[ox];                                                 \
          for (kx = 1; kx < p->kw; ++kx)                                                                          \
            for (ox = 0; ox < cols; ++ox) out[ox0 + ox] = QELT_MAX(out[ox0 + ox], line[ox + kx]);                 \
        } else if (p->sw == 2 && p->dw == 1 && p->kw == 3) {                                                      \
          for (ox = 0; ox < cols; ++ox) {                                                                         \
            T m = QELT_MAX(line[2 * ox], line[2 * ox + 1]);                                                       \
            out[ox0 + ox] = QELT_MAX(m, line[2 * ox + 2]);                                                        \
          }                                                                                                       \
        } else if (p->sw == 2 && p->dw == 1 && p->kw == 2) {                                                      \
          for (ox = 0; ox < cols; ++ox) out[ox0 + ox] = QELT_MAX(line[2 * ox], line[2 * ox + 1]);                 \
        } else {                                                                                                  \
          for (ox = 0; ox < cols; ++ox) {                                                                         \
            T m = line[ox * p->sw];                                                                               \
            for (kx = 1; kx < p->kw; ++kx) m = QELT_MAX(m, line[ox * p->sw + kx * p->dw]);                        \
            out[ox0 + ox] = m;                                                                                    \
          }                                                                                                       \
        }                                                                                                         \
      }                                                                                                           \
    }                                                                                                             \
  }

QELT_POOL_PLANE(pool_plane_u8, uint8_t, 0)
QELT_POOL_PLANE(pool_plane_s8, int8_t, -128)

static void max_pool_task(void* ctx, int64_t begin, int64_t end, int thread) {
  const pool_t* p = (const pool_t*)ctx;
  int64_t plane;
  (void)thread;
  for (plane = begin; plane < end; ++plane) {
    const uint8_t* src = p->x + plane * p->h * p->w;
    uint8_t* dst = p->y + plane * p->oh * p->ow;
    if (p->is_unsigned)
      pool_plane_u8(p, src, dst);
    else
      pool_plane_s8(p, (const int8_t*)(const void*)src, (int8_t*)(void*)dst);
  }
}

rxe_status_t rxe_lib_max_pool2d_s8(const void* x, void* y, int64_t n, int64_t c, int64_t h, int64_t w, int64_t kh,
                                   int64_t kw, int64_t oh, int64_t ow, int64_t stride_h, int64_t stride_w,
                                   int64_t pad_top, int64_t pad_left, int64_t dil_h, int64_t dil_w, int64_t dtypes,
                                   rxe_error_t* err) {
  const char* what = "rxe_lib_max_pool2d_s8";
  pool_t p;
  if (n < 0 || c < 0 || h < 0 || w < 0 || kh < 1 || kw < 1 || oh < 0 || ow < 0 || stride_h < 1 || stride_w < 1 ||
      dil_h < 1 || dil_w < 1 || pad_top < 0 || pad_left < 0)
    return rxe_error_set(err, RXE_ERR_SHAPE, "%s: bad sizes (kernel %dx%d, stride %dx%d)", what, kh, kw, stride_h,
                         stride_w);
  if ((kw - 1) * dil_w >= POOL_LINE)
    return rxe_error_set(err, RXE_ERR_SHAPE, "%s: a window row of %d columns (dilation %d) is wider than %d", what,
                         kw, dil_w, (int64_t)POOL_LINE);
  if (dtypes < 0 || dtypes > 1) return rxe_error_set(err, RXE_ERR_INTERNAL, "%s: dtypes %d is not 0..1", what, dtypes);
  if (n == 0 || c == 0 || oh == 0 || ow == 0) return RXE_OK;
  if (!x || !y) return rxe_error_set(err, RXE_ERR_NULL, "%s: a pointer argument is NULL", what);
  p.x = (const uint8_t*)x;
  p.y = (uint8_t*)y;
  p.h = h;
  p.w = w;
  p.kh = kh;
  p.kw = kw;
  p.oh = oh;
  p.ow = ow;
  p.sh = stride_h;
  p.sw = stride_w;
  p.pt = pad_top;
  p.pl = pad_left;
  p.dh = dil_h;
  p.dw = dil_w;
  p.is_unsigned = dtypes == 1;
  if (n * c * oh * ow * kh * kw < 65536)
    max_pool_task(&p, 0, n * c, 0);
  else
    rxe_threads_parallel_for(n * c, max_pool_task, &p);
  return RXE_OK;
}
