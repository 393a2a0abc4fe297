/* Cards, environment parsing and fork safety.
 *
 * hpu_init reads the environment once per process, so each environment case
 * runs in a child forked before this process initialises the runtime (which
 * is allowed); the child reports through its exit status. These tests come
 * first in the suite for that reason. */
#define _GNU_SOURCE
#include <CUnit/Basic.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "hpu/hpu.h"

/* Child-side checks: print what failed and exit non-zero. */
#define CHILD_CHECK(cond)                                                             \
  do {                                                                                \
    if (!(cond)) {                                                                    \
      fprintf(stderr, "child check failed at line %d: %s (last error: %s)\n", __LINE__, \
              #cond, hpu_last_error());                                               \
      _exit(1);                                                                       \
    }                                                                                 \
  } while (0)

/* Runs body(arg) in a child with the given environment; returns its exit code. */
static int in_child(const char *const *env, void (*body)(void)) {
  fflush(NULL);
  pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    alarm(20); /* never hang the suite */
    unsetenv("HPU_NUM_CARDS");
    unsetenv("HABANA_VISIBLE_DEVICES");
    unsetenv("HABANA_VISIBLE_MODULES");
    for (int i = 0; env && env[i]; i += 2) setenv(env[i], env[i + 1], 1);
    body();
    _exit(0);
  }
  int status = 0;
  if (waitpid(pid, &status, 0) != pid) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

static int status_is(hpu_status_t st, hpu_status_t want, const char *needle1, const char *needle2) {
  if (st != want) return 0;
  if (needle1 && !strstr(hpu_last_error(), needle1)) return 0;
  if (needle2 && !strstr(hpu_last_error(), needle2)) return 0;
  return 1;
}

static void body_default(void) {
  int n = -1;
  CHILD_CHECK(hpu_init() == HPU_SUCCESS);
  CHILD_CHECK(hpu_is_initialized());
  CHILD_CHECK(hpu_device_count(&n) == HPU_SUCCESS && n == 8);
  hpu_device_props_t p;
  CHILD_CHECK(hpu_device_get_props(7, &p) == HPU_SUCCESS);
  CHILD_CHECK(strcmp(p.name, "GAUDI2") == 0 && p.physical_id == 7);
  CHILD_CHECK(p.total_memory == ((size_t)16 << 30));
}

static void body_num_cards_4(void) {
  int n = -1;
  CHILD_CHECK(hpu_device_count(&n) == HPU_SUCCESS && n == 4); /* lazy init */
}

static void body_bad_num_cards(void) {
  CHILD_CHECK(status_is(hpu_init(), HPU_ERROR_INVALID_ARGUMENT, "HPU_NUM_CARDS", "abc"));
  CHILD_CHECK(!hpu_is_initialized());
  int n;
  CHILD_CHECK(hpu_device_count(&n) == HPU_ERROR_INVALID_ARGUMENT);
}

static void body_too_many_cards(void) {
  CHILD_CHECK(status_is(hpu_init(), HPU_ERROR_INVALID_ARGUMENT, "HPU_NUM_CARDS", "65"));
}

static void body_visible_23(void) {
  int n = -1;
  hpu_device_props_t p;
  CHILD_CHECK(hpu_device_count(&n) == HPU_SUCCESS && n == 2);
  CHILD_CHECK(hpu_device_get_props(0, &p) == HPU_SUCCESS && p.physical_id == 2);
  CHILD_CHECK(hpu_device_get_props(1, &p) == HPU_SUCCESS && p.physical_id == 3);
  CHILD_CHECK(status_is(hpu_device_check(5), HPU_ERROR_INVALID_ARGUMENT,
                        "invalid hpu device index 5: 2 cards visible (HABANA_VISIBLE_DEVICES=2,3)",
                        NULL));
  void *ptr;
  CHILD_CHECK(hpu_malloc(1, 100, &ptr) == HPU_SUCCESS && hpu_free(1, ptr) == HPU_SUCCESS);
}

static void body_visible_all(void) {
  int n = -1;
  CHILD_CHECK(hpu_device_count(&n) == HPU_SUCCESS && n == 3);
}

static void body_visible_bad(void) {
  CHILD_CHECK(status_is(hpu_init(), HPU_ERROR_INVALID_ARGUMENT, "HABANA_VISIBLE_DEVICES", "1,9"));
}

static void body_visible_dup(void) {
  CHILD_CHECK(status_is(hpu_init(), HPU_ERROR_INVALID_ARGUMENT, "HABANA_VISIBLE_DEVICES", "twice"));
}

static void body_visible_junk(void) {
  CHILD_CHECK(status_is(hpu_init(), HPU_ERROR_INVALID_ARGUMENT, "HABANA_VISIBLE_DEVICES", "x"));
}

/* HABANA_VISIBLE_MODULES alone selects and orders cards as HABANA_VISIBLE_DEVICES does. */
static void body_modules_31(void) {
  int n = -1;
  hpu_device_props_t p;
  CHILD_CHECK(hpu_device_count(&n) == HPU_SUCCESS && n == 2);
  CHILD_CHECK(hpu_device_get_props(0, &p) == HPU_SUCCESS && p.physical_id == 3);
  CHILD_CHECK(hpu_device_get_props(1, &p) == HPU_SUCCESS && p.physical_id == 1);
  CHILD_CHECK(status_is(hpu_device_check(2), HPU_ERROR_INVALID_ARGUMENT,
                        "2 cards visible (HABANA_VISIBLE_MODULES=3,1)", NULL));
}

/* Both set: HABANA_VISIBLE_MODULES wins. */
static void body_modules_win(void) {
  int n = -1;
  hpu_device_props_t p;
  CHILD_CHECK(hpu_device_count(&n) == HPU_SUCCESS && n == 1);
  CHILD_CHECK(hpu_device_get_props(0, &p) == HPU_SUCCESS && p.physical_id == 5);
}

/* An empty HABANA_VISIBLE_MODULES counts as unset: HABANA_VISIBLE_DEVICES applies. */
static void body_modules_empty(void) {
  int n = -1;
  hpu_device_props_t p;
  CHILD_CHECK(hpu_device_count(&n) == HPU_SUCCESS && n == 2);
  CHILD_CHECK(hpu_device_get_props(1, &p) == HPU_SUCCESS && p.physical_id == 3);
}

static void body_modules_bad(void) {
  CHILD_CHECK(status_is(hpu_init(), HPU_ERROR_INVALID_ARGUMENT, "invalid HABANA_VISIBLE_MODULES='0,8'",
                        "card 8 does not exist"));
}

static void body_modules_junk(void) {
  CHILD_CHECK(status_is(hpu_init(), HPU_ERROR_INVALID_ARGUMENT, "HABANA_VISIBLE_MODULES", "trailing comma"));
}

static void body_memory_512m(void) {
  hpu_device_props_t p;
  size_t free_b, total_b;
  CHILD_CHECK(hpu_device_get_props(0, &p) == HPU_SUCCESS && p.total_memory == ((size_t)512 << 20));
  CHILD_CHECK(hpu_mem_get_info(0, &free_b, &total_b) == HPU_SUCCESS);
  CHILD_CHECK(total_b == ((size_t)512 << 20) && free_b == total_b);
}

static void body_memory_1g(void) {
  hpu_device_props_t p;
  CHILD_CHECK(hpu_device_get_props(0, &p) == HPU_SUCCESS && p.total_memory == ((size_t)1 << 30));
}

static void body_memory_small(void) { /* rounded up to one 2 MiB segment */
  hpu_device_props_t p;
  CHILD_CHECK(hpu_device_get_props(0, &p) == HPU_SUCCESS && p.total_memory == ((size_t)2 << 20));
}

static void body_memory_bad(void) {
  CHILD_CHECK(status_is(hpu_init(), HPU_ERROR_INVALID_ARGUMENT, "HPU_CARD_MEMORY", "12X"));
}

static void body_memory_zero(void) {
  CHILD_CHECK(status_is(hpu_init(), HPU_ERROR_INVALID_ARGUMENT, "HPU_CARD_MEMORY", "'0'"));
}

static void body_omp_threads(void) { CHILD_CHECK(hpu_get_num_threads() == 3); }

static void test_env(void) {
  const char *num4[] = {"HPU_NUM_CARDS", "4", NULL};
  const char *num_bad[] = {"HPU_NUM_CARDS", "abc", NULL};
  const char *num_big[] = {"HPU_NUM_CARDS", "65", NULL};
  const char *vis23[] = {"HABANA_VISIBLE_DEVICES", "2,3", NULL};
  const char *vis_all[] = {"HPU_NUM_CARDS", "3", "HABANA_VISIBLE_DEVICES", "all", NULL};
  const char *vis_bad[] = {"HABANA_VISIBLE_DEVICES", "1,9", NULL};
  const char *vis_dup[] = {"HABANA_VISIBLE_DEVICES", "1, 1", NULL};
  const char *vis_junk[] = {"HABANA_VISIBLE_DEVICES", "0,x", NULL};
  const char *mod31[] = {"HABANA_VISIBLE_MODULES", "3,1", NULL};
  const char *mod_win[] = {"HABANA_VISIBLE_DEVICES", "2,3", "HABANA_VISIBLE_MODULES", "5", NULL};
  const char *mod_empty[] = {"HABANA_VISIBLE_DEVICES", "2,3", "HABANA_VISIBLE_MODULES", " ", NULL};
  const char *mod_bad[] = {"HABANA_VISIBLE_MODULES", "0,8", NULL};
  const char *mod_junk[] = {"HABANA_VISIBLE_DEVICES", "1", "HABANA_VISIBLE_MODULES", "1,", NULL};
  const char *mem512[] = {"HPU_CARD_MEMORY", "512M", NULL};
  const char *mem1g[] = {"HPU_CARD_MEMORY", "1G", NULL};
  const char *mem_small[] = {"HPU_CARD_MEMORY", "100", NULL};
  const char *mem_bad[] = {"HPU_CARD_MEMORY", "12X", NULL};
  const char *mem_zero[] = {"HPU_CARD_MEMORY", "0", NULL};
  const char *omp3[] = {"OMP_NUM_THREADS", "3", NULL};
  const char *no_mem[] = {NULL};
  /* Default memory must be tested without the suite's 64M setting. */
  char *saved = strdup(getenv("HPU_CARD_MEMORY"));
  unsetenv("HPU_CARD_MEMORY");
  CU_ASSERT_EQUAL(in_child(no_mem, body_default), 0);
  setenv("HPU_CARD_MEMORY", saved, 1);
  free(saved);
  CU_ASSERT_EQUAL(in_child(num4, body_num_cards_4), 0);
  CU_ASSERT_EQUAL(in_child(num_bad, body_bad_num_cards), 0);
  CU_ASSERT_EQUAL(in_child(num_big, body_too_many_cards), 0);
  CU_ASSERT_EQUAL(in_child(vis23, body_visible_23), 0);
  CU_ASSERT_EQUAL(in_child(vis_all, body_visible_all), 0);
  CU_ASSERT_EQUAL(in_child(vis_bad, body_visible_bad), 0);
  CU_ASSERT_EQUAL(in_child(vis_dup, body_visible_dup), 0);
  CU_ASSERT_EQUAL(in_child(vis_junk, body_visible_junk), 0);
  CU_ASSERT_EQUAL(in_child(mod31, body_modules_31), 0);
  CU_ASSERT_EQUAL(in_child(mod_win, body_modules_win), 0);
  CU_ASSERT_EQUAL(in_child(mod_empty, body_modules_empty), 0);
  CU_ASSERT_EQUAL(in_child(mod_bad, body_modules_bad), 0);
  CU_ASSERT_EQUAL(in_child(mod_junk, body_modules_junk), 0);
  CU_ASSERT_EQUAL(in_child(mem512, body_memory_512m), 0);
  CU_ASSERT_EQUAL(in_child(mem1g, body_memory_1g), 0);
  CU_ASSERT_EQUAL(in_child(mem_small, body_memory_small), 0);
  CU_ASSERT_EQUAL(in_child(mem_bad, body_memory_bad), 0);
  CU_ASSERT_EQUAL(in_child(mem_zero, body_memory_zero), 0);
  CU_ASSERT_EQUAL(in_child(omp3, body_omp_threads), 0);
  CU_ASSERT(!hpu_is_initialized()); /* the parent is still untouched */
}

static void test_devices(void) {
  CU_ASSERT_EQUAL(hpu_init(), HPU_SUCCESS);
  CU_ASSERT_EQUAL(hpu_init(), HPU_SUCCESS); /* idempotent */
  CU_ASSERT(hpu_is_initialized());
  int n = 0;
  CU_ASSERT_EQUAL(hpu_device_count(&n), HPU_SUCCESS);
  CU_ASSERT_EQUAL(n, 8);
  hpu_device_props_t p;
  CU_ASSERT_EQUAL(hpu_device_get_props(3, &p), HPU_SUCCESS);
  CU_ASSERT_STRING_EQUAL(p.name, "GAUDI2");
  CU_ASSERT_EQUAL(p.physical_id, 3);
  CU_ASSERT_EQUAL(p.total_memory, (size_t)64 << 20);
  CU_ASSERT_EQUAL(hpu_device_check(9), HPU_ERROR_INVALID_ARGUMENT);
  CU_ASSERT_PTR_NOT_NULL(strstr(hpu_last_error(), "invalid hpu device index 9: 8 cards visible"));
  CU_ASSERT_EQUAL(hpu_device_check(-1), HPU_ERROR_INVALID_ARGUMENT);
  CU_ASSERT_EQUAL(hpu_device_get_props(8, &p), HPU_ERROR_INVALID_ARGUMENT);
  CU_ASSERT_EQUAL(hpu_device_synchronize(8), HPU_ERROR_INVALID_ARGUMENT);
  CU_ASSERT_EQUAL(hpu_device_synchronize(0), HPU_SUCCESS);
  CU_ASSERT_EQUAL(hpu_device_count(NULL), HPU_ERROR_INVALID_ARGUMENT);
}

static void test_num_threads(void) {
  int def = hpu_get_num_threads();
  CU_ASSERT(def >= 1);
  CU_ASSERT_EQUAL(hpu_set_num_threads(3), HPU_SUCCESS);
  CU_ASSERT_EQUAL(hpu_get_num_threads(), 3);
  CU_ASSERT_EQUAL(hpu_set_num_threads(0), HPU_ERROR_INVALID_ARGUMENT);
  CU_ASSERT_PTR_NOT_NULL(strstr(hpu_last_error(), "hpu_set_num_threads"));
  CU_ASSERT_EQUAL(hpu_get_num_threads(), 3);
  CU_ASSERT_EQUAL(hpu_set_num_threads(def), HPU_SUCCESS);
}

static void count_range(void *ctx, int64_t b, int64_t e) {
  int *hits = ctx;
  for (int64_t i = b; i < e; i++) __atomic_fetch_add(&hits[i], 1, __ATOMIC_RELAXED);
}

static hpu_status_t noop(void *arg) {
  (void)arg;
  return HPU_SUCCESS;
}

static void body_forked_after_init(void) {
  int n;
  void *p;
  hpu_stream_t s = {0, 0};
  hpu_generator_t *g;
  CHILD_CHECK(!hpu_is_initialized());
  CHILD_CHECK(status_is(hpu_device_count(&n), HPU_ERROR_FORKED, "forked", "spawn"));
  CHILD_CHECK(hpu_init() == HPU_ERROR_FORKED);
  CHILD_CHECK(hpu_malloc(0, 64, &p) == HPU_ERROR_FORKED);
  CHILD_CHECK(hpu_stream_enqueue(s, noop, NULL, NULL) == HPU_ERROR_FORKED);
  CHILD_CHECK(hpu_stream_synchronize(s) == HPU_ERROR_FORKED);
  CHILD_CHECK(hpu_device_synchronize(0) == HPU_ERROR_FORKED);
  CHILD_CHECK(hpu_generator_default(0, &g) == HPU_ERROR_FORKED);
  /* The kernel thread pool still works on host memory (no inherited lock). */
  hpu_set_num_threads(2);
  int hits[1000] = {0};
  hpu_parallel_for(1000, 10, count_range, hits);
  for (int i = 0; i < 1000; i++) CHILD_CHECK(hits[i] == 1);
}

static void test_fork_after_init(void) {
  /* Make the parent busy: allocations, a running queue, a used pool. */
  void *p;
  CU_ASSERT_EQUAL(hpu_malloc(0, 4096, &p), HPU_SUCCESS);
  hpu_stream_t s = {0, 0};
  CU_ASSERT_EQUAL(hpu_stream_enqueue(s, noop, NULL, NULL), HPU_SUCCESS);
  int hits[1000] = {0};
  hpu_set_num_threads(2);
  hpu_parallel_for(1000, 10, count_range, hits);
  CU_ASSERT_EQUAL(in_child(NULL, body_forked_after_init), 0);
  /* The parent is unaffected. */
  CU_ASSERT_EQUAL(hpu_stream_synchronize(s), HPU_SUCCESS);
  CU_ASSERT_EQUAL(hpu_free(0, p), HPU_SUCCESS);
  CU_ASSERT(hpu_is_initialized());
}

int main(void) {
  setenv("HPU_CARD_MEMORY", "64M", 1);
  unsetenv("HABANA_VISIBLE_DEVICES");
  unsetenv("HABANA_VISIBLE_MODULES");
  unsetenv("HPU_NUM_CARDS");
  unsetenv("OMP_NUM_THREADS");
  if (CU_initialize_registry() != CUE_SUCCESS) return 2;
  CU_pSuite s = CU_add_suite("runtime_device", NULL, NULL);
  CU_add_test(s, "environment (forked before init)", test_env); /* must run first */
  CU_add_test(s, "devices and index checks", test_devices);
  CU_add_test(s, "num threads", test_num_threads);
#ifndef __SANITIZE_THREAD__ /* ThreadSanitizer cannot follow a fork of a process with threads */
  CU_add_test(s, "fork after init", test_fork_after_init);
#else
  (void)test_fork_after_init;
#endif
  CU_basic_set_mode(CU_BRM_VERBOSE);
  CU_basic_run_tests();
  unsigned failures = CU_get_number_of_failures();
  CU_cleanup_registry();
  return failures ? 1 : 0;
}
