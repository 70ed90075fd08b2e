/* A run: dispatches are checked and kept as records by rxe_vk_dispatch; rxe_vk_submit
 * sizes the descriptor pool, the query pool and the fallback parameter buffer
 * for the run, records the command buffers (at most per_submit dispatches
 * each) and submits them one after another, each waited on with what is left
 * of the timeout. */
#define _POSIX_C_SOURCE 199309L
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "vk_internal.h"

static uint64_t now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

static int grow(void** array, uint32_t* cap, uint32_t needed, size_t item) {
  uint32_t n = *cap ? *cap : 16u;
  void* grown;
  if (needed <= *cap) return 1;
  while (n < needed) n *= 2u;
  grown = realloc(*array, (size_t)n * item);
  if (grown == NULL) return 0;
  *array = grown;
  *cap = n;
  return 1;
}

rxe_status_t rxe_vk_begin(rxe_vk_t* vk, rxe_error_t* err) {
  rxe_status_t s;
  if (vk == NULL) return rxe_error_set(err, RXE_ERR_NULL, "rxe_vk_begin: no context");
  s = rxe_vk_idle_check(vk, "rxe_vk_begin", err);
  if (s != RXE_OK) return s;
  vk->recording = 1;
  vk->num_records = 0;
  vk->num_bindings = 0;
  vk->num_words = 0;
  vk->num_param_slots = 0;
  return RXE_OK;
}

/* Fold `groups` workgroups into x (at most group_count_x), then y, then z. */
static rxe_status_t fold_grid(const rxe_vk_t* vk, uint64_t groups, uint32_t out[3], const char* name, rxe_error_t* err) {
  const uint32_t* max = vk->props.limits.maxComputeWorkGroupCount;
  uint64_t x = groups < vk->limits.group_count_x ? groups : vk->limits.group_count_x;
  uint64_t rows = x ? (groups + x - 1) / x : 0;
  uint64_t y = rows < max[1] ? rows : max[1];
  uint64_t z = y ? (rows + y - 1) / y : 0;
  if (z > max[2]) {
    return rxe_error_set(err, RXE_ERR_BOUND, "kernel %s: %d workgroups do not fit the device's grid", name,
                         (int64_t)groups);
  }
  out[0] = (uint32_t)x;
  out[1] = (uint32_t)y;
  out[2] = (uint32_t)z;
  return RXE_OK;
}

/* Bind a view at its offset aligned down to minStorageBufferOffsetAlignment; the rest in elements. */
static rxe_status_t bind_view(rxe_vk_t* vk, const rxe_vk_view_t* v, uint32_t i, const char* name,
                              rxe_vk_binding_t* out, uint32_t* out_elements, rxe_error_t* err) {
  uint64_t align = vk->props.limits.minStorageBufferOffsetAlignment;
  uint64_t max_range = vk->limits.storage_buffer_range;
  uint64_t base, rest, size, range;
  if (v->buffer == NULL) return rxe_error_set(err, RXE_ERR_NULL, "kernel %s: view %d has no buffer", name, (int64_t)i);
  size = v->buffer->bytes;
  if (v->offset > size || v->bytes > size - v->offset) {
    return rxe_error_set(err, RXE_ERR_BOUND, "kernel %s: view %d (bytes %d..%d) is outside its buffer of %d bytes",
                         name, (int64_t)i, (int64_t)v->offset, (int64_t)(v->offset + v->bytes), (int64_t)size);
  }
  if (align == 0) align = 1;
  base = v->offset - v->offset % align;
  rest = v->offset - base;
  if (rest % 4u != 0) {
    return rxe_error_set(err, RXE_ERR_BOUND, "kernel %s: view %d starts at byte %d, not a multiple of 4", name,
                         (int64_t)i, (int64_t)v->offset);
  }
  size = (size + 3u) & ~(uint64_t)3u; /* the buffer's real size */
  if (v->bytes == 0) {
    range = size - base;
    if (range > max_range) range = max_range;
  } else {
    range = rest + ((v->bytes + 3u) & ~(uint64_t)3u);
    if (range > max_range) {
      return rxe_error_set(err, RXE_ERR_BOUND,
                           "kernel %s: view %d spans %d bytes from its aligned offset, past maxStorageBufferRange %d",
                           name, (int64_t)i, (int64_t)range, (int64_t)max_range);
    }
  }
  if (range <= rest) {
    return rxe_error_set(err, RXE_ERR_BOUND, "kernel %s: view %d is empty at the end of its buffer", name, (int64_t)i);
  }
  out->buffer = v->buffer->buffer;
  out->offset = base;
  out->range = range;
  *out_elements = (uint32_t)(rest / 4u);
  return RXE_OK;
}

