/*
 * relax_edge RPC: a framed binary protocol between a host and a compiled
 * model on a device, carried by any byte stream (stdin/stdout of a process
 * under an emulator or an SSH exec channel, or a loopback TCP socket).
 *
 * Frame: magic "RX" (2 bytes), type (u8), flags (u8, 0), payload length
 * (u32), payload. Integers are little-endian; strings are u32 length +
 * bytes; tensors are u8 dtype code, u8 bits, u16 ndim, i64 dims[ndim], data.
 * Every reply is OK (0x80) with a payload, or ERROR (0xFF) with u32
 * status and a message. The parser never trusts a length: each read is
 * bounds-checked against the frame, frames above RXE_RPC_MAX_PAYLOAD are
 * refused before they are read, and a payload must hold exactly what its
 * request takes (HELLO alone may carry more). A malformed frame or a
 * request out of order (GET_OUTPUT before a RUN) is answered with
 * RXE_ERR_PROTOCOL, an allocation that fails with RXE_ERR_NO_MEMORY, and a
 * failing model with its own status; none of them changes the server.
 *
 * Requests:
 *   HELLO      u32 client version   -> u32 protocol version, u32 ABI version, str module name
 *   LIST                            -> u32 count, per function: str name, u32 inputs, u32 outputs,
 *                                      per argument: str name, u8 code, u8 bits, u32 ndim, str shape;
 *                                      u32 sizes, str size names
 *   SELECT     str function         -> (selects the function for the next requests; drops the outputs)
 *   SET_INPUT  u32 index, tensor    -> ()
 *   RUN                             -> u64 run nanoseconds (a run that fails keeps the last outputs)
 *   GET_OUTPUT u32 index            -> tensor
 *   TIME       u32 warmup, u32 repeat, u32 min_repeat_ms
 *                                   -> u32 n, u64 nanoseconds[n] (one per repeat; repeat 1..100000,
 *                                      warmup 0..100000, min_repeat_ms 0..3600000; n <= 100000)
 *   PROFILE                         -> u64 run ns, u32 n, per kernel: str kernel, str span, u64 calls, u64 ns
 *   WORKSPACE  i64 sizes[num_sizes] -> u64 bytes
 *   SHUTDOWN                        -> () and the server stops
 *   GENERATE   str function, u32 n, i64 prompt[n], u32 max_new_tokens, f32 temperature, i32 top_k,
 *              f32 top_p, u64 seed, u32 s, i64 stop[s]
 *                                   -> one TOKEN frame per new token as it comes (i64 token, u32 index,
 *                                      u64 step ns), then OK: u32 tokens, u32 prompt tokens, u64 prefill ns,
 *                                      u64 decode ns, u32 stopped_by; or ERROR after the tokens made
 *                                      (rxe_generate of relax_edge/generate.h on a fresh state: function
 *                                      names a KV-cache decoder's `step`, 1..RXE_RPC_MAX_NAME - 1 bytes;
 *                                      max_new_tokens 1..RXE_RPC_MAX_NEW_TOKENS; s <= RXE_RPC_MAX_STOP;
 *                                      temperature and top_p finite). It changes no other state.
 *
 * Version 2: the statuses RXE_ERR_PROTOCOL and RXE_ERR_NO_MEMORY; requests
 * that fail change nothing; SET_INPUT takes only the selected function's
 * input indices. Version 3: GENERATE and its TOKEN frames; on POSIX a
 * function takes up to 160 inputs and outputs.
 *
 * The protocol core (rpc/protocol.c) is freestanding: memory comes from the
 * I/O layer's allocator and time from its clock.
 */
#ifndef RELAX_EDGE_RPC_H_
#define RELAX_EDGE_RPC_H_

#include "relax_edge/abi.h"

