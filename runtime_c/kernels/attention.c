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
  float* scratch;
  int64_t heads, group, seq, kv_len, max_context, dim, has_mask, mask_head_stride, mask_row_stride, splits, rows;
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

/* o += p * v */
static inline void axpy(float* o, float p, const float* v, int64_t n) {
  int64_t d = 0;
  for (; d + 8 <= n; d += 8) {
    lanes8 x = load8(o + d) + load8(v + d) * p;
    __builtin_memcpy(o + d, &x, sizeof(x));
  }
  for (; d < n; ++d) o[d] += p * v[d];
}

typedef int32_t lanes8_mask __attribute__((vector_size(32)));
RXE_VECTOR_MATH_F32(lanes8)

/* out[t] = exp(in[t]) for eight scores at once: the same operations as rxe_f32_exp, lane by lane */
static inline void exp8(const float* in, float* out) {
  lanes8 x = lanes8_exp(load8(in));
  __builtin_memcpy(out, &x, sizeof(x));
}
#else
static void axpy(float* o, float p, const float* v, int64_t n) {
  int64_t d;
  for (d = 0; d < n; ++d) o[d] += p * v[d];
}

static void exp8(const float* in, float* out) {
  int t;
  for (t = 0; t < 8; ++t) out[t] = rxe_f32_exp(in[t]);
}

static float dot(const float* a, const float* b, int64_t n) {
  float s = 0.0f;
  int64_t d;
  for (d = 0; d < n; ++d) s += a[d] * b[d];
  return s;
}

#endif

#define SCORE_BLOCK 8 /* positions scored, then weighed, together: one maximum update and one vector exp */
#define GROUP_CHUNK RXE_KV_GROUP_CHUNK /* query heads sharing a KV head, handled in one pass over its cache */

/* A row's running softmax: the maximum so far, the sum of exp(score - best), whether a position counted,
 * whether a score was NaN. o (head_dim) holds the matching unnormalized sum of exp(score - best) v. */
typedef struct {
  float best, total;
  int any, nan;
} softmax_state;

/* o += p[t] v[j + t] over the block's positions that counted (s[t] >= -3e38), total += p[t]: each lane
 * group of o kept in a register over the positions (no store between them). */
static void weigh_rows(const attention_args* a, const float* v, int64_t j, int n, const float* s, const float* p,
                       float* o, float* total) {
  const float* rows[SCORE_BLOCK];
  float w[SCORE_BLOCK];
  int64_t d = 0;
  int t, live = 0;
  for (t = 0; t < n; ++t) {
    if (s[t] < -3.0e38f) continue;
    *total += p[t];
    rows[live] = v + (j + t) * a->dim;
    w[live++] = p[t];
  }
#if defined(__GNUC__)
  for (; d + 8 <= a->dim; d += 8) {
    lanes8 acc = load8(o + d);
    for (t = 0; t < live; ++t) acc += load8(rows[t] + d) * w[t];
    __builtin_memcpy(o + d, &acc, sizeof(acc));
  }
#endif
  for (; d < a->dim; ++d) {
    float acc = o[d];
    for (t = 0; t < live; ++t) acc += rows[t][d] * w[t];
    o[d] = acc;
  }
}

/* The block's weights for each member whose scores s[h] (n of them; a masked one < -3e38) are in: one
 * rescale of o[h] and st[h] when the block raises the maximum, eight weights in one vector exp, then
 * o[h] += weight * v for each position that counted. */
static void weigh_block(const attention_args* a, const float* v, int64_t j, int n, float s[][SCORE_BLOCK], int g,
                        float* const* o, softmax_state* st) {
  int64_t d;
  int h, t;
  for (h = 0; h < g; ++h) {
    float best, p[SCORE_BLOCK];
    int any = 0;
    if (st[h].nan) continue;
    best = st[h].best;
    for (t = 0; t < n; ++t) {
      if (s[h][t] < -3.0e38f) continue;
      if ((!st[h].any && !any) || s[h][t] > best) best = s[h][t];
      any = 1;
    }
    if (!any) continue;
    if (st[h].any && best > st[h].best) { /* a new maximum: what was summed so far scales down */
      const float c = rxe_f32_exp(st[h].best - best);
      st[h].total *= c;
      for (d = 0; d < a->dim; ++d) o[h][d] *= c;
    }
    st[h].best = best;
    st[h].any = 1;
    for (t = 0; t < SCORE_BLOCK; ++t) p[t] = t < n && s[h][t] >= -3.0e38f ? s[h][t] - best : -200.0f;
    exp8(p, p);
    weigh_rows(a, v, j, n, s[h], p, o[h], &st[h].total);
  }
}

