/* The error function family and the standard normal distribution: erfinv,
 * erfcx, ndtri, log_ndtr.
 *  - erfinv: a rational first guess and two Newton steps on erf (G. Pavlis'
 *    algorithm, the one PyTorch's CPU uses); also in float, because the CPU
 *    computes float32 / bfloat16 / float16 in float and its Newton steps
 *    settle on a float answer a double computation would not round to.
 *  - erfcx(x) = e^(x^2) erfc(x): in long double below x = 50 (its exponent
 *    range holds e^(50^2) and erfc(50), its 64-bit mantissa keeps double
 *    precision), the 5-term continued fraction of the Faddeeva function
 *    beyond; for x < 0, 2 e^(x^2) - erfcx(-x).
 *  - ndtri: Cephes' three rational approximations (S. Moshier, Cephes Math
 *    Library, 3-clause BSD).
 *  - log_ndtr: log(erfcx(-t) / 2) - t^2 below -1 (no underflow), else
 *    log1p(-erfc(t) / 2), t = x / sqrt 2, as SciPy. */
#include <math.h>

#include "kernels/special.h"

#define ERFINV_BODY(T, SQRT, LOG, ERF, EXP, COPYSIGN, ABS)                                   \
  static const T a[4] = {0.886226899, -1.645349621, 0.914624893, -0.140543331};             \
  static const T b[4] = {-2.118377725, 1.442710462, -0.329097515, 0.012229801};             \
  static const T c[4] = {-1.970840454, -1.624906493, 3.429567803, 1.641345311};             \
  static const T d[2] = {3.543889200, 1.637067800};                                          \
  const T two_over_sqrt_pi = (T)1.12837916709551257390;                                      \
  T ya = ABS(y), x, z, num, dem;                                                             \
  if (ya > 1) return NAN;                                                                    \
  if (ya == 1) return COPYSIGN((T)INFINITY, y);                                              \
  if (ya <= (T)0.7) {                                                                        \
    z = y * y;                                                                               \
    num = ((a[3] * z + a[2]) * z + a[1]) * z + a[0];                                         \
    dem = (((b[3] * z + b[2]) * z + b[1]) * z + b[0]) * z + 1;                               \
    x = y * num / dem;                                                                       \
  } else {                                                                                   \
    z = SQRT(-LOG((1 - ya) / 2));                                                            \
    num = ((c[3] * z + c[2]) * z + c[1]) * z + c[0];                                         \
    dem = (d[1] * z + d[0]) * z + 1;                                                         \
    x = COPYSIGN(num, y) / dem;                                                              \
  }                                                                                          \
  x = x - (ERF(x) - y) / (two_over_sqrt_pi * EXP(-x * x));                                   \
  x = x - (ERF(x) - y) / (two_over_sqrt_pi * EXP(-x * x));                                   \
  return x;

double hpu_sf_erfinv(double y) { ERFINV_BODY(double, sqrt, log, erf, exp, copysign, fabs) }
float hpu_sf_erfinvf(float y) { ERFINV_BODY(float, sqrtf, logf, erff, expf, copysignf, fabsf) }

double hpu_sf_erfcx(double x) {
  if (x != x) return x;
  if (x >= 0) {
    if (x > 50) {
      const double ispi = 0.56418958354775628694807945156; /* 1 / sqrt(pi) */
      if (x > 5e7) return ispi / x;                      /* x^4 would overflow */
      double x2 = x * x;
      return ispi * (x2 * (x2 + 4.5) + 2) / (x * (x2 * (x2 + 5) + 3.75));
    }
    long double lx = x;
    return (double)(expl(lx * lx) * erfcl(lx));
  }
  if (x < -26.7) return INFINITY;
  if (x < -6.1) return 2 * exp(x * x); /* erfcx(-x) is below an ulp of it */
  long double lx = x;
  return (double)(2 * expl(lx * lx) - expl(lx * lx) * erfcl(-lx));
}

static double polevl(double x, const double *c, int n) {
  double r = 0;
  for (int i = 0; i <= n; i++) r = r * x + c[i];
  return r;
}

double hpu_sf_ndtri(double y0) {
  const double s2pi = 2.50662827463100050242; /* sqrt(2 pi) */
  /* |y - 1/2| <= 3/8 */
  static const double P0[5] = {-5.99633501014107895267E1, 9.80010754185999661536E1,
                               -5.66762857469070293439E1, 1.39312609387279679503E1,
                               -1.23916583867381258016E0};
  static const double Q0[9] = {1.0,
                               1.95448858338141759834E0,  4.67627912898881538453E0,
                               8.63602421390890590575E1,  -2.25462687854119370527E2,
                               2.00260212380060660359E2,  -8.20372256168333339912E1,
                               1.59056225126211695515E1,  -1.18331621121330003142E0};
  /* z = sqrt(-2 log y) in [2, 8] */
  static const double P1[9] = {4.05544892305962419923E0,  3.15251094599893866154E1,
                               5.71628192246421288162E1,  4.40805073893200834700E1,
                               1.46849561928858024014E1,  2.18663306850790267539E0,
                               -1.40256079171354495875E-1, -3.50424626827848203418E-2,
                               -8.57456785154685413611E-4};
  static const double Q1[9] = {1.0,
                               1.57799883256466749731E1,  4.53907635128879210584E1,
                               4.13172038254672030440E1,  1.50425385692907503408E1,
                               2.50464946208309415979E0,  -1.42182922854787788574E-1,
                               -3.80806407691578277194E-2, -9.33259480895457427372E-4};
  /* z in [8, 64] */
  static const double P2[9] = {3.23774891776946035970E0,  6.91522889068984211695E0,
                               3.93881025292474443415E0,  1.33303460815807542389E0,
                               2.01485389549179081538E-1, 1.23716634817820021358E-2,
                               3.01581553508235416007E-4, 2.65806974686737550832E-6,
                               6.23974539184983293730E-9};
  static const double Q2[9] = {1.0,
                               6.02427039364742014255E0,  3.67983563856160859403E0,
                               1.37702099489081330271E0,  2.16236993594496635890E-1,
                               1.34204006088543189037E-2, 3.28014464682127739104E-4,
                               2.89247864745380683936E-6, 6.79019408009981274425E-9};
  const double exp_m2 = 0.13533528323661269189; /* e^-2 */
  if (y0 == 0) return -INFINITY;
  if (y0 == 1) return INFINITY;
  if (y0 < 0 || y0 > 1) return NAN;
  int negate = 1;
  double y = y0;
  if (y > 1 - exp_m2) {
    y = 1 - y;
    negate = 0;
  }
  if (y > exp_m2) {
    y = y - 0.5;
    double y2 = y * y;
    return (y + y * (y2 * polevl(y2, P0, 4) / polevl(y2, Q0, 8))) * s2pi;
  }
  double x = sqrt(-2.0 * log(y));
  double x0 = x - log(x) / x, z = 1 / x;
  double x1 = x < 8.0 ? z * polevl(z, P1, 8) / polevl(z, Q1, 8)
                      : z * polevl(z, P2, 8) / polevl(z, Q2, 8);
  x = x0 - x1;
  return negate ? -x : x;
}

double hpu_sf_log_ndtr(double x) {
  double t = x * 0.70710678118654752440;
  if (x < -1.0) return log(hpu_sf_erfcx(-t) / 2) - t * t;
  return log1p(-erfc(t) / 2);
}
