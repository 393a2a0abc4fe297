/* Kernel library: nodes run with hpu_node_execute on host buffers and
 * compared with results known by construction. */
#include <CUnit/Basic.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hpu/hpu.h"
#include "test_nodes.h"
#include "kernels/bytes.h"
#include "kernels/kernels.h"

/* Helpers (the common builders are in test_nodes.h) ------------------------ */

static hpu_node_t copy_node(hpu_tensor_t out, hpu_tensor_t in) {
  hpu_node_t n = node_of(HPU_OP_COPY, out.dtype);
  n.num_inputs = 1;
  n.inputs[0] = in;
  n.outputs[0] = out;
  return n;
}

static float bf(uint16_t v) { return hpu_bf16_to_float(v); }

static const hpu_isa_t all_isas[] = {HPU_ISA_GENERIC, HPU_ISA_AVX2, HPU_ISA_AVX512};

/* Tensor helpers ----------------------------------------------------------- */

static void test_tensor_helpers(void) {
  hpu_tensor_t t;
  int64_t s[3] = {2, 3, 4};
  CU_ASSERT_EQUAL(hpu_tensor_init_contiguous(&t, NULL, HPU_FLOAT32, 3, s), 0);
  CU_ASSERT_EQUAL(hpu_tensor_numel(&t), 24);
  CU_ASSERT_EQUAL(t.strides[0], 12);
  CU_ASSERT_EQUAL(t.strides[2], 1);
  CU_ASSERT(hpu_tensor_is_contiguous(&t));
  t.strides[0] = 1;
  t.strides[2] = 6;
  CU_ASSERT(!hpu_tensor_is_contiguous(&t));
  int64_t bad[1] = {-1};
  CU_ASSERT_NOT_EQUAL(hpu_tensor_init_contiguous(&t, NULL, HPU_FLOAT32, 1, bad), 0);
  CU_ASSERT_NOT_EQUAL(hpu_tensor_init_contiguous(&t, NULL, HPU_FLOAT32, HPU_MAX_DIMS + 1, s), 0);
  CU_ASSERT_EQUAL(hpu_tensor_init_contiguous(&t, NULL, HPU_FLOAT32, 0, NULL), 0);
  CU_ASSERT_EQUAL(hpu_tensor_numel(&t), 1);
  int64_t z[2] = {3, 0};
  hpu_tensor_init_contiguous(&t, NULL, HPU_INT8, 2, z);
  CU_ASSERT_EQUAL(hpu_tensor_numel(&t), 0);
  CU_ASSERT(hpu_tensor_is_contiguous(&t));
  CU_ASSERT_STRING_EQUAL(hpu_op_name(HPU_OP_ADD), "add");
  CU_ASSERT_STRING_EQUAL(hpu_op_name(HPU_OP_MATMUL), "matmul");
  CU_ASSERT_STRING_EQUAL(hpu_op_name(HPU_OP_COUNT), "invalid");
  CU_ASSERT_STRING_EQUAL(hpu_op_name((hpu_op_t)(HPU_OP_COUNT + 40)), "invalid");
}

/* Copy ---------------------------------------------------------------------- */

static void test_copy_transposed_and_broadcast(void) {
  float src[12], dst[12];
  for (int i = 0; i < 12; i++) src[i] = (float)i;
  /* src viewed as its transpose [4, 3] */
  hpu_tensor_t in = T2(src, HPU_FLOAT32, 4, 3);
  in.strides[0] = 1;
  in.strides[1] = 4;
  hpu_tensor_t out = T2(dst, HPU_FLOAT32, 4, 3);
  hpu_node_t n = copy_node(out, in);
  CU_ASSERT_EQUAL(run(&n), HPU_SUCCESS);
  for (int i = 0; i < 4; i++)
    for (int j = 0; j < 3; j++) CU_ASSERT_EQUAL(dst[i * 3 + j], src[j * 4 + i]);

  /* broadcast a row [4] into [3, 4], casting to int64 */
  int64_t d64[12];
  hpu_tensor_t row = T1(src, HPU_FLOAT32, 4);
  n = copy_node(T2(d64, HPU_INT64, 3, 4), row);
  CU_ASSERT_EQUAL(run(&n), HPU_SUCCESS);
  for (int i = 0; i < 12; i++) CU_ASSERT_EQUAL(d64[i], i % 4);

  /* broadcast a column [3, 1] into a transposed output */
  double col[3] = {10, 20, 30}, d2[12];
  hpu_tensor_t c = T2(col, HPU_FLOAT64, 3, 1);
  hpu_tensor_t o = T2(d2, HPU_FLOAT64, 3, 4);
  o.strides[0] = 1;
  o.strides[1] = 3; /* element (i, j) at j*3 + i */
  n = copy_node(o, c);
  CU_ASSERT_EQUAL(run(&n), HPU_SUCCESS);
  for (int i = 0; i < 3; i++)
    for (int j = 0; j < 4; j++) CU_ASSERT_EQUAL(d2[j * 3 + i], col[i]);

  /* a strided 3-d source (every other element) into bf16 */
  float big[2 * 3 * 8];
  for (int i = 0; i < 48; i++) big[i] = (float)i;
  int64_t s3[3] = {2, 3, 4};
  hpu_tensor_t in3 = T(big, HPU_FLOAT32, 3, s3);
  in3.strides[0] = 24;
  in3.strides[1] = 8;
  in3.strides[2] = 2;
  uint16_t ob[24];
  n = copy_node(T(ob, HPU_BFLOAT16, 3, s3), in3);
  CU_ASSERT_EQUAL(run(&n), HPU_SUCCESS);
  for (int i = 0; i < 24; i++) CU_ASSERT_EQUAL(bf(ob[i]), (float)(2 * i));
}

/* Small non-negative integers are exact in every dtype: check all 100 pairs. */
static void store_val(void *p, hpu_dtype_t dt, int v) {
  switch (dt) {
    case HPU_BOOL: case HPU_UINT8: *(uint8_t *)p = (uint8_t)v; break;
    case HPU_INT8: *(int8_t *)p = (int8_t)v; break;
    case HPU_INT16: *(int16_t *)p = (int16_t)v; break;
    case HPU_INT32: *(int32_t *)p = v; break;
    case HPU_INT64: *(int64_t *)p = v; break;
    case HPU_FLOAT16: *(uint16_t *)p = hpu_float_to_half((float)v); break;
    case HPU_BFLOAT16: *(uint16_t *)p = hpu_float_to_bf16((float)v); break;
    case HPU_FLOAT32: *(float *)p = (float)v; break;
    case HPU_FLOAT64: *(double *)p = v; break;
    default: break;
  }
}

static double load_val(const void *p, hpu_dtype_t dt) {
  switch (dt) {
    case HPU_BOOL: case HPU_UINT8: return *(const uint8_t *)p;
    case HPU_INT8: return *(const int8_t *)p;
    case HPU_INT16: return *(const int16_t *)p;
    case HPU_INT32: return *(const int32_t *)p;
    case HPU_INT64: return (double)*(const int64_t *)p;
    case HPU_FLOAT16: return hpu_half_to_float(*(const uint16_t *)p);
    case HPU_BFLOAT16: return hpu_bf16_to_float(*(const uint16_t *)p);
    case HPU_FLOAT32: return *(const float *)p;
    case HPU_FLOAT64: return *(const double *)p;
    default: return NAN;
  }
}

static void test_copy_all_pairs(void) {
  for (int isa = 0; isa < 3; isa++) {
    hpu_kernels_set_isa(all_isas[isa]);
    for (int s = 0; s < HPU_DTYPE_COUNT; s++)
      for (int d = 0; d < HPU_DTYPE_COUNT; d++) {
        enum { N = 37 }; /* odd length: vector bodies and tails */
        char src[N * 8], dst[N * 8], dst2[N * 8 * 2];
        for (int i = 0; i < N; i++)
          store_val(src + i * hpu_dtype_size(s), s, s == HPU_BOOL ? i % 2 : i % 6);
        hpu_node_t n = copy_node(T1(dst, d, N), T1(src, s, N));
        CU_ASSERT_EQUAL(run(&n), HPU_SUCCESS);
        /* strided destination */
        hpu_tensor_t o = T1(dst2, d, N);
        o.strides[0] = 2;
        hpu_node_t n2 = copy_node(o, T1(src, s, N));
        CU_ASSERT_EQUAL(run(&n2), HPU_SUCCESS);
        for (int i = 0; i < N; i++) {
          int v = s == HPU_BOOL ? i % 2 : i % 6;
          double want = d == HPU_BOOL ? (v != 0) : v;
          double got = load_val(dst + i * hpu_dtype_size(d), d);
          double got2 = load_val(dst2 + 2 * i * hpu_dtype_size(d), d);
          if (got != want || got2 != want) {
            printf("copy %s -> %s [%d]: %g %g want %g\n", hpu_dtype_name(s), hpu_dtype_name(d), i,
                   got, got2, want);
            CU_FAIL("copy pair");
            break;
          }
        }
      }
  }
  hpu_kernels_set_isa(HPU_ISA_AVX512);
}

