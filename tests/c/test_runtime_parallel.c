/* The kernel thread pool: every index exactly once for many n/grain/thread
 * counts, chunks of at least `grain`, inline runs (small n, nested calls),
 * concurrent callers, and a forked child. */
#define _GNU_SOURCE
#include <CUnit/Basic.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "hpu/hpu.h"
#include "runtime/runtime.h" /* hpu_queue_current_device */
#include "runtime/schedule_policy.h" /* HPU_PARALLEL_SPLIT */

typedef struct {
  int *hits;
  int64_t min_chunk;
  int calls;
  int other_threads; /* chunks run on a thread other than the caller */
  pthread_t caller;
  pthread_mutex_t mu;
} cover_t;

static void cover_range(void *ctx, int64_t b, int64_t e) {
  cover_t *c = ctx;
  for (int64_t i = b; i < e; i++) __atomic_fetch_add(&c->hits[i], 1, __ATOMIC_RELAXED);
  pthread_mutex_lock(&c->mu);
  c->calls++;
  if (e - b < c->min_chunk) c->min_chunk = e - b;
  if (!pthread_equal(pthread_self(), c->caller)) c->other_threads++;
  pthread_mutex_unlock(&c->mu);
}

static int check_cover(int64_t n, int64_t grain, int threads) {
  cover_t c = {.hits = calloc((size_t)n + 1, sizeof(int)), .min_chunk = INT64_MAX,
               .caller = pthread_self(), .mu = PTHREAD_MUTEX_INITIALIZER};
  hpu_parallel_for(n, grain, cover_range, &c);
  int ok = 1;
  for (int64_t i = 0; i < n; i++) ok &= c.hits[i] == 1;
  if (n > 0) {
    ok &= c.calls >= 1 && c.calls <= threads * HPU_PARALLEL_SPLIT;
    if (c.calls > 1) ok &= c.min_chunk >= grain;
    if (n <= grain) ok &= c.calls == 1 && c.other_threads == 0;
  } else {
    ok &= c.calls == 0;
  }
  if (!ok)
    fprintf(stderr, "cover failed: n=%lld grain=%lld threads=%d calls=%d min_chunk=%lld\n",
            (long long)n, (long long)grain, threads, c.calls, (long long)c.min_chunk);
  free(c.hits);
  return ok;
}

static void test_cover(void) {
  const int threads[] = {1, 2, 3, 4, 8};
  const int64_t ns[] = {0, 1, 2, 7, 100, 1000, 100003};
  const int64_t grains[] = {0, 1, 7, 64, 1000, 1 << 20};
  int ok = 1;
  for (size_t t = 0; t < sizeof threads / sizeof *threads; t++) {
    CU_ASSERT_EQUAL(hpu_set_num_threads(threads[t]), HPU_SUCCESS);
    for (size_t i = 0; i < sizeof ns / sizeof *ns; i++)
      for (size_t g = 0; g < sizeof grains / sizeof *grains; g++)
        ok &= check_cover(ns[i], grains[g], threads[t]);
  }
  CU_ASSERT(ok);
}

/* Chunks are claimed dynamically, so the caller alone may take all of
 * quick ones before a pool thread wakes up: give each chunk some time. */
static void slow_cover_range(void *ctx, int64_t b, int64_t e) {
  cover_range(ctx, b, e);
  usleep(200);
}

static void test_uses_pool(void) {
  CU_ASSERT_EQUAL(hpu_set_num_threads(4), HPU_SUCCESS);
  int other = 0;
  for (int rep = 0; rep < 50 && !other; rep++) {
    cover_t c = {.hits = calloc(4000, sizeof(int)), .min_chunk = INT64_MAX,
                 .caller = pthread_self(), .mu = PTHREAD_MUTEX_INITIALIZER};
    hpu_parallel_for(4000, 100, slow_cover_range, &c);
    CU_ASSERT(c.calls <= 4 * HPU_PARALLEL_SPLIT);
    other = c.other_threads;
    free(c.hits);
  }
  CU_ASSERT(other > 0); /* some chunk ran on a pool thread */
}

typedef struct {
  int inner_calls;
  int inner_inline;
  pthread_mutex_t mu;
} nest_t;

typedef struct {
  nest_t *n;
  pthread_t outer_thread;
} inner_ctx_t;

static void inner_range(void *ctx, int64_t b, int64_t e) {
  inner_ctx_t *ic = ctx;
  pthread_mutex_lock(&ic->n->mu);
  ic->n->inner_calls++;
  if (pthread_equal(pthread_self(), ic->outer_thread) && b == 0 && e == 1000) ic->n->inner_inline++;
  pthread_mutex_unlock(&ic->n->mu);
}

