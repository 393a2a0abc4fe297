/* GEMM microkernels (kernels/gemm.c) through HPU_OP_MATMUL: every kernel
 * (forced) against a double-precision loop, on the block edges (m, n, k not
 * multiples of the 12 x 32 tile, k = 1, odd k, large k), transposed and
 * strided operands, batches with a broadcast operand, alpha/beta/bias, a
 * transposed output, one and two threads. */
#include <CUnit/Basic.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hpu/hpu.h"
#include "test_nodes.h"
#include "kernels/gemm.h"
#include "kernels/kernels.h"

static void setf(void *base, hpu_dtype_t dt, int64_t i, float v) {
  if (dt == HPU_FLOAT32) ((float *)base)[i] = v;
  else if (dt == HPU_BFLOAT16) ((uint16_t *)base)[i] = hpu_float_to_bf16(v);
  else ((uint16_t *)base)[i] = hpu_float_to_half(v);
}

static double getf(const void *base, hpu_dtype_t dt, int64_t i) {
  if (dt == HPU_FLOAT32) return ((const float *)base)[i];
  if (dt == HPU_BFLOAT16) return hpu_bf16_to_float(((const uint16_t *)base)[i]);
  return hpu_half_to_float(((const uint16_t *)base)[i]);
}

static uint32_t rng_state = 12345;
static float rnd(int ints) {
  rng_state = rng_state * 1664525u + 1013904223u;
  if (ints) return (float)((int)(rng_state >> 29) - 4); /* -4..3: exact in every dtype */
  return (float)((rng_state >> 8) * (1.0 / 16777216.0)) * 2.0f - 1.0f;
}

typedef struct {
  int bt;            /* batch size of out and A (B is 2-d: broadcast) */
  int m, n, k;
  int ta, tb;        /* operand stored transposed */
  int astep;         /* A's inner stride multiplier (2: every other element) */
  int tc;            /* output stored transposed */
  int bias;          /* 0: none, 1: full [m, n] in2, 2: row vector [n] broadcast */
  float alpha, beta;
} mm_case_t;

static int case_fails = 0;

