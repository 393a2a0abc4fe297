/* The in-order hardware queue of a card: a ring of tasks under a mutex,
 * served by one worker thread started on first use.
 *
 * Host overhead matters (eager mode enqueues every op), so:
 *  - enqueue is a lock, a store into the ring and a signal only when the
 *    worker is asleep; no allocation unless the ring must grow;
 *  - the worker spins briefly when the ring runs dry before it sleeps, so a
 *    loop of small ops rarely pays for a futex wake-up;
 *  - synchronize reads two atomic counters and returns at once when the
 *    queue is idle; otherwise it runs the tasks the worker has not started
 *    yet itself, in order (a task is claimed under the lock and one runs at
 *    a time, whichever thread runs it): on a 2-core box, handing a kernel
 *    to a worker that must first wake up costs tens of microseconds while
 *    the host would only wait; for a task the worker is running, it helps
 *    with the kernel's pool chunks, spins briefly, then sleeps on a condvar;
 *  - an idle worker that stays awake helps with the running kernel's pool
 *    chunks (the host may be running that kernel) instead of spinning idle;
 *  - a push that finds the worker asleep while a pool worker is awake does
 *    not wake it. Waking the worker there cost the host a futex call and
 *    put a third busy thread on a 2-core box: the woken worker took the
 *    pool worker's CPU while the host ran the kernel, and the pool worker
 *    joined the kernel 9-15 us late. The awake pool worker runs
 *    the task itself instead, at once, as the card's next task; the host's
 *    synchronize joins the kernel's chunks. Otherwise the task would wait
 *    for the host to reach its synchronize, a few microseconds after the
 *    push in an "op, then wait" loop (docs/PERFORMANCE.md). A push
 *    while the pool worker runs such a task wakes the queue worker (the
 *    host is streaming ops), and when the pool worker cannot take the task
 *    it wakes the queue worker HPU_KICK_DELAY_NS later or before it sleeps.
 *    HPU_QUEUE_DEFER_WAKE=0 turns this off (to compare, or to rule it out).
 *
 * A failing task leaves a sticky error on the card (first error wins, with
 * the worker's message); the next synchronize/query returns and clears it.
 * At exit the workers drain their queues and are joined (and a task a pool
 * worker runs is waited for); later enqueues (e.g. from static destructors)
 * run inline on the caller. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hpu/env.h"
#include "hpu/metrics.h"
#include "hpu/parallel.h"
#include "hpu/status_page.h"

#include "runtime/runtime.h"
#include "runtime/lock.h"
#include "runtime/schedule_policy.h"

/* Spin times, the deferred-wake rule and the default depth, with their
 * reasons: runtime/schedule_policy.h. */
static _Atomic long queue_depth = HPU_QUEUE_DEPTH_DEFAULT;
static atomic_int defer_wakes = 1;

hpu_status_t hpu_queue_configure(void) {
  long long depth, defer;
  hpu_status_t st = hpu_env_int("HPU_QUEUE_DEPTH", HPU_QUEUE_DEPTH_DEFAULT, 1, 1 << 24, &depth);
  if (st == HPU_SUCCESS) st = hpu_env_int("HPU_QUEUE_DEFER_WAKE", 1, 0, 1, &defer);
  if (st != HPU_SUCCESS) return st;
  atomic_store(&queue_depth, (long)depth);
  atomic_store(&defer_wakes, (int)defer);
  return HPU_SUCCESS;
}

typedef struct task {
  hpu_task_fn fn;
  void *arg;
  void (*release)(void *);
} task_t;

typedef struct queue {
  hpu_mutex_t mu;
  pthread_cond_t work_cv; /* the worker waits for tasks */
  pthread_cond_t done_cv; /* synchronizers wait for completions */
  task_t *ring;
  size_t cap, head, count; /* cap is a power of two */
  _Atomic uint64_t submitted, completed;
  _Atomic uint64_t started; /* tasks taken from the ring (by the worker or a synchronizer) */
  atomic_int running;       /* a task taken from the ring is running (at most one) */
  atomic_int has_error;
  int sleeping, waiters, stopping;
  _Atomic uint64_t kick_at; /* a deferred wake of the sleeping worker: when (ns), or 0 */
  int pool_running;         /* a pool worker runs a deferred task (hpu_queue_run_deferred) */
  pthread_t thread;
  int device;
  hpu_status_t err;
  char errmsg[1024];
} queue_t;