rxe_status_t rxe_vk_dispatch(rxe_vk_t* vk, uint32_t kernel, const rxe_vk_view_t* views, const int32_t* sizes,
                             uint64_t items, rxe_error_t* err) {
  const rxe_vk_pipeline_t* k;
  rxe_vk_record_t* r;
  uint32_t i, ns, *words;
  rxe_status_t s;
  if (vk == NULL) return rxe_error_set(err, RXE_ERR_NULL, "rxe_vk_dispatch: no context");
  if (!vk->recording) return rxe_error_set(err, RXE_ERR_PROTOCOL, "rxe_vk_dispatch outside rxe_vk_begin / rxe_vk_submit");
  if (kernel >= vk->num_kernels) {
    return rxe_error_set(err, RXE_ERR_NOT_FOUND, "rxe_vk_dispatch: kernel %d, %d are loaded", (int64_t)kernel,
                         (int64_t)vk->num_kernels);
  }
  k = &vk->kernels[kernel];
  ns = k->push_words - 2u - k->num_buffers;
  if ((views == NULL && k->num_buffers > 0) || (sizes == NULL && ns > 0)) {
    return rxe_error_set(err, RXE_ERR_NULL, "kernel %s: %d views and %d sizes expected", k->name,
                         (int64_t)k->num_buffers, (int64_t)ns);
  }
  if (items > 0xffffffffull) {
    return rxe_error_set(err, RXE_ERR_BOUND, "kernel %s: %d items do not fit 32 bits", k->name, (int64_t)items);
  }
  if (!grow((void**)&vk->records, &vk->cap_records, vk->num_records + 1, sizeof(*vk->records)) ||
      !grow((void**)&vk->bindings, &vk->cap_bindings, vk->num_bindings + k->num_buffers, sizeof(*vk->bindings)) ||
      !grow((void**)&vk->words, &vk->cap_words, vk->num_words + k->push_words, sizeof(*vk->words))) {
    return rxe_error_set(err, RXE_ERR_NO_MEMORY, "out of memory recording dispatch %d", (int64_t)vk->num_records);
  }
  r = &vk->records[vk->num_records];
  r->kernel = kernel;
  r->first_binding = vk->num_bindings;
  r->first_word = vk->num_words;
  s = fold_grid(vk, (items + k->local_size_x - 1) / k->local_size_x, r->groups, k->name, err);
  if (s != RXE_OK) return s;
  words = vk->words + vk->num_words;
  words[0] = r->groups[0];
  words[1] = (uint32_t)items;
  for (i = 0; i < k->num_buffers; ++i) {
    s = bind_view(vk, &views[i], i, k->name, &vk->bindings[vk->num_bindings + i], &words[2 + i], err);
    if (s != RXE_OK) return s;
  }
  if (ns > 0) memcpy(words + 2 + k->num_buffers, sizes, ns * sizeof(int32_t));
  r->param_slot = k->fallback ? vk->num_param_slots++ : 0u;
  vk->num_bindings += k->num_buffers;
  vk->num_words += k->push_words;
  vk->num_records += 1;
  return RXE_OK;
}