/* Runs one case on `dt` with ints (exact) or random floats. */
static void check(const mm_case_t *c, hpu_dtype_t dt, int ints) {
  int64_t es = (int64_t)hpu_dtype_size(dt);
  int64_t M = c->m, N = c->n, K = c->k, BT = c->bt, st = c->astep;
  /* A storage: [BT][M][K*st] or transposed [BT][K][M*st] */
  int64_t alen = BT * M * K * st;
  char *A = calloc((size_t)alen + 1, (size_t)es), *B = calloc((size_t)(K * N) + 1, (size_t)es);
  char *Cb = calloc((size_t)(M * N) + 1, (size_t)es), *O = calloc((size_t)(BT * M * N) + 1, (size_t)es);
  for (int64_t i = 0; i < alen; i++) setf(A, dt, i, rnd(ints));
  for (int64_t i = 0; i < K * N; i++) setf(B, dt, i, rnd(ints));
  for (int64_t i = 0; i < M * N; i++) setf(Cb, dt, i, rnd(ints));
  for (int64_t i = 0; i < BT * M * N; i++) setf(O, dt, i, NAN); /* must all be written */

  int64_t as[3] = {BT, M, K};
  hpu_tensor_t ta = T(A, dt, 3, as);
  if (c->ta) {
    ta.strides[1] = st;
    ta.strides[2] = M * st;
  } else {
    ta.strides[1] = K * st;
    ta.strides[2] = st;
  }
  int64_t bs[2] = {K, N};
  hpu_tensor_t tb = T(B, dt, 2, bs);
  if (c->tb) {
    tb.strides[0] = 1;
    tb.strides[1] = K;
  }
  int64_t os[3] = {BT, M, N};
  hpu_tensor_t to = T(O, dt, 3, os);
  if (c->tc) {
    to.strides[1] = 1;
    to.strides[2] = M;
  }
  hpu_tensor_t tcb;
  if (c->bias == 2) {
    int64_t n1 = N;
    tcb = T(Cb, dt, 1, &n1);
  } else {
    int64_t cs[2] = {M, N};
    tcb = T(Cb, dt, 2, cs);
  }
  hpu_node_t nd;
  memset(&nd, 0, sizeof nd);
  nd.op = HPU_OP_MATMUL;
  nd.compute_dtype = dt;
  nd.num_inputs = c->bias ? 3 : 2;
  nd.num_outputs = 1;
  nd.inputs[0] = ta;
  nd.inputs[1] = tb;
  nd.inputs[2] = tcb;
  nd.outputs[0] = to;
  nd.params.matmul.alpha = hpu_scalar_float(c->alpha);
  nd.params.matmul.beta = hpu_scalar_float(c->beta);
  CU_ASSERT_EQUAL_FATAL(run(&nd), HPU_SUCCESS);

  double eps = dt == HPU_FLOAT32 ? 1.2e-7 : dt == HPU_BFLOAT16 ? 3.9e-3 : 4.9e-4;
  /* The reference reads A and B converted to double once, B by columns:
   * this loop runs unoptimised under the sanitizers, and converting every
   * element in it took 5 of the 6 minutes of this file on a 2-core Zen 3. */
  double *Ad = malloc(sizeof(double) * (size_t)alen), *Bt = malloc(sizeof(double) * (size_t)(K * N));
  CU_ASSERT_FATAL(Ad != NULL && Bt != NULL);
  for (int64_t i = 0; i < alen; i++) Ad[i] = getf(A, dt, i);
  for (int64_t l = 0; l < K; l++)
    for (int64_t j = 0; j < N; j++) Bt[j * K + l] = getf(B, dt, l * tb.strides[0] + j * tb.strides[1]);
  int bad = 0;
  for (int64_t b = 0; b < BT; b++)
    for (int64_t i = 0; i < M; i++)
      for (int64_t j = 0; j < N; j++) {
        double acc = 0, mag = 0;
        const double *arow = Ad + b * ta.strides[0] + i * ta.strides[1], *bcol = Bt + j * K;
        int64_t as2 = ta.strides[2];
        for (int64_t l = 0; l < K; l++) {
          double xy = arow[l * as2] * bcol[l];
          acc += xy;
          mag += fabs(xy);
        }
        double want = c->alpha * acc;
        mag *= fabs(c->alpha);
        if (c->bias && c->beta != 0) {
          double cv = getf(Cb, dt, c->bias == 2 ? j : i * N + j);
          want += c->beta * cv;
          mag += fabs(c->beta * cv);
        }
        double got = getf(O, dt, b * to.strides[0] + i * to.strides[1] + j * to.strides[2]);
        /* ints: exact in fp32 accumulation, then one rounding of the result */
        double tol = ints ? eps * fabs(want) : eps * fabs(want) + 1.2e-7 * (double)(K + 2) * mag + (dt == HPU_FLOAT16 ? 6e-8 : 1e-30);
        if (!(fabs(got - want) <= tol)) {
          if (bad++ < 3)
            printf("\n  %s %s bt=%d m=%d n=%d k=%d ta=%d tb=%d st=%d tc=%d bias=%d [%ld,%ld,%ld]: "
                   "%.9g want %.9g",
                   hpu_dtype_name(dt), ints ? "int" : "rnd", c->bt, c->m, c->n, c->k, c->ta, c->tb,
                   c->astep, c->tc, c->bias, (long)b, (long)i, (long)j, got, want);
        }
      }
  if (bad) case_fails++;
  CU_ASSERT_EQUAL(bad, 0);
  free(Ad);
  free(Bt);
  free(A);
  free(B);
  free(Cb);
  free(O);
}

