/* HPU_OP_CONV / HPU_OP_CONV_BACKWARD (conv.c) on host buffers against the
 * convolution's definition summed in double: forward, dx, dweight, dbias,
 * for the GEMM-only 1x1 path, several images per column panel, one image in
 * row bands, stride, padding, dilation and groups, in float32 (on each
 * kernel ISA this CPU has) and float64
 * (whose results are the definition's to rounding in double); the int64
 * forward exactly; and bad params. */
#include <CUnit/Basic.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hpu/hpu.h"
#include "kernels/kernels.h"

typedef struct {
  int64_t N, C, H, W, Co, KH, KW, sh, sw, ph, pw, dh, dw, G;
} cs_t;

/* The dtype check_case runs in (tensors made by T4 / T1). */
static hpu_dtype_t g_dt = HPU_FLOAT32;

static hpu_tensor_t T4(void *d, int64_t a, int64_t b, int64_t c, int64_t e) {
  hpu_tensor_t t;
  int64_t s[4] = {a, b, c, e};
  CU_ASSERT_EQUAL_FATAL(hpu_tensor_init_contiguous(&t, d, g_dt, 4, s), 0);
  return t;
}
static hpu_tensor_t T1(void *d, int64_t n) {
  hpu_tensor_t t;
  CU_ASSERT_EQUAL_FATAL(hpu_tensor_init_contiguous(&t, d, g_dt, 1, &n), 0);
  return t;
}

/* src in g_dt: float32 as is, float64 widened into a new buffer (exact). */
static void *in_dt(float *src, int64_t n) {
  if (g_dt == HPU_FLOAT32) return src;
  double *d = malloc((size_t)(n ? n : 1) * sizeof(double));
  for (int64_t i = 0; i < n; i++) d[i] = src[i];
  return d;
}

static hpu_node_t conv_node(hpu_op_t op, const cs_t *c) {
  hpu_node_t n;
  memset(&n, 0, sizeof n);
  n.op = op;
  n.compute_dtype = HPU_FLOAT32;
  n.params.nn.i[0] = c->G;
  n.params.nn.i[2] = c->dh;
  n.params.nn.i[3] = c->dw;
  n.params.nn.sizes[0] = c->sh;
  n.params.nn.sizes[1] = c->sw;
  n.params.nn.strides[0] = c->ph;
  n.params.nn.strides[1] = c->pw;
  return n;
}

static float *rnd(int64_t n, uint32_t *seed) {
  float *p = malloc((size_t)(n ? n : 1) * sizeof(float));
  for (int64_t i = 0; i < n; i++) {
    *seed = *seed * 1664525u + 1013904223u;
    p[i] = (float)((*seed >> 8) & 0xffff) / 32768.0f - 1.0f;
  }
  return p;
}

static double max_rel(const void *got, const double *want, int64_t n) {
  double scale = 1, err = 0;
  for (int64_t i = 0; i < n; i++) scale = fmax(scale, fabs(want[i]));
  for (int64_t i = 0; i < n; i++) {
    double v = g_dt == HPU_FLOAT64 ? ((const double *)got)[i] : ((const float *)got)[i];
    err = fmax(err, fabs(v - want[i]));
  }
  return err / scale;
}

