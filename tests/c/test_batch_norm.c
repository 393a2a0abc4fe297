/* HPU_OP_BATCH_NORM / _BACKWARD (batch_norm.c) on host buffers: statistics
 * and output known by construction, gradients against their definition
 * summed in double, eval mode, and bad shapes rejected; float64 on a
 * channel spread float32 cannot hold. */
#include <CUnit/Basic.h>
#include <math.h>
#include <string.h>

#include "hpu/hpu.h"
#include "kernels/kernels.h"

static hpu_tensor_t T(float *d, int nd, int64_t a, int64_t b, int64_t c) {
  hpu_tensor_t t;
  int64_t s[3] = {a, b, c};
  CU_ASSERT_EQUAL_FATAL(hpu_tensor_init_contiguous(&t, d, HPU_FLOAT32, nd, s), 0);
  return t;
}

enum { N = 2, C = 3, HW = 4 };

static void test_batch_norm(void) {
  /* channel c holds c + 1 +- (c + 1): mean c + 1, biased var (c + 1)^2 */
  float x[N * C * HW], y[N * C * HW], st[3 * C], aff[2 * C] = {1, 2, 3, 0.5f, 0, -1};
  for (int n = 0; n < N; n++)
    for (int c = 0; c < C; c++)
      for (int j = 0; j < HW; j++) x[(n * C + c) * HW + j] = (float)(c + 1) * (1 + ((j + n) % 2 ? 1 : -1));
  hpu_node_t f;
  memset(&f, 0, sizeof f);
  f.op = HPU_OP_BATCH_NORM;
  f.num_inputs = 2;
  f.inputs[0] = T(x, 3, N, C, HW);
  f.inputs[1] = T(aff, 2, 2, C, 0);
  f.num_outputs = 2;
  f.outputs[0] = T(y, 3, N, C, HW);
  f.outputs[1] = T(st, 2, 3, C, 0);
  f.params.nn.i[0] = 1;
  f.params.nn.s[0] = hpu_scalar_float(0);
  CU_ASSERT_EQUAL_FATAL(hpu_node_validate(&f), HPU_SUCCESS);
  CU_ASSERT_EQUAL(hpu_node_execute(&f), HPU_SUCCESS);
  for (int c = 0; c < C; c++) {
    CU_ASSERT_DOUBLE_EQUAL(st[c], c + 1, 1e-6);
    CU_ASSERT_DOUBLE_EQUAL(st[C + c], 1.0 / (c + 1), 1e-6);
    CU_ASSERT_DOUBLE_EQUAL(st[2 * C + c], (c + 1) * (c + 1), 1e-5);
  }
  for (int i = 0; i < N * C * HW; i++) {
    int c = i / HW % C;
    double xhat = (x[i] > c + 1) ? 1 : -1;
    CU_ASSERT_DOUBLE_EQUAL(y[i], xhat * aff[c] + aff[C + c], 1e-6);
  }
  /* backward by definition: dx = w invstd (dy - mean(dy) - xhat mean(dy xhat)) */
  float dy[N * C * HW], dx[N * C * HW], dw[C], db[C], stats[2 * C], w[C] = {1, 2, 3};
  for (int i = 0; i < N * C * HW; i++) dy[i] = (float)((i * 7) % 5) - 2;
  memcpy(stats, st, sizeof stats);
  hpu_node_t b;
  memset(&b, 0, sizeof b);
  b.op = HPU_OP_BATCH_NORM_BACKWARD;
  b.num_inputs = 4;
  b.inputs[0] = T(dy, 3, N, C, HW);
  b.inputs[1] = f.inputs[0];
  b.inputs[2] = T(stats, 2, 2, C, 0);
  b.inputs[3] = T(w, 1, C, 0, 0);
  b.num_outputs = 3;
  b.outputs[0] = T(dx, 3, N, C, HW);
  b.outputs[1] = T(dw, 1, C, 0, 0);
  b.outputs[2] = T(db, 1, C, 0, 0);
  b.params.nn.i[0] = 7;
  b.params.nn.i[1] = 1;
  b.params.nn.i[2] = 1;
  CU_ASSERT_EQUAL_FATAL(hpu_node_validate(&b), HPU_SUCCESS);
  CU_ASSERT_EQUAL(hpu_node_execute(&b), HPU_SUCCESS);
  for (int c = 0; c < C; c++) {
    double s = 0, sx = 0, m = N * HW;
    for (int n = 0; n < N; n++)
      for (int j = 0; j < HW; j++) {
        int i = (n * C + c) * HW + j;
        s += dy[i];
        sx += dy[i] * (x[i] > c + 1 ? 1 : -1);
      }
    CU_ASSERT_DOUBLE_EQUAL(db[c], s, 1e-5);
    CU_ASSERT_DOUBLE_EQUAL(dw[c], sx, 1e-5);
    for (int n = 0; n < N; n++)
      for (int j = 0; j < HW; j++) {
        int i = (n * C + c) * HW + j;
        double xhat = x[i] > c + 1 ? 1 : -1;
        CU_ASSERT_DOUBLE_EQUAL(dx[i], w[c] / (c + 1) * (dy[i] - s / m - xhat * sx / m), 1e-5);
      }
  }
  /* eval: dx = dy * w * invstd */
  b.params.nn.i[1] = 0;
  CU_ASSERT_EQUAL(hpu_node_execute(&b), HPU_SUCCESS);
  for (int i = 0; i < N * C * HW; i++) CU_ASSERT_DOUBLE_EQUAL(dx[i], dy[i] * w[i / HW % C] / (i / HW % C + 1), 1e-6);
  /* bad shapes */
  hpu_node_t bad = f;
  bad.inputs[1] = T(aff, 2, 2, 2, 0);
  CU_ASSERT_EQUAL(hpu_node_validate(&bad), HPU_ERROR_INVALID_ARGUMENT);
  bad = f;
  bad.params.nn.i[0] = 0; /* eval needs the running statistics */
  CU_ASSERT_EQUAL(hpu_node_validate(&bad), HPU_ERROR_INVALID_ARGUMENT);
}

