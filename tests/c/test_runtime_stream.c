/* Streams and events: in-order execution, release callbacks, sticky errors,
 * query, events with timing, cross-card waits, and the host overhead of an
 * enqueue (printed, not asserted: the box is shared). */
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

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---- tasks ---- */

#define LOG_MAX 20000
static int log_buf[LOG_MAX];
static atomic_int log_len; /* written by the task running on card 0 (one at a time) */

static pthread_t main_thread;
static atomic_int ran_on_main; /* tasks that ran on the main thread (taken over by a synchronize) */

/* Tasks run one at a time, on the worker or on a synchronizing thread. */
static hpu_status_t append_task(void *arg) {
  int n = atomic_load_explicit(&log_len, memory_order_relaxed);
  if (n < LOG_MAX) {
    log_buf[n] = (int)(intptr_t)arg;
    atomic_store_explicit(&log_len, n + 1, memory_order_release); /* readers see the entry */
  }
  if (pthread_equal(pthread_self(), main_thread)) atomic_fetch_add(&ran_on_main, 1);
  return HPU_SUCCESS;
}

static hpu_status_t sleep_task(void *arg) {
  usleep((useconds_t)(intptr_t)arg);
  return HPU_SUCCESS;
}

static hpu_status_t fail_task(void *arg) {
  if (pthread_equal(pthread_self(), main_thread)) atomic_fetch_add(&ran_on_main, 1);
  return hpu_error(HPU_ERROR_INVALID_ARGUMENT, "boom %d", (int)(intptr_t)arg);
}

static hpu_status_t empty_task(void *arg) {
  (void)arg;
  return HPU_SUCCESS;
}

static atomic_int released;
static void count_release(void *arg) {
  (void)arg;
  atomic_fetch_add(&released, 1);
}

/* ---- tests ---- */

static int exit_pipe[2];

static hpu_status_t slow_write_task(void *arg) {
  usleep(30000);
  char c = (char)(intptr_t)arg;
  return write(exit_pipe[1], &c, 1) == 1 ? HPU_SUCCESS : HPU_ERROR_SYSTEM;
}

/* Runs first, before this process initialises the runtime: a child that
 * returns from main with work queued must run that work, then exit cleanly. */
static void test_drain_at_exit(void) {
  CU_ASSERT_FATAL(!hpu_is_initialized());
  CU_ASSERT_EQUAL_FATAL(pipe(exit_pipe), 0);
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) {
    alarm(20);
    hpu_stream_t s = {0, 0};
    if (hpu_stream_enqueue(s, slow_write_task, (void *)(intptr_t)'a', NULL) != HPU_SUCCESS) _exit(3);
    if (hpu_stream_enqueue(s, slow_write_task, (void *)(intptr_t)'b', NULL) != HPU_SUCCESS) _exit(3);
    exit(0); /* atexit: the worker drains the queue and is joined */
  }
  close(exit_pipe[1]);
  int status = -1;
  CU_ASSERT_EQUAL(waitpid(pid, &status, 0), pid);
  CU_ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  char buf[4] = {0};
  CU_ASSERT_EQUAL(read(exit_pipe[0], buf, sizeof buf), 2);
  CU_ASSERT_STRING_EQUAL(buf, "ab");
  close(exit_pipe[0]);
}

static void test_order(void) {
  hpu_stream_t s, s2;
  CU_ASSERT_EQUAL_FATAL(hpu_stream_default(0, &s), HPU_SUCCESS);
  CU_ASSERT_EQUAL(s.id, 0);
  CU_ASSERT_EQUAL_FATAL(hpu_stream_create(0, &s2), HPU_SUCCESS);
  CU_ASSERT(s2.id > 0);
  log_len = 0;
  atomic_store(&released, 0);
  CU_ASSERT_EQUAL(hpu_stream_enqueue(s, sleep_task, (void *)(intptr_t)2000, NULL), HPU_SUCCESS);
  for (int i = 0; i < 1000; i++) /* alternate streams: one queue, submission order */
    CU_ASSERT_EQUAL(hpu_stream_enqueue(i % 2 ? s2 : s, append_task, (void *)(intptr_t)i,
                                       count_release), HPU_SUCCESS);
  CU_ASSERT_EQUAL(hpu_stream_synchronize(s2), HPU_SUCCESS);
  CU_ASSERT_EQUAL(log_len, 1000);
  int ordered = 1;
  for (int i = 0; i < log_len; i++) ordered &= log_buf[i] == i;
  CU_ASSERT(ordered);
  CU_ASSERT_EQUAL(atomic_load(&released), 1000);
}

