/* Unit tests of the generation loop and the sampler (relax_edge/generate.h),
 * with a hand-written step function instead of a compiled model: its run
 * checks the inputs it is given (seq, past = total - seq, the mask and the
 * positions, where the state lies), writes its state at [past, total),
 * reads [0, total) back, and writes logits that depend on what it read.
 * Prints "RXE_TESTS_PASSED <n> checks" (micro_test.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "relax_edge/generate.h"
#include "micro_test.h"

enum { M = 8, V = 16, STATE_FLOATS = M * 3 };

static uint64_t g_clock;        /* the fake clock: the step advances it by 100 ns a token */
static int g_violations;        /* contract violations the fake step saw */
static uint8_t* g_state;        /* where the caller's state starts */
static float g_flat;            /* 0: one-hot logits (greedy-friendly); else all logits equal this */

uint64_t rxe_profile_now_ns(void) { return g_clock; }

static rxe_status_t fake_run(const rxe_tensor_t* in, rxe_tensor_t* out, void* ws, uint64_t ws_bytes, rxe_error_t* err) {
  const int64_t* ids = (const int64_t*)in[0].data;
  const int64_t* mask = (const int64_t*)in[1].data;
  const int64_t* pos = (const int64_t*)in[2].data;
  float* s0 = (float*)in[3].data;
  float* s1 = (float*)in[4].data;
  float* logits = (float*)out[0].data;
  int64_t seq = in[0].shape[1], total = in[1].shape[1], past = total - seq, p, h = 0, next;
  int j;
  if (ws == NULL || ws_bytes < 64) return rxe_error_set(err, RXE_ERR_WORKSPACE, "fake: workspace");
  g_violations += in[0].ndim != 2 || in[0].shape[0] != 1 || in[2].shape[1] != seq || seq < 1 || past < 0 || total > M;
  g_violations += in[3].ndim != 4 || in[3].shape[2] != M || in[3].shape[3] != 3 || in[4].shape[1] != 1;
  g_violations += (uint8_t*)s0 != g_state || (uint8_t*)s1 != g_state + 128;
  g_violations += out[0].ndim != 3 || out[0].shape[0] != 1 || out[0].shape[1] != 1 || out[0].shape[2] != V;
  if (g_violations) return rxe_error_set(err, RXE_ERR_SHAPE, "fake: bad inputs");
  for (j = 0; j < total; ++j) g_violations += mask[j] != 1;
  for (j = 0; j < seq; ++j) {
    if (ids[j] < 0 || ids[j] >= V) return rxe_error_set(err, RXE_ERR_INDEX, "fake: token %d", ids[j]);
    g_violations += pos[j] != past + j;
    s0[(past + j) * 3] = (float)ids[j];
    s0[(past + j) * 3 + 1] = (float)(past + j);
    s1[(past + j) * 3] = 2.0f * (float)ids[j];
  }
  for (p = 0; p < total; ++p) {
    g_violations += s0[p * 3 + 1] != (float)p || s1[p * 3] != 2.0f * s0[p * 3];
    h += (int64_t)s0[p * 3];
  }
  next = (h * h + total * 5 + 3) % V;
  for (j = 0; j < V; ++j) logits[j] = g_flat != 0.0f ? g_flat : (j == next ? 5.0f : 0.1f * (float)(j % 3));
  g_clock += 100u * (uint64_t)seq;
  return RXE_OK;
}

static rxe_arg_info_t g_inputs[5] = {
    {"input_ids", {RXE_DTYPE_INT, 64, 1}, 2, "(1, seq)"},
    {"attention_mask", {RXE_DTYPE_INT, 64, 1}, 2, "(1, total_seq)"},
    {"position_ids", {RXE_DTYPE_INT, 64, 1}, 2, "(1, seq)"},
    {"state_0", {RXE_DTYPE_FLOAT, 32, 1}, 4, "(1, 1, 8, 3)"},
    {"state_1", {RXE_DTYPE_FLOAT, 32, 1}, 4, "(1, 1, 8, 3)"},
};
static rxe_arg_info_t g_outputs[1] = {{"logits", {RXE_DTYPE_FLOAT, 32, 1}, 3, "(1, 1, 16)"}};
static const char* const g_sizes[2] = {"seq", "total_seq"};
static rxe_function_t g_fns[2] = {
    {"main", 0, 0, NULL, NULL, NULL, NULL, NULL, 0, NULL, 0, 0, NULL},
    {"step", 5, 1, g_inputs, g_outputs, NULL, fake_run, NULL, 2, g_sizes, 64, 0, NULL},
};
static rxe_module_t g_module = {RXE_ABI_VERSION, "fake", 2, g_fns};

