/* The blocked GEMM driver (gemm_internal.h), its MR x NR micro-kernels and
 * the dense and matmul kernels (relax_edge/kernels.h). */
#include "gemm_internal.h"

#include "relax_edge/runtime.h"
#include "relax_edge/threads.h"

#define MR RXE_GEMM_MR
#define NR RXE_GEMM_NR
#define KC RXE_GEMM_KC
#define NC RXE_GEMM_NC
#ifndef RXE_GEMM_PARALLEL_WORK /* below this m*n*k, one thread (a tuning table may set it) */
#define RXE_GEMM_PARALLEL_WORK (64 * 64 * 64)
#endif
#define PARALLEL_WORK ((int64_t)RXE_GEMM_PARALLEL_WORK)

/* What a tile does with its sums: overwrite c (first k block) or add to it;
 * after the last k block add the biases and apply act. */
typedef struct {
  int first, last, act;
  const float* row_bias; /* MR values or NULL */
  const float* col_bias; /* NR values or NULL */
} epilogue_t;

static float act_scalar(float v, int act) {
  if (act != RXE_ACT_NONE && v < 0.0f) v = 0.0f;
  if (act == RXE_ACT_RELU6 && v > 6.0f) v = 6.0f;
  return v;
}

/* The epilogue of an mr x nr tile whose sums are in t (row stride NR). */
static void epilogue_scalar(const float* t, float* c, int64_t ldc, int64_t mr, int64_t nr,
                            const epilogue_t* e) {
  int64_t i, j;
  for (i = 0; i < mr; ++i) {
    for (j = 0; j < nr; ++j) {
      float v = e->first ? t[i * NR + j] : c[i * ldc + j] + t[i * NR + j];
      if (e->last) {
        if (e->row_bias) v = v + e->row_bias[i];
        if (e->col_bias) v = v + e->col_bias[j];
        v = act_scalar(v, e->act);
      }
      c[i * ldc + j] = v;
    }
  }
}

/* ukernel(kc, a, b, ldb, c, ldc, e): the full MR x NR tile c = epilogue(a @ b),
 * a packed as kc columns of MR, b as kc rows of NR floats ldb apart.
 * ukernel_rows(kc, mr, a, b, ldb, t): the sums of the first mr rows only, into t
 * (row stride NR), for tiles of few rows (dense layers with a small batch). */
#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>

#if defined(__AVX512F__)
/* AVX-512: one zmm per tile row (NR = 16), two interleaved k chains of MR accumulators each (12 sums in
 * flight, enough for two FMA ports of latency 4), the halves added before the epilogue. */
#define FMA512_ROW(i, k)                                                     \
  c##i##k = _mm512_fmadd_ps(_mm512_set1_ps(a[(k) * MR + (i)]), b##k, c##i##k)
#define FMA512_STEP(k) \
  FMA512_ROW(0, k); FMA512_ROW(1, k); FMA512_ROW(2, k); FMA512_ROW(3, k); FMA512_ROW(4, k); FMA512_ROW(5, k)

/* Sixteen sums v of tile row i into c, columns col.. of the tile: the epilogue in one zmm. */
static void store_zmm(float* c, __m512 v, int i, int col, const epilogue_t* e) {
  if (!e->first) v = _mm512_add_ps(_mm512_loadu_ps(c), v);
  if (e->last) {
    if (e->row_bias) v = _mm512_add_ps(v, _mm512_set1_ps(e->row_bias[i]));
    if (e->col_bias) v = _mm512_add_ps(v, _mm512_loadu_ps(e->col_bias + col));
    if (e->act != RXE_ACT_NONE) v = _mm512_max_ps(v, _mm512_setzero_ps());
    if (e->act == RXE_ACT_RELU6) v = _mm512_min_ps(v, _mm512_set1_ps(6.0f));
  }
  _mm512_storeu_ps(c, v);
}

static void store_row_avx512(float* c, __m512 v, int i, const epilogue_t* e) {
  store_zmm(c, v, i, 0, e);
}

