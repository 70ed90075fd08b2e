/* The thread pool (see relax_edge/threads.h): static state, lazy workers
 * that spin on a generation word before sleeping, the caller as thread 0. */
#define _POSIX_C_SOURCE 200809L
#include "relax_edge/threads.h"

#ifdef RXE_NO_THREADS

void rxe_threads_parallel_for(int64_t n, rxe_task_fn fn, void* ctx) {
  if (n > 0) fn(ctx, 0, n, 0);
}

int rxe_threads_set_count(int n) {
  (void)n;
  return 1;
}

int rxe_threads_get_count(void) { return 1; }

void rxe_threads_shutdown(void) {}

#else
#include <pthread.h>
#include <sched.h>

/* Polls of the generation (or of the remaining count) before sleeping on a
 * condition variable: PAUSE_ROUNDS with a pause hint (some microseconds,
 * longer than the gap between two kernels of a model), then polls that
 * yield the core, so that a spinning thread does not starve the others
 * when threads outnumber cores. */
#define PAUSE_ROUNDS 200
#ifndef RXE_THREADS_SPIN_ROUNDS /* a tuning table may set it */
#define RXE_THREADS_SPIN_ROUNDS 300
#endif
#define SPIN_ROUNDS RXE_THREADS_SPIN_ROUNDS

/* The generation word: a counter in the high bits, the job's chunk count in
 * the low CHUNK_BITS, so that a worker without a chunk never reads the job
 * (threads.h bounds RXE_MAX_THREADS by CHUNK_MASK). */
#define CHUNK_BITS RXE_THREADS_CHUNK_BITS
#define CHUNK_MASK ((1u << CHUNK_BITS) - 1u)

#if defined(__GNUC__)
static unsigned load_word(unsigned* p) { return __atomic_load_n(p, __ATOMIC_SEQ_CST); }
static void store_word(unsigned* p, unsigned v) { __atomic_store_n(p, v, __ATOMIC_SEQ_CST); }
static unsigned add_word(unsigned* p, int delta) { return __atomic_add_fetch(p, (unsigned)delta, __ATOMIC_SEQ_CST); }
#else /* plain C99: every shared word behind one mutex */
static pthread_mutex_t word_lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned load_word(unsigned* p) {
  unsigned v;
  pthread_mutex_lock(&word_lock);
  v = *p;
  pthread_mutex_unlock(&word_lock);
  return v;
}
static void store_word(unsigned* p, unsigned v) {
  pthread_mutex_lock(&word_lock);
  *p = v;
  pthread_mutex_unlock(&word_lock);
}
static unsigned add_word(unsigned* p, int delta) {
  unsigned v;
  pthread_mutex_lock(&word_lock);
  v = *p += (unsigned)delta;
  pthread_mutex_unlock(&word_lock);
  return v;
}
#endif

#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
#define CPU_RELAX() __builtin_ia32_pause()
#elif defined(__GNUC__) && defined(__aarch64__)
#define CPU_RELAX() __asm__ __volatile__("yield")
#else
#define CPU_RELAX() ((void)0)
#endif

static void backoff(int round) {
  if (round < PAUSE_ROUNDS)
    CPU_RELAX();
  else
    sched_yield();
}

typedef struct {
  pthread_t thread;
  unsigned seen; /* the last generation word this worker took */
  int index;     /* its thread number, 1.. (the caller is 0) */
} worker_t;

static pthread_mutex_t call_lock = PTHREAD_MUTEX_INITIALIZER; /* held by the running parallel_for */
static pthread_mutex_t sleep_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t wake = PTHREAD_COND_INITIALIZER; /* workers: a new generation */
static pthread_cond_t done = PTHREAD_COND_INITIALIZER; /* the caller: no chunk remains */
static worker_t workers[RXE_MAX_THREADS];
static int started; /* workers[1..started] run; changed under call_lock */

/* shared words, through load_word / store_word / add_word */
static unsigned num_threads = 1, generation, remaining, sleepers, stop;

/* the current job, written before the generation word that announces it */
static rxe_task_fn job_fn;
static void* job_ctx;
static int64_t job_n;
static int job_chunks;

static void run_chunk(int k) { job_fn(job_ctx, job_n * k / job_chunks, job_n * (k + 1) / job_chunks, k); }