/* y = conv(x, w) + b, then dx, dw, db from dy, all in g_dt. */
static void run_conv(const cs_t *cp, void *x, void *w, void *b, void *dy, void *y, void *dx, void *dw, void *db) {
  cs_t c = *cp;
  int64_t OH = (c.H + 2 * c.ph - c.dh * (c.KH - 1) - 1) / c.sh + 1;
  int64_t OW = (c.W + 2 * c.pw - c.dw * (c.KW - 1) - 1) / c.sw + 1;
  int64_t Cg = c.C / c.G;
  hpu_node_t f = conv_node(HPU_OP_CONV, &c);
  f.num_inputs = 3;
  f.compute_dtype = g_dt;
  f.inputs[0] = T4(x, c.N, c.C, c.H, c.W);
  f.inputs[1] = T4(w, c.Co, Cg, c.KH, c.KW);
  f.inputs[2] = T1(b, c.Co);
  f.params.nn.i[1] = 1;
  f.num_outputs = 1;
  f.outputs[0] = T4(y, c.N, c.Co, OH, OW);
  CU_ASSERT_EQUAL_FATAL(hpu_node_validate(&f), HPU_SUCCESS);
  CU_ASSERT_EQUAL(hpu_node_execute(&f), HPU_SUCCESS);
  hpu_node_t bw = conv_node(HPU_OP_CONV_BACKWARD, &c);
  bw.num_inputs = 3;
  bw.compute_dtype = g_dt;
  bw.inputs[0] = T4(dy, c.N, c.Co, OH, OW);
  bw.inputs[1] = f.inputs[0];
  bw.inputs[2] = f.inputs[1];
  bw.num_outputs = 3;
  bw.outputs[0] = T4(dx, c.N, c.C, c.H, c.W);
  bw.outputs[1] = f.inputs[1];
  bw.outputs[1].storage = dw;
  bw.outputs[2] = T1(db, c.Co);
  bw.params.nn.i[1] = 7;
  CU_ASSERT_EQUAL_FATAL(hpu_node_validate(&bw), HPU_SUCCESS);
  CU_ASSERT_EQUAL(hpu_node_execute(&bw), HPU_SUCCESS);
}

static void check_case(cs_t c) {
  int64_t OH = (c.H + 2 * c.ph - c.dh * (c.KH - 1) - 1) / c.sh + 1;
  int64_t OW = (c.W + 2 * c.pw - c.dw * (c.KW - 1) - 1) / c.sw + 1;
  int64_t Cg = c.C / c.G, Cog = c.Co / c.G;
  int64_t nx = c.N * c.C * c.H * c.W, nw = c.Co * Cg * c.KH * c.KW, ny = c.N * c.Co * OH * OW;
  uint32_t seed = 7;
  float *x = rnd(nx, &seed), *w = rnd(nw, &seed), *b = rnd(c.Co, &seed), *dy = rnd(ny, &seed);
  size_t es = g_dt == HPU_FLOAT64 ? sizeof(double) : sizeof(float);
  double tol = g_dt == HPU_FLOAT64 ? 1e-12 : 1e-5;
  void *y = calloc((size_t)ny, es), *dx = calloc((size_t)nx, es);
  void *dw = calloc((size_t)nw, es), *db = calloc((size_t)c.Co, es);
  double *ry = calloc((size_t)ny, sizeof(double)), *rdx = calloc((size_t)nx, sizeof(double));
  double *rdw = calloc((size_t)nw, sizeof(double)), *rdb = calloc((size_t)c.Co, sizeof(double));
  /* The definition: y[n, o, i, j] = b[o] + sum x[n, g Cg + ci, i sh - ph + kh dh, j sw - pw + kw dw] w[o, ci, kh, kw] */
  for (int64_t n = 0; n < c.N; n++)
    for (int64_t o = 0; o < c.Co; o++)
      for (int64_t i = 0; i < OH; i++)
        for (int64_t j = 0; j < OW; j++) {
          int64_t yi = ((n * c.Co + o) * OH + i) * OW + j;
          double s = b[o];
          rdb[o] += dy[yi];
          for (int64_t ci = 0; ci < Cg; ci++)
            for (int64_t kh = 0; kh < c.KH; kh++)
              for (int64_t kw = 0; kw < c.KW; kw++) {
                int64_t ih = i * c.sh - c.ph + kh * c.dh, iw = j * c.sw - c.pw + kw * c.dw;
                if (ih < 0 || ih >= c.H || iw < 0 || iw >= c.W) continue;
                int64_t xi = ((n * c.C + o / Cog * Cg + ci) * c.H + ih) * c.W + iw;
                int64_t wi = ((o * Cg + ci) * c.KH + kh) * c.KW + kw;
                s += (double)x[xi] * w[wi];
                rdx[xi] += (double)dy[yi] * w[wi];
                rdw[wi] += (double)dy[yi] * x[xi];
              }
          ry[yi] = s;
        }
  void *xk = in_dt(x, nx), *wk = in_dt(w, nw), *bk = in_dt(b, c.Co), *dyk = in_dt(dy, ny);
  run_conv(&c, xk, wk, bk, dyk, y, dx, dw, db);
  CU_ASSERT(max_rel(y, ry, ny) < tol);
  CU_ASSERT(max_rel(dx, rdx, nx) < tol);
  CU_ASSERT(max_rel(dw, rdw, nw) < tol);
  CU_ASSERT(max_rel(db, rdb, c.Co) < tol);
  if (g_dt == HPU_FLOAT64) free(xk), free(wk), free(bk), free(dyk);
  free(x), free(w), free(b), free(dy), free(y), free(dx), free(dw), free(db);
  free(ry), free(rdx), free(rdw), free(rdb);
}

