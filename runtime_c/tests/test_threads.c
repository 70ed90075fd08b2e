/* Unit tests of the thread pool: chunks cover [0, n) exactly once, nested
 * calls run serially, the thread count is clamped, the pool shuts down and
 * restarts, a forked child gets a pool of its own, concurrent callers are
 * served. With RXE_NO_THREADS the same checks hold with one thread. Prints
 * "RXE_TESTS_PASSED <n> checks" (see micro_test.h). */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <string.h>

#include "relax_edge/threads.h"
#include "micro_test.h"

#ifndef RXE_NO_THREADS
#include <pthread.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#endif

#define MAX_N 4099

typedef struct {
  int hits[MAX_N];            /* how many chunks covered each index */
  int calls[RXE_MAX_THREADS]; /* chunks run per thread number */
  int bad_thread;             /* a thread number outside [0, threads) */
  int threads;
} coverage_t;

static void cover(void* ctx, int64_t begin, int64_t end, int thread) {
  coverage_t* c = (coverage_t*)ctx;
  int64_t i;
  if (thread < 0 || thread >= c->threads) {
    c->bad_thread = 1;
    return;
  }
  ++c->calls[thread];
  for (i = begin; i < end; ++i) ++c->hits[i];
}

static coverage_t cov;

static int covered_once(int64_t n) {
  int64_t i;
  for (i = 0; i < n; ++i)
    if (cov.hits[i] != 1) return 0;
  return 1;
}

static void test_coverage(void) {
  static const int64_t sizes[] = {0, 1, 2, 3, 5, 15, 16, 17, 100, 1000, MAX_N};
  static const int thread_counts[] = {1, 2, 3, 4, 7, 16};
  size_t s, t;
  int k, chunks;
  for (t = 0; t < sizeof(thread_counts) / sizeof(thread_counts[0]); ++t) {
    rxe_threads_set_count(thread_counts[t]);
    for (s = 0; s < sizeof(sizes) / sizeof(sizes[0]); ++s) {
      memset(&cov, 0, sizeof(cov));
      cov.threads = rxe_threads_get_count();
      rxe_threads_parallel_for(sizes[s], cover, &cov);
      CHECK(covered_once(sizes[s]));
      CHECK(!cov.bad_thread);
      for (k = 0, chunks = 0; k < RXE_MAX_THREADS; ++k) {
        CHECK(cov.calls[k] <= 1);
        chunks += cov.calls[k];
      }
      CHECK(chunks <= (sizes[s] < cov.threads ? sizes[s] : cov.threads));
      CHECK(sizes[s] == 0 ? chunks == 0 : cov.calls[0] == 1); /* the caller runs chunk 0 */
    }
  }
}

/* Back-to-back calls, each summing its own range into its thread's slot. */
typedef struct {
  int64_t partial[RXE_MAX_THREADS];
} sums_t;

static void sum_range(void* ctx, int64_t begin, int64_t end, int thread) {
  sums_t* s = (sums_t*)ctx;
  int64_t i;
  for (i = begin; i < end; ++i) s->partial[thread] += i;
}

static int64_t parallel_sum(int64_t n) {
  sums_t s;
  int64_t total = 0;
  int k;
  memset(&s, 0, sizeof(s));
  rxe_threads_parallel_for(n, sum_range, &s);
  for (k = 0; k < RXE_MAX_THREADS; ++k) total += s.partial[k];
  return total;
}

static void test_back_to_back(void) {
  int round, ok = 1;
  rxe_threads_set_count(4);
  for (round = 0; round < 1000; ++round) {
    int64_t n = 1 + round % 97;
    ok &= parallel_sum(n) == n * (n - 1) / 2;
  }
  CHECK(ok);
}

/* A task that calls parallel_for: the inner call must run serially. */
typedef struct {
  int calls;
  int whole;
} serial_probe_t;

static void probe(void* ctx, int64_t begin, int64_t end, int thread) {
  serial_probe_t* p = (serial_probe_t*)ctx;
  ++p->calls;
  p->whole = begin == 0 && end == 10 && thread == 0;
}

