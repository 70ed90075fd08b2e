/*
 * Stateful fuzz target for the RPC protocol core: each input is a sequence
 * of requests, good and bad, handled by one server that lives for the whole
 * input (and is made afresh for the next, so a run is deterministic).
 *
 * The module is -DRXE_MODULE=<prefix>_module (a compiled model), or the
 * hand-written one of fuzz_module.h. Built two ways:
 *   - with -fsanitize=fuzzer and -DRXE_LIBFUZZER: LLVMFuzzerTestOneInput;
 *   - without: a main() that replays files and directories of inputs
 *     (tests run it under AddressSanitizer and UndefinedBehaviorSanitizer);
 *     `--trace` prints each request and its reply.
 *
 * An input is a list of ops, each a kind byte (taken modulo 13) followed by
 * its parameter bytes (missing bytes read as 0):
 *   0 RAW       u16 n, n bytes: a raw frame, header included
 *   1 SET_INPUT u8 index, u8 size, u8 fill: a well-formed tensor for input
 *               index % inputs, shaped by its signature (every symbolic
 *               dim = size % 20, or 64 * (size - 249) from 250 up); fill 0
 *               zeros, 1 element i = i % 3, 2 pseudo-random bytes, 3 every
 *               element -1
 *   2 BAD_INPUT u8 index, u8 how, u8 size: a malformed SET_INPUT (how % 10:
 *               short data, long data, 3-bit dtype, rank 9, a negative dim,
 *               huge dims, index 4000, shape (1000) with 8 bytes, a truncated
 *               header, index = inputs)
 *   3 RUN
 *   4 GET_OUTPUT u8 index (255: index 0xFFFFFFFF)
 *   5 TIME      u8 t: warmup t % 3, repeat (t >> 2) % 4; when t & 0x80,
 *               min_repeat_ms 1 (the timed loop runs on the fake clock) or,
 *               when also t & 0x40, 10^9 (beyond the server's limit)
 *   6 PROFILE
 *   7 WORKSPACE u8 c, then per value an i8: (sizes + c % 3 - 1) values
 *   8 SELECT    u8 how, u8 which: how % 4: function which % functions, an
 *               unknown name, a 200-byte name, a length past the frame
 *   9 OTHER     u8 what: what % 6: HELLO, HELLO of another version, LIST,
 *               an unknown type, an empty SET_INPUT, LIST with a stray byte
 *  10 FAIL      u8 f: f & 0x80: the next growth of the reply buffer fails;
 *               else the (f % 4 + 1)-th allocation from now fails
 *  11 SHUTDOWN  (the rest of the input is ignored)
 *  12 GENERATE  u8 how, u8 a, u8 b: how % 8: 0 a request to the module's
 *               `step`: a % 9 prompt ids (a + i) % 6 (5 is out of the
 *               vocabulary), max_new_tokens b % 12, temperature 0.8 when
 *               how & 8, top_k (b >> 4) % 4, top_p 0.9 when how & 16, seed
 *               a, stop token b % 5 when how & 32; 1 function main (no
 *               decoder); 2 an unknown function; 3 a 200-byte name; 4 a
 *               prompt count past the frame; 5 a NaN temperature; 6 1000
 *               stop tokens; 7 the request of 0 cut to b % its length bytes
 *
 * After every reply the target checks: the reply is one well-formed frame
 * (OK, or ERROR with a known status and a message), after GENERATE's TOKEN
 * frames (as many as its OK counts, indices 0, 1, ...); GENERATE left the
 * server's state as it was, whatever its answer; an ERROR left the
 * server's observable state (function, inputs, outputs: pointers, shapes and
 * bytes) exactly as it was; every tensor's shape fits the memory behind it.
 * A broken invariant aborts with a message.
 */
#define _POSIX_C_SOURCE 200809L /* posix_memalign, opendir */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "relax_edge/rpc.h"
#include "relax_edge/runtime.h"

#ifndef RXE_MODULE
#include "fuzz_module.h"
#define RXE_MODULE rxe_fuzz_module
#define RESET_MODULE() (rxe_fuzz_count_runs = 0)
#else
extern const rxe_module_t RXE_MODULE;
#define RESET_MODULE() ((void)0)
#endif

#define MAX_LIVE 64
#define MAX_REPLY (64u << 20)

