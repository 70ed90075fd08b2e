/* Requantized int8 GEMM (see relax_edge/kernels_qint8.h): tiles of MR rows x
 * 8 columns (one weight panel), or with AVX-512 VNNI (and AMX, where the CPU
 * and kernel allow it) 8 rows x 32 columns (4 panels), the k loop over groups of 4 bytes, int32 sums; the column sums of
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

/* acc * q * 2^(shift - 31) rounded once, half to even: the product is exact in int64 (|acc|, |q| <= 2^31:
 * at most 2^62 in magnitude) and so is the right shift t = 31 - shift in [1, 62]; the result saturates to int32
 * (a shift > 0, a multiplier >= 1, can leave it). Shifts the kernels refuse: 0 below -31 (|acc * q| / 2^63 is
 * at most 1/2), saturated above 30. Right shifts of negative values are arithmetic (floor), as on every
 * compiler these kernels support. */
int32_t rxe_qint8_requantize(int32_t acc, int32_t q, int32_t shift) {
  int64_t p = (int64_t)acc * (int64_t)q, low;
  uint64_t rem, half;
  int t;
  if (shift < -31) return 0;
  if (shift > 30) return p > 0 ? INT32_MAX : p < 0 ? INT32_MIN : 0;
  if (shift <= 0 && q != INT32_MIN) {
    /* t = 31 + e, e = -shift in [0, 31], in 32-bit steps (one multiply-long on a 32-bit core): h = floor(p /
     * 2^31) fits int32 (|p| < 2^62), f its 31 bits below; the result floor(h / 2^e) = low, plus one when
     * rem + f / 2^31 (rem = h mod 2^e) is above half of 2^e, or at it and low is odd. */
    int e = -(int)shift;
    int32_t h = (int32_t)(p >> 31), low32 = h >> e;
    uint32_t f = (uint32_t)p & 0x7fffffffu, odd = (uint32_t)low32 & 1u;
    uint32_t rem32 = (uint32_t)h & ((1u << e) - 1u);
    uint32_t half32 = e == 0 ? 0 : 1u << (e - 1);
    int up = e == 0 ? f + odd > (1u << 30) : rem32 > half32 || (rem32 == half32 && (f != 0 || odd));
    return rxe_qint8_saturate((int64_t)low32 + up);
  }
  t = 31 - (int)shift;
  low = p >> t;
  rem = (uint64_t)p & (((uint64_t)1 << t) - 1u);
  half = (uint64_t)1 << (t - 1);
  return rxe_qint8_saturate(low + (rem > half || (rem == half && ((uint64_t)low & 1u)) ? 1 : 0));
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

#if defined(QGEMM_DSP)
/* The word at p (any alignment: the M-profile LDR takes unaligned addresses). */
static inline uint32_t dsp_word(const uint8_t* p) {
  uint32_t v;
  __builtin_memcpy(&v, p, 4);
  return v;
}

/* Bytes 1 and 3 of v as an int16 pair: SXTB16 with its operand rotated, one instruction (GCC would rotate
 * first). */
static inline int16x2_t dsp_odd(uint32_t v) {
  int16x2_t r;
  __asm__("sxtb16 %0, %1, ror #8" : "=r"(r) : "r"(v));
  return r;
}

/* Column c's sums s0c (and s1c) += its products with the split x words (column c's word at wp + 4c):
 * SXTB16 splits a word into its even and its odd bytes as int16 pairs, the same split for x and w, so
 * SMLAD adds the matching products two at a time. */
#define QGEMM_DSP_COLUMN(c)                                    \
  w = dsp_word(wp + 4 * (c));                                  \
  we = __sxtb16((int8x4_t)w);                                  \
  wo = dsp_odd(w);                                             \
  s0##c = __smlad(xe0, we, __smlad(xo0, wo, s0##c));           \
  if (nrows == 2) s1##c = __smlad(xe1, we, __smlad(xo1, wo, s1##c))

/* One k group: x0's word (and x1's), then the 2 columns. */
#define QGEMM_DSP_GROUP(word0, word1) \
  u = (word0) ^ flip;                 \
  xe0 = __sxtb16((int8x4_t)u);        \
  xo0 = dsp_odd(u);                   \
  if (nrows == 2) {                   \
    u = (word1) ^ flip;               \
    xe1 = __sxtb16((int8x4_t)u);      \
    xo1 = dsp_odd(u);                 \
  }                                   \
  QGEMM_DSP_COLUMN(0);                \
  QGEMM_DSP_COLUMN(1)

/* a0[c], a1[c] (c < 2) = the sums of rows x0, x1 (x1 unused for nrows 1) with 2 columns of a panel (the
 * first one's group g at wp + 32 g): a tile of 2 rows x 2 columns, its 4 int32 sums, the split x words
 * and w's in registers (14 with the pointers: no spills), the k loop over whole groups, then the last
 * k % 4 (x bytes past k meet zero weights). Per group: 2 x 3 instructions to load and split x, 2 x 3 for
 * w, 8 SMLAD and the loop's 3, for 16 multiply-adds. flip is a constant where this is inlined. */
QGEMM_INLINE void dsp_rows(const uint8_t* x0, const uint8_t* x1, const uint8_t* wp, int64_t k, uint32_t flip,
                           int32_t* a0, int32_t* a1, int nrows) {
  int32_t s00 = 0, s01 = 0, s10 = 0, s11 = 0;
  int16x2_t xe0, xo0, xe1 = 0, xo1 = 0, we, wo;
  uint32_t u, w;
  const uint8_t* end = x0 + (k & ~(int64_t)3);
  for (; x0 < end; x0 += 4, x1 += 4, wp += 32) {
    QGEMM_DSP_GROUP(dsp_word(x0), dsp_word(x1));
  }
  if (k & 3) {
    QGEMM_DSP_GROUP(load_word(x0, k & 3), load_word(x1, k & 3));
  }
  a0[0] = s00;
  a0[1] = s01;
  if (nrows == 2) {
    a1[0] = s10;
    a1[1] = s11;
  }
}
#undef QGEMM_DSP_GROUP
#undef QGEMM_DSP_COLUMN

/* The panel's 8 columns for rows x0, x1 (nrows 2) or x0 (nrows 1), 2 columns at a time. */
QGEMM_INLINE void dsp_panel(const uint8_t* x0, const uint8_t* x1, const uint8_t* panel, int64_t k, uint32_t flip,
                            int32_t* a0, int32_t* a1, int nrows) {
  int c;
  for (c = 0; c < NR; c += 2) dsp_rows(x0, x1, panel + 4 * c, k, flip, a0 + c, a1 + c, nrows);
}

/* The same with flip a constant (no register for it in the k loop). */
QGEMM_INLINE void dsp_tile(const uint8_t* x0, const uint8_t* x1, const uint8_t* panel, int64_t k, uint32_t flip,
                           int32_t* a0, int32_t* a1, int nrows) {
  if (flip)
    dsp_panel(x0, x1, panel, k, 0x80808080u, a0, a1, nrows);
  else
    dsp_panel(x0, x1, panel, k, 0, a0, a1, nrows);
}
#endif

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
  /* rows in pairs (one for an odd last) */
  for (r = 0; r + 2 <= nrows; r += 2) dsp_tile(rows[r], rows[r + 1], panel, k, flip, acc[r], acc[r + 1], 2);
  if (r < nrows) dsp_tile(rows[r], rows[r], panel, k, flip, acc[r], acc[r], 1);
  (void)c;
  (void)g;
  (void)groups;
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
  int64_t v = (int64_t)rxe_qint8_requantize(rxe_qint8_saturate(acc), q, shift) + g->out_zero;
  v = v < g->act_min ? g->act_min : v > g->act_max ? g->act_max : v;
  return (uint8_t)v;
}

