/* Caching allocator and arena: reuse, splitting, coalescing, statistics,
 * out-of-memory with recovery, empty_cache, pointer lookup. The card has
 * 64 MiB (HPU_CARD_MEMORY), so small pool segments are 2 MiB and large
 * ones 20 MiB (or the request rounded to 2 MiB from 10 MiB up). */
#define _GNU_SOURCE
#include <CUnit/Basic.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <stdio.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "hpu/hpu.h"

#define MiB ((size_t)1 << 20)

static hpu_memory_stats_t stats(void) {
  hpu_memory_stats_t s;
  CU_ASSERT_EQUAL_FATAL(hpu_memory_get_stats(0, &s), HPU_SUCCESS);
  return s;
}

/* Every test starts with nothing live and nothing cached. */
static void fresh(void) {
  CU_ASSERT_EQUAL(hpu_memory_empty_cache(0), HPU_SUCCESS);
  CU_ASSERT_EQUAL(hpu_memory_reset_accumulated(0), HPU_SUCCESS);
  CU_ASSERT_EQUAL(hpu_memory_reset_peak(0), HPU_SUCCESS);
  hpu_memory_stats_t s = stats();
  CU_ASSERT_EQUAL(s.allocated_bytes, 0);
  CU_ASSERT_EQUAL(s.reserved_bytes, 0);
  CU_ASSERT_EQUAL(s.num_segments, 0);
}

static void test_reuse_and_alignment(void) {
  fresh();
  void *p = NULL, *q = NULL;
  CU_ASSERT_EQUAL(hpu_malloc(0, 1000, &p), HPU_SUCCESS);
  CU_ASSERT_PTR_NOT_NULL(p);
  CU_ASSERT_EQUAL((uintptr_t)p % 512, 0);
  hpu_memory_stats_t s = stats();
  CU_ASSERT_EQUAL(s.allocated_bytes, 1024);
  CU_ASSERT_EQUAL(s.requested_bytes, 1000);
  CU_ASSERT_EQUAL(s.reserved_bytes, 2 * MiB);
  CU_ASSERT_EQUAL(s.num_segments, 1);
  CU_ASSERT_EQUAL(s.active_blocks, 1);
  CU_ASSERT_EQUAL(s.capacity, 64 * MiB);
  memset(p, 0xab, 1000); /* device memory is host-addressable in the emulator */
  CU_ASSERT_EQUAL(hpu_free(0, p), HPU_SUCCESS);
  CU_ASSERT_EQUAL(hpu_malloc(0, 1000, &q), HPU_SUCCESS);
  CU_ASSERT_PTR_EQUAL(p, q); /* freed blocks are reusable at once */
  CU_ASSERT_EQUAL(hpu_free(0, q), HPU_SUCCESS);
  s = stats();
  CU_ASSERT_EQUAL(s.num_allocs, 2);
  CU_ASSERT_EQUAL(s.num_frees, 2);
  CU_ASSERT_EQUAL(s.allocated_bytes, 0);
  CU_ASSERT_EQUAL(s.requested_bytes, 0);
  CU_ASSERT_EQUAL(s.reserved_bytes, 2 * MiB); /* cached */
  CU_ASSERT_EQUAL(s.num_segments, 1);
  CU_ASSERT_EQUAL(s.active_blocks, 0);
  CU_ASSERT_EQUAL(s.inactive_split_blocks, 0);

  void *z = (void *)1;
  CU_ASSERT_EQUAL(hpu_malloc(0, 0, &z), HPU_SUCCESS);
  CU_ASSERT_PTR_NULL(z);
  CU_ASSERT_EQUAL(hpu_free(0, NULL), HPU_SUCCESS);
}