static void outer_range(void *ctx, int64_t b, int64_t e) {
  for (int64_t i = b; i < e; i++) {
    inner_ctx_t ic = {ctx, pthread_self()};
    hpu_parallel_for(1000, 1, inner_range, &ic);
  }
}

static void test_nested(void) {
  CU_ASSERT_EQUAL(hpu_set_num_threads(4), HPU_SUCCESS);
  nest_t n = {0, 0, PTHREAD_MUTEX_INITIALIZER};
  hpu_parallel_for(8, 1, outer_range, &n);
  CU_ASSERT_EQUAL(n.inner_calls, 8);
  CU_ASSERT_EQUAL(n.inner_inline, 8);
}

static void *concurrent_main(void *arg) {
  int *ok = arg;
  for (int rep = 0; rep < 200; rep++) *ok &= check_cover(5000, 16, 4);
  return NULL;
}

static void test_concurrent_callers(void) {
  CU_ASSERT_EQUAL(hpu_set_num_threads(4), HPU_SUCCESS);
  int ok[3] = {1, 1, 1};
  pthread_t t[3];
  for (int i = 0; i < 3; i++) pthread_create(&t[i], NULL, concurrent_main, &ok[i]);
  for (int i = 0; i < 3; i++) pthread_join(t[i], NULL);
  CU_ASSERT(ok[0] && ok[1] && ok[2]);
}

static void test_fork_child(void) {
  CU_ASSERT_EQUAL(hpu_set_num_threads(3), HPU_SUCCESS);
  CU_ASSERT(check_cover(3000, 10, 3)); /* the pool threads exist now */
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) {
    alarm(20);
    int ok = 1;
    for (int rep = 0; rep < 20; rep++) ok &= check_cover(3000, 10, 3);
    _exit(ok ? 0 : 1);
  }
  int status = -1;
  CU_ASSERT_EQUAL(waitpid(pid, &status, 0), pid);
  CU_ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  CU_ASSERT(check_cover(3000, 10, 3));
}

static atomic_int pending_seen, release_first;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void *watch_pending(void *arg) {
  (void)arg;
  double t0 = now_s();
  while (!atomic_load(&pending_seen) && now_s() - t0 < 5.0)
    if (hpu_parallel_pending()) atomic_store(&pending_seen, 1);
  atomic_store(&release_first, 1);
  return NULL;
}

static void held_range(void *ctx, int64_t b, int64_t e) {
  cover_range(ctx, b, e);
  /* Every thread holds its first chunk until the watcher looked: the job's
   * other chunks stay unclaimed meanwhile. */
  while (!atomic_load(&release_first)) usleep(100);
}

/* hpu_parallel_pending: set while a job has unclaimed chunks, clear after.
 * 8 threads: the job has 32 chunks, and at most 8 threads (the pool never
 * shrinks; earlier tests grew it to 7) hold one each. */
static void test_pending(void) {
  CU_ASSERT_EQUAL(hpu_set_num_threads(8), HPU_SUCCESS);
  CU_ASSERT_EQUAL(hpu_parallel_pending(), 0);
  atomic_store(&pending_seen, 0);
  atomic_store(&release_first, 0);
  pthread_t w;
  CU_ASSERT_EQUAL_FATAL(pthread_create(&w, NULL, watch_pending, NULL), 0);
  cover_t c = {.hits = calloc(8000, sizeof(int)), .min_chunk = INT64_MAX,
               .caller = pthread_self(), .mu = PTHREAD_MUTEX_INITIALIZER};
  hpu_parallel_for(8000, 100, held_range, &c);
  pthread_join(w, NULL);
  int ok = 1;
  for (int i = 0; i < 8000; i++) ok &= c.hits[i] == 1;
  CU_ASSERT(ok);
  CU_ASSERT(atomic_load(&pending_seen));
  CU_ASSERT_EQUAL(hpu_parallel_pending(), 0);
  free(c.hits);
}

typedef struct {
  atomic_int on_queue_worker;
  atomic_int chunks;
} helped_t;

static void named_range(void *ctx, int64_t b, int64_t e) {
  (void)b;
  (void)e;
  helped_t *h = ctx;
  char name[32] = "";
  pthread_getname_np(pthread_self(), name, sizeof name);
  if (strcmp(name, "hpu0-queue") == 0) atomic_fetch_add(&h->on_queue_worker, 1);
  atomic_fetch_add(&h->chunks, 1);
  usleep(300);
}

