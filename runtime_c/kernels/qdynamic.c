/* Integer matmuls with 32-bit outputs (see relax_edge/kernels_qdynamic.h): x
 * quantized dynamically (a vectorized min/max pass, then a vectorized
 * divide-round-clamp pass into the scratch), then the int8 GEMM of qgemm.c
 * in its 32-bit output mode. */
#include "qgemm_internal.h"
#include "relax_edge/kernels_qdynamic.h"
#include "relax_edge/runtime.h"

/* The scale and the quantized values are float32 results of single operations: no fused multiply-adds. */
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#endif

#if defined(__AVX512F__) && defined(__AVX512BW__)
#define QDYN_AVX512 1
#include <immintrin.h>
#elif defined(__AVX2__)
#define QDYN_AVX2 1
#include <immintrin.h>
#elif defined(__ARM_NEON) && defined(__aarch64__)
#define QDYN_NEON64 1
#include <arm_neon.h>
#endif

/* round half to even of |v| <= 2^22 in the default rounding mode: 1.5 * 2^23 + v has unit spacing (the
 * pair is not reassociated: no -ffast-math) */
static inline float round_even(float v) { return (v + 12582912.0f) - 12582912.0f; }

void rxe_qint8_dynamic_params(const float* x, int64_t count, float* out_scale, int32_t* out_zero) {
  float lo = 0.0f, hi = 0.0f, span, scale, initial; /* starting at 0: min(0, min x) and max(0, max x) */
  int64_t i = 0;
#if defined(QDYN_AVX512)
  __m512 vlo = _mm512_setzero_ps(), vhi = vlo, vlo2 = vlo, vhi2 = vlo;
  for (; i + 32 <= count; i += 32) {
    __m512 a = _mm512_loadu_ps(x + i), b = _mm512_loadu_ps(x + i + 16);
    vlo = _mm512_min_ps(vlo, a);
    vhi = _mm512_max_ps(vhi, a);
    vlo2 = _mm512_min_ps(vlo2, b);
    vhi2 = _mm512_max_ps(vhi2, b);
  }
  lo = _mm512_reduce_min_ps(_mm512_min_ps(vlo, vlo2));
  hi = _mm512_reduce_max_ps(_mm512_max_ps(vhi, vhi2));
#elif defined(QDYN_AVX2)
  __m256 vlo = _mm256_setzero_ps(), vhi = vlo;
  float lanes[8];
  int j;
  for (; i + 8 <= count; i += 8) {
    __m256 a = _mm256_loadu_ps(x + i);
    vlo = _mm256_min_ps(vlo, a);
    vhi = _mm256_max_ps(vhi, a);
  }
  _mm256_storeu_ps(lanes, vlo);
  for (j = 0; j < 8; ++j) lo = lanes[j] < lo ? lanes[j] : lo;
  _mm256_storeu_ps(lanes, vhi);
  for (j = 0; j < 8; ++j) hi = lanes[j] > hi ? lanes[j] : hi;
#elif defined(QDYN_NEON64)
  float32x4_t vlo = vdupq_n_f32(0.0f), vhi = vlo;
  for (; i + 4 <= count; i += 4) {
    float32x4_t a = vld1q_f32(x + i);
    vlo = vminq_f32(vlo, a);
    vhi = vmaxq_f32(vhi, a);
  }
  lo = vminvq_f32(vlo);
  hi = vmaxvq_f32(vhi);
#endif
  for (; i < count; ++i) {
    lo = x[i] < lo ? x[i] : lo;
    hi = x[i] > hi ? x[i] : hi;
  }
  span = hi == lo ? 1.0f : hi - lo;
  scale = span / 255.0f;
  initial = 0.0f - lo / scale;
  initial = initial < 0.0f ? 0.0f : initial > 255.0f ? 255.0f : initial;
  *out_scale = scale;
  *out_zero = (int32_t)round_even(initial);
}

