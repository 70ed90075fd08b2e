/*
 * Helpers for generated kernels: integer floor division and modulo with
 * Python semantics (C's / and % truncate), min/max, and the math functions
 * generated code calls. With RXE_NO_LIBM the runtime's portable versions
 * (src/math.c) replace libm, for targets that have none.
 */
#ifndef RELAX_EDGE_KERNEL_H_
#define RELAX_EDGE_KERNEL_H_

#include <stdint.h>

/* ROUND rounds halves to even (rint), as numpy and Python do. */

/* floor(a / b) for b != 0, Python's a // b */
static inline int64_t rxe_floordiv_i64(int64_t a, int64_t b) {
  int64_t q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}

/* a - b * floor(a / b), Python's a % b (the sign of b) */
static inline int64_t rxe_floormod_i64(int64_t a, int64_t b) {
  int64_t r = a % b;
  return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
}

static inline int64_t rxe_min_i64(int64_t a, int64_t b) { return a < b ? a : b; }
static inline int64_t rxe_max_i64(int64_t a, int64_t b) { return a > b ? a : b; }

#define RXE_MIN(a, b) ((a) < (b) ? (a) : (b))
#define RXE_MAX(a, b) ((a) > (b) ? (a) : (b))

#ifdef RXE_NO_LIBM
float rxe_expf(float x);
float rxe_logf(float x);
float rxe_sqrtf(float x);
float rxe_tanhf(float x);
float rxe_erff(float x);
float rxe_powf(float x, float y);
double rxe_exp(double x);
double rxe_log(double x);
double rxe_sqrt(double x);
double rxe_tanh(double x);
double rxe_erf(double x);
double rxe_pow(double x, double y);
double rxe_floor(double x);
double rxe_ceil(double x);
double rxe_round(double x);
#define RXE_EXPF rxe_expf
#define RXE_LOGF rxe_logf
#define RXE_SQRTF rxe_sqrtf
#define RXE_TANHF rxe_tanhf
#define RXE_ERFF rxe_erff
#define RXE_POWF rxe_powf
#define RXE_FABSF(x) ((x) < 0.0f ? -(x) : (x))
#define RXE_FLOORF(x) ((float)rxe_floor((double)(x)))
#define RXE_CEILF(x) ((float)rxe_ceil((double)(x)))
#define RXE_ROUNDF(x) ((float)rxe_round((double)(x)))
#define RXE_EXP rxe_exp
#define RXE_LOG rxe_log
#define RXE_SQRT rxe_sqrt
#define RXE_TANH rxe_tanh
#define RXE_ERF rxe_erf
#define RXE_POW rxe_pow
#define RXE_FABS(x) ((x) < 0.0 ? -(x) : (x))
#define RXE_FLOOR rxe_floor
#define RXE_CEIL rxe_ceil
#define RXE_ROUND rxe_round
#define RXE_INFINITY (__builtin_inff())
#define RXE_NAN (__builtin_nanf(""))
#else
#include <math.h>
#define RXE_EXPF expf
#define RXE_LOGF logf
#define RXE_SQRTF sqrtf
#define RXE_TANHF tanhf
#define RXE_ERFF erff
#define RXE_POWF powf
#define RXE_FABSF fabsf
#define RXE_FLOORF floorf
#define RXE_CEILF ceilf
#define RXE_ROUNDF rintf
#define RXE_EXP exp
#define RXE_LOG log
#define RXE_SQRT sqrt
#define RXE_TANH tanh
#define RXE_ERF erf
#define RXE_POW pow
#define RXE_FABS fabs
#define RXE_FLOOR floor
#define RXE_CEIL ceil
#define RXE_ROUND rint
#define RXE_INFINITY INFINITY
#define RXE_NAN NAN
#endif

#endif /* RELAX_EDGE_KERNEL_H_ */
