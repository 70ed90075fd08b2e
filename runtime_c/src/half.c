/* float16 and bfloat16 storage: generated kernels keep them as uint16_t bits
 * and compute in float (kernel.h). Rounding to nearest even, as numpy;
 * subnormals kept, NaN stays (quiet) NaN. Only integer operations: freestanding. */
#include "relax_edge/kernel.h"

static uint32_t float_bits(float x) { return (uint32_t)rxe_f32_bits(x); }

static float bits_float(uint32_t u) { return rxe_f32_from_bits((int32_t)u); }

float rxe_half_widen(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  if (e == 0x1f) return bits_float(sign | 0x7f800000u | (m << 13));
  if (e != 0) return bits_float(sign | ((e + 112u) << 23) | (m << 13));
  if (m == 0) return bits_float(sign);
  e = 113u; /* a subnormal: normalize */
  while ((m & 0x400u) == 0) {
    m <<= 1;
    --e;
  }
  return bits_float(sign | (e << 23) | ((m & 0x3ffu) << 13));
}

uint16_t rxe_half_narrow(float x) {
  uint32_t u = float_bits(x), sign = (u >> 16) & 0x8000u, a = u & 0x7fffffffu;
  uint32_t m, shift, q, rest, half;
  if (a > 0x7f800000u) return (uint16_t)(sign | 0x7e00u | ((a >> 13) & 0x3ffu));  /* NaN */
  if (a >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u);  /* 65520 and above round to inf */
  if (a >= 0x38800000u) {                                   /* a normal float16 */
    uint32_t r = a - 0x38000000u;
    return (uint16_t)(sign | ((r + 0xfffu + ((r >> 13) & 1u)) >> 13));
  }
  if (a < 0x33000000u) return (uint16_t)sign;  /* 2^-25 and below round to zero */
  m = (a & 0x7fffffu) | 0x800000u;             /* a subnormal float16: m * 2^(e - 150), in units of 2^-24 */
  shift = 126u - (a >> 23);
  q = m >> shift;
  rest = m & ((1u << shift) - 1u);
  half = 1u << (shift - 1u);
  if (rest > half || (rest == half && (q & 1u))) ++q;
  return (uint16_t)(sign | q);
}

float rxe_bfloat_widen(uint16_t h) { return bits_float((uint32_t)h << 16); }

uint16_t rxe_bfloat_narrow(float x) {
  uint32_t u = float_bits(x);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u);  /* NaN, quiet */
  return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}