/* hpu_copy_bytes against a byte-by-byte memmove: every relative offset
 * from -70 to 70 bytes (its own loop takes 1..63 ahead), lengths around its
 * 512-byte threshold and 32-byte step, apart and overlapping. */
static void test_copy_bytes(void) {
  enum { SPAN = 8192 };
  unsigned char *buf = malloc(2 * SPAN), *ref = malloc(2 * SPAN);
  CU_ASSERT_PTR_NOT_NULL_FATAL(buf);
  CU_ASSERT_PTR_NOT_NULL_FATAL(ref);
  const size_t lens[] = {0, 1, 31, 511, 512, 513, 543, 1000, 4095, 4097};
  int bad = 0;
  for (int apart = 0; apart < 2; apart++)
    for (int off = -70; off <= 70; off++)
      for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++) {
        size_t n = lens[li];
        for (int i = 0; i < 2 * SPAN; i++) buf[i] = ref[i] = (unsigned char)(i * 7 + 3);
        /* apart: the source in the second half, SPAN (= 0 mod 4 KiB) away */
        size_t src = 100 + (apart ? SPAN : 0), dst = (size_t)(100 + off);
        hpu_copy_bytes(buf + dst, buf + src, n);
        if (dst < src)
          for (size_t i = 0; i < n; i++) ref[dst + i] = ref[src + i];
        else
          for (size_t i = n; i-- > 0;) ref[dst + i] = ref[src + i];
        bad += memcmp(buf, ref, 2 * SPAN) != 0;
      }
  CU_ASSERT_EQUAL(bad, 0);
  free(buf);
  free(ref);
}

static void test_copy_cast_semantics(void) {
  float f[8] = {-2.7f, 2.7f, -0.0f, 0.5f, NAN, 255.9f, -1.0f, 300.0f};
  int32_t i32[8];
  uint8_t u8[8], b[8];
  hpu_node_t n = copy_node(T1(i32, HPU_INT32, 8), T1(f, HPU_FLOAT32, 8));
  CU_ASSERT_EQUAL(run(&n), HPU_SUCCESS);
  CU_ASSERT_EQUAL(i32[0], -2);
  CU_ASSERT_EQUAL(i32[1], 2);
  CU_ASSERT_EQUAL(i32[2], 0);
  CU_ASSERT_EQUAL(i32[3], 0);
  CU_ASSERT_EQUAL(i32[5], 255);
  n = copy_node(T1(u8, HPU_UINT8, 8), T1(f, HPU_FLOAT32, 8));
  CU_ASSERT_EQUAL(run(&n), HPU_SUCCESS);
  CU_ASSERT_EQUAL(u8[6], 255); /* -1 through int64, as c10 */
  CU_ASSERT_EQUAL(u8[7], 44);  /* 300 wraps */
  n = copy_node(T1(b, HPU_BOOL, 8), T1(f, HPU_FLOAT32, 8));
  CU_ASSERT_EQUAL(run(&n), HPU_SUCCESS);
  uint8_t want_b[8] = {1, 1, 0, 1, 1, 1, 1, 1};
  CU_ASSERT_EQUAL(memcmp(b, want_b, 8), 0);
  /* int -> bool and bool -> float */
  int64_t iv[4] = {0, -5, 1, 1LL << 40};
  n = copy_node(T1(b, HPU_BOOL, 4), T1(iv, HPU_INT64, 4));
  CU_ASSERT_EQUAL(run(&n), HPU_SUCCESS);
  CU_ASSERT(b[0] == 0 && b[1] == 1 && b[2] == 1 && b[3] == 1);
  /* int narrowing wraps */
  int8_t i8[4];
  int64_t wide[4] = {127, 128, -129, 256 + 5};
  n = copy_node(T1(i8, HPU_INT8, 4), T1(wide, HPU_INT64, 4));
  CU_ASSERT_EQUAL(run(&n), HPU_SUCCESS);
  CU_ASSERT(i8[0] == 127 && i8[1] == -128 && i8[2] == 127 && i8[3] == 5);
  /* float -> bf16 / half rounding, to nearest even, matches dtype.c */
  for (int isa = 0; isa < 3; isa++) {
    hpu_kernels_set_isa(all_isas[isa]);
    enum { N = 4099 };
    float *x = malloc(N * sizeof *x);
    uint16_t *hb = malloc(N * 2), *hh = malloc(N * 2);
    for (int i = 0; i < N; i++) {
      uint32_t u = 0x3f800000u + (uint32_t)i * 0x1001u + (i & 1 ? 0x80000000u : 0);
      memcpy(&x[i], &u, 4);
    }
    x[0] = 1.0f + 0x1p-8f; /* tie -> even (1.0) in bf16 */
    x[1] = 1.0f + 3 * 0x1p-8f; /* tie -> even (1 + 2^-6) */
    x[2] = 65520.0f;          /* half: rounds to inf */
    x[3] = 1e-7f;             /* half: subnormal */
    x[4] = NAN;
    n = copy_node(T1(hb, HPU_BFLOAT16, N), T1(x, HPU_FLOAT32, N));
    CU_ASSERT_EQUAL(run(&n), HPU_SUCCESS);
    n = copy_node(T1(hh, HPU_FLOAT16, N), T1(x, HPU_FLOAT32, N));
    CU_ASSERT_EQUAL(run(&n), HPU_SUCCESS);
    int bad = 0;
    for (int i = 0; i < N; i++)
      bad += hb[i] != hpu_float_to_bf16(x[i]) || hh[i] != hpu_float_to_half(x[i]);
    CU_ASSERT_EQUAL(bad, 0);
    CU_ASSERT_EQUAL(bf(hb[0]), 1.0f);
    CU_ASSERT_EQUAL(bf(hb[1]), 1.0f + 0x1p-6f);
    CU_ASSERT(isinf(hpu_half_to_float(hh[2])));
    /* and back */
    float *y = malloc(N * sizeof *y);
    n = copy_node(T1(y, HPU_FLOAT32, N), T1(hb, HPU_BFLOAT16, N));
    CU_ASSERT_EQUAL(run(&n), HPU_SUCCESS);
    bad = 0;
    for (int i = 0; i < N; i++) {
      float w = hpu_bf16_to_float(hb[i]);
      bad += memcmp(&y[i], &w, 4) != 0;
    }
    CU_ASSERT_EQUAL(bad, 0);
    free(x);
    free(y);
    free(hb);
    free(hh);
  }
  hpu_kernels_set_isa(HPU_ISA_AVX512);
  /* double -> bf16 goes through float (c10) */
  double dd = 1.0 + 0x1p-8 + 0x1p-30; /* -> float 1+2^-8 (tie) -> bf16 1.0 */
  uint16_t ob;
  n = copy_node(T(&ob, HPU_BFLOAT16, 0, NULL), T(&dd, HPU_FLOAT64, 0, NULL));
  CU_ASSERT_EQUAL(run(&n), HPU_SUCCESS);
  CU_ASSERT_EQUAL(bf(ob), 1.0f);
}

static void test_fill(void) {
  float f[6];
  hpu_node_t n = node_of(HPU_OP_FILL, HPU_FLOAT32);
  n.outputs[0] = T2(f, HPU_FLOAT32, 2, 3);
  n.params.fill.value = hpu_scalar_float(2.5);
  CU_ASSERT_EQUAL(run(&n), HPU_SUCCESS);
  for (int i = 0; i < 6; i++) CU_ASSERT_EQUAL(f[i], 2.5f);
  int16_t s[10] = {0};
  n.outputs[0] = T1(s, HPU_INT16, 5);
  n.outputs[0].strides[0] = 2;
  n.params.fill.value = hpu_scalar_int(-7);
  CU_ASSERT_EQUAL(run(&n), HPU_SUCCESS);
  for (int i = 0; i < 10; i++) CU_ASSERT_EQUAL(s[i], i % 2 ? 0 : -7);
  uint16_t h[3];
  n.outputs[0] = T1(h, HPU_BFLOAT16, 3);
  n.params.fill.value = hpu_scalar_float(0.1);
  CU_ASSERT_EQUAL(run(&n), HPU_SUCCESS);
  CU_ASSERT_EQUAL(h[2], hpu_float_to_bf16(0.1f));
  uint8_t b[3];
  n.outputs[0] = T1(b, HPU_BOOL, 3);
  n.params.fill.value = hpu_scalar_float(0.5);
  CU_ASSERT_EQUAL(run(&n), HPU_SUCCESS);
  CU_ASSERT(b[0] == 1 && b[2] == 1);
}