/* The vector requantizations: columns with shift <= 0 (t = 31 - shift in [31, 62]), q != INT32_MIN and an
 * exact int32 sum a, so that the rounded a * q / 2^t fits int32. Each lane forms the 64-bit product p = a * q
 * (|p| < 2^62), adds 2^(t-1) - 1 and bit t of p (the parity of floor(p / 2^t): a tie then rounds to even) and
 * takes floor(/ 2^t): rxe_qint8_requantize's result. The clamp runs before out_zero is added (to
 * [act_min - out_zero, act_max - out_zero]), so that nothing overflows. */
#if defined(QGEMM_VNNI) || defined(QGEMM_AVX2)
#define QGEMM_VECTOR_REQUANT 1
/* 8 columns' constants: q of the even columns (0, 2, 4, 6) in the 64-bit lanes' low halves and of the odd ones;
 * t of each as a 64-bit count; round = 2^62 + 2^(t-1) - 1 (AVX2 has no 64-bit arithmetic shift: the value
 * biased by 2^62 is non-negative, below 2^64, and shifted logically, then 2^(62-t) taken off). */
typedef struct {
  __m256i q, q_odd, t_even, t_odd, round_even, round_odd, unbias, lo, hi, zero;
} rq8_t;

static inline rq8_t rq8_setup(const int32_t* q, const int32_t* shift, int32_t out_zero, int32_t act_min,
                              int32_t act_max) {
  rq8_t c;
  __m256i t = _mm256_sub_epi32(_mm256_set1_epi32(31), _mm256_loadu_si256((const __m256i*)(const void*)shift));
  __m256i one = _mm256_set1_epi64x(1), base = _mm256_set1_epi64x(((int64_t)1 << 62) - 1);
  c.q = _mm256_loadu_si256((const __m256i*)(const void*)q);
  c.q_odd = _mm256_srli_epi64(c.q, 32);
  c.t_even = _mm256_and_si256(t, _mm256_set1_epi64x(0xffffffff));
  c.t_odd = _mm256_srli_epi64(t, 32);
  c.round_even = _mm256_add_epi64(base, _mm256_sllv_epi64(one, _mm256_sub_epi64(c.t_even, one)));
  c.round_odd = _mm256_add_epi64(base, _mm256_sllv_epi64(one, _mm256_sub_epi64(c.t_odd, one)));
  c.unbias = _mm256_sllv_epi32(_mm256_set1_epi32(1), _mm256_sub_epi32(_mm256_set1_epi32(62), t)); /* mod 2^32 */
  c.lo = _mm256_set1_epi32(act_min - out_zero);
  c.hi = _mm256_set1_epi32(act_max - out_zero);
  c.zero = _mm256_set1_epi32(out_zero);
  return c;
}

