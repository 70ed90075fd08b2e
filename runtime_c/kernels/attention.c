/* KV-cache kernels: the append of new positions into a cache state, and
 * attention reading the state in place (see relax_edge/kernels_kv.h). */
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

/* Rows [begin, end) of heads x seq: one pass over the cache with a running maximum. */
static void attention_rows(void* ctx, int64_t begin, int64_t end, int thread) {
  const attention_args* a = (const attention_args*)ctx;
  int64_t r, j, d;
  (void)thread;
  for (r = begin; r < end; ++r) {
    const int64_t h = r / a->seq, i = r % a->seq;
    const float* q = a->q + r * a->dim;
    const float* k = a->k + (h / a->group) * a->max_context * a->dim;
    const float* v = a->v + (h / a->group) * a->max_context * a->dim;
    const float* m = a->has_mask ? a->mask + h * a->mask_head_stride + i * a->mask_row_stride : 0;
    float* o = a->out + r * a->dim;
    float best = 0.0f, total = 0.0f;
    int any = 0, nan = 0;
    for (d = 0; d < a->dim; ++d) o[d] = 0.0f;
    for (j = 0; j < a->kv_len; ++j) {
      const float* kj = k + j * a->dim;
      const float* vj = v + j * a->dim;
      float s = 0.0f, p;
      for (d = 0; d < a->dim; ++d) s += q[d] * kj[d];
      s = s * a->scale + (m ? m[j] : 0.0f);
      if (s != s) nan = 1;                /* a NaN score makes the row NaN, as the softmax does */
      if (nan || s < -3.0e38f) continue; /* a masked-out position (-FLT_MAX or -inf) weighs nothing */
      if (!any || s > best) {
        const float c = any ? rxe_f32_exp(best - s) : 0.0f;
        total *= c;
        for (d = 0; d < a->dim; ++d) o[d] *= c;
        best = s;
        any = 1;
      }
      p = rxe_f32_exp(s - best);
      total += p;
      for (d = 0; d < a->dim; ++d) o[d] += p * vj[d];
    }
    if (nan) {
      const float q_nan = s_nan();
      for (d = 0; d < a->dim; ++d) o[d] = q_nan;
    } else if (total > 0.0f) {
      const float inv = 1.0f / total;
      for (d = 0; d < a->dim; ++d) o[d] *= inv;
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
  rxe_threads_parallel_for(heads * seq, attention_rows, &a);
  return RXE_OK;
}
