/* Loading libvulkan, choosing a device, the requirements check. */
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

#include "vk_internal.h"

#define VALIDATION_LAYER "VK_LAYER_KHRONOS_validation"

/* The Vulkan loader's name: Android ships libvulkan.so, Linux distributions
 * libvulkan.so.1. RXE_VULKAN_LIBRARY in the environment names another one
 * when the options give none. */
#ifdef __ANDROID__
#define DEFAULT_LIBRARY "libvulkan.so"
#else
#define DEFAULT_LIBRARY "libvulkan.so.1"
#endif

static const char* library_name(const rxe_vk_options_t* o) {
  const char* env;
  if (o->library != NULL) return o->library;
  env = getenv("RXE_VULKAN_LIBRARY");
  return env != NULL && env[0] != '\0' ? env : DEFAULT_LIBRARY;
}

rxe_status_t rxe_vk_fail(rxe_error_t* err, VkResult result, const char* call) {
  if (result == VK_ERROR_OUT_OF_HOST_MEMORY || result == VK_ERROR_OUT_OF_DEVICE_MEMORY) {
    return rxe_error_set(err, RXE_ERR_NO_MEMORY, "%s: out of %s memory", call,
                         result == VK_ERROR_OUT_OF_HOST_MEMORY ? "host" : "device");
  }
  if (result == VK_ERROR_DEVICE_LOST) return rxe_error_set(err, RXE_ERR_DEVICE, "%s: the device was lost", call);
  return rxe_error_set(err, RXE_ERR_DEVICE, "%s failed with VkResult %d", call, (int64_t)result);
}

static VKAPI_ATTR VkBool32 VKAPI_CALL on_message(VkDebugUtilsMessageSeverityFlagBitsEXT severity,
                                                 VkDebugUtilsMessageTypeFlagsEXT type,
                                                 const VkDebugUtilsMessengerCallbackDataEXT* data, void* user) {
  rxe_vk_t* vk = (rxe_vk_t*)user;
  int counted = (type & (VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT))
                    ? severity >= VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT
                    : severity >= VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT;
  if (counted) {
    if (vk->validation_messages++ == 0 && data != NULL && data->pMessage != NULL) {
      strncpy(vk->validation_text, data->pMessage, sizeof(vk->validation_text) - 1);
    }
  }
  return VK_FALSE;
}

