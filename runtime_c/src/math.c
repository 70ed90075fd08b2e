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

/* sin, cos, tan: x reduced by pi/2 in three parts (fdlibm's constants; the
 * first has 33 bits, so k * kPio2_1 is exact for |k| < 2^20: accurate for
 * |x| below about 1.6e6), then Taylor series on |r| <= pi/4. */
static const double kPio2_1 = 1.57079632673412561417e+00;
static const double kPio2_2 = 6.07710050630396597660e-11;
static const double kPio2_3 = 2.02226624871116645580e-21;
static const double kInvPio2 = 6.36619772367581382433e-01;
static const double kPio2 = 1.57079632679489655800e+00;
static const double kPi = 3.14159265358979311600e+00;

static double reduce_pio2(double x, int64_t* out_quadrant) {
  double k = rxe_round(x * kInvPio2);
  *out_quadrant = (int64_t)k;
  return ((x - k * kPio2_1) - k * kPio2_2) - k * kPio2_3;
}

static double sin_series(double r) { /* |r| <= pi/4 */
  double r2 = r * r, term = r, sum = r;
  int n;
  for (n = 1; n < 12; ++n) {
    term *= -r2 / ((2 * n) * (2 * n + 1));
    sum += term;
  }
  return sum;
}

static double cos_series(double r) { /* |r| <= pi/4 */
  double r2 = r * r, term = 1.0, sum = 1.0;
  int n;
  for (n = 1; n < 12; ++n) {
    term *= -r2 / ((2 * n - 1) * (2 * n));
    sum += term;
  }
  return sum;
}

/* sin(x + shift * pi/2); cos is the shift of 1 */
static double sin_shifted(double x, int64_t shift) {
  int64_t q;
  double r;
  if (is_nan(x) || x == infinity() || x == -infinity()) return quiet_nan();
  r = reduce_pio2(x, &q);
  switch ((q + shift) & 3) {
    case 0: return sin_series(r);
    case 1: return cos_series(r);
    case 2: return -sin_series(r);
    default: return -cos_series(r);
  }
}

double rxe_sin(double x) { return sin_shifted(x, 0); }
double rxe_cos(double x) { return sin_shifted(x, 1); }

double rxe_tan(double x) {
  int64_t q;
  double r;
  if (is_nan(x) || x == infinity() || x == -infinity()) return quiet_nan();
  r = reduce_pio2(x, &q);
  return (q & 1) ? -cos_series(r) / sin_series(r) : sin_series(r) / cos_series(r);
}

/* atan: |x| > 1 by pi/2 - atan(1/x), then |x| > tan(pi/8) by
 * pi/4 + atan((x - 1) / (x + 1)), then the series on |t| <= 0.4143. */
double rxe_atan(double x) {
  double a = x < 0 ? -x : x, base = 0.0, t, t2, term, sum;
  int n, invert = 0;
  if (is_nan(x)) return x;
  if (a > 1.0) {
    a = 1.0 / a;
    invert = 1;
  }
  if (a > 0.41421356237309503) {
    t = (a - 1.0) / (a + 1.0);
    base = kPio2 * 0.5;
  } else {
    t = a;
  }
  t2 = t * t;
  term = t;
  sum = 0.0;
  for (n = 0; n < 45; ++n) {
    sum += term / (2 * n + 1);
    term *= -t2;
  }
  sum += base;
  if (invert) sum = kPio2 - sum;
  return x < 0 ? -sum : sum;
}

double rxe_asin(double x) { /* |x| > 0.5: pi/2 - 2 asin(sqrt((1 - |x|) / 2)) */
  double a = x < 0 ? -x : x, r;
  if (is_nan(x) || a > 1.0) return quiet_nan();
  if (a <= 0.5) return rxe_atan(x / rxe_sqrt(1.0 - x * x));
  r = rxe_sqrt((1.0 - a) * 0.5);
  r = kPio2 - 2.0 * rxe_atan(r / rxe_sqrt(1.0 - r * r));
  return x < 0 ? -r : r;
}

double rxe_acos(double x) {
  double r;
  if (is_nan(x) || x > 1.0 || x < -1.0) return quiet_nan();
  if (x >= -0.5 && x <= 0.5) return kPio2 - rxe_asin(x);
  r = 2.0 * rxe_asin(rxe_sqrt((1.0 - (x < 0 ? -x : x)) * 0.5));
  return x < 0 ? kPi - r : r;
}

/* atanh(s) = s + s^3/3 + s^5/5 ... for |s| <= 0.5 */
static double atanh_series(double s) {
  double s2 = s * s, term = s, sum = 0.0;
  int i;
  for (i = 1; i < 60; i += 2) {
    sum += term / i;
    term *= s2;
  }
  return sum;
}