static _Atomic(queue_t *) queues[HPU_MAX_CARDS];
static hpu_mutex_t queues_mu = HPU_MUTEX_INIT(HPU_RANK_QUEUE, "queue registry");
static _Thread_local int worker_device = -1;
static int atexit_registered;
static atomic_int kicks; /* queues with a deferred wake */

int hpu_queue_current_device(void) { return worker_device; }

/* Called with q->mu held. */
static void store_error(queue_t *q, hpu_status_t st, const char *msg) {
  if (q->err != HPU_SUCCESS) return;
  q->err = st;
  snprintf(q->errmsg, sizeof q->errmsg, "%s", msg && msg[0] ? msg : hpu_status_name(st));
  atomic_store(&q->has_error, 1);
}

/* Runs a task without q->mu held (a task may enqueue more work). */
static void run_task(queue_t *q, const task_t *t) {
  uint64_t t0 = hpu_now_ns(); /* the card's busy time, for hl-smi (status_page.c) */
  hpu_status_t st = t->fn(t->arg);
  hpu_status_page_task(q->device, hpu_now_ns() - t0);
  char msg[1024];
  if (st != HPU_SUCCESS) snprintf(msg, sizeof msg, "%s", hpu_last_error());
  if (t->release) t->release(t->arg);
  if (st != HPU_SUCCESS) {
    hpu_mutex_lock(&q->mu);
    store_error(q, st, msg);
    hpu_mutex_unlock(&q->mu);
  }
}

/* Called with q->mu held: the next task may start (none is running). */
static int can_start(const queue_t *q) { return q->count > 0 && !atomic_load(&q->running); }

/* Drops the queue's deferred wake, if any (nobody needs to be woken). */
static void kick_clear(queue_t *q) {
  if (atomic_load_explicit(&q->kick_at, memory_order_relaxed) && atomic_exchange(&q->kick_at, 0))
    atomic_fetch_sub(&kicks, 1);
}

/* Called with q->mu held and can_start(q): takes the head task. */
static task_t take_task(queue_t *q) {
  task_t t = q->ring[q->head];
  q->head = (q->head + 1) & (q->cap - 1);
  q->count--;
  hpu_status_page_queue_depth(q->device, q->count);
  if (q->count == 0) kick_clear(q);
  atomic_store(&q->running, 1);
  atomic_fetch_add_explicit(&q->started, 1, memory_order_relaxed);
  return t;
}

/* Called with q->mu held after a taken task ran. */
static void finish_task(queue_t *q) {
  atomic_store(&q->running, 0);
  atomic_fetch_add_explicit(&q->completed, 1, memory_order_release);
  if (q->waiters) pthread_cond_broadcast(&q->done_cv);
}

/* Runs a task taken from q (q->mu not held) on a thread other than the
 * worker (a synchronizer, the host, a pool worker) as the card's, so that a
 * synchronize from inside it is refused; then finishes it and leaves the
 * tasks pushed meanwhile, and exit, to the sleeping worker. Returns with
 * q->mu held. */
static void run_here_as_card(queue_t *q, const task_t *t) {
  int saved = worker_device;
  worker_device = q->device;
  hpu_lock_task_enter();
  run_task(q, t);
  hpu_lock_task_leave();
  worker_device = saved;
  hpu_mutex_lock(&q->mu);
  finish_task(q);
  if (q->sleeping && (q->count > 0 || q->stopping)) pthread_cond_signal(&q->work_cv);
}

/* Lock-free look: a task among the first `limit` pushed is unstarted and
 * none is running (can_start, as far as those tasks go). */
static int may_take(queue_t *q, uint64_t limit) {
  return atomic_load_explicit(&q->started, memory_order_relaxed) < limit &&
         !atomic_load_explicit(&q->running, memory_order_relaxed);
}

/* The worker's spin condition: 1 when a task may start,
 * 2 when the pool has chunks it could help with. */
static int worker_wake(void *p) {
  queue_t *q = p;
  if (may_take(q, atomic_load_explicit(&q->submitted, memory_order_relaxed))) return 1;
  return hpu_parallel_pending() ? 2 : 0;
}