static struct {
  void* ptr[MAX_LIVE];
  uint64_t bytes[MAX_LIVE];
  int fail_in; /* the allocation that fails: 1 = the next; 0 = none */
  int fail_grow;
  uint64_t clock;
  int trace;
} g;

uint64_t rxe_profile_now_ns(void) { return g.clock += 1000; }

static void die(const char* what, const char* detail) {
  fprintf(stderr, "rpc_fuzz: invariant broken: %s%s%s\n", what, detail ? ": " : "", detail ? detail : "");
  abort();
}

static void* fuzz_alloc(void* ctx, uint64_t bytes, uint64_t alignment) {
  int i;
  (void)ctx;
  if (g.fail_in > 0 && --g.fail_in == 0) return NULL;
  if (bytes > (64u << 20)) return NULL;
  if (alignment < sizeof(void*)) alignment = sizeof(void*);
  for (i = 0; i < MAX_LIVE; ++i) {
    if (g.ptr[i] == NULL) {
      /* aligned as the server's allocator is: models refuse a misaligned workspace */
      if (posix_memalign(&g.ptr[i], (size_t)alignment, (size_t)(bytes > 0 ? bytes : 1)) != 0) g.ptr[i] = NULL;
      g.bytes[i] = bytes;
      return g.ptr[i];
    }
  }
  return NULL;
}

static void fuzz_release(void* ctx, void* p) {
  int i;
  (void)ctx;
  for (i = 0; i < MAX_LIVE; ++i) {
    if (g.ptr[i] == p) {
      free(p);
      g.ptr[i] = NULL;
      return;
    }
  }
  die("release of memory the platform did not allocate", NULL);
}

static uint64_t fuzz_clock(void* ctx) {
  (void)ctx;
  return g.clock += 1000;
}

/* Bytes allocated at p (which must be live). */
static uint64_t live_bytes(const void* p, const char* what) {
  int i;
  for (i = 0; i < MAX_LIVE; ++i) {
    if (g.ptr[i] == p && p != NULL) return g.bytes[i];
  }
  die("a tensor points to memory that is not allocated", what);
  return 0;
}

static int fuzz_grow(rxe_rpc_buffer_t* b, uint64_t min_capacity) {
  uint8_t* bigger;
  if (g.fail_grow) {
    g.fail_grow = 0;
    return 0;
  }
  if (min_capacity > MAX_REPLY) return 0;
  bigger = (uint8_t*)realloc(b->data, (size_t)min_capacity);
  if (bigger == NULL) return 0;
  b->data = bigger;
  b->capacity = min_capacity;
  return 1;
}

/* ---- the observable state ---- */

typedef struct {
  const void* data;
  int32_t ndim;
  uint8_t code, bits;
  int64_t dims[RXE_MAX_NDIM];
  uint64_t hash;
} tensor_view_t;

typedef struct {
  const rxe_function_t* function;
  int has_outputs, stop;
  tensor_view_t inputs[RXE_RPC_MAX_TENSORS];
  tensor_view_t outputs[RXE_RPC_MAX_TENSORS];
} snapshot_t;

static void view(const rxe_tensor_t* t, tensor_view_t* out, const char* what) {
  uint64_t bytes = t->dtype.bits / 8u, i, word, h = 1469598103934665603ull;
  int32_t d;
  const uint8_t* p = (const uint8_t*)t->data;
  out->data = t->data;
  out->ndim = t->ndim;
  out->code = t->dtype.code;
  out->bits = t->dtype.bits;
  if (t->ndim < 0 || t->ndim > RXE_MAX_NDIM) die("a tensor of bad rank", what);
  for (d = 0; d < t->ndim; ++d) {
    if (t->shape[d] < 0) die("a tensor with a negative dim", what);
    out->dims[d] = t->shape[d];
    bytes *= (uint64_t)t->shape[d];
  }
  if (bytes > live_bytes(t->data, what)) die("a tensor's shape is larger than its memory", what);
  for (i = 0; i + 8 <= bytes; i += 8) {
    memcpy(&word, p + i, 8);
    h = (h ^ word) * 1099511628211ull;
  }
  for (; i < bytes; ++i) h = (h ^ p[i]) * 1099511628211ull;
  out->hash = h;
}

