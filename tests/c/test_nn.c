/* nn kernel family: nodes run with hpu_node_validate + hpu_node_execute on
 * host buffers, checked against values known by construction. */
#include <CUnit/Basic.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hpu/hpu.h"
#include "test_nodes.h"
#include "kernels/cvt.h"
#include "kernels/kernels.h"

static hpu_node_t node(hpu_op_t op) {
  hpu_node_t n;
  memset(&n, 0, sizeof n);
  n.op = op;
  n.compute_dtype = HPU_FLOAT32;
  return n;
}

static const hpu_isa_t isas[] = {HPU_ISA_GENERIC, HPU_ISA_AVX2, HPU_ISA_AVX512};

/* sum / mean / amax over rows and columns of x[r][c] = r * C + c */
static void test_reduce_ranges(void) {
  enum { R = 300, C = 1000 };
  float *x = malloc(sizeof(float) * R * C);
  for (int i = 0; i < R * C; i++) x[i] = (float)i;
  float rows[R], cols[C], all;
  for (size_t k = 0; k < 3; k++) {
    hpu_kernels_set_isa(isas[k]);
    hpu_node_t n = node(HPU_OP_REDUCE);
    n.num_inputs = n.num_outputs = 1;
    n.inputs[0] = T2(x, HPU_FLOAT32, R, C);
    n.outputs[0] = T2(rows, HPU_FLOAT32, R, 1);
    n.params.nn.i[0] = HPU_REDUCE_SUM;
    n.params.nn.i[1] = 2; /* dim 1 */
    CU_ASSERT_EQUAL_FATAL(run(&n), HPU_SUCCESS);
    for (int r = 0; r < R; r++) /* sum of c + r*C over c */
      CU_ASSERT_DOUBLE_EQUAL(rows[r], (double)C * (C - 1) / 2 + (double)r * C * C, 1e-6 * rows[r]);
    n.outputs[0] = T2(cols, HPU_FLOAT32, 1, C);
    n.params.nn.i[0] = HPU_REDUCE_MEAN;
    n.params.nn.i[1] = 1; /* dim 0 */
    CU_ASSERT_EQUAL_FATAL(run(&n), HPU_SUCCESS);
    for (int c = 0; c < C; c++) CU_ASSERT_DOUBLE_EQUAL(cols[c], c + (double)C * (R - 1) / 2, 1e-3);
    n.outputs[0] = T2(&all, HPU_FLOAT32, 1, 1);
    n.params.nn.i[0] = HPU_REDUCE_AMAX;
    n.params.nn.i[1] = 3;
    CU_ASSERT_EQUAL_FATAL(run(&n), HPU_SUCCESS);
    CU_ASSERT_EQUAL(all, (float)(R * C - 1));
    n.params.nn.i[0] = HPU_REDUCE_SUM; /* full: the split path */
    CU_ASSERT_EQUAL_FATAL(run(&n), HPU_SUCCESS);
    CU_ASSERT_DOUBLE_EQUAL(all, (double)R * C * (R * C - 1) / 2, 1e-6 * all);
  }
  /* int64 sum is exact and var of 0..n-1 is (n^2-1)/12 */
  int64_t iv[101], isum;
  double dv[101], var;
  for (int i = 0; i < 101; i++) iv[i] = i, dv[i] = i;
  hpu_node_t n = node(HPU_OP_REDUCE);
  n.num_inputs = n.num_outputs = 1;
  n.inputs[0] = T1(iv, HPU_INT64, 101);
  n.outputs[0] = T1(&isum, HPU_INT64, 1);
  n.params.nn.i[1] = 1;
  CU_ASSERT_EQUAL_FATAL(run(&n), HPU_SUCCESS);
  CU_ASSERT_EQUAL(isum, 5050);
  n.inputs[0] = T1(dv, HPU_FLOAT64, 101);
  n.outputs[0] = T1(&var, HPU_FLOAT64, 1);
  n.params.nn.i[0] = HPU_REDUCE_VAR;
  n.params.nn.s[0] = hpu_scalar_float(0);
  CU_ASSERT_EQUAL_FATAL(run(&n), HPU_SUCCESS);
  CU_ASSERT_DOUBLE_EQUAL(var, (101.0 * 101.0 - 1) / 12, 1e-9);
  /* a wrong output shape is rejected */
  n.outputs[0] = T1(dv, HPU_FLOAT64, 2);
  CU_ASSERT_EQUAL(hpu_node_validate(&n), HPU_ERROR_INVALID_ARGUMENT);
  free(x);
  hpu_kernels_set_isa(HPU_ISA_AVX512);
}

/* n pseudo-random floats (u - centre) * width, u uniform in [0, 1), from a
 * linear congruential generator: the same data on every run and machine. */
static void fill_random(float *x, int64_t n, uint32_t *seed, float centre, float width) {
  for (int64_t i = 0; i < n; i++) {
    *seed = *seed * 1664525u + 1013904223u;
    x[i] = ((float)(*seed >> 8) / 16777216.0f - centre) * width;
  }
}

/* bf16 by truncation (keeps NaN, infinities and order): xb the bf16 bits,
 * xbf the same values as floats (may be x itself). */
static void to_bf16(const float *x, uint16_t *xb, float *xbf, int64_t n) {
  for (int64_t i = 0; i < n; i++) {
    uint32_t u;
    memcpy(&u, &x[i], 4);
    xb[i] = (uint16_t)(u >> 16);
    u &= 0xffff0000u;
    memcpy(&xbf[i], &u, 4);
  }
}

/* A reduction of kind over dim 1 of a [rows, L] input into [rows, 1]. */
static hpu_node_t row_reduce(void *x, hpu_dtype_t dt, int64_t rows, int64_t L, void *out,
                             hpu_dtype_t odt, int kind) {
  hpu_node_t n = node(HPU_OP_REDUCE);
  n.num_inputs = n.num_outputs = 1;
  n.inputs[0] = T2(x, dt, rows, L);
  n.outputs[0] = T2(out, odt, rows, 1);
  n.params.nn.i[0] = kind;
  n.params.nn.i[1] = 2; /* dim 1 */
  return n;
}

/* The documented order of a contiguous float sum (nn_reduce.c): 64 float
 * lanes per block of 4096, folded j += j+32, j += j+16, j += j+8, then the
 * tail and lanes 0..7 in order, each block's total added into a double. */
static double ordered_sum(const float *x, int64_t n, int absval) {
  double total = 0;
  for (int64_t b = 0; b < n; b += 4096) {
    int64_t m = n - b < 4096 ? n - b : 4096;
    float acc[64] = {0}, t = 0;
    int64_t i = 0;
    for (; i + 64 <= m; i += 64)
      for (int j = 0; j < 64; j++) acc[j] += absval ? fabsf(x[b + i + j]) : x[b + i + j];
    for (; i < m; i++) t += absval ? fabsf(x[b + i]) : x[b + i];
    for (int j = 0; j < 32; j++) acc[j] += acc[j + 32];
    for (int j = 0; j < 16; j++) acc[j] += acc[j + 16];
    for (int j = 0; j < 8; j++) acc[j] += acc[j + 8];
    for (int j = 0; j < 8; j++) t += acc[j];
    total += t;
  }
  return total;
}