static const int shapes[][3] = {
    {1, 1, 1},    {1, 37, 1},  {13, 33, 1},   {12, 32, 16},  {13, 33, 17},  {11, 31, 2},
    {24, 64, 3},  {5, 700, 3}, {700, 5, 9},   {25, 67, 600}, {130, 130, 130}, {200, 70, 513},
    {1, 300, 64}, {300, 1, 64}, {2, 3, 1100}, {97, 45, 255},
};

static void run_all(int kernel, hpu_dtype_t dt) {
  int old = hpu_gemm_force(kernel);
  int nshape = (int)(sizeof shapes / sizeof shapes[0]);
  case_fails = 0;
  for (int s = 0; s < nshape; s++)
    for (int v = 0; v < 8; v++) {
      mm_case_t c = {1, shapes[s][0], shapes[s][1], shapes[s][2], v & 1, (v >> 1) & 1, 1, 0, 0, 1.0f, 0.0f};
      if (v >= 4) { /* batched, bias, alpha, beta, strided A, transposed out */
        c.bt = 3;
        c.bias = 1 + (v & 1);
        c.alpha = 2.0f;
        c.beta = v == 6 ? 0.0f : 0.5f;
        c.astep = v == 5 ? 2 : 1;
        c.tc = v == 7;
        c.ta = v == 6;
        c.tb = v >= 6;
      }
      check(&c, dt, 1);
      check(&c, dt, 0);
      if (case_fails > 4) break;
    }
  hpu_gemm_force(old);
}

static void run_threads(int kernel, hpu_dtype_t dt) {
  int saved = hpu_get_num_threads();
  hpu_set_num_threads(2);
  run_all(kernel, dt);
  hpu_set_num_threads(1);
  run_all(kernel, dt);
  hpu_set_num_threads(saved);
}

static void test_auto_f32(void) { run_threads(HPU_GEMM_AUTO, HPU_FLOAT32); }
static void test_auto_bf16(void) { run_threads(HPU_GEMM_AUTO, HPU_BFLOAT16); }
static void test_auto_f16(void) { run_threads(HPU_GEMM_AUTO, HPU_FLOAT16); }
static void test_fma_f32(void) { run_threads(HPU_GEMM_F32FMA, HPU_FLOAT32); }
static void test_fma_bf16(void) { run_threads(HPU_GEMM_F32FMA, HPU_BFLOAT16); }
static void test_dot_bf16(void) {
  if (!hpu_gemm_have_bf16dot()) printf("(no AVX512_BF16: F32FMA instead) ");
  run_threads(HPU_GEMM_BF16DOT, HPU_BFLOAT16);
}
/* Two threads only: "auto bfloat16" runs AMX on both counts where the CPU
 * has it (the test's time stays within its limit on a loaded machine). */
static void test_amx_bf16(void) {
  if (!hpu_gemm_have_amx()) printf("(no AMX: BF16DOT / F32FMA instead) ");
  int saved = hpu_get_num_threads();
  hpu_set_num_threads(2);
  run_all(HPU_GEMM_AMXBF16, HPU_BFLOAT16);
  hpu_set_num_threads(saved);
}
static void test_avx2_f32(void) { run_threads(HPU_GEMM_F32AVX2, HPU_FLOAT32); }
static void test_old_path(void) {
  run_threads(HPU_GEMM_NONE, HPU_FLOAT32);
  run_threads(HPU_GEMM_NONE, HPU_BFLOAT16);
}

/* The driver's other paths: many batches (one whole product per thread),
 * k blocks with partial sums, and A too large to read in place (packed per
 * panel) with more than one B block; odd k, edge tiles, transposed operands. */