static void snapshot(const rxe_rpc_server_t* s, snapshot_t* out) {
  int k;
  memset(out, 0, sizeof(*out));
  out->function = s->function;
  out->has_outputs = s->has_outputs;
  out->stop = s->stop;
  for (k = 0; k < RXE_RPC_MAX_TENSORS; ++k) {
    if (s->input_data[k] == NULL) continue;
    if (s->inputs[k].data != s->input_data[k] || s->inputs[k].shape != s->input_dims[k]) die("input tensor not its slot's", NULL);
    view(&s->inputs[k], &out->inputs[k], "input");
  }
  if (s->has_outputs) {
    const rxe_tensor_t* outputs = rxe_rpc_server_outputs(s);
    for (k = 0; k < s->function->num_outputs; ++k) view(&outputs[k], &out->outputs[k], "output");
  }
}

/* ---- reply checks ---- */

static uint64_t le(const uint8_t* p, int n) {
  uint64_t v = 0;
  int i;
  for (i = 0; i < n; ++i) v |= (uint64_t)p[i] << (8 * i);
  return v;
}

/* Checks the reply: TOKEN frames (GENERATE's only), then one OK or ERROR
 * frame ending the buffer. Returns the status (RXE_OK for an OK frame). */
static uint32_t check_reply_frames(const rxe_rpc_buffer_t* b, uint8_t type) {
  uint64_t length, at = 0, tokens = 0;
  uint32_t status, n;
  const uint8_t* f;
  if (b->overflow) die("the reply overflowed (an ERROR frame always fits)", NULL);
  for (;;) {
    if (b->size - at < RXE_RPC_HEADER_BYTES) die("a reply shorter than a header", NULL);
    f = b->data + at;
    if (f[0] != 'R' || f[1] != 'X' || f[3] != 0) die("a reply with a bad header", NULL);
    length = le(f + 4, 4);
    if (length > b->size - at - RXE_RPC_HEADER_BYTES) die("a reply whose length field passes its size", NULL);
    if (f[2] != RXE_RPC_TOKEN) break;
    if (type != RXE_RPC_GENERATE) die("a TOKEN frame in the reply to another request", NULL);
    if (length != 20 || le(f + 16, 4) != tokens) die("a TOKEN frame not of 20 bytes, or out of order", NULL);
    ++tokens;
    at += RXE_RPC_HEADER_BYTES + length;
  }
  if (length != b->size - at - RXE_RPC_HEADER_BYTES) die("a reply whose length field is not its size", NULL);
  if (f[2] == RXE_RPC_OK) {
    if (type == RXE_RPC_GENERATE && (length != 28 || le(f + 8, 4) != tokens)) {
      die("a GENERATE reply whose OK does not count its TOKEN frames", NULL);
    }
    return RXE_OK;
  }
  if (f[2] != RXE_RPC_ERROR) die("a reply neither OK nor ERROR", NULL);
  if (length < 8) die("an ERROR reply without status and message", NULL);
  status = (uint32_t)le(f + 8, 4);
  n = (uint32_t)le(f + 12, 4);
  if (status == RXE_OK || status > RXE_ERR_NO_MEMORY) die("an ERROR reply with an unknown status", NULL);
  if ((uint64_t)n + 8 != length || n == 0) die("an ERROR reply whose message is empty or not the payload", NULL);
  return status;
}

static uint32_t check_reply(const rxe_rpc_buffer_t* b) { return check_reply_frames(b, 0); }

/* The last frame of a reply (after any TOKEN frames). */
static const uint8_t* last_frame(const rxe_rpc_buffer_t* b) {
  uint64_t at = 0;
  while (b->data[at + 2] == RXE_RPC_TOKEN) at += RXE_RPC_HEADER_BYTES + le(b->data + at + 4, 4);
  return b->data + at;
}

/* ---- the ops ---- */

typedef struct {
  const uint8_t* p;
  size_t left;
} input_t;

static uint8_t next(input_t* in) {
  if (in->left == 0) return 0;
  --in->left;
  return *in->p++;
}

typedef struct {
  uint8_t bytes[1 << 16];
  size_t size;
} frame_t;

static void put(frame_t* f, uint64_t v, int n) {
  int i;
  for (i = 0; i < n && f->size < sizeof(f->bytes); ++i) f->bytes[f->size++] = (uint8_t)(v >> (8 * i));
}