static double log1p_(double t) { /* log(1 + t) = 2 atanh(t / (2 + t)) */
  double s = t / (2.0 + t);
  if (s > -0.5 && s < 0.5) return 2.0 * atanh_series(s);
  return rxe_log(1.0 + t);
}

double rxe_sinh(double x) {
  double a = x < 0 ? -x : x, r, e;
  if (is_nan(x)) return x;
  if (a < 1.0) {
    double x2 = x * x, term = x;
    int n;
    r = x;
    for (n = 1; n < 15; ++n) {
      term *= x2 / ((2 * n) * (2 * n + 1));
      r += term;
    }
    return r;
  }
  if (a > 700.0) {
    r = rxe_exp(a - kLn2Hi - kLn2Lo);
  } else {
    e = rxe_exp(a);
    r = 0.5 * (e - 1.0 / e);
  }
  return x < 0 ? -r : r;
}

double rxe_cosh(double x) {
  double a = x < 0 ? -x : x, e;
  if (is_nan(x)) return x;
  if (a > 700.0) return rxe_exp(a - kLn2Hi - kLn2Lo);
  e = rxe_exp(a);
  return 0.5 * (e + 1.0 / e);
}

double rxe_atanh(double x) {
  double a = x < 0 ? -x : x, r;
  if (is_nan(x) || a > 1.0) return quiet_nan();
  if (a == 1.0) return x < 0 ? -infinity() : infinity();
  r = a <= 0.5 ? atanh_series(a) : 0.5 * rxe_log((1.0 + a) / (1.0 - a));
  return x < 0 ? -r : r;
}

double rxe_asinh(double x) {
  double a = x < 0 ? -x : x, r;
  if (is_nan(x) || a == infinity()) return x;
  if (a < 1.0) {
    r = rxe_atanh(a / rxe_sqrt(1.0 + a * a));
  } else if (a > 1e150) {
    r = rxe_log(a) + kLn2Hi + kLn2Lo;
  } else {
    r = rxe_log(a + rxe_sqrt(a * a + 1.0));
  }
  return x < 0 ? -r : r;
}

double rxe_acosh(double x) {
  double t;
  if (is_nan(x) || x < 1.0) return quiet_nan();
  if (x == infinity()) return x;
  if (x > 1e150) return rxe_log(x) + kLn2Hi + kLn2Lo;
  t = x - 1.0;
  return log1p_(t + rxe_sqrt(t * (x + 1.0)));
}

/* fmod: exact, by subtracting y scaled by powers of two (Sterbenz: each
 * subtraction of t <= r < 2t is exact); the result has x's sign. */
double rxe_fmod(double x, double y) {
  double r = x < 0 ? -x : x, ay = y < 0 ? -y : y, t;
  if (is_nan(x) || is_nan(y) || r == infinity() || y == 0.0) return quiet_nan();
  if (ay == infinity()) return x;
  while (r >= ay) {
    t = ay;
    while (t <= r * 0.5) t *= 2.0;
    r -= t;
  }
  return x < 0 ? -r : r;
}

float rxe_expf(float x) { return (float)rxe_exp((double)x); }
float rxe_logf(float x) { return (float)rxe_log((double)x); }
float rxe_sqrtf(float x) { return (float)rxe_sqrt((double)x); }
float rxe_tanhf(float x) { return (float)rxe_tanh((double)x); }
float rxe_erff(float x) { return (float)rxe_erf((double)x); }
float rxe_powf(float x, float y) { return (float)rxe_pow((double)x, (double)y); }
float rxe_sinf(float x) { return (float)rxe_sin((double)x); }
float rxe_cosf(float x) { return (float)rxe_cos((double)x); }
float rxe_tanf(float x) { return (float)rxe_tan((double)x); }
float rxe_asinf(float x) { return (float)rxe_asin((double)x); }
float rxe_acosf(float x) { return (float)rxe_acos((double)x); }
float rxe_atanf(float x) { return (float)rxe_atan((double)x); }
float rxe_sinhf(float x) { return (float)rxe_sinh((double)x); }
float rxe_coshf(float x) { return (float)rxe_cosh((double)x); }
float rxe_asinhf(float x) { return (float)rxe_asinh((double)x); }
float rxe_acoshf(float x) { return (float)rxe_acosh((double)x); }
float rxe_atanhf(float x) { return (float)rxe_atanh((double)x); }
float rxe_fmodf(float x, float y) { return (float)rxe_fmod((double)x, (double)y); }

#else
typedef int rxe_math_uses_libm; /* keeps the translation unit non-empty */
#endif
