/* Special-function kernels (hpu/ops_special.def): nodes run with
 * hpu_node_execute on host buffers against values known in closed form
 * (lgamma(1/2) = log sqrt(pi), trigamma(1) = pi^2 / 6, T_n(cos t) =
 * cos(n t), ...), in float64 and float32, through a broadcast; plus
 * validation errors. */
#include <CUnit/Basic.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "hpu/hpu.h"
#include "test_nodes.h"

#define PI 3.14159265358979323846
#define EULER 0.57721566490153286061
#define ZETA3 1.20205690315959428540

static hpu_node_t sf_node(hpu_op_t op, hpu_dtype_t dt, hpu_tensor_t out) {
  hpu_node_t n;
  memset(&n, 0, sizeof n);
  n.op = op;
  n.compute_dtype = dt;
  n.num_outputs = 1;
  n.outputs[0] = out;
  return n;
}

static int run_node(hpu_node_t *n) {
  hpu_status_t st = hpu_node_validate(n);
  if (st == HPU_SUCCESS) st = hpu_node_execute(n);
  if (st != HPU_SUCCESS) fprintf(stderr, "\n%s\n", hpu_last_error());
  return st;
}

/* f(x) in float64 through a node; s0 the op's s[0] */
static double unary_d(hpu_op_t op, double x, double s0) {
  double out = 0;
  hpu_node_t n = sf_node(op, HPU_FLOAT64, T1(&out, HPU_FLOAT64, 1));
  n.inputs[n.num_inputs++] = T1(&x, HPU_FLOAT64, 1);
  n.params.pointwise.s[0] = hpu_scalar_float(s0);
  CU_ASSERT_EQUAL(run_node(&n), HPU_SUCCESS);
  return out;
}

static double binary_d(hpu_op_t op, double x, double y) {
  double out = 0;
  hpu_node_t n = sf_node(op, HPU_FLOAT64, T1(&out, HPU_FLOAT64, 1));
  n.inputs[n.num_inputs++] = T1(&x, HPU_FLOAT64, 1);
  n.inputs[n.num_inputs++] = T1(&y, HPU_FLOAT64, 1);
  CU_ASSERT_EQUAL(run_node(&n), HPU_SUCCESS);
  return out;
}

static int close_to(double got, double want, double rel) {
  if (isnan(want)) return isnan(got);
  if (isinf(want)) return got == want;
  int ok = fabs(got - want) <= rel * fabs(want) + 1e-300;
  if (!ok) fprintf(stderr, "\ngot %.17g want %.17g\n", got, want);
  return ok;
}

static void test_gamma_family(void) {
  CU_ASSERT(close_to(unary_d(HPU_OP_LGAMMA, 0.5, 0), 0.5 * log(PI), 1e-15));
  CU_ASSERT(unary_d(HPU_OP_LGAMMA, 1.0, 0) == 0.0 && unary_d(HPU_OP_LGAMMA, 2.0, 0) == 0.0);
  CU_ASSERT(unary_d(HPU_OP_LGAMMA, -3.0, 0) == INFINITY);
  CU_ASSERT(close_to(unary_d(HPU_OP_DIGAMMA, 1.0, 0), -EULER, 1e-15));
  CU_ASSERT(close_to(unary_d(HPU_OP_DIGAMMA, 0.5, 0), -EULER - 2 * log(2.0), 1e-15));
  CU_ASSERT(close_to(unary_d(HPU_OP_DIGAMMA, -0.5, 0), -EULER - 2 * log(2.0) + 2, 1e-14));
  CU_ASSERT(unary_d(HPU_OP_DIGAMMA, 0.0, 0) == -INFINITY);
  CU_ASSERT(unary_d(HPU_OP_DIGAMMA, -0.0, 0) == INFINITY);
  CU_ASSERT(isnan(unary_d(HPU_OP_DIGAMMA, -2.0, 0)));
  /* trigamma: PyTorch's asymptotic series, cut after the x^-7 term after six
   * recurrence steps, is good to about 1e-9 (and kept, for the CPU's numbers) */
  CU_ASSERT(close_to(unary_d(HPU_OP_POLYGAMMA, 1.0, 1), PI * PI / 6, 1e-9));
  CU_ASSERT(close_to(unary_d(HPU_OP_POLYGAMMA, 1.0, 2), -2 * ZETA3, 1e-14));
  CU_ASSERT(close_to(unary_d(HPU_OP_POLYGAMMA, 0.5, 1), PI * PI / 2, 1e-9));
  CU_ASSERT(close_to(binary_d(HPU_OP_ZETA, 2.0, 1.0), PI * PI / 6, 1e-15));
  CU_ASSERT(close_to(binary_d(HPU_OP_ZETA, 4.0, 1.0), PI * PI * PI * PI / 90, 1e-15));
  CU_ASSERT(close_to(binary_d(HPU_OP_ZETA, 2.0, 2.0), PI * PI / 6 - 1, 1e-15));
  CU_ASSERT(binary_d(HPU_OP_ZETA, 1.0, 2.0) == INFINITY);
  CU_ASSERT(isnan(binary_d(HPU_OP_ZETA, 0.5, 2.0)));
}

