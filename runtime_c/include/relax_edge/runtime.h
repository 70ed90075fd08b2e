/*
 * relax_edge C runtime: status and messages, input checking used by
 * generated host functions, a bump arena over caller memory, and module
 * lookup. Freestanding C99: only stdint.h, stddef.h and stdarg.h.
 *
 * Conventions: every fallible call returns rxe_status_t; output parameters
 * start with out_; the runtime never allocates and never exits.
 */
#ifndef RELAX_EDGE_RUNTIME_H_
#define RELAX_EDGE_RUNTIME_H_

#include <stdarg.h>

#include "relax_edge/abi.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The first byte of a tensor's data. */
#define RXE_DATA(t) ((uint8_t*)(t).data + (t).byte_offset)
/* Round a byte count up to the workspace alignment. */
#define RXE_ALIGN_UP(n) (((n) + (RXE_WORKSPACE_ALIGNMENT - 1)) & ~(uint64_t)(RXE_WORKSPACE_ALIGNMENT - 1))

/* The monotonic clock that models built with RXE_PROFILE read around each
 * kernel; the platform layer provides it (rpc/server_posix.c on POSIX). */
uint64_t rxe_profile_now_ns(void);

/* Copy bytes (no libc). */
void rxe_mem_copy(void* dst, const void* src, uint64_t bytes);

/* A short name for a status ("RXE_ERR_SHAPE"). */
const char* rxe_status_name(rxe_status_t status);

/* Record status and a message in err (may be NULL) and return status.
 * fmt understands %s (const char*), %d (int64_t) and %%. */
rxe_status_t rxe_error_set(rxe_error_t* err, rxe_status_t status, const char* fmt, ...);

/* Check a tensor's dtype and rank; `what` names it ("input x"). */
rxe_status_t rxe_tensor_check(const rxe_tensor_t* t, const char* what, uint8_t code, uint8_t bits,
                              int32_t ndim, rxe_error_t* err);

/* Bind a size variable from a dimension, checking its bounds (upper < 0:
 * unbounded). `what` names the dimension ("input x dimension 0"). */
rxe_status_t rxe_dim_bind(int64_t value, const char* what, const char* var, int64_t lower,
                          int64_t upper, int64_t* out_var, rxe_error_t* err);

/* Check that a dimension equals its expected value; `expr` is how the
 * signature writes it ("n" or "n * 4"). */
rxe_status_t rxe_dim_check(int64_t value, int64_t expected, const char* what, const char* expr,
                           rxe_error_t* err);

/* Check a run-time broadcast: a and b must be equal or one of them 1. */
rxe_status_t rxe_dim_check_broadcast(int64_t a, int64_t b, const char* what, rxe_error_t* err);

/* Find a function by name; NULL if absent. */
const rxe_function_t* rxe_module_find(const rxe_module_t* module, const char* name);

/* RXE_OK if the module was built against this runtime's ABI version. */
rxe_status_t rxe_module_check(const rxe_module_t* module, rxe_error_t* err);

/* A bump arena over caller-owned memory. */
typedef struct {
  uint8_t* base;
  uint64_t size;
  uint64_t used;
} rxe_arena_t;

rxe_status_t rxe_arena_init(rxe_arena_t* arena, void* memory, uint64_t size, rxe_error_t* err);
/* Reserve `bytes` aligned to RXE_WORKSPACE_ALIGNMENT. */
rxe_status_t rxe_arena_alloc(rxe_arena_t* arena, uint64_t bytes, void** out_ptr, rxe_error_t* err);
void rxe_arena_reset(rxe_arena_t* arena);

#ifdef __cplusplus
}
#endif
#endif /* RELAX_EDGE_RUNTIME_H_ */
