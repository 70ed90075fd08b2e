/* The runtime's portable math (built with RXE_NO_LIBM) against libm. Prints
 * "RXE_TESTS_PASSED <n> checks" when all agree (see micro_test.h). */
#include <math.h>
#include <stdio.h>

#include "micro_test.h"

double rxe_exp(double x);
double rxe_log(double x);
double rxe_sqrt(double x);
double rxe_tanh(double x);
double rxe_erf(double x);
double rxe_pow(double x, double y);
double rxe_floor(double x);
double rxe_ceil(double x);
double rxe_round(double x);
double rxe_sin(double x);
double rxe_cos(double x);
double rxe_tan(double x);
double rxe_asin(double x);
double rxe_acos(double x);
double rxe_atan(double x);
double rxe_sinh(double x);
double rxe_cosh(double x);
double rxe_asinh(double x);
double rxe_acosh(double x);
double rxe_atanh(double x);
double rxe_fmod(double x, double y);

static void close_to(const char* what, double x, double got, double want) {
  double tol = 1e-12 * (fabs(want) > 1.0 ? fabs(want) : 1.0);
  /* written as what must hold, so that a NaN result against a finite libm value fails */
  CHECK_MSG(isnan(want) ? isnan(got) : (isinf(want) ? got == want : fabs(got - want) <= tol),
            "%s(%.17g) = %.17g, libm %.17g", what, x, got, want);
}

int main(void) {
  int i;
  for (i = -400; i <= 400; ++i) {
    double x = i * 0.0731;
    close_to("exp", x, rxe_exp(x), exp(x));
    close_to("tanh", x, rxe_tanh(x), tanh(x));
    close_to("erf", x * 0.2, rxe_erf(x * 0.2), erf(x * 0.2));
    close_to("floor", x, rxe_floor(x), floor(x));
    close_to("ceil", x, rxe_ceil(x), ceil(x));
    close_to("round", i * 0.5, rxe_round(i * 0.5), rint(i * 0.5));
    close_to("sin", x, rxe_sin(x), sin(x));
    close_to("cos", x, rxe_cos(x), cos(x));
    close_to("tan", x * 0.2, rxe_tan(x * 0.2), tan(x * 0.2));
    close_to("atan", x, rxe_atan(x), atan(x));
    close_to("sinh", x * 0.3, rxe_sinh(x * 0.3), sinh(x * 0.3));
    close_to("cosh", x * 0.3, rxe_cosh(x * 0.3), cosh(x * 0.3));
    close_to("asinh", x, rxe_asinh(x), asinh(x));
    close_to("asin", i / 400.0, rxe_asin(i / 400.0), asin(i / 400.0));
    close_to("acos", i / 400.0, rxe_acos(i / 400.0), acos(i / 400.0));
    close_to("atanh", i / 401.0, rxe_atanh(i / 401.0), atanh(i / 401.0));
    close_to("fmod", x, rxe_fmod(x, 0.37), fmod(x, 0.37));
    close_to("fmod", x, rxe_fmod(x * 1e5, -x * 0.013 + 0.5), fmod(x * 1e5, -x * 0.013 + 0.5));
    if (x > 0) {
      close_to("log", x, rxe_log(x), log(x));
      close_to("sqrt", x, rxe_sqrt(x), sqrt(x));
      close_to("pow", x, rxe_pow(x, 1.7), pow(x, 1.7));
      close_to("acosh", 1.0 + x, rxe_acosh(1.0 + x), acosh(1.0 + x));
      close_to("acosh", 1.0 + x * 1e-9, rxe_acosh(1.0 + x * 1e-9), acosh(1.0 + x * 1e-9));
    }
  }
  close_to("exp", 800, rxe_exp(800), exp(800));
  close_to("exp", -800, rxe_exp(-800), exp(-800));
  close_to("log", 0, rxe_log(0), log(0));
  close_to("log", 1e-310, rxe_log(1e-310), log(1e-310));
  close_to("pow", -2, rxe_pow(-2, 3), pow(-2, 3));
  close_to("erf", 4.5, rxe_erf(4.5), erf(4.5));
  close_to("erf", -3.2, rxe_erf(-3.2), erf(-3.2));
  close_to("sin", 1e5, rxe_sin(1e5), sin(1e5));
  close_to("cos", 4096.5, rxe_cos(4096.5), cos(4096.5));
  close_to("sin", 1e-300, rxe_sin(1e-300), sin(1e-300));
  close_to("atan", 1e300, rxe_atan(1e300), atan(1e300));
  close_to("sinh", 710, rxe_sinh(710), sinh(710));
  close_to("cosh", -710, rxe_cosh(-710), cosh(-710));
  close_to("sinh", 1e-8, rxe_sinh(1e-8), sinh(1e-8));
  close_to("asinh", -1e200, rxe_asinh(-1e200), asinh(-1e200));
  close_to("atanh", 1, rxe_atanh(1), atanh(1));
  close_to("asin", 2, rxe_asin(2), asin(2));
  close_to("acos", -1, rxe_acos(-1), acos(-1));
  close_to("acosh", 0.5, rxe_acosh(0.5), acosh(0.5));
  close_to("fmod", -7.5, rxe_fmod(-7.5, 2), fmod(-7.5, 2));
  close_to("fmod", 1e300, rxe_fmod(1e300, 3.3e-300), fmod(1e300, 3.3e-300));
  close_to("fmod", 1, rxe_fmod(1, 0), fmod(1, 0));
  return MICRO_TEST_END();
}
