/* The dense and matmul kernels' path for few rows (gemm_internal.h,
 * rxe_gemv_run, rxe_gemv_row_major_run): c (m,n) = act(a (m,k) @ W (k,n) +
 * bias) for m <= RXE_GEMV_MAX_M.
 *
 * W in the dense kernel's column panels of NR: each panel (k rows of NR
 * floats, one contiguous run) is read once, from its first row to its last,
 * for all m rows of a, so a thread streams W sequentially; the sums of a
 * panel stay in registers, in interleaved chains over k that hide the
 * multiply-add latency, and the epilogue (bias, act) writes the panel's
 * columns of c. A row-major W (matmul) is read in blocks of columns, row
 * segments four at a time, multiplied into the block of c (in L1).
 * Column panels (blocks) are split over the thread pool; a column is
 * computed the same way whatever thread runs it. */
#include "gemm_internal.h"

#include "relax_edge/threads.h"

#define NR RXE_GEMM_NR
#define MAX_M RXE_GEMV_MAX_M
#ifndef RXE_GEMV_PARALLEL_MIN_MACS /* below this m*n*k (1 MB of W at m = 1), one thread; a tuning table may set it */
#define RXE_GEMV_PARALLEL_MIN_MACS 262144
#endif
#define PARALLEL_MIN_MACS ((int64_t)RXE_GEMV_PARALLEL_MIN_MACS)

#if defined(__GNUC__)
#define GEMV_INLINE static inline __attribute__((always_inline))
#define PRAGMA_(x) _Pragma(#x)
#define UNROLL(n) PRAGMA_(GCC unroll n) /* so that the sums stay registers at -O2 */
#else
#define GEMV_INLINE static inline
#define UNROLL(n)
#endif

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#define VL 8
typedef __m256 vec_t;
#define vec_set(s) _mm256_set1_ps(s)
#define vec_load(p) _mm256_loadu_ps(p)
#define vec_store(p, v) _mm256_storeu_ps(p, v)
#define vec_fma(acc, a, b) _mm256_fmadd_ps(a, b, acc)
#define vec_add(a, b) _mm256_add_ps(a, b)
#define ROWS_AT_ONCE MAX_M
#elif defined(__aarch64__)
#include <arm_neon.h>
#define VL 4
typedef float32x4_t vec_t;
#define vec_set(s) vdupq_n_f32(s)
#define vec_load(p) vld1q_f32(p)
#define vec_store(p, v) vst1q_f32(p, v)
#define vec_fma(acc, a, b) vfmaq_f32(acc, a, b)
#define vec_add(a, b) vaddq_f32(a, b)
#define ROWS_AT_ONCE MAX_M
#else
/* Generic C: one row at a time, the NR sums of a panel in scalars. */
#define VL 1
typedef float vec_t;
#define vec_set(s) (s)
#define vec_load(p) (*(p))
#define vec_store(p, v) (*(p) = (v))
#define vec_fma(acc, a, b) ((acc) + (a) * (b))
#define vec_add(a, b) ((a) + (b))
#define ROWS_AT_ONCE 1
#endif

#define NV (NR / VL) /* vectors per panel row */
#define JB 4096 /* floats of c per block of columns of a row-major w (about JB / m columns, 16 KB) */

#ifndef PREFETCH_ROWS
#define PREFETCH_ROWS 32
#endif
#if defined(__GNUC__) && PREFETCH_ROWS > 0
#define prefetch(p) __builtin_prefetch(p)
#else
#define prefetch(p) ((void)(p))
#endif
#define MAX_CH 4

/* t (r x NR, row stride NR) = a (r rows, lda apart) @ one panel w (k x NR),
 * in ch chains: chain c sums the rows p of w with p % ch == c. r and ch are
 * constants at each call, so the r*ch*NV sums are registers. */