void rxe_vk_run_release(rxe_vk_t* vk) {
  if (vk->descriptor_pool) vk->f.vkDestroyDescriptorPool(vk->device, vk->descriptor_pool, NULL);
  if (vk->query_pool) vk->f.vkDestroyQueryPool(vk->device, vk->query_pool, NULL);
  if (vk->params) rxe_vk_buffer_free(vk, vk->params);
  vk->descriptor_pool = VK_NULL_HANDLE;
  vk->query_pool = VK_NULL_HANDLE;
  vk->params = NULL;
  free(vk->records);
  free(vk->bindings);
  free(vk->words);
  free(vk->sets);
  free(vk->times);
  vk->records = NULL;
  vk->bindings = NULL;
  vk->words = NULL;
  vk->sets = NULL;
  vk->times = NULL;
}

/* A descriptor pool for this run's sets; reset when big enough, else made anew. */
static rxe_status_t prepare_sets(rxe_vk_t* vk, rxe_error_t* err) {
  uint32_t n = vk->num_records, descriptors = vk->num_bindings + vk->num_param_slots, i;
  VkDescriptorSetLayout* layouts;
  VkDescriptorSetAllocateInfo alloc;
  VkResult result;
  VkDescriptorSet* sets;
  if (n > vk->pool_sets || descriptors > vk->pool_descriptors || vk->descriptor_pool == VK_NULL_HANDLE) {
    VkDescriptorPoolSize size;
    VkDescriptorPoolCreateInfo info;
    if (vk->descriptor_pool) vk->f.vkDestroyDescriptorPool(vk->device, vk->descriptor_pool, NULL);
    vk->descriptor_pool = VK_NULL_HANDLE;
    vk->pool_sets = n > 2 * vk->pool_sets ? n : 2 * vk->pool_sets;
    vk->pool_descriptors = descriptors > 2 * vk->pool_descriptors ? descriptors : 2 * vk->pool_descriptors;
    if (vk->pool_descriptors == 0) vk->pool_descriptors = 1;
    size.type = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
    size.descriptorCount = vk->pool_descriptors;
    memset(&info, 0, sizeof(info));
    info.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO;
    info.maxSets = vk->pool_sets;
    info.poolSizeCount = 1;
    info.pPoolSizes = &size;
    result = vk->f.vkCreateDescriptorPool(vk->device, &info, NULL, &vk->descriptor_pool);
    if (result != VK_SUCCESS) return rxe_vk_fail(err, result, "vkCreateDescriptorPool");
    sets = (VkDescriptorSet*)realloc(vk->sets, vk->pool_sets * sizeof(*sets));
    if (sets == NULL) return rxe_error_set(err, RXE_ERR_NO_MEMORY, "out of memory for %d descriptor sets", (int64_t)n);
    vk->sets = sets;
  } else {
    result = vk->f.vkResetDescriptorPool(vk->device, vk->descriptor_pool, 0);
    if (result != VK_SUCCESS) return rxe_vk_fail(err, result, "vkResetDescriptorPool");
  }
  layouts = (VkDescriptorSetLayout*)malloc(n * sizeof(*layouts));
  if (layouts == NULL) return rxe_error_set(err, RXE_ERR_NO_MEMORY, "out of memory for %d descriptor sets", (int64_t)n);
  for (i = 0; i < n; ++i) layouts[i] = vk->kernels[vk->records[i].kernel].set_layout;
  memset(&alloc, 0, sizeof(alloc));
  alloc.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO;
  alloc.descriptorPool = vk->descriptor_pool;
  alloc.descriptorSetCount = n;
  alloc.pSetLayouts = layouts;
  result = vk->f.vkAllocateDescriptorSets(vk->device, &alloc, vk->sets);
  free(layouts);
  if (result != VK_SUCCESS) return rxe_vk_fail(err, result, "vkAllocateDescriptorSets");
  return RXE_OK;
}