/* clamp(requant(a) + out_zero) of 8 lanes. */
static inline __m256i rq8_apply(__m256i a, const rq8_t* c) {
  __m256i one = _mm256_set1_epi64x(1), x;
  __m256i pe = _mm256_mul_epi32(a, c->q), po = _mm256_mul_epi32(_mm256_srli_epi64(a, 32), c->q_odd);
  pe = _mm256_add_epi64(_mm256_add_epi64(pe, c->round_even), _mm256_and_si256(_mm256_srlv_epi64(pe, c->t_even), one));
  po = _mm256_add_epi64(_mm256_add_epi64(po, c->round_odd), _mm256_and_si256(_mm256_srlv_epi64(po, c->t_odd), one));
  pe = _mm256_srlv_epi64(pe, c->t_even);
  po = _mm256_slli_epi64(_mm256_srlv_epi64(po, c->t_odd), 32);
  x = _mm256_sub_epi32(_mm256_blend_epi32(pe, po, 0xaa), c->unbias);
  x = _mm256_min_epi32(_mm256_max_epi32(x, c->lo), c->hi);
  return _mm256_add_epi32(x, c->zero);
}

/* out[c] = clamp(requant(acc[c] + col[c] + row) + out_zero) for 8 columns. */
static inline void requantize_row(const int32_t* acc, const int32_t* col, int32_t row, const rq8_t* c,
                                  int32_t* out) {
  __m256i a = _mm256_add_epi32(_mm256_add_epi32(_mm256_loadu_si256((const __m256i*)(const void*)acc),
                                                _mm256_loadu_si256((const __m256i*)(const void*)col)),
                               _mm256_set1_epi32(row));
  _mm256_storeu_si256((__m256i*)(void*)out, rq8_apply(a, c));
}
#elif defined(QGEMM_SDOT) || defined(QGEMM_NEON)
#define QGEMM_VECTOR_REQUANT 1
/* 8 columns' constants: q, and -t as 64-bit shift counts (vshl by -t: floor(/ 2^t); vrshl by -t: floor((v +
 * 2^(t-1)) / 2^t), computed without overflow). */
typedef struct {
  int32x4_t q[2], lo, hi, zero;
  int64x2_t neg_t[4];
} rq8_t;

static inline rq8_t rq8_setup(const int32_t* q, const int32_t* shift, int32_t out_zero, int32_t act_min,
                              int32_t act_max) {
  rq8_t c;
  int half;
  for (half = 0; half < 2; ++half) {
    int32x4_t n = vsubq_s32(vld1q_s32(shift + 4 * half), vdupq_n_s32(31));
    c.q[half] = vld1q_s32(q + 4 * half);
    c.neg_t[2 * half] = vmovl_s32(vget_low_s32(n));
    c.neg_t[2 * half + 1] = vmovl_s32(vget_high_s32(n));
  }
  c.lo = vdupq_n_s32(act_min - out_zero);
  c.hi = vdupq_n_s32(act_max - out_zero);
  c.zero = vdupq_n_s32(out_zero);
  return c;
}

/* round half to even of p / 2^t: p - 1 + (bit t of p), then the rounding shift. */
static inline int32x2_t rq_lanes(int64x2_t p, int64x2_t neg_t) {
  int64x2_t not_odd = vbicq_s64(vdupq_n_s64(1), vshlq_s64(p, neg_t));
  return vmovn_s64(vrshlq_s64(vsubq_s64(p, not_odd), neg_t));
}