static void ukernel(int64_t kc, const float* a, const float* b, int64_t ldb, float* c, int64_t ldc,
                    const epilogue_t* e) {
  __m512 c00 = _mm512_setzero_ps(), c10 = c00, c20 = c00, c30 = c00, c40 = c00, c50 = c00;
  __m512 c01 = c00, c11 = c00, c21 = c00, c31 = c00, c41 = c00, c51 = c00, b0, b1;
  int64_t p = 0;
  int i;
  for (i = 0; i < MR; ++i) { /* the tile's rows, for the epilogue */
    _mm_prefetch((const char*)(c + i * ldc), _MM_HINT_T0);
    _mm_prefetch((const char*)(c + i * ldc + NR - 1), _MM_HINT_T0);
  }
  for (; p + 2 <= kc; p += 2) {
    b0 = _mm512_loadu_ps(b);
    b1 = _mm512_loadu_ps(b + ldb);
    FMA512_STEP(0);
    FMA512_STEP(1);
    a += 2 * MR;
    b += 2 * ldb;
  }
  if (p < kc) {
    b0 = _mm512_loadu_ps(b);
    FMA512_STEP(0);
  }
  store_row_avx512(c, _mm512_add_ps(c00, c01), 0, e);
  store_row_avx512(c + ldc, _mm512_add_ps(c10, c11), 1, e);
  store_row_avx512(c + 2 * ldc, _mm512_add_ps(c20, c21), 2, e);
  store_row_avx512(c + 3 * ldc, _mm512_add_ps(c30, c31), 3, e);
  store_row_avx512(c + 4 * ldc, _mm512_add_ps(c40, c41), 4, e);
  store_row_avx512(c + 5 * ldc, _mm512_add_ps(c50, c51), 5, e);
}
/* wide_tile(kc, a, a2, b0, b1, ldb, c, ldc, e, panels): the full
 * panels*MR x 2NR tile over two column panels (b0 for columns 0..NR-1 of c,
 * b1 for NR..2NR-1, each kc rows of NR floats ldb apart); rows 0..MR-1 from
 * the packed micro-panel a, MR..2MR-1 from a2 (panels 2). One broadcast of a
 * feeds two FMAs: 8 loads per 12 FMAs (panels 1) or 14 per 24 (panels 2),
 * where the MR x NR tile needs 7 per 6 and saturates the two load ports
 * before the FMA ports; panels 2 also halves the reads of B (from L2) per
 * FMA. Every sum is one chain of FMAs in k order whatever panels is, so an
 * element has the same bits in either wide tile. The elements of a partial
 * row panel or of a last, unpaired column panel go through tile() (two or
 * four chains), so their last bits may differ from those the same sums get
 * in a wide tile: two equal rows of A (or columns of B) need not give equal
 * rows (columns) of c. */
#define RXE_GEMM_HAVE_WIDE_TILE 1
static inline __attribute__((always_inline)) void wide_tile(int64_t kc, const float* a, const float* a2,
                                                            const float* b0, const float* b1, int64_t ldb,
                                                            float* c, int64_t ldc, const epilogue_t* e,
                                                            const int panels) {
  __m512 acc[2 * MR][2];
  int64_t p;
  int i;
#pragma GCC unroll 12
  for (i = 0; i < panels * MR; ++i) {
    acc[i][0] = acc[i][1] = _mm512_setzero_ps();
    _mm_prefetch((const char*)(c + i * ldc), _MM_HINT_T0); /* the tile's rows, for the epilogue */
    _mm_prefetch((const char*)(c + i * ldc + 2 * NR - 1), _MM_HINT_T0);
  }
#pragma GCC unroll 2
  for (p = 0; p < kc; ++p) {
    __m512 x0 = _mm512_loadu_ps(b0 + p * ldb), x1 = _mm512_loadu_ps(b1 + p * ldb);
#pragma GCC unroll 12
    for (i = 0; i < panels * MR; ++i) {
      __m512 t = _mm512_set1_ps(i < MR ? a[p * MR + i] : a2[p * MR + i - MR]);
      acc[i][0] = _mm512_fmadd_ps(t, x0, acc[i][0]);
      acc[i][1] = _mm512_fmadd_ps(t, x1, acc[i][1]);
    }
  }
#pragma GCC unroll 12
  for (i = 0; i < panels * MR; ++i) {
    store_zmm(c + i * ldc, acc[i][0], i, 0, e);
    store_zmm(c + i * ldc + NR, acc[i][1], i, NR, e);
  }
}