static const char* const op_names[] = {"RAW", "SET_INPUT", "BAD_INPUT", "RUN", "GET_OUTPUT", "TIME",
                                       "PROFILE", "WORKSPACE", "SELECT", "OTHER", "FAIL", "SHUTDOWN", "GENERATE"};

/* The dims of input k from its signature ("(1, seq)": 1 and size). */
static int32_t signature_dims(const rxe_arg_info_t* arg, int64_t size, int64_t* dims) {
  const char* s = arg->shape ? arg->shape : "";
  int32_t n = 0, d;
  while (*s && n < RXE_MAX_NDIM) {
    while (*s == '(' || *s == ' ' || *s == ',') ++s;
    if (*s == '\0' || *s == ')') break;
    if (*s >= '0' && *s <= '9') {
      int64_t v = 0;
      while (*s >= '0' && *s <= '9') v = v * 10 + (*s++ - '0');
      dims[n] = v;
    } else {
      dims[n] = size;
    }
    while (*s && *s != ',' && *s != ')') ++s;
    ++n;
  }
  if (n != arg->ndim) {
    for (d = 0; d < arg->ndim && d < RXE_MAX_NDIM; ++d) dims[d] = size;
    n = arg->ndim;
  }
  return n;
}

static void put_element(frame_t* f, const rxe_dtype_t* dt, int value) {
  if (dt->code == RXE_DTYPE_FLOAT && dt->bits == 32) {
    float x = (float)value;
    uint32_t u;
    memcpy(&u, &x, 4);
    put(f, u, 4);
  } else if (dt->code == RXE_DTYPE_FLOAT && dt->bits == 64) {
    double x = (double)value;
    uint64_t u;
    memcpy(&u, &x, 8);
    put(f, u, 8);
  } else if (dt->code == RXE_DTYPE_FLOAT && dt->bits == 16) {
    put(f, value == 0 ? 0 : value == 1 ? 0x3C00 : value == 2 ? 0x4000 : 0xBC00, 2);
  } else {
    put(f, (uint64_t)(int64_t)value, dt->bits / 8);
  }
}

/* A well-formed SET_INPUT payload for input `index` of the function. */
static void tensor_payload(frame_t* f, const rxe_function_t* fn, uint32_t index, uint8_t size, uint8_t fill) {
  const rxe_arg_info_t* arg = &fn->inputs[index];
  int64_t dims[RXE_MAX_NDIM], elements = 1, i;
  int32_t ndim = signature_dims(arg, size >= 250 ? 64 * (size - 249) : size % 20, dims), d;
  uint32_t state = 0x9E3779B9u ^ fill;
  uint8_t bits = arg->dtype.bits == 8 || arg->dtype.bits == 16 || arg->dtype.bits == 64 ? arg->dtype.bits : 32;
  put(f, index, 4);
  put(f, arg->dtype.code, 1);
  put(f, bits, 1);
  put(f, (uint64_t)ndim, 2);
  for (d = 0; d < ndim; ++d) {
    put(f, (uint64_t)dims[d], 8);
    elements *= dims[d];
  }
  for (i = 0; i < elements && f->size < sizeof(f->bytes); ++i) {
    if (fill % 4 == 2) {
      state ^= state << 13;
      state ^= state >> 17;
      state ^= state << 5;
      put(f, state, bits / 8);
    } else {
      put_element(f, &arg->dtype, fill % 4 == 0 ? 0 : fill % 4 == 1 ? (int)(i % 3) : -1);
    }
  }
}

