/* The Vulkan module's private state: the function table loaded through
 * vkGetInstanceProcAddr, the context and the recorded run. */
#ifndef RELAX_EDGE_VK_INTERNAL_H_
#define RELAX_EDGE_VK_INTERNAL_H_

#define VK_NO_PROTOTYPES
#include <vulkan/vulkan.h>

#include "relax_edge/runtime.h"
#include "relax_edge/vulkan.h"

/* The pipeline cache line (rxe_vk_cache_text): long enough for two long paths. */
#define RXE_VK_CACHE_TEXT_BYTES 2048

#define RXE_VK_GLOBAL_FNS(X) \
  X(vkCreateInstance) X(vkEnumerateInstanceLayerProperties) X(vkEnumerateInstanceExtensionProperties)

#define RXE_VK_INSTANCE_FNS(X)                                                                     \
  X(vkDestroyInstance) X(vkEnumeratePhysicalDevices) X(vkGetPhysicalDeviceProperties)            \
  X(vkGetPhysicalDeviceProperties2) X(vkGetPhysicalDeviceFeatures2)                               \
  X(vkGetPhysicalDeviceQueueFamilyProperties) X(vkGetPhysicalDeviceMemoryProperties)               \
  X(vkEnumerateDeviceExtensionProperties) X(vkCreateDevice) X(vkGetDeviceProcAddr)

#define RXE_VK_DEVICE_FNS(X)                                                                       \
  X(vkDestroyDevice) X(vkGetDeviceQueue) X(vkDeviceWaitIdle) X(vkCreateBuffer) X(vkDestroyBuffer)  \
  X(vkGetBufferMemoryRequirements) X(vkAllocateMemory) X(vkFreeMemory) X(vkBindBufferMemory)       \
  X(vkMapMemory) X(vkUnmapMemory) X(vkCreateShaderModule) X(vkDestroyShaderModule)                 \
  X(vkCreateDescriptorSetLayout) X(vkDestroyDescriptorSetLayout) X(vkCreatePipelineLayout)         \
  X(vkDestroyPipelineLayout) X(vkCreateComputePipelines) X(vkDestroyPipeline)                      \
  X(vkCreateDescriptorPool) X(vkDestroyDescriptorPool) X(vkResetDescriptorPool)                    \
  X(vkAllocateDescriptorSets) X(vkUpdateDescriptorSets) X(vkCreateCommandPool)                     \
  X(vkDestroyCommandPool) X(vkAllocateCommandBuffers) X(vkFreeCommandBuffers)                      \
  X(vkResetCommandBuffer) X(vkBeginCommandBuffer) X(vkEndCommandBuffer) X(vkCmdBindPipeline)       \
  X(vkCmdBindDescriptorSets) X(vkCmdPushConstants) X(vkCmdDispatch) X(vkCmdPipelineBarrier)        \
  X(vkCmdCopyBuffer) X(vkCmdWriteTimestamp) X(vkCmdResetQueryPool) X(vkCreateQueryPool)            \
  X(vkDestroyQueryPool) X(vkGetQueryPoolResults) X(vkCreateFence) X(vkDestroyFence)                \
  X(vkResetFences) X(vkWaitForFences) X(vkGetFenceStatus) X(vkQueueSubmit)                        \
  X(vkCreatePipelineCache) X(vkDestroyPipelineCache) X(vkGetPipelineCacheData)

#define RXE_VK_DECLARE(name) PFN_##name name;
typedef struct {
  PFN_vkGetInstanceProcAddr vkGetInstanceProcAddr;
  RXE_VK_GLOBAL_FNS(RXE_VK_DECLARE)
  RXE_VK_INSTANCE_FNS(RXE_VK_DECLARE)
  RXE_VK_DEVICE_FNS(RXE_VK_DECLARE)
  PFN_vkCreateDebugUtilsMessengerEXT vkCreateDebugUtilsMessengerEXT;
  PFN_vkDestroyDebugUtilsMessengerEXT vkDestroyDebugUtilsMessengerEXT;
} rxe_vk_fns_t;
#undef RXE_VK_DECLARE

struct rxe_vk_buffer {
  VkBuffer buffer;
  VkDeviceMemory memory;
  uint64_t bytes;
  void* mapped; /* NULL: device-local only, copied through staging */
};

