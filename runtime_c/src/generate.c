/* The generation loop of relax_edge/generate.h: find and check a decoder's
 * step function, then prefill and decode into caller memory. Freestanding,
 * nothing allocated. */
#include "relax_edge/generate.h"

/* The platform's clock when it links one (a weak reference: no link error where none is defined). */
#if defined(__ELF__) && (defined(__GNUC__) || defined(__clang__))
#pragma weak rxe_profile_now_ns
#define RXE_GENERATE_WEAK_CLOCK 1
#endif

static int same_name(const char* a, const char* b) {
  while (*a && *a == *b) {
    ++a;
    ++b;
  }
  return *a == *b;
}

/* Parse a printed shape "(1, 2, 64, 16)" of constant dims into dims[ndim]; 0 if a dim is not a constant. */
static int constant_shape(const char* text, int32_t ndim, int64_t* dims) {
  int32_t n = 0;
  if (text == NULL) return 0;
  while (*text) {
    if (*text == '(' || *text == ')' || *text == ',' || *text == ' ') {
      ++text;
    } else if (*text >= '0' && *text <= '9') {
      int64_t v = 0;
      while (*text >= '0' && *text <= '9') {
        if (v > (INT64_MAX - 9) / 10) return 0;
        v = v * 10 + (*text++ - '0');
      }
      if (n >= ndim) return 0;
      dims[n++] = v;
    } else {
      return 0;
    }
  }
  return n == ndim;
}

static rxe_status_t check_arg(const rxe_arg_info_t* a, const char* fn, const char* what, uint8_t code,
                              int32_t ndim, rxe_error_t* err) {
  if (a->dtype.code != code || a->dtype.bits != (code == RXE_DTYPE_INT ? 64 : 32) || a->dtype.lanes != 1) {
    return rxe_error_set(err, RXE_ERR_DTYPE, "function %s: %s %s must be %s", fn, what, a->name,
                         code == RXE_DTYPE_INT ? "int64" : "float32");
  }
  if (a->ndim != ndim) {
    return rxe_error_set(err, RXE_ERR_RANK, "function %s: %s %s has rank %d, expected %d", fn, what, a->name,
                         (int64_t)a->ndim, (int64_t)ndim);
  }
  return RXE_OK;
}

/* state_<N>: N, or -1 when the name is not of that form */
static int64_t state_number(const char* name) {
  const char* prefix = "state_";
  int64_t n = 0;
  while (*prefix && *name == *prefix) {
    ++prefix;
    ++name;
  }
  if (*prefix || *name == '\0') return -1;
  for (; *name; ++name) {
    if (*name < '0' || *name > '9' || n > 100000000) return -1;
    n = n * 10 + (*name - '0');
  }
  return n;
}

static rxe_status_t check_state(rxe_decoder_t* d, int32_t i, const char* fn, rxe_error_t* err) {
  const rxe_arg_info_t* a = &d->step->inputs[i];
  int64_t dims[4], n = state_number(a->name);
  rxe_status_t st = check_arg(a, fn, "state input", RXE_DTYPE_FLOAT, 4, err);
  if (st != RXE_OK) return st;
  if (d->num_state == 0) d->first_state = i;
  if (n != d->num_state || i != d->first_state + d->num_state) {
    return rxe_error_set(err, RXE_ERR_ARGUMENT_COUNT, "function %s: state input %s is input %d, expected state_%d "
                         "there (the states are consecutive, numbered from 0)", fn, a->name, (int64_t)i,
                         (int64_t)d->num_state);
  }
  if (!constant_shape(a->shape, 4, dims)) {
    return rxe_error_set(err, RXE_ERR_SHAPE, "function %s: state input %s has shape %s; a state's dims must be "
                         "constants (1, kv_heads, max_context, head_dim)", fn, a->name, a->shape);
  }
  if (dims[0] != 1 || dims[2] < 1 || (d->num_state > 0 && dims[2] != d->max_context)) {
    return rxe_error_set(err, RXE_ERR_SHAPE, "function %s: state input %s has shape %s, expected (1, kv_heads, "
                         "%d, head_dim)", fn, a->name, a->shape, d->num_state > 0 ? d->max_context : dims[2]);
  }
  d->max_context = dims[2];
  d->state_bytes += RXE_ALIGN_UP((uint64_t)(dims[1] * dims[2] * dims[3]) * 4u);
  d->num_state += 1;
  return RXE_OK;
}