static void bad_input_payload(frame_t* f, const rxe_function_t* fn, uint8_t index, uint8_t how, uint8_t size) {
  uint32_t k = fn->num_inputs > 0 ? index % (uint32_t)fn->num_inputs : 0;
  frame_t good;
  good.size = 0;
  if (fn->num_inputs > 0) tensor_payload(&good, fn, k, size, 1);
  switch (how % 10) {
    case 0: memcpy(f->bytes, good.bytes, good.size); f->size = good.size > 8 ? good.size - 1 : 0; break;
    case 1: memcpy(f->bytes, good.bytes, good.size); f->size = good.size; put(f, 7, 1); break;
    case 2: put(f, k, 4); put(f, 0x0302, 2); put(f, 1, 2); put(f, 1, 8); put(f, 'x', 1); break;
    case 3: put(f, k, 4); put(f, 0x2002, 2); put(f, 9, 2); {int d; for (d = 0; d < 9; ++d) put(f, 1, 8);} break;
    case 4: put(f, k, 4); put(f, 0x2002, 2); put(f, 1, 2); put(f, (uint64_t)-3, 8); break;
    case 5: put(f, k, 4); put(f, 0x2002, 2); put(f, 2, 2); put(f, 1ull << 40, 8); put(f, 1ull << 40, 8); break;
    case 6: put(f, 4000, 4); put(f, 0x2002, 2); put(f, 1, 2); put(f, 1, 8); put(f, 0, 4); break;
    case 7: put(f, k, 4); put(f, 0x2002, 2); put(f, 1, 2); put(f, 1000, 8); put(f, 0, 8); break;
    case 8: put(f, k, 4); put(f, 2, 1); break;
    default: put(f, (uint64_t)fn->num_inputs, 4); put(f, 0x2002, 2); put(f, 1, 2); put(f, 1, 8); put(f, 0, 4); break;
  }
}

/* A GENERATE payload (op 12). */
static void generate_payload(frame_t* f, uint8_t how, uint8_t a, uint8_t b) {
  const char* name = how % 8 == 1 ? "main" : how % 8 == 2 ? "nope" : "step";
  uint32_t n = (uint32_t)strlen(name), i, prompt = a % 9u;
  float temperature = how & 8 ? 0.8f : 0.0f, top_p = how & 16 ? 0.9f : 1.0f;
  uint32_t bits;
  if (how % 8 == 3) {
    put(f, 200, 4);
    for (i = 0; i < 200; ++i) put(f, 'a', 1);
  } else {
    put(f, n, 4);
    for (i = 0; i < n; ++i) put(f, (uint8_t)name[i], 1);
  }
  put(f, how % 8 == 4 ? 0xFFFFFFFFu : prompt, 4);
  for (i = 0; i < prompt; ++i) put(f, (a + i) % 6u, 8);
  put(f, b % 12u, 4);
  memcpy(&bits, &temperature, 4);
  put(f, how % 8 == 5 ? 0x7FC00000u : bits, 4);
  put(f, (b >> 4) % 4u, 4);
  memcpy(&bits, &top_p, 4);
  put(f, bits, 4);
  put(f, a, 8);
  if (how % 8 == 6) {
    put(f, 1000, 4);
    for (i = 0; i < 1000; ++i) put(f, i, 8);
  } else {
    put(f, how & 32 ? 1u : 0u, 4);
    if (how & 32) put(f, b % 5u, 8);
  }
  if (how % 8 == 7 && f->size > 0) f->size = b % f->size;
}

static void request(rxe_rpc_server_t* s, rxe_rpc_buffer_t* reply, uint8_t type, const uint8_t* payload,
                    uint32_t length, const char* op) {
  snapshot_t before, after;
  uint32_t status;
  snapshot(s, &before);
  rxe_rpc_handle(s, type, payload, length, reply);
  status = check_reply_frames(reply, type);
  snapshot(s, &after);
  if (status != RXE_OK && memcmp(&before, &after, sizeof(before)) != 0) die("an ERROR reply changed the state", op);
  if (type == RXE_RPC_GENERATE && memcmp(&before, &after, sizeof(before)) != 0) die("GENERATE changed the state", op);
  if (status == RXE_OK && type == RXE_RPC_GET_OUTPUT) {
    if (reply->size < 12 || reply->size < 12 + 8 * le(reply->data + 10, 2)) die("a GET_OUTPUT reply shorter than its shape", NULL);
  }
  if (g.trace) {
    const uint8_t* f = last_frame(reply);
    uint64_t at;
    if (type == RXE_RPC_GENERATE) {
      printf("%s tokens", op);
      for (at = 0; reply->data + at < f; at += RXE_RPC_HEADER_BYTES + 20) printf(" %d", (int)le(reply->data + at + 8, 8));
      printf("\n");
    }
    if (status == RXE_OK) {
      printf("%s type %d -> OK %d bytes\n", op, type, (int)le(f + 4, 4));
    } else {
      printf("%s type %d -> %s: %.*s\n", op, type, rxe_status_name((rxe_status_t)status), (int)le(f + 12, 4),
             (const char*)f + 16);
    }
  }
}

