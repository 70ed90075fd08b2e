/* The dense and matmul kernels' path for few rows (gemm_internal.h,
 * rxe_gemv_run, rxe_gemv_row_major_run): c (m,n) = act(a (m,k) @ W (k,n) +
 * bias) for m <= RXE_GEMV_MAX_M, W in the dense kernel's column panels of NR
 * or row-major. Each panel (k rows of NR floats; one contiguous run when
 * packed) is read once, from its first row to its last, for all m rows of a,
 * so a thread streams a packed W sequentially; the sums of a panel stay in
 * registers, in CH interleaved chains over k that hide the multiply-add
 * latency, and the epilogue (bias, act) writes the panel's columns of c.
 * Column panels are split over the thread pool; a column is computed the
 * same way whatever thread runs it. */
#include "gemm_internal.h"

#include "relax_edge/threads.h"

#define NR RXE_GEMM_NR
#define MAX_M RXE_GEMV_MAX_M
#define PARALLEL_MIN_MACS 262144 /* below this m*n*k (1 MB of W at m = 1), one thread */

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

#ifndef PREFETCH_ROWS
#define PREFETCH_ROWS 32
#endif
#if defined(__GNUC__) && PREFETCH_ROWS > 0
#define prefetch(p) __builtin_prefetch(p)
#else
#define prefetch(p) ((void)(p))
#endif
#define MAX_CH 4

/* t (r x NR, row stride NR) = a (r rows, lda apart) @ one panel w (k rows
 * of NR floats, ldw apart), in ch chains: chain c sums the rows p of w with
 * p % ch == c. r and ch are constants at each call, so the r*ch*NV sums are
 * registers. */
GEMV_INLINE void panel_sums(const float* a, int64_t lda, const float* w, int64_t ldw, int64_t k, float* t,
                            const int r, const int ch) {
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
      prefetch(w + (p + c + PREFETCH_ROWS) * ldw);
      UNROLL(16)
      for (v = 0; v < NV; ++v) b[v] = vec_load(w + (p + c) * ldw + v * VL);
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
    for (v = 0; v < NV; ++v) b[v] = vec_load(w + p * ldw + v * VL);
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
static void sums(const float* a, int64_t lda, int64_t m, const float* w, int64_t ldw, int64_t k, float* t) {
  int64_t i0;
  for (i0 = 0; i0 < m; i0 += ROWS_AT_ONCE) {
    const float* ai = a + i0 * lda;
    float* ti = t + i0 * NR;
    switch (m - i0 < ROWS_AT_ONCE ? m - i0 : ROWS_AT_ONCE) {
#if ROWS_AT_ONCE > 1
      case 4:
        panel_sums(ai, lda, w, ldw, k, ti, 4, 1);
        break;
      case 3:
        panel_sums(ai, lda, w, ldw, k, ti, 3, 1);
        break;
      case 2:
        panel_sums(ai, lda, w, ldw, k, ti, 2, 2);
        break;
#endif
      default:
        panel_sums(ai, lda, w, ldw, k, ti, 1, ROWS_AT_ONCE > 1 ? 4 : 1);
        break;
    }
  }
}

/* The first nr < NR columns of a panel of a row-major w, which a full
 * panel's loads would read past (the end of w on its last row). */
static void partial_sums(const float* a, int64_t lda, int64_t m, const float* w, int64_t ldw, int64_t k,
                         int64_t nr, float* t) {
  int64_t i, j, p;
  for (i = 0; i < m; ++i) {
    for (j = 0; j < nr; ++j) {
      float s = 0.0f;
      for (p = 0; p < k; ++p) s += a[i * lda + p] * w[p * ldw + j];
      t[i * NR + j] = s;
    }
  }
}

typedef struct {
  const float* a;
  const float* w;
  int64_t ldw, panel_stride; /* row stride of w; from one column panel to the next */
  int row_major;             /* w is row-major (a last, partial panel is summed apart) */
  const float* bias;
  float* c;
  int64_t m, n, k;
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
    if (nr < NR && g->row_major) {
      partial_sums(g->a, g->k, g->m, g->w + q * g->panel_stride, g->ldw, g->k, nr, t);
    } else {
      sums(g->a, g->k, g->m, g->w + q * g->panel_stride, g->ldw, g->k, t);
    }
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

static void run(const gemv_t* g) {
  int64_t panels = (g->n + NR - 1) / NR;
  if (g->m <= 0 || panels <= 0) return;
  if (g->m * g->n * g->k >= PARALLEL_MIN_MACS && rxe_threads_get_count() > 1) {
    rxe_threads_parallel_for(panels, gemv_panels, (void*)g);
  } else {
    gemv_panels((void*)g, 0, panels, 0);
  }
}

void rxe_gemv_run(const float* a, const float* w_packed, const float* bias, float* c, int64_t m, int64_t n,
                  int64_t k, int act) {
  gemv_t g;
  g.a = a;
  g.w = w_packed;
  g.ldw = NR;
  g.panel_stride = k * NR;
  g.row_major = 0;
  g.bias = bias;
  g.c = c;
  g.m = m;
  g.n = n;
  g.k = k;
  g.act = act;
  run(&g);
}

void rxe_gemv_row_major_run(const float* a, const float* b, float* c, int64_t m, int64_t n, int64_t k) {
  gemv_t g;
  g.a = a;
  g.w = b;
  g.ldw = n;
  g.panel_stride = NR;
  g.row_major = 1;
  g.bias = (const float*)0;
  g.c = c;
  g.m = m;
  g.n = n;
  g.k = k;
  g.act = RXE_ACT_NONE;
  run(&g);
}
