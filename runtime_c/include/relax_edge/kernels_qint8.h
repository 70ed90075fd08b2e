/*
 * The int8 kernels (kernels/qgemm.c, kernels/qconv.c and on a Cortex-M
 * kernels/qdepthwise_dsp.c): requantized integer GEMM, convolution and
 * depthwise convolution, each output rounded once from the exact rescaled
 * accumulator. See relax_edge/op/quant_int8.py (qdense, qconv2d) for
 * their meaning and relax_edge/library/qint8.py for how the compiler calls
 * them and packs their weights.
 *
 * Element types: x is int8, or uint8 when `dtypes` has RXE_QINT8_X_UNSIGNED;
 * the output is int8, or uint8 with RXE_QINT8_OUT_UNSIGNED. Weights are int8
 * (uint8 weights are stored as w - 128 at pack time, with w_zero - 128).
 * The accumulator of output (m, n) is
 *   acc = bias[n] + sum_k (x[m,k] - x_zero) * (w[n,k] - w_zero)
 * in int32, and the output is
 *   clamp(requant(acc, multiplier[n], shift[n]) + out_zero, act_min, act_max)
 * with requant(acc, q, shift) = acc * q * 2^(shift - 31) rounded to the
 * nearest integer, ties to even (rxe_qint8_requantize below;
 * requantize_accumulator in relax_edge/op/quant_int8.py): acc is first
 * saturated to int32, so |acc| <= 2^31, and q is below 2^31 in magnitude,
 * so the int64 product is exact (below 2^62); shift in [-31, 30] (others
 * are refused) makes the right shift 31 - shift one of [1, 62]. A shift > 0
 * (a multiplier of 1 or more) is a shorter right shift, nothing saturates
 * before the clamp (the scalar form's int32 result saturates). The vector
 * epilogues (32 x 32 -> 64-bit products, then the half-even shift) cover
 * columns with shift <= 0 and q != INT32_MIN, where the rounded value fits
 * int32; other columns take the scalar form. Every path gives the same
 * bits. 0 < k <= RXE_QINT8_MAX_K so that the int32 sums cannot overflow.
 *
 * Packed GEMM weights (relax_edge.library.qint8.pack_qdense_weights), for
 * n columns of k: first ceil(n/8)*8 int32 column sums sum_k w[n,k] (0 past
 * n), then ceil(n/8) panels of 8 columns, each ceil(k/4) groups of 32
 * bytes: column c of the panel, k index 4g+j at byte 4c+j (zeros past n
 * and k). That is the sdot / vpdpbusd layout; the widening paths read
 * the same bytes. The column sums fold x_zero into the bias at run time.
 *
 * Paths, chosen at compile time: x86-64 with AMX-INT8 on Linux (the
 * 8-row x 4-panel tile in tile registers, tdpbusd / tdpbssd over 64-byte k
 * steps, each panel's 16 groups loaded as packed, when k >= 64 and the
 * kernel grants the tile state; otherwise the VNNI tile below), x86-64
 * AVX512-VNNI+BW (vpdpbusd on
 * 512-bit registers, tiles of 8 rows x 4 panels, each register a k group
 * of two panels; the 256-bit tile for the last panels), AVX-VNNI or
 * AVX512-VNNI+VL (256-bit vpdpbusd), else AVX2 (int8 widened to int16, vpmaddwd: no saturation);
 * aarch64 with __ARM_FEATURE_DOTPROD (sdot); other NEON (aarch64, armv7:
 * vmull_s8 + vpadal, no saturation); Cortex-M with __ARM_FEATURE_DSP
 * (SXTB16 + SMLAD, tiles of 2 rows x 2 columns; the depthwise SMLAD over
 * pairs of taps, qdepthwise_dsp.c); else portable C. Every path gives
 * the same bits. The GEMM splits its row blocks (or, with fewer blocks than
 * threads, its panels) over the thread pool (threads.h) above 65536
 * multiply-adds; results do not depend on the thread count. Each worker
 * stack needs the bounds below too.
 */
#ifndef RELAX_EDGE_KERNELS_QINT8_H_
#define RELAX_EDGE_KERNELS_QINT8_H_

#include <stdint.h>

#include "relax_edge/abi.h"

