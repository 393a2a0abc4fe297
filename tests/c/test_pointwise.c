/* Pointwise kernels: nodes run with hpu_node_execute on host buffers, with
 * results known by construction (exact values, or libm references within a
 * stated ulp bound), on every ISA the CPU has; plus validation errors. */
#include <CUnit/Basic.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hpu/hpu.h"
#include "test_nodes.h"
#include "kernels/kernels.h"

static const hpu_isa_t all_isas[] = {HPU_ISA_GENERIC, HPU_ISA_AVX2, HPU_ISA_AVX512};

static hpu_node_t pw_node(hpu_op_t op, hpu_dtype_t cdt, hpu_tensor_t out) {
  hpu_node_t n;
  memset(&n, 0, sizeof n);
  n.op = op;
  n.compute_dtype = cdt;
  n.num_outputs = 1;
  n.outputs[0] = out;
  return n;
}

static void add_in(hpu_node_t *n, hpu_tensor_t t) { n->inputs[n->num_inputs++] = t; }

static void scalar_operand(hpu_node_t *n, int k, hpu_scalar_t s) {
  n->params.pointwise.scalar_operands |= 1u << k;
  n->params.pointwise.operand[k] = s;
}

static void expect_error(const hpu_node_t *n, hpu_status_t code, const char *needle) {
  hpu_status_t st = hpu_node_validate(n);
  CU_ASSERT_EQUAL(st, code);
  if (st != HPU_SUCCESS && !strstr(hpu_last_error(), needle)) {
    fprintf(stderr, "\nmessage '%s' lacks '%s'\n", hpu_last_error(), needle);
    CU_FAIL("error message");
  }
}

static double ulp_diff(float a, float b) {
  if (a == b || (a != a && b != b)) return 0;
  return fabs((double)a - (double)b) / fabs(nextafterf(b, INFINITY) - b);
}

/* exp, sigmoid and silu have hand-written AVX-512 and AVX2 loops: bit for
 * bit the results of the generic build of the same formula, over the whole
 * range (subnormal results, overflow, NaN, infinities, -0, huge inputs),
 * with a tail. */
static void test_exp_family_same_bits_on_every_isa(void) {
  enum { N = 200003 };
  float *x = malloc(N * sizeof(float)), *y0 = malloc(N * sizeof(float)), *y1 = malloc(N * sizeof(float));
  for (int i = 0; i < N; i++) x[i] = -110.0f + 200.0f * (float)i / N;
  /* and the edges of the kernels' fast paths (all lanes in [-87, 88]), with far-out values in the same vector */
  float special[] = {0.0f,   -0.0f,   INFINITY, -INFINITY, NAN,    -NAN,    1e-40f,  88.72f,  88.73f,
                     -103.97f, -104.0f, -87.5f, -87.0f, -86.99f, 88.0f, 88.01f, 1e8f, -1e8f, 3e38f, -3e38f, 200.0f, -200.0f};
  memcpy(x, special, sizeof special);
  /* every binary exponent, both signs: huge inputs reduce to nonsense that only the fix-ups correct */
  for (int i = 0; i < 4096; i++)
    x[64 + i] = ldexpf((i & 1 ? -1.0f : 1.0f) * (1.0f + (float)(i % 7) / 7.0f), (i / 2) % 256 - 128);
  hpu_op_t ops[] = {HPU_OP_EXP, HPU_OP_SIGMOID, HPU_OP_SILU};
  for (size_t o = 0; o < sizeof ops / sizeof *ops; o++) {
    hpu_kernels_set_isa(HPU_ISA_GENERIC);
    hpu_node_t n = pw_node(ops[o], HPU_FLOAT32, T1(y0, HPU_FLOAT32, N));
    add_in(&n, T1(x, HPU_FLOAT32, N));
    CU_ASSERT_EQUAL_FATAL(run(&n), HPU_SUCCESS);
    static const hpu_isa_t clones[] = {HPU_ISA_AVX2, HPU_ISA_AVX512};
    for (size_t v = 0; v < sizeof clones / sizeof *clones; v++) {
      hpu_kernels_set_isa(clones[v]);
      n = pw_node(ops[o], HPU_FLOAT32, T1(y1, HPU_FLOAT32, N));
      add_in(&n, T1(x, HPU_FLOAT32, N));
      CU_ASSERT_EQUAL_FATAL(run(&n), HPU_SUCCESS);
      int differ = 0;
      for (int i = 0; i < N; i++) {
        int both_nan = y0[i] != y0[i] && y1[i] != y1[i];
        if (!both_nan && memcmp(&y0[i], &y1[i], sizeof(float)) != 0) {
          if (!differ)
            fprintf(stderr, "\n%s(%a): generic %a, isa %d %a\n", hpu_op_name(ops[o]), x[i], y0[i], (int)clones[v],
                    y1[i]);
          differ++;
        }
      }
      CU_ASSERT_EQUAL(differ, 0);
    }
  }
  hpu_kernels_set_isa(HPU_ISA_AVX512);
  free(x);
  free(y0);
  free(y1);
}

