/* The recipe cache must not hand a graph the plan of a graph with the same
 * shapes whose operands alias differently. y = (x + 1) * 2 fuses into one
 * pass over tiles when y is its own buffer; when y is x shifted by one
 * element (x[1:] = (x[:-1] + 1) * 2), a fused pass would read elements the
 * previous tile already overwrote, so that graph must compile on its own
 * and run node by node. */
#include <CUnit/Basic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hpu/hpu.h"
#include "test_nodes.h"

enum { N = 1 << 20 };

static hpu_stream_t stream0 = {0, 0};

static hpu_tensor_t view(void *storage, int64_t offset_elems) {
  hpu_tensor_t t;
  int64_t n = N;
  CU_ASSERT_EQUAL_FATAL(hpu_tensor_init_contiguous(&t, storage, HPU_FLOAT32, 1, &n), 0);
  t.offset = offset_elems * (int64_t)sizeof(float);
  return t;
}

/* Records and runs y = (x + 1) * 2 through the temporary t. */
static void run_pair(hpu_tensor_t x, hpu_tensor_t t, hpu_tensor_t y) {
  hpu_node_t a = arith_node(HPU_OP_ADD, t, x, NULL, 1), m = arith_node(HPU_OP_MUL, y, t, NULL, 2);
  CU_ASSERT_EQUAL(hpu_submit(stream0, &a), HPU_SUCCESS);
  CU_ASSERT_EQUAL(hpu_submit(stream0, &m), HPU_SUCCESS);
  CU_ASSERT_EQUAL(hpu_lazy_mark_step(0), HPU_SUCCESS); /* a step: the next is compared with it */
  CU_ASSERT_EQUAL(hpu_device_synchronize(0), HPU_SUCCESS);
}

static void test_shifted_output_does_not_reuse_plan(void) {
  hpu_lazy_set_enabled(1);
  float *x, *t, *y;
  CU_ASSERT_EQUAL_FATAL(hpu_malloc(0, (N + 1) * sizeof(float), (void **)&x), HPU_SUCCESS);
  CU_ASSERT_EQUAL_FATAL(hpu_malloc(0, N * sizeof(float), (void **)&t), HPU_SUCCESS);
  CU_ASSERT_EQUAL_FATAL(hpu_malloc(0, N * sizeof(float), (void **)&y), HPU_SUCCESS);
  for (int i = 0; i <= N; i++) x[i] = (float)(i % 1000);

  int64_t fused0 = hpu_metric_get("fused_nodes");
  run_pair(view(x, 0), view(t, 0), view(y, 0)); /* separate output: compiled, fused */
  CU_ASSERT(hpu_metric_get("fused_nodes") > fused0);
  int ok = 1;
  for (int i = 0; i < N && ok; i++) ok = y[i] == ((float)(i % 1000) + 1) * 2;
  CU_ASSERT(ok);

  int64_t compiles = hpu_metric_get("graph_compilation");
  run_pair(view(x, 0), view(t, 0), view(x, 1)); /* same shapes, output overlaps the input */
  CU_ASSERT_EQUAL(hpu_metric_get("graph_compilation"), compiles + 1);
  ok = 1;
  for (int i = 0; i < N && ok; i++) ok = x[i + 1] == ((float)(i % 1000) + 1) * 2;
  if (!ok) fprintf(stderr, "\nx[1:] != (x[:-1] + 1) * 2: a plan of the other aliasing ran\n");
  CU_ASSERT(ok);
  char why[640];
  CU_ASSERT(hpu_recompile_reason(0, why, sizeof why));
  CU_ASSERT_PTR_NOT_NULL(strstr(why, "alias"));

  hpu_free(0, x);
  hpu_free(0, t);
  hpu_free(0, y);
  hpu_lazy_set_enabled(0);
}

int main(void) {
  unsetenv("PT_HPU_RECIPE_CACHE_CONFIG");
  if (hpu_init() != HPU_SUCCESS) return 1;
  if (CU_initialize_registry() != CUE_SUCCESS) return 1;
  CU_pSuite s = CU_add_suite("recipe aliasing", NULL, NULL);
  CU_add_test(s, "a shifted in-place output does not reuse the fused plan",
              test_shifted_output_does_not_reuse_plan);
  CU_basic_set_mode(CU_BRM_VERBOSE);
  CU_basic_run_tests();
  unsigned failures = CU_get_number_of_failures();
  CU_cleanup_registry();
  return failures ? 1 : 0;
}