/* Row sums and 1-norms (float32 and bfloat16 rows, with and without a tail,
 * one and several blocks) give exactly the documented order's bits on every
 * ISA: results must not depend on the machine's vector width. */
static void test_row_sums_same_bits_every_isa(void) {
  static const int64_t lens[] = {1, 63, 64, 100, 256, 1000, 4096, 4196, 9000};
  enum { ROWS = 3 };
  uint32_t seed = 12345;
  for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++) {
    int64_t L = lens[li];
    float *x = malloc(sizeof(float) * ROWS * L);
    uint16_t *xb = malloc(sizeof(uint16_t) * ROWS * L);
    float *xbf = malloc(sizeof(float) * ROWS * L); /* the bf16 values as floats */
    fill_random(x, ROWS * L, &seed, 0.5f, 7.0f);
    to_bf16(x, xb, xbf, ROWS * L);
    for (int dt = 0; dt < 2; dt++)
      for (int absval = 0; absval < 2; absval++)
        for (size_t k = 0; k < 3; k++) {
          hpu_kernels_set_isa(isas[k]);
          double out[ROWS];
          hpu_node_t n = row_reduce(dt ? (void *)xb : (void *)x, dt ? HPU_BFLOAT16 : HPU_FLOAT32, ROWS,
                                    L, out, HPU_FLOAT64, absval ? HPU_REDUCE_NORM : HPU_REDUCE_SUM);
          n.params.nn.s[0] = hpu_scalar_float(1);
          CU_ASSERT_EQUAL_FATAL(run(&n), HPU_SUCCESS);
          for (int r = 0; r < ROWS; r++) {
            double want = ordered_sum((dt ? xbf : x) + r * L, L, absval);
            if (out[r] != want)
              fprintf(stderr, "\nL=%lld dt=%d abs=%d isa=%d row=%d: %.17g != %.17g\n", (long long)L, dt,
                      absval, (int)isas[k], r, out[r], want);
            CU_ASSERT_EQUAL(out[r], want);
          }
        }
    free(x);
    free(xb);
    free(xbf);
  }
  hpu_kernels_set_isa(HPU_ISA_AVX512);
}

/* amax / amin, and max / min with their index, over contiguous rows (the
 * vectorised paths) of float32 and bfloat16, lengths around the 64- and
 * 16-lane blocks, on every ISA: the scalar answer (the first index of the
 * best; NaN, and the first NaN's index, wherever a row holds one, in the
 * blocks or the tail), infinities kept, ties and signed zeros (the value
 * bit for bit: of equal zeros, the first). */
static void test_row_minmax_every_isa(void) {
  static const int64_t lens[] = {1, 15, 64, 65, 100, 1000};
  enum { ROWS = 8 };
  uint32_t seed = 4242;
  for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++) {
    int64_t L = lens[li];
    float *x = malloc(sizeof(float) * ROWS * L);
    uint16_t *xb = malloc(sizeof(uint16_t) * ROWS * L);
    fill_random(x, ROWS * L, &seed, 0.5f, 100.0f);
    /* row 1: a NaN early; row 2: a NaN last (the tail); row 3: +inf and
     * -inf; row 4: all -inf; row 5: ties among -1, -0, 0 and 1 */
    x[1 * L] = NAN;
    x[2 * L + L - 1] = NAN;
    x[3 * L + L / 2] = INFINITY;
    x[3 * L] = -INFINITY;
    for (int64_t i = 0; i < L; i++) x[4 * L + i] = -INFINITY;
    for (int64_t i = 0; i < L; i++) x[5 * L + i] = (float)((int)(x[5 * L + i] * 0.03f) % 2) * (i % 3 ? 1.0f : -0.0f);
    /* rows 6 and 7: the best is a zero, -0 first in row 6's max, 0 first
     * in row 7's min (the scan keeps the first of equal zeros) */
    for (int64_t i = 0; i < L; i++) {
      float z = (i / 3) % 2 ? 0.0f : -0.0f;
      x[6 * L + i] = i % 3 == 1 ? z : -(float)(1 + i % 7);
      x[7 * L + i] = i % 3 == 1 ? -z : (float)(1 + i % 7);
    }
    to_bf16(x, xb, x, ROWS * L); /* x now holds the bf16 values exactly */
    for (int dt = 0; dt < 2; dt++)
      for (int mx = 0; mx < 2; mx++)
        for (size_t k = 0; k < 3; k++) {
          hpu_kernels_set_isa(isas[k]);
          void *in = dt ? (void *)xb : (void *)x;
          hpu_dtype_t idt = dt ? HPU_BFLOAT16 : HPU_FLOAT32;
          float out[ROWS];
          int64_t at[ROWS];
          hpu_node_t n = row_reduce(in, idt, ROWS, L, out, HPU_FLOAT32, mx ? HPU_REDUCE_AMAX : HPU_REDUCE_AMIN);
          CU_ASSERT_EQUAL_FATAL(run(&n), HPU_SUCCESS);
          hpu_node_t a = node(HPU_OP_ARGREDUCE);
          a.num_inputs = a.num_outputs = 1;
          a.inputs[0] = T2(in, idt, ROWS, L);
          a.outputs[0] = T2(at, HPU_INT64, ROWS, 1);
          a.params.nn.i[0] = mx ? HPU_REDUCE_AMAX : HPU_REDUCE_AMIN;
          a.params.nn.i[1] = 1;
          CU_ASSERT_EQUAL_FATAL(run(&a), HPU_SUCCESS);
          for (int r = 0; r < ROWS; r++) {
            float want = x[r * L];
            int64_t want_at = 0;
            for (int64_t i = 1; i < L && want == want; i++) {
              float v = x[r * L + i];
              if (v != v || (mx ? v > want : v < want)) {
                want = v;
                want_at = i;
              }
            }
            if (want != want) {
              CU_ASSERT(isnan(out[r]));
            } else {
              if (out[r] != want)
                fprintf(stderr, "\nL=%lld dt=%d max=%d isa=%d row=%d: %g != %g\n", (long long)L, dt, mx,
                        (int)isas[k], r, out[r], want);
              CU_ASSERT_EQUAL(out[r], want);
              CU_ASSERT_EQUAL(signbit(out[r]) != 0, signbit(want) != 0);
            }
            if (at[r] != want_at)
              fprintf(stderr, "\nL=%lld dt=%d max=%d isa=%d row=%d: index %lld != %lld\n", (long long)L, dt,
                      mx, (int)isas[k], r, (long long)at[r], (long long)want_at);
            CU_ASSERT_EQUAL(at[r], want_at);
          }
        }
    free(x);
    free(xb);
  }
  hpu_kernels_set_isa(HPU_ISA_AVX512);
}