static unsigned wait_generation(unsigned seen) {
  unsigned gen;
  int i;
  for (i = 0; i < SPIN_ROUNDS; ++i) {
    if ((gen = load_word(&generation)) != seen) return gen;
    backoff(i);
  }
  pthread_mutex_lock(&sleep_lock);
  add_word(&sleepers, 1);
  while ((gen = load_word(&generation)) == seen) pthread_cond_wait(&wake, &sleep_lock);
  add_word(&sleepers, -1);
  pthread_mutex_unlock(&sleep_lock);
  return gen;
}

static void* worker_main(void* arg) {
  worker_t* self = (worker_t*)arg;
  for (;;) {
    self->seen = wait_generation(self->seen);
    if (load_word(&stop)) return NULL;
    if ((unsigned)self->index < (self->seen & CHUNK_MASK)) {
      run_chunk(self->index);
      if (add_word(&remaining, -1) == 0) {
        pthread_mutex_lock(&sleep_lock);
        pthread_cond_signal(&done);
        pthread_mutex_unlock(&sleep_lock);
      }
    }
  }
}

/* Announce a generation with `chunks` chunks and wake sleeping workers. */
static void publish(unsigned chunks) {
  store_word(&generation, (((load_word(&generation) >> CHUNK_BITS) + 1u) << CHUNK_BITS) | chunks);
  if (load_word(&sleepers) != 0) {
    pthread_mutex_lock(&sleep_lock);
    pthread_cond_broadcast(&wake);
    pthread_mutex_unlock(&sleep_lock);
  }
}

/* fork: the child gets none of the workers; the locks are held across the
 * fork so that the child starts from a consistent, empty pool */
static void before_fork(void) {
  pthread_mutex_lock(&call_lock);
  pthread_mutex_lock(&sleep_lock);
}

static void after_fork_in_parent(void) {
  pthread_mutex_unlock(&sleep_lock);
  pthread_mutex_unlock(&call_lock);
}

static void after_fork_in_child(void) {
  started = 0;
  store_word(&sleepers, 0);
  pthread_cond_init(&wake, NULL);
  pthread_cond_init(&done, NULL);
  after_fork_in_parent();
}

static void start_workers(int count) {
  static int fork_handlers;
  if (!fork_handlers) fork_handlers = pthread_atfork(before_fork, after_fork_in_parent, after_fork_in_child) == 0;
  while (started < count) {
    worker_t* w = &workers[started + 1];
    w->index = started + 1;
    w->seen = load_word(&generation);
    if (pthread_create(&w->thread, NULL, worker_main, w) != 0) return; /* run with fewer */
    ++started;
  }
}

void rxe_threads_parallel_for(int64_t n, rxe_task_fn fn, void* ctx) {
  int threads = (int)load_word(&num_threads), i;
  if (n <= 0) return;
  if (threads < 2 || n < 2 || pthread_mutex_trylock(&call_lock) != 0) {
    fn(ctx, 0, n, 0); /* serial, nested, or another parallel_for is running */
    return;
  }
  start_workers(threads - 1);
  job_chunks = started + 1 < threads ? started + 1 : threads;
  if (n < job_chunks) job_chunks = (int)n;
  job_fn = fn;
  job_ctx = ctx;
  job_n = n;
  store_word(&remaining, (unsigned)job_chunks - 1u);
  publish((unsigned)job_chunks);
  run_chunk(0);
  for (i = 0; i < SPIN_ROUNDS && load_word(&remaining) != 0; ++i) backoff(i);
  if (load_word(&remaining) != 0) {
    pthread_mutex_lock(&sleep_lock);
    while (load_word(&remaining) != 0) pthread_cond_wait(&done, &sleep_lock);
    pthread_mutex_unlock(&sleep_lock);
  }
  pthread_mutex_unlock(&call_lock);
}

int rxe_threads_set_count(int n) {
  int previous = (int)load_word(&num_threads);
  store_word(&num_threads, (unsigned)(n < 1 ? 1 : n > RXE_MAX_THREADS ? RXE_MAX_THREADS : n));
  return previous;
}

int rxe_threads_get_count(void) { return (int)load_word(&num_threads); }

void rxe_threads_shutdown(void) {
  int i;
  pthread_mutex_lock(&call_lock);
  store_word(&stop, 1);
  publish(0);
  for (i = 1; i <= started; ++i) pthread_join(workers[i].thread, NULL);
  started = 0;
  store_word(&stop, 0);
  pthread_mutex_unlock(&call_lock);
}

#endif /* RXE_NO_THREADS */
