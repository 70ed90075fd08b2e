/* The optional pipeline cache file (rxe_vk_options_t.pipeline_cache or
 * $RXE_VK_PIPELINE_CACHE): read before rxe_vk_load creates its pipelines,
 * written after.
 *
 * The file is a 16-byte frame and the driver's data:
 *   bytes 0-7   "RXVKPC1\0"
 *   bytes 8-11  the data's size in bytes (little-endian)
 *   bytes 12-15 FNV-1a of the data (little-endian)
 *   bytes 16-   vkGetPipelineCacheData's bytes, which begin with
 *               VkPipelineCacheHeaderVersionOne (header size, version,
 *               vendorID, deviceID, pipelineCacheUUID).
 * Nothing reaches the driver unless the frame, the checksum and the
 * driver's header all match this device: a short, corrupt, truncated or
 * foreign file is ignored (the text says why) and replaced. The file is
 * written to PATH.tmp.PID and renamed over PATH, so a reader never sees a
 * half-written one; a file that cannot be written leaves the load as it
 * is, with the reason in the text. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "vk_internal.h"

#define FRAME_BYTES 16u
#define VK_HEADER_BYTES 32u
#define MAX_CACHE_BYTES (256u << 20)
static const char frame_magic[8] = {'R', 'X', 'V', 'K', 'P', 'C', '1', '\0'};

static uint32_t fnv1a(const uint8_t* p, size_t n) {
  uint32_t h = 2166136261u;
  size_t i;
  for (i = 0; i < n; ++i) h = (h ^ p[i]) * 16777619u;
  return h;
}

static uint32_t le32(const uint8_t* p) {
  return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

static void put_le32(uint8_t* p, uint32_t v) {
  p[0] = (uint8_t)v;
  p[1] = (uint8_t)(v >> 8);
  p[2] = (uint8_t)(v >> 16);
  p[3] = (uint8_t)(v >> 24);
}

/* The text: "pipeline cache PATH: WHAT[DETAIL]". */
static void note(rxe_vk_t* vk, const char* what, const char* detail) {
  snprintf(vk->cache_text, sizeof(vk->cache_text), "pipeline cache %s: %s%s", vk->cache_path, what, detail);
}

/* More text after what is there. */
static void note_more(rxe_vk_t* vk, const char* what, const char* detail) {
  size_t used = strlen(vk->cache_text);
  snprintf(vk->cache_text + used, sizeof(vk->cache_text) - used, "%s%s", what, detail);
}

/* Why `data` (n bytes, the frame removed) is not for this device, or NULL. */
static const char* foreign(const rxe_vk_t* vk, const uint8_t* data, size_t n, char* why, size_t why_bytes) {
  uint32_t header, version, vendor, device;
  if (n < VK_HEADER_BYTES) return "the driver's header is missing";
  header = le32(data);
  version = le32(data + 4);
  vendor = le32(data + 8);
  device = le32(data + 12);
  if (header < VK_HEADER_BYTES || header > n) return "the driver's header size is out of range";
  if (version != (uint32_t)VK_PIPELINE_CACHE_HEADER_VERSION_ONE) return "the driver's header version is unknown";
  if (vendor != vk->props.vendorID || device != vk->props.deviceID) {
    snprintf(why, why_bytes, "made for vendor 0x%x device 0x%x, this is vendor 0x%x device 0x%x", vendor, device,
             vk->props.vendorID, vk->props.deviceID);
    return why;
  }
  if (memcmp(data + 16, vk->props.pipelineCacheUUID, VK_UUID_SIZE) != 0) {
    return "made by another driver build (its pipelineCacheUUID differs)";
  }
  return NULL;
}

void rxe_vk_cache_read(rxe_vk_t* vk) {
  FILE* f;
  long size;
  uint8_t* bytes;
  const char* bad = NULL;
  char why[160];
  uint32_t n;
  free(vk->cache_data);
  vk->cache_data = NULL;
  vk->cache_bytes = 0;
  if (vk->cache_path == NULL) return;
  f = fopen(vk->cache_path, "rb");
  if (f == NULL) {
    vk->cache_state = RXE_VK_CACHE_CREATED;
    note(vk, "no file yet", "");
    return;
  }
  size = (fseek(f, 0, SEEK_END) == 0) ? ftell(f) : -1L;
  if (size < 0 || fseek(f, 0, SEEK_SET) != 0) bad = "cannot be read";
  else if ((unsigned long)size < FRAME_BYTES) bad = "is too short to be one";
  else if ((unsigned long)size > MAX_CACHE_BYTES) bad = "is larger than 256 MiB";
  bytes = bad ? NULL : (uint8_t*)malloc((size_t)size);
  if (!bad && bytes == NULL) bad = "does not fit in memory";
  if (!bad && fread(bytes, 1, (size_t)size, f) != (size_t)size) bad = "cannot be read";
  fclose(f);
  if (!bad && memcmp(bytes, frame_magic, sizeof(frame_magic)) != 0) bad = "is not a relax_edge pipeline cache";
  n = bad ? 0u : le32(bytes + 8);
  if (!bad && n != (uint32_t)size - FRAME_BYTES) bad = "is truncated or padded (its frame gives another size)";
  if (!bad && fnv1a(bytes + FRAME_BYTES, n) != le32(bytes + 12)) bad = "is corrupt (its checksum does not match)";
  if (!bad) bad = foreign(vk, bytes + FRAME_BYTES, n, why, sizeof(why));
  if (bad) {
    free(bytes);
    vk->cache_state = RXE_VK_CACHE_REJECTED;
    note(vk, "ignored, the file ", bad);
    return;
  }
  memmove(bytes, bytes + FRAME_BYTES, n); /* the driver's data alone */
  vk->cache_data = bytes;
  vk->cache_bytes = n;
  vk->cache_state = RXE_VK_CACHE_USED;
  note(vk, "used", "");
}

