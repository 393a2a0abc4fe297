/* The lock hierarchy (csrc/runtime/lock.h) under load: releasing cached
 * memory while lazy work is pending or the card is nearly full returns
 * (it used to wait for a flush while holding the allocator's lock), the
 * checker aborts on an inverted pair, and several host threads driving the
 * allocator, lazy recording, flushes, empty_cache and synchronize at once
 * get the right values. Each case runs under a watchdog: a deadlock fails
 * the test instead of hanging it. */
#define _GNU_SOURCE
#include <CUnit/Basic.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "hpu/hpu.h"
#include "runtime/lock.h"
#include "test_nodes.h"

#define MiB ((size_t)1 << 20)

static hpu_stream_t stream0 = {0, 0};

static hpu_tensor_t vec(void *p, int64_t n) { return T1(p, HPU_FLOAT32, n); }

/* A float node of op writing out; the caller adds its inputs. */
static hpu_node_t node_of_out(hpu_op_t op, hpu_tensor_t out) {
  hpu_node_t n = node_of(op, HPU_FLOAT32);
  n.outputs[0] = out;
  return n;
}

static hpu_status_t fill(float *p, int64_t n, double v) {
  hpu_node_t f = node_of_out(HPU_OP_FILL, vec(p, n));
  f.params.fill.value = hpu_scalar_float(v);
  return hpu_submit(stream0, &f);
}

/* out = a op a (op ADD or MUL): a fusible elementwise node. */
static hpu_status_t self_op(hpu_op_t op, float *out, float *a, int64_t n) {
  hpu_node_t b = node_of_out(op, vec(out, n));
  b.num_inputs = 2;
  b.inputs[0] = vec(a, n);
  b.inputs[1] = vec(a, n);
  return hpu_submit(stream0, &b);
}

static int all_equal(const float *p, int64_t n, float v) {
  for (int64_t i = 0; i < n; i++)
    if (p[i] != v) return 0;
  return 1;
}

/* Runs fn in a thread; a case still running after `seconds` is a deadlock:
 * report it and leave (the process cannot be trusted past that). */
typedef struct {
  void (*fn)(void);
} watched_t;

static void *watched_main(void *arg) {
  watched_t *w = arg;
  w->fn();
  return NULL;
}

static void watched(void (*fn)(void), int seconds, const char *what) {
  watched_t w = {fn};
  pthread_t th;
  CU_ASSERT_EQUAL_FATAL(pthread_create(&th, NULL, watched_main, &w), 0);
  struct timespec until;
  clock_gettime(CLOCK_REALTIME, &until);
  until.tv_sec += seconds;
  if (pthread_timedjoin_np(th, NULL, &until) != 0) {
    fprintf(stderr, "\nDEADLOCK: %s did not finish in %d s\n", what, seconds);
    _exit(3);
  }
}

static void fresh(void) {
  CU_ASSERT_EQUAL(hpu_device_synchronize(0), HPU_SUCCESS);
  CU_ASSERT_EQUAL(hpu_memory_empty_cache(0), HPU_SUCCESS);
}

/* y = x * x + x recorded, not flushed; empty_cache must flush and return. */
static void empty_cache_with_pending_graph_body(void) {
  hpu_lazy_set_enabled(1);
  const int64_t n = 1024;
  float *x, *t, *y;
  CU_ASSERT_EQUAL_FATAL(hpu_malloc(0, n * 4, (void **)&x), HPU_SUCCESS);
  CU_ASSERT_EQUAL_FATAL(hpu_malloc(0, n * 4, (void **)&t), HPU_SUCCESS);
  CU_ASSERT_EQUAL_FATAL(hpu_malloc(0, n * 4, (void **)&y), HPU_SUCCESS);
  CU_ASSERT_EQUAL(fill(x, n, 3), HPU_SUCCESS);
  CU_ASSERT_EQUAL(self_op(HPU_OP_MUL, t, x, n), HPU_SUCCESS);
  /* a freed, cached block whose segment empty_cache gives back */
  void *spare;
  CU_ASSERT_EQUAL_FATAL(hpu_malloc(0, 4 * MiB, &spare), HPU_SUCCESS);
  CU_ASSERT_EQUAL(hpu_free(0, spare), HPU_SUCCESS);
  hpu_node_t add = node_of_out(HPU_OP_ADD, vec(y, n));
  add.num_inputs = 2;
  add.inputs[0] = vec(t, n);
  add.inputs[1] = vec(x, n);
  CU_ASSERT_EQUAL(hpu_submit(stream0, &add), HPU_SUCCESS);
  CU_ASSERT(hpu_lazy_pending(0) > 0);
  CU_ASSERT_EQUAL(hpu_memory_empty_cache(0), HPU_SUCCESS);
  CU_ASSERT_EQUAL(hpu_lazy_pending(0), 0);
  CU_ASSERT_EQUAL(hpu_device_synchronize(0), HPU_SUCCESS);
  CU_ASSERT(all_equal(y, n, 12.0f));
  hpu_free(0, x);
  hpu_free(0, t);
  hpu_free(0, y);
  hpu_lazy_set_enabled(0);
}