/* a comes before b in a stable sort (desc: NaN first, then descending;
 * else ascending, NaN last); equal values keep index order */
static int ref_before(float a, int64_t ia, float b, int64_t ib, int desc) {
  int an = a != a, bn = b != b;
  if (an || bn) return an && bn ? ia < ib : desc ? an : bn;
  if (a != b) return desc ? a > b : a < b;
  return ia < ib;
}

/* topk with k much smaller than the row (the vectorised entry scan) over
 * float32 and bfloat16 rows with ties, NaN (in the blocks and the tail),
 * infinities and signed zeros, on every ISA: the indices of a stable
 * sort's first k and their values bit for bit. */
static void test_topk_rows_every_isa(void) {
  static const int64_t lens[] = {64, 65, 100, 1000, 1030};
  enum { ROWS = 4, KMAX = 5 };
  uint32_t seed = 99;
  for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++) {
    int64_t L = lens[li];
    float *x = malloc(sizeof(float) * ROWS * L);
    uint16_t *xb = malloc(sizeof(uint16_t) * ROWS * L);
    fill_random(x, ROWS * L, &seed, 0.5f, 100.0f);
    /* row 1: ties among -3..3 with signed zeros; row 2: NaNs early, in the
     * middle and last; row 3: infinities of both signs, repeated */
    for (int64_t i = 0; i < L; i++) x[L + i] = (float)((int)x[L + i] % 4) * (i % 5 ? 1.0f : -0.0f);
    x[2 * L + 3] = x[2 * L + L / 2] = x[2 * L + L - 1] = NAN;
    x[3 * L + 7] = x[3 * L + L - 2] = INFINITY;
    x[3 * L + 9] = x[3 * L + L / 3] = -INFINITY;
    to_bf16(x, xb, x, ROWS * L); /* x now holds the bf16 values exactly */
    for (int dt = 0; dt < 2; dt++)
      for (int desc = 0; desc < 2; desc++)
        for (int64_t k = 1; k <= KMAX; k += KMAX - 1)
          for (size_t v = 0; v < 3; v++) {
            hpu_kernels_set_isa(isas[v]);
            float vals[ROWS * KMAX];
            uint16_t valsb[ROWS * KMAX];
            int64_t at[ROWS * KMAX];
            hpu_node_t n = node(HPU_OP_SORT);
            n.num_inputs = 1;
            n.num_outputs = 2;
            n.inputs[0] = T2(dt ? (void *)xb : (void *)x, dt ? HPU_BFLOAT16 : HPU_FLOAT32, ROWS, L);
            n.outputs[0] = T2(dt ? (void *)valsb : (void *)vals, dt ? HPU_BFLOAT16 : HPU_FLOAT32, ROWS, k);
            n.outputs[1] = T2(at, HPU_INT64, ROWS, k);
            n.params.nn.i[0] = 1;
            n.params.nn.i[1] = desc;
            n.params.nn.i[2] = k;
            CU_ASSERT_EQUAL_FATAL(run(&n), HPU_SUCCESS);
            for (int r = 0; r < ROWS; r++) {
              const float *xr = x + r * L;
              int64_t prev = -1;
              for (int64_t j = 0; j < k; j++) {
                /* the j-th of the stable order: the best element after prev */
                int64_t want = -1;
                for (int64_t i = 0; i < L; i++) {
                  if (prev >= 0 && !ref_before(xr[prev], prev, xr[i], i, desc)) continue;
                  if (want < 0 || ref_before(xr[i], i, xr[want], want, desc)) want = i;
                }
                prev = want;
                if (at[r * k + j] != want)
                  fprintf(stderr, "\nL=%lld dt=%d desc=%d k=%lld isa=%d row=%d #%lld: index %lld != %lld\n",
                          (long long)L, dt, desc, (long long)k, (int)isas[v], r, (long long)j,
                          (long long)at[r * k + j], (long long)want);
                CU_ASSERT_EQUAL(at[r * k + j], want);
                if (dt) {
                  CU_ASSERT_EQUAL(valsb[r * k + j], xb[r * L + want]);
                } else {
                  CU_ASSERT_EQUAL(memcmp(&vals[r * k + j], &xr[want], sizeof(float)), 0);
                }
              }
            }
          }
    free(x);
    free(xb);
  }
  hpu_kernels_set_isa(HPU_ISA_AVX512);
}

/* Column sums of tall [rows, cols] planes (bias gradients): the row-group
 * path (rows >= 1024, cols <= 1024; a last group shorter than the others)
 * and the column-block path (fewer rows, or wider) match a double
 * reference, and 1, 2 and 3 threads give the same bits. */
static void test_column_sums_any_thread_count(void) {
  static const int64_t shapes[][2] = {{5000, 300}, {4096, 1024}, {9000, 17},  {3000, 300},
                                      {2047, 768}, {1024, 256},  {1000, 300}, {4100, 1500}};
  uint32_t seed = 777;
  for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
    int64_t R = shapes[si][0], C = shapes[si][1];
    float *x = malloc(sizeof(float) * R * C);
    float *out = malloc(sizeof(float) * C), *first = malloc(sizeof(float) * C);
    fill_random(x, R * C, &seed, 0.25f, 1.0f);
    for (int threads = 1; threads <= 3; threads++) {
      CU_ASSERT_EQUAL_FATAL(hpu_set_num_threads(threads), HPU_SUCCESS);
      hpu_node_t n = node(HPU_OP_REDUCE);
      n.num_inputs = n.num_outputs = 1;
      n.inputs[0] = T2(x, HPU_FLOAT32, R, C);
      n.outputs[0] = T2(out, HPU_FLOAT32, 1, C);
      n.params.nn.i[0] = HPU_REDUCE_SUM;
      n.params.nn.i[1] = 1; /* dim 0 */
      CU_ASSERT_EQUAL_FATAL(run(&n), HPU_SUCCESS);
      for (int64_t j = 0; j < C; j++) {
        double want = 0;
        for (int64_t i = 0; i < R; i++) want += x[i * C + j];
        CU_ASSERT_DOUBLE_EQUAL(out[j], want, 1e-5 * R);
      }
      if (threads == 1) memcpy(first, out, sizeof(float) * C);
      else CU_ASSERT_EQUAL(memcmp(first, out, sizeof(float) * C), 0);
    }
    free(x);
    free(out);
    free(first);
  }
  CU_ASSERT_EQUAL(hpu_set_num_threads(2), HPU_SUCCESS);
}