static void tile_6x32(int64_t kc, const float* a, const float* b0, const float* b1, int64_t ldb, float* c,
                      int64_t ldc, const epilogue_t* e) {
  wide_tile(kc, a, a, b0, b1, ldb, c, ldc, e, 1);
}

static void tile_12x32(int64_t kc, const float* a, const float* a2, const float* b0, const float* b1, int64_t ldb,
                       float* c, int64_t ldc, const epilogue_t* e) {
  wide_tile(kc, a, a2, b0, b1, ldb, c, ldc, e, 2);
}
#else
static void store_row_avx2(float* c, __m256 v0, __m256 v1, int i, const epilogue_t* e) {
  if (!e->first) {
    v0 = _mm256_add_ps(_mm256_loadu_ps(c), v0);
    v1 = _mm256_add_ps(_mm256_loadu_ps(c + 8), v1);
  }
  if (e->last) {
    if (e->row_bias) {
      __m256 r = _mm256_broadcast_ss(e->row_bias + i);
      v0 = _mm256_add_ps(v0, r);
      v1 = _mm256_add_ps(v1, r);
    }
    if (e->col_bias) {
      v0 = _mm256_add_ps(v0, _mm256_loadu_ps(e->col_bias));
      v1 = _mm256_add_ps(v1, _mm256_loadu_ps(e->col_bias + 8));
    }
    if (e->act != RXE_ACT_NONE) {
      v0 = _mm256_max_ps(v0, _mm256_setzero_ps());
      v1 = _mm256_max_ps(v1, _mm256_setzero_ps());
    }
    if (e->act == RXE_ACT_RELU6) {
      v0 = _mm256_min_ps(v0, _mm256_set1_ps(6.0f));
      v1 = _mm256_min_ps(v1, _mm256_set1_ps(6.0f));
    }
  }
  _mm256_storeu_ps(c, v0);
  _mm256_storeu_ps(c + 8, v1);
}

#define FMA_ROW(i)                              \
  t = _mm256_broadcast_ss(a + (i));             \
  c##i##0 = _mm256_fmadd_ps(t, b0, c##i##0);    \
  c##i##1 = _mm256_fmadd_ps(t, b1, c##i##1)
#define FMA_STEP                                                                  \
  b0 = _mm256_loadu_ps(b);                                                        \
  b1 = _mm256_loadu_ps(b + 8);                                                    \
  FMA_ROW(0); FMA_ROW(1); FMA_ROW(2); FMA_ROW(3); FMA_ROW(4); FMA_ROW(5);         \
  a += MR;                                                                        \
  b += ldb

static void ukernel(int64_t kc, const float* a, const float* b, int64_t ldb, float* c, int64_t ldc,
                    const epilogue_t* e) {
  __m256 c00 = _mm256_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00;
  __m256 c30 = c00, c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00, b0, b1, t;
  int64_t p;
  int i;
  for (i = 0; i < MR; ++i) { /* the tile's rows, for the epilogue */
    _mm_prefetch((const char*)(c + i * ldc), _MM_HINT_T0);
    _mm_prefetch((const char*)(c + i * ldc + NR - 1), _MM_HINT_T0);
  }
#pragma GCC unroll 2
  for (p = 0; p < kc; ++p) {
    FMA_STEP;
  }
  store_row_avx2(c, c00, c01, 0, e);
  store_row_avx2(c + ldc, c10, c11, 1, e);
  store_row_avx2(c + 2 * ldc, c20, c21, 2, e);
  store_row_avx2(c + 3 * ldc, c30, c31, 3, e);
  store_row_avx2(c + 4 * ldc, c40, c41, 4, e);
  store_row_avx2(c + 5 * ldc, c50, c51, 5, e);
}

