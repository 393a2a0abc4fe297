/* The special-function family (hpu/ops_special.def): the pointwise engine
 * (pointwise.c) does broadcasting, strides, dtype conversion and threading,
 * and calls these chunk kernels on contiguous float or double buffers. Each
 * float-family op computes as PyTorch's CPU does for float32 / bfloat16 /
 * float16: in float where the CPU's float result is not that of double
 * rounded (short formulas, recurrences), else in double rounded once. */
#include <math.h>
#include <stdint.h>

#include "hpu/op.h"
#include "kernels/pw.h"
#include "kernels/special.h"

int hpu_special_arity(hpu_op_t op) {
  switch (op) {
    case HPU_OP_LGAMMA: case HPU_OP_DIGAMMA: case HPU_OP_POLYGAMMA: case HPU_OP_ERFC:
    case HPU_OP_ERFINV: case HPU_OP_ERFCX: case HPU_OP_NDTRI: case HPU_OP_LOG_NDTR:
    case HPU_OP_I0: case HPU_OP_I0E: case HPU_OP_I1: case HPU_OP_I1E: case HPU_OP_SINC:
    case HPU_OP_LOGIT: case HPU_OP_ENTR: case HPU_OP_SPHERICAL_BESSEL_J0:
    case HPU_OP_MODIFIED_BESSEL_I0: case HPU_OP_MODIFIED_BESSEL_I1: case HPU_OP_MODIFIED_BESSEL_K0:
    case HPU_OP_MODIFIED_BESSEL_K1: case HPU_OP_SCALED_MODIFIED_BESSEL_K0:
    case HPU_OP_SCALED_MODIFIED_BESSEL_K1: case HPU_OP_BESSEL_J0: case HPU_OP_BESSEL_J1:
    case HPU_OP_BESSEL_Y0: case HPU_OP_BESSEL_Y1: case HPU_OP_AIRY_AI:
      return 1;
    case HPU_OP_XLOG1PY: case HPU_OP_ZETA: case HPU_OP_CHEBYSHEV_T: case HPU_OP_CHEBYSHEV_U:
    case HPU_OP_CHEBYSHEV_V: case HPU_OP_CHEBYSHEV_W: case HPU_OP_SHIFTED_CHEBYSHEV_T:
    case HPU_OP_SHIFTED_CHEBYSHEV_U: case HPU_OP_SHIFTED_CHEBYSHEV_V:
    case HPU_OP_SHIFTED_CHEBYSHEV_W: case HPU_OP_HERMITE_H: case HPU_OP_HERMITE_HE:
    case HPU_OP_LAGUERRE_L: case HPU_OP_LEGENDRE_P: case HPU_OP_LOGIT_BACKWARD:
      return 2;
    default: return -1;
  }
}

/* The short formulas, as the CPU's kernels write them, for float and double
 * (T the type, PI pi in it). */
#define SINC(T, PI, SIN, a) ((a) == 0 ? (T)1 : SIN((PI) * (a)) / ((PI) * (a)))
#define ENTR(T, LOG, a) \
  ((a) != (a) ? (a) : (a) > 0 ? -(a) * LOG(a) : (a) == 0 ? (T)0 : (T)-INFINITY)
