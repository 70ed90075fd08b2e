/* Storage buffers: device-local and host-visible memory where the device has
 * it (mapped, copied with memcpy), else device-local memory written and read
 * through a staging buffer and a copy on the queue. */
#include <stdlib.h>
#include <string.h>

#include "vk_internal.h"

#define STAGING_TIMEOUT_NS 10000000000ull

static int find_memory(const rxe_vk_t* vk, uint32_t type_bits, VkMemoryPropertyFlags wanted, uint32_t* out) {
  uint32_t i;
  for (i = 0; i < vk->memory.memoryTypeCount; ++i) {
    if ((type_bits & (1u << i)) && (vk->memory.memoryTypes[i].propertyFlags & wanted) == wanted) {
      *out = i;
      return 1;
    }
  }
  return 0;
}

static void buffer_destroy(rxe_vk_t* vk, rxe_vk_buffer_t* b) {
  if (b->mapped) vk->f.vkUnmapMemory(vk->device, b->memory);
  if (b->buffer) vk->f.vkDestroyBuffer(vk->device, b->buffer, NULL);
  if (b->memory) vk->f.vkFreeMemory(vk->device, b->memory, NULL);
  free(b);
}

rxe_status_t rxe_vk_buffer_create(rxe_vk_t* vk, uint64_t bytes, int host_visible, rxe_vk_buffer_t** out,
                                  rxe_error_t* err) {
  const VkMemoryPropertyFlags host = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
  const VkMemoryPropertyFlags local = VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT;
  VkBufferCreateInfo info;
  VkMemoryAllocateInfo alloc;
  VkMemoryRequirements req;
  VkResult result = VK_ERROR_OUT_OF_DEVICE_MEMORY;
  rxe_vk_buffer_t* b = (rxe_vk_buffer_t*)calloc(1, sizeof(*b));
  uint32_t type;
  int mapped = 0;
  if (b == NULL) return rxe_error_set(err, RXE_ERR_NO_MEMORY, "out of host memory for a buffer");
  b->bytes = bytes;
  memset(&info, 0, sizeof(info));
  info.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO;
  info.size = (bytes + 3u) & ~(uint64_t)3u;
  info.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT;
  info.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
  result = vk->f.vkCreateBuffer(vk->device, &info, NULL, &b->buffer);
  if (result != VK_SUCCESS) {
    buffer_destroy(vk, b);
    return rxe_vk_fail(err, result, "vkCreateBuffer");
  }
  vk->f.vkGetBufferMemoryRequirements(vk->device, b->buffer, &req);
  memset(&alloc, 0, sizeof(alloc));
  alloc.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO;
  alloc.allocationSize = req.size;
  result = VK_ERROR_OUT_OF_DEVICE_MEMORY;
  /* in order of preference: device-local and mapped, mapped (staging or forced), device-local */
  if (!host_visible && !vk->force_staging && find_memory(vk, req.memoryTypeBits, host | local, &type)) {
    alloc.memoryTypeIndex = type;
    result = vk->f.vkAllocateMemory(vk->device, &alloc, NULL, &b->memory);
    mapped = result == VK_SUCCESS;
  }
  if (result != VK_SUCCESS && host_visible && find_memory(vk, req.memoryTypeBits, host, &type)) {
    alloc.memoryTypeIndex = type;
    result = vk->f.vkAllocateMemory(vk->device, &alloc, NULL, &b->memory);
    mapped = result == VK_SUCCESS;
  }
  if (result != VK_SUCCESS && !host_visible && find_memory(vk, req.memoryTypeBits, local, &type)) {
    alloc.memoryTypeIndex = type;
    result = vk->f.vkAllocateMemory(vk->device, &alloc, NULL, &b->memory);
  }
  if (result != VK_SUCCESS) {
    buffer_destroy(vk, b);
    if (result == VK_ERROR_OUT_OF_DEVICE_MEMORY || result == VK_ERROR_OUT_OF_HOST_MEMORY) {
      return rxe_error_set(err, RXE_ERR_NO_MEMORY, "out of device memory for a buffer of %d bytes", (int64_t)bytes);
    }
    return rxe_vk_fail(err, result, "vkAllocateMemory");
  }
  result = vk->f.vkBindBufferMemory(vk->device, b->buffer, b->memory, 0);
  if (result == VK_SUCCESS && mapped) result = vk->f.vkMapMemory(vk->device, b->memory, 0, VK_WHOLE_SIZE, 0, &b->mapped);
  if (result != VK_SUCCESS) {
    buffer_destroy(vk, b);
    return rxe_vk_fail(err, result, mapped ? "vkMapMemory" : "vkBindBufferMemory");
  }
  *out = b;
  return RXE_OK;
}

rxe_status_t rxe_vk_buffer_new(rxe_vk_t* vk, uint64_t bytes, rxe_vk_buffer_t** out, rxe_error_t* err) {
  if (vk == NULL || out == NULL) return rxe_error_set(err, RXE_ERR_NULL, "rxe_vk_buffer_new: no context or output");
  *out = NULL;
  if (bytes == 0) return rxe_error_set(err, RXE_ERR_BOUND, "rxe_vk_buffer_new: a buffer needs at least one byte");
  return rxe_vk_buffer_create(vk, bytes, 0, out, err);
}

