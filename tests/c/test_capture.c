/* HPU graph capture and replay, with storages rebound at each replay: the
 * graph reads the new inputs, writes the new outputs, and never touches
 * the storages it was captured on. */
#include <CUnit/Basic.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hpu/hpu.h"
#include "test_nodes.h"

enum { N = 1000 };

typedef struct captured_fixture {
  float *in;   /* allocated before the capture: the graph's input */
  float *tmp;  /* allocated and freed inside the capture */
  float *out;  /* allocated inside the capture: the graph's output */
  hpu_captured_t *graph;
  hpu_stream_t stream;
} captured_fixture_t;

/* out = (in + in) * in, through a temporary freed before the capture ends. */
static void capture_square_twice(captured_fixture_t *f) {
  CU_ASSERT_EQUAL_FATAL(hpu_stream_default(0, &f->stream), HPU_SUCCESS);
  CU_ASSERT_EQUAL_FATAL(hpu_malloc(0, N * sizeof(float), (void **)&f->in), HPU_SUCCESS);
  for (int i = 0; i < N; i++) f->in[i] = 1.0f;
  CU_ASSERT_EQUAL_FATAL(hpu_capture_begin(0), HPU_SUCCESS);
  CU_ASSERT_EQUAL_FATAL(hpu_malloc(0, N * sizeof(float), (void **)&f->tmp), HPU_SUCCESS);
  CU_ASSERT_EQUAL_FATAL(hpu_malloc(0, N * sizeof(float), (void **)&f->out), HPU_SUCCESS);
  hpu_tensor_t in = T1(f->in, HPU_FLOAT32, N), tmp = T1(f->tmp, HPU_FLOAT32, N), out = T1(f->out, HPU_FLOAT32, N);
  hpu_node_t n = binary_node(HPU_OP_ADD, HPU_FLOAT32, tmp, in, in);
  CU_ASSERT_EQUAL(hpu_submit(f->stream, &n), HPU_SUCCESS);
  n = binary_node(HPU_OP_MUL, HPU_FLOAT32, out, tmp, in);
  CU_ASSERT_EQUAL(hpu_submit(f->stream, &n), HPU_SUCCESS);
  CU_ASSERT_EQUAL(hpu_free(0, f->tmp), HPU_SUCCESS);
  CU_ASSERT_EQUAL_FATAL(hpu_capture_end(0, &f->graph), HPU_SUCCESS);
  CU_ASSERT_PTR_NOT_NULL_FATAL(f->graph);
  CU_ASSERT_EQUAL(hpu_captured_num_nodes(f->graph), 2);
}

static void release_fixture(captured_fixture_t *f) {
  hpu_captured_destroy(f->graph);
  CU_ASSERT_EQUAL(hpu_free(0, f->in), HPU_SUCCESS);
}

static int count_not(const float *x, float v) {
  int bad = 0;
  for (int i = 0; i < N; i++) bad += x[i] != v;
  return bad;
}

static void test_rebound_replay_reads_and_writes_the_new_storages(void) {
  captured_fixture_t f;
  capture_square_twice(&f);
  float *in2, *out2;
  CU_ASSERT_EQUAL_FATAL(hpu_malloc(0, N * sizeof(float), (void **)&in2), HPU_SUCCESS);
  CU_ASSERT_EQUAL_FATAL(hpu_malloc(0, N * sizeof(float), (void **)&out2), HPU_SUCCESS);
  for (int i = 0; i < N; i++) in2[i] = 3.0f;
  for (int i = 0; i < N; i++) f.out[i] = -1.0f; /* a plain replay would overwrite this */
  hpu_rebind_t r[2] = {{f.out, out2, N * sizeof(float)}, {f.in, in2, N * sizeof(float)}};
  CU_ASSERT_EQUAL(hpu_captured_replay_rebound(f.graph, f.stream, r, 2), HPU_SUCCESS);
  CU_ASSERT_EQUAL(hpu_stream_synchronize(f.stream), HPU_SUCCESS);
  CU_ASSERT_EQUAL(count_not(out2, 18.0f), 0);
  CU_ASSERT_EQUAL(count_not(f.out, -1.0f), 0);
  /* and the plain replay still uses the captured storages */
  CU_ASSERT_EQUAL(hpu_captured_replay(f.graph, f.stream), HPU_SUCCESS);
  CU_ASSERT_EQUAL(hpu_stream_synchronize(f.stream), HPU_SUCCESS);
  CU_ASSERT_EQUAL(count_not(f.out, 2.0f), 0);
  /* the output block goes back to the pool; a block the graph did not
   * allocate is refused */
  CU_ASSERT_EQUAL(hpu_captured_release_block(f.graph, f.out), HPU_SUCCESS);
  CU_ASSERT_EQUAL(hpu_captured_release_block(f.graph, f.out), HPU_ERROR_INVALID_ARGUMENT);
  CU_ASSERT_EQUAL(hpu_captured_release_block(f.graph, f.in), HPU_ERROR_INVALID_ARGUMENT);
  CU_ASSERT_PTR_NOT_NULL(strstr(hpu_last_error(), "was not allocated by this graph's capture"));
  CU_ASSERT_EQUAL(hpu_free(0, f.out), HPU_SUCCESS);
  CU_ASSERT_EQUAL(hpu_free(0, in2), HPU_SUCCESS);
  CU_ASSERT_EQUAL(hpu_free(0, out2), HPU_SUCCESS);
  release_fixture(&f);
}

