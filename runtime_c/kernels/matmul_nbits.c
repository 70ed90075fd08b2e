/* Weight-only quantized matmul and gather (relax_edge/kernels_quant.h):
 * y (m,n) = x (m,k) @ dequant(W (n,k))^T (+ bias), W in packed 4/8-bit blocks.
 *
 * Decode (m <= RXE_GEMV_MAX_M): output columns split over the threads; for
 * each column, its row of W is decoded 32 weights at a time (decode_units)
 * into vector registers and multiplied into the m rows of x, the sums in
 * registers over the whole row. Prefill: a panel of 16 rows of W x KC of k is
 * dequantized once (dequant_panel) and multiplied into every row of x in
 * tiles of TILE_ROWS x 16 (tile); panels are split over the threads. */
#include "relax_edge/kernels.h"
#include "relax_edge/runtime.h"
#include "relax_edge/threads.h"

#define UNIT 16        /* weights decoded at once */
#define PANEL 16       /* columns of y per dequantized panel */
#define KC 128         /* k per dequantized panel (a multiple of UNIT) */
#define TILE_ROWS 6    /* rows of x per register tile of the prefill path */
#define GEMV_ROWS RXE_GEMV_MAX_M
#define PARALLEL_MIN_MACS 262144 /* below this m*n*k, one thread */

#if defined(__GNUC__)
#define QINLINE static inline __attribute__((always_inline))
#define QPRAGMA_(x) _Pragma(#x)
#define QUNROLL(n) QPRAGMA_(GCC unroll n) /* so that the sums stay registers at -O2 */
#define qprefetch(p) (RXE_NBITS_PREFETCH_BYTES > 0 ? __builtin_prefetch(p) : (void)0)
#else
#define QINLINE static inline
#define QUNROLL(n)
#define qprefetch(p) ((void)(p))
#endif
#ifndef RXE_NBITS_PREFETCH_BYTES
#define RXE_NBITS_PREFETCH_BYTES 1024 /* ahead in W's byte stream (contiguous over a thread's columns); 0: none */
#endif

/* qv_t: VL floats; decode_units gives UNIT weights as GROUPS of them. */
#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#define VL 8
typedef __m256 qv_t;
#define qv_zero() _mm256_setzero_ps()
#define qv_set(s) _mm256_set1_ps(s)
#define qv_load(p) _mm256_loadu_ps(p)
#define qv_store(p, v) _mm256_storeu_ps(p, v)
#define qv_fma(acc, a, b) _mm256_fmadd_ps(a, b, acc)
#define qv_add(a, b) _mm256_add_ps(a, b)
#elif defined(__aarch64__) || (defined(__ARM_NEON) && defined(__GNUC__))
/* NEON: aarch64, and 32-bit ARMv7 with NEON (the multiply-adds unfused there when it has no VFPv4) */
#define QNEON 1
#include <arm_neon.h>
#define VL 4
typedef float32x4_t qv_t;
#define qv_zero() vdupq_n_f32(0.0f)
#define qv_set(s) vdupq_n_f32(s)
#define qv_load(p) vld1q_f32(p)
#define qv_store(p, v) vst1q_f32(p, v)
#define qv_add(a, b) vaddq_f32(a, b)
#if defined(__aarch64__) || defined(__ARM_FEATURE_FMA)
#define qv_fma(acc, a, b) vfmaq_f32(acc, a, b)
#else
#define qv_fma(acc, a, b) vmlaq_f32(acc, a, b)
#endif
#else
#define VL 1
typedef float qv_t;
#define qv_zero() 0.0f
#define qv_set(s) (s)
#define qv_load(p) (*(p))
#define qv_store(p, v) (*(p) = (v))
#define qv_fma(acc, a, b) ((acc) + (a) * (b))
#define qv_add(a, b) ((a) + (b))
#endif
#define GROUPS (UNIT / VL)
#define PANEL_VECS (PANEL / VL)

typedef struct {
  const float* x;
  const uint8_t* q;
  const float* scales;
  const uint8_t* zp;  /* zero_mode uint8 */
  const float* offs;  /* zero_mode float */
  const float* bias;
  float* y;
  const uint8_t* xq; /* act int8: the quantized rows of x (quantize_rows) */
  int64_t m, n, k, bits, block, blocks, block_bytes;
  int mode;
} nbits_t;

/* The zero point (0 in float mode), scale and offset of block b of row r. */
typedef struct {
  int32_t zero;
  float scale, offset;
} block_t;

QINLINE block_t block_of(const nbits_t* g, int64_t r, int64_t b) {
  block_t p;
  int64_t i = r * g->blocks + b;
  p.scale = g->scales[i];
  p.offset = 0.0f;
  p.zero = g->mode == RXE_NBITS_ZERO_UINT8 ? (int32_t)g->zp[i] : g->mode == RXE_NBITS_ZERO_FLOAT ? 0 : 1 << (g->bits - 1);
  if (g->mode == RXE_NBITS_ZERO_FLOAT) p.offset = g->offs[i];
  return p;
}

/* Weight e of a block (bp: its first byte), dequantized as the reference does. */
QINLINE float weight(const uint8_t* bp, int64_t e, int bits, block_t p, int float_mode) {
  int32_t q = bits == 4 ? (e & 1 ? bp[e >> 1] >> 4 : bp[e >> 1] & 15) : bp[e];
  float w = (float)(q - p.zero) * p.scale;
  return float_mode ? w + p.offset : w;
}

/* Two units (2 * UNIT weights) of a block from its byte p, dequantized into w
 * (GROUPS vectors each); units = 1 decodes only the first. The lanes hold
 * the raw values q (4 bits: the nibbles unpacked into element order). */
#if defined(__AVX2__) && defined(__FMA__)
QINLINE void widen(__m128i v, __m256i z, __m256 s, __m256 m, int float_mode, qv_t* w) {
  w[0] = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(_mm256_cvtepu8_epi32(v), z)), s);
  w[1] = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(_mm256_cvtepu8_epi32(_mm_srli_si128(v, 8)), z)), s);
  if (float_mode) {
    w[0] = _mm256_add_ps(w[0], m);
    w[1] = _mm256_add_ps(w[1], m);
  }
}

