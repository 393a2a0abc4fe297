/* The tail family (ops_tailidx.def): nodes run with hpu_node_validate +
 * hpu_node_execute on host buffers, checked against values known by
 * construction; bad index data fails the node and writes nothing. */
#include <CUnit/Basic.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "hpu/hpu.h"
#include "test_nodes.h"

static hpu_node_t node(hpu_op_t op, int nin, int nout) {
  hpu_node_t n;
  memset(&n, 0, sizeof n);
  n.op = op;
  n.num_inputs = nin;
  n.num_outputs = nout;
  n.compute_dtype = HPU_FLOAT32;
  return n;
}

/* self [3] = {10, 20, 30}; src [5] = {1, 2, 3, 4, 5} to positions {0, 2, 0, 2, 2} */
static void test_scatter_reduce_kinds(void) {
  const float want_self[5][3] = {{14, 20, 41}, {30, 20, 1200}, {14.0f / 3, 20, 41.0f / 4}, {10, 20, 30}, {1, 20, 2}};
  const float want_noself[5][3] = {{4, 20, 11}, {3, 20, 40}, {2, 20, 11.0f / 3}, {3, 20, 5}, {1, 20, 2}};
  int64_t idx[5] = {0, 2, 0, 2, 2};
  float src[5] = {1, 2, 3, 4, 5};
  for (int kind = 0; kind < HPU_TAIL_REDUCE_COUNT; kind++)
    for (int inc = 0; inc < 2; inc++) {
      float self[3] = {10, 20, 30};
      hpu_node_t n = node(HPU_OP_TAIL_SCATTER_REDUCE, 2, 1);
      n.inputs[0] = T1(idx, HPU_INT64, 5);
      n.inputs[1] = T1(src, HPU_FLOAT32, 5);
      n.outputs[0] = T1(self, HPU_FLOAT32, 3);
      n.params.nn.i[1] = kind;
      n.params.nn.i[2] = !inc;
      CU_ASSERT_EQUAL_FATAL(run(&n), HPU_SUCCESS);
      const float *want = inc ? want_noself[kind] : want_self[kind];
      for (int k = 0; k < 3; k++) CU_ASSERT_DOUBLE_EQUAL(self[k], want[k], 1e-6);
    }
}

/* index_reduce of int32 rows with a repeated index; mean floors. */
static void test_index_reduce_int(void) {
  int32_t self[2][2] = {{1, -1}, {5, 6}};
  int32_t src[3][2] = {{2, -2}, {7, 8}, {3, 4}};
  int64_t idx[3] = {0, 1, 0};
  hpu_node_t n = node(HPU_OP_TAIL_SCATTER_REDUCE, 2, 1);
  n.inputs[0] = T1(idx, HPU_INT64, 3);
  n.inputs[1] = T2(src, HPU_INT32, 3, 2);
  n.outputs[0] = T2(self, HPU_INT32, 2, 2);
  n.params.nn.i[1] = HPU_TAIL_MEAN;
  n.params.nn.i[2] = 1;
  n.params.nn.i[3] = 1;
  CU_ASSERT_EQUAL_FATAL(run(&n), HPU_SUCCESS);
  /* row 0: (1 + 2 + 3) / 3 = 2, (-1 - 2 + 4) / 3 = 0 (floor of 1/3); row 1: 12 / 2, 14 / 2 */
  CU_ASSERT_EQUAL(self[0][0], 2);
  CU_ASSERT_EQUAL(self[0][1], 0);
  CU_ASSERT_EQUAL(self[1][0], 6);
  CU_ASSERT_EQUAL(self[1][1], 7);
}

