/* Input checks called by generated host functions. */
#include "relax_edge/runtime.h"

static const char* dtype_name(uint8_t code, uint8_t bits) {
  if (code == RXE_DTYPE_FLOAT) return bits == 32 ? "float32" : bits == 16 ? "float16" : bits == 64 ? "float64" : "float";
  if (code == RXE_DTYPE_INT) return bits == 8 ? "int8" : bits == 32 ? "int32" : bits == 64 ? "int64" : bits == 16 ? "int16" : "int";
  if (code == RXE_DTYPE_UINT) {
    return bits == 8 ? "uint8" : bits == 16 ? "uint16" : bits == 32 ? "uint32" : bits == 64 ? "uint64" : "uint";
  }
  if (code == RXE_DTYPE_BFLOAT) return bits == 16 ? "bfloat16" : "bfloat";
  if (code == RXE_DTYPE_BOOL) return "bool";
  return "unknown";
}

rxe_status_t rxe_tensor_check(const rxe_tensor_t* t, const char* what, uint8_t code, uint8_t bits,
                              int32_t ndim, rxe_error_t* err) {
  if (t == NULL || t->data == NULL) return rxe_error_set(err, RXE_ERR_NULL, "%s: no data", what);
  if (t->dtype.code != code || t->dtype.bits != bits || t->dtype.lanes != 1) {
    return rxe_error_set(err, RXE_ERR_DTYPE, "%s: dtype %s, expected %s", what,
                         dtype_name(t->dtype.code, t->dtype.bits), dtype_name(code, bits));
  }
  if (t->ndim != ndim) {
    return rxe_error_set(err, RXE_ERR_RANK, "%s: rank %d, expected %d", what, (int64_t)t->ndim,
                         (int64_t)ndim);
  }
  if (ndim > 0 && t->shape == NULL) return rxe_error_set(err, RXE_ERR_NULL, "%s: no shape", what);
  if (t->strides != NULL) {
    int64_t expected = 1;
    int32_t d;
    for (d = ndim - 1; d >= 0; --d) {
      if (t->shape[d] != 1 && t->strides[d] != expected) {
        return rxe_error_set(err, RXE_ERR_SHAPE, "%s: only compact row-major tensors are accepted", what);
      }
      expected *= t->shape[d];
    }
  }
  return RXE_OK;
}

rxe_status_t rxe_dim_bind(int64_t value, const char* what, const char* var, int64_t lower,
                          int64_t upper, int64_t* out_var, rxe_error_t* err) {
  if (value < lower) {
    return rxe_error_set(err, RXE_ERR_BOUND, "%s: %s = %d is below its lower bound %d", what, var,
                         value, lower);
  }
  if (upper >= 0 && value > upper) {
    return rxe_error_set(err, RXE_ERR_BOUND, "%s: %s = %d exceeds its upper bound %d", what, var,
                         value, upper);
  }
  *out_var = value;
  return RXE_OK;
}

rxe_status_t rxe_dim_check(int64_t value, int64_t expected, const char* what, const char* expr,
                           rxe_error_t* err) {
  if (value == expected) return RXE_OK;
  if (expr == NULL) {
    return rxe_error_set(err, RXE_ERR_SHAPE, "%s is %d, but it must be %d", what, value, expected);
  }
  return rxe_error_set(err, RXE_ERR_SHAPE, "%s is %d, but it must equal %s = %d", what, value, expr,
                       expected);
}

rxe_status_t rxe_dim_check_broadcast(int64_t a, int64_t b, const char* what, rxe_error_t* err) {
  if (a == b || a == 1 || b == 1) return RXE_OK;
  return rxe_error_set(err, RXE_ERR_SHAPE, "%s: cannot broadcast %d with %d", what, a, b);
}
