/*
 * Library kernels with data-dependent result sizes (runtime_c/kernels/detect.c),
 * called through call_extern (relax_edge/library/data_dependent.py mirrors
 * these contracts and their scratch sizes).
 *
 * Each writes its compact result, laid out for the count it found, into an
 * output buffer that the memory plan sized at the result's capacity, and the
 * count into *out_count; the generated host code then checks the count
 * against the capacity and binds it as a size variable (RXE_ABI_VERSION 3,
 * abi.h). Pointers: inputs, output, out_count, then scratch; then the
 * int64_t sizes; then err. Stack: at most 256 bytes each, no VLA or alloca.
 */
#ifndef RELAX_EDGE_KERNELS_DETECT_H_
#define RELAX_EDGE_KERNELS_DETECT_H_

#include <stdint.h>

#include "relax_edge/abi.h"

#ifdef __cplusplus
extern "C" {
#endif

/* out (rank, count) int64 = the coordinates of x's non-zero elements in
 * row-major order (ONNX NonZero); x has dims d0..d[rank-1] (the rest 1),
 * numel elements. f32/f64 test the value (-0.0 is zero, NaN is not), h16
 * the 15 value bits of a float16 or bfloat16, b8..b64 the bits of any
 * integer or bool of that width (x: T elements). */
#define RXE_LIB_NONZERO_DECL(SUFFIX, T)                                                              \
  rxe_status_t rxe_lib_nonzero_##SUFFIX(const void* x, int64_t* out, int64_t* out_count, int64_t numel, \
                                        int64_t rank, int64_t d0, int64_t d1, int64_t d2, int64_t d3, \
                                        int64_t d4, int64_t d5, int64_t d6, int64_t d7, rxe_error_t* err)
RXE_LIB_NONZERO_DECL(f32, float);
RXE_LIB_NONZERO_DECL(f64, double);
RXE_LIB_NONZERO_DECL(h16, uint16_t);
RXE_LIB_NONZERO_DECL(b8, uint8_t);
RXE_LIB_NONZERO_DECL(b16, uint16_t);
RXE_LIB_NONZERO_DECL(b32, uint32_t);
RXE_LIB_NONZERO_DECL(b64, uint64_t);

/* Greedy non-max suppression (ONNX NonMaxSuppression, ONNX Runtime's order):
 * boxes (batch, n, 4), scores (batch, classes, n); thresholds = {iou,
 * score, 1 when there is a score threshold else 0}. out (count, 3) int64
 * rows (batch, class, box): per batch, per class, the kept boxes by score
 * descending (ties by the lower box index), at most max_output per class; a
 * box is kept when no kept box of its class overlaps it by IoU > iou.
 * center: 0 boxes as (y1, x1, y2, x2), 1 as (x_center, y_center, w, h).
 * Capacity: batch * classes * min(n, max_output) rows.
 * scratch: RXE_LIB_NMS_SCRATCH_BYTES(n) bytes. */
#define RXE_LIB_NMS_SCRATCH_BYTES(n) ((uint64_t)(n) * 16u)
rxe_status_t rxe_lib_nms_f32(const float* boxes, const float* scores, const float* thresholds, int64_t* out,
                             int64_t* out_count, void* scratch, int64_t batch, int64_t classes, int64_t n,
                             int64_t max_output, int64_t center, rxe_error_t* err);

/* ONNX Unique of x viewed as (outer, n, inner), the slices x[:, i, :]
 * compared as rows in row-major order (the whole tensor flattened: outer =
 * inner = 1). which: 0 the unique slices (outer, count, inner) of x's type,
 * 1 the index of each one's first occurrence (count,), 2 the inverse
 * indices (n,), 3 the counts (count,), all int64 but the values; sorted: 1
 * ascending (NaN last, NaNs equal), 0 in order of first occurrence.
 * scratch: RXE_LIB_UNIQUE_SCRATCH_BYTES(n) bytes. */
#define RXE_LIB_UNIQUE_SCRATCH_BYTES(n) ((uint64_t)(n) * 40u)
#define RXE_LIB_UNIQUE_DECL(SUFFIX, T)                                                               \
  rxe_status_t rxe_lib_unique_##SUFFIX(const T* x, void* out, int64_t* out_count, void* scratch,     \
                                       int64_t outer, int64_t n, int64_t inner, int64_t which,       \
                                       int64_t sorted, rxe_error_t* err)
RXE_LIB_UNIQUE_DECL(f32, float);
RXE_LIB_UNIQUE_DECL(f64, double);
RXE_LIB_UNIQUE_DECL(i8, int8_t);
RXE_LIB_UNIQUE_DECL(i16, int16_t);
RXE_LIB_UNIQUE_DECL(i32, int32_t);
RXE_LIB_UNIQUE_DECL(i64, int64_t);
RXE_LIB_UNIQUE_DECL(u8, uint8_t);
RXE_LIB_UNIQUE_DECL(u16, uint16_t);
RXE_LIB_UNIQUE_DECL(u32, uint32_t);
RXE_LIB_UNIQUE_DECL(u64, uint64_t);

#ifdef __cplusplus
}
#endif
#endif /* RELAX_EDGE_KERNELS_DETECT_H_ */
