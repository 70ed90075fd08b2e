/*
 * The module of fuzz_module.h, written in the order and with the names of
 * a compiled model's PREFIX.c (relax_edge/codegen/c/templates): kernels,
 * then per function its sizes, profiler entries, bind, layout, workspace
 * size, plan and run entries, then the rxe_function_t / rxe_module_t tables.
 * Generated code also includes relax_edge/kernel.h and kernels.h (math and
 * library kernels) and declares its constants (PREFIX_weights, from
 * PREFIX_weights.S); this module needs neither.
 */
#include <stddef.h>
#include <stdint.h>

#include "relax_edge/runtime.h"
#include "fuzz_module.h"

uint64_t rxe_fuzz_count_runs = 0;

/* ---- kernels ----
 * One static function per tensor program: plain pointers to the data of
 * each buffer (restrict: the memory plan never aliases an input with an
 * output of the same kernel), then the size variables it uses, then err.
 * A kernel returns a status because some check data at run time (an
 * index read from a tensor), as k_copy does. */

/* x (n,) -> y (n,); fails once y[0] is written when x[0] == -1 */
static rxe_status_t k_copy(const float* restrict x, float* restrict y, int64_t n, rxe_error_t* err) {
  y[0] = x[0];
  if (x[0] == -1.0f) return rxe_error_set(err, RXE_ERR_INDEX, "copy: x[0] = -1 is not a valid index");
  rxe_mem_copy(y, x, (uint64_t)n * 4u);
  return RXE_OK;
}

/* x (n,) -> y (n,) = x + runs, runs counted here */
static rxe_status_t k_count(const float* restrict x, float* restrict y, int64_t n, rxe_error_t* err) {
  (void)err;
  ++rxe_fuzz_count_runs;
  for (int64_t i0 = 0; i0 < n; ++i0) y[i0] = x[i0] + (float)rxe_fuzz_count_runs;
  return RXE_OK;
}

/* the step of a toy decoder over a KV-cache-like state (vocab 5, context 8):
 * ids (seq,) written at state[past..past+seq); s = sum of state[0..total);
 * logits (5,) = -((v - (s + 1) % 5) mod 5): the next token is (s + 1) % 5 */
static rxe_status_t k_step(const int64_t* restrict ids, float* restrict state, float* restrict logits,
                           float* restrict scratch, int64_t seq, int64_t total, rxe_error_t* err) {
  int64_t past = total - seq, next, v, i;
  float sum = 0.0f;
  for (i = 0; i < seq; ++i) {
    if (ids[i] < 0 || ids[i] >= 5) return rxe_error_set(err, RXE_ERR_INDEX, "step: token %d is not in [0, 5)", ids[i]);
    state[past + i] = (float)ids[i];
  }
  for (i = 0; i < total; ++i) sum += state[i];
  scratch[0] = sum;
  next = ((int64_t)scratch[0] + 1) % 5;
  for (v = 0; v < 5; ++v) logits[v] = -(float)((v - next + 5) % 5);
  return RXE_OK;
}

/* ---- host functions ----
 * Each graph function becomes four entries over one struct of its size
 * variables: bind (inputs to sizes), layout (sizes to buffer offsets in the
 * workspace), workspace_size and plan_shapes (what a caller asks before a
 * run) and the run entry itself, which binds and checks again: a run never
 * trusts that plan was called with the same inputs. */

/* main: the size variables of its signature */
typedef struct {
  int64_t n;
} fuzz_main_sizes_t;

/* One entry per kernel call: the kernel's symbol and where it comes from
 * (the ONNX node or the binding). The compiler emits them, and the timing
 * in the run entry, under #ifdef RXE_PROFILE only. */
#define FUZZ_MAIN_NUM_PROFILE 1
static rxe_profile_entry_t fuzz_main_profile[] = {
  {"k_copy", "y = x", 0, 0},
};

/* Every check of the signature, in order: each input's dtype and rank
 * (rxe_tensor_check), then each dimension, which binds a size variable the
 * first time it appears (rxe_dim_bind, with the variable's bounds) and is
 * checked against it afterwards (rxe_dim_check). The messages name the
 * input and the dimension, as a user would read them. */