/* the fake's greedy tokens after `prompt`, computed from its rule */
static void expected_tokens(const int64_t* prompt, int n, int count, int64_t* out) {
  int64_t context[64], h = 0;
  int i, total = n;
  for (i = 0; i < n; ++i) h += context[i] = prompt[i];
  for (i = 0; i < count; ++i) {
    out[i] = (h * h + total * 5 + 3) % V;
    h += context[total++] = out[i];
  }
}

static uint8_t g_memory[3][1 << 16];
static void* aligned(int which) {
  uint8_t* p = g_memory[which];
  return p + (64 - (uintptr_t)p % 64) % 64;
}

typedef struct {
  int stop_at;
  int calls;
  uint64_t ns[16];
} callback_log_t;

static int on_token(void* user, int64_t token, int32_t index, uint64_t step_ns) {
  callback_log_t* log = (callback_log_t*)user;
  (void)token;
  if (index == log->calls && index < 16) log->ns[index] = step_ns;
  log->calls += 1;
  return index == log->stop_at;
}

/* rxe_generate with the standard memory, a config from the arguments */
static rxe_status_t generate(const rxe_decoder_t* d, const int64_t* prompt, int n, int max_new, const int64_t* stop,
                             int num_stop, float temperature, int64_t* tokens, uint64_t* ns,
                             rxe_generate_stats_t* stats, callback_log_t* log, rxe_error_t* err) {
  rxe_generate_config_t c;
  memset(&c, 0, sizeof(c));
  c.max_new_tokens = max_new;
  c.stop_tokens = stop;
  c.num_stop_tokens = num_stop;
  c.sampling.temperature = temperature;
  c.sampling.top_p = 1.0f;
  c.sampling.seed = 42;
  g_state = (uint8_t*)aligned(0);
  return rxe_generate(d, prompt, n, &c, aligned(0), d->state_bytes, aligned(1), d->workspace_bytes, aligned(2),
                      rxe_decoder_scratch_bytes(d), tokens, ns, stats, log ? on_token : NULL, log, err);
}