typedef struct {
  int thread;
  int n;
} producer_t;

static void *producer(void *arg) {
  producer_t *p = arg;
  hpu_stream_t s = {0, 0};
  for (int i = 0; i < p->n; i++)
    hpu_stream_enqueue(s, append_task, (void *)(intptr_t)(p->thread * 100000 + i), NULL);
  return NULL;
}

/* The log holds producers 1 and 2's values (thread * 100000 + seq), each
 * producer's in its push order; next[t] ends as producer t's count. */
static int log_in_producer_order(int next[3]) {
  int ok = 1;
  for (int i = 0; i < log_len; i++) {
    int th = log_buf[i] / 100000, seq = log_buf[i] % 100000;
    if (th < 1 || th > 2 || seq != next[th]) ok = 0;
    else next[th]++;
  }
  return ok;
}

static void test_two_threads(void) {
  log_len = 0;
  producer_t p[2] = {{1, 5000}, {2, 5000}};
  pthread_t t[2];
  for (int i = 0; i < 2; i++) pthread_create(&t[i], NULL, producer, &p[i]);
  for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
  CU_ASSERT_EQUAL(hpu_device_synchronize(0), HPU_SUCCESS);
  CU_ASSERT_EQUAL(log_len, 10000);
  int next[3] = {0, 0, 0};
  CU_ASSERT(log_in_producer_order(next));
  CU_ASSERT_EQUAL(next[1], 5000);
  CU_ASSERT_EQUAL(next[2], 5000);
}

static void test_query(void) {
  hpu_stream_t s = {0, 0};
  CU_ASSERT_EQUAL(hpu_stream_query(s), HPU_SUCCESS);
  CU_ASSERT_EQUAL(hpu_stream_enqueue(s, sleep_task, (void *)(intptr_t)50000, NULL), HPU_SUCCESS);
  CU_ASSERT_EQUAL(hpu_stream_query(s), HPU_ERROR_NOT_READY);
  CU_ASSERT_EQUAL(hpu_stream_synchronize(s), HPU_SUCCESS);
  CU_ASSERT_EQUAL(hpu_stream_query(s), HPU_SUCCESS);
  /* A card whose queue was never used is idle. */
  hpu_stream_t s5 = {5, 0};
  CU_ASSERT_EQUAL(hpu_stream_query(s5), HPU_SUCCESS);
  CU_ASSERT_EQUAL(hpu_stream_synchronize(s5), HPU_SUCCESS);
}

static void test_sticky_error(void) {
  hpu_stream_t s = {0, 0};
  log_len = 0;
  hpu_error(HPU_SUCCESS, "%s", "");
  CU_ASSERT_EQUAL(hpu_stream_enqueue(s, fail_task, (void *)(intptr_t)42, NULL), HPU_SUCCESS);
  CU_ASSERT_EQUAL(hpu_stream_enqueue(s, fail_task, (void *)(intptr_t)43, NULL), HPU_SUCCESS);
  CU_ASSERT_EQUAL(hpu_stream_enqueue(s, append_task, (void *)(intptr_t)7, NULL), HPU_SUCCESS);
  CU_ASSERT_EQUAL(hpu_stream_synchronize(s), HPU_ERROR_INVALID_ARGUMENT);
  CU_ASSERT_STRING_EQUAL(hpu_last_error(), "boom 42"); /* first error wins */
  CU_ASSERT_EQUAL(log_len, 1); /* later work still ran */
  CU_ASSERT_EQUAL(hpu_stream_synchronize(s), HPU_SUCCESS); /* cleared */

  /* query and device_synchronize report it too, once. */
  CU_ASSERT_EQUAL(hpu_stream_enqueue(s, fail_task, (void *)(intptr_t)5, NULL), HPU_SUCCESS);
  CU_ASSERT_EQUAL(hpu_device_synchronize(0), HPU_ERROR_INVALID_ARGUMENT);
  CU_ASSERT_STRING_EQUAL(hpu_last_error(), "boom 5");
  CU_ASSERT_EQUAL(hpu_device_synchronize(0), HPU_SUCCESS);
  CU_ASSERT_EQUAL(hpu_stream_enqueue(s, fail_task, (void *)(intptr_t)6, NULL), HPU_SUCCESS);
  CU_ASSERT_EQUAL(hpu_stream_synchronize(s), HPU_ERROR_INVALID_ARGUMENT);
  CU_ASSERT_EQUAL(hpu_stream_enqueue(s, fail_task, (void *)(intptr_t)8, NULL), HPU_SUCCESS);
  usleep(20000);
  CU_ASSERT_EQUAL(hpu_stream_query(s), HPU_ERROR_INVALID_ARGUMENT);
  CU_ASSERT_STRING_EQUAL(hpu_last_error(), "boom 8");
  CU_ASSERT_EQUAL(hpu_stream_query(s), HPU_SUCCESS);
}

