/*
 * relax_edge Vulkan runtime: an optional module (runtime_c/vulkan/) that runs
 * compute kernels compiled from tensor programs as SPIR-V.
 *
 * The core runtime stays dependency-free: this module needs libc and dlopen,
 * and loads libvulkan (libvulkan.so.1) at run time through
 * vkGetInstanceProcAddr, never linking it. Without the library rxe_vk_open
 * returns RXE_ERR_NO_VULKAN.
 *
 * The shader ABI every kernel follows (what the runtime binds):
 *   - GLSL 450 compute, `layout(local_size_x_id = 0) in;`: specialization
 *     constant 0 is the record's local_size_x; y = z = 1;
 *   - descriptor set 0, binding i = the i-th buffer (std430 storage buffers);
 *   - push constants (all 32-bit, std430, in this order):
 *       uint groups_x;  workgroups per row of the folded grid
 *       uint items;     invocations the dispatch needs
 *       uint off[NB];   element offset of buffer i inside its binding: each
 *                       view is bound at its byte offset aligned down to
 *                       minStorageBufferOffsetAlignment and the remainder is
 *                       passed here, in 32-bit elements
 *       int  size[NS];  the program's size parameters
 *     2 + NB + NS words; past 32 words (128 bytes) the same block is a
 *     readonly storage buffer at binding NB, filled by the runtime;
 *   - invocation index
 *       gid = (wg.y + wg.z * num_wg.y) * groups_x * local_size_x
 *             + wg.x * local_size_x + local_id.x,
 *     with `if (gid >= items) return;` first (kernels with barriers guard
 *     their body instead). The runtime folds ceil(items / local_size_x)
 *     workgroups into x (at most 65535 and the device's count), then y, then z.
 *
 * A run: rxe_vk_begin, one rxe_vk_dispatch per kernel call (each followed by
 * a compute-to-compute barrier), rxe_vk_submit (submits, in pieces of at most
 * max_dispatches_per_submit dispatches, and waits on a fence with a timeout),
 * then rxe_vk_times for per-dispatch GPU times. Pipelines are created once,
 * in rxe_vk_load; nothing on the run path creates one
 * (rxe_vk_pipelines_created counts them). A context is not thread-safe.
 *
 * Pipeline cache file (optional): options.pipeline_cache, or when that is
 * NULL $RXE_VK_PIPELINE_CACHE, names a file that rxe_vk_load seeds a
 * VkPipelineCache from and saves it to after creating the pipelines (so a
 * driver that compiles shaders at pipeline creation does it once per
 * device and driver). The file (runtime_c/vulkan/cache.c) is a checksummed
 * frame around the driver's data; a file that is short, corrupt, truncated
 * or made by another device or driver build is never given to the driver:
 * it is ignored with a line on stderr and replaced. The file is written to
 * a temporary name and renamed. rxe_vk_cache_state and rxe_vk_cache_text
 * say what happened at load; a cache that cannot be read or written never
 * fails the load.
 */
#ifndef RELAX_EDGE_VULKAN_H_
#define RELAX_EDGE_VULKAN_H_

#include "relax_edge/abi.h"

