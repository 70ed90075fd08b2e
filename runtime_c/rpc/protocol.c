/* The RPC protocol core: frame parsing and request handling (freestanding).
 *
 * Each handler reads its whole request into locals and checks it before it
 * touches the server; memory is allocated before anything is released, and
 * a run's outputs replace the previous ones only once the run and its reply
 * succeeded. A handler returns a status; rxe_rpc_handle turns a failure into
 * an ERROR frame. */
#include "relax_edge/generate.h"
#include "relax_edge/rpc.h"
#include "relax_edge/runtime.h"

typedef struct {
  const uint8_t* p;
  uint64_t left;
  int bad;
} reader_t;

static const char* const request_names[] = {"(none)", "HELLO", "LIST", "SELECT", "SET_INPUT", "RUN",
                                            "GET_OUTPUT", "TIME", "PROFILE", "WORKSPACE", "SHUTDOWN",
                                            "GENERATE"};

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
    return 0;
  }
  r->p += n;
  r->left -= n;
  return out;
}

/* RXE_ERR_PROTOCOL unless the request was read whole and nothing is left. */
static rxe_status_t check_consumed(const reader_t* r, uint8_t type, rxe_error_t* err) {
  if (r->bad) return rxe_error_set(err, RXE_ERR_PROTOCOL, "malformed %s: the payload is truncated", request_names[type]);
  if (r->left != 0) {
    return rxe_error_set(err, RXE_ERR_PROTOCOL, "malformed %s: %d bytes past the end of the request",
                         request_names[type], (int64_t)r->left);
  }
  return RXE_OK;
}

/* Room for n more bytes, asking the I/O layer to grow the buffer. */
static int reserve(rxe_rpc_buffer_t* b, uint64_t n) {
  const uint64_t limit = (uint64_t)RXE_RPC_HEADER_BYTES + RXE_RPC_MAX_PAYLOAD;
  if (b->overflow) return 0;
  if (n > limit || b->size > limit - n) {
    b->overflow = RXE_RPC_OVERFLOW_LIMIT;
    return 0;
  }
  if (b->capacity - b->size >= n) return 1;
  if (b->grow != 0) {
    uint64_t want = b->capacity * 2 > b->size + n ? b->capacity * 2 : b->size + n;
    if (want > limit) want = limit;
    if (b->grow(b, want) && b->capacity >= b->size && b->capacity - b->size >= n) return 1;
  }
  b->overflow = RXE_RPC_OVERFLOW_MEMORY;
  return 0;
}

static void put_bytes(rxe_rpc_buffer_t* b, const void* src, uint64_t n) {
  const uint8_t* s = (const uint8_t*)src;
  uint64_t i;
  if (!reserve(b, n)) return;
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
  b->size = b->start;
  b->overflow = RXE_RPC_FITS;
  put_uint(b, 0x5852u, 2); /* "RX" */
  put_uint(b, type, 1);
  put_uint(b, 0, 1);
  put_uint(b, 0, 4); /* length, patched by finish() */
}

/* Patch the length into a reply begun with begin(); RXE_OK, or an error
 * naming the request whose reply did not fit. */
static rxe_status_t finish(rxe_rpc_buffer_t* b, uint8_t type, rxe_error_t* err) {
  uint64_t n;
  int i;
  if (b->overflow == RXE_RPC_OVERFLOW_LIMIT) {
    return rxe_error_set(err, RXE_ERR_PROTOCOL, "the reply to %s exceeds the frame limit of %d bytes",
                         request_names[type], (int64_t)RXE_RPC_MAX_PAYLOAD);
  }
  if (b->overflow) {
    return rxe_error_set(err, RXE_ERR_NO_MEMORY, "out of memory for the reply to %s (past %d bytes)",
                         request_names[type], (int64_t)b->capacity);
  }
  n = b->size - b->start - RXE_RPC_HEADER_BYTES;
  for (i = 0; i < 4; ++i) b->data[b->start + 4 + i] = (uint8_t)(n >> (8 * i));
  return RXE_OK;
}

/* A frame of a streamed reply is complete: send it, or keep it and begin
 * the next one after it. 0 when the stream is broken. */
static int stream_frame(rxe_rpc_buffer_t* b) {
  if (b->send == 0) {
    b->start = b->size;
    return 1;
  }
  if (!b->send(b)) return 0;
  b->size = 0;
  b->start = 0;
  return 1;
}

/* An ERROR frame at b->start (after the frames of a streamed reply kept there). */
static void put_error(rxe_rpc_buffer_t* b, rxe_status_t status, const char* message) {
  rxe_error_t ignored;
  begin(b, RXE_RPC_ERROR);
  put_uint(b, (uint64_t)status, 4);
  put_str(b, message);
  (void)finish(b, 0, &ignored);
}

void rxe_rpc_reply_error(rxe_rpc_buffer_t* b, rxe_status_t status, const char* message) {
  b->start = 0;
  put_error(b, status, message);
}