static void clear_members(const attention_args* a, int g, float* const* o, softmax_state* st) {
  int64_t d;
  int h;
  for (h = 0; h < g; ++h) {
    st[h].best = st[h].total = 0.0f;
    st[h].any = st[h].nan = 0;
    for (d = 0; d < a->dim; ++d) o[h][d] = 0.0f;
  }
}

#if defined(__GNUC__) && !(defined(__ARM_ARCH_PROFILE) && __ARM_ARCH_PROFILE == 'M')
#define WIDE_PATH 1
/* Prefill: many members share each block of keys. The block's keys are laid out by dimension (kt[d][t],
 * zeros past n) once, and each member's eight scores are then head_dim multiply-adds of a broadcast query
 * element, with no horizontal sums. A masked position's score is its mask, whatever its key holds; a block
 * masked for every member is not read. */
#define WIDE_MIN_MEMBERS 4
#define WIDE_MAX_DIM 64

static inline int any_lane(lanes8_mask m) {
  int t, any = 0;
  for (t = 0; t < 8; ++t) any |= m[t] != 0;
  return any;
}

static inline float max_lane(lanes8 x) {
  const float a = x[0] > x[4] ? x[0] : x[4], b = x[1] > x[5] ? x[1] : x[5];
  const float c = x[2] > x[6] ? x[2] : x[6], d = x[3] > x[7] ? x[3] : x[7];
  const float ab = a > b ? a : b, cd = c > d ? c : d;
  return ab > cd ? ab : cd;
}

/* o += sum_t w[t] v[t] over eight consecutive rows of v (row stride dim), o in registers over the rows */
static inline void weigh_eight(const float* v, int64_t dim, lanes8 w, float* o) {
  int64_t d = 0;
  for (; d + 8 <= dim; d += 8) {
    lanes8 x = load8(o + d), y = load8(v + d) * w[0];
    x += load8(v + dim + d) * w[1];
    y += load8(v + 2 * dim + d) * w[2];
    x += load8(v + 3 * dim + d) * w[3];
    y += load8(v + 4 * dim + d) * w[4];
    x += load8(v + 5 * dim + d) * w[5];
    y += load8(v + 6 * dim + d) * w[6];
    x += load8(v + 7 * dim + d) * w[7];
    x += y;
    __builtin_memcpy(o + d, &x, sizeof(x));
  }
  for (; d < dim; ++d) {
    int t;
    for (t = 0; t < 8; ++t) o[d] += w[t] * v[t * dim + d];
  }
}