static void test_empty_cache_with_pending_graph(void) {
  fresh();
  watched(empty_cache_with_pending_graph_body, 30, "empty_cache with a pending lazy graph");
}

/* On a 64 MiB card: a (16 MiB) live, b (16 MiB) freed and cached, c = a + a
 * recorded; 24 MiB more fit only once b's segment goes back, which needs
 * the pending graph flushed first. */
static void alloc_near_full_body(void) {
  hpu_lazy_set_enabled(1);
  const int64_t n = 4 * (int64_t)MiB; /* floats: 16 MiB */
  float *a, *b, *c;
  void *d;
  CU_ASSERT_EQUAL_FATAL(hpu_malloc(0, n * 4, (void **)&a), HPU_SUCCESS);
  CU_ASSERT_EQUAL_FATAL(hpu_malloc(0, n * 4, (void **)&b), HPU_SUCCESS);
  CU_ASSERT_EQUAL(fill(a, n, 1), HPU_SUCCESS);
  CU_ASSERT_EQUAL(self_op(HPU_OP_ADD, b, a, n), HPU_SUCCESS);
  CU_ASSERT_EQUAL(hpu_device_synchronize(0), HPU_SUCCESS);
  CU_ASSERT_EQUAL(hpu_free(0, b), HPU_SUCCESS);
  CU_ASSERT_EQUAL_FATAL(hpu_malloc(0, n * 4, (void **)&c), HPU_SUCCESS); /* b's block again */
  CU_ASSERT_EQUAL(self_op(HPU_OP_ADD, c, a, n), HPU_SUCCESS);
  CU_ASSERT_EQUAL(self_op(HPU_OP_MUL, c, c, n), HPU_SUCCESS);
  void *b2;
  CU_ASSERT_EQUAL_FATAL(hpu_malloc(0, n * 4, &b2), HPU_SUCCESS);
  CU_ASSERT_EQUAL(hpu_free(0, b2), HPU_SUCCESS); /* a cached 16 MiB segment */
  CU_ASSERT(hpu_lazy_pending(0) > 0);
  hpu_memory_stats_t before;
  CU_ASSERT_EQUAL(hpu_memory_get_stats(0, &before), HPU_SUCCESS);
  CU_ASSERT_EQUAL(hpu_malloc(0, 24 * MiB, &d), HPU_SUCCESS);
  hpu_memory_stats_t after;
  CU_ASSERT_EQUAL(hpu_memory_get_stats(0, &after), HPU_SUCCESS);
  CU_ASSERT_EQUAL(after.num_alloc_retries, before.num_alloc_retries + 1);
  CU_ASSERT_EQUAL(hpu_device_synchronize(0), HPU_SUCCESS);
  CU_ASSERT(all_equal(c, n, 4.0f));
  hpu_free(0, a);
  hpu_free(0, c);
  hpu_free(0, d);
  hpu_lazy_set_enabled(0);
}

static void test_alloc_near_full_with_pending_graph(void) {
  fresh();
  watched(alloc_near_full_body, 30, "an allocation that releases the cache while a graph is pending");
}

/* Several host threads at once: each records fill, (x + x) * (x + x) on its
 * own buffers, then flushes, empties the cache or allocates more at random,
 * synchronizes and checks its values; one more thread reads statistics and
 * empties the cache. The card is small, so allocations also go through the
 * release. (A synchronize used to return while another thread was still
 * compiling the graph holding this thread's nodes.) */