static void test_rebound_replay_refuses_bad_rebinds_before_running(void) {
  captured_fixture_t f;
  capture_square_twice(&f);
  float *small;
  CU_ASSERT_EQUAL_FATAL(hpu_malloc(0, N * sizeof(float), (void **)&small), HPU_SUCCESS);
  for (int i = 0; i < N; i++) small[i] = 5.0f;
  hpu_rebind_t r[2] = {{f.out, small, (N - 1) * sizeof(float)}, {f.in, small, N * sizeof(float)}};
  CU_ASSERT_EQUAL(hpu_captured_replay_rebound(f.graph, f.stream, r, 2), HPU_ERROR_INVALID_ARGUMENT);
  CU_ASSERT_PTR_NOT_NULL(strstr(hpu_last_error(), "rebound to one of 3996 bytes"));
  r[0] = (hpu_rebind_t){f.in, small, N * sizeof(float)};
  CU_ASSERT_EQUAL(hpu_captured_replay_rebound(f.graph, f.stream, r, 2), HPU_ERROR_INVALID_ARGUMENT);
  CU_ASSERT_PTR_NOT_NULL(strstr(hpu_last_error(), "rebound twice"));
  r[0] = (hpu_rebind_t){NULL, small, N * sizeof(float)};
  CU_ASSERT_EQUAL(hpu_captured_replay_rebound(f.graph, f.stream, r, 2), HPU_ERROR_INVALID_ARGUMENT);
  CU_ASSERT_EQUAL(hpu_captured_replay_rebound(NULL, f.stream, r + 1, 1), HPU_ERROR_INVALID_ARGUMENT);
  CU_ASSERT_EQUAL(hpu_stream_synchronize(f.stream), HPU_SUCCESS);
  CU_ASSERT_EQUAL(count_not(small, 5.0f), 0); /* nothing ran */
  CU_ASSERT_EQUAL(hpu_free(0, small), HPU_SUCCESS);
  CU_ASSERT_EQUAL(hpu_free(0, f.out), HPU_SUCCESS);
  release_fixture(&f);
}

typedef struct other_thread_work {
  hpu_stream_t stream;
  float *buf;
  hpu_status_t st;
  int was_capturing;
} other_thread_work_t;

/* Fills a block of its own with 7 and waits for it, during the capture. */
static void *fill_on_another_thread(void *arg) {
  other_thread_work_t *w = arg;
  w->was_capturing = hpu_capture_active(0);
  w->st = hpu_malloc(0, N * sizeof(float), (void **)&w->buf);
  if (w->st != HPU_SUCCESS) return NULL;
  hpu_node_t n = fill_node(T1(w->buf, HPU_FLOAT32, N), 7);
  w->st = hpu_submit(w->stream, &n);
  if (w->st == HPU_SUCCESS) w->st = hpu_stream_synchronize(w->stream);
  return NULL;
}

static void test_a_demotable_capture_records_only_its_threads_work(void) {
  hpu_stream_t s;
  CU_ASSERT_EQUAL_FATAL(hpu_stream_default(0, &s), HPU_SUCCESS);
  float *mine;
  CU_ASSERT_EQUAL_FATAL(hpu_malloc(0, N * sizeof(float), (void **)&mine), HPU_SUCCESS);
  CU_ASSERT_EQUAL_FATAL(hpu_capture_begin_demotable(0), HPU_SUCCESS);
  CU_ASSERT(hpu_capture_active(0));
  other_thread_work_t w = {.stream = s};
  pthread_t t;
  CU_ASSERT_EQUAL_FATAL(pthread_create(&t, NULL, fill_on_another_thread, &w), 0);
  pthread_join(t, NULL);
  CU_ASSERT_EQUAL(w.st, HPU_SUCCESS);
  CU_ASSERT_FALSE(w.was_capturing);
  CU_ASSERT_EQUAL(count_not(w.buf, 7.0f), 0); /* it ran, during the capture */
  hpu_node_t n = fill_node(T1(mine, HPU_FLOAT32, N), 3);
  CU_ASSERT_EQUAL(hpu_submit(s, &n), HPU_SUCCESS);
  hpu_captured_t *g = NULL;
  CU_ASSERT_EQUAL_FATAL(hpu_capture_end(0, &g), HPU_SUCCESS);
  CU_ASSERT_PTR_NOT_NULL_FATAL(g);
  CU_ASSERT_EQUAL(hpu_captured_num_nodes(g), 1); /* only this thread's fill */
  /* the other thread's block is its own, not the graph's */
  CU_ASSERT_EQUAL(hpu_captured_release_block(g, w.buf), HPU_ERROR_INVALID_ARGUMENT);
  CU_ASSERT_EQUAL(hpu_captured_replay(g, s), HPU_SUCCESS);
  CU_ASSERT_EQUAL(hpu_stream_synchronize(s), HPU_SUCCESS);
  CU_ASSERT_EQUAL(count_not(mine, 3.0f), 0);
  hpu_captured_destroy(g);
  CU_ASSERT_EQUAL(hpu_free(0, w.buf), HPU_SUCCESS);
  CU_ASSERT_EQUAL(hpu_free(0, mine), HPU_SUCCESS);
}