/* The data at FRAME_BYTES into `bytes` written as the cache file, atomically. */
static int write_file(rxe_vk_t* vk, uint8_t* bytes, size_t n, char* why, size_t why_bytes) {
  char* tmp;
  FILE* f;
  int ok;
  size_t len = strlen(vk->cache_path) + 32u;
  memcpy(bytes, frame_magic, sizeof(frame_magic));
  put_le32(bytes + 8, (uint32_t)n);
  put_le32(bytes + 12, fnv1a(bytes + FRAME_BYTES, n));
  tmp = (char*)malloc(len);
  if (tmp == NULL) {
    snprintf(why, why_bytes, "out of memory");
    return 0;
  }
  snprintf(tmp, len, "%s.tmp.%ld", vk->cache_path, (long)getpid());
  f = fopen(tmp, "wb");
  if (f == NULL) {
    snprintf(why, why_bytes, "cannot create %s: %s", tmp, strerror(errno));
    free(tmp);
    return 0;
  }
  ok = fwrite(bytes, 1, FRAME_BYTES + n, f) == FRAME_BYTES + n;
  ok = (fflush(f) == 0) && ok;
  ok = (fclose(f) == 0) && ok;
  if (!ok) snprintf(why, why_bytes, "cannot write %s: %s", tmp, strerror(errno));
  if (ok && rename(tmp, vk->cache_path) != 0) {
    snprintf(why, why_bytes, "cannot rename %s over it: %s", tmp, strerror(errno));
    ok = 0;
  }
  if (!ok) remove(tmp);
  free(tmp);
  return ok;
}

void rxe_vk_cache_write(rxe_vk_t* vk, VkPipelineCache cache) {
  size_t n = 0;
  uint8_t* bytes = NULL;
  char why[RXE_VK_CACHE_TEXT_BYTES / 2];
  int failed = 1;
  if (vk->cache_path == NULL || cache == VK_NULL_HANDLE) return;
  if (vk->f.vkGetPipelineCacheData(vk->device, cache, &n, NULL) != VK_SUCCESS || n == 0 || n > MAX_CACHE_BYTES) {
    note_more(vk, "; not written: ", "the driver gave no data");
  } else if ((bytes = (uint8_t*)malloc(FRAME_BYTES + n)) == NULL) {
    note_more(vk, "; not written: ", "out of memory");
  } else if (vk->f.vkGetPipelineCacheData(vk->device, cache, &n, bytes + FRAME_BYTES) != VK_SUCCESS) {
    note_more(vk, "; not written: ", "the driver gave no data");
  } else if (vk->cache_state == RXE_VK_CACHE_USED && n == vk->cache_bytes &&
             memcmp(bytes + FRAME_BYTES, vk->cache_data, n) == 0) {
    note_more(vk, " (unchanged)", "");
    failed = 0;
  } else if (write_file(vk, bytes, n, why, sizeof(why))) {
    snprintf(why, sizeof(why), "; written (%d bytes)", (int)(FRAME_BYTES + n));
    note_more(vk, why, "");
    vk->cache_written = 1;
    failed = 0;
  } else {
    note_more(vk, "; not written: ", why);
  }
  free(bytes);
  /* a file that was ignored, or could not be written, is worth a line on stderr */
  if (failed || vk->cache_state == RXE_VK_CACHE_REJECTED) fprintf(stderr, "relax_edge: %s\n", vk->cache_text);
}

int32_t rxe_vk_cache_state(const rxe_vk_t* vk) { return vk ? vk->cache_state : RXE_VK_CACHE_NONE; }
const char* rxe_vk_cache_text(const rxe_vk_t* vk) { return vk ? vk->cache_text : ""; }