static void conv_cases(void) {
  /*          N  C  H   W  Co KH KW sh sw ph pw dh dw G */
  check_case((cs_t){2, 3, 8, 8, 4, 3, 3, 1, 1, 1, 1, 1, 1, 1});     /* 3x3, many images per panel */
  check_case((cs_t){2, 4, 6, 5, 8, 1, 1, 1, 1, 0, 0, 1, 1, 2});     /* 1x1: GEMM on x in place */
  check_case((cs_t){3, 6, 9, 7, 6, 3, 2, 2, 3, 1, 0, 2, 1, 3});     /* stride, dilation, groups */
  check_case((cs_t){2, 4, 7, 7, 4, 3, 3, 1, 1, 2, 2, 2, 2, 4});     /* depthwise */
  check_case((cs_t){1, 16, 40, 40, 8, 3, 3, 1, 1, 1, 1, 1, 1, 1}); /* one image in row bands */
  check_case((cs_t){1, 2, 3, 3, 2, 5, 5, 1, 1, 2, 2, 1, 1, 1});     /* kernel wider than the input */
  /* 3x3, stride 1, >= 16 channels: Winograd F(2x2, 3x3) where the CPU has
   * AVX-512 (forward, and dx as a convolution), odd sizes, every padding */
  check_case((cs_t){2, 16, 9, 11, 24, 3, 3, 1, 1, 1, 1, 1, 1, 1}); /* tiles in tasks */
  check_case((cs_t){3, 20, 13, 5, 17, 3, 3, 1, 1, 2, 2, 1, 1, 1}); /* padding 2 */
  check_case((cs_t){1, 96, 6, 6, 80, 3, 3, 1, 1, 0, 0, 1, 1, 1}); /* few tiles: three passes */
  check_case((cs_t){2, 16, 4, 70, 16, 3, 3, 1, 1, 1, 0, 1, 1, 1}); /* a tile row over several panels */
  check_case((cs_t){9, 16, 4, 4, 24, 3, 3, 1, 1, 1, 1, 1, 1, 1});  /* short rows: spans across images */
  check_case((cs_t){7, 16, 5, 3, 20, 3, 3, 1, 1, 1, 1, 1, 1, 1});  /* spans, last row and column cut */
  check_case((cs_t){24, 32, 5, 7, 40, 3, 3, 1, 1, 1, 1, 1, 1, 1}); /* >= 32 channels: dW by tiles too */
  check_case((cs_t){6, 33, 9, 11, 35, 3, 3, 1, 1, 2, 2, 1, 1, 1});  /* padding 2, odd channels */
  /* stride 2: the implicit GEMM over phase planes (1x1 / 2: gathers); on AVX-512 from 512
   * outputs an image, the taps read from the phase planes in place (conv_direct.c) */
  check_case((cs_t){2, 16, 9, 11, 24, 3, 3, 2, 2, 1, 1, 1, 1, 1});
  check_case((cs_t){3, 8, 13, 6, 12, 3, 3, 2, 2, 2, 0, 1, 1, 1});
  check_case((cs_t){2, 16, 9, 11, 24, 1, 1, 2, 2, 0, 0, 1, 1, 1});
  check_case((cs_t){2, 8, 64, 62, 12, 3, 3, 2, 2, 1, 1, 1, 1, 1});
  check_case((cs_t){2, 3, 70, 66, 8, 7, 7, 2, 2, 3, 3, 1, 1, 1}); /* the 7x7 / 2 stem, odd height */
  /* few channels, float32: the weight gradient summed by image chunks */
  check_case((cs_t){9, 8, 7, 7, 8, 3, 3, 1, 1, 1, 1, 1, 1, 1});    /* 9 images in 8 chunks */
  check_case((cs_t){12, 16, 4, 4, 16, 3, 3, 2, 2, 1, 1, 1, 1, 1}); /* several images per panel */
  check_case((cs_t){3, 8, 48, 48, 8, 3, 3, 1, 1, 1, 1, 1, 1, 1});  /* row bands in a chunk */
}

