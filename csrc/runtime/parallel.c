/* The process-wide kernel thread pool (PyTorch's intra-op pool).
 *
 * Size: hpu_set_num_threads, else OMP_NUM_THREADS, else the online CPUs.
 * The caller takes part, so a size of n means n - 1 pool threads, created
 * lazily on the first parallel_for that needs them and never per call.
 *
 * One job at a time: a job lives on the caller's stack and is published under
 * the pool lock; woken workers join it and claim chunks with an atomic
 * counter, the caller claims chunks too, then unpublishes the job and waits
 * until every worker that joined has left. A second thread that finds the
 * pool busy (two cards' workers, say) runs its range inline instead of
 * queueing behind the first, which also rules out deadlocks. Calls made from
 * inside a chunk run inline.
 *
 * Fork: the child has none of the threads, so a fork handler resets the pool
 * (the prepare handler holds the lock, so its state is consistent); the child
 * starts new threads on demand. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hpu/device.h"
#include "hpu/parallel.h"
#include "hpu/status.h"
#include "runtime/runtime.h"

#define MAX_THREADS 1024
#define POOL_SPIN_NS 10000 /* idle workers stay awake this long for the next job */

typedef struct job {
  hpu_range_fn fn;
  void *ctx;
  int64_t n;
  int nchunks;
  atomic_int next;   /* next chunk to claim */
  int active;        /* workers inside the job (under pool.mu) */
} job_t;

static struct pool {
  pthread_mutex_t mu;
  pthread_cond_t work_cv; /* workers wait for a job */
  pthread_cond_t done_cv; /* the caller waits for workers to leave */
  pthread_mutex_t busy;   /* held by the thread whose job is running */
  job_t *job;
  _Atomic uint64_t gen;    /* bumped per job, read while spinning */
  int nworkers;
  int sleeping;
} pool = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, PTHREAD_COND_INITIALIZER,
          PTHREAD_MUTEX_INITIALIZER, NULL, 0, 0, 0};

static atomic_int num_threads; /* 0 = not decided yet */
static _Thread_local int in_parallel;
static pthread_once_t fork_once = PTHREAD_ONCE_INIT;

static void fork_prepare(void) { pthread_mutex_lock(&pool.mu); }
static void fork_parent(void) { pthread_mutex_unlock(&pool.mu); }
static void fork_child(void) {
  /* The threads are gone; start over with fresh primitives. A job being run
   * by another parent thread is abandoned with it. */
  pthread_mutex_init(&pool.mu, NULL);
  pthread_cond_init(&pool.work_cv, NULL);
  pthread_cond_init(&pool.done_cv, NULL);
  pthread_mutex_init(&pool.busy, NULL);
  pool.job = NULL;
  pool.nworkers = 0;
  pool.sleeping = 0;
}
static void register_fork(void) { pthread_atfork(fork_prepare, fork_parent, fork_child); }

static int default_threads(void) {
  const char *v = getenv("OMP_NUM_THREADS");
  if (v && *v) {
    char *end;
    errno = 0;
    long n = strtol(v, &end, 10);
    if (!errno && end != v && n >= 1) return n > MAX_THREADS ? MAX_THREADS : (int)n;
  }
  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  return cpus < 1 ? 1 : cpus > MAX_THREADS ? MAX_THREADS : (int)cpus;
}

int hpu_get_num_threads(void) {
  int n = atomic_load_explicit(&num_threads, memory_order_relaxed);
  if (n > 0) return n;
  int expected = 0;
  atomic_compare_exchange_strong(&num_threads, &expected, default_threads());
  return atomic_load(&num_threads);
}

hpu_status_t hpu_set_num_threads(int n) {
  if (n < 1)
    return hpu_error(HPU_ERROR_INVALID_ARGUMENT,
                     "hpu_set_num_threads: the number of threads must be positive, got %d", n);
  if (n > MAX_THREADS) n = MAX_THREADS;
  /* Takes effect at the next parallel_for; extra pool threads stay idle. */
  atomic_store(&num_threads, n);
  return HPU_SUCCESS;
}