static void test_argmax_cumsum(void) {
  float x[6] = {1, 7, 7, -2, NAN, 3};
  int64_t idx[2];
  hpu_node_t n = node(HPU_OP_ARGREDUCE);
  n.num_inputs = n.num_outputs = 1;
  n.inputs[0] = T2(x, HPU_FLOAT32, 2, 3);
  n.outputs[0] = T2(idx, HPU_INT64, 2, 1);
  n.params.nn.i[0] = HPU_REDUCE_AMAX;
  n.params.nn.i[1] = 1;
  CU_ASSERT_EQUAL_FATAL(run(&n), HPU_SUCCESS);
  CU_ASSERT_EQUAL(idx[0], 1); /* first of the ties */
  CU_ASSERT_EQUAL(idx[1], 1); /* NaN wins */
  int32_t v[5] = {1, 2, 3, 4, 5};
  int64_t cs[5];
  hpu_node_t c = node(HPU_OP_CUMSUM);
  c.num_inputs = c.num_outputs = 1;
  c.inputs[0] = T1(v, HPU_INT32, 5);
  c.outputs[0] = T1(cs, HPU_INT64, 5);
  CU_ASSERT_EQUAL_FATAL(run(&c), HPU_SUCCESS);
  for (int i = 0; i < 5; i++) CU_ASSERT_EQUAL(cs[i], (i + 1) * (i + 2) / 2);
}

/* logcumsumexp (cumsum mode 2): log of running sums of known exponentials,
 * -inf for an all -inf prefix, +inf kept (not inf - inf); bad modes and an
 * integer output are refused. */
static void test_logcumsumexp(void) {
  double x[6] = {-INFINITY, log(1.0), log(2.0), log(3.0), INFINITY, 1.0};
  double y[6];
  hpu_node_t c = node(HPU_OP_CUMSUM);
  c.num_inputs = c.num_outputs = 1;
  c.inputs[0] = T1(x, HPU_FLOAT64, 6);
  c.outputs[0] = T1(y, HPU_FLOAT64, 6);
  c.params.nn.i[1] = 2;
  CU_ASSERT_EQUAL_FATAL(run(&c), HPU_SUCCESS);
  CU_ASSERT(isinf(y[0]) && y[0] < 0);
  CU_ASSERT_DOUBLE_EQUAL(y[1], 0.0, 1e-15);
  CU_ASSERT_DOUBLE_EQUAL(y[2], log(3.0), 1e-15);
  CU_ASSERT_DOUBLE_EQUAL(y[3], log(6.0), 1e-15);
  CU_ASSERT(isinf(y[4]) && y[4] > 0);
  CU_ASSERT(isinf(y[5]) && y[5] > 0);
  c.params.nn.i[1] = 3;
  CU_ASSERT_EQUAL(run(&c), HPU_ERROR_INVALID_ARGUMENT);
  int64_t iv[6] = {0}, io[6];
  c.inputs[0] = T1(iv, HPU_INT64, 6);
  c.outputs[0] = T1(io, HPU_INT64, 6);
  c.params.nn.i[1] = 2;
  CU_ASSERT_EQUAL(run(&c), HPU_ERROR_UNSUPPORTED);
}

/* softmax of equal values is uniform; log_softmax is -log(n) */
/* Softmax and log_softmax rows of several lengths (the 64- and 16-lane
 * blocks and the scalar tail): the same bits on the generic, AVX2 and
 * AVX-512 paths (exp16 against pw_expf lane by lane), within 2e-6 of a
 * double reference, masked (-inf) and very negative entries exactly 0, and
 * a row with a NaN all NaN, as PyTorch gives. */
static void test_softmax_rows_same_bits_every_isa(void) {
  static const int64_t lens[] = {1, 15, 16, 63, 64, 100, 1000};
  enum { ROWS = 3 };
  uint32_t seed = 777;
  for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++) {
    int64_t L = lens[li];
    float *x = malloc(sizeof(float) * ROWS * L);
    float *y[3] = {malloc(sizeof(float) * ROWS * L), malloc(sizeof(float) * ROWS * L),
                   malloc(sizeof(float) * ROWS * L)};
    fill_random(x, ROWS * L, &seed, 0.5f, 20.0f);
    /* row 0: every third entry masked; row 2: a NaN (when L > 1) */
    for (int64_t i = 1; i < L; i += 3) x[i] = i % 2 ? -INFINITY : -1e4f;
    if (L > 1) x[2 * L + L / 2] = NAN;
    for (int lg = 0; lg < 2; lg++) {
      for (size_t k = 0; k < 3; k++) {
        hpu_kernels_set_isa(isas[k]);
        hpu_node_t n = node(HPU_OP_SOFTMAX);
        n.num_inputs = n.num_outputs = 1;
        n.inputs[0] = T2(x, HPU_FLOAT32, ROWS, L);
        n.outputs[0] = T2(y[k], HPU_FLOAT32, ROWS, L);
        n.params.nn.i[0] = 1;
        n.params.nn.i[1] = lg;
        CU_ASSERT_EQUAL_FATAL(run(&n), HPU_SUCCESS);
      }
      CU_ASSERT_EQUAL(memcmp(y[0], y[1], sizeof(float) * ROWS * L), 0);
      CU_ASSERT_EQUAL(memcmp(y[0], y[2], sizeof(float) * ROWS * L), 0);
      for (int r = 0; r < ROWS; r++) {
        const float *xr = x + r * L, *yr = y[2] + r * L;
        if (r == 2 && L > 1) {
          for (int64_t i = 0; i < L; i++) CU_ASSERT(isnan(yr[i]));
          continue;
        }
        double mx = -INFINITY, s = 0;
        for (int64_t i = 0; i < L; i++) mx = xr[i] > mx ? xr[i] : mx;
        for (int64_t i = 0; i < L; i++) s += exp((double)xr[i] - mx);
        for (int64_t i = 0; i < L; i++) {
          double want = lg ? (double)xr[i] - mx - log(s) : exp((double)xr[i] - mx) / s;
          if (!lg && xr[i] <= -1e4f) {
            CU_ASSERT_EQUAL(yr[i], 0.0f);
          } else if (!isinf(want)) {
            CU_ASSERT_DOUBLE_EQUAL(yr[i], want, 2e-6 * (fabs(want) > 1 ? fabs(want) : 1));
          } else {
            CU_ASSERT(isinf(yr[i]) && yr[i] < 0);
          }
        }
      }
    }
    free(x);
    for (int k = 0; k < 3; k++) free(y[k]);
  }
  hpu_kernels_set_isa(HPU_ISA_AVX512);
}

/* bf16 softmax rows and the bf16 softmax backward write (and the backward
 * reads) the bf16 rows without float copies of them: their bits must still
 * be those of the float kernel on the same values, rounded once to bf16, on
 * every ISA. Lengths cover the 64- and 16-lane blocks and the scalar tail. */
