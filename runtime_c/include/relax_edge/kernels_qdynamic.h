/*
 * Integer matmuls with 32-bit outputs (kernels/qdynamic.c), through the int8
 * GEMM of kernels/qgemm.c and its packed weights (relax_edge/kernels_qint8.h):
 * ONNX's MatMulInteger with constant weights, and quantize_dynamic's whole
 * DynamicQuantizeLinear -> MatMulInteger -> Cast -> Mul (-> Add bias) chain
 * as one kernel. See relax_edge/op/qdynamic.py (matmul_integer,
 * dynamic_qdense) for their meaning and relax_edge/library/qdynamic.py for how
 * the compiler calls them.
 *
 * Weights: w_packed is rxe_lib_qdense_s8's layout of int8 weights v(n,k);
 * the weight of column n is v(n,k) - w_zero[n] (w_zero in [-128, 127]; the
 * compiler re-centres uint8 or per-column-offset weights into that form).
 * Without RXE_QDYN_W_ZERO the zero points are 0 and w_zero is not read.
 * 0 < k <= RXE_QDYN_MAX_K, so that every sum is exact in int32.
 *
 * Dynamic quantization (ONNX DynamicQuantizeLinear, uint8): over all m*k
 * values of x, lo = min(0, min x), hi = max(0, max x), scale = (hi == lo ? 1 :
 * hi - lo) / 255, zero = round_half_even(clamp(0 - lo / scale, 0, 255)),
 * q = clamp(round_half_even(x / scale) + zero, 0, 255), every step in float32
 * (a true division). NaN inputs give unspecified values.
 */
#ifndef RELAX_EDGE_KERNELS_QDYNAMIC_H_
#define RELAX_EDGE_KERNELS_QDYNAMIC_H_

#include <stdint.h>

#include "relax_edge/abi.h"

#ifdef __cplusplus
extern "C" {
#endif

#define RXE_QDYN_X_UNSIGNED 1 /* matmul_integer: x is uint8 (else int8) */
#define RXE_QDYN_W_ZERO 2     /* w_zero is read */
#define RXE_QDYN_BIAS 4       /* dynamic_qdense: bias is added */
#define RXE_QDYN_MAX_K 33025  /* k * 255 * 255 < 2^31 */
/* Bytes of scratch for rxe_lib_dynamic_qdense_f32: the quantized x. */
#define RXE_LIB_DYNAMIC_QDENSE_SCRATCH_BYTES(m, k) ((uint64_t)(m) * (uint64_t)(k))

/* scale and zero point of DynamicQuantizeLinear over x[0..count) (above). */
void rxe_qint8_dynamic_params(const float* x, int64_t count, float* out_scale, int32_t* out_zero);

/* out[i] = clamp(round_half_even(x[i] / scale) + zero, 0, 255) for i < count (zero in [0, 255]). */
void rxe_qint8_quantize_u8(const float* x, int64_t count, float scale, int32_t zero, uint8_t* out);

/* out (m,n) int32 = sum_k (x(m,k) - x_zero) * (v(n,k) - w_zero[n]); x (m,k) int8, or uint8 with
 * RXE_QDYN_X_UNSIGNED, row-major. */
/* stack: at most 3072 bytes: the GEMM's (rxe_qgemm_run_out32, qgemm.c) under a small frame. Measured
 * about 1050 (x86-64, portable C) to 2700 (x86-64 AVX-512). */
rxe_status_t rxe_lib_matmul_integer_i32(const void* x, const void* w_packed, const int32_t* w_zero, int32_t* out,
                                        int64_t m, int64_t n, int64_t k, int64_t x_zero, int64_t flags,
                                        rxe_error_t* err);

/* out (m,n) float = (float)acc(m,n) * (x_scale * w_scale[n]) (+ bias[n] with RXE_QDYN_BIAS), acc(m,n) =
 * sum_k (q(m,k) - zero) * (v(n,k) - w_zero[n]), q, x_scale and zero x (m,k) quantized dynamically (above):
 * the same float32 operations, in the same order, as the ONNX chain. scratch:
 * RXE_LIB_DYNAMIC_QDENSE_SCRATCH_BYTES(m, k) bytes (q). */
/* stack: at most 3072 bytes: the GEMM's (rxe_qgemm_run_out32, qgemm.c) under a small frame. Measured
 * about 1050 (x86-64, portable C) to 2700 (x86-64 AVX-512). */
rxe_status_t rxe_lib_dynamic_qdense_f32(const float* x, const void* w_packed, const int32_t* w_zero,
                                        const float* w_scale, const float* bias, float* out, void* scratch,
                                        int64_t m, int64_t n, int64_t k, int64_t flags, rxe_error_t* err);

#ifdef __cplusplus
}
#endif

#endif /* RELAX_EDGE_KERNELS_QDYNAMIC_H_ */