/* The push blocks of fallback kernels, one slot each, at aligned offsets of one host-visible buffer. */
static rxe_status_t prepare_params(rxe_vk_t* vk, rxe_error_t* err) {
  uint64_t align = vk->props.limits.minStorageBufferOffsetAlignment, stride = 0, bytes;
  uint32_t i;
  rxe_status_t s;
  if (vk->num_param_slots == 0) return RXE_OK;
  for (i = 0; i < vk->num_kernels; ++i) {
    if (vk->kernels[i].fallback && 4u * vk->kernels[i].push_words > stride) stride = 4u * vk->kernels[i].push_words;
  }
  if (align == 0) align = 1;
  stride = (stride + align - 1) / align * align;
  bytes = stride * vk->num_param_slots;
  if (vk->params == NULL || vk->params->bytes < bytes) {
    if (vk->params) rxe_vk_buffer_free(vk, vk->params);
    vk->params = NULL;
    s = rxe_vk_buffer_create(vk, bytes, 1, &vk->params, err);
    if (s != RXE_OK) return s;
  }
  vk->param_stride = stride;
  for (i = 0; i < vk->num_records; ++i) {
    const rxe_vk_record_t* r = &vk->records[i];
    const rxe_vk_pipeline_t* k = &vk->kernels[r->kernel];
    if (k->fallback) {
      memcpy((uint8_t*)vk->params->mapped + r->param_slot * stride, vk->words + r->first_word, 4u * k->push_words);
    }
  }
  return RXE_OK;
}

static rxe_status_t write_sets(rxe_vk_t* vk, rxe_error_t* err) {
  uint32_t total = vk->num_bindings + vk->num_param_slots, w = 0, i, j;
  VkDescriptorBufferInfo* infos = (VkDescriptorBufferInfo*)malloc((total ? total : 1u) * sizeof(*infos));
  VkWriteDescriptorSet* writes = (VkWriteDescriptorSet*)calloc(total ? total : 1u, sizeof(*writes));
  if (infos == NULL || writes == NULL) {
    free(infos);
    free(writes);
    return rxe_error_set(err, RXE_ERR_NO_MEMORY, "out of memory for %d descriptors", (int64_t)total);
  }
  for (i = 0; i < vk->num_records; ++i) {
    const rxe_vk_record_t* r = &vk->records[i];
    const rxe_vk_pipeline_t* k = &vk->kernels[r->kernel];
    uint32_t n = k->num_buffers + (k->fallback ? 1u : 0u);
    for (j = 0; j < n; ++j, ++w) {
      if (j < k->num_buffers) {
        const rxe_vk_binding_t* b = &vk->bindings[r->first_binding + j];
        infos[w].buffer = b->buffer;
        infos[w].offset = b->offset;
        infos[w].range = b->range;
      } else {
        infos[w].buffer = vk->params->buffer;
        infos[w].offset = r->param_slot * vk->param_stride;
        infos[w].range = 4u * k->push_words;
      }
      writes[w].sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET;
      writes[w].dstSet = vk->sets[i];
      writes[w].dstBinding = j;
      writes[w].descriptorCount = 1;
      writes[w].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
      writes[w].pBufferInfo = &infos[w];
    }
  }
  if (w > 0) vk->f.vkUpdateDescriptorSets(vk->device, w, writes, 0, NULL);
  free(infos);
  free(writes);
  return RXE_OK;
}

