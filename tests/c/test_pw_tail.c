/* The pointwise tail kernels (kernels/pw_tail.c): nodes run with
 * hpu_node_execute on host buffers, results known by construction (exact
 * values from the definitions PyTorch's CPU kernels use), and the
 * validation errors. */
#include <CUnit/Basic.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "hpu/hpu.h"
#include "test_nodes.h"

static hpu_node_t tp_node(hpu_op_t op, hpu_dtype_t cdt, hpu_tensor_t out) {
  hpu_node_t n;
  memset(&n, 0, sizeof n);
  n.op = op;
  n.compute_dtype = cdt;
  n.num_outputs = 1;
  n.outputs[0] = out;
  return n;
}

static void run_node(const hpu_node_t *n) {
  CU_ASSERT_EQUAL_FATAL(hpu_node_validate(n), HPU_SUCCESS);
  CU_ASSERT_EQUAL_FATAL(hpu_node_execute(n), HPU_SUCCESS);
}

static void expect_error(const hpu_node_t *n, const char *needle) {
  CU_ASSERT_NOT_EQUAL(hpu_node_validate(n), HPU_SUCCESS);
  if (!strstr(hpu_last_error(), needle)) {
    fprintf(stderr, "\nmessage '%s' lacks '%s'\n", hpu_last_error(), needle);
    CU_FAIL("error message");
  }
}

static int same_float(float a, float b) {
  return (a != a && b != b) || (a == b && signbit(a) == signbit(b));
}

static void test_float_binary(void) {
  float x[] = {1.5f, -2.0f, 0.0f, -0.0f, INFINITY, NAN, 3.0f, 1.0f};
  float y[] = {-0.0f, 3.0f, -1.0f, 2.0f, INFINITY, 1.0f, NAN, 2.0f};
  float o[8];
  struct { hpu_op_t op; float want[8]; } cases[] = {
      {HPU_OP_COPYSIGN, {-1.5f, 2.0f, -0.0f, 0.0f, INFINITY, NAN, 3.0f, 1.0f}},
      {HPU_OP_FMAX, {1.5f, 3.0f, 0.0f, 2.0f, INFINITY, 1.0f, 3.0f, 2.0f}},
      {HPU_OP_FMIN, {-0.0f, -2.0f, -1.0f, -0.0f, INFINITY, 1.0f, 3.0f, 1.0f}},
      {HPU_OP_HEAVISIDE, {1.0f, 0.0f, -1.0f, 2.0f, 1.0f, 0.0f, 1.0f, 1.0f}},
      {HPU_OP_LOGADDEXP, {0, 0, 0, 0, INFINITY, NAN, NAN, 0}},
  };
  /* logaddexp: log(e^1 + e^2) for the last pair, the rest checked by formula */
  cases[4].want[7] = 2.0f + log1pf(expf(-1.0f));
  for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
    hpu_node_t n = tp_node(cases[c].op, HPU_FLOAT32, T1(o, HPU_FLOAT32, 8));
    n.num_inputs = 2;
    n.inputs[0] = T1(x, HPU_FLOAT32, 8);
    n.inputs[1] = T1(y, HPU_FLOAT32, 8);
    run_node(&n);
    int first = cases[c].op == HPU_OP_LOGADDEXP ? 4 : 0; /* fmin(-0, +0) is either zero */
    for (int i = first; i < 8; i++) {
      if (cases[c].op == HPU_OP_FMIN && i == 3) continue;
      if (!same_float(o[i], cases[c].want[i])) {
        fprintf(stderr, "\nop %s elem %d: %g, want %g\n", hpu_op_name(cases[c].op), i, o[i], cases[c].want[i]);
        CU_FAIL("value");
      }
    }
  }
}

static void test_nextafter_16bit(void) {
  /* bf16 1.0 is 0x3f80: the next bf16 up is 0x3f81, down 0x3f7f; from 0 the
   * smallest subnormal with to's sign (0x0001 / 0x8001) */
  uint16_t x[] = {0x3f80, 0x3f80, 0x0000, 0x8000, 0x3f80};
  uint16_t y[] = {0x4000, 0x0000, 0xbf80, 0x3f80, 0x3f80};
  uint16_t want[] = {0x3f81, 0x3f7f, 0x8001, 0x0001, 0x3f80};
  uint16_t o[5];
  hpu_node_t n = tp_node(HPU_OP_NEXTAFTER, HPU_BFLOAT16, T1(o, HPU_BFLOAT16, 5));
  n.num_inputs = 2;
  n.inputs[0] = T1(x, HPU_BFLOAT16, 5);
  n.inputs[1] = T1(y, HPU_BFLOAT16, 5);
  run_node(&n);
  for (int i = 0; i < 5; i++) CU_ASSERT_EQUAL(o[i], want[i]);
}

