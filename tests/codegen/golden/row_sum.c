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
  float* sum;
  int64_t m;
  int64_t n;
  rxe_error_t* err;
  rxe_status_t status;
  unsigned char failed;
} k_sum_par0_ctx;
static void k_sum_par0(void* task, int64_t begin, int64_t end, int thread) {
  k_sum_par0_ctx* ctx = (k_sum_par0_ctx*)task;
  (void)thread;
  const float* restrict x0 = ctx->x0; (void)x0;
  float* restrict sum = ctx->sum; (void)sum;
  int64_t m = ctx->m; (void)m;
  int64_t n = ctx->n; (void)n;
  rxe_error_t* err = ctx->err; (void)err;
  for (int64_t i0 = begin; i0 < end; ++i0) {
    {
      float sum_acc[1];
      sum_acc[0] = 0.0f;
      {
        float sum_acc_lanes[4];
        {  /* r1_i: 4 lanes */
          rxe_v4f32_store(&sum_acc_lanes[0], rxe_v4f32_dup(0.0f));
        }
        for (int64_t r1_o = 0; r1_o < (n / 4); ++r1_o) {
          {  /* r1_v: 4 lanes */
            rxe_v4f32_store(&sum_acc_lanes[0], (rxe_v4f32_load(&sum_acc_lanes[0]) + rxe_v4f32_load(&x0[(i0 * n + 4 * r1_o)])));
          }
        }
        #pragma GCC unroll 4
        for (int64_t r1_c = 0; r1_c < 4; ++r1_c) {
          sum_acc[0] = (sum_acc[0] + sum_acc_lanes[r1_c]);
        }
        for (int64_t r1_r = 0; r1_r < (n % 4); ++r1_r) {
          sum_acc[0] = (sum_acc[0] + x0[(i0 * n + r1_r + 4 * (n / 4))]);
        }
      }
      sum[i0] = sum_acc[0];
    }
  }
}
static rxe_status_t k_sum(const float* restrict x0, float* restrict sum, int64_t m, int64_t n, rxe_error_t* err) {
  (void)err;
  if (((2 * m + m * n) > 32768)) {
    {
      k_sum_par0_ctx ctx = {x0, sum, m, n, err, RXE_OK, 0};
      rxe_threads_parallel_for(m, k_sum_par0, &ctx);
      if (ctx.failed) return ctx.status;
    }
  } else {
    for (int64_t i0_1 = 0; i0_1 < m; ++i0_1) {
      {
        float sum_acc[1];
        sum_acc[0] = 0.0f;
        {
          float sum_acc_lanes[4];
          {  /* r1_i: 4 lanes */
            rxe_v4f32_store(&sum_acc_lanes[0], rxe_v4f32_dup(0.0f));
          }
          for (int64_t r1_o_1 = 0; r1_o_1 < (n / 4); ++r1_o_1) {
            {  /* r1_v: 4 lanes */
              rxe_v4f32_store(&sum_acc_lanes[0], (rxe_v4f32_load(&sum_acc_lanes[0]) + rxe_v4f32_load(&x0[(i0_1 * n + 4 * r1_o_1)])));
            }
          }
          #pragma GCC unroll 4
          for (int64_t r1_c_1 = 0; r1_c_1 < 4; ++r1_c_1) {
            sum_acc[0] = (sum_acc[0] + sum_acc_lanes[r1_c_1]);
          }
          for (int64_t r1_r_1 = 0; r1_r_1 < (n % 4); ++r1_r_1) {
            sum_acc[0] = (sum_acc[0] + x0[(i0_1 * n + r1_r_1 + 4 * (n / 4))]);
          }
        }
        sum[i0_1] = sum_acc[0];
      }
    }
  }
  return RXE_OK;
}
