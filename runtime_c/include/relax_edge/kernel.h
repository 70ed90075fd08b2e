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

/* float16 and bfloat16 are stored as uint16_t bits and computed as float:
 * widen after a load, narrow (round to nearest even) before a store (src/half.c). */
float rxe_half_widen(uint16_t h);
uint16_t rxe_half_narrow(float x);
float rxe_bfloat_widen(uint16_t h);
uint16_t rxe_bfloat_narrow(float x);

#define RXE_MIN(a, b) ((a) < (b) ? (a) : (b))
#define RXE_MAX(a, b) ((a) > (b) ? (a) : (b))

/*
 * float32 exp, erf and tanh without libm, scalar and on vectors.
 *
 * Numerical contract, measured against numpy's float64 functions over dense
 * sweeps and every special case (tests/schedule/test_vector_math.py, on the
 * host and on aarch64 NEON):
 *   exp:  at most 1 ulp; +inf above 88.7228; results below FLT_MIN (x at
 *         or below -87.3365) flush to 0: subnormal arithmetic costs a
 *         hundred cycles an operation on common CPUs, and softmax over a
 *         masked row would pay it for every masked element; NaN stays NaN.
 *   erf:  at most 2 ulp; exactly +-1 for |x| >= 3.925, erf(-0) = -0, NaN
 *         stays NaN.
 *   tanh: at most 2 ulp; exactly +-1 for large |x|, tanh(-0) = -0, NaN
 *         stays NaN.
 * Algorithms: exp by Cody-Waite reduction x = k ln2 + r (k rounded with the
 * 1.5 * 2^23 trick, ln2 in two parts), a degree-7 polynomial for exp(r), and
 * 2^k built from exponent bits in two factors (so results overflow to inf). erf: x + x P(x^2) below
 * 0.921875, else 1 - exp(Q(|x|)) with Q fitted to log(erfc). tanh: x + x^3
 * P(x^2) below 0.625, else 1 - 2 / (exp(2|x|) + 1).
 *
 * The scalar functions (rxe_f32_exp, ...) and the vector ones
 * (RXE_VECTOR_MATH_F32(T) defines T_exp, T_erf, T_tanh for a GCC/Clang
 * vector type T of float with its T_mask type of int32_t) expand one
 * template: the same operations in the same order, so an element's result
 * does not depend on whether it falls in a vector or a remainder lane. The
 * LLVM backend emits the same sequence (codegen/llvm/kernel.py). Only + - *
 * /, compares and integer bit operations (>> of a negative int is
 * arithmetic, as in GCC and Clang): freestanding-safe.
 */
static inline int32_t rxe_f32_bits(float x) {
  union { float f; int32_t i; } u;
  u.f = x;
  return u.i;
}

static inline float rxe_f32_from_bits(int32_t i) {
  union { float f; int32_t i; } u;
  u.i = i;
  return u.f;
}

