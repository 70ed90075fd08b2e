/* The RPC protocol core: frame parsing and request handling (freestanding). */
#include "relax_edge/rpc.h"
#include "relax_edge/runtime.h"

typedef struct {
  const uint8_t* p;
  uint64_t left;
  int bad;
} reader_t;

static uint64_t get_uint(reader_t* r, int bytes) {
  uint64_t v = 0;
  int i;
  if (r->bad || r->left < (uint64_t)bytes) {
    r->bad = 1;
    return 0;
  }
  for (i = 0; i < bytes; ++i) v |= (uint64_t)r->p[i] << (8 * i);
  r->p += bytes;
  r->left -= (uint64_t)bytes;
  return v;
}

static const uint8_t* get_bytes(reader_t* r, uint64_t n) {
  const uint8_t* out = r->p;
  if (r->bad || r->left < n) {
    r->bad = 1;
    return NULL;
  }
  r->p += n;
  r->left -= n;
  return out;
}

static void put_bytes(rxe_rpc_buffer_t* b, const void* src, uint64_t n) {
  const uint8_t* s = (const uint8_t*)src;
  uint64_t i;
  if (b->overflow || b->capacity - b->size < n) {
    b->overflow = 1;
    return;
  }
  for (i = 0; i < n; ++i) b->data[b->size + i] = s[i];
  b->size += n;
}

static void put_uint(rxe_rpc_buffer_t* b, uint64_t v, int bytes) {
  uint8_t tmp[8];
  int i;
  for (i = 0; i < bytes; ++i) tmp[i] = (uint8_t)(v >> (8 * i));
  put_bytes(b, tmp, (uint64_t)bytes);
}

static void put_str(rxe_rpc_buffer_t* b, const char* s) {
  uint32_t n = 0;
  if (s == 0) s = "";
  while (s[n]) ++n;
  put_uint(b, n, 4);
  put_bytes(b, s, n);
}

static void begin(rxe_rpc_buffer_t* b, uint8_t type) {
  b->size = 0;
  b->overflow = 0;
  put_uint(b, 0x5852u, 2); /* "RX" */
  put_uint(b, type, 1);
  put_uint(b, 0, 1);
  put_uint(b, 0, 4); /* length, patched by finish() */
}

static void finish(rxe_rpc_buffer_t* b) {
  uint64_t n = b->size - RXE_RPC_HEADER_BYTES;
  int i;
  for (i = 0; i < 4; ++i) b->data[4 + i] = (uint8_t)(n >> (8 * i));
}

static void reply_error(rxe_rpc_buffer_t* b, rxe_status_t status, const char* message) {
  begin(b, RXE_RPC_ERROR);
  put_uint(b, (uint64_t)status, 4);
  put_str(b, message);
  finish(b);
}

static uint64_t tensor_bytes(const rxe_tensor_t* t) {
  uint64_t n = t->dtype.bits / 8u;
  int32_t d;
  for (d = 0; d < t->ndim; ++d) n *= (uint64_t)t->shape[d];
  return n;
}

static void put_tensor(rxe_rpc_buffer_t* b, const rxe_tensor_t* t) {
  int32_t d;
  put_uint(b, t->dtype.code, 1);
  put_uint(b, t->dtype.bits, 1);
  put_uint(b, (uint64_t)t->ndim, 2);
  for (d = 0; d < t->ndim; ++d) put_uint(b, (uint64_t)t->shape[d], 8);
  put_bytes(b, t->data, tensor_bytes(t));
}

rxe_status_t rxe_rpc_parse_header(const uint8_t* h, uint8_t* out_type, uint32_t* out_length, rxe_error_t* err) {
  uint32_t length = (uint32_t)h[4] | ((uint32_t)h[5] << 8) | ((uint32_t)h[6] << 16) | ((uint32_t)h[7] << 24);
  if (h[0] != 'R' || h[1] != 'X') return rxe_error_set(err, RXE_ERR_ARGUMENT_COUNT, "bad frame magic");
  if (h[3] != 0) return rxe_error_set(err, RXE_ERR_ARGUMENT_COUNT, "bad frame flags %d", (int64_t)h[3]);
  if (length > RXE_RPC_MAX_PAYLOAD) {
    return rxe_error_set(err, RXE_ERR_ARGUMENT_COUNT, "frame of %d bytes exceeds the limit of %d", (int64_t)length,
                         (int64_t)RXE_RPC_MAX_PAYLOAD);
  }
  *out_type = h[2];
  *out_length = length;
  return RXE_OK;
}

