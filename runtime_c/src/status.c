/* Status names and message formatting (freestanding). */
#include "relax_edge/runtime.h"

const char* rxe_status_name(rxe_status_t status) {
  switch (status) {
    case RXE_OK: return "RXE_OK";
    case RXE_ERR_ARGUMENT_COUNT: return "RXE_ERR_ARGUMENT_COUNT";
    case RXE_ERR_DTYPE: return "RXE_ERR_DTYPE";
    case RXE_ERR_RANK: return "RXE_ERR_RANK";
    case RXE_ERR_SHAPE: return "RXE_ERR_SHAPE";
    case RXE_ERR_BOUND: return "RXE_ERR_BOUND";
    case RXE_ERR_WORKSPACE: return "RXE_ERR_WORKSPACE";
    case RXE_ERR_NULL: return "RXE_ERR_NULL";
    case RXE_ERR_NOT_FOUND: return "RXE_ERR_NOT_FOUND";
    case RXE_ERR_ABI: return "RXE_ERR_ABI";
    case RXE_ERR_INTERNAL: return "RXE_ERR_INTERNAL";
    case RXE_ERR_INDEX: return "RXE_ERR_INDEX";
    case RXE_ERR_PROTOCOL: return "RXE_ERR_PROTOCOL";
    case RXE_ERR_NO_MEMORY: return "RXE_ERR_NO_MEMORY";
    case RXE_ERR_DEVICE: return "RXE_ERR_DEVICE";
    case RXE_ERR_TIMEOUT: return "RXE_ERR_TIMEOUT";
    case RXE_ERR_NO_VULKAN: return "RXE_ERR_NO_VULKAN";
  }
  return "RXE_ERR_UNKNOWN";
}

typedef struct {
  char* out;
  size_t len;
  size_t cap;
} writer_t;

static void put_char(writer_t* w, char c) {
  if (w->len + 1 < w->cap) w->out[w->len++] = c;
}

static void put_str(writer_t* w, const char* s) {
  if (s == NULL) s = "(null)";
  while (*s) put_char(w, *s++);
}

static void put_int(writer_t* w, int64_t v) {
  char digits[24];
  int n = 0;
  uint64_t u = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
  if (v < 0) put_char(w, '-');
  do {
    digits[n++] = (char)('0' + (u % 10u));
    u /= 10u;
  } while (u != 0u && n < 24);
  while (n > 0) put_char(w, digits[--n]);
}

rxe_status_t rxe_error_set(rxe_error_t* err, rxe_status_t status, const char* fmt, ...) {
  va_list args;
  writer_t w;
  if (err == NULL) return status;
  err->status = status;
  w.out = err->message;
  w.len = 0;
  w.cap = sizeof(err->message);
  va_start(args, fmt);
  for (; fmt != NULL && *fmt; ++fmt) {
    if (*fmt != '%') {
      put_char(&w, *fmt);
      continue;
    }
    ++fmt;
    if (*fmt == 's') {
      put_str(&w, va_arg(args, const char*));
    } else if (*fmt == 'd') {
      put_int(&w, va_arg(args, int64_t));
    } else if (*fmt == '%') {
      put_char(&w, '%');
    } else {
      break;
    }
  }
  va_end(args);
  w.out[w.len] = '\0';
  return status;
}
