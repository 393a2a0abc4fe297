/* The process-wide kernel thread pool (PyTorch's intra-op pool).
 *
 * Size: hpu_set_num_threads, else OMP_NUM_THREADS, else the online CPUs.
 * The caller takes part, so a size of n means n - 1 pool threads, created
 * lazily on the first parallel_for that needs them and never per call.
 *
 * One job at a time, in a static slot. The range is cut into up to
 * HPU_PARALLEL_SPLIT chunks per thread (each >= grain; one per thread when
 * grain is 1, see below) that threads claim
 * dynamically: on a shared 2-core box a pool thread often starts late (its
 * wake-up takes tens of microseconds, or it is preempted), and with one chunk
 * per thread the caller would then wait for a whole late chunk; with smaller
 * chunks the threads that are running do the work.
 *
 * Claiming is lock-free through one 64-bit ticket {generation, nchunks,
 * next chunk}: a claim is a CAS on the ticket, so a thread that read a job
 * late can never claim a chunk of a later job by mistake, and it reads the
 * job's fields only while its generation is live (the slot is rewritten only
 * after every chunk of the current job is done). Completion is a counter the
 * caller spins on (then sleeps; the last finisher wakes it).
 *
 * Any thread may help with the running job (hpu_parallel_help): the host
 * thread does so while it waits in synchronize, and an idle queue worker
 * while it stays awake for more tasks (hpu_parallel_pending is the cheap
 * look), instead of spinning idle while the kernel needs the CPU.
 *
 * A second thread that finds the pool busy (two cards' workers, say) runs
 * its range inline instead of queueing behind the first, which also rules
 * out deadlocks. Calls made from inside a chunk run inline.
 *
 * Fork: the child has none of the threads, so a fork handler resets the pool
 * (the prepare handler holds the lock, so its state is consistent); the child
 * starts new threads on demand. */
#define _GNU_SOURCE
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hpu/device.h"
#include "hpu/env.h"
#include "hpu/parallel.h"
#include "hpu/status.h"
#include "runtime/runtime.h"
#include "runtime/lock.h"
#include "runtime/schedule_policy.h"

#define MAX_THREADS 1024
/* How long idle workers and a job's caller spin: runtime/schedule_policy.h. */

/* ticket layout: generation in the high 32 bits, nchunks in bits 16..31,
 * next chunk to claim in bits 0..15 (nchunks <= 65535). */
#define T_GEN(t) ((uint32_t)((t) >> 32))
#define T_NCH(t) ((int)(((t) >> 16) & 0xffff))
#define T_NEXT(t) ((int)((t) & 0xffff))
#define MAX_CHUNKS 0xffff

static struct pool {
  hpu_mutex_t mu;
  pthread_cond_t work_cv; /* workers wait for a job */
  pthread_cond_t done_cv; /* the caller waits for the last chunk */
  hpu_mutex_t busy;   /* held by the thread whose job is running */
  /* the job slot (valid while its generation is in the ticket and unfinished) */
  /* Atomic (relaxed): run_chunks reads them before its claim and may see a
   * later job's, which the failing claim then discards. */
  _Atomic(hpu_range_fn) fn;
  _Atomic(void *) ctx;
  _Atomic int64_t n;
  _Atomic uint64_t ticket;
  _Atomic uint64_t done;  /* chunks finished */
  atomic_int caller_sleeping;
  atomic_int caller_cpu;  /* the CPU the job's caller ran on when it published it, or -1 */
  atomic_int sleeping;    /* workers asleep on work_cv */
  int nworkers;
} pool = {.mu = HPU_MUTEX_INIT(HPU_RANK_POOL, "thread pool"),
          .work_cv = PTHREAD_COND_INITIALIZER,
          .done_cv = PTHREAD_COND_INITIALIZER,
          .busy = HPU_MUTEX_INIT(HPU_RANK_POOL_JOB, "thread pool job"),
          .caller_cpu = -1};

static atomic_int num_threads; /* 0 = not decided yet */
static _Thread_local int in_parallel;
static pthread_once_t fork_once = PTHREAD_ONCE_INIT;

