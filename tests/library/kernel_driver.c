/* Runs GEMM-family kernels on a target (e.g. under QEMU) for the tests.
 * stdin: records of int64 kernel (0 dense, 1 matmul, 2 conv2d), int64 count
 * and that many int64 sizes, int64 count and that many arrays (int64 float
 * count, -1 for NULL, then the floats). stdout: per record the int64 status
 * and the output array (count, floats). */
#include <stdio.h>
#include <stdlib.h>

#include "relax_edge/kernels.h"

#define MAX_ITEMS 24

static int64_t read_i64(void) {
  int64_t v;
  if (fread(&v, sizeof v, 1, stdin) != 1) exit(2);
  return v;
}

int main(void) {
  int64_t kind;
  while (fread(&kind, sizeof kind, 1, stdin) == 1) {
    int64_t s[MAX_ITEMS], len[MAX_ITEMS], ns = read_i64(), na, i, out;
    float* p[MAX_ITEMS];
    rxe_error_t err;
    rxe_status_t status = RXE_ERR_NOT_FOUND;
    if (ns > MAX_ITEMS) return 3;
    for (i = 0; i < ns; ++i) s[i] = read_i64();
    na = read_i64();
    if (na > MAX_ITEMS) return 3;
    for (i = 0; i < na; ++i) {
      len[i] = read_i64();
      p[i] = NULL;
      if (len[i] < 0) continue;
      p[i] = (float*)malloc((size_t)len[i] * sizeof(float) + 1);
      if (p[i] == NULL || fread(p[i], sizeof(float), (size_t)len[i], stdin) != (size_t)len[i]) return 2;
    }
    out = kind == 1 ? 2 : 3;
    if (kind == 0) {
      status = rxe_lib_dense_f32(p[0], p[1], p[2], p[3], s[0], s[1], s[2], s[3], &err);
    } else if (kind == 1) {
      status = rxe_lib_matmul_f32(p[0], p[1], p[2], p[3], s[0], s[1], s[2], s[3], s[4], s[5], &err);
    } else if (kind == 2) {
      status = rxe_lib_conv2d_f32(p[0], p[1], p[2], p[3], p[4], s[0], s[1], s[2], s[3], s[4], s[5], s[6], s[7],
                                  s[8], s[9], s[10], s[11], s[12], s[13], s[14], s[15], s[16], &err);
    }
    kind = status;
    fwrite(&kind, sizeof kind, 1, stdout);
    fwrite(&len[out], sizeof len[out], 1, stdout);
    fwrite(p[out], sizeof(float), (size_t)len[out], stdout);
    for (i = 0; i < na; ++i) free(p[i]);
  }
  return 0;
}