/* the primitives a template needs, for scalars (S) and vectors (V) */
#define RXE_SEL_S(T, m, a, b) ((m) ? (a) : (b))
#define RXE_DUP_S(T, c) (c)
#define RXE_BITS_S(T, x) rxe_f32_bits(x)
#define RXE_FLOAT_S(T, i) rxe_f32_from_bits(i)
#define RXE_SEL_V(T, m, a, b)                                                      \
  ((T)((((T##_mask)(m)) & (T##_mask)(a)) | (~((T##_mask)(m)) & (T##_mask)(b))))
#define RXE_DUP_V(T, c) ((T){0} + (c))
#define RXE_BITS_V(T, x) ((T##_mask)(x))
#define RXE_FLOAT_V(T, i) ((T)(i))

/* defines NAME##exp, NAME##erf, NAME##tanh on float type T with integer type
   I; K is S (scalar) or V (vector), ATTR is prepended to each definition */
#define RXE_F32_MATH(NAME, T, I, K, ATTR)                                          \
  ATTR static inline T NAME##exp(T x) {                                            \
    T c = RXE_SEL_##K(T, x > -0x1.5d589ep+6f, x, RXE_DUP_##K(T, -0x1.5d589ep+6f));  \
    c = RXE_SEL_##K(T, c < 89.0f, c, RXE_DUP_##K(T, 89.0f));                       \
    T t = c * 0x1.715476p+0f + 0x1.8p23f; /* round(c / ln2) + 1.5 * 2^23 */        \
    T k = t - 0x1.8p23f;                                                           \
    I n = RXE_BITS_##K(T, t) - 0x4b400000;                                         \
    T r = c - k * 0x1.62e4p-1f;                                                    \
    r = r - k * 0x1.7f7d1cp-20f;                                                   \
    T p = RXE_DUP_##K(T, 0x1.a0d2cep-13f);                                             \
    p = p * r + 0x1.6e879cp-10f;                                                   \
    p = p * r + 0x1.11121p-7f;                                                     \
    p = p * r + 0x1.555382p-5f;                                                    \
    p = p * r + 0x1.555554p-3f;                                                    \
    p = p * r + 0x1p-1f;                                                           \
    p = p * (r * r) + r;                                                           \
    p = p + 1.0f;                                                                  \
    I n1 = n >> 1;                                                                 \
    T y = p * RXE_FLOAT_##K(T, (n1 + 127) << 23);                                  \
    y = y * RXE_FLOAT_##K(T, (n - n1 + 127) << 23);                                \
    y = RXE_SEL_##K(T, x > -0x1.5d589ep+6f, y, RXE_DUP_##K(T, 0.0f)); /* no subnormal */ \
    return RXE_SEL_##K(T, x == x, y, x);                                           \
  }                                                                                \
  ATTR static inline T NAME##erf(T x) {                                            \
    T a = RXE_FLOAT_##K(T, RXE_BITS_##K(T, x) & 0x7fffffff);                       \
    I sign = RXE_BITS_##K(T, x) ^ RXE_BITS_##K(T, a);                              \
    T z = a * a;                                                                   \
    T p = RXE_DUP_##K(T, -0x1.39d988p-11f);                                            \
    p = p * z + 0x1.472ae6p-8f;                                                    \
    p = p * z - 0x1.b68828p-6f;                                                    \
    p = p * z + 0x1.ce1a2cp-4f;                                                    \
    p = p * z - 0x1.8126e4p-2f;                                                    \
    p = p * z + 0x1.06eba6p-3f;                                                    \
    T small = a + a * p;                                                           \
    T c = RXE_SEL_##K(T, a > 3.925f, RXE_DUP_##K(T, 3.925f), a); /* NaN stays */   \
    T q = RXE_DUP_##K(T, 0x1.b70a8p-20f);                                              \
    q = q * c - 0x1.81d0f8p-15f;                                                   \
    q = q * c + 0x1.3875c4p-11f;                                                   \
    q = q * c - 0x1.379478p-8f;                                                    \
    q = q * c + 0x1.b0936ap-6f;                                                    \
    q = q * c - 0x1.c2b988p-4f;                                                    \
    q = q * c - 0x1.438532p-1f;                                                    \
    q = q * c - 0x1.2154cep+0f;                                                    \
    q = q * c + 0x1.460c3ap-12f;                                                   \
    T big = 1.0f - NAME##exp(q);                                                   \
    T y = RXE_SEL_##K(T, a < 0.921875f, small, big);                               \
    return RXE_FLOAT_##K(T, RXE_BITS_##K(T, y) | sign);                            \
  }                                                                                \
  ATTR static inline T NAME##tanh(T x) {                                           \
    T a = RXE_FLOAT_##K(T, RXE_BITS_##K(T, x) & 0x7fffffff);                       \
    I sign = RXE_BITS_##K(T, x) ^ RXE_BITS_##K(T, a);                              \
    T z = a * a;                                                                   \
    T p = RXE_DUP_##K(T, -0x1.75e1d4p-8f);                                             \
    p = p * z + 0x1.52269cp-6f;                                                    \
    p = p * z - 0x1.b83c5ap-5f;                                                    \
    p = p * z + 0x1.110726p-3f;                                                    \
    p = p * z - 0x1.555532p-2f;                                                    \
    T small = a + (a * z) * p;                                                     \
    T big = 1.0f - 2.0f / (NAME##exp(a + a) + 1.0f);                               \
    T y = RXE_SEL_##K(T, a < 0.625f, small, big);                                  \
    return RXE_FLOAT_##K(T, RXE_BITS_##K(T, y) | sign);                            \
  }

RXE_F32_MATH(rxe_f32_, float, int32_t, S, )

/* T_exp, T_erf, T_tanh on the vector type T (GCC/Clang vector extensions) */
#define RXE_VECTOR_MATH_F32(T) RXE_F32_MATH(T##_, T, T##_mask, V, __attribute__((unused)))

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
/* floor, ceil and round (halves to even) in single precision, as rxe_floor / rxe_ceil / rxe_round give
 * them through double, bit for bit (NaN, the infinities and |x| >= 2^23, already whole, are returned as
 * they are; a negative result that rounds to zero is +0.0 as there), without double arithmetic: a
 * single-precision FPU (Cortex-M4F) runs them in a few instructions, not in soft-float calls. */
static inline float rxe_f32_floor(float x) {
  float t;
  if (!(x < 8388608.0f && x > -8388608.0f)) return x;
  t = (float)(int32_t)x;
  return t > x ? t - 1.0f : t;
}
static inline float rxe_f32_ceil(float x) { return -rxe_f32_floor(-x); }
static inline float rxe_f32_round(float x) {
  float f, d;
  if (!(x < 8388608.0f && x > -8388608.0f)) return x;
  f = rxe_f32_floor(x);
  d = x - f; /* exact below 2^23 */
  if (d > 0.5f) return f + 1.0f;
  if (d < 0.5f) return f;
  return ((int32_t)f & 1) == 0 ? f : f + 1.0f;
}
#define RXE_FLOORF(x) rxe_f32_floor(x)
#define RXE_CEILF(x) rxe_f32_ceil(x)
#define RXE_ROUNDF(x) rxe_f32_round(x)
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
/* trigonometric, hyperbolic, fmod: kernels/trig_math.c (library code, linked where a model calls them) */
float rxe_sinf(float x);
double rxe_sin(double x);
float rxe_cosf(float x);
double rxe_cos(double x);
float rxe_tanf(float x);
double rxe_tan(double x);
float rxe_asinf(float x);
double rxe_asin(double x);
float rxe_acosf(float x);
double rxe_acos(double x);
float rxe_atanf(float x);
double rxe_atan(double x);
float rxe_sinhf(float x);
double rxe_sinh(double x);
float rxe_coshf(float x);
double rxe_cosh(double x);
float rxe_asinhf(float x);
double rxe_asinh(double x);
float rxe_acoshf(float x);
double rxe_acosh(double x);
float rxe_atanhf(float x);
double rxe_atanh(double x);
float rxe_fmodf(float x, float y);
double rxe_fmod(double x, double y);
#define RXE_SINF rxe_sinf
#define RXE_SIN rxe_sin
#define RXE_COSF rxe_cosf
#define RXE_COS rxe_cos
#define RXE_TANF rxe_tanf
#define RXE_TAN rxe_tan
#define RXE_ASINF rxe_asinf
#define RXE_ASIN rxe_asin
#define RXE_ACOSF rxe_acosf
#define RXE_ACOS rxe_acos
#define RXE_ATANF rxe_atanf
#define RXE_ATAN rxe_atan
#define RXE_SINHF rxe_sinhf
#define RXE_SINH rxe_sinh
#define RXE_COSHF rxe_coshf
#define RXE_COSH rxe_cosh
#define RXE_ASINHF rxe_asinhf
#define RXE_ASINH rxe_asinh
#define RXE_ACOSHF rxe_acoshf
#define RXE_ACOSH rxe_acosh
#define RXE_ATANHF rxe_atanhf
#define RXE_ATANH rxe_atanh
#define RXE_FMODF rxe_fmodf
#define RXE_FMOD rxe_fmod
/* for math.c and trig_math.c: float rxe_NAMEf(float) as rxe_NAME on double, rounded */
#define RXE_DEFINE_FLOAT_VERSION(name) \
  float rxe_##name##f(float x) { return (float)rxe_##name((double)x); }
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
#define RXE_SINF sinf
#define RXE_SIN sin
#define RXE_COSF cosf
#define RXE_COS cos
#define RXE_TANF tanf
#define RXE_TAN tan
#define RXE_ASINF asinf
#define RXE_ASIN asin
#define RXE_ACOSF acosf
#define RXE_ACOS acos
#define RXE_ATANF atanf
#define RXE_ATAN atan
#define RXE_SINHF sinhf
#define RXE_SINH sinh
#define RXE_COSHF coshf
#define RXE_COSH cosh
#define RXE_ASINHF asinhf
#define RXE_ASINH asinh
#define RXE_ACOSHF acoshf
#define RXE_ACOSH acosh
#define RXE_ATANHF atanhf
#define RXE_ATANH atanh
#define RXE_FMODF fmodf
#define RXE_FMOD fmod
#define RXE_INFINITY INFINITY
#define RXE_NAN NAN
#endif

#endif /* RELAX_EDGE_KERNEL_H_ */