void rxe_rpc_server_init(rxe_rpc_server_t* s, const rxe_module_t* module, rxe_rpc_platform_t platform) {
  uint8_t* bytes = (uint8_t*)s;
  uint64_t i;
  for (i = 0; i < sizeof(*s); ++i) bytes[i] = 0;
  s->module = module;
  s->platform = platform;
  s->function = module->num_functions > 0 ? &module->functions[0] : 0;
}

static void free_outputs(rxe_rpc_server_t* s) {
  int i;
  for (i = 0; i < RXE_RPC_MAX_TENSORS; ++i) {
    if (s->output_data[i]) s->platform.release(s->platform.ctx, s->output_data[i]);
    s->output_data[i] = 0;
  }
  if (s->workspace) s->platform.release(s->platform.ctx, s->workspace);
  s->workspace = 0;
  s->workspace_bytes = 0;
  s->has_outputs = 0;
}

void rxe_rpc_server_free(rxe_rpc_server_t* s) {
  int i;
  free_outputs(s);
  for (i = 0; i < RXE_RPC_MAX_TENSORS; ++i) {
    if (s->input_data[i]) s->platform.release(s->platform.ctx, s->input_data[i]);
    s->input_data[i] = 0;
  }
}

static void handle_list(rxe_rpc_server_t* s, rxe_rpc_buffer_t* b) {
  int32_t f, k;
  begin(b, RXE_RPC_OK);
  put_uint(b, (uint64_t)s->module->num_functions, 4);
  for (f = 0; f < s->module->num_functions; ++f) {
    const rxe_function_t* fn = &s->module->functions[f];
    const rxe_arg_info_t* lists[2] = {fn->inputs, fn->outputs};
    int32_t counts[2] = {fn->num_inputs, fn->num_outputs}, l;
    put_str(b, fn->name);
    put_uint(b, (uint64_t)fn->num_inputs, 4);
    put_uint(b, (uint64_t)fn->num_outputs, 4);
    for (l = 0; l < 2; ++l) {
      for (k = 0; k < counts[l]; ++k) {
        put_str(b, lists[l][k].name);
        put_uint(b, lists[l][k].dtype.code, 1);
        put_uint(b, lists[l][k].dtype.bits, 1);
        put_uint(b, (uint64_t)lists[l][k].ndim, 4);
        put_str(b, lists[l][k].shape);
      }
    }
    put_uint(b, (uint64_t)fn->num_sizes, 4);
    for (k = 0; k < fn->num_sizes; ++k) put_str(b, fn->size_names[k]);
  }
  finish(b);
}

static void handle_set_input(rxe_rpc_server_t* s, reader_t* r, rxe_rpc_buffer_t* b) {
  uint32_t index = (uint32_t)get_uint(r, 4);
  uint8_t code = (uint8_t)get_uint(r, 1), bits = (uint8_t)get_uint(r, 1);
  uint32_t ndim = (uint32_t)get_uint(r, 2), d;
  rxe_tensor_t* t;
  uint64_t bytes;
  const uint8_t* data;
  if (r->bad || index >= RXE_RPC_MAX_TENSORS || ndim > RXE_MAX_NDIM || (bits != 8 && bits != 16 && bits != 32 && bits != 64)) {
    reply_error(b, RXE_ERR_ARGUMENT_COUNT, "malformed SET_INPUT (index, rank or dtype out of range)");
    return;
  }
  t = &s->inputs[index];
  bytes = bits / 8u;
  for (d = 0; d < ndim; ++d) {
    int64_t dim = (int64_t)get_uint(r, 8);
    if (r->bad || dim < 0 || (dim > 0 && bytes > (((uint64_t)1) << 62) / (uint64_t)dim)) {
      reply_error(b, RXE_ERR_ARGUMENT_COUNT, "malformed SET_INPUT (bad dimension)");
      return;
    }
    s->input_dims[index][d] = dim;
    bytes *= (uint64_t)dim;
  }
  data = get_bytes(r, bytes);
  if (data == 0 || r->left != 0) {
    reply_error(b, RXE_ERR_ARGUMENT_COUNT, "malformed SET_INPUT (data length does not match the shape)");
    return;
  }
  if (s->input_data[index]) s->platform.release(s->platform.ctx, s->input_data[index]);
  s->input_data[index] = s->platform.alloc(s->platform.ctx, bytes > 0 ? bytes : 1, 64);
  if (s->input_data[index] == 0) {
    reply_error(b, RXE_ERR_WORKSPACE, "out of memory for an input");
    return;
  }
  rxe_copy_bytes(s->input_data[index], data, bytes);
  t->data = s->input_data[index];
  t->device_type = 1;
  t->ndim = (int32_t)ndim;
  t->dtype.code = code;
  t->dtype.bits = bits;
  t->dtype.lanes = 1;
  t->shape = s->input_dims[index];
  t->strides = 0;
  t->byte_offset = 0;
  begin(b, RXE_RPC_OK);
  finish(b);
}

