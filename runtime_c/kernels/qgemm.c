/* Requantized int8 GEMM (see relax_edge/kernels_qint8.h): tiles of MR rows x
 * 8 columns (one weight panel), or with AVX-512 VNNI 8 rows x 32 columns (4
 * panels), the k loop over groups of 4 bytes, int32 sums; the column sums of
 * the packed weights and the row sums of x fold the zero points in after the
 * loop, then each output is requantized. The row blocks pass over chunks of
 * panels of about 128 KiB, so that a chunk's weights stay in the cache. */
#include "qgemm_internal.h"
#include "relax_edge/runtime.h"
#include "relax_edge/threads.h"

/* Below this many multiply-adds a GEMM runs on its caller only. */
#define QGEMM_PARALLEL_MIN_MACS 65536

#define NR RXE_QINT8_NR

#if (defined(__AVXVNNI__) || (defined(__AVX512VNNI__) && defined(__AVX512VL__))) && defined(__AVX2__)
#define QGEMM_VNNI 1
#include <immintrin.h>
#if defined(__AVX512VNNI__) && defined(__AVX512BW__) && defined(__AVX512F__) && defined(__AVX512VL__)
#define QGEMM_VNNI512 1 /* 512-bit tiles of 4 panels (32 columns), the 256-bit one for the last panels */
#endif
#if defined(__AVXVNNI__)
#define QGEMM_DPBUSD _mm256_dpbusd_avx_epi32
#else
#define QGEMM_DPBUSD _mm256_dpbusd_epi32
#endif
#elif defined(__AVX2__)
#define QGEMM_AVX2 1
#include <immintrin.h>
#elif defined(__ARM_NEON) && defined(__aarch64__) && defined(__ARM_FEATURE_DOTPROD)
#define QGEMM_SDOT 1
#include <arm_neon.h>
#elif defined(__ARM_NEON)
#define QGEMM_NEON 1
#include <arm_neon.h>
#elif defined(__ARM_FEATURE_DSP)
#define QGEMM_DSP 1
#include <arm_acle.h>
static inline uint32_t ror8(uint32_t v) { return v >> 8 | v << 24; }
#endif

#if defined(__GNUC__)
#define QGEMM_INLINE static inline __attribute__((always_inline))
#else
#define QGEMM_INLINE static inline
#endif

#if defined(__GNUC__) && !defined(__clang__)
#define QGEMM_NOCLONE static __attribute__((noclone)) /* one frame for -fstack-usage to measure */
#else
#define QGEMM_NOCLONE static
#endif

/* rows per tile: as many accumulator registers as the path keeps busy */
#if defined(QGEMM_VNNI) || defined(QGEMM_SDOT)
#define MR 8
#elif defined(QGEMM_AVX2)
#define MR 6
#else
#define MR 4
#endif

int32_t rxe_qint8_requantize(int32_t acc, int32_t q, int32_t shift) {
  int left = shift > 0 ? (int)shift : 0, right = shift > 0 ? 0 : (int)-shift;
  int64_t scaled = (int64_t)acc * ((int64_t)1 << left); /* saturated to int32, as the reference does */
  int32_t a = (int32_t)(scaled > INT32_MAX ? INT32_MAX : scaled < INT32_MIN ? INT32_MIN : scaled);
  int32_t high, mask, rem, threshold;
  if (a == INT32_MIN && q == INT32_MIN) {
    high = INT32_MAX;
  } else {
    int64_t ab = (int64_t)a * (int64_t)q;
    int64_t nudge = ab >= 0 ? ((int64_t)1 << 30) : 1 - ((int64_t)1 << 30);
    high = (int32_t)((ab + nudge) / ((int64_t)1 << 31));
  }
  mask = (int32_t)((1u << right) - 1u);
  rem = high & mask;
  threshold = (mask >> 1) + (high < 0 ? 1 : 0);
  return (high >> right) + (rem > threshold ? 1 : 0);
}

int32_t rxe_qint8_saturate(int64_t acc) {
  return (int32_t)(acc > INT32_MAX ? INT32_MAX : acc < INT32_MIN ? INT32_MIN : acc);
}

/* The 4 bytes at p as a little-endian word, bytes past `left` zero. */
static inline uint32_t load_word(const uint8_t* p, int64_t left) {
  uint32_t v = 0;
  int64_t j;
  if (left >= 4) return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
  for (j = 0; j < left; ++j) v |= (uint32_t)p[j] << (8 * j);
  return v;
}

/* acc[r][c] = sum_k x_r[k] w_c[k] over one panel (k in groups of 4). */
/* acc[r][c] = sum_k x_r[k] w_c[k] over one panel (k in groups of 4), r < nrows (MR or 1: the
 * function is inlined into both callers, the loops over rows unrolled). */