static void test_softmax_bf16_rows_are_float_rows_rounded(void) {
  static const int64_t lens[] = {1, 15, 16, 63, 64, 100, 1000};
  enum { ROWS = 3 };
  uint32_t seed = 4242;
  for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++) {
    int64_t L = lens[li], N = ROWS * L;
    float *xf = malloc(sizeof(float) * N), *gf = malloc(sizeof(float) * N), *yf = malloc(sizeof(float) * N);
    float *df = malloc(sizeof(float) * N);
    uint16_t *xb = malloc(2 * N), *gb = malloc(2 * N), *yb = malloc(2 * N), *db = malloc(2 * N);
    fill_random(xf, N, &seed, 0.5f, 20.0f);
    fill_random(gf, N, &seed, 0.5f, 4.0f);
    for (int64_t i = 0; i < N; i++) { /* the float rows hold exactly the bf16 values */
      xb[i] = hpu_cvt_f32_bf16(xf[i]);
      xf[i] = hpu_cvt_bf16_f32(xb[i]);
      gb[i] = hpu_cvt_f32_bf16(gf[i]);
      gf[i] = hpu_cvt_bf16_f32(gb[i]);
    }
    for (size_t k = 0; k < 3; k++) {
      hpu_kernels_set_isa(isas[k]);
      hpu_node_t n = node(HPU_OP_SOFTMAX);
      n.num_inputs = n.num_outputs = 1;
      n.params.nn.i[0] = 1;
      n.inputs[0] = T2(xf, HPU_FLOAT32, ROWS, L);
      n.outputs[0] = T2(yf, HPU_FLOAT32, ROWS, L);
      CU_ASSERT_EQUAL_FATAL(run(&n), HPU_SUCCESS);
      n.inputs[0] = T2(xb, HPU_BFLOAT16, ROWS, L);
      n.outputs[0] = T2(yb, HPU_BFLOAT16, ROWS, L);
      CU_ASSERT_EQUAL_FATAL(run(&n), HPU_SUCCESS);
      int bad = 0;
      for (int64_t i = 0; i < N; i++) bad += yb[i] != hpu_cvt_f32_bf16(yf[i]);
      CU_ASSERT_EQUAL(bad, 0);
      /* backward from the bf16 forward's output, as autograd has it */
      for (int64_t i = 0; i < N; i++) yf[i] = hpu_cvt_bf16_f32(yb[i]);
      hpu_node_t b = node(HPU_OP_SOFTMAX_BACKWARD);
      b.num_inputs = 2;
      b.num_outputs = 1;
      b.params.nn.i[0] = 1;
      b.inputs[0] = T2(gf, HPU_FLOAT32, ROWS, L);
      b.inputs[1] = T2(yf, HPU_FLOAT32, ROWS, L);
      b.outputs[0] = T2(df, HPU_FLOAT32, ROWS, L);
      CU_ASSERT_EQUAL_FATAL(run(&b), HPU_SUCCESS);
      b.inputs[0] = T2(gb, HPU_BFLOAT16, ROWS, L);
      b.inputs[1] = T2(yb, HPU_BFLOAT16, ROWS, L);
      b.outputs[0] = T2(db, HPU_BFLOAT16, ROWS, L);
      CU_ASSERT_EQUAL_FATAL(run(&b), HPU_SUCCESS);
      bad = 0;
      for (int64_t i = 0; i < N; i++) bad += db[i] != hpu_cvt_f32_bf16(df[i]);
      CU_ASSERT_EQUAL(bad, 0);
    }
    free(xf); free(gf); free(yf); free(df);
    free(xb); free(gb); free(yb); free(db);
  }
  hpu_kernels_set_isa(HPU_ISA_AVX512);
}

static void test_softmax_equal(void) {
  enum { R = 5, C = 37 };
  float x[R * C], y[R * C];
  for (int i = 0; i < R * C; i++) x[i] = 3.25f;
  for (size_t k = 0; k < 3; k++) {
    hpu_kernels_set_isa(isas[k]);
    for (int lg = 0; lg < 2; lg++) {
      hpu_node_t n = node(HPU_OP_SOFTMAX);
      n.num_inputs = n.num_outputs = 1;
      n.inputs[0] = T2(x, HPU_FLOAT32, R, C);
      n.outputs[0] = T2(y, HPU_FLOAT32, R, C);
      n.params.nn.i[0] = 1;
      n.params.nn.i[1] = lg;
      CU_ASSERT_EQUAL_FATAL(run(&n), HPU_SUCCESS);
      for (int i = 0; i < R * C; i++)
        CU_ASSERT_DOUBLE_EQUAL(y[i], lg ? -log((double)C) : 1.0 / C, 1e-6);
      n.params.nn.i[0] = 0; /* over rows (strided path) */
      CU_ASSERT_EQUAL_FATAL(run(&n), HPU_SUCCESS);
      for (int i = 0; i < R * C; i++)
        CU_ASSERT_DOUBLE_EQUAL(y[i], lg ? -log((double)R) : 1.0 / R, 1e-6);
    }
  }
  hpu_kernels_set_isa(HPU_ISA_AVX512);
}

/* layer norm of a constant row is the bias; rows 0..N-1 have mean (N-1)/2 */
static void test_layer_norm(void) {
  enum { M = 3, N = 8 };
  float x[M * N], y[M * N], w[N], b[N], mean[M], rstd[M];
  for (int i = 0; i < N; i++) {
    x[i] = 2.0f;             /* row 0: constant */
    x[N + i] = (float)i;     /* row 1: 0..7 */
    x[2 * N + i] = -(float)i;
    w[i] = 2.0f;
    b[i] = (float)i;
  }
  hpu_node_t n = node(HPU_OP_LAYER_NORM);
  n.num_inputs = 3;
  n.num_outputs = 3;
  n.inputs[0] = T2(x, HPU_FLOAT32, M, N);
  n.inputs[1] = T1(w, HPU_FLOAT32, N);
  n.inputs[2] = T1(b, HPU_FLOAT32, N);
  n.outputs[0] = T2(y, HPU_FLOAT32, M, N);
  n.outputs[1] = T1(mean, HPU_FLOAT32, M);
  n.outputs[2] = T1(rstd, HPU_FLOAT32, M);
  n.params.nn.i[0] = 3;
  n.params.nn.s[0] = hpu_scalar_float(1e-5);
  CU_ASSERT_EQUAL_FATAL(run(&n), HPU_SUCCESS);
  for (int i = 0; i < N; i++) CU_ASSERT_DOUBLE_EQUAL(y[i], b[i], 1e-6);
  CU_ASSERT_DOUBLE_EQUAL(mean[1], 3.5, 1e-6);
  CU_ASSERT_DOUBLE_EQUAL(rstd[1], 1.0 / sqrt(5.25 + 1e-5), 1e-5);
  for (int i = 0; i < N; i++) /* rows 1 and 2 mirror each other */
    CU_ASSERT_DOUBLE_EQUAL(y[N + i] - b[i], -(y[2 * N + i] - b[i]), 1e-5);
}