QINLINE void decode_units(const uint8_t* p, int bits, block_t b, int float_mode, qv_t w[2 * GROUPS],
                          const int units) {
  const __m256i z = _mm256_set1_epi32(b.zero);
  const __m256 s = _mm256_set1_ps(b.scale), m = _mm256_set1_ps(b.offset);
  __m128i v0, v1;
  if (bits == 4) {
    const __m128i mask = _mm_set1_epi8(0x0F);
    __m128i raw = units == 2 ? _mm_loadu_si128((const __m128i*)(const void*)p)
                             : _mm_loadl_epi64((const __m128i*)(const void*)p);
    __m128i lo = _mm_and_si128(raw, mask), hi = _mm_and_si128(_mm_srli_epi16(raw, 4), mask);
    v0 = _mm_unpacklo_epi8(lo, hi);
    v1 = _mm_unpackhi_epi8(lo, hi);
  } else {
    v0 = _mm_loadu_si128((const __m128i*)(const void*)p);
    v1 = units == 2 ? _mm_loadu_si128((const __m128i*)(const void*)(p + UNIT)) : v0;
  }
  widen(v0, z, s, m, float_mode, w);
  if (units == 2) widen(v1, z, s, m, float_mode, w + GROUPS);
}
#elif defined(QNEON)
QINLINE void widen(uint8x16_t v, uint8x8_t z, float s, float32x4_t m, int float_mode, qv_t* w) {
  int16x8_t lo = vreinterpretq_s16_u16(vsubl_u8(vget_low_u8(v), z)); /* q - zero in [-255, 255] */
  int16x8_t hi = vreinterpretq_s16_u16(vsubl_u8(vget_high_u8(v), z));
  int g;
  w[0] = vmulq_n_f32(vcvtq_f32_s32(vmovl_s16(vget_low_s16(lo))), s);
  w[1] = vmulq_n_f32(vcvtq_f32_s32(vmovl_s16(vget_high_s16(lo))), s);
  w[2] = vmulq_n_f32(vcvtq_f32_s32(vmovl_s16(vget_low_s16(hi))), s);
  w[3] = vmulq_n_f32(vcvtq_f32_s32(vmovl_s16(vget_high_s16(hi))), s);
  if (float_mode) {
    for (g = 0; g < GROUPS; ++g) w[g] = vaddq_f32(w[g], m);
  }
}

QINLINE void decode_units(const uint8_t* p, int bits, block_t b, int float_mode, qv_t w[2 * GROUPS],
                          const int units) {
  const uint8x8_t z = vdup_n_u8((uint8_t)b.zero);
  const float32x4_t m = vdupq_n_f32(b.offset);
  uint8x16_t v0, v1;
  if (bits == 4) {
    if (units == 2) {
      uint8x16_t raw = vld1q_u8(p);
      uint8x16x2_t t = vzipq_u8(vandq_u8(raw, vdupq_n_u8(15)), vshrq_n_u8(raw, 4));
      v0 = t.val[0];
      v1 = t.val[1];
    } else {
      uint8x8_t raw = vld1_u8(p);
      uint8x8x2_t t = vzip_u8(vand_u8(raw, vdup_n_u8(15)), vshr_n_u8(raw, 4));
      v0 = vcombine_u8(t.val[0], t.val[1]);
      v1 = v0;
    }
  } else {
    v0 = vld1q_u8(p);
    v1 = units == 2 ? vld1q_u8(p + UNIT) : v0;
  }
  widen(v0, z, b.scale, m, float_mode, w);
  if (units == 2) widen(v1, z, b.scale, m, float_mode, w + GROUPS);
}
#else
QINLINE void decode_units(const uint8_t* p, int bits, block_t b, int float_mode, qv_t w[2 * GROUPS],
                          const int units) {
  int e;
  for (e = 0; e < units * UNIT; ++e) w[e] = weight(p, e, bits, b, float_mode);
}
#endif

/* ---- decode: few rows ---- */

/* out[i] (i < r) = row i of x . row `col` of W; r constant at each call. For
 * one row, two chains of sums (the even and the odd units of a block) hide
 * the multiply-add latency. */
QINLINE void column_dots(const nbits_t* g, int64_t col, float* out, const int r, const int bits,
                         const int float_mode) {
  const int ch = r == 1 ? 2 : 1;
  qv_t acc[GEMV_ROWS][2][GROUPS], w[2 * GROUPS];
  float tail[GEMV_ROWS], lanes[VL];
  const uint8_t* row = g->q + col * g->blocks * g->block_bytes;
  int64_t b, e;
  int i, c, v, l;
  qprefetch(g->scales + (col + 8) * g->blocks);
  QUNROLL(4)
  for (i = 0; i < r; ++i) {
    tail[i] = 0.0f;
    QUNROLL(2)
    for (c = 0; c < ch; ++c) {
      QUNROLL(16)
      for (v = 0; v < GROUPS; ++v) acc[i][c][v] = qv_zero();
    }
  }
  for (b = 0; b < g->blocks; ++b) {
    const block_t p = block_of(g, col, b);
    const uint8_t* bp = row + b * g->block_bytes;
    const int64_t e0 = b * g->block, kb = g->k - e0 < g->block ? g->k - e0 : g->block;
    qprefetch(bp + RXE_NBITS_PREFETCH_BYTES);
    for (e = 0; e + 2 * UNIT <= kb; e += 2 * UNIT) {
      decode_units(bp + e * bits / 8, bits, p, float_mode, w, 2);
      QUNROLL(4)
      for (i = 0; i < r; ++i) {
        const float* xi = g->x + i * g->k + e0 + e;
        QUNROLL(16)
        for (v = 0; v < GROUPS; ++v) acc[i][0][v] = qv_fma(acc[i][0][v], qv_load(xi + v * VL), w[v]);
        QUNROLL(16)
        for (v = 0; v < GROUPS; ++v) {
          acc[i][ch - 1][v] = qv_fma(acc[i][ch - 1][v], qv_load(xi + UNIT + v * VL), w[GROUPS + v]);
        }
      }
    }
    if (e + UNIT <= kb) {
      decode_units(bp + e * bits / 8, bits, p, float_mode, w, 1);
      QUNROLL(4)
      for (i = 0; i < r; ++i) {
        const float* xi = g->x + i * g->k + e0 + e;
        QUNROLL(16)
        for (v = 0; v < GROUPS; ++v) acc[i][0][v] = qv_fma(acc[i][0][v], qv_load(xi + v * VL), w[v]);
      }
      e += UNIT;
    }
    for (; e < kb; ++e) { /* the last, partial block's last weights */
      float wt = weight(bp, e, bits, p, float_mode);
      for (i = 0; i < r; ++i) tail[i] += g->x[i * g->k + e0 + e] * wt;
    }
  }
  for (i = 0; i < r; ++i) { /* the chains and groups added as vectors, then the lanes */
    qv_t total = acc[i][0][0];
    float sum = 0.0f;
    for (c = 0; c < ch; ++c) {
      for (v = c == 0 ? 1 : 0; v < GROUPS; ++v) total = qv_add(total, acc[i][c][v]);
    }
    qv_store(lanes, total);
    for (l = 0; l < VL; ++l) sum += lanes[l];
    out[i] = sum + tail[i];
  }
}