static void test_erf_family(void) {
  for (double x = -3.0; x <= 3.0; x += 0.25)
    CU_ASSERT(close_to(unary_d(HPU_OP_ERFINV, erf(x), 0), x, 1e-12));
  CU_ASSERT(unary_d(HPU_OP_ERFINV, 1.0, 0) == INFINITY);
  CU_ASSERT(unary_d(HPU_OP_ERFINV, -1.0, 0) == -INFINITY);
  CU_ASSERT(isnan(unary_d(HPU_OP_ERFINV, 1.5, 0)));
  CU_ASSERT(close_to(unary_d(HPU_OP_ERFC, 1.0, 0), erfc(1.0), 0));
  CU_ASSERT(close_to(unary_d(HPU_OP_ERFCX, 0.0, 0), 1.0, 1e-16));
  CU_ASSERT(close_to(unary_d(HPU_OP_ERFCX, 1.0, 0), 0.42758357615580700442, 1e-15));
  CU_ASSERT(close_to(unary_d(HPU_OP_ERFCX, 1e8, 0), 0.56418958354775628695e-8, 1e-15));
  CU_ASSERT(close_to(unary_d(HPU_OP_ERFCX, -1.0, 0), 2 * exp(1.0) - 0.42758357615580700442, 1e-15));
  CU_ASSERT(unary_d(HPU_OP_NDTRI, 0.5, 0) == 0.0);
  CU_ASSERT(close_to(unary_d(HPU_OP_NDTRI, 0.975, 0), 1.9599639845400542, 1e-14));
  CU_ASSERT(close_to(unary_d(HPU_OP_NDTRI, 0.5 * erfc(10 / sqrt(2.0)), 0), -10.0, 1e-13));
  CU_ASSERT(unary_d(HPU_OP_NDTRI, 0.0, 0) == -INFINITY && isnan(unary_d(HPU_OP_NDTRI, 2.0, 0)));
  CU_ASSERT(close_to(unary_d(HPU_OP_LOG_NDTR, 0.0, 0), log(0.5), 1e-15));
  /* far in the tail: log Phi(x) ~ -x^2 / 2 - log(-x sqrt(2 pi)) */
  double x = -1e4;
  CU_ASSERT(close_to(unary_d(HPU_OP_LOG_NDTR, x, 0), -x * x / 2 - log(-x * sqrt(2 * PI)), 1e-12));
}