void rxe_vk_buffer_free(rxe_vk_t* vk, rxe_vk_buffer_t* b) {
  if (vk == NULL || b == NULL) return;
  if (vk->pending) vk->f.vkDeviceWaitIdle(vk->device);
  buffer_destroy(vk, b);
}

int32_t rxe_vk_buffer_mapped(const rxe_vk_buffer_t* b) { return b != NULL && b->mapped != NULL; }

static rxe_status_t check_range(rxe_vk_t* vk, rxe_vk_buffer_t* b, uint64_t offset, const void* host, uint64_t bytes,
                                const char* what, rxe_error_t* err) {
  if (vk == NULL || b == NULL || (host == NULL && bytes > 0)) return rxe_error_set(err, RXE_ERR_NULL, "%s: a NULL argument", what);
  if (offset > b->bytes || bytes > b->bytes - offset) {
    return rxe_error_set(err, RXE_ERR_BOUND, "%s: bytes %d..%d are outside the buffer of %d bytes", what,
                         (int64_t)offset, (int64_t)(offset + bytes), (int64_t)b->bytes);
  }
  return rxe_vk_idle_check(vk, what, err);
}

/* Copy between a device-local buffer and a staging buffer, with the barriers
 * that order it against the compute work before and after. */
static rxe_status_t staged_copy(rxe_vk_t* vk, rxe_vk_buffer_t* b, uint64_t offset, rxe_vk_buffer_t* staging,
                                uint64_t bytes, int to_device, rxe_error_t* err) {
  VkCommandBuffer cmd = vk->commands[vk->num_commands - 1];
  VkCommandBufferBeginInfo begin;
  VkBufferCopy region;
  VkMemoryBarrier before, after;
  VkResult result;
  memset(&begin, 0, sizeof(begin));
  begin.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO;
  begin.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
  result = vk->f.vkBeginCommandBuffer(cmd, &begin);
  if (result != VK_SUCCESS) return rxe_vk_fail(err, result, "vkBeginCommandBuffer");
  memset(&before, 0, sizeof(before));
  before.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER;
  before.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_SHADER_READ_BIT;
  before.dstAccessMask = VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
  vk->f.vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_PIPELINE_STAGE_TRANSFER_BIT, 0, 1, &before,
                             0, NULL, 0, NULL);
  region.srcOffset = to_device ? 0 : offset;
  region.dstOffset = to_device ? offset : 0;
  region.size = bytes;
  vk->f.vkCmdCopyBuffer(cmd, to_device ? staging->buffer : b->buffer, to_device ? b->buffer : staging->buffer, 1,
                        &region);
  memset(&after, 0, sizeof(after));
  after.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER;
  after.srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT;
  after.dstAccessMask = to_device ? (VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT) : VK_ACCESS_HOST_READ_BIT;
  vk->f.vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_TRANSFER_BIT,
                             to_device ? VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT : VK_PIPELINE_STAGE_HOST_BIT, 0, 1,
                             &after, 0, NULL, 0, NULL);
  result = vk->f.vkEndCommandBuffer(cmd);
  if (result != VK_SUCCESS) return rxe_vk_fail(err, result, "vkEndCommandBuffer");
  return rxe_vk_submit_one(vk, cmd, STAGING_TIMEOUT_NS, to_device ? "a staging write" : "a staging read", err);
}

/* One write or read through a staging buffer made for it. */
static rxe_status_t staged(rxe_vk_t* vk, rxe_vk_buffer_t* b, uint64_t offset, void* host, uint64_t bytes,
                           int to_device, rxe_error_t* err) {
  rxe_vk_buffer_t* staging = NULL;
  rxe_status_t s;
  if (bytes == 0) return RXE_OK;
  s = rxe_vk_buffer_create(vk, bytes, 1, &staging, err);
  if (s != RXE_OK) return s;
  if (to_device) memcpy(staging->mapped, host, bytes);
  s = staged_copy(vk, b, offset, staging, bytes, to_device, err);
  if (s == RXE_OK && !to_device) memcpy(host, staging->mapped, bytes);
  if (vk->pending) vk->f.vkDeviceWaitIdle(vk->device); /* the copy must end before its buffer goes */
  vk->pending = 0;
  buffer_destroy(vk, staging);
  return s;
}

rxe_status_t rxe_vk_buffer_write(rxe_vk_t* vk, rxe_vk_buffer_t* b, uint64_t offset, const void* src, uint64_t bytes,
                                 rxe_error_t* err) {
  rxe_status_t s = check_range(vk, b, offset, src, bytes, "rxe_vk_buffer_write", err);
  if (s != RXE_OK) return s;
  if (b->mapped) {
    memcpy((uint8_t*)b->mapped + offset, src, bytes);
    return RXE_OK;
  }
  return staged(vk, b, offset, (void*)src, bytes, 1, err);
}

rxe_status_t rxe_vk_buffer_read(rxe_vk_t* vk, rxe_vk_buffer_t* b, uint64_t offset, void* dst, uint64_t bytes,
                                rxe_error_t* err) {
  rxe_status_t s = check_range(vk, b, offset, dst, bytes, "rxe_vk_buffer_read", err);
  if (s != RXE_OK) return s;
  if (b->mapped) {
    memcpy(dst, (const uint8_t*)b->mapped + offset, bytes);
    return RXE_OK;
  }
  return staged(vk, b, offset, dst, bytes, 0, err);
}