QGEMM_INLINE void tile_rows(const uint8_t* const* rows, const uint8_t* panel, const int32_t* sums, int64_t k,
                            uint32_t flip, int32_t (*acc)[NR], int nrows) {
  int64_t groups = (k + 3) / 4, g;
  int r, c;
  (void)sums; /* the column sums: for the VNNI path's unsigned operand */
#if defined(QGEMM_VNNI)
  /* vpdpbusd takes u8 x s8: the unsigned operand is x_s ^ 0x80 (the raw bytes of a uint8 x) */
  __m256i s[MR], w, xv, xor_v = _mm256_set1_epi32((int)(flip ^ 0x80808080u));
  int64_t full = k / 4;
  for (r = 0; r < nrows; ++r) s[r] = _mm256_setzero_si256();
  if (flip == 0x80808080u) {
    for (g = 0; g < full; ++g) {
      w = _mm256_loadu_si256((const __m256i*)(const void*)(panel + 32 * g));
      for (r = 0; r < nrows; ++r)
        s[r] = QGEMM_DPBUSD(s[r], _mm256_broadcastd_epi32(_mm_loadu_si32(rows[r] + 4 * g)), w);
    }
  } else {
    for (g = 0; g < full; ++g) {
      w = _mm256_loadu_si256((const __m256i*)(const void*)(panel + 32 * g));
      for (r = 0; r < nrows; ++r) {
        xv = _mm256_xor_si256(_mm256_broadcastd_epi32(_mm_loadu_si32(rows[r] + 4 * g)), xor_v);
        s[r] = QGEMM_DPBUSD(s[r], xv, w);
      }
    }
  }
  for (g = full; g < groups; ++g) { /* the last k % 4 */
    w = _mm256_loadu_si256((const __m256i*)(const void*)(panel + 32 * g));
    for (r = 0; r < nrows; ++r) {
      xv = _mm256_set1_epi32((int)(load_word(rows[r] + 4 * g, k - 4 * g) ^ flip ^ 0x80808080u));
      s[r] = QGEMM_DPBUSD(s[r], xv, w);
    }
  }
  for (r = 0; r < nrows; ++r) _mm256_storeu_si256((__m256i*)(void*)acc[r], s[r]);
  /* the unsigned operand was x + 128: take 128 * sum_k w back off */
  for (r = 0; r < nrows; ++r)
    for (c = 0; c < NR; ++c) acc[r][c] -= 128 * sums[c];
#elif defined(QGEMM_AVX2)
  __m256i s[MR][2];
  int32_t lanes[8];
  for (r = 0; r < nrows; ++r) s[r][0] = s[r][1] = _mm256_setzero_si256();
  for (g = 0; g < groups; ++g) {
    /* 4 columns x 4 k as 16 int16: products in pairs by vpmaddwd, no saturation */
    __m256i w0 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i*)(const void*)(panel + 32 * g)));
    __m256i w1 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i*)(const void*)(panel + 32 * g + 16)));
    for (r = 0; r < nrows; ++r) {
      __m256i xv = _mm256_cvtepi8_epi16(_mm_set1_epi32((int)(load_word(rows[r] + 4 * g, k - 4 * g) ^ flip)));
      s[r][0] = _mm256_add_epi32(s[r][0], _mm256_madd_epi16(w0, xv));
      s[r][1] = _mm256_add_epi32(s[r][1], _mm256_madd_epi16(w1, xv));
    }
  }
  for (r = 0; r < nrows; ++r) {
    for (c = 0; c < 2; ++c) {
      _mm256_storeu_si256((__m256i*)(void*)lanes, s[r][c]);
      acc[r][4 * c] = lanes[0] + lanes[1];
      acc[r][4 * c + 1] = lanes[2] + lanes[3];
      acc[r][4 * c + 2] = lanes[4] + lanes[5];
      acc[r][4 * c + 3] = lanes[6] + lanes[7];
    }
  }
#elif defined(QGEMM_SDOT)
  int32x4_t s[MR][2];
  for (r = 0; r < nrows; ++r) s[r][0] = s[r][1] = vdupq_n_s32(0);
  for (g = 0; g < groups; ++g) {
    int8x16_t w0 = vld1q_s8((const int8_t*)(panel + 32 * g)), w1 = vld1q_s8((const int8_t*)(panel + 32 * g + 16));
    for (r = 0; r < nrows; ++r) {
      int8x16_t xv = vreinterpretq_s8_u32(vdupq_n_u32(load_word(rows[r] + 4 * g, k - 4 * g) ^ flip));
      s[r][0] = vdotq_s32(s[r][0], w0, xv);
      s[r][1] = vdotq_s32(s[r][1], w1, xv);
    }
  }
  for (r = 0; r < nrows; ++r) {
    vst1q_s32(acc[r], s[r][0]);
    vst1q_s32(acc[r] + 4, s[r][1]);
  }
  (void)c;
#elif defined(QGEMM_NEON)
  /* vmull_s8 (exact in int16) then pairwise into int32 (vpadal): no saturation */
  int32x4_t s[MR][4];
  int32_t lanes[4];
  for (r = 0; r < nrows; ++r) s[r][0] = s[r][1] = s[r][2] = s[r][3] = vdupq_n_s32(0);
  for (g = 0; g < groups; ++g) {
    int8x16_t w0 = vld1q_s8((const int8_t*)(panel + 32 * g)), w1 = vld1q_s8((const int8_t*)(panel + 32 * g + 16));
    for (r = 0; r < nrows; ++r) {
      int8x8_t xv = vreinterpret_s8_u32(vdup_n_u32(load_word(rows[r] + 4 * g, k - 4 * g) ^ flip));
      s[r][0] = vpadalq_s16(s[r][0], vmull_s8(vget_low_s8(w0), xv));
      s[r][1] = vpadalq_s16(s[r][1], vmull_s8(vget_high_s8(w0), xv));
      s[r][2] = vpadalq_s16(s[r][2], vmull_s8(vget_low_s8(w1), xv));
      s[r][3] = vpadalq_s16(s[r][3], vmull_s8(vget_high_s8(w1), xv));
    }
  }
  for (r = 0; r < nrows; ++r) {
    for (c = 0; c < 4; ++c) {
      vst1q_s32(lanes, s[r][c]);
      acc[r][2 * c] = lanes[0] + lanes[1];
      acc[r][2 * c + 1] = lanes[2] + lanes[3];
    }
  }
