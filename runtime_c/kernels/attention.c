/* KV-cache kernels: the append of new positions into a cache state, and
 * attention reading the state in place (see relax_edge/kernels_kv.h). */
#ifndef RXE_NO_LIBM
#define RXE_NO_LIBM /* only kernel.h's portable rxe_f32_exp is used: no libm, freestanding */
#endif
#include "relax_edge/kernel.h"
#include "relax_edge/kernels.h"
#include "relax_edge/runtime.h"
#include "relax_edge/threads.h"

rxe_status_t rxe_lib_kv_append_f32(float* state, const float* new_positions, float* out, int64_t kv_heads,
                                   int64_t max_context, int64_t seq, int64_t head_dim, int64_t offset,
                                   rxe_error_t* err) {
  int64_t h;
  if (offset < 0 || seq < 0 || offset + seq > max_context) {
    return rxe_error_set(err, RXE_ERR_BOUND,
                         "kv_append: positions [%d, %d) are outside the cache's context bound max_context=%d",
                         offset, offset + seq, max_context);
  }
  for (h = 0; h < kv_heads; ++h) {
    rxe_mem_copy(state + (h * max_context + offset) * head_dim, new_positions + h * seq * head_dim,
                 (uint64_t)(seq * head_dim) * sizeof(float));
  }
  /* a result that is not the state's own storage (a function output): the whole state, copied */
  if (out != state) rxe_mem_copy(out, state, (uint64_t)(kv_heads * max_context * head_dim) * sizeof(float));
  return RXE_OK;
}

static float s_nan(void) {
  union {
    uint32_t bits;
    float value;
  } u;
  u.bits = 0x7fc00000u;
  return u.value;
}

typedef struct {
  const float *q, *k, *v, *mask;
  float scale;
  float* out;
  int64_t heads, group, seq, kv_len, max_context, dim, has_mask, mask_head_stride, mask_row_stride;
} attention_args;

/* Dot products and row updates over head_dim, in eight lanes (GCC/Clang vector extensions: one AVX
 * register, two NEON ones, scalars on a Cortex-M4), the rest one by one. Eight partial sums instead of one
 * chain: the sums' order differs from a plain loop's in the last bits. */
#if defined(__GNUC__)
typedef float lanes8 __attribute__((vector_size(32)));

static inline lanes8 load8(const float* p) {
  lanes8 x;
  __builtin_memcpy(&x, p, sizeof(x));
  return x;
}

static inline float dot(const float* a, const float* b, int64_t n) {
  lanes8 acc = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
  float s;
  int64_t d = 0;
  for (; d + 8 <= n; d += 8) acc += load8(a + d) * load8(b + d);
  s = ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
  for (; d < n; ++d) s += a[d] * b[d];
  return s;
}

/* o = o * c + p * v */
static inline void update(float* o, float c, float p, const float* v, int64_t n) {
  int64_t d = 0;
  for (; d + 8 <= n; d += 8) {
    lanes8 x = load8(o + d) * c + load8(v + d) * p;
    __builtin_memcpy(o + d, &x, sizeof(x));
  }
  for (; d < n; ++d) o[d] = o[d] * c + p * v[d];
}
#else
static float dot(const float* a, const float* b, int64_t n) {
  float s = 0.0f;
  int64_t d;
  for (d = 0; d < n; ++d) s += a[d] * b[d];
  return s;
}

static void update(float* o, float c, float p, const float* v, int64_t n) {
  int64_t d;
  for (d = 0; d < n; ++d) o[d] = o[d] * c + p * v[d];
}
#endif

#define GROUP_CHUNK 16 /* query heads sharing a KV head, handled in one pass over its cache */

/* Tasks [begin, end) of kv_heads x seq x chunks: the query heads of one KV head (up to GROUP_CHUNK of
 * them) for one row, in one pass over that KV head's positions, each with a running maximum. A position
 * masked out for every head of the chunk (-FLT_MAX, -inf) is not read at all. */
