/* Device trace events (hpu/trace.h): nothing is recorded unless started;
 * while recording, each executed node becomes one event on its card's
 * engine lane with the host op's correlation id taken when it was
 * submitted, its bytes and (matmul) flops; fused lazy groups are one event
 * named by their members; the per-card limit counts what it drops. */
#include <CUnit/Basic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hpu/hpu.h"

enum { M = 8, K = 16, N = 4 };

static hpu_tensor_t T2(void *data, int64_t a, int64_t b) {
  hpu_tensor_t t;
  int64_t sizes[2] = {a, b};
  CU_ASSERT_EQUAL_FATAL(hpu_tensor_init_contiguous(&t, data, HPU_FLOAT32, 2, sizes), 0);
  return t;
}

static hpu_node_t node_of(hpu_op_t op, int nin) {
  hpu_node_t n;
  memset(&n, 0, sizeof n);
  n.op = op;
  n.compute_dtype = HPU_FLOAT32;
  n.num_inputs = nin;
  n.num_outputs = 1;
  n.params.binary.alpha = hpu_scalar_int(1);
  n.params.matmul.alpha = hpu_scalar_int(1);
  n.correlation = 999; /* whatever the caller leaves here is not used */
  return n;
}

static float *dev_alloc(size_t floats) {
  void *p = NULL;
  CU_ASSERT_EQUAL_FATAL(hpu_malloc(0, floats * sizeof(float), &p), HPU_SUCCESS);
  return p;
}

static hpu_stream_t stream0(void) {
  hpu_stream_t s;
  CU_ASSERT_EQUAL_FATAL(hpu_stream_default(0, &s), HPU_SUCCESS);
  return s;
}

/* Host a[M,K] -> card (DMA), then b = 1 on the card, c = a @ b (MME),
 * c = c + c (TPC): each submitted under its own correlation id. */
static void run_ops(float *host_a, float *a, float *b, float *c) {
  hpu_stream_t s = stream0();
  hpu_node_t n = node_of(HPU_OP_COPY, 1);
  n.inputs[0] = T2(host_a, M, K);
  n.outputs[0] = T2(a, M, K);
  hpu_trace_set_correlation(11);
  CU_ASSERT_EQUAL(hpu_submit(s, &n), HPU_SUCCESS);
  n = node_of(HPU_OP_FILL, 0);
  n.outputs[0] = T2(b, K, N);
  n.params.fill.value = hpu_scalar_float(1);
  hpu_trace_set_correlation(12);
  CU_ASSERT_EQUAL(hpu_submit(s, &n), HPU_SUCCESS);
  n = node_of(HPU_OP_MATMUL, 2);
  n.inputs[0] = T2(a, M, K);
  n.inputs[1] = T2(b, K, N);
  n.outputs[0] = T2(c, M, N);
  hpu_trace_set_correlation(13);
  CU_ASSERT_EQUAL(hpu_submit(s, &n), HPU_SUCCESS);
  n = node_of(HPU_OP_ADD, 2);
  n.inputs[0] = n.inputs[1] = n.outputs[0] = T2(c, M, N);
  hpu_trace_set_correlation(14);
  CU_ASSERT_EQUAL(hpu_submit(s, &n), HPU_SUCCESS);
  hpu_trace_set_correlation(0);
  CU_ASSERT_EQUAL(hpu_stream_synchronize(s), HPU_SUCCESS);
}

static const hpu_trace_event_t *find(const hpu_trace_event_t *ev, size_t n, const char *name) {
  for (size_t i = 0; i < n; i++)
    if (strcmp(ev[i].name, name) == 0) return &ev[i];
  return NULL;
}