static void test_integer_ops(void) {
  /* gcd on |x|, |y| in the dtype's width: int8 gcd(-128, 0) stays -128 */
  int8_t a[] = {12, -18, 0, -128, 7, 0};
  int8_t b[] = {18, 12, 5, 0, -21, 0};
  int8_t g[6], l[6];
  int8_t want_g[] = {6, 6, 5, -128, 7, 0}, want_l[] = {36, 36, 0, 0, 21, 0};
  hpu_node_t n = tp_node(HPU_OP_GCD, HPU_INT8, T1(g, HPU_INT8, 6));
  n.num_inputs = 2;
  n.inputs[0] = T1(a, HPU_INT8, 6);
  n.inputs[1] = T1(b, HPU_INT8, 6);
  run_node(&n);
  n.op = HPU_OP_LCM;
  n.outputs[0] = T1(l, HPU_INT8, 6);
  run_node(&n);
  for (int i = 0; i < 6; i++) {
    CU_ASSERT_EQUAL(g[i], want_g[i]);
    CU_ASSERT_EQUAL(l[i], want_l[i]);
  }
  /* shifts: counts < 0 or >= the width give 0 (left) or the sign (right) */
  int32_t v[] = {-5, 5, -5, 1, 1, -1};
  int32_t s[] = {1, 31, 40, -1, 32, 31};
  int32_t lo[6], ro[6];
  int32_t want_lo[] = {-10, (int32_t)0x80000000u, 0, 0, 0, (int32_t)0x80000000u};
  int32_t want_ro[] = {-3, 0, -1, 0, 0, -1};
  n = tp_node(HPU_OP_SHIFT_LEFT, HPU_INT32, T1(lo, HPU_INT32, 6));
  n.num_inputs = 2;
  n.inputs[0] = T1(v, HPU_INT32, 6);
  n.inputs[1] = T1(s, HPU_INT32, 6);
  run_node(&n);
  n.op = HPU_OP_SHIFT_RIGHT;
  n.outputs[0] = T1(ro, HPU_INT32, 6);
  run_node(&n);
  for (int i = 0; i < 6; i++) {
    CU_ASSERT_EQUAL(lo[i], want_lo[i]);
    CU_ASSERT_EQUAL(ro[i], want_ro[i]);
  }
  /* uint8 >> 200: the count read as int8 is negative -> 0 */
  uint8_t u[] = {200}, c[] = {200}, uo[1] = {9};
  n = tp_node(HPU_OP_SHIFT_RIGHT, HPU_UINT8, T1(uo, HPU_UINT8, 1));
  n.num_inputs = 2;
  n.inputs[0] = T1(u, HPU_UINT8, 1);
  n.inputs[1] = T1(c, HPU_UINT8, 1);
  run_node(&n);
  CU_ASSERT_EQUAL(uo[0], 0);
}

static void test_unary(void) {
  double x[] = {2.75, -2.75, -0.0, 1.2345, -1250.0, INFINITY};
  double fr[6], rd[6], rn[6], m[6];
  int32_t e[6];
  uint8_t sb[6];
  hpu_node_t n = tp_node(HPU_OP_FRAC, HPU_FLOAT64, T1(fr, HPU_FLOAT64, 6));
  n.num_inputs = 1;
  n.inputs[0] = T1(x, HPU_FLOAT64, 6);
  run_node(&n);
  CU_ASSERT_EQUAL(fr[0], 0.75);
  CU_ASSERT_EQUAL(fr[1], -0.75);
  CU_ASSERT(fr[2] == 0 && !signbit(fr[2])); /* -0 - trunc(-0) is +0 */
  CU_ASSERT(isnan(fr[5]));
  n.op = HPU_OP_ROUND_DECIMALS;
  n.outputs[0] = T1(rd, HPU_FLOAT64, 6);
  n.params.pointwise.i[0] = 2;
  run_node(&n);
  CU_ASSERT_EQUAL(rd[3], nearbyint(1.2345 * 100.0) / 100.0);
  n.outputs[0] = T1(rn, HPU_FLOAT64, 6);
  n.params.pointwise.i[0] = -2;
  run_node(&n);
  CU_ASSERT_EQUAL(rn[4], -1200.0); /* -12.5 rounds half to even */
  n.op = HPU_OP_SIGNBIT;
  n.params.pointwise.i[0] = 0;
  n.outputs[0] = T1(sb, HPU_BOOL, 6);
  run_node(&n);
  uint8_t want_sb[] = {0, 1, 1, 0, 1, 0};
  for (int i = 0; i < 6; i++) CU_ASSERT_EQUAL(sb[i], want_sb[i]);
  n.op = HPU_OP_FREXP;
  n.num_outputs = 2;
  n.outputs[0] = T1(m, HPU_FLOAT64, 6);
  n.outputs[1] = T1(e, HPU_INT32, 6);
  run_node(&n);
  CU_ASSERT_EQUAL(m[0], 0.6875);
  CU_ASSERT_EQUAL(e[0], 2);
  CU_ASSERT_EQUAL(m[4], -1250.0 / 2048.0);
  CU_ASSERT_EQUAL(e[4], 11);
}

