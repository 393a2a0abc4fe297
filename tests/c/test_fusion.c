/* Lazy-mode fusion plans run on host memory against the same nodes run one
 * by one: a broadcast operand inside a group and reductions over the last
 * dim ending a group give the same bytes (fp32 and bf16, one and two
 * threads), and the plan fuses what it should. */
#include <CUnit/Basic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph/fusion.h"
#include "hpu/hpu.h"
#include "test_nodes.h"

enum { R = 37, N = 300 }; /* rows that do not divide the blocks */

/* Reduction of in [R, N] over dim 1 into out (and out1) [R, 1], keepdim
 * form with stride 0 in the reduced dim as the shim makes it. */
static hpu_node_t reduce(hpu_reduce_kind_t kind, hpu_tensor_t in, void *out, void *out1) {
  hpu_node_t n;
  memset(&n, 0, sizeof n);
  n.op = HPU_OP_REDUCE;
  n.num_inputs = 1;
  n.inputs[0] = in;
  n.num_outputs = out1 ? 2 : 1;
  void *outs[2] = {out, out1};
  for (int k = 0; k < n.num_outputs; k++) {
    n.outputs[k] = T2(outs[k], in.dtype, R, 1);
    n.outputs[k].strides[1] = 0;
  }
  n.compute_dtype = in.dtype;
  n.params.nn.i[0] = kind;
  n.params.nn.i[1] = 2;
  n.params.nn.s[0] = hpu_scalar_float(1); /* var's correction */
  return n;
}

typedef struct {
  char *x, *mask, *t[4], *sum, *var, *mean;
} bufs_t;

/* Group 0: (x * 0.125 + mask[N]).sum(-1); group 1: var_mean((x * x - mask) , -1). */
static int build(hpu_node_t *nodes, const bufs_t *b, hpu_dtype_t dt) {
  hpu_tensor_t x = T2(b->x, dt, R, N), mask = T1(b->mask, dt, N);
  hpu_tensor_t t0 = T2(b->t[0], dt, R, N), t1 = T2(b->t[1], dt, R, N);
  hpu_tensor_t t2 = T2(b->t[2], dt, R, N), t3 = T2(b->t[3], dt, R, N);
  nodes[0] = arith_node(HPU_OP_MUL, t0, x, NULL, 0.125);
  nodes[1] = arith_node(HPU_OP_ADD, t1, t0, &mask, 0);
  nodes[2] = reduce(HPU_REDUCE_SUM, t1, b->sum, NULL);
  nodes[3] = arith_node(HPU_OP_MUL, t2, x, &x, 0);
  nodes[4] = arith_node(HPU_OP_SUB, t3, t2, &mask, 0);
  nodes[5] = reduce(HPU_REDUCE_VAR, t3, b->var, b->mean);
  for (int i = 0; i < 6; i++) CU_ASSERT_EQUAL(hpu_node_validate(&nodes[i]), HPU_SUCCESS);
  return 6;
}

static void alloc(bufs_t *b, size_t es) {
  b->x = malloc(R * N * es);
  b->mask = malloc(N * es);
  for (int k = 0; k < 4; k++) b->t[k] = calloc(R * N, es);
  b->sum = calloc(R, es);
  b->var = calloc(R, es);
  b->mean = calloc(R, es);
}

static void release(bufs_t *b) {
  free(b->x);
  free(b->mask);
  for (int k = 0; k < 4; k++) free(b->t[k]);
  free(b->sum);
  free(b->var);
  free(b->mean);
}

static void fill(char *p, hpu_dtype_t dt, int64_t n, uint32_t seed, float scale) {
  for (int64_t i = 0; i < n; i++) {
    seed = seed * 1664525u + 1013904223u;
    float v = ((float)(seed >> 8) / (float)(1u << 24) - 0.5f) * scale;
    if (dt == HPU_FLOAT32) {
      memcpy(p + i * 4, &v, 4);
    } else { /* bf16: the top half of the float's bits (a valid bf16) */
      uint32_t bits;
      memcpy(&bits, &v, 4);
      uint16_t h = (uint16_t)(bits >> 16);
      memcpy(p + i * 2, &h, 2);
    }
  }
}