/* Binary ops ------------------------------------------------------------ */

static void test_add_broadcast_alpha(void) {
  for (int isa = 0; isa < 3; isa++) {
    hpu_kernels_set_isa(all_isas[isa]);
    float a[3 * 4], b[4], o[12];
    for (int i = 0; i < 12; i++) a[i] = (float)i;
    for (int j = 0; j < 4; j++) b[j] = 0.5f * (float)j;
    hpu_node_t n = binary_node(HPU_OP_ADD, HPU_FLOAT32, T2(o, HPU_FLOAT32, 3, 4), T2(a, HPU_FLOAT32, 3, 4),
                          T1(b, HPU_FLOAT32, 4));
    CU_ASSERT_EQUAL(run(&n), HPU_SUCCESS);
    for (int i = 0; i < 12; i++) CU_ASSERT_EQUAL(o[i], a[i] + b[i % 4]);
    n.params.binary.alpha = hpu_scalar_float(3.0);
    CU_ASSERT_EQUAL(run(&n), HPU_SUCCESS);
    for (int i = 0; i < 12; i++) CU_ASSERT_EQUAL(o[i], a[i] + 3.0f * b[i % 4]);
    n.op = HPU_OP_SUB;
    CU_ASSERT_EQUAL(run(&n), HPU_SUCCESS);
    for (int i = 0; i < 12; i++) CU_ASSERT_EQUAL(o[i], a[i] - 3.0f * b[i % 4]);
    /* column broadcast on the left operand: [3,1] - [3,4] */
    float col[3] = {100, 200, 300};
    n = binary_node(HPU_OP_SUB, HPU_FLOAT32, T2(o, HPU_FLOAT32, 3, 4), T2(col, HPU_FLOAT32, 3, 1),
               T2(a, HPU_FLOAT32, 3, 4));
    CU_ASSERT_EQUAL(run(&n), HPU_SUCCESS);
    for (int i = 0; i < 12; i++) CU_ASSERT_EQUAL(o[i], col[i / 4] - a[i]);
    /* long contiguous run with alpha: fma semantics */
    enum { N = 1000 };
    float x[N], y[N], z[N];
    for (int i = 0; i < N; i++) {
      x[i] = 0.1f * (float)i;
      y[i] = 1.0f / (float)(i + 1);
    }
    n = binary_node(HPU_OP_ADD, HPU_FLOAT32, T1(z, HPU_FLOAT32, N), T1(x, HPU_FLOAT32, N),
               T1(y, HPU_FLOAT32, N));
    n.params.binary.alpha = hpu_scalar_float(0.3);
    CU_ASSERT_EQUAL(run(&n), HPU_SUCCESS);
    int bad = 0;
    for (int i = 0; i < N; i++) bad += z[i] != fmaf(y[i], 0.3f, x[i]);
    CU_ASSERT_EQUAL(bad, 0);
  }
  hpu_kernels_set_isa(HPU_ISA_AVX512);
}

static void test_binary_int_and_mixed(void) {
  /* int8 wraps in int8 arithmetic, then widened to an int32 output */
  int8_t a[4] = {100, -100, 7, -128}, b[4] = {100, -100, 3, -1};
  int32_t o[4];
  hpu_node_t n = binary_node(HPU_OP_ADD, HPU_INT8, T1(o, HPU_INT32, 4), T1(a, HPU_INT8, 4),
                        T1(b, HPU_INT8, 4));
  CU_ASSERT_EQUAL(run(&n), HPU_SUCCESS);
  CU_ASSERT(o[0] == -56 && o[1] == 56 && o[2] == 10 && o[3] == 127);
  n.op = HPU_OP_MUL;
  CU_ASSERT_EQUAL(run(&n), HPU_SUCCESS);
  CU_ASSERT(o[0] == 16 && o[2] == 21 && o[3] == -128);
  /* int64 with alpha, scalar other */
  int64_t x[5] = {1, 2, 3, 4, 5}, y[5];
  n = node_of(HPU_OP_SUB, HPU_INT64);
  n.num_inputs = 1;
  n.inputs[0] = T1(x, HPU_INT64, 5);
  n.outputs[0] = T1(y, HPU_INT64, 5);
  n.params.binary.other = hpu_scalar_int(10);
  n.params.binary.alpha = hpu_scalar_int(2);
  CU_ASSERT_EQUAL(run(&n), HPU_SUCCESS);
  for (int i = 0; i < 5; i++) CU_ASSERT_EQUAL(y[i], x[i] - 20);
  /* int32 typed path */
  int32_t p[3] = {1, 2, 3}, q[3] = {10, 20, 30}, r[3];
  n = binary_node(HPU_OP_MUL, HPU_INT32, T1(r, HPU_INT32, 3), T1(p, HPU_INT32, 3), T1(q, HPU_INT32, 3));
  CU_ASSERT_EQUAL(run(&n), HPU_SUCCESS);
  CU_ASSERT(r[0] == 10 && r[1] == 40 && r[2] == 90);
  /* mixed: int32 tensor + float64 tensor, compute float32, output float64 */
  double d[3] = {0.25, 0.5, 0.75}, od[3];
  n = binary_node(HPU_OP_ADD, HPU_FLOAT32, T1(od, HPU_FLOAT64, 3), T1(p, HPU_INT32, 3),
             T1(d, HPU_FLOAT64, 3));
  CU_ASSERT_EQUAL(run(&n), HPU_SUCCESS);
  CU_ASSERT(od[0] == 1.25 && od[1] == 2.5 && od[2] == 3.75);
  /* bool: add = or, mul = and */
  uint8_t b1[4] = {0, 0, 1, 1}, b2[4] = {0, 1, 0, 1}, ob[4];
  n = binary_node(HPU_OP_ADD, HPU_BOOL, T1(ob, HPU_BOOL, 4), T1(b1, HPU_BOOL, 4), T1(b2, HPU_BOOL, 4));
  CU_ASSERT_EQUAL(run(&n), HPU_SUCCESS);
  CU_ASSERT(ob[0] == 0 && ob[1] == 1 && ob[2] == 1 && ob[3] == 1);
  n.op = HPU_OP_MUL;
  CU_ASSERT_EQUAL(run(&n), HPU_SUCCESS);
  CU_ASSERT(ob[0] == 0 && ob[1] == 0 && ob[2] == 0 && ob[3] == 1);
  /* float64 */
  double da[2] = {1, 2}, db[2] = {3, 4}, dout[2];
  n = binary_node(HPU_OP_DIV, HPU_FLOAT64, T1(dout, HPU_FLOAT64, 2), T1(da, HPU_FLOAT64, 2),
             T1(db, HPU_FLOAT64, 2));
  CU_ASSERT_EQUAL(run(&n), HPU_SUCCESS);
  CU_ASSERT(dout[0] == 1.0 / 3.0 && dout[1] == 0.5);
  /* integers divided truly: the shim sets a float compute dtype */
  int64_t ia[2] = {7, -7}, ib[2] = {2, 2};
  float fo[2];
  n = binary_node(HPU_OP_DIV, HPU_FLOAT32, T1(fo, HPU_FLOAT32, 2), T1(ia, HPU_INT64, 2),
             T1(ib, HPU_INT64, 2));
  CU_ASSERT_EQUAL(run(&n), HPU_SUCCESS);
  CU_ASSERT(fo[0] == 3.5f && fo[1] == -3.5f);
}