/* Plan, allocate outputs and workspace, run once. */
static rxe_status_t run_once(rxe_rpc_server_t* s, uint64_t* out_ns, rxe_error_t* err) {
  const rxe_function_t* fn = s->function;
  uint64_t ws = 0, t0;
  int32_t k, total = 0;
  rxe_status_t st;
  for (k = 0; k < fn->num_inputs; ++k) {
    if (s->input_data[k] == 0) return rxe_error_set(err, RXE_ERR_NULL, "input %d was not set", (int64_t)k);
  }
  st = fn->plan(s->inputs, s->output_dims, &ws, err);
  if (st != RXE_OK) return st;
  free_outputs(s);
  for (k = 0; k < fn->num_outputs; ++k) {
    rxe_tensor_t* t = &s->outputs[k];
    uint64_t bytes;
    t->ndim = fn->outputs[k].ndim;
    t->dtype = fn->outputs[k].dtype;
    t->device_type = 1;
    t->shape = s->output_dims + total;
    t->strides = 0;
    t->byte_offset = 0;
    total += t->ndim;
    bytes = tensor_bytes(t);
    s->output_data[k] = s->platform.alloc(s->platform.ctx, bytes > 0 ? bytes : 1, 64);
    if (s->output_data[k] == 0) return rxe_error_set(err, RXE_ERR_WORKSPACE, "out of memory for output %d", (int64_t)k);
    t->data = s->output_data[k];
  }
  s->workspace = ws ? s->platform.alloc(s->platform.ctx, ws, RXE_WORKSPACE_ALIGNMENT) : 0;
  if (ws && s->workspace == 0) return rxe_error_set(err, RXE_ERR_WORKSPACE, "out of memory for %d bytes of workspace", (int64_t)ws);
  s->workspace_bytes = ws;
  t0 = s->platform.clock_ns(s->platform.ctx);
  st = fn->run(s->inputs, s->outputs, s->workspace, ws, err);
  *out_ns = s->platform.clock_ns(s->platform.ctx) - t0;
  if (st == RXE_OK) s->has_outputs = 1;
  return st;
}

static void handle_time(rxe_rpc_server_t* s, reader_t* r, rxe_rpc_buffer_t* b) {
  uint32_t warmup = (uint32_t)get_uint(r, 4), repeat = (uint32_t)get_uint(r, 4), min_ms = (uint32_t)get_uint(r, 4);
  uint64_t ns = 0, start, done = 0;
  uint32_t i, n = 0;
  rxe_error_t err;
  rxe_status_t st;
  if (r->bad || repeat == 0 || repeat > 100000u || warmup > 100000u) {
    reply_error(b, RXE_ERR_ARGUMENT_COUNT, "malformed TIME (repeat must be 1..100000)");
    return;
  }
  st = run_once(s, &ns, &err);
  if (st != RXE_OK) {
    reply_error(b, st, err.message);
    return;
  }
  for (i = 0; i < warmup; ++i) s->function->run(s->inputs, s->outputs, s->workspace, s->workspace_bytes, &err);
  begin(b, RXE_RPC_OK);
  put_uint(b, 0, 4); /* patched below */
  start = s->platform.clock_ns(s->platform.ctx);
  while (n < repeat || (done - start) < (uint64_t)min_ms * 1000000u) {
    uint64_t t0 = s->platform.clock_ns(s->platform.ctx);
    st = s->function->run(s->inputs, s->outputs, s->workspace, s->workspace_bytes, &err);
    done = s->platform.clock_ns(s->platform.ctx);
    if (st != RXE_OK) {
      reply_error(b, st, err.message);
      return;
    }
    put_uint(b, done - t0, 8);
    if (++n >= 100000u) break;
  }
  for (i = 0; i < 4; ++i) b->data[RXE_RPC_HEADER_BYTES + i] = (uint8_t)(n >> (8 * i));
  finish(b);
}

static void handle_profile(rxe_rpc_server_t* s, rxe_rpc_buffer_t* b) {
  const rxe_function_t* fn = s->function;
  uint64_t ns = 0;
  int32_t k;
  rxe_error_t err;
  rxe_status_t st;
  if (fn->profile == 0) {
    reply_error(b, RXE_ERR_NOT_FOUND, "this model was built without the profiler (RXE_PROFILE)");
    return;
  }
  for (k = 0; k < fn->num_profile_entries; ++k) {
    fn->profile[k].calls = 0;
    fn->profile[k].total_ns = 0;
  }
  st = run_once(s, &ns, &err);
  if (st != RXE_OK) {
    reply_error(b, st, err.message);
    return;
  }
  begin(b, RXE_RPC_OK);
  put_uint(b, ns, 8);
  put_uint(b, (uint64_t)fn->num_profile_entries, 4);
  for (k = 0; k < fn->num_profile_entries; ++k) {
    put_str(b, fn->profile[k].kernel);
    put_str(b, fn->profile[k].span);
    put_uint(b, fn->profile[k].calls, 8);
    put_uint(b, fn->profile[k].total_ns, 8);
  }
  finish(b);
}