static void outer_probe(void* ctx, int64_t begin, int64_t end, int thread) {
  serial_probe_t* probes = (serial_probe_t*)ctx;
  (void)begin;
  (void)end;
  rxe_threads_parallel_for(10, probe, &probes[thread]);
}

static void test_nested(void) {
  serial_probe_t probes[RXE_MAX_THREADS];
  int k, chunks = 0;
  rxe_threads_set_count(4);
  memset(probes, 0, sizeof(probes));
  rxe_threads_parallel_for(8, outer_probe, probes);
  for (k = 0; k < RXE_MAX_THREADS; ++k) {
    if (probes[k].calls == 0) continue;
    ++chunks;
    CHECK(probes[k].calls == 1 && probes[k].whole); /* one serial call over [0, 10) */
  }
  CHECK(chunks == rxe_threads_get_count());
}

static void test_clamp(void) {
#ifdef RXE_NO_THREADS
  CHECK(rxe_threads_set_count(8) == 1);
  CHECK(rxe_threads_get_count() == 1);
#else
  rxe_threads_set_count(3);
  CHECK(rxe_threads_set_count(0) == 3);
  CHECK(rxe_threads_get_count() == 1);
  CHECK(rxe_threads_set_count(-5) == 1);
  CHECK(rxe_threads_get_count() == 1);
  CHECK(rxe_threads_set_count(1000) == 1);
  CHECK(rxe_threads_get_count() == RXE_MAX_THREADS);
  CHECK(rxe_threads_set_count(2) == RXE_MAX_THREADS);
#endif
}

static void test_shutdown_restart(void) {
  rxe_threads_shutdown(); /* also fine with no pool */
  rxe_threads_set_count(3);
  CHECK(parallel_sum(1000) == 499500);
  rxe_threads_shutdown();
  rxe_threads_shutdown();
  rxe_threads_set_count(5);
  CHECK(parallel_sum(1001) == 500500);
  rxe_threads_shutdown();
}

#ifndef RXE_NO_THREADS
/* Workers that slept (idle longer than they spin) wake for the next call. */
static void test_after_idle(void) {
  struct timespec pause = {0, 50 * 1000 * 1000};
  rxe_threads_set_count(3);
  CHECK(parallel_sum(300) == 44850);
  nanosleep(&pause, NULL);
  CHECK(parallel_sum(301) == 45150);
}

static void* caller_thread(void* arg) {
  int round, ok = 1;
  for (round = 0; round < 500; ++round) {
    int64_t n = 1 + (round * 7) % 101;
    ok &= parallel_sum(n) == n * (n - 1) / 2;
  }
  *(int*)arg = ok;
  return NULL;
}

/* A child made by fork runs parallel loops on a pool of its own. Built
 * with RXE_TEST_SKIP_FORK for qemu-user, which cannot start threads in the
 * forked child of a threaded process. */
static void test_fork(void) {
#ifndef RXE_TEST_SKIP_FORK
  int status = -1;
  pid_t child;
  rxe_threads_set_count(3);
  CHECK(parallel_sum(500) == 124750);
  fflush(stdout);
  child = fork();
  if (child == 0) {
    alarm(20); /* a child waiting for workers that did not follow the fork dies */
    _exit(parallel_sum(600) == 179700 && parallel_sum(7) == 21 ? 0 : 1);
  }
  CHECK(child > 0 && waitpid(child, &status, 0) == child);
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  CHECK(parallel_sum(501) == 125250);
#endif
}

/* Two application threads call parallel_for at the same time. */
static void test_concurrent_callers(void) {
  pthread_t a, b;
  int ok_a = 0, ok_b = 0;
  rxe_threads_set_count(3);
  CHECK(pthread_create(&a, NULL, caller_thread, &ok_a) == 0);
  CHECK(pthread_create(&b, NULL, caller_thread, &ok_b) == 0);
  pthread_join(a, NULL);
  pthread_join(b, NULL);
  CHECK(ok_a && ok_b);
}
#endif

int main(void) {
  test_clamp();
  test_coverage();
  test_back_to_back();
  test_nested();
  test_shutdown_restart();
#ifndef RXE_NO_THREADS
  test_after_idle();
  test_fork();
  test_concurrent_callers();
#endif
  rxe_threads_shutdown();
  return MICRO_TEST_END();
}
