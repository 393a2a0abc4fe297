/* The vision ops (ops_vision.def) on host buffers, against values known by
 * construction: nearest upsampling by 2 repeats each element, linear
 * upsampling of a ramp with align_corners gives the finer ramp, adaptive
 * pooling of ones gives ones and a gradient of ones sums back to each
 * window's share, reflection / replication padding of a counter reads the
 * reflected / clamped positions, and bad params are refused; the
 * arithmetic ones again in float64 with a part float32 would round away. */
#include <CUnit/Basic.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "hpu/hpu.h"
#include "kernels/kernels.h"

static hpu_tensor_t T4(void *d, hpu_dtype_t dt, int64_t p, int64_t a, int64_t b, int64_t c) {
  hpu_tensor_t t;
  int64_t s[4] = {p, a, b, c};
  CU_ASSERT_EQUAL_FATAL(hpu_tensor_init_contiguous(&t, d, dt, 4, s), 0);
  return t;
}

static hpu_node_t node(hpu_op_t op, hpu_tensor_t in, hpu_tensor_t out) {
  hpu_node_t n;
  memset(&n, 0, sizeof n);
  n.op = op;
  n.compute_dtype = HPU_FLOAT32;
  n.num_inputs = 1;
  n.inputs[0] = in;
  n.num_outputs = 1;
  n.outputs[0] = out;
  return n;
}

static void test_nearest(void) {
  int16_t x[2 * 3 * 4], y[2 * 6 * 8];
  for (int i = 0; i < 24; i++) x[i] = (int16_t)(i * 7 - 50);
  hpu_node_t n = node(HPU_OP_UPSAMPLE, T4(x, HPU_INT16, 2, 1, 3, 4), T4(y, HPU_INT16, 2, 1, 6, 8));
  n.params.nn.i[0] = HPU_UPSAMPLE_NEAREST, n.params.nn.i[2] = 2;
  CU_ASSERT_EQUAL_FATAL(hpu_node_validate(&n), HPU_SUCCESS);
  CU_ASSERT_EQUAL(hpu_node_execute(&n), HPU_SUCCESS);
  for (int p = 0; p < 2; p++)
    for (int h = 0; h < 6; h++)
      for (int w = 0; w < 8; w++) CU_ASSERT_EQUAL(y[(p * 6 + h) * 8 + w], x[(p * 3 + h / 2) * 4 + w / 2]);
  /* its backward: every input gathers its 2 x 2 block */
  float dy[2 * 6 * 8], dx[2 * 3 * 4];
  for (int i = 0; i < 96; i++) dy[i] = (float)(i % 5);
  hpu_node_t b = node(HPU_OP_UPSAMPLE_BACKWARD, T4(dy, HPU_FLOAT32, 2, 1, 6, 8), T4(dx, HPU_FLOAT32, 2, 1, 3, 4));
  b.params = n.params;
  CU_ASSERT_EQUAL_FATAL(hpu_node_validate(&b), HPU_SUCCESS);
  CU_ASSERT_EQUAL(hpu_node_execute(&b), HPU_SUCCESS);
  for (int p = 0; p < 2; p++)
    for (int h = 0; h < 3; h++)
      for (int w = 0; w < 4; w++) {
        float s = 0;
        for (int a = 0; a < 2; a++)
          for (int c = 0; c < 2; c++) s += dy[(p * 6 + 2 * h + a) * 8 + 2 * w + c];
        CU_ASSERT_EQUAL(dx[(p * 3 + h) * 4 + w], s);
      }
  /* a backward in int16 is refused (float32 only) */
  b.inputs[0].dtype = HPU_INT16;
  b.outputs[0].dtype = HPU_INT16;
  CU_ASSERT_NOT_EQUAL(hpu_node_validate(&b), HPU_SUCCESS);
}