static rxe_status_t fuzz_main_bind(const rxe_tensor_t* inputs, fuzz_main_sizes_t* s, rxe_error_t* err) {
  rxe_status_t st;
  st = rxe_tensor_check(&inputs[0], "input x", RXE_DTYPE_FLOAT, 32, 1, err);
  if (st != RXE_OK) return st;
  st = rxe_dim_bind(inputs[0].shape[0], "input x dimension 0", "n", 1, 4096, &s->n, err);
  if (st != RXE_OK) return st;
  return RXE_OK;
}

/* The memory plan (relax_edge/memory) as code: each intermediate buffer's
 * offset in the workspace and the workspace's size, 64-byte aligned, as
 * expressions of the sizes. main keeps one 64-byte scratch buffer; a
 * bounded plan is a constant, the fixed arena of the function table. */
static uint64_t fuzz_main_layout(const fuzz_main_sizes_t* s, uint64_t* offsets) {
  offsets[0] = (uint64_t)(0);  /* scratch */
  (void)s;
  return (uint64_t)(64);
}

/* Workspace bytes from the sizes alone (no tensors): bound each size as
 * bind would, then lay out. */
rxe_status_t fuzz_main_workspace_size(const int64_t* size_values, uint64_t* out_bytes, rxe_error_t* err) {
  fuzz_main_sizes_t sizes;
  fuzz_main_sizes_t* s = &sizes;
  uint64_t offsets[1];
  rxe_status_t st;
  st = rxe_dim_bind(size_values[0], "size n", "n", 1, 4096, &s->n, err);
  if (st != RXE_OK) return st;
  *out_bytes = fuzz_main_layout(s, offsets);
  return RXE_OK;
}

/* The plan entry: bind, then every output's dims (concatenated) and the
 * workspace the run needs. The caller allocates both. A data-dependent dim
 * (NonZero's count, ABI 3) is reported at its capacity, and the run entry
 * ends by writing the actual dim into outputs[k].shape:
 *   st = rxe_lib_nonzero_f32(..., &s->lv0_dim1, ...);          the kernel's count
 *   st = rxe_dim_bind(s->lv0_dim1, "...", "nz", 0, 3 * s->n, &s->nz, err);
 *   outputs[0].shape[1] = s->nz;
 * with the run-time sizes after the input sizes in the sizes struct. This
 * module has no such output. */
rxe_status_t fuzz_main_plan_shapes(const rxe_tensor_t* inputs, int64_t* out_shapes, uint64_t* out_workspace_bytes,
                                   rxe_error_t* err) {
  fuzz_main_sizes_t sizes;
  fuzz_main_sizes_t* s = &sizes;
  uint64_t offsets[1];
  rxe_status_t st;
  st = fuzz_main_bind(inputs, s, err);
  if (st != RXE_OK) return st;
  out_shapes[0] = s->n;
  *out_workspace_bytes = fuzz_main_layout(s, offsets);
  return RXE_OK;
}

/* The run entry: bind; check that the caller's workspace is large enough
 * and aligned; check each output as the inputs were (dtype, rank, each
 * dimension against the bound sizes); then call the kernels in order, on
 * the inputs' and outputs' data and on workspace offsets, returning the
 * first failed status. Nothing is allocated. */
rxe_status_t fuzz_main(const rxe_tensor_t* inputs, rxe_tensor_t* outputs, void* workspace, uint64_t workspace_bytes,
                       rxe_error_t* err) {
  fuzz_main_sizes_t sizes;
  fuzz_main_sizes_t* s = &sizes;
  uint64_t offsets[1];
  rxe_status_t st;
  uint64_t needed;
#ifdef RXE_PROFILE
  uint64_t t0;
#endif
  st = fuzz_main_bind(inputs, s, err);
  if (st != RXE_OK) return st;
  needed = fuzz_main_layout(s, offsets);
  if (needed > 0 && (workspace == NULL || workspace_bytes < needed)) {
    return rxe_error_set(err, RXE_ERR_WORKSPACE, "workspace of %d bytes, %d needed", (int64_t)workspace_bytes,
                         (int64_t)needed);
  }
  if (needed > 0 && ((uintptr_t)workspace % 64) != 0) {
    return rxe_error_set(err, RXE_ERR_WORKSPACE, "workspace is not aligned to %d bytes", (int64_t)64);
  }
  st = rxe_tensor_check(&outputs[0], "output 0", RXE_DTYPE_FLOAT, 32, 1, err);
  if (st != RXE_OK) return st;
  st = rxe_dim_check(outputs[0].shape[0], s->n, "output 0 dimension 0", "n", err);
  if (st != RXE_OK) return st;
#ifdef RXE_PROFILE
  t0 = rxe_profile_now_ns();
#endif
  st = k_copy((const float*)(RXE_DATA(inputs[0])), (float*)(RXE_DATA(outputs[0])), s->n, err);
  if (st != RXE_OK) return st;
#ifdef RXE_PROFILE
  fuzz_main_profile[0].total_ns += rxe_profile_now_ns() - t0;
  fuzz_main_profile[0].calls += 1;
#endif
  return RXE_OK;
}