static rxe_status_t check_logits(rxe_decoder_t* d, const char* fn, rxe_error_t* err) {
  const rxe_arg_info_t* a = &d->step->outputs[0];
  int64_t dims[RXE_MAX_NDIM];
  int32_t i;
  int ok = a->ndim >= 1 && a->ndim <= RXE_MAX_NDIM && constant_shape(a->shape, a->ndim, dims);
  if (a->dtype.code != RXE_DTYPE_FLOAT || a->dtype.bits != 32 || a->dtype.lanes != 1) {
    return rxe_error_set(err, RXE_ERR_DTYPE, "function %s: output %s must be float32 logits", fn, a->name);
  }
  for (i = 0; ok && i + 1 < a->ndim; ++i) ok = dims[i] == 1;
  if (!ok || dims[a->ndim - 1] < 1 || dims[a->ndim - 1] > INT32_MAX) {
    return rxe_error_set(err, RXE_ERR_SHAPE, "function %s: output %s has shape %s, expected the constant "
                         "(1, 1, vocab) of the last token's logits", fn, a->name, a->shape);
  }
  d->vocab = dims[a->ndim - 1];
  return RXE_OK;
}

rxe_status_t rxe_decoder_init(rxe_decoder_t* d, const rxe_module_t* module, const char* function,
                              rxe_error_t* err) {
  const char* fn = function ? function : "step";
  int32_t i;
  rxe_status_t st;
  if (d == NULL) return rxe_error_set(err, RXE_ERR_NULL, "decoder: no rxe_decoder_t");
  st = rxe_module_check(module, err);
  if (st != RXE_OK) return st;
  d->step = rxe_module_find(module, fn);
  if (d->step == NULL) {
    return rxe_error_set(err, RXE_ERR_NOT_FOUND, "module %s has no function %s (a KV-cache decoder's step)",
                         module->name, fn);
  }
  if (d->step->run == NULL || (d->step->num_inputs > 0 && d->step->inputs == NULL) ||
      (d->step->num_outputs > 0 && d->step->outputs == NULL)) {
    return rxe_error_set(err, RXE_ERR_NULL, "function %s: no run entry point or no argument info", fn);
  }
  d->input_ids = d->attention_mask = d->position_ids = -1;
  d->first_state = d->num_state = 0;
  d->max_context = d->vocab = 0;
  d->state_bytes = 0;
  d->workspace_bytes = d->step->fixed_workspace_bytes;
  for (i = 0; i < d->step->num_inputs; ++i) {
    const rxe_arg_info_t* a = &d->step->inputs[i];
    int32_t* slot = same_name(a->name, "input_ids")        ? &d->input_ids
                    : same_name(a->name, "attention_mask") ? &d->attention_mask
                    : same_name(a->name, "position_ids")   ? &d->position_ids
                                                           : NULL;
    if (slot != NULL) {
      if (*slot >= 0) return rxe_error_set(err, RXE_ERR_ARGUMENT_COUNT, "function %s: two inputs %s", fn, a->name);
      st = check_arg(a, fn, "input", RXE_DTYPE_INT, 2, err);
      *slot = i;
    } else if (state_number(a->name) >= 0) {
      st = check_state(d, i, fn, err);
    } else {
      st = rxe_error_set(err, RXE_ERR_ARGUMENT_COUNT, "function %s: input %s is none of input_ids, attention_mask, "
                         "position_ids, state_<N>", fn, a->name);
    }
    if (st != RXE_OK) return st;
  }
  if (d->input_ids < 0) return rxe_error_set(err, RXE_ERR_ARGUMENT_COUNT, "function %s has no input input_ids", fn);
  if (d->num_state == 0) {
    return rxe_error_set(err, RXE_ERR_ARGUMENT_COUNT, "function %s has no state inputs (state_0, ...): not a "
                         "KV-cache decoder's step", fn);
  }
  if (d->step->num_outputs != 1) {
    return rxe_error_set(err, RXE_ERR_ARGUMENT_COUNT, "function %s has %d outputs, expected 1 (logits)", fn,
                         (int64_t)d->step->num_outputs);
  }
  if (d->workspace_bytes == 0 && d->step->num_sizes > 0) {
    return rxe_error_set(err, RXE_ERR_WORKSPACE, "function %s has no fixed workspace: a size is unbounded", fn);
  }
  return check_logits(d, fn, err);
}