#ifdef __cplusplus
extern "C" {
#endif

/* rxe_vk_kernel_t.flags: the kernel needs shaderFloat16 and 16-bit storage; shaderFloat64. */
#define RXE_VK_KERNEL_FP16 1u
#define RXE_VK_KERNEL_FP64 2u
/* Push-constant words past which the block becomes a storage buffer. */
#define RXE_VK_MAX_PUSH_WORDS 32u
/* Dispatches per submit unless the options say otherwise. */
#define RXE_VK_DISPATCHES_PER_SUBMIT 1024u
/* rxe_vk_cache_state: what became of the pipeline cache file at load. */
#define RXE_VK_CACHE_NONE 0     /* no file named */
#define RXE_VK_CACHE_CREATED 1  /* no file yet: the pipelines were compiled, the file written */
#define RXE_VK_CACHE_USED 2     /* the file's data seeded the driver's pipeline cache */
#define RXE_VK_CACHE_REJECTED 3 /* the file was not usable (the text says why): ignored and replaced */

/* One compute kernel, as the code generator emits it. */
typedef struct {
  const char* name;          /* the kernel's symbol, for errors and profiles */
  const uint32_t* spirv;     /* SPIR-V words */
  uint32_t spirv_words;
  uint32_t num_buffers;      /* NB: storage-buffer bindings 0..NB-1 */
  uint32_t push_words;       /* 2 + NB + NS */
  uint32_t local_size_x;     /* specialization constant 0 */
  uint32_t shared_bytes;     /* workgroup shared memory the shader declares */
  uint32_t flags;            /* RXE_VK_KERNEL_FP16, RXE_VK_KERNEL_FP64 */
} rxe_vk_kernel_t;

/* A module's requirements: the max over its kernels (subgroup_size 0: none assumed). */
typedef struct {
  uint32_t push_constant_bytes, storage_buffers, workgroup_size_x, shared_bytes, flags, subgroup_size;
} rxe_vk_requirements_t;

/* The device limits the requirements are checked against. As an override
 * (options.limits) each nonzero field lowers the device's value to it,
 * subgroup_size replaces it, and the bits set in flags remove those
 * features: how tests simulate a device that lacks something. */
typedef struct {
  uint32_t push_constant_bytes;   /* maxPushConstantsSize */
  uint32_t storage_buffers;       /* maxPerStageDescriptorStorageBuffers */
  uint32_t workgroup_size_x;      /* maxComputeWorkGroupSize[0] */
  uint32_t workgroup_invocations; /* maxComputeWorkGroupInvocations */
  uint32_t shared_bytes;          /* maxComputeSharedMemorySize */
  uint32_t flags;                 /* RXE_VK_KERNEL_FP16 when shaderFloat16 and storageBuffer16BitAccess,
                                     RXE_VK_KERNEL_FP64 when shaderFloat64 */
  uint32_t subgroup_size;         /* the device's subgroup size */
  uint32_t group_count_x;         /* workgroups in x per dispatch: min(65535, maxComputeWorkGroupCount[0]) */
  uint64_t storage_buffer_range;  /* maxStorageBufferRange */
} rxe_vk_limits_t;

typedef struct {
  int32_t allow_cpu;       /* accept a CPU device (lavapipe) */
  int32_t device_index;    /* -1: a discrete GPU, then an integrated one, then (allow_cpu) a CPU device */
  int32_t validation;      /* enable VK_LAYER_KHRONOS_validation when installed and count its messages */
  int32_t force_staging;   /* keep buffers device-local only, copying through staging buffers */
  const rxe_vk_limits_t* limits;   /* optional override (above); NULL: the device's */
  const char* library;     /* NULL: $RXE_VULKAN_LIBRARY, else "libvulkan.so.1" ("libvulkan.so" on Android) */
  uint32_t max_dispatches_per_submit; /* 0: RXE_VK_DISPATCHES_PER_SUBMIT */
  const char* pipeline_cache; /* the pipeline cache file; NULL: $RXE_VK_PIPELINE_CACHE, else none ("" : none) */
} rxe_vk_options_t;

typedef struct rxe_vk rxe_vk_t;
typedef struct rxe_vk_buffer rxe_vk_buffer_t;

/* A range of a buffer bound to one binding. bytes 0: the rest of the
 * buffer, clamped to maxStorageBufferRange. */
typedef struct {
  rxe_vk_buffer_t* buffer;
  uint64_t offset;
  uint64_t bytes;
} rxe_vk_view_t;

/* Open a device (options may be NULL: defaults, no CPU device). */
rxe_status_t rxe_vk_open(const rxe_vk_options_t* options, rxe_vk_t** out, rxe_error_t* err);
/* Waits for the device, frees everything; NULL is accepted. */
void rxe_vk_close(rxe_vk_t* vk);
/* RXE_ERR_DEVICE naming the requirement, the value needed and the limit. */
rxe_status_t rxe_vk_check(rxe_vk_t* vk, const rxe_vk_requirements_t* req, rxe_error_t* err);
/* Check the kernels' requirements, then create one pipeline per kernel
 * (once per context; nothing is created when the check fails). The
 * records, their names and their SPIR-V need not outlive the call. */
rxe_status_t rxe_vk_load(rxe_vk_t* vk, const rxe_vk_kernel_t* kernels, uint32_t count, rxe_error_t* err);
rxe_status_t rxe_vk_buffer_new(rxe_vk_t* vk, uint64_t bytes, rxe_vk_buffer_t** out, rxe_error_t* err);
rxe_status_t rxe_vk_buffer_write(rxe_vk_t* vk, rxe_vk_buffer_t* b, uint64_t offset, const void* src,
                                 uint64_t bytes, rxe_error_t* err);
rxe_status_t rxe_vk_buffer_read(rxe_vk_t* vk, rxe_vk_buffer_t* b, uint64_t offset, void* dst, uint64_t bytes,
                                rxe_error_t* err);
void rxe_vk_buffer_free(rxe_vk_t* vk, rxe_vk_buffer_t* b);
/* 1 when the buffer is host-visible memory the runtime maps, 0 when it is copied through staging. */
int32_t rxe_vk_buffer_mapped(const rxe_vk_buffer_t* b);
/* Start recording a run. */
rxe_status_t rxe_vk_begin(rxe_vk_t* vk, rxe_error_t* err);
/* Record kernel `kernel` over `items` invocations: views holds NB views,
 * sizes NS values (may be NULL when NS is 0). A barrier follows. */
rxe_status_t rxe_vk_dispatch(rxe_vk_t* vk, uint32_t kernel, const rxe_vk_view_t* views, const int32_t* sizes,
                             uint64_t items, rxe_error_t* err);
/* Submit the run and wait; RXE_ERR_TIMEOUT when the fence is not signalled
 * within timeout_ns. The work then still runs: rxe_vk_wait before reusing
 * the context's buffers (rxe_vk_close waits by itself). */
rxe_status_t rxe_vk_submit(rxe_vk_t* vk, uint64_t timeout_ns, rxe_error_t* err);
/* Wait for a run left executing by a timeout (RXE_OK when none is). */
rxe_status_t rxe_vk_wait(rxe_vk_t* vk, uint64_t timeout_ns, rxe_error_t* err);
/* Per-dispatch GPU times of the last submit, in ns; count must be at least
 * rxe_vk_dispatch_count(vk). */
rxe_status_t rxe_vk_times(rxe_vk_t* vk, uint64_t* ns, uint32_t count);
uint32_t rxe_vk_dispatch_count(const rxe_vk_t* vk);
uint64_t rxe_vk_pipelines_created(const rxe_vk_t* vk);
/* Validation messages (warnings and errors) since open, and the first one's text. */
uint64_t rxe_vk_validation_messages(const rxe_vk_t* vk);
const char* rxe_vk_validation_text(const rxe_vk_t* vk);
/* The device's name and the limits the checks use (after the override). */
const char* rxe_vk_device_name(const rxe_vk_t* vk);
/* RXE_VK_CACHE_* for the last rxe_vk_load, and a line saying what was read
 * and written (empty when no file is named). */
int32_t rxe_vk_cache_state(const rxe_vk_t* vk);
const char* rxe_vk_cache_text(const rxe_vk_t* vk);
void rxe_vk_limits_get(const rxe_vk_t* vk, rxe_vk_limits_t* out_limits);

#ifdef __cplusplus
}
#endif
#endif /* RELAX_EDGE_VULKAN_H_ */