static void test_bf16_math(void) {
  for (int isa = 0; isa < 3; isa++) {
    hpu_kernels_set_isa(all_isas[isa]);
    enum { N = 333 };
    uint16_t a[N], b[N], o[N];
    for (int i = 0; i < N; i++) {
      a[i] = hpu_float_to_bf16(1.0f + 0.013f * (float)i);
      b[i] = hpu_float_to_bf16(0.7f - 0.011f * (float)i);
    }
    hpu_node_t n = binary_node(HPU_OP_ADD, HPU_BFLOAT16, T1(o, HPU_BFLOAT16, N), T1(a, HPU_BFLOAT16, N),
                          T1(b, HPU_BFLOAT16, N));
    n.params.binary.alpha = hpu_scalar_float(0.3);
    CU_ASSERT_EQUAL(run(&n), HPU_SUCCESS);
    float al = bf(hpu_float_to_bf16(0.3f)); /* alpha rounded to bf16 (alpha.to<BFloat16>) */
    int bad = 0;
    for (int i = 0; i < N; i++) bad += o[i] != hpu_float_to_bf16(fmaf(bf(b[i]), al, bf(a[i])));
    CU_ASSERT_EQUAL(bad, 0);
    n.op = HPU_OP_MUL;
    CU_ASSERT_EQUAL(run(&n), HPU_SUCCESS);
    bad = 0;
    for (int i = 0; i < N; i++) bad += o[i] != hpu_float_to_bf16(bf(a[i]) * bf(b[i]));
    CU_ASSERT_EQUAL(bad, 0);
    n.op = HPU_OP_DIV;
    CU_ASSERT_EQUAL(run(&n), HPU_SUCCESS);
    bad = 0;
    for (int i = 0; i < N; i++) bad += o[i] != hpu_float_to_bf16(bf(a[i]) / bf(b[i]));
    CU_ASSERT_EQUAL(bad, 0);
    /* scalar multiply keeps the scalar in float precision (PyTorch CPU) */
    n.op = HPU_OP_MUL;
    n.num_inputs = 1;
    n.params.binary.other = hpu_scalar_float(0.1);
    CU_ASSERT_EQUAL(run(&n), HPU_SUCCESS);
    bad = 0;
    for (int i = 0; i < N; i++) bad += o[i] != hpu_float_to_bf16(bf(a[i]) * 0.1f);
    CU_ASSERT_EQUAL(bad, 0);
    /* ... while add rounds it to bf16 first */
    n.op = HPU_OP_ADD;
    n.params.binary.alpha = hpu_scalar_int(1);
    CU_ASSERT_EQUAL(run(&n), HPU_SUCCESS);
    bad = 0;
    for (int i = 0; i < N; i++)
      bad += o[i] != hpu_float_to_bf16(bf(a[i]) + bf(hpu_float_to_bf16(0.1f)));
    CU_ASSERT_EQUAL(bad, 0);
    /* fp16 */
    uint16_t h[N], ho[N];
    for (int i = 0; i < N; i++) h[i] = hpu_float_to_half(0.37f * (float)i - 50.0f);
    n = binary_node(HPU_OP_MUL, HPU_FLOAT16, T1(ho, HPU_FLOAT16, N), T1(h, HPU_FLOAT16, N),
               T1(h, HPU_FLOAT16, N));
    CU_ASSERT_EQUAL(run(&n), HPU_SUCCESS);
    bad = 0;
    for (int i = 0; i < N; i++) {
      float v = hpu_half_to_float(h[i]);
      bad += ho[i] != hpu_float_to_half(v * v);
    }
    CU_ASSERT_EQUAL(bad, 0);
    /* bf16 compute with a float32 output: rounded to bf16 first */
    float fo[N];
    n = binary_node(HPU_OP_ADD, HPU_BFLOAT16, T1(fo, HPU_FLOAT32, N), T1(a, HPU_BFLOAT16, N),
               T1(b, HPU_BFLOAT16, N));
    CU_ASSERT_EQUAL(run(&n), HPU_SUCCESS);
    bad = 0;
    for (int i = 0; i < N; i++) bad += fo[i] != bf(hpu_float_to_bf16(bf(a[i]) + bf(b[i])));
    CU_ASSERT_EQUAL(bad, 0);
  }
  hpu_kernels_set_isa(HPU_ISA_AVX512);
}

static void test_div_rounding(void) {
  float a[6] = {7, -7, 7, -7, 0.0f, -0.0f}, b[6] = {2, 2, -2, -2, -3, 3}, o[6];
  hpu_node_t n = binary_node(HPU_OP_DIV, HPU_FLOAT32, T1(o, HPU_FLOAT32, 6), T1(a, HPU_FLOAT32, 6),
                        T1(b, HPU_FLOAT32, 6));
  n.params.binary.rounding = HPU_ROUND_FLOOR;
  CU_ASSERT_EQUAL(run(&n), HPU_SUCCESS);
  CU_ASSERT(o[0] == 3 && o[1] == -4 && o[2] == -4 && o[3] == 3);
  CU_ASSERT(o[4] == 0 && signbit(o[4]) && o[5] == 0 && signbit(o[5]));
  n.params.binary.rounding = HPU_ROUND_TRUNC;
  CU_ASSERT_EQUAL(run(&n), HPU_SUCCESS);
  CU_ASSERT(o[0] == 3 && o[1] == -3 && o[2] == -3 && o[3] == 3);
  /* float division by zero gives IEEE results */
  float z[2] = {1, -1}, zero[1] = {0}, oz[2];
  n = binary_node(HPU_OP_DIV, HPU_FLOAT32, T1(oz, HPU_FLOAT32, 2), T1(z, HPU_FLOAT32, 2),
             T1(zero, HPU_FLOAT32, 1));
  n.params.binary.rounding = HPU_ROUND_FLOOR;
  CU_ASSERT_EQUAL(run(&n), HPU_SUCCESS);
  CU_ASSERT(isinf(oz[0]) && oz[0] > 0 && isinf(oz[1]) && oz[1] < 0);

  int64_t ia[6] = {7, -7, 7, -7, 5, INT64_MIN}, ib[6] = {2, 2, -2, -2, 3, -1}, io[6];
  n = binary_node(HPU_OP_DIV, HPU_INT64, T1(io, HPU_INT64, 6), T1(ia, HPU_INT64, 6),
             T1(ib, HPU_INT64, 6));
  n.params.binary.rounding = HPU_ROUND_FLOOR;
  CU_ASSERT_EQUAL(run(&n), HPU_SUCCESS);
  CU_ASSERT(io[0] == 3 && io[1] == -4 && io[2] == -4 && io[3] == 3 && io[4] == 1);
  CU_ASSERT(io[5] == INT64_MIN); /* wraps */
  n.params.binary.rounding = HPU_ROUND_TRUNC;
  CU_ASSERT_EQUAL(run(&n), HPU_SUCCESS);
  CU_ASSERT(io[0] == 3 && io[1] == -3 && io[2] == -3 && io[3] == 3 && io[4] == 1);
  /* integer division by zero fails the node as PyTorch's CPU does, in the
   * typed (int64, int32) and generic (int16) loops and with a scalar zero */
  const hpu_rounding_t modes[2] = {HPU_ROUND_FLOOR, HPU_ROUND_TRUNC};
  for (int m = 0; m < 2; m++) {
    ib[4] = 0;
    n = binary_node(HPU_OP_DIV, HPU_INT64, T1(io, HPU_INT64, 6), T1(ia, HPU_INT64, 6),
               T1(ib, HPU_INT64, 6));
    n.params.binary.rounding = modes[m];
    CU_ASSERT_EQUAL(run(&n), HPU_ERROR_INVALID_ARGUMENT);
    CU_ASSERT_STRING_EQUAL(hpu_last_error(), "ZeroDivisionError");
    int32_t a32[3] = {1, 2, 3}, b32[3] = {1, 0, 1}, o32[3];
    n = binary_node(HPU_OP_DIV, HPU_INT32, T1(o32, HPU_INT32, 3), T1(a32, HPU_INT32, 3),
               T1(b32, HPU_INT32, 3));
    n.params.binary.rounding = modes[m];
    CU_ASSERT_EQUAL(run(&n), HPU_ERROR_INVALID_ARGUMENT);
    int16_t a16[3] = {1, 2, 3}, b16[3] = {1, 1, 0}, o16[3];
    n = binary_node(HPU_OP_DIV, HPU_INT16, T1(o16, HPU_INT16, 3), T1(a16, HPU_INT16, 3),
               T1(b16, HPU_INT16, 3));
    n.params.binary.rounding = modes[m];
    CU_ASSERT_EQUAL(run(&n), HPU_ERROR_INVALID_ARGUMENT);
    n = node_of(HPU_OP_DIV, HPU_INT32);
    n.num_inputs = 1;
    n.inputs[0] = T1(a32, HPU_INT32, 3);
    n.outputs[0] = T1(o32, HPU_INT32, 3);
    n.params.binary.other = hpu_scalar_int(0);
    n.params.binary.rounding = modes[m];
    CU_ASSERT_EQUAL(run(&n), HPU_ERROR_INVALID_ARGUMENT);
    CU_ASSERT_STRING_EQUAL(hpu_last_error(), "ZeroDivisionError");
  }
  /* int8 floor through the generic path, scalar divisor */
  int8_t s8[4] = {-7, 7, -128, 9}, o8[4];
  n = node_of(HPU_OP_DIV, HPU_INT8);
  n.num_inputs = 1;
  n.inputs[0] = T1(s8, HPU_INT8, 4);
  n.outputs[0] = T1(o8, HPU_INT8, 4);
  n.params.binary.other = hpu_scalar_int(-2);
  n.params.binary.rounding = HPU_ROUND_FLOOR;
  CU_ASSERT_EQUAL(run(&n), HPU_SUCCESS);
  CU_ASSERT(o8[0] == 3 && o8[1] == -4 && o8[2] == 64 && o8[3] == -5);
}