static void *worker_main(void *p) {
  queue_t *q = p;
  worker_device = q->device;
  hpu_lock_task_enter(); /* this thread only runs the card's tasks (lock.h) */
  hpu_mutex_lock(&q->mu);
  for (;;) {
    if (!can_start(q)) {
      if (q->stopping && q->count == 0) break;
      /* Stay awake a little: the host is often about to enqueue more, or
       * is itself running a kernel whose chunks this thread can take. */
      hpu_mutex_unlock(&q->mu);
      while (hpu_spin_until(worker_wake, q, HPU_WORKER_SPIN_NS) == 2) hpu_parallel_help();
      hpu_mutex_lock(&q->mu);
      if (!can_start(q) && !(q->stopping && q->count == 0)) {
        q->sleeping = 1;
        /* A synchronizer that runs a task signals when it is done and more
         * remain (or exit began). */
        while (!can_start(q) && !(q->stopping && q->count == 0)) hpu_cond_wait(&q->work_cv, &q->mu);
        q->sleeping = 0;
        kick_clear(q);
      }
      continue;
    }
    task_t t = take_task(q);
    hpu_mutex_unlock(&q->mu);
    run_task(q, &t);
    hpu_mutex_lock(&q->mu);
    finish_task(q);
  }
  hpu_mutex_unlock(&q->mu);
  hpu_lock_task_leave();
  return NULL;
}

static void shutdown_queues(void) {
  if (hpu_rt_forked()) return; /* the workers belong to the parent */
  for (int i = 0; i < HPU_MAX_CARDS; i++) {
    queue_t *q = atomic_load(&queues[i]);
    if (!q) continue;
    hpu_mutex_lock(&q->mu);
    int was_running = !q->stopping;
    q->stopping = 1;
    pthread_cond_signal(&q->work_cv);
    hpu_mutex_unlock(&q->mu);
    if (was_running) pthread_join(q->thread, NULL);
    /* The worker leaves once the ring is empty; a pool worker may still be
     * running the last task (hpu_queue_run_deferred). */
    hpu_mutex_lock(&q->mu);
    q->waiters++;
    while (atomic_load(&q->running)) hpu_cond_wait(&q->done_cv, &q->mu);
    q->waiters--;
    hpu_mutex_unlock(&q->mu);
  }
}

static queue_t *queue_get(int device, int create, hpu_status_t *st) {
  queue_t *q = atomic_load_explicit(&queues[device], memory_order_acquire);
  *st = HPU_SUCCESS;
  if (q || !create) return q;
  hpu_mutex_lock(&queues_mu);
  q = atomic_load(&queues[device]);
  if (!q) {
    q = calloc(1, sizeof *q);
    task_t *ring = malloc(256 * sizeof *ring);
    if (!q || !ring) {
      free(q);
      free(ring);
      hpu_mutex_unlock(&queues_mu);
      *st = hpu_error(HPU_ERROR_SYSTEM, "hpu:%d: out of host memory creating the queue", device);
      return NULL;
    }
    hpu_mutex_init(&q->mu, HPU_RANK_QUEUE, "card queue");
    pthread_cond_init(&q->work_cv, NULL);
    pthread_cond_init(&q->done_cv, NULL);
    q->ring = ring;
    q->cap = 256;
    q->device = device;
    int rc = pthread_create(&q->thread, NULL, worker_main, q);
    if (rc != 0) {
      free(ring);
      free(q);
      hpu_mutex_unlock(&queues_mu);
      *st = hpu_error(HPU_ERROR_SYSTEM, "hpu:%d: cannot start the queue worker: %s", device,
                      strerror(rc));
      return NULL;
    }
    char name[16];
    snprintf(name, sizeof name, "hpu%d-queue", device);
    pthread_setname_np(q->thread, name);
    if (!atexit_registered) {
      atexit(shutdown_queues);
      atexit_registered = 1;
    }
    atomic_store_explicit(&queues[device], q, memory_order_release);
  }
  hpu_mutex_unlock(&queues_mu);
  return q;
}

/* HPU_QUEUE_DEFER_WAKE=0: every push wakes a sleeping worker itself. */
static int defer_enabled(void) { return atomic_load_explicit(&defer_wakes, memory_order_relaxed); }