static void test_decoder_init(void) {
  rxe_decoder_t d;
  rxe_error_t err;
  CHECK(rxe_decoder_init(&d, &g_module, NULL, &err) == RXE_OK);
  CHECK(d.step == &g_fns[1] && d.input_ids == 0 && d.attention_mask == 1 && d.position_ids == 2);
  CHECK(d.first_state == 3 && d.num_state == 2 && d.max_context == M && d.vocab == V);
  CHECK(d.state_bytes == 256 && d.workspace_bytes == 64);
  CHECK(rxe_decoder_scratch_bytes(&d) > 0 && rxe_decoder_scratch_bytes(&d) < sizeof(g_memory[2]) - 64);
  CHECK(rxe_decoder_init(&d, &g_module, "decode", &err) == RXE_ERR_NOT_FOUND);
  CHECK(strcmp(err.message, "module fake has no function decode (a KV-cache decoder's step)") == 0);
  CHECK(rxe_decoder_init(&d, &g_module, "main", &err) == RXE_ERR_NULL); /* no run */
  CHECK(rxe_decoder_init(NULL, &g_module, NULL, &err) == RXE_ERR_NULL);

  g_inputs[4].shape = "(1, 1, total_seq, 3)";
  CHECK(rxe_decoder_init(&d, &g_module, NULL, &err) == RXE_ERR_SHAPE);
  CHECK_MSG(strcmp(err.message, "function step: state input state_1 has shape (1, 1, total_seq, 3); a state's dims "
                   "must be constants (1, kv_heads, max_context, head_dim)") == 0, "%s", err.message);
  g_inputs[4].shape = "(1, 1, 9, 3)";
  CHECK(rxe_decoder_init(&d, &g_module, NULL, &err) == RXE_ERR_SHAPE);
  CHECK_MSG(strstr(err.message, "expected (1, kv_heads, 8, head_dim)") != NULL, "%s", err.message);
  g_inputs[4].shape = "(1, 1, 8, 3)";
  g_inputs[4].name = "state_2";
  CHECK(rxe_decoder_init(&d, &g_module, NULL, &err) == RXE_ERR_ARGUMENT_COUNT);
  g_inputs[4].name = "cache";
  CHECK(rxe_decoder_init(&d, &g_module, NULL, &err) == RXE_ERR_ARGUMENT_COUNT);
  CHECK_MSG(strstr(err.message, "input cache is none of") != NULL, "%s", err.message);
  g_inputs[4].name = "state_1";
  g_inputs[0].dtype.bits = 32;
  CHECK(rxe_decoder_init(&d, &g_module, NULL, &err) == RXE_ERR_DTYPE);
  CHECK(strcmp(err.message, "function step: input input_ids must be int64") == 0);
  g_inputs[0].dtype.bits = 64;
  g_inputs[3].ndim = 3;
  CHECK(rxe_decoder_init(&d, &g_module, NULL, &err) == RXE_ERR_RANK);
  g_inputs[3].ndim = 4;
  g_outputs[0].shape = "(1, seq, 16)";
  CHECK(rxe_decoder_init(&d, &g_module, NULL, &err) == RXE_ERR_SHAPE);
  g_outputs[0].shape = "(1, 1, 16)";
  g_fns[1].fixed_workspace_bytes = 0;
  CHECK(rxe_decoder_init(&d, &g_module, NULL, &err) == RXE_ERR_WORKSPACE);
  g_fns[1].fixed_workspace_bytes = 64;
  g_fns[1].num_inputs = 3; /* no state */
  CHECK(rxe_decoder_init(&d, &g_module, NULL, &err) == RXE_ERR_ARGUMENT_COUNT);
  g_fns[1].num_inputs = 5;
  g_module.abi_version = 1;
  CHECK(rxe_decoder_init(&d, &g_module, NULL, &err) == RXE_ERR_ABI);
  g_module.abi_version = RXE_ABI_VERSION;
  CHECK(rxe_decoder_init(&d, &g_module, NULL, &err) == RXE_OK);
}

static void test_greedy_loop(void) {
  rxe_decoder_t d;
  rxe_error_t err;
  rxe_generate_stats_t stats;
  int64_t prompt[3] = {3, 1, 4}, tokens[8], expected[8];
  uint64_t ns[8];
  callback_log_t log = {-1, 0, {0}};
  int i;
  rxe_decoder_init(&d, &g_module, NULL, &err);
  expected_tokens(prompt, 3, 5, expected);
  g_violations = 0;
  CHECK(generate(&d, prompt, 3, 5, NULL, 0, 0.0f, tokens, ns, &stats, &log, &err) == RXE_OK);
  CHECK(g_violations == 0);
  CHECK(stats.num_tokens == 5 && stats.prompt_tokens == 3 && stats.stopped_by == RXE_STOP_MAX_TOKENS);
  for (i = 0; i < 5; ++i) CHECK_MSG(tokens[i] == expected[i], "token %d: %d, expected %d", i, (int)tokens[i], (int)expected[i]);
  /* per-token times from rxe_profile_now_ns: the prefill of 3 tokens, then one a step */
  CHECK(stats.prefill_ns == 300 && stats.decode_ns == 400 && ns[0] == 300 && ns[4] == 100);
  CHECK(log.calls == 5 && log.ns[0] == 300 && log.ns[1] == 100);

  /* a stop token ends it and is among the tokens */
  CHECK(generate(&d, prompt, 3, 5, &expected[2], 1, 0.0f, tokens, NULL, &stats, NULL, &err) == RXE_OK);
  CHECK(stats.num_tokens == 3 && stats.stopped_by == RXE_STOP_TOKEN && tokens[2] == expected[2]);
  /* the callback stops it */
  log.stop_at = 1;
  log.calls = 0;
  CHECK(generate(&d, prompt, 3, 5, NULL, 0, 0.0f, tokens, NULL, &stats, &log, &err) == RXE_OK);
  CHECK(stats.num_tokens == 2 && stats.stopped_by == RXE_STOP_CALLBACK && log.calls == 2);
  /* max_new_tokens 0: nothing runs */
  g_clock = 0;
  CHECK(generate(&d, prompt, 3, 0, NULL, 0, 0.0f, NULL, NULL, &stats, NULL, &err) == RXE_OK);
  CHECK(stats.num_tokens == 0 && g_clock == 0);
  CHECK(g_violations == 0);
}