static void test_inplace_zero_size_scalar(void) {
  /* in place: out aliases in0 exactly */
  enum { N = 100 };
  float a[N], b[N];
  for (int i = 0; i < N; i++) {
    a[i] = (float)i;
    b[i] = 1.5f;
  }
  hpu_node_t n = binary_node(HPU_OP_MUL, HPU_FLOAT32, T1(a, HPU_FLOAT32, N), T1(a, HPU_FLOAT32, N),
                        T1(b, HPU_FLOAT32, N));
  CU_ASSERT_EQUAL(run(&n), HPU_SUCCESS);
  for (int i = 0; i < N; i++) CU_ASSERT_EQUAL(a[i], 1.5f * (float)i);
  /* x.add_(x) */
  n = binary_node(HPU_OP_ADD, HPU_FLOAT32, T1(b, HPU_FLOAT32, N), T1(b, HPU_FLOAT32, N),
             T1(b, HPU_FLOAT32, N));
  CU_ASSERT_EQUAL(run(&n), HPU_SUCCESS);
  CU_ASSERT_EQUAL(b[N - 1], 3.0f);
  /* in-place with a transposed (non-contiguous) operand alias */
  float m[6] = {0, 1, 2, 3, 4, 5};
  hpu_tensor_t mt = T2(m, HPU_FLOAT32, 3, 2);
  mt.strides[0] = 1;
  mt.strides[1] = 3;
  n = node_of(HPU_OP_ADD, HPU_FLOAT32);
  n.num_inputs = 1;
  n.inputs[0] = mt;
  n.outputs[0] = mt;
  n.params.binary.other = hpu_scalar_float(10);
  CU_ASSERT_EQUAL(run(&n), HPU_SUCCESS);
  for (int i = 0; i < 6; i++) CU_ASSERT_EQUAL(m[i], (float)i + 10);
  /* zero-size */
  int64_t zs[2] = {0, 3};
  hpu_tensor_t z = T(NULL, HPU_FLOAT32, 2, zs);
  n = binary_node(HPU_OP_ADD, HPU_FLOAT32, z, z, T1(b, HPU_FLOAT32, 3));
  CU_ASSERT_EQUAL(run(&n), HPU_SUCCESS);
  n = copy_node(z, z);
  CU_ASSERT_EQUAL(run(&n), HPU_SUCCESS);
  /* 0-dim */
  double s0 = 2.0, s1 = 5.0, so;
  n = binary_node(HPU_OP_SUB, HPU_FLOAT64, T(&so, HPU_FLOAT64, 0, NULL), T(&s0, HPU_FLOAT64, 0, NULL),
             T(&s1, HPU_FLOAT64, 0, NULL));
  CU_ASSERT_EQUAL(run(&n), HPU_SUCCESS);
  CU_ASSERT_EQUAL(so, -3.0);
  /* 0-dim input broadcast to [2, 3] */
  double o6[6];
  n = binary_node(HPU_OP_MUL, HPU_FLOAT64, T2(o6, HPU_FLOAT64, 2, 3), T(&s1, HPU_FLOAT64, 0, NULL),
             T(&s0, HPU_FLOAT64, 0, NULL));
  CU_ASSERT_EQUAL(run(&n), HPU_SUCCESS);
  for (int i = 0; i < 6; i++) CU_ASSERT_EQUAL(o6[i], 10.0);
}

static void test_relu(void) {
  float x[5] = {-1, 0, 2, NAN, -0.0f}, y[5];
  hpu_node_t n = node_of(HPU_OP_RELU, HPU_FLOAT32);
  n.num_inputs = 1;
  n.inputs[0] = T1(x, HPU_FLOAT32, 5);
  n.outputs[0] = T1(y, HPU_FLOAT32, 5);
  CU_ASSERT_EQUAL(run(&n), HPU_SUCCESS);
  CU_ASSERT(y[0] == 0 && y[1] == 0 && y[2] == 2 && isnan(y[3]));
  int64_t i[3] = {-5, 0, 5}, io[3];
  n = node_of(HPU_OP_RELU, HPU_INT64);
  n.num_inputs = 1;
  n.inputs[0] = T1(i, HPU_INT64, 3);
  n.outputs[0] = T1(io, HPU_INT64, 3);
  CU_ASSERT_EQUAL(run(&n), HPU_SUCCESS);
  CU_ASSERT(io[0] == 0 && io[1] == 0 && io[2] == 5);
}

/* A tensor larger than the grain, with a non-trivial layout, on every ISA. */
static void test_large_strided(void) {
  enum { R = 300, C = 257 };
  float *a = malloc(sizeof(float) * R * C), *b = malloc(sizeof(float) * C),
        *o = malloc(sizeof(float) * R * C);
  for (int i = 0; i < R * C; i++) a[i] = (float)(i % 1000) * 0.25f;
  for (int j = 0; j < C; j++) b[j] = (float)j;
  for (int isa = 0; isa < 3; isa++) {
    hpu_kernels_set_isa(all_isas[isa]);
    /* a viewed transposed as [C, R], output [C, R] contiguous, b as [C, 1] */
    hpu_tensor_t at = T2(a, HPU_FLOAT32, C, R);
    at.strides[0] = 1;
    at.strides[1] = C;
    hpu_node_t n = binary_node(HPU_OP_ADD, HPU_FLOAT32, T2(o, HPU_FLOAT32, C, R), at,
                          T2(b, HPU_FLOAT32, C, 1));
    CU_ASSERT_EQUAL(run(&n), HPU_SUCCESS);
    int bad = 0;
    for (int j = 0; j < C; j++)
      for (int i = 0; i < R; i++) bad += o[j * R + i] != a[i * C + j] + b[j];
    CU_ASSERT_EQUAL(bad, 0);
  }
  hpu_kernels_set_isa(HPU_ISA_AVX512);
  free(a);
  free(b);
  free(o);
}

/* Matmul -------------------------------------------------------------- */

static double getd(const void *base, hpu_dtype_t dt, int64_t idx) {
  return load_val((const char *)base + idx * (int64_t)hpu_dtype_size(dt), dt);
}

/* out[b,i,j] = beta*c[i,j] + alpha * sum_l A[b?,i,l] B[l,j] via the tensors' strides. */
static void check_matmul(hpu_dtype_t dt, int transA, int transB, int batchA, int with_c,
                         double tol) {
  enum { BT = 3, M = 5, K = 7, NN = 4 };
  size_t es = hpu_dtype_size(dt);
  char *A = calloc(BT * M * K, es), *B = calloc(K * NN, es), *Cb = calloc(M * NN, es),
       *O = calloc(BT * M * NN, es);
  for (int i = 0; i < BT * M * K; i++) store_val(A + i * es, dt, (i * 7) % 11);
  for (int i = 0; i < K * NN; i++) store_val(B + i * es, dt, (i * 5) % 9);
  for (int i = 0; i < M * NN; i++) store_val(Cb + i * es, dt, i % 4);
  /* A: [BT or 1, M, K], possibly stored transposed ([.., K, M] in memory) */
  int64_t as[3] = {batchA ? BT : 1, M, K};
  hpu_tensor_t ta = T(A, dt, 3, as);
  if (transA) {
    ta.strides[1] = 1;
    ta.strides[2] = M;
  }
  hpu_tensor_t tb = T2(B, dt, K, NN); /* 2-d: broadcast over the batch */
  if (transB) {
    tb.strides[0] = 1;
    tb.strides[1] = K;
  }
  int64_t os[3] = {BT, M, NN};
  hpu_tensor_t to = T(O, dt, 3, os);
  hpu_node_t n = node_of(HPU_OP_MATMUL, dt);
  n.num_inputs = with_c ? 3 : 2;
  n.inputs[0] = ta;
  n.inputs[1] = tb;
  n.inputs[2] = T2(Cb, dt, M, NN);
  n.outputs[0] = to;
  int alpha = 2, beta = 3;
  n.params.matmul.alpha = hpu_scalar_int(alpha);
  n.params.matmul.beta = hpu_scalar_int(beta);
  CU_ASSERT_EQUAL_FATAL(run(&n), HPU_SUCCESS);
  int bad = 0;
  for (int bt = 0; bt < BT; bt++)
    for (int i = 0; i < M; i++)
      for (int j = 0; j < NN; j++) {
        double acc = 0;
        int ab = batchA ? bt : 0;
        for (int l = 0; l < K; l++)
          acc += getd(A, dt, ab * ta.strides[0] + i * ta.strides[1] + l * ta.strides[2]) *
                 getd(B, dt, l * tb.strides[0] + j * tb.strides[1]);
        double want = alpha * acc + (with_c ? beta * getd(Cb, dt, i * NN + j) : 0);
        double got = getd(O, dt, (bt * M + i) * NN + j);
        if (fabs(got - want) > tol * fabs(want)) {
          if (bad++ < 3)
            printf("matmul %s tA=%d tB=%d [%d,%d,%d]: %g want %g\n", hpu_dtype_name(dt), transA,
                   transB, bt, i, j, got, want);
        }
      }
  CU_ASSERT_EQUAL(bad, 0);
  free(A);
  free(B);
  free(Cb);
  free(O);
}

