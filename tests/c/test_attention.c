/* Fused attention (HPU_OP_ATTENTION and its backward) on host buffers,
 * against the textbook computation in double (the full score matrix, a
 * plain softmax, the gradient formulas written out) on every ISA, in float32
 * and bfloat16, and fully masked rows, whose output is zero by definition.
 * L and S span several query and key blocks of every path. The tile path's
 * exp (exp16_nonpos, exp8_nonpos on AVX2) is checked against the double
 * exp on its own. */
#include <CUnit/Basic.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "hpu/hpu.h"
#include "kernels/cvt.h"
#include "kernels/kernels.h"
#include "kernels/vexp.h"

enum { B = 2, H = 2, L = 250, S = 301, D = 24, DV = 16 };

static const hpu_isa_t isas[] = {HPU_ISA_GENERIC, HPU_ISA_AVX2, HPU_ISA_AVX512};

static hpu_tensor_t T4(void *d, hpu_dtype_t dt, int64_t a, int64_t b, int64_t c, int64_t e) {
  int64_t s[4] = {a, b, c, e};
  hpu_tensor_t t;
  CU_ASSERT_EQUAL_FATAL(hpu_tensor_init_contiguous(&t, d, dt, 4, s), 0);
  return t;
}

static hpu_status_t run(const hpu_node_t *n) {
  hpu_status_t st = hpu_node_validate(n);
  return st != HPU_SUCCESS ? st : hpu_node_execute(n);
}

/* deterministic values in [-1, 1) */
static float val(int64_t i, int salt) { return (float)(((i * 2654435761u + salt * 40503u) % 2000) / 1000.0 - 1.0); }

/* mask [L, S] broadcast over batch and heads: key j hidden from row i when
 * (i + 3 j) % 7 == 0, and row 5 sees no key at all */
static int hidden(int i, int j) { return i == 5 || (i + 3 * j) % 7 == 0; }

typedef struct {
  float q[B * H * L * D], k[B * H * S * D], v[B * H * S * DV], go[B * H * L * DV];
  double out[B * H * L * DV], lse[B * H * L], dq[B * H * L * D], dk[B * H * S * D], dv[B * H * S * DV];
} ref_t;

static void reference(ref_t *r, int causal, double scale) {
  static double p[L][S], dp[L][S];
  memset(r->dk, 0, sizeof r->dk);
  memset(r->dv, 0, sizeof r->dv);
  for (int bh = 0; bh < B * H; bh++) {
    const float *q = r->q + bh * L * D, *k = r->k + bh * S * D, *v = r->v + bh * S * DV, *go = r->go + bh * L * DV;
    for (int i = 0; i < L; i++) {
      double m = -INFINITY, sum = 0;
      for (int j = 0; j < S; j++) {
        double s = 0;
        for (int d = 0; d < D; d++) s += (double)q[i * D + d] * k[j * D + d];
        p[i][j] = hidden(i, j) || (causal && j > i) ? -INFINITY : s * scale;
        if (p[i][j] > m) m = p[i][j];
      }
      for (int j = 0; j < S; j++) sum += p[i][j] = m == -INFINITY ? 0 : exp(p[i][j] - m);
      r->lse[bh * L + i] = sum > 0 ? m + log(sum) : -INFINITY;
      for (int j = 0; j < S; j++) p[i][j] = sum > 0 ? p[i][j] / sum : 0;
      for (int d = 0; d < DV; d++) {
        double o = 0;
        for (int j = 0; j < S; j++) o += p[i][j] * v[j * DV + d];
        r->out[(bh * L + i) * DV + d] = o;
      }
      double delta = 0;
      for (int j = 0; j < S; j++) {
        double g = 0;
        for (int d = 0; d < DV; d++) g += (double)go[i * DV + d] * v[j * DV + d];
        dp[i][j] = g;
        delta += g * p[i][j];
      }
      for (int j = 0; j < S; j++) dp[i][j] = p[i][j] * (dp[i][j] - delta); /* dS */
    }
    for (int i = 0; i < L; i++)
      for (int d = 0; d < D; d++) {
        double g = 0;
        for (int j = 0; j < S; j++) g += dp[i][j] * k[j * D + d];
        r->dq[(bh * L + i) * D + d] = g * scale;
      }
    for (int j = 0; j < S; j++) {
      for (int d = 0; d < D; d++) {
        double g = 0;
        for (int i = 0; i < L; i++) g += dp[i][j] * q[i * D + d];
        r->dk[(bh * S + j) * D + d] = g * scale;
      }
      for (int d = 0; d < DV; d++) {
        double g = 0;
        for (int i = 0; i < L; i++) g += p[i][j] * go[i * DV + d];
        r->dv[(bh * S + j) * DV + d] = g;
      }
    }
  }
}

