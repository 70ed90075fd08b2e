/* The sampler of relax_edge/generate.h: temperature, top-k, top-p, a
 * SplitMix64 draw in integers. Freestanding; the order of the kept tokens
 * comes from a max-heap over the vocabulary, popped only as far as top-k
 * and top-p look (O(vocab + k log vocab)). */

/* the draw must not depend on the compiler fusing a * b + c (kernel.h's exp) */
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

#include "relax_edge/generate.h"
#include "relax_edge/kernel.h"

void rxe_rng_seed(rxe_rng_t* rng, uint64_t seed) { rng->state = seed; }

uint64_t rxe_rng_next(rxe_rng_t* rng) {
  uint64_t z = (rng->state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/* floor(a * b / 2^64) without a 128-bit type */
static uint64_t mul_high(uint64_t a, uint64_t b) {
  uint64_t a_lo = a & 0xffffffffu, a_hi = a >> 32, b_lo = b & 0xffffffffu, b_hi = b >> 32;
  uint64_t lo_lo = a_lo * b_lo, hi_lo = a_hi * b_lo, lo_hi = a_lo * b_hi, hi_hi = a_hi * b_hi;
  uint64_t cross = (lo_lo >> 32) + (hi_lo & 0xffffffffu) + lo_hi;
  return hi_hi + (hi_lo >> 32) + (cross >> 32);
}

uint64_t rxe_sampling_scratch_bytes(int64_t vocab) {
  uint64_t v = vocab > 0 ? (uint64_t)vocab : 0u;
  return 3u * RXE_ALIGN_UP(4u * v);
}

/* The sampler's scratch: the scaled logits s[vocab]; order[vocab], the candidate tokens (a heap over
 * order[0, heap_size) whose popped tokens collect at the end of the candidates, the first popped at
 * order[candidates - 1]); w[vocab], the candidates' exp(s - s_max) by token id. */
typedef struct {
  float* s;
  int32_t* order;
  float* w;
  int64_t vocab;
  int64_t heap_size;
  const int32_t* kept; /* the kept tokens, kept[0, num_kept), in a fixed order; NULL: every token, ids in order */
  int64_t num_kept;
  int64_t argmax; /* greedy: the token */
} sampler_t;

/* a comes before b: the larger scaled logit, and among equal ones the higher id */
static int comes_before(const float* s, int32_t a, int32_t b) { return s[a] > s[b] || (s[a] == s[b] && a > b); }

static void sift_down(sampler_t* q, int64_t i) {
  int32_t* h = q->order;
  for (;;) {
    int64_t left = 2 * i + 1, best = i;
    int32_t t;
    if (left < q->heap_size && comes_before(q->s, h[left], h[best])) best = left;
    if (left + 1 < q->heap_size && comes_before(q->s, h[left + 1], h[best])) best = left + 1;
    if (best == i) return;
    t = h[i];
    h[i] = h[best];
    h[best] = t;
    i = best;
  }
}

/* Move the heap's first token behind it (heap sort's step); returns it. */
static int32_t pop(sampler_t* q) {
  int32_t top = q->order[0];
  q->heap_size -= 1;
  q->order[0] = q->order[q->heap_size];
  q->order[q->heap_size] = top;
  sift_down(q, 0);
  return top;
}

static rxe_status_t check_inputs(const float* logits, int64_t vocab, const rxe_sampling_t* c, void* scratch,
                                 uint64_t scratch_bytes, rxe_error_t* err) {
  if (logits == NULL || c == NULL) return rxe_error_set(err, RXE_ERR_NULL, "sampling: no logits or no config");
  if (vocab < 1 || vocab > INT32_MAX) return rxe_error_set(err, RXE_ERR_SHAPE, "sampling: vocab %d", vocab);
  if (c->temperature != c->temperature) return rxe_error_set(err, RXE_ERR_BOUND, "sampling: temperature is NaN");
  if (!(c->top_p >= 0.0f)) return rxe_error_set(err, RXE_ERR_BOUND, "sampling: top_p must be >= 0 (not NaN)");
  if (c->temperature <= 0.0f) return RXE_OK; /* greedy needs no scratch */
  if (scratch == NULL) return rxe_error_set(err, RXE_ERR_NULL, "sampling: no scratch");
  if ((uintptr_t)scratch % RXE_WORKSPACE_ALIGNMENT != 0) {
    return rxe_error_set(err, RXE_ERR_WORKSPACE, "sampling: scratch is not aligned to %d bytes",
                         (int64_t)RXE_WORKSPACE_ALIGNMENT);
  }
  if (scratch_bytes < rxe_sampling_scratch_bytes(vocab)) {
    return rxe_error_set(err, RXE_ERR_WORKSPACE, "sampling: scratch of %d bytes, %d needed for vocab %d",
                         (int64_t)scratch_bytes, (int64_t)rxe_sampling_scratch_bytes(vocab), vocab);
  }
  return RXE_OK;
}

/* Greedy: the first maximum; refuses NaN and +inf, and all -inf. */
static rxe_status_t argmax(const float* logits, int64_t vocab, int64_t* out, rxe_error_t* err) {
  int64_t i, best = 0;
  for (i = 0; i < vocab; ++i) {
    float x = logits[i];
    if (x != x || x > 3.4028235e38f) {
      return rxe_error_set(err, RXE_ERR_INTERNAL, "sampling: the logit of token %d is %s", i,
                           x != x ? "NaN" : "+inf");
    }
    if (x > logits[best]) best = i;
  }
  if (!(logits[best] >= -3.4028235e38f)) return rxe_error_set(err, RXE_ERR_INTERNAL, "sampling: every logit is -inf");
  *out = best;
  return RXE_OK;
}

/* The k-th largest scaled logit (1 <= k < vocab): one pass with a min-heap of k values in w. */
static float kth_largest(sampler_t* q, int64_t k) {
  float* h = q->w;
  int64_t i;
  for (i = 0; i < q->vocab; ++i) {
    float x = q->s[i];
    int64_t at, n = i < k ? i + 1 : k;
    if (i >= k && !(x > h[0])) continue;
    if (i < k) { /* sift up */
      at = i;
      while (at > 0 && h[(at - 1) / 2] > x) {
        h[at] = h[(at - 1) / 2];
        at = (at - 1) / 2;
      }
      h[at] = x;
      continue;
    }
    at = 0; /* replace the minimum, sift down */
    for (;;) {
      int64_t left = 2 * at + 1, small = left;
      if (left >= n) break;
      if (left + 1 < n && h[left + 1] < h[left]) small = left + 1;
      if (!(h[small] < x)) break;
      h[at] = h[small];
      at = small;
    }
    h[at] = x;
  }
  return h[0];
}

/* w's binary exponent below 1: 0 for [0.5, 1] (1 itself included), 1 for [0.25, 0.5), ...; 63 and 0 last */
static int octave(float w) {
  int32_t e = (rxe_f32_bits(w) >> 23) & 0xff;
  int32_t o = w >= 1.0f ? 0 : 126 - e;
  return o > 63 ? 63 : o;
}

/* Top-p's candidates when top-k is off: the tokens of the octaves that hold top_p of the mass with a
 * margin (1e-6 relative, far above the sums' rounding), so the cut falls among them; the rest cannot be
 * kept (each is below every candidate, after at least top_p of the mass). Returns their number. */
static int64_t top_p_candidates(sampler_t* q, float s_max, double top_p, double* out_total) {
  double mass[64], total = 0.0, acc = 0.0;
  int64_t i, m = 0;
  int b, last = 63;
  for (b = 0; b < 64; ++b) mass[b] = 0.0;
  for (i = 0; i < q->vocab; ++i) {
    float w = rxe_f32_exp(q->s[i] - s_max);
    q->w[i] = w;
    mass[octave(w)] += (double)w;
    total += (double)w;
  }
  for (b = 0; b < 63; ++b) {
    acc += mass[b];
    if (acc >= top_p * total * (1.0 + 1e-6)) {
      last = b;
      break;
    }
  }
  for (i = 0; i < q->vocab; ++i) {
    if (octave(q->w[i]) <= last) q->order[m++] = (int32_t)i;
  }
  *out_total = total;
  return m;
}

/* Temperature, top-k and top-p into q (see generate.h): the kept tokens and their weights. */
static rxe_status_t filter(sampler_t* q, const float* logits, const rxe_sampling_t* c, rxe_error_t* err) {
  int64_t vocab = q->vocab, i, k, m = 0, popped = 0;
  float s_max, t = c->temperature;
  double total = 0.0, before = 0.0;
  rxe_status_t st = argmax(logits, vocab, &q->argmax, err);
  if (st != RXE_OK) return st;
  for (i = 0; i < vocab; ++i) q->s[i] = logits[i] / t;
  s_max = q->s[q->argmax];
  if (s_max > 3.4028235e38f) {
    return rxe_error_set(err, RXE_ERR_BOUND, "sampling: the logit of token %d over the temperature overflows",
                         q->argmax);
  }
  k = (c->top_k > 0 && c->top_k < vocab) ? c->top_k : vocab;
  q->kept = NULL;
  q->num_kept = vocab;
  if (k == vocab && !(c->top_p < 1.0f)) {
    for (i = 0; i < vocab; ++i) q->w[i] = rxe_f32_exp(q->s[i] - s_max);
    return RXE_OK;
  }
  if (k < vocab) { /* every token >= the k-th largest, ties at the k-th included */
    float kth = kth_largest(q, k);
    for (i = 0; i < vocab; ++i) {
      if (q->s[i] >= kth) {
        q->order[m++] = (int32_t)i;
        q->w[i] = rxe_f32_exp(q->s[i] - s_max);
        total += (double)q->w[i];
      }
    }
  } else {
    m = top_p_candidates(q, s_max, (double)c->top_p, &total);
  }
  q->kept = q->order;
  q->num_kept = m;
  if (!(c->top_p < 1.0f)) return RXE_OK;
  /* top-p: pop in descending order, keep rank r while the tokens before it hold less than top_p */
  q->heap_size = m;
  for (i = m / 2 - 1; i >= 0; --i) sift_down(q, i);
  for (popped = 0; popped < m; ++popped) {
    if (popped > 0 && before / total >= (double)c->top_p) break;
    before += (double)q->w[pop(q)];
  }
  q->kept = q->order + (m - popped);
  q->num_kept = popped;
  return RXE_OK;
}

static rxe_status_t setup(sampler_t* q, const float* logits, int64_t vocab, const rxe_sampling_t* c, void* scratch,
                          uint64_t scratch_bytes, rxe_error_t* err) {
  uint64_t part = RXE_ALIGN_UP(4u * (uint64_t)vocab);
  rxe_status_t st = check_inputs(logits, vocab, c, scratch, scratch_bytes, err);
  if (st != RXE_OK) return st;
  q->vocab = vocab;
  if (c->temperature <= 0.0f) return argmax(logits, vocab, &q->argmax, err);
  q->s = (float*)scratch;
  q->order = (int32_t*)((uint8_t*)scratch + part);
  q->w = (float*)((uint8_t*)scratch + 2u * part);
  return filter(q, logits, c, err);
}

/* the i-th kept token */
static int64_t kept_token(const sampler_t* q, int64_t i) { return q->kept ? (int64_t)q->kept[i] : i; }

rxe_status_t rxe_sampling_probs(const float* logits, int64_t vocab, const rxe_sampling_t* config,
                                void* scratch, uint64_t scratch_bytes, float* out_probs, rxe_error_t* err) {
  sampler_t q;
  int64_t i;
  double total = 0.0;
  rxe_status_t st;
  if (out_probs == NULL) return rxe_error_set(err, RXE_ERR_NULL, "sampling: no out_probs");
  st = setup(&q, logits, vocab, config, scratch, scratch_bytes, err);
  if (st != RXE_OK) return st;
  for (i = 0; i < vocab; ++i) out_probs[i] = 0.0f;
  if (config->temperature <= 0.0f) {
    out_probs[q.argmax] = 1.0f;
    return RXE_OK;
  }
  for (i = 0; i < q.num_kept; ++i) total += (double)q.w[kept_token(&q, i)];
  for (i = 0; i < q.num_kept; ++i) {
    int64_t token = kept_token(&q, i);
    out_probs[token] = (float)((double)q.w[token] / total);
  }
  return RXE_OK;
}

rxe_status_t rxe_sampling_draw(const float* logits, int64_t vocab, const rxe_sampling_t* config, rxe_rng_t* rng,
                               void* scratch, uint64_t scratch_bytes, int64_t* out_token, rxe_error_t* err) {
  sampler_t q;
  int64_t i;
  uint64_t sum = 0, r;
  rxe_status_t st;
  if (out_token == NULL) return rxe_error_set(err, RXE_ERR_NULL, "sampling: no out_token");
  if (config != NULL && config->temperature > 0.0f && rng == NULL) {
    return rxe_error_set(err, RXE_ERR_NULL, "sampling: no random number generator");
  }
  st = setup(&q, logits, vocab, config, scratch, scratch_bytes, err);
  if (st != RXE_OK) return st;
  if (config->temperature <= 0.0f) {
    *out_token = q.argmax;
    return RXE_OK;
  }
  /* integer weights floor(2^32 w), w in [0, 1] (the top token's is 2^32); their sum < 2^63 */
  for (i = 0; i < q.num_kept; ++i) sum += (uint64_t)(q.w[kept_token(&q, i)] * 4294967296.0f);
  r = mul_high(rxe_rng_next(rng), sum);
  for (i = 0; i < q.num_kept; ++i) {
    uint64_t weight = (uint64_t)(q.w[kept_token(&q, i)] * 4294967296.0f);
    if (r < weight) break;
    r -= weight;
  }
  if (i == q.num_kept) return rxe_error_set(err, RXE_ERR_INTERNAL, "sampling: the draw fell past the last token");
  *out_token = kept_token(&q, i);
  return RXE_OK;
}