/* Group norm by construction: x [2, 4, 3] in 2 groups, group r holding
 * 10 r + 0..5, so every group has mean 10 r + 2.5 and variance 35 / 12;
 * in float32 and bf16 (the values are exact in bf16), on every ISA. Then
 * the float64 backward against central differences of
 * L(x, w, b) = sum(dy * y), and the checks of a bad node. */
enum { GN_N = 2, GN_C = 4, GN_HW = 3, GN_G = 2, GN_LEN = GN_N * GN_C * GN_HW };

static void gn_forward_f64(const double *x, const double *w, const double *b, double *y) {
  int64_t len = GN_C / GN_G * GN_HW;
  for (int r = 0; r < GN_N * GN_G; r++) {
    double s = 0, q = 0;
    for (int k = 0; k < len; k++) s += x[r * len + k];
    double mean = s / len;
    for (int k = 0; k < len; k++) q += (x[r * len + k] - mean) * (x[r * len + k] - mean);
    double rstd = 1.0 / sqrt(q / len + 1e-5);
    for (int k = 0; k < len; k++) {
      int ch = (r % GN_G) * (GN_C / GN_G) + k / GN_HW;
      y[r * len + k] = (x[r * len + k] - mean) * rstd * w[ch] + b[ch];
    }
  }
}

static hpu_tensor_t T3(void *d, hpu_dtype_t dt, int64_t a, int64_t b, int64_t c) {
  int64_t s[3] = {a, b, c};
  return T(d, dt, 3, s);
}

static void test_group_norm(void) {
  float x[GN_LEN], y[GN_LEN], w[GN_C], b[GN_C], mean[GN_N * GN_G], rstd[GN_N * GN_G];
  uint16_t xb[GN_LEN], yb[GN_LEN], wb[GN_C], bb[GN_C];
  double xd[GN_LEN], yd[GN_LEN], wd[GN_C], bd[GN_C];
  for (int i = 0; i < GN_LEN; i++) {
    x[i] = (float)(10 * (i / 6) + i % 6);
    xb[i] = hpu_cvt_f32_bf16(x[i]);
    xd[i] = x[i];
  }
  for (int c = 0; c < GN_C; c++) {
    w[c] = 0.5f + (float)c;
    b[c] = (float)c - 1.5f;
    wb[c] = hpu_cvt_f32_bf16(w[c]);
    bb[c] = hpu_cvt_f32_bf16(b[c]);
    wd[c] = w[c];
    bd[c] = b[c];
  }
  gn_forward_f64(xd, wd, bd, yd);
  for (size_t k = 0; k < 3; k++) {
    hpu_kernels_set_isa(isas[k]);
    for (int bf = 0; bf < 2; bf++) {
      hpu_dtype_t dt = bf ? HPU_BFLOAT16 : HPU_FLOAT32;
      hpu_node_t n = node(HPU_OP_GROUP_NORM);
      n.num_inputs = 3;
      n.num_outputs = 3;
      n.inputs[0] = T3(bf ? (void *)xb : (void *)x, dt, GN_N, GN_C, GN_HW);
      n.inputs[1] = T1(bf ? (void *)wb : (void *)w, dt, GN_C);
      n.inputs[2] = T1(bf ? (void *)bb : (void *)b, dt, GN_C);
      n.outputs[0] = T3(bf ? (void *)yb : (void *)y, dt, GN_N, GN_C, GN_HW);
      n.outputs[1] = T1(mean, HPU_FLOAT32, GN_N * GN_G);
      n.outputs[2] = T1(rstd, HPU_FLOAT32, GN_N * GN_G);
      n.params.nn.i[0] = 3;
      n.params.nn.i[1] = GN_G;
      n.params.nn.s[0] = hpu_scalar_float(1e-5);
      CU_ASSERT_EQUAL_FATAL(run(&n), HPU_SUCCESS);
      for (int r = 0; r < GN_N * GN_G; r++) {
        CU_ASSERT_DOUBLE_EQUAL(mean[r], 10 * r + 2.5, 1e-6);
        CU_ASSERT_DOUBLE_EQUAL(rstd[r], 1.0 / sqrt(35.0 / 12 + 1e-5), 1e-6);
      }
      for (int i = 0; i < GN_LEN; i++) {
        double got = bf ? hpu_cvt_bf16_f32(yb[i]) : y[i];
        /* bf16: one rounding of the float result, half a step of 2^-7 */
        CU_ASSERT_DOUBLE_EQUAL(got, yd[i], bf ? fabs(yd[i]) * 0x1p-8 + 1e-6 : 1e-5);
      }
    }
  }
  hpu_kernels_set_isa(HPU_ISA_AVX512);

  /* float64 backward against central differences */
  double dy[GN_LEN], st[2 * GN_N * GN_G], dx[GN_LEN], dw[GN_C], db[GN_C];
  for (int i = 0; i < GN_LEN; i++) dy[i] = sin(1.0 + i) + 0.25 * (i % 3);
  for (int i = 0; i < GN_LEN; i++) xd[i] = cos(0.7 * i) * 3 + 0.1 * i;
  hpu_node_t f = node(HPU_OP_GROUP_NORM);
  f.num_inputs = 3;
  f.num_outputs = 3;
  f.inputs[0] = T3(xd, HPU_FLOAT64, GN_N, GN_C, GN_HW);
  f.inputs[1] = T1(wd, HPU_FLOAT64, GN_C);
  f.inputs[2] = T1(bd, HPU_FLOAT64, GN_C);
  f.outputs[0] = T3(yd, HPU_FLOAT64, GN_N, GN_C, GN_HW);
  f.outputs[1] = T1(st, HPU_FLOAT64, GN_N * GN_G);
  f.outputs[2] = T1(st + GN_N * GN_G, HPU_FLOAT64, GN_N * GN_G);
  f.params.nn.i[0] = 3;
  f.params.nn.i[1] = GN_G;
  f.params.nn.s[0] = hpu_scalar_float(1e-5);
  CU_ASSERT_EQUAL_FATAL(run(&f), HPU_SUCCESS);
  hpu_node_t g = node(HPU_OP_GROUP_NORM_BACKWARD);
  g.num_inputs = 4;
  g.num_outputs = 3;
  g.inputs[0] = T3(dy, HPU_FLOAT64, GN_N, GN_C, GN_HW);
  g.inputs[1] = T3(xd, HPU_FLOAT64, GN_N, GN_C, GN_HW);
  g.inputs[2] = T2(st, HPU_FLOAT64, 2, GN_N * GN_G);
  g.inputs[3] = T1(wd, HPU_FLOAT64, GN_C);
  g.outputs[0] = T3(dx, HPU_FLOAT64, GN_N, GN_C, GN_HW);
  g.outputs[1] = T1(dw, HPU_FLOAT64, GN_C);
  g.outputs[2] = T1(db, HPU_FLOAT64, GN_C);
  g.params.nn.i[0] = 7;
  g.params.nn.i[1] = 1;
  g.params.nn.i[2] = GN_G;
  CU_ASSERT_EQUAL_FATAL(run(&g), HPU_SUCCESS);
  const double h = 1e-6;
  double yp[GN_LEN], ym[GN_LEN];
  /* L as a function of one coordinate of x (p = 0), w (1) or b (2) */
  for (int p = 0; p < 3; p++) {
    int count = p == 0 ? GN_LEN : GN_C;
    double *v = p == 0 ? xd : p == 1 ? wd : bd;
    const double *grad = p == 0 ? dx : p == 1 ? dw : db;
    for (int i = 0; i < count; i++) {
      double keep = v[i], lp = 0, lm = 0;
      v[i] = keep + h;
      gn_forward_f64(xd, wd, bd, yp);
      v[i] = keep - h;
      gn_forward_f64(xd, wd, bd, ym);
      v[i] = keep;
      for (int k = 0; k < GN_LEN; k++) {
        lp += dy[k] * yp[k];
        lm += dy[k] * ym[k];
      }
      CU_ASSERT_DOUBLE_EQUAL(grad[i], (lp - lm) / (2 * h), 1e-6);
    }
  }

  /* bad nodes: 4 channels in 3 groups; stats of the wrong size */
  f.params.nn.i[1] = 3;
  CU_ASSERT_EQUAL(run(&f), HPU_ERROR_INVALID_ARGUMENT);
  CU_ASSERT_PTR_NOT_NULL(strstr(hpu_last_error(), "groups"));
  g.inputs[2] = T2(st, HPU_FLOAT64, 2, GN_N * GN_G - 1);
  CU_ASSERT_EQUAL(run(&g), HPU_ERROR_INVALID_ARGUMENT);
  CU_ASSERT_PTR_NOT_NULL(strstr(hpu_last_error(), "stats"));
}