static hpu_status_t sync_own_card(void *arg) {
  hpu_status_t *out = arg;
  hpu_stream_t s = {0, 0};
  *out = hpu_stream_synchronize(s);
  return HPU_SUCCESS;
}

static void test_bad_handles(void) {
  hpu_stream_t bad_dev = {42, 0}, bad_id = {0, 1 << 30};
  CU_ASSERT_EQUAL(hpu_stream_enqueue(bad_dev, empty_task, NULL, NULL), HPU_ERROR_INVALID_ARGUMENT);
  CU_ASSERT_PTR_NOT_NULL(strstr(hpu_last_error(), "invalid hpu device index 42"));
  CU_ASSERT_EQUAL(hpu_stream_enqueue(bad_id, empty_task, NULL, NULL), HPU_ERROR_INVALID_ARGUMENT);
  CU_ASSERT_PTR_NOT_NULL(strstr(hpu_last_error(), "stream id"));
  hpu_stream_t s = {0, 0};
  CU_ASSERT_EQUAL(hpu_stream_enqueue(s, NULL, NULL, NULL), HPU_ERROR_INVALID_ARGUMENT);
  hpu_stream_t a, b;
  CU_ASSERT_EQUAL(hpu_stream_create(0, &a), HPU_SUCCESS);
  CU_ASSERT_EQUAL(hpu_stream_create(0, &b), HPU_SUCCESS);
  CU_ASSERT(b.id > a.id && a.id > 0);
  /* A task waiting for its own queue gets an error instead of a deadlock. */
  hpu_status_t inner = HPU_SUCCESS;
  CU_ASSERT_EQUAL(hpu_stream_enqueue(s, sync_own_card, &inner, NULL), HPU_SUCCESS);
  CU_ASSERT_EQUAL(hpu_stream_synchronize(s), HPU_SUCCESS);
  CU_ASSERT_EQUAL(inner, HPU_ERROR_INVALID_ARGUMENT);
}