/* exp/log/tanh/sigmoid/gelu vs libm in double, large enough for the
 * parallel and vector paths, plus special values. */
static void test_transcendental(void) {
  enum { N = 100003 };
  float *x = malloc(N * sizeof(float)), *y = malloc(N * sizeof(float));
  for (int i = 0; i < N; i++) x[i] = -100.0f + 200.0f * (float)i / N;
  float special[] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, 1e-40f, 88.7f, 89.0f, -104.0f};
  memcpy(x, special, sizeof special);
  for (size_t ii = 0; ii < sizeof all_isas / sizeof *all_isas; ii++) {
    hpu_kernels_set_isa(all_isas[ii]);
    struct {
      hpu_op_t op;
      double (*ref)(double);
      double tol_ulp;
    } cases[] = {{HPU_OP_EXP, exp, 2}, {HPU_OP_TANH, tanh, 3}, {HPU_OP_SQRT, sqrt, 0}};
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
      hpu_node_t n = pw_node(cases[c].op, HPU_FLOAT32, T1(y, HPU_FLOAT32, N));
      add_in(&n, T1(x, HPU_FLOAT32, N));
      CU_ASSERT_EQUAL_FATAL(run(&n), HPU_SUCCESS);
      double worst = 0;
      for (int i = 0; i < N; i++) {
        float want = (float)cases[c].ref(x[i]);
        double d = ulp_diff(y[i], want);
        if (d > worst) worst = d;
      }
      if (worst > cases[c].tol_ulp)
        fprintf(stderr, "\n%s: %g ulp\n", hpu_op_name(cases[c].op), worst);
      CU_ASSERT(worst <= cases[c].tol_ulp);
    }
    /* log over positive values incl. subnormals */
    float *xp = malloc(N * sizeof(float));
    for (int i = 0; i < N; i++) xp[i] = ldexpf(1.0f + (float)i / N, (i % 300) - 149);
    xp[0] = 0.0f;
    xp[1] = -1.0f;
    xp[2] = INFINITY;
    hpu_node_t n = pw_node(HPU_OP_LOG, HPU_FLOAT32, T1(y, HPU_FLOAT32, N));
    add_in(&n, T1(xp, HPU_FLOAT32, N));
    CU_ASSERT_EQUAL_FATAL(run(&n), HPU_SUCCESS);
    CU_ASSERT(y[0] == -INFINITY);
    CU_ASSERT(isnan(y[1]));
    CU_ASSERT(y[2] == INFINITY);
    double worst = 0;
    for (int i = 3; i < N; i++) {
      double d = ulp_diff(y[i], (float)log(xp[i]));
      if (d > worst) worst = d;
    }
    CU_ASSERT(worst <= 2);
    free(xp);
  }
  hpu_kernels_set_isa(HPU_ISA_AVX512);
  free(x);
  free(y);
}