static void test_split_and_coalesce(void) {
  fresh();
  void *a, *b, *c;
  CU_ASSERT_EQUAL(hpu_malloc(0, 1000, &a), HPU_SUCCESS);
  CU_ASSERT_EQUAL(hpu_malloc(0, 1000, &b), HPU_SUCCESS);
  CU_ASSERT_PTR_EQUAL((char *)a + 1024, b); /* split from the same segment */
  hpu_memory_stats_t s = stats();
  CU_ASSERT_EQUAL(s.num_segments, 1);
  CU_ASSERT_EQUAL(s.inactive_split_blocks, 1); /* the tail of the segment */
  CU_ASSERT_EQUAL(s.inactive_split_bytes, 2 * MiB - 2048);

  CU_ASSERT_EQUAL(hpu_free(0, a), HPU_SUCCESS);
  s = stats();
  CU_ASSERT_EQUAL(s.inactive_split_blocks, 2); /* a's hole and the tail */
  CU_ASSERT_EQUAL(s.inactive_split_bytes, 2 * MiB - 1024);

  /* Best fit: a 512-byte request takes a's 1024-byte hole, not the tail. */
  CU_ASSERT_EQUAL(hpu_malloc(0, 100, &c), HPU_SUCCESS);
  CU_ASSERT_PTR_EQUAL(c, a);
  CU_ASSERT_EQUAL(hpu_free(0, c), HPU_SUCCESS);

  /* Freeing b merges a's block, b and the tail back into one segment. */
  CU_ASSERT_EQUAL(hpu_free(0, b), HPU_SUCCESS);
  s = stats();
  CU_ASSERT_EQUAL(s.inactive_split_blocks, 0);
  CU_ASSERT_EQUAL(s.inactive_split_bytes, 0);
  CU_ASSERT_EQUAL(s.num_segments, 1);
  CU_ASSERT_EQUAL(hpu_malloc(0, 2 * MiB - 4096, &c), HPU_SUCCESS); /* large pool: new segment */
  void *d;
  CU_ASSERT_EQUAL(hpu_malloc(0, MiB, &d), HPU_SUCCESS); /* 1 MiB is small: whole coalesced segment */
  CU_ASSERT_PTR_EQUAL(d, a);
  CU_ASSERT_EQUAL(hpu_free(0, c), HPU_SUCCESS);
  CU_ASSERT_EQUAL(hpu_free(0, d), HPU_SUCCESS);
}

static void test_large_pool(void) {
  fresh();
  void *a, *b, *c;
  CU_ASSERT_EQUAL(hpu_malloc(0, 3 * MiB, &a), HPU_SUCCESS);
  hpu_memory_stats_t s = stats();
  CU_ASSERT_EQUAL(s.reserved_bytes, 20 * MiB); /* mid-size: a 20 MiB segment */
  CU_ASSERT_EQUAL(s.allocated_bytes, 3 * MiB);
  CU_ASSERT_EQUAL(hpu_malloc(0, 12 * MiB, &b), HPU_SUCCESS);
  CU_ASSERT_PTR_EQUAL(b, (char *)a + 3 * MiB); /* fits in the rest of the segment */
  CU_ASSERT_EQUAL(stats().num_segments, 1);
  /* >= 10 MiB: its own segment rounded to 2 MiB (12 MiB); the 512 KiB rest
   * is not worth a split in the large pool, so the block is 12 MiB. */
  CU_ASSERT_EQUAL(hpu_malloc(0, 11 * MiB + 1, &c), HPU_SUCCESS);
  s = stats();
  CU_ASSERT_EQUAL(s.reserved_bytes, 32 * MiB);
  CU_ASSERT_EQUAL(s.num_segments, 2);
  CU_ASSERT_EQUAL(s.allocated_bytes, 27 * MiB);
  CU_ASSERT_EQUAL(s.requested_bytes, 26 * MiB + 1);
  CU_ASSERT_EQUAL(s.peak_reserved_bytes, 32 * MiB);
  CU_ASSERT_EQUAL(hpu_free(0, a), HPU_SUCCESS);
  CU_ASSERT_EQUAL(hpu_free(0, b), HPU_SUCCESS);
  CU_ASSERT_EQUAL(hpu_free(0, c), HPU_SUCCESS);
  s = stats();
  CU_ASSERT_EQUAL(s.peak_allocated_bytes, 27 * MiB);
  CU_ASSERT_EQUAL(hpu_memory_reset_peak(0), HPU_SUCCESS);
  s = stats();
  CU_ASSERT_EQUAL(s.peak_allocated_bytes, 0);
  CU_ASSERT_EQUAL(s.peak_reserved_bytes, 32 * MiB);
}

/* A multiple of 64 MiB asks for 2 MiB more (the stagger, allocator.c), but
 * a request the card can hold whole never fails for it: here the card's
 * whole 64 MiB. */
static void test_stagger_never_causes_oom(void) {
  fresh();
  void *p = NULL;
  CU_ASSERT_EQUAL(hpu_malloc(0, 64 * MiB, &p), HPU_SUCCESS);
  hpu_memory_stats_t s = stats();
  CU_ASSERT_EQUAL(s.reserved_bytes, 64 * MiB);
  CU_ASSERT_EQUAL(s.num_ooms, 0);
  CU_ASSERT_EQUAL(hpu_free(0, p), HPU_SUCCESS);
}