static void test_bad_index_writes_nothing(void) {
  float self[3] = {1, 2, 3}, src[2] = {9, 9};
  int64_t idx[2] = {1, 3};
  hpu_node_t n = node(HPU_OP_TAIL_SCATTER_REDUCE, 2, 1);
  n.inputs[0] = T1(idx, HPU_INT64, 2);
  n.inputs[1] = T1(src, HPU_FLOAT32, 2);
  n.outputs[0] = T1(self, HPU_FLOAT32, 3);
  CU_ASSERT_EQUAL(run(&n), HPU_ERROR_OUT_OF_RANGE);
  CU_ASSERT(self[0] == 1 && self[1] == 2 && self[2] == 3);
  idx[1] = -1;
  CU_ASSERT_EQUAL(run(&n), HPU_ERROR_OUT_OF_RANGE);
  n.params.nn.i[1] = 99;
  CU_ASSERT_EQUAL(hpu_node_validate(&n), HPU_ERROR_INVALID_ARGUMENT);
  /* take past the end */
  float out[2];
  int64_t tidx[2] = {-3, 3};
  hpu_node_t t = node(HPU_OP_TAIL_TAKE_PUT, 2, 1);
  t.inputs[0] = T1(self, HPU_FLOAT32, 3);
  t.inputs[1] = T1(tidx, HPU_INT64, 2);
  t.outputs[0] = T1(out, HPU_FLOAT32, 2);
  CU_ASSERT_EQUAL(run(&t), HPU_ERROR_OUT_OF_RANGE);
  tidx[1] = 2;
  CU_ASSERT_EQUAL_FATAL(run(&t), HPU_SUCCESS);
  CU_ASSERT(out[0] == 1 && out[1] == 3);
}

static void test_cummax_ties_nan(void) {
  float x[6] = {1, 3, 3, NAN, 5, NAN};
  float v[6];
  int64_t i[6];
  hpu_node_t n = node(HPU_OP_TAIL_CUMMAXMIN, 1, 2);
  n.inputs[0] = T1(x, HPU_FLOAT32, 6);
  n.outputs[0] = T1(v, HPU_FLOAT32, 6);
  n.outputs[1] = T1(i, HPU_INT64, 6);
  CU_ASSERT_EQUAL_FATAL(run(&n), HPU_SUCCESS);
  int64_t want[6] = {0, 1, 2, 3, 3, 5};
  for (int k = 0; k < 6; k++) CU_ASSERT_EQUAL(i[k], want[k]);
  CU_ASSERT(v[2] == 3 && isnan(v[3]) && isnan(v[4]));
}

static void test_put_accumulate_index_fill(void) {
  double self[2][3] = {{0, 0, 0}, {0, 0, 0}};
  int64_t idx[4] = {5, -1, 0, 5};
  double src[4] = {1, 2, 3, 4};
  hpu_node_t n = node(HPU_OP_TAIL_TAKE_PUT, 2, 1);
  n.inputs[0] = T1(idx, HPU_INT64, 4);
  n.inputs[1] = T1(src, HPU_FLOAT64, 4);
  n.outputs[0] = T2(self, HPU_FLOAT64, 2, 3);
  n.params.nn.i[0] = 1;
  n.params.nn.i[1] = 1;
  CU_ASSERT_EQUAL_FATAL(run(&n), HPU_SUCCESS);
  CU_ASSERT(self[1][2] == 7 && self[0][0] == 3 && self[0][1] == 0);
  int64_t fi[2] = {-1, 0};
  hpu_node_t f = node(HPU_OP_TAIL_INDEX_FILL, 1, 1);
  f.inputs[0] = T1(fi, HPU_INT64, 2);
  f.outputs[0] = T2(self, HPU_FLOAT64, 2, 3);
  f.params.nn.i[0] = 1;
  f.params.nn.s[0] = hpu_scalar_float(-1.5);
  CU_ASSERT_EQUAL_FATAL(run(&f), HPU_SUCCESS);
  CU_ASSERT(self[0][0] == -1.5 && self[1][2] == -1.5 && self[0][1] == 0);
}

