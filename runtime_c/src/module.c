/* Module lookup and the workspace arena. */
#include "relax_edge/runtime.h"

static int same_name(const char* a, const char* b) {
  while (*a && *a == *b) {
    ++a;
    ++b;
  }
  return *a == *b;
}

const rxe_function_t* rxe_module_find(const rxe_module_t* module, const char* name) {
  int32_t i;
  if (module == NULL || name == NULL) return NULL;
  for (i = 0; i < module->num_functions; ++i) {
    if (same_name(module->functions[i].name, name)) return &module->functions[i];
  }
  return NULL;
}

rxe_status_t rxe_module_check(const rxe_module_t* module, rxe_error_t* err) {
  if (module == NULL) return rxe_error_set(err, RXE_ERR_NULL, "no module");
  if (module->abi_version != RXE_ABI_VERSION) {
    return rxe_error_set(err, RXE_ERR_ABI, "module %s was built for ABI %d, this runtime is ABI %d",
                         module->name, (int64_t)module->abi_version, (int64_t)RXE_ABI_VERSION);
  }
  return RXE_OK;
}

rxe_status_t rxe_arena_init(rxe_arena_t* arena, void* memory, uint64_t size, rxe_error_t* err) {
  if (arena == NULL || (memory == NULL && size > 0)) return rxe_error_set(err, RXE_ERR_NULL, "arena: no memory");
  if (((uintptr_t)memory % RXE_WORKSPACE_ALIGNMENT) != 0) {
    return rxe_error_set(err, RXE_ERR_WORKSPACE, "arena: memory is not aligned to %d bytes",
                         (int64_t)RXE_WORKSPACE_ALIGNMENT);
  }
  arena->base = (uint8_t*)memory;
  arena->size = size;
  arena->used = 0;
  return RXE_OK;
}

rxe_status_t rxe_arena_alloc(rxe_arena_t* arena, uint64_t bytes, void** out_ptr, rxe_error_t* err) {
  uint64_t start = (arena->used + RXE_WORKSPACE_ALIGNMENT - 1) & ~(uint64_t)(RXE_WORKSPACE_ALIGNMENT - 1);
  if (start > arena->size || bytes > arena->size - start) {
    return rxe_error_set(err, RXE_ERR_WORKSPACE, "arena: %d bytes requested, %d of %d free", (int64_t)bytes,
                         (int64_t)(arena->size > start ? arena->size - start : 0), (int64_t)arena->size);
  }
  *out_ptr = arena->base + start;
  arena->used = start + bytes;
  return RXE_OK;
}

void rxe_arena_reset(rxe_arena_t* arena) { arena->used = 0; }

void rxe_mem_copy(void* dst, const void* src, uint64_t bytes) {
  uint8_t* d = (uint8_t*)dst;
  const uint8_t* s = (const uint8_t*)src;
  uint64_t i;
  if (d == s) return;
  for (i = 0; i < bytes; ++i) d[i] = s[i];
}