static void test_linear_ramp(void) {
  /* x[h][w] = 3h + w on a 4 x 5 grid, align_corners to 7 x 9: the output
   * is the same plane sampled at h * 3/6, w * 4/8 */
  float x[4 * 5], y[7 * 9];
  for (int h = 0; h < 4; h++)
    for (int w = 0; w < 5; w++) x[h * 5 + w] = (float)(3 * h + w);
  hpu_node_t n = node(HPU_OP_UPSAMPLE, T4(x, HPU_FLOAT32, 1, 1, 4, 5), T4(y, HPU_FLOAT32, 1, 1, 7, 9));
  n.params.nn.i[0] = HPU_UPSAMPLE_LINEAR, n.params.nn.i[1] = 1, n.params.nn.i[2] = 2;
  CU_ASSERT_EQUAL_FATAL(hpu_node_validate(&n), HPU_SUCCESS);
  CU_ASSERT_EQUAL(hpu_node_execute(&n), HPU_SUCCESS);
  for (int h = 0; h < 7; h++)
    for (int w = 0; w < 9; w++) CU_ASSERT_DOUBLE_EQUAL(y[h * 9 + w], 3 * h * 0.5 + w * 0.5, 1e-5);
  /* the backward of a gradient of ones puts the total, 63, back in x */
  float dy[7 * 9], dx[4 * 5], sum = 0;
  for (int i = 0; i < 63; i++) dy[i] = 1;
  hpu_node_t b = node(HPU_OP_UPSAMPLE_BACKWARD, T4(dy, HPU_FLOAT32, 1, 1, 7, 9), T4(dx, HPU_FLOAT32, 1, 1, 4, 5));
  b.params = n.params;
  CU_ASSERT_EQUAL_FATAL(hpu_node_validate(&b), HPU_SUCCESS);
  CU_ASSERT_EQUAL(hpu_node_execute(&b), HPU_SUCCESS);
  for (int i = 0; i < 20; i++) sum += dx[i];
  CU_ASSERT_DOUBLE_EQUAL(sum, 63, 1e-4);
  CU_ASSERT_DOUBLE_EQUAL(dx[0], 1 + 0.5 + 0.5 + 0.25, 1e-6); /* (1 + 1/2)^2 */
  /* a 2-d op with a non-unit D is refused */
  n.inputs[0] = T4(x, HPU_FLOAT32, 1, 2, 2, 5);
  CU_ASSERT_NOT_EQUAL(hpu_node_validate(&n), HPU_SUCCESS);
}

static void test_adaptive_pool(void) {
  /* 3-d: 5 x 7 x 3 -> 2 x 3 x 2, overlapping windows */
  enum { D = 5, H = 7, W = 3, OD = 2, OH = 3, OW = 2 };
  float x[D * H * W], y[OD * OH * OW], dx[D * H * W];
  for (int i = 0; i < D * H * W; i++) x[i] = 1;
  hpu_node_t n = node(HPU_OP_ADAPTIVE_AVG_POOL, T4(x, HPU_FLOAT32, 1, D, H, W), T4(y, HPU_FLOAT32, 1, OD, OH, OW));
  CU_ASSERT_EQUAL_FATAL(hpu_node_validate(&n), HPU_SUCCESS);
  CU_ASSERT_EQUAL(hpu_node_execute(&n), HPU_SUCCESS);
  for (int i = 0; i < OD * OH * OW; i++) CU_ASSERT_DOUBLE_EQUAL(y[i], 1, 1e-6);
  hpu_node_t b =
      node(HPU_OP_ADAPTIVE_AVG_POOL_BACKWARD, T4(y, HPU_FLOAT32, 1, OD, OH, OW), T4(dx, HPU_FLOAT32, 1, D, H, W));
  CU_ASSERT_EQUAL_FATAL(hpu_node_validate(&b), HPU_SUCCESS);
  CU_ASSERT_EQUAL(hpu_node_execute(&b), HPU_SUCCESS);
  float sum = 0;
  for (int i = 0; i < D * H * W; i++) sum += dx[i];
  CU_ASSERT_DOUBLE_EQUAL(sum, OD * OH * OW, 1e-4); /* each window spreads 1 */
  /* d windows [0,3) [2,5): d = 2 is in both; h windows [0,3) [2,5) [4,7); w [0,2) [1,3) */
  CU_ASSERT_DOUBLE_EQUAL(dx[(2 * H + 2) * W + 1], 2 * 2 * 2 / (3.0 * 3 * 2), 1e-6);
  /* float64: x = 1 + 2^-40 (1 in float32) pools to itself, a gradient of
   * it spreads its windows' shares (scaled by it) */
  double xd[D * H * W], yd[OD * OH * OW], dxd[D * H * W];
  double one = 1 + ldexp(1, -40);
  for (int i = 0; i < D * H * W; i++) xd[i] = one;
  hpu_node_t d = node(HPU_OP_ADAPTIVE_AVG_POOL, T4(xd, HPU_FLOAT64, 1, D, H, W), T4(yd, HPU_FLOAT64, 1, OD, OH, OW));
  CU_ASSERT_EQUAL_FATAL(hpu_node_validate(&d), HPU_SUCCESS);
  CU_ASSERT_EQUAL(hpu_node_execute(&d), HPU_SUCCESS);
  for (int i = 0; i < OD * OH * OW; i++) CU_ASSERT_DOUBLE_EQUAL(yd[i], one, 1e-15);
  hpu_node_t db =
      node(HPU_OP_ADAPTIVE_AVG_POOL_BACKWARD, T4(yd, HPU_FLOAT64, 1, OD, OH, OW), T4(dxd, HPU_FLOAT64, 1, D, H, W));
  CU_ASSERT_EQUAL_FATAL(hpu_node_validate(&db), HPU_SUCCESS);
  CU_ASSERT_EQUAL(hpu_node_execute(&db), HPU_SUCCESS);
  CU_ASSERT_DOUBLE_EQUAL(dxd[(2 * H + 2) * W + 1], one * 2 * 2 * 2 / (3.0 * 3 * 2), 1e-15);
  /* int32 is refused (the forwarder sends it to the CPU); buffers of its
   * own size, or the operands could overlap and be refused for that */
  int32_t xi[D * H * W], yi[OD * OH * OW];
  hpu_node_t r = node(HPU_OP_ADAPTIVE_AVG_POOL, T4(xi, HPU_INT32, 1, D, H, W), T4(yi, HPU_INT32, 1, OD, OH, OW));
  CU_ASSERT_EQUAL(hpu_node_validate(&r), HPU_ERROR_UNSUPPORTED);
}

