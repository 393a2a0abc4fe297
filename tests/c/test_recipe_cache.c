/* The in-memory recipe cache is bounded by host bytes as well as by
 * recipes: big signatures evict the least recently used ones, the bytes
 * held never pass the bound, a recipe larger than the bound is not kept,
 * and shrinking the bound evicts at once. PT_HPU_RECIPE_CACHE_BYTES sets
 * the bound at init. */
#define _GNU_SOURCE
#include <CUnit/Basic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "graph/recipe_cache.h"
#include "hpu/hpu.h"

/* A signature of `words` words that no other key equals. */
static hpu_signature_t key(uint64_t id, size_t words) {
  hpu_signature_t s;
  memset(&s, 0, sizeof s);
  s.words = calloc(words, sizeof *s.words);
  s.len = s.cap = words;
  s.words[0] = (int64_t)id;
  s.hash = id * 0x9e3779b97f4a7c15ull;
  s.num_nodes = 1;
  return s;
}

static int cached(uint64_t id, size_t words) {
  hpu_signature_t s = key(id, words);
  hpu_plan_t *plan = NULL;
  int hit = hpu_recipe_cache_lookup(&s, NULL, 0, NULL, &plan, NULL);
  hpu_plan_free(plan);
  hpu_signature_free(&s);
  return hit;
}

enum { WORDS = 16384 }; /* 128 KiB a signature */
#define BOUND ((size_t)1 << 20)

static void test_bytes_bound_evicts_lru(void) {
  hpu_recipe_cache_clear();
  hpu_recipe_cache_set_limits(1024, BOUND);
  int64_t evicted = hpu_metric_get("recipe_cache_evict");
  for (uint64_t id = 1; id <= 40; id++) {
    hpu_signature_t s = key(id, WORDS);
    hpu_recipe_cache_insert(&s, NULL);
    CU_ASSERT_TRUE(hpu_recipe_cache_bytes() <= BOUND);
    if (id > 1) CU_ASSERT_TRUE(cached(1, WORDS)); /* used each time: stays */
  }
  size_t n = hpu_recipe_cache_size();
  /* 1 MiB holds 7 signatures of 128 KiB plus their entries, not 8 */
  CU_ASSERT_EQUAL(n, 7);
  CU_ASSERT_TRUE(hpu_recipe_cache_bytes() > (size_t)7 * WORDS * 8);
  CU_ASSERT_EQUAL(hpu_metric_get("recipe_cache_evict") - evicted, 40 - 7);
  CU_ASSERT_TRUE(cached(1, WORDS));                       /* most recently used */
  CU_ASSERT_TRUE(cached(40, WORDS) && cached(35, WORDS)); /* the newest */
  CU_ASSERT_FALSE(cached(2, WORDS) || cached(34, WORDS)); /* the coldest went */
}

static void test_too_big_is_not_kept(void) {
  hpu_recipe_cache_clear();
  hpu_recipe_cache_set_limits(1024, BOUND);
  hpu_signature_t small = key(7, 16);
  hpu_recipe_cache_insert(&small, NULL);
  hpu_signature_t huge = key(8, BOUND / 8 + 1);
  hpu_recipe_cache_insert(&huge, NULL);
  CU_ASSERT_TRUE(hpu_recipe_cache_bytes() <= BOUND);
  CU_ASSERT_FALSE(cached(8, BOUND / 8 + 1));
  CU_ASSERT_TRUE(cached(7, 16)); /* not evicted for nothing */
}

static void test_shrinking_evicts_now(void) {
  hpu_recipe_cache_clear();
  hpu_recipe_cache_set_limits(1024, BOUND);
  for (uint64_t id = 100; id < 104; id++) {
    hpu_signature_t s = key(id, WORDS);
    hpu_recipe_cache_insert(&s, NULL);
  }
  CU_ASSERT_EQUAL(hpu_recipe_cache_size(), 4);
  hpu_recipe_cache_set_limits(1024, (size_t)2 * WORDS * 8 + 4096);
  CU_ASSERT_EQUAL(hpu_recipe_cache_size(), 2);
  CU_ASSERT_TRUE(cached(102, WORDS) && cached(103, WORDS));
  hpu_recipe_cache_set_limits(1, BOUND); /* the count bound too */
  CU_ASSERT_EQUAL(hpu_recipe_cache_size(), 1);
  hpu_recipe_cache_clear();
  CU_ASSERT_EQUAL(hpu_recipe_cache_bytes(), 0);
}

/* PT_HPU_RECIPE_CACHE_BYTES=300K at init: 2 signatures of 128 KiB fit, not 3. */
static void test_env_sets_the_bound(void) {
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) {
    alarm(20);
    setenv("PT_HPU_RECIPE_CACHE_BYTES", "300K", 1);
    if (hpu_init() != HPU_SUCCESS) _exit(2);
    for (uint64_t id = 1; id <= 5; id++) {
      hpu_signature_t s = key(id, WORDS);
      hpu_recipe_cache_insert(&s, NULL);
    }
    _exit(hpu_recipe_cache_size() == 2 && hpu_recipe_cache_bytes() <= 300 * 1024 ? 0 : 1);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  CU_ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

int main(void) {
  if (CU_initialize_registry() != CUE_SUCCESS) return 1;
  CU_pSuite s = CU_add_suite("recipe cache bounds", NULL, NULL);
  CU_add_test(s, "PT_HPU_RECIPE_CACHE_BYTES sets the bound", test_env_sets_the_bound);
  CU_add_test(s, "the byte bound evicts the least recently used", test_bytes_bound_evicts_lru);
  CU_add_test(s, "a recipe larger than the bound is not kept", test_too_big_is_not_kept);
  CU_add_test(s, "shrinking the bounds evicts at once", test_shrinking_evicts_now);
  CU_basic_set_mode(CU_BRM_VERBOSE);
  CU_basic_run_tests();
  unsigned failed = CU_get_number_of_failures() + CU_get_number_of_tests_failed();
  CU_cleanup_registry();
  return failed ? 1 : 0;
}