void rxe_rpc_handle(rxe_rpc_server_t* s, uint8_t type, const uint8_t* payload, uint32_t length,
                    rxe_rpc_buffer_t* b) {
  reader_t r;
  rxe_error_t err;
  rxe_status_t st;
  uint64_t ns = 0;
  r.p = payload;
  r.left = length;
  r.bad = 0;
  if (s->function == 0 && type != RXE_RPC_HELLO && type != RXE_RPC_SHUTDOWN) {
    reply_error(b, RXE_ERR_NOT_FOUND, "the module has no functions");
    return;
  }
  switch (type) {
    case RXE_RPC_HELLO: {
      uint32_t version = (uint32_t)get_uint(&r, 4);
      if (r.bad || version != RXE_RPC_VERSION) {
        reply_error(b, RXE_ERR_ABI, "protocol version mismatch: the client and the server must match");
        return;
      }
      begin(b, RXE_RPC_OK);
      put_uint(b, RXE_RPC_VERSION, 4);
      put_uint(b, RXE_ABI_VERSION, 4);
      put_str(b, s->module->name);
      finish(b);
      return;
    }
    case RXE_RPC_LIST:
      handle_list(s, b);
      return;
    case RXE_RPC_SELECT: {
      uint32_t n = (uint32_t)get_uint(&r, 4);
      const uint8_t* name = get_bytes(&r, n);
      char buf[64];
      uint32_t i;
      const rxe_function_t* fn;
      if (name == 0 || n >= sizeof(buf)) {
        reply_error(b, RXE_ERR_ARGUMENT_COUNT, "malformed SELECT");
        return;
      }
      for (i = 0; i < n; ++i) buf[i] = (char)name[i];
      buf[n] = '\0';
      fn = rxe_module_find(s->module, buf);
      if (fn == 0) {
        reply_error(b, RXE_ERR_NOT_FOUND, "no such function");
        return;
      }
      s->function = fn;
      free_outputs(s);
      begin(b, RXE_RPC_OK);
      finish(b);
      return;
    }
    case RXE_RPC_SET_INPUT:
      handle_set_input(s, &r, b);
      return;
    case RXE_RPC_RUN:
      st = run_once(s, &ns, &err);
      if (st != RXE_OK) {
        reply_error(b, st, err.message);
        return;
      }
      begin(b, RXE_RPC_OK);
      put_uint(b, ns, 8);
      finish(b);
      return;
    case RXE_RPC_GET_OUTPUT: {
      uint32_t index = (uint32_t)get_uint(&r, 4);
      if (r.bad || !s->has_outputs || (int32_t)index >= s->function->num_outputs) {
        reply_error(b, RXE_ERR_ARGUMENT_COUNT, "no such output (run first)");
        return;
      }
      begin(b, RXE_RPC_OK);
      put_tensor(b, &s->outputs[index]);
      finish(b);
      return;
    }
    case RXE_RPC_TIME:
      handle_time(s, &r, b);
      return;
    case RXE_RPC_PROFILE:
      handle_profile(s, b);
      return;
    case RXE_RPC_WORKSPACE: {
      int64_t values[16];
      int32_t i;
      uint64_t bytes = 0;
      if (s->function->num_sizes > 16) {
        reply_error(b, RXE_ERR_INTERNAL, "too many size variables");
        return;
      }
      for (i = 0; i < s->function->num_sizes; ++i) values[i] = (int64_t)get_uint(&r, 8);
      if (r.bad || r.left != 0) {
        reply_error(b, RXE_ERR_ARGUMENT_COUNT, "malformed WORKSPACE (one i64 per size variable)");
        return;
      }
      st = s->function->workspace(values, &bytes, &err);
      if (st != RXE_OK) {
        reply_error(b, st, err.message);
        return;
      }
      begin(b, RXE_RPC_OK);
      put_uint(b, bytes, 8);
      finish(b);
      return;
    }
    case RXE_RPC_SHUTDOWN:
      s->stop = 1;
      begin(b, RXE_RPC_OK);
      finish(b);
      return;
    default:
      reply_error(b, RXE_ERR_ARGUMENT_COUNT, "unknown request type");
      return;
  }
}