/* count: the same entries; no intermediate buffer, so no workspace */
typedef struct {
  int64_t n;
} fuzz_count_sizes_t;

#define FUZZ_COUNT_NUM_PROFILE 1
static rxe_profile_entry_t fuzz_count_profile[] = {
  {"k_count", "y = x + runs", 0, 0},
};

static rxe_status_t fuzz_count_bind(const rxe_tensor_t* inputs, fuzz_count_sizes_t* s, rxe_error_t* err) {
  rxe_status_t st;
  st = rxe_tensor_check(&inputs[0], "input x", RXE_DTYPE_FLOAT, 32, 1, err);
  if (st != RXE_OK) return st;
  st = rxe_dim_bind(inputs[0].shape[0], "input x dimension 0", "n", 0, (int64_t)1 << 20, &s->n, err);
  if (st != RXE_OK) return st;
  return RXE_OK;
}

static uint64_t fuzz_count_layout(const fuzz_count_sizes_t* s, uint64_t* offsets) {
  (void)s;
  (void)offsets;
  return (uint64_t)(0);
}

rxe_status_t fuzz_count_workspace_size(const int64_t* size_values, uint64_t* out_bytes, rxe_error_t* err) {
  fuzz_count_sizes_t sizes;
  fuzz_count_sizes_t* s = &sizes;
  rxe_status_t st;
  st = rxe_dim_bind(size_values[0], "size n", "n", 0, (int64_t)1 << 20, &s->n, err);
  if (st != RXE_OK) return st;
  *out_bytes = fuzz_count_layout(s, NULL);
  return RXE_OK;
}

rxe_status_t fuzz_count_plan_shapes(const rxe_tensor_t* inputs, int64_t* out_shapes, uint64_t* out_workspace_bytes,
                                    rxe_error_t* err) {
  fuzz_count_sizes_t sizes;
  fuzz_count_sizes_t* s = &sizes;
  rxe_status_t st;
  st = fuzz_count_bind(inputs, s, err);
  if (st != RXE_OK) return st;
  out_shapes[0] = s->n;
  *out_workspace_bytes = fuzz_count_layout(s, NULL);
  return RXE_OK;
}

rxe_status_t fuzz_count(const rxe_tensor_t* inputs, rxe_tensor_t* outputs, void* workspace, uint64_t workspace_bytes,
                        rxe_error_t* err) {
  fuzz_count_sizes_t sizes;
  fuzz_count_sizes_t* s = &sizes;
  rxe_status_t st;
#ifdef RXE_PROFILE
  uint64_t t0;
#endif
  (void)workspace;
  (void)workspace_bytes;
  st = fuzz_count_bind(inputs, s, err);
  if (st != RXE_OK) return st;
  st = rxe_tensor_check(&outputs[0], "output 0", RXE_DTYPE_FLOAT, 32, 1, err);
  if (st != RXE_OK) return st;
  st = rxe_dim_check(outputs[0].shape[0], s->n, "output 0 dimension 0", "n", err);
  if (st != RXE_OK) return st;
#ifdef RXE_PROFILE
  t0 = rxe_profile_now_ns();
#endif
  st = k_count((const float*)(RXE_DATA(inputs[0])), (float*)(RXE_DATA(outputs[0])), s->n, err);
  if (st != RXE_OK) return st;
#ifdef RXE_PROFILE
  fuzz_count_profile[0].total_ns += rxe_profile_now_ns() - t0;
  fuzz_count_profile[0].calls += 1;
#endif
  return RXE_OK;
}

/* step: input_ids (1, seq), attention_mask (1, total), state_0 (1, 1, 8, 1)
 * -> logits (1, 1, 5), 1 <= seq <= total <= 8, as the `step` function of a
 * KV-cache decoder (relax_edge/generate.h); a fixed 64-byte workspace */
