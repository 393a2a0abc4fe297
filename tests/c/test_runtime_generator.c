/* Philox generator state: default seed, seed/offset round trips, how far
 * hpu_generator_prepare advances the offset per op and dtype, thread safety. */
#define _GNU_SOURCE
#include <CUnit/Basic.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "hpu/hpu.h"

static hpu_node_t rng_node(hpu_op_t op, hpu_dtype_t dtype, int64_t numel) {
  hpu_node_t n;
  memset(&n, 0, sizeof n);
  n.op = op;
  n.num_outputs = 1;
  n.compute_dtype = dtype;
  n.outputs[0].dtype = dtype;
  n.outputs[0].ndim = 1;
  n.outputs[0].sizes[0] = numel;
  n.outputs[0].strides[0] = 1;
  return n;
}

static void test_default(void) {
  hpu_generator_t *g = NULL, *g2 = NULL, *g1 = NULL;
  CU_ASSERT_EQUAL_FATAL(hpu_generator_default(0, &g), HPU_SUCCESS);
  CU_ASSERT_EQUAL(hpu_generator_get_seed(g), 67280421310721ULL);
  CU_ASSERT_EQUAL(hpu_generator_get_offset(g), 0);
  CU_ASSERT_EQUAL(hpu_generator_default(0, &g2), HPU_SUCCESS);
  CU_ASSERT_PTR_EQUAL(g, g2);
  CU_ASSERT_EQUAL(hpu_generator_default(1, &g1), HPU_SUCCESS);
  CU_ASSERT_PTR_NOT_EQUAL(g, g1);
  hpu_generator_destroy(g); /* a no-op on a default generator */
  CU_ASSERT_EQUAL(hpu_generator_get_seed(g), 67280421310721ULL);
  CU_ASSERT_EQUAL(hpu_generator_default(77, &g2), HPU_ERROR_INVALID_ARGUMENT);
  CU_ASSERT_PTR_NOT_NULL(strstr(hpu_last_error(), "invalid hpu device index 77"));
}

static void test_seed_offset(void) {
  hpu_generator_t *g;
  CU_ASSERT_EQUAL_FATAL(hpu_generator_create(123, &g), HPU_SUCCESS);
  CU_ASSERT_EQUAL(hpu_generator_get_seed(g), 123);
  CU_ASSERT_EQUAL(hpu_generator_get_offset(g), 0);
  hpu_generator_set_offset(g, 40);
  CU_ASSERT_EQUAL(hpu_generator_get_offset(g), 40);
  hpu_generator_set_seed(g, 7);
  CU_ASSERT_EQUAL(hpu_generator_get_seed(g), 7);
  CU_ASSERT_EQUAL(hpu_generator_get_offset(g), 0); /* a new seed restarts the stream */
  hpu_generator_destroy(g);
}

static void test_prepare(void) {
  hpu_generator_t *g;
  CU_ASSERT_EQUAL_FATAL(hpu_generator_create(99, &g), HPU_SUCCESS);
  struct {
    hpu_op_t op;
    hpu_dtype_t dtype;
    int64_t numel;
    uint64_t advance; /* ceil(numel * words / 4) */
  } cases[] = {
      {HPU_OP_RNG_UNIFORM, HPU_FLOAT32, 10, 3},   {HPU_OP_RNG_UNIFORM, HPU_FLOAT64, 10, 5},
      {HPU_OP_RNG_NORMAL, HPU_FLOAT32, 10, 5},    {HPU_OP_RNG_NORMAL, HPU_FLOAT64, 3, 3},
      {HPU_OP_RNG_BERNOULLI, HPU_FLOAT32, 1, 1},  {HPU_OP_RNG_RANDOM, HPU_INT64, 5, 3},
      {HPU_OP_RNG_UNIFORM, HPU_BFLOAT16, 0, 0},   {HPU_OP_RNG_NORMAL, HPU_FLOAT16, 4, 2},
  };
  uint64_t offset = 0;
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    hpu_node_t n = rng_node(cases[i].op, cases[i].dtype, cases[i].numel);
    CU_ASSERT_EQUAL(hpu_generator_prepare(g, &n), HPU_SUCCESS);
    CU_ASSERT_EQUAL(n.params.rng.seed, 99);
    CU_ASSERT_EQUAL(n.params.rng.offset, offset);
    offset += cases[i].advance;
    CU_ASSERT_EQUAL(hpu_generator_get_offset(g), offset);
  }
  /* 2-d output: numel is the product of the sizes. */
  hpu_node_t n = rng_node(HPU_OP_RNG_UNIFORM, HPU_FLOAT32, 6);
  n.outputs[0].ndim = 2;
  n.outputs[0].sizes[1] = 2;
  CU_ASSERT_EQUAL(hpu_generator_prepare(g, &n), HPU_SUCCESS);
  CU_ASSERT_EQUAL(hpu_generator_get_offset(g), offset + 3);
  n = rng_node(HPU_OP_ADD, HPU_FLOAT32, 4);
  CU_ASSERT_EQUAL(hpu_generator_prepare(g, &n), HPU_ERROR_INVALID_ARGUMENT);
  CU_ASSERT_EQUAL(hpu_generator_prepare(g, NULL), HPU_ERROR_INVALID_ARGUMENT);
  hpu_generator_destroy(g);
}

static hpu_generator_t *shared;
static uint64_t seen[2][1000];

static void *prepare_many(void *arg) {
  int t = (int)(intptr_t)arg;
  for (int i = 0; i < 1000; i++) {
    hpu_node_t n = rng_node(HPU_OP_RNG_UNIFORM, HPU_FLOAT32, 8); /* advances by 2 */
    hpu_generator_prepare(shared, &n);
    seen[t][i] = n.params.rng.offset;
  }
  return NULL;
}

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

static void test_threads(void) {
  CU_ASSERT_EQUAL_FATAL(hpu_generator_create(5, &shared), HPU_SUCCESS);
  pthread_t t[2];
  for (int i = 0; i < 2; i++) pthread_create(&t[i], NULL, prepare_many, (void *)(intptr_t)i);
  for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
  CU_ASSERT_EQUAL(hpu_generator_get_offset(shared), 4000);
  uint64_t all[2000];
  memcpy(all, seen, sizeof all);
  qsort(all, 2000, sizeof *all, cmp_u64);
  int distinct = 1;
  for (int i = 0; i < 2000; i++) distinct &= all[i] == (uint64_t)(2 * i);
  CU_ASSERT(distinct); /* disjoint counter ranges */
  hpu_generator_destroy(shared);
}

int main(void) {
  setenv("HPU_CARD_MEMORY", "64M", 1);
  unsetenv("HABANA_VISIBLE_DEVICES");
  unsetenv("HPU_NUM_CARDS");
  if (CU_initialize_registry() != CUE_SUCCESS) return 2;
  CU_pSuite s = CU_add_suite("runtime_generator", NULL, NULL);
  CU_add_test(s, "default generators", test_default);
  CU_add_test(s, "seed and offset", test_seed_offset);
  CU_add_test(s, "prepare advances the offset", test_prepare);
  CU_add_test(s, "threads", test_threads);
  CU_basic_set_mode(CU_BRM_VERBOSE);
  CU_basic_run_tests();
  unsigned failures = CU_get_number_of_failures();
  CU_cleanup_registry();
  return failures ? 1 : 0;
}
