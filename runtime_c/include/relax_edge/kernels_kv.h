/*
 * The KV-cache kernels (kernels/attention.c): a decoder's cache kept as state
 * of a fixed shape (kv_heads, max_context, head_dim) per cache tensor, batch 1,
 * positions [0, kv_len) valid. See relax_edge/op/kv_cache.py for their meaning
 * and relax_edge/library/kv_cache.py for how the compiler calls them.
 */
#ifndef RELAX_EDGE_KERNELS_KV_H_
#define RELAX_EDGE_KERNELS_KV_H_

#include "relax_edge/abi.h"

#ifdef __cplusplus
extern "C" {
#endif

/* state (kv_heads, max_context, head_dim) gets new (kv_heads, seq, head_dim)
 * at positions [offset, offset + seq); `out` is `state` (the result is the
 * state, in place). RXE_ERR_BOUND when the positions leave [0, max_context). */
/* stack: at most 256 bytes. Measured 96 (x86-64) and 72 (Cortex-M4). */
rxe_status_t rxe_lib_kv_append_f32(float* state, const float* new_positions, float* out, int64_t kv_heads,
                                   int64_t max_context, int64_t seq, int64_t head_dim, int64_t offset,
                                   rxe_error_t* err);

/* out (heads, seq, head_dim) = softmax(q k^T * scale[0] + mask) v over the
 * first kv_len positions of the states k, v (kv_heads, max_context, head_dim),
 * query head h reading KV head h / (heads / kv_heads). q is (heads, seq,
 * head_dim). With has_mask, the additive mask element of (head h, row i,
 * position j) is mask[h * mask_head_stride + i * mask_row_stride + j]
 * (strides 0 broadcast). One pass over the cache per row, with a running
 * maximum updated once per block of 8 positions (their weights in one
 * vector exp), the query heads of a KV head, and in prefill several of its
 * rows, together so that its cache is read once for them all (up to 16
 * heads x rows); with 4 or more of them and head_dim <= 64 (but on
 * microcontrollers) a block's keys are laid out by dimension once, so that
 * each member's 8 scores are head_dim vector multiply-adds, and the members'
 * scores, weights and weighted values are taken in three passes over the
 * block (independent chains); positions masked for every member are not
 * read, and a masked position's score is its mask whatever its key holds;
 * rows are split over the threads. At decode (seq = 1) with fewer rows than
 * the threads can share, the context is split too (flash-decoding): up to
 * RXE_KV_MAX_SPLITS shares of at least RXE_KV_SPLIT_MIN positions, each
 * with its own running maximum in `scratch`, then merged; scratch holds
 * RXE_KV_SCRATCH_FLOATS(kv_heads, heads / kv_heads, head_dim) floats. */
/* stack: at most 4800 bytes: the entry, then (on the caller's stack when one
 * thread runs the pool's work) attention_rows or attention_splits with
 * attend_members (the block's keys by dimension, up to 64 x 8 floats, and the
 * scores of up to 16 members). Measured 304 + 864 + 3552 (x86-64, -O2),
 * 304 + 784 + 3424 (aarch64) and 248 + 616 + 1088 (Cortex-M4). */
rxe_status_t rxe_lib_kv_attention_f32(const float* q, const float* k, const float* v, const float* mask,
                                      const float* scale, float* out, float* scratch, int64_t heads,
                                      int64_t kv_heads, int64_t seq, int64_t kv_len, int64_t max_context,
                                      int64_t head_dim, int64_t has_mask, int64_t mask_head_stride,
                                      int64_t mask_row_stride, rxe_error_t* err);

/* the split of the context at decode (relax_edge/library/kv_cache.py mirrors these) */
#define RXE_KV_MAX_SPLITS 8
#define RXE_KV_SPLIT_MIN 64
#define RXE_KV_GROUP_CHUNK 16
#define RXE_KV_SCRATCH_FLOATS(kv_heads, group, head_dim)                                               \
  ((kv_heads) * (((group) + RXE_KV_GROUP_CHUNK - 1) / RXE_KV_GROUP_CHUNK) * RXE_KV_MAX_SPLITS *          \
   ((group) < RXE_KV_GROUP_CHUNK ? (group) : RXE_KV_GROUP_CHUNK) * ((head_dim) + 4))

#ifdef __cplusplus
}
#endif
#endif /* RELAX_EDGE_KERNELS_KV_H_ */
