/*
 * Fuzz target for the RPC frame parser and request handlers.
 *
 * The input is a byte stream of frames, handled one after another by a
 * server over a small built-in module (one function copying its float32
 * input to its output, with a symbolic length). Built two ways:
 *   - with -fsanitize=fuzzer (clang, libFuzzer): LLVMFuzzerTestOneInput;
 *   - without: a main() that replays corpus files given as arguments
 *     (tests run it under AddressSanitizer and UndefinedBehaviorSanitizer).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "relax_edge/rpc.h"
#include "relax_edge/runtime.h"

static rxe_status_t copy_plan(const rxe_tensor_t* in, int64_t* out_shapes, uint64_t* ws, rxe_error_t* err) {
  rxe_status_t st = rxe_check_tensor(&in[0], "input x", RXE_DTYPE_FLOAT, 32, 1, err);
  if (st != RXE_OK) return st;
  st = rxe_check_dim(in[0].shape[0] > 4096 ? -1 : in[0].shape[0], in[0].shape[0], "input x dimension 0", NULL, err);
  if (st != RXE_OK) return st;
  out_shapes[0] = in[0].shape[0];
  *ws = 64;
  return RXE_OK;
}

static rxe_status_t copy_run(const rxe_tensor_t* in, rxe_tensor_t* out, void* ws, uint64_t ws_bytes, rxe_error_t* err) {
  int64_t shape[1];
  uint64_t bytes;
  rxe_status_t st = copy_plan(in, shape, &bytes, err);
  if (st != RXE_OK) return st;
  if (ws == NULL || ws_bytes < bytes) return rxe_error_set(err, RXE_ERR_WORKSPACE, "no workspace");
  rxe_copy_bytes(RXE_DATA(out[0]), RXE_DATA(in[0]), (uint64_t)shape[0] * 4u);
  return RXE_OK;
}

static rxe_status_t copy_workspace(const int64_t* sizes, uint64_t* out, rxe_error_t* err) {
  if (sizes[0] < 1) return rxe_error_set(err, RXE_ERR_BOUND, "n = %d is below its lower bound 1", sizes[0]);
  *out = 64;
  return RXE_OK;
}

static const rxe_arg_info_t args_in[] = {{"x", {2, 32, 1}, 1, "(n,)"}};
static const rxe_arg_info_t args_out[] = {{"y", {2, 32, 1}, 1, "(n,)"}};
static const char* const size_names[] = {"n", NULL};
static rxe_profile_entry_t profile[] = {{"k_copy", "copy", 0, 0}};
static const rxe_function_t functions[] = {{"main", 1, 1, args_in, args_out, copy_plan, copy_run, copy_workspace, 1,
                                            size_names, 0, 1, profile}};
static const rxe_module_t module = {RXE_ABI_VERSION, "fuzz", 1, functions};

uint64_t rxe_profile_clock_ns(void) { return 0; }

static void* fuzz_alloc(void* ctx, uint64_t bytes, uint64_t alignment) {
  (void)ctx;
  (void)alignment;
  return bytes > (64u << 20) ? NULL : malloc((size_t)bytes);
}
static void fuzz_release(void* ctx, void* p) {
  (void)ctx;
  free(p);
}
static uint64_t fuzz_clock(void* ctx) {
  static uint64_t t = 0;
  (void)ctx;
  return t += 1000;
}

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  rxe_rpc_platform_t platform = {fuzz_alloc, fuzz_release, fuzz_clock, NULL};
  static rxe_rpc_server_t server;
  static uint8_t reply_bytes[1 << 16];
  rxe_rpc_buffer_t reply = {reply_bytes, 0, sizeof(reply_bytes), 0};
  rxe_rpc_server_init(&server, &module, platform);
  while (size >= RXE_RPC_HEADER_BYTES && !server.stop) {
    uint8_t type;
    uint32_t length;
    rxe_error_t err;
    if (rxe_rpc_parse_header(data, &type, &length, &err) != RXE_OK) break;
    data += RXE_RPC_HEADER_BYTES;
    size -= RXE_RPC_HEADER_BYTES;
    if (length > size) length = (uint32_t)size;
    rxe_rpc_handle(&server, type, data, length, &reply);
    if (!reply.overflow && (reply.size < RXE_RPC_HEADER_BYTES || reply.data[0] != 'R')) abort();
    data += length;
    size -= length;
  }
  rxe_rpc_server_free(&server);
  return 0;
}

#ifndef RXE_LIBFUZZER
int main(int argc, char** argv) {
  int i, n = 0;
  for (i = 1; i < argc; ++i) {
    FILE* f = fopen(argv[i], "rb");
    uint8_t* buf;
    long len;
    if (f == NULL) return 2;
    fseek(f, 0, SEEK_END);
    len = ftell(f);
    fseek(f, 0, SEEK_SET);
    buf = (uint8_t*)malloc(len > 0 ? (size_t)len : 1);
    if (len > 0 && fread(buf, 1, (size_t)len, f) != (size_t)len) return 2;
    fclose(f);
    LLVMFuzzerTestOneInput(buf, (size_t)len);
    free(buf);
    ++n;
  }
  printf("RXE_CORPUS_OK %d frames files\n", n);
  return 0;
}
#endif