#elif defined(QGEMM_DSP)
  /* CMSIS-NN's 1 x 4 inner loop: SXTB16 splits 4 bytes into the even and the
   * odd pairs of int16, SMLAD multiplies and adds a pair */
  for (r = 0; r < nrows; ++r) {
    int half;
    for (half = 0; half < 2; ++half) {
      int32_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
      const uint8_t* wp = panel + 16 * half;
      for (g = 0; g < groups; ++g, wp += 32) {
        uint32_t xw = load_word(rows[r] + 4 * g, k - 4 * g) ^ flip;
        int16x2_t xe = __sxtb16((int8x4_t)xw), xo = __sxtb16((int8x4_t)ror8(xw));
        uint32_t w;
        w = load_word(wp, 4);
        s0 = __smlad(xe, __sxtb16((int8x4_t)w), s0);
        s0 = __smlad(xo, __sxtb16((int8x4_t)ror8(w)), s0);
        w = load_word(wp + 4, 4);
        s1 = __smlad(xe, __sxtb16((int8x4_t)w), s1);
        s1 = __smlad(xo, __sxtb16((int8x4_t)ror8(w)), s1);
        w = load_word(wp + 8, 4);
        s2 = __smlad(xe, __sxtb16((int8x4_t)w), s2);
        s2 = __smlad(xo, __sxtb16((int8x4_t)ror8(w)), s2);
        w = load_word(wp + 12, 4);
        s3 = __smlad(xe, __sxtb16((int8x4_t)w), s3);
        s3 = __smlad(xo, __sxtb16((int8x4_t)ror8(w)), s3);
      }
      acc[r][4 * half] = s0;
      acc[r][4 * half + 1] = s1;
      acc[r][4 * half + 2] = s2;
      acc[r][4 * half + 3] = s3;
    }
  }
  (void)c;
#else
  int j;
  for (r = 0; r < nrows; ++r)
    for (c = 0; c < NR; ++c) acc[r][c] = 0;
  for (g = 0; g < groups; ++g) {
    const int8_t* w = (const int8_t*)(panel + 32 * g);
    for (r = 0; r < nrows; ++r) {
      uint32_t xw = load_word(rows[r] + 4 * g, k - 4 * g) ^ flip;
      int32_t xv[4];
      for (j = 0; j < 4; ++j) xv[j] = (int8_t)(uint8_t)(xw >> (8 * j));
      for (c = 0; c < NR; ++c)
        acc[r][c] += xv[0] * w[4 * c] + xv[1] * w[4 * c + 1] + xv[2] * w[4 * c + 2] + xv[3] * w[4 * c + 3];
    }
  }
#endif
}

static void tile(const uint8_t* const* rows, const uint8_t* panel, const int32_t* sums, int64_t k, uint32_t flip,
                 int32_t (*acc)[NR]) {
  tile_rows(rows, panel, sums, k, flip, acc, MR);
}

static void tile_one_row(const uint8_t* const* rows, const uint8_t* panel, const int32_t* sums, int64_t k,
                         uint32_t flip, int32_t (*acc)[NR]) {
  tile_rows(rows, panel, sums, k, flip, acc, 1);
}

static inline uint8_t requantize_out(int64_t acc, int32_t q, int32_t shift, const rxe_qgemm_t* g) {
  int32_t v = rxe_qint8_requantize(rxe_qint8_saturate(acc), q, shift) + g->out_zero;
  v = v < g->act_min ? g->act_min : v > g->act_max ? g->act_max : v;
  return (uint8_t)v;
}

#if defined(QGEMM_VNNI) || defined(QGEMM_AVX2)
#define QGEMM_VECTOR_REQUANT 1
/* out[c] = clamp(requant(acc[c] + col[c] + row, q[c], -e[c]) + out_zero) for 8 columns, no left shift
 * (e >= 0) and exact int32 sums: srdhm(a, q) = (a*q + 2^30) >> 31 (floor) for q != INT32_MIN. */
static inline void requantize_row(const int32_t* acc, const int32_t* col, int32_t row, const int32_t* q,
                                  const int32_t* e, const rxe_qgemm_t* g, int32_t* out) {
  __m256i a = _mm256_add_epi32(_mm256_add_epi32(_mm256_loadu_si256((const __m256i*)(const void*)acc),
                                                _mm256_loadu_si256((const __m256i*)(const void*)col)),
                               _mm256_set1_epi32(row));
  __m256i qv = _mm256_loadu_si256((const __m256i*)(const void*)q);
  __m256i ev = _mm256_loadu_si256((const __m256i*)(const void*)e);
  __m256i half = _mm256_set1_epi64x((int64_t)1 << 30), one = _mm256_set1_epi32(1);
  __m256i even = _mm256_srli_epi64(_mm256_add_epi64(_mm256_mul_epi32(a, qv), half), 31);
  __m256i odd = _mm256_slli_epi64(
      _mm256_add_epi64(_mm256_mul_epi32(_mm256_srli_epi64(a, 32), _mm256_srli_epi64(qv, 32)), half), 1);
  __m256i x = _mm256_blend_epi32(even, odd, 0xaa);
  __m256i mask = _mm256_sub_epi32(_mm256_sllv_epi32(one, ev), one);
  __m256i threshold = _mm256_sub_epi32(_mm256_srli_epi32(mask, 1), _mm256_cmpgt_epi32(_mm256_setzero_si256(), x));
  x = _mm256_sub_epi32(_mm256_srav_epi32(x, ev), _mm256_cmpgt_epi32(_mm256_and_si256(x, mask), threshold));
  x = _mm256_add_epi32(x, _mm256_set1_epi32(g->out_zero));
  x = _mm256_min_epi32(_mm256_max_epi32(x, _mm256_set1_epi32(g->act_min)), _mm256_set1_epi32(g->act_max));
  _mm256_storeu_si256((__m256i*)(void*)out, x);
}
#elif defined(QGEMM_SDOT) || defined(QGEMM_NEON)
#define QGEMM_VECTOR_REQUANT 1
/* The same with vqrdmulh, which is srdhm exactly (INT32_MIN * INT32_MIN saturating too). */
static inline void requantize_row(const int32_t* acc, const int32_t* col, int32_t row, const int32_t* q,
                                  const int32_t* e, const rxe_qgemm_t* g, int32_t* out) {
  int half;
  for (half = 0; half < 2; ++half) {
    int32x4_t a = vaddq_s32(vaddq_s32(vld1q_s32(acc + 4 * half), vld1q_s32(col + 4 * half)), vdupq_n_s32(row));
    int32x4_t ev = vld1q_s32(e + 4 * half), one = vdupq_n_s32(1);
    int32x4_t mask = vsubq_s32(vshlq_s32(one, ev), one), threshold, rem;
    a = vqrdmulhq_s32(a, vld1q_s32(q + 4 * half));
    rem = vandq_s32(a, mask);
    threshold = vaddq_s32(vshrq_n_s32(mask, 1), vreinterpretq_s32_u32(vshrq_n_u32(vreinterpretq_u32_s32(a), 31)));
    a = vaddq_s32(vshlq_s32(a, vnegq_s32(ev)), vreinterpretq_s32_u32(vshrq_n_u32(vcgtq_s32(rem, threshold), 31)));
    a = vaddq_s32(a, vdupq_n_s32(g->out_zero));
    a = vminq_s32(vmaxq_s32(a, vdupq_n_s32(g->act_min)), vdupq_n_s32(g->act_max));
    vst1q_s32(out + 4 * half, a);
  }
}
#endif