typedef struct {
  int64_t seq, total;
} fuzz_step_sizes_t;

#define FUZZ_STEP_NUM_PROFILE 1
static rxe_profile_entry_t fuzz_step_profile[] = {
  {"k_step", "logits = step(ids, state)", 0, 0},
};

static rxe_status_t fuzz_step_bind(const rxe_tensor_t* inputs, fuzz_step_sizes_t* s, rxe_error_t* err) {
  static const char* const state_dims[4] = {"input state_0 dimension 0", "input state_0 dimension 1",
                                            "input state_0 dimension 2", "input state_0 dimension 3"};
  static const int64_t state_shape[4] = {1, 1, 8, 1};
  static const char* const state_exprs[4] = {"1", "1", "8", "1"};
  rxe_status_t st;
  int d;
  st = rxe_tensor_check(&inputs[0], "input input_ids", RXE_DTYPE_INT, 64, 2, err);
  if (st == RXE_OK) st = rxe_tensor_check(&inputs[1], "input attention_mask", RXE_DTYPE_INT, 64, 2, err);
  if (st == RXE_OK) st = rxe_tensor_check(&inputs[2], "input state_0", RXE_DTYPE_FLOAT, 32, 4, err);
  if (st == RXE_OK) st = rxe_dim_check(inputs[0].shape[0], 1, "input input_ids dimension 0", "1", err);
  if (st == RXE_OK) st = rxe_dim_bind(inputs[0].shape[1], "input input_ids dimension 1", "seq", 1, 8, &s->seq, err);
  if (st == RXE_OK) st = rxe_dim_check(inputs[1].shape[0], 1, "input attention_mask dimension 0", "1", err);
  if (st == RXE_OK) {
    st = rxe_dim_bind(inputs[1].shape[1], "input attention_mask dimension 1", "total", s->seq, 8, &s->total, err);
  }
  for (d = 0; d < 4 && st == RXE_OK; ++d) st = rxe_dim_check(inputs[2].shape[d], state_shape[d], state_dims[d], state_exprs[d], err);
  return st;
}

static uint64_t fuzz_step_layout(const fuzz_step_sizes_t* s, uint64_t* offsets) {
  offsets[0] = (uint64_t)(0);  /* scratch */
  (void)s;
  return (uint64_t)(64);
}

rxe_status_t fuzz_step_workspace_size(const int64_t* size_values, uint64_t* out_bytes, rxe_error_t* err) {
  fuzz_step_sizes_t sizes;
  uint64_t offsets[1];
  rxe_status_t st = rxe_dim_bind(size_values[0], "size seq", "seq", 1, 8, &sizes.seq, err);
  if (st == RXE_OK) st = rxe_dim_bind(size_values[1], "size total", "total", sizes.seq, 8, &sizes.total, err);
  if (st == RXE_OK) *out_bytes = fuzz_step_layout(&sizes, offsets);
  return st;
}

rxe_status_t fuzz_step_plan_shapes(const rxe_tensor_t* inputs, int64_t* out_shapes, uint64_t* out_workspace_bytes,
                                   rxe_error_t* err) {
  fuzz_step_sizes_t sizes;
  uint64_t offsets[1];
  rxe_status_t st = fuzz_step_bind(inputs, &sizes, err);
  if (st != RXE_OK) return st;
  out_shapes[0] = 1;
  out_shapes[1] = 1;
  out_shapes[2] = 5;
  *out_workspace_bytes = fuzz_step_layout(&sizes, offsets);
  return RXE_OK;
}