static void test_gather_scatter_index(void) {
  float x[6] = {0, 1, 2, 3, 4, 5}, out[4] = {0};
  int64_t idx[4] = {2, 0, 1, 1};
  hpu_node_t g = node(HPU_OP_GATHER);
  g.num_inputs = 2;
  g.num_outputs = 1;
  g.inputs[0] = T2(x, HPU_FLOAT32, 2, 3);
  g.inputs[1] = T2(idx, HPU_INT64, 2, 2);
  g.outputs[0] = T2(out, HPU_FLOAT32, 2, 2);
  g.params.nn.i[0] = 1;
  CU_ASSERT_EQUAL_FATAL(run(&g), HPU_SUCCESS);
  CU_ASSERT(out[0] == 2 && out[1] == 0 && out[2] == 4 && out[3] == 4);
  /* scatter add: duplicates accumulate */
  float acc[6] = {0}, src[4] = {1, 10, 100, 1000};
  hpu_node_t s = node(HPU_OP_SCATTER);
  s.num_inputs = 2;
  s.num_outputs = 1;
  s.inputs[0] = T2(idx, HPU_INT64, 2, 2);
  s.inputs[1] = T2(src, HPU_FLOAT32, 2, 2);
  s.outputs[0] = T2(acc, HPU_FLOAT32, 2, 3);
  s.params.nn.i[0] = 1;
  s.params.nn.i[1] = 1;
  CU_ASSERT_EQUAL_FATAL(run(&s), HPU_SUCCESS);
  CU_ASSERT(acc[0] == 10 && acc[2] == 1 && acc[4] == 1100 && acc[3] == 0);
  /* scatter multiply (reduce mode 2), int32 index: duplicates multiply */
  int32_t idx32[4] = {2, 0, 1, 1};
  float prod[6] = {1, 1, 1, 1, 1, 1};
  s.inputs[0] = T2(idx32, HPU_INT32, 2, 2);
  s.outputs[0] = T2(prod, HPU_FLOAT32, 2, 3);
  s.params.nn.i[1] = 2;
  CU_ASSERT_EQUAL_FATAL(run(&s), HPU_SUCCESS);
  CU_ASSERT(prod[0] == 10 && prod[2] == 1 && prod[4] == 100000 && prod[3] == 1);
  s.params.nn.i[1] = 3;
  CU_ASSERT_EQUAL(run(&s), HPU_ERROR_INVALID_ARGUMENT);
  /* bf16 scatter add sums in float and rounds once, as PyTorch's CPU: 256 + 1 + 1
   * is 258, where rounding each step (257 -> 256) would stay at 256 */
  uint16_t b_self[2] = {0x4380 /* 256 */, 0x4380}, b_src[2] = {0x3F80 /* 1 */, 0x3F80};
  int64_t b_idx[2] = {0, 0};
  hpu_node_t bs = node(HPU_OP_SCATTER);
  bs.num_inputs = 2;
  bs.num_outputs = 1;
  bs.inputs[0] = T1(b_idx, HPU_INT64, 2);
  bs.inputs[1] = T1(b_src, HPU_BFLOAT16, 2);
  bs.outputs[0] = T1(b_self, HPU_BFLOAT16, 2);
  bs.params.nn.i[1] = 1;
  CU_ASSERT_EQUAL_FATAL(run(&bs), HPU_SUCCESS);
  CU_ASSERT_EQUAL(b_self[0], 0x4381 /* 258 */);
  CU_ASSERT_EQUAL(b_self[1], 0x4380);
  s.inputs[0] = T2(idx, HPU_INT64, 2, 2);
  s.outputs[0] = T2(acc, HPU_FLOAT32, 2, 3);
  s.params.nn.i[1] = 1;
  /* an out-of-range index fails the node, names it, and writes nothing out of bounds */
  idx[3] = 3;
  CU_ASSERT_EQUAL(run(&g), HPU_ERROR_OUT_OF_RANGE);
  CU_ASSERT_PTR_NOT_NULL(strstr(hpu_last_error(), "index 3 is out of bounds for dimension 1 with size 3"));
  idx[3] = -1;
  CU_ASSERT_EQUAL(run(&s), HPU_ERROR_OUT_OF_RANGE);
  /* index_select rows; embedding backward sums duplicate rows */
  int64_t ids[3] = {1, 1, 0};
  float sel[9], emb[6];
  hpu_node_t is = node(HPU_OP_INDEX_SELECT);
  is.num_inputs = 2;
  is.num_outputs = 1;
  is.inputs[0] = T2(x, HPU_FLOAT32, 2, 3);
  is.inputs[1] = T1(ids, HPU_INT64, 3);
  is.outputs[0] = T2(sel, HPU_FLOAT32, 3, 3);
  CU_ASSERT_EQUAL_FATAL(run(&is), HPU_SUCCESS);
  CU_ASSERT(sel[0] == 3 && sel[3] == 3 && sel[6] == 0 && sel[8] == 2);
  hpu_node_t eb = node(HPU_OP_EMBEDDING_BACKWARD);
  eb.num_inputs = 2;
  eb.num_outputs = 1;
  eb.inputs[0] = T2(sel, HPU_FLOAT32, 3, 3);
  eb.inputs[1] = T1(ids, HPU_INT64, 3);
  eb.outputs[0] = T2(emb, HPU_FLOAT32, 2, 3);
  eb.params.nn.i[0] = -1;
  CU_ASSERT_EQUAL_FATAL(run(&eb), HPU_SUCCESS);
  CU_ASSERT(emb[0] == 0 && emb[3] == 6 && emb[5] == 10);
  ids[2] = 2;
  CU_ASSERT_EQUAL(run(&is), HPU_ERROR_OUT_OF_RANGE);
  CU_ASSERT_EQUAL(run(&eb), HPU_ERROR_OUT_OF_RANGE);
}