static void attention_rows(void* ctx, int64_t begin, int64_t end, int thread) {
  const attention_args* a = (const attention_args*)ctx;
  const int64_t chunks = (a->group + GROUP_CHUNK - 1) / GROUP_CHUNK;
  int64_t task, j, d;
  (void)thread;
  for (task = begin; task < end; ++task) {
    const int64_t kvh = task / (a->seq * chunks), i = (task / chunks) % a->seq, c = task % chunks;
    const int64_t h0 = kvh * a->group + c * GROUP_CHUNK;
    const int g = (int)(a->group - c * GROUP_CHUNK < GROUP_CHUNK ? a->group - c * GROUP_CHUNK : GROUP_CHUNK);
    const float* k = a->k + kvh * a->max_context * a->dim;
    const float* v = a->v + kvh * a->max_context * a->dim;
    const float* q[GROUP_CHUNK];
    const float* m[GROUP_CHUNK];
    float* o[GROUP_CHUNK];
    float best[GROUP_CHUNK], total[GROUP_CHUNK], s[GROUP_CHUNK];
    int any[GROUP_CHUNK], nan[GROUP_CHUNK], h;
    for (h = 0; h < g; ++h) {
      const int64_t r = (h0 + h) * a->seq + i;
      q[h] = a->q + r * a->dim;
      o[h] = a->out + r * a->dim;
      m[h] = a->has_mask ? a->mask + (h0 + h) * a->mask_head_stride + i * a->mask_row_stride : 0;
      best[h] = total[h] = 0.0f;
      any[h] = nan[h] = 0;
      for (d = 0; d < a->dim; ++d) o[h][d] = 0.0f;
    }
    for (j = 0; j < a->kv_len; ++j) {
      const float* kj = k + j * a->dim;
      const float* vj = v + j * a->dim;
      int live = 0;
      for (h = 0; h < g; ++h) {
        const float add = m[h] ? m[h][j] : 0.0f;
        if (add < -3.0e38f) { /* masked out: weighs nothing */
          s[h] = add;
          continue;
        }
        s[h] = dot(q[h], kj, a->dim) * a->scale + add;
        if (s[h] != s[h]) nan[h] = 1; /* a NaN score makes the row NaN, as the softmax does */
        if (!nan[h] && s[h] >= -3.0e38f) live = 1;
      }
      if (!live) continue;
      for (h = 0; h < g; ++h) {
        float p, c = 1.0f;
        if (nan[h] || s[h] < -3.0e38f) continue;
        if (!any[h] || s[h] > best[h]) { /* a new maximum: what was summed so far scales down */
          c = any[h] ? rxe_f32_exp(best[h] - s[h]) : 0.0f;
          total[h] *= c;
          best[h] = s[h];
          any[h] = 1;
        }
        p = rxe_f32_exp(s[h] - best[h]);
        total[h] += p;
        update(o[h], c, p, vj, a->dim);
      }
    }
    for (h = 0; h < g; ++h) {
      if (nan[h]) {
        const float q_nan = s_nan();
        for (d = 0; d < a->dim; ++d) o[h][d] = q_nan;
      } else if (total[h] > 0.0f) {
        const float inv = 1.0f / total[h];
        for (d = 0; d < a->dim; ++d) o[h][d] *= inv;
      }
    }
  }
}

rxe_status_t rxe_lib_kv_attention_f32(const float* q, const float* k, const float* v, const float* mask,
                                      const float* scale, float* out, int64_t heads, int64_t kv_heads, int64_t seq,
                                      int64_t kv_len, int64_t max_context, int64_t head_dim, int64_t has_mask,
                                      int64_t mask_head_stride, int64_t mask_row_stride, rxe_error_t* err) {
  attention_args a;
  if (kv_heads <= 0 || heads % kv_heads != 0) {
    return rxe_error_set(err, RXE_ERR_SHAPE, "kv_attention: %d query heads are not a multiple of %d KV heads",
                         heads, kv_heads);
  }
  if (kv_len < 0 || kv_len > max_context) {
    return rxe_error_set(err, RXE_ERR_BOUND, "kv_attention: %d positions exceed the context bound max_context=%d",
                         kv_len, max_context);
  }
  a.q = q;
  a.k = k;
  a.v = v;
  a.mask = mask;
  a.scale = scale[0];
  a.out = out;
  a.heads = heads;
  a.group = heads / kv_heads;
  a.seq = seq;
  a.kv_len = kv_len;
  a.max_context = max_context;
  a.dim = head_dim;
  a.has_mask = has_mask;
  a.mask_head_stride = mask_head_stride;
  a.mask_row_stride = mask_row_stride;
  rxe_threads_parallel_for(kv_heads * seq * ((a.group + GROUP_CHUNK - 1) / GROUP_CHUNK), attention_rows, &a);
  return RXE_OK;
}