void rxe_qint8_quantize_u8(const float* x, int64_t count, float scale, int32_t zero, uint8_t* out) {
  /* clamping x / scale to [-zero, 255 - zero] before rounding is clamping after: the bounds are integers */
  float lo = (float)-zero, hi = (float)(255 - zero);
  int64_t i = 0;
#if defined(QDYN_AVX512)
  __m512 s = _mm512_set1_ps(scale), vlo = _mm512_set1_ps(lo), vhi = _mm512_set1_ps(hi);
  __m512i z = _mm512_set1_epi32(zero);
  for (; i + 16 <= count; i += 16) {
    __m512 v = _mm512_min_ps(_mm512_max_ps(_mm512_div_ps(_mm512_loadu_ps(x + i), s), vlo), vhi);
    __m512i q = _mm512_add_epi32(_mm512_cvtps_epi32(v), z); /* the default rounding: half to even */
    _mm_storeu_si128((__m128i*)(void*)(out + i), _mm512_cvtepi32_epi8(q));
  }
#elif defined(QDYN_AVX2)
  __m256 s = _mm256_set1_ps(scale), vlo = _mm256_set1_ps(lo), vhi = _mm256_set1_ps(hi);
  __m256i z = _mm256_set1_epi32(zero);
  for (; i + 16 <= count; i += 16) {
    __m256 a = _mm256_min_ps(_mm256_max_ps(_mm256_div_ps(_mm256_loadu_ps(x + i), s), vlo), vhi);
    __m256 b = _mm256_min_ps(_mm256_max_ps(_mm256_div_ps(_mm256_loadu_ps(x + i + 8), s), vlo), vhi);
    __m256i q = _mm256_packs_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(a), z),
                                   _mm256_add_epi32(_mm256_cvtps_epi32(b), z)); /* a0-3 b0-3 | a4-7 b4-7 */
    q = _mm256_permute4x64_epi64(q, 0xd8);                                      /* a0-7 b0-7 */
    _mm_storeu_si128((__m128i*)(void*)(out + i),
                     _mm_packus_epi16(_mm256_castsi256_si128(q), _mm256_extracti128_si256(q, 1)));
  }
#elif defined(QDYN_NEON64)
  float32x4_t s = vdupq_n_f32(scale), vlo = vdupq_n_f32(lo), vhi = vdupq_n_f32(hi);
  int32x4_t z = vdupq_n_s32(zero);
  for (; i + 8 <= count; i += 8) {
    float32x4_t a = vminq_f32(vmaxq_f32(vdivq_f32(vld1q_f32(x + i), s), vlo), vhi);
    float32x4_t b = vminq_f32(vmaxq_f32(vdivq_f32(vld1q_f32(x + i + 4), s), vlo), vhi);
    uint16x8_t h = vcombine_u16(vqmovun_s32(vaddq_s32(vcvtnq_s32_f32(a), z)),
                                vqmovun_s32(vaddq_s32(vcvtnq_s32_f32(b), z)));
    vst1_u8(out + i, vqmovn_u16(h));
  }
#endif
  for (; i < count; ++i) {
    float v = x[i] / scale;
    v = v < lo ? lo : v > hi ? hi : v;
    out[i] = (uint8_t)((int32_t)round_even(v) + zero);
  }
}

/* RXE_OK, or the error of bad sizes or zero points (`what` names the kernel). */
static rxe_status_t check(const char* what, int64_t m, int64_t n, int64_t k, const int32_t* w_zero, int64_t flags,
                          rxe_error_t* err) {
  int64_t i;
  if (m < 0 || n < 0) return rxe_error_set(err, RXE_ERR_SHAPE, "%s: negative m %d or n %d", what, m, n);
  if (k <= 0 || k > RXE_QDYN_MAX_K)
    return rxe_error_set(err, RXE_ERR_SHAPE, "%s: k %d is outside [1, %d]", what, k, (int64_t)RXE_QDYN_MAX_K);
  if (flags < 0 || flags > 7) return rxe_error_set(err, RXE_ERR_INTERNAL, "%s: flags %d are not 0..7", what, flags);
  if ((flags & RXE_QDYN_W_ZERO) && m > 0)
    for (i = 0; i < n; ++i)
      if (w_zero[i] < -128 || w_zero[i] > 127)
        return rxe_error_set(err, RXE_ERR_INTERNAL, "%s: w_zero[%d] = %d is outside [-128, 127]", what, i,
                             (int64_t)w_zero[i]);
  return RXE_OK;
}