static void attend_members_wide(const attention_args* a, int64_t kvh, const float* const* q, const float* const* m,
                                int g, int64_t j0, int64_t j1, float* const* o, softmax_state* st) {
  const float* k = a->k + kvh * a->max_context * a->dim;
  const float* v = a->v + kvh * a->max_context * a->dim;
  const lanes8 masked_out = {-3.4e38f, -3.4e38f, -3.4e38f, -3.4e38f, -3.4e38f, -3.4e38f, -3.4e38f, -3.4e38f};
  const lanes8 zero = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
  const lanes8 far_below = zero - 200.0f; /* exp of it is 0: the weight of a position that does not count */
  float kt[WIDE_MAX_DIM * SCORE_BLOCK];
  lanes8 add[GROUP_CHUNK]; /* a member's mask lanes, then its scores, then its weights */
  int live[GROUP_CHUNK];     /* the positions of the block that count for it, as bits */
  int64_t j, d;
  int h, t;
  clear_members(a, g, o, st);
  for (j = j0; j < j1; j += SCORE_BLOCK) {
    const int n = (int)(j1 - j < SCORE_BLOCK ? j1 - j : SCORE_BLOCK);
    int open = 0;
    for (h = 0; h < g; ++h) { /* the block's mask lanes, masked past n */
      if (m[h] && n == SCORE_BLOCK) {
        add[h] = load8(m[h] + j);
      } else {
        add[h] = masked_out;
        for (t = 0; t < n; ++t) add[h][t] = m[h] ? m[h][j + t] : 0.0f;
      }
      for (t = 0; t < n; ++t) open |= add[h][t] >= -3.0e38f || add[h][t] != add[h][t];
    }
    if (!open) continue;
    for (t = 0; t < n; ++t) {
      const float* kr = k + (j + t) * a->dim;
      for (d = 0; d < a->dim; ++d) kt[d * SCORE_BLOCK + t] = kr[d];
    }
    for (; t < SCORE_BLOCK; ++t) {
      for (d = 0; d < a->dim; ++d) kt[d * SCORE_BLOCK + t] = 0.0f;
    }
    for (h = 0; h < g; ++h) { /* the scores of every member first: independent chains */
      const float* qh = q[h];
      lanes8 acc0 = zero, acc1 = zero;
      d = 0;
      for (; d + 2 <= a->dim; d += 2) {
        acc0 += qh[d] * load8(kt + d * SCORE_BLOCK);
        acc1 += qh[d + 1] * load8(kt + (d + 1) * SCORE_BLOCK);
      }
      if (d < a->dim) acc0 += qh[d] * load8(kt + d * SCORE_BLOCK);
      add[h] = RXE_SEL_V(lanes8, add[h] < -3.0e38f, add[h], (acc0 + acc1) * a->scale + add[h]);
    }
    for (h = 0; h < g; ++h) {
      const lanes8 sc = add[h];
      lanes8 e;
      lanes8_mask counted;
      float best, sum;
      int bits = 0;
      live[h] = 0;
      if (st[h].nan) continue;
      if (any_lane(sc != sc)) { /* a NaN score makes the row NaN, as the softmax does */
        st[h].nan = 1;
        continue;
      }
      counted = sc >= -3.0e38f;
      for (t = 0; t < SCORE_BLOCK; ++t) bits |= (counted[t] != 0) << t;
      if (!bits) continue;
      best = max_lane(sc); /* a position that does not count scores below every one that does */
      if (!st[h].any) {
        st[h].best = best;
        st[h].any = 1;
      } else if (best > st[h].best) { /* a new maximum: what was summed so far scales down */
        const float c = rxe_f32_exp(st[h].best - best);
        st[h].total *= c;
        for (d = 0; d < a->dim; ++d) o[h][d] *= c;
        st[h].best = best;
      }
      e = sc - st[h].best;
      e = lanes8_exp(RXE_SEL_V(lanes8, counted, e, far_below));
      e = RXE_SEL_V(lanes8, counted, e, zero);
      sum = ((e[0] + e[4]) + (e[1] + e[5])) + ((e[2] + e[6]) + (e[3] + e[7]));
      st[h].total += sum;
      add[h] = e;
      live[h] = bits;
    }
    for (h = 0; h < g; ++h) { /* then their weighted values */
      if (live[h] == 0xff) {
        weigh_eight(v + j * a->dim, a->dim, add[h], o[h]);
      } else if (live[h]) {
        float wts[SCORE_BLOCK];
        __builtin_memcpy(wts, &add[h], sizeof(add[h]));
        for (t = 0; t < n; ++t) {
          if (live[h] >> t & 1) axpy(o[h], wts[t], v + (j + t) * a->dim, a->dim);
        }
      }
    }
  }
}
#endif

/* The query rows of `g` members (a head in a row each: q[h], its mask row m[h] or NULL) that share KV head
 * kvh, over positions [j0, j1), into o[h] (unnormalized) and st[h]. A position masked out for every member
 * (-FLT_MAX, -inf) is not read at all. */
static void attend_members(const attention_args* a, int64_t kvh, const float* const* q, const float* const* m,
                           int g, int64_t j0, int64_t j1, float* const* o, softmax_state* st) {
  const float* k = a->k + kvh * a->max_context * a->dim;
  const float* v = a->v + kvh * a->max_context * a->dim;
  float s[GROUP_CHUNK][SCORE_BLOCK];
  int64_t j;
  int h;
#if defined(WIDE_PATH)
  if (g >= WIDE_MIN_MEMBERS && a->dim <= WIDE_MAX_DIM) {
    attend_members_wide(a, kvh, q, m, g, j0, j1, o, st);
    return;
  }
#endif
  clear_members(a, g, o, st);
  for (j = j0; j < j1; j += SCORE_BLOCK) {
    const int n = (int)(j1 - j < SCORE_BLOCK ? j1 - j : SCORE_BLOCK);
    int live = 0, t;
    for (h = 0; h < g; ++h) { /* the block's scores; a masked position's stays its mask (< -3e38) */
      for (t = 0; t < n; ++t) {
        const float add = m[h] ? m[h][j + t] : 0.0f;
        if (add < -3.0e38f) { /* masked out: weighs nothing, its key is not read */
          s[h][t] = add;
          continue;
        }
        s[h][t] = dot(q[h], k + (j + t) * a->dim, a->dim) * a->scale + add;
        if (s[h][t] != s[h][t]) st[h].nan = 1; /* a NaN score makes the row NaN, as the softmax does */
        else if (s[h][t] >= -3.0e38f) live = 1;
      }
    }
    if (live) weigh_block(a, v, j, n, s, g, o, st);
  }
}

