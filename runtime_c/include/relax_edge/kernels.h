/*
 * Library micro-kernels (runtime_c/kernels/) that generated host code calls
 * through call_extern. Each one has the calling convention of a generated
 * kernel: tensor pointers (inputs, then the output, then the scratch buffer
 * when the kernel declares one), then int64_t sizes, then the error record;
 * it returns a status. Scratch sizes and packed weight layouts are mirrored
 * in Python (relax_edge/library/kernels.py), which the memory planner and
 * the weight packer use.
 *
 * Activation codes (`act`): 0 none, 1 relu, 2 relu6 (clip to [0, 6]).
 *
 * The architecture path is chosen at compile time: aarch64 NEON
 * (__aarch64__), x86-64 AVX2+FMA (__AVX2__ && __FMA__), else generic C.
 *
 * Stack use: each "stack: at most N bytes" below bounds the largest sum of
 * -fstack-usage frames along any call path from the entry point through the
 * kernel sources (the .c files of runtime_c/kernels/; the frames of the
 * runtime's rxe_error_set and rxe_threads_parallel_for, at most 80 bytes, are left
 * to the margin), measured with
 * GCC 12 -O2 on x86-64 (generic C and AVX2+FMA), aarch64 (NEON) and
 * Cortex-M4F (generic C, boards/qemu-cortex-m4.yaml flags, RXE_NO_THREADS);
 * tests/library/test_stack_usage.py checks it. No kernel uses a VLA or
 * alloca. With threads, each worker of the pool runs the same tile loop on
 * its own stack, so every worker stack needs the bound too.
 */
#ifndef RELAX_EDGE_KERNELS_H_
#define RELAX_EDGE_KERNELS_H_

#include <stdint.h>

#include "relax_edge/abi.h"

