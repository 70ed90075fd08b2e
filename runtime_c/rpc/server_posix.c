/*
 * The RPC server's POSIX I/O layer: frames over stdin/stdout (the default;
 * what an emulator or an SSH exec channel carries) or over a TCP socket bound
 * to 127.0.0.1 (--tcp PORT). Link with a compiled model, the runtime and
 * rpc/protocol.c, with -DRXE_MODULE=<prefix>_module (or tools/linked_module.c
 * compiled with it: relax_edge/linked_module.h).
 *
 *   server [--threads N] [--tcp PORT]
 *
 * --threads N (1..RXE_MAX_THREADS; else RXE_NUM_THREADS from the
 * environment; else 1) sizes the runtime's thread pool. Each request is
 * handled once, into a reply buffer that grows as the reply is written
 * (-DRXE_RPC_REPLY_BYTES sets its size between requests); GENERATE's TOKEN
 * frames are written as they come.
 */
#define _POSIX_C_SOURCE 200809L
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "relax_edge/linked_module.h"
#include "relax_edge/rpc.h"
#include "relax_edge/runtime.h"
#include "relax_edge/threads.h"

/* The reply buffer's size between requests; it grows for a larger reply. */
#ifndef RXE_RPC_REPLY_BYTES
#define RXE_RPC_REPLY_BYTES (1u << 20)
#endif
#if RXE_RPC_REPLY_BYTES < RXE_RPC_MIN_REPLY_BYTES
#error "RXE_RPC_REPLY_BYTES must hold an error frame (RXE_RPC_MIN_REPLY_BYTES)"
#endif

uint64_t rxe_profile_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void* platform_alloc(void* ctx, uint64_t bytes, uint64_t alignment) {
  void* p = NULL;
  (void)ctx;
  if (alignment < sizeof(void*)) alignment = sizeof(void*);
  return posix_memalign(&p, (size_t)alignment, (size_t)bytes) == 0 ? p : NULL;
}

static void platform_release(void* ctx, void* p) {
  (void)ctx;
  free(p);
}

static uint64_t platform_clock(void* ctx) {
  (void)ctx;
  return rxe_profile_now_ns();
}

static int read_full(int fd, uint8_t* dst, uint64_t n) {
  while (n > 0) {
    ssize_t got = read(fd, dst, n > (1u << 30) ? (1u << 30) : (size_t)n);
    if (got <= 0) return 0;
    dst += got;
    n -= (uint64_t)got;
  }
  return 1;
}

static int write_full(int fd, const uint8_t* src, uint64_t n) {
  while (n > 0) {
    ssize_t put = write(fd, src, n > (1u << 30) ? (1u << 30) : (size_t)n);
    if (put <= 0) return 0;
    src += put;
    n -= (uint64_t)put;
  }
  return 1;
}

/* rxe_rpc_buffer_t.grow: realloc, keeping what was written. */
static int reply_grow(rxe_rpc_buffer_t* b, uint64_t min_capacity) {
  uint8_t* bigger;
  if (min_capacity > (uint64_t)SIZE_MAX) return 0;
  bigger = (uint8_t*)realloc(b->data, (size_t)min_capacity);
  if (bigger == NULL) return 0;
  b->data = bigger;
  b->capacity = min_capacity;
  return 1;
}

/* rxe_rpc_buffer_t.send: a streamed frame (GENERATE's tokens) out at once;
 * ctx is the output descriptor. */
static int reply_send(rxe_rpc_buffer_t* b) { return write_full(*(const int*)b->ctx, b->data, b->size); }

/* Read and drop n bytes (a payload there is no memory for). */
static int skip_full(int fd, uint64_t n) {
  uint8_t sink[4096];
  while (n > 0) {
    uint64_t step = n < sizeof(sink) ? n : sizeof(sink);
    if (!read_full(fd, sink, step)) return 0;
    n -= step;
  }
  return 1;
}