/* The scratch of rxe_generate, each part aligned: the tensors and their shapes, then ids, mask, positions
 * (max_context each), the logits and the sampler's scratch. */
typedef struct {
  rxe_tensor_t* tensors; /* inputs, then the output */
  int64_t* shapes;
  int64_t* ids;
  int64_t* mask;
  int64_t* positions;
  float* logits;
  void* sampler;
  uint64_t sampler_bytes;
} scratch_t;

static uint64_t layout(const rxe_decoder_t* d, uint8_t* base, scratch_t* s) {
  uint64_t at = 0, dims = 0, part;
  int32_t i, n = d->step->num_inputs;
  for (i = 0; i < n; ++i) dims += (uint64_t)d->step->inputs[i].ndim;
  dims += (uint64_t)d->step->outputs[0].ndim;
#define RXE_PLACE(field, type, count)                          \
  part = RXE_ALIGN_UP((uint64_t)sizeof(type) * (uint64_t)(count)); \
  if (s != NULL) s->field = (type*)(void*)(base + at);         \
  at += part;
  RXE_PLACE(tensors, rxe_tensor_t, n + 1)
  RXE_PLACE(shapes, int64_t, dims)
  RXE_PLACE(ids, int64_t, d->max_context)
  RXE_PLACE(mask, int64_t, d->max_context)
  RXE_PLACE(positions, int64_t, d->max_context)
  RXE_PLACE(logits, float, d->vocab)
#undef RXE_PLACE
  part = rxe_sampling_scratch_bytes(d->vocab);
  if (s != NULL) {
    s->sampler = base + at;
    s->sampler_bytes = part;
  }
  return at + part;
}

uint64_t rxe_decoder_scratch_bytes(const rxe_decoder_t* d) {
  return (d == NULL || d->step == NULL) ? 0u : layout(d, NULL, NULL);
}

static uint64_t now_ns(const rxe_generate_config_t* c) {
  if (c->clock_ns != NULL) return c->clock_ns(c->clock_ctx);
#ifdef RXE_GENERATE_WEAK_CLOCK
  if (rxe_profile_now_ns != NULL) return rxe_profile_now_ns();
#endif
  return 0;
}

static rxe_status_t check_memory(const char* what, const void* p, uint64_t bytes, uint64_t needed,
                                 rxe_error_t* err) {
  if (p == NULL && needed > 0) return rxe_error_set(err, RXE_ERR_NULL, "generate: no %s", what);
  if ((uintptr_t)p % RXE_WORKSPACE_ALIGNMENT != 0) {
    return rxe_error_set(err, RXE_ERR_WORKSPACE, "generate: the %s is not aligned to %d bytes", what,
                         (int64_t)RXE_WORKSPACE_ALIGNMENT);
  }
  if (bytes < needed) {
    return rxe_error_set(err, RXE_ERR_WORKSPACE, "generate: the %s has %d bytes, %d needed", what, (int64_t)bytes,
                         (int64_t)needed);
  }
  return RXE_OK;
}