static void fork_prepare(void) { hpu_mutex_lock(&pool.mu); }
static void fork_parent(void) { hpu_mutex_unlock(&pool.mu); }
static void fork_child(void) {
  /* The threads are gone; start over with fresh primitives. A job being run
   * by another parent thread is abandoned with it. */
  hpu_mutex_unlock(&pool.mu); /* taken by this thread in fork_prepare */
  hpu_mutex_init(&pool.mu, HPU_RANK_POOL, "thread pool");
  pthread_cond_init(&pool.work_cv, NULL);
  pthread_cond_init(&pool.done_cv, NULL);
  hpu_mutex_init(&pool.busy, HPU_RANK_POOL_JOB, "thread pool job");
  uint64_t t = atomic_load(&pool.ticket);
  atomic_store(&pool.ticket, (uint64_t)(T_GEN(t) + 1) << 32); /* no chunks */
  atomic_store(&pool.sleeping, 0);
  atomic_store(&pool.caller_sleeping, 0);
  pool.nworkers = 0;
}
static void register_fork(void) { pthread_atfork(fork_prepare, fork_parent, fork_child); }

/* OMP_NUM_THREADS: OpenMP's syntax is a list, one count per nesting level
 * ("8,2"); the pool is one level, so the first count. Past MAX_THREADS the
 * pool is capped (the value may be meant for another OpenMP library). */
static hpu_status_t env_threads(int *out) {
  *out = 0;
  const char *v = getenv("OMP_NUM_THREADS");
  if (!v) return HPU_SUCCESS;
  char first[64];
  size_t len = strcspn(v, ",");
  const char *text = v; /* a first item too long for `first`: the parser says so */
  if (len < sizeof first) {
    memcpy(first, v, len);
    first[len] = 0;
    text = first;
  }
  if (text[strspn(text, " \t\n")] == 0) return HPU_SUCCESS; /* blank: unset */
  long long n;
  hpu_status_t st = hpu_parse_int("OMP_NUM_THREADS", text, 1, INT_MAX, &n);
  if (st == HPU_SUCCESS) *out = n > MAX_THREADS ? MAX_THREADS : (int)n;
  return st;
}

hpu_status_t hpu_parallel_configure(void) {
  int n;
  return env_threads(&n);
}