static void test_a_capture_reuses_the_blocks_it_freed(void) {
  hpu_stream_t s;
  CU_ASSERT_EQUAL_FATAL(hpu_stream_default(0, &s), HPU_SUCCESS);
  CU_ASSERT_EQUAL_FATAL(hpu_capture_begin(0), HPU_SUCCESS);
  float *big, *out;
  CU_ASSERT_EQUAL_FATAL(hpu_malloc(0, 2 * N * sizeof(float), (void **)&big), HPU_SUCCESS);
  hpu_node_t n = fill_node(T1(big, HPU_FLOAT32, 2 * N), 1);
  CU_ASSERT_EQUAL(hpu_submit(s, &n), HPU_SUCCESS);
  CU_ASSERT_EQUAL(hpu_free(0, big), HPU_SUCCESS);
  CU_ASSERT_EQUAL(hpu_free(0, big), HPU_ERROR_INVALID_ARGUMENT); /* twice is an error */
  /* the next allocation that fits takes the dead block */
  CU_ASSERT_EQUAL_FATAL(hpu_malloc(0, N * sizeof(float), (void **)&out), HPU_SUCCESS);
  CU_ASSERT_PTR_EQUAL(out, big);
  n = fill_node(T1(out, HPU_FLOAT32, N), 2);
  CU_ASSERT_EQUAL(hpu_submit(s, &n), HPU_SUCCESS);
  hpu_captured_t *g = NULL;
  CU_ASSERT_EQUAL_FATAL(hpu_capture_end(0, &g), HPU_SUCCESS);
  CU_ASSERT_PTR_NOT_NULL_FATAL(g);
  CU_ASSERT(hpu_captured_owns(g, out));
  /* a storage rebound in out's place needs what the first fill reached */
  CU_ASSERT_EQUAL(hpu_captured_extent(g, out), 2 * N * sizeof(float));
  CU_ASSERT_EQUAL(hpu_captured_extent(g, &n), 0);
  float *fresh;
  CU_ASSERT_EQUAL_FATAL(hpu_malloc(0, 2 * N * sizeof(float), (void **)&fresh), HPU_SUCCESS);
  hpu_rebind_t r = {out, fresh, N * sizeof(float)};
  CU_ASSERT_EQUAL(hpu_captured_replay_rebound(g, s, &r, 1), HPU_ERROR_INVALID_ARGUMENT);
  r.to_bytes = 2 * N * sizeof(float);
  CU_ASSERT_EQUAL(hpu_captured_replay_rebound(g, s, &r, 1), HPU_SUCCESS);
  CU_ASSERT_EQUAL(hpu_stream_synchronize(s), HPU_SUCCESS);
  CU_ASSERT_EQUAL(count_not(fresh, 2.0f), 0);
  CU_ASSERT_EQUAL(hpu_captured_release_block(g, out), HPU_SUCCESS);
  CU_ASSERT_FALSE(hpu_captured_owns(g, out));
  CU_ASSERT_EQUAL(hpu_free(0, out), HPU_SUCCESS); /* an ordinary block now */
  hpu_captured_destroy(g);
  CU_ASSERT_EQUAL(hpu_free(0, fresh), HPU_SUCCESS);
}

int main(void) {
  if (hpu_init() != HPU_SUCCESS) {
    fprintf(stderr, "hpu_init: %s\n", hpu_last_error());
    return 1;
  }
  if (CU_initialize_registry() != CUE_SUCCESS) return 1;
  CU_pSuite s = CU_add_suite("capture", NULL, NULL);
  CU_add_test(s, "rebound replay reads and writes the new storages",
              test_rebound_replay_reads_and_writes_the_new_storages);
  CU_add_test(s, "rebound replay refuses bad rebinds before running",
              test_rebound_replay_refuses_bad_rebinds_before_running);
  CU_add_test(s, "a demotable capture records only its thread's work",
              test_a_demotable_capture_records_only_its_threads_work);
  CU_add_test(s, "a capture reuses the blocks it freed", test_a_capture_reuses_the_blocks_it_freed);
  CU_basic_set_mode(CU_BRM_VERBOSE);
  CU_basic_run_tests();
  unsigned failed = CU_get_number_of_failures() + CU_get_number_of_tests_failed();
  CU_cleanup_registry();
  return failed ? 1 : 0;
}