/* out[c] = clamp(requant(acc[c] + col[c] + row) + out_zero) for 8 columns. */
static inline void requantize_row(const int32_t* acc, const int32_t* col, int32_t row, const rq8_t* c,
                                  int32_t* out) {
  int half;
  for (half = 0; half < 2; ++half) {
    int32x4_t a = vaddq_s32(vaddq_s32(vld1q_s32(acc + 4 * half), vld1q_s32(col + 4 * half)), vdupq_n_s32(row));
    int32x4_t q = c->q[half], x;
    x = vcombine_s32(rq_lanes(vmull_s32(vget_low_s32(a), vget_low_s32(q)), c->neg_t[2 * half]),
                     rq_lanes(vmull_s32(vget_high_s32(a), vget_high_s32(q)), c->neg_t[2 * half + 1]));
    x = vminq_s32(vmaxq_s32(x, c->lo), c->hi);
    vst1q_s32(out + 4 * half, vaddq_s32(x, c->zero));
  }
}
#endif

#if defined(QGEMM_VNNI512)
/* The same on 16 lanes with AVX-512's 64-bit arithmetic shift (no bias): round = 2^(t-1) - 1, bit t of p
 * tested into a mask that adds the 1, and the two halves' low words interleaved by one permute. */
typedef struct {
  __m512i q, q_odd, t_even, t_odd, bit_even, bit_odd, round_even, round_odd, lo, hi, zero, interleave;
} rq16_t;

static inline rq16_t rq16_setup(__m512i q, __m512i shift, int32_t out_zero, int32_t act_min, int32_t act_max) {
  rq16_t c;
  __m512i t = _mm512_sub_epi32(_mm512_set1_epi32(31), shift), one = _mm512_set1_epi64(1);
  c.q = q;
  c.q_odd = _mm512_srli_epi64(q, 32);
  c.t_even = _mm512_and_si512(t, _mm512_set1_epi64(0xffffffff));
  c.t_odd = _mm512_srli_epi64(t, 32);
  c.bit_even = _mm512_sllv_epi64(one, c.t_even);
  c.bit_odd = _mm512_sllv_epi64(one, c.t_odd);
  c.round_even = _mm512_sub_epi64(_mm512_srli_epi64(c.bit_even, 1), one);
  c.round_odd = _mm512_sub_epi64(_mm512_srli_epi64(c.bit_odd, 1), one);
  c.lo = _mm512_set1_epi32(act_min - out_zero);
  c.hi = _mm512_set1_epi32(act_max - out_zero);
  c.zero = _mm512_set1_epi32(out_zero);
  c.interleave = _mm512_set_epi32(30, 14, 28, 12, 26, 10, 24, 8, 22, 6, 20, 4, 18, 2, 16, 0);
  return c;
}

static inline __m512i requant16(__m512i a, const rq16_t* c) {
  __m512i one = _mm512_set1_epi64(1);
  __m512i pe = _mm512_mul_epi32(a, c->q), po = _mm512_mul_epi32(_mm512_srli_epi64(a, 32), c->q_odd);
  __m512i se = _mm512_add_epi64(pe, c->round_even), so = _mm512_add_epi64(po, c->round_odd);
  se = _mm512_srav_epi64(_mm512_mask_add_epi64(se, _mm512_test_epi64_mask(pe, c->bit_even), se, one), c->t_even);
  so = _mm512_srav_epi64(_mm512_mask_add_epi64(so, _mm512_test_epi64_mask(po, c->bit_odd), so, one), c->t_odd);
  se = _mm512_permutex2var_epi32(se, c->interleave, so); /* lane 2j: se's qword j, 2j + 1: so's */
  return _mm512_add_epi32(_mm512_min_epi32(_mm512_max_epi32(se, c->lo), c->hi), c->zero);
}
#endif