static hpu_tensor_t D(double *d, int nd, int64_t a, int64_t b, int64_t c) {
  hpu_tensor_t t;
  int64_t s[3] = {a, b, c};
  CU_ASSERT_EQUAL_FATAL(hpu_tensor_init_contiguous(&t, d, HPU_FLOAT64, nd, s), 0);
  return t;
}

/* float64: channel c holds 1000 +- (c + 1) 1e-5 (in float32 every element
 * rounds to 1000 and the variance to 0): mean 1000, invstd 1e5 / (c + 1),
 * xhat +-1; the gradients as in test_batch_norm. */
static void test_batch_norm_f64(void) {
  double x[N * C * HW], y[N * C * HW], st[3 * C], aff[2 * C] = {1, 2, 3, 0.5, 0, -1};
  for (int n = 0; n < N; n++)
    for (int c = 0; c < C; c++)
      for (int j = 0; j < HW; j++) x[(n * C + c) * HW + j] = 1000 + (c + 1) * 1e-5 * ((j + n) % 2 ? 1 : -1);
  hpu_node_t f;
  memset(&f, 0, sizeof f);
  f.op = HPU_OP_BATCH_NORM;
  f.compute_dtype = HPU_FLOAT64;
  f.num_inputs = 2;
  f.inputs[0] = D(x, 3, N, C, HW);
  f.inputs[1] = D(aff, 2, 2, C, 0);
  f.num_outputs = 2;
  f.outputs[0] = D(y, 3, N, C, HW);
  f.outputs[1] = D(st, 2, 3, C, 0);
  f.params.nn.i[0] = 1;
  f.params.nn.s[0] = hpu_scalar_float(0);
  CU_ASSERT_EQUAL_FATAL(hpu_node_validate(&f), HPU_SUCCESS);
  CU_ASSERT_EQUAL(hpu_node_execute(&f), HPU_SUCCESS);
  for (int c = 0; c < C; c++) {
    CU_ASSERT_DOUBLE_EQUAL(st[c], 1000, 1e-12);
    CU_ASSERT_DOUBLE_EQUAL(st[C + c] * (c + 1) * 1e-5, 1, 1e-6);
  }
  for (int i = 0; i < N * C * HW; i++) {
    int c = i / HW % C;
    double xhat = x[i] > 1000 ? 1 : -1;
    CU_ASSERT_DOUBLE_EQUAL(y[i], xhat * aff[c] + aff[C + c], 1e-6);
  }
  double dy[N * C * HW], dx[N * C * HW], dw[C], db[C], stats[2 * C], w[C] = {1, 2, 3};
  for (int i = 0; i < N * C * HW; i++) dy[i] = (double)((i * 7) % 5) - 2;
  memcpy(stats, st, sizeof stats);
  hpu_node_t b;
  memset(&b, 0, sizeof b);
  b.op = HPU_OP_BATCH_NORM_BACKWARD;
  b.compute_dtype = HPU_FLOAT64;
  b.num_inputs = 4;
  b.inputs[0] = D(dy, 3, N, C, HW);
  b.inputs[1] = f.inputs[0];
  b.inputs[2] = D(stats, 2, 2, C, 0);
  b.inputs[3] = D(w, 1, C, 0, 0);
  b.num_outputs = 3;
  b.outputs[0] = D(dx, 3, N, C, HW);
  b.outputs[1] = D(dw, 1, C, 0, 0);
  b.outputs[2] = D(db, 1, C, 0, 0);
  b.params.nn.i[0] = 7;
  b.params.nn.i[1] = 1;
  b.params.nn.i[2] = 1;
  CU_ASSERT_EQUAL_FATAL(hpu_node_validate(&b), HPU_SUCCESS);
  CU_ASSERT_EQUAL(hpu_node_execute(&b), HPU_SUCCESS);
  for (int c = 0; c < C; c++) {
    double s = 0, sx = 0, m = N * HW, invstd = 1e5 / (c + 1);
    for (int n = 0; n < N; n++)
      for (int j = 0; j < HW; j++) {
        int i = (n * C + c) * HW + j;
        s += dy[i];
        sx += dy[i] * (x[i] > 1000 ? 1 : -1);
      }
    CU_ASSERT_DOUBLE_EQUAL(db[c], s, 1e-12);
    CU_ASSERT_DOUBLE_EQUAL(dw[c], sx, 1e-6);
    for (int n = 0; n < N; n++)
      for (int j = 0; j < HW; j++) {
        int i = (n * C + c) * HW + j;
        double xhat = x[i] > 1000 ? 1 : -1, want = w[c] * invstd * (dy[i] - s / m - xhat * sx / m);
        CU_ASSERT_DOUBLE_EQUAL(dx[i] / invstd, want / invstd, 1e-6);
      }
  }
  /* one float32 operand among float64 ones is refused */
  hpu_node_t bad = f;
  bad.inputs[1].dtype = HPU_FLOAT32;
  CU_ASSERT_EQUAL(hpu_node_validate(&bad), HPU_ERROR_UNSUPPORTED);
}

int main(void) {
  CU_initialize_registry();
  CU_pSuite s = CU_add_suite("batch_norm", NULL, NULL);
  CU_add_test(s, "batch norm by construction and definition", test_batch_norm);
  CU_add_test(s, "float64 batch norm by construction and definition", test_batch_norm_f64);
  CU_basic_set_mode(CU_BRM_VERBOSE);
  CU_basic_run_tests();
  unsigned failed = CU_get_number_of_failures();
  CU_cleanup_registry();
  return failed ? 1 : 0;
}
