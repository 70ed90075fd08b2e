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
    if (x > 0) {
      close_to("log", x, rxe_log(x), log(x));
      close_to("sqrt", x, rxe_sqrt(x), sqrt(x));
      close_to("pow", x, rxe_pow(x, 1.7), pow(x, 1.7));
    }
  }
  close_to("exp", 800, rxe_exp(800), exp(800));
  close_to("exp", -800, rxe_exp(-800), exp(-800));
  close_to("log", 0, rxe_log(0), log(0));
  close_to("log", 1e-310, rxe_log(1e-310), log(1e-310));
  close_to("pow", -2, rxe_pow(-2, 3), pow(-2, 3));
  close_to("erf", 4.5, rxe_erf(4.5), erf(4.5));
  close_to("erf", -3.2, rxe_erf(-3.2), erf(-3.2));
  return MICRO_TEST_END();
}