#if defined(QGEMM_VNNI512)
/* requantize_row's arithmetic on 16 lanes: clamp(requant(a, q, -e) + out_zero) for e >= 0. */
static inline __m512i requant16(__m512i a, __m512i qv, __m512i ev, __m512i out_zero, __m512i lo, __m512i hi) {
  __m512i half = _mm512_set1_epi64((int64_t)1 << 30), one = _mm512_set1_epi32(1);
  __m512i even = _mm512_srli_epi64(_mm512_add_epi64(_mm512_mul_epi32(a, qv), half), 31);
  __m512i odd = _mm512_slli_epi64(
      _mm512_add_epi64(_mm512_mul_epi32(_mm512_srli_epi64(a, 32), _mm512_srli_epi64(qv, 32)), half), 1);
  __m512i x = _mm512_mask_blend_epi32((__mmask16)0xaaaa, even, odd);
  __m512i mask = _mm512_sub_epi32(_mm512_sllv_epi32(one, ev), one), half_mask = _mm512_srli_epi32(mask, 1);
  __m512i threshold = _mm512_mask_add_epi32(half_mask, _mm512_cmplt_epi32_mask(x, _mm512_setzero_si512()),
                                            half_mask, one);
  __m512i shifted = _mm512_srav_epi32(x, ev);
  x = _mm512_mask_add_epi32(shifted, _mm512_cmpgt_epi32_mask(_mm512_and_si512(x, mask), threshold), shifted, one);
  x = _mm512_add_epi32(x, out_zero);
  return _mm512_min_epi32(_mm512_max_epi32(x, lo), hi);
}
#endif

void rxe_qint8_requantize_bytes(const int32_t* acc, int64_t count, int32_t offset, int32_t q, int32_t shift,
                                int32_t out_zero, int32_t act_min, int32_t act_max, uint8_t* out) {
  int64_t i = 0, j;
#if defined(QGEMM_VECTOR_REQUANT)
  if (shift <= 0 && q != INT32_MIN && offset < (1 << 30) && offset > -(1 << 30)) { /* acc + offset exact */
    rxe_qgemm_t g;
    int32_t zero[NR], qv[NR], ev[NR], v[NR];
#if defined(QGEMM_VNNI512)
    {
      __m512i q16 = _mm512_set1_epi32(q), e16 = _mm512_set1_epi32(-shift), off = _mm512_set1_epi32(offset);
      __m512i oz = _mm512_set1_epi32(out_zero), lo = _mm512_set1_epi32(act_min), hi = _mm512_set1_epi32(act_max);
      for (; i + 16 <= count; i += 16) {
        __m512i a = _mm512_add_epi32(_mm512_loadu_si512((const void*)(acc + i)), off);
        _mm_storeu_si128((__m128i*)(void*)(out + i), _mm512_cvtepi32_epi8(requant16(a, q16, e16, oz, lo, hi)));
      }
    }
#endif
    g.out_zero = out_zero;
    g.act_min = act_min;
    g.act_max = act_max;
    for (j = 0; j < NR; ++j) {
      zero[j] = 0;
      qv[j] = q;
      ev[j] = -shift;
    }
    for (; i + NR <= count; i += NR) {
      requantize_row(acc + i, zero, offset, qv, ev, &g, v);
      for (j = 0; j < NR; ++j) out[i + j] = (uint8_t)v[j];
    }
  }
#endif
  for (; i < count; ++i) {
    int32_t v = rxe_qint8_requantize(rxe_qint8_saturate((int64_t)acc[i] + offset), q, shift) + out_zero;
    out[i] = (uint8_t)(v < act_min ? act_min : v > act_max ? act_max : v);
  }
  (void)j;
}

/* Can the vector epilogue run: every shift <= 0, no multiplier INT32_MIN, and
 * |bias| + 4 * 128 * 128 * k below 2^31 (each partial sum exact in int32)? */
static int vector_epilogue_ok(const rxe_qgemm_t* g) {
#if defined(QGEMM_VECTOR_REQUANT)
  int64_t n, bound = 0;
  for (n = 0; n < g->n; ++n) {
    int64_t b = g->bias[n] < 0 ? -(int64_t)g->bias[n] : g->bias[n];
    if (g->shift[n] > 0 || g->multiplier[n] == INT32_MIN) return 0;
    bound = b > bound ? b : bound;
  }
  return bound + 65536 * g->k < INT32_MAX;
#else
  (void)g;
  return 0;
#endif
}

#if defined(QGEMM_VNNI512)
#define WIDE 4 /* panels per 512-bit tile */
/* k group g of two panels in one register: 8 columns of `lo`, then 8 of `hi`. */
QGEMM_INLINE __m512i two_panels(const uint8_t* lo, const uint8_t* hi, int64_t g) {
  return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i*)(const void*)(lo + 32 * g))),
                            _mm256_loadu_si256((const __m256i*)(const void*)(hi + 32 * g)), 1);
}

