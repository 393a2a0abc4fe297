/* Pooling (pool.c) on host buffers: max pooling against its definition
 * (values, indices with the first max on ties and NaN winning, the
 * scattered gradient, padding / stride / dilation, bad params), and
 * average pooling's windows and divisors by construction; float64 on
 * values float32 cannot tell apart; the integer forwards (uint8 max, int64
 * average truncating toward zero). */
#include <CUnit/Basic.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "hpu/hpu.h"
#include "kernels/kernels.h"

static hpu_tensor_t T(void *d, hpu_dtype_t dt, int64_t a, int64_t b, int64_t c) {
  hpu_tensor_t t;
  int64_t s[3] = {a, b, c};
  CU_ASSERT_EQUAL_FATAL(hpu_tensor_init_contiguous(&t, d, dt, 3, s), 0);
  return t;
}

enum { P = 3, H = 7, W = 6, KH = 3, KW = 2, SH = 2, SW = 1, PH = 1, PW = 1, DH = 1, DW = 2 };
enum { OH = (H + 2 * PH - DH * (KH - 1) - 1) / SH + 1, OW = (W + 2 * PW - DW * (KW - 1) - 1) / SW + 1 };

static void test_max_pool(void) {
  float x[P * H * W], y[P * OH * OW], dy[P * OH * OW], dx[P * H * W];
  int64_t ix[P * OH * OW];
  for (int i = 0; i < P * H * W; i++) x[i] = (float)((i * 37) % 11);  /* many ties */
  x[H * W + 2 * W + 3] = NAN;                                          /* plane 1 */
  hpu_node_t f;
  memset(&f, 0, sizeof f);
  f.op = HPU_OP_MAX_POOL2D;
  f.num_inputs = 1;
  f.inputs[0] = T(x, HPU_FLOAT32, P, H, W);
  f.num_outputs = 2;
  f.outputs[0] = T(y, HPU_FLOAT32, P, OH, OW);
  f.outputs[1] = T(ix, HPU_INT64, P, OH, OW);
  f.params.nn.i[0] = KH, f.params.nn.i[1] = KW, f.params.nn.i[2] = DH, f.params.nn.i[3] = DW;
  f.params.nn.sizes[0] = SH, f.params.nn.sizes[1] = SW;
  f.params.nn.strides[0] = PH, f.params.nn.strides[1] = PW;
  CU_ASSERT_EQUAL_FATAL(hpu_node_validate(&f), HPU_SUCCESS);
  CU_ASSERT_EQUAL(hpu_node_execute(&f), HPU_SUCCESS);
  float ref_dx[P * H * W];
  memset(ref_dx, 0, sizeof ref_dx);
  for (int q = 0; q < P * OH * OW; q++) dy[q] = (float)(q % 5) - 2;
  for (int p = 0; p < P; p++)
    for (int oh = 0; oh < OH; oh++)
      for (int ow = 0; ow < OW; ow++) {
        float best = -INFINITY;
        int64_t bi = -1;
        for (int a = 0; a < KH; a++)
          for (int b = 0; b < KW; b++) {
            int h = oh * SH - PH + a * DH, w = ow * SW - PW + b * DW;
            if (h < 0 || h >= H || w < 0 || w >= W) continue;
            float v = x[(p * H + h) * W + w];
            if (bi >= 0 && isnan(best)) continue;
            if (bi < 0 || v > best || isnan(v)) best = v, bi = h * W + w;
          }
        int q = (p * OH + oh) * OW + ow;
        CU_ASSERT_EQUAL(ix[q], bi);
        CU_ASSERT(isnan(best) ? isnan(y[q]) : y[q] == best);
        ref_dx[p * H * W + bi] += dy[q];
      }
  hpu_node_t b;
  memset(&b, 0, sizeof b);
  b.op = HPU_OP_MAX_POOL2D_BACKWARD;
  b.num_inputs = 2;
  b.inputs[0] = T(dy, HPU_FLOAT32, P, OH, OW);
  b.inputs[1] = T(ix, HPU_INT64, P, OH, OW);
  b.num_outputs = 1;
  b.outputs[0] = T(dx, HPU_FLOAT32, P, H, W);
  CU_ASSERT_EQUAL_FATAL(hpu_node_validate(&b), HPU_SUCCESS);
  CU_ASSERT_EQUAL(hpu_node_execute(&b), HPU_SUCCESS);
  CU_ASSERT_EQUAL(memcmp(dx, ref_dx, sizeof dx), 0);
  hpu_node_t bad = f;
  bad.params.nn.i[0] = 0;
  CU_ASSERT_EQUAL(hpu_node_validate(&bad), HPU_ERROR_INVALID_ARGUMENT);
  bad = f;
  bad.params.nn.strides[1] = -1;
  CU_ASSERT_EQUAL(hpu_node_validate(&bad), HPU_ERROR_INVALID_ARGUMENT);
  bad = f;
  bad.outputs[1] = T(ix, HPU_INT32, P, OH, OW);
  CU_ASSERT_EQUAL(hpu_node_validate(&bad), HPU_ERROR_UNSUPPORTED);
}