QINLINE void columns(const nbits_t* g, int64_t c0, int64_t c1, const int bits, const int float_mode) {
  float out[GEMV_ROWS];
  int64_t col, i;
  for (col = c0; col < c1; ++col) {
    switch (g->m) {
      case 4:
        column_dots(g, col, out, 4, bits, float_mode);
        break;
      case 3:
        column_dots(g, col, out, 3, bits, float_mode);
        break;
      case 2:
        column_dots(g, col, out, 2, bits, float_mode);
        break;
      default:
        column_dots(g, col, out, 1, bits, float_mode);
        break;
    }
    for (i = 0; i < g->m; ++i) g->y[i * g->n + col] = g->bias ? out[i] + g->bias[col] : out[i];
  }
}

/* ---- decode on AVX-512: the zero point folded through per-block sums of x ---- */

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512DQ__) && defined(__FMA__)
#define QAVX512 1
#define XBUF 2048 /* floats of x staged per decode task (8 KB of stack): rows x a chunk of whole blocks */
#define XCOLS 4   /* columns of y per pass, sharing the loads of x */
#define XPREFETCH (4 * RXE_NBITS_PREFETCH_BYTES) /* ahead in each column's row (4096 B: +5-10% from DRAM) */

/* A chunk of blocks [b0, b0 + nb) of the rows of x, staged: row i's len = nb * block values at x + i * len
 * (zeros past k; with 4 bits each 32 of them as the 16 even elements, then the 16 odd: the order of the low
 * and the high nibbles of the chunk's 16 bytes), and its block sums at xs + i * nb. */
typedef struct {
  const float* x;
  const float* xs;
  int64_t b0, nb, len;
} xchunk_t;

static void stage_x(const nbits_t* g, int64_t b0, int64_t nb, float* dst, float* sums) {
  const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  const __m512i odd = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
  int64_t i, b, e;
  for (i = 0; i < g->m; ++i) {
    for (b = 0; b < nb; ++b) {
      const int64_t e0 = (b0 + b) * g->block, valid = g->k - e0;
      const float* src = g->x + i * g->k + e0;
      float* d = dst + (i * nb + b) * g->block;
      __m512 s = _mm512_setzero_ps();
      for (e = 0; e < g->block; e += 16) {
        const __mmask16 mk = valid - e >= 16 ? (__mmask16)0xFFFF
                             : valid - e > 0 ? (__mmask16)((1u << (valid - e)) - 1u)
                                             : (__mmask16)0;
        const __m512 v = _mm512_maskz_loadu_ps(mk, src + e);
        s = _mm512_add_ps(s, v);
        _mm512_storeu_ps(d + e, v);
      }
      sums[i * nb + b] = _mm512_reduce_add_ps(s);
      if (g->bits == 4) {
        for (e = 0; e < g->block; e += 32) {
          const __m512 a = _mm512_loadu_ps(d + e), c = _mm512_loadu_ps(d + e + 16);
          _mm512_storeu_ps(d + e, _mm512_permutex2var_ps(a, even, c));
          _mm512_storeu_ps(d + e + 16, _mm512_permutex2var_ps(a, odd, c));
        }
      }
    }
  }
}

/* out[j][i] = row i of the chunk of x . the chunk of row col + j of W (j < nc, i < r): per block, the scale
 * times sum x q, plus (offset, or -zero * scale) times the block sum of x. */
QINLINE void fast_dots(const nbits_t* g, const xchunk_t* c, int64_t col, float out[XCOLS][GEMV_ROWS], const int nc,
                       const int r, const int bits, const int mode, const int blk) {
  const __m512 iota = _mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  const int64_t block = blk ? blk : g->block, bb = block * bits / 8;
  __m512 acc[XCOLS][GEMV_ROWS], bacc[GEMV_ROWS], corr[GEMV_ROWS];
  const uint8_t* rows[XCOLS];
  const float* sc[XCOLS];
  int64_t b, e;
  int i, j;
  QUNROLL(4)
  for (j = 0; j < nc; ++j) {
    rows[j] = g->q + ((col + j) * g->blocks + c->b0) * bb;
    sc[j] = g->scales + (col + j) * g->blocks + c->b0;
    QUNROLL(4)
    for (i = 0; i < r; ++i) acc[j][i] = _mm512_setzero_ps();
  }
  for (b = 0; b < c->nb; ++b) {
    const float* xb = c->x + b * block;
    QUNROLL(4)
    for (j = 0; j < nc; ++j) {
      const uint8_t* bp = rows[j] + b * bb;
      const __m512 s = _mm512_set1_ps(sc[j][b]);
      if (((b * bb) & 63) == 0) qprefetch(bp + XPREFETCH);
      QUNROLL(4)
      for (i = 0; i < r; ++i) bacc[i] = _mm512_setzero_ps();
      if (bits == 4) {
        for (e = 0; e < block; e += 32) {
          const __m512i d = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i*)(const void*)(bp + e / 2)));
          const __m512 lo = _mm512_permutexvar_ps(d, iota); /* the low nibble: the index's low 4 bits */
          const __m512 hi = _mm512_cvtepi32_ps(_mm512_srli_epi32(d, 4));
          QUNROLL(4)
          for (i = 0; i < r; ++i) {
            const float* xi = xb + i * c->len + e;
            bacc[i] = _mm512_fmadd_ps(lo, _mm512_loadu_ps(xi), bacc[i]);
            bacc[i] = _mm512_fmadd_ps(hi, _mm512_loadu_ps(xi + 16), bacc[i]);
          }
        }
      } else {
        for (e = 0; e < block; e += 16) {
          const __m512 w =
              _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i*)(const void*)(bp + e))));
          QUNROLL(4)
          for (i = 0; i < r; ++i) bacc[i] = _mm512_fmadd_ps(w, _mm512_loadu_ps(xb + i * c->len + e), bacc[i]);
        }
      }
      QUNROLL(4)
      for (i = 0; i < r; ++i) acc[j][i] = _mm512_fmadd_ps(bacc[i], s, acc[j][i]);
    }
  }
  QUNROLL(4)
  for (j = 0; j < nc; ++j) { /* the zero points: sum_b coefficient_b * (block sum of x)_b, 16 blocks at a time */
    const int64_t base = (col + j) * g->blocks + c->b0;
    const __m512 neg_zero = _mm512_set1_ps(-(float)(1 << (bits - 1)));
    QUNROLL(4)
    for (i = 0; i < r; ++i) corr[i] = _mm512_setzero_ps();
    for (b = 0; b < c->nb; b += 16) {
      const __mmask16 mk = c->nb - b >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (c->nb - b)) - 1u);
      __m512 cf;
      if (mode == RXE_NBITS_ZERO_FLOAT) {
        cf = _mm512_maskz_loadu_ps(mk, g->offs + base + b);
      } else if (mode == RXE_NBITS_ZERO_UINT8) {
        const __m512 z = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_maskz_loadu_epi8(mk, g->zp + base + b)));
        cf = _mm512_mul_ps(_mm512_sub_ps(_mm512_setzero_ps(), z), _mm512_maskz_loadu_ps(mk, g->scales + base + b));
      } else {
        cf = _mm512_mul_ps(neg_zero, _mm512_maskz_loadu_ps(mk, g->scales + base + b));
      }
      QUNROLL(4)
      for (i = 0; i < r; ++i) corr[i] = _mm512_fmadd_ps(cf, _mm512_maskz_loadu_ps(mk, c->xs + i * c->nb + b), corr[i]);
    }
    QUNROLL(4)
    for (i = 0; i < r; ++i) out[j][i] = _mm512_reduce_add_ps(acc[j][i]) + _mm512_reduce_add_ps(corr[i]);
  }
}