static void raw_frame(rxe_rpc_server_t* s, rxe_rpc_buffer_t* reply, const uint8_t* data, size_t size) {
  uint8_t type;
  uint32_t length;
  rxe_error_t err;
  if (size < RXE_RPC_HEADER_BYTES) return; /* a server waits for the rest of the header */
  if (rxe_rpc_parse_header(data, &type, &length, &err) != RXE_OK) {
    rxe_rpc_reply_error(reply, err.status, err.message);
    if (check_reply(reply) != RXE_ERR_PROTOCOL) die("a bad header not answered with RXE_ERR_PROTOCOL", err.message);
    if (g.trace) printf("RAW bad header -> %s: %s\n", rxe_status_name(err.status), err.message);
    return;
  }
  if (length > size - RXE_RPC_HEADER_BYTES) length = (uint32_t)(size - RXE_RPC_HEADER_BYTES);
  request(s, reply, type, data + RXE_RPC_HEADER_BYTES, length, "RAW");
}

static rxe_rpc_server_t server;
static frame_t frame;
static rxe_rpc_buffer_t reply;

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  rxe_rpc_platform_t platform = {fuzz_alloc, fuzz_release, fuzz_clock, NULL};
  input_t in;
  int k;
  in.p = data;
  in.left = size;
  g.fail_in = 0;
  g.fail_grow = 0;
  g.clock = 0;
  RESET_MODULE();
  free(reply.data);
  reply.capacity = RXE_RPC_MIN_REPLY_BYTES; /* small, so that replies grow */
  reply.data = (uint8_t*)malloc(reply.capacity);
  reply.grow = fuzz_grow;
  if (reply.data == NULL) return 0;
  rxe_rpc_server_init(&server, &RXE_MODULE, platform);
  while (in.left > 0 && !server.stop) {
    uint8_t op = next(&in) % 13;
    const rxe_function_t* fn = server.function;
    frame.size = 0;
    if (fn == NULL && op != 0 && op != 9 && op != 11 && op != 12) continue;
    switch (op) {
      case 0: {
        size_t n = next(&in);
        n |= (size_t)next(&in) << 8;
        if (n > in.left) n = in.left;
        raw_frame(&server, &reply, in.p, n);
        in.p += n;
        in.left -= n;
        break;
      }
      case 1: {
        uint8_t index = next(&in), sz = next(&in), fill = next(&in);
        if (fn->num_inputs <= 0 || fn->num_inputs > RXE_RPC_MAX_TENSORS) break;
        tensor_payload(&frame, fn, index % (uint32_t)fn->num_inputs, sz, fill);
        request(&server, &reply, RXE_RPC_SET_INPUT, frame.bytes, (uint32_t)frame.size, op_names[op]);
        break;
      }
      case 2: {
        uint8_t index = next(&in), how = next(&in), sz = next(&in);
        if (fn->num_inputs > RXE_RPC_MAX_TENSORS) break;
        bad_input_payload(&frame, fn, index, how, sz);
        request(&server, &reply, RXE_RPC_SET_INPUT, frame.bytes, (uint32_t)frame.size, op_names[op]);
        if (check_reply(&reply) != RXE_ERR_PROTOCOL) die("a malformed SET_INPUT not answered with RXE_ERR_PROTOCOL", NULL);
        break;
      }
      case 3: request(&server, &reply, RXE_RPC_RUN, NULL, 0, op_names[op]); break;
      case 4: {
        uint8_t index = next(&in);
        put(&frame, index == 255 ? 0xFFFFFFFFu : index, 4);
        request(&server, &reply, RXE_RPC_GET_OUTPUT, frame.bytes, 4, op_names[op]);
        break;
      }
      case 5: {
        uint8_t t = next(&in);
        put(&frame, t % 3, 4);
        put(&frame, (t >> 2) % 4, 4);
        put(&frame, t & 0x80 ? (t & 0x40 ? 1000000000u : 1u) : 0u, 4);
        request(&server, &reply, RXE_RPC_TIME, frame.bytes, 12, op_names[op]);
        break;
      }
      case 6: request(&server, &reply, RXE_RPC_PROFILE, NULL, 0, op_names[op]); break;
      case 7: {
        int32_t n = fn->num_sizes + next(&in) % 3 - 1, i;
        for (i = 0; i < n; ++i) put(&frame, (uint64_t)(int64_t)(int8_t)next(&in), 8);
        request(&server, &reply, RXE_RPC_WORKSPACE, frame.bytes, (uint32_t)frame.size, op_names[op]);
        break;
      }
      case 8: {
        uint8_t how = next(&in), which = next(&in);
        if (how % 4 == 0) {
          const char* name = server.module->functions[which % (uint32_t)server.module->num_functions].name;
          uint32_t n = (uint32_t)strlen(name), i;
          put(&frame, n, 4);
          for (i = 0; i < n; ++i) put(&frame, (uint8_t)name[i], 1);
        } else if (how % 4 == 1) {
          put(&frame, 4, 4);
          put(&frame, 0x65706f6e, 4); /* "nope" */
        } else if (how % 4 == 2) {
          put(&frame, 200, 4);
          for (k = 0; k < 200; ++k) put(&frame, 'a', 1);
        } else {
          put(&frame, 0xFFFFFFFFu, 4);
        }
        request(&server, &reply, RXE_RPC_SELECT, frame.bytes, (uint32_t)frame.size, op_names[op]);
        break;
      }
      case 9: {
        uint8_t what = next(&in) % 6;
        uint8_t types[6] = {RXE_RPC_HELLO, RXE_RPC_HELLO, RXE_RPC_LIST, 0x42, RXE_RPC_SET_INPUT, RXE_RPC_LIST};
        if (what <= 1) put(&frame, what == 0 ? RXE_RPC_VERSION : RXE_RPC_VERSION + 7, 4);
        if (what == 5) put(&frame, 1, 1);
        request(&server, &reply, types[what], frame.size ? frame.bytes : NULL, (uint32_t)frame.size, op_names[op]);
        break;
      }
      case 10: {
        uint8_t f = next(&in);
        if (f & 0x80) {
          g.fail_grow = 1;
        } else {
          g.fail_in = f % 4 + 1;
        }
        break;
      }
      case 12: {
        uint8_t how = next(&in), a = next(&in), b = next(&in);
        generate_payload(&frame, how, a, b);
        request(&server, &reply, RXE_RPC_GENERATE, frame.bytes, (uint32_t)frame.size, op_names[op]);
        break;
      }
      default: request(&server, &reply, RXE_RPC_SHUTDOWN, NULL, 0, op_names[op]); break;
    }
  }
  rxe_rpc_server_free(&server);
  for (k = 0; k < MAX_LIVE; ++k) {
    if (g.ptr[k] != NULL) die("memory left allocated after rxe_rpc_server_free", NULL);
  }
  return 0;
}