typedef struct {
  char name[64]; /* a copy: the record need not outlive rxe_vk_load */
  uint32_t num_buffers, push_words, local_size_x;
  int fallback; /* push block in a storage buffer at binding num_buffers */
  VkShaderModule module;
  VkDescriptorSetLayout set_layout;
  VkPipelineLayout layout;
  VkPipeline pipeline;
} rxe_vk_pipeline_t;

/* One recorded dispatch: the kernel, its grid, where its bindings and push words are. */
typedef struct {
  uint32_t kernel;
  uint32_t groups[3];
  uint32_t first_binding; /* into vk->bindings */
  uint32_t first_word;    /* into vk->words */
  uint32_t param_slot;    /* fallback kernels: the slot in the parameter buffer */
} rxe_vk_record_t;

typedef struct {
  VkBuffer buffer;
  uint64_t offset, range;
} rxe_vk_binding_t;

struct rxe_vk {
  void* library;
  rxe_vk_fns_t f;
  VkInstance instance;
  VkDebugUtilsMessengerEXT messenger;
  VkPhysicalDevice physical;
  VkDevice device;
  VkQueue queue;
  uint32_t queue_family;
  VkPhysicalDeviceProperties props;
  VkPhysicalDeviceMemoryProperties memory;
  rxe_vk_limits_t limits; /* after the override */
  uint32_t timestamp_bits;
  int32_t force_staging;
  uint32_t per_submit;
  uint64_t validation_messages;
  char validation_text[RXE_ERROR_MESSAGE_BYTES];

  VkCommandPool command_pool;
  VkCommandBuffer* commands; /* one per piece of a run; the last one for staging copies */
  uint32_t num_commands;
  VkFence fence;
  int pending;           /* a submit that timed out is still executing */
  uint64_t pending_timeout_ns;

  rxe_vk_pipeline_t* kernels;
  uint32_t num_kernels;
  int loaded;
  uint64_t pipelines_created;

  char* cache_path;       /* the pipeline cache file (NULL: none) */
  uint8_t* cache_data;    /* its driver data, once checked (cache.c) */
  size_t cache_bytes;
  int32_t cache_state;    /* RXE_VK_CACHE_* */
  int cache_written;
  char cache_text[RXE_VK_CACHE_TEXT_BYTES];

  int recording;
  rxe_vk_record_t* records;
  uint32_t num_records, cap_records;
  rxe_vk_binding_t* bindings;
  uint32_t num_bindings, cap_bindings;
  uint32_t* words;
  uint32_t num_words, cap_words;
  uint32_t num_param_slots;

  VkDescriptorPool descriptor_pool;
  uint32_t pool_sets, pool_descriptors;
  VkDescriptorSet* sets;
  VkQueryPool query_pool;
  uint32_t query_capacity;
  rxe_vk_buffer_t* params; /* the fallback push blocks of a run */
  uint64_t param_stride;
  uint64_t* times;
  uint32_t num_times;
};

/* Named status for a failed Vulkan call. */
rxe_status_t rxe_vk_fail(rxe_error_t* err, VkResult result, const char* call);
/* Grow a command-buffer array to at least `count`. */
rxe_status_t rxe_vk_commands_reserve(rxe_vk_t* vk, uint32_t count, rxe_error_t* err);
/* Submit one command buffer and wait on the fence for at most timeout_ns. */
rxe_status_t rxe_vk_submit_one(rxe_vk_t* vk, VkCommandBuffer cmd, uint64_t timeout_ns, const char* what,
                               rxe_error_t* err);
/* A buffer in host-visible (mapped) or device-local memory. */
rxe_status_t rxe_vk_buffer_create(rxe_vk_t* vk, uint64_t bytes, int host_visible, rxe_vk_buffer_t** out,
                                  rxe_error_t* err);
/* RXE_ERR_TIMEOUT if a timed-out run is still executing. */
rxe_status_t rxe_vk_idle_check(rxe_vk_t* vk, const char* what, rxe_error_t* err);
void rxe_vk_run_release(rxe_vk_t* vk);
/* The pipeline cache file read and checked (cache_data set when usable), and
 * the driver's cache written back to it after the pipelines exist. */
void rxe_vk_cache_read(rxe_vk_t* vk);
void rxe_vk_cache_write(rxe_vk_t* vk, VkPipelineCache cache);
/* The requirements against the limits; `what` names the module or the kernel. */
rxe_status_t rxe_vk_check_named(rxe_vk_t* vk, const rxe_vk_requirements_t* req, const char* what, rxe_error_t* err);

#endif /* RELAX_EDGE_VK_INTERNAL_H_ */
