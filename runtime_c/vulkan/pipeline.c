/* rxe_vk_load: the requirements check, then one shader module, descriptor
 * set layout, pipeline layout and compute pipeline per kernel, created once. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vk_internal.h"

#define SPIRV_MAGIC 0x07230203u

static rxe_status_t check_record(const rxe_vk_kernel_t* k, uint32_t index, rxe_error_t* err) {
  const char* name = k->name ? k->name : "(unnamed)";
  if (k->spirv == NULL || k->spirv_words < 5) {
    return rxe_error_set(err, RXE_ERR_NULL, "kernel %d (%s): no SPIR-V", (int64_t)index, name);
  }
  if (k->spirv[0] != SPIRV_MAGIC) {
    return rxe_error_set(err, RXE_ERR_ABI, "kernel %d (%s): not SPIR-V (bad magic number)", (int64_t)index, name);
  }
  if (k->push_words < 2 + k->num_buffers) {
    return rxe_error_set(err, RXE_ERR_ABI, "kernel %d (%s): push_words %d is below 2 + %d buffers", (int64_t)index,
                         name, (int64_t)k->push_words, (int64_t)k->num_buffers);
  }
  if (k->local_size_x == 0) {
    return rxe_error_set(err, RXE_ERR_ABI, "kernel %d (%s): local_size_x is 0", (int64_t)index, name);
  }
  return RXE_OK;
}

/* What one kernel needs: the push block is a storage buffer past RXE_VK_MAX_PUSH_WORDS. */
static void kernel_requirements(const rxe_vk_kernel_t* k, rxe_vk_requirements_t* r) {
  int fallback = k->push_words > RXE_VK_MAX_PUSH_WORDS;
  memset(r, 0, sizeof(*r));
  r->push_constant_bytes = fallback ? 0u : 4u * k->push_words;
  r->storage_buffers = k->num_buffers + (fallback ? 1u : 0u);
  r->workgroup_size_x = k->local_size_x;
  r->shared_bytes = k->shared_bytes;
  r->flags = k->flags;
}