static uint64_t counting_clock(void* ctx) { return ++*(uint64_t*)ctx; }

static void test_config_clock(void) {
  rxe_decoder_t d;
  rxe_error_t err;
  rxe_generate_config_t c;
  rxe_generate_stats_t stats;
  int64_t prompt[2] = {5, 6}, tokens[4];
  uint64_t ticks = 0, ns[4];
  rxe_decoder_init(&d, &g_module, NULL, &err);
  memset(&c, 0, sizeof(c));
  c.max_new_tokens = 4;
  c.clock_ns = counting_clock;
  c.clock_ctx = &ticks;
  g_state = (uint8_t*)aligned(0);
  CHECK(rxe_generate(&d, prompt, 2, &c, aligned(0), d.state_bytes, aligned(1), d.workspace_bytes, aligned(2),
                     rxe_decoder_scratch_bytes(&d), tokens, ns, &stats, NULL, NULL, &err) == RXE_OK);
  CHECK(ticks == 8 && ns[0] == 1 && ns[3] == 1 && stats.prefill_ns == 1 && stats.decode_ns == 3);
}

static void test_context_bound(void) {
  rxe_decoder_t d;
  rxe_error_t err;
  rxe_generate_stats_t stats;
  int64_t prompt[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9}, tokens[10], expected[10];
  rxe_decoder_init(&d, &g_module, NULL, &err);
  g_violations = 0;
  /* prompt 5, bound 8: tokens at totals 5, 6, 7, 8; the fifth would need 9 */
  expected_tokens(prompt, 5, 4, expected);
  CHECK(generate(&d, prompt, 5, 10, NULL, 0, 0.0f, tokens, NULL, &stats, NULL, &err) == RXE_ERR_BOUND);
  CHECK_MSG(strcmp(err.message, "generate: context bound max_context=8 reached after 4 new tokens") == 0, "%s",
            err.message);
  CHECK(stats.num_tokens == 4 && stats.stopped_by == RXE_STOP_ERROR && memcmp(tokens, expected, 4 * 8) == 0);
  /* exactly at the bound */
  CHECK(generate(&d, prompt, 5, 4, NULL, 0, 0.0f, tokens, NULL, &stats, NULL, &err) == RXE_OK);
  CHECK(generate(&d, prompt, 8, 1, NULL, 0, 0.0f, tokens, NULL, &stats, NULL, &err) == RXE_OK);
  CHECK(generate(&d, prompt, 8, 2, NULL, 0, 0.0f, tokens, NULL, &stats, NULL, &err) == RXE_ERR_BOUND);
  CHECK(stats.num_tokens == 1);
  /* the prompt is too long, or empty */
  CHECK(generate(&d, prompt, 9, 2, NULL, 0, 0.0f, tokens, NULL, &stats, NULL, &err) == RXE_ERR_BOUND);
  CHECK_MSG(strcmp(err.message, "generate: a prompt of 9 tokens exceeds the context bound max_context=8") == 0,
            "%s", err.message);
  CHECK(stats.num_tokens == 0 && stats.stopped_by == RXE_STOP_ERROR);
  CHECK(generate(&d, prompt, 0, 2, NULL, 0, 0.0f, tokens, NULL, &stats, NULL, &err) == RXE_ERR_SHAPE);
  CHECK(generate(&d, NULL, 3, 2, NULL, 0, 0.0f, tokens, NULL, &stats, NULL, &err) == RXE_ERR_NULL);
  CHECK(generate(&d, prompt, 3, 2, NULL, 0, 0.0f, NULL, NULL, &stats, NULL, &err) == RXE_ERR_NULL);
  CHECK(generate(&d, prompt, 3, -1, NULL, 0, 0.0f, tokens, NULL, &stats, NULL, &err) == RXE_ERR_BOUND);
  CHECK(generate(&d, prompt, 3, 2, NULL, 2, 0.0f, tokens, NULL, &stats, NULL, &err) == RXE_ERR_NULL);
  /* the step's own error comes back, with the tokens before it */
  prompt[0] = 99;
  CHECK(generate(&d, prompt, 3, 2, NULL, 0, 0.0f, tokens, NULL, &stats, NULL, &err) == RXE_ERR_INDEX);
  CHECK(strcmp(err.message, "fake: token 99") == 0 && stats.num_tokens == 0);
  CHECK(g_violations == 0);
}