/* Rows of x [3, 5] along dim 1 (one row with a NaN, one of ties). */
static void test_select_picks(void) {
  float x[3][5] = {{3, 1, 2, 5, 4}, {2, NAN, 1, NAN, 0}, {7, 7, 1, 1, 9}};
  const float want_v[4][3] = {{2, 1, 1}, {3, NAN, 7}, {3, 1, 7}, {1, 0, 1}};
  const int64_t want_i[4][3] = {{2, 2, 3}, {0, 1, 0}, {0, 2, 0}, {1, 4, 3}};
  for (int pick = 0; pick < HPU_TAIL_SELECT_COUNT; pick++) {
    float v[3];
    int64_t i[3];
    hpu_node_t n = node(HPU_OP_TAIL_SELECT, 1, 2);
    n.inputs[0] = T2(x, HPU_FLOAT32, 3, 5);
    n.outputs[0] = T2(v, HPU_FLOAT32, 3, 1);
    n.outputs[1] = T2(i, HPU_INT64, 3, 1);
    n.params.nn.i[0] = 1;
    n.params.nn.i[1] = pick;
    n.params.nn.i[2] = 2; /* kthvalue: the second smallest */
    CU_ASSERT_EQUAL_FATAL(run(&n), HPU_SUCCESS);
    for (int r = 0; r < 3; r++) {
      if (isnan(want_v[pick][r])) {
        CU_ASSERT(isnan(v[r]));
      } else {
        CU_ASSERT_EQUAL(v[r], want_v[pick][r]);
      }
      CU_ASSERT_EQUAL(i[r], want_i[pick][r]);
    }
  }
  hpu_node_t n = node(HPU_OP_TAIL_SELECT, 1, 2);
  float v;
  int64_t i;
  n.inputs[0] = T2(x, HPU_FLOAT32, 3, 5);
  n.outputs[0] = T2(&v, HPU_FLOAT32, 1, 1);
  n.outputs[1] = T2(&i, HPU_INT64, 1, 1);
  CU_ASSERT_EQUAL(hpu_node_validate(&n), HPU_ERROR_INVALID_ARGUMENT); /* not the keepdim shape */
}

/* searchsorted over {1, 2, 2, 4}: left / right bounds, NaN past the end,
 * int64 values and int32 output, and a sorter over a permuted row. */
static void test_searchsorted(void) {
  float bd[4] = {1, 2, 2, 4}, val[5] = {0, 2, 3, 5, NAN};
  int64_t out[5];
  const int64_t left[5] = {0, 1, 3, 4, 4}, right[5] = {0, 3, 3, 4, 4};
  for (int r = 0; r < 2; r++) {
    hpu_node_t n = node(HPU_OP_TAIL_SEARCHSORTED, 2, 1);
    n.inputs[0] = T1(bd, HPU_FLOAT32, 4);
    n.inputs[1] = T1(val, HPU_FLOAT32, 5);
    n.outputs[0] = T1(out, HPU_INT64, 5);
    n.params.nn.i[0] = r;
    n.params.nn.i[1] = 1;
    CU_ASSERT_EQUAL_FATAL(run(&n), HPU_SUCCESS);
    for (int k = 0; k < 5; k++) CU_ASSERT_EQUAL(out[k], r ? right[k] : left[k]);
  }
  /* two rows of boundaries, stored unsorted, with their sorters */
  int64_t rows[2][3] = {{30, 10, 20}, {3, 1, 2}}, order[2][3] = {{1, 2, 0}, {1, 2, 0}};
  int64_t v[2][2] = {{15, 30}, {0, 2}};
  int32_t o32[2][2];
  hpu_node_t n = node(HPU_OP_TAIL_SEARCHSORTED, 3, 1);
  n.inputs[0] = T2(rows, HPU_INT64, 2, 3);
  n.inputs[1] = T2(v, HPU_INT64, 2, 2);
  n.inputs[2] = T2(order, HPU_INT64, 2, 3);
  n.outputs[0] = T2(o32, HPU_INT32, 2, 2);
  CU_ASSERT_EQUAL_FATAL(run(&n), HPU_SUCCESS);
  CU_ASSERT(o32[0][0] == 1 && o32[0][1] == 2 && o32[1][0] == 0 && o32[1][1] == 1);
  /* a values row count that does not match the boundaries' is refused */
  n.inputs[1] = T2(v, HPU_INT64, 1, 4);
  n.outputs[0] = T2(o32, HPU_INT32, 1, 4);
  CU_ASSERT_EQUAL(hpu_node_validate(&n), HPU_ERROR_INVALID_ARGUMENT);
}