static void test_events(void) {
  hpu_stream_t s = {0, 0};
  hpu_event_t start, end, plain;
  CU_ASSERT_EQUAL_FATAL(hpu_event_create(&start, 1), HPU_SUCCESS);
  CU_ASSERT_EQUAL_FATAL(hpu_event_create(&end, 1), HPU_SUCCESS);
  CU_ASSERT_EQUAL_FATAL(hpu_event_create(&plain, 0), HPU_SUCCESS);
  float ms = -1;
  CU_ASSERT_EQUAL(hpu_event_query(start), HPU_SUCCESS); /* never recorded */
  CU_ASSERT_EQUAL(hpu_event_elapsed_ms(start, end, &ms), HPU_ERROR_INVALID_ARGUMENT);
  CU_ASSERT_PTR_NOT_NULL(strstr(hpu_last_error(), "never recorded"));

  CU_ASSERT_EQUAL(hpu_event_record(start, s), HPU_SUCCESS);
  CU_ASSERT_EQUAL(hpu_stream_enqueue(s, sleep_task, (void *)(intptr_t)30000, NULL), HPU_SUCCESS);
  CU_ASSERT_EQUAL(hpu_event_record(end, s), HPU_SUCCESS);
  CU_ASSERT_EQUAL(hpu_event_record(plain, s), HPU_SUCCESS);
  CU_ASSERT_EQUAL(hpu_event_query(end), HPU_ERROR_NOT_READY);
  CU_ASSERT_EQUAL(hpu_event_elapsed_ms(start, end, &ms), HPU_ERROR_NOT_READY);
  CU_ASSERT_PTR_NOT_NULL(strstr(hpu_last_error(), "not completed"));
  CU_ASSERT_EQUAL(hpu_event_synchronize(end), HPU_SUCCESS);
  CU_ASSERT_EQUAL(hpu_event_query(end), HPU_SUCCESS);
  CU_ASSERT_EQUAL(hpu_event_elapsed_ms(start, end, &ms), HPU_SUCCESS);
  CU_ASSERT(ms >= 29.5f);
  CU_ASSERT(ms < 5000.0f);
  CU_ASSERT_EQUAL(hpu_event_synchronize(plain), HPU_SUCCESS);
  CU_ASSERT_EQUAL(hpu_event_elapsed_ms(start, plain, &ms), HPU_ERROR_INVALID_ARGUMENT);
  CU_ASSERT_PTR_NOT_NULL(strstr(hpu_last_error(), "without timing"));

  /* Re-recording re-arms; destroying with a record still queued is fine. */
  CU_ASSERT_EQUAL(hpu_stream_enqueue(s, sleep_task, (void *)(intptr_t)20000, NULL), HPU_SUCCESS);
  CU_ASSERT_EQUAL(hpu_event_record(end, s), HPU_SUCCESS);
  CU_ASSERT_EQUAL(hpu_event_query(end), HPU_ERROR_NOT_READY);
  CU_ASSERT_EQUAL(hpu_event_destroy(end), HPU_SUCCESS);
  CU_ASSERT_EQUAL(hpu_stream_synchronize(s), HPU_SUCCESS);
  CU_ASSERT_EQUAL(hpu_event_destroy(start), HPU_SUCCESS);
  CU_ASSERT_EQUAL(hpu_event_destroy(plain), HPU_SUCCESS);
}

static atomic_int flag;
static int observed = -1;

static hpu_status_t set_flag(void *arg) {
  (void)arg;
  atomic_store(&flag, 1);
  return HPU_SUCCESS;
}

static hpu_status_t read_flag(void *arg) {
  (void)arg;
  observed = atomic_load(&flag);
  return HPU_SUCCESS;
}

static void test_cross_card_wait(void) {
  hpu_stream_t s0 = {0, 0}, s1 = {1, 0};
  hpu_event_t e;
  CU_ASSERT_EQUAL_FATAL(hpu_event_create(&e, 0), HPU_SUCCESS);
  atomic_store(&flag, 0);
  CU_ASSERT_EQUAL(hpu_stream_enqueue(s1, sleep_task, (void *)(intptr_t)40000, NULL), HPU_SUCCESS);
  CU_ASSERT_EQUAL(hpu_stream_enqueue(s1, set_flag, NULL, NULL), HPU_SUCCESS);
  CU_ASSERT_EQUAL(hpu_event_record(e, s1), HPU_SUCCESS);
  CU_ASSERT_EQUAL(hpu_stream_wait_event(s0, e), HPU_SUCCESS);
  CU_ASSERT_EQUAL(hpu_event_destroy(e), HPU_SUCCESS); /* the queued wait keeps it alive */
  CU_ASSERT_EQUAL(hpu_stream_enqueue(s0, read_flag, NULL, NULL), HPU_SUCCESS);
  CU_ASSERT_EQUAL(hpu_stream_synchronize(s0), HPU_SUCCESS);
  CU_ASSERT_EQUAL(observed, 1);
  CU_ASSERT_EQUAL(hpu_stream_synchronize(s1), HPU_SUCCESS);
}

/* Lets the worker fall asleep, so that a synchronize right after a push
 * finds the task unstarted and runs it itself. */
static void let_worker_sleep(void) { usleep(2000); }

static int wait_idle(hpu_stream_t s, double timeout_s) {
  double t0 = now_s();
  while (hpu_stream_query(s) == HPU_ERROR_NOT_READY)
    if (now_s() - t0 > timeout_s) return 0;
  return 1;
}

/* A synchronize runs unstarted tasks on the calling thread, in order; the
 * worker picks up the work pushed afterwards. */