static void test_memory_errors(void) {
  rxe_decoder_t d;
  rxe_error_t err;
  rxe_generate_config_t c;
  int64_t prompt[2] = {1, 2}, tokens[2];
  uint8_t* state = (uint8_t*)aligned(0);
  uint8_t* ws = (uint8_t*)aligned(1);
  uint8_t* scratch = (uint8_t*)aligned(2);
  uint64_t need;
  rxe_decoder_init(&d, &g_module, NULL, &err);
  need = rxe_decoder_scratch_bytes(&d);
  memset(&c, 0, sizeof(c));
  c.max_new_tokens = 2;
  g_state = state;
#define GEN(st, st_b, w, w_b, sc, sc_b) \
  rxe_generate(&d, prompt, 2, &c, st, st_b, w, w_b, sc, sc_b, tokens, NULL, NULL, NULL, NULL, &err)
  CHECK(GEN(state, 256, ws, 64, scratch, need) == RXE_OK);
  CHECK(GEN(state, 256, ws, 64, scratch, need - 1) == RXE_ERR_WORKSPACE);
  CHECK_MSG(strstr(err.message, "generate: the scratch has") != NULL, "%s", err.message);
  CHECK(GEN(state, 256, ws, 64, scratch + 8, need) == RXE_ERR_WORKSPACE);
  CHECK(strcmp(err.message, "generate: the scratch is not aligned to 64 bytes") == 0);
  CHECK(GEN(state, 255, ws, 64, scratch, need) == RXE_ERR_WORKSPACE);
  CHECK(strcmp(err.message, "generate: the state has 255 bytes, 256 needed") == 0);
  CHECK(GEN(state + 4, 256, ws, 64, scratch, need) == RXE_ERR_WORKSPACE);
  CHECK(GEN(state, 256, ws, 63, scratch, need) == RXE_ERR_WORKSPACE);
  CHECK(GEN(NULL, 256, ws, 64, scratch, need) == RXE_ERR_NULL);
  CHECK(GEN(state, 256, ws, 64, NULL, need) == RXE_ERR_NULL);
#undef GEN
  CHECK(rxe_generate(NULL, prompt, 2, &c, state, 256, ws, 64, scratch, need, tokens, NULL, NULL, NULL, NULL, &err) ==
        RXE_ERR_NULL);
  c.sampling.temperature = 0.0f / 0.0f;
  CHECK(rxe_generate(&d, prompt, 2, &c, state, 256, ws, 64, scratch, need, tokens, NULL, NULL, NULL, NULL, &err) ==
        RXE_ERR_BOUND);
}