/* The g query heads h0.. of KV head kvh in row i. */
static void attend(const attention_args* a, int64_t kvh, int64_t i, int64_t h0, int g, int64_t j0, int64_t j1,
                   float* const* o, softmax_state* st) {
  const float* q[GROUP_CHUNK];
  const float* m[GROUP_CHUNK];
  int h;
  for (h = 0; h < g; ++h) {
    q[h] = a->q + ((h0 + h) * a->seq + i) * a->dim;
    m[h] = a->has_mask ? a->mask + (h0 + h) * a->mask_head_stride + i * a->mask_row_stride : 0;
  }
  attend_members(a, kvh, q, m, g, j0, j1, o, st);
}

/* out row = o / total (NaN when a score was; zeros when no position counted) */
static void finish(float* out, const softmax_state* st, int64_t dim) {
  int64_t d;
  if (st->nan) {
    const float q_nan = s_nan();
    for (d = 0; d < dim; ++d) out[d] = q_nan;
  } else if (st->total > 0.0f) {
    const float inv = 1.0f / st->total;
    for (d = 0; d < dim; ++d) out[d] *= inv;
  }
}

/* Task t of kv_heads x seq x chunks: (KV head, row, first query head, heads in the chunk). */
static int task_heads(const attention_args* a, int64_t t, int64_t* kvh, int64_t* i, int64_t* h0) {
  const int64_t chunks = (a->group + GROUP_CHUNK - 1) / GROUP_CHUNK, c = t % chunks;
  *kvh = t / (a->seq * chunks);
  *i = (t / chunks) % a->seq;
  *h0 = *kvh * a->group + c * GROUP_CHUNK;
  return (int)(a->group - c * GROUP_CHUNK < GROUP_CHUNK ? a->group - c * GROUP_CHUNK : GROUP_CHUNK);
}

/* Tasks [begin, end) of kv_heads x row blocks x chunks: the query heads of one chunk in a block of up to
 * a->rows rows (a->rows * heads <= GROUP_CHUNK members), all sharing one KV head, in one pass over the
 * whole context (each key and value read once for all of them), written to out. */
static void attention_rows(void* ctx, int64_t begin, int64_t end, int thread) {
  const attention_args* a = (const attention_args*)ctx;
  const int64_t chunks = (a->group + GROUP_CHUNK - 1) / GROUP_CHUNK, blocks = (a->seq + a->rows - 1) / a->rows;
  int64_t task;
  (void)thread;
  for (task = begin; task < end; ++task) {
    const int64_t c = task % chunks, block = (task / chunks) % blocks, kvh = task / (blocks * chunks);
    const int64_t h0 = kvh * a->group + c * GROUP_CHUNK, i0 = block * a->rows;
    const int g = (int)(a->group - c * GROUP_CHUNK < GROUP_CHUNK ? a->group - c * GROUP_CHUNK : GROUP_CHUNK);
    const int rows = (int)(a->seq - i0 < a->rows ? a->seq - i0 : a->rows);
    const float* q[GROUP_CHUNK];
    const float* m[GROUP_CHUNK];
    float* o[GROUP_CHUNK];
    softmax_state st[GROUP_CHUNK];
    int r, h, n = 0;
    for (r = 0; r < rows; ++r) {
      for (h = 0; h < g; ++h, ++n) {
        const int64_t row = (h0 + h) * a->seq + i0 + r;
        q[n] = a->q + row * a->dim;
        o[n] = a->out + row * a->dim;
        m[n] = a->has_mask ? a->mask + (h0 + h) * a->mask_head_stride + (i0 + r) * a->mask_row_stride : 0;
      }
    }
    attend_members(a, kvh, q, m, n, 0, a->kv_len, o, st);
    for (h = 0; h < n; ++h) finish(o[h], &st[h], a->dim);
  }
}

/* Split over the context (decode, seq = 1, when there are fewer tasks than threads can share evenly): item
 * (task, split) attends over its share of the positions into the scratch (per head: head_dim floats of o,
 * then best, total, any, nan as floats); a second pass merges each task's splits. */
static float* split_slot(const attention_args* a, int64_t task, int64_t split, int h) {
  const int64_t per_task = a->group < GROUP_CHUNK ? a->group : GROUP_CHUNK;
  return a->scratch + ((task * a->splits + split) * per_task + h) * (a->dim + 4);
}