/* Bytes of a compact tensor; 0 (and *out_bytes untouched) when a dim is
 * negative or the size passes 2^62. */
static int tensor_bytes(const rxe_tensor_t* t, uint64_t* out_bytes) {
  uint64_t n = t->dtype.bits / 8u;
  int32_t d;
  for (d = 0; d < t->ndim; ++d) {
    if (t->shape[d] < 0) return 0;
    if (t->shape[d] > 0 && n > (((uint64_t)1) << 62) / (uint64_t)t->shape[d]) return 0;
    n *= (uint64_t)t->shape[d];
  }
  *out_bytes = n;
  return 1;
}

static void put_tensor(rxe_rpc_buffer_t* b, const rxe_tensor_t* t, uint64_t bytes) {
  int32_t d;
  put_uint(b, t->dtype.code, 1);
  put_uint(b, t->dtype.bits, 1);
  put_uint(b, (uint64_t)t->ndim, 2);
  for (d = 0; d < t->ndim; ++d) put_uint(b, (uint64_t)t->shape[d], 8);
  put_bytes(b, t->data, bytes);
}

rxe_status_t rxe_rpc_parse_header(const uint8_t* h, uint8_t* out_type, uint32_t* out_length, rxe_error_t* err) {
  uint32_t length = (uint32_t)h[4] | ((uint32_t)h[5] << 8) | ((uint32_t)h[6] << 16) | ((uint32_t)h[7] << 24);
  if (h[0] != 'R' || h[1] != 'X') {
    return rxe_error_set(err, RXE_ERR_PROTOCOL, "bad frame magic: bytes %d %d (expected \"RX\")", (int64_t)h[0],
                         (int64_t)h[1]);
  }
  if (h[3] != 0) return rxe_error_set(err, RXE_ERR_PROTOCOL, "bad frame flags %d (expected 0)", (int64_t)h[3]);
  if (length > RXE_RPC_MAX_PAYLOAD) {
    return rxe_error_set(err, RXE_ERR_PROTOCOL, "frame of %d bytes exceeds the limit of %d", (int64_t)length,
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

static void release_outputs(rxe_rpc_server_t* s, rxe_rpc_outputs_t* o) {
  int i;
  for (i = 0; i < RXE_RPC_MAX_TENSORS; ++i) {
    if (o->data[i]) s->platform.release(s->platform.ctx, o->data[i]);
    o->data[i] = 0;
    o->tensors[i].data = 0;
  }
}

static void release_workspace(rxe_rpc_server_t* s) {
  if (s->workspace) s->platform.release(s->platform.ctx, s->workspace);
  s->workspace = 0;
  s->workspace_bytes = 0;
}

void rxe_rpc_server_free(rxe_rpc_server_t* s) {
  int i;
  release_outputs(s, &s->output_sets[0]);
  release_outputs(s, &s->output_sets[1]);
  release_workspace(s);
  s->has_outputs = 0;
  for (i = 0; i < RXE_RPC_MAX_TENSORS; ++i) {
    if (s->input_data[i]) s->platform.release(s->platform.ctx, s->input_data[i]);
    s->input_data[i] = 0;
  }
}

const rxe_tensor_t* rxe_rpc_server_outputs(const rxe_rpc_server_t* s) { return s->output_sets[s->current].tensors; }

static rxe_status_t handle_hello(rxe_rpc_server_t* s, reader_t* r, rxe_rpc_buffer_t* b, rxe_error_t* err) {
  uint32_t version = (uint32_t)get_uint(r, 4);
  if (r->bad) return rxe_error_set(err, RXE_ERR_PROTOCOL, "malformed HELLO: no client version");
  if (version != RXE_RPC_VERSION) {
    return rxe_error_set(err, RXE_ERR_ABI, "protocol version mismatch: the client speaks %d, this server %d",
                         (int64_t)version, (int64_t)RXE_RPC_VERSION);
  }
  begin(b, RXE_RPC_OK);
  put_uint(b, RXE_RPC_VERSION, 4);
  put_uint(b, RXE_ABI_VERSION, 4);
  put_str(b, s->module->name);
  return finish(b, RXE_RPC_HELLO, err);
}

static rxe_status_t handle_list(rxe_rpc_server_t* s, rxe_rpc_buffer_t* b, rxe_error_t* err) {
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
  return finish(b, RXE_RPC_LIST, err);
}

/* A function name (u32 length, bytes) into buf[RXE_RPC_MAX_NAME]. */
static rxe_status_t get_name(reader_t* r, uint8_t type, char* buf, rxe_error_t* err) {
  uint32_t n = (uint32_t)get_uint(r, 4), i;
  const uint8_t* name;
  name = get_bytes(r, n);
  if (r->bad) return rxe_error_set(err, RXE_ERR_PROTOCOL, "malformed %s: the payload is truncated", request_names[type]);
  if (n >= RXE_RPC_MAX_NAME) {
    return rxe_error_set(err, RXE_ERR_PROTOCOL, "malformed %s: a name of %d bytes (the limit is %d)",
                         request_names[type], (int64_t)n, (int64_t)(RXE_RPC_MAX_NAME - 1));
  }
  for (i = 0; i < n; ++i) {
    if (name[i] == 0) return rxe_error_set(err, RXE_ERR_PROTOCOL, "malformed %s: a NUL byte in the name", request_names[type]);
    buf[i] = (char)name[i];
  }
  buf[n] = '\0';
  return RXE_OK;
}

static rxe_status_t handle_select(rxe_rpc_server_t* s, reader_t* r, rxe_rpc_buffer_t* b, rxe_error_t* err) {
  char buf[RXE_RPC_MAX_NAME];
  const rxe_function_t* fn;
  rxe_status_t st = get_name(r, RXE_RPC_SELECT, buf, err);
  if (st == RXE_OK) st = check_consumed(r, RXE_RPC_SELECT, err);
  if (st != RXE_OK) return st;
  fn = rxe_module_find(s->module, buf);
  if (fn == 0) return rxe_error_set(err, RXE_ERR_NOT_FOUND, "SELECT: module %s has no function %s", s->module->name, buf);
  begin(b, RXE_RPC_OK);
  st = finish(b, RXE_RPC_SELECT, err);
  if (st != RXE_OK) return st;
  s->function = fn;
  release_outputs(s, &s->output_sets[s->current]);
  s->has_outputs = 0;
  return RXE_OK;
}

static rxe_status_t handle_set_input(rxe_rpc_server_t* s, reader_t* r, rxe_rpc_buffer_t* b, rxe_error_t* err) {
  const rxe_function_t* fn = s->function;
  uint32_t index = (uint32_t)get_uint(r, 4);
  uint8_t code = (uint8_t)get_uint(r, 1), bits = (uint8_t)get_uint(r, 1);
  uint32_t ndim = (uint32_t)get_uint(r, 2), d;
  int64_t dims[RXE_MAX_NDIM];
  uint64_t extent = 1, bytes, given;
  const uint8_t* data;
  void* copy;
  rxe_tensor_t* t;
  rxe_status_t st;
  if (r->bad) return rxe_error_set(err, RXE_ERR_PROTOCOL, "malformed SET_INPUT: the tensor header is truncated");
  if (index >= (uint32_t)fn->num_inputs || index >= RXE_RPC_MAX_TENSORS) {
    return rxe_error_set(err, RXE_ERR_PROTOCOL, "malformed SET_INPUT: index %d, but function %s takes %d inputs",
                         (int64_t)index, fn->name, (int64_t)fn->num_inputs);
  }
  if (ndim > RXE_MAX_NDIM) {
    return rxe_error_set(err, RXE_ERR_PROTOCOL, "malformed SET_INPUT: rank %d (the limit is %d)", (int64_t)ndim,
                         (int64_t)RXE_MAX_NDIM);
  }
  if (bits != 8 && bits != 16 && bits != 32 && bits != 64) {
    return rxe_error_set(err, RXE_ERR_PROTOCOL, "malformed SET_INPUT: dtype of %d bits (8, 16, 32 or 64)",
                         (int64_t)bits);
  }
  for (d = 0; d < ndim; ++d) {
    int64_t dim = (int64_t)get_uint(r, 8);
    if (r->bad) return rxe_error_set(err, RXE_ERR_PROTOCOL, "malformed SET_INPUT: the shape is truncated");
    /* every non-zero extent fits a frame, so no product below overflows */
    if (dim < 0 || dim > (int64_t)RXE_RPC_MAX_PAYLOAD || (dim > 1 && extent > RXE_RPC_MAX_PAYLOAD / (uint64_t)dim)) {
      return rxe_error_set(err, RXE_ERR_PROTOCOL, "malformed SET_INPUT: dimension %d is %d (0..%d, and no more elements in all)",
                           (int64_t)d, dim, (int64_t)RXE_RPC_MAX_PAYLOAD);
    }
    dims[d] = dim;
    extent *= dim > 1 ? (uint64_t)dim : 1u;
  }
  bytes = bits / 8u;
  for (d = 0; d < ndim; ++d) bytes *= (uint64_t)dims[d];
  given = r->left;
  data = get_bytes(r, bytes);
  if (r->bad || r->left != 0) {
    return rxe_error_set(err, RXE_ERR_PROTOCOL, "malformed SET_INPUT: %d bytes of data, the shape and dtype take %d",
                         (int64_t)given, (int64_t)bytes);
  }
  copy = s->platform.alloc(s->platform.ctx, bytes > 0 ? bytes : 1, 64);
  if (copy == 0) return rxe_error_set(err, RXE_ERR_NO_MEMORY, "SET_INPUT: out of memory for %d bytes of input %d",
                                      (int64_t)bytes, (int64_t)index);
  rxe_mem_copy(copy, data, bytes);
  begin(b, RXE_RPC_OK);
  st = finish(b, RXE_RPC_SET_INPUT, err);
  if (st != RXE_OK) {
    s->platform.release(s->platform.ctx, copy);
    return st;
  }
  if (s->input_data[index]) s->platform.release(s->platform.ctx, s->input_data[index]);
  s->input_data[index] = copy;
  for (d = 0; d < ndim; ++d) s->input_dims[index][d] = dims[d];
  t = &s->inputs[index];
  t->data = copy;
  t->device_type = 1;
  t->device_id = 0;
  t->ndim = (int32_t)ndim;
  t->dtype.code = code;
  t->dtype.bits = bits;
  t->dtype.lanes = 1;
  t->shape = s->input_dims[index];
  t->strides = 0;
  t->byte_offset = 0;
  return RXE_OK;
}

/* The selected function's signature fits the server's tables. */
static rxe_status_t check_function(const rxe_function_t* fn, rxe_error_t* err) {
  int32_t k;
  if (fn->num_inputs < 0 || fn->num_inputs > RXE_RPC_MAX_TENSORS || fn->num_outputs < 0 ||
      fn->num_outputs > RXE_RPC_MAX_TENSORS) {
    return rxe_error_set(err, RXE_ERR_INTERNAL, "function %s has %d inputs and %d outputs (the server takes %d)",
                         fn->name, (int64_t)fn->num_inputs, (int64_t)fn->num_outputs, (int64_t)RXE_RPC_MAX_TENSORS);
  }
  for (k = 0; k < fn->num_outputs; ++k) {
    if (fn->outputs[k].ndim < 0 || fn->outputs[k].ndim > RXE_MAX_NDIM) {
      return rxe_error_set(err, RXE_ERR_INTERNAL, "function %s: output %d has rank %d", fn->name, (int64_t)k,
                           (int64_t)fn->outputs[k].ndim);
    }
  }
  return RXE_OK; /* so the outputs' dims fit rxe_rpc_outputs_t.dims */
}

/* Plan the selected function on the inputs, allocate outputs into the
 * staged set (output_sets[1 - current]) and the workspace, and run once into
 * them. On failure the staged set is released again. */
static rxe_status_t run_staged(rxe_rpc_server_t* s, uint64_t* out_ns, rxe_error_t* err) {
  const rxe_function_t* fn = s->function;
  rxe_rpc_outputs_t* o = &s->output_sets[s->current ^ 1];
  uint64_t ws = 0, t0;
  int32_t k, total = 0;
  rxe_status_t st = check_function(fn, err);
  if (st != RXE_OK) return st;
  for (k = 0; k < fn->num_inputs; ++k) {
    if (s->input_data[k] == 0) {
      return rxe_error_set(err, RXE_ERR_PROTOCOL, "input %d was not set (%s)", (int64_t)k, fn->inputs[k].name);
    }
  }
  st = fn->plan(s->inputs, o->dims, &ws, err);
  if (st != RXE_OK) return st;
  for (k = 0; k < fn->num_outputs; ++k) {
    rxe_tensor_t* t = &o->tensors[k];
    uint64_t bytes = 0;
    t->ndim = fn->outputs[k].ndim;
    t->dtype = fn->outputs[k].dtype;
    t->device_type = 1;
    t->device_id = 0;
    t->shape = o->dims + total;
    t->strides = 0;
    t->byte_offset = 0;
    t->data = 0;
    total += t->ndim;
    if (!tensor_bytes(t, &bytes)) {
      release_outputs(s, o);
      return rxe_error_set(err, RXE_ERR_INTERNAL, "function %s planned a negative or huge shape for output %d",
                           fn->name, (int64_t)k);
    }
    o->data[k] = s->platform.alloc(s->platform.ctx, bytes > 0 ? bytes : 1, 64);
    if (o->data[k] == 0) {
      release_outputs(s, o);
      return rxe_error_set(err, RXE_ERR_NO_MEMORY, "out of memory for %d bytes of output %d", (int64_t)bytes,
                           (int64_t)k);
    }
    t->data = o->data[k];
  }
  if (ws != s->workspace_bytes) { /* sized exactly: a model reading past it is caught under a sanitizer */
    void* fresh = ws ? s->platform.alloc(s->platform.ctx, ws, RXE_WORKSPACE_ALIGNMENT) : 0;
    if (ws && fresh == 0) {
      release_outputs(s, o);
      return rxe_error_set(err, RXE_ERR_NO_MEMORY, "out of memory for %d bytes of workspace", (int64_t)ws);
    }
    release_workspace(s);
    s->workspace = fresh;
    s->workspace_bytes = ws;
  }
  t0 = s->platform.clock_ns(s->platform.ctx);
  st = fn->run(s->inputs, o->tensors, s->workspace, s->workspace_bytes, err);
  *out_ns = s->platform.clock_ns(s->platform.ctx) - t0;
  if (st != RXE_OK) release_outputs(s, o);
  return st;
}

/* The staged run becomes the current one. */
static void commit_staged(rxe_rpc_server_t* s) {
  release_outputs(s, &s->output_sets[s->current]);
  s->current ^= 1;
  s->has_outputs = 1;
}

/* Another run into the staged outputs (TIME); releases them on failure.
 * The outputs' shapes are planned again first: a run writes the actual dims
 * of data-dependent outputs over the capacities (ABI 3), which the next run
 * checks. GET_OUTPUT replies with the actual dims and only their bytes. */
static rxe_status_t rerun_staged(rxe_rpc_server_t* s, rxe_error_t* err) {
  rxe_rpc_outputs_t* o = &s->output_sets[s->current ^ 1];
  uint64_t ws = 0;
  rxe_status_t st = s->function->plan(s->inputs, o->dims, &ws, err);
  if (st == RXE_OK) st = s->function->run(s->inputs, o->tensors, s->workspace, s->workspace_bytes, err);
  if (st != RXE_OK) release_outputs(s, &s->output_sets[s->current ^ 1]);
  return st;
}

static rxe_status_t handle_run(rxe_rpc_server_t* s, rxe_rpc_buffer_t* b, rxe_error_t* err) {
  uint64_t ns = 0;
  rxe_status_t st = run_staged(s, &ns, err);
  if (st != RXE_OK) return st;
  begin(b, RXE_RPC_OK);
  put_uint(b, ns, 8);
  st = finish(b, RXE_RPC_RUN, err);
  if (st != RXE_OK) {
    release_outputs(s, &s->output_sets[s->current ^ 1]);
    return st;
  }
  commit_staged(s);
  return RXE_OK;
}

static rxe_status_t handle_get_output(rxe_rpc_server_t* s, reader_t* r, rxe_rpc_buffer_t* b, rxe_error_t* err) {
  uint32_t index = (uint32_t)get_uint(r, 4);
  const rxe_tensor_t* t;
  uint64_t bytes = 0;
  rxe_status_t st = check_consumed(r, RXE_RPC_GET_OUTPUT, err);
  if (st != RXE_OK) return st;
  if (!s->has_outputs) return rxe_error_set(err, RXE_ERR_PROTOCOL, "GET_OUTPUT: no outputs yet (RUN first)");
  if (index >= (uint32_t)s->function->num_outputs || index >= RXE_RPC_MAX_TENSORS) {
    return rxe_error_set(err, RXE_ERR_PROTOCOL, "GET_OUTPUT: no output %d (function %s has %d)", (int64_t)index,
                         s->function->name, (int64_t)s->function->num_outputs);
  }
  t = &s->output_sets[s->current].tensors[index];
  if (!tensor_bytes(t, &bytes)) return rxe_error_set(err, RXE_ERR_INTERNAL, "GET_OUTPUT: output %d has a bad shape", (int64_t)index);
  begin(b, RXE_RPC_OK);
  put_tensor(b, t, bytes);
  return finish(b, RXE_RPC_GET_OUTPUT, err);
}

#define RXE_RPC_MAX_REPEAT 100000u
#define RXE_RPC_MAX_REPEAT_MS 3600000u

static rxe_status_t handle_time(rxe_rpc_server_t* s, reader_t* r, rxe_rpc_buffer_t* b, rxe_error_t* err) {
  uint32_t warmup = (uint32_t)get_uint(r, 4), repeat = (uint32_t)get_uint(r, 4), min_ms = (uint32_t)get_uint(r, 4);
  uint64_t ns = 0, start, done = 0;
  uint32_t i, n = 0;
  rxe_status_t st = check_consumed(r, RXE_RPC_TIME, err);
  if (st != RXE_OK) return st;
  if (repeat == 0 || repeat > RXE_RPC_MAX_REPEAT || warmup > RXE_RPC_MAX_REPEAT || min_ms > RXE_RPC_MAX_REPEAT_MS) {
    return rxe_error_set(err, RXE_ERR_PROTOCOL,
                         "malformed TIME: warmup %d, repeat %d, min_repeat_ms %d (repeat 1..%d, warmup 0..%d, "
                         "min_repeat_ms 0..%d)", (int64_t)warmup, (int64_t)repeat, (int64_t)min_ms,
                         (int64_t)RXE_RPC_MAX_REPEAT, (int64_t)RXE_RPC_MAX_REPEAT, (int64_t)RXE_RPC_MAX_REPEAT_MS);
  }
  st = run_staged(s, &ns, err);
  if (st != RXE_OK) return st;
  for (i = 0; i < warmup; ++i) {
    st = rerun_staged(s, err);
    if (st != RXE_OK) return st;
  }
  begin(b, RXE_RPC_OK);
  put_uint(b, 0, 4); /* n, patched below */
  start = s->platform.clock_ns(s->platform.ctx);
  while (n < repeat || (done - start) < (uint64_t)min_ms * 1000000u) {
    uint64_t t0 = s->platform.clock_ns(s->platform.ctx);
    st = rerun_staged(s, err);
    done = s->platform.clock_ns(s->platform.ctx);
    if (st != RXE_OK) return st;
    put_uint(b, done - t0, 8);
    if (b->overflow) break; /* the reply cannot grow: no use running on */
    if (++n >= RXE_RPC_MAX_REPEAT) break;
  }
  if (!b->overflow) {
    for (i = 0; i < 4; ++i) b->data[RXE_RPC_HEADER_BYTES + i] = (uint8_t)(n >> (8 * i));
  }
  st = finish(b, RXE_RPC_TIME, err);
  if (st != RXE_OK) {
    release_outputs(s, &s->output_sets[s->current ^ 1]);
    return st;
  }
  commit_staged(s);
  return RXE_OK;
}

static rxe_status_t handle_profile(rxe_rpc_server_t* s, rxe_rpc_buffer_t* b, rxe_error_t* err) {
  const rxe_function_t* fn = s->function;
  uint64_t ns = 0;
  int32_t k;
  rxe_status_t st;
  if (fn->profile == 0 || fn->num_profile_entries < 0) {
    return rxe_error_set(err, RXE_ERR_NOT_FOUND, "PROFILE: function %s was built without the profiler (RXE_PROFILE)",
                         fn->name);
  }
  for (k = 0; k < fn->num_profile_entries; ++k) {
    fn->profile[k].calls = 0;
    fn->profile[k].total_ns = 0;
  }
  st = run_staged(s, &ns, err);
  if (st != RXE_OK) return st;
  begin(b, RXE_RPC_OK);
  put_uint(b, ns, 8);
  put_uint(b, (uint64_t)fn->num_profile_entries, 4);
  for (k = 0; k < fn->num_profile_entries; ++k) {
    put_str(b, fn->profile[k].kernel);
    put_str(b, fn->profile[k].span);
    put_uint(b, fn->profile[k].calls, 8);
    put_uint(b, fn->profile[k].total_ns, 8);
  }
  st = finish(b, RXE_RPC_PROFILE, err);
  if (st != RXE_OK) {
    release_outputs(s, &s->output_sets[s->current ^ 1]);
    return st;
  }
  commit_staged(s);
  return RXE_OK;
}

static rxe_status_t handle_workspace(rxe_rpc_server_t* s, reader_t* r, rxe_rpc_buffer_t* b, rxe_error_t* err) {
  const rxe_function_t* fn = s->function;
  int64_t values[RXE_RPC_MAX_SIZES];
  int32_t i;
  uint64_t bytes = 0;
  rxe_status_t st;
  if (fn->num_sizes < 0 || fn->num_sizes > RXE_RPC_MAX_SIZES) {
    return rxe_error_set(err, RXE_ERR_INTERNAL, "WORKSPACE: function %s has %d size variables (the server takes %d)",
                         fn->name, (int64_t)fn->num_sizes, (int64_t)RXE_RPC_MAX_SIZES);
  }
  if (fn->workspace == 0) return rxe_error_set(err, RXE_ERR_NOT_FOUND, "WORKSPACE: function %s has no workspace()", fn->name);
  if (r->left != (uint64_t)fn->num_sizes * 8u) {
    return rxe_error_set(err, RXE_ERR_PROTOCOL, "malformed WORKSPACE: %d bytes, function %s takes one i64 per size variable (%d)",
                         (int64_t)r->left, fn->name, (int64_t)fn->num_sizes);
  }
  for (i = 0; i < fn->num_sizes; ++i) values[i] = (int64_t)get_uint(r, 8);
  st = fn->workspace(values, &bytes, err);
  if (st != RXE_OK) return st;
  begin(b, RXE_RPC_OK);
  put_uint(b, bytes, 8);
  return finish(b, RXE_RPC_WORKSPACE, err);
}

/* ---- GENERATE ---- */

typedef struct {
  rxe_rpc_buffer_t* b;
  rxe_error_t err; /* why the stream stopped */
  int broken;
  int32_t sent;
} token_stream_t;

/* rxe_generate's callback: one TOKEN frame per token, sent at once. */
static int send_token(void* user, int64_t token, int32_t index, uint64_t step_ns) {
  token_stream_t* ts = (token_stream_t*)user;
  begin(ts->b, RXE_RPC_TOKEN);
  put_uint(ts->b, (uint64_t)token, 8);
  put_uint(ts->b, (uint64_t)index, 4);
  put_uint(ts->b, step_ns, 8);
  if (finish(ts->b, RXE_RPC_GENERATE, &ts->err) != RXE_OK) {
    ts->broken = 1;
  } else if (!stream_frame(ts->b)) {
    ts->broken = 1;
    rxe_error_set(&ts->err, RXE_ERR_PROTOCOL, "GENERATE: the stream broke after %d tokens", (int64_t)ts->sent);
  }
  ts->sent += !ts->broken;
  return ts->broken;
}

static int finite_f32(uint32_t bits) { return (bits & 0x7F800000u) != 0x7F800000u; }

static float f32_of(uint32_t bits) {
  union {
    uint32_t u;
    float f;
  } v;
  v.u = bits;
  return v.f;
}

/* offset + bytes rounded up to 64, or 0 past 2^62 */
static uint64_t add_block(uint64_t offset, uint64_t bytes) {
  const uint64_t limit = ((uint64_t)1) << 62;
  if (bytes > limit || offset > limit) return 0;
  return offset + ((bytes + 63u) & ~(uint64_t)63u);
}

typedef struct {
  uint32_t prompt_len, max_new, num_stop;
  const uint8_t* prompt; /* little-endian i64s in the payload */
  const uint8_t* stop;
  rxe_sampling_t sampling;
} generate_request_t;

static rxe_status_t parse_generate(reader_t* r, char* name, generate_request_t* q, rxe_error_t* err) {
  uint32_t temperature, top_p;
  rxe_status_t st;
  uint8_t* bytes = (uint8_t*)q;
  uint64_t i;
  for (i = 0; i < sizeof(*q); ++i) bytes[i] = 0;
  q->prompt = q->stop = 0;
  st = get_name(r, RXE_RPC_GENERATE, name, err);
  if (st != RXE_OK) return st;
  q->prompt_len = (uint32_t)get_uint(r, 4);
  if (!r->bad && q->prompt_len > r->left / 8u) {
    return rxe_error_set(err, RXE_ERR_PROTOCOL, "malformed GENERATE: a prompt of %d tokens in %d bytes",
                         (int64_t)q->prompt_len, (int64_t)r->left);
  }
  q->prompt = get_bytes(r, (uint64_t)q->prompt_len * 8u);
  q->max_new = (uint32_t)get_uint(r, 4);
  temperature = (uint32_t)get_uint(r, 4);
  q->sampling.top_k = (int32_t)(uint32_t)get_uint(r, 4);
  top_p = (uint32_t)get_uint(r, 4);
  q->sampling.seed = get_uint(r, 8);
  q->num_stop = (uint32_t)get_uint(r, 4);
  if (!r->bad && q->num_stop > RXE_RPC_MAX_STOP) {
    return rxe_error_set(err, RXE_ERR_PROTOCOL, "malformed GENERATE: %d stop tokens (the limit is %d)",
                         (int64_t)q->num_stop, (int64_t)RXE_RPC_MAX_STOP);
  }
  q->stop = get_bytes(r, (uint64_t)q->num_stop * 8u);
  st = check_consumed(r, RXE_RPC_GENERATE, err);
  if (st != RXE_OK) return st;
  if (q->max_new < 1 || q->max_new > RXE_RPC_MAX_NEW_TOKENS) {
    return rxe_error_set(err, RXE_ERR_PROTOCOL, "malformed GENERATE: max_new_tokens %d (1..%d)", (int64_t)q->max_new,
                         (int64_t)RXE_RPC_MAX_NEW_TOKENS);
  }
  if (!finite_f32(temperature) || !finite_f32(top_p)) {
    return rxe_error_set(err, RXE_ERR_PROTOCOL, "malformed GENERATE: temperature and top_p must be finite");
  }
  q->sampling.temperature = f32_of(temperature);
  q->sampling.top_p = f32_of(top_p);
  return RXE_OK;
}

static void get_i64s(const uint8_t* src, uint32_t n, int64_t* dst) {
  reader_t r;
  uint32_t i;
  r.p = src;
  r.left = (uint64_t)n * 8u;
  r.bad = 0;
  for (i = 0; i < n; ++i) dst[i] = (int64_t)get_uint(&r, 8);
}

/* GENERATE: rxe_generate on a state, workspace and scratch allocated for
 * this request (one block), streaming a TOKEN frame per token. */
static rxe_status_t handle_generate(rxe_rpc_server_t* s, reader_t* r, rxe_rpc_buffer_t* b, rxe_error_t* err) {
  char name[RXE_RPC_MAX_NAME];
  generate_request_t q;
  rxe_decoder_t d;
  rxe_generate_config_t config;
  rxe_generate_stats_t stats;
  token_stream_t ts;
  uint64_t o_ws, o_scratch, o_prompt, o_stop, o_tokens, o_ns, total;
  uint32_t max_new;
  uint8_t* block;
  rxe_status_t st = parse_generate(r, name, &q, err);
  if (st != RXE_OK) return st;
  st = rxe_decoder_init(&d, s->module, name, err);
  if (st != RXE_OK) return st;
  /* a run ends at the context bound: more tokens than max_context + 1 are never made */
  max_new = (int64_t)q.max_new > d.max_context + 1 ? (uint32_t)(d.max_context + 1) : q.max_new;
  o_ws = add_block(0, d.state_bytes);
  o_scratch = o_ws ? add_block(o_ws, d.workspace_bytes) : 0;
  o_prompt = o_scratch ? add_block(o_scratch, rxe_decoder_scratch_bytes(&d)) : 0;
  o_stop = o_prompt ? add_block(o_prompt, (uint64_t)q.prompt_len * 8u) : 0;
  o_tokens = o_stop ? add_block(o_stop, (uint64_t)q.num_stop * 8u) : 0;
  o_ns = o_tokens ? add_block(o_tokens, (uint64_t)max_new * 8u) : 0;
  total = o_ns ? add_block(o_ns, (uint64_t)max_new * 8u) : 0;
  if (total == 0) return rxe_error_set(err, RXE_ERR_NO_MEMORY, "GENERATE: the decoder's memory passes 2^62 bytes");
  block = (uint8_t*)s->platform.alloc(s->platform.ctx, total, RXE_WORKSPACE_ALIGNMENT > 64 ? RXE_WORKSPACE_ALIGNMENT : 64);
  if (block == 0) {
    return rxe_error_set(err, RXE_ERR_NO_MEMORY, "GENERATE: out of memory for %d bytes of state, workspace and scratch",
                         (int64_t)total);
  }
  get_i64s(q.prompt, q.prompt_len, (int64_t*)(block + o_prompt));
  get_i64s(q.stop, q.num_stop, (int64_t*)(block + o_stop));
  config.max_new_tokens = (int32_t)max_new;
  config.stop_tokens = (const int64_t*)(block + o_stop);
  config.num_stop_tokens = (int32_t)q.num_stop;
  config.sampling = q.sampling;
  config.clock_ns = s->platform.clock_ns;
  config.clock_ctx = s->platform.ctx;
  ts.b = b;
  ts.broken = 0;
  ts.sent = 0;
  ts.err.status = RXE_OK;
  ts.err.message[0] = '\0';
  st = rxe_generate(&d, (const int64_t*)(block + o_prompt), (int32_t)q.prompt_len, &config, block, d.state_bytes,
                    block + o_ws, d.workspace_bytes, block + o_scratch, rxe_decoder_scratch_bytes(&d),
                    (int64_t*)(block + o_tokens), (uint64_t*)(block + o_ns), &stats, send_token, &ts, err);
  s->platform.release(s->platform.ctx, block);
  if (ts.broken) {
    *err = ts.err;
    return ts.err.status;
  }
  if (st != RXE_OK) return st;
  begin(b, RXE_RPC_OK);
  put_uint(b, (uint64_t)stats.num_tokens, 4);
  put_uint(b, (uint64_t)stats.prompt_tokens, 4);
  put_uint(b, stats.prefill_ns, 8);
  put_uint(b, stats.decode_ns, 8);
  put_uint(b, (uint64_t)stats.stopped_by, 4);
  return finish(b, RXE_RPC_GENERATE, err);
}

static rxe_status_t dispatch(rxe_rpc_server_t* s, uint8_t type, reader_t* r, rxe_rpc_buffer_t* b, rxe_error_t* err) {
  rxe_status_t st;
  if (type == RXE_RPC_HELLO) return handle_hello(s, r, b, err);
  if (type < RXE_RPC_HELLO || type > RXE_RPC_GENERATE) {
    return rxe_error_set(err, RXE_ERR_PROTOCOL, "unknown request type %d", (int64_t)type);
  }
  if (s->function == 0 && type != RXE_RPC_LIST && type != RXE_RPC_SHUTDOWN) {
    return rxe_error_set(err, RXE_ERR_NOT_FOUND, "%s: module %s has no functions", request_names[type], s->module->name);
  }
  switch (type) {
    case RXE_RPC_SELECT: return handle_select(s, r, b, err);
    case RXE_RPC_SET_INPUT: return handle_set_input(s, r, b, err);
    case RXE_RPC_GET_OUTPUT: return handle_get_output(s, r, b, err);
    case RXE_RPC_TIME: return handle_time(s, r, b, err);
    case RXE_RPC_WORKSPACE: return handle_workspace(s, r, b, err);
    case RXE_RPC_GENERATE: return handle_generate(s, r, b, err);
    default: break;
  }
  st = check_consumed(r, type, err); /* the requests without a payload */
  if (st != RXE_OK) return st;
  switch (type) {
    case RXE_RPC_LIST: return handle_list(s, b, err);
    case RXE_RPC_RUN: return handle_run(s, b, err);
    case RXE_RPC_PROFILE: return handle_profile(s, b, err);
    default: break;
  }
  begin(b, RXE_RPC_OK); /* SHUTDOWN */
  st = finish(b, RXE_RPC_SHUTDOWN, err);
  if (st == RXE_OK) s->stop = 1;
  return st;
}

void rxe_rpc_handle(rxe_rpc_server_t* s, uint8_t type, const uint8_t* payload, uint32_t length,
                    rxe_rpc_buffer_t* b) {
  reader_t r;
  rxe_error_t err;
  rxe_status_t st;
  r.p = payload;
  r.left = payload != 0 ? length : 0;
  r.bad = 0;
  err.status = RXE_OK;
  err.message[0] = '\0';
  b->start = 0;
  st = dispatch(s, type, &r, b, &err);
  if (st != RXE_OK) {
    put_error(b, st, err.message);
    if (b->overflow) rxe_rpc_reply_error(b, st, err.message); /* no room after the frames kept: it alone */
  }
  b->start = 0;
}
