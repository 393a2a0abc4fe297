/* Graphs and eager launch on the runtime's streams, and the kernels under
 * the real thread pool: results independent of the thread count. */
#include <CUnit/Basic.h>
#include <math.h>
#include <stdatomic.h>
#include <time.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hpu/hpu.h"
#include "test_nodes.h"

static void test_graph_basics(void) {
  hpu_graph_t *g;
  CU_ASSERT_EQUAL_FATAL(hpu_graph_create(&g), HPU_SUCCESS);
  CU_ASSERT_EQUAL(hpu_graph_num_nodes(g), 0);
  float buf[4];
  hpu_node_t n = fill_node(T1(buf, HPU_FLOAT32, 4), 1);
  for (int i = 0; i < 5; i++) CU_ASSERT_EQUAL(hpu_graph_append(g, &n), HPU_SUCCESS);
  CU_ASSERT_EQUAL(hpu_graph_num_nodes(g), 5);
  hpu_node_t bad = n;
  bad.num_inputs = 1;
  CU_ASSERT_EQUAL(hpu_graph_append(g, &bad), HPU_ERROR_INVALID_ARGUMENT);
  CU_ASSERT_PTR_NOT_NULL(strstr(hpu_last_error(), "fill: expects 0 input(s), got 1"));
  CU_ASSERT_EQUAL(hpu_graph_num_nodes(g), 5);
  hpu_graph_destroy(g);
  hpu_graph_destroy(NULL);
}

static void test_graph_launch_in_order(void) {
  enum { N = 100000 };
  hpu_stream_t s;
  CU_ASSERT_EQUAL_FATAL(hpu_stream_default(0, &s), HPU_SUCCESS);
  float *a, *b, *c;
  CU_ASSERT_EQUAL_FATAL(hpu_malloc(0, N * sizeof(float), (void **)&a), HPU_SUCCESS);
  CU_ASSERT_EQUAL_FATAL(hpu_malloc(0, N * sizeof(float), (void **)&b), HPU_SUCCESS);
  CU_ASSERT_EQUAL_FATAL(hpu_malloc(0, N * sizeof(float), (void **)&c), HPU_SUCCESS);
  hpu_tensor_t ta = T1(a, HPU_FLOAT32, N), tb = T1(b, HPU_FLOAT32, N), tc = T1(c, HPU_FLOAT32, N);
  hpu_graph_t *g;
  CU_ASSERT_EQUAL_FATAL(hpu_graph_create(&g), HPU_SUCCESS);
  hpu_node_t n = fill_node(ta, 1.5);
  CU_ASSERT_EQUAL(hpu_graph_append(g, &n), HPU_SUCCESS);
  n = fill_node(tb, 2.0);
  CU_ASSERT_EQUAL(hpu_graph_append(g, &n), HPU_SUCCESS);
  n = binary_node(HPU_OP_ADD, tc.dtype, tc, ta, tb); /* c = 3.5 */
  CU_ASSERT_EQUAL(hpu_graph_append(g, &n), HPU_SUCCESS);
  n = binary_node(HPU_OP_MUL, tc.dtype, tc, tc, tb); /* c = 7 (in place) */
  CU_ASSERT_EQUAL(hpu_graph_append(g, &n), HPU_SUCCESS);
  CU_ASSERT_EQUAL(hpu_graph_launch(g, s), HPU_SUCCESS); /* g is owned by the stream now */
  /* eager launches queue behind the graph */
  n = binary_node(HPU_OP_SUB, tc.dtype, tc, tc, ta); /* 5.5 */
  CU_ASSERT_EQUAL(hpu_launch(s, &n), HPU_SUCCESS);
  n = node_of(HPU_OP_RELU, HPU_FLOAT32);
  n.num_inputs = 1;
  n.inputs[0] = tc;
  n.outputs[0] = ta; /* a = 5.5 */
  CU_ASSERT_EQUAL(hpu_launch(s, &n), HPU_SUCCESS);
  CU_ASSERT_EQUAL(hpu_stream_synchronize(s), HPU_SUCCESS);
  int bad = 0;
  for (int i = 0; i < N; i++) bad += c[i] != 5.5f || a[i] != 5.5f;
  CU_ASSERT_EQUAL(bad, 0);
  /* an invalid eager node fails at once, nothing is queued */
  n = binary_node(HPU_OP_ADD, tc.dtype, tc, ta, T1(b, HPU_FLOAT32, 7));
  CU_ASSERT_EQUAL(hpu_launch(s, &n), HPU_ERROR_INVALID_ARGUMENT);
  CU_ASSERT_PTR_NOT_NULL(strstr(hpu_last_error(), "does not broadcast"));
  CU_ASSERT_EQUAL(hpu_stream_synchronize(s), HPU_SUCCESS);
  /* an empty graph is fine; a bad stream fails and still frees the graph */
  CU_ASSERT_EQUAL_FATAL(hpu_graph_create(&g), HPU_SUCCESS);
  CU_ASSERT_EQUAL(hpu_graph_launch(g, s), HPU_SUCCESS);
  CU_ASSERT_EQUAL_FATAL(hpu_graph_create(&g), HPU_SUCCESS);
  n = fill_node(ta, 0);
  CU_ASSERT_EQUAL(hpu_graph_append(g, &n), HPU_SUCCESS);
  hpu_stream_t bogus = {0, 1LL << 40};
  CU_ASSERT_NOT_EQUAL(hpu_graph_launch(g, bogus), HPU_SUCCESS);
  hpu_free(0, a);
  hpu_free(0, b);
  hpu_free(0, c);
}