static rxe_status_t prepare_queries(rxe_vk_t* vk, rxe_error_t* err) {
  uint32_t needed = 2u * vk->num_records;
  VkQueryPoolCreateInfo info;
  VkResult result;
  uint64_t* times = (uint64_t*)realloc(vk->times, (vk->num_records ? vk->num_records : 1u) * sizeof(uint64_t));
  if (times == NULL) return rxe_error_set(err, RXE_ERR_NO_MEMORY, "out of memory for %d times", (int64_t)vk->num_records);
  vk->times = times;
  if (vk->timestamp_bits == 0 || needed <= vk->query_capacity) return RXE_OK;
  if (vk->query_pool) vk->f.vkDestroyQueryPool(vk->device, vk->query_pool, NULL);
  vk->query_pool = VK_NULL_HANDLE;
  vk->query_capacity = 0;
  memset(&info, 0, sizeof(info));
  info.sType = VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO;
  info.queryType = VK_QUERY_TYPE_TIMESTAMP;
  info.queryCount = needed;
  result = vk->f.vkCreateQueryPool(vk->device, &info, NULL, &vk->query_pool);
  if (result != VK_SUCCESS) return rxe_vk_fail(err, result, "vkCreateQueryPool");
  vk->query_capacity = needed;
  return RXE_OK;
}

static void barrier(rxe_vk_t* vk, VkCommandBuffer cmd, VkPipelineStageFlags dst_stage, VkAccessFlags dst_access) {
  VkMemoryBarrier b;
  memset(&b, 0, sizeof(b));
  b.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER;
  b.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT;
  b.dstAccessMask = dst_access;
  vk->f.vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, dst_stage, 0, 1, &b, 0, NULL, 0, NULL);
}

/* Record dispatches first .. first + count - 1 into cmd. */
static rxe_status_t record_piece(rxe_vk_t* vk, VkCommandBuffer cmd, uint32_t first, uint32_t count, rxe_error_t* err) {
  VkCommandBufferBeginInfo begin;
  VkResult result;
  uint32_t i;
  int timed = vk->query_pool != VK_NULL_HANDLE;
  memset(&begin, 0, sizeof(begin));
  begin.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO;
  begin.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
  result = vk->f.vkBeginCommandBuffer(cmd, &begin);
  if (result != VK_SUCCESS) return rxe_vk_fail(err, result, "vkBeginCommandBuffer");
  if (timed) vk->f.vkCmdResetQueryPool(cmd, vk->query_pool, 2u * first, 2u * count);
  for (i = first; i < first + count; ++i) {
    const rxe_vk_record_t* r = &vk->records[i];
    const rxe_vk_pipeline_t* k = &vk->kernels[r->kernel];
    vk->f.vkCmdBindPipeline(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, k->pipeline);
    vk->f.vkCmdBindDescriptorSets(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, k->layout, 0, 1, &vk->sets[i], 0, NULL);
    if (!k->fallback) {
      vk->f.vkCmdPushConstants(cmd, k->layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, 4u * k->push_words,
                               vk->words + r->first_word);
    }
    /* both at the bottom: the start is when the work before has finished */
    if (timed) vk->f.vkCmdWriteTimestamp(cmd, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, vk->query_pool, 2u * i);
    if (r->groups[0] > 0) vk->f.vkCmdDispatch(cmd, r->groups[0], r->groups[1], r->groups[2]);
    if (timed) vk->f.vkCmdWriteTimestamp(cmd, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, vk->query_pool, 2u * i + 1u);
    barrier(vk, cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT);
  }
  barrier(vk, cmd, VK_PIPELINE_STAGE_HOST_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
          VK_ACCESS_HOST_READ_BIT | VK_ACCESS_TRANSFER_READ_BIT);
  result = vk->f.vkEndCommandBuffer(cmd);
  if (result != VK_SUCCESS) return rxe_vk_fail(err, result, "vkEndCommandBuffer");
  return RXE_OK;
}