/* Exact ops with results known by construction. */
static void test_exact_unary_binary(void) {
  float a[6] = {-2.5f, -0.5f, 0.5f, 1.5f, 2.5f, NAN}, b[6] = {2, -2, 2, 2, -2, 1}, o[6];
  hpu_node_t n = pw_node(HPU_OP_ROUND, HPU_FLOAT32, T1(o, HPU_FLOAT32, 6));
  add_in(&n, T1(a, HPU_FLOAT32, 6));
  CU_ASSERT_EQUAL(run(&n), HPU_SUCCESS);
  CU_ASSERT(o[0] == -2 && o[1] == -0.0f && o[2] == 0 && o[3] == 2 && o[4] == 2 && isnan(o[5]));
  n.op = HPU_OP_SIGN;
  CU_ASSERT_EQUAL(run(&n), HPU_SUCCESS);
  CU_ASSERT(o[0] == -1 && o[2] == 1 && o[5] == 0);
  n = pw_node(HPU_OP_REMAINDER, HPU_FLOAT32, T1(o, HPU_FLOAT32, 6));
  add_in(&n, T1(a, HPU_FLOAT32, 6));
  add_in(&n, T1(b, HPU_FLOAT32, 6));
  CU_ASSERT_EQUAL(run(&n), HPU_SUCCESS);
  CU_ASSERT(o[0] == 1.5f && o[1] == -0.5f && o[3] == 1.5f && o[4] == -1.5f);
  n.op = HPU_OP_MAXIMUM;
  CU_ASSERT_EQUAL(run(&n), HPU_SUCCESS);
  CU_ASSERT(o[0] == 2 && o[1] == -0.5f && isnan(o[5]));
  /* comparison into bool with a scalar operand */
  uint8_t m[6];
  n = pw_node(HPU_OP_GT, HPU_FLOAT32, T1(m, HPU_BOOL, 6));
  add_in(&n, T1(a, HPU_FLOAT32, 6));
  scalar_operand(&n, 1, hpu_scalar_float(0.5));
  CU_ASSERT_EQUAL(run(&n), HPU_SUCCESS);
  CU_ASSERT(m[0] == 0 && m[2] == 0 && m[3] == 1 && m[4] == 1 && m[5] == 0);
  /* integer floor-remainder and powi */
  int32_t ia[4] = {-7, 7, -7, 3}, ib[4] = {2, -2, 3, -1}, io[4];
  n = pw_node(HPU_OP_REMAINDER, HPU_INT32, T1(io, HPU_INT32, 4));
  add_in(&n, T1(ia, HPU_INT32, 4));
  add_in(&n, T1(ib, HPU_INT32, 4));
  CU_ASSERT_EQUAL(run(&n), HPU_SUCCESS);
  CU_ASSERT(io[0] == 1 && io[1] == -1 && io[2] == 2 && io[3] == 0);
  n.op = HPU_OP_FMOD;
  CU_ASSERT_EQUAL(run(&n), HPU_SUCCESS);
  CU_ASSERT(io[0] == -1 && io[1] == 1 && io[2] == -1 && io[3] == 0);
  /* integer remainder / fmod by zero fail the node as PyTorch's CPU does,
   * with a tensor and with a scalar divisor */
  ib[2] = 0;
  for (int op = 0; op < 2; op++) {
    n = pw_node(op ? HPU_OP_FMOD : HPU_OP_REMAINDER, HPU_INT32, T1(io, HPU_INT32, 4));
    add_in(&n, T1(ia, HPU_INT32, 4));
    add_in(&n, T1(ib, HPU_INT32, 4));
    CU_ASSERT_EQUAL(run(&n), HPU_ERROR_INVALID_ARGUMENT);
    CU_ASSERT_STRING_EQUAL(hpu_last_error(), "ZeroDivisionError");
    n = pw_node(op ? HPU_OP_FMOD : HPU_OP_REMAINDER, HPU_INT32, T1(io, HPU_INT32, 4));
    add_in(&n, T1(ia, HPU_INT32, 4));
    scalar_operand(&n, 1, hpu_scalar_int(0));
    CU_ASSERT_EQUAL(run(&n), HPU_ERROR_INVALID_ARGUMENT);
  }
  n = pw_node(HPU_OP_POW, HPU_INT32, T1(io, HPU_INT32, 4));
  add_in(&n, T1(ia, HPU_INT32, 4));
  scalar_operand(&n, 1, hpu_scalar_int(3));
  CU_ASSERT_EQUAL(run(&n), HPU_SUCCESS);
  CU_ASSERT(io[0] == -343 && io[1] == 343 && io[3] == 27);
}