static void test_sampled_loop(void) {
  rxe_decoder_t d;
  rxe_error_t err;
  rxe_generate_stats_t stats;
  int64_t prompt[2] = {1, 2}, a[6], b[6];
  int i, same = 1, spread = 0;
  rxe_decoder_init(&d, &g_module, NULL, &err);
  g_flat = 1.0f; /* uniform over the vocabulary */
  CHECK(generate(&d, prompt, 2, 6, NULL, 0, 0.7f, a, NULL, &stats, NULL, &err) == RXE_OK);
  CHECK(generate(&d, prompt, 2, 6, NULL, 0, 0.7f, b, NULL, &stats, NULL, &err) == RXE_OK);
  for (i = 0; i < 6; ++i) {
    same &= a[i] == b[i];
    spread |= a[i] != a[0];
  }
  CHECK(same && spread); /* the same seed, the same tokens; and not one token repeated */
  g_flat = 0.0f;
}

/* ---- the sampler ---- */

static int compare_desc(const void* a, const void* b) {
  float x = *(const float*)a, y = *(const float*)b;
  return (x < y) - (x > y);
}

static void test_rng_and_greedy(void) {
  rxe_rng_t rng;
  rxe_error_t err;
  rxe_sampling_t greedy = {0.0f, 0, 1.0f, 0};
  float logits[6] = {1.0f, 3.0f, -2.0f, 3.0f, 0.5f, 3.0f}, probs[6];
  int64_t token = -1;
  rxe_rng_seed(&rng, 0);
  CHECK(rxe_rng_next(&rng) == 0xe220a8397b1dcdafull); /* SplitMix64's first output from 0 */
  CHECK(rxe_rng_next(&rng) == 0x6e789e6aa1b965f4ull);
  CHECK(rxe_sampling_draw(logits, 6, &greedy, NULL, NULL, 0, &token, &err) == RXE_OK && token == 1);
  CHECK(rxe_sampling_probs(logits, 6, &greedy, NULL, 0, probs, &err) == RXE_OK && probs[1] == 1.0f && probs[3] == 0.0f);
  logits[2] = 0.0f / 0.0f;
  CHECK(rxe_sampling_draw(logits, 6, &greedy, NULL, NULL, 0, &token, &err) == RXE_ERR_INTERNAL);
  CHECK(strcmp(err.message, "sampling: the logit of token 2 is NaN") == 0);
  logits[2] = 1.0f / 0.0f;
  CHECK(rxe_sampling_draw(logits, 6, &greedy, NULL, NULL, 0, &token, &err) == RXE_ERR_INTERNAL);
  CHECK(strcmp(err.message, "sampling: the logit of token 2 is +inf") == 0);
}

static void test_sampling_edges(void) {
  static uint8_t raw[12 * 1024 + 64];
  void* scratch = raw + (64 - (uintptr_t)raw % 64) % 64;
  rxe_rng_t rng;
  rxe_error_t err;
  rxe_sampling_t c = {1.0f, 1, 1.0f, 7};
  float logits[4] = {2.0f, 5.0f, 5.0f, 1.0f}, probs[4];
  float masked[3] = {-1.0f / 0.0f, -1.0f / 0.0f, -1.0f / 0.0f};
  int64_t token, counts[4] = {0, 0, 0, 0};
  int i;
  rxe_rng_seed(&rng, 1);
  /* top_k = 1 keeps both tokens tied at the top */
  CHECK(rxe_sampling_probs(logits, 4, &c, scratch, 1024, probs, &err) == RXE_OK);
  CHECK(probs[0] == 0.0f && probs[1] == 0.5f && probs[2] == 0.5f && probs[3] == 0.0f);
  for (i = 0; i < 200; ++i) {
    CHECK(rxe_sampling_draw(logits, 4, &c, &rng, scratch, 1024, &token, &err) == RXE_OK);
    counts[token] += 1;
  }
  CHECK(counts[0] == 0 && counts[3] == 0 && counts[1] > 60 && counts[2] > 60);
  /* top_p = 0 keeps one token: of the tie, the higher id */
  c.top_k = 0;
  c.top_p = 0.0f;
  CHECK(rxe_sampling_probs(logits, 4, &c, scratch, 1024, probs, &err) == RXE_OK && probs[2] == 1.0f);
  CHECK(rxe_sampling_probs(masked, 3, &c, scratch, 1024, probs, &err) == RXE_ERR_INTERNAL);
  CHECK(strcmp(err.message, "sampling: every logit is -inf") == 0);
  CHECK(rxe_sampling_probs(logits, 4, &c, scratch, rxe_sampling_scratch_bytes(4) - 1, probs, &err) == RXE_ERR_WORKSPACE);
  CHECK(rxe_sampling_probs(logits, 4, &c, (uint8_t*)scratch + 4, 1024, probs, &err) == RXE_ERR_WORKSPACE);
  CHECK(rxe_sampling_draw(logits, 4, &c, NULL, scratch, 1024, &token, &err) == RXE_ERR_NULL);
  c.top_p = -0.5f;
  CHECK(rxe_sampling_probs(logits, 4, &c, scratch, 1024, probs, &err) == RXE_ERR_BOUND);
  c.top_p = 1.0f;
  c.temperature = 1e-38f; /* logit / temperature overflows */
  CHECK(rxe_sampling_probs(logits, 4, &c, scratch, 1024, probs, &err) == RXE_ERR_BOUND);
}