/* 2-d histogram of 6 points over edges {0, 1, 2} x {0, 5, 10}: outside and
 * NaN points are skipped, the last edge belongs to the last bin; weights
 * add; edge counts that disagree with the output fail the node. */
static void test_histogram(void) {
  double pts[6][2] = {{0, 0}, {1, 5}, {2, 10}, {0.5, 9}, {3, 1}, {NAN, 1}};
  double edges[6] = {0, 1, 2, 0, 5, 10}, w[6] = {1, 2, 4, 8, 16, 32}, hist[2][2];
  int64_t counts[2] = {3, 3};
  for (int alg = 0; alg < HPU_TAIL_HIST_COUNT; alg++)
    for (int weighted = 0; weighted < 2; weighted++) {
      hpu_node_t n = node(HPU_OP_TAIL_HISTOGRAM, 3 + weighted, 1);
      n.inputs[0] = T2(pts, HPU_FLOAT64, 6, 2);
      n.inputs[1] = T1(edges, HPU_FLOAT64, 6);
      n.inputs[2] = T1(counts, HPU_INT64, 2);
      if (weighted) n.inputs[3] = T1(w, HPU_FLOAT64, 6);
      n.outputs[0] = T2(hist, HPU_FLOAT64, 2, 2);
      n.params.nn.i[0] = alg;
      CU_ASSERT_EQUAL_FATAL(run(&n), HPU_SUCCESS);
      /* (0,0) -> [0][0]; (1,5) -> [1][1]; (2,10) -> [1][1]; (0.5,9) -> [0][1] */
      CU_ASSERT_EQUAL(hist[0][0], weighted ? 1 : 1);
      CU_ASSERT_EQUAL(hist[0][1], weighted ? 8 : 1);
      CU_ASSERT_EQUAL(hist[1][0], 0);
      CU_ASSERT_EQUAL(hist[1][1], weighted ? 6 : 2);
    }
  counts[1] = 4;
  hpu_node_t n = node(HPU_OP_TAIL_HISTOGRAM, 3, 1);
  n.inputs[0] = T2(pts, HPU_FLOAT64, 6, 2);
  n.inputs[1] = T1(edges, HPU_FLOAT64, 6);
  n.inputs[2] = T1(counts, HPU_INT64, 2);
  n.outputs[0] = T2(hist, HPU_FLOAT64, 2, 2);
  CU_ASSERT_EQUAL(run(&n), HPU_ERROR_INVALID_ARGUMENT);
  n.inputs[0] = T2(counts, HPU_INT64, 1, 2); /* integer points are refused */
  CU_ASSERT_EQUAL(hpu_node_validate(&n), HPU_ERROR_UNSUPPORTED);
}

int main(void) {
  if (CU_initialize_registry() != CUE_SUCCESS) return 1;
  CU_pSuite s = CU_add_suite("tailidx", NULL, NULL);
  CU_add_test(s, "scatter_reduce: every reduction, with and without self", test_scatter_reduce_kinds);
  CU_add_test(s, "index_reduce: integer mean floors", test_index_reduce_int);
  CU_add_test(s, "bad indices fail the node and write nothing", test_bad_index_writes_nothing);
  CU_add_test(s, "cummax: later ties and NaN take the index", test_cummax_ties_nan);
  CU_add_test(s, "put accumulate and index_fill", test_put_accumulate_index_fill);
  CU_add_test(s, "kthvalue, median, nanmedian, mode: NaN and ties", test_select_picks);
  CU_add_test(s, "searchsorted: bounds, NaN, sorter, int32 output", test_searchsorted);
  CU_add_test(s, "histogram: bins, skipped points, weights, bad counts", test_histogram);
  CU_basic_set_mode(CU_BRM_VERBOSE);
  CU_basic_run_tests();
  unsigned failed = CU_get_number_of_failures();
  CU_cleanup_registry();
  return failed ? 1 : 0;
}