/* Average pooling of ones: an output is the count of its window's cells
 * inside the image over the divisor (that count, the padded window's
 * size, or the override); the backward of ones gives each input the sum
 * of 1 / divisor over the windows holding it. */
static void test_avg_pool(void) {
  enum { AH = 5, AW = 4, K = 3, S = 2, PD = 1, AOH = (AH + 2 * PD - K) / S + 1, AOW = (AW + 2 * PD - K) / S + 1 };
  float x[2 * AH * AW], y[2 * AOH * AOW], g[2 * AOH * AOW], dx[2 * AH * AW];
  for (int i = 0; i < 2 * AH * AW; i++) x[i] = 1;
  for (int i = 0; i < 2 * AOH * AOW; i++) g[i] = 1;
  for (int mode = 0; mode < 3; mode++) { /* 0: count_include_pad, 1: exclude, 2: divisor 4 */
    hpu_node_t f;
    memset(&f, 0, sizeof f);
    f.op = HPU_OP_AVG_POOL2D;
    f.num_inputs = 1;
    f.inputs[0] = T(x, HPU_FLOAT32, 2, AH, AW);
    f.num_outputs = 1;
    f.outputs[0] = T(y, HPU_FLOAT32, 2, AOH, AOW);
    f.params.nn.i[0] = K, f.params.nn.i[1] = K, f.params.nn.i[2] = mode == 0, f.params.nn.i[3] = mode == 2 ? 4 : 0;
    f.params.nn.sizes[0] = S, f.params.nn.sizes[1] = S, f.params.nn.strides[0] = PD, f.params.nn.strides[1] = PD;
    CU_ASSERT_EQUAL_FATAL(hpu_node_validate(&f), HPU_SUCCESS);
    CU_ASSERT_EQUAL(hpu_node_execute(&f), HPU_SUCCESS);
    hpu_node_t b = f;
    b.op = HPU_OP_AVG_POOL2D_BACKWARD;
    b.inputs[0] = T(g, HPU_FLOAT32, 2, AOH, AOW);
    b.outputs[0] = T(dx, HPU_FLOAT32, 2, AH, AW);
    CU_ASSERT_EQUAL_FATAL(hpu_node_validate(&b), HPU_SUCCESS);
    CU_ASSERT_EQUAL(hpu_node_execute(&b), HPU_SUCCESS);
    float ref[2 * AH * AW] = {0};
    for (int p = 0; p < 2; p++)
      for (int oh = 0; oh < AOH; oh++)
        for (int ow = 0; ow < AOW; ow++) {
          int inside = 0;
          for (int a = 0; a < K; a++)
            for (int c = 0; c < K; c++) {
              int h = oh * S - PD + a, w = ow * S - PD + c;
              inside += h >= 0 && h < AH && w >= 0 && w < AW;
            }
          float div = mode == 0 ? K * K : mode == 1 ? (float)inside : 4;
          CU_ASSERT_DOUBLE_EQUAL(y[(p * AOH + oh) * AOW + ow], inside / div, 1e-6);
          for (int a = 0; a < K; a++)
            for (int c = 0; c < K; c++) {
              int h = oh * S - PD + a, w = ow * S - PD + c;
              if (h >= 0 && h < AH && w >= 0 && w < AW) ref[(p * AH + h) * AW + w] += 1 / div;
            }
        }
    for (int i = 0; i < 2 * AH * AW; i++) CU_ASSERT_DOUBLE_EQUAL(dx[i], ref[i], 1e-6);
  }
}