static rxe_status_t create_pipeline(rxe_vk_t* vk, const rxe_vk_kernel_t* k, rxe_vk_pipeline_t* p, VkPipelineCache cache,
                                    rxe_error_t* err) {
  VkShaderModuleCreateInfo module;
  VkDescriptorSetLayoutBinding* bindings;
  VkDescriptorSetLayoutCreateInfo set;
  VkPushConstantRange range;
  VkPipelineLayoutCreateInfo layout;
  VkSpecializationMapEntry entry;
  VkSpecializationInfo spec;
  VkComputePipelineCreateInfo info;
  uint32_t n, i;
  VkResult result;
  strncpy(p->name, k->name ? k->name : "(unnamed)", sizeof(p->name) - 1);
  p->num_buffers = k->num_buffers;
  p->push_words = k->push_words;
  p->local_size_x = k->local_size_x;
  p->fallback = k->push_words > RXE_VK_MAX_PUSH_WORDS;

  memset(&module, 0, sizeof(module));
  module.sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO;
  module.codeSize = (size_t)k->spirv_words * 4u;
  module.pCode = k->spirv;
  result = vk->f.vkCreateShaderModule(vk->device, &module, NULL, &p->module);
  if (result != VK_SUCCESS) return rxe_vk_fail(err, result, "vkCreateShaderModule");

  n = k->num_buffers + (p->fallback ? 1u : 0u);
  bindings = (VkDescriptorSetLayoutBinding*)calloc(n ? n : 1u, sizeof(*bindings));
  if (bindings == NULL) return rxe_error_set(err, RXE_ERR_NO_MEMORY, "out of memory for %s's bindings", p->name);
  for (i = 0; i < n; ++i) {
    bindings[i].binding = i;
    bindings[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
    bindings[i].descriptorCount = 1;
    bindings[i].stageFlags = VK_SHADER_STAGE_COMPUTE_BIT;
  }
  memset(&set, 0, sizeof(set));
  set.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO;
  set.bindingCount = n;
  set.pBindings = bindings;
  result = vk->f.vkCreateDescriptorSetLayout(vk->device, &set, NULL, &p->set_layout);
  free(bindings);
  if (result != VK_SUCCESS) return rxe_vk_fail(err, result, "vkCreateDescriptorSetLayout");

  range.stageFlags = VK_SHADER_STAGE_COMPUTE_BIT;
  range.offset = 0;
  range.size = 4u * k->push_words;
  memset(&layout, 0, sizeof(layout));
  layout.sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO;
  layout.setLayoutCount = 1;
  layout.pSetLayouts = &p->set_layout;
  layout.pushConstantRangeCount = p->fallback ? 0u : 1u;
  layout.pPushConstantRanges = &range;
  result = vk->f.vkCreatePipelineLayout(vk->device, &layout, NULL, &p->layout);
  if (result != VK_SUCCESS) return rxe_vk_fail(err, result, "vkCreatePipelineLayout");

  entry.constantID = 0;
  entry.offset = 0;
  entry.size = sizeof(uint32_t);
  spec.mapEntryCount = 1;
  spec.pMapEntries = &entry;
  spec.dataSize = sizeof(uint32_t);
  spec.pData = &p->local_size_x;
  memset(&info, 0, sizeof(info));
  info.sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO;
  info.stage.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO;
  info.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
  info.stage.module = p->module;
  info.stage.pName = "main";
  info.stage.pSpecializationInfo = &spec;
  info.layout = p->layout;
  result = vk->f.vkCreateComputePipelines(vk->device, cache, 1, &info, NULL, &p->pipeline);
  if (result != VK_SUCCESS) return rxe_vk_fail(err, result, "vkCreateComputePipelines");
  vk->pipelines_created += 1;
  return RXE_OK;
}

/* The pipeline cache of a load: seeded from the file when it was usable,
 * empty when a file is named but absent or refused, none without a file. */
static VkPipelineCache open_cache(rxe_vk_t* vk) {
  VkPipelineCacheCreateInfo info;
  VkPipelineCache cache = VK_NULL_HANDLE;
  if (vk->cache_path == NULL) return VK_NULL_HANDLE;
  rxe_vk_cache_read(vk);
  memset(&info, 0, sizeof(info));
  info.sType = VK_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO;
  info.initialDataSize = vk->cache_bytes;
  info.pInitialData = vk->cache_data;
  if (vk->f.vkCreatePipelineCache(vk->device, &info, NULL, &cache) == VK_SUCCESS) return cache;
  info.initialDataSize = 0; /* the driver refused the data: start empty */
  info.pInitialData = NULL;
  vk->cache_state = RXE_VK_CACHE_REJECTED;
  snprintf(vk->cache_text, sizeof(vk->cache_text), "pipeline cache %s: ignored, the driver refused its data",
           vk->cache_path);
  if (vk->f.vkCreatePipelineCache(vk->device, &info, NULL, &cache) == VK_SUCCESS) return cache;
  return VK_NULL_HANDLE;
}

rxe_status_t rxe_vk_load(rxe_vk_t* vk, const rxe_vk_kernel_t* kernels, uint32_t count, rxe_error_t* err) {
  uint32_t i;
  rxe_status_t s;
  VkPipelineCache cache;
  if (vk == NULL || (kernels == NULL && count > 0)) return rxe_error_set(err, RXE_ERR_NULL, "rxe_vk_load: no context or kernels");
  if (vk->loaded) return rxe_error_set(err, RXE_ERR_ARGUMENT_COUNT, "rxe_vk_load: kernels are already loaded in this context");
  for (i = 0; i < count; ++i) {
    rxe_vk_requirements_t r;
    char what[96];
    s = check_record(&kernels[i], i, err);
    if (s != RXE_OK) return s;
    kernel_requirements(&kernels[i], &r);
    strcpy(what, "kernel ");
    strncat(what, kernels[i].name ? kernels[i].name : "(unnamed)", sizeof(what) - 8);
    s = rxe_vk_check_named(vk, &r, what, err);
    if (s != RXE_OK) return s;
  }
  vk->kernels = (rxe_vk_pipeline_t*)calloc(count ? count : 1u, sizeof(*vk->kernels));
  if (vk->kernels == NULL) return rxe_error_set(err, RXE_ERR_NO_MEMORY, "out of memory for %d kernels", (int64_t)count);
  vk->loaded = 1;
  cache = open_cache(vk);
  s = RXE_OK;
  for (i = 0; i < count && s == RXE_OK; ++i) {
    vk->num_kernels = i + 1; /* what exists is destroyed by rxe_vk_close */
    s = create_pipeline(vk, &kernels[i], &vk->kernels[i], cache, err);
  }
  if (s == RXE_OK) rxe_vk_cache_write(vk, cache);
  if (cache != VK_NULL_HANDLE) vk->f.vkDestroyPipelineCache(vk->device, cache, NULL);
  free(vk->cache_data);
  vk->cache_data = NULL;
  return s;
}