static void expect_close(const float *got, const double *want, int64_t n, double tol) {
  int bad = 0;
  for (int64_t i = 0; i < n && bad < 5; i++)
    if (got[i] != want[i] && !(fabs(got[i] - want[i]) <= tol * (1 + fabs(want[i])))) {
      printf("\n  element %lld: got %g, expected %g", (long long)i, got[i], want[i]);
      bad++;
    }
  CU_ASSERT_EQUAL(bad, 0);
}

/* n floats as dtype dt (float32, or bfloat16 rounded) into dst, and back */
static void to_dt(void *dst, const float *src, int64_t n, hpu_dtype_t dt) {
  for (int64_t i = 0; i < n; i++) {
    if (dt == HPU_BFLOAT16) ((uint16_t *)dst)[i] = hpu_cvt_f32_bf16(src[i]);
    else ((float *)dst)[i] = src[i];
  }
}
static void from_dt(float *dst, const void *src, int64_t n, hpu_dtype_t dt) {
  for (int64_t i = 0; i < n; i++)
    dst[i] = dt == HPU_BFLOAT16 ? hpu_cvt_bf16_f32(((const uint16_t *)src)[i]) : ((const float *)src)[i];
}

static void check(int causal, hpu_dtype_t dt) {
  ref_t *r = malloc(sizeof *r);
  /* inputs exactly representable in dt, so the reference sees what the kernel sees */
  float (*rnd)(float) = dt == HPU_BFLOAT16 ? hpu_round_bf16 : NULL;
  for (int64_t i = 0; i < B * H * L * D; i++) r->q[i] = rnd ? rnd(val(i, 1)) : val(i, 1);
  for (int64_t i = 0; i < B * H * S * D; i++) r->k[i] = rnd ? rnd(val(i, 2)) : val(i, 2);
  for (int64_t i = 0; i < B * H * S * DV; i++) r->v[i] = rnd ? rnd(val(i, 3)) : val(i, 3);
  for (int64_t i = 0; i < B * H * L * DV; i++) r->go[i] = rnd ? rnd(val(i, 4)) : val(i, 4);
  /* bf16: outputs rounded to bf16, products of bf16-rounded P and dS */
  double tol = dt == HPU_BFLOAT16 ? 2e-2 : 1e-5;
  int64_t es = hpu_dtype_size(dt);
  void *qd = malloc(es * B * H * L * D), *kd = malloc(es * B * H * S * D), *vd = malloc(es * B * H * S * DV);
  void *outd = malloc(es * B * H * L * DV), *qgod = malloc(es * B * H * L * (D + 2 * DV));
  void *kvd = malloc(es * B * H * S * (D + DV)), *dqd = malloc(es * B * H * L * D);
  void *dkd = malloc(es * B * H * S * D), *dvd = malloc(es * B * H * S * DV);
  to_dt(qd, r->q, B * H * L * D, dt);
  to_dt(kd, r->k, B * H * S * D, dt);
  to_dt(vd, r->v, B * H * S * DV, dt);
  double scale = 0.3;
  reference(r, causal, scale);
  static uint8_t mask[L * S];
  for (int i = 0; i < L; i++)
    for (int j = 0; j < S; j++) mask[i * S + j] = !hidden(i, j);
  float *out = malloc(sizeof(float) * B * H * L * DV), *lse = malloc(sizeof(float) * B * H * L);
  float *qgo = malloc(sizeof(float) * B * H * L * (D + 2 * DV)), *kv = malloc(sizeof(float) * B * H * S * (D + DV));
  float *dq = malloc(sizeof(float) * B * H * L * D), *dk = malloc(sizeof(float) * B * H * S * D);
  float *dv = malloc(sizeof(float) * B * H * S * DV);
  hpu_tensor_t m = T4(mask, HPU_BOOL, 1, 1, L, S);
  m.sizes[0] = B, m.sizes[1] = H, m.strides[0] = m.strides[1] = 0; /* broadcast */
  for (size_t a = 0; a < 3; a++) {
    hpu_kernels_set_isa(isas[a]);
    hpu_node_t n;
    memset(&n, 0, sizeof n);
    n.op = HPU_OP_ATTENTION;
    n.num_inputs = 4;
    n.num_outputs = 2;
    n.inputs[0] = T4(qd, dt, B, H, L, D);
    n.inputs[1] = T4(kd, dt, B, H, S, D);
    n.inputs[2] = T4(vd, dt, B, H, S, DV);
    n.inputs[3] = m;
    n.outputs[0] = T4(outd, dt, B, H, L, DV);
    n.outputs[1] = T4(lse, HPU_FLOAT32, B, H, L, 1);
    n.outputs[1].ndim = 3;
    n.params.nn.i[0] = causal;
    n.params.nn.s[0] = hpu_scalar_float(scale);
    CU_ASSERT_EQUAL_FATAL(run(&n), HPU_SUCCESS);
    from_dt(out, outd, B * H * L * DV, dt);
    expect_close(out, r->out, B * H * L * DV, tol);
    expect_close(lse, r->lse, B * H * L, 1e-5);
    for (int bh = 0; bh < B * H; bh++) { /* row 5 sees no key: zero output, lse -inf */
      CU_ASSERT(isinf(lse[bh * L + 5]) && lse[bh * L + 5] < 0);
      for (int d = 0; d < DV; d++) CU_ASSERT_EQUAL(out[(bh * L + 5) * DV + d], 0.0f);
    }
    for (int64_t row = 0; row < B * H * L; row++) {
      memcpy(qgo + row * (D + 2 * DV), r->q + row * D, sizeof(float) * D);
      memcpy(qgo + row * (D + 2 * DV) + D, r->go + row * DV, sizeof(float) * DV);
      memcpy(qgo + row * (D + 2 * DV) + D + DV, out + row * DV, sizeof(float) * DV);
    }
    for (int64_t row = 0; row < B * H * S; row++) {
      memcpy(kv + row * (D + DV), r->k + row * D, sizeof(float) * D);
      memcpy(kv + row * (D + DV) + D, r->v + row * DV, sizeof(float) * DV);
    }
    to_dt(qgod, qgo, B * H * L * (D + 2 * DV), dt);
    to_dt(kvd, kv, B * H * S * (D + DV), dt);
    hpu_node_t bw = n;
    bw.op = HPU_OP_ATTENTION_BACKWARD;
    bw.num_outputs = 3;
    bw.inputs[0] = T4(qgod, dt, B, H, L, D + 2 * DV);
    bw.inputs[1] = T4(kvd, dt, B, H, S, D + DV);
    bw.inputs[2] = n.outputs[1];
    bw.outputs[0] = T4(dqd, dt, B, H, L, D);
    bw.outputs[1] = T4(dkd, dt, B, H, S, D);
    bw.outputs[2] = T4(dvd, dt, B, H, S, DV);
    CU_ASSERT_EQUAL_FATAL(run(&bw), HPU_SUCCESS);
    from_dt(dq, dqd, B * H * L * D, dt);
    from_dt(dk, dkd, B * H * S * D, dt);
    from_dt(dv, dvd, B * H * S * DV, dt);
    /* (the bf16 backward starts from the rounded output O: the reference's
     * delta uses the exact one, within the same tolerance) */
    expect_close(dq, r->dq, B * H * L * D, tol);
    expect_close(dk, r->dk, B * H * S * D, tol);
    expect_close(dv, r->dv, B * H * S * DV, tol);
  }
  hpu_kernels_set_isa(HPU_ISA_AVX512);
  free(out), free(lse), free(qgo), free(kv), free(dq), free(dk), free(dv), free(r);
  free(qd), free(kd), free(vd), free(outd), free(qgod), free(kvd), free(dqd), free(dkd), free(dvd);
}