/* float64: x = 1 + i 2^-40 (float32 would round every one to 1), 2 x 2
 * windows, stride 2. The max is each window's last cell, the average the
 * window's mean in double; the backwards scatter dy there / spread dy / 4. */
static void test_pool_f64(void) {
  enum { N = 4, O = 2 };
  double x[2 * N * N], y[2 * O * O], dy[2 * O * O], dx[2 * N * N];
  int64_t ix[2 * O * O];
  for (int i = 0; i < 2 * N * N; i++) x[i] = 1 + ldexp(i, -40);
  for (int i = 0; i < 2 * O * O; i++) dy[i] = 1 + ldexp(i + 1, -40);
  for (int avg = 0; avg < 2; avg++) {
    hpu_node_t f;
    memset(&f, 0, sizeof f);
    f.op = avg ? HPU_OP_AVG_POOL2D : HPU_OP_MAX_POOL2D;
    f.compute_dtype = HPU_FLOAT64;
    f.num_inputs = 1;
    f.inputs[0] = T(x, HPU_FLOAT64, 2, N, N);
    f.num_outputs = avg ? 1 : 2;
    f.outputs[0] = T(y, HPU_FLOAT64, 2, O, O);
    f.outputs[1] = T(ix, HPU_INT64, 2, O, O);
    f.params.nn.i[0] = f.params.nn.i[1] = 2;
    if (!avg) f.params.nn.i[2] = f.params.nn.i[3] = 1;
    f.params.nn.sizes[0] = f.params.nn.sizes[1] = 2;
    CU_ASSERT_EQUAL_FATAL(hpu_node_validate(&f), HPU_SUCCESS);
    CU_ASSERT_EQUAL(hpu_node_execute(&f), HPU_SUCCESS);
    hpu_node_t b;
    memset(&b, 0, sizeof b);
    b.op = avg ? HPU_OP_AVG_POOL2D_BACKWARD : HPU_OP_MAX_POOL2D_BACKWARD;
    b.compute_dtype = HPU_FLOAT64;
    b.params = f.params;
    b.num_inputs = avg ? 1 : 2;
    b.inputs[0] = T(dy, HPU_FLOAT64, 2, O, O);
    b.inputs[1] = T(ix, HPU_INT64, 2, O, O);
    b.num_outputs = 1;
    b.outputs[0] = T(dx, HPU_FLOAT64, 2, N, N);
    CU_ASSERT_EQUAL_FATAL(hpu_node_validate(&b), HPU_SUCCESS);
    CU_ASSERT_EQUAL(hpu_node_execute(&b), HPU_SUCCESS);
    for (int p = 0; p < 2; p++)
      for (int oh = 0; oh < O; oh++)
        for (int ow = 0; ow < O; ow++) {
          int q = (p * O + oh) * O + ow, h = 2 * oh, w = 2 * ow;
          const double *c = x + (p * N + h) * N + w;
          if (avg) {
            CU_ASSERT_EQUAL(y[q], (c[0] + c[1] + c[N] + c[N + 1]) / 4);
            for (int k = 0; k < 4; k++) CU_ASSERT_EQUAL(dx[(p * N + h + k / 2) * N + w + k % 2], dy[q] / 4);
          } else {
            CU_ASSERT_EQUAL(y[q], c[N + 1]);
            CU_ASSERT_EQUAL(ix[q], (h + 1) * N + w + 1);
            CU_ASSERT_EQUAL(dx[(p * N + h + 1) * N + w + 1], dy[q]);
            CU_ASSERT_EQUAL(dx[(p * N + h) * N + w], 0);
          }
        }
  }
}