static rxe_status_t load_library(rxe_vk_t* vk, const char* name, rxe_error_t* err) {
  vk->library = dlopen(name, RTLD_NOW | RTLD_LOCAL);
  if (vk->library == NULL) {
    return rxe_error_set(err, RXE_ERR_NO_VULKAN, "cannot load the Vulkan loader %s (install libvulkan1; on Android the system's libvulkan.so)", name);
  }
  *(void**)&vk->f.vkGetInstanceProcAddr = dlsym(vk->library, "vkGetInstanceProcAddr");
  if (vk->f.vkGetInstanceProcAddr == NULL) {
    return rxe_error_set(err, RXE_ERR_NO_VULKAN, "%s has no vkGetInstanceProcAddr", name);
  }
#define LOAD_GLOBAL(fn)                                                                     \
  vk->f.fn = (PFN_##fn)vk->f.vkGetInstanceProcAddr(VK_NULL_HANDLE, #fn);                    \
  if (vk->f.fn == NULL) return rxe_error_set(err, RXE_ERR_NO_VULKAN, "%s lacks %s", name, #fn);
  RXE_VK_GLOBAL_FNS(LOAD_GLOBAL)
#undef LOAD_GLOBAL
  return RXE_OK;
}

static int layer_present(rxe_vk_t* vk, const char* layer) {
  uint32_t n = 0, i;
  VkLayerProperties* props;
  int found = 0;
  if (vk->f.vkEnumerateInstanceLayerProperties(&n, NULL) != VK_SUCCESS || n == 0) return 0;
  props = (VkLayerProperties*)calloc(n, sizeof(*props));
  if (props == NULL) return 0;
  if (vk->f.vkEnumerateInstanceLayerProperties(&n, props) == VK_SUCCESS) {
    for (i = 0; i < n; ++i) found |= strcmp(props[i].layerName, layer) == 0;
  }
  free(props);
  return found;
}

static int device_extension_present(rxe_vk_t* vk, VkPhysicalDevice dev, const char* ext) {
  uint32_t n = 0, i;
  VkExtensionProperties* props;
  int found = 0;
  if (vk->f.vkEnumerateDeviceExtensionProperties(dev, NULL, &n, NULL) != VK_SUCCESS || n == 0) return 0;
  props = (VkExtensionProperties*)calloc(n, sizeof(*props));
  if (props == NULL) return 0;
  if (vk->f.vkEnumerateDeviceExtensionProperties(dev, NULL, &n, props) == VK_SUCCESS) {
    for (i = 0; i < n; ++i) found |= strcmp(props[i].extensionName, ext) == 0;
  }
  free(props);
  return found;
}

static rxe_status_t create_instance(rxe_vk_t* vk, int validation, rxe_error_t* err) {
  VkApplicationInfo app;
  VkInstanceCreateInfo info;
  VkDebugUtilsMessengerCreateInfoEXT messenger;
  const char* layers[1] = {VALIDATION_LAYER};
  const char* extensions[1] = {VK_EXT_DEBUG_UTILS_EXTENSION_NAME};
  VkResult result;
  memset(&app, 0, sizeof(app));
  app.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO;
  app.pApplicationName = "relax_edge";
  app.pEngineName = "relax_edge";
  app.apiVersion = VK_API_VERSION_1_1;
  memset(&messenger, 0, sizeof(messenger));
  messenger.sType = VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT;
  messenger.messageSeverity = VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT;
  messenger.messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT |
                          VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT;
  messenger.pfnUserCallback = on_message;
  messenger.pUserData = vk;
  memset(&info, 0, sizeof(info));
  info.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO;
  info.pApplicationInfo = &app;
  validation = validation && layer_present(vk, VALIDATION_LAYER);
  if (validation) {
    info.enabledLayerCount = 1;
    info.ppEnabledLayerNames = layers;
    info.enabledExtensionCount = 1;
    info.ppEnabledExtensionNames = extensions;
    info.pNext = &messenger; /* also reports on instance creation and destruction */
  }
  result = vk->f.vkCreateInstance(&info, NULL, &vk->instance);
  if (result == VK_ERROR_INCOMPATIBLE_DRIVER) {
    return rxe_error_set(err, RXE_ERR_DEVICE, "no Vulkan driver is installed (vkCreateInstance: incompatible driver)");
  }
  if (result != VK_SUCCESS) return rxe_vk_fail(err, result, "vkCreateInstance");
#define LOAD_INSTANCE(fn)                                                                   \
  vk->f.fn = (PFN_##fn)vk->f.vkGetInstanceProcAddr(vk->instance, #fn);                      \
  if (vk->f.fn == NULL) return rxe_error_set(err, RXE_ERR_NO_VULKAN, "the Vulkan loader lacks %s", #fn);
  RXE_VK_INSTANCE_FNS(LOAD_INSTANCE)
#undef LOAD_INSTANCE
  if (validation) {
    vk->f.vkCreateDebugUtilsMessengerEXT =
        (PFN_vkCreateDebugUtilsMessengerEXT)vk->f.vkGetInstanceProcAddr(vk->instance, "vkCreateDebugUtilsMessengerEXT");
    vk->f.vkDestroyDebugUtilsMessengerEXT =
        (PFN_vkDestroyDebugUtilsMessengerEXT)vk->f.vkGetInstanceProcAddr(vk->instance, "vkDestroyDebugUtilsMessengerEXT");
    if (vk->f.vkCreateDebugUtilsMessengerEXT != NULL &&
        vk->f.vkCreateDebugUtilsMessengerEXT(vk->instance, &messenger, NULL, &vk->messenger) != VK_SUCCESS) {
      vk->messenger = VK_NULL_HANDLE;
    }
  }
  return RXE_OK;
}

static int compute_family(rxe_vk_t* vk, VkPhysicalDevice dev, uint32_t* out_family, uint32_t* out_bits) {
  uint32_t n = 0, i;
  VkQueueFamilyProperties props[16];
  vk->f.vkGetPhysicalDeviceQueueFamilyProperties(dev, &n, NULL);
  if (n > 16) n = 16;
  vk->f.vkGetPhysicalDeviceQueueFamilyProperties(dev, &n, props);
  for (i = 0; i < n; ++i) {
    if (props[i].queueFlags & VK_QUEUE_COMPUTE_BIT) {
      *out_family = i;
      *out_bits = props[i].timestampValidBits;
      return 1;
    }
  }
  return 0;
}

static int type_rank(VkPhysicalDeviceType type, int allow_cpu) {
  switch (type) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: return 4;
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: return 3;
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: return 2;
    case VK_PHYSICAL_DEVICE_TYPE_CPU: return allow_cpu ? 1 : 0;
    default: return 0;
  }
}

static rxe_status_t choose_device(rxe_vk_t* vk, const rxe_vk_options_t* o, rxe_error_t* err) {
  VkPhysicalDevice devices[16];
  uint32_t n = 16, i, family = 0, bits = 0;
  int best = 0;
  VkResult result = vk->f.vkEnumeratePhysicalDevices(vk->instance, &n, devices);
  if (result != VK_SUCCESS && result != VK_INCOMPLETE) return rxe_vk_fail(err, result, "vkEnumeratePhysicalDevices");
  if (n == 0) return rxe_error_set(err, RXE_ERR_DEVICE, "no Vulkan device (the loader found no driver with a device)");
  if (o->device_index >= 0) {
    if ((uint32_t)o->device_index >= n) {
      return rxe_error_set(err, RXE_ERR_DEVICE, "device_index %d: there are %d Vulkan devices",
                           (int64_t)o->device_index, (int64_t)n);
    }
    if (!compute_family(vk, devices[o->device_index], &family, &bits)) {
      return rxe_error_set(err, RXE_ERR_DEVICE, "Vulkan device %d has no compute queue", (int64_t)o->device_index);
    }
    vk->physical = devices[o->device_index];
  } else {
    for (i = 0; i < n; ++i) {
      VkPhysicalDeviceProperties p;
      uint32_t f, b;
      int rank;
      vk->f.vkGetPhysicalDeviceProperties(devices[i], &p);
      rank = type_rank(p.deviceType, o->allow_cpu);
      if (rank > best && compute_family(vk, devices[i], &f, &b)) {
        best = rank;
        vk->physical = devices[i];
        family = f;
        bits = b;
      }
    }
    if (vk->physical == VK_NULL_HANDLE) {
      return rxe_error_set(err, RXE_ERR_DEVICE, "no usable Vulkan device among %d (a CPU device needs allow_cpu)",
                           (int64_t)n);
    }
  }
  vk->queue_family = family;
  vk->timestamp_bits = bits;
  return RXE_OK;
}

static uint32_t lower(uint32_t device, uint32_t override) {
  return override != 0 && override < device ? override : device;
}

/* Query the limits and features, create the device with fp16 enabled when present. */
static rxe_status_t create_device(rxe_vk_t* vk, const rxe_vk_options_t* o, rxe_error_t* err) {
  VkPhysicalDeviceSubgroupProperties subgroup;
  VkPhysicalDeviceProperties2 props2;
  VkPhysicalDevice16BitStorageFeatures storage16;
  VkPhysicalDeviceShaderFloat16Int8FeaturesKHR float16;
  VkPhysicalDeviceFeatures2 features;
  VkDeviceQueueCreateInfo queue;
  VkDeviceCreateInfo info;
  const char* extensions[1] = {VK_KHR_SHADER_FLOAT16_INT8_EXTENSION_NAME};
  int has_f16_ext = device_extension_present(vk, vk->physical, VK_KHR_SHADER_FLOAT16_INT8_EXTENSION_NAME);
  float priority = 1.0f;
  int has_f64;
  const VkPhysicalDeviceLimits* l;
  VkResult result;

  vk->f.vkGetPhysicalDeviceProperties(vk->physical, &vk->props);
  vk->f.vkGetPhysicalDeviceMemoryProperties(vk->physical, &vk->memory);
  memset(&subgroup, 0, sizeof(subgroup));
  subgroup.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES;
  memset(&props2, 0, sizeof(props2));
  props2.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2;
  props2.pNext = &subgroup;
  vk->f.vkGetPhysicalDeviceProperties2(vk->physical, &props2);

  memset(&storage16, 0, sizeof(storage16));
  storage16.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_16BIT_STORAGE_FEATURES;
  memset(&float16, 0, sizeof(float16));
  float16.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_FLOAT16_INT8_FEATURES_KHR;
  memset(&features, 0, sizeof(features));
  features.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2;
  features.pNext = &storage16;
  if (has_f16_ext) storage16.pNext = &float16;
  vk->f.vkGetPhysicalDeviceFeatures2(vk->physical, &features);
  /* enable only what fp16 and fp64 kernels need */
  has_f64 = features.features.shaderFloat64 == VK_TRUE;
  memset(&features.features, 0, sizeof(features.features));
  features.features.shaderFloat64 = has_f64 ? VK_TRUE : VK_FALSE;
  storage16.uniformAndStorageBuffer16BitAccess = VK_FALSE;
  storage16.storagePushConstant16 = VK_FALSE;
  storage16.storageInputOutput16 = VK_FALSE;
  float16.shaderInt8 = VK_FALSE;

  l = &vk->props.limits;
  vk->limits.push_constant_bytes = l->maxPushConstantsSize;
  vk->limits.storage_buffers = l->maxPerStageDescriptorStorageBuffers;
  vk->limits.workgroup_size_x = l->maxComputeWorkGroupSize[0];
  vk->limits.workgroup_invocations = l->maxComputeWorkGroupInvocations;
  vk->limits.shared_bytes = l->maxComputeSharedMemorySize;
  vk->limits.flags = (float16.shaderFloat16 && storage16.storageBuffer16BitAccess) ? RXE_VK_KERNEL_FP16 : 0u;
  if (has_f64) vk->limits.flags |= RXE_VK_KERNEL_FP64;
  vk->limits.subgroup_size = subgroup.subgroupSize;
  vk->limits.group_count_x = lower(l->maxComputeWorkGroupCount[0], 65535u);
  vk->limits.storage_buffer_range = l->maxStorageBufferRange;
  if (o->limits != NULL) {
    const rxe_vk_limits_t* d = o->limits;
    vk->limits.push_constant_bytes = lower(vk->limits.push_constant_bytes, d->push_constant_bytes);
    vk->limits.storage_buffers = lower(vk->limits.storage_buffers, d->storage_buffers);
    vk->limits.workgroup_size_x = lower(vk->limits.workgroup_size_x, d->workgroup_size_x);
    vk->limits.workgroup_invocations = lower(vk->limits.workgroup_invocations, d->workgroup_invocations);
    vk->limits.shared_bytes = lower(vk->limits.shared_bytes, d->shared_bytes);
    vk->limits.flags &= ~d->flags;
    if (d->subgroup_size != 0) vk->limits.subgroup_size = d->subgroup_size;
    vk->limits.group_count_x = lower(vk->limits.group_count_x, d->group_count_x);
    if (d->storage_buffer_range != 0 && d->storage_buffer_range < vk->limits.storage_buffer_range) {
      vk->limits.storage_buffer_range = d->storage_buffer_range;
    }
  }

  memset(&queue, 0, sizeof(queue));
  queue.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO;
  queue.queueFamilyIndex = vk->queue_family;
  queue.queueCount = 1;
  queue.pQueuePriorities = &priority;
  memset(&info, 0, sizeof(info));
  info.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO;
  info.pNext = &features;
  info.queueCreateInfoCount = 1;
  info.pQueueCreateInfos = &queue;
  if (has_f16_ext) { /* the instance is 1.1: shaderFloat16 comes from the extension */
    info.enabledExtensionCount = 1;
    info.ppEnabledExtensionNames = extensions;
  }
  result = vk->f.vkCreateDevice(vk->physical, &info, NULL, &vk->device);
  if (result != VK_SUCCESS) return rxe_vk_fail(err, result, "vkCreateDevice");
#define LOAD_DEVICE(fn)                                                                     \
  vk->f.fn = (PFN_##fn)vk->f.vkGetDeviceProcAddr(vk->device, #fn);                          \
  if (vk->f.fn == NULL) return rxe_error_set(err, RXE_ERR_NO_VULKAN, "the Vulkan driver lacks %s", #fn);
  RXE_VK_DEVICE_FNS(LOAD_DEVICE)
#undef LOAD_DEVICE
  vk->f.vkGetDeviceQueue(vk->device, vk->queue_family, 0, &vk->queue);
  return RXE_OK;
}

static rxe_status_t create_sync(rxe_vk_t* vk, rxe_error_t* err) {
  VkCommandPoolCreateInfo pool;
  VkFenceCreateInfo fence;
  VkResult result;
  memset(&pool, 0, sizeof(pool));
  pool.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO;
  pool.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
  pool.queueFamilyIndex = vk->queue_family;
  result = vk->f.vkCreateCommandPool(vk->device, &pool, NULL, &vk->command_pool);
  if (result != VK_SUCCESS) return rxe_vk_fail(err, result, "vkCreateCommandPool");
  memset(&fence, 0, sizeof(fence));
  fence.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO;
  result = vk->f.vkCreateFence(vk->device, &fence, NULL, &vk->fence);
  if (result != VK_SUCCESS) return rxe_vk_fail(err, result, "vkCreateFence");
  return rxe_vk_commands_reserve(vk, 2, err);
}

/* The pipeline cache file's name: the options', else $RXE_VK_PIPELINE_CACHE; "" is none. */
static rxe_status_t cache_path(rxe_vk_t* vk, const rxe_vk_options_t* o, rxe_error_t* err) {
  const char* path = o->pipeline_cache != NULL ? o->pipeline_cache : getenv("RXE_VK_PIPELINE_CACHE");
  size_t n;
  if (path == NULL || path[0] == '\0') return RXE_OK;
  n = strlen(path) + 1u;
  vk->cache_path = (char*)malloc(n);
  if (vk->cache_path == NULL) return rxe_error_set(err, RXE_ERR_NO_MEMORY, "rxe_vk_open: out of memory");
  memcpy(vk->cache_path, path, n);
  return RXE_OK;
}

rxe_status_t rxe_vk_open(const rxe_vk_options_t* options, rxe_vk_t** out, rxe_error_t* err) {
  rxe_vk_options_t defaults;
  rxe_vk_t* vk;
  rxe_status_t s;
  if (out == NULL) return rxe_error_set(err, RXE_ERR_NULL, "rxe_vk_open: no output pointer");
  *out = NULL;
  if (options == NULL) {
    memset(&defaults, 0, sizeof(defaults));
    defaults.device_index = -1;
    options = &defaults;
  }
  vk = (rxe_vk_t*)calloc(1, sizeof(*vk));
  if (vk == NULL) return rxe_error_set(err, RXE_ERR_NO_MEMORY, "rxe_vk_open: out of memory");
  vk->force_staging = options->force_staging;
  vk->per_submit = options->max_dispatches_per_submit ? options->max_dispatches_per_submit : RXE_VK_DISPATCHES_PER_SUBMIT;
  s = cache_path(vk, options, err);
  if (s != RXE_OK) {
    rxe_vk_close(vk);
    return s;
  }
  s = load_library(vk, library_name(options), err);
  if (s == RXE_OK) s = create_instance(vk, options->validation, err);
  if (s == RXE_OK) s = choose_device(vk, options, err);
  if (s == RXE_OK) s = create_device(vk, options, err);
  if (s == RXE_OK) s = create_sync(vk, err);
  if (s != RXE_OK) {
    rxe_vk_close(vk);
    return s;
  }
  *out = vk;
  return RXE_OK;
}

void rxe_vk_close(rxe_vk_t* vk) {
  uint32_t i;
  if (vk == NULL) return;
  if (vk->device != VK_NULL_HANDLE) {
    vk->f.vkDeviceWaitIdle(vk->device);
    rxe_vk_run_release(vk);
    for (i = 0; i < vk->num_kernels; ++i) {
      rxe_vk_pipeline_t* k = &vk->kernels[i];
      if (k->pipeline) vk->f.vkDestroyPipeline(vk->device, k->pipeline, NULL);
      if (k->layout) vk->f.vkDestroyPipelineLayout(vk->device, k->layout, NULL);
      if (k->set_layout) vk->f.vkDestroyDescriptorSetLayout(vk->device, k->set_layout, NULL);
      if (k->module) vk->f.vkDestroyShaderModule(vk->device, k->module, NULL);
    }
    if (vk->fence) vk->f.vkDestroyFence(vk->device, vk->fence, NULL);
    if (vk->command_pool) vk->f.vkDestroyCommandPool(vk->device, vk->command_pool, NULL);
    vk->f.vkDestroyDevice(vk->device, NULL);
  }
  if (vk->messenger != VK_NULL_HANDLE && vk->f.vkDestroyDebugUtilsMessengerEXT != NULL) {
    vk->f.vkDestroyDebugUtilsMessengerEXT(vk->instance, vk->messenger, NULL);
  }
  if (vk->instance != VK_NULL_HANDLE) vk->f.vkDestroyInstance(vk->instance, NULL);
  if (vk->library != NULL) dlclose(vk->library);
  free(vk->kernels);
  free(vk->commands);
  free(vk->cache_path);
  free(vk->cache_data);
  free(vk);
}

static rxe_status_t need(rxe_error_t* err, const char* what, const char* requirement, uint64_t needed,
                         uint64_t limit) {
  if (needed <= limit) return RXE_OK;
  return rxe_error_set(err, RXE_ERR_DEVICE, "%s needs %s %d, the device's limit is %d", what, requirement,
                       (int64_t)needed, (int64_t)limit);
}

rxe_status_t rxe_vk_check_named(rxe_vk_t* vk, const rxe_vk_requirements_t* req, const char* what, rxe_error_t* err) {
  const rxe_vk_limits_t* l = &vk->limits;
  rxe_status_t s;
  if ((s = need(err, what, "push-constant bytes", req->push_constant_bytes, l->push_constant_bytes))) return s;
  if ((s = need(err, what, "storage buffers per stage", req->storage_buffers, l->storage_buffers))) return s;
  if ((s = need(err, what, "workgroup size x", req->workgroup_size_x, l->workgroup_size_x))) return s;
  if ((s = need(err, what, "workgroup invocations", req->workgroup_size_x, l->workgroup_invocations))) return s;
  if ((s = need(err, what, "shared memory bytes", req->shared_bytes, l->shared_bytes))) return s;
  if ((req->flags & RXE_VK_KERNEL_FP16) && !(l->flags & RXE_VK_KERNEL_FP16)) {
    return rxe_error_set(err, RXE_ERR_DEVICE,
                         "%s needs fp16 (shaderFloat16 and storageBuffer16BitAccess), the device lacks them", what);
  }
  if ((req->flags & RXE_VK_KERNEL_FP64) && !(l->flags & RXE_VK_KERNEL_FP64)) {
    return rxe_error_set(err, RXE_ERR_DEVICE, "%s needs fp64 (shaderFloat64), the device lacks it", what);
  }
  if (req->subgroup_size != 0 && req->subgroup_size != l->subgroup_size) {
    return rxe_error_set(err, RXE_ERR_DEVICE, "%s needs subgroup size %d, the device's subgroup size is %d", what,
                         (int64_t)req->subgroup_size, (int64_t)l->subgroup_size);
  }
  return RXE_OK;
}

rxe_status_t rxe_vk_check(rxe_vk_t* vk, const rxe_vk_requirements_t* req, rxe_error_t* err) {
  if (vk == NULL || req == NULL) return rxe_error_set(err, RXE_ERR_NULL, "rxe_vk_check: no context or requirements");
  return rxe_vk_check_named(vk, req, "the module", err);
}

rxe_status_t rxe_vk_commands_reserve(rxe_vk_t* vk, uint32_t count, rxe_error_t* err) {
  VkCommandBufferAllocateInfo info;
  VkCommandBuffer* grown;
  VkResult result;
  if (count <= vk->num_commands) return RXE_OK;
  grown = (VkCommandBuffer*)realloc(vk->commands, count * sizeof(*grown));
  if (grown == NULL) return rxe_error_set(err, RXE_ERR_NO_MEMORY, "out of memory for %d command buffers", (int64_t)count);
  vk->commands = grown;
  memset(&info, 0, sizeof(info));
  info.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO;
  info.commandPool = vk->command_pool;
  info.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
  info.commandBufferCount = count - vk->num_commands;
  result = vk->f.vkAllocateCommandBuffers(vk->device, &info, vk->commands + vk->num_commands);
  if (result != VK_SUCCESS) return rxe_vk_fail(err, result, "vkAllocateCommandBuffers");
  vk->num_commands = count;
  return RXE_OK;
}

rxe_status_t rxe_vk_submit_one(rxe_vk_t* vk, VkCommandBuffer cmd, uint64_t timeout_ns, const char* what,
                               rxe_error_t* err) {
  VkSubmitInfo submit;
  VkResult result;
  memset(&submit, 0, sizeof(submit));
  submit.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO;
  submit.commandBufferCount = 1;
  submit.pCommandBuffers = &cmd;
  result = vk->f.vkResetFences(vk->device, 1, &vk->fence);
  if (result != VK_SUCCESS) return rxe_vk_fail(err, result, "vkResetFences");
  result = vk->f.vkQueueSubmit(vk->queue, 1, &submit, vk->fence);
  if (result != VK_SUCCESS) return rxe_vk_fail(err, result, "vkQueueSubmit");
  result = vk->f.vkWaitForFences(vk->device, 1, &vk->fence, VK_TRUE, timeout_ns);
  if (result == VK_TIMEOUT) {
    vk->pending = 1;
    return rxe_error_set(err, RXE_ERR_TIMEOUT, "%s: the fence was not signalled within %d ns", what,
                         (int64_t)timeout_ns);
  }
  if (result != VK_SUCCESS) return rxe_vk_fail(err, result, "vkWaitForFences");
  return RXE_OK;
}

rxe_status_t rxe_vk_idle_check(rxe_vk_t* vk, const char* what, rxe_error_t* err) {
  if (!vk->pending) return RXE_OK;
  if (vk->f.vkGetFenceStatus(vk->device, vk->fence) == VK_SUCCESS) {
    vk->pending = 0;
    return RXE_OK;
  }
  return rxe_error_set(err, RXE_ERR_TIMEOUT, "%s: a run that timed out is still executing (rxe_vk_wait)", what);
}

rxe_status_t rxe_vk_wait(rxe_vk_t* vk, uint64_t timeout_ns, rxe_error_t* err) {
  VkResult result;
  if (vk == NULL) return rxe_error_set(err, RXE_ERR_NULL, "rxe_vk_wait: no context");
  if (!vk->pending) return RXE_OK;
  result = vk->f.vkWaitForFences(vk->device, 1, &vk->fence, VK_TRUE, timeout_ns);
  if (result == VK_TIMEOUT) {
    return rxe_error_set(err, RXE_ERR_TIMEOUT, "rxe_vk_wait: the run still executes after %d ns", (int64_t)timeout_ns);
  }
  if (result != VK_SUCCESS) return rxe_vk_fail(err, result, "vkWaitForFences");
  vk->pending = 0;
  return RXE_OK;
}

uint64_t rxe_vk_pipelines_created(const rxe_vk_t* vk) { return vk ? vk->pipelines_created : 0; }
uint64_t rxe_vk_validation_messages(const rxe_vk_t* vk) { return vk ? vk->validation_messages : 0; }
const char* rxe_vk_validation_text(const rxe_vk_t* vk) { return vk ? vk->validation_text : ""; }
const char* rxe_vk_device_name(const rxe_vk_t* vk) { return vk ? vk->props.deviceName : ""; }

void rxe_vk_limits_get(const rxe_vk_t* vk, rxe_vk_limits_t* out_limits) {
  if (vk != NULL && out_limits != NULL) *out_limits = vk->limits;
}