static rxe_status_t read_times(rxe_vk_t* vk, rxe_error_t* err) {
  uint32_t n = vk->num_records, i;
  uint64_t* stamps;
  uint64_t mask = vk->timestamp_bits >= 64 ? ~0ull : ((1ull << vk->timestamp_bits) - 1u);
  double period = vk->props.limits.timestampPeriod;
  VkResult result;
  vk->num_times = 0;
  if (vk->query_pool == VK_NULL_HANDLE || n == 0) {
    vk->num_times = n;
    for (i = 0; i < n; ++i) vk->times[i] = 0;
    return RXE_OK;
  }
  stamps = (uint64_t*)malloc(2u * n * sizeof(uint64_t));
  if (stamps == NULL) return rxe_error_set(err, RXE_ERR_NO_MEMORY, "out of memory for %d timestamps", (int64_t)(2 * n));
  result = vk->f.vkGetQueryPoolResults(vk->device, vk->query_pool, 0, 2u * n, 2u * n * sizeof(uint64_t), stamps,
                                       sizeof(uint64_t), VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT);
  if (result == VK_SUCCESS) {
    for (i = 0; i < n; ++i) vk->times[i] = (uint64_t)((double)((stamps[2 * i + 1] - stamps[2 * i]) & mask) * period + 0.5);
    vk->num_times = n;
  }
  free(stamps);
  if (result != VK_SUCCESS) return rxe_vk_fail(err, result, "vkGetQueryPoolResults");
  return RXE_OK;
}

rxe_status_t rxe_vk_submit(rxe_vk_t* vk, uint64_t timeout_ns, rxe_error_t* err) {
  uint64_t start = now_ns(), elapsed;
  uint32_t n, pieces, p;
  rxe_status_t s;
  if (vk == NULL) return rxe_error_set(err, RXE_ERR_NULL, "rxe_vk_submit: no context");
  if (!vk->recording) return rxe_error_set(err, RXE_ERR_PROTOCOL, "rxe_vk_submit without rxe_vk_begin");
  vk->recording = 0;
  vk->num_times = 0;
  n = vk->num_records;
  if (n == 0) return RXE_OK;
  pieces = (n + vk->per_submit - 1) / vk->per_submit;
  s = prepare_sets(vk, err);
  if (s == RXE_OK) s = prepare_params(vk, err);
  if (s == RXE_OK) s = write_sets(vk, err);
  if (s == RXE_OK) s = prepare_queries(vk, err);
  if (s == RXE_OK) s = rxe_vk_commands_reserve(vk, pieces + 1u, err); /* the last one stays for staging */
  for (p = 0; s == RXE_OK && p < pieces; ++p) {
    uint32_t first = p * vk->per_submit;
    uint32_t count = n - first < vk->per_submit ? n - first : vk->per_submit;
    VkResult result = vk->f.vkResetCommandBuffer(vk->commands[p], 0);
    if (result != VK_SUCCESS) return rxe_vk_fail(err, result, "vkResetCommandBuffer");
    s = record_piece(vk, vk->commands[p], first, count, err);
    if (s != RXE_OK) break;
    elapsed = now_ns() - start;
    s = rxe_vk_submit_one(vk, vk->commands[p], elapsed < timeout_ns ? timeout_ns - elapsed : 0u, "rxe_vk_submit", err);
    if (s == RXE_ERR_TIMEOUT) {
      return rxe_error_set(err, s, "rxe_vk_submit: the fence was not signalled within %d ns (submit %d of %d)",
                           (int64_t)timeout_ns, (int64_t)(p + 1), (int64_t)pieces);
    }
  }
  if (s == RXE_OK) s = read_times(vk, err);
  return s;
}

rxe_status_t rxe_vk_times(rxe_vk_t* vk, uint64_t* ns, uint32_t count) {
  if (vk == NULL || (ns == NULL && vk->num_times > 0)) return RXE_ERR_NULL;
  if (count < vk->num_times) return RXE_ERR_ARGUMENT_COUNT;
  if (vk->num_times > 0 && vk->timestamp_bits == 0) return RXE_ERR_DEVICE;
  if (vk->num_times > 0) memcpy(ns, vk->times, vk->num_times * sizeof(uint64_t));
  return RXE_OK;
}

uint32_t rxe_vk_dispatch_count(const rxe_vk_t* vk) { return vk ? vk->num_times : 0; }