/* a large vocabulary with a small top-k: the heap's selection against a sort */
static void test_large_vocab_top_k(void) {
  enum { N = 150000, K = 40 };
  float* logits = (float*)malloc(sizeof(float) * N);
  float* sorted = (float*)malloc(sizeof(float) * N);
  float* probs = (float*)malloc(sizeof(float) * N);
  uint64_t bytes = rxe_sampling_scratch_bytes(N);
  uint8_t* raw = (uint8_t*)malloc(bytes + 64);
  void* scratch = raw + (64 - (uintptr_t)raw % 64) % 64;
  rxe_sampling_t c = {0.8f, K, 1.0f, 3};
  rxe_error_t err;
  rxe_rng_t rng;
  uint64_t x = 12345;
  double total = 0.0, kept_total = 0.0;
  int i, kept = 0, bad = 0;
  float kth;
  for (i = 0; i < N; ++i) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    logits[i] = (float)(int)(x >> 45) / 4096.0f; /* 19 bits: some ties */
  }
  memcpy(sorted, logits, sizeof(float) * N);
  qsort(sorted, N, sizeof(float), compare_desc);
  kth = sorted[K - 1];
  CHECK(rxe_sampling_probs(logits, N, &c, scratch, bytes, probs, &err) == RXE_OK);
  for (i = 0; i < N; ++i) {
    if (logits[i] >= kth) {
      ++kept;
      total += exp(((double)logits[i] - (double)sorted[0]) / 0.8);
    }
    bad += (logits[i] >= kth) != (probs[i] > 0.0f);
    kept_total += probs[i];
  }
  CHECK(kept >= K && bad == 0 && kept_total > 0.9999 && kept_total < 1.0001);
  for (i = 0; i < N; ++i) {
    if (probs[i] > 0.0f) {
      double want = exp(((double)logits[i] - (double)sorted[0]) / 0.8) / total;
      bad += probs[i] < want * (1 - 1e-5) || probs[i] > want * (1 + 1e-5);
    }
  }
  CHECK(bad == 0);
  rxe_rng_seed(&rng, 9);
  for (i = 0; i < 100; ++i) {
    int64_t token;
    CHECK(rxe_sampling_draw(logits, N, &c, &rng, scratch, bytes, &token, &err) == RXE_OK);
    bad += !(token >= 0 && token < N && logits[token] >= kth);
  }
  CHECK(bad == 0);
  free(logits);
  free(sorted);
  free(probs);
  free(raw);
}

int main(void) {
  test_decoder_init();
  test_greedy_loop();
  test_config_clock();
  test_context_bound();
  test_memory_errors();
  test_sampled_loop();
  test_rng_and_greedy();
  test_sampling_edges();
  test_large_vocab_top_k();
  return MICRO_TEST_END();
}