/* float32 on each kernel ISA up to this CPU's: the portable im2col route,
 * the AVX2 implicit GEMM, AVX-512's Winograd, implicit GEMM and direct
 * stride-2 paths. */
static void test_conv_by_definition(void) {
  static const hpu_isa_t isas[] = {HPU_ISA_GENERIC, HPU_ISA_AVX2, HPU_ISA_AVX512};
  hpu_isa_t native = hpu_kernels_set_isa(HPU_ISA_AVX512);
  g_dt = HPU_FLOAT32;
  for (size_t a = 0; a < sizeof isas / sizeof isas[0] && isas[a] <= native; a++) {
    hpu_kernels_set_isa(isas[a]);
    conv_cases();
  }
  hpu_kernels_set_isa(native);
}

/* The float32 forward and gradients of c on AVX2 and on AVX-512: the same
 * bits where both take the same route (Winograd's transforms and the
 * implicit GEMM's gathers have one form per ISA, doing the same adds in the
 * same order). Where the routes differ (the Winograd weight gradient of
 * fewer than 64 channels and the direct stride-2 forward of images of 512
 * wide outputs and more are AVX-512's only) the bits may differ too; the
 * cases by definition check those. */
static void same_bits_case(cs_t c) {
  int64_t OH = (c.H + 2 * c.ph - c.dh * (c.KH - 1) - 1) / c.sh + 1;
  int64_t OW = (c.W + 2 * c.pw - c.dw * (c.KW - 1) - 1) / c.sw + 1;
  int64_t nx = c.N * c.C * c.H * c.W, nw = c.Co * (c.C / c.G) * c.KH * c.KW, ny = c.N * c.Co * OH * OW;
  int64_t nout[4] = {ny, nx, nw, c.Co};
  uint32_t seed = 11;
  float *x = rnd(nx, &seed), *w = rnd(nw, &seed), *b = rnd(c.Co, &seed), *dy = rnd(ny, &seed);
  float *out[2][4];
  static const hpu_isa_t isa[2] = {HPU_ISA_AVX2, HPU_ISA_AVX512};
  for (int a = 0; a < 2; a++) {
    for (int k = 0; k < 4; k++) out[a][k] = calloc((size_t)nout[k], sizeof(float));
    hpu_kernels_set_isa(isa[a]);
    run_conv(&c, x, w, b, dy, out[a][0], out[a][1], out[a][2], out[a][3]);
  }
  for (int k = 0; k < 4; k++) {
    CU_ASSERT(memcmp(out[0][k], out[1][k], sizeof(float) * (size_t)nout[k]) == 0);
    free(out[0][k]), free(out[1][k]);
  }
  free(x), free(w), free(b), free(dy);
}