rxe_status_t fuzz_step(const rxe_tensor_t* inputs, rxe_tensor_t* outputs, void* workspace, uint64_t workspace_bytes,
                       rxe_error_t* err) {
  fuzz_step_sizes_t sizes;
  uint64_t offsets[1], needed;
  rxe_status_t st;
#ifdef RXE_PROFILE
  uint64_t t0;
#endif
  st = fuzz_step_bind(inputs, &sizes, err);
  if (st != RXE_OK) return st;
  needed = fuzz_step_layout(&sizes, offsets);
  if (workspace == NULL || workspace_bytes < needed || ((uintptr_t)workspace % 64) != 0) {
    return rxe_error_set(err, RXE_ERR_WORKSPACE, "workspace of %d bytes (%d needed, 64-byte aligned)",
                         (int64_t)workspace_bytes, (int64_t)needed);
  }
  st = rxe_tensor_check(&outputs[0], "output 0", RXE_DTYPE_FLOAT, 32, 3, err);
  if (st == RXE_OK) st = rxe_dim_check(outputs[0].shape[2], 5, "output 0 dimension 2", "5", err);
  if (st != RXE_OK) return st;
#ifdef RXE_PROFILE
  t0 = rxe_profile_now_ns();
#endif
  st = k_step((const int64_t*)(RXE_DATA(inputs[0])), (float*)(RXE_DATA(inputs[2])), (float*)(RXE_DATA(outputs[0])),
              (float*)((uint8_t*)workspace + offsets[0]), sizes.seq, sizes.total, err);
  if (st != RXE_OK) return st;
#ifdef RXE_PROFILE
  fuzz_step_profile[0].total_ns += rxe_profile_now_ns() - t0;
  fuzz_step_profile[0].calls += 1;
#endif
  return RXE_OK;
}

/* ---- tables ----
 * The signature as data, for loaders: each parameter's name, dtype
 * ({code, bits, lanes}), rank and printable shape; the size variables in
 * the order workspace_size takes them (NULL-terminated). */
static const rxe_arg_info_t fuzz_main_inputs[] = {
  {"x", {RXE_DTYPE_FLOAT, 32, 1}, 1, "(n,)"},
};
static const rxe_arg_info_t fuzz_main_outputs[] = {
  {"y", {RXE_DTYPE_FLOAT, 32, 1}, 1, "(n,)"},
};
static const char* const fuzz_main_size_names[] = {
  "n",
  NULL};

static const rxe_arg_info_t fuzz_count_inputs[] = {
  {"x", {RXE_DTYPE_FLOAT, 32, 1}, 1, "(n,)"},
};
static const rxe_arg_info_t fuzz_count_outputs[] = {
  {"y", {RXE_DTYPE_FLOAT, 32, 1}, 1, "(n,)"},
};
static const char* const fuzz_count_size_names[] = {
  "n",
  NULL};

static const rxe_arg_info_t fuzz_step_inputs[] = {
  {"input_ids", {RXE_DTYPE_INT, 64, 1}, 2, "(1, seq)"},
  {"attention_mask", {RXE_DTYPE_INT, 64, 1}, 2, "(1, total)"},
  {"state_0", {RXE_DTYPE_FLOAT, 32, 1}, 4, "(1, 1, 8, 1)"},
};
static const rxe_arg_info_t fuzz_step_outputs[] = {
  {"logits", {RXE_DTYPE_FLOAT, 32, 1}, 3, "(1, 1, 5)"},
};
static const char* const fuzz_step_size_names[] = {
  "seq",
  "total",
  NULL};

/* One rxe_function_t per graph function: name, argument counts and infos,
 * the plan, run and workspace entries, the size variables, the fixed arena
 * (0 when a size is unbounded: ask workspace) and the profiler entries. */
static const rxe_function_t fuzz_functions[] = {
  {"main", 1, 1, fuzz_main_inputs, fuzz_main_outputs,
   fuzz_main_plan_shapes, fuzz_main, fuzz_main_workspace_size, 1,
   fuzz_main_size_names, FUZZ_MAIN_WORKSPACE_BYTES,
   FUZZ_MAIN_NUM_PROFILE, fuzz_main_profile},
  {"count", 1, 1, fuzz_count_inputs, fuzz_count_outputs,
   fuzz_count_plan_shapes, fuzz_count, fuzz_count_workspace_size, 1,
   fuzz_count_size_names, FUZZ_COUNT_WORKSPACE_BYTES,
   FUZZ_COUNT_NUM_PROFILE, fuzz_count_profile},
  {"step", 3, 1, fuzz_step_inputs, fuzz_step_outputs,
   fuzz_step_plan_shapes, fuzz_step, fuzz_step_workspace_size, 2,
   fuzz_step_size_names, FUZZ_STEP_WORKSPACE_BYTES,
   FUZZ_STEP_NUM_PROFILE, fuzz_step_profile},
};

/* The one exported symbol a loader needs; the ABI version lets it refuse a
 * module built against another runtime (rxe_module_check). */
const rxe_module_t rxe_fuzz_module = {RXE_ABI_VERSION, "fuzz", 3, fuzz_functions};
