/* Runs the int8 kernels on a target (under QEMU, or semihosting on a
 * microcontroller) for the tests, in the working directory (the host's,
 * through semihosting). qint8_cases.bin: records of int64 kind (0 qdense,
 * 1 qconv2d, 2 qdepthwise, 3 requantize), int64 count and that many int64
 * sizes, int64 count and that many arrays (int64 byte count, -1 for NULL,
 * then the bytes). qint8_results.bin gets per record the int64 status and
 * the output array (int64 byte count, bytes). */
#include <stdio.h>
#include <stdlib.h>

#include "relax_edge/kernels.h"

#define MAX_ITEMS 32

static FILE* in;

static int64_t read_i64(void) {
  int64_t v;
  if (fread(&v, sizeof v, 1, in) != 1) exit(2);
  return v;
}

int main(void) {
  int64_t kind;
  FILE* out;
  if ((in = fopen("qint8_cases.bin", "rb")) == NULL || (out = fopen("qint8_results.bin", "wb")) == NULL) return 4;
  while (fread(&kind, sizeof kind, 1, in) == 1) {
    int64_t s[MAX_ITEMS], len[MAX_ITEMS], ns = read_i64(), na, i, o = kind == 3 ? 3 : 5;
    void* p[MAX_ITEMS];
    rxe_error_t err;
    rxe_status_t status = RXE_ERR_NOT_FOUND;
    if (ns > MAX_ITEMS) return 3;
    for (i = 0; i < ns; ++i) s[i] = read_i64();
    na = read_i64();
    if (na > MAX_ITEMS || na <= o) return 3;
    for (i = 0; i < na; ++i) {
      len[i] = read_i64();
      p[i] = NULL;
      if (len[i] < 0) continue;
      p[i] = malloc((size_t)len[i] + 8);
      if (p[i] == NULL || fread(p[i], 1, (size_t)len[i], in) != (size_t)len[i]) return 2;
    }
    if (kind == 0 && ns == 9) {
      status = rxe_lib_qdense_s8(p[0], p[1], p[2], p[3], p[4], p[5], s[0], s[1], s[2], s[3], s[4], s[5], s[6], s[7],
                                 s[8], &err);
    } else if (kind == 1 && ns == 22) {
      status = rxe_lib_qconv2d_s8(p[0], p[1], p[2], p[3], p[4], p[5], p[6], s[0], s[1], s[2], s[3], s[4], s[5], s[6],
                                  s[7], s[8], s[9], s[10], s[11], s[12], s[13], s[14], s[15], s[16], s[17], s[18],
                                  s[19], s[20], s[21], &err);
    } else if (kind == 2 && ns == 20) {
      status = rxe_lib_qdepthwise_conv2d_s8(p[0], p[1], p[2], p[3], p[4], p[5], p[6], s[0], s[1], s[2], s[3], s[4],
                                            s[5], s[6], s[7], s[8], s[9], s[10], s[11], s[12], s[13], s[14], s[15],
                                            s[16], s[17], s[18], s[19], &err);
    } else if (kind == 3) {
      const int32_t *acc = (const int32_t*)p[0], *q = (const int32_t*)p[1], *sh = (const int32_t*)p[2];
      for (i = 0; i < len[0] / 4; ++i) ((int32_t*)p[3])[i] = rxe_qint8_requantize(acc[i], q[i], sh[i]);
      status = RXE_OK;
    }
    kind = status;
    fwrite(&kind, sizeof kind, 1, out);
    fwrite(&len[o], sizeof len[o], 1, out);
    fwrite(p[o], 1, (size_t)len[o], out);
    for (i = 0; i < na; ++i) free(p[i]);
  }
  fclose(out);
  return 0;
}