#endif /* __AVX512F__ */

/* Row by row, the sums of each half in four interleaved chains. */
static void ukernel_rows(int64_t kc, int64_t mr, const float* a, const float* b, int64_t ldb, float* t) {
  int64_t i, p;
  for (i = 0; i < mr; ++i) {
    __m256 s[8], x;
    int u;
    for (u = 0; u < 8; ++u) s[u] = _mm256_setzero_ps();
    for (p = 0; p + 4 <= kc; p += 4) {
      for (u = 0; u < 4; ++u) {
        x = _mm256_broadcast_ss(a + (p + u) * MR + i);
        s[2 * u] = _mm256_fmadd_ps(x, _mm256_loadu_ps(b + (p + u) * ldb), s[2 * u]);
        s[2 * u + 1] = _mm256_fmadd_ps(x, _mm256_loadu_ps(b + (p + u) * ldb + 8), s[2 * u + 1]);
      }
    }
    for (; p < kc; ++p) {
      x = _mm256_broadcast_ss(a + p * MR + i);
      s[0] = _mm256_fmadd_ps(x, _mm256_loadu_ps(b + p * ldb), s[0]);
      s[1] = _mm256_fmadd_ps(x, _mm256_loadu_ps(b + p * ldb + 8), s[1]);
    }
    _mm256_storeu_ps(t + i * NR, _mm256_add_ps(_mm256_add_ps(s[0], s[2]), _mm256_add_ps(s[4], s[6])));
    _mm256_storeu_ps(t + i * NR + 8, _mm256_add_ps(_mm256_add_ps(s[1], s[3]), _mm256_add_ps(s[5], s[7])));
  }
}

#elif defined(__aarch64__)
#include <arm_neon.h>

static void ukernel(int64_t kc, const float* a, const float* b, int64_t ldb, float* c, int64_t ldc,
                    const epilogue_t* e) {
  float32x4_t acc[MR][4];
  int64_t p;
  int i, j;
#pragma GCC unroll 6
  for (i = 0; i < MR; ++i) {
#pragma GCC unroll 4
    for (j = 0; j < 4; ++j) acc[i][j] = vdupq_n_f32(0.0f);
  }
  for (p = 0; p < kc; ++p) {
    float32x4_t a03 = vld1q_f32(a), b0 = vld1q_f32(b), b1 = vld1q_f32(b + 4);
    float32x4_t b2 = vld1q_f32(b + 8), b3 = vld1q_f32(b + 12);
    float32x2_t a45 = vld1_f32(a + 4);
#define NEON_ROW(i, av, reg, lane)                                  \
  acc[i][0] = vfmaq_lane##av##_f32(acc[i][0], b0, a##reg, lane);   \
  acc[i][1] = vfmaq_lane##av##_f32(acc[i][1], b1, a##reg, lane);   \
  acc[i][2] = vfmaq_lane##av##_f32(acc[i][2], b2, a##reg, lane);   \
  acc[i][3] = vfmaq_lane##av##_f32(acc[i][3], b3, a##reg, lane)
    NEON_ROW(0, q, 03, 0);
    NEON_ROW(1, q, 03, 1);
    NEON_ROW(2, q, 03, 2);
    NEON_ROW(3, q, 03, 3);
    NEON_ROW(4, , 45, 0);
    NEON_ROW(5, , 45, 1);
#undef NEON_ROW
    a += MR;
    b += ldb;
  }
#pragma GCC unroll 6
  for (i = 0; i < MR; ++i) {
    float* ci = c + i * ldc;
#pragma GCC unroll 4
    for (j = 0; j < 4; ++j) {
      float32x4_t v = acc[i][j];
      if (!e->first) v = vaddq_f32(vld1q_f32(ci + 4 * j), v);
      if (e->last) {
        if (e->row_bias) v = vaddq_f32(v, vdupq_n_f32(e->row_bias[i]));
        if (e->col_bias) v = vaddq_f32(v, vld1q_f32(e->col_bias + 4 * j));
        if (e->act != RXE_ACT_NONE) v = vmaxq_f32(v, vdupq_n_f32(0.0f));
        if (e->act == RXE_ACT_RELU6) v = vminq_f32(v, vdupq_n_f32(6.0f));
      }
      vst1q_f32(ci + 4 * j, v);
    }
  }
}

