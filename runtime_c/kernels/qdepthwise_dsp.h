/*
 * The int8 depthwise convolution on a Cortex-M with the DSP extension
 * (qdepthwise_dsp.c): rxe_lib_qdepthwise_conv2d_s8 (qconv.c) hands its
 * checked arguments over where __ARM_FEATURE_DSP is defined and NEON is not.
 */
#ifndef RELAX_EDGE_QDEPTHWISE_DSP_H_
#define RELAX_EDGE_QDEPTHWISE_DSP_H_

#include "qgemm_internal.h"

#if defined(__ARM_FEATURE_DSP) && !defined(__ARM_NEON)
/* rxe_lib_qdepthwise_conv2d_s8's outputs (the same bits) for arguments it has checked (kh * kw <= 64,
 * pointers set, zero points and clamps in range, n, c, oh, ow > 0); scratch as large as
 * RXE_LIB_QDEPTHWISE_SCRATCH_BYTES (this path uses the planes without their spare row). */
void rxe_qint8_depthwise_dsp(const uint8_t* x, const int8_t* w, const int32_t* bias, const int32_t* multiplier,
                             const int32_t* shift, uint8_t* y, int16_t* scratch, int64_t n, int64_t c, int64_t h,
                             int64_t w_, int64_t kh, int64_t kw, int64_t oh, int64_t ow, int64_t stride_h,
                             int64_t stride_w, int64_t pad_top, int64_t pad_left, int64_t dil_h, int64_t dil_w,
                             int64_t x_zero, int64_t w_zero, int64_t out_zero, int64_t act_min, int64_t act_max,
                             int64_t dtypes);
#endif

#endif /* RELAX_EDGE_QDEPTHWISE_DSP_H_ */