/* acc += the u8 x s8 products of a and b in groups of 4: an asm statement where GCC's builtin would copy
 * each accumulator to a new register and back every iteration. */
#if defined(__GNUC__)
#define DPBUSD512(acc, a, b) __asm__("vpdpbusd %2, %1, %0" : "+v"(acc) : "v"(a), "v"(b))
#else
#define DPBUSD512(acc, a, b) ((acc) = _mm512_dpbusd_epi32((acc), (a), (b)))
#endif

/* The 4 bytes at p broadcast to 16 lanes, xor `flip` (0 when x is uint8: then the bytes are vpdpbusd's
 * unsigned operand as they are). */
QGEMM_INLINE __m512i broadcast_word(const uint8_t* p, __m512i flip) {
  int32_t word;
  __builtin_memcpy(&word, p, 4);
  return _mm512_xor_si512(_mm512_set1_epi32(word), flip);
}

/* The sums of 4 consecutive panels (panel_bytes apart) less 128 * the column sums (the unsigned
 * operand was x + 128), stored as acc[32]. */
QGEMM_INLINE void store_wide(int32_t* acc, __m512i lo, __m512i hi, const int32_t* sums) {
  _mm512_storeu_si512((void*)acc, _mm512_sub_epi32(lo, _mm512_slli_epi32(_mm512_loadu_si512((const void*)sums), 7)));
  _mm512_storeu_si512((void*)(acc + 16),
                      _mm512_sub_epi32(hi, _mm512_slli_epi32(_mm512_loadu_si512((const void*)(sums + 16)), 7)));
}