GEMV_INLINE void panel_sums(const float* a, int64_t lda, const float* w, int64_t k, float* t, const int r,
                            const int ch) {
  vec_t s[MAX_CH][MAX_M][NV], b[NV], x;
  int64_t p;
  int c, i, v;
  UNROLL(4)
  for (c = 0; c < ch; ++c) {
    UNROLL(4)
    for (i = 0; i < r; ++i) {
      UNROLL(16)
      for (v = 0; v < NV; ++v) s[c][i][v] = vec_set(0.0f);
    }
  }
  for (p = 0; p + ch <= k; p += ch) {
    UNROLL(4)
    for (c = 0; c < ch; ++c) {
      prefetch(w + (p + c + PREFETCH_ROWS) * NR);
      UNROLL(16)
      for (v = 0; v < NV; ++v) b[v] = vec_load(w + (p + c) * NR + v * VL);
      UNROLL(4)
      for (i = 0; i < r; ++i) {
        x = vec_set(a[i * lda + p + c]);
        UNROLL(16)
        for (v = 0; v < NV; ++v) s[c][i][v] = vec_fma(s[c][i][v], x, b[v]);
      }
    }
  }
  for (; p < k; ++p) {
    UNROLL(16)
    for (v = 0; v < NV; ++v) b[v] = vec_load(w + p * NR + v * VL);
    UNROLL(4)
    for (i = 0; i < r; ++i) {
      x = vec_set(a[i * lda + p]);
      UNROLL(16)
      for (v = 0; v < NV; ++v) s[0][i][v] = vec_fma(s[0][i][v], x, b[v]);
    }
  }
  UNROLL(4)
  for (i = 0; i < r; ++i) {
    UNROLL(16)
    for (v = 0; v < NV; ++v) {
      vec_t sum = s[0][i][v];
      UNROLL(4)
      for (c = 1; c < ch; ++c) sum = vec_add(sum, s[c][i][v]);
      vec_store(t + i * NR + v * VL, sum);
    }
  }
}

/* The sums of m <= MAX_M rows: four chains for one row, two for two, one
 * for three or four (8 vector sums with AVX2, up to 16 with NEON). */
static void sums(const float* a, int64_t lda, int64_t m, const float* w, int64_t k, float* t) {
  int64_t i0;
  for (i0 = 0; i0 < m; i0 += ROWS_AT_ONCE) {
    const float* ai = a + i0 * lda;
    float* ti = t + i0 * NR;
    switch (m - i0 < ROWS_AT_ONCE ? m - i0 : ROWS_AT_ONCE) {
#if ROWS_AT_ONCE > 1
      case 4:
        panel_sums(ai, lda, w, k, ti, 4, 1);
        break;
      case 3:
        panel_sums(ai, lda, w, k, ti, 3, 1);
        break;
      case 2:
        panel_sums(ai, lda, w, k, ti, 2, 2);
        break;
#endif
      default:
        panel_sums(ai, lda, w, k, ti, 1, ROWS_AT_ONCE > 1 ? 4 : 1);
        break;
    }
  }
}

typedef struct {
  const float* a;
  const float* w;
  const float* bias;
  float* c;
  int64_t m, n, k;
  int64_t jb; /* columns per block of a row-major w */
  int act;
} gemv_t;

/* Column panels [q0, q1) of c. */
static void gemv_panels(void* ctx, int64_t q0, int64_t q1, int thread) {
  const gemv_t* g = (const gemv_t*)ctx;
  float t[MAX_M * NR];
  int64_t q, i, j;
  (void)thread;
  for (q = q0; q < q1; ++q) {
    int64_t j0 = q * NR, nr = g->n - j0 < NR ? g->n - j0 : NR;
    sums(g->a, g->k, g->m, g->w + q * g->k * NR, g->k, t);
    for (i = 0; i < g->m; ++i) {
      float* ci = g->c + i * g->n + j0;
      for (j = 0; j < nr; ++j) {
        float v = g->bias ? t[i * NR + j] + g->bias[j0 + j] : t[i * NR + j];
        if (g->act != RXE_ACT_NONE && v < 0.0f) v = 0.0f;
        if (g->act == RXE_ACT_RELU6 && v > 6.0f) v = 6.0f;
        ci[j] = v;
      }
    }
  }
}

/* c[:, j0:j0+nb] = a @ w[:, j0:j0+nb] for a row-major w (k, n): the rows of
 * w four at a time, each one's segment of nb floats (contiguous) multiplied
 * into the block of c (m x nb, in L1) in order of p, so column j sums its k
 * terms in order whatever the blocking. */
