/*
 * relax_edge generation: the token loop of a KV-cache decoder and its
 * sampler. Freestanding C99 (no libc, no libm, nothing allocated): the
 * caller owns the state (the KV cache), the workspace and a scratch block.
 *
 * The decoder is a module's graph function `step` (the compiler builds it
 * beside `main` for a model with past/present pairs and a context bound):
 *   inputs  input_ids int64 (1, seq); attention_mask int64 (1, total_seq),
 *           all ones (optional); position_ids int64 (1, seq) = past ..
 *           total_seq - 1 (optional); state_0, state_1, ... float32, each of
 *           one constant shape (1, kv_heads, max_context, head_dim), in the
 *           caller's memory, written in place at [past, total_seq);
 *   output  logits float32 (1, 1, vocab): those of the last new token.
 * total_seq = past + seq <= max_context. Prefill is one call with the whole
 * prompt (past = 0), each later token one call with seq = 1.
 *
 *   rxe_decoder_t d;
 *   rxe_decoder_init(&d, &model_module, NULL, &err);          // finds and checks "step"
 *   state: d.state_bytes, workspace: d.workspace_bytes, scratch: rxe_decoder_scratch_bytes(&d),
 *   each aligned to RXE_WORKSPACE_ALIGNMENT (64)
 *   rxe_generate(&d, prompt, n, &config, state, ..., out_tokens, out_token_ns, &stats, on_token, user, &err);
 *
 * Sampling (rxe_sampling_t), as transformers' generate applies its warpers:
 * temperature (TemperatureLogitsWarper: logits / temperature), then top-k
 * (TopKLogitsWarper: keep every token whose scaled logit is >= the k-th
 * largest, ties at the k-th value included; k > vocab keeps all), then top-p
 * (TopPLogitsWarper: in descending order, keep a token while the
 * probability of the tokens before it is < top_p, the first always kept;
 * among equal logits the higher id comes first, as transformers' ascending
 * sort leaves them), then a draw from the renormalized distribution.
 * temperature <= 0 is greedy: the argmax, the lowest id among equal maxima,
 * and no random number is used.
 *
 * The draw: one 64-bit number u per sampled token from SplitMix64 seeded
 * with `seed` (integer only). Each kept token i gets the integer weight
 * q_i = floor(2^32 * exp(s_i - s_max)) (s: the scaled logits; the exp is
 * rxe_f32_exp of kernel.h, + - * / only, compiled without FMA contraction),
 * S = sum q_i, r = floor(u * S / 2^64), and the token is the first whose
 * cumulative weight exceeds r, the kept tokens taken in a fixed order (by
 * id without top-p; with top-p by ascending s, the lower id first among
 * equal ones). So the draw is exact integer
 * arithmetic; the only floating point is the division by the temperature
 * (correctly rounded), the exp, and the top-p sums (double, a fixed order).
 * Bit-reproducible: given the same logits (bit for bit), the same tokens on
 * every IEEE-754 target (float evaluated in float, FLT_EVAL_METHOD 0; not
 * x87). Not reproducible: the logits themselves, which the model's kernels
 * compute differently per target (SIMD width, FMA, threads); a difference
 * there changes a draw only when u falls within that difference of a
 * boundary, or a top-k/top-p cut sits on it. Tokens with q_i = 0
 * (probability below 2^-32 of the top token's) are never drawn.
 *
 * Errors: an empty prompt (RXE_ERR_SHAPE); a prompt longer than max_context
 * (RXE_ERR_BOUND naming max_context); a context that reaches the bound while
 * generating (RXE_ERR_BOUND "context bound max_context=64 reached after K new
 * tokens"; the K tokens are in out_tokens and out_stats); memory too small or
 * misaligned (RXE_ERR_WORKSPACE); NULL pointers (RXE_ERR_NULL); a sampling
 * setting out of range (NaN temperature or top_p, top_p < 0,
 * max_new_tokens < 0, a logit / temperature that overflows: RXE_ERR_BOUND);
 * a NaN or +inf logit, or every logit -inf (RXE_ERR_INTERNAL, naming the
 * token); the step function's own errors.
 * Times come from config->clock_ns, or rxe_profile_now_ns() when that is
 * NULL and the platform links one (rpc/server_posix.c does; a weak
 * reference on ELF targets with GCC or Clang, so a build without a clock
 * still links), else they are 0.
 */
#ifndef RELAX_EDGE_GENERATE_H_
#define RELAX_EDGE_GENERATE_H_

#include "relax_edge/runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The step function of a module, found by name and checked against the contract above. */
typedef struct {
  const rxe_function_t* step;
  int32_t input_ids, attention_mask, position_ids; /* indices among step's inputs; -1 when absent (input_ids: never) */
  int32_t first_state, num_state;                  /* the state inputs: [first_state, first_state + num_state) */
  int64_t max_context;                             /* dim 2 of every state input (they agree) */
  int64_t vocab;                                   /* the last dim of output 0 */
  uint64_t state_bytes;                            /* sum of the state inputs' bytes, each rounded up to 64 */
  uint64_t workspace_bytes;                        /* step->fixed_workspace_bytes */
} rxe_decoder_t;