/* Row by row, the sums of each quarter in two interleaved chains. */
static void ukernel_rows(int64_t kc, int64_t mr, const float* a, const float* b, int64_t ldb, float* t) {
  int64_t i, p;
  int j;
  for (i = 0; i < mr; ++i) {
    float32x4_t s0[4], s1[4];
#pragma GCC unroll 4
    for (j = 0; j < 4; ++j) s0[j] = s1[j] = vdupq_n_f32(0.0f);
    for (p = 0; p + 2 <= kc; p += 2) {
      float x0 = a[p * MR + i], x1 = a[(p + 1) * MR + i];
#pragma GCC unroll 4
      for (j = 0; j < 4; ++j) {
        s0[j] = vfmaq_n_f32(s0[j], vld1q_f32(b + p * ldb + 4 * j), x0);
        s1[j] = vfmaq_n_f32(s1[j], vld1q_f32(b + (p + 1) * ldb + 4 * j), x1);
      }
    }
    if (p < kc) {
#pragma GCC unroll 4
      for (j = 0; j < 4; ++j) s0[j] = vfmaq_n_f32(s0[j], vld1q_f32(b + p * ldb + 4 * j), a[p * MR + i]);
    }
#pragma GCC unroll 4
    for (j = 0; j < 4; ++j) vst1q_f32(t + i * NR + 4 * j, vaddq_f32(s0[j], s1[j]));
  }
}

#else
/* Generic C: 2 x 8 sub-tiles keep the sums in registers on scalar FPUs. */
static void ukernel_rows(int64_t kc, int64_t mr, const float* a, const float* b, int64_t ldb, float* t) {
  int64_t p, i0;
  int j0, i, j;
  for (i0 = 0; i0 < mr; i0 += 2) {
    for (j0 = 0; j0 < NR; j0 += 8) {
      float s[2][8] = {{0.0f}};
      for (p = 0; p < kc; ++p) {
        const float* ap = a + p * MR + i0;
        const float* bp = b + p * ldb + j0;
        for (i = 0; i < 2; ++i) {
          for (j = 0; j < 8; ++j) s[i][j] += ap[i] * bp[j];
        }
      }
      for (i = 0; i < 2; ++i) {
        for (j = 0; j < 8; ++j) t[(i0 + i) * NR + j0 + j] = s[i][j];
      }
    }
  }
}

static void ukernel(int64_t kc, const float* a, const float* b, int64_t ldb, float* c, int64_t ldc,
                    const epilogue_t* e) {
  float t[MR * NR];
  ukernel_rows(kc, MR, a, b, ldb, t);
  epilogue_scalar(t, c, ldc, MR, NR, e);
}
#endif

/* One tile of c, mr x nr (<= MR x NR): partial tiles go through a local tile. */
static void tile(int64_t kc, const float* a, const float* b, int64_t ldb, float* c, int64_t ldc, int64_t mr,
                 int64_t nr, const epilogue_t* e) {
  static const epilogue_t sums = {1, 0, RXE_ACT_NONE, NULL, NULL};
  float t[MR * NR];
  if (mr == MR && nr == NR) {
    ukernel(kc, a, b, ldb, c, ldc, e);
    return;
  }
  if (2 * mr <= MR) {
    ukernel_rows(kc, mr, a, b, ldb, t);
  } else {
    ukernel(kc, a, b, ldb, t, NR, &sums);
  }
  epilogue_scalar(t, c, ldc, mr, nr, e);
}