static void test_bessel_and_elementary(void) {
  CU_ASSERT(unary_d(HPU_OP_I0, 0.0, 0) == 1.0 && unary_d(HPU_OP_I1, 0.0, 0) == 0.0);
  CU_ASSERT(close_to(unary_d(HPU_OP_I0, 1.0, 0), 1.2660658777520083356, 1e-15));
  CU_ASSERT(close_to(unary_d(HPU_OP_I1, -1.0, 0), -0.56515910399248502721, 1e-15));
  CU_ASSERT(close_to(unary_d(HPU_OP_I0E, 10.0, 0), 2815.7166284662544715 * exp(-10.0), 1e-14));
  CU_ASSERT(close_to(unary_d(HPU_OP_I1E, -10.0, 0), -2670.9883037012546543 * exp(-10.0), 1e-14));
  CU_ASSERT(unary_d(HPU_OP_SINC, 0.0, 0) == 1.0);
  CU_ASSERT(close_to(unary_d(HPU_OP_SINC, 0.5, 0), 2 / PI, 1e-15));
  CU_ASSERT(close_to(unary_d(HPU_OP_SPHERICAL_BESSEL_J0, 2.0, 0), sin(2.0) / 2, 1e-15));
  CU_ASSERT(close_to(unary_d(HPU_OP_SPHERICAL_BESSEL_J0, 0.1, 0), sin(0.1) / 0.1, 1e-15));
  CU_ASSERT(unary_d(HPU_OP_LOGIT, 0.5, -1) == 0.0);
  CU_ASSERT(close_to(unary_d(HPU_OP_LOGIT, 0.0, 0.25), log(1.0 / 3), 1e-15));
  CU_ASSERT(unary_d(HPU_OP_LOGIT, 1.0, -1) == INFINITY);
  CU_ASSERT(unary_d(HPU_OP_ENTR, 1.0, 0) == 0.0 && unary_d(HPU_OP_ENTR, 0.0, 0) == 0.0);
  CU_ASSERT(unary_d(HPU_OP_ENTR, -1.0, 0) == -INFINITY);
  CU_ASSERT(close_to(unary_d(HPU_OP_ENTR, 0.5, 0), 0.5 * log(2.0), 1e-15));
  CU_ASSERT(binary_d(HPU_OP_XLOG1PY, 0.0, -1.0) == 0.0); /* 0 * log(0) is 0 */
  CU_ASSERT(isnan(binary_d(HPU_OP_XLOG1PY, 0.0, NAN)));
  CU_ASSERT(close_to(binary_d(HPU_OP_XLOG1PY, 3.0, 1.0), 3 * log(2.0), 1e-15));
  /* logit backward: grad / (y (1 - y)); 0 outside [eps, 1 - eps] */
  CU_ASSERT(close_to(binary_d(HPU_OP_LOGIT_BACKWARD, 2.0, 0.25), 2 / (0.25 * 0.75), 1e-15));
}

/* Bessel and Airy functions at 1 and 10 (DLMF's tables); Y and K are
 * infinite at 0 and NaN below. */