static void test_blocks(void) {
  static const mm_case_t cases[] = {
      {8, 37, 45, 70, 0, 1, 1, 0, 0, 1.0f, 0.0f},   {8, 37, 45, 71, 1, 0, 1, 0, 1, 2.0f, 0.5f},
      {6, 24, 64, 33, 0, 0, 2, 0, 2, 1.0f, 1.0f},   {1, 264, 260, 1031, 0, 0, 1, 0, 0, 1.0f, 0.0f},
      {1, 262, 300, 1030, 1, 1, 1, 0, 1, 1.0f, 1.0f}, {1, 250, 290, 1100, 0, 1, 1, 0, 0, 1.0f, 0.0f},
      /* transposed A packed once, 4 panels at a time (110 rows: 2 groups of
       * 4, one full panel and an edge), odd k, several B blocks */
      {1, 110, 300, 2501, 1, 0, 1, 0, 0, 1.0f, 0.0f},
      /* bf16 A > 512 KB read in place by one column part per thread */
      {1, 520, 256, 1030, 0, 0, 1, 0, 1, 1.0f, 0.5f},  {1, 520, 250, 1031, 0, 1, 1, 0, 0, 1.0f, 0.0f},
      /* long k: AMX packs B in several column chunks (plain and transposed A) */
      {1, 13, 300, 1900, 0, 0, 1, 0, 1, 1.0f, 0.5f},   {1, 13, 300, 1901, 1, 1, 1, 0, 0, 1.0f, 0.0f},
  };
  hpu_dtype_t dts[] = {HPU_FLOAT32, HPU_BFLOAT16};
  int saved = hpu_get_num_threads();
  for (int nt = 1; nt <= 2; nt++) {
    hpu_set_num_threads(nt);
    for (int d = 0; d < 2; d++)
      for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        check(&cases[c], dts[d], 1);
        check(&cases[c], dts[d], 0);
      }
  }
  hpu_set_num_threads(saved);
}

/* g run with `kernel` on 1 and then 2 threads, each time into a fresh copy
 * of c0 (out[0], out[1]; the caller frees them). The call must return 0
 * when the CPU can run the kernel, else -1 with nothing written (checked
 * here). */
static void run_on_1_and_2_threads(hpu_gemm_t g, int kernel, int can, const float *c0, float *out[2]) {
  int saved = hpu_get_num_threads();
  size_t bytes = sizeof(float) * (size_t)(g.m * g.n);
  for (int nt = 1; nt <= 2; nt++) {
    out[nt - 1] = malloc(bytes);
    CU_ASSERT_FATAL(out[nt - 1] != NULL);
    memcpy(out[nt - 1], c0, bytes);
    g.c = out[nt - 1];
    hpu_set_num_threads(nt);
    CU_ASSERT_EQUAL(hpu_gemm_run(&g, kernel), can ? 0 : -1);
    if (!can) CU_ASSERT_EQUAL(memcmp(out[nt - 1], c0, bytes), 0);
  }
  hpu_set_num_threads(saved);
}

/* Split-K (fp32, k >= 4 max(m, n)): k cut in two chunks, the second's sum
 * added to C afterwards. Odd k (unequal chunks), edge tiles, transposed
 * operands, alpha/beta/bias, against the double loop on one and two
 * threads; then the same product on 1 and 2 threads must agree bit for bit
 * (the chunks depend on the shape only, and are added in a fixed order). */