QINLINE void fast_columns(const nbits_t* g, const xchunk_t* c, int64_t c0, int64_t c1, int first, int last,
                          const int r, const int bits, const int mode, const int blk) {
  float out[XCOLS][GEMV_ROWS];
  int64_t col;
  int i, j, nc = XCOLS;
  for (col = c0; col < c1; col += nc) { /* XCOLS at a time, then the last ones one by one */
    nc = c1 - col >= XCOLS ? XCOLS : 1;
    if (nc == XCOLS) {
      fast_dots(g, c, col, out, XCOLS, r, bits, mode, blk);
    } else {
      fast_dots(g, c, col, out, 1, r, bits, mode, blk);
    }
    for (j = 0; j < nc; ++j) {
      for (i = 0; i < r; ++i) {
        float* yv = g->y + i * g->n + col + j;
        float v = first ? out[j][i] : *yv + out[j][i];
        *yv = last && g->bias ? v + g->bias[col + j] : v;
      }
    }
  }
}

/* One copy of fast_columns for each row count, bits, zero mode and (4 bits) block of 32, each a function of
 * its own: the 36 inlined into one function made one that GCC took 20 s to compile (85 s with the
 * sanitizers and -g), for no speed (a copy is called once per chunk of a task's columns). */
#define FAST_COPY(r, bits, blk, mode)                                                                       \
  static __attribute__((noinline)) void fast_##r##_##bits##_##blk##_##mode(                               \
      const nbits_t* g, const xchunk_t* c, int64_t c0, int64_t c1, int first, int last) {                 \
    fast_columns(g, c, c0, c1, first, last, r, bits, RXE_NBITS_ZERO_##mode, blk);                         \
  }
#define FAST_COPIES(r)                                                                                      \
  FAST_COPY(r, 4, 32, FLOAT) FAST_COPY(r, 4, 32, UINT8) FAST_COPY(r, 4, 32, DEFAULT)                       \
  FAST_COPY(r, 4, 0, FLOAT) FAST_COPY(r, 4, 0, UINT8) FAST_COPY(r, 4, 0, DEFAULT)                          \
  FAST_COPY(r, 8, 0, FLOAT) FAST_COPY(r, 8, 0, UINT8) FAST_COPY(r, 8, 0, DEFAULT)
FAST_COPIES(1)
FAST_COPIES(2)
FAST_COPIES(3)
FAST_COPIES(4)
#define FAST_ROW(r)                                                                                         \
  {fast_##r##_4_32_FLOAT, fast_##r##_4_32_UINT8, fast_##r##_4_32_DEFAULT, fast_##r##_4_0_FLOAT,            \
   fast_##r##_4_0_UINT8,  fast_##r##_4_0_DEFAULT,  fast_##r##_8_0_FLOAT,   fast_##r##_8_0_UINT8,            \
   fast_##r##_8_0_DEFAULT}

typedef void (*fast_copy_t)(const nbits_t*, const xchunk_t*, int64_t, int64_t, int, int);
static const fast_copy_t fast_copies[4][9] = {FAST_ROW(1), FAST_ROW(2), FAST_ROW(3), FAST_ROW(4)};

/* The copy for this call's rows (1 to 4), bits, zero mode and block. */
static fast_copy_t fast_copy(const nbits_t* g) {
  const int kind = g->bits == 4 ? (g->block == 32 ? 0 : 3) : 6;
  const int mode = g->mode == RXE_NBITS_ZERO_FLOAT ? 0 : g->mode == RXE_NBITS_ZERO_UINT8 ? 1 : 2;
  return fast_copies[g->m <= 1 ? 0 : g->m >= 4 ? 3 : g->m - 1][kind + mode];
}

/* Whether the AVX-512 decode path takes this call: 4 bits with blocks of at least 32, or 8 bits; a chunk of
 * at least one block per row fits XBUF. */
static int fast_applies(const nbits_t* g) {
  return (g->bits == 8 || g->block >= 32) && g->m * g->block <= XBUF && g->k > 0;
}

/* Columns [c0, c1), chunk after chunk of k: each chunk's sums added to y. */
static void fast_task(const nbits_t* g, int64_t c0, int64_t c1) {
  float xbuf[XBUF], sums[XBUF / 16];
  const int64_t per = XBUF / (g->m * g->block); /* blocks per chunk */
  const fast_copy_t copy = fast_copy(g);
  xchunk_t c;
  int64_t b0;
  c.x = xbuf;
  c.xs = sums;
  for (b0 = 0; b0 < g->blocks; b0 += per) {
    const int first = b0 == 0, last = b0 + per >= g->blocks;
    c.b0 = b0;
    c.nb = g->blocks - b0 < per ? g->blocks - b0 : per;
    c.len = c.nb * g->block;
    stage_x(g, b0, c.nb, xbuf, sums);
    copy(g, &c, c0, c1, first, last);
  }
}
#endif

/* Columns [c0, c1), the bits and the zero mode constants of each copy. */
static void gemv_task(void* ctx, int64_t c0, int64_t c1, int thread) {
  const nbits_t* g = (const nbits_t*)ctx;
  const int float_mode = g->mode == RXE_NBITS_ZERO_FLOAT;
  (void)thread;
#if defined(QAVX512)
  if (fast_applies(g)) {
    fast_task(g, c0, c1);
    return;
  }
#endif
  if (g->bits == 4) {
    if (float_mode) {
      columns(g, c0, c1, 4, 1);
    } else {
      columns(g, c0, c1, 4, 0);
    }
  } else if (float_mode) {
    columns(g, c0, c1, 8, 1);
  } else {
    columns(g, c0, c1, 8, 0);
  }
}

/* ---- prefill: many rows ---- */

#if defined(__AVX2__) && defined(__FMA__)
/* dst[p * PANEL + j] = r[j][p] for j, p < 8: an 8 x 8 transpose in registers. */
static inline void store_transposed8(const __m256 r[8], float* dst) {
  __m256 t[8], u[8];
  int i;
  for (i = 0; i < 4; ++i) {
    t[2 * i] = _mm256_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm256_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
  for (i = 0; i < 2; ++i) {
    u[4 * i] = _mm256_shuffle_ps(t[4 * i], t[4 * i + 2], 0x44);
    u[4 * i + 1] = _mm256_shuffle_ps(t[4 * i], t[4 * i + 2], 0xEE);
    u[4 * i + 2] = _mm256_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0x44);
    u[4 * i + 3] = _mm256_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0xEE);
  }
  for (i = 0; i < 4; ++i) {
    _mm256_storeu_ps(dst + i * PANEL, _mm256_permute2f128_ps(u[i], u[i + 4], 0x20));
    _mm256_storeu_ps(dst + (i + 4) * PANEL, _mm256_permute2f128_ps(u[i], u[i + 4], 0x31));
  }
}
#endif

/* panel (kc x PANEL, row stride PANEL) = W[j0 : j0+nr, p0 : p0+kc]^T dequantized, zeros past nr. p0 and the
 * blocks start at multiples of UNIT: units never straddle blocks. */
static void dequant_panel(const nbits_t* g, int64_t j0, int64_t nr, int64_t p0, int64_t kc, float* panel) {
  const int float_mode = g->mode == RXE_NBITS_ZERO_FLOAT;
  qv_t w[2 * GROUPS];
  int64_t j, e, full = kc - kc % UNIT;
#if defined(__AVX2__) && defined(__FMA__)
  __m256 rows[2][8];
  int64_t h;
  int jj;
  for (e = 0; e < full; e += UNIT) { /* 8 rows of W at a time, one unit each, transposed into the panel */
    const int64_t b = (p0 + e) / g->block, in = p0 + e - b * g->block;
    for (h = 0; h < PANEL; h += 8) {
      for (jj = 0; jj < 8; ++jj) {
        j = h + jj;
        if (j < nr) {
          const uint8_t* bp = g->q + ((j0 + j) * g->blocks + b) * g->block_bytes;
          decode_units(bp + in * g->bits / 8, (int)g->bits, block_of(g, j0 + j, b), float_mode, w, 1);
          rows[0][jj] = w[0];
          rows[1][jj] = w[1];
        } else {
          rows[0][jj] = rows[1][jj] = _mm256_setzero_ps();
        }
      }
      store_transposed8(rows[0], panel + e * PANEL + h);
      store_transposed8(rows[1], panel + (e + 8) * PANEL + h);
    }
  }
#else
  float run[UNIT];
  int64_t t;
  int v;
  for (j = 0; j < PANEL; ++j) {
    for (e = 0; e < full; e += UNIT) {
      const int64_t b = (p0 + e) / g->block, in = p0 + e - b * g->block;
      if (j < nr) {
        const uint8_t* bp = g->q + ((j0 + j) * g->blocks + b) * g->block_bytes;
        decode_units(bp + in * g->bits / 8, (int)g->bits, block_of(g, j0 + j, b), float_mode, w, 1);
        for (v = 0; v < GROUPS; ++v) qv_store(run + v * VL, w[v]);
        for (t = 0; t < UNIT; ++t) panel[(e + t) * PANEL + j] = run[t];
      } else {
        for (t = 0; t < UNIT; ++t) panel[(e + t) * PANEL + j] = 0.0f;
      }
    }
  }
#endif
  for (j = 0; j < PANEL; ++j) { /* the last weights of k, fewer than a unit */
    for (e = full; e < kc; ++e) {
      const int64_t b = (p0 + e) / g->block;
      const uint8_t* bp = g->q + ((j0 + j) * g->blocks + b) * g->block_bytes;
      panel[e * PANEL + j] = j < nr ? weight(bp, p0 + e - b * g->block, (int)g->bits, block_of(g, j0 + j, b),
                                             float_mode)
                                    : 0.0f;
    }
  }
}

/* t (r x PANEL) = x (r rows, ldx apart; kc columns) @ panel (kc x PANEL); r constant at each call. */
QINLINE void tile(const float* x, int64_t ldx, const float* panel, int64_t kc, float* t, const int r) {
  qv_t acc[TILE_ROWS][PANEL_VECS], b[PANEL_VECS], a;
  int64_t p;
  int i, v;
  QUNROLL(6)
  for (i = 0; i < r; ++i) {
    QUNROLL(16)
    for (v = 0; v < PANEL_VECS; ++v) acc[i][v] = qv_zero();
  }
  for (p = 0; p < kc; ++p) {
    QUNROLL(16)
    for (v = 0; v < PANEL_VECS; ++v) b[v] = qv_load(panel + p * PANEL + v * VL);
    QUNROLL(6)
    for (i = 0; i < r; ++i) {
      a = qv_set(x[i * ldx + p]);
      QUNROLL(16)
      for (v = 0; v < PANEL_VECS; ++v) acc[i][v] = qv_fma(acc[i][v], a, b[v]);
    }
  }
  QUNROLL(6)
  for (i = 0; i < r; ++i) {
    QUNROLL(16)
    for (v = 0; v < PANEL_VECS; ++v) qv_store(t + i * PANEL + v * VL, acc[i][v]);
  }
}

static void tile_rows(const float* x, int64_t ldx, const float* panel, int64_t kc, float* t, int64_t r) {
  switch (r) {
    case 6:
      tile(x, ldx, panel, kc, t, 6);
      break;
    case 5:
      tile(x, ldx, panel, kc, t, 5);
      break;
    case 4:
      tile(x, ldx, panel, kc, t, 4);
      break;
    case 3:
      tile(x, ldx, panel, kc, t, 3);
      break;
    case 2:
      tile(x, ldx, panel, kc, t, 2);
      break;
    default:
      tile(x, ldx, panel, kc, t, 1);
      break;
  }
}

/* Panels [q0, q1) of y: PANEL columns each, k in steps of KC, each step's sums added to y. */
static void gemm_task(void* ctx, int64_t q0, int64_t q1, int thread) {
  const nbits_t* g = (const nbits_t*)ctx;
  float panel[KC * PANEL], t[TILE_ROWS * PANEL];
  int64_t q, p0, i0, i, j;
  (void)thread;
  for (q = q0; q < q1; ++q) {
    const int64_t j0 = q * PANEL, nr = g->n - j0 < PANEL ? g->n - j0 : PANEL;
    for (p0 = 0; p0 < g->k; p0 += KC) {
      const int64_t kc = g->k - p0 < KC ? g->k - p0 : KC;
      dequant_panel(g, j0, nr, p0, kc, panel);
      for (i0 = 0; i0 < g->m; i0 += TILE_ROWS) {
        const int64_t r = g->m - i0 < TILE_ROWS ? g->m - i0 : TILE_ROWS;
        tile_rows(g->x + i0 * g->k + p0, g->k, panel, kc, t, r);
        for (i = 0; i < r; ++i) {
          float* yi = g->y + (i0 + i) * g->n + j0;
          for (j = 0; j < nr; ++j) yi[j] = p0 == 0 ? t[i * PANEL + j] : yi[j] + t[i * PANEL + j];
        }
      }
    }
    for (i = 0; i < g->m; ++i) {
      float* yi = g->y + i * g->n + j0;
      if (g->k == 0) {
        for (j = 0; j < nr; ++j) yi[j] = 0.0f;
      }
      if (g->bias) {
        for (j = 0; j < nr; ++j) yi[j] += g->bias[j0 + j];
      }
    }
  }
}

/* ---- entry points ---- */

static rxe_status_t check_layout(const char* what, int64_t k, int64_t bits, int64_t block, int64_t mode,
                                 rxe_error_t* err) {
  if (bits != 4 && bits != 8) return rxe_error_set(err, RXE_ERR_SHAPE, "%s: bits must be 4 or 8, got %d", what, bits);
  if (block < UNIT || (block & (block - 1)) != 0) {
    return rxe_error_set(err, RXE_ERR_SHAPE, "%s: block_size must be a power of two of at least 16, got %d", what,
                         block);
  }
  if (mode < RXE_NBITS_ZERO_DEFAULT || mode > RXE_NBITS_ZERO_FLOAT) {
    return rxe_error_set(err, RXE_ERR_SHAPE, "%s: zero_mode must be 0, 1 or 2, got %d", what, mode);
  }
  if (k < 0) return rxe_error_set(err, RXE_ERR_SHAPE, "%s: k must not be negative, got %d", what, k);
  return RXE_OK;
}

static void layout_into(nbits_t* g, const uint8_t* qweight, const float* scales, const void* zeros, int64_t k,
                        int64_t bits, int64_t block, int64_t mode) {
  g->q = qweight;
  g->scales = scales;
  g->zp = (const uint8_t*)zeros;
  g->offs = (const float*)zeros;
  g->k = k;
  g->bits = bits;
  g->block = block;
  g->blocks = (k + block - 1) / block;
  g->block_bytes = block * bits / 8;
  g->mode = (int)mode;
}

rxe_status_t rxe_lib_matmul_nbits_f32(const float* x, const uint8_t* qweight, const float* scales, const void* zeros,
                                      const float* bias, float* y, int64_t m, int64_t n, int64_t k, int64_t bits,
                                      int64_t block_size, int64_t zero_mode, int64_t has_bias, rxe_error_t* err) {
  nbits_t g;
  int64_t tasks;
  rxe_task_fn fn;
  rxe_status_t st = check_layout("matmul_nbits", k, bits, block_size, zero_mode, err);
  if (st != RXE_OK) return st;
  if (m < 0 || n < 0) return rxe_error_set(err, RXE_ERR_SHAPE, "matmul_nbits: m=%d, n=%d must not be negative", m, n);
  if (m == 0 || n == 0) return RXE_OK;
  layout_into(&g, qweight, scales, zeros, k, bits, block_size, zero_mode);
  g.x = x;
  g.bias = has_bias ? bias : (const float*)0;
  g.y = y;
  g.m = m;
  g.n = n;
  if (m <= GEMV_ROWS) {
    fn = gemv_task;
    tasks = n;
  } else {
    fn = gemm_task;
    tasks = (n + PANEL - 1) / PANEL;
  }
  if (m * n * k >= PARALLEL_MIN_MACS && rxe_threads_get_count() > 1) {
    rxe_threads_parallel_for(tasks, fn, &g);
  } else {
    fn(&g, 0, tasks, 0);
  }
  return RXE_OK;
}

/* ---- act int8: x quantized per block, integer dot products (decode path) ---- */

/* Row i of the quantized x (in scratch, q8_row_bytes apart): blocks * block int8 values (zeros past k), then
 * blocks float scales sx, then blocks floats u = sx * (the block's sum of values). With 4 bits and block >= 32
 * ("paired"), each 32 values of a block are stored as the 16 even elements, then the 16 odd ones: the order of
 * the low and the high nibbles of the chunk's 16 bytes, so the nibbles multiply x without being interleaved. */
static int64_t q8_row_bytes(int64_t blocks, int64_t block) { return blocks * (block + 8); }

/* Round to nearest, ties to even, for |v| < 2^22 (the int8 range here). */
static float round_even(float v) {
  const float magic = 12582912.0f; /* 1.5 * 2^23 */
  return v >= 0.0f ? (v + magic) - magic : -((-v + magic) - magic);
}

static void quantize_rows(const float* x, int64_t m, const nbits_t* g, int paired, uint8_t* dst) {
  int64_t i, b, t;
  for (i = 0; i < m; ++i) {
    int8_t* q = (int8_t*)(void*)(dst + i * q8_row_bytes(g->blocks, g->block));
    float* sx = (float*)(void*)(q + g->blocks * g->block);
    for (b = 0; b < g->blocks; ++b) {
      const float* xb = x + i * g->k + b * g->block;
      const int64_t len = g->k - b * g->block < g->block ? g->k - b * g->block : g->block;
      float amax = 0.0f, scale, safe;
      int32_t sum = 0;
      for (t = 0; t < len; ++t) {
        float a = xb[t] < 0.0f ? -xb[t] : xb[t];
        if (a > amax) amax = a;
      }
      scale = amax / 127.0f;
      safe = scale == 0.0f ? 1.0f : scale;
      for (t = 0; t < g->block; ++t) {
        float v = t < len ? round_even(xb[t] / safe) : 0.0f;
        int64_t pos = paired ? (t & ~(int64_t)31) + ((t & 31) >> 1) + ((t & 1) << 4) : t;
        v = v > 127.0f ? 127.0f : v < -127.0f ? -127.0f : v;
        q[b * g->block + pos] = (int8_t)v;
        sum += (int32_t)v;
      }
      sx[b] = scale;
      sx[g->blocks + b] = scale * (float)sum;
    }
  }
}

/* VNNI: u8 x s8 dot products of four, summed into int32 lanes without saturation (vpdpbusd). */
#if defined(__AVX2__) && defined(__FMA__) && defined(__AVX512VNNI__) && defined(__AVX512VL__)
#define QDPBUSD(acc, u, s) _mm256_dpbusd_epi32(acc, u, s)
#elif defined(__AVX2__) && defined(__FMA__) && defined(__AVXVNNI__)
#define QDPBUSD(acc, u, s) _mm256_dpbusd_avx_epi32(acc, u, s)
#endif

/* accf[i] += (sum over the block of q * xq_i) * ws[i] for the r rows (xs[i]: row i's values of this block);
 * the integer sums are exact (4-bit q <= 15 times |xq| <= 127: pairs of products fit int16). */
QINLINE void q8_block(const uint8_t* bp, int bits, int paired, int64_t block, const int8_t* const* xs,
                      const float* ws, qv_t* accf, const int r) {
  int64_t e;
  int i;
#if defined(__AVX2__) && defined(__FMA__)
  __m256i isum[GEMV_ROWS];
  const __m128i mask = _mm_set1_epi8(0x0F);
  QUNROLL(4)
  for (i = 0; i < r; ++i) isum[i] = _mm256_setzero_si256();
  if (paired) {
    const __m256i ones = _mm256_set1_epi16(1);
    for (e = 0; e < block; e += 32) {
      __m128i raw = _mm_loadu_si128((const __m128i*)(const void*)(bp + e / 2));
      __m128i lo = _mm_and_si128(raw, mask), hi = _mm_and_si128(_mm_srli_epi16(raw, 4), mask);
      __m256i q = _mm256_inserti128_si256(_mm256_castsi128_si256(lo), hi, 1);
      QUNROLL(4)
      for (i = 0; i < r; ++i) {
        __m256i xv = _mm256_loadu_si256((const __m256i*)(const void*)(xs[i] + e));
#if defined(QDPBUSD)
        isum[i] = QDPBUSD(isum[i], q, xv);
        (void)ones;
#else
        isum[i] = _mm256_add_epi32(isum[i], _mm256_madd_epi16(_mm256_maddubs_epi16(q, xv), ones));
#endif
      }
    }
#if defined(QDPBUSD)
  } else if (bits == 8 && block >= 32) { /* u8 q times s8 x, four products per lane summed into int32 */
    for (e = 0; e < block; e += 32) {
      __m256i q = _mm256_loadu_si256((const __m256i*)(const void*)(bp + e));
      QUNROLL(4)
      for (i = 0; i < r; ++i) {
        isum[i] = QDPBUSD(isum[i], q, _mm256_loadu_si256((const __m256i*)(const void*)(xs[i] + e)));
      }
    }
#endif
  } else {
    for (e = 0; e < block; e += 16) {
      __m128i v;
      __m256i q;
      if (bits == 4) {
        __m128i raw = _mm_loadl_epi64((const __m128i*)(const void*)(bp + e / 2));
        v = _mm_unpacklo_epi8(_mm_and_si128(raw, mask), _mm_and_si128(_mm_srli_epi16(raw, 4), mask));
      } else {
        v = _mm_loadu_si128((const __m128i*)(const void*)(bp + e));
      }
      q = _mm256_cvtepu8_epi16(v);
      QUNROLL(4)
      for (i = 0; i < r; ++i) {
        __m256i xv = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i*)(const void*)(xs[i] + e)));
        isum[i] = _mm256_add_epi32(isum[i], _mm256_madd_epi16(q, xv));
      }
    }
  }
  QUNROLL(4)
  for (i = 0; i < r; ++i) accf[i] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[i]), _mm256_set1_ps(ws[i]), accf[i]);