static void test_bessel_jyk_airy(void) {
  CU_ASSERT(close_to(unary_d(HPU_OP_BESSEL_J0, 1.0, 0), 0.76519768655796655145, 1e-14));
  CU_ASSERT(close_to(unary_d(HPU_OP_BESSEL_J1, -1.0, 0), -0.44005058574493351596, 1e-14));
  CU_ASSERT(close_to(unary_d(HPU_OP_BESSEL_Y0, 1.0, 0), 0.08825696421567695798, 1e-13));
  CU_ASSERT(close_to(unary_d(HPU_OP_BESSEL_Y1, 1.0, 0), -0.78121282130028871655, 1e-14));
  CU_ASSERT(close_to(unary_d(HPU_OP_BESSEL_J0, 10.0, 0), -0.24593576445134833520, 1e-5));
  CU_ASSERT(close_to(unary_d(HPU_OP_BESSEL_Y1, 10.0, 0), 0.24901542420695388392, 1e-5));
  CU_ASSERT(unary_d(HPU_OP_BESSEL_Y0, 0.0, 0) == -INFINITY && isnan(unary_d(HPU_OP_BESSEL_Y1, -1.0, 0)));
  CU_ASSERT(close_to(unary_d(HPU_OP_MODIFIED_BESSEL_K0, 1.0, 0), 0.42102443824070833334, 1e-14));
  CU_ASSERT(close_to(unary_d(HPU_OP_MODIFIED_BESSEL_K1, 1.0, 0), 0.60190723019723457474, 1e-14));
  CU_ASSERT(close_to(unary_d(HPU_OP_SCALED_MODIFIED_BESSEL_K0, 10.0, 0),
                     1.7780062316167651811e-5 * exp(10.0), 1e-13));
  CU_ASSERT(unary_d(HPU_OP_MODIFIED_BESSEL_K0, 0.0, 0) == INFINITY);
  CU_ASSERT(isnan(unary_d(HPU_OP_SCALED_MODIFIED_BESSEL_K1, -1.0, 0)));
  CU_ASSERT(close_to(unary_d(HPU_OP_AIRY_AI, 0.0, 0), 0.35502805388781723926, 1e-15));
  CU_ASSERT(close_to(unary_d(HPU_OP_AIRY_AI, 1.0, 0), 0.13529241631288141552, 1e-14));
  CU_ASSERT(close_to(unary_d(HPU_OP_AIRY_AI, 5.0, 0), 1.0834442813607441e-4, 1e-13));
  /* the oscillating asymptotic form (as the CPU) is good to ~1e-13 here */
  CU_ASSERT(close_to(unary_d(HPU_OP_AIRY_AI, -5.0, 0), 0.35076100902411431979, 1e-12));
  CU_ASSERT(isnan(unary_d(HPU_OP_AIRY_AI, INFINITY, 0)));
}

static void test_polynomials(void) {
  double t = 0.7, c = cos(t), x = 0.3;
  for (int n = 0; n <= 20; n++) {
    CU_ASSERT(close_to(binary_d(HPU_OP_CHEBYSHEV_T, c, n), cos(n * t), 1e-12));
    CU_ASSERT(close_to(binary_d(HPU_OP_CHEBYSHEV_U, c, n), sin((n + 1) * t) / sin(t), 1e-12));
    CU_ASSERT(close_to(binary_d(HPU_OP_CHEBYSHEV_V, c, n), cos((n + 0.5) * t) / cos(t / 2), 1e-12));
    CU_ASSERT(close_to(binary_d(HPU_OP_CHEBYSHEV_W, c, n), sin((n + 0.5) * t) / sin(t / 2), 1e-12));
    CU_ASSERT(close_to(binary_d(HPU_OP_SHIFTED_CHEBYSHEV_T, (c + 1) / 2, n), cos(n * t), 1e-12));
    CU_ASSERT(close_to(binary_d(HPU_OP_SHIFTED_CHEBYSHEV_U, (c + 1) / 2, n),
                       sin((n + 1) * t) / sin(t), 1e-12));
  }
  CU_ASSERT(close_to(binary_d(HPU_OP_HERMITE_H, x, 3), 8 * x * x * x - 12 * x, 1e-15));
  CU_ASSERT(close_to(binary_d(HPU_OP_HERMITE_HE, x, 3), x * x * x - 3 * x, 1e-15));
  CU_ASSERT(close_to(binary_d(HPU_OP_LAGUERRE_L, x, 2), (x * x - 4 * x + 2) / 2, 1e-15));
  CU_ASSERT(close_to(binary_d(HPU_OP_LEGENDRE_P, x, 2), (3 * x * x - 1) / 2, 1e-15));
  CU_ASSERT(close_to(binary_d(HPU_OP_LEGENDRE_P, x, 2.9), (3 * x * x - 1) / 2, 1e-15)); /* truncated */
  CU_ASSERT(binary_d(HPU_OP_LEGENDRE_P, x, -1) == 0.0);
  CU_ASSERT(binary_d(HPU_OP_CHEBYSHEV_T, x, NAN) == 0.0);     /* as the CPU's cast: n < 0 */
  CU_ASSERT(binary_d(HPU_OP_HERMITE_H, x, INFINITY) == 0.0);
  CU_ASSERT(isnan(binary_d(HPU_OP_HERMITE_H, x, 513)));       /* beyond the double limit */
}

