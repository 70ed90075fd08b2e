/*
 * The requantized int8 GEMM driver shared by rxe_lib_qdense_s8 and the
 * convolutions (qconv.c): out(m, n) = requantized sum_k x(m,k) w(n,k), w
 * packed as in relax_edge/kernels_qint8.h, x rows of bytes (row m at x +
 * m*ldx), the output byte of (m, n) at out + m*ldm + n*ldn.
 * x bytes are int8 after `flip` (0x80 per byte for uint8 x, else 0); xz and
 * wz are the zero points in that signed space.
 */
#ifndef RELAX_EDGE_QGEMM_INTERNAL_H_
#define RELAX_EDGE_QGEMM_INTERNAL_H_

#include "relax_edge/kernels_qint8.h"

typedef struct {
  const uint8_t* x;
  int64_t ldx;
  const uint8_t* w_packed;
  int64_t m, n, k;
  uint32_t flip;
  int32_t xz, wz;
  const int32_t* bias;
  const int32_t* multiplier;
  const int32_t* shift;
  uint8_t* out;
  int64_t ldm, ldn;
  int32_t out_zero, act_min, act_max;
} rxe_qgemm_t;

void rxe_qgemm_run(const rxe_qgemm_t* g);

/* The 32-bit output mode of the same GEMM (rxe_qgemm_run_out32): each output is the exact sum
 *   acc(m, n) = sum_k (x(m,k) - xz) * (w(n,k) - wz_n)
 * with wz_n = wz[n] (per column, signed space), or 0 when wz is NULL (g->wz must be 0 then), stored as int32 at
 * out_i32 + m*ldm + n when out_i32 is set, else as the float
 *   (float)acc * (x_scale * w_scale[n])  (+ bias[n] when bias is set; two float32 roundings, no fma)
 * at out_f32 + m*ldm + n. g's bias, multiplier, shift, out, ldm, ldn, out_zero and clamp are not read.
 * The caller keeps k * 255 * 255 below 2^31 (acc exact in int32). */
typedef struct {
  const int32_t* wz;
  int32_t* out_i32;
  float* out_f32;
  float x_scale;
  const float* w_scale;
  const float* bias;
  int64_t ldm;
} rxe_qgemm_out32_t;

void rxe_qgemm_run_out32(const rxe_qgemm_t* g, const rxe_qgemm_out32_t* o);

/* acc saturated to int32 (the contract saturates an accumulator beyond int32
 * before it requantizes). */
int32_t rxe_qint8_saturate(int64_t acc);

/* out[i] = clamp(requant(saturate(acc[i] + offset), q, shift) + out_zero, act_min, act_max) for
 * i < count, one multiplier for all (8 or 16 at a time on the vector paths when -31 <= shift <= 0,
 * q != INT32_MIN and |offset| < 2^30); every |acc[i]| must be below 2^30. */
void rxe_qint8_requantize_bytes(const int32_t* acc, int64_t count, int32_t offset, int32_t q, int32_t shift,
                                int32_t out_zero, int32_t act_min, int32_t act_max, uint8_t* out);

/* The same over count pixels of 16 lanes (lane l of pixel p at acc[16 * p + l], its byte at out[16 * p + l]),
 * each lane its own offset[l], q[l] and shift[l] (16 at a time with AVX-512 VNNI when every lane allows the
 * vector arithmetic, else one by one). out may be acc's memory (each pixel's bytes are written after its sums
 * are read). */
void rxe_qint8_requantize_lanes16(const int32_t* acc, int64_t count, const int32_t* offset, const int32_t* q,
                                  const int32_t* shift, int32_t out_zero, int32_t act_min, int32_t act_max,
                                  uint8_t* out);

/* 1 when this build's GEMM takes AMX tiles (compiled for AMX-INT8 on x86-64 Linux) and the kernel granted
 * the tile state to the process (asked on the first call), else 0. */
int rxe_qint8_amx_enabled(void);

/* RXE_OK, or the error of bad zero points, clamps, shifts or k (`what` names the kernel). */
rxe_status_t rxe_qint8_check(const char* what, int64_t k, int64_t n, const int32_t* shift, int64_t x_zero,
                             int64_t w_zero, int64_t out_zero, int64_t act_min, int64_t act_max, int64_t dtypes,
                             rxe_error_t* err);

#endif /* RELAX_EDGE_QGEMM_INTERNAL_H_ */
