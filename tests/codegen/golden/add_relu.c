#ifndef rxe_v4f32_DEFINED
#define rxe_v4f32_DEFINED
typedef float rxe_v4f32 __attribute__((vector_size(16)));
typedef float rxe_v4f32_unaligned __attribute__((vector_size(16), aligned(sizeof(float)), may_alias));
typedef int32_t rxe_v4f32_mask __attribute__((vector_size(16)));
#define rxe_v4f32_load(p) (*(const rxe_v4f32_unaligned*)(p))
#define rxe_v4f32_store(p, v) (*(rxe_v4f32_unaligned*)(p) = (v))
#define rxe_v4f32_dup(x) ((rxe_v4f32){(x), (x), (x), (x)})
#define rxe_v4f32_blend(m, a, b) ((rxe_v4f32)(((rxe_v4f32_mask)(m) & (rxe_v4f32_mask)(a)) | (~(rxe_v4f32_mask)(m) & (rxe_v4f32_mask)(b))))
RXE_VECTOR_MATH_F32(rxe_v4f32)
#endif
static rxe_status_t k_fused_add_relu(const float* restrict x0, const float* restrict x1, float* restrict relu, int64_t n, rxe_error_t* err) {
  (void)err;
  for (int64_t i0_o = 0; i0_o < (n / 4); ++i0_o) {
    {  /* i0_v: 4 lanes */
      rxe_v4f32_store(&relu[4 * i0_o], rxe_v4f32_blend((rxe_v4f32_load(&x0[4 * i0_o]) + rxe_v4f32_load(&x1[4 * i0_o])) > rxe_v4f32_dup(0.0f), (rxe_v4f32_load(&x0[4 * i0_o]) + rxe_v4f32_load(&x1[4 * i0_o])), rxe_v4f32_dup(0.0f)));
    }
  }
  for (int64_t i0_r = 0; i0_r < (n % 4); ++i0_r) {
    relu[(i0_r + 4 * (n / 4))] = RXE_MAX((x0[(i0_r + 4 * (n / 4))] + x1[(i0_r + 4 * (n / 4))]), 0.0f);
  }
  return RXE_OK;
}