enum { WORKERS = 3, ROUNDS = 150 };

typedef struct {
  unsigned seed;
  int bad, ooms;
} worker_t;

static atomic_int stop_janitor;

/* Three buffers of n floats. Out of memory is an answer, not a failure:
 * the other threads may hold most of the 64 MiB card in 20 MiB segments. */
static int alloc3(worker_t *w, int64_t n, float **x, float **s, float **p) {
  float **want[3] = {x, s, p};
  for (int k = 0; k < 3; k++) {
    hpu_status_t st = hpu_malloc(0, (size_t)n * 4, (void **)want[k]);
    if (st == HPU_SUCCESS) continue;
    if (st == HPU_ERROR_OUT_OF_MEMORY) w->ooms++;
    else w->bad++;
    for (int j = 0; j < k; j++) hpu_free(0, *want[j]);
    return 0;
  }
  return 1;
}

static void *worker_main(void *arg) {
  worker_t *w = arg;
  for (int r = 0; r < ROUNDS; r++) {
    int64_t n = 256 + rand_r(&w->seed) % (1 << 19);
    float *x = NULL, *s = NULL, *p = NULL;
    if (!alloc3(w, n, &x, &s, &p)) continue;
    float v = (float)(r % 7);
    if (fill(x, n, v) != HPU_SUCCESS || self_op(HPU_OP_ADD, s, x, n) != HPU_SUCCESS ||
        self_op(HPU_OP_MUL, p, s, n) != HPU_SUCCESS)
      w->bad++;
    switch (rand_r(&w->seed) % 4) {
      case 0: hpu_lazy_flush(0); break;
      case 1: hpu_memory_empty_cache(0); break;
      case 2: {
        void *tmp;
        if (hpu_malloc(0, (size_t)(1 + rand_r(&w->seed) % (8 << 20)), &tmp) == HPU_SUCCESS) hpu_free(0, tmp);
        break;
      }
      default: break;
    }
    if (hpu_device_synchronize(0) != HPU_SUCCESS) {
      fprintf(stderr, "synchronize: %s\n", hpu_last_error());
      w->bad++;
    } else if (!all_equal(p, n, 4 * v * v)) {
      fprintf(stderr, "round %d: wrong values: p[0] %g, want %g\n", r, p[0], 4 * v * v);
      w->bad++;
    }
    hpu_free(0, x);
    hpu_free(0, s);
    hpu_free(0, p);
  }
  return NULL;
}

static void *janitor_main(void *arg) {
  (void)arg;
  while (!atomic_load(&stop_janitor)) {
    hpu_memory_stats_t st;
    hpu_memory_get_stats(0, &st);
    hpu_memory_empty_cache(0);
    size_t f, t;
    hpu_mem_get_info(0, &f, &t);
    usleep(200);
  }
  return NULL;
}

static void threads_body(void) {
  hpu_lazy_set_enabled(1);
  worker_t w[WORKERS];
  pthread_t th[WORKERS], jan;
  atomic_store(&stop_janitor, 0);
  pthread_create(&jan, NULL, janitor_main, NULL);
  for (int i = 0; i < WORKERS; i++) {
    w[i] = (worker_t){(unsigned)(17 + i), 0, 0};
    pthread_create(&th[i], NULL, worker_main, &w[i]);
  }
  int bad = 0, ooms = 0;
  for (int i = 0; i < WORKERS; i++) {
    pthread_join(th[i], NULL);
    bad += w[i].bad;
    ooms += w[i].ooms;
  }
  CU_ASSERT(ooms < WORKERS * ROUNDS / 10); /* the rounds did run */
  atomic_store(&stop_janitor, 1);
  pthread_join(jan, NULL);
  CU_ASSERT_EQUAL(bad, 0);
  CU_ASSERT_EQUAL(hpu_device_synchronize(0), HPU_SUCCESS);
  hpu_memory_stats_t st;
  CU_ASSERT_EQUAL(hpu_memory_get_stats(0, &st), HPU_SUCCESS);
  CU_ASSERT_EQUAL(st.allocated_bytes, 0);
  hpu_lazy_set_enabled(0);
}

static void test_threads(void) {
  fresh();
  watched(threads_body, 240, "several host threads on one card");
}

/* The host streams more tasks than HPU_QUEUE_DEPTH (8 here) without
 * waiting: pushes block at the bound and every task still runs, in order. */