/* float64 bilinear, align_corners, 2 x 3 -> 3 x 5 of x[h][w] = 1 + (3h + w)
 * 2^-40: the output is the plane at h / 2, w / 2 (exact in double); the
 * backward of ones puts the total, 15, back in x. */
static void test_linear_f64(void) {
  double x[2 * 3], y[3 * 5], dy[3 * 5], dx[2 * 3], sum = 0;
  for (int h = 0; h < 2; h++)
    for (int w = 0; w < 3; w++) x[h * 3 + w] = 1 + ldexp(3 * h + w, -40);
  hpu_node_t n = node(HPU_OP_UPSAMPLE, T4(x, HPU_FLOAT64, 1, 1, 2, 3), T4(y, HPU_FLOAT64, 1, 1, 3, 5));
  n.params.nn.i[0] = HPU_UPSAMPLE_LINEAR, n.params.nn.i[1] = 1, n.params.nn.i[2] = 2;
  CU_ASSERT_EQUAL_FATAL(hpu_node_validate(&n), HPU_SUCCESS);
  CU_ASSERT_EQUAL(hpu_node_execute(&n), HPU_SUCCESS);
  for (int h = 0; h < 3; h++)
    for (int w = 0; w < 5; w++) CU_ASSERT_EQUAL(y[h * 5 + w], 1 + ldexp(3 * h * 0.5 + w * 0.5, -40));
  for (int i = 0; i < 15; i++) dy[i] = 1;
  hpu_node_t b = node(HPU_OP_UPSAMPLE_BACKWARD, T4(dy, HPU_FLOAT64, 1, 1, 3, 5), T4(dx, HPU_FLOAT64, 1, 1, 2, 3));
  b.params = n.params;
  CU_ASSERT_EQUAL_FATAL(hpu_node_validate(&b), HPU_SUCCESS);
  CU_ASSERT_EQUAL(hpu_node_execute(&b), HPU_SUCCESS);
  for (int i = 0; i < 6; i++) sum += dx[i];
  CU_ASSERT_DOUBLE_EQUAL(sum, 15, 1e-12);
  CU_ASSERT_DOUBLE_EQUAL(dx[0], 1 + 0.5 + 0.5 + 0.25, 1e-12); /* (1 + 1/2)^2 */
}

