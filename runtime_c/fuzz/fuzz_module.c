/* The hand-written module of fuzz_module.h. */
#include "fuzz_module.h"

#include "relax_edge/runtime.h"

uint64_t rxe_fuzz_count_runs = 0;

static rxe_status_t plan_vector(const rxe_tensor_t* in, int64_t lo, int64_t hi, int64_t* out_shapes, rxe_error_t* err) {
  rxe_status_t st = rxe_tensor_check(&in[0], "input x", RXE_DTYPE_FLOAT, 32, 1, err);
  if (st != RXE_OK) return st;
  if (in[0].shape[0] < lo || in[0].shape[0] > hi) {
    return rxe_error_set(err, RXE_ERR_BOUND, "input x dimension 0: n = %d is outside [%d, %d]", in[0].shape[0], lo, hi);
  }
  out_shapes[0] = in[0].shape[0];
  return RXE_OK;
}

static rxe_status_t copy_plan(const rxe_tensor_t* in, int64_t* out_shapes, uint64_t* out_ws, rxe_error_t* err) {
  *out_ws = 64;
  return plan_vector(in, 1, 4096, out_shapes, err);
}

/* x (n,) -> y (n,) */
static rxe_status_t copy_run(const rxe_tensor_t* in, rxe_tensor_t* out, void* ws, uint64_t ws_bytes, rxe_error_t* err) {
  int64_t shape[1];
  uint64_t need;
  const float* x = (const float*)RXE_DATA(in[0]);
  float* y;
  rxe_status_t st = copy_plan(in, shape, &need, err);
  if (st != RXE_OK) return st;
  if (ws == NULL || ws_bytes < need) return rxe_error_set(err, RXE_ERR_WORKSPACE, "copy: no workspace");
  if (out[0].ndim != 1 || out[0].shape[0] != shape[0]) return rxe_error_set(err, RXE_ERR_SHAPE, "copy: output y has the wrong shape");
  y = (float*)RXE_DATA(out[0]);
  y[0] = x[0];
  if (x[0] == -1.0f) return rxe_error_set(err, RXE_ERR_INDEX, "copy: x[0] = -1 is not a valid index");
  rxe_mem_copy(y, x, (uint64_t)shape[0] * 4u);
  return RXE_OK;
}

static rxe_status_t copy_workspace(const int64_t* sizes, uint64_t* out_bytes, rxe_error_t* err) {
  if (sizes[0] < 1 || sizes[0] > 4096) return rxe_error_set(err, RXE_ERR_BOUND, "n = %d is outside [1, 4096]", sizes[0]);
  *out_bytes = 64;
  return RXE_OK;
}

static rxe_status_t count_plan(const rxe_tensor_t* in, int64_t* out_shapes, uint64_t* out_ws, rxe_error_t* err) {
  *out_ws = 0;
  return plan_vector(in, 0, (int64_t)1 << 20, out_shapes, err);
}

/* x (n,) -> y (n,) = x + runs */
static rxe_status_t count_run(const rxe_tensor_t* in, rxe_tensor_t* out, void* ws, uint64_t ws_bytes, rxe_error_t* err) {
  int64_t shape[1], i;
  uint64_t need;
  const float* x = (const float*)RXE_DATA(in[0]);
  float* y;
  rxe_status_t st = count_plan(in, shape, &need, err);
  (void)ws;
  (void)ws_bytes;
  if (st != RXE_OK) return st;
  if (out[0].ndim != 1 || out[0].shape[0] != shape[0]) return rxe_error_set(err, RXE_ERR_SHAPE, "count: output y has the wrong shape");
  y = (float*)RXE_DATA(out[0]);
  ++rxe_fuzz_count_runs;
  for (i = 0; i < shape[0]; ++i) y[i] = x[i] + (float)rxe_fuzz_count_runs;
  return RXE_OK;
}


static rxe_status_t count_workspace(const int64_t* sizes, uint64_t* out_bytes, rxe_error_t* err) {
  if (sizes[0] < 0 || sizes[0] > ((int64_t)1 << 20)) return rxe_error_set(err, RXE_ERR_BOUND, "n = %d is outside [0, 2^20]", sizes[0]);
  *out_bytes = 0;
  return RXE_OK;
}

static const rxe_arg_info_t args_x[] = {{"x", {RXE_DTYPE_FLOAT, 32, 1}, 1, "(n,)"}};
static const rxe_arg_info_t args_y[] = {{"y", {RXE_DTYPE_FLOAT, 32, 1}, 1, "(n,)"}};
static const char* const size_names[] = {"n", NULL};
static rxe_profile_entry_t copy_profile[] = {{"k_copy", "y = x", 0, 0}};
static rxe_profile_entry_t count_profile[] = {{"k_count", "y = x + runs", 0, 0}};
static const rxe_function_t functions[] = {
    {"main", 1, 1, args_x, args_y, copy_plan, copy_run, copy_workspace, 1, size_names, 64, 1, copy_profile},
    {"count", 1, 1, args_x, args_y, count_plan, count_run, count_workspace, 1, size_names, 0, 1, count_profile}};
const rxe_module_t rxe_fuzz_module = {RXE_ABI_VERSION, "fuzz", 2, functions};