static rxe_status_t check_call(const rxe_decoder_t* d, const int64_t* prompt, int32_t prompt_len,
                               const rxe_generate_config_t* c, rxe_error_t* err) {
  if (d == NULL || d->step == NULL || c == NULL) return rxe_error_set(err, RXE_ERR_NULL, "generate: no decoder or config");
  if (prompt_len < 1) return rxe_error_set(err, RXE_ERR_SHAPE, "generate: an empty prompt (%d tokens)", (int64_t)prompt_len);
  if (prompt == NULL) return rxe_error_set(err, RXE_ERR_NULL, "generate: no prompt");
  if (prompt_len > d->max_context) {
    return rxe_error_set(err, RXE_ERR_BOUND, "generate: a prompt of %d tokens exceeds the context bound "
                         "max_context=%d", (int64_t)prompt_len, d->max_context);
  }
  if (c->max_new_tokens < 0) return rxe_error_set(err, RXE_ERR_BOUND, "generate: max_new_tokens %d < 0",
                                                  (int64_t)c->max_new_tokens);
  if (c->num_stop_tokens < 0 || (c->num_stop_tokens > 0 && c->stop_tokens == NULL)) {
    return rxe_error_set(err, RXE_ERR_NULL, "generate: %d stop tokens and no array", (int64_t)c->num_stop_tokens);
  }
  if (c->sampling.temperature != c->sampling.temperature) {
    return rxe_error_set(err, RXE_ERR_BOUND, "sampling: temperature is NaN");
  }
  if (!(c->sampling.top_p >= 0.0f)) return rxe_error_set(err, RXE_ERR_BOUND, "sampling: top_p must be >= 0 (not NaN)");
  return RXE_OK;
}

/* The step's tensors over the caller's state and the scratch; the shapes that change are set per step. */
static void bind_tensors(const rxe_decoder_t* d, const scratch_t* s, uint8_t* state) {
  int32_t i, n = d->step->num_inputs;
  int64_t* shape = s->shapes;
  uint64_t offset = 0;
  for (i = 0; i <= n; ++i) {
    const rxe_arg_info_t* a = i < n ? &d->step->inputs[i] : &d->step->outputs[0];
    rxe_tensor_t* t = &s->tensors[i];
    int32_t j;
    t->device_type = 1;
    t->device_id = 0;
    t->ndim = a->ndim;
    t->dtype = a->dtype;
    t->shape = shape;
    t->strides = NULL;
    t->byte_offset = 0;
    for (j = 0; j < a->ndim; ++j) shape[j] = 1;
    shape += a->ndim;
    if (i == n) {
      t->data = s->logits;
      t->shape[a->ndim - 1] = d->vocab;
    } else if (i == d->input_ids) {
      t->data = s->ids;
    } else if (i == d->attention_mask) {
      t->data = s->mask;
    } else if (i == d->position_ids) {
      t->data = s->positions;
    } else { /* a state: its constant shape, at its place in the state block */
      uint64_t bytes = 4;
      constant_shape(a->shape, 4, t->shape);
      for (j = 0; j < 4; ++j) bytes *= (uint64_t)t->shape[j];
      t->data = state + offset;
      offset += RXE_ALIGN_UP(bytes);
    }
  }
}

static int is_stop(const rxe_generate_config_t* c, int64_t token) {
  int32_t i;
  for (i = 0; i < c->num_stop_tokens; ++i) {
    if (c->stop_tokens[i] == token) return 1;
  }
  return 0;
}