static void test_empty_cache(void) {
  fresh();
  void *p;
  CU_ASSERT_EQUAL(hpu_malloc(0, 4 * MiB, &p), HPU_SUCCESS);
  memset(p, 1, 4 * MiB); /* touch the pages */
  int fd;
  void *base;
  size_t size;
  CU_ASSERT_EQUAL(hpu_memory_arena(0, &fd, &base, &size), HPU_SUCCESS);
  struct stat before, after;
  CU_ASSERT_EQUAL(fstat(fd, &before), 0);
  CU_ASSERT_EQUAL(hpu_free(0, p), HPU_SUCCESS);
  size_t free_b, total_b;
  CU_ASSERT_EQUAL(hpu_mem_get_info(0, &free_b, &total_b), HPU_SUCCESS);
  CU_ASSERT_EQUAL(total_b, 64 * MiB);
  CU_ASSERT_EQUAL(free_b, 44 * MiB); /* the cached 20 MiB segment counts as used */
  CU_ASSERT_EQUAL(stats().reserved_bytes, 20 * MiB);
  CU_ASSERT_EQUAL(hpu_memory_empty_cache(0), HPU_SUCCESS);
  hpu_memory_stats_t s = stats();
  CU_ASSERT_EQUAL(s.reserved_bytes, 0);
  CU_ASSERT_EQUAL(s.num_segments, 0);
  CU_ASSERT_EQUAL(hpu_mem_get_info(0, &free_b, &total_b), HPU_SUCCESS);
  CU_ASSERT_EQUAL(free_b, 64 * MiB);
  CU_ASSERT_EQUAL(fstat(fd, &after), 0);
  CU_ASSERT(after.st_blocks + (off_t)(4 * MiB / 512) <= before.st_blocks); /* pages punched out */
  CU_ASSERT_EQUAL(after.st_size, (off_t)(64 * MiB));
}

static void test_oom_and_recovery(void) {
  fresh();
  void *p = (void *)1;
  CU_ASSERT_EQUAL(hpu_malloc(0, 100 * MiB, &p), HPU_ERROR_OUT_OF_MEMORY);
  CU_ASSERT_PTR_NULL(p);
  const char *msg = hpu_last_error();
  CU_ASSERT_PTR_NOT_NULL(strstr(msg, "hpu:0 out of memory"));
  CU_ASSERT_PTR_NOT_NULL(strstr(msg, "tried to allocate 100.00 MiB"));
  CU_ASSERT_PTR_NOT_NULL(strstr(msg, "64.00 MiB total capacity"));
  CU_ASSERT_PTR_NOT_NULL(strstr(msg, "HPU_CARD_MEMORY"));
  CU_ASSERT_EQUAL(stats().num_ooms, 1);

  void *a, *b, *c = NULL;
  CU_ASSERT_EQUAL(hpu_malloc(0, 30 * MiB, &a), HPU_SUCCESS);
  CU_ASSERT_EQUAL(hpu_malloc(0, 30 * MiB, &b), HPU_SUCCESS);
  /* 4 MiB left in the arena; an 8 MiB request needs a 20 MiB segment. */
  CU_ASSERT_EQUAL(hpu_malloc(0, 8 * MiB, &c), HPU_ERROR_OUT_OF_MEMORY);
  msg = hpu_last_error();
  CU_ASSERT_PTR_NOT_NULL(strstr(msg, "tried to allocate 8.00 MiB"));
  CU_ASSERT_PTR_NOT_NULL(strstr(msg, "60.00 MiB allocated"));
  CU_ASSERT_PTR_NOT_NULL(strstr(msg, "60.00 MiB reserved"));
  hpu_memory_stats_t s = stats();
  CU_ASSERT_EQUAL(s.num_ooms, 2);
  CU_ASSERT_EQUAL(s.num_alloc_retries, 1);

  /* After frees the cached segments are flushed and the request retried. */
  CU_ASSERT_EQUAL(hpu_free(0, a), HPU_SUCCESS);
  CU_ASSERT_EQUAL(hpu_free(0, b), HPU_SUCCESS);
  CU_ASSERT_EQUAL(hpu_malloc(0, 50 * MiB, &c), HPU_SUCCESS);
  s = stats();
  CU_ASSERT_EQUAL(s.num_alloc_retries, 2);
  CU_ASSERT_EQUAL(s.num_ooms, 2);
  CU_ASSERT_EQUAL(s.reserved_bytes, 50 * MiB);
  CU_ASSERT_EQUAL(hpu_free(0, c), HPU_SUCCESS);
  CU_ASSERT_EQUAL(hpu_memory_reset_accumulated(0), HPU_SUCCESS);
  s = stats();
  CU_ASSERT_EQUAL(s.num_ooms + s.num_alloc_retries + s.num_allocs + s.num_frees, 0);
}