#elif defined(QNEON)
  int32x4_t isum[GEMV_ROWS];
  QUNROLL(4)
  for (i = 0; i < r; ++i) isum[i] = vdupq_n_s32(0);
  if (bits == 8) {
    for (e = 0; e < block; e += 16) {
      uint8x16_t v = vld1q_u8(bp + e);
      int16x8_t qlo = vreinterpretq_s16_u16(vmovl_u8(vget_low_u8(v)));
      int16x8_t qhi = vreinterpretq_s16_u16(vmovl_u8(vget_high_u8(v)));
      QUNROLL(4)
      for (i = 0; i < r; ++i) {
        int8x16_t xv = vld1q_s8(xs[i] + e);
        int16x8_t xlo = vmovl_s8(vget_low_s8(xv)), xhi = vmovl_s8(vget_high_s8(xv));
        isum[i] = vmlal_s16(isum[i], vget_low_s16(qlo), vget_low_s16(xlo));
        isum[i] = vmlal_s16(isum[i], vget_high_s16(qlo), vget_high_s16(xlo));
        isum[i] = vmlal_s16(isum[i], vget_low_s16(qhi), vget_low_s16(xhi));
        isum[i] = vmlal_s16(isum[i], vget_high_s16(qhi), vget_high_s16(xhi));
      }
    }
  } else {
    const int step = paired ? 32 : 16;
    for (e = 0; e < block; e += step) {
      int8x16_t q0, q1 = vdupq_n_s8(0);
      if (paired) {
        uint8x16_t raw = vld1q_u8(bp + e / 2);
        q0 = vreinterpretq_s8_u8(vandq_u8(raw, vdupq_n_u8(15)));
        q1 = vreinterpretq_s8_u8(vshrq_n_u8(raw, 4));
      } else {
        uint8x8_t raw = vld1_u8(bp + e / 2);
        uint8x8x2_t t = vzip_u8(vand_u8(raw, vdup_n_u8(15)), vshr_n_u8(raw, 4));
        q0 = vreinterpretq_s8_u8(vcombine_u8(t.val[0], t.val[1]));
      }
      QUNROLL(4)
      for (i = 0; i < r; ++i) {
        int8x16_t x0 = vld1q_s8(xs[i] + e);
#if defined(__ARM_FEATURE_DOTPROD)
        isum[i] = vdotq_s32(isum[i], q0, x0);
        if (paired) isum[i] = vdotq_s32(isum[i], q1, vld1q_s8(xs[i] + e + 16));
#else
        int16x8_t p = vmlal_s8(vmull_s8(vget_low_s8(q0), vget_low_s8(x0)), vget_high_s8(q0), vget_high_s8(x0));
        isum[i] = vpadalq_s16(isum[i], p);
        if (paired) {
          int8x16_t x1 = vld1q_s8(xs[i] + e + 16);
          p = vmlal_s8(vmull_s8(vget_low_s8(q1), vget_low_s8(x1)), vget_high_s8(q1), vget_high_s8(x1));
          isum[i] = vpadalq_s16(isum[i], p);
        }
#endif
      }
    }
  }
  QUNROLL(4)
  for (i = 0; i < r; ++i) accf[i] = qv_fma(accf[i], vcvtq_f32_s32(isum[i]), vdupq_n_f32(ws[i]));