/* 2 x 2 windows, stride 2, over a 4 x 4 plane: the uint8 max is the
 * window's largest (200 and up, past int8), the int64 average the CPU's
 * truncating division of the window sum. */
static void test_pool_integers(void) {
  uint8_t xb[16], yb[4];
  int64_t ix[4], xl[16], yl[4];
  for (int i = 0; i < 16; i++) xb[i] = (uint8_t)(200 + (i * 5) % 13), xl[i] = i % 2 == 0 ? -4 : -1;
  hpu_node_t f;
  memset(&f, 0, sizeof f);
  f.op = HPU_OP_MAX_POOL2D;
  f.num_inputs = 1;
  f.inputs[0] = T(xb, HPU_UINT8, 1, 4, 4);
  f.num_outputs = 2;
  f.outputs[0] = T(yb, HPU_UINT8, 1, 2, 2);
  f.outputs[1] = T(ix, HPU_INT64, 1, 2, 2);
  f.params.nn.i[0] = f.params.nn.i[1] = 2, f.params.nn.i[2] = f.params.nn.i[3] = 1;
  f.params.nn.sizes[0] = f.params.nn.sizes[1] = 2;
  CU_ASSERT_EQUAL_FATAL(hpu_node_validate(&f), HPU_SUCCESS);
  CU_ASSERT_EQUAL(hpu_node_execute(&f), HPU_SUCCESS);
  for (int q = 0; q < 4; q++) {
    int h = 2 * (q / 2), w = 2 * (q % 2), best = 0;
    for (int k = 0; k < 4; k++) best = xb[(h + k / 2) * 4 + w + k % 2] > best ? xb[(h + k / 2) * 4 + w + k % 2] : best;
    CU_ASSERT_EQUAL(yb[q], best);
    CU_ASSERT_EQUAL(xb[ix[q]], best);
  }
  hpu_node_t a;
  memset(&a, 0, sizeof a);
  a.op = HPU_OP_AVG_POOL2D;
  a.num_inputs = 1;
  a.inputs[0] = T(xl, HPU_INT64, 1, 4, 4);
  a.num_outputs = 1;
  a.outputs[0] = T(yl, HPU_INT64, 1, 2, 2);
  a.params.nn.i[0] = a.params.nn.i[1] = 2;
  a.params.nn.sizes[0] = a.params.nn.sizes[1] = 2;
  CU_ASSERT_EQUAL_FATAL(hpu_node_validate(&a), HPU_SUCCESS);
  CU_ASSERT_EQUAL(hpu_node_execute(&a), HPU_SUCCESS);
  /* every window holds -4, -1, -4, -1: sum -10, truncated to -2 (floor: -3) */
  for (int q = 0; q < 4; q++) CU_ASSERT_EQUAL(yl[q], -2);
  /* an integer backward is refused */
  hpu_node_t b = a;
  b.op = HPU_OP_AVG_POOL2D_BACKWARD;
  b.inputs[0] = T(yl, HPU_INT64, 1, 2, 2);
  b.outputs[0] = T(xl, HPU_INT64, 1, 4, 4);
  CU_ASSERT_EQUAL(hpu_node_validate(&b), HPU_ERROR_UNSUPPORTED);
}

int main(void) {
  CU_initialize_registry();
  CU_pSuite s = CU_add_suite("pool", NULL, NULL);
  CU_add_test(s, "max pooling and its backward by definition", test_max_pool);
  CU_add_test(s, "average pooling of ones: windows and divisors", test_avg_pool);
  CU_add_test(s, "float64 max and average pooling and their backwards", test_pool_f64);
  CU_add_test(s, "uint8 max and int64 average pooling", test_pool_integers);
  CU_basic_set_mode(CU_BRM_VERBOSE);
  CU_basic_run_tests();
  unsigned failed = CU_get_number_of_failures();
  CU_cleanup_registry();
  return failed ? 1 : 0;
}