/* One KC x NC block of the product, as a parallel_for context. */
typedef struct {
  const rxe_gemm_t* g;
  int64_t jc, nc, pc, kc;
  int64_t row_panels, col_panels;
  int by_rows; /* threads split row panels (else column panels) */
} block_t;

static void pack_a(const float* a, int64_t lda, int64_t mr, int64_t kc, float* dst) {
  int64_t i, p;
  if (mr == MR) { /* column by column: six loads, six adjacent stores */
    for (p = 0; p < kc; ++p) {
      for (i = 0; i < MR; ++i) dst[p * MR + i] = a[i * lda + p];
    }
    return;
  }
  for (i = 0; i < MR; ++i) {
    for (p = 0; p < kc; ++p) dst[p * MR + i] = i < mr ? a[i * lda + p] : 0.0f;
  }
}

#ifdef RXE_GEMM_HAVE_WIDE_TILE
#define ROW_GROUP 2 /* row panels computed together (tile_12x32) */
#else
#define ROW_GROUP 1
#endif

static void compute_panels(const block_t* blk, int64_t r0, int64_t r1, int64_t q0, int64_t q1) {
  const rxe_gemm_t* g = blk->g;
  float abuf[ROW_GROUP * MR * KC];
  epilogue_t e;
  int64_t r, q, rows, u;
  e.first = blk->pc == 0;
  e.last = blk->pc + blk->kc == g->k;
  e.act = g->act;
  for (r = r0; r < r1; r += rows) {
    int64_t i0 = r * MR;
    const float* ap[ROW_GROUP];
    rows = ROW_GROUP > 1 && r + 1 < r1 && i0 + 2 * MR <= g->m ? 2 : 1;
    for (u = 0; u < rows; ++u) {
      int64_t mr = g->m - i0 - u * MR < MR ? g->m - i0 - u * MR : MR;
      if (g->a_packed) {
        ap[u] = g->a_packed + (r + u) * g->a_panel_stride + blk->pc * MR;
      } else {
        pack_a(g->a + (i0 + u * MR) * g->lda + blk->pc, g->lda, mr, blk->kc, abuf + u * MR * KC);
        ap[u] = abuf + u * MR * KC;
      }
    }
    e.row_bias = g->row_bias ? g->row_bias + i0 : NULL;
    for (q = q0; q < q1; ++q) {
      int64_t j0 = blk->jc + q * NR, nr = blk->jc + blk->nc - j0 < NR ? blk->jc + blk->nc - j0 : NR;
      int in_place = g->b_packed && (nr == NR || !g->pack_b);
      const float* bp = in_place ? g->b_packed + (j0 / NR) * g->b_panel_stride + blk->pc * g->ldb
                                 : g->scratch + (g->b_packed ? 0 : q * blk->kc * NR);
      int64_t ldb = in_place ? g->ldb : NR;
      float* c = g->c + i0 * g->ldc + j0;
      e.col_bias = g->col_bias ? g->col_bias + j0 : NULL;
#ifdef RXE_GEMM_HAVE_WIDE_TILE
      /* two full panels side by side (q even from the block's first: the same pairs on any thread count) */
      if (i0 + MR <= g->m && q + 1 < q1 && j0 + 2 * NR <= blk->jc + blk->nc && (in_place || !g->b_packed)) {
        const float* bp1 = bp + (in_place ? g->b_panel_stride : blk->kc * NR);
        if (rows == 2) {
          tile_12x32(blk->kc, ap[0], ap[1], bp, bp1, ldb, c, g->ldc, &e);
        } else {
          tile_6x32(blk->kc, ap[0], bp, bp1, ldb, c, g->ldc, &e);
        }
        ++q;
        continue;
      }
#endif
      for (u = 0; u < rows; ++u) {
        int64_t mr = g->m - i0 - u * MR < MR ? g->m - i0 - u * MR : MR;
        e.row_bias = g->row_bias ? g->row_bias + i0 + u * MR : NULL;
        tile(blk->kc, ap[u], bp, ldb, c + u * MR * g->ldc, g->ldc, mr, nr, &e);
      }
      e.row_bias = g->row_bias ? g->row_bias + i0 : NULL;
    }
  }
}