#else
  int32_t isum[GEMV_ROWS];
  for (i = 0; i < r; ++i) isum[i] = 0;
  for (e = 0; e < block; ++e) {
    int32_t q;
    int64_t pos = e;
    if (bits == 8) {
      q = bp[e];
    } else if (paired) { /* value e of the stored order: a low nibble for the first 16 of each 32 */
      int64_t c = e & ~(int64_t)31, l = e & 31;
      q = l < 16 ? bp[(c + 2 * l) >> 1] & 15 : bp[(c + 2 * (l - 16) + 1) >> 1] >> 4;
    } else {
      q = e & 1 ? bp[e >> 1] >> 4 : bp[e >> 1] & 15;
    }
    for (i = 0; i < r; ++i) isum[i] += q * (int32_t)xs[i][pos];
  }
  for (i = 0; i < r; ++i) accf[i] += (float)isum[i] * ws[i];
#endif
}

/* out[i] (i < r) = row i of the quantized x . row `col` of W: per block, the
 * integer sum times sx * s, less (zero * s - offset) * u. */
QINLINE void q8_column(const nbits_t* g, int64_t col, float* out, const int r, const int bits, const int paired) {
  qv_t accf[GEMV_ROWS];
  float corr[GEMV_ROWS], ws[GEMV_ROWS], lanes[VL];
  const int8_t *xs[GEMV_ROWS], *xrow[GEMV_ROWS];
  const float* sx[GEMV_ROWS];
  const int64_t row_bytes = q8_row_bytes(g->blocks, g->block);
  const uint8_t* wrow = g->q + col * g->blocks * g->block_bytes;
  int64_t b;
  int i, l;
  QUNROLL(4)
  for (i = 0; i < r; ++i) {
    accf[i] = qv_zero();
    corr[i] = 0.0f;
    xrow[i] = (const int8_t*)(const void*)(g->xq + i * row_bytes);
    sx[i] = (const float*)(const void*)(xrow[i] + g->blocks * g->block);
  }
  for (b = 0; b < g->blocks; ++b) {
    const block_t p = block_of(g, col, b);
    const float zs = (float)p.zero * p.scale - p.offset;
    QUNROLL(4)
    for (i = 0; i < r; ++i) {
      xs[i] = xrow[i] + b * g->block;
      ws[i] = sx[i][b] * p.scale;
      corr[i] += zs * sx[i][g->blocks + b];
    }
    q8_block(wrow + b * g->block_bytes, bits, paired, g->block, xs, ws, accf, r);
  }
  for (i = 0; i < r; ++i) {
    float sum = 0.0f;
    qv_store(lanes, accf[i]);
    for (l = 0; l < VL; ++l) sum += lanes[l];
    out[i] = sum - corr[i];
  }
}