#define XLOG1PY(T, LOG1P, a, b) ((b) != (b) ? (T)NAN : (a) == 0 ? (T)0 : (a) * LOG1P(b))
/* eps < 0: no clamping */
#define LOGIT(T, LOG, a, eps)                                                            \
  ((eps) < 0 ? LOG((a) / (1 - (a)))                                                       \
             : LOG(pw_clamp##T(a, eps) / (1 - pw_clamp##T(a, eps))))
/* x = grad, y = self: NaN outside [0, 1] (eps < 0), 0 outside [eps, 1 - eps] */
#define LOGIT_BWD(T, a, b, eps)                                                          \
  ((eps) < 0 ? ((b) < 0 || (b) > 1 ? (T)NAN                                              \
                : (b) == 0 || (b) == 1 ? (a) * (T)INFINITY : (a) / ((b) * (1 - (b))))    \
             : ((b) < (eps) || (b) > 1 - (eps) ? (T)0                                    \
                : (b) == 0 || (b) == 1 ? (a) * (T)INFINITY : (a) / ((b) * (1 - (b)))))

/* x clamped to [eps, 1 - eps], NaN kept */
static inline float pw_clampfloat(float x, float eps) {
  return x < eps ? eps : x > 1 - eps ? 1 - eps : x;
}
static inline double pw_clampdouble(double x, double eps) {
  return x < eps ? eps : x > 1 - eps ? 1 - eps : x;
}

static double spherical_j0(double x) {
  if (isinf(x)) return 0;
  if (fabs(x) < 0.5) { /* the Taylor series: sin(x) / x cancels */
    double z = x * x;
    return 1 + z * (-1.0 / 6 + z * (1.0 / 120 + z * (-1.0 / 5040 + z * (1.0 / 362880 +
           z * (-1.0 / 39916800 + z * (1.0 / 6227020800.0))))));
  }
  return sin(x) / x;
}
static float spherical_j0f(float x) {
  if (isinf(x)) return 0;
  if (fabsf(x) < 0.5f) {
    float z = x * x;
    return 1 + z * (-1.0f / 6 + z * (1.0f / 120 + z * (-1.0f / 5040 + z * (1.0f / 362880 +
           z * (-1.0f / 39916800 + z * (1.0f / 6227020800.0f))))));
  }
  return sinf(x) / x;
}

/* a whole case: o[i] = EXPR over the chunk */
#define LOOP1(EXPR) for (int64_t i = 0; i < n; i++) { o[i] = (EXPR); } break;
#define LOOP2 LOOP1

void hpu_special_run_d(hpu_op_t op, int64_t n, double *o, const double *a, const double *b,
                       const double *s) {
  const double pi = 3.14159265358979323846;
  const double eps = s[0];
  const int64_t order = (int64_t)s[0]; /* POLYGAMMA's n, validated by the caller */
  switch (op) {
    case HPU_OP_LGAMMA: LOOP1(hpu_sf_lgamma(a[i]))
    case HPU_OP_DIGAMMA: LOOP1(hpu_sf_digamma(a[i]))
    case HPU_OP_POLYGAMMA: LOOP1(hpu_sf_polygamma(order, a[i]))
    case HPU_OP_ERFC: LOOP1(erfc(a[i]))
    case HPU_OP_ERFINV: LOOP1(hpu_sf_erfinv(a[i]))
    case HPU_OP_ERFCX: LOOP1(hpu_sf_erfcx(a[i]))
    case HPU_OP_NDTRI: LOOP1(hpu_sf_ndtri(a[i]))
    case HPU_OP_LOG_NDTR: LOOP1(hpu_sf_log_ndtr(a[i]))
    case HPU_OP_I0: LOOP1(hpu_sf_i0(a[i]))
    case HPU_OP_I0E: LOOP1(hpu_sf_i0e(a[i]))
    case HPU_OP_I1: LOOP1(hpu_sf_i1(a[i]))
    case HPU_OP_I1E: LOOP1(hpu_sf_i1e(a[i]))
    case HPU_OP_AIRY_AI: LOOP1(hpu_sf_airy_ai(a[i]))
    case HPU_OP_BESSEL_J0: LOOP1(hpu_sf_j0(a[i]))
    case HPU_OP_BESSEL_J1: LOOP1(hpu_sf_j1(a[i]))
    case HPU_OP_BESSEL_Y0: LOOP1(hpu_sf_y0(a[i]))
    case HPU_OP_BESSEL_Y1: LOOP1(hpu_sf_y1(a[i]))
    case HPU_OP_MODIFIED_BESSEL_I0: LOOP1(hpu_sf_i0(a[i]))
    case HPU_OP_MODIFIED_BESSEL_I1: LOOP1(hpu_sf_i1(a[i]))
    case HPU_OP_MODIFIED_BESSEL_K0: LOOP1(hpu_sf_k0(a[i]))
    case HPU_OP_MODIFIED_BESSEL_K1: LOOP1(hpu_sf_k1(a[i]))
    case HPU_OP_SCALED_MODIFIED_BESSEL_K0: LOOP1(hpu_sf_k0e(a[i]))
    case HPU_OP_SCALED_MODIFIED_BESSEL_K1: LOOP1(hpu_sf_k1e(a[i]))
    case HPU_OP_SINC: LOOP1(SINC(double, pi, sin, a[i]))
    case HPU_OP_LOGIT: LOOP1(LOGIT(double, log, a[i], eps))
    case HPU_OP_ENTR: LOOP1(ENTR(double, log, a[i]))
    case HPU_OP_SPHERICAL_BESSEL_J0: LOOP1(spherical_j0(a[i]))
    case HPU_OP_XLOG1PY: LOOP2(XLOG1PY(double, log1p, a[i], b[i]))
    case HPU_OP_ZETA: LOOP2(hpu_sf_zeta(a[i], b[i]))
    case HPU_OP_CHEBYSHEV_T: LOOP2(hpu_sf_chebyshev_t(a[i], b[i]))
    case HPU_OP_CHEBYSHEV_U: LOOP2(hpu_sf_chebyshev_u(a[i], b[i]))
    case HPU_OP_CHEBYSHEV_V: LOOP2(hpu_sf_chebyshev_v(a[i], b[i]))
    case HPU_OP_CHEBYSHEV_W: LOOP2(hpu_sf_chebyshev_w(a[i], b[i]))
    case HPU_OP_SHIFTED_CHEBYSHEV_T: LOOP2(hpu_sf_shifted_chebyshev_t(a[i], b[i]))
    case HPU_OP_SHIFTED_CHEBYSHEV_U: LOOP2(hpu_sf_shifted_chebyshev_u(a[i], b[i]))
    case HPU_OP_SHIFTED_CHEBYSHEV_V: LOOP2(hpu_sf_shifted_chebyshev_v(a[i], b[i]))
    case HPU_OP_SHIFTED_CHEBYSHEV_W: LOOP2(hpu_sf_shifted_chebyshev_w(a[i], b[i]))
    case HPU_OP_HERMITE_H: LOOP2(hpu_sf_hermite_h(a[i], b[i]))
    case HPU_OP_HERMITE_HE: LOOP2(hpu_sf_hermite_he(a[i], b[i]))
    case HPU_OP_LAGUERRE_L: LOOP2(hpu_sf_laguerre_l(a[i], b[i]))
    case HPU_OP_LEGENDRE_P: LOOP2(hpu_sf_legendre_p(a[i], b[i]))
    case HPU_OP_LOGIT_BACKWARD: LOOP2(LOGIT_BWD(double, a[i], b[i], eps))
    default: break;
  }
}

void hpu_special_run_f(hpu_op_t op, int64_t n, float *o, const float *a, const float *b,
                       const double *s) {
  const float pi = 3.14159265358979323846f;
  const float eps = (float)s[0];
  const int64_t order = (int64_t)s[0];
  switch (op) {
    case HPU_OP_LGAMMA: LOOP1(hpu_sf_lgammaf(a[i]))
    case HPU_OP_DIGAMMA: LOOP1(hpu_sf_digammaf(a[i]))
    case HPU_OP_POLYGAMMA: /* the CPU's float digamma and trigamma, double zeta */
      LOOP1(order == 0   ? hpu_sf_digammaf(a[i])
            : order == 1 ? hpu_sf_trigammaf(a[i])
                         : (float)hpu_sf_polygamma(order, a[i]))
    case HPU_OP_ERFC: LOOP1((float)erfc(a[i]))
    case HPU_OP_ERFINV: LOOP1(hpu_sf_erfinvf(a[i]))
    case HPU_OP_ERFCX: LOOP1((float)hpu_sf_erfcx(a[i]))
    case HPU_OP_NDTRI: LOOP1((float)hpu_sf_ndtri(a[i]))
    case HPU_OP_LOG_NDTR: LOOP1((float)hpu_sf_log_ndtr(a[i]))
    case HPU_OP_I0: LOOP1(hpu_sf_i0f(a[i]))
    case HPU_OP_I0E: LOOP1(hpu_sf_i0ef(a[i]))
    case HPU_OP_I1: LOOP1(hpu_sf_i1f(a[i]))
    case HPU_OP_I1E: LOOP1(hpu_sf_i1ef(a[i]))
    case HPU_OP_AIRY_AI: LOOP1((float)hpu_sf_airy_ai(a[i]))
    case HPU_OP_BESSEL_J0: LOOP1((float)hpu_sf_j0(a[i]))
    case HPU_OP_BESSEL_J1: LOOP1((float)hpu_sf_j1(a[i]))
    case HPU_OP_BESSEL_Y0: LOOP1((float)hpu_sf_y0(a[i]))
    case HPU_OP_BESSEL_Y1: LOOP1((float)hpu_sf_y1(a[i]))
    case HPU_OP_MODIFIED_BESSEL_I0: LOOP1((float)hpu_sf_i0(a[i]))
    case HPU_OP_MODIFIED_BESSEL_I1: LOOP1((float)hpu_sf_i1(a[i]))
    case HPU_OP_MODIFIED_BESSEL_K0: LOOP1((float)hpu_sf_k0(a[i]))
    case HPU_OP_MODIFIED_BESSEL_K1: LOOP1((float)hpu_sf_k1(a[i]))
    case HPU_OP_SCALED_MODIFIED_BESSEL_K0: LOOP1((float)hpu_sf_k0e(a[i]))
    case HPU_OP_SCALED_MODIFIED_BESSEL_K1: LOOP1((float)hpu_sf_k1e(a[i]))
    case HPU_OP_SINC: LOOP1(SINC(float, pi, sinf, a[i]))
    case HPU_OP_LOGIT: LOOP1(LOGIT(float, logf, a[i], eps))
    case HPU_OP_ENTR: LOOP1(ENTR(float, logf, a[i]))
    case HPU_OP_SPHERICAL_BESSEL_J0: LOOP1(spherical_j0f(a[i]))
    case HPU_OP_XLOG1PY: LOOP2(XLOG1PY(float, log1pf, a[i], b[i]))
    case HPU_OP_ZETA: LOOP2((float)hpu_sf_zeta(a[i], b[i]))
    case HPU_OP_CHEBYSHEV_T: LOOP2(hpu_sf_chebyshev_tf(a[i], b[i]))
    case HPU_OP_CHEBYSHEV_U: LOOP2(hpu_sf_chebyshev_uf(a[i], b[i]))
    case HPU_OP_CHEBYSHEV_V: LOOP2(hpu_sf_chebyshev_vf(a[i], b[i]))
    case HPU_OP_CHEBYSHEV_W: LOOP2(hpu_sf_chebyshev_wf(a[i], b[i]))
    case HPU_OP_SHIFTED_CHEBYSHEV_T: LOOP2(hpu_sf_shifted_chebyshev_tf(a[i], b[i]))
    case HPU_OP_SHIFTED_CHEBYSHEV_U: LOOP2(hpu_sf_shifted_chebyshev_uf(a[i], b[i]))
    case HPU_OP_SHIFTED_CHEBYSHEV_V: LOOP2(hpu_sf_shifted_chebyshev_vf(a[i], b[i]))
    case HPU_OP_SHIFTED_CHEBYSHEV_W: LOOP2(hpu_sf_shifted_chebyshev_wf(a[i], b[i]))
    case HPU_OP_HERMITE_H: LOOP2(hpu_sf_hermite_hf(a[i], b[i]))
    case HPU_OP_HERMITE_HE: LOOP2(hpu_sf_hermite_hef(a[i], b[i]))
    case HPU_OP_LAGUERRE_L: LOOP2(hpu_sf_laguerre_lf(a[i], b[i]))
    case HPU_OP_LEGENDRE_P: LOOP2(hpu_sf_legendre_pf(a[i], b[i]))
    case HPU_OP_LOGIT_BACKWARD: LOOP2(LOGIT_BWD(float, a[i], b[i], eps))
    default: break;
  }
}