static void test_matmul(void) {
  hpu_dtype_t dts[] = {HPU_FLOAT32, HPU_FLOAT64, HPU_BFLOAT16, HPU_FLOAT16, HPU_INT64, HPU_INT32};
  double tols[] = {1e-6, 1e-12, 1e-2, 1e-3, 0, 0};
  for (int d = 0; d < 6; d++)
    for (int ta = 0; ta < 2; ta++)
      for (int tb = 0; tb < 2; tb++)
        for (int bA = 0; bA < 2; bA++)
          for (int c = 0; c < 2; c++) check_matmul(dts[d], ta, tb, bA, c, tols[d]);
}

static void test_matmul_odd_layouts(void) {
  /* A with both strides != 1 (needs a copy), output transposed, in2 aliasing out. */
  float A[2 * 3 * 2], B[3 * 2], O[4];
  for (int i = 0; i < 12; i++) A[i] = (float)i;
  for (int i = 0; i < 6; i++) B[i] = (float)(i + 1);
  hpu_tensor_t ta = T2(A, HPU_FLOAT32, 2, 3); /* element (i,l) at i*6 + l*2 */
  ta.strides[0] = 6;
  ta.strides[1] = 2;
  hpu_tensor_t to = T2(O, HPU_FLOAT32, 2, 2);
  to.strides[0] = 1;
  to.strides[1] = 2;
  for (int i = 0; i < 4; i++) O[i] = 1.0f;
  hpu_node_t n = node_of(HPU_OP_MATMUL, HPU_FLOAT32);
  n.num_inputs = 3;
  n.inputs[0] = ta;
  n.inputs[1] = T2(B, HPU_FLOAT32, 3, 2);
  n.inputs[2] = to; /* addmm_ */
  n.outputs[0] = to;
  n.params.matmul.alpha = hpu_scalar_float(1);
  n.params.matmul.beta = hpu_scalar_float(0.5);
  CU_ASSERT_EQUAL_FATAL(run(&n), HPU_SUCCESS);
  for (int i = 0; i < 2; i++)
    for (int j = 0; j < 2; j++) {
      float acc = 0;
      for (int l = 0; l < 3; l++) acc += A[i * 6 + l * 2] * B[l * 2 + j];
      CU_ASSERT_DOUBLE_EQUAL(O[i + j * 2], acc + 0.5f, 1e-5);
    }
  /* k == 0: out = beta * in2 */
  float C0[4] = {1, 2, 3, 4}, O0[4];
  n = node_of(HPU_OP_MATMUL, HPU_FLOAT32);
  n.num_inputs = 3;
  n.inputs[0] = T2(A, HPU_FLOAT32, 2, 0);
  n.inputs[1] = T2(B, HPU_FLOAT32, 0, 2);
  n.inputs[2] = T2(C0, HPU_FLOAT32, 2, 2);
  n.outputs[0] = T2(O0, HPU_FLOAT32, 2, 2);
  n.params.matmul.alpha = hpu_scalar_float(1);
  n.params.matmul.beta = hpu_scalar_float(2);
  CU_ASSERT_EQUAL(run(&n), HPU_SUCCESS);
  for (int i = 0; i < 4; i++) CU_ASSERT_EQUAL(O0[i], 2 * C0[i]);
  /* beta = 0 ignores NaN in in2 */
  C0[0] = NAN;
  n.inputs[0] = T2(A, HPU_FLOAT32, 2, 3);
  n.inputs[1] = T2(B, HPU_FLOAT32, 3, 2);
  n.params.matmul.beta = hpu_scalar_float(0);
  CU_ASSERT_EQUAL(run(&n), HPU_SUCCESS);
  CU_ASSERT(!isnan(O0[0]));
}

/* RNG ----------------------------------------------------------------- */

static void test_philox_kat(void) {
  uint32_t out[4];
  hpu_philox4x32(0, 0, out);
  CU_ASSERT_EQUAL(out[0], 0x6627e8d5u);
  CU_ASSERT_EQUAL(out[1], 0xe169c58du);
  CU_ASSERT_EQUAL(out[2], 0xbc57ac4cu);
  CU_ASSERT_EQUAL(out[3], 0x9b00dbd8u);
  /* Random123 KAT: ctr = all ones, key = all ones */
  CU_ASSERT_EQUAL(hpu_rng_words_per_element(HPU_OP_RNG_UNIFORM, HPU_FLOAT32), 1);
  CU_ASSERT_EQUAL(hpu_rng_words_per_element(HPU_OP_RNG_UNIFORM, HPU_FLOAT64), 2);
  CU_ASSERT_EQUAL(hpu_rng_words_per_element(HPU_OP_RNG_NORMAL, HPU_FLOAT32), 2);
  CU_ASSERT_EQUAL(hpu_rng_words_per_element(HPU_OP_RNG_NORMAL, HPU_FLOAT64), 4);
  CU_ASSERT_EQUAL(hpu_rng_words_per_element(HPU_OP_RNG_BERNOULLI, HPU_BOOL), 1);
  CU_ASSERT_EQUAL(hpu_rng_words_per_element(HPU_OP_RNG_RANDOM, HPU_INT64), 2);
}

/* Word j of the stream, straight from the spec in rng.h. */
static uint32_t spec_word(uint64_t seed, uint64_t offset, uint64_t j) {
  uint32_t out[4];
  hpu_philox4x32(seed, offset + j / 4, out);
  return out[j % 4];
}

static hpu_node_t rng_node(hpu_op_t op, hpu_tensor_t out, uint64_t seed, uint64_t offset, double a,
                           double b) {
  hpu_node_t n = node_of(op, out.dtype);
  n.outputs[0] = out;
  n.params.rng.seed = seed;
  n.params.rng.offset = offset;
  n.params.rng.a = a;
  n.params.rng.b = b;
  return n;
}

static void test_rng_stream_spec(void) {
  enum { N = 10007 }; /* several batches and a partial one */
  uint64_t seed = 0x123456789abcdefULL, off = 77;
  float *u = malloc(N * sizeof *u);
  hpu_node_t n;
  /* Every ISA's block function: 16 counters at once (AVX-512), 8 (AVX2),
   * one (portable). */
  for (int isa = 0; isa < 3; isa++) {
    hpu_kernels_set_isa(all_isas[isa]);
    n = rng_node(HPU_OP_RNG_UNIFORM, T1(u, HPU_FLOAT32, N), seed, off, -1, 3);
    CU_ASSERT_EQUAL(run(&n), HPU_SUCCESS);
    int bad = 0;
    for (int64_t i = 0; i < N; i++) {
      float x = (float)(spec_word(seed, off, (uint64_t)i) >> 8) * 0x1p-24f;
      bad += u[i] != x * 4.0f + -1.0f;
    }
    CU_ASSERT_EQUAL(bad, 0);
    /* An offset just below 2^32: the vector paths must carry into the
     * counter's high word mid-vector, as the scalar block does. */
    uint64_t off_wrap = 0xfffffffaULL;
    n = rng_node(HPU_OP_RNG_UNIFORM, T1(u, HPU_FLOAT32, N), seed, off_wrap, 0, 1);
    CU_ASSERT_EQUAL(run(&n), HPU_SUCCESS);
    bad = 0;
    for (int64_t i = 0; i < N; i++) bad += u[i] != (float)(spec_word(seed, off_wrap, (uint64_t)i) >> 8) * 0x1p-24f;
    CU_ASSERT_EQUAL(bad, 0);
  }
  hpu_kernels_set_isa(HPU_ISA_AVX512);
  n = rng_node(HPU_OP_RNG_UNIFORM, T1(u, HPU_FLOAT32, N), seed, off, -1, 3);
  CU_ASSERT_EQUAL(run(&n), HPU_SUCCESS);
  /* Same (seed, offset) -> same values, through a transposed output: element
   * indices are row-major in the output whatever its strides. */
  float *v = malloc(N * sizeof *v);
  hpu_tensor_t vt = T2(v, HPU_FLOAT32, 1, N);
  n = rng_node(HPU_OP_RNG_UNIFORM, vt, seed, off, -1, 3);
  CU_ASSERT_EQUAL(run(&n), HPU_SUCCESS);
  CU_ASSERT_EQUAL(memcmp(u, v, N * sizeof *u), 0);
  float m6[6], w6[6];
  hpu_tensor_t t6 = T2(m6, HPU_FLOAT32, 2, 3);
  t6.strides[0] = 1;
  t6.strides[1] = 2;
  n = rng_node(HPU_OP_RNG_NORMAL, t6, 5, 9, 0, 1);
  CU_ASSERT_EQUAL(run(&n), HPU_SUCCESS);
  n = rng_node(HPU_OP_RNG_NORMAL, T2(w6, HPU_FLOAT32, 2, 3), 5, 9, 0, 1);
  CU_ASSERT_EQUAL(run(&n), HPU_SUCCESS);
  for (int i = 0; i < 2; i++)
    for (int j = 0; j < 3; j++) CU_ASSERT_EQUAL(m6[i + 2 * j], w6[i * 3 + j]);
  /* Different offset -> different values; a suffix of the stream equals a
   * later offset (element 4 with w=1 is block offset+1). */
  n = rng_node(HPU_OP_RNG_UNIFORM, T1(v, HPU_FLOAT32, N - 4), seed, off + 1, -1, 3);
  CU_ASSERT_EQUAL(run(&n), HPU_SUCCESS);
  CU_ASSERT_EQUAL(memcmp(u + 4, v, (N - 4) * sizeof *u), 0);
  /* float64 uniform uses 2 words: 53 bits of (hi << 32 | lo) */
  double d[5];
  n = rng_node(HPU_OP_RNG_UNIFORM, T1(d, HPU_FLOAT64, 5), seed, off, 0, 1);
  CU_ASSERT_EQUAL(run(&n), HPU_SUCCESS);
  for (int i = 0; i < 5; i++) {
    uint64_t x = ((uint64_t)spec_word(seed, off, 2 * i + 1) << 32) | spec_word(seed, off, 2 * i);
    CU_ASSERT_EQUAL(d[i], (double)(x >> 11) * 0x1p-53);
  }
  /* random: 64-bit pair modulo (b - a), plus a */
  int64_t r[9];
  n = rng_node(HPU_OP_RNG_RANDOM, T1(r, HPU_INT64, 9), seed, off, -10, 1000);
  CU_ASSERT_EQUAL(run(&n), HPU_SUCCESS);
  for (int i = 0; i < 9; i++) {
    uint64_t x = ((uint64_t)spec_word(seed, off, 2 * i + 1) << 32) | spec_word(seed, off, 2 * i);
    CU_ASSERT_EQUAL(r[i], -10 + (int64_t)(x % 1010));
  }
  free(u);
  free(v);
}