/* Split by columns, a task is PANEL_GROUP column panels, so that the panels
 * paired into one tile do not depend on the thread count. */
#ifdef RXE_GEMM_HAVE_WIDE_TILE
#define PANEL_GROUP 2
#else
#define PANEL_GROUP 1
#endif

static void compute_task(void* ctx, int64_t begin, int64_t end, int thread) {
  const block_t* blk = (const block_t*)ctx;
  (void)thread;
  if (blk->by_rows) {
    compute_panels(blk, begin, end, 0, blk->col_panels);
  } else {
    end *= PANEL_GROUP;
    compute_panels(blk, 0, blk->row_panels, begin * PANEL_GROUP, end < blk->col_panels ? end : blk->col_panels);
  }
}

static void pack_task(void* ctx, int64_t begin, int64_t end, int thread) {
  const block_t* blk = (const block_t*)ctx;
  const rxe_gemm_t* g = blk->g;
  int64_t j = begin * NR, nr = blk->nc - j < (end - begin) * NR ? blk->nc - j : (end - begin) * NR;
  (void)thread;
  g->pack_b(g->b_ctx, blk->pc, blk->kc, blk->jc + j, nr, g->scratch + begin * blk->kc * NR);
}

static void run_tasks(int parallel, int64_t n, rxe_task_fn fn, void* ctx) {
  if (parallel) {
    rxe_threads_parallel_for(n, fn, ctx);
  } else if (n > 0) {
    fn(ctx, 0, n, 0);
  }
}

/* k == 0: c is the epilogue of zero sums. */
static void fill_empty_sums(const rxe_gemm_t* g) {
  int64_t i, j;
  for (i = 0; i < g->m; ++i) {
    for (j = 0; j < g->n; ++j) {
      float v = 0.0f;
      if (g->row_bias) v = v + g->row_bias[i];
      if (g->col_bias) v = v + g->col_bias[j];
      g->c[i * g->ldc + j] = act_scalar(v, g->act);
    }
  }
}

void rxe_gemm_run(const rxe_gemm_t* g) {
  int parallel = g->m * g->n * g->k > PARALLEL_WORK && rxe_threads_get_count() > 1;
  block_t blk;
  if (g->k == 0) {
    fill_empty_sums(g);
    return;
  }
  blk.g = g;
  blk.row_panels = (g->m + MR - 1) / MR;
  for (blk.jc = 0; blk.jc < g->n; blk.jc += NC) {
    blk.nc = g->n - blk.jc < NC ? g->n - blk.jc : NC;
    blk.col_panels = (blk.nc + NR - 1) / NR;
    blk.by_rows = blk.row_panels >= blk.col_panels;
    for (blk.pc = 0; blk.pc < g->k; blk.pc += KC) {
      blk.kc = g->k - blk.pc < KC ? g->k - blk.pc : KC;
      if (!g->b_packed) {
        run_tasks(parallel, blk.col_panels, pack_task, &blk);
      } else if (g->pack_b && blk.nc % NR != 0) { /* only the last, partial panel */
        g->pack_b(g->b_ctx, blk.pc, blk.kc, g->n - blk.nc % NR, blk.nc % NR, g->scratch);
      }
      run_tasks(parallel, blk.by_rows ? blk.row_panels : (blk.col_panels + PANEL_GROUP - 1) / PANEL_GROUP,
                compute_task, &blk);
    }
  }
}

/* ------------------------------------------------------------ kernels */

typedef struct {
  const float* b;
  int64_t ldb;
} row_major_t;

