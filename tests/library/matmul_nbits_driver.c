/* Runs rxe_lib_matmul_nbits_f32 / _q8_f32 on a target (under QEMU) for the
 * tests. stdin: records of int64 m, n, k, bits, block_size, zero_mode,
 * has_bias, act_int8, then x (m*k floats), qweight (n*blocks*block_size*bits/8
 * bytes), scales (n*blocks floats), the zeros (n*blocks bytes for zero_mode 1,
 * floats for 2, none for 0) and the bias (n floats when has_bias). stdout: per
 * record the int64 status and y (m*n floats). */
#include <stdio.h>
#include <stdlib.h>

#include "relax_edge/kernels.h"

static void* read_bytes(size_t n) {
  void* p = malloc(n + 16);
  if (p == NULL || fread(p, 1, n, stdin) != n) exit(2);
  return p;
}

int main(void) {
  int64_t h[8];
  while (fread(h, sizeof h[0], 8, stdin) == 8) {
    int64_t m = h[0], n = h[1], k = h[2], bits = h[3], block = h[4], mode = h[5], has_bias = h[6];
    int64_t blocks = (k + block - 1) / block, status;
    float* x = (float*)read_bytes((size_t)(m * k) * 4);
    uint8_t* q = (uint8_t*)read_bytes((size_t)(n * blocks * block * bits / 8));
    float* scales = (float*)read_bytes((size_t)(n * blocks) * 4);
    void* zeros = mode == 0 ? (void*)scales : read_bytes((size_t)(n * blocks) * (mode == 1 ? 1 : 4));
    float* bias = has_bias ? (float*)read_bytes((size_t)n * 4) : scales;
    float* y = (float*)malloc((size_t)(m * n) * 4 + 16);
    float* scratch = (float*)malloc(RXE_LIB_MATMUL_NBITS_Q8_SCRATCH_BYTES(m, k, block) + 16);
    rxe_error_t err;
    if (h[7]) {
      status = rxe_lib_matmul_nbits_q8_f32(x, q, scales, zeros, bias, y, scratch, m, n, k, bits, block, mode,
                                           has_bias, &err);
    } else {
      status = rxe_lib_matmul_nbits_f32(x, q, scales, zeros, bias, y, m, n, k, bits, block, mode, has_bias, &err);
    }
    fwrite(&status, sizeof status, 1, stdout);
    fwrite(y, 4, (size_t)(m * n), stdout);
    free(x), free(q), free(scales), free(y), free(scratch);
    if (mode != 0) free(zeros);
    if (has_bias) free(bias);
  }
  return 0;
}