static hpu_status_t slow_append(void *arg) {
  int *log = arg;
  usleep(200);
  int k = ++log[0];
  log[k] = k;
  return HPU_SUCCESS;
}

static void queue_bound_body(void) {
  static int log[101];
  log[0] = 0;
  int64_t waits0 = hpu_metric_get("queue_full_wait");
  for (int i = 0; i < 100; i++) CU_ASSERT_EQUAL(hpu_stream_enqueue(stream0, slow_append, log, NULL), HPU_SUCCESS);
  CU_ASSERT(hpu_metric_get("queue_full_wait") > waits0);
  CU_ASSERT_EQUAL(hpu_device_synchronize(0), HPU_SUCCESS);
  CU_ASSERT_EQUAL(log[0], 100);
  int in_order = 1;
  for (int i = 1; i <= 100; i++) in_order &= log[i] == i;
  CU_ASSERT(in_order);
}

static void test_queue_bound(void) { watched(queue_bound_body, 60, "pushes to a full queue"); }

#ifdef HPU_LOCK_CHECK
/* Taking a lower rank under a higher one, or waiting for a queue under the
 * allocator's rank, aborts in a checking build, naming both. */
static int aborts(void (*fn)(void)) {
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) {
    fclose(stderr); /* the expected report */
    fn();
    _exit(0);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT;
}

static hpu_mutex_t hi = HPU_MUTEX_INIT(HPU_RANK_ALLOCATOR, "test allocator-rank");
static hpu_mutex_t lo = HPU_MUTEX_INIT(HPU_RANK_LAZY, "test lazy-rank");

static void inverted(void) {
  hpu_mutex_lock(&hi);
  hpu_mutex_lock(&lo);
}
static void ordered(void) {
  hpu_mutex_lock(&lo);
  hpu_mutex_lock(&hi);
  hpu_mutex_unlock(&lo);
  hpu_mutex_unlock(&hi);
  hpu_mutex_lock(&lo); /* released in any order, then taken again */
  hpu_mutex_unlock(&lo);
}
/* (A forked child may not use the card, so the waits are the checks that
 * hpu_queue_sync, hpu_queue_drain, full pushes and lazy flushes make.) */
static void wait_under_allocator(void) {
  hpu_mutex_lock(&hi);
  hpu_lock_check_may_wait("a test wait");
}
static void wait_under_lazy(void) {
  hpu_mutex_lock(&lo);
  hpu_lock_check_may_wait("a test wait");
  hpu_mutex_unlock(&lo);
}

static void test_lock_checker(void) {
  CU_ASSERT(aborts(inverted));
  CU_ASSERT(!aborts(ordered));
  CU_ASSERT(aborts(wait_under_allocator));
  CU_ASSERT(!aborts(wait_under_lazy));
  CU_ASSERT_EQUAL(hpu_lock_held_rank(), 0);
}
#endif

int main(void) {
  setenv("HPU_CARD_MEMORY", "64M", 1);
  setenv("HPU_QUEUE_DEPTH", "8", 1);
  unsetenv("HABANA_VISIBLE_DEVICES");
  unsetenv("HPU_NUM_CARDS");
  if (hpu_init() != HPU_SUCCESS) {
    fprintf(stderr, "hpu_init: %s\n", hpu_last_error());
    return 1;
  }
  if (CU_initialize_registry() != CUE_SUCCESS) return 1;
  CU_pSuite s = CU_add_suite("locking", NULL, NULL);
  CU_add_test(s, "empty_cache with a pending lazy graph", test_empty_cache_with_pending_graph);
  CU_add_test(s, "allocation near full with a pending lazy graph", test_alloc_near_full_with_pending_graph);
  CU_add_test(s, "host threads: allocator, lazy flush, empty_cache, synchronize", test_threads);
  CU_add_test(s, "pushes block at HPU_QUEUE_DEPTH", test_queue_bound);
#ifdef HPU_LOCK_CHECK
  CU_add_test(s, "the lock checker", test_lock_checker);
#endif
  CU_basic_set_mode(CU_BRM_VERBOSE);
  CU_basic_run_tests();
  unsigned failures = CU_get_number_of_failures();
  CU_cleanup_registry();
  return failures ? 1 : 0;
}