static void test_split_k(void) {
  static const mm_case_t cases[] = {
      {1, 37, 45, 700, 0, 0, 1, 0, 0, 1.0f, 0.0f},     {1, 37, 45, 701, 1, 0, 1, 0, 1, 2.0f, 0.5f},
      {1, 130, 70, 2049, 1, 1, 1, 0, 2, 1.0f, 1.0f},   {1, 256, 64, 1030, 0, 1, 1, 0, 0, 1.0f, 0.0f},
      {1, 13, 300, 1901, 1, 0, 1, 0, 1, 0.5f, -1.0f},
  };
  int saved = hpu_get_num_threads();
  for (int nt = 1; nt <= 2; nt++) {
    hpu_set_num_threads(nt);
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
      check(&cases[c], HPU_FLOAT32, 1);
      check(&cases[c], HPU_FLOAT32, 0);
    }
  }
  /* A^T @ B with m = n = 200, k = 2047, alpha 1.5, beta 0.25 */
  int64_t m = 200, n = 200, k = 2047;
  int avx512 = hpu_kernels_isa() >= HPU_ISA_AVX512;
  float *a = malloc(sizeof(float) * (size_t)(m * k)), *b = malloc(sizeof(float) * (size_t)(k * n));
  float *c0 = malloc(sizeof(float) * (size_t)(m * n)), *c[2];
  for (int64_t i = 0; i < m * k; i++) a[i] = rnd(0);
  for (int64_t i = 0; i < k * n; i++) b[i] = rnd(0);
  for (int64_t i = 0; i < m * n; i++) c0[i] = rnd(0);
  hpu_gemm_t g = {m, n, k, a, 1, m, b, n, 1, NULL, n, 1, HPU_FLOAT32, 1.5f, 0.25f};
  /* without AVX-512 the kernel is refused (-1, nothing written), not run */
  run_on_1_and_2_threads(g, HPU_GEMM_F32FMA, avx512, c0, c);
  if (avx512) CU_ASSERT_EQUAL(memcmp(c[0], c[1], sizeof(float) * (size_t)(m * n)), 0);
  free(a);
  free(b);
  free(c0);
  free(c[0]);
  free(c[1]);
  hpu_set_num_threads(saved);
}

/* Bottom-edge heights: every m mod 12 (each row count has its own kernel,
 * reading A in place or from a packed panel), on fp32 and bf16 with each
 * kernel, against the double loop: odd k, k over one k block (partial sums
 * of the edge rows), column edges, transposed A and B, alpha/beta through
 * the direct store, and batches run one product per thread. */
static void test_row_edges(void) {
  static const int ks[] = {7, 401};
  static const struct {
    int kernel;
    hpu_dtype_t dt;
  } kk[] = {{HPU_GEMM_F32FMA, HPU_FLOAT32},
             {HPU_GEMM_BF16DOT, HPU_BFLOAT16},
             {HPU_GEMM_F32FMA, HPU_BFLOAT16},
             {HPU_GEMM_AMXBF16, HPU_BFLOAT16},
             {HPU_GEMM_F32AVX2, HPU_FLOAT32}};
  int saved = hpu_get_num_threads();
  hpu_set_num_threads(2);
  for (size_t q = 0; q < sizeof kk / sizeof kk[0]; q++) {
    int old = hpu_gemm_force(kk[q].kernel);
    case_fails = 0;
    for (int m = 2; m <= 26 && case_fails <= 4; m++)
      for (int ki = 0; ki < 2; ki++)
        for (int ta = 0; ta < 2; ta++) {
          mm_case_t c = {1, m, m % 3 == 0 ? 45 : 64, ks[ki], ta, (m + ki) & 1, 1, 0, 0, 1.0f, 0.0f};
          if (m % 4 == 1) { /* bias with beta, alpha */
            c.bias = 1;
            c.alpha = 2.0f;
            c.beta = 0.5f;
          }
          if (m % 5 == 2) c.bt = 4;
          check(&c, kk[q].dt, (m + ta) & 1);
        }
    hpu_gemm_force(old);
  }
  hpu_set_num_threads(saved);
}

/* Rounding of the result happens once: bf16 output of a sum that is exact in
 * fp32 but not in bf16 (1 + 2^-9 + 2^-9 ... rounds to 1 only at the end). */