static void attention_splits(void* ctx, int64_t begin, int64_t end, int thread) {
  const attention_args* a = (const attention_args*)ctx;
  int64_t item;
  (void)thread;
  for (item = begin; item < end; ++item) {
    const int64_t task = item / a->splits, split = item % a->splits;
    const int64_t j0 = a->kv_len * split / a->splits, j1 = a->kv_len * (split + 1) / a->splits;
    int64_t kvh, i, h0;
    const int g = task_heads(a, task, &kvh, &i, &h0);
    float* o[GROUP_CHUNK];
    softmax_state st[GROUP_CHUNK];
    int h;
    for (h = 0; h < g; ++h) o[h] = split_slot(a, task, split, h);
    attend(a, kvh, i, h0, g, j0, j1, o, st);
    for (h = 0; h < g; ++h) {
      float* tail = o[h] + a->dim;
      tail[0] = st[h].best;
      tail[1] = st[h].total;
      tail[2] = (float)st[h].any;
      tail[3] = (float)st[h].nan;
    }
  }
}

static void merge_splits(void* ctx, int64_t begin, int64_t end, int thread) {
  const attention_args* a = (const attention_args*)ctx;
  int64_t task, split, d;
  (void)thread;
  for (task = begin; task < end; ++task) {
    int64_t kvh, i, h0;
    const int g = task_heads(a, task, &kvh, &i, &h0);
    int h;
    for (h = 0; h < g; ++h) {
      float* out = a->out + ((h0 + h) * a->seq + i) * a->dim;
      softmax_state st = {0.0f, 0.0f, 0, 0};
      for (split = 0; split < a->splits; ++split) { /* the largest maximum of the splits */
        const float* tail = split_slot(a, task, split, h) + a->dim;
        if (tail[3] != 0.0f) st.nan = 1;
        if (tail[2] != 0.0f && (!st.any || tail[0] > st.best)) {
          st.best = tail[0];
          st.any = 1;
        }
      }
      for (d = 0; d < a->dim; ++d) out[d] = 0.0f;
      for (split = 0; split < a->splits && st.any && !st.nan; ++split) {
        const float* o = split_slot(a, task, split, h);
        float c;
        if (o[a->dim + 2] == 0.0f) continue;
        c = rxe_f32_exp(o[a->dim] - st.best);
        st.total += o[a->dim + 1] * c;
        for (d = 0; d < a->dim; ++d) out[d] += o[d] * c;
      }
      finish(out, &st, a->dim);
    }
  }
}

rxe_status_t rxe_lib_kv_attention_f32(const float* q, const float* k, const float* v, const float* mask,
                                      const float* scale, float* out, float* scratch, int64_t heads,
                                      int64_t kv_heads, int64_t seq, int64_t kv_len, int64_t max_context,
                                      int64_t head_dim, int64_t has_mask, int64_t mask_head_stride,
                                      int64_t mask_row_stride, rxe_error_t* err) {
  attention_args a;
  int64_t tasks;
  int threads = rxe_threads_get_count();
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
  a.scratch = scratch;
  a.rows = 1;
  tasks = kv_heads * seq * ((a.group + GROUP_CHUNK - 1) / GROUP_CHUNK);
  /* one row at a time (decode) and too few tasks for the threads: split the context, each share at least
   * RXE_KV_SPLIT_MIN positions, into enough items that the threads share them within a quarter */
  a.splits = 1;
  if (seq == 1 && threads > 1 && tasks < 4 * (int64_t)threads) {
    a.splits = (4 * (int64_t)threads + tasks - 1) / tasks;
    if (a.splits > RXE_KV_MAX_SPLITS) a.splits = RXE_KV_MAX_SPLITS;
    if (a.splits > kv_len / RXE_KV_SPLIT_MIN) a.splits = kv_len / RXE_KV_SPLIT_MIN;
    if (a.splits < 1) a.splits = 1;
  }
  if (a.splits == 1) { /* rows of the same KV head together, as many as the chunk has room for */
    const int64_t chunks = (a.group + GROUP_CHUNK - 1) / GROUP_CHUNK;
    a.rows = chunks == 1 ? GROUP_CHUNK / a.group : 1;
    if (a.rows > seq) a.rows = seq;
    if (a.rows < 1) a.rows = 1;
    rxe_threads_parallel_for(kv_heads * ((seq + a.rows - 1) / a.rows) * chunks, attention_rows, &a);
  } else {
    rxe_threads_parallel_for(tasks * a.splits, attention_splits, &a);
    rxe_threads_parallel_for(tasks, merge_splits, &a);
  }
  return RXE_OK;
}