static void test_dist_transform(void) {
  double u[] = {0.0, 0.5, 0.75, 0.999};
  double o[4];
  hpu_node_t n = tp_node(HPU_OP_DIST_TRANSFORM, HPU_FLOAT64, T1(o, HPU_FLOAT64, 4));
  n.num_inputs = 1;
  n.inputs[0] = T1(u, HPU_FLOAT64, 4);
  n.params.pointwise.s[0] = hpu_scalar_float(2.0);
  run_node(&n); /* exponential(2): -log1p(-u) / 2 */
  CU_ASSERT_EQUAL(o[0], 0.0);
  CU_ASSERT_EQUAL(o[1], -log1p(-0.5) / 2.0);
  n.params.pointwise.i[0] = 1; /* cauchy(2, 3): 2 + 3 tan(pi (u - 1/2)) */
  n.params.pointwise.s[1] = hpu_scalar_float(3.0);
  run_node(&n);
  CU_ASSERT_EQUAL(o[1], 2.0);
  CU_ASSERT(fabs(o[2] - 5.0) < 1e-12);
  n.params.pointwise.i[0] = 2; /* geometric(0.5): ceil(log1p(-u) / log(0.5)), at least 1 */
  n.params.pointwise.s[0] = hpu_scalar_float(0.5);
  run_node(&n);
  CU_ASSERT_EQUAL(o[0], 1.0);
  CU_ASSERT_EQUAL(o[1], 1.0);
  CU_ASSERT_EQUAL(o[2], 2.0);
  CU_ASSERT_EQUAL(o[3], 10.0);
}

static void test_validation(void) {
  float f[4];
  int64_t i64[4];
  hpu_node_t n = tp_node(HPU_OP_GCD, HPU_FLOAT32, T1(f, HPU_FLOAT32, 4));
  n.num_inputs = 2;
  n.inputs[0] = T1(f, HPU_FLOAT32, 4);
  n.inputs[1] = T1(f, HPU_FLOAT32, 4);
  expect_error(&n, "not implemented for compute dtype");
  n.op = HPU_OP_HYPOT;
  n.compute_dtype = HPU_INT64;
  expect_error(&n, "not implemented for compute dtype");
  n.op = HPU_OP_SHIFT_LEFT;
  n.compute_dtype = HPU_BOOL;
  expect_error(&n, "not implemented for compute dtype");
  n = tp_node(HPU_OP_FRAC, HPU_FLOAT32, T1(f, HPU_FLOAT32, 4));
  expect_error(&n, "expects 1 tensor input");
  n = tp_node(HPU_OP_FREXP, HPU_FLOAT32, T1(f, HPU_FLOAT32, 4));
  n.num_outputs = 2;
  n.outputs[1] = T1(i64, HPU_INT64, 4);
  n.num_inputs = 1;
  n.inputs[0] = T1(f, HPU_FLOAT32, 4);
  expect_error(&n, "exponent output must be int32");
  n = tp_node(HPU_OP_DIST_TRANSFORM, HPU_FLOAT64, T1(f, HPU_FLOAT32, 4));
  n.num_inputs = 1;
  n.inputs[0] = T1(f, HPU_FLOAT32, 4);
  expect_error(&n, "float64 input");
  hpu_node_t bad = tp_node(HPU_OP_TAILPW_BEGIN, HPU_FLOAT32, T1(f, HPU_FLOAT32, 4));
  expect_error(&bad, "invalid op code");
}

int main(void) {
  if (CU_initialize_registry() != CUE_SUCCESS) return 1;
  CU_pSuite s = CU_add_suite("pointwise tail", NULL, NULL);
  CU_add_test(s, "float binary", test_float_binary);
  CU_add_test(s, "nextafter on 16-bit floats", test_nextafter_16bit);
  CU_add_test(s, "gcd, lcm, shifts", test_integer_ops);
  CU_add_test(s, "frac, round decimals, signbit, frexp", test_unary);
  CU_add_test(s, "distribution transforms", test_dist_transform);
  CU_add_test(s, "validation", test_validation);
  CU_basic_set_mode(CU_BRM_VERBOSE);
  CU_basic_run_tests();
  unsigned failed = CU_get_number_of_failures();
  CU_cleanup_registry();
  return failed ? 1 : 0;
}