static void run_case(hpu_dtype_t dt, int threads) {
  size_t es = hpu_dtype_size(dt);
  bufs_t ref, fused;
  alloc(&ref, es);
  alloc(&fused, es);
  fill(ref.x, dt, R * N, 7, 8.0f);
  fill(ref.mask, dt, N, 11, 2.0f);
  memcpy(fused.x, ref.x, R * N * es);
  memcpy(fused.mask, ref.mask, N * es);
  hpu_set_num_threads(threads);

  hpu_node_t nodes[6];
  int n = build(nodes, &ref, dt);
  for (int i = 0; i < n; i++) CU_ASSERT_EQUAL(hpu_node_execute(&nodes[i]), HPU_SUCCESS);

  n = build(nodes, &fused, dt);
  uint8_t dead[6] = {1, 1, 0, 1, 1, 0}; /* the temporaries are freed */
  hpu_plan_t *plan = hpu_plan_build(nodes, n, dead);
  CU_ASSERT_PTR_NOT_NULL_FATAL(plan);
  CU_ASSERT_EQUAL(plan->num_groups, 2);
  CU_ASSERT_EQUAL(plan->fused_nodes, 6);
  CU_ASSERT_EQUAL(plan->dropped_stores, 4);
  CU_ASSERT_EQUAL(plan->groups[0].rows_node, 2);
  CU_ASSERT_EQUAL(plan->groups[0].row_len, N);
  CU_ASSERT_EQUAL(plan->groups[1].rows_node, 5);
  CU_ASSERT_EQUAL(hpu_plan_execute(plan, nodes, n), HPU_SUCCESS);
  hpu_plan_free(plan);

  CU_ASSERT_EQUAL(memcmp(ref.sum, fused.sum, R * es), 0);
  CU_ASSERT_EQUAL(memcmp(ref.var, fused.var, R * es), 0);
  CU_ASSERT_EQUAL(memcmp(ref.mean, fused.mean, R * es), 0);
  /* the intermediates were kept in cache, never written */
  for (int k = 0; k < 4; k++)
    for (int64_t i = 0; i < R * N * (int64_t)es; i++)
      if (fused.t[k][i]) {
        CU_FAIL("a dropped intermediate was written");
        break;
      }
  release(&ref);
  release(&fused);
}

static void test_broadcast_and_row_reductions(void) {
  int saved = hpu_get_num_threads();
  for (int threads = 1; threads <= 2; threads++) {
    run_case(HPU_FLOAT32, threads);
    run_case(HPU_BFLOAT16, threads);
  }
  hpu_set_num_threads(saved);
}

/* A member writing memory that an earlier member reads broadcast (row 0 of
 * its own input) must not join: it would change row 0 before later tiles
 * read it. */
static void test_broadcast_operand_written_later_splits_the_group(void) {
  float *x = malloc(R * N * sizeof *x), *t0 = malloc(R * N * sizeof *t0);
  for (int i = 0; i < R * N; i++) x[i] = (float)(i % 97);
  hpu_tensor_t tx = T2(x, HPU_FLOAT32, R, N), row = T2(x, HPU_FLOAT32, 1, N);
  hpu_tensor_t tt = T2(t0, HPU_FLOAT32, R, N);
  hpu_node_t nodes[3];
  nodes[0] = arith_node(HPU_OP_MUL, tt, tx, NULL, 2.0);
  nodes[1] = arith_node(HPU_OP_ADD, tt, tt, &row, 0);  /* reads row 0 of x, broadcast */
  nodes[2] = arith_node(HPU_OP_MUL, tx, tx, NULL, 3.0); /* writes x in place */
  uint8_t dead[3] = {0, 0, 0};
  hpu_plan_t *plan = hpu_plan_build(nodes, 3, dead);
  CU_ASSERT_PTR_NOT_NULL_FATAL(plan);
  CU_ASSERT_EQUAL(plan->num_groups, 1);
  CU_ASSERT_EQUAL(plan->groups[0].count, 2);
  CU_ASSERT_EQUAL(plan->group_of[2], -1);
  CU_ASSERT_EQUAL(hpu_plan_execute(plan, nodes, 3), HPU_SUCCESS);
  for (int i = 0; i < R * N; i++) {
    float want = (float)(i % 97) * 2.0f + (float)((i % N) % 97);
    if (t0[i] != want) {
      CU_FAIL("broadcast operand read after it was overwritten");
      break;
    }
  }
  hpu_plan_free(plan);
  free(x);
  free(t0);
}

int main(void) {
  if (hpu_init() != HPU_SUCCESS) {
    fprintf(stderr, "hpu_init: %s\n", hpu_last_error());
    return 1;
  }
  if (CU_initialize_registry() != CUE_SUCCESS) return 1;
  CU_pSuite s = CU_add_suite("fusion", NULL, NULL);
  CU_add_test(s, "broadcast operand and row reductions equal node by node",
              test_broadcast_and_row_reductions);
  CU_add_test(s, "broadcast operand written later splits the group",
              test_broadcast_operand_written_later_splits_the_group);
  CU_basic_set_mode(CU_BRM_VERBOSE);
  CU_basic_run_tests();
  unsigned failed = CU_get_number_of_failures() + CU_get_number_of_tests_failed();
  CU_cleanup_registry();
  return failed ? 1 : 0;
}