static void pack_row_major(const void* ctx, int64_t p0, int64_t kc, int64_t j0, int64_t nr, float* dst) {
  const row_major_t* src = (const row_major_t*)ctx;
  int64_t q, p, j;
  for (q = 0; q * NR < nr; ++q) {
    int64_t width = nr - q * NR < NR ? nr - q * NR : NR;
    for (p = 0; p < kc; ++p) {
      const float* row = src->b + (p0 + p) * src->ldb + j0 + q * NR;
      float* out = dst + (q * kc + p) * NR;
      if (width == NR) {
        for (j = 0; j < NR; ++j) out[j] = row[j];
      } else {
        for (j = 0; j < NR; ++j) out[j] = j < width ? row[j] : 0.0f;
      }
    }
  }
}

static void gemm_init(rxe_gemm_t* g, int64_t m, int64_t n, int64_t k, float* c, int act) {
  g->m = m;
  g->n = n;
  g->k = k;
  g->a = NULL;
  g->lda = k;
  g->a_packed = NULL;
  g->a_panel_stride = 0;
  g->b_packed = NULL;
  g->b_panel_stride = 0;
  g->ldb = NR;
  g->pack_b = NULL;
  g->b_ctx = NULL;
  g->scratch = NULL;
  g->c = c;
  g->ldc = n;
  g->row_bias = NULL;
  g->col_bias = NULL;
  g->act = act;
}

rxe_status_t rxe_lib_dense_f32(const float* a, const float* w_packed, const float* bias, float* c,
                               int64_t m, int64_t n, int64_t k, int64_t act, rxe_error_t* err) {
  rxe_gemm_t g;
  if (!RXE_ACT_VALID(act)) {
    return rxe_error_set(err, RXE_ERR_INTERNAL, "rxe_lib_dense_f32: act %d is not 0 (none), 1 (relu) or 2 (relu6)",
                         act);
  }
  if (m < 0 || n < 0 || k < 0) {
    return rxe_error_set(err, RXE_ERR_SHAPE, "rxe_lib_dense_f32: negative size (m %d, n %d, k %d)", m, n, k);
  }
  if (m <= RXE_DENSE_GEMV_ROWS) {
    rxe_gemv_run(a, w_packed, bias, c, m, n, k, (int)act);
    return RXE_OK;
  }
  gemm_init(&g, m, n, k, c, (int)act);
  g.a = a;
  g.b_packed = w_packed;
  g.b_panel_stride = k * NR;
  g.col_bias = bias;
  rxe_gemm_run(&g);
  return RXE_OK;
}

rxe_status_t rxe_lib_matmul_f32(const float* a, const float* b, float* c, float* scratch, int64_t batch,
                                int64_t m, int64_t n, int64_t k, int64_t a_batch_stride,
                                int64_t b_batch_stride, rxe_error_t* err) {
  rxe_gemm_t g;
  row_major_t src;
  int64_t t;
  if (batch < 0 || m < 0 || n < 0 || k < 0) {
    return rxe_error_set(err, RXE_ERR_SHAPE, "rxe_lib_matmul_f32: negative size (batch %d, m %d, n %d, k %d)",
                         batch, m, n, k);
  }
  if (scratch == NULL && m * n * k > 0) {
    return rxe_error_set(err, RXE_ERR_NULL, "rxe_lib_matmul_f32: scratch is NULL");
  }
  if (m <= RXE_DENSE_GEMV_ROWS) {
    for (t = 0; t < batch; ++t) {
      rxe_gemv_row_major_run(a + t * a_batch_stride, b + t * b_batch_stride, c + t * m * n, m, n, k);
    }
    return RXE_OK;
  }
  gemm_init(&g, m, n, k, c, RXE_ACT_NONE);
  g.pack_b = pack_row_major;
  g.b_ctx = &src;
  g.scratch = scratch;
  src.ldb = n;
  for (t = 0; t < batch; ++t) {
    g.a = a + t * a_batch_stride;
    g.c = c + t * m * n;
    src.b = b + t * b_batch_stride;
    rxe_gemm_run(&g);
  }
  return RXE_OK;
}