#ifdef __cplusplus
extern "C" {
#endif

#define RXE_RPC_VERSION 3u
#define RXE_RPC_HEADER_BYTES 8u
#ifndef RXE_RPC_MAX_PAYLOAD
#define RXE_RPC_MAX_PAYLOAD (256u * 1024u * 1024u)
#endif
#ifndef RXE_RPC_MAX_TENSORS
#if defined(__unix__) || defined(__APPLE__)
#define RXE_RPC_MAX_TENSORS 160 /* inputs, and outputs, of one function: a decoder's step takes its state */
#else
#define RXE_RPC_MAX_TENSORS 16  /* a bare-metal server's tables stay small */
#endif
#endif
#ifndef RXE_RPC_MAX_SIZES
#define RXE_RPC_MAX_SIZES 16   /* size variables of one function (WORKSPACE) */
#endif
#ifndef RXE_RPC_MAX_NAME
#define RXE_RPC_MAX_NAME 64    /* bytes of a function name in SELECT, its terminator included */
#endif
#ifndef RXE_RPC_MAX_NEW_TOKENS
#define RXE_RPC_MAX_NEW_TOKENS 1000000 /* GENERATE's max_new_tokens */
#endif
#ifndef RXE_RPC_MAX_STOP
#define RXE_RPC_MAX_STOP 64    /* GENERATE's stop tokens */
#endif
/* The smallest reply buffer: any ERROR frame fits in it. */
#define RXE_RPC_MIN_REPLY_BYTES (RXE_RPC_HEADER_BYTES + 8u + RXE_ERROR_MESSAGE_BYTES)

enum {
  RXE_RPC_HELLO = 1, RXE_RPC_LIST = 2, RXE_RPC_SELECT = 3, RXE_RPC_SET_INPUT = 4, RXE_RPC_RUN = 5,
  RXE_RPC_GET_OUTPUT = 6, RXE_RPC_TIME = 7, RXE_RPC_PROFILE = 8, RXE_RPC_WORKSPACE = 9,
  RXE_RPC_SHUTDOWN = 10, RXE_RPC_GENERATE = 11, RXE_RPC_OK = 0x80, RXE_RPC_TOKEN = 0x81, RXE_RPC_ERROR = 0xFF
};

/* Why a reply did not fit (rxe_rpc_buffer_t.overflow). */
enum { RXE_RPC_FITS = 0, RXE_RPC_OVERFLOW_MEMORY = 1, RXE_RPC_OVERFLOW_LIMIT = 2 };

/* What the I/O layer provides. */
typedef struct {
  void* (*alloc)(void* ctx, uint64_t bytes, uint64_t alignment); /* NULL when out of memory */
  void (*release)(void* ctx, void* ptr);
  uint64_t (*clock_ns)(void* ctx);                                 /* monotonic */
  void* ctx;
} rxe_rpc_platform_t;

/* A reply being written: the core fills `data` up to `capacity`, and asks
 * `grow` (when not NULL) for more room instead of stopping. grow must keep
 * the first `size` bytes, set `data` and `capacity` (at least min_capacity)
 * and return 1, or return 0 and leave the buffer as it was. A reply that
 * does not fit sets `overflow` (RXE_RPC_OVERFLOW_*); rxe_rpc_handle then
 * replaces it by an ERROR frame, which always fits in
 * RXE_RPC_MIN_REPLY_BYTES.
 *
 * A streamed reply (GENERATE's TOKEN frames) is several frames: after each
 * complete frame the core calls `send` (when not NULL), which writes
 * data[0, size) to the stream and returns 1, or returns 0 when the stream
 * is broken (the request then stops); the core then empties the buffer.
 * Without `send` the frames stay in the buffer, one after another, before
 * the final OK or ERROR frame, which begins at `start`. */
typedef struct rxe_rpc_buffer {
  uint8_t* data;
  uint64_t size;
  uint64_t capacity;
  int overflow;
  int (*grow)(struct rxe_rpc_buffer* buffer, uint64_t min_capacity);
  void* ctx; /* the I/O layer's, for grow and send */
  int (*send)(struct rxe_rpc_buffer* buffer);
  uint64_t start; /* where the frame being written begins (set by the core) */
} rxe_rpc_buffer_t;

/* The outputs of one run: tensors, their dims and the memory behind them. */
typedef struct {
  rxe_tensor_t tensors[RXE_RPC_MAX_TENSORS];
  int64_t dims[RXE_RPC_MAX_TENSORS * RXE_MAX_NDIM];
  void* data[RXE_RPC_MAX_TENSORS];
} rxe_rpc_outputs_t;

/* A server's state. Requests change it only when they succeed: a request
 * answered by an ERROR frame leaves every field a client can observe (the
 * selected function, the inputs, the outputs of the last successful run) as
 * it was. A run writes into output_sets[1 - current] and becomes current
 * only when it and its reply succeed. */
typedef struct {
  const rxe_module_t* module;
  const rxe_function_t* function;
  rxe_rpc_platform_t platform;
  rxe_tensor_t inputs[RXE_RPC_MAX_TENSORS];
  int64_t input_dims[RXE_RPC_MAX_TENSORS][RXE_MAX_NDIM];
  void* input_data[RXE_RPC_MAX_TENSORS];
  rxe_rpc_outputs_t output_sets[2];
  int current;     /* output_sets[current] holds the last successful run's outputs */
  int has_outputs; /* there was a successful run since the last SELECT */
  void* workspace; /* scratch of the last run (not state: no request reads it) */
  uint64_t workspace_bytes;
  int stop;        /* SHUTDOWN was handled */
} rxe_rpc_server_t;

void rxe_rpc_server_init(rxe_rpc_server_t* server, const rxe_module_t* module, rxe_rpc_platform_t platform);
void rxe_rpc_server_free(rxe_rpc_server_t* server);

/* The outputs of the last successful run (valid while has_outputs). */
const rxe_tensor_t* rxe_rpc_server_outputs(const rxe_rpc_server_t* server);

/* Parse the header of a frame: its type and payload length. Returns
 * RXE_OK, or RXE_ERR_PROTOCOL for a bad magic, flags or a length over the
 * limit. */
rxe_status_t rxe_rpc_parse_header(const uint8_t* header, uint8_t* out_type, uint32_t* out_length,
                                  rxe_error_t* err);

/* Handle one request (type and payload) and write the whole reply frame
 * (header included) into `reply`. Never reads outside the payload, and runs
 * the model at most as often as the request asks, whatever the reply's
 * size. `reply` needs at least RXE_RPC_MIN_REPLY_BYTES of capacity. */
void rxe_rpc_handle(rxe_rpc_server_t* server, uint8_t type, const uint8_t* payload, uint32_t length,
                    rxe_rpc_buffer_t* reply);

/* Write an ERROR frame (status and message) into `reply`: what an I/O layer
 * answers to a frame it could not read. */
void rxe_rpc_reply_error(rxe_rpc_buffer_t* reply, rxe_status_t status, const char* message);

#ifdef __cplusplus
}
#endif
#endif /* RELAX_EDGE_RPC_H_ */
