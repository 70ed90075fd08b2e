/*
 * relax_edge RPC: a framed binary protocol between a host and a compiled
 * model on a device, carried by any byte stream (stdin/stdout of a process
 * under an emulator or an SSH exec channel, or a loopback TCP socket).
 *
 * Frame: magic "RX" (2 bytes), type (u8), flags (u8, 0), payload length
 * (u32), payload. Integers are little-endian; strings are u32 length +
 * bytes; tensors are u8 dtype code, u8 bits, u16 ndim, i64 dims[ndim], data.
 * Every reply is OK (type | 0x80) with a payload, or ERROR (0xFF) with
 * u32 status and a message. The parser never trusts a length: each read is
 * bounds-checked against the frame, and frames above RXE_RPC_MAX_PAYLOAD
 * are refused before they are read.
 *
 * Requests:
 *   HELLO      u32 client version   -> u32 protocol version, u32 ABI version, str module name
 *   LIST                            -> u32 count, per function: str name, u32 inputs, u32 outputs,
 *                                      per argument: str name, u8 code, u8 bits, u32 ndim, str shape;
 *                                      u32 sizes, str size names
 *   SELECT     str function         -> (selects the function for the next requests)
 *   SET_INPUT  u32 index, tensor    -> ()
 *   RUN                             -> u64 run nanoseconds
 *   GET_OUTPUT u32 index            -> tensor
 *   TIME       u32 warmup, u32 repeat, u32 min_repeat_ms
 *                                   -> u32 n, u64 nanoseconds[n] (one per repeat)
 *   PROFILE                         -> u64 run ns, u32 n, per kernel: str kernel, str span, u64 calls, u64 ns
 *   WORKSPACE  i64 sizes[num_sizes] -> u64 bytes
 *   SHUTDOWN                        -> () and the server stops
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

#define RXE_RPC_VERSION 1u
#define RXE_RPC_HEADER_BYTES 8u
#ifndef RXE_RPC_MAX_PAYLOAD
#define RXE_RPC_MAX_PAYLOAD (256u * 1024u * 1024u)
#endif
#ifndef RXE_RPC_MAX_TENSORS
#define RXE_RPC_MAX_TENSORS 16
#endif

enum {
  RXE_RPC_HELLO = 1, RXE_RPC_LIST = 2, RXE_RPC_SELECT = 3, RXE_RPC_SET_INPUT = 4, RXE_RPC_RUN = 5,
  RXE_RPC_GET_OUTPUT = 6, RXE_RPC_TIME = 7, RXE_RPC_PROFILE = 8, RXE_RPC_WORKSPACE = 9,
  RXE_RPC_SHUTDOWN = 10, RXE_RPC_OK = 0x80, RXE_RPC_ERROR = 0xFF
};

/* What the I/O layer provides. */
typedef struct {
  void* (*alloc)(void* ctx, uint64_t bytes, uint64_t alignment); /* NULL when out of memory */
  void (*release)(void* ctx, void* ptr);
  uint64_t (*clock_ns)(void* ctx);                                 /* monotonic */
  void* ctx;
} rxe_rpc_platform_t;

/* A reply being written: the core fills `data` up to `capacity`. */
typedef struct {
  uint8_t* data;
  uint64_t size;
  uint64_t capacity;
  int overflow;
} rxe_rpc_buffer_t;

typedef struct {
  const rxe_module_t* module;
  const rxe_function_t* function;
  rxe_rpc_platform_t platform;
  rxe_tensor_t inputs[RXE_RPC_MAX_TENSORS];
  int64_t input_dims[RXE_RPC_MAX_TENSORS][RXE_MAX_NDIM];
  void* input_data[RXE_RPC_MAX_TENSORS];
  rxe_tensor_t outputs[RXE_RPC_MAX_TENSORS];
  int64_t output_dims[RXE_RPC_MAX_TENSORS * RXE_MAX_NDIM];
  void* output_data[RXE_RPC_MAX_TENSORS];
  void* workspace;
  uint64_t workspace_bytes;
  int has_outputs;
  int stop;
} rxe_rpc_server_t;

void rxe_rpc_server_init(rxe_rpc_server_t* server, const rxe_module_t* module, rxe_rpc_platform_t platform);
void rxe_rpc_server_free(rxe_rpc_server_t* server);

/* Parse the header of a frame: its type and payload length. Returns
 * RXE_OK, or an error for a bad magic, flags or a length over the limit. */
rxe_status_t rxe_rpc_parse_header(const uint8_t* header, uint8_t* out_type, uint32_t* out_length,
                                  rxe_error_t* err);

/* Handle one request (type and payload) and write the whole reply frame
 * (header included) into `reply`. Never reads outside the payload. */
void rxe_rpc_handle(rxe_rpc_server_t* server, uint8_t type, const uint8_t* payload, uint32_t length,
                    rxe_rpc_buffer_t* reply);

#ifdef __cplusplus
}
#endif
#endif /* RELAX_EDGE_RPC_H_ */