static void test_round_once(void) {
  enum { K = 64 };
  uint16_t A[K], B[K], O[1];
  for (int i = 0; i < K; i++) {
    A[i] = hpu_float_to_bf16(i == 0 ? 1.0f : 1.0f / 512);
    B[i] = hpu_float_to_bf16(1.0f);
  }
  int kernels[] = {HPU_GEMM_AUTO, HPU_GEMM_F32FMA, HPU_GEMM_BF16DOT, HPU_GEMM_AMXBF16};
  for (int kk = 0; kk < 4; kk++) {
    int old = hpu_gemm_force(kernels[kk]);
    int64_t as[2] = {1, K}, bs[2] = {K, 1}, os[2] = {1, 1};
    hpu_node_t nd;
    memset(&nd, 0, sizeof nd);
    nd.op = HPU_OP_MATMUL;
    nd.compute_dtype = HPU_BFLOAT16;
    nd.num_inputs = 2;
    nd.num_outputs = 1;
    nd.inputs[0] = T(A, HPU_BFLOAT16, 2, as);
    nd.inputs[1] = T(B, HPU_BFLOAT16, 2, bs);
    nd.outputs[0] = T(O, HPU_BFLOAT16, 2, os);
    nd.params.matmul.alpha = hpu_scalar_float(1);
    CU_ASSERT_EQUAL_FATAL(run(&nd), HPU_SUCCESS);
    /* 1 + 63/512 = 1.123046875 -> bf16 1.125 */
    CU_ASSERT_EQUAL(hpu_bf16_to_float(O[0]), 1.125f);
    hpu_gemm_force(old);
  }
}

/* beta == 0 ignores NaN in in2; NaN and Inf in operands propagate. */
static void test_nan_inf(void) {
  int kernels[] = {HPU_GEMM_F32FMA, HPU_GEMM_BF16DOT, HPU_GEMM_AMXBF16};
  for (int kk = 0; kk < 3; kk++) {
    int old = hpu_gemm_force(kernels[kk]);
    uint16_t A[4 * 4], B[4 * 4], C[4 * 4], O[4 * 4];
    for (int i = 0; i < 16; i++) {
      A[i] = hpu_float_to_bf16(1);
      B[i] = hpu_float_to_bf16(1);
      C[i] = hpu_float_to_bf16(NAN);
    }
    A[0] = hpu_float_to_bf16(INFINITY);
    A[4] = hpu_float_to_bf16(NAN);
    int64_t s[2] = {4, 4};
    hpu_node_t nd;
    memset(&nd, 0, sizeof nd);
    nd.op = HPU_OP_MATMUL;
    nd.compute_dtype = HPU_BFLOAT16;
    nd.num_inputs = 3;
    nd.num_outputs = 1;
    nd.inputs[0] = T(A, HPU_BFLOAT16, 2, s);
    nd.inputs[1] = T(B, HPU_BFLOAT16, 2, s);
    nd.inputs[2] = T(C, HPU_BFLOAT16, 2, s);
    nd.outputs[0] = T(O, HPU_BFLOAT16, 2, s);
    nd.params.matmul.alpha = hpu_scalar_float(1);
    nd.params.matmul.beta = hpu_scalar_float(0);
    CU_ASSERT_EQUAL_FATAL(run(&nd), HPU_SUCCESS);
    CU_ASSERT(isinf(hpu_bf16_to_float(O[0])));
    CU_ASSERT(isnan(hpu_bf16_to_float(O[4])));
    CU_ASSERT_EQUAL(hpu_bf16_to_float(O[8]), 4.0f);
    CU_ASSERT_EQUAL(hpu_bf16_to_float(O[15]), 4.0f);
    hpu_gemm_force(old);
  }
}

/* gemm_avx2.c's own paths: rows past one 256-row unit and k past one
 * 256-step block (partial sums added in C), B by columns with a k tail
 * (the 8 x 8 transposes and the scalar rest), a strided and a transposed
 * output (through the tile); then the same product on 1 and 2 threads bit
 * for bit, and beta == 0 ignoring NaN in C while NaN and Inf in A propagate. */