static atomic_int gate; /* 1 lets the blocking task finish */

static hpu_status_t wait_for_gate(void *arg) {
  (void)arg;
  struct timespec t0, t;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  do { /* bounded: a broken test must not hang the suite */
    clock_gettime(CLOCK_MONOTONIC, &t);
    if (t.tv_sec - t0.tv_sec > 10) return hpu_error(HPU_ERROR_SYSTEM, "gate never opened");
  } while (!atomic_load(&gate));
  return HPU_SUCCESS;
}

/* Small eager ops may run on the launching thread, but only when the queue
 * is idle: behind queued work they wait their turn like any other. */
static void test_tiny_ops_keep_stream_order(void) {
  hpu_stream_t s;
  CU_ASSERT_EQUAL_FATAL(hpu_stream_default(0, &s), HPU_SUCCESS);
  float *a;
  CU_ASSERT_EQUAL_FATAL(hpu_malloc(0, 16 * sizeof(float), (void **)&a), HPU_SUCCESS);
  hpu_tensor_t ta = T1(a, HPU_FLOAT32, 16);
  /* idle queue: done when the launch returns or soon after, and the card
   * reads as idle once it is (the counters stay consistent) */
  hpu_node_t n = fill_node(ta, 3);
  CU_ASSERT_EQUAL(hpu_launch(s, &n), HPU_SUCCESS);
  CU_ASSERT_EQUAL(hpu_stream_synchronize(s), HPU_SUCCESS);
  CU_ASSERT_EQUAL(hpu_stream_query(s), HPU_SUCCESS);
  CU_ASSERT_EQUAL(a[0], 3.0f);
  CU_ASSERT_EQUAL(a[15], 3.0f);
  /* busy queue: the tiny ops queue behind the blocking task */
  atomic_store(&gate, 0);
  CU_ASSERT_EQUAL(hpu_stream_enqueue(s, wait_for_gate, NULL, NULL), HPU_SUCCESS);
  n = fill_node(ta, 5);
  CU_ASSERT_EQUAL(hpu_launch(s, &n), HPU_SUCCESS);
  n = binary_node(HPU_OP_MUL, ta.dtype, ta, ta, ta); /* 25 only after the fill */
  CU_ASSERT_EQUAL(hpu_launch(s, &n), HPU_SUCCESS);
  CU_ASSERT_EQUAL(hpu_stream_query(s), HPU_ERROR_NOT_READY);
  int early = 0;
  for (int i = 0; i < 16; i++) early += a[i] != 3.0f;
  CU_ASSERT_EQUAL(early, 0);
  atomic_store(&gate, 1);
  CU_ASSERT_EQUAL(hpu_stream_synchronize(s), HPU_SUCCESS);
  int bad = 0;
  for (int i = 0; i < 16; i++) bad += a[i] != 25.0f;
  CU_ASSERT_EQUAL(bad, 0);
  hpu_free(0, a);
}

