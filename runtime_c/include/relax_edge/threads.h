/*
 * A small thread pool for kernels (library micro-kernels and generated
 * kernels with parallel loops). POSIX threads on hosted targets; with
 * RXE_NO_THREADS every call runs serially on the caller and nothing refers
 * to pthreads. RXE_NO_THREADS is also defined here for builds without
 * POSIX threads: freestanding ones and targets that are neither Unix nor
 * Apple (bare metal, Cortex-M).
 *
 * The pool starts lazily on the first parallel call with more than one
 * thread; the thread count is a run option (rxe_threads_set_count, the
 * runner's and RPC server's --threads, or RXE_NUM_THREADS in the
 * environment of those tools). The default is 1: no thread is created.
 *
 * The pool is process-wide static state (no malloc on any path). Workers
 * spin briefly on a generation counter after each task, then sleep on a
 * condition variable, so back-to-back kernels are dispatched in about a
 * microsecond. One parallel_for runs at a time: a call made while another
 * is running (from inside a task, or from another application thread)
 * runs serially on its caller.
 */
#ifndef RELAX_EDGE_THREADS_H_
#define RELAX_EDGE_THREADS_H_

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* RXE_MAX_THREADS: the most threads the pool runs; compile-time
 * configuration (-DRXE_MAX_THREADS=N, default 16), the same N for the
 * runtime and for everything that includes this header. It sizes the
 * pool's static worker table; rxe_threads_set_count clamps to it and the
 * runner's and RPC server's --threads refuse more. relax_edge.codegen.abi
 * MAX_THREADS mirrors the default (the CLI's --threads limit).
 *
 * 1 <= N <= RXE_THREADS_CHUNK_LIMIT (31): the pool packs a job's chunk
 * count into the low RXE_THREADS_CHUNK_BITS of its generation word
 * (src/threads.c); any other N is a compile error here. */
#ifndef RXE_MAX_THREADS
#define RXE_MAX_THREADS 16
#endif
#define RXE_THREADS_CHUNK_BITS 5
#define RXE_THREADS_CHUNK_LIMIT ((1 << RXE_THREADS_CHUNK_BITS) - 1)
#if RXE_MAX_THREADS < 1 || RXE_MAX_THREADS > RXE_THREADS_CHUNK_LIMIT
#error "RXE_MAX_THREADS must be in [1, RXE_THREADS_CHUNK_LIMIT] (31): the pool's chunk count has 5 bits"
#endif

#if !defined(RXE_NO_THREADS) && (!__STDC_HOSTED__ || !(defined(__unix__) || defined(__APPLE__)))
#define RXE_NO_THREADS
#endif

/* fn(ctx, begin, end, thread): run iterations [begin, end) as thread
 * number `thread` (0 <= thread < rxe_threads_get_count()). */
typedef void (*rxe_task_fn)(void* ctx, int64_t begin, int64_t end, int thread);

/* Split [0, n) into at most rxe_threads_get_count() contiguous chunks, run
 * them on the pool (the caller runs chunk 0) and return when all are done.
 * Chunk k is [n * k / T, n * (k + 1) / T) for T chunks, run as thread k.
 * n <= 0 returns at once; one thread (or RXE_NO_THREADS) calls
 * fn(ctx, 0, n, 0). Calls from inside a task run serially (no nesting). */
void rxe_threads_parallel_for(int64_t n, rxe_task_fn fn, void* ctx);

/* Set the thread count (clamped to [1, RXE_MAX_THREADS]); returns the
 * previous one. Not to be called while a parallel_for is running. With
 * RXE_NO_THREADS the count stays 1 (set returns 1 and changes nothing). */
int rxe_threads_set_count(int n);
int rxe_threads_get_count(void);

/* Join the pool's threads (optional; the next parallel call restarts it).
 * Not from inside a task. A child process made by fork starts with an empty
 * pool (no worker follows a fork). */
void rxe_threads_shutdown(void);

#ifdef __cplusplus
}
#endif

#endif /* RELAX_EDGE_THREADS_H_ */