/* Binary cross entropy by construction: -log(1/2) at x = 1/2, the -100
 * floor at a certain wrong answer, 0 at a certain right one; a value
 * outside [0, 1] fails the node with the CPU's message. */
static void test_binary_cross_entropy(void) {
  float x[6] = {0.5f, 0.5f, 1.0f, 0.0f, 0.0f, 0.25f}, y[6] = {1, 0, 1, 1, 0, 1}, out[6];
  double xd[2] = {0.5, 1.0}, yd[2] = {0.0, 0.0}, outd[2];
  hpu_node_t n = node(HPU_OP_BINARY_CROSS_ENTROPY);
  n.num_inputs = 2;
  n.num_outputs = 1;
  n.inputs[0] = T1(x, HPU_FLOAT32, 6);
  n.inputs[1] = T1(y, HPU_FLOAT32, 6);
  n.outputs[0] = T1(out, HPU_FLOAT32, 6);
  CU_ASSERT_EQUAL_FATAL(run(&n), HPU_SUCCESS);
  const double expect[6] = {log(2.0), log(2.0), 0, 100, 0, log(4.0)};
  for (int i = 0; i < 6; i++) CU_ASSERT_DOUBLE_EQUAL(out[i], expect[i], 1e-6);
  n.inputs[0] = T1(xd, HPU_FLOAT64, 2);
  n.inputs[1] = T1(yd, HPU_FLOAT64, 2);
  n.outputs[0] = T1(outd, HPU_FLOAT64, 2);
  CU_ASSERT_EQUAL_FATAL(run(&n), HPU_SUCCESS);
  CU_ASSERT_DOUBLE_EQUAL(outd[0], log(2.0), 1e-15);
  CU_ASSERT_DOUBLE_EQUAL(outd[1], 100.0, 1e-15);
  xd[0] = 1.5;
  CU_ASSERT_EQUAL(run(&n), HPU_ERROR_INVALID_ARGUMENT);
  CU_ASSERT_PTR_NOT_NULL(strstr(hpu_last_error(), "input should be between 0 and 1"));
  xd[0] = 0.5;
  yd[1] = NAN;
  CU_ASSERT_EQUAL(run(&n), HPU_ERROR_INVALID_ARGUMENT);
  CU_ASSERT_PTR_NOT_NULL(strstr(hpu_last_error(), "target should be between 0 and 1"));
  /* mixed dtypes are refused before running */
  n.inputs[1] = T1(y, HPU_FLOAT32, 2);
  CU_ASSERT_EQUAL(hpu_node_validate(&n), HPU_ERROR_INVALID_ARGUMENT);
}

static void test_nll_sort(void) {
  float logp[6] = {-1, -2, -3, -4, -5, -6}, loss, tw;
  int64_t t[2] = {2, 0};
  hpu_node_t n = node(HPU_OP_NLL_LOSS);
  n.num_inputs = n.num_outputs = 2;
  n.inputs[0] = T2(logp, HPU_FLOAT32, 2, 3);
  n.inputs[1] = T1(t, HPU_INT64, 2);
  n.outputs[0] = T1(&loss, HPU_FLOAT32, 1);
  n.outputs[1] = T1(&tw, HPU_FLOAT32, 1);
  n.params.nn.i[0] = 1;
  n.params.nn.i[1] = -100;
  CU_ASSERT_EQUAL_FATAL(run(&n), HPU_SUCCESS);
  CU_ASSERT_DOUBLE_EQUAL(loss, 3.5, 1e-6);
  CU_ASSERT_EQUAL(tw, 2);
  t[1] = 3;
  CU_ASSERT_EQUAL(run(&n), HPU_ERROR_OUT_OF_RANGE);
  float v[5] = {3, 1, 3, 2, 1}, sv[5];
  int64_t si[5];
  hpu_node_t s = node(HPU_OP_SORT);
  s.num_inputs = 1;
  s.num_outputs = 2;
  s.inputs[0] = T1(v, HPU_FLOAT32, 5);
  s.outputs[0] = T1(sv, HPU_FLOAT32, 5);
  s.outputs[1] = T1(si, HPU_INT64, 5);
  s.params.nn.i[2] = 5;
  CU_ASSERT_EQUAL_FATAL(run(&s), HPU_SUCCESS);
  int64_t want[5] = {1, 4, 3, 0, 2}; /* stable */
  for (int i = 0; i < 5; i++) CU_ASSERT_EQUAL(si[i], want[i]);
}

int main(void) {
  if (CU_initialize_registry() != CUE_SUCCESS) return 1;
  CU_pSuite s = CU_add_suite("nn", NULL, NULL);
  CU_add_test(s, "reductions of ranges", test_reduce_ranges);
  CU_add_test(s, "row sums: same bits on every ISA", test_row_sums_same_bits_every_isa);
  CU_add_test(s, "column sums: any thread count", test_column_sums_any_thread_count);
  CU_add_test(s, "row max/min and their index: every ISA, NaN, infinities, ties", test_row_minmax_every_isa);
  CU_add_test(s, "topk rows (k << n): every ISA, ties, NaN, infinities", test_topk_rows_every_isa);
  CU_add_test(s, "argmax and cumsum", test_argmax_cumsum);
  CU_add_test(s, "logcumsumexp", test_logcumsumexp);
  CU_add_test(s, "softmax of equal values", test_softmax_equal);
  CU_add_test(s, "softmax rows: same bits on every ISA", test_softmax_rows_same_bits_every_isa);
  CU_add_test(s, "softmax bf16 rows: the float rows rounded", test_softmax_bf16_rows_are_float_rows_rounded);
  CU_add_test(s, "layer norm by construction", test_layer_norm);
  CU_add_test(s, "group norm by construction, backward by differences", test_group_norm);
  CU_add_test(s, "gather/scatter/index bounds", test_gather_scatter_index);
  CU_add_test(s, "nll_loss and sort", test_nll_sort);
  CU_add_test(s, "binary cross entropy by construction", test_binary_cross_entropy);
  CU_basic_set_mode(CU_BRM_VERBOSE);
  CU_basic_run_tests();
  unsigned failed = CU_get_number_of_failures();
  CU_cleanup_registry();
  return failed ? 1 : 0;
}