static void test_pad(void) {
  /* 1 x 3 x 4 int64 counter, reflect (2, 1) on H and (3, -1) on W */
  int64_t x[12], y[6 * 6];
  for (int i = 0; i < 12; i++) x[i] = i;
  for (int mode = 0; mode < 2; mode++) {
    hpu_node_t n = node(HPU_OP_SPATIAL_PAD, T4(x, HPU_INT64, 1, 1, 3, 4), T4(y, HPU_INT64, 1, 1, 6, 6));
    n.params.nn.i[0] = mode ? HPU_PAD_REPLICATE : HPU_PAD_REFLECT;
    n.params.nn.sizes[1] = 2, n.params.nn.sizes[2] = 3;
    CU_ASSERT_EQUAL_FATAL(hpu_node_validate(&n), HPU_SUCCESS);
    CU_ASSERT_EQUAL(hpu_node_execute(&n), HPU_SUCCESS);
    for (int h = 0; h < 6; h++)
      for (int w = 0; w < 6; w++) {
        int j = h - 2, k = w - 3;
        if (mode) {
          j = j < 0 ? 0 : j > 2 ? 2 : j;
          k = k < 0 ? 0 : k > 3 ? 3 : k;
        } else {
          j = j < 0 ? -j : j > 2 ? 4 - j : j;
          k = k < 0 ? -k : k > 3 ? 6 - k : k;
        }
        CU_ASSERT_EQUAL(y[h * 6 + w], x[j * 4 + k]);
      }
    /* a reflection pad as large as the dim is refused */
    n.params.nn.sizes[2] = 4;
    n.outputs[0] = T4(y, HPU_INT64, 1, 1, 6, 7);
    if (!mode) CU_ASSERT_NOT_EQUAL(hpu_node_validate(&n), HPU_SUCCESS);
  }
  /* backward of reflect (1, 1) on a 3-wide row: dx = [g0, g1 + g3... ] */
  float g[5] = {1, 10, 100, 1000, 10000}, dx[3];
  hpu_node_t b = node(HPU_OP_SPATIAL_PAD_BACKWARD, T4(g, HPU_FLOAT32, 1, 1, 1, 5), T4(dx, HPU_FLOAT32, 1, 1, 1, 3));
  b.params.nn.i[0] = HPU_PAD_REFLECT, b.params.nn.sizes[2] = 1;
  CU_ASSERT_EQUAL_FATAL(hpu_node_validate(&b), HPU_SUCCESS);
  CU_ASSERT_EQUAL(hpu_node_execute(&b), HPU_SUCCESS);
  /* out 0 reads 1, out 1..3 read 0..2, out 4 reads 1 */
  CU_ASSERT_EQUAL(dx[0], 10);
  CU_ASSERT_EQUAL(dx[1], 1 + 100 + 10000);
  CU_ASSERT_EQUAL(dx[2], 1000);
  /* the same in float64, each g plus 2^-30 (lost in float32) */
  double gd[5], dxd[3], e = ldexp(1, -30);
  for (int i = 0; i < 5; i++) gd[i] = g[i] + e;
  b = node(HPU_OP_SPATIAL_PAD_BACKWARD, T4(gd, HPU_FLOAT64, 1, 1, 1, 5), T4(dxd, HPU_FLOAT64, 1, 1, 1, 3));
  b.params.nn.i[0] = HPU_PAD_REFLECT, b.params.nn.sizes[2] = 1;
  CU_ASSERT_EQUAL_FATAL(hpu_node_validate(&b), HPU_SUCCESS);
  CU_ASSERT_EQUAL(hpu_node_execute(&b), HPU_SUCCESS);
  CU_ASSERT_EQUAL(dxd[0], 10 + e);
  CU_ASSERT_EQUAL(dxd[1], 1 + 100 + 10000 + 3 * e);
  CU_ASSERT_EQUAL(dxd[2], 1000 + e);
}

/* Adaptive max pooling of one row: the first maximum wins a tie, the last
 * NaN wins, an all -inf window reports its first position; the backward
 * sums repeated indices (rounded per add for a bf16 result) and refuses an
 * index outside the plane. */