QINLINE void q8_columns(const nbits_t* g, int64_t c0, int64_t c1, const int bits, const int paired) {
  float out[GEMV_ROWS];
  int64_t col, i;
  for (col = c0; col < c1; ++col) {
    switch (g->m) {
      case 4:
        q8_column(g, col, out, 4, bits, paired);
        break;
      case 3:
        q8_column(g, col, out, 3, bits, paired);
        break;
      case 2:
        q8_column(g, col, out, 2, bits, paired);
        break;
      default:
        q8_column(g, col, out, 1, bits, paired);
        break;
    }
    for (i = 0; i < g->m; ++i) g->y[i * g->n + col] = g->bias ? out[i] + g->bias[col] : out[i];
  }
}

/* Columns [c0, c1), the bits and the order of x constants of each copy. */
static void q8_task(void* ctx, int64_t c0, int64_t c1, int thread) {
  const nbits_t* g = (const nbits_t*)ctx;
  (void)thread;
  if (g->bits == 8) {
    q8_columns(g, c0, c1, 8, 0);
  } else if (g->block >= 32) {
    q8_columns(g, c0, c1, 4, 1);
  } else {
    q8_columns(g, c0, c1, 4, 0);
  }
}

rxe_status_t rxe_lib_matmul_nbits_q8_f32(const float* x, const uint8_t* qweight, const float* scales,
                                         const void* zeros, const float* bias, float* y, float* scratch, int64_t m,
                                         int64_t n, int64_t k, int64_t bits, int64_t block_size, int64_t zero_mode,
                                         int64_t has_bias, rxe_error_t* err) {
  nbits_t g;
  int64_t i, b, e;
  rxe_status_t st = check_layout("matmul_nbits", k, bits, block_size, zero_mode, err);
  if (st != RXE_OK) return st;
  if (m < 0 || n < 0) return rxe_error_set(err, RXE_ERR_SHAPE, "matmul_nbits: m=%d, n=%d must not be negative", m, n);
  if (m == 0 || n == 0) return RXE_OK;
  layout_into(&g, qweight, scales, zeros, k, bits, block_size, zero_mode);
  if (m <= GEMV_ROWS && k > 0) { /* integer dot products */
    g.x = x;
    g.bias = has_bias ? bias : (const float*)0;
    g.y = y;
    g.m = m;
    g.n = n;
    g.xq = (const uint8_t*)(void*)scratch;
    quantize_rows(x, m, &g, bits == 4 && block_size >= 32, (uint8_t*)(void*)scratch);
    if (m * n * k >= PARALLEL_MIN_MACS && rxe_threads_get_count() > 1) {
      rxe_threads_parallel_for(n, q8_task, &g);
    } else {
      q8_task(&g, 0, n, 0);
    }
    return RXE_OK;
  }
  for (i = 0; i < m; ++i) { /* a prefill: x quantized and dequantized again, then the f32 path */
    for (b = 0; b < k; b += block_size) {
      const float* xb = x + i * k + b;
      float* qb = scratch + i * k + b;
      int64_t len = k - b < block_size ? k - b : block_size;
      float amax = 0.0f, scale, safe;
      for (e = 0; e < len; ++e) {
        float a = xb[e] < 0.0f ? -xb[e] : xb[e];
        if (a > amax) amax = a;
      }
      scale = amax / 127.0f;
      safe = scale == 0.0f ? 1.0f : scale;
      for (e = 0; e < len; ++e) {
        float q = round_even(xb[e] / safe);
        q = q > 127.0f ? 127.0f : q < -127.0f ? -127.0f : q;
        qb[e] = q * scale;
      }
    }
  }
  return rxe_lib_matmul_nbits_f32(scratch, qweight, scales, zeros, bias, y, m, n, k, bits, block_size, zero_mode,
                                  has_bias, err);
}