static void row_major_block(const gemv_t* g, int64_t j0, int64_t nb) {
  int64_t i, j, p, nv = nb - nb % VL;
  for (i = 0; i < g->m; ++i) {
    for (j = 0; j < nb; ++j) g->c[i * g->n + j0 + j] = 0.0f;
  }
  for (p = 0; p + 4 <= g->k; p += 4) {
    const float* w0 = g->w + p * g->n + j0;
    const float *w1 = w0 + g->n, *w2 = w1 + g->n, *w3 = w2 + g->n;
    for (i = 0; i < g->m; ++i) {
      const float* ai = g->a + i * g->k + p;
      float* ci = g->c + i * g->n + j0;
      vec_t x0 = vec_set(ai[0]), x1 = vec_set(ai[1]), x2 = vec_set(ai[2]), x3 = vec_set(ai[3]);
      for (j = 0; j < nv; j += VL) {
        vec_t v = vec_fma(vec_load(ci + j), x0, vec_load(w0 + j));
        v = vec_fma(v, x1, vec_load(w1 + j));
        v = vec_fma(v, x2, vec_load(w2 + j));
        vec_store(ci + j, vec_fma(v, x3, vec_load(w3 + j)));
      }
      for (; j < nb; ++j) ci[j] = (((ci[j] + ai[0] * w0[j]) + ai[1] * w1[j]) + ai[2] * w2[j]) + ai[3] * w3[j];
    }
  }
  for (; p < g->k; ++p) {
    const float* wp = g->w + p * g->n + j0;
    for (i = 0; i < g->m; ++i) {
      float* ci = g->c + i * g->n + j0;
      float x = g->a[i * g->k + p];
      for (j = 0; j < nv; j += VL) vec_store(ci + j, vec_fma(vec_load(ci + j), vec_set(x), vec_load(wp + j)));
      for (; j < nb; ++j) ci[j] += x * wp[j];
    }
  }
}

/* Column blocks [q0, q1) of c, g->jb columns each. */
static void row_major_blocks(void* ctx, int64_t q0, int64_t q1, int thread) {
  const gemv_t* g = (const gemv_t*)ctx;
  int64_t q;
  (void)thread;
  for (q = q0; q < q1; ++q) row_major_block(g, q * g->jb, g->n - q * g->jb < g->jb ? g->n - q * g->jb : g->jb);
}

static int parallel(const gemv_t* g) {
  return g->m * g->n * g->k >= PARALLEL_MIN_MACS && rxe_threads_get_count() > 1;
}

static void run(const gemv_t* g, int64_t blocks, rxe_task_fn fn) {
  if (g->m <= 0 || blocks <= 0) return;
  if (parallel(g)) {
    rxe_threads_parallel_for(blocks, fn, (void*)g);
  } else {
    fn((void*)g, 0, blocks, 0);
  }
}

void rxe_gemv_run(const float* a, const float* w_packed, const float* bias, float* c, int64_t m, int64_t n,
                  int64_t k, int act) {
  gemv_t g;
  g.a = a;
  g.w = w_packed;
  g.bias = bias;
  g.c = c;
  g.m = m;
  g.n = n;
  g.k = k;
  g.jb = NR;
  g.act = act;
  run(&g, (n + NR - 1) / NR, gemv_panels);
}

void rxe_gemv_row_major_run(const float* a, const float* b, float* c, int64_t m, int64_t n, int64_t k) {
  gemv_t g;
  g.a = a;
  g.w = b;
  g.bias = (const float*)0;
  g.c = c;
  g.m = m;
  g.n = n;
  g.k = k;
  g.act = RXE_ACT_NONE;
  if (m <= 0) return;
  g.jb = JB / m / NR * NR; /* blocks start at multiples of NR: a column's sums are the same whatever the blocking */
  if (parallel(&g)) {       /* at least a block per thread */
    int64_t share = (n + rxe_threads_get_count() - 1) / rxe_threads_get_count();
    share = (share + NR - 1) / NR * NR;
    if (share < g.jb) g.jb = share;
  }
  run(&g, (n + g.jb - 1) / g.jb, row_major_blocks);
}