#define QGEMM_ROW_STEP(r)                                       \
  xv = broadcast_word(x##r, xor_v);                             \
  DPBUSD512(s##r##a, xv, w0);                                   \
  DPBUSD512(s##r##b, xv, w1);                                   \
  x##r += 4

/* acc[r][0..32) = sum_k x_r[k] w_c[k] over 4 consecutive panels for the 8 rows x + r * ldx: two
 * 512-bit accumulators a row (each holding a k group of two panels), 16 independent vpdpbusd
 * chains, the row's 4 x bytes broadcast. `raw`: x is uint8 (constant after inlining). */
QGEMM_INLINE void wide8(const uint8_t* x, int64_t ldx, const uint8_t* const* panels, const int32_t* sums, int64_t k,
                        uint32_t flip, int32_t (*acc)[WIDE * NR], int raw) {
  const uint8_t *p0 = panels[0], *p1 = panels[1], *p2 = panels[2], *p3 = panels[3];
  const uint8_t *x0 = x, *x1 = x + ldx, *x2 = x + 2 * ldx, *x3 = x + 3 * ldx, *x4 = x + 4 * ldx, *x5 = x + 5 * ldx,
                *x6 = x + 6 * ldx, *x7 = x + 7 * ldx;
  __m512i xor_v = raw ? _mm512_setzero_si512() : _mm512_set1_epi32((int)(flip ^ 0x80808080u)), w0, w1, xv;
  __m512i s0a = _mm512_setzero_si512(), s0b = s0a, s1a = s0a, s1b = s0a, s2a = s0a, s2b = s0a, s3a = s0a,
          s3b = s0a, s4a = s0a, s4b = s0a, s5a = s0a, s5b = s0a, s6a = s0a, s6b = s0a, s7a = s0a, s7b = s0a;
  int64_t full = k / 4, g;
  for (g = 0; g < full; ++g) {
    w0 = two_panels(p0, p1, g);
    w1 = two_panels(p2, p3, g);
    if (raw) { /* no xor: the broadcast folds into vpdpbusd's memory operand... of the other side, so load */
      QGEMM_ROW_STEP(0); QGEMM_ROW_STEP(1); QGEMM_ROW_STEP(2); QGEMM_ROW_STEP(3);
      QGEMM_ROW_STEP(4); QGEMM_ROW_STEP(5); QGEMM_ROW_STEP(6); QGEMM_ROW_STEP(7);
    } else {
      QGEMM_ROW_STEP(0); QGEMM_ROW_STEP(1); QGEMM_ROW_STEP(2); QGEMM_ROW_STEP(3);
      QGEMM_ROW_STEP(4); QGEMM_ROW_STEP(5); QGEMM_ROW_STEP(6); QGEMM_ROW_STEP(7);
    }
  }
  if (k % 4) { /* the last k % 4: x bytes past k read as zero */
    __m512i fx = _mm512_set1_epi32((int)(flip ^ 0x80808080u));
    int64_t left = k - 4 * full;
    w0 = two_panels(p0, p1, full);
    w1 = two_panels(p2, p3, full);
#define QGEMM_ROW_TAIL(r)                                                                  \
  xv = _mm512_xor_si512(_mm512_set1_epi32((int)load_word(x##r, left)), fx);                \
  DPBUSD512(s##r##a, xv, w0);                                                             \
  DPBUSD512(s##r##b, xv, w1)
    QGEMM_ROW_TAIL(0); QGEMM_ROW_TAIL(1); QGEMM_ROW_TAIL(2); QGEMM_ROW_TAIL(3);
    QGEMM_ROW_TAIL(4); QGEMM_ROW_TAIL(5); QGEMM_ROW_TAIL(6); QGEMM_ROW_TAIL(7);
#undef QGEMM_ROW_TAIL
  }
  store_wide(acc[0], s0a, s0b, sums);
  store_wide(acc[1], s1a, s1b, sums);
  store_wide(acc[2], s2a, s2b, sums);
  store_wide(acc[3], s3a, s3b, sums);
  store_wide(acc[4], s4a, s4b, sums);
  store_wide(acc[5], s5a, s5b, sums);
  store_wide(acc[6], s6a, s6b, sums);
  store_wide(acc[7], s7a, s7b, sums);
}
#undef QGEMM_ROW_STEP

/* 8 full rows (consecutive, ldx apart). */
static void tile_wide(const uint8_t* x, int64_t ldx, const uint8_t* const* panels, const int32_t* sums, int64_t k,
                      uint32_t flip, int32_t (*acc)[WIDE * NR]) {
  if (flip == 0x80808080u)
    wide8(x, ldx, panels, sums, k, flip, acc, 1);
  else
    wide8(x, ldx, panels, sums, k, flip, acc, 0);
}

/* One row. */
static void tile_wide_one_row(const uint8_t* x, const uint8_t* const* panels, const int32_t* sums, int64_t k,
                              uint32_t flip, int32_t* acc) {
  const uint8_t *p0 = panels[0], *p1 = panels[1], *p2 = panels[2], *p3 = panels[3];
  __m512i fx = _mm512_set1_epi32((int)(flip ^ 0x80808080u)), sa = _mm512_setzero_si512(), sb = sa, xv;
  int64_t groups = (k + 3) / 4, g;
  for (g = 0; g < groups; ++g) {
    xv = _mm512_xor_si512(_mm512_set1_epi32((int)load_word(x + 4 * g, k - 4 * g)), fx);
    sa = _mm512_dpbusd_epi32(sa, xv, two_panels(p0, p1, g));
    sb = _mm512_dpbusd_epi32(sb, xv, two_panels(p2, p3, g));
  }
  store_wide(acc, sa, sb, sums);
}
#else
#define WIDE 1
#endif

/* The outputs of rows [m0, min(m0 + MR, m)) x the panel at column n0 from their sums acc (row r at
 * acc + r * stride): the zero points' terms, then the requantization. */
static void epilogue(const rxe_qgemm_t* g, int vector, const int32_t* acc, int64_t stride, int64_t m0, int64_t n0,
                     const int64_t* xsum, const int32_t* wsum) {
  int64_t c, columns = g->n - n0 < NR ? g->n - n0 : NR;
  int r;
#if defined(QGEMM_VECTOR_REQUANT)
  if (vector) {
    int32_t col[NR], q[NR], e[NR], out[NR];
    for (c = 0; c < NR; ++c) {
      int64_t n = n0 + (c < columns ? c : 0);
      col[c] = (int32_t)((int64_t)g->bias[n] - (int64_t)g->xz * wsum[n] + g->k * (int64_t)g->xz * g->wz);
      q[c] = g->multiplier[n];
      e[c] = -g->shift[n];
    }
    for (r = 0; r < MR && m0 + r < g->m; ++r) {
      uint8_t* dst = g->out + (m0 + r) * g->ldm + n0 * g->ldn;
      requantize_row(acc + r * stride, col, (int32_t)(-(int64_t)g->wz * xsum[r]), q, e, g, out);
      for (c = 0; c < columns; ++c) dst[c * g->ldn] = (uint8_t)out[c];
    }
    return;
  }
#endif
  for (c = 0; c < columns; ++c) {
    int64_t n = n0 + c;
    int64_t column = (int64_t)g->bias[n] - (int64_t)g->xz * wsum[n] + g->k * (int64_t)g->xz * g->wz;
    uint8_t* out = g->out + m0 * g->ldm + n * g->ldn;
    for (r = 0; r < MR && m0 + r < g->m; ++r)
      out[r * g->ldm] = requantize_out(acc[r * stride + c] + column - (int64_t)g->wz * xsum[r], g->multiplier[n],
                                       g->shift[n], g);
  }
  (void)vector;
}

#if defined(QGEMM_VNNI512)
/* Column c < count of 8 rows of 16 bytes (rows[r]) as 8 bytes at dst + c * ld: an 8 x 16 byte transpose by
 * unpacks. */
static inline void store_columns(const __m128i* rows, uint8_t* dst, int64_t ld, int64_t count) {
  __m128i t[8], u[8], v[8];
  int half, c;
  t[0] = _mm_unpacklo_epi8(rows[0], rows[1]);
  t[1] = _mm_unpacklo_epi8(rows[2], rows[3]);
  t[2] = _mm_unpacklo_epi8(rows[4], rows[5]);
  t[3] = _mm_unpacklo_epi8(rows[6], rows[7]);
  t[4] = _mm_unpackhi_epi8(rows[0], rows[1]);
  t[5] = _mm_unpackhi_epi8(rows[2], rows[3]);
  t[6] = _mm_unpackhi_epi8(rows[4], rows[5]);
  t[7] = _mm_unpackhi_epi8(rows[6], rows[7]);
  for (half = 0; half < 2; ++half) { /* columns 8 * half .. 8 * half + 7 */
    const __m128i* q = t + 4 * half;
    u[0] = _mm_unpacklo_epi16(q[0], q[1]); /* columns 0-3, rows 0-3 */
    u[1] = _mm_unpackhi_epi16(q[0], q[1]); /* columns 4-7, rows 0-3 */
    u[2] = _mm_unpacklo_epi16(q[2], q[3]); /* columns 0-3, rows 4-7 */
    u[3] = _mm_unpackhi_epi16(q[2], q[3]);
    v[4 * half] = _mm_unpacklo_epi32(u[0], u[2]); /* columns 0, 1 */
    v[4 * half + 1] = _mm_unpackhi_epi32(u[0], u[2]);
    v[4 * half + 2] = _mm_unpacklo_epi32(u[1], u[3]);
    v[4 * half + 3] = _mm_unpackhi_epi32(u[1], u[3]);
  }
  for (c = 0; c < count; ++c) {
    __m128i pair = v[c / 2];
    if (c % 2) pair = _mm_unpackhi_epi64(pair, pair);
    _mm_storel_epi64((__m128i*)(void*)(dst + c * ld), pair);
  }
}

/* The outputs of 8 full rows x columns [n0, n1) (up to 4 panels) from their sums acc, requantized 16 at a time
 * (the same arithmetic as requantize_row); rows of a dense output stored under a mask, the columns of a
 * convolution's (ldm == 1) 8 bytes at a time. */
static void epilogue_wide(const rxe_qgemm_t* g, int32_t (*acc)[WIDE * NR], int64_t m0, int64_t n0, int64_t n1,
                          const int64_t* xsum, const int32_t* wsum) {
  __m512i oz = _mm512_set1_epi32(g->out_zero), lo = _mm512_set1_epi32(g->act_min);
  __m512i hi = _mm512_set1_epi32(g->act_max), xz = _mm512_set1_epi32(g->xz);
  __m512i kzz = _mm512_set1_epi32((int32_t)(g->k * (int64_t)g->xz * g->wz));
  int64_t half, r, c;
  for (half = 0; half < 2; ++half) {
    int64_t c0 = n0 + 16 * half, count = n1 - c0 < 16 ? n1 - c0 : 16;
    __mmask16 valid;
    __m512i col, qv, ev;
    __m128i bytes[MR];
    if (count <= 0) break;
    valid = (__mmask16)(count == 16 ? 0xffffu : (1u << count) - 1u);
    col = _mm512_add_epi32(_mm512_sub_epi32(_mm512_maskz_loadu_epi32(valid, g->bias + c0),
                                            _mm512_mullo_epi32(xz, _mm512_maskz_loadu_epi32(valid, wsum + c0))),
                           kzz);
    qv = _mm512_maskz_loadu_epi32(valid, g->multiplier + c0);
    ev = _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_maskz_loadu_epi32(valid, g->shift + c0));
    for (r = 0; r < MR; ++r) {
      __m512i a = _mm512_add_epi32(_mm512_add_epi32(_mm512_loadu_si512((const void*)(acc[r] + 16 * half)), col),
                                   _mm512_set1_epi32((int32_t)(-(int64_t)g->wz * xsum[r])));
      bytes[r] = _mm512_cvtepi32_epi8(requant16(a, qv, ev, oz, lo, hi));
    }
    if (g->ldn == 1) {
      for (r = 0; r < MR; ++r) _mm_mask_storeu_epi8(g->out + (m0 + r) * g->ldm + c0, valid, bytes[r]);
    } else if (g->ldm == 1) {
      store_columns(bytes, g->out + m0 + c0 * g->ldn, g->ldn, count);
    } else {
      uint8_t lanes[16];
      for (r = 0; r < MR; ++r) {
        _mm_storeu_si128((__m128i*)(void*)lanes, bytes[r]);
        for (c = 0; c < count; ++c) g->out[(m0 + r) * g->ldm + (c0 + c) * g->ldn] = lanes[c];
      }
    }
  }
}
#endif

/* Panels per chunk: the row blocks run over one chunk of panels at a time, its weights (at most
 * about 128 KiB) staying in the cache while the rows pass. */
#define QGEMM_CHUNK_BYTES 131072

/* Rows [m_begin, m_end) (multiples of MR but the last) x panels [p_begin, p_end). */
QGEMM_NOCLONE void run_block(const rxe_qgemm_t* g, int vector, int64_t m_begin, int64_t m_end, int64_t p_begin,
                             int64_t p_end) {
  const int32_t* wsum = (const int32_t*)(const void*)g->w_packed;
  int64_t panels = (g->n + NR - 1) / NR, panel_bytes = (g->k + 3) / 4 * 32, m0, p, i, c0, chunk;
  const uint8_t* first_panel = g->w_packed + 4 * panels * NR;
  uint8_t flip8 = (uint8_t)(g->flip & 0xffu);
  int32_t sums[MR * WIDE * NR]; /* a tile's sums: MR rows of WIDE * NR (or of NR) */
  chunk = QGEMM_CHUNK_BYTES / panel_bytes / WIDE * WIDE;
  if (chunk < WIDE) chunk = WIDE;
  for (c0 = p_begin; c0 < p_end; c0 += chunk) {
    int64_t c1 = p_end - c0 < chunk ? p_end : c0 + chunk;
    for (m0 = m_begin; m0 < m_end; m0 += MR) {
      const uint8_t* rows[MR];
      int64_t xsum[MR];
      int r, full_rows = g->m - m0 >= MR;
      for (r = 0; r < MR; ++r) {
        int64_t row = m0 + r < g->m ? m0 + r : g->m - 1;
        rows[r] = g->x + row * g->ldx;
        xsum[r] = 0;
        if (g->wz != 0)
          for (i = 0; i < g->k; ++i) xsum[r] += (int8_t)(rows[r][i] ^ flip8);
      }
      for (p = c0; p < c1;) {
#if defined(QGEMM_VNNI512)
        if (c1 - p >= 2) { /* 2 to 4 panels (a missing one read again from the last, its sums dropped) */
          int32_t (*acc)[WIDE * NR] = (int32_t (*)[WIDE * NR])sums;
          int64_t j, count = c1 - p < WIDE ? c1 - p : WIDE, n1 = (p + count) * NR < g->n ? (p + count) * NR : g->n;
          const uint8_t* panels[WIDE];
          for (j = 0; j < WIDE; ++j) panels[j] = first_panel + (p + (j < count ? j : count - 1)) * panel_bytes;
          if (full_rows) {
            tile_wide(rows[0], g->ldx, panels, wsum + p * NR, g->k, g->flip, acc);
          } else { /* the last rows one by one */
            for (r = 0; m0 + r < g->m; ++r) tile_wide_one_row(rows[r], panels, wsum + p * NR, g->k, g->flip, acc[r]);
          }
          if (vector && full_rows)
            epilogue_wide(g, acc, m0, p * NR, n1, xsum, wsum);
          else
            for (j = 0; j < count && (p + j) * NR < g->n; ++j)
              epilogue(g, vector, acc[0] + j * NR, WIDE * NR, m0, (p + j) * NR, xsum, wsum);
          p += count;
          continue;
        }
#endif
        {
          int32_t (*acc)[NR] = (int32_t (*)[NR])sums;
          if (full_rows) {
            tile(rows, first_panel + p * panel_bytes, wsum + p * NR, g->k, g->flip, acc);
          } else { /* the last rows one by one */
            for (r = 0; m0 + r < g->m; ++r)
              tile_one_row(rows + r, first_panel + p * panel_bytes, wsum + p * NR, g->k, g->flip, acc + r);
          }
          epilogue(g, vector, acc[0], NR, m0, p * NR, xsum, wsum);
          ++p;
        }
      }
    }
  }
}

typedef struct {
  const rxe_qgemm_t* g;
  int vector;
  int by_rows; /* the units are row blocks of MR (else panels, all rows) */
} qgemm_task_t;

static void qgemm_task(void* ctx, int64_t begin, int64_t end, int thread) {
  const qgemm_task_t* t = (const qgemm_task_t*)ctx;
  const rxe_qgemm_t* g = t->g;
  (void)thread;
  if (t->by_rows) {
    run_block(g, t->vector, begin * MR, end * MR < g->m ? end * MR : g->m, 0, (g->n + NR - 1) / NR);
  } else {
    run_block(g, t->vector, 0, g->m, begin, end);
  }
}

/* Row blocks (or, with fewer row blocks than threads, panels) over the thread
 * pool: every output is computed the same way whatever the thread count. */
void rxe_qgemm_run(const rxe_qgemm_t* g) {
  qgemm_task_t t;
  int64_t row_blocks = (g->m + MR - 1) / MR, panels = (g->n + NR - 1) / NR;
  t.g = g;
  t.vector = vector_epilogue_ok(g);
  t.by_rows = row_blocks >= rxe_threads_get_count();
  if (g->m * g->n * g->k < QGEMM_PARALLEL_MIN_MACS) {
    run_block(g, t.vector, 0, g->m, 0, panels);
    return;
  }
  rxe_threads_parallel_for(t.by_rows ? row_blocks : panels, qgemm_task, &t);
}

rxe_status_t rxe_qint8_check(const char* what, int64_t k, int64_t n, const int32_t* shift, int64_t x_zero,
                             int64_t w_zero, int64_t out_zero, int64_t act_min, int64_t act_max, int64_t dtypes,
                             rxe_error_t* err) {
  int64_t x_lo = dtypes & RXE_QINT8_X_UNSIGNED ? 0 : -128, out_lo = dtypes & RXE_QINT8_OUT_UNSIGNED ? 0 : -128, i;
  if (dtypes < 0 || dtypes > 3) return rxe_error_set(err, RXE_ERR_INTERNAL, "%s: dtypes %d is not 0..3", what,
                                                     (int64_t)dtypes);
  if (k < 0 || k > RXE_QINT8_MAX_K)
    return rxe_error_set(err, RXE_ERR_SHAPE, "%s: k %d is outside [0, %d]", what, (int64_t)k,
                         (int64_t)RXE_QINT8_MAX_K);
  if (x_zero < x_lo || x_zero > x_lo + 255 || w_zero < -128 || w_zero > 127 || out_zero < out_lo ||
      out_zero > out_lo + 255)
    return rxe_error_set(err, RXE_ERR_INTERNAL, "%s: zero points x %d, w %d, out %d out of their types' range",
                         what, (int64_t)x_zero, (int64_t)w_zero, (int64_t)out_zero);
  if (act_min > act_max || act_min < out_lo || act_max > out_lo + 255)
    return rxe_error_set(err, RXE_ERR_INTERNAL, "%s: clamp [%d, %d] is not inside the output type's range", what,
                         (int64_t)act_min, (int64_t)act_max);
  for (i = 0; i < n; ++i)
    if (shift[i] < -31 || shift[i] > 30)
      return rxe_error_set(err, RXE_ERR_INTERNAL, "%s: shift[%d] = %d is outside [-31, 30]", what, (int64_t)i,
                           (int64_t)shift[i]);
  return RXE_OK;
}

rxe_status_t rxe_lib_qdense_s8(const void* x, const void* w_packed, const int32_t* bias, const int32_t* multiplier,
                               const int32_t* shift, void* out, int64_t m, int64_t n, int64_t k, int64_t x_zero,
                               int64_t w_zero, int64_t out_zero, int64_t act_min, int64_t act_max, int64_t dtypes,
                               rxe_error_t* err) {
  rxe_qgemm_t g;
  rxe_status_t st;
  if (m < 0 || n < 0) return rxe_error_set(err, RXE_ERR_SHAPE, "rxe_lib_qdense_s8: negative m %d or n %d",
                                           (int64_t)m, (int64_t)n);
  if (m == 0 || n == 0) return RXE_OK;
  if (!x || !w_packed || !bias || !multiplier || !shift || !out)
    return rxe_error_set(err, RXE_ERR_NULL, "rxe_lib_qdense_s8: a pointer argument is NULL");
  st = rxe_qint8_check("rxe_lib_qdense_s8", k, n, shift, x_zero, w_zero, out_zero, act_min, act_max, dtypes, err);
  if (st != RXE_OK) return st;
  g.x = (const uint8_t*)x;
  g.ldx = k;
  g.w_packed = (const uint8_t*)w_packed;
  g.m = m;
  g.n = n;
  g.k = k;
  g.flip = dtypes & RXE_QINT8_X_UNSIGNED ? 0x80808080u : 0u;
  g.xz = (int32_t)(dtypes & RXE_QINT8_X_UNSIGNED ? x_zero - 128 : x_zero);
  g.wz = (int32_t)w_zero;
  g.bias = bias;
  g.multiplier = multiplier;
  g.shift = shift;
  g.out = (uint8_t*)out;
  g.ldm = n;
  g.ldn = 1;
  g.out_zero = (int32_t)out_zero;
  g.act_min = (int32_t)act_min;
  g.act_max = (int32_t)act_max;
  rxe_qgemm_run(&g);
  return RXE_OK;
}