/* where with broadcasting, clamp with one bound, addcdiv, lerp on bf16. */
static void test_ternary(void) {
  uint8_t cond[3] = {1, 0, 1};
  float a[2] = {10, 20}, o[6];
  hpu_node_t n = pw_node(HPU_OP_WHERE, HPU_FLOAT32, T2(o, HPU_FLOAT32, 2, 3));
  add_in(&n, T1(cond, HPU_BOOL, 3));
  hpu_tensor_t col = T2(a, HPU_FLOAT32, 2, 1);
  add_in(&n, col);
  scalar_operand(&n, 2, hpu_scalar_int(-1));
  CU_ASSERT_EQUAL(run(&n), HPU_SUCCESS);
  float want[6] = {10, -1, 10, 20, -1, 20};
  CU_ASSERT(memcmp(o, want, sizeof want) == 0);

  float x[4] = {-3, 0.25f, 2, 7};
  n = pw_node(HPU_OP_CLAMP, HPU_FLOAT32, T1(o, HPU_FLOAT32, 4));
  add_in(&n, T1(x, HPU_FLOAT32, 4));
  scalar_operand(&n, 1, hpu_scalar_float(0));
  scalar_operand(&n, 2, hpu_scalar_int(0)); /* absent */
  n.params.pointwise.i[0] = 1;
  CU_ASSERT_EQUAL(run(&n), HPU_SUCCESS);
  CU_ASSERT(o[0] == 0 && o[1] == 0.25f && o[3] == 7);

  float t1[4] = {1, 2, 3, 4}, t2[4] = {2, 4, 8, 16};
  n = pw_node(HPU_OP_ADDCDIV, HPU_FLOAT32, T1(o, HPU_FLOAT32, 4));
  add_in(&n, T1(x, HPU_FLOAT32, 4));
  add_in(&n, T1(t1, HPU_FLOAT32, 4));
  add_in(&n, T1(t2, HPU_FLOAT32, 4));
  n.params.pointwise.s[0] = hpu_scalar_float(2);
  CU_ASSERT_EQUAL(run(&n), HPU_SUCCESS);
  CU_ASSERT(o[0] == -2 && o[1] == 1.25f && o[2] == 2.75f && o[3] == 7.5f);

  /* in place lerp on bf16 with weight 0.5: exact midpoints */
  uint16_t s[2] = {hpu_float_to_bf16(1), hpu_float_to_bf16(-4)};
  uint16_t e[2] = {hpu_float_to_bf16(3), hpu_float_to_bf16(4)};
  n = pw_node(HPU_OP_LERP, HPU_BFLOAT16, T1(s, HPU_BFLOAT16, 2));
  add_in(&n, T1(s, HPU_BFLOAT16, 2));
  add_in(&n, T1(e, HPU_BFLOAT16, 2));
  scalar_operand(&n, 2, hpu_scalar_float(0.5));
  CU_ASSERT_EQUAL(run(&n), HPU_SUCCESS);
  CU_ASSERT(hpu_bf16_to_float(s[0]) == 2 && hpu_bf16_to_float(s[1]) == 0);
}

static void test_arange_tri(void) {
  int64_t r[5];
  hpu_node_t n = pw_node(HPU_OP_ARANGE, HPU_INT64, T1(r, HPU_INT64, 5));
  n.params.pointwise.s[0] = hpu_scalar_int(3);
  n.params.pointwise.s[1] = hpu_scalar_int(-2);
  CU_ASSERT_EQUAL(run(&n), HPU_SUCCESS);
  CU_ASSERT(r[0] == 3 && r[4] == -5);
  float m[12], o[12];
  for (int i = 0; i < 12; i++) m[i] = (float)(i + 1);
  n = pw_node(HPU_OP_TRIU, HPU_FLOAT32, T2(o, HPU_FLOAT32, 3, 4));
  add_in(&n, T2(m, HPU_FLOAT32, 3, 4));
  n.params.pointwise.i[0] = 1;
  CU_ASSERT_EQUAL(run(&n), HPU_SUCCESS);
  for (int i = 0; i < 3; i++)
    for (int j = 0; j < 4; j++) CU_ASSERT(o[i * 4 + j] == (j - i >= 1 ? m[i * 4 + j] : 0));
  n.op = HPU_OP_TRIL; /* in place */
  n.outputs[0] = n.inputs[0];
  n.params.pointwise.i[0] = -1;
  CU_ASSERT_EQUAL(run(&n), HPU_SUCCESS);
  CU_ASSERT(m[0] == 0 && m[4] == 5 && m[5] == 0 && m[8] == 9 && m[9] == 10 && m[10] == 0);
}

/* One Adam step from zero state: exp_avg = (1-b1) g, exp_avg_sq = (1-b2) g^2,
 * and the update is -lr * g/|g| (up to eps) for every element. */