static hpu_status_t empty_task(void *arg) {
  (void)arg;
  return HPU_SUCCESS;
}

static atomic_int poking;

/* Keeps card 0's worker busy with empty tasks, so it is awake between them. */
static void *poke_queue(void *arg) {
  hpu_stream_t *s = arg;
  while (atomic_load(&poking)) {
    hpu_stream_enqueue(*s, empty_task, NULL, NULL);
    usleep(50);
  }
  return NULL;
}

/* A queue worker that is awake and idle takes chunks of the running job
 * (as when a synchronize runs a kernel on the host thread). */
static void test_idle_queue_worker_helps(void) {
  CU_ASSERT_EQUAL(hpu_set_num_threads(2), HPU_SUCCESS);
  hpu_stream_t s;
  CU_ASSERT_EQUAL_FATAL(hpu_stream_default(0, &s), HPU_SUCCESS);
  atomic_store(&poking, 1);
  pthread_t t;
  CU_ASSERT_EQUAL_FATAL(pthread_create(&t, NULL, poke_queue, &s), 0);
  int helped = 0, all = 1;
  for (int rep = 0; rep < 200 && !helped; rep++) {
    helped_t h = {0, 0};
    hpu_parallel_for(8 * 100, 100, named_range, &h);
    all &= atomic_load(&h.chunks) == 8;
    helped = atomic_load(&h.on_queue_worker) > 0;
  }
  atomic_store(&poking, 0);
  pthread_join(t, NULL);
  CU_ASSERT_EQUAL(hpu_stream_synchronize(s), HPU_SUCCESS);
  CU_ASSERT(all);
  CU_ASSERT(helped);
}

static atomic_int flag_runs;
static hpu_status_t flag_task(void *arg) {
  (void)arg;
  atomic_fetch_add(&flag_runs, 1);
  return HPU_SUCCESS;
}

static void spin_range(void *ctx, int64_t b, int64_t e) {
  (void)ctx;
  (void)b;
  (void)e;
  usleep(50);
}

/* A push that finds the queue worker asleep while a pool worker is awake
 * leaves the wake to the pool worker (no third busy thread on a 2-core
 * box). With nobody synchronizing, the task must still run: the pool
 * worker runs it, or wakes the queue worker. */
static void test_deferred_wake_still_runs(void) {
  CU_ASSERT_EQUAL(hpu_set_num_threads(2), HPU_SUCCESS);
  hpu_stream_t s;
  CU_ASSERT_EQUAL_FATAL(hpu_stream_default(0, &s), HPU_SUCCESS);
  int64_t deferred0 = hpu_metric_get("queue_wake_deferred");
  int64_t woken0 = hpu_metric_get("queue_wake_by_pool") + hpu_metric_get("queue_wake_run_by_pool");
  int pushed = 0, late = 0;
  for (int rep = 0; rep < 50 && hpu_metric_get("queue_wake_deferred") == deferred0; rep++) {
    CU_ASSERT_EQUAL(hpu_stream_synchronize(s), HPU_SUCCESS);
    usleep(5000);                                 /* the queue worker goes to sleep */
    hpu_parallel_for(8, 2, spin_range, NULL);     /* a pool worker is awake after this */
    int before = atomic_load(&flag_runs);
    CU_ASSERT_EQUAL(hpu_stream_enqueue(s, flag_task, NULL, NULL), HPU_SUCCESS);
    pushed++;
    /* no synchronize: the task must run on its own */
    double t0 = now_s();
    while (atomic_load(&flag_runs) == before && now_s() - t0 < 2.0) usleep(100);
    if (atomic_load(&flag_runs) == before) late++;
  }
  CU_ASSERT_EQUAL(late, 0);
  CU_ASSERT(hpu_metric_get("queue_wake_deferred") > deferred0);
  CU_ASSERT(hpu_metric_get("queue_wake_by_pool") + hpu_metric_get("queue_wake_run_by_pool") > woken0);
  CU_ASSERT_EQUAL(hpu_stream_synchronize(s), HPU_SUCCESS);
  CU_ASSERT_EQUAL(atomic_load(&flag_runs), pushed);
}

/* Chunks slow enough that a synchronize started after the push joins them. */
static void slow_cover(void *ctx, int64_t b, int64_t e) {
  usleep(200);
  cover_range(ctx, b, e);
}

typedef struct {
  cover_t cover;
  int device_seen;
  pthread_t thread;
} pool_task_t;