static void test_rng_statistics(void) {
  enum { N = 200000 };
  float *x = malloc(N * sizeof *x);
  hpu_node_t n = rng_node(HPU_OP_RNG_UNIFORM, T1(x, HPU_FLOAT32, N), 42, 0, 0, 1);
  CU_ASSERT_EQUAL(run(&n), HPU_SUCCESS);
  double s = 0, s2 = 0;
  float lo = 1, hi = 0;
  for (int i = 0; i < N; i++) {
    s += x[i];
    lo = x[i] < lo ? x[i] : lo;
    hi = x[i] > hi ? x[i] : hi;
  }
  CU_ASSERT(fabs(s / N - 0.5) < 0.005);
  CU_ASSERT(lo >= 0 && hi < 1);
  n = rng_node(HPU_OP_RNG_NORMAL, T1(x, HPU_FLOAT32, N), 43, 0, 2.0, 3.0);
  CU_ASSERT_EQUAL(run(&n), HPU_SUCCESS);
  s = s2 = 0;
  for (int i = 0; i < N; i++) {
    s += x[i];
    s2 += (double)x[i] * x[i];
  }
  double mean = s / N, sd = sqrt(s2 / N - mean * mean);
  CU_ASSERT(fabs(mean - 2.0) < 0.03);
  CU_ASSERT(fabs(sd - 3.0) < 0.03);
  double *dx = malloc(N * sizeof *dx);
  n = rng_node(HPU_OP_RNG_NORMAL, T1(dx, HPU_FLOAT64, N), 44, 0, 0, 1);
  CU_ASSERT_EQUAL(run(&n), HPU_SUCCESS);
  s = s2 = 0;
  for (int i = 0; i < N; i++) {
    s += dx[i];
    s2 += dx[i] * dx[i];
  }
  CU_ASSERT(fabs(s / N) < 0.01 && fabs(sqrt(s2 / N) - 1) < 0.01);
  /* bernoulli with scalar p into bool, and with a tensor p */
  uint8_t *b = malloc(N);
  n = rng_node(HPU_OP_RNG_BERNOULLI, T1(b, HPU_BOOL, N), 45, 0, 0.3, 0);
  CU_ASSERT_EQUAL(run(&n), HPU_SUCCESS);
  long ones = 0;
  for (int i = 0; i < N; i++) ones += b[i];
  CU_ASSERT(fabs((double)ones / N - 0.3) < 0.005);
  /* scalar p into float32 (dropout's mask, a threshold on the word): the
   * spec's u < p exactly, also for p on the 2^-24 grid and p = 0, 1 */
  float *bf32 = malloc(N * sizeof *bf32);
  const double ps[] = {0.9, 0.25, 3.0 / 16777216.0, 0.0, 1.0};
  for (size_t q = 0; q < sizeof ps / sizeof ps[0]; q++) {
    n = rng_node(HPU_OP_RNG_BERNOULLI, T1(bf32, HPU_FLOAT32, N), 48, 5, ps[q], 0);
    CU_ASSERT_EQUAL(run(&n), HPU_SUCCESS);
    int wrong = 0;
    for (int64_t i = 0; i < N; i++) {
      double u = (double)((float)(spec_word(48, 5, (uint64_t)i) >> 8) * 0x1p-24f);
      wrong += bf32[i] != (u < ps[q] ? 1.0f : 0.0f);
    }
    CU_ASSERT_EQUAL(wrong, 0);
  }
  free(bf32);
  float p[2] = {0.0f, 1.0f};
  float bo[10];
  n = rng_node(HPU_OP_RNG_BERNOULLI, T2(bo, HPU_FLOAT32, 5, 2), 46, 0, 0, 0);
  n.num_inputs = 1;
  n.inputs[0] = T1(p, HPU_FLOAT32, 2);
  CU_ASSERT_EQUAL(run(&n), HPU_SUCCESS);
  for (int i = 0; i < 10; i++) CU_ASSERT_EQUAL(bo[i], (float)(i % 2));
  /* bf16 uniform stays below `to` */
  uint16_t *h = malloc(N * 2);
  n = rng_node(HPU_OP_RNG_UNIFORM, T1(h, HPU_BFLOAT16, N), 47, 0, 0, 1);
  CU_ASSERT_EQUAL(run(&n), HPU_SUCCESS);
  int out_of_range = 0;
  for (int i = 0; i < N; i++) out_of_range += !(bf(h[i]) >= 0 && bf(h[i]) < 1);
  CU_ASSERT_EQUAL(out_of_range, 0);
  /* random_ over the full int64 range [0, 2^63) */
  int64_t r[64];
  n = rng_node(HPU_OP_RNG_RANDOM, T1(r, HPU_INT64, 64), 48, 0, 0, 9223372036854775808.0);
  CU_ASSERT_EQUAL(run(&n), HPU_SUCCESS);
  int neg = 0;
  for (int i = 0; i < 64; i++) neg += r[i] < 0;
  CU_ASSERT_EQUAL(neg, 0);
  free(x);
  free(dx);
  free(b);
  free(h);
}

/* Validation ----------------------------------------------------------- */

static void expect_error(const hpu_node_t *n, hpu_status_t st, const char *needle) {
  hpu_status_t got = hpu_node_validate(n);
  CU_ASSERT_EQUAL(got, st);
  if (!strstr(hpu_last_error(), needle)) {
    printf("message \"%s\" lacks \"%s\"\n", hpu_last_error(), needle);
    CU_FAIL("error message");
  }
}

