/*
 * int8 element-wise and pooling kernels (kernels/qeltwise.c): the residual
 * add of quantized networks and max pooling of int8 / uint8 tensors. See
 * relax_edge/op/quant_int8.py (qadd) and relax_edge/op/nn.py (max_pool2d)
 * for their meaning and relax_edge/library/qeltwise.py for how the compiler
 * calls them. Every path (AVX-512, AVX2, NEON, portable C) gives the same
 * bits; the work is split over the thread pool (threads.h) in units that do
 * not depend on the thread count.
 */
#ifndef RELAX_EDGE_KERNELS_QELTWISE_H_
#define RELAX_EDGE_KERNELS_QELTWISE_H_

#include <stdint.h>

#include "relax_edge/abi.h"

#ifdef __cplusplus
extern "C" {
#endif

#define RXE_QELT_A_UNSIGNED 1
#define RXE_QELT_B_UNSIGNED 2
#define RXE_QELT_OUT_UNSIGNED 4

/* out[i] = clamp(requant(sa + sb, q, shift) + out_zero, act_min, act_max), i < count, with
 * sa = requant((a[i] - a_zero) << 20, a_q, a_shift) and sb likewise (TFLite's int8 add; requant is
 * rdbpot(srdhm(acc * 2^max(shift, 0), q), max(-shift, 0)), the left shift saturating to int32).
 * a, b and out have `count` elements each (the same shape); dtypes: RXE_QELT_*_UNSIGNED bits. */
/* stack: at most 1024 bytes: no arrays, the frames of the thread pool's
 * task and its vector loop (spilled registers). Measured 600 (x86-64 AVX2). */
rxe_status_t rxe_lib_qadd_s8(const void* a, const void* b, void* out, int64_t count, int64_t a_zero, int64_t b_zero,
                             int64_t a_q, int64_t a_shift, int64_t b_q, int64_t b_shift, int64_t q, int64_t shift,
                             int64_t out_zero, int64_t act_min, int64_t act_max, int64_t dtypes, rxe_error_t* err);

/* y (n,c,oh,ow) = the max over each window of x (n,c,h,w), NCHW, int8 or uint8 (dtypes 1: uint8);
 * positions outside the input (padding, and past it in ceil mode) are ignored (the dtype's
 * minimum); a window wholly outside gives that minimum. */
/* stack: at most 1024 bytes: a 512-byte line of column maxima in
 * max_pool_task (qeltwise.c) and its frame. */
rxe_status_t rxe_lib_max_pool2d_s8(const void* x, void* y, int64_t n, int64_t c, int64_t h, int64_t w, int64_t kh,
                                   int64_t kw, int64_t oh, int64_t ow, int64_t stride_h, int64_t stride_w,
                                   int64_t pad_top, int64_t pad_left, int64_t dil_h, int64_t dil_w, int64_t dtypes,
                                   rxe_error_t* err);

#ifdef __cplusplus
}
#endif

#endif /* RELAX_EDGE_KERNELS_QELTWISE_H_ */