rxe_status_t rxe_lib_gather_nbits_f32(const uint8_t* qweight, const float* scales, const void* zeros,
                                      const void* indices, float* out, int64_t rows, int64_t count, int64_t k,
                                      int64_t bits, int64_t block_size, int64_t zero_mode, int64_t index_bits,
                                      rxe_error_t* err) {
  nbits_t g;
  int64_t t, b, e;
  rxe_status_t st = check_layout("gather_nbits", k, bits, block_size, zero_mode, err);
  if (st != RXE_OK) return st;
  if (index_bits != 32 && index_bits != 64) {
    return rxe_error_set(err, RXE_ERR_DTYPE, "gather_nbits: index_bits must be 32 or 64, got %d", index_bits);
  }
  layout_into(&g, qweight, scales, zeros, k, bits, block_size, zero_mode);
  for (t = 0; t < count; ++t) {
    int64_t r = index_bits == 32 ? (int64_t)((const int32_t*)indices)[t] : ((const int64_t*)indices)[t];
    float* o = out + t * k;
    if (r < -rows || r >= rows) {
      return rxe_error_set(err, RXE_ERR_INDEX, "gather_nbits: index %d (position %d) is outside [-%d, %d)", r, t,
                           rows, rows);
    }
    if (r < 0) r += rows;
    for (b = 0; b < g.blocks; ++b) {
      const block_t p = block_of(&g, r, b);
      const uint8_t* bp = g.q + (r * g.blocks + b) * g.block_bytes;
      int64_t e0 = b * block_size, len = k - e0 < block_size ? k - e0 : block_size;
      for (e = 0; e < len; ++e) o[e0 + e] = weight(bp, e, (int)bits, p, zero_mode == RXE_NBITS_ZERO_FLOAT);
    }
  }
  return RXE_OK;
}