static void test_validation(void) {
  float a[20], b[20], o[20];
  hpu_node_t n = binary_node(HPU_OP_ADD, HPU_FLOAT32, T2(o, HPU_FLOAT32, 2, 5), T2(a, HPU_FLOAT32, 3, 4),
                        T2(b, HPU_FLOAT32, 2, 5));
  n.inputs[0] = T2(a, HPU_FLOAT32, 2, 5);
  n.inputs[1] = T2(b, HPU_FLOAT32, 3, 4);
  expect_error(&n, HPU_ERROR_INVALID_ARGUMENT,
               "add: input 1 of shape [3, 4] does not broadcast to output shape [2, 5]");
  n.inputs[1] = T1(b, HPU_FLOAT32, 5);
  CU_ASSERT_EQUAL(hpu_node_validate(&n), HPU_SUCCESS);
  hpu_node_t bad = n;
  bad.op = (hpu_op_t)(HPU_OP_COUNT + 5);
  char want[64];
  snprintf(want, sizeof want, "invalid op code %d", (int)HPU_OP_COUNT + 5);
  expect_error(&bad, HPU_ERROR_INVALID_ARGUMENT, want);
  bad.op = HPU_OP_POINTWISE_BEGIN; /* a family marker is not an op */
  expect_error(&bad, HPU_ERROR_INVALID_ARGUMENT, "invalid op code");
  bad = n;
  bad.num_inputs = 3;
  expect_error(&bad, HPU_ERROR_INVALID_ARGUMENT, "add: expects 1 to 2 inputs, got 3");
  bad = n;
  bad.inputs[0].dtype = (hpu_dtype_t)42;
  expect_error(&bad, HPU_ERROR_INVALID_ARGUMENT, "input 0 has an invalid dtype");
  bad = n;
  bad.compute_dtype = (hpu_dtype_t)-1;
  expect_error(&bad, HPU_ERROR_INVALID_ARGUMENT, "invalid compute dtype");
  bad = n;
  bad.outputs[0].ndim = HPU_MAX_DIMS + 1;
  expect_error(&bad, HPU_ERROR_INVALID_ARGUMENT, "output 0 has 13 dims");
  bad = n;
  bad.inputs[0].sizes[1] = -5;
  expect_error(&bad, HPU_ERROR_INVALID_ARGUMENT, "negative size");
  bad = n;
  bad.inputs[0].strides[0] = -1;
  expect_error(&bad, HPU_ERROR_INVALID_ARGUMENT, "negative stride");
  bad = n;
  bad.outputs[0].strides[0] = 0;
  expect_error(&bad, HPU_ERROR_INVALID_ARGUMENT, "stride 0 in dim 0");
  /* partial overlap: output shifted by one element over input 0 */
  bad = n;
  bad.outputs[0] = T2(a + 1, HPU_FLOAT32, 2, 5);
  expect_error(&bad, HPU_ERROR_INVALID_ARGUMENT, "partially overlap");
  /* exact alias is fine; a transposed alias of a square matrix is not */
  bad = n;
  bad.outputs[0] = bad.inputs[0];
  CU_ASSERT_EQUAL(hpu_node_validate(&bad), HPU_SUCCESS);
  bad.outputs[0] = T2(a, HPU_FLOAT32, 4, 4);
  bad.inputs[0] = T2(a, HPU_FLOAT32, 4, 4);
  bad.inputs[0].strides[0] = 1;
  bad.inputs[0].strides[1] = 4;
  bad.inputs[1] = T1(b, HPU_FLOAT32, 4);
  expect_error(&bad, HPU_ERROR_INVALID_ARGUMENT, "partially overlap");
  /* dtype rules */
  int64_t ia[4];
  bad = binary_node(HPU_OP_DIV, HPU_INT64, T1(ia, HPU_INT64, 4), T1(ia, HPU_INT64, 4),
               T1(ia, HPU_INT64, 4));
  expect_error(&bad, HPU_ERROR_UNSUPPORTED, "true division needs a floating compute dtype");
  bad.op = HPU_OP_SUB;
  bad.compute_dtype = HPU_BOOL;
  expect_error(&bad, HPU_ERROR_UNSUPPORTED, "sub: subtraction with two bool tensors");
  /* matmul shapes */
  hpu_node_t mm = node_of(HPU_OP_MATMUL, HPU_FLOAT32);
  mm.num_inputs = 2;
  mm.inputs[0] = T2(a, HPU_FLOAT32, 2, 3);
  mm.inputs[1] = T2(b, HPU_FLOAT32, 4, 5);
  mm.outputs[0] = T2(o, HPU_FLOAT32, 2, 5);
  mm.params.matmul.alpha = hpu_scalar_int(1);
  expect_error(&mm, HPU_ERROR_INVALID_ARGUMENT, "matmul: shapes [2, 3] and [4, 5] cannot be multiplied");
  mm.inputs[1] = T2(b, HPU_FLOAT32, 3, 5);
  CU_ASSERT_EQUAL(hpu_node_validate(&mm), HPU_SUCCESS);
  mm.outputs[0] = T2(o, HPU_FLOAT32, 2, 4);
  expect_error(&mm, HPU_ERROR_INVALID_ARGUMENT, "matmul: output shape [2, 4]");
  mm.outputs[0] = T2(a, HPU_FLOAT32, 2, 5);
  expect_error(&mm, HPU_ERROR_INVALID_ARGUMENT, "cannot run in place");
  mm.outputs[0] = T2(o, HPU_FLOAT32, 2, 5);
  mm.inputs[1].dtype = HPU_FLOAT64;
  expect_error(&mm, HPU_ERROR_INVALID_ARGUMENT, "matmul: input 1 is float64");
  mm.inputs[1] = T1(b, HPU_FLOAT32, 3);
  expect_error(&mm, HPU_ERROR_INVALID_ARGUMENT, "at least 2 dims");
  int64_t s3[3] = {2, 2, 3}, s3b[3] = {3, 3, 5}, s3o[3] = {2, 2, 5};
  mm.inputs[0] = T(a, HPU_FLOAT32, 3, s3);
  mm.inputs[1] = T(b, HPU_FLOAT32, 3, s3b);
  mm.outputs[0] = T(o, HPU_FLOAT32, 3, s3o);
  expect_error(&mm, HPU_ERROR_INVALID_ARGUMENT, "batch dims of input 1");
  /* rng */
  int32_t ri[4];
  hpu_node_t r = rng_node(HPU_OP_RNG_UNIFORM, T1(ri, HPU_INT32, 4), 1, 0, 0, 1);
  expect_error(&r, HPU_ERROR_UNSUPPORTED, "rng_uniform: the output must be floating, not int32");
  r = rng_node(HPU_OP_RNG_NORMAL, T1(o, HPU_FLOAT32, 4), 1, 0, 0, -1);
  expect_error(&r, HPU_ERROR_INVALID_ARGUMENT, "std >= 0.0");
  r = rng_node(HPU_OP_RNG_RANDOM, T1(ri, HPU_INT32, 4), 1, 0, 5, 5);
  expect_error(&r, HPU_ERROR_INVALID_ARGUMENT, "'from' < 'to'");
  r = rng_node(HPU_OP_RNG_BERNOULLI, T1(ri, HPU_INT32, 4), 1, 0, 1.5, 0);
  expect_error(&r, HPU_ERROR_INVALID_ARGUMENT, "0 <= p <= 1");
  r.params.rng.a = 0.5;
  CU_ASSERT_EQUAL(hpu_node_validate(&r), HPU_SUCCESS);
  /* copy/fill operand counts, missing storage */
  hpu_node_t c = copy_node(T1(o, HPU_FLOAT32, 4), T1(a, HPU_FLOAT32, 4));
  c.num_inputs = 0;
  expect_error(&c, HPU_ERROR_INVALID_ARGUMENT, "copy: expects 1 input(s), got 0");
  c.num_inputs = 1;
  c.num_outputs = 2;
  expect_error(&c, HPU_ERROR_INVALID_ARGUMENT, "expects 1 output");
  c.num_outputs = 1;
  c.inputs[0].storage = NULL;
  expect_error(&c, HPU_ERROR_INVALID_ARGUMENT, "input 0 has no storage");
}

int main(void) {
  if (CU_initialize_registry() != CUE_SUCCESS) return 1;
  CU_pSuite s = CU_add_suite("kernels", NULL, NULL);
  CU_add_test(s, "tensor helpers", test_tensor_helpers);
  CU_add_test(s, "copy transposed/broadcast", test_copy_transposed_and_broadcast);
  CU_add_test(s, "copy all dtype pairs", test_copy_all_pairs);
  CU_add_test(s, "copy cast semantics", test_copy_cast_semantics);
  CU_add_test(s, "copy bytes", test_copy_bytes);
  CU_add_test(s, "fill", test_fill);
  CU_add_test(s, "add/sub broadcast alpha", test_add_broadcast_alpha);
  CU_add_test(s, "binary int and mixed", test_binary_int_and_mixed);
  CU_add_test(s, "bf16/fp16 math", test_bf16_math);
  CU_add_test(s, "div rounding", test_div_rounding);
  CU_add_test(s, "in-place, zero-size, 0-dim", test_inplace_zero_size_scalar);
  CU_add_test(s, "relu", test_relu);
  CU_add_test(s, "large strided", test_large_strided);
  CU_add_test(s, "matmul", test_matmul);
  CU_add_test(s, "matmul odd layouts", test_matmul_odd_layouts);
  CU_add_test(s, "philox KAT", test_philox_kat);
  CU_add_test(s, "rng stream spec", test_rng_stream_spec);
  CU_add_test(s, "rng statistics", test_rng_statistics);
  CU_add_test(s, "validation", test_validation);
  CU_basic_set_mode(CU_BRM_VERBOSE);
  CU_basic_run_tests();
  unsigned failed = CU_get_number_of_failures() + CU_get_number_of_tests_failed();
  CU_cleanup_registry();
  return failed ? 1 : 0;
}