static int default_threads(void) {
  int n;
  /* A bad value is reported by hpu_init (hpu_parallel_configure); a kernel
   * run before init (C users) takes the CPU count. */
  if (env_threads(&n) == HPU_SUCCESS && n > 0) return n;
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

/* Claims and runs chunks of the job whose ticket generation is `gen` until
 * none is left. Returns how many chunks this thread ran. */
static int run_chunks(uint32_t gen) {
  int ran = 0;
  uint64_t t = atomic_load_explicit(&pool.ticket, memory_order_acquire);
  for (;;) {
    if (T_GEN(t) != gen || T_NEXT(t) >= T_NCH(t)) return ran;
    /* Read the job before claiming: valid if the claim succeeds (the slot
     * is only rewritten after all chunks of this generation are done). */
    hpu_range_fn fn = atomic_load_explicit(&pool.fn, memory_order_relaxed);
    void *ctx = atomic_load_explicit(&pool.ctx, memory_order_relaxed);
    int64_t n = atomic_load_explicit(&pool.n, memory_order_relaxed);
    if (!atomic_compare_exchange_weak_explicit(&pool.ticket, &t, t + 1, memory_order_acq_rel,
                                               memory_order_acquire))
      continue;
    int c = T_NEXT(t), nch = T_NCH(t);
    /* Balanced split without overflow: the first n % nchunks chunks get one more. */
    int64_t q = n / nch, r = n % nch;
    int64_t begin = c * q + (c < r ? c : r);
    fn(ctx, begin, begin + q + (c < r));
    ran++;
    if (atomic_fetch_add(&pool.done, 1) + 1 == (uint64_t)nch &&
        atomic_load(&pool.caller_sleeping)) {
      hpu_mutex_lock(&pool.mu);
      pthread_cond_signal(&pool.done_cv);
      hpu_mutex_unlock(&pool.mu);
    }
    t = atomic_load_explicit(&pool.ticket, memory_order_acquire);
  }
}

/* True when the ticket holds unclaimed chunks of a generation other than seen. */
static int has_new_work(uint64_t t, uint32_t seen) {
  return T_GEN(t) != seen && T_NEXT(t) < T_NCH(t);
}

typedef struct {
  uint64_t ticket; /* the ticket last seen */
} idle_t;

/* An idle worker's spin condition: 1 when the ticket moved, 2 when a
 * queue holds a deferred task it can run, or a deferred wake is due
 * (queue.c). */
static int worker_wake(void *p) {
  const idle_t *w = p;
  if (atomic_load_explicit(&pool.ticket, memory_order_acquire) != w->ticket) return 1;
  return hpu_queue_deferred_runnable() || hpu_queue_kicks_due() ? 2 : 0;
}

/* A deferred task runs on this worker as on the queue's own: its kernels
 * may use the pool (the host joins them in its synchronize), so it does
 * not run as a chunk (in_parallel). Otherwise the due wakes are sent. */
static void serve_queues(void) {
  in_parallel = 0;
  int ran = hpu_queue_run_deferred();
  in_parallel = 1;
  if (!ran) hpu_queue_kick(0);
}

/* A worker that wakes on the CPU its job's caller runs on moves to
 * another CPU of its affinity mask before it claims a chunk. Measured on
 * a 2-vCPU VM (Zen 4 class): in about one process of three, the worker
 * and the caller shared a CPU for the first 10-50 jobs (up to 200 ms)
 * while the other CPU idled, and every 2-thread kernel ran at one
 * thread's speed (a 3x3 weight gradient 4.1-4.9 ms instead of 2.4).
 * Both threads were always runnable and had just run, so the scheduler's
 * balancer kept refusing to move either ("cache hot"). The move narrows
 * the mask by that one CPU, which migrates the thread at once, and puts
 * the mask back as it was: the user's affinity is kept. At most once per
 * HPU_COLOCATED_MOVE_NS, so a box that is truly oversubscribed does not
 * make a worker bounce. */
static void leave_caller_cpu(uint64_t *last_move) {
  int caller = atomic_load_explicit(&pool.caller_cpu, memory_order_relaxed);
  if (caller < 0 || caller >= CPU_SETSIZE || sched_getcpu() != caller) return;
  uint64_t now = hpu_now_ns();
  if (now - *last_move < HPU_COLOCATED_MOVE_NS) return;
  *last_move = now;
  cpu_set_t mask, others;
  if (sched_getaffinity(0, sizeof mask, &mask) != 0) return;
  others = mask;
  CPU_CLR(caller, &others);
  if (CPU_COUNT(&others) == 0) return;
  if (sched_setaffinity(0, sizeof others, &others) == 0) sched_setaffinity(0, sizeof mask, &mask);
}

static void *worker_main(void *arg) {
  (void)arg;
  in_parallel = 1;
  uint32_t seen = T_GEN(atomic_load(&pool.ticket));
  uint64_t last_move = 0;
  for (;;) {
    uint64_t t = atomic_load_explicit(&pool.ticket, memory_order_acquire);
    if (!has_new_work(t, seen)) {
      /* Spin a little: kernels come in bursts. */
      idle_t w = {t};
      int r;
      while ((r = hpu_spin_until(worker_wake, &w, HPU_POOL_SPIN_NS)) == 2) {
        serve_queues();
        w.ticket = atomic_load_explicit(&pool.ticket, memory_order_acquire);
      }
      if (!r) {
        /* Announce the sleep before the last look at the deferred wakes:
         * a push that saw this worker awake left its wake to it. */
        atomic_fetch_add(&pool.sleeping, 1);
        hpu_queue_kick(1);
        hpu_mutex_lock(&pool.mu);
        while (!has_new_work(atomic_load(&pool.ticket), seen))
          hpu_cond_wait(&pool.work_cv, &pool.mu);
        atomic_fetch_sub(&pool.sleeping, 1);
        hpu_mutex_unlock(&pool.mu);
      }
      continue;
    }
    seen = T_GEN(t);
    leave_caller_cpu(&last_move);
    run_chunks(seen);
    hpu_queue_kick(0); /* a long chunk may have held a due wake */
  }
  return NULL;
}

int hpu_parallel_worker_awake(void) {
  int workers = __atomic_load_n(&pool.nworkers, __ATOMIC_RELAXED);
  return workers > atomic_load(&pool.sleeping);
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

int hpu_parallel_pending(void) {
  uint64_t t = atomic_load_explicit(&pool.ticket, memory_order_relaxed);
  return !in_parallel && T_NEXT(t) < T_NCH(t);
}

int hpu_parallel_inside(void) { return in_parallel; }

int hpu_parallel_help(void) {
  if (in_parallel) return 0;
  uint64_t t = atomic_load_explicit(&pool.ticket, memory_order_acquire);
  if (T_NEXT(t) >= T_NCH(t)) return 0;
  in_parallel = 1;
  int ran = run_chunks(T_GEN(t));
  in_parallel = 0;
  return ran;
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
  /* grain 1 means the items are coarse work units that pay a set-up per
   * chunk (GEMM blocks with a packing buffer per chunk): one chunk per
   * thread, as the callers that size per-thread scratch expect. */
  int64_t most = (int64_t)threads * (grain > 1 ? HPU_PARALLEL_SPLIT : 1);
  if (most > MAX_CHUNKS) most = MAX_CHUNKS;
  if (chunks > most) chunks = most;
  if (chunks < 2 || hpu_mutex_trylock(&pool.busy) != 0) {
    fn(ctx, 0, n);
    return;
  }
  if (pool.nworkers < threads - 1) {
    hpu_mutex_lock(&pool.mu);
    int workers = grow_pool(threads - 1);
    hpu_mutex_unlock(&pool.mu);
    if (workers == 0) {
      hpu_mutex_unlock(&pool.busy);
      fn(ctx, 0, n);
      return;
    }
  }
  /* Publish: the slot first, then the ticket (release). */
  atomic_store_explicit(&pool.fn, fn, memory_order_relaxed);
  atomic_store_explicit(&pool.ctx, ctx, memory_order_relaxed);
  atomic_store_explicit(&pool.n, n, memory_order_relaxed);
  atomic_store_explicit(&pool.done, 0, memory_order_relaxed);
  atomic_store_explicit(&pool.caller_cpu, sched_getcpu(), memory_order_relaxed);
  uint32_t gen = T_GEN(atomic_load(&pool.ticket)) + 1;
  atomic_store(&pool.ticket, ((uint64_t)gen << 32) | ((uint64_t)chunks << 16));
  if (atomic_load(&pool.sleeping)) { /* seq_cst pairs with the workers' sleeping++ */
    hpu_mutex_lock(&pool.mu);
    pthread_cond_broadcast(&pool.work_cv);
    hpu_mutex_unlock(&pool.mu);
  }

  in_parallel = 1;
  run_chunks(gen);
  in_parallel = 0;

  /* Every chunk is claimed; wait for the ones other threads still run. */
  if (atomic_load_explicit(&pool.done, memory_order_acquire) < (uint64_t)chunks) {
    hpu_spin_wait_ge_u64(&pool.done, (uint64_t)chunks, HPU_CALLER_SPIN_NS);
    if (atomic_load_explicit(&pool.done, memory_order_acquire) < (uint64_t)chunks) {
      hpu_mutex_lock(&pool.mu);
      atomic_store(&pool.caller_sleeping, 1);
      while (atomic_load(&pool.done) < (uint64_t)chunks) hpu_cond_wait(&pool.done_cv, &pool.mu);
      atomic_store(&pool.caller_sleeping, 0);
      hpu_mutex_unlock(&pool.mu);
    }
  }
  hpu_mutex_unlock(&pool.busy);
}