static void test_bad_pointers(void) {
  fresh();
  int host_var = 0, dev = 7;
  CU_ASSERT_EQUAL(hpu_free(0, &host_var), HPU_ERROR_INVALID_ARGUMENT);
  CU_ASSERT_PTR_NOT_NULL(strstr(hpu_last_error(), "hpu_free"));
  void *p;
  CU_ASSERT_EQUAL(hpu_malloc(0, 4096, &p), HPU_SUCCESS);
  CU_ASSERT_EQUAL(hpu_free(0, (char *)p + 512), HPU_ERROR_INVALID_ARGUMENT);
  CU_ASSERT_EQUAL(hpu_pointer_get_device(p, &dev), HPU_SUCCESS);
  CU_ASSERT_EQUAL(dev, 0);
  CU_ASSERT_EQUAL(hpu_pointer_get_device(&host_var, &dev), HPU_SUCCESS);
  CU_ASSERT_EQUAL(dev, -1);
  CU_ASSERT_EQUAL(hpu_free(1, p), HPU_ERROR_INVALID_ARGUMENT); /* wrong card */
  CU_ASSERT_PTR_NOT_NULL(strstr(hpu_last_error(), "belongs to hpu:0"));
  CU_ASSERT_EQUAL(hpu_free(0, p), HPU_SUCCESS);
  CU_ASSERT_EQUAL(hpu_free(0, p), HPU_ERROR_INVALID_ARGUMENT); /* double free */
  CU_ASSERT_EQUAL(hpu_malloc(99, 16, &p), HPU_ERROR_INVALID_ARGUMENT);
  CU_ASSERT_PTR_NOT_NULL(strstr(hpu_last_error(), "invalid hpu device index 99"));
  CU_ASSERT_EQUAL(hpu_malloc(0, 16, NULL), HPU_ERROR_INVALID_ARGUMENT);
}

static void test_second_card_and_arena(void) {
  void *p;
  CU_ASSERT_EQUAL(hpu_malloc(1, 1 << 16, &p), HPU_SUCCESS);
  int dev = -5, fd = -1;
  void *base;
  size_t size;
  CU_ASSERT_EQUAL(hpu_pointer_get_device(p, &dev), HPU_SUCCESS);
  CU_ASSERT_EQUAL(dev, 1);
  CU_ASSERT_EQUAL(hpu_memory_arena(1, &fd, &base, &size), HPU_SUCCESS);
  CU_ASSERT(fd >= 0);
  CU_ASSERT(fcntl(fd, F_GETFD) & FD_CLOEXEC);
  CU_ASSERT_EQUAL(size, 64 * MiB);
  CU_ASSERT((char *)p >= (char *)base && (char *)p < (char *)base + size);
  CU_ASSERT_EQUAL(hpu_free(1, p), HPU_SUCCESS);
  CU_ASSERT_EQUAL(hpu_memory_empty_cache(1), HPU_SUCCESS);
}

typedef struct {
  int iters;
  int failures;
} stress_t;

static void *stress_main(void *arg) {
  stress_t *t = arg;
  void *live[16] = {0};
  unsigned seed = (unsigned)(uintptr_t)arg;
  for (int i = 0; i < t->iters; i++) {
    int k = rand_r(&seed) % 16;
    if (live[k]) {
      if (hpu_free(0, live[k]) != HPU_SUCCESS) t->failures++;
      live[k] = NULL;
    } else {
      size_t n = 1 + (size_t)rand_r(&seed) % (k < 14 ? 200000 : 3000000);
      if (hpu_malloc(0, n, &live[k]) != HPU_SUCCESS) t->failures++;
      else ((char *)live[k])[n - 1] = 1;
    }
  }
  for (int k = 0; k < 16; k++)
    if (live[k] && hpu_free(0, live[k]) != HPU_SUCCESS) t->failures++;
  return NULL;
}