/* Called with q->mu held by a push that found the worker asleep: leaves the
 * wake to an awake pool worker (see the top of the file) if this is the only
 * task waiting. Returns 0 when the caller must wake the worker itself. */
static int defer_wake(queue_t *q) {
  /* While a pool worker runs a deferred task, the host is streaming ops
   * rather than waiting for one: the queue worker takes the next. */
  if (!hpu_policy_defer_wake(defer_enabled(), q->pool_running, hpu_parallel_worker_awake())) return 0;
  uint64_t none = 0;
  if (!atomic_compare_exchange_strong(&q->kick_at, &none, hpu_now_ns() | 1)) {
    /* A second push before anyone ran the first: the host is streaming
     * ops rather than waiting for one, so the worker should start now. */
    kick_clear(q);
    return 0;
  }
  atomic_fetch_add(&kicks, 1);
  hpu_metric_add("queue_wake_deferred", 1);
  /* The pool worker may have gone to sleep since the look above; it checks
   * the kicks after announcing that (both sides seq_cst), so one of the two
   * sees the other. */
  if (hpu_parallel_worker_awake()) return 1;
  kick_clear(q);
  return 0;
}

/* A deferred wake recorded at `at` (0: none) has waited its delay out. */
static int kick_due(uint64_t at, uint64_t now) { return at && now - at >= HPU_KICK_DELAY_NS; }

int hpu_queue_kicks_due(void) {
  if (!atomic_load_explicit(&kicks, memory_order_relaxed)) return 0;
  uint64_t now = hpu_now_ns();
  for (int i = 0; i < HPU_MAX_CARDS; i++) {
    queue_t *q = atomic_load_explicit(&queues[i], memory_order_acquire);
    if (q && kick_due(atomic_load_explicit(&q->kick_at, memory_order_relaxed), now)) return 1;
  }
  return 0;
}

void hpu_queue_kick(int all) {
  if (!atomic_load(&kicks)) return;
  uint64_t now = hpu_now_ns();
  for (int i = 0; i < HPU_MAX_CARDS; i++) {
    queue_t *q = atomic_load_explicit(&queues[i], memory_order_acquire);
    if (!q) continue;
    uint64_t at = atomic_load(&q->kick_at);
    if (!at || !(all || kick_due(at, now)) || !atomic_compare_exchange_strong(&q->kick_at, &at, 0))
      continue;
    atomic_fetch_sub(&kicks, 1);
    hpu_metric_add("queue_wake_by_pool", 1);
    hpu_mutex_lock(&q->mu);
    if (q->sleeping) pthread_cond_signal(&q->work_cv);
    hpu_mutex_unlock(&q->mu);
  }
}

int hpu_queue_deferred_runnable(void) {
  if (!atomic_load_explicit(&kicks, memory_order_relaxed)) return 0;
  for (int i = 0; i < HPU_MAX_CARDS; i++) {
    queue_t *q = atomic_load_explicit(&queues[i], memory_order_acquire);
    if (q && atomic_load_explicit(&q->kick_at, memory_order_relaxed) &&
        may_take(q, atomic_load_explicit(&q->submitted, memory_order_relaxed)))
      return 1;
  }
  return 0;
}

int hpu_queue_run_deferred(void) {
  int ran = 0;
  for (int i = 0; i < HPU_MAX_CARDS; i++) {
    queue_t *q = atomic_load_explicit(&queues[i], memory_order_acquire);
    if (!q || !atomic_load_explicit(&q->kick_at, memory_order_relaxed)) continue;
    hpu_mutex_lock(&q->mu);
    /* Still deferred (kick_at is cleared when anyone takes the task or
     * wakes the worker), so the worker sleeps and the task is the only one. */
    if (!atomic_load(&q->kick_at) || !can_start(q) || q->stopping) {
      hpu_mutex_unlock(&q->mu);
      continue;
    }
    task_t t = take_task(q);
    q->pool_running = 1;
    hpu_mutex_unlock(&q->mu);
    hpu_metric_add("queue_wake_run_by_pool", 1);
    run_here_as_card(q, &t);
    q->pool_running = 0;
    hpu_mutex_unlock(&q->mu);
    ran++;
  }
  return ran;
}