static void test_attention(void) { check(0, HPU_FLOAT32); }
static void test_attention_causal(void) { check(1, HPU_FLOAT32); }
static void test_attention_bf16(void) {
  check(0, HPU_BFLOAT16);
  check(1, HPU_BFLOAT16);
}

static void test_attention_rejects_bad_nodes(void) {
  float q[2 * 8], k[3 * 4], o[2 * 8], lse[2];
  hpu_node_t n;
  memset(&n, 0, sizeof n);
  n.op = HPU_OP_ATTENTION;
  n.num_inputs = 3;
  n.num_outputs = 2;
  n.inputs[0] = T4(q, HPU_FLOAT32, 1, 1, 2, 8);
  n.inputs[1] = T4(k, HPU_FLOAT32, 1, 1, 3, 4); /* head dim 4 != 8 */
  n.inputs[2] = T4(k, HPU_FLOAT32, 1, 1, 3, 4);
  n.outputs[0] = T4(o, HPU_FLOAT32, 1, 1, 2, 4);
  n.outputs[1] = T4(lse, HPU_FLOAT32, 1, 1, 2, 1);
  n.outputs[1].ndim = 3;
  CU_ASSERT_EQUAL(hpu_node_validate(&n), HPU_ERROR_INVALID_ARGUMENT);
  CU_ASSERT_PTR_NOT_NULL(strstr(hpu_last_error(), "key"));
  n.inputs[0].dtype = n.inputs[1].dtype = n.inputs[2].dtype = HPU_INT32;
  CU_ASSERT_EQUAL(hpu_node_validate(&n), HPU_ERROR_UNSUPPORTED);
}