static void run_chunks(job_t *job) {
  int c;
  while ((c = atomic_fetch_add_explicit(&job->next, 1, memory_order_relaxed)) < job->nchunks) {
    /* Balanced split without overflow: the first n % nchunks chunks get one more. */
    int64_t q = job->n / job->nchunks, r = job->n % job->nchunks;
    int64_t begin = c * q + (c < r ? c : r);
    job->fn(job->ctx, begin, begin + q + (c < r));
  }
}

static void *worker_main(void *arg) {
  (void)arg;
  in_parallel = 1;
  uint64_t seen = 0;
  pthread_mutex_lock(&pool.mu);
  for (;;) {
    if (!pool.job || atomic_load(&pool.gen) == seen) {
      /* Spin a little without the lock: kernels come in bursts. */
      pthread_mutex_unlock(&pool.mu);
      hpu_spin_wait_u64(&pool.gen, seen, POOL_SPIN_NS);
      pthread_mutex_lock(&pool.mu);
      if (!pool.job || atomic_load(&pool.gen) == seen) {
        pool.sleeping++;
        while (!pool.job || atomic_load(&pool.gen) == seen) pthread_cond_wait(&pool.work_cv, &pool.mu);
        pool.sleeping--;
      }
      continue;
    }
    job_t *job = pool.job;
    seen = atomic_load(&pool.gen);
    job->active++;
    pthread_mutex_unlock(&pool.mu);
    run_chunks(job);
    pthread_mutex_lock(&pool.mu);
    if (--job->active == 0) pthread_cond_signal(&pool.done_cv);
  }
  return NULL;
}

/* Called with pool.mu held. Returns how many workers exist (may fall short). */
static int grow_pool(int want) {
  pthread_once(&fork_once, register_fork);
  while (pool.nworkers < want) {
    pthread_t t;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    int rc = pthread_create(&t, &attr, worker_main, NULL);
    pthread_attr_destroy(&attr);
    if (rc != 0) break; /* run with what we have */
    pthread_setname_np(t, "hpu-pool");
    pool.nworkers++;
  }
  return pool.nworkers;
}

void hpu_parallel_for(int64_t n, int64_t grain, hpu_range_fn fn, void *ctx) {
  if (n <= 0 || !fn) return;
  if (grain < 1) grain = 1;
  int threads = hpu_get_num_threads();
  if (n <= grain || threads == 1 || in_parallel) {
    fn(ctx, 0, n);
    return;
  }
  int64_t chunks = n / grain; /* every chunk gets at least `grain` items */
  if (chunks > threads) chunks = threads;
  if (chunks < 2 || pthread_mutex_trylock(&pool.busy) != 0) {
    fn(ctx, 0, n);
    return;
  }
  job_t job = {.fn = fn, .ctx = ctx, .n = n, .nchunks = (int)chunks};
  atomic_init(&job.next, 0);
  pthread_mutex_lock(&pool.mu);
  int workers = grow_pool(threads - 1);
  if (workers == 0) {
    pthread_mutex_unlock(&pool.mu);
    pthread_mutex_unlock(&pool.busy);
    fn(ctx, 0, n);
    return;
  }
  pool.job = &job;
  atomic_fetch_add(&pool.gen, 1);
  if (pool.sleeping) pthread_cond_broadcast(&pool.work_cv);
  pthread_mutex_unlock(&pool.mu);

  in_parallel = 1;
  run_chunks(&job);
  in_parallel = 0;

  pthread_mutex_lock(&pool.mu);
  pool.job = NULL; /* no new joiners; every chunk is claimed by now */
  while (job.active > 0) pthread_cond_wait(&pool.done_cv, &pool.mu);
  pthread_mutex_unlock(&pool.mu);
  pthread_mutex_unlock(&pool.busy);
}