static void test_adaptive_max(void) {
  float x[8] = {1, 3, 3, NAN, 0, NAN, -INFINITY, -INFINITY}, y[4];
  int64_t ix[4];
  hpu_node_t n = node(HPU_OP_ADAPTIVE_MAX_POOL, T4(x, HPU_FLOAT32, 1, 1, 1, 8), T4(y, HPU_FLOAT32, 1, 1, 1, 4));
  n.num_outputs = 2;
  n.outputs[1] = T4(ix, HPU_INT64, 1, 1, 1, 4);
  CU_ASSERT_EQUAL_FATAL(hpu_node_validate(&n), HPU_SUCCESS);
  CU_ASSERT_EQUAL(hpu_node_execute(&n), HPU_SUCCESS);
  /* windows [0,2) [2,4) [4,6) [6,8) */
  CU_ASSERT_EQUAL(y[0], 3);
  CU_ASSERT_EQUAL(ix[0], 1);
  CU_ASSERT(isnan(y[1]));
  CU_ASSERT_EQUAL(ix[1], 3);
  CU_ASSERT(isnan(y[2]));
  CU_ASSERT_EQUAL(ix[2], 5);
  CU_ASSERT_EQUAL(y[3], -INFINITY);
  CU_ASSERT_EQUAL(ix[3], 6);
  /* backward: 1 + 2^-8 three times onto one element; in bf16 each add
   * rounds (1, then 2 + 2^-8 -> 2, then 3 + 2^-8 -> 3), in float32 not */
  float g[3] = {1, 1 + 0x1p-8f, 1 + 0x1p-8f}, dx[2];
  int64_t bi[3] = {1, 1, 1};
  hpu_node_t b = node(HPU_OP_ADAPTIVE_MAX_POOL_BACKWARD, T4(g, HPU_FLOAT32, 1, 1, 1, 3), T4(dx, HPU_FLOAT32, 1, 1, 1, 2));
  b.num_inputs = 2;
  b.inputs[1] = T4(bi, HPU_INT64, 1, 1, 1, 3);
  b.params.nn.i[0] = HPU_BFLOAT16;
  CU_ASSERT_EQUAL_FATAL(hpu_node_validate(&b), HPU_SUCCESS);
  CU_ASSERT_EQUAL(hpu_node_execute(&b), HPU_SUCCESS);
  CU_ASSERT_EQUAL(dx[0], 0);
  CU_ASSERT_EQUAL(dx[1], 3);
  b.params.nn.i[0] = HPU_FLOAT32;
  CU_ASSERT_EQUAL(hpu_node_execute(&b), HPU_SUCCESS);
  CU_ASSERT_EQUAL(dx[1], 3 + 0x1p-7f);
  bi[2] = 2;
  CU_ASSERT_EQUAL(hpu_node_execute(&b), HPU_ERROR_OUT_OF_RANGE);
  b.params.nn.i[0] = HPU_INT32; /* no such rounding */
  CU_ASSERT_EQUAL(hpu_node_validate(&b), HPU_ERROR_INVALID_ARGUMENT);
}

/* Max unpooling: zero, then each value at its index in input order (a
 * repeated index keeps the last); a bad index fails the node and writes
 * nothing for itself. */
static void test_unpool(void) {
  int16_t x[2 * 3] = {1, 2, 3, 4, 5, 6}, y[2 * 4];
  int64_t ix[2 * 3] = {3, 0, 3, 1, 1, 2};
  hpu_node_t n = node(HPU_OP_MAX_UNPOOL, T4(x, HPU_INT16, 2, 1, 1, 3), T4(y, HPU_INT16, 2, 1, 2, 2));
  n.num_inputs = 2;
  n.inputs[1] = T4(ix, HPU_INT64, 2, 1, 1, 3);
  CU_ASSERT_EQUAL_FATAL(hpu_node_validate(&n), HPU_SUCCESS);
  CU_ASSERT_EQUAL(hpu_node_execute(&n), HPU_SUCCESS);
  int16_t want[8] = {2, 0, 0, 3, 0, 5, 6, 0};
  CU_ASSERT_EQUAL(memcmp(y, want, sizeof want), 0);
  ix[4] = 4;
  CU_ASSERT_EQUAL(hpu_node_execute(&n), HPU_ERROR_OUT_OF_RANGE);
  CU_ASSERT_PTR_NOT_NULL(strstr(hpu_last_error(), "invalid max index: 4 (output volumes are of size 2x2)"));
  CU_ASSERT_EQUAL(y[4], 0);
  CU_ASSERT_EQUAL(y[5], 4);
  int32_t i32[6] = {0};
  n.inputs[1] = T4(i32, HPU_INT32, 2, 1, 1, 3);
  CU_ASSERT_EQUAL(hpu_node_validate(&n), HPU_ERROR_INVALID_ARGUMENT);
}