#ifdef __cplusplus
extern "C" {
#endif

#define RXE_QINT8_X_UNSIGNED 1
#define RXE_QINT8_OUT_UNSIGNED 2
/* rxe_lib_qdepthwise_conv2d_s8 only: its scratch holds the phase planes alone (the compiler sized it so for a
 * target whose kernel never takes the channels-last path), so the channels-last path is not taken */
#define RXE_QINT8_DW_PLANES_ONLY 4
#define RXE_QINT8_NR 8     /* columns per weight panel */
#define RXE_QINT8_KG 4     /* k values per group */
#define RXE_QINT8_MAX_K 65536
/* Bytes of packed GEMM weights for n columns of k. */
#define RXE_QINT8_PACKED_BYTES(n, k) \
  ((((n) + 7) / 8) * 8 * 4 + (((n) + 7) / 8) * (((k) + 3) / 4) * 32)
/* Output pixels per block of rxe_lib_qconv2d_s8: whole output rows of up to
 * RXE_QCONV_PIXELS pixels, or RXE_QCONV_PIXELS columns of a wider row. */
#define RXE_QCONV_PIXELS 64
#define RXE_QCONV_BLOCK_COLS(ow) ((ow) < RXE_QCONV_PIXELS ? (ow) : RXE_QCONV_PIXELS)
#define RXE_QCONV_BLOCK_ROWS(oh, ow) \
  ((ow) < RXE_QCONV_PIXELS && RXE_QCONV_PIXELS / (ow) < (oh) ? RXE_QCONV_PIXELS / (ow) \
   : (ow) < RXE_QCONV_PIXELS ? (oh) : 1)
/* Bytes of scratch for rxe_lib_qconv2d_s8: a block's NHWC input slice, then
 * (but for a 1x1 kernel of stride 1) its im2col rows. */
#define RXE_LIB_QCONV2D_SCRATCH_BYTES(c, kh, kw, oh, ow, sh, sw, dh, dw, groups)                          \
  ((uint64_t)(((RXE_QCONV_BLOCK_ROWS(oh, ow) - 1) * (sh) + ((kh) - 1) * (dh) + 1) *                       \
              ((RXE_QCONV_BLOCK_COLS(ow) - 1) * (sw) + ((kw) - 1) * (dw) + 1) * ((c) / (groups))) +       \
   ((kh) == 1 && (kw) == 1 && (sh) == 1 && (sw) == 1                                                     \
        ? 0                                                                                             \
        : (uint64_t)(RXE_QCONV_BLOCK_ROWS(oh, ow) * RXE_QCONV_BLOCK_COLS(ow)) * ((c) / (groups) * (kh) * (kw))))

/* requant(acc, q, shift) of the contract, exactly, saturated to int32 (shifts outside [-31, 30]: 0 below,
 * saturated above). */
int32_t rxe_qint8_requantize(int32_t acc, int32_t q, int32_t shift);

/* out (m,n) = requantized x (m,k) @ W^T, x and out row-major; w_packed as
 * above; bias, multiplier, shift: n int32 each. */
/* stack: at most 3072 bytes: the tile of up to 8 x 32 int32 sums, their
 * vector registers and the epilogue's column terms in rxe_qgemm_run
 * (qgemm.c), through the thread pool's task. Measured 800 (Cortex-M4),
 * 1408 (x86-64 AVX2) to about 2400 (x86-64 AVX-512). */
rxe_status_t rxe_lib_qdense_s8(const void* x, const void* w_packed, const int32_t* bias, const int32_t* multiplier,
                               const int32_t* shift, void* out, int64_t m, int64_t n, int64_t k, int64_t x_zero,
                               int64_t w_zero, int64_t out_zero, int64_t act_min, int64_t act_max, int64_t dtypes,
                               rxe_error_t* err);

/* y (n,o,oh,ow) = requantized conv2d(x (n,c,h,w), W (o,c/groups,kh,kw)), NCHW.
 * Reads outside the input are x_zero (the real value 0). w_packed: per
 * group, the (o/groups) x (c/groups*kh*kw) matrix, k in the order (ky, kx,
 * ci), packed as for qdense, one after the other (each
 * RXE_QINT8_PACKED_BYTES(o/groups, c/groups*kh*kw)).
 * scratch: RXE_LIB_QCONV2D_SCRATCH_BYTES bytes. */
/* stack: at most 3584 bytes: the GEMM's (above) under the convolution's
 * frame. Measured 1080 (Cortex-M4), 1728 (x86-64 AVX2) to about 2700
 * (x86-64 AVX-512). */
rxe_status_t rxe_lib_qconv2d_s8(const void* x, const void* w_packed, const int32_t* bias, const int32_t* multiplier,
                                const int32_t* shift, void* y, void* scratch, int64_t n, int64_t c, int64_t h,
                                int64_t w, int64_t o, int64_t kh, int64_t kw, int64_t oh, int64_t ow,
                                int64_t stride_h, int64_t stride_w, int64_t pad_top, int64_t pad_left, int64_t dil_h,
                                int64_t dil_w, int64_t groups, int64_t x_zero, int64_t w_zero, int64_t out_zero,
                                int64_t act_min, int64_t act_max, int64_t dtypes, rxe_error_t* err);

/* Depthwise (groups == c == o): y (n,c,oh,ow), W (c,1,kh,kw) as c*kh*kw
 * int8 (uint8 weights stored as w - 128), per-channel requantization, up to
 * 64 taps. Two paths, by RXE_QDEPTHWISE_NHWC:
 * - small output planes (up to RXE_QDEPTHWISE_NHWC_PIXELS pixels, up to
 *   RXE_QDEPTHWISE_NHWC_TAPS taps): scratch holds one image transposed to
 *   NHWC bytes, the channels padded to 16 (h * w * round16(c) bytes); 16
 *   channels are the vector lanes and groups of 16 channels are split over
 *   the thread pool;
 * - else one channel's window as int16 x - x_zero, split by row and column
 *   phase (index % stride) into stride_h * stride_w planes of (oh +
 *   (kh-1)*dil_h/stride_h + 1) rows x (ow + (kw-1)*dil_w/stride_w) columns,
 *   so that every tap is a run over consecutive values (vectorized), in
 *   blocks of 256 outputs.
 * scratch: RXE_LIB_QDEPTHWISE_SCRATCH_BYTES bytes. */
#define RXE_QDEPTHWISE_NHWC_PIXELS 1024
#define RXE_QDEPTHWISE_NHWC_TAPS 25
#define RXE_QDEPTHWISE_NHWC(kh, kw, oh, ow) \
  ((oh) * (ow) <= RXE_QDEPTHWISE_NHWC_PIXELS && (kh) * (kw) <= RXE_QDEPTHWISE_NHWC_TAPS)
#define RXE_QDEPTHWISE_NHWC_BYTES(c, h, w) ((uint64_t)(h) * (uint64_t)(w) * (uint64_t)(((c) + 15) / 16 * 16))
#define RXE_QDEPTHWISE_PLANE_BYTES(kh, kw, oh, ow, sh, sw, dh, dw)                                             \
  ((uint64_t)(sh) * (uint64_t)(sw) * (uint64_t)((oh) + ((kh) - 1) * (dh) / (sh) + 1) *                       \
   (uint64_t)((ow) + ((kw) - 1) * (dw) / (sw)) * 2u)
/* the larger of the two where either may run (a Cortex-M with DSP takes the planes for every size; with
 * RXE_QINT8_DW_PLANES_ONLY in dtypes the planes alone are needed) */
#define RXE_LIB_QDEPTHWISE_SCRATCH_BYTES(c, h, w, kh, kw, oh, ow, sh, sw, dh, dw)                            \
  (RXE_QDEPTHWISE_NHWC(kh, kw, oh, ow) &&                                                                \
           RXE_QDEPTHWISE_NHWC_BYTES(c, h, w) > RXE_QDEPTHWISE_PLANE_BYTES(kh, kw, oh, ow, sh, sw, dh, dw)  \
       ? RXE_QDEPTHWISE_NHWC_BYTES(c, h, w)                                                              \
       : RXE_QDEPTHWISE_PLANE_BYTES(kh, kw, oh, ow, sh, sw, dh, dw))
/* stack: at most 8192 bytes: on the channels-last path the 25 x 16 int16
 * tap weights, 16 channels x 64 pixels of int32 sums, (AVX-512) nine
 * weight vectors and (AVX-512 VNNI) the 16 lanes' bias, multiplier and
 * shift in dw_group_task (qconv.c), under the requantization's frame
 * (measured 5872 to 7496 on x86-64, aarch64 and armv7); on the other, the 64 int32
 * tap weights, their 64 int64 offsets, a block of 256 int32 sums and their
 * 256 bytes in dw_planes, and the requantization's vectors; on a Cortex-M
 * with the DSP extension the tap tables and 128 int32 sums of
 * qdepthwise_dsp.c for every size (measured 2592). */
rxe_status_t rxe_lib_qdepthwise_conv2d_s8(const void* x, const void* w, const int32_t* bias,
                                          const int32_t* multiplier, const int32_t* shift, void* y, void* scratch,
                                          int64_t n, int64_t c, int64_t h, int64_t w_, int64_t kh, int64_t kw,
                                          int64_t oh, int64_t ow, int64_t stride_h, int64_t stride_w,
                                          int64_t pad_top, int64_t pad_left, int64_t dil_h, int64_t dil_w,
                                          int64_t x_zero, int64_t w_zero, int64_t out_zero, int64_t act_min,
                                          int64_t act_max, int64_t dtypes, rxe_error_t* err);

#ifdef __cplusplus
}
#endif

#endif /* RELAX_EDGE_KERNELS_QINT8_H_ */