#if HPU_HAVE_ISA_CLONES
HPU_ATTR_avx512 static void exp16_nonpos_of(const float *x, float *y) {
  _mm512_storeu_ps(y, exp16_nonpos(_mm512_loadu_ps(x)));
}

HPU_ATTR_avx2 static void exp8_nonpos_of(const float *x, float *y) {
  _mm256_storeu_ps(y, exp8_nonpos(_mm256_loadu_ps(x)));
  _mm256_storeu_ps(y + 8, exp8_nonpos(_mm256_loadu_ps(x + 8)));
}

static int mismatches; /* lanes where exp8_nonpos's bits differ from exp16_nonpos's */

/* The tile path's exp of 16 floats: exp16_nonpos where the CPU has
 * AVX-512, and there exp8_nonpos (the AVX2 tiles') must give the same bits
 * (any NaN for a NaN); exp8_nonpos alone on an AVX2 CPU. */
static void tile_exp(const float *x, float *y) {
  if (hpu_kernels_isa() < HPU_ISA_AVX512) {
    exp8_nonpos_of(x, y);
    return;
  }
  float y8[16];
  exp16_nonpos_of(x, y);
  exp8_nonpos_of(x, y8);
  for (int j = 0; j < 16; j++)
    if (memcmp(&y[j], &y8[j], sizeof(float)) != 0 && !(isnan(y[j]) && isnan(y8[j]))) mismatches++;
}