static void test_conv_same_bits_across_isas(void) {
  hpu_isa_t native = hpu_kernels_set_isa(HPU_ISA_AVX512);
  if (native < HPU_ISA_AVX512) {
    printf("(skipped: this CPU has no AVX-512) ");
    return;
  }
  g_dt = HPU_FLOAT32;
  /*              N  C   H   W  Co KH KW sh sw ph pw dh dw G */
  same_bits_case((cs_t){4, 64, 16, 16, 72, 3, 3, 1, 1, 1, 1, 1, 1, 1}); /* Winograd by rows, dW too */
  same_bits_case((cs_t){8, 72, 7, 9, 68, 3, 3, 1, 1, 1, 1, 1, 1, 1});  /* by spans */
  same_bits_case((cs_t){3, 20, 13, 9, 24, 3, 3, 1, 1, 0, 2, 1, 1, 1}); /* uneven padding */
  same_bits_case((cs_t){1, 96, 6, 6, 80, 3, 3, 1, 1, 0, 0, 1, 1, 1}); /* few tiles: three passes */
  same_bits_case((cs_t){2, 16, 9, 11, 24, 3, 3, 2, 2, 1, 1, 1, 1, 1}); /* implicit GEMM, phase planes */
  same_bits_case((cs_t){2, 8, 6, 37, 16, 3, 3, 2, 2, 1, 1, 1, 1, 1});  /* ... rows split 16 at a time + a tail */
  same_bits_case((cs_t){2, 16, 9, 11, 24, 1, 1, 2, 2, 0, 0, 1, 1, 1}); /* 1x1 / 2: gathers */
  same_bits_case((cs_t){2, 8, 10, 12, 8, 3, 3, 1, 1, 2, 1, 2, 2, 1});  /* dilation: gathers */
  hpu_kernels_set_isa(native);
}

static void test_conv_f64_by_definition(void) {
  g_dt = HPU_FLOAT64;
  conv_cases();
  g_dt = HPU_FLOAT32;
}

/* int64 forward (stride 2, padding, 2 groups, bias) against the definition,
 * exactly, and the input gradient (what an int64 transposed convolution
 * runs) exactly too. */
static void test_conv_int64(void) {
  enum { N = 2, C = 4, H = 5, W = 6, Co = 4, K = 3, G = 2, Cg = C / G, OH = 3, OW = 3 };
  int64_t x[N * C * H * W], w[Co * Cg * K * K], b[Co], y[N * Co * OH * OW];
  for (int i = 0; i < N * C * H * W; i++) x[i] = (i * 37) % 101 - 50;
  for (int i = 0; i < Co * Cg * K * K; i++) w[i] = (i * 11) % 19 - 9;
  for (int i = 0; i < Co; i++) b[i] = 1000 * i - 1500;
  cs_t c = {N, C, H, W, Co, K, K, 2, 2, 1, 1, 1, 1, G};
  hpu_node_t f = conv_node(HPU_OP_CONV, &c);
  g_dt = HPU_INT64;
  f.compute_dtype = HPU_INT64;
  f.num_inputs = 3;
  f.inputs[0] = T4(x, N, C, H, W);
  f.inputs[1] = T4(w, Co, Cg, K, K);
  f.inputs[2] = T1(b, Co);
  f.params.nn.i[1] = 1;
  f.num_outputs = 1;
  f.outputs[0] = T4(y, N, Co, OH, OW);
  CU_ASSERT_EQUAL_FATAL(hpu_node_validate(&f), HPU_SUCCESS);
  CU_ASSERT_EQUAL(hpu_node_execute(&f), HPU_SUCCESS);
  for (int n = 0; n < N; n++)
    for (int o = 0; o < Co; o++)
      for (int i = 0; i < OH; i++)
        for (int j = 0; j < OW; j++) {
          int64_t s = b[o];
          for (int ci = 0; ci < Cg; ci++)
            for (int kh = 0; kh < K; kh++)
              for (int kw = 0; kw < K; kw++) {
                int ih = 2 * i - 1 + kh, iw = 2 * j - 1 + kw;
                if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                s += x[((n * C + o / (Co / G) * Cg + ci) * H + ih) * W + iw] * w[((o * Cg + ci) * K + kh) * K + kw];
              }
          CU_ASSERT_EQUAL(y[((n * Co + o) * OH + i) * OW + j], s);
        }
  /* the input gradient (an int64 transposed convolution), with y as dy */
  int64_t dx[N * C * H * W], want[N * C * H * W];
  memset(want, 0, sizeof want);
  for (int n = 0; n < N; n++)
    for (int o = 0; o < Co; o++)
      for (int i = 0; i < OH; i++)
        for (int j = 0; j < OW; j++)
          for (int ci = 0; ci < Cg; ci++)
            for (int kh = 0; kh < K; kh++)
              for (int kw = 0; kw < K; kw++) {
                int ih = 2 * i - 1 + kh, iw = 2 * j - 1 + kw;
                if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                want[((n * C + o / (Co / G) * Cg + ci) * H + ih) * W + iw] +=
                    y[((n * Co + o) * OH + i) * OW + j] * w[((o * Cg + ci) * K + kh) * K + kw];
              }
  hpu_node_t bw = conv_node(HPU_OP_CONV_BACKWARD, &c);
  bw.compute_dtype = HPU_INT64;
  bw.num_inputs = 3;
  bw.inputs[0] = f.outputs[0];
  bw.inputs[1] = f.inputs[0];
  bw.inputs[2] = f.inputs[1];
  bw.num_outputs = 3;
  bw.outputs[0] = T4(dx, N, C, H, W);
  bw.params.nn.i[1] = 1;
  CU_ASSERT_EQUAL_FATAL(hpu_node_validate(&bw), HPU_SUCCESS);
  CU_ASSERT_EQUAL(hpu_node_execute(&bw), HPU_SUCCESS);
  CU_ASSERT(memcmp(dx, want, sizeof dx) == 0);
  g_dt = HPU_FLOAT32;
}