static void test_takeover_order(void) {
  hpu_stream_t s = {0, 0};
  CU_ASSERT_EQUAL_FATAL(hpu_stream_synchronize(s), HPU_SUCCESS);
  int ordered = 1, all_ran = 1, took = 0;
  for (int rep = 0; rep < 50; rep++) {
    let_worker_sleep();
    log_len = 0;
    atomic_store(&ran_on_main, 0);
    atomic_store(&released, 0);
    for (int i = 0; i < 200; i++)
      CU_ASSERT_EQUAL(hpu_stream_enqueue(s, append_task, (void *)(intptr_t)i, count_release), HPU_SUCCESS);
    CU_ASSERT_EQUAL(hpu_stream_synchronize(s), HPU_SUCCESS);
    all_ran &= log_len == 200 && atomic_load(&released) == 200;
    for (int i = 0; i < log_len; i++) ordered &= log_buf[i] == i;
    took += atomic_load(&ran_on_main) > 0;
    /* Work pushed after a takeover runs without a synchronize (the worker). */
    int before = atomic_load(&ran_on_main);
    for (int i = 200; i < 300; i++)
      CU_ASSERT_EQUAL(hpu_stream_enqueue(s, append_task, (void *)(intptr_t)i, NULL), HPU_SUCCESS);
    CU_ASSERT_FATAL(wait_idle(s, 10.0));
    all_ran &= log_len == 300;
    CU_ASSERT_EQUAL(atomic_load(&ran_on_main), before);
    for (int i = 0; i < log_len; i++) ordered &= log_buf[i] == i;
  }
  CU_ASSERT(ordered);
  CU_ASSERT(all_ran);
#ifndef __SANITIZE_THREAD__ /* a timing matter: under ThreadSanitizer the worker may take every task */
  CU_ASSERT(took > 0); /* the takeover path ran at least once */
#endif
}

/* Errors of tasks run by a synchronize are sticky as ever: first one wins,
 * later tasks still run, the next synchronize is clean. */
static void test_takeover_errors(void) {
  hpu_stream_t s = {0, 0};
  CU_ASSERT_EQUAL_FATAL(hpu_stream_synchronize(s), HPU_SUCCESS);
  int took = 0, ok = 1;
  for (int rep = 0; rep < 50; rep++) {
    let_worker_sleep();
    log_len = 0;
    atomic_store(&ran_on_main, 0);
    hpu_error(HPU_SUCCESS, "%s", "");
    CU_ASSERT_EQUAL(hpu_stream_enqueue(s, fail_task, (void *)(intptr_t)(100 + rep), NULL), HPU_SUCCESS);
    CU_ASSERT_EQUAL(hpu_stream_enqueue(s, fail_task, (void *)(intptr_t)7, NULL), HPU_SUCCESS);
    CU_ASSERT_EQUAL(hpu_stream_enqueue(s, append_task, (void *)(intptr_t)0, NULL), HPU_SUCCESS);
    ok &= hpu_stream_synchronize(s) == HPU_ERROR_INVALID_ARGUMENT;
    char want[32];
    snprintf(want, sizeof want, "boom %d", 100 + rep);
    ok &= strcmp(hpu_last_error(), want) == 0;
    ok &= log_len == 1;
    ok &= hpu_stream_synchronize(s) == HPU_SUCCESS;
    took += atomic_load(&ran_on_main) > 0;
  }
  CU_ASSERT(ok);
#ifndef __SANITIZE_THREAD__ /* a timing matter: under ThreadSanitizer the worker may take every task */
  CU_ASSERT(took > 0);
#endif
  /* An error left by a task the worker ran after a takeover is reported too. */
  let_worker_sleep();
  CU_ASSERT_EQUAL(hpu_stream_enqueue(s, empty_task, NULL, NULL), HPU_SUCCESS);
  CU_ASSERT_EQUAL(hpu_stream_synchronize(s), HPU_SUCCESS);
  atomic_store(&ran_on_main, 0);
  CU_ASSERT_EQUAL(hpu_stream_enqueue(s, fail_task, (void *)(intptr_t)9, NULL), HPU_SUCCESS);
  usleep(20000); /* the worker runs it */
  CU_ASSERT_EQUAL(hpu_stream_synchronize(s), HPU_ERROR_INVALID_ARGUMENT);
  CU_ASSERT_STRING_EQUAL(hpu_last_error(), "boom 9");
  CU_ASSERT_EQUAL(atomic_load(&ran_on_main), 0);
}

static atomic_int producing;