#ifdef __cplusplus
extern "C" {
#endif

#define RXE_ACT_NONE 0
#define RXE_ACT_RELU 1
#define RXE_ACT_RELU6 2

/* Declarations of each kernel follow (see runtime_c/kernels/). */

/* ---- GEMM family (kernels/gemm.c, kernels/conv.c) ----
 * One register tile is RXE_GEMM_MR rows x RXE_GEMM_NR columns on every
 * architecture, so packed weights are the same for all targets (AVX-512
 * computes 2 x 2 such tiles at once: two adjacent column panels, two row
 * panels). The k dimension is blocked by RXE_GEMM_KC and the columns by
 * RXE_GEMM_NC; run-time packing works in one KC x NC block of scratch, shared
 * by all threads.
 * Each output element is computed by one thread in a fixed order: results
 * do not depend on the thread count. */
#define RXE_GEMM_MR 6
#define RXE_GEMM_NR 16
/* KC and NC may be set by a board's tuning table (relax_edge/tuning.py). */
#ifndef RXE_GEMM_KC
#define RXE_GEMM_KC 256
#endif
#ifndef RXE_GEMM_NC
#define RXE_GEMM_NC 512
#endif
/* Rows up to which rxe_lib_dense_f32 takes its matrix-vector path (gemv.c). */
#define RXE_GEMV_MAX_M 4

#define RXE_GEMM_MIN_(a, b) ((a) < (b) ? (a) : (b))
#define RXE_GEMM_ROUND_NR_(x) (((x) + RXE_GEMM_NR - 1) / RXE_GEMM_NR * RXE_GEMM_NR)
/* Bytes of scratch for packing a k x n matrix in KC x NC blocks. */
#define RXE_GEMM_SCRATCH_BYTES_(k, n) \
  ((uint64_t)4 * (uint64_t)RXE_GEMM_MIN_((k), RXE_GEMM_KC) * \
   (uint64_t)RXE_GEMM_MIN_(RXE_GEMM_ROUND_NR_(n), RXE_GEMM_NC))

/* c (m,n) = act(a (m,k) @ W (k,n) + bias (n,)), row-major; bias may be NULL.
 * w_packed: W in column panels of NR, panel j holding W[:, j*NR : j*NR+NR]
 * as k rows of NR floats (zero-padded past n): ceil(n/NR)*NR*k floats,
 * made at compile time by relax_edge.library.kernels.pack_dense_weights.
 * m is a run-time value: up to RXE_GEMV_MAX_M (4) rows (a decode step)
 * take the matrix-vector path (gemv.c), which streams each panel once for
 * all rows with the sums in registers; more rows take the blocked GEMM.
 * The two sum in different orders (last bits may differ). */
/* stack: at most 8000 bytes, nearly all of it compute_panels (gemm.c) at most
 * 7296: the MR x KC A micro-panel (6 KB) and a MR x NR partial tile (384 B)
 * on the stack. Measured 7104 (aarch64) to 7552 (Cortex-M4). With AVX-512
 * (x86-64 hosts only) compute_panels packs two micro-panels for its
 * 2MR x 2NR tile: 13456 there, 13888 in all (at most 14200). */
rxe_status_t rxe_lib_dense_f32(const float* a, const float* w_packed, const float* bias, float* c,
                               int64_t m, int64_t n, int64_t k, int64_t act, rxe_error_t* err);

/* For t < batch: c[t] (m,n) = a[t] (m,k) @ b[t] (k,n), row-major; a[t] at
 * a + t*a_batch_stride, b[t] at b + t*b_batch_stride (0: broadcast), c
 * contiguous. scratch: RXE_LIB_MATMUL_SCRATCH_BYTES(m, n, k) bytes (not
 * touched up to RXE_GEMV_MAX_M rows, whose matrix-vector path reads b in
 * place). */
#define RXE_LIB_MATMUL_SCRATCH_BYTES(m, n, k) RXE_GEMM_SCRATCH_BYTES_((k), (n))
/* stack: at most 8000 bytes, nearly all of it compute_panels (gemm.c) at most
 * 7296 (the 6 KB A micro-panel, as for dense). Measured 7200 (aarch64) to
 * 7600 (x86-64 AVX2); with AVX-512, 13984 (at most 14200, as for dense). */
rxe_status_t rxe_lib_matmul_f32(const float* a, const float* b, float* c, float* scratch, int64_t batch,
                                int64_t m, int64_t n, int64_t k, int64_t a_batch_stride,
                                int64_t b_batch_stride, rxe_error_t* err);

/* y (n,o,oh,ow) = act(conv2d(x (n,c,h,w), W (o,c/groups,kh,kw)) + bias (o,)),
 * NCHW; bias may be NULL. Output pixel (oy,ox) reads input rows
 * oy*stride_h - pad_top + ky*dil_h (columns likewise); reads outside the
 * input are zeros (padding at the bottom/right is implied by oh, ow).
 * w_packed: per group, the (o/groups) x (c/groups*kh*kw) weight matrix in
 * row panels of MR, panel r holding rows r*MR .. r*MR+MR-1 as K columns of
 * MR floats (zero-padded), made by pack_conv2d_weights. scratch:
 * RXE_LIB_CONV2D_SCRATCH_BYTES(c, kh, kw, oh, ow, groups) bytes. */
#define RXE_LIB_CONV2D_SCRATCH_BYTES(c, kh, kw, oh, ow, groups) \
  RXE_GEMM_SCRATCH_BYTES_((c) / (groups) * (kh) * (kw), (oh) * (ow))
/* stack: at most 8192 bytes, nearly all of it compute_panels (gemm.c) at most
 * 7296 (the 6 KB A micro-panel); the im2col packer pack_im2col (conv.c) at
 * most 2560 (a 2 KB row of NC floats) is on a shallower path. Measured
 * 7360 (aarch64) to 7824 (Cortex-M4); with AVX-512, 14128 (at most 14400,
 * as for dense). */
rxe_status_t rxe_lib_conv2d_f32(const float* x, const float* w_packed, const float* bias, float* y,
                                float* scratch, int64_t n, int64_t c, int64_t h, int64_t w, int64_t o,
                                int64_t kh, int64_t kw, int64_t oh, int64_t ow, int64_t stride_h,
                                int64_t stride_w, int64_t pad_top, int64_t pad_left, int64_t dil_h,
                                int64_t dil_w, int64_t groups, int64_t act, rxe_error_t* err);

/* ---- Depthwise convolution (kernels/depthwise.c) ----
 * y (n,c,oh,ow) = act(depthwise_conv2d(x (n,c,h,w), W (c,1,kh,kw)) + bias (c,)),
 * NCHW, W as is (no packing), bias may be NULL, no scratch. Output pixel
 * (oy,ox) reads input rows oy*stride_h - pad_top + ky*dil_h (columns
 * likewise); reads outside the input are zeros. Interior columns are
 * vectorized for strides 1 and 2; rows are split over the thread pool and
 * results do not depend on the thread count. */
/* stack: at most 9216 bytes on the vector paths, nearly all of it dw_row
 * (depthwise.c) at most 8448: the 8 KB zero-padded copy of the input rows
 * (ROW_BUFFER_FLOATS) for rows with border columns. Measured 8672 (aarch64)
 * and 8864 (x86-64 AVX2); the generic C path (Cortex-M4) has no row buffer:
 * 736 (x86-64) and 768 (Cortex-M4). */
rxe_status_t rxe_lib_depthwise_conv2d_f32(const float* x, const float* w, const float* bias, float* y, int64_t n,
                                          int64_t c, int64_t h, int64_t w_, int64_t kh, int64_t kw, int64_t oh,
                                          int64_t ow, int64_t stride_h, int64_t stride_w, int64_t pad_top,
                                          int64_t pad_left, int64_t dil_h, int64_t dil_w, int64_t act,
                                          rxe_error_t* err);

#include "relax_edge/kernels_detect.h" /* the data-dependent kernels (detect.c) */
#include "relax_edge/kernels_kv.h"     /* the KV-cache kernels (attention.c) */
#include "relax_edge/kernels_qdynamic.h" /* the 32-bit-output integer matmuls (qdynamic.c) */
#include "relax_edge/kernels_qeltwise.h" /* the int8 add and max pooling (qeltwise.c) */
#include "relax_edge/kernels_qint8.h"  /* the int8 kernels (qgemm.c, qconv.c) */
#include "relax_edge/kernels_quant.h"  /* the weight-only quantized kernels (matmul_nbits.c) */

#ifdef __cplusplus
}
#endif

#endif /* RELAX_EDGE_KERNELS_H_ */
