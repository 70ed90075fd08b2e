/*
 * The weight-only quantized kernels (kernels/matmul_nbits.c): a matmul and an
 * embedding gather whose weights stay packed in blocks of 4- or 8-bit integers
 * with per-block float32 scales. See relax_edge/op/quant_weight.py for their
 * meaning (its numpy references are the definition) and
 * relax_edge/library/quant_weight.py for how the compiler calls them.
 *
 * Layout (the operators' own, read in place: no repacking at compile time):
 * - qweight uint8 (rows, n_blocks, block_size * bits / 8), n_blocks =
 *   ceil(k / block_size): row n holds output channel n's k weights; for 4 bits
 *   byte j of a block holds element 2j in its low nibble and 2j + 1 in its
 *   high one, for 8 bits byte j is element j; elements past k are padding
 *   and never read into a result;
 * - scales float32 (rows, n_blocks);
 * - zeros by zero_mode: 0 "default" (none; the zero point is 2^(bits-1)),
 *   1 "uint8" (uint8 zero points (rows, n_blocks): w = (q - zp) * s), 2
 *   "float" (float32 offsets m (rows, n_blocks): w = q * s + m, GGUF Q4_1).
 *   When there are none, any pointer may stand in (it is not read).
 *
 * Each weight is dequantized in registers exactly as the reference does it,
 * (float)(q - zp) * s, or q * s + m (a multiply, then an add), and never
 * stored as a dequantized copy of W: a decode step reads each packed byte
 * once. block_size is a power of two of at least 16; bits 4 or 8.
 *
 * Paths: x86-64 AVX-512 (F, BW, DQ + FMA: the decode path below), AVX2+FMA,
 * aarch64 NEON, else generic C (as kernels.h), and
 * also NEON on 32-bit ARMv7 (__ARM_NEON; multiply-adds unfused without VFPv4,
 * and ARMv7 NEON flushes subnormals to zero).
 * Threads split the output columns; every output element is computed by one
 * thread in a fixed order, so results do not depend on the thread count.
 */
#ifndef RELAX_EDGE_KERNELS_QUANT_H_
#define RELAX_EDGE_KERNELS_QUANT_H_

#include <stdint.h>

#include "relax_edge/abi.h"

#ifdef __cplusplus
extern "C" {
#endif

#define RXE_NBITS_ZERO_DEFAULT 0
#define RXE_NBITS_ZERO_UINT8 1
#define RXE_NBITS_ZERO_FLOAT 2

/* y (m, n) = x (m, k) @ W^T (+ bias (n,)) for W (n, k) in the packed layout
 * above; has_bias 0 leaves bias unread (any pointer may stand in).
 * m is a run-time value. Up to RXE_GEMV_MAX_M (4) rows (a decode step): each
 * row of W is streamed once for all rows of x, decoded 16 weights at a time
 * into vector registers, the sums in registers across blocks. More rows (a
 * prefill): a panel of 16 rows of W times 128 of k is dequantized once into a
 * stack buffer (8 KB) and multiplied into all m rows of x in register tiles of
 * 6 x 16. The two paths sum in different orders (last bits may differ).
 * With AVX-512 the decode path (4 bits with block_size >= 32, or 8 bits; m *
 * block_size <= 2048) folds the zero point out of the weights instead:
 * sum_j x_j (q_j - z) s = s sum_j x_j q_j - z s sum_j x_j (q s + m: s sum x q
 * + m sum x), the block sums of x computed once per call (per thread) into a
 * staged copy of x on the stack (8 KB; k in chunks when it does not fit), the
 * raw q converted to float, the scale applied once per block, four columns
 * per pass sharing x's loads. Its results stay within float32 summation-order
 * error of the reference (the tests: rtol 1e-4, atol 2e-6 * (max|y| + 1) *
 * sqrt(k), against the reference and float64), not bit-equal to it. */
/* stack: at most 11264 bytes, nearly all of it gemm_task (matmul_nbits.c) at most
 * 10240: the 8 KB dequantized panel, a 6 x 16 tile and (AVX2) 16 vectors of
 * W being transposed, on the prefill path. Measured 8992 (aarch64) to 9984
 * (x86-64 AVX2) for gemm_task; the decode path's gemv_task 744 (AVX2) to
 * 1288 (x86-64 generic C), with AVX-512 648 + 9416 (fast_task: the staged x). */
rxe_status_t rxe_lib_matmul_nbits_f32(const float* x, const uint8_t* qweight, const float* scales, const void* zeros,
                                      const float* bias, float* y, int64_t m, int64_t n, int64_t k, int64_t bits,
                                      int64_t block_size, int64_t zero_mode, int64_t has_bias, rxe_error_t* err);

/* The same with act="int8": each row of x is first quantized per block of
 * block_size to int8 with scale max|x| / 127 (round half to even), as the
 * reference does. Up to RXE_GEMV_MAX_M rows, the quantized rows (in scratch)
 * are multiplied by the packed weights in integer arithmetic, exact per
 * block (AVX2: vpmaddubsw on 4-bit weights, <= 15 x 127 so no pair of
 * products saturates, vpmaddwd on 8-bit ones widened to 16 bits; NEON: sdot
 * with the dotprod feature, else smull/smlal + sadalp; 8-bit weights widened),
 * then scaled: sum_b sx_b * s_b * (sum q * xq - zero * sum xq) (+ m_b * sx_b *
 * sum xq). More rows: x dequantized again into scratch and the f32 path.
 * scratch: RXE_LIB_MATMUL_NBITS_Q8_SCRATCH_BYTES(m, k, block_size) bytes. */
#define RXE_LIB_MATMUL_NBITS_Q8_SCRATCH_BYTES(m, k, block) \
  ((uint64_t)(m) * (4 * (uint64_t)(k) > ((uint64_t)(k) + (block) - 1) / (block) * ((block) + 8) \
                        ? 4 * (uint64_t)(k) : ((uint64_t)(k) + (block) - 1) / (block) * ((block) + 8)))
/* stack: at most 11264 bytes (rxe_lib_matmul_nbits_f32's, plus at most 352 of its own frame). */
rxe_status_t rxe_lib_matmul_nbits_q8_f32(const float* x, const uint8_t* qweight, const float* scales,
                                         const void* zeros, const float* bias, float* y, float* scratch, int64_t m,
                                         int64_t n, int64_t k, int64_t bits, int64_t block_size, int64_t zero_mode,
                                         int64_t has_bias, rxe_error_t* err);

/* out (count, k) = the dequantized rows indices[0 .. count) of the table
 * (rows, k) in the packed layout above; indices int32 (index_bits 32) or int64
 * (64), negative ones counting from the end as in numpy. RXE_ERR_INDEX when
 * an index is outside [-rows, rows). */
/* stack: at most 512 bytes. Measured 144 (aarch64) to 208 (x86-64). */
rxe_status_t rxe_lib_gather_nbits_f32(const uint8_t* qweight, const float* scales, const void* zeros,
                                      const void* indices, float* out, int64_t rows, int64_t count, int64_t k,
                                      int64_t bits, int64_t block_size, int64_t zero_mode, int64_t index_bits,
                                      rxe_error_t* err);

#ifdef __cplusplus
}
#endif
#endif /* RELAX_EDGE_KERNELS_QUANT_H_ */