void rxe_qint8_requantize_bytes(const int32_t* acc, int64_t count, int32_t offset, int32_t q, int32_t shift,
                                int32_t out_zero, int32_t act_min, int32_t act_max, uint8_t* out) {
  int64_t i = 0, j;
#if defined(QGEMM_VECTOR_REQUANT)
  if (shift <= 0 && shift >= -31 && q != INT32_MIN && offset < (1 << 30) && offset > -(1 << 30)) {
    int32_t zero[NR], qv[NR], sv[NR], v[NR];
    rq8_t c;
#if defined(QGEMM_VNNI512)
    {
      rq16_t c16 = rq16_setup(_mm512_set1_epi32(q), _mm512_set1_epi32(shift), out_zero, act_min, act_max);
      __m512i off = _mm512_set1_epi32(offset);
      for (; i + 16 <= count; i += 16) {
        __m512i a = _mm512_add_epi32(_mm512_loadu_si512((const void*)(acc + i)), off);
        _mm_storeu_si128((__m128i*)(void*)(out + i), _mm512_cvtepi32_epi8(requant16(a, &c16)));
      }
    }
#endif
    for (j = 0; j < NR; ++j) {
      zero[j] = 0;
      qv[j] = q;
      sv[j] = shift;
    }
    c = rq8_setup(qv, sv, out_zero, act_min, act_max);
    for (; i + NR <= count; i += NR) {
      requantize_row(acc + i, zero, offset, &c, v);
      for (j = 0; j < NR; ++j) out[i + j] = (uint8_t)v[j];
    }
  }
#endif
  for (; i < count; ++i) {
    int64_t v = (int64_t)rxe_qint8_requantize(rxe_qint8_saturate((int64_t)acc[i] + offset), q, shift) + out_zero;
    out[i] = (uint8_t)(v < act_min ? act_min : v > act_max ? act_max : v);
  }
  (void)j;
}