static int serve(int in_fd, int out_fd) {
  rxe_rpc_platform_t platform = {platform_alloc, platform_release, platform_clock, NULL};
  rxe_rpc_server_t* server = (rxe_rpc_server_t*)malloc(sizeof(rxe_rpc_server_t));
  rxe_rpc_buffer_t reply = {NULL, 0, RXE_RPC_REPLY_BYTES, 0, reply_grow, NULL, reply_send, 0};
  uint8_t header[RXE_RPC_HEADER_BYTES];
  int rc = 0;
  reply.data = (uint8_t*)malloc(reply.capacity);
  reply.ctx = &out_fd;
  if (server == NULL || reply.data == NULL) {
    fprintf(stderr, "relax_edge rpc: out of memory for the server\n");
    free(server);
    free(reply.data);
    return 1;
  }
  rxe_rpc_server_init(server, RXE_LINKED_MODULE, platform);
  while (!server->stop && read_full(in_fd, header, sizeof(header))) {
    uint8_t type;
    uint32_t length;
    uint8_t* payload;
    rxe_error_t err;
    if (rxe_rpc_parse_header(header, &type, &length, &err) != RXE_OK) {
      /* the stream cannot be trusted past a bad header: answer and stop */
      rxe_rpc_reply_error(&reply, err.status, err.message);
      write_full(out_fd, reply.data, reply.size);
      fprintf(stderr, "relax_edge rpc: %s\n", err.message);
      rc = 2;
      break;
    }
    payload = (uint8_t*)malloc(length > 0 ? length : 1);
    if (payload == NULL) {
      /* keep the stream in step: drop the payload, answer, go on */
      if (!skip_full(in_fd, length)) {
        rc = 2;
        break;
      }
      rxe_error_set(&err, RXE_ERR_NO_MEMORY, "out of memory for a frame of %d bytes", (int64_t)length);
      rxe_rpc_reply_error(&reply, err.status, err.message);
    } else if (!read_full(in_fd, payload, length)) {
      free(payload);
      rc = 2;
      break;
    } else {
      rxe_rpc_handle(server, type, payload, length, &reply); /* once: the reply grows as it is written */
      free(payload);
    }
    if (reply.overflow || !write_full(out_fd, reply.data, reply.size)) {
      rc = 2;
      break;
    }
    if (reply.capacity > RXE_RPC_REPLY_BYTES) { /* give a large reply's memory back */
      uint8_t* smaller = (uint8_t*)realloc(reply.data, RXE_RPC_REPLY_BYTES);
      if (smaller != NULL) {
        reply.data = smaller;
        reply.capacity = RXE_RPC_REPLY_BYTES;
      }
    }
  }
  rxe_rpc_server_free(server);
  free(server);
  free(reply.data);
  return rc;
}

static int serve_tcp(int port) {
  struct sockaddr_in addr;
  int fd = socket(AF_INET, SOCK_STREAM, 0), client, one = 1, rc;
  if (fd < 0) return 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  memset(&addr, 0, sizeof(addr));
  addr.sin_family = AF_INET;
  addr.sin_port = htons((unsigned short)port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK); /* loopback only */
  if (bind(fd, (struct sockaddr*)&addr, sizeof(addr)) != 0 || listen(fd, 1) != 0) {
    perror("relax_edge rpc: bind 127.0.0.1");
    close(fd);
    return 1;
  }
  fprintf(stderr, "relax_edge rpc: listening on 127.0.0.1:%d\n", port);
  client = accept(fd, NULL, NULL);
  close(fd);
  if (client < 0) return 1;
  rc = serve(client, client);
  close(client);
  return rc;
}

/* The thread count from --threads or RXE_NUM_THREADS (`what`); 0 if bad. */
static int set_threads(const char* text, const char* what) {
  char* end;
  long n = strtol(text, &end, 10);
  if (end == text || *end != '\0' || n < 1 || n > RXE_MAX_THREADS) {
    fprintf(stderr, "relax_edge rpc: %s must be an integer in [1, %d], got '%s'\n", what, RXE_MAX_THREADS, text);
    return 0;
  }
  rxe_threads_set_count((int)n);
  if (rxe_threads_get_count() < n)
    fprintf(stderr, "relax_edge rpc: note: %s %ld ignored: the runtime is built without threads\n", what, n);
  return 1;
}

int main(int argc, char** argv) {
  const char* threads = getenv("RXE_NUM_THREADS");
  const char* threads_from = "RXE_NUM_THREADS";
  int argi, port = -1;
  for (argi = 1; argi < argc; argi += 2) {
    if (argi + 1 < argc && strcmp(argv[argi], "--tcp") == 0) {
      port = atoi(argv[argi + 1]);
    } else if (argi + 1 < argc && strcmp(argv[argi], "--threads") == 0) {
      threads = argv[argi + 1];
      threads_from = "--threads";
    } else {
      fprintf(stderr, "usage: %s [--threads N] [--tcp PORT]   (frames on stdin/stdout by default)\n", argv[0]);
      return 2;
    }
  }
  if (threads != NULL && *threads != '\0' && !set_threads(threads, threads_from)) return 2;
  return port >= 0 ? serve_tcp(port) : serve(0, 1);
}