#ifndef RXE_LIBFUZZER
static int replay_file(const char* path) {
  FILE* f = fopen(path, "rb");
  uint8_t* buf;
  long len;
  if (f == NULL) return 0;
  fseek(f, 0, SEEK_END);
  len = ftell(f);
  fseek(f, 0, SEEK_SET);
  buf = (uint8_t*)malloc(len > 0 ? (size_t)len : 1);
  if (buf == NULL || (len > 0 && fread(buf, 1, (size_t)len, f) != (size_t)len)) {
    fclose(f);
    free(buf);
    return 0;
  }
  fclose(f);
  if (g.trace) printf("== %s\n", path);
  LLVMFuzzerTestOneInput(buf, (size_t)len);
  free(buf);
  return 1;
}

int main(int argc, char** argv) {
  int i, n = 0;
  for (i = 1; i < argc; ++i) {
    struct stat st;
    if (strcmp(argv[i], "--trace") == 0) {
      g.trace = 1;
    } else if (stat(argv[i], &st) == 0 && S_ISDIR(st.st_mode)) {
      DIR* dir = opendir(argv[i]);
      struct dirent* e;
      char path[4096];
      while (dir != NULL && (e = readdir(dir)) != NULL) {
        if (e->d_name[0] == '.') continue;
        snprintf(path, sizeof(path), "%s/%s", argv[i], e->d_name);
        if (!replay_file(path)) return 2;
        ++n;
      }
      if (dir != NULL) closedir(dir);
    } else if (replay_file(argv[i])) {
      ++n;
    } else {
      fprintf(stderr, "rpc_fuzz: cannot read %s\n", argv[i]);
      return 2;
    }
  }
  free(reply.data);
  printf("RXE_CORPUS_OK %d files\n", n);
  return 0;
}
#endif