static void test_threads(void) {
  fresh();
  stress_t t[2] = {{20000, 0}, {20000, 0}};
  pthread_t th[2];
  for (int i = 0; i < 2; i++) pthread_create(&th[i], NULL, stress_main, &t[i]);
  for (int i = 0; i < 2; i++) pthread_join(th[i], NULL);
  CU_ASSERT_EQUAL(t[0].failures + t[1].failures, 0);
  hpu_memory_stats_t s = stats();
  CU_ASSERT_EQUAL(s.allocated_bytes, 0);
  CU_ASSERT_EQUAL(s.active_blocks, 0);
  CU_ASSERT_EQUAL(s.inactive_split_blocks, 0);
  CU_ASSERT_EQUAL(s.num_allocs, s.num_frees);
  CU_ASSERT_EQUAL(hpu_memory_empty_cache(0), HPU_SUCCESS);
  CU_ASSERT_EQUAL(stats().reserved_bytes, 0);
}

/* Small frees are parked for a same-size request; nothing of that may show:
 * statistics, coalescing, double-free errors and empty_cache are as if every
 * free went straight back to the pool. */
static void test_parked_frees(void) {
  fresh();
  void *a, *b, *c, *d;
  CU_ASSERT_EQUAL_FATAL(hpu_malloc(0, 1024, &a), HPU_SUCCESS);
  CU_ASSERT_EQUAL_FATAL(hpu_malloc(0, 1024, &b), HPU_SUCCESS);
  CU_ASSERT_EQUAL_FATAL(hpu_malloc(0, 1024, &c), HPU_SUCCESS);
  CU_ASSERT_PTR_EQUAL((char *)b, (char *)a + 1024);
  CU_ASSERT_EQUAL(hpu_free(0, b), HPU_SUCCESS);
  CU_ASSERT_EQUAL(hpu_free(0, a), HPU_SUCCESS);
  CU_ASSERT_EQUAL(hpu_memory_is_allocated(a), 0);
  /* a double free of a parked block is still an error */
  CU_ASSERT_EQUAL(hpu_free(0, a), HPU_ERROR_INVALID_ARGUMENT);
  /* same size: the lowest parked address first */
  CU_ASSERT_EQUAL(hpu_malloc(0, 1000, &d), HPU_SUCCESS);
  CU_ASSERT_PTR_EQUAL(d, a);
  CU_ASSERT_EQUAL(hpu_free(0, d), HPU_SUCCESS);
  hpu_memory_stats_t s = stats();
  CU_ASSERT_EQUAL(s.allocated_bytes, 1024);
  CU_ASSERT_EQUAL(s.active_blocks, 1);
  CU_ASSERT_EQUAL(s.num_frees, 3);
  /* a and b merged into one free block before c, the rest after c: two */
  CU_ASSERT_EQUAL(s.inactive_split_blocks, 2);
  CU_ASSERT_EQUAL(s.inactive_split_bytes, 2 * MiB - 1024);
  /* another size after parking takes the merged a+b block */
  CU_ASSERT_EQUAL(hpu_free(0, c), HPU_SUCCESS);
  CU_ASSERT_EQUAL(hpu_malloc(0, 1024, &d), HPU_SUCCESS); /* parked c, not a */
  CU_ASSERT_PTR_EQUAL(d, c);
  CU_ASSERT_EQUAL(hpu_free(0, d), HPU_SUCCESS);
  void *big;
  CU_ASSERT_EQUAL(hpu_malloc(0, 3072, &big), HPU_SUCCESS);
  CU_ASSERT_PTR_EQUAL(big, a); /* every parked block went back and merged */
  CU_ASSERT_EQUAL(hpu_free(0, big), HPU_SUCCESS);
  /* more frees than slots, then empty_cache gives everything back */
  void *many[40];
  for (int i = 0; i < 40; i++) CU_ASSERT_EQUAL(hpu_malloc(0, 4096, &many[i]), HPU_SUCCESS);
  for (int i = 0; i < 40; i++) CU_ASSERT_EQUAL(hpu_free(0, many[i]), HPU_SUCCESS);
  CU_ASSERT_EQUAL(hpu_memory_empty_cache(0), HPU_SUCCESS);
  s = stats();
  CU_ASSERT_EQUAL(s.allocated_bytes, 0);
  CU_ASSERT_EQUAL(s.reserved_bytes, 0);
  CU_ASSERT_EQUAL(s.inactive_split_blocks, 0);
}

