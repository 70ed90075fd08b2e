/* Unit tests of the C runtime. Prints "RXE_TESTS_PASSED <n> checks" when
 * every check holds (the sentinel the harness and ctest look for; see
 * micro_test.h). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "relax_edge/kernel.h"
#include "relax_edge/runtime.h"
#include "micro_test.h"

static void test_messages(void) {
  rxe_error_t err;
  char big[400];
  CHECK(rxe_error_set(&err, RXE_ERR_SHAPE, "input %s dim %d is %d", "x", (int64_t)1, (int64_t)-42) == RXE_ERR_SHAPE);
  CHECK(strcmp(err.message, "input x dim 1 is -42") == 0);
  CHECK(err.status == RXE_ERR_SHAPE);
  rxe_error_set(&err, RXE_OK, "%d", (int64_t)INT64_MIN);
  CHECK(strcmp(err.message, "-9223372036854775808") == 0);
  memset(big, 'a', sizeof(big) - 1);
  big[sizeof(big) - 1] = '\0';
  rxe_error_set(&err, RXE_ERR_INTERNAL, "%s", big);
  CHECK(strlen(err.message) == RXE_ERROR_MESSAGE_BYTES - 1); /* truncated, terminated */
  CHECK(rxe_error_set(NULL, RXE_ERR_NULL, "ignored") == RXE_ERR_NULL);
  CHECK(strcmp(rxe_status_name(RXE_ERR_BOUND), "RXE_ERR_BOUND") == 0);
}

static void test_checks(void) {
  rxe_error_t err;
  float data[6] = {0};
  int64_t shape[2] = {2, 3};
  int64_t n = 0;
  rxe_tensor_t t;
  memset(&t, 0, sizeof(t));
  t.data = data;
  t.ndim = 2;
  t.shape = shape;
  t.dtype.code = RXE_DTYPE_FLOAT;
  t.dtype.bits = 32;
  t.dtype.lanes = 1;
  CHECK(rxe_tensor_check(&t, "input x", RXE_DTYPE_FLOAT, 32, 2, &err) == RXE_OK);
  CHECK(rxe_tensor_check(&t, "input x", RXE_DTYPE_INT, 64, 2, &err) == RXE_ERR_DTYPE);
  CHECK(strcmp(err.message, "input x: dtype float32, expected int64") == 0);
  CHECK(rxe_tensor_check(&t, "input x", RXE_DTYPE_FLOAT, 32, 3, &err) == RXE_ERR_RANK);
  CHECK(strcmp(err.message, "input x: rank 2, expected 3") == 0);
  CHECK(rxe_dim_bind(7, "input x dimension 0", "n", 1, 8, &n, &err) == RXE_OK && n == 7);
  CHECK(rxe_dim_bind(9, "input x dimension 0", "n", 1, 8, &n, &err) == RXE_ERR_BOUND);
  CHECK(strcmp(err.message, "input x dimension 0: n = 9 exceeds its upper bound 8") == 0);
  CHECK(rxe_dim_bind(0, "d", "n", 1, -1, &n, &err) == RXE_ERR_BOUND);
  CHECK(rxe_dim_bind(1000000, "d", "n", 1, -1, &n, &err) == RXE_OK);
  CHECK(rxe_dim_check(4, 3, "input y dimension 0", "n", &err) == RXE_ERR_SHAPE);
  CHECK(strcmp(err.message, "input y dimension 0 is 4, but it must equal n = 3") == 0);
  CHECK(rxe_dim_check(5, 4, "input y dimension 1", NULL, &err) == RXE_ERR_SHAPE);
  CHECK(strcmp(err.message, "input y dimension 1 is 5, but it must be 4") == 0);
  CHECK(rxe_dim_check_broadcast(3, 1, "add", &err) == RXE_OK);
  CHECK(rxe_dim_check_broadcast(3, 2, "add", &err) == RXE_ERR_SHAPE);
  t.data = NULL;
  CHECK(rxe_tensor_check(&t, "input x", RXE_DTYPE_FLOAT, 32, 2, &err) == RXE_ERR_NULL);
}

static void test_arena(void) {
  static uint8_t memory[256 + RXE_WORKSPACE_ALIGNMENT];
  uint8_t* aligned = memory + ((RXE_WORKSPACE_ALIGNMENT - ((uintptr_t)memory % RXE_WORKSPACE_ALIGNMENT)) % RXE_WORKSPACE_ALIGNMENT);
  rxe_arena_t arena;
  rxe_error_t err;
  void *a, *b, *c;
  CHECK(rxe_arena_init(&arena, aligned, 256, &err) == RXE_OK);
  CHECK(rxe_arena_alloc(&arena, 10, &a, &err) == RXE_OK && a == aligned);
  CHECK(rxe_arena_alloc(&arena, 100, &b, &err) == RXE_OK && (uint8_t*)b == aligned + 64);
  CHECK(rxe_arena_alloc(&arena, 100, &c, &err) == RXE_ERR_WORKSPACE);
  rxe_arena_reset(&arena);
  CHECK(rxe_arena_alloc(&arena, 256, &c, &err) == RXE_OK);
  CHECK(rxe_arena_init(&arena, aligned + 1, 16, &err) == RXE_ERR_WORKSPACE);
}

static void test_integer_helpers(void) {
  int64_t a, b;
  for (a = -9; a <= 9; ++a) {
    for (b = -4; b <= 4; ++b) {
      if (b == 0) continue;
      CHECK(rxe_floordiv_i64(a, b) == (int64_t)floor((double)a / (double)b));
      CHECK(rxe_floormod_i64(a, b) == a - b * (int64_t)floor((double)a / (double)b));
    }
  }
  CHECK(RXE_ALIGN_UP(1) == 64 && RXE_ALIGN_UP(64) == 64 && RXE_ALIGN_UP(0) == 0);
}

static void test_module(void) {
  static const rxe_function_t fns[] = {{"main", 0, 0, NULL, NULL, NULL, NULL, NULL, 0, NULL, 0, 0, NULL},
                                       {"decode", 0, 0, NULL, NULL, NULL, NULL, NULL, 0, NULL, 0, 0, NULL}};
  rxe_module_t m = {RXE_ABI_VERSION, "m", 2, fns};
  rxe_error_t err;
  uint8_t src[5] = {1, 2, 3, 4, 5}, dst[5] = {0};
  CHECK(rxe_module_find(&m, "decode") == &fns[1]);
  CHECK(rxe_module_find(&m, "dec") == NULL);
  CHECK(rxe_module_check(&m, &err) == RXE_OK);
  m.abi_version = 99;
  CHECK(rxe_module_check(&m, &err) == RXE_ERR_ABI);
  rxe_mem_copy(dst, src, 5);
  CHECK(memcmp(dst, src, 5) == 0);
}

int main(void) {
  test_messages();
  test_checks();
  test_arena();
  test_integer_helpers();
  test_module();
  return MICRO_TEST_END();
}