/* Same results for 1 and 2 threads: elementwise with broadcasting and RNG. */
static void test_thread_count_independence(void) {
  enum { N = 1 << 20 };
  int saved = hpu_get_num_threads();
  float *x = malloc(N * sizeof *x), *r1 = malloc(N * sizeof *r1), *r2 = malloc(N * sizeof *r2);
  float *u1 = malloc(N * sizeof *u1), *u2 = malloc(N * sizeof *u2);
  hpu_generator_t *gen;
  CU_ASSERT_EQUAL_FATAL(hpu_generator_create(1234, &gen), HPU_SUCCESS);
  for (int t = 1; t <= 2; t++) {
    CU_ASSERT_EQUAL(hpu_set_num_threads(t), HPU_SUCCESS);
    hpu_generator_set_seed(gen, 99);
    hpu_node_t n = node_of(HPU_OP_RNG_NORMAL, HPU_FLOAT32);
    n.outputs[0] = T1(x, HPU_FLOAT32, N);
    n.params.rng.a = 0;
    n.params.rng.b = 1;
    CU_ASSERT_EQUAL(hpu_generator_prepare(gen, &n), HPU_SUCCESS);
    CU_ASSERT_EQUAL(hpu_node_validate(&n), HPU_SUCCESS);
    CU_ASSERT_EQUAL(hpu_node_execute(&n), HPU_SUCCESS);
    CU_ASSERT_EQUAL(hpu_generator_get_offset(gen), (uint64_t)N * 2 / 4);
    /* then uniform from the advanced offset */
    n.op = HPU_OP_RNG_UNIFORM;
    n.outputs[0] = T1(t == 1 ? u1 : u2, HPU_FLOAT32, N);
    CU_ASSERT_EQUAL(hpu_generator_prepare(gen, &n), HPU_SUCCESS);
    CU_ASSERT_EQUAL(hpu_node_execute(&n), HPU_SUCCESS);
    /* y = x * 0.5 - broadcast row [1024] */
    static float row[1024];
    for (int j = 0; j < 1024; j++) row[j] = (float)j;
    int64_t s2[2] = {N / 1024, 1024};
    hpu_tensor_t tx, tr, to;
    hpu_tensor_init_contiguous(&tx, x, HPU_FLOAT32, 2, s2);
    hpu_tensor_init_contiguous(&to, t == 1 ? r1 : r2, HPU_FLOAT32, 2, s2);
    tr = T1(row, HPU_FLOAT32, 1024);
    n = binary_node(HPU_OP_SUB, to.dtype, to, tx, tr);
    n.params.binary.alpha = hpu_scalar_float(0.5);
    CU_ASSERT_EQUAL(hpu_node_validate(&n), HPU_SUCCESS);
    CU_ASSERT_EQUAL(hpu_node_execute(&n), HPU_SUCCESS);
  }
  CU_ASSERT_EQUAL(memcmp(r1, r2, N * sizeof *r1), 0);
  CU_ASSERT_EQUAL(memcmp(u1, u2, N * sizeof *u1), 0);
  CU_ASSERT_NOT_EQUAL(memcmp(u1, x, 64), 0);
  hpu_generator_destroy(gen);
  hpu_set_num_threads(saved);
  free(x);
  free(r1);
  free(r2);
  free(u1);
  free(u2);
}

int main(void) {
  if (hpu_init() != HPU_SUCCESS) {
    fprintf(stderr, "hpu_init: %s\n", hpu_last_error());
    return 1;
  }
  if (CU_initialize_registry() != CUE_SUCCESS) return 1;
  CU_pSuite s = CU_add_suite("graph", NULL, NULL);
  CU_add_test(s, "graph basics", test_graph_basics);
  CU_add_test(s, "graph launch in order", test_graph_launch_in_order);
  CU_add_test(s, "tiny eager ops keep stream order", test_tiny_ops_keep_stream_order);
  CU_add_test(s, "thread count independence", test_thread_count_independence);
  CU_basic_set_mode(CU_BRM_VERBOSE);
  CU_basic_run_tests();
  unsigned failed = CU_get_number_of_failures() + CU_get_number_of_tests_failed();
  CU_cleanup_registry();
  return failed ? 1 : 0;
}