void rxe_qint8_requantize_lanes16(const int32_t* acc, int64_t count, const int32_t* offset, const int32_t* q,
                                  const int32_t* shift, int32_t out_zero, int32_t act_min, int32_t act_max,
                                  uint8_t* out) {
  int64_t p;
  int l;
#if defined(QGEMM_VNNI512)
  int vector = 1;
  for (l = 0; l < 16; ++l)
    if (shift[l] > 0 || shift[l] < -31 || q[l] == INT32_MIN || offset[l] >= (1 << 30) || offset[l] <= -(1 << 30))
      vector = 0;
  if (vector) {
    rq16_t c = rq16_setup(_mm512_loadu_si512((const void*)q), _mm512_loadu_si512((const void*)shift), out_zero,
                          act_min, act_max);
    __m512i off = _mm512_loadu_si512((const void*)offset);
    for (p = 0; p < count; ++p) {
      __m512i a = _mm512_add_epi32(_mm512_loadu_si512((const void*)(acc + 16 * p)), off);
      _mm_storeu_si128((__m128i*)(void*)(out + 16 * p), _mm512_cvtepi32_epi8(requant16(a, &c)));
    }
    return;
  }
#endif
  for (p = 0; p < count; ++p)
    for (l = 0; l < 16; ++l) {
      int64_t v = (int64_t)rxe_qint8_requantize(rxe_qint8_saturate((int64_t)acc[16 * p + l] + offset[l]), q[l],
                                                shift[l]) + out_zero;
      out[16 * p + l] = (uint8_t)(v < act_min ? act_min : v > act_max ? act_max : v);
    }
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

#if defined(__AMX_TILE__) && defined(__AMX_INT8__) && defined(__linux__) && defined(__x86_64__)
#define QGEMM_AMX 1
/* AMX (tdpbusd / tdpbssd on tile registers) for the 8-row x 4-panel tile when k >= 64: each panel's
 * 16 groups of a 64-byte k step are one B tile as packed (16 rows of 32 bytes), so no weight is repacked.
 * Tiles: 0-3 the sums of the 4 panels (8 rows x 8 int32), 4 the x rows (8 x 64 bytes), 5 and 6 panels.
 * Linux hands out the tile state only after arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA): asked once
 * per process, the VNNI tile taken when it is refused (an older kernel, a CPU without AMX). */
static const struct {
  uint8_t palette, start_row, reserved[14];
  uint16_t colsb[16];
  uint8_t rows[16];
} amx_config = {1, 0, {0}, {32, 32, 32, 32, 64, 32, 32}, {8, 8, 8, 8, 8, 16, 16}};

static int amx_permission; /* 0: not asked yet, 1: granted, -1: refused */

int rxe_qint8_amx_enabled(void) {
  int state = __atomic_load_n(&amx_permission, __ATOMIC_ACQUIRE);
  if (state == 0) {
    long ret = 158; /* SYS_arch_prctl (ARCH_REQ_XCOMP_PERM = 0x1023, XFEATURE_XTILEDATA = 18) */
    __asm__ volatile("syscall" : "+a"(ret) : "D"(0x1023L), "S"(18L) : "rcx", "r11", "memory");
    state = ret == 0 ? 1 : -1;
    __atomic_store_n(&amx_permission, state, __ATOMIC_RELEASE);
  }
  return state > 0;
}

/* The AMX tile's arithmetic for x (`signed_x`: int8 x, tdpbssd; else uint8 x, tdpbusd, and 128 times the
 * column sums come off as on the VNNI tile): the full 64-byte steps, then the last k % 64 bytes as one more
 * step over the panels' last 16 groups, the groups already counted matched by zero x bytes (a copy in acc's
 * memory). Every panel holds at least 16 groups (k >= 64), so no load leaves it. */
#define QGEMM_AMX_STEP(dp, a_base, a_stride, group)          \
  _tile_loadd(4, (a_base), (a_stride));                      \
  _tile_loadd(5, panels[0] + 32 * (group), 32);              \
  _tile_loadd(6, panels[1] + 32 * (group), 32);              \
  dp(0, 4, 5);                                               \
  dp(1, 4, 6);                                               \
  _tile_loadd(5, panels[2] + 32 * (group), 32);              \
  _tile_loadd(6, panels[3] + 32 * (group), 32);              \
  dp(2, 4, 5);                                               \
  dp(3, 4, 6)

#define QGEMM_AMX_BODY(dp)                                                                          \
  for (s = 0; s < full; ++s) {                                                                      \
    QGEMM_AMX_STEP(dp, x + 64 * s, ldx, 16 * s);                                                    \
  }                                                                                                 \
  if (k % 64) {                                                                                     \
    QGEMM_AMX_STEP(dp, tail, 64, groups - 16);                                                      \
  }

static void tile_wide_amx(const uint8_t* x, int64_t ldx, const uint8_t* const* panels, const int32_t* sums,
                          int64_t k, int signed_x, int32_t (*acc)[WIDE * NR]) {
  int64_t groups = (k + 3) / 4, full = k / 64, s, r;
  uint8_t* tail = (uint8_t*)acc; /* 8 rows of 64 bytes, read before the sums are stored over them */
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  if (k % 64) {
    int64_t at = 4 * (16 * full - (groups - 16)), bytes = k - 64 * full;
    __mmask64 keep = (~(__mmask64)0 >> (64 - bytes)) << at;
    for (r = 0; r < 8; ++r) /* the row's last bytes, moved up to byte `at` of its 64, zeros around them */
      _mm512_storeu_si512((void*)(tail + 64 * r),
                          _mm512_maskz_loadu_epi8(keep, x + r * ldx + 64 * full - at));
  }
  if (signed_x) {
    QGEMM_AMX_BODY(_tile_dpbssd)
  } else {
    QGEMM_AMX_BODY(_tile_dpbusd)
  }
  _tile_stored(0, acc[0], WIDE * NR * 4);
  _tile_stored(1, acc[0] + 8, WIDE * NR * 4);
  _tile_stored(2, acc[0] + 16, WIDE * NR * 4);
  _tile_stored(3, acc[0] + 24, WIDE * NR * 4);
  if (!signed_x) {
    __m512i lo = _mm512_slli_epi32(_mm512_loadu_si512((const void*)sums), 7);
    __m512i hi = _mm512_slli_epi32(_mm512_loadu_si512((const void*)(sums + 16)), 7);
    for (r = 0; r < 8; ++r) {
      _mm512_storeu_si512((void*)acc[r], _mm512_sub_epi32(_mm512_loadu_si512((const void*)acc[r]), lo));
      _mm512_storeu_si512((void*)(acc[r] + 16), _mm512_sub_epi32(_mm512_loadu_si512((const void*)(acc[r] + 16)), hi));
    }
  }
}
#undef QGEMM_AMX_BODY
#undef QGEMM_AMX_STEP

/* 1 (int8 x) or 2 (uint8 x) when this GEMM's full 8-row tiles take AMX, else 0; the tile registers are then
 * configured on this thread. */
static int amx_begin(const rxe_qgemm_t* g) {
  int mode = g->k < 64 || g->m < 8 ? 0 : g->flip == 0 ? 1 : g->flip == 0x80808080u ? 2 : 0;
  if (mode == 0 || !rxe_qint8_amx_enabled()) return 0;
  _tile_loadconfig(&amx_config);
  return mode;
}
#endif
#else
#define WIDE 1
#endif

#if !defined(QGEMM_AMX)
int rxe_qint8_amx_enabled(void) { return 0; }
#endif

/* The outputs of rows [m0, min(m0 + MR, m)) x the panel at column n0 from their sums acc (row r at
 * acc + r * stride): the zero points' terms, then the requantization. */
static void epilogue(const rxe_qgemm_t* g, int vector, const int32_t* acc, int64_t stride, int64_t m0, int64_t n0,
                     const int64_t* xsum, const int32_t* wsum) {
  int64_t c, columns = g->n - n0 < NR ? g->n - n0 : NR;
  int r;
#if defined(QGEMM_VECTOR_REQUANT)
  if (vector) {
    int32_t col[NR], q[NR], s[NR], out[NR];
    rq8_t rc;
    for (c = 0; c < NR; ++c) {
      int64_t n = n0 + (c < columns ? c : 0);
      col[c] = (int32_t)((int64_t)g->bias[n] - (int64_t)g->xz * wsum[n] + g->k * (int64_t)g->xz * g->wz);
      q[c] = g->multiplier[n];
      s[c] = g->shift[n];
    }
    rc = rq8_setup(q, s, g->out_zero, g->act_min, g->act_max);
    for (r = 0; r < MR && m0 + r < g->m; ++r) {
      uint8_t* dst = g->out + (m0 + r) * g->ldm + n0 * g->ldn;
      requantize_row(acc + r * stride, col, (int32_t)(-(int64_t)g->wz * xsum[r]), &rc, out);
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
  __m512i xz = _mm512_set1_epi32(g->xz);
  __m512i kzz = _mm512_set1_epi32((int32_t)(g->k * (int64_t)g->xz * g->wz));
  int64_t half, r, c;
  for (half = 0; half < 2; ++half) {
    int64_t c0 = n0 + 16 * half, count = n1 - c0 < 16 ? n1 - c0 : 16;
    __mmask16 valid;
    __m512i col;
    rq16_t rc;
    __m128i bytes[MR];
    if (count <= 0) break;
    valid = (__mmask16)(count == 16 ? 0xffffu : (1u << count) - 1u);
    col = _mm512_add_epi32(_mm512_sub_epi32(_mm512_maskz_loadu_epi32(valid, g->bias + c0),
                                            _mm512_mullo_epi32(xz, _mm512_maskz_loadu_epi32(valid, wsum + c0))),
                           kzz);
    rc = rq16_setup(_mm512_maskz_loadu_epi32(valid, g->multiplier + c0), _mm512_maskz_loadu_epi32(valid, g->shift + c0),
                    g->out_zero, g->act_min, g->act_max);
    for (r = 0; r < MR; ++r) {
      __m512i a = _mm512_add_epi32(_mm512_add_epi32(_mm512_loadu_si512((const void*)(acc[r] + 16 * half)), col),
                                   _mm512_set1_epi32((int32_t)(-(int64_t)g->wz * xsum[r])));
      bytes[r] = _mm512_cvtepi32_epi8(requant16(a, &rc));
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

/* The 32-bit output mode (qgemm_internal.h): rows [m0, min(m0 + MR, m)) x columns [n0, n0 + count) from
 * their sums acc (row r at acc + r * stride), the zero points folded in with wrapping uint32 arithmetic (the
 * exact sum fits int32), then stored as int32 or scaled to float (two roundings: product, then bias). No
 * arrays of its own: its frame stays small under run_block's. */
static void epilogue_out32(const rxe_qgemm_t* g, const rxe_qgemm_out32_t* o, const int32_t* acc, int64_t stride,
                           int64_t m0, int64_t n0, int64_t count, const int64_t* xsum, const int32_t* wsum) {
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#endif
  const int32_t* ws = wsum + n0;
  uint32_t xz = (uint32_t)g->xz, kxz = (uint32_t)g->k * (uint32_t)g->xz;
  int64_t c;
  int r;
  for (r = 0; r < MR && m0 + r < g->m; ++r) {
    const int32_t* a = acc + r * stride;
    uint32_t xs = (uint32_t)xsum[r];
    int64_t row = (m0 + r) * o->ldm + n0;
#define QGEMM_OUT32_SUM(c) \
  (int32_t)((uint32_t)a[c] - xz * (uint32_t)ws[c] + (o->wz ? (kxz - xs) * (uint32_t)o->wz[n0 + c] : 0u))
    if (o->out_i32) {
      for (c = 0; c < count; ++c) o->out_i32[row + c] = QGEMM_OUT32_SUM(c);
    } else if (o->bias) {
      for (c = 0; c < count; ++c) {
        float v = (float)QGEMM_OUT32_SUM(c) * (o->x_scale * o->w_scale[n0 + c]);
        o->out_f32[row + c] = v + o->bias[n0 + c];
      }
    } else {
      for (c = 0; c < count; ++c) o->out_f32[row + c] = (float)QGEMM_OUT32_SUM(c) * (o->x_scale * o->w_scale[n0 + c]);
    }
#undef QGEMM_OUT32_SUM
  }
}

/* Panels per chunk: the row blocks run over one chunk of panels at a time, its weights (at most
 * about 128 KiB) staying in the cache while the rows pass. */
#define QGEMM_CHUNK_BYTES 131072

/* Rows [m_begin, m_end) (multiples of MR but the last) x panels [p_begin, p_end). */
QGEMM_NOCLONE void run_block(const rxe_qgemm_t* g, const rxe_qgemm_out32_t* o, int vector, int64_t m_begin,
                             int64_t m_end, int64_t p_begin, int64_t p_end) {
  const int32_t* wsum = (const int32_t*)(const void*)g->w_packed;
  int64_t panels = (g->n + NR - 1) / NR, panel_bytes = (g->k + 3) / 4 * 32, m0, p, i, c0, chunk;
  const uint8_t* first_panel = g->w_packed + 4 * panels * NR;
  uint8_t flip8 = (uint8_t)(g->flip & 0xffu);
  int32_t sums[MR * WIDE * NR]; /* a tile's sums: MR rows of WIDE * NR (or of NR) */
#if defined(QGEMM_AMX)
  int amx = amx_begin(g);
#endif
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
        if (g->wz != 0 || (o && o->wz))
          for (i = 0; i < g->k; ++i) xsum[r] += (int8_t)(rows[r][i] ^ flip8);
      }
      for (p = c0; p < c1;) {
#if defined(QGEMM_VNNI512)
        if (c1 - p >= 2) { /* 2 to 4 panels (a missing one read again from the last, its sums dropped) */
          int32_t (*acc)[WIDE * NR] = (int32_t (*)[WIDE * NR])sums;
          int64_t j, count = c1 - p < WIDE ? c1 - p : WIDE, n1 = (p + count) * NR < g->n ? (p + count) * NR : g->n;
          const uint8_t* panels[WIDE];
          for (j = 0; j < WIDE; ++j) panels[j] = first_panel + (p + (j < count ? j : count - 1)) * panel_bytes;
#if defined(QGEMM_AMX)
          if (full_rows && amx) {
            tile_wide_amx(rows[0], g->ldx, panels, wsum + p * NR, g->k, amx == 1, acc);
          } else
#endif
          if (full_rows) {
            tile_wide(rows[0], g->ldx, panels, wsum + p * NR, g->k, g->flip, acc);
          } else { /* the last rows one by one */
            for (r = 0; m0 + r < g->m; ++r) tile_wide_one_row(rows[r], panels, wsum + p * NR, g->k, g->flip, acc[r]);
          }
          if (o)
            epilogue_out32(g, o, acc[0], WIDE * NR, m0, p * NR, n1 - p * NR, xsum, wsum);
          else if (vector && full_rows)
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
          if (o)
            epilogue_out32(g, o, acc[0], NR, m0, p * NR, g->n - p * NR < NR ? g->n - p * NR : NR, xsum, wsum);
          else
            epilogue(g, vector, acc[0], NR, m0, p * NR, xsum, wsum);
          ++p;
        }
      }
    }
  }
#if defined(QGEMM_AMX)
  if (amx) _tile_release();
#endif
}

typedef struct {
  const rxe_qgemm_t* g;
  const rxe_qgemm_out32_t* o; /* the 32-bit output mode, or NULL */
  int vector;
  int by_rows; /* the units are row blocks of MR (else panels, all rows) */
} qgemm_task_t;

static void qgemm_task(void* ctx, int64_t begin, int64_t end, int thread) {
  const qgemm_task_t* t = (const qgemm_task_t*)ctx;
  const rxe_qgemm_t* g = t->g;
  (void)thread;
  if (t->by_rows) {
    run_block(g, t->o, t->vector, begin * MR, end * MR < g->m ? end * MR : g->m, 0, (g->n + NR - 1) / NR);
  } else {
    run_block(g, t->o, t->vector, 0, g->m, begin, end);
  }
}

/* Row blocks (or, with fewer row blocks than threads, panels) over the thread
 * pool: every output is computed the same way whatever the thread count. */
QGEMM_NOCLONE void run_tasks(qgemm_task_t* t) {
  const rxe_qgemm_t* g = t->g;
  int64_t row_blocks = (g->m + MR - 1) / MR, panels = (g->n + NR - 1) / NR;
  t->by_rows = row_blocks >= rxe_threads_get_count();
  if (g->m * g->n * g->k < QGEMM_PARALLEL_MIN_MACS) {
    run_block(g, t->o, t->vector, 0, g->m, 0, panels);
    return;
  }
  rxe_threads_parallel_for(t->by_rows ? row_blocks : panels, qgemm_task, t);
}

void rxe_qgemm_run(const rxe_qgemm_t* g) {
  qgemm_task_t t;
  t.g = g;
  t.o = NULL;
  t.vector = vector_epilogue_ok(g);
  run_tasks(&t);
}

void rxe_qgemm_run_out32(const rxe_qgemm_t* g, const rxe_qgemm_out32_t* o) {
  qgemm_task_t t;
  t.g = g;
  t.o = o;
  t.vector = 0;
  run_tasks(&t);
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
