/* micro_test.h: the checks, failure count and pass sentinel shared by the C
 * unit tests in runtime_c/tests. C99, header-only, needs only <stdio.h>;
 * include it (with quotes, so it is found next to the test file) in the one
 * .c file that holds main.
 *
 * A test is a program whose main runs checks and ends with MICRO_TEST_END():
 *
 *   #include "micro_test.h"
 *
 *   static void test_add(void) {
 *     CHECK(1 + 1 == 2);
 *     CHECK_MSG(add(x, y) == z, "add(%d, %d) = %d", x, y, add(x, y));
 *   }
 *
 *   int main(void) {
 *     test_add();
 *     return MICRO_TEST_END();
 *   }
 *
 * CHECK(cond) counts one check; when cond is false it counts a failure and
 * prints, and carries on (a test reports every failing check, not only the
 * first):
 *
 *   FAIL <file>:<line>: <the expression as written>
 *
 * CHECK_MSG(cond, fmt, ...) is the same with a printf-style detail after
 * the expression:
 *
 *   FAIL <file>:<line>: <expression>: <detail>
 *
 * Both evaluate cond once. CHECK is an expression with its truth (0 or 1);
 * CHECK_MSG is a statement.
 * MICRO_CHECK and MICRO_CHECK_MSG are the same macros under prefixed names;
 * define MICRO_TEST_NO_SHORT_NAMES before the include to get only those.
 *
 * MICRO_TEST_END() (micro_test_finish()) prints the summary line and gives
 * main's exit status:
 *
 *   RXE_TESTS_PASSED <n> checks             all held; returns 0
 *   RXE_TESTS_FAILED <failures> of <n> checks   returns 1
 *
 * "RXE_TESTS_PASSED" is the sentinel that ctest (PASS_REGULAR_EXPRESSION in
 * CMakeLists.txt) and the pytest tests (tests/runtime/test_c_runtime.py,
 * tests/library/test_threads.py, tests/emu/test_cmake_toolchains.py) look
 * for, together with the exit status; it is printed only when no check
 * failed. Output goes to stdout, flushed at the end (under semihosting and
 * qemu it is all a test leaves behind). */
#ifndef RXE_MICRO_TEST_H_
#define RXE_MICRO_TEST_H_

#include <stdio.h>

static int micro_test_checks = 0;   /* checks run so far */
static int micro_test_failures = 0; /* of them, how many failed */

/* Count one check of `ok` made at file:line; print a FAIL line when it does
 * not hold, ended with a newline unless `detail` (the caller prints ": " and
 * the detail). Returns ok. */
static inline int micro_test_check(int ok, const char* file, int line, const char* expr, int detail) {
  ++micro_test_checks;
  if (!ok) {
    ++micro_test_failures;
    printf("FAIL %s:%d: %s%s", file, line, expr, detail ? ": " : "\n");
  }
  return ok;
}

/* The summary line; 0 when every check held, 1 otherwise. */
static inline int micro_test_finish(void) {
  if (micro_test_failures) {
    printf("RXE_TESTS_FAILED %d of %d checks\n", micro_test_failures, micro_test_checks);
  } else {
    printf("RXE_TESTS_PASSED %d checks\n", micro_test_checks);
  }
  fflush(stdout);
  return micro_test_failures != 0;
}

#define MICRO_CHECK(cond) micro_test_check((cond) ? 1 : 0, __FILE__, __LINE__, #cond, 0)

#define MICRO_CHECK_MSG(cond, ...)                                   \
  do {                                                               \
    if (!micro_test_check((cond) ? 1 : 0, __FILE__, __LINE__, #cond, 1)) { \
      printf(__VA_ARGS__);                                           \
      printf("\n");                                                  \
    }                                                                \
  } while (0)

#define MICRO_TEST_END() micro_test_finish()

#ifndef MICRO_TEST_NO_SHORT_NAMES
#define CHECK(cond) MICRO_CHECK(cond)
#define CHECK_MSG(cond, ...) MICRO_CHECK_MSG(cond, __VA_ARGS__)
#endif

#endif /* RXE_MICRO_TEST_H_ */