/* One step over [past, past + seq): run, then sample its token. */
static rxe_status_t step(const rxe_decoder_t* d, const scratch_t* s, int64_t past, int64_t seq,
                         const rxe_generate_config_t* c, rxe_rng_t* rng, void* workspace, uint64_t workspace_bytes,
                         int64_t* out_token, rxe_error_t* err) {
  rxe_tensor_t* t = s->tensors;
  int32_t n = d->step->num_inputs;
  rxe_status_t st;
  t[d->input_ids].shape[1] = seq;
  if (d->attention_mask >= 0) t[d->attention_mask].shape[1] = past + seq;
  if (d->position_ids >= 0) {
    t[d->position_ids].shape[1] = seq;
    t[d->position_ids].data = s->positions + past;
  }
  t[n].shape[t[n].ndim - 1] = d->vocab;
  st = d->step->run(t, &t[n], workspace, workspace_bytes, err);
  if (st != RXE_OK) return st;
  return rxe_sampling_draw(s->logits, d->vocab, &c->sampling, rng, s->sampler, s->sampler_bytes, out_token, err);
}

rxe_status_t rxe_generate(const rxe_decoder_t* d, const int64_t* prompt, int32_t prompt_len,
                          const rxe_generate_config_t* config,
                          void* state, uint64_t state_bytes, void* workspace, uint64_t workspace_bytes,
                          void* scratch, uint64_t scratch_bytes,
                          int64_t* out_tokens, uint64_t* out_token_ns,
                          rxe_generate_stats_t* out_stats, rxe_token_callback_t callback,
                          void* user, rxe_error_t* err) {
  rxe_generate_stats_t stats = {0, 0, 0, 0, RXE_STOP_MAX_TOKENS};
  rxe_status_t st = check_call(d, prompt, prompt_len, config, err);
  scratch_t s;
  rxe_rng_t rng;
  int64_t i, past = 0, seq = prompt_len;
  stats.prompt_tokens = prompt_len;
  if (st == RXE_OK) st = check_memory("state", state, state_bytes, d->state_bytes, err);
  if (st == RXE_OK) st = check_memory("workspace", workspace, workspace_bytes, d->workspace_bytes, err);
  if (st == RXE_OK) st = check_memory("scratch", scratch, scratch_bytes, rxe_decoder_scratch_bytes(d), err);
  if (st == RXE_OK && config->max_new_tokens > 0 && out_tokens == NULL) {
    st = rxe_error_set(err, RXE_ERR_NULL, "generate: no out_tokens");
  }
  if (st == RXE_OK) {
    layout(d, (uint8_t*)scratch, &s);
    bind_tensors(d, &s, (uint8_t*)state);
    for (i = 0; i < d->max_context; ++i) {
      s.mask[i] = 1;
      s.positions[i] = i;
    }
    for (i = 0; i < prompt_len; ++i) s.ids[i] = prompt[i];
    rxe_rng_seed(&rng, config->sampling.seed);
  }
  for (i = 0; st == RXE_OK && i < config->max_new_tokens; ++i) {
    uint64_t t0, ns;
    int64_t token;
    int stop;
    if (past + seq > d->max_context) {
      st = rxe_error_set(err, RXE_ERR_BOUND, "generate: context bound max_context=%d reached after %d new tokens",
                         d->max_context, i);
      break;
    }
    t0 = now_ns(config);
    st = step(d, &s, past, seq, config, &rng, workspace, workspace_bytes, &token, err);
    if (st != RXE_OK) break;
    ns = now_ns(config) - t0;
    out_tokens[i] = token;
    if (out_token_ns != NULL) out_token_ns[i] = ns;
    stats.num_tokens = (int32_t)(i + 1);
    if (i == 0) {
      stats.prefill_ns = ns;
    } else {
      stats.decode_ns += ns;
    }
    stop = callback != NULL && callback(user, token, (int32_t)i, ns) != 0;
    if (is_stop(config, token)) {
      stats.stopped_by = RXE_STOP_TOKEN;
      break;
    }
    if (stop) {
      stats.stopped_by = RXE_STOP_CALLBACK;
      break;
    }
    past += seq;
    seq = 1;
    s.ids[0] = token;
  }
  if (st != RXE_OK) stats.stopped_by = RXE_STOP_ERROR;
  if (out_stats != NULL) *out_stats = stats;
  return st;
}