/* float32 through a broadcast (x [3, 1] against n [4]) and a strided input. */
static void test_float32_broadcast(void) {
  float x[3] = {-0.5f, 0.25f, 0.9f}, nn[4] = {0, 1, 2, 5}, out[12];
  int64_t xs[2] = {3, 1};
  hpu_node_t n = sf_node(HPU_OP_LEGENDRE_P, HPU_FLOAT32, T2(out, HPU_FLOAT32, 3, 4));
  n.inputs[n.num_inputs++] = T(x, HPU_FLOAT32, 2, xs);
  n.inputs[n.num_inputs++] = T1(nn, HPU_FLOAT32, 4);
  CU_ASSERT_EQUAL(run_node(&n), HPU_SUCCESS);
  for (int i = 0; i < 3; i++) {
    double v = x[i];
    double p5 = (63 * pow(v, 5) - 70 * pow(v, 3) + 15 * v) / 8;
    CU_ASSERT(close_to(out[i * 4 + 0], 1, 0));
    CU_ASSERT(close_to(out[i * 4 + 1], v, 0));
    CU_ASSERT(close_to(out[i * 4 + 2], (3 * v * v - 1) / 2, 1e-6));
    CU_ASSERT(close_to(out[i * 4 + 4 - 1], p5, 1e-5));
  }
  /* every other element of a float32 buffer */
  float in[8] = {0.5f, -1, 1.0f, -1, 2.0f, -1, 3.0f, -1}, o[4];
  hpu_node_t g = sf_node(HPU_OP_LGAMMA, HPU_FLOAT32, T1(o, HPU_FLOAT32, 4));
  g.inputs[g.num_inputs++] = T1(in, HPU_FLOAT32, 4);
  g.inputs[0].strides[0] = 2;
  CU_ASSERT_EQUAL(run_node(&g), HPU_SUCCESS);
  CU_ASSERT(close_to(o[0], (float)(0.5 * log(PI)), 0));
  CU_ASSERT(o[1] == 0.0f && o[2] == 0.0f && close_to(o[3], (float)log(2.0), 0));
}

static void test_validation(void) {
  int64_t a[2] = {1, 2}, o[2];
  hpu_node_t n = sf_node(HPU_OP_DIGAMMA, HPU_INT64, T1(o, HPU_INT64, 2));
  n.inputs[n.num_inputs++] = T1(a, HPU_INT64, 2);
  CU_ASSERT_EQUAL(hpu_node_validate(&n), HPU_ERROR_UNSUPPORTED);
  CU_ASSERT(strstr(hpu_last_error(), "digamma: not implemented for compute dtype") != NULL);
  double d[2], od[2];
  hpu_node_t z = sf_node(HPU_OP_ZETA, HPU_FLOAT64, T1(od, HPU_FLOAT64, 2));
  z.inputs[z.num_inputs++] = T1(d, HPU_FLOAT64, 2);
  CU_ASSERT_EQUAL(hpu_node_validate(&z), HPU_ERROR_INVALID_ARGUMENT);
  CU_ASSERT(strstr(hpu_last_error(), "special_zeta: expects 2 tensor input(s)") != NULL);
}

int main(void) {
  if (CU_initialize_registry() != CUE_SUCCESS) return 1;
  CU_pSuite s = CU_add_suite("special", NULL, NULL);
  CU_add_test(s, "gamma family", test_gamma_family);
  CU_add_test(s, "erf family", test_erf_family);
  CU_add_test(s, "bessel and elementary", test_bessel_and_elementary);
  CU_add_test(s, "bessel j, y, k and airy", test_bessel_jyk_airy);
  CU_add_test(s, "polynomials", test_polynomials);
  CU_add_test(s, "float32 broadcast", test_float32_broadcast);
  CU_add_test(s, "validation", test_validation);
  CU_basic_set_mode(CU_BRM_VERBOSE);
  CU_basic_run_tests();
  unsigned failed = CU_get_number_of_failures();
  CU_cleanup_registry();
  return failed ? 1 : 0;
}