/* The float k representable floats above v (finite v, small k). */
static float floats_up(float v, uint32_t k) {
  uint32_t u;
  memcpy(&u, &v, sizeof u);
  uint32_t mag = u & 0x7fffffffu;
  if (!(u >> 31)) u += k;             /* positive: away from 0 */
  else if (mag > k) u -= k;           /* negative: towards 0 */
  else u = k - mag;                   /* across 0 */
  memcpy(&v, &u, sizeof v);
  return v;
}

/* Error of e^x in units of the float result's last place (the subnormal
 * spacing below 2^-126). */
static double ulps(float got, double want) {
  float w = (float)want;
  double ulp = fabsf(w) < 1.17549435e-38f ? 1.40129846e-45 : (double)(nextafterf(w, INFINITY) - w);
  return fabs((double)got - want) / ulp;
}
#endif

/* The tile path's probabilities come from exp16_nonpos (kernels/vexp.h):
 * within 2.01 ulp of e^x on [-110, 0.5] (every 997th float here; the full
 * sweep of all 1.9e9 floats gave 2.011 at most), exactly 0 for -inf and
 * below the float range, 1 at 0, NaN for NaN; exp8_nonpos, its AVX2 form,
 * bit for bit the same. */
static void test_attention_exp_within_2_ulp(void) {
#if HPU_HAVE_ISA_CLONES
  if (hpu_kernels_isa() < HPU_ISA_AVX2) {
    CU_PASS("no AVX2 here: the tile path and its exp do not run");
    return;
  }
  mismatches = 0;
  float x[16], y[16];
  double worst = 0;
  int n = 0;
  for (float v = -110.0f; v < 0.5f;) {
    for (int j = 0; j < 16; j++) {
      x[j] = v < 0.5f ? v : 0.5f;
      v = floats_up(v, 997);
    }
    tile_exp(x, y);
    for (int j = 0; j < 16; j++, n++) {
      double u = ulps(y[j], exp((double)x[j]));
      worst = u > worst ? u : worst;
    }
  }
  CU_ASSERT(n > 1000000);
  CU_ASSERT(worst > 1.0); /* the sweep reached the polynomial's worst neighbourhoods */
  CU_ASSERT(worst <= 2.02);
  const float special[16] = {-INFINITY, NAN, -200.0f, -104.0f, 0.0f, -0.0f, 1e-8f, -1e-8f};
  tile_exp(special, y);
  CU_ASSERT_EQUAL(y[0], 0.0f);
  CU_ASSERT(isnan(y[1]));
  CU_ASSERT_EQUAL(y[2], 0.0f);
  CU_ASSERT_EQUAL(y[3], 0.0f);
  CU_ASSERT_EQUAL(y[4], 1.0f);
  CU_ASSERT_EQUAL(y[5], 1.0f);
  CU_ASSERT(fabsf(y[6] - 1.0f) <= 1.2e-7f && fabsf(y[7] - 1.0f) <= 1.2e-7f);
  CU_ASSERT_EQUAL(mismatches, 0);
#else
  CU_PASS("not an x86-64 build");
#endif
}

int main(void) {
  if (CU_initialize_registry() != CUE_SUCCESS) return 1;
  CU_pSuite s = CU_add_suite("attention", NULL, NULL);
  CU_add_test(s, "forward and backward vs the textbook, mask broadcast, every ISA", test_attention);
  CU_add_test(s, "causal (top-left), L != S", test_attention_causal);
  CU_add_test(s, "bfloat16, plain and causal, every ISA", test_attention_bf16);
  CU_add_test(s, "bad nodes are rejected", test_attention_rejects_bad_nodes);
  CU_add_test(s, "the tile path's exp within 2 ulp of e^x", test_attention_exp_within_2_ulp);
  CU_basic_set_mode(CU_BRM_VERBOSE);
  CU_basic_run_tests();
  unsigned failed = CU_get_number_of_failures();
  CU_cleanup_registry();
  return failed != 0;
}
