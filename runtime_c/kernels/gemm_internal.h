/*
 * The blocked GEMM driver shared by the dense, matmul and conv2d kernels:
 * c (m,n) = epilogue(A (m,k) @ B (k,n)), in KC x NC blocks of B and MR x NR
 * register tiles.
 *
 * A is either row-major (a, lda: each MR x KC micro-panel is packed on the
 * stack, 6 KB) or already packed in row panels of MR (a_packed: panel r at
 * a_packed + r*a_panel_stride, column p of it at + p*MR).
 * B is either already in column panels of NR (b_packed: panel j at
 * b_packed + j*b_panel_stride, row p at + p*ldb; a row-major B whose
 * columns are a multiple of NR is read in place with b_panel_stride NR) or
 * packed block by block into scratch (KC*NC floats) by pack_b, a run of
 * column panels per call. With both b_packed and pack_b, the full panels are
 * read in place and pack_b packs only a last, partial panel (KC*NR floats).
 * The epilogue adds row_bias[i] and/or col_bias[j] (either may be NULL) and
 * applies act, after the last k block.
 */
#ifndef RELAX_EDGE_GEMM_INTERNAL_H_
#define RELAX_EDGE_GEMM_INTERNAL_H_

#include "relax_edge/kernels.h"

/* Pack rows [p0, p0+kc) and columns [j0, j0+nr) of B into dst as
 * ceil(nr/NR) column panels of kc rows x NR floats (panel q at dst +
 * q*kc*NR), zeros past nr. */
typedef void (*rxe_gemm_pack_fn)(const void* ctx, int64_t p0, int64_t kc, int64_t j0, int64_t nr,
                                 float* dst);

typedef struct {
  int64_t m, n, k;
  const float* a;
  int64_t lda;
  const float* a_packed;
  int64_t a_panel_stride;
  const float* b_packed;
  int64_t b_panel_stride, ldb;
  rxe_gemm_pack_fn pack_b;
  const void* b_ctx;
  float* scratch;
  float* c;
  int64_t ldc;
  const float* row_bias;
  const float* col_bias;
  int act;
} rxe_gemm_t;

void rxe_gemm_run(const rxe_gemm_t* g);

/* The dense kernel for few rows (gemv.c): c (m,n) = act(a (m,k) @ W (k,n) +
 * bias (n,)), a and c row-major, W packed as for rxe_lib_dense_f32, bias
 * may be NULL, 0 <= m <= RXE_GEMV_MAX_M. Streams each column panel of W
 * once for all m rows (the blocked driver above reads W in KC x NC blocks). */
void rxe_gemv_run(const float* a, const float* w_packed, const float* bias, float* c, int64_t m, int64_t n,
                  int64_t k, int act);
/* The same for matmul: c (m,n) = a (m,k) @ b (k,n), all row-major, no
 * epilogue, 0 <= m <= RXE_GEMV_MAX_M; b is read in place (no packing). */
void rxe_gemv_row_major_run(const float* a, const float* b, float* c, int64_t m, int64_t n, int64_t k);

/* rxe_lib_dense_f32 and rxe_lib_matmul_f32 take the paths above for m <=
 * RXE_DENSE_GEMV_ROWS, the blocked driver for more rows (compile-time
 * configuration: 0 measures the driver alone, scripts/bench_gemv.py). */
#ifndef RXE_DENSE_GEMV_ROWS
#define RXE_DENSE_GEMV_ROWS RXE_GEMV_MAX_M
#endif
#if RXE_DENSE_GEMV_ROWS < 0 || RXE_DENSE_GEMV_ROWS > RXE_GEMV_MAX_M
#error "RXE_DENSE_GEMV_ROWS must be in [0, RXE_GEMV_MAX_M]"
#endif

/* Is act one of RXE_ACT_*? */
#define RXE_ACT_VALID(act) ((act) >= RXE_ACT_NONE && (act) <= RXE_ACT_RELU6)

#endif /* RELAX_EDGE_GEMM_INTERNAL_H_ */