static void test_avx2_paths(void) {
  static const mm_case_t cases[] = {
      {1, 600, 40, 300, 0, 0, 1, 0, 1, 1.0f, 0.5f},  {1, 523, 48, 515, 1, 1, 1, 0, 0, 2.0f, 0.0f},
      {2, 61, 100, 263, 0, 1, 2, 1, 2, 1.0f, -1.0f}, {1, 30, 17, 9, 1, 0, 1, 1, 1, 0.5f, 0.25f},
  };
  int old = hpu_gemm_force(HPU_GEMM_F32AVX2);
  int saved = hpu_get_num_threads();
  for (int nt = 1; nt <= 2; nt++) {
    hpu_set_num_threads(nt);
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
      check(&cases[c], HPU_FLOAT32, 1);
      check(&cases[c], HPU_FLOAT32, 0);
    }
  }
  int avx2 = hpu_kernels_isa() >= HPU_ISA_AVX2;
  int64_t m = 300, n = 70, k = 600;
  float *a = malloc(sizeof(float) * (size_t)(m * k)), *b = malloc(sizeof(float) * (size_t)(k * n));
  float *c0 = malloc(sizeof(float) * (size_t)(m * n)), *c[2];
  for (int64_t i = 0; i < m * k; i++) a[i] = rnd(0);
  for (int64_t i = 0; i < k * n; i++) b[i] = rnd(0);
  for (int64_t i = 0; i < m * n; i++) c0[i] = NAN; /* beta 0: never read */
  a[5 * k + 3] = INFINITY; /* row 5 all Inf or NaN (B has both signs) */
  a[9 * k + 100] = NAN;    /* row 9 all NaN */
  hpu_gemm_t g = {m, n, k, a, k, 1, b, 1, k, NULL, n, 1, HPU_FLOAT32, 1.0f, 0.0f};
  run_on_1_and_2_threads(g, HPU_GEMM_F32AVX2, avx2, c0, c);
  if (avx2) {
    CU_ASSERT_EQUAL(memcmp(c[0], c[1], sizeof(float) * (size_t)(m * n)), 0);
    int finite = 1;
    for (int64_t i = 0; i < m; i++)
      for (int64_t j = 0; j < n; j++) {
        float v = c[0][i * n + j];
        if (i == 9) {
          CU_ASSERT(isnan(v));
        } else if (i == 5) {
          CU_ASSERT(!isfinite(v));
        } else {
          finite &= isfinite(v) != 0;
        }
      }
    CU_ASSERT(finite);
  }
  free(a);
  free(b);
  free(c0);
  free(c[0]);
  free(c[1]);
  hpu_set_num_threads(saved);
  hpu_gemm_force(old);
}

int main(void) {
  if (CU_initialize_registry() != CUE_SUCCESS) return 1;
  CU_pSuite s = CU_add_suite("gemm", NULL, NULL);
  CU_add_test(s, "auto float32", test_auto_f32);
  CU_add_test(s, "auto bfloat16", test_auto_bf16);
  CU_add_test(s, "auto float16", test_auto_f16);
  CU_add_test(s, "f32 fma float32", test_fma_f32);
  CU_add_test(s, "f32 fma bfloat16", test_fma_bf16);
  CU_add_test(s, "bf16 dot bfloat16", test_dot_bf16);
  CU_add_test(s, "amx bfloat16", test_amx_bf16);
  CU_add_test(s, "f32 avx2 float32", test_avx2_f32);
  CU_add_test(s, "avx2 paths", test_avx2_paths);
  CU_add_test(s, "blas/convert path", test_old_path);
  CU_add_test(s, "batches and blocks", test_blocks);
  CU_add_test(s, "split k", test_split_k);
  CU_add_test(s, "row edges", test_row_edges);
  CU_add_test(s, "round once", test_round_once);
  CU_add_test(s, "nan/inf", test_nan_inf);
  CU_basic_set_mode(CU_BRM_VERBOSE);
  CU_basic_run_tests();
  unsigned failed = CU_get_number_of_failures() + CU_get_number_of_tests_failed();
  CU_cleanup_registry();
  return failed ? 1 : 0;
}