/* The GEMM over x rows of k bytes (int8 after `flip`), x zero point xz in that signed space; the
 * requantization's fields zero (the 32-bit mode does not read them). */
static void gemm_setup(rxe_qgemm_t* g, const uint8_t* x, const void* w_packed, int64_t m, int64_t n, int64_t k,
                       uint32_t flip, int32_t xz) {
  rxe_qgemm_t setup = {0};
  setup.x = x;
  setup.ldx = setup.k = k;
  setup.w_packed = (const uint8_t*)w_packed;
  setup.m = m;
  setup.n = setup.ldm = n;
  setup.flip = flip;
  setup.xz = xz;
  setup.ldn = 1;
  *g = setup;
}

rxe_status_t rxe_lib_matmul_integer_i32(const void* x, const void* w_packed, const int32_t* w_zero, int32_t* out,
                                        int64_t m, int64_t n, int64_t k, int64_t x_zero, int64_t flags,
                                        rxe_error_t* err) {
  const char* what = "rxe_lib_matmul_integer_i32";
  int64_t x_lo = flags & RXE_QDYN_X_UNSIGNED ? 0 : -128;
  rxe_qgemm_t g;
  rxe_qgemm_out32_t o;
  rxe_status_t st = check(what, m, n, k, w_zero, flags, err);
  if (st != RXE_OK) return st;
  if (x_zero < x_lo || x_zero > x_lo + 255)
    return rxe_error_set(err, RXE_ERR_INTERNAL, "%s: x zero point %d is outside its type's range", what, x_zero);
  if (m == 0 || n == 0) return RXE_OK;
  if (!x || !w_packed || !out || ((flags & RXE_QDYN_W_ZERO) && !w_zero))
    return rxe_error_set(err, RXE_ERR_NULL, "%s: a pointer argument is NULL", what);
  gemm_setup(&g, (const uint8_t*)x, w_packed, m, n, k, flags & RXE_QDYN_X_UNSIGNED ? 0x80808080u : 0u,
             (int32_t)(flags & RXE_QDYN_X_UNSIGNED ? x_zero - 128 : x_zero));
  o.wz = flags & RXE_QDYN_W_ZERO ? w_zero : NULL;
  o.out_i32 = out;
  o.out_f32 = NULL;
  o.x_scale = 0.0f;
  o.w_scale = o.bias = NULL;
  o.ldm = n;
  rxe_qgemm_run_out32(&g, &o);
  return RXE_OK;
}

rxe_status_t rxe_lib_dynamic_qdense_f32(const float* x, const void* w_packed, const int32_t* w_zero,
                                        const float* w_scale, const float* bias, float* out, void* scratch,
                                        int64_t m, int64_t n, int64_t k, int64_t flags, rxe_error_t* err) {
  const char* what = "rxe_lib_dynamic_qdense_f32";
  rxe_qgemm_t g;
  rxe_qgemm_out32_t o;
  float scale;
  int32_t zero;
  rxe_status_t st = check(what, m, n, k, w_zero, flags, err);
  if (st != RXE_OK) return st;
  if (m == 0 || n == 0) return RXE_OK;
  if (!x || !w_packed || !w_scale || !out || !scratch || ((flags & RXE_QDYN_W_ZERO) && !w_zero) ||
      ((flags & RXE_QDYN_BIAS) && !bias))
    return rxe_error_set(err, RXE_ERR_NULL, "%s: a pointer argument is NULL", what);
  rxe_qint8_dynamic_params(x, m * k, &scale, &zero);
  rxe_qint8_quantize_u8(x, m * k, scale, zero, (uint8_t*)scratch);
  gemm_setup(&g, (const uint8_t*)scratch, w_packed, m, n, k, 0x80808080u, zero - 128);
  o.wz = flags & RXE_QDYN_W_ZERO ? w_zero : NULL;
  o.out_i32 = NULL;
  o.out_f32 = out;
  o.x_scale = scale;
  o.w_scale = w_scale;
  o.bias = flags & RXE_QDYN_BIAS ? bias : NULL;
  o.ldm = n;
  rxe_qgemm_run_out32(&g, &o);
  return RXE_OK;
}