typedef struct {
  float temperature;  /* <= 0: greedy (argmax; the lowest id among equal maxima) */
  int32_t top_k;      /* <= 0: off */
  float top_p;        /* >= 1: off; 0 keeps only the most likely token */
  uint64_t seed;      /* the sampler's RNG seed: the same seed gives the same tokens on every target */
} rxe_sampling_t;

typedef struct {
  int32_t max_new_tokens;  /* 0: nothing is run */
  const int64_t* stop_tokens;  /* generation ends after a stop token is emitted (it is in the tokens) */
  int32_t num_stop_tokens;
  rxe_sampling_t sampling;
  /* Added to the contract: the monotonic clock of the per-token times.
   * NULL: rxe_profile_now_ns() if the platform links one, else no times (0). */
  uint64_t (*clock_ns)(void* clock_ctx);
  void* clock_ctx;
} rxe_generate_config_t;

/* After each new token: its id, its index (0 = the token of the prefill step) and that step's device time
 * (the step function's run plus the sampling). Return nonzero to stop generating. */
typedef int (*rxe_token_callback_t)(void* user, int64_t token, int32_t index, uint64_t step_ns);

enum { RXE_STOP_MAX_TOKENS = 0, RXE_STOP_TOKEN = 1, RXE_STOP_CALLBACK = 2, RXE_STOP_ERROR = 3 /* added */ };

typedef struct {
  int32_t num_tokens;
  int32_t prompt_tokens;
  uint64_t prefill_ns;  /* the prompt's step + sampling its token (time to first token) */
  uint64_t decode_ns;   /* every later step */
  int32_t stopped_by;   /* RXE_STOP_MAX_TOKENS 0, RXE_STOP_TOKEN 1, RXE_STOP_CALLBACK 2, RXE_STOP_ERROR 3 */
} rxe_generate_stats_t;

rxe_status_t rxe_decoder_init(rxe_decoder_t* d, const rxe_module_t* module, const char* function /* NULL: "step" */,
                              rxe_error_t* err);
/* Bytes of scratch rxe_generate needs (tensor descriptors, ids/mask/positions of max_context, logits, sampler). */
uint64_t rxe_decoder_scratch_bytes(const rxe_decoder_t* d);
/* Prefill with the prompt, then one token per step, until max_new_tokens, a stop token, the callback or an
 * error. On return (success or not) out_stats (may be NULL) holds the tokens made so far, which are in
 * out_tokens; out_token_ns[i] (may be NULL) is token i's step time. state, workspace and scratch are
 * aligned to RXE_WORKSPACE_ALIGNMENT and at least d->state_bytes, d->workspace_bytes and
 * rxe_decoder_scratch_bytes(d); the state needs no initialization. */
rxe_status_t rxe_generate(const rxe_decoder_t* d, const int64_t* prompt, int32_t prompt_len,
                          const rxe_generate_config_t* config,
                          void* state, uint64_t state_bytes, void* workspace, uint64_t workspace_bytes,
                          void* scratch, uint64_t scratch_bytes,
                          int64_t* out_tokens /* max_new_tokens */, uint64_t* out_token_ns /* may be NULL */,
                          rxe_generate_stats_t* out_stats, rxe_token_callback_t callback /* may be NULL */,
                          void* user, rxe_error_t* err);

/* ---- the sampler (added to the contract; rxe_generate uses it) ---- */

/* SplitMix64: state += 0x9e3779b97f4a7c15, then the mix; integer only. */
typedef struct {
  uint64_t state;
} rxe_rng_t;

void rxe_rng_seed(rxe_rng_t* rng, uint64_t seed);
uint64_t rxe_rng_next(rxe_rng_t* rng);

/* Scratch bytes of rxe_sampling_probs and rxe_sampling_draw for a vocabulary of `vocab` tokens (12 bytes a token,
 * rounded); 64-byte aligned scratch. */
uint64_t rxe_sampling_scratch_bytes(int64_t vocab);

/* The distribution a draw is made from: out_probs[vocab], 0 for the tokens the warpers remove, the rest
 * exp(s_i - s_max) / sum (in double, rounded to float); greedy: 1 at the argmax. */
rxe_status_t rxe_sampling_probs(const float* logits, int64_t vocab, const rxe_sampling_t* config,
                                void* scratch, uint64_t scratch_bytes, float* out_probs, rxe_error_t* err);

/* One token: greedy, or one draw of rng from the distribution of rxe_sampling_probs (see the top of this
 * file). The cost: a few O(vocab) passes (top-k: one pass with a min-heap of k), plus a heap sort of the
 * m candidates top-p looks at (the top-k set, or without top-k the tokens of the octaves of
 * exp(s - s_max) that hold top_p of the mass): O(vocab + m log m). No O(vocab log vocab) sort. */
rxe_status_t rxe_sampling_draw(const float* logits, int64_t vocab, const rxe_sampling_t* config, rxe_rng_t* rng,
                               void* scratch, uint64_t scratch_bytes, int64_t* out_token, rxe_error_t* err);

#ifdef __cplusplus
}
#endif
#endif /* RELAX_EDGE_GENERATE_H_ */