static void test_conv_rejects_bad_params(void) {
  float buf[64] = {0};
  cs_t c = {1, 2, 4, 4, 2, 3, 3, 1, 1, 1, 1, 1, 1, 1};
  hpu_node_t f = conv_node(HPU_OP_CONV, &c);
  f.num_inputs = 2;
  f.inputs[0] = T4(buf, 1, 2, 4, 4);
  f.inputs[1] = T4(buf + 32, 2, 2, 3, 3);
  f.num_outputs = 1;
  float out[32];
  f.outputs[0] = T4(out, 1, 2, 4, 4);
  CU_ASSERT_EQUAL(hpu_node_validate(&f), HPU_SUCCESS);
  hpu_node_t bad = f;
  bad.params.nn.i[0] = 2; /* 2 channels in 2 groups need weight [2, 1, ...] */
  CU_ASSERT_EQUAL(hpu_node_validate(&bad), HPU_ERROR_INVALID_ARGUMENT);
  bad = f;
  bad.params.nn.strides[0] = -1;
  CU_ASSERT_EQUAL(hpu_node_validate(&bad), HPU_ERROR_INVALID_ARGUMENT);
  bad = f;
  bad.params.nn.sizes[1] = 0;
  CU_ASSERT_EQUAL(hpu_node_validate(&bad), HPU_ERROR_INVALID_ARGUMENT);
  bad = f;
  bad.outputs[0] = T4(out, 1, 2, 3, 4); /* not the output size */
  CU_ASSERT_EQUAL(hpu_node_validate(&bad), HPU_ERROR_INVALID_ARGUMENT);
}

int main(void) {
  CU_initialize_registry();
  CU_pSuite s = CU_add_suite("conv", NULL, NULL);
  CU_add_test(s, "convolution and its gradients by definition", test_conv_by_definition);
  CU_add_test(s, "float32 results the same on AVX2 and AVX-512", test_conv_same_bits_across_isas);
  CU_add_test(s, "float64 convolution and its gradients by definition", test_conv_f64_by_definition);
  CU_add_test(s, "int64 convolution forward by definition", test_conv_int64);
  CU_add_test(s, "bad params are rejected", test_conv_rejects_bad_params);
  CU_basic_set_mode(CU_BRM_VERBOSE);
  CU_basic_run_tests();
  unsigned failed = CU_get_number_of_failures();
  CU_cleanup_registry();
  return failed ? 1 : 0;
}