static void check_eager_events(const hpu_trace_event_t *ev, size_t n) {
  const hpu_trace_event_t *copy = find(ev, n, "memcpy HtoD"), *mm = find(ev, n, "matmul"),
                          *fill = find(ev, n, "fill"), *add = find(ev, n, "add");
  CU_ASSERT_PTR_NOT_NULL_FATAL(copy);
  CU_ASSERT_PTR_NOT_NULL_FATAL(mm);
  CU_ASSERT_PTR_NOT_NULL_FATAL(fill);
  CU_ASSERT_PTR_NOT_NULL_FATAL(add);
  CU_ASSERT_EQUAL(copy->engine, HPU_ENGINE_DMA);
  CU_ASSERT_EQUAL(copy->correlation, 11);
  CU_ASSERT_EQUAL(copy->bytes, 2 * M * K * sizeof(float));
  CU_ASSERT_EQUAL(fill->engine, HPU_ENGINE_TPC);
  CU_ASSERT_EQUAL(fill->correlation, 12);
  CU_ASSERT_EQUAL(mm->engine, HPU_ENGINE_MME);
  CU_ASSERT_EQUAL(mm->correlation, 13);
  CU_ASSERT_EQUAL(mm->flops, 2 * M * N * K);
  CU_ASSERT_EQUAL(mm->bytes, (M * K + K * N + M * N) * sizeof(float));
  CU_ASSERT_EQUAL(add->engine, HPU_ENGINE_TPC);
  CU_ASSERT_EQUAL(add->correlation, 14);
  CU_ASSERT_EQUAL(add->flops, 0);
  for (size_t i = 0; i < n; i++) {
    CU_ASSERT_EQUAL(ev[i].device, 0);
    CU_ASSERT(ev[i].start_ns <= ev[i].end_ns);
    if (i) CU_ASSERT(ev[i - 1].end_ns <= ev[i].start_ns); /* one in-order queue */
  }
}

static void test_off_records_nothing(void) {
  float host_a[M * K];
  for (int i = 0; i < M * K; i++) host_a[i] = (float)i;
  float *a = dev_alloc(M * K), *b = dev_alloc(K * N), *c = dev_alloc(M * N);
  hpu_lazy_set_enabled(0);
  run_ops(host_a, a, b, c);
  hpu_trace_event_t *ev;
  uint64_t dropped = 7;
  CU_ASSERT_EQUAL(hpu_trace_collect(&ev, &dropped), 0);
  CU_ASSERT_PTR_NULL(ev);
  CU_ASSERT_EQUAL(dropped, 0);
  hpu_free(0, a);
  hpu_free(0, b);
  hpu_free(0, c);
}

static void test_eager_events(void) {
  float host_a[M * K];
  for (int i = 0; i < M * K; i++) host_a[i] = (float)i;
  float *a = dev_alloc(M * K), *b = dev_alloc(K * N), *c = dev_alloc(M * N);
  hpu_lazy_set_enabled(0);
  CU_ASSERT_EQUAL_FATAL(hpu_trace_start(), HPU_SUCCESS);
  run_ops(host_a, a, b, c);
  hpu_trace_stop();
  /* The result is right, and the trace says how it was made. */
  CU_ASSERT_EQUAL(c[0], 2.0f * (float)(K * (K - 1) / 2));
  hpu_trace_event_t *ev;
  uint64_t dropped = 7;
  size_t n = hpu_trace_collect(&ev, &dropped);
  CU_ASSERT_EQUAL(n, 4);
  CU_ASSERT_EQUAL(dropped, 0);
  check_eager_events(ev, n);
  free(ev);
  /* Collected events are gone; stopped means nothing new. */
  run_ops(host_a, a, b, c);
  CU_ASSERT_EQUAL(hpu_trace_collect(&ev, NULL), 0);
  hpu_free(0, a);
  hpu_free(0, b);
  hpu_free(0, c);
}

