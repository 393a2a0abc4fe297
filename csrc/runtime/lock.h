/* The lock hierarchy of the C core. This is the one place it is written
 * down; every mutex of csrc/ is an hpu_mutex_t with its rank from here.
 *
 * Rule: a thread takes a lock only when its rank is greater than the rank
 * of every lock the thread already holds. Waiting for a card's queue (a
 * synchronize, a drain, a push that finds the queue full) counts as taking
 * HPU_RANK_QUEUE_WAIT, and a queue task runs as if it held that rank, so:
 *  - whoever holds the allocator (or anything above QUEUE_WAIT) never waits
 *    for a queue or a lazy flush: a queued task may need that lock to
 *    finish (a collective asks the allocator for its arena);
 *  - a queue task never takes the lazy-graph, capture or recipe locks: the
 *    host may hold them while it waits for that task.
 *
 *   rank  lock                                      file
 *   1     runtime init (reads the settings below)   runtime/device.c
 *   2     lazy-mode settings                         graph/lazy.c
 *   3     recipe disk cache settings                 graph/recipe_disk.c
 *   10    capture state, per card                   graph/capture.c
 *   20    pending lazy graph, per card              graph/lazy.c
 *   30    recipe cache (memory), recipe cache disk   graph/recipe_cache.c,
 *                                                    graph/recipe_disk.c
 *   40    QUEUE_WAIT (no mutex: waiting for a card queue, or running its task)
 *   45    HCCL: a communicator's ticket lock, zero-copy arena table (hccl/src; plain
 *         pthread mutexes, taken on the host and in queue tasks, above QUEUE_WAIT)
 *   50    queue registry, a card's queue ring        runtime/queue.c
 *   60    the kernel thread pool's running job         runtime/parallel.c
 *   65    the kernel thread pool's state              runtime/parallel.c
 *   70    caching allocator, per card                runtime/allocator.c
 *   80    leaves: generators, events, metrics, graph records' spare list,
 *         recompile reasons                          runtime/, graph/graph.c, graph/lazy.c
 *
 * Two locks of one rank are never held together (per-card locks are taken
 * one card at a time).
 *
 * Builds with HPU_LOCK_CHECK (the C test builds) check the rule on every
 * lock and every wait, and abort with both locks named when it is broken,
 * so the tests catch an inversion before it becomes a deadlock. Release
 * builds compile to plain pthread calls. */
#ifndef HPU_RUNTIME_LOCK_H
#define HPU_RUNTIME_LOCK_H

#include <pthread.h>

enum {
  HPU_RANK_INIT = 1,
  HPU_RANK_LAZY_SETTINGS = 2,
  HPU_RANK_DISK_SETTINGS = 3,
  HPU_RANK_CAPTURE = 10,
  HPU_RANK_LAZY = 20,
  HPU_RANK_RECIPE = 30,
  HPU_RANK_QUEUE_WAIT = 40,
  HPU_RANK_QUEUE = 50,
  HPU_RANK_POOL_JOB = 60,
  HPU_RANK_POOL = 65,
  HPU_RANK_ALLOCATOR = 70,
  HPU_RANK_LEAF = 80,
};

typedef struct hpu_mutex {
  pthread_mutex_t mu;
  int rank;
  const char *name;
} hpu_mutex_t;

#define HPU_MUTEX_INIT(rank_, name_) {.mu = PTHREAD_MUTEX_INITIALIZER, .rank = (rank_), .name = (name_)}

void hpu_mutex_init(hpu_mutex_t *m, int rank, const char *name);

#ifdef HPU_LOCK_CHECK
void hpu_mutex_lock(hpu_mutex_t *m);
void hpu_mutex_unlock(hpu_mutex_t *m);
int hpu_mutex_trylock(hpu_mutex_t *m);
/* pthread_cond_wait on m: the rank stays held across the wait. */
void hpu_cond_wait(pthread_cond_t *cv, hpu_mutex_t *m);
/* Called by everything that waits for a card's queue or runs its task:
 * aborts if the thread holds a lock at or above QUEUE_WAIT. */
void hpu_lock_check_may_wait(const char *what);
/* The current thread runs queue tasks (a queue worker for its lifetime, or
 * a host thread for the duration of one task): enter/leave. */
void hpu_lock_task_enter(void);
void hpu_lock_task_leave(void);
/* The highest rank the calling thread holds (0: none); for tests. */
int hpu_lock_held_rank(void);
#else
static inline void hpu_mutex_lock(hpu_mutex_t *m) { pthread_mutex_lock(&m->mu); }
static inline void hpu_mutex_unlock(hpu_mutex_t *m) { pthread_mutex_unlock(&m->mu); }
static inline int hpu_mutex_trylock(hpu_mutex_t *m) { return pthread_mutex_trylock(&m->mu); }
static inline void hpu_cond_wait(pthread_cond_t *cv, hpu_mutex_t *m) { pthread_cond_wait(cv, &m->mu); }
static inline void hpu_lock_check_may_wait(const char *what) { (void)what; }
static inline void hpu_lock_task_enter(void) {}
static inline void hpu_lock_task_leave(void) {}
static inline int hpu_lock_held_rank(void) { return -1; }
#endif

#endif
