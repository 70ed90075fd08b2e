/*
 * Portable math for targets without libm (compiled with RXE_NO_LIBM).
 * Double precision, then rounded for the float versions; accurate to a few
 * ulp of double, far below float32 rounding. Freestanding: no headers
 * beyond stdint.h.
 */
#ifdef RXE_NO_LIBM
#include <stdint.h>

#include "relax_edge/kernel.h"

static const double kLn2Hi = 6.93147180369123816490e-01;
static const double kLn2Lo = 1.90821492927058770002e-10;
static const double kInvLn2 = 1.44269504088896338700e+00;

static double bits_to_double(uint64_t b) {
  union { uint64_t u; double d; } v;
  v.u = b;
  return v.d;
}

static uint64_t double_to_bits(double d) {
  union { uint64_t u; double d; } v;
  v.d = d;
  return v.u;
}

static double infinity(void) { return bits_to_double(0x7ff0000000000000ull); }
static double quiet_nan(void) { return bits_to_double(0x7ff8000000000000ull); }
static int is_nan(double x) { return x != x; }

double rxe_floor(double x) {
  double t;
  if (is_nan(x) || x >= 4503599627370496.0 || x <= -4503599627370496.0) return x;
  t = (double)(int64_t)x;
  return t > x ? t - 1.0 : t;
}

double rxe_ceil(double x) { return -rxe_floor(-x); }

double rxe_round(double x) { /* halves to even */
  double f = rxe_floor(x), d = x - f;
  if (is_nan(x)) return x;
  if (d > 0.5) return f + 1.0;
  if (d < 0.5) return f;
  return (rxe_floor(f * 0.5) * 2.0 == f) ? f : f + 1.0;
}

double rxe_exp(double x) {
  double k, r, term, sum;
  int i;
  int64_t e;
  if (is_nan(x)) return x;
  if (x > 709.782712893384) return infinity();
  if (x < -745.1332191019412) return 0.0;
  k = rxe_round(x * kInvLn2);
  r = (x - k * kLn2Hi) - k * kLn2Lo; /* |r| <= ln2 / 2 */
  sum = 1.0;
  term = 1.0;
  for (i = 1; i < 20; ++i) {
    term *= r / i;
    sum += term;
  }
  e = (int64_t)k;
  if (e < -1021) { /* subnormal result: scale in two steps */
    sum *= bits_to_double((uint64_t)(1023 - 1000) << 52);
    e += 1000;
  }
  return sum * bits_to_double((uint64_t)(e + 1023) << 52);
}

double rxe_log(double x) {
  uint64_t b;
  int64_t e;
  double m, s, s2, term, sum;
  int i;
  if (is_nan(x) || x < 0.0) return quiet_nan();
  if (x == 0.0) return -infinity();
  if (x == infinity()) return x;
  e = 0;
  if (x < 2.2250738585072014e-308) { /* subnormal */
    x *= 4503599627370496.0;
    e = -52;
  }
  b = double_to_bits(x);
  e += (int64_t)((b >> 52) & 0x7ff) - 1023;
  m = bits_to_double((b & 0x000fffffffffffffull) | 0x3ff0000000000000ull); /* [1, 2) */
  if (m > 1.4142135623730951) {
    m *= 0.5;
    e += 1;
  }
  s = (m - 1.0) / (m + 1.0);
  s2 = s * s;
  sum = 0.0;
  term = s;
  for (i = 1; i < 40; i += 2) {
    sum += term / i;
    term *= s2;
  }
  return 2.0 * sum + (double)e * kLn2Hi + (double)e * kLn2Lo;
}

double rxe_sqrt(double x) {
  double y;
  int i;
  if (is_nan(x) || x < 0.0) return quiet_nan();
  if (x == 0.0 || x == infinity()) return x;
  y = bits_to_double((double_to_bits(x) >> 1) + (0x3ff0000000000000ull >> 1));
  for (i = 0; i < 6; ++i) y = 0.5 * (y + x / y);
  return y;
}

double rxe_tanh(double x) {
  double e;
  if (is_nan(x)) return x;
  if (x > 20.0) return 1.0;
  if (x < -20.0) return -1.0;
  if (x > -1e-5 && x < 1e-5) return x - x * x * x / 3.0;
  e = rxe_exp(2.0 * x);
  return (e - 1.0) / (e + 1.0);
}

double rxe_erf(double x) {
  double ax = x < 0 ? -x : x, sum, term, x2, f, c, d, delta;
  int n;
  if (is_nan(x)) return x;
  if (ax > 6.0) return x < 0 ? -1.0 : 1.0;
  if (ax < 3.0) { /* Maclaurin series */
    x2 = x * x;
    sum = x;
    term = x;
    for (n = 1; n < 80; ++n) {
      term *= -x2 / n;
      sum += term / (2 * n + 1);
    }
    return 1.1283791670955126 * sum;
  }
  /* erfc by its continued fraction (modified Lentz), then 1 - erfc */
  f = ax;
  c = ax;
  d = 0.0;
  for (n = 1; n < 200; ++n) {
    d = ax + (n * 0.5) * d;
    d = 1.0 / d;
    c = ax + (n * 0.5) / c;
    delta = c * d;
    f *= delta;
    if (delta > 0.9999999999999999 && delta < 1.0000000000000002) break;
  }
  f = rxe_exp(-ax * ax) / (f * 1.7724538509055159);
  return x < 0 ? f - 1.0 : 1.0 - f;
}

double rxe_pow(double x, double y) {
  double r;
  if (y == 0.0) return 1.0;
  if (is_nan(x) || is_nan(y)) return quiet_nan();
  if (x == 0.0) return y > 0 ? 0.0 : infinity();
  if (x > 0.0) return rxe_exp(y * rxe_log(x));
  if (rxe_floor(y) != y) return quiet_nan();
  r = rxe_exp(y * rxe_log(-x));
  return (rxe_floor(y * 0.5) * 2.0 == y) ? r : -r;
}

/* the float versions: the double ones, rounded */
RXE_DEFINE_FLOAT_VERSION(exp)
RXE_DEFINE_FLOAT_VERSION(log)
RXE_DEFINE_FLOAT_VERSION(sqrt)
RXE_DEFINE_FLOAT_VERSION(tanh)
RXE_DEFINE_FLOAT_VERSION(erf)
float rxe_powf(float x, float y) { return (float)rxe_pow((double)x, (double)y); }

#else
typedef int rxe_math_uses_libm; /* keeps the translation unit non-empty */
#endif