/* The batch query answers as the single one, over two cards, host memory
 * and freed blocks in one call. */
static void test_batch_liveness(void) {
  fresh();
  void *a, *b, *c1, *freed;
  int host = 0;
  CU_ASSERT_EQUAL_FATAL(hpu_malloc(0, 1000, &a), HPU_SUCCESS);
  CU_ASSERT_EQUAL_FATAL(hpu_malloc(0, 3 * MiB, &b), HPU_SUCCESS);
  CU_ASSERT_EQUAL_FATAL(hpu_malloc(1, 4096, &c1), HPU_SUCCESS);
  CU_ASSERT_EQUAL_FATAL(hpu_malloc(0, 2048, &freed), HPU_SUCCESS);
  CU_ASSERT_EQUAL(hpu_free(0, freed), HPU_SUCCESS);
  const void *ptrs[] = {a, c1, freed, &host, b, (char *)a + 512, c1};
  const uint8_t want[] = {1, 1, 0, 1, 1, 0, 1};
  uint8_t live[7];
  memset(live, 7, sizeof live);
  hpu_memory_are_allocated(ptrs, 7, live);
  for (int i = 0; i < 7; i++) {
    CU_ASSERT_EQUAL(live[i], want[i]);
    CU_ASSERT_EQUAL(live[i], hpu_memory_is_allocated(ptrs[i]));
  }
  hpu_memory_are_allocated(ptrs, 0, live); /* nothing asked, nothing touched */
  CU_ASSERT_EQUAL(hpu_free(0, a), HPU_SUCCESS);
  CU_ASSERT_EQUAL(hpu_free(0, b), HPU_SUCCESS);
  CU_ASSERT_EQUAL(hpu_free(1, c1), HPU_SUCCESS);
  hpu_memory_are_allocated(ptrs, 2, live);
  CU_ASSERT_EQUAL(live[0], 0);
  CU_ASSERT_EQUAL(live[1], 0);
  CU_ASSERT_EQUAL(hpu_memory_empty_cache(1), HPU_SUCCESS);
}

static void test_speed(void) {
  fresh();
  void *keep;
  CU_ASSERT_EQUAL(hpu_malloc(0, 4096, &keep), HPU_SUCCESS);
  const int n = 100000;
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (int i = 0; i < n; i++) {
    void *p;
    hpu_malloc(0, 4096 + (size_t)(i & 7) * 512, &p);
    hpu_free(0, p);
  }
  clock_gettime(CLOCK_MONOTONIC, &t1);
  double ns = ((double)(t1.tv_sec - t0.tv_sec) * 1e9 + (double)(t1.tv_nsec - t0.tv_nsec)) / n;
  printf("\n    hpu_malloc + hpu_free (cached): %.0f ns per pair\n", ns);
  CU_ASSERT_EQUAL(hpu_free(0, keep), HPU_SUCCESS);
  CU_ASSERT_EQUAL(stats().allocated_bytes, 0);
}

int main(void) {
  setenv("HPU_CARD_MEMORY", "64M", 1);
  unsetenv("HABANA_VISIBLE_DEVICES");
  unsetenv("HPU_NUM_CARDS");
  if (CU_initialize_registry() != CUE_SUCCESS) return 2;
  CU_pSuite s = CU_add_suite("runtime_memory", NULL, NULL);
  CU_add_test(s, "reuse and alignment", test_reuse_and_alignment);
  CU_add_test(s, "split and coalesce", test_split_and_coalesce);
  CU_add_test(s, "large pool", test_large_pool);
  CU_add_test(s, "stagger never causes an OOM", test_stagger_never_causes_oom);
  CU_add_test(s, "empty_cache", test_empty_cache);
  CU_add_test(s, "out of memory and recovery", test_oom_and_recovery);
  CU_add_test(s, "bad pointers", test_bad_pointers);
  CU_add_test(s, "second card and arena", test_second_card_and_arena);
  CU_add_test(s, "threads", test_threads);
  CU_add_test(s, "batch liveness query", test_batch_liveness);
  CU_add_test(s, "parked frees", test_parked_frees);
  CU_add_test(s, "malloc/free speed", test_speed);
  CU_basic_set_mode(CU_BRM_VERBOSE);
  CU_basic_run_tests();
  unsigned failures = CU_get_number_of_failures();
  CU_cleanup_registry();
  return failures ? 1 : 0;
}