/* Called with q->mu held by a host thread whose push found the ring at its
 * bound: wakes the worker and sleeps until a task finishes. */
static void wait_for_room(queue_t *q, size_t bound) {
  hpu_metric_add("queue_full_wait", 1);
  kick_clear(q);
  if (q->sleeping) pthread_cond_signal(&q->work_cv);
  q->waiters++;
  while (q->count >= bound && !q->stopping) hpu_cond_wait(&q->done_cv, &q->mu);
  q->waiters--;
}

hpu_status_t hpu_queue_push(int device, hpu_task_fn fn, void *arg, void (*release)(void *)) {
  hpu_status_t st;
  /* The host blocks when the card is HPU_QUEUE_DEPTH tasks behind; a task
   * that enqueues (worker_device >= 0) never does: it may be the one the
   * ring waits for. */
  size_t bound = 0;
  if (worker_device < 0) {
    bound = (size_t)atomic_load_explicit(&queue_depth, memory_order_relaxed);
    hpu_lock_check_may_wait("a push to a card queue");
  }
  queue_t *q = queue_get(device, 1, &st);
  if (!q) return st;
  task_t t = {fn, arg, release};
  hpu_mutex_lock(&q->mu);
  if (bound && q->count >= bound && !q->stopping) wait_for_room(q, bound);
  if (q->stopping) { /* after exit began: run it here, in order (the queue is drained) */
    hpu_mutex_unlock(&q->mu);
    run_task(q, &t);
    return HPU_SUCCESS;
  }
  if (q->count == q->cap) {
    task_t *ring = malloc(2 * q->cap * sizeof *ring);
    if (!ring) {
      hpu_mutex_unlock(&q->mu);
      return hpu_error(HPU_ERROR_SYSTEM, "hpu:%d: out of host memory growing the queue", device);
    }
    for (size_t i = 0; i < q->count; i++) ring[i] = q->ring[(q->head + i) & (q->cap - 1)];
    free(q->ring);
    q->ring = ring;
    q->head = 0;
    q->cap *= 2;
  }
  q->ring[(q->head + q->count) & (q->cap - 1)] = t;
  q->count++;
  hpu_status_page_queue_depth(device, q->count);
  atomic_fetch_add_explicit(&q->submitted, 1, memory_order_relaxed);
  if (q->sleeping && !defer_wake(q)) pthread_cond_signal(&q->work_cv);
  hpu_mutex_unlock(&q->mu);
  return HPU_SUCCESS;
}

/* Runs fn(arg) on the calling thread as the card's next task if the queue
 * is idle (nothing waiting, nothing running); returns 0 without running it
 * otherwise, and the caller pushes it. For kernels smaller than the cost of
 * a hand-off: pushing means a lock, a task record and a cache-line trip to
 * the worker's core and back, which for a 16-element add is most of the op.
 * Observably it is the same as a push the worker ran at once: the counters
 * move, a failure becomes the card's sticky error, a task pushed by another
 * thread meanwhile waits for this one. */
int hpu_queue_run_if_idle(int device, hpu_task_fn fn, void *arg) {
  if (worker_device == device) return 0; /* a task of this card enqueuing: keep FIFO */
  hpu_status_t st;
  queue_t *q = queue_get(device, 1, &st);
  if (!q) return 0; /* the push reports it */
  if (atomic_load_explicit(&q->completed, memory_order_acquire) !=
      atomic_load_explicit(&q->submitted, memory_order_relaxed))
    return 0;
  hpu_mutex_lock(&q->mu);
  if (q->stopping || !(q->count == 0 && !atomic_load(&q->running))) {
    hpu_mutex_unlock(&q->mu);
    return 0;
  }
  /* started before submitted: a spinning worker never sees a task to take */
  atomic_store(&q->running, 1);
  atomic_fetch_add(&q->started, 1);
  atomic_fetch_add(&q->submitted, 1);
  hpu_mutex_unlock(&q->mu);
  task_t t = {fn, arg, NULL};
  run_here_as_card(q, &t);
  hpu_mutex_unlock(&q->mu);
  return 1;
}

