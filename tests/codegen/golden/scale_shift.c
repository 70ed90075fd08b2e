#include "relax_edge/threads.h"
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
typedef struct {
  const float* x0;
  const float* x1;
  const float* x2;
  float* add;
  int64_t m;
  int64_t n;
  rxe_error_t* err;
  rxe_status_t status;
  unsigned char failed;
} k_fused_multiply_add_par0_ctx;
static void k_fused_multiply_add_par0(void* task, int64_t begin, int64_t end, int thread) {
  k_fused_multiply_add_par0_ctx* ctx = (k_fused_multiply_add_par0_ctx*)task;
  (void)thread;
  const float* restrict x0 = ctx->x0; (void)x0;
  const float* restrict x1 = ctx->x1; (void)x1;
  const float* restrict x2 = ctx->x2; (void)x2;
  float* restrict add = ctx->add; (void)add;
  int64_t m = ctx->m; (void)m;
  int64_t n = ctx->n; (void)n;
  rxe_error_t* err = ctx->err; (void)err;
  for (int64_t i0 = begin; i0 < end; ++i0) {
    for (int64_t i1_o = 0; i1_o < (n / 4); ++i1_o) {
      {  /* i1_v: 4 lanes */
        rxe_v4f32_store(&add[(i0 * n + 4 * i1_o)], ((rxe_v4f32_load(&x0[(i0 * n + 4 * i1_o)]) * rxe_v4f32_load(&x1[4 * i1_o])) + rxe_v4f32_load(&x2[4 * i1_o])));
      }
    }
    for (int64_t i1_r = 0; i1_r < (n % 4); ++i1_r) {
      add[(i0 * n + i1_r + 4 * (n / 4))] = ((x0[(i0 * n + i1_r + 4 * (n / 4))] * x1[(i1_r + 4 * (n / 4))]) + x2[(i1_r + 4 * (n / 4))]);
    }
  }
}
static rxe_status_t k_fused_multiply_add(const float* restrict x0, const float* restrict x1, const float* restrict x2, float* restrict add, int64_t m, int64_t n, rxe_error_t* err) {
  (void)err;
  if ((m * n > 32768)) {
    {
      k_fused_multiply_add_par0_ctx ctx = {x0, x1, x2, add, m, n, err, RXE_OK, 0};
      rxe_threads_parallel_for(m, k_fused_multiply_add_par0, &ctx);
      if (ctx.failed) return ctx.status;
    }
  } else {
    for (int64_t i0_1 = 0; i0_1 < m; ++i0_1) {
      for (int64_t i1_o_1 = 0; i1_o_1 < (n / 4); ++i1_o_1) {
        {  /* i1_v: 4 lanes */
          rxe_v4f32_store(&add[(i0_1 * n + 4 * i1_o_1)], ((rxe_v4f32_load(&x0[(i0_1 * n + 4 * i1_o_1)]) * rxe_v4f32_load(&x1[4 * i1_o_1])) + rxe_v4f32_load(&x2[4 * i1_o_1])));
        }
      }
      for (int64_t i1_r_1 = 0; i1_r_1 < (n % 4); ++i1_r_1) {
        add[(i0_1 * n + i1_r_1 + 4 * (n / 4))] = ((x0[(i0_1 * n + i1_r_1 + 4 * (n / 4))] * x1[(i1_r_1 + 4 * (n / 4))]) + x2[(i1_r_1 + 4 * (n / 4))]);
      }
    }
  }
  return RXE_OK;
}