static void test_lazy_events(void) {
  float host_a[M * K];
  for (int i = 0; i < M * K; i++) host_a[i] = (float)i;
  float *a = dev_alloc(M * K), *b = dev_alloc(K * N), *c = dev_alloc(M * N);
  hpu_lazy_set_enabled(1);
  CU_ASSERT_EQUAL_FATAL(hpu_trace_start(), HPU_SUCCESS);
  run_ops(host_a, a, b, c);
  /* Two elementwise ops in a row fuse: one event, named by both. */
  hpu_stream_t s = stream0();
  hpu_node_t n = node_of(HPU_OP_ADD, 2);
  n.inputs[0] = n.inputs[1] = n.outputs[0] = T2(c, M, N);
  hpu_trace_set_correlation(21);
  CU_ASSERT_EQUAL(hpu_submit(s, &n), HPU_SUCCESS);
  n = node_of(HPU_OP_MUL, 2);
  n.inputs[0] = n.inputs[1] = n.outputs[0] = T2(c, M, N);
  hpu_trace_set_correlation(22);
  CU_ASSERT_EQUAL(hpu_submit(s, &n), HPU_SUCCESS);
  hpu_trace_set_correlation(0);
  CU_ASSERT_EQUAL(hpu_stream_synchronize(s), HPU_SUCCESS);
  hpu_trace_stop();
  float want = 2.0f * (float)(K * (K - 1) / 2) * 2.0f;
  CU_ASSERT_EQUAL(c[0], want * want);
  hpu_trace_event_t *ev;
  size_t count = hpu_trace_collect(&ev, NULL);
  CU_ASSERT_FATAL(count >= 5);
  check_eager_events(ev, count - 1);
  const hpu_trace_event_t *fused = find(ev, count, "fused add+mul");
  CU_ASSERT_PTR_NOT_NULL_FATAL(fused);
  CU_ASSERT_EQUAL(fused->engine, HPU_ENGINE_TPC);
  CU_ASSERT_EQUAL(fused->correlation, 21);
  free(ev);
  hpu_lazy_set_enabled(0);
  hpu_free(0, a);
  hpu_free(0, b);
  hpu_free(0, c);
}

static void test_limit_counts_drops(void) {
  float host_a[M * K];
  for (int i = 0; i < M * K; i++) host_a[i] = (float)i;
  float *a = dev_alloc(M * K), *b = dev_alloc(K * N), *c = dev_alloc(M * N);
  hpu_lazy_set_enabled(0);
  setenv("HPU_TRACE_MAX_EVENTS", "3", 1);
  CU_ASSERT_EQUAL_FATAL(hpu_trace_configure(), HPU_SUCCESS);
  CU_ASSERT_EQUAL_FATAL(hpu_trace_start(), HPU_SUCCESS);
  run_ops(host_a, a, b, c);
  hpu_trace_stop();
  hpu_trace_event_t *ev;
  uint64_t dropped = 0;
  CU_ASSERT_EQUAL(hpu_trace_collect(&ev, &dropped), 3);
  CU_ASSERT_EQUAL(dropped, 1);
  free(ev);
  setenv("HPU_TRACE_MAX_EVENTS", "0", 1);
  CU_ASSERT_EQUAL(hpu_trace_configure(), HPU_ERROR_INVALID_ARGUMENT);
  CU_ASSERT_PTR_NOT_NULL(strstr(hpu_last_error(), "HPU_TRACE_MAX_EVENTS"));
  unsetenv("HPU_TRACE_MAX_EVENTS");
  CU_ASSERT_EQUAL(hpu_trace_configure(), HPU_SUCCESS);
  CU_ASSERT_STRING_EQUAL(hpu_engine_name(HPU_ENGINE_HCCL), "HCCL");
  CU_ASSERT_STRING_EQUAL(hpu_engine_name(42), "?");
  hpu_free(0, a);
  hpu_free(0, b);
  hpu_free(0, c);
}

int main(void) {
  if (hpu_init() != HPU_SUCCESS) {
    fprintf(stderr, "hpu_init: %s\n", hpu_last_error());
    return 1;
  }
  if (CU_initialize_registry() != CUE_SUCCESS) return 1;
  CU_pSuite s = CU_add_suite("trace", NULL, NULL);
  CU_add_test(s, "off records nothing", test_off_records_nothing);
  CU_add_test(s, "eager events", test_eager_events);
  CU_add_test(s, "lazy events", test_lazy_events);
  CU_add_test(s, "limit counts drops", test_limit_counts_drops);
  CU_basic_set_mode(CU_BRM_VERBOSE);
  CU_basic_run_tests();
  unsigned failed = CU_get_number_of_failures() + CU_get_number_of_tests_failed();
  CU_cleanup_registry();
  return failed ? 1 : 0;
}