static void *steady_producer(void *arg) {
  producer_t *p = arg;
  hpu_stream_t s = {0, 0};
  for (int i = 0; i < p->n; i++) {
    hpu_stream_enqueue(s, append_task, (void *)(intptr_t)(p->thread * 100000 + i), NULL);
    if (i % 64 == 0) usleep(50);
  }
  atomic_store(&producing, 0);
  return NULL;
}

/* One thread pushes while another pushes and synchronizes: both sequences
 * stay in order, nothing is lost or run twice, each synchronize returns
 * after its own thread's earlier pushes. */
static void test_takeover_concurrent_push(void) {
  hpu_stream_t s = {0, 0};
  CU_ASSERT_EQUAL_FATAL(hpu_stream_synchronize(s), HPU_SUCCESS);
  log_len = 0;
  atomic_store(&producing, 1);
  producer_t p = {1, 8000};
  pthread_t t;
  CU_ASSERT_EQUAL_FATAL(pthread_create(&t, NULL, steady_producer, &p), 0);
  int mine = 0, synced_ok = 1;
  while (atomic_load(&producing) && mine < 9000) {
    for (int k = 0; k < 3; k++, mine++)
      hpu_stream_enqueue(s, append_task, (void *)(intptr_t)(2 * 100000 + mine), NULL);
    CU_ASSERT_EQUAL(hpu_stream_synchronize(s), HPU_SUCCESS);
    /* Everything this thread pushed has run: its last value is logged. */
    int seen = 0;
    for (int i = atomic_load(&log_len) - 1; i >= 0 && !seen; i--) seen = log_buf[i] == 2 * 100000 + mine - 1;
    synced_ok &= seen;
  }
  pthread_join(t, NULL);
  CU_ASSERT_EQUAL(hpu_stream_synchronize(s), HPU_SUCCESS);
  CU_ASSERT(synced_ok);
  CU_ASSERT_EQUAL(log_len, 8000 + mine);
  int next[3] = {0, 0, 0};
  CU_ASSERT(log_in_producer_order(next));
  CU_ASSERT_EQUAL(next[1], 8000);
  CU_ASSERT_EQUAL(next[2], mine);
}

typedef struct {
  hpu_event_t ev;
  hpu_status_t st;
} event_sync_t;

static hpu_status_t sync_event_task(void *arg) {
  event_sync_t *e = arg;
  if (pthread_equal(pthread_self(), main_thread)) atomic_fetch_add(&ran_on_main, 1);
  e->st = hpu_event_synchronize(e->ev);
  return HPU_SUCCESS;
}

/* Events recorded between tasks a synchronize runs: completion, timing,
 * and a task that waits for a later event on its own card still fails
 * (it runs as the card's, whichever thread runs it). */
static void test_takeover_events(void) {
  hpu_stream_t s = {0, 0};
  hpu_event_t a, b;
  CU_ASSERT_EQUAL_FATAL(hpu_event_create(&a, 1), HPU_SUCCESS);
  CU_ASSERT_EQUAL_FATAL(hpu_event_create(&b, 1), HPU_SUCCESS);
  int took = 0;
  for (int rep = 0; rep < 20; rep++) {
    let_worker_sleep();
    atomic_store(&ran_on_main, 0);
    CU_ASSERT_EQUAL(hpu_stream_enqueue(s, append_task, (void *)(intptr_t)0, NULL), HPU_SUCCESS);
    CU_ASSERT_EQUAL(hpu_event_record(a, s), HPU_SUCCESS);
    CU_ASSERT_EQUAL(hpu_stream_enqueue(s, sleep_task, (void *)(intptr_t)10000, NULL), HPU_SUCCESS);
    CU_ASSERT_EQUAL(hpu_event_record(b, s), HPU_SUCCESS);
    CU_ASSERT_EQUAL(hpu_event_query(b), HPU_ERROR_NOT_READY);
    CU_ASSERT_EQUAL(hpu_stream_synchronize(s), HPU_SUCCESS);
    CU_ASSERT_EQUAL(hpu_event_query(a), HPU_SUCCESS);
    CU_ASSERT_EQUAL(hpu_event_query(b), HPU_SUCCESS);
    float ms = -1;
    CU_ASSERT_EQUAL(hpu_event_elapsed_ms(a, b, &ms), HPU_SUCCESS);
    CU_ASSERT(ms >= 9.5f && ms < 5000.0f);
    took += atomic_load(&ran_on_main) > 0;
  }
#ifndef __SANITIZE_THREAD__ /* a timing matter: under ThreadSanitizer the worker may take every task */
  CU_ASSERT(took > 0);
#endif
  /* The record is counted before the task runs (the sleep holds it back). */
  int failed = 1;
  took = 0;
  for (int rep = 0; rep < 10; rep++) {
    event_sync_t es = {b, HPU_SUCCESS};
    let_worker_sleep();
    atomic_store(&ran_on_main, 0);
    CU_ASSERT_EQUAL(hpu_stream_enqueue(s, sleep_task, (void *)(intptr_t)2000, NULL), HPU_SUCCESS);
    CU_ASSERT_EQUAL(hpu_stream_enqueue(s, sync_event_task, &es, NULL), HPU_SUCCESS);
    CU_ASSERT_EQUAL(hpu_event_record(b, s), HPU_SUCCESS);
    CU_ASSERT_EQUAL(hpu_stream_synchronize(s), HPU_SUCCESS);
    failed &= es.st == HPU_ERROR_INVALID_ARGUMENT;
    took += atomic_load(&ran_on_main) > 0;
  }
  CU_ASSERT(failed);
#ifndef __SANITIZE_THREAD__ /* a timing matter: under ThreadSanitizer the worker may take every task */
  CU_ASSERT(took > 0);
#endif
  CU_ASSERT_EQUAL(hpu_event_destroy(a), HPU_SUCCESS);
  CU_ASSERT_EQUAL(hpu_event_destroy(b), HPU_SUCCESS);
}