/* Returns and clears the sticky error, copying its message to this thread. */
static hpu_status_t take_error(queue_t *q) {
  if (!atomic_load_explicit(&q->has_error, memory_order_acquire)) return HPU_SUCCESS;
  hpu_mutex_lock(&q->mu);
  hpu_status_t st = q->err;
  if (st != HPU_SUCCESS) hpu_error(st, "%s", q->errmsg);
  q->err = HPU_SUCCESS;
  atomic_store(&q->has_error, 0);
  hpu_mutex_unlock(&q->mu);
  return st;
}

typedef struct {
  queue_t *q;
  uint64_t target;
  int take; /* may run unstarted tasks itself */
} waiter_t;

/* The synchronizer's spin condition: 1 when the target is reached or the
 * next task may be taken, 2 when the pool has chunks to help with. */
static int sync_wake(void *p) {
  const waiter_t *w = p;
  queue_t *q = w->q;
  if (atomic_load_explicit(&q->completed, memory_order_acquire) >= w->target) return 1;
  if (w->take && may_take(q, w->target)) return 1;
  return hpu_parallel_pending() ? 2 : 0;
}

/* Waits for the tasks pushed before the call (`target` completions).
 * With take, tasks nobody has started yet run on this thread, in order, as
 * the card's (so a task still cannot wait for its own queue); otherwise, and
 * while the worker runs one, the thread helps with the kernel's pool chunks
 * (on a 2-core box it would otherwise spin on a core the kernel needs),
 * spins, and sleeps only when the work outlasts the budget. */
static void wait_submitted(queue_t *q, int take) {
  hpu_lock_check_may_wait(take ? "a synchronize" : "a queue drain");
  waiter_t w = {q, atomic_load_explicit(&q->submitted, memory_order_relaxed), take};
  if (atomic_load_explicit(&q->completed, memory_order_acquire) >= w.target) return;
  hpu_mutex_lock(&q->mu);
  for (;;) {
    if (atomic_load(&q->completed) >= w.target) break;
    if (take && can_start(q) && atomic_load(&q->started) < w.target) {
      task_t t = take_task(q);
      hpu_mutex_unlock(&q->mu);
      run_here_as_card(q, &t); /* tasks pushed after the call are the worker's again */
      continue;
    }
    hpu_mutex_unlock(&q->mu);
    int r;
    while ((r = hpu_spin_until(sync_wake, &w, HPU_SYNC_SPIN_NS)) == 2) hpu_parallel_help();
    hpu_mutex_lock(&q->mu);
    if (r == 0) { /* out of budget: sleep until the next completion */
      q->waiters++;
      uint64_t seen = atomic_load(&q->completed);
      while (atomic_load(&q->completed) == seen && seen < w.target) hpu_cond_wait(&q->done_cv, &q->mu);
      q->waiters--;
    }
  }
  hpu_mutex_unlock(&q->mu);
}

hpu_status_t hpu_queue_check_wait(int device) {
  if (worker_device == device)
    return hpu_error(HPU_ERROR_INVALID_ARGUMENT,
                     "hpu:%d: a task running on the card's queue cannot wait for that queue "
                     "(it would wait for itself)", device);
  return HPU_SUCCESS;
}

hpu_status_t hpu_queue_sync(int device) {
  hpu_status_t st = hpu_queue_check_wait(device);
  if (st != HPU_SUCCESS) return st;
  queue_t *q = queue_get(device, 0, &st);
  if (!q) return HPU_SUCCESS;
  wait_submitted(q, 1);
  return take_error(q);
}

void hpu_queue_drain(int device) {
  hpu_status_t st;
  queue_t *q = queue_get(device, 0, &st);
  if (!q || worker_device == device) return;
  /* Only waits: callers hold locks (the allocator's) that a task's release
   * callback could take. */
  wait_submitted(q, 0);
}

hpu_status_t hpu_queue_query(int device) {
  hpu_status_t st;
  queue_t *q = queue_get(device, 0, &st);
  if (!q) return HPU_SUCCESS;
  st = take_error(q);
  if (st != HPU_SUCCESS) return st;
  if (atomic_load_explicit(&q->completed, memory_order_acquire) <
      atomic_load_explicit(&q->submitted, memory_order_relaxed))
    return hpu_error(HPU_ERROR_NOT_READY, "hpu:%d: queued work has not finished", device);
  return HPU_SUCCESS;
}