static hpu_status_t parallel_task(void *arg) {
  pool_task_t *t = arg;
  t->device_seen = hpu_queue_current_device();
  t->thread = pthread_self();
  t->cover.caller = pthread_self();
  hpu_parallel_for(64, 4, slow_cover, &t->cover);
  return HPU_SUCCESS;
}

/* The awake pool worker runs a deferred task itself, as the card's (a
 * synchronize from inside would be refused), and the task's kernel is
 * still split: the host's synchronize takes chunks of it. */
static void test_pool_runs_deferred_task(void) {
  CU_ASSERT_EQUAL(hpu_set_num_threads(2), HPU_SUCCESS);
  hpu_stream_t s;
  CU_ASSERT_EQUAL_FATAL(hpu_stream_default(0, &s), HPU_SUCCESS);
  int64_t ran0 = hpu_metric_get("queue_wake_run_by_pool");
  int covered = 1, as_card = 1, joined = 0;
  for (int rep = 0; rep < 50 && !(hpu_metric_get("queue_wake_run_by_pool") > ran0 && joined); rep++) {
    CU_ASSERT_EQUAL(hpu_stream_synchronize(s), HPU_SUCCESS);
    usleep(5000);                             /* the queue worker goes to sleep */
    hpu_parallel_for(8, 2, spin_range, NULL); /* a pool worker is awake after this */
    pool_task_t t = {.cover = {.hits = calloc(65, sizeof(int)), .min_chunk = INT64_MAX,
                               .mu = PTHREAD_MUTEX_INITIALIZER},
                     .device_seen = -2};
    int64_t before = hpu_metric_get("queue_wake_run_by_pool");
    CU_ASSERT_EQUAL(hpu_stream_enqueue(s, parallel_task, &t, NULL), HPU_SUCCESS);
    usleep(100); /* the pool worker has taken it */
    CU_ASSERT_EQUAL(hpu_stream_synchronize(s), HPU_SUCCESS);
    for (int i = 0; i < 64; i++) covered &= t.cover.hits[i] == 1;
    if (hpu_metric_get("queue_wake_run_by_pool") > before) {
      as_card &= t.device_seen == 0 && !pthread_equal(t.thread, pthread_self());
      joined |= t.cover.other_threads > 0;
    }
    free(t.cover.hits);
  }
  CU_ASSERT(hpu_metric_get("queue_wake_run_by_pool") > ran0);
  CU_ASSERT(covered);
  CU_ASSERT(as_card);
  CU_ASSERT(joined);
}

static void nop_range(void *ctx, int64_t b, int64_t e) {
  (void)ctx;
  (void)b;
  (void)e;
}

static void test_overhead(void) {
  CU_ASSERT_EQUAL(hpu_set_num_threads(2), HPU_SUCCESS);
  const int n = 20000;
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (int i = 0; i < n; i++) hpu_parallel_for(1000, 100, nop_range, NULL);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  double us = ((double)(t1.tv_sec - t0.tv_sec) * 1e9 + (double)(t1.tv_nsec - t0.tv_nsec)) / n / 1e3;
  printf("\n    parallel_for with 2 threads, empty chunks: %.2f us per call\n", us);
}

int main(void) {
  setenv("HPU_CARD_MEMORY", "64M", 1);
  if (CU_initialize_registry() != CUE_SUCCESS) return 2;
  CU_pSuite s = CU_add_suite("runtime_parallel", NULL, NULL);
  CU_add_test(s, "every index exactly once", test_cover);
  CU_add_test(s, "chunks run on pool threads", test_uses_pool);
  CU_add_test(s, "nested calls run inline", test_nested);
  CU_add_test(s, "concurrent callers", test_concurrent_callers);
#ifndef __SANITIZE_THREAD__ /* ThreadSanitizer cannot follow a fork of a process with threads */
  CU_add_test(s, "forked child", test_fork_child);
#else
  (void)test_fork_child;
#endif
  CU_add_test(s, "pending chunks", test_pending);
  CU_add_test(s, "an idle queue worker helps", test_idle_queue_worker_helps);
  CU_add_test(s, "a deferred wake still runs the task", test_deferred_wake_still_runs);
  CU_add_test(s, "the pool runs a deferred task, split", test_pool_runs_deferred_task);
  CU_add_test(s, "call overhead", test_overhead);
  CU_basic_set_mode(CU_BRM_VERBOSE);
  CU_basic_run_tests();
  unsigned failures = CU_get_number_of_failures();
  CU_cleanup_registry();
  return failures ? 1 : 0;
}