/* im2col of a 3 x 3 counter, 2 x 2 blocks with padding 1 and stride 2
 * (2 x 2 blocks), then col2im of ones counts the blocks over each pixel. */
static void test_fold(void) {
  float x[9], c[4 * 4], y[9];
  for (int i = 0; i < 9; i++) x[i] = (float)(i + 1);
  hpu_node_t n = node(HPU_OP_IM2COL, T4(x, HPU_FLOAT32, 1, 1, 3, 3), T4(c, HPU_FLOAT32, 1, 4, 2, 2));
  n.params.nn.i[0] = 2, n.params.nn.i[1] = 2, n.params.nn.i[2] = 1, n.params.nn.i[3] = 1;
  n.params.nn.sizes[0] = 1, n.params.nn.sizes[1] = 1, n.params.nn.strides[0] = 2, n.params.nn.strides[1] = 2;
  CU_ASSERT_EQUAL_FATAL(hpu_node_validate(&n), HPU_SUCCESS);
  CU_ASSERT_EQUAL(hpu_node_execute(&n), HPU_SUCCESS);
  /* tap (a, b) of block (i, j) reads pixel (2i - 1 + a, 2j - 1 + b) */
  float want[16] = {0, 0, 0, 5, 0, 0, 4, 6, 0, 2, 0, 8, 1, 3, 7, 9};
  for (int i = 0; i < 16; i++) CU_ASSERT_EQUAL(c[i], want[i]);
  for (int i = 0; i < 16; i++) c[i] = 1;
  hpu_node_t b = node(HPU_OP_COL2IM, T4(c, HPU_FLOAT32, 1, 4, 2, 2), T4(y, HPU_FLOAT32, 1, 1, 3, 3));
  b.params = n.params;
  b.params.nn.sizes[2] = HPU_FLOAT32;
  CU_ASSERT_EQUAL_FATAL(hpu_node_validate(&b), HPU_SUCCESS);
  CU_ASSERT_EQUAL(hpu_node_execute(&b), HPU_SUCCESS);
  for (int i = 0; i < 9; i++) CU_ASSERT_EQUAL(y[i], 1);
  /* columns that do not match the image are refused */
  b.params.nn.strides[0] = 1;
  CU_ASSERT_EQUAL(hpu_node_validate(&b), HPU_ERROR_INVALID_ARGUMENT);
}

int main(void) {
  CU_initialize_registry();
  CU_pSuite s = CU_add_suite("vision", NULL, NULL);
  CU_add_test(s, "nearest upsampling by 2 and its backward", test_nearest);
  CU_add_test(s, "bilinear upsampling of a ramp, align_corners", test_linear_ramp);
  CU_add_test(s, "float64 bilinear upsampling and its backward", test_linear_f64);
  CU_add_test(s, "adaptive average pooling 3-d of ones", test_adaptive_pool);
  CU_add_test(s, "reflection and replication padding of a counter", test_pad);
  CU_add_test(s, "adaptive max pooling: ties, NaN, -inf; backward rounding and bad index", test_adaptive_max);
  CU_add_test(s, "max unpooling: last write wins, bad index", test_unpool);
  CU_add_test(s, "im2col of a counter, col2im of ones", test_fold);
  CU_basic_set_mode(CU_BRM_VERBOSE);
  CU_basic_run_tests();
  unsigned failed = CU_get_number_of_failures();
  CU_cleanup_registry();
  return failed ? 1 : 0;
}
