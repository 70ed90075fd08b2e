/*
 * Portable trigonometric and hyperbolic functions and fmod for targets
 * without libm (compiled with RXE_NO_LIBM), on src/math.c's rxe_exp,
 * rxe_log, rxe_sqrt and rxe_round. Library code, not the runtime core: only
 * models that call them link them. Double precision, then rounded for the
 * float versions; within 1e-12 relative of libm (tests/test_math.c).
 */
#ifdef RXE_NO_LIBM
#include <stdint.h>

#include "relax_edge/kernel.h"

static const double kLn2 = 6.93147180559945286227e-01;

static int is_nan(double x) { return x != x; }
static double infinity(void) { return (double)RXE_INFINITY; }
static double quiet_nan(void) { return (double)RXE_NAN; }

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
    r = rxe_exp(a - kLn2);
  } else {
    e = rxe_exp(a);
    r = 0.5 * (e - 1.0 / e);
  }
  return x < 0 ? -r : r;
}

double rxe_cosh(double x) {
  double a = x < 0 ? -x : x, e;
  if (is_nan(x)) return x;
  if (a > 700.0) return rxe_exp(a - kLn2);
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
    r = rxe_log(a) + kLn2;
  } else {
    r = rxe_log(a + rxe_sqrt(a * a + 1.0));
  }
  return x < 0 ? -r : r;
}

double rxe_acosh(double x) {
  double t;
  if (is_nan(x) || x < 1.0) return quiet_nan();
  if (x == infinity()) return x;
  if (x > 1e150) return rxe_log(x) + kLn2;
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

/* the float versions: the double ones, rounded */
RXE_DEFINE_FLOAT_VERSION(sin)
RXE_DEFINE_FLOAT_VERSION(cos)
RXE_DEFINE_FLOAT_VERSION(tan)
RXE_DEFINE_FLOAT_VERSION(asin)
RXE_DEFINE_FLOAT_VERSION(acos)
RXE_DEFINE_FLOAT_VERSION(atan)
RXE_DEFINE_FLOAT_VERSION(sinh)
RXE_DEFINE_FLOAT_VERSION(cosh)
RXE_DEFINE_FLOAT_VERSION(asinh)
RXE_DEFINE_FLOAT_VERSION(acosh)
RXE_DEFINE_FLOAT_VERSION(atanh)
float rxe_fmodf(float x, float y) { return (float)rxe_fmod((double)x, (double)y); }

#else
typedef int rxe_trig_math_uses_libm; /* keeps the translation unit non-empty */
#endif