static void test_fused_adam(void) {
  enum { N = 70001 };
  float *p = calloc(N, 4), *g = malloc(N * 4), *ea = calloc(N, 4), *eas = calloc(N, 4);
  for (int i = 0; i < N; i++) g[i] = (i % 2 ? 1.0f : -2.0f);
  float step = 1;
  hpu_node_t n = pw_node(HPU_OP_FUSED_ADAM, HPU_FLOAT32, T1(p, HPU_FLOAT32, N));
  n.num_outputs = 3;
  n.outputs[1] = T1(ea, HPU_FLOAT32, N);
  n.outputs[2] = T1(eas, HPU_FLOAT32, N);
  add_in(&n, T1(g, HPU_FLOAT32, N));
  add_in(&n, T1(&step, HPU_FLOAT32, 1));
  hpu_pointwise_params_t *pp = &n.params.pointwise;
  pp->s[0] = hpu_scalar_float(0.01);
  pp->s[1] = hpu_scalar_float(0.9);
  pp->s[2] = hpu_scalar_float(0.999);
  pp->s[3] = hpu_scalar_float(0);
  pp->s[4] = hpu_scalar_float(1e-8);
  CU_ASSERT_EQUAL_FATAL(run(&n), HPU_SUCCESS);
  int bad = 0;
  for (int i = 0; i < N; i++) {
    float want = i % 2 ? -0.01f : 0.01f;
    if (fabsf(p[i] - want) > 1e-7f || fabsf(ea[i] - 0.1f * g[i]) > 1e-7f ||
        fabsf(eas[i] - 0.001f * g[i] * g[i]) > 1e-8f)
      bad++;
  }
  CU_ASSERT_EQUAL(bad, 0);
  /* found_inf == 1 skips the step */
  float found = 1;
  memcpy(ea, p, 4);
  add_in(&n, T1(&found, HPU_FLOAT32, 1));
  pp->i[2] = 2;
  float before = p[0];
  CU_ASSERT_EQUAL(run(&n), HPU_SUCCESS);
  CU_ASSERT(p[0] == before);
  free(p);
  free(g);
  free(ea);
  free(eas);
}

static void test_validation(void) {
  float a[4], o[4];
  hpu_node_t n = pw_node(HPU_OP_EXP, HPU_INT32, T1(o, HPU_FLOAT32, 4));
  add_in(&n, T1(a, HPU_FLOAT32, 4));
  expect_error(&n, HPU_ERROR_UNSUPPORTED, "exp: not implemented for compute dtype int32");
  n.compute_dtype = HPU_FLOAT32;
  n.num_inputs = 0;
  expect_error(&n, HPU_ERROR_INVALID_ARGUMENT, "expects 1 tensor input");
  n = pw_node(HPU_OP_BITWISE_AND, HPU_FLOAT32, T1(o, HPU_FLOAT32, 4));
  add_in(&n, T1(a, HPU_FLOAT32, 4));
  add_in(&n, T1(a, HPU_FLOAT32, 4));
  expect_error(&n, HPU_ERROR_UNSUPPORTED, "bitwise_and: not implemented for compute dtype float32");
  n = pw_node(HPU_OP_MAXIMUM, HPU_FLOAT32, T1(o, HPU_FLOAT32, 4));
  add_in(&n, T1(a, HPU_FLOAT32, 3));
  add_in(&n, T1(a, HPU_FLOAT32, 4));
  expect_error(&n, HPU_ERROR_INVALID_ARGUMENT, "maximum");
  /* partial overlap of output and input */
  float big[8];
  n = pw_node(HPU_OP_NEG, HPU_FLOAT32, T1(big + 1, HPU_FLOAT32, 4));
  add_in(&n, T1(big, HPU_FLOAT32, 4));
  expect_error(&n, HPU_ERROR_INVALID_ARGUMENT, "partially overlap");
  n = pw_node(HPU_OP_TRIU, HPU_FLOAT32, T1(o, HPU_FLOAT32, 4));
  add_in(&n, T1(a, HPU_FLOAT32, 4));
  expect_error(&n, HPU_ERROR_INVALID_ARGUMENT, "at least 2 dimensions");
  n = pw_node(HPU_OP_FUSED_ADAM, HPU_FLOAT32, T1(o, HPU_FLOAT32, 4));
  add_in(&n, T1(a, HPU_FLOAT32, 4));
  expect_error(&n, HPU_ERROR_INVALID_ARGUMENT, "expects 3 outputs");
}

int main(void) {
  if (CU_initialize_registry() != CUE_SUCCESS) return 1;
  CU_pSuite s = CU_add_suite("pointwise", NULL, NULL);
  CU_add_test(s, "transcendental vs libm", test_transcendental);
  CU_add_test(s, "exp family: same bits on every ISA", test_exp_family_same_bits_on_every_isa);
  CU_add_test(s, "exact unary/binary", test_exact_unary_binary);
  CU_add_test(s, "ternary", test_ternary);
  CU_add_test(s, "arange, triu/tril", test_arange_tri);
  CU_add_test(s, "fused adam", test_fused_adam);
  CU_add_test(s, "validation", test_validation);
  CU_basic_set_mode(CU_BRM_VERBOSE);
  CU_basic_run_tests();
  unsigned failed = CU_get_number_of_failures();
  CU_cleanup_registry();
  return failed ? 1 : 0;
}