static void test_overhead(void) {
  hpu_stream_t s = {0, 0};
  CU_ASSERT_EQUAL(hpu_stream_synchronize(s), HPU_SUCCESS);
  const int n = 20000;
  double t0 = now_s();
  for (int i = 0; i < n; i++) {
    hpu_stream_enqueue(s, empty_task, NULL, NULL);
    hpu_stream_synchronize(s);
  }
  double t1 = now_s();
  for (int i = 0; i < n; i++) hpu_stream_enqueue(s, empty_task, NULL, NULL);
  double t2 = now_s();
  CU_ASSERT_EQUAL(hpu_stream_synchronize(s), HPU_SUCCESS);
  double t3 = now_s();
  for (int i = 0; i < n; i++) hpu_stream_synchronize(s);
  double t4 = now_s();
  printf("\n    enqueue+synchronize of an empty task: %.2f us; enqueue alone: %.2f us "
         "(drain %.2f us/task); synchronize when idle: %.3f us\n",
         (t1 - t0) / n * 1e6, (t2 - t1) / n * 1e6, (t3 - t1) / n * 1e6, (t4 - t3) / n * 1e6);
}

int main(void) {
  setenv("HPU_CARD_MEMORY", "64M", 1);
  unsetenv("HABANA_VISIBLE_DEVICES");
  unsetenv("HPU_NUM_CARDS");
  main_thread = pthread_self();
  if (CU_initialize_registry() != CUE_SUCCESS) return 2;
  CU_pSuite s = CU_add_suite("runtime_stream", NULL, NULL);
  CU_add_test(s, "queued work drains at exit", test_drain_at_exit); /* must run first */
  CU_add_test(s, "in-order execution and release", test_order);
  CU_add_test(s, "two producer threads", test_two_threads);
  CU_add_test(s, "query", test_query);
  CU_add_test(s, "sticky errors", test_sticky_error);
  CU_add_test(s, "bad handles", test_bad_handles);
  CU_add_test(s, "events", test_events);
  CU_add_test(s, "cross-card wait", test_cross_card_wait);
  CU_add_test(s, "synchronize runs unstarted tasks, in order", test_takeover_order);
  CU_add_test(s, "errors of tasks a synchronize ran", test_takeover_errors);
  CU_add_test(s, "pushes from another thread while synchronizing", test_takeover_concurrent_push);
  CU_add_test(s, "events with tasks a synchronize ran", test_takeover_events);
  CU_add_test(s, "enqueue overhead", test_overhead);
  CU_basic_set_mode(CU_BRM_VERBOSE);
  CU_basic_run_tests();
  unsigned failures = CU_get_number_of_failures();
  CU_cleanup_registry();
  return failures ? 1 : 0;
}
