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

/* The sampler's scratch: the scaled logits s[vocab]; order[vocab], a heap whose popped tokens collect at
 * its end (order[vocab - 1] first, in descending order); w[vocab], the kept tokens' exp(s - s_max). */
typedef struct {
  float* s;
  int32_t* order;
  float* w;
  int64_t vocab;
  int64_t heap_size; /* order[0, heap_size) is the heap */
  int64_t kept;      /* 0: every token, w indexed by id; else order[vocab - kept, vocab), w at the same places */
  int64_t argmax;    /* greedy: the token */
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

/* Move the heap's first token to the end of the popped ones; returns it. */
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

/* Temperature, top-k and top-p into q (see generate.h); the kept tokens and their weights. */
static rxe_status_t filter(sampler_t* q, const float* logits, const rxe_sampling_t* c, rxe_error_t* err) {
  int64_t vocab = q->vocab, i, k, popped = 0;
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
  q->kept = 0;
  if (k == vocab && !(c->top_p < 1.0f)) {
    for (i = 0; i < vocab; ++i) q->w[i] = rxe_f32_exp(q->s[i] - s_max);
    return RXE_OK;
  }
  for (i = 0; i < vocab; ++i) q->order[i] = (int32_t)i;
  q->heap_size = vocab;
  for (i = vocab / 2 - 1; i >= 0; --i) sift_down(q, i);
  if (k < vocab) { /* the top k, and every token equal to the k-th */
    float kth;
    while (popped < k) q->w[vocab - 1 - popped++] = rxe_f32_exp(q->s[pop(q)] - s_max);
    kth = q->s[q->order[vocab - k]];
    while (q->heap_size > 0 && q->s[q->order[0]] == kth) {
      pop(q);
      q->w[vocab - 1 - popped++] = rxe_f32_exp(kth - s_max);
    }
    for (i = 0; i < popped; ++i) total += (double)q->w[vocab - 1 - i];
  } else {
    for (i = 0; i < vocab; ++i) total += (double)rxe_f32_exp(q->s[i] - s_max);
  }
  if (!(c->top_p < 1.0f)) {
    q->kept = popped;
    return RXE_OK;
  }
  /* top-p: keep rank r while the tokens before it hold less than top_p */
  for (i = 0; i < vocab; ++i) {
    if (i > 0 && before / total >= (double)c->top_p) break;
    if (i == popped) {
      if (k < vocab || q->heap_size == 0) break;
      q->w[vocab - 1 - popped++] = rxe_f32_exp(q->s[pop(q)] - s_max);
    }
    before += (double)q->w[vocab - 1 - i];
  }
  q->kept = i;
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

rxe_status_t rxe_sampling_probs(const float* logits, int64_t vocab, const rxe_sampling_t* config,
                                void* scratch, uint64_t scratch_bytes, float* out_probs, rxe_error_t* err) {
  sampler_t q;
  int64_t i, n;
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
  n = q.kept ? q.kept : vocab;
  for (i = 0; i < n; ++i) total += (double)q.w[q.kept ? vocab - 1 - i : i];
  for (i = 0; i < n; ++i) {
    int64_t at = q.kept ? vocab - 1 - i : i;
    out_probs[q.kept ? q.order[at] : i] = (float)((double)q.w[at] / total);
  }
  return RXE_OK;
}

rxe_status_t rxe_sample(const float* logits, int64_t vocab, const rxe_sampling_t* config, rxe_rng_t* rng,
                        void* scratch, uint64_t scratch_bytes, int64_t* out_token, rxe_error_t* err) {
  sampler_t q;
  int64_t i, n;
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
  /* integer weights floor(2^32 w), w in [0, 1] (the top token's is 2^32); S < 2^63 */
  n = q.kept ? q.kept : vocab;
  for (i = 0; i < n; ++i) sum += (uint64_t)(q.w[q.kept ? vocab - 1 - i : i] * 4294967296.0f);
  r = mul_high(rxe_rng_next(rng), sum);
  for (i = 0; i < n; ++i) {
    int64_t at = q.kept ? vocab - 1 - i : i;
    uint64_t weight = (uint64_t)(q.w[at] * 4294967296.0f);
    if (r < weight) break;
    r -= weight;
  }
  if (i == n) return rxe_error_set(err, RXE_ERR_INTERNAL, "sampling: the draw fell past the last token");
  *out_token = q.kept ? (int64_t)q.order[vocab - 1 - i] : i;
  return RXE_OK;
}
