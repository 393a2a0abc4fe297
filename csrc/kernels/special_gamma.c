/* The gamma family: lgamma, digamma, trigamma, the Hurwitz zeta function and
 * polygamma. Digamma and zeta are the Cephes algorithms (S. Moshier, Cephes
 * Math Library, 3-clause BSD): digamma by recurrence up to x >= 10 and its
 * asymptotic series; zeta by direct summation and the Euler-Maclaurin tail.
 * Digamma and trigamma also have float forms because PyTorch's CPU computes
 * them in float for float32 / bfloat16 / float16 (a double result would be
 * more accurate, but differ from the CPU's near digamma's root by more than
 * the parity tolerance allows). */
#define _DEFAULT_SOURCE /* lgamma_r: lgamma's sign global is a data race across threads */
#include <math.h>
#include <stdint.h>

#include "kernels/special.h"

#define PI 3.14159265358979323846

double hpu_sf_lgamma(double x) {
  int sign;
  return lgamma_r(x, &sign);
}

/* The CPU's float lgamma is the C library's lgammaf. */
float hpu_sf_lgammaf(float x) {
  int sign;
  return lgammaf_r(x, &sign);
}

/* Cephes' asymptotic coefficients of digamma, in powers of 1 / x^2. */
static const double DIGAMMA_A[] = {
    8.33333333333333333333E-2, -2.10927960927960927961E-2, 7.57575757575757575758E-3,
    -4.16666666666666666667E-3, 3.96825396825396825397E-3, -8.33333333333333333333E-3,
    8.33333333333333333333E-2,
};

double hpu_sf_digamma(double x) {
  const double psi_10 = 2.25175258906672110764; /* digamma(10) */
  if (x == 0) return copysign(INFINITY, -x);    /* the C standard's and SciPy's pole */
  if (x < 0) {
    if (x == trunc(x)) return NAN;
    /* reflection, with tan of the fractional part: pi x loses digits for |x| > 1 */
    double q, r = modf(x, &q);
    return hpu_sf_digamma(1 - x) - PI / tan(PI * r);
  }
  double result = 0;
  while (x < 10) {
    result -= 1 / x;
    x += 1;
  }
  if (x == 10) return result + psi_10;
  double y = 0;
  if (x < 1.0e17) {
    double z = 1.0 / (x * x), p = 0;
    for (int i = 0; i < 7; i++) p = p * z + DIGAMMA_A[i];
    y = z * p;
  }
  return result + log(x) - (0.5 / x) - y;
}

float hpu_sf_digammaf(float x) {
  const float psi_10 = 2.25175258906672110764f;
  if (x == 0) return copysignf(INFINITY, -x);
  if (x < 0) {
    if (x == truncf(x)) return NAN;
    double q, r = modf((double)x, &q);
    float pi_over_tan = (float)(PI / tan(PI * r));
    return hpu_sf_digammaf(1 - x) - pi_over_tan;
  }
  float result = 0;
  while (x < 10) {
    result -= 1 / x;
    x += 1;
  }
  if (x == 10) return result + psi_10;
  float y = 0;
  if (x < 1.0e17f) {
    float z = 1 / (x * x), p = 0;
    for (int i = 0; i < 7; i++) p = p * z + (float)DIGAMMA_A[i];
    y = z * p;
  }
  return result + logf(x) - (0.5f / x) - y;
}

/* Reflection below 1/2, recurrence to x + 6, then the asymptotic series. */
double hpu_sf_trigamma(double x) {
  double sign = 1, result = 0;
  if (x < 0.5) {
    sign = -1;
    double s = sin(PI * x);
    result -= (PI * PI) / (s * s);
    x = 1 - x;
  }
  for (int i = 0; i < 6; i++) {
    result += 1 / (x * x);
    x += 1;
  }
  double ixx = 1 / (x * x);
  result += (1 + 1 / (2 * x) + ixx * (1. / 6 - ixx * (1. / 30 - ixx * (1. / 42)))) / x;
  return sign * result;
}

float hpu_sf_trigammaf(float x) {
  const float pi = (float)PI;
  float sign = 1, result = 0;
  if (x < 0.5f) {
    sign = -1;
    float s = sinf(pi * x);
    result -= (pi * pi) / (s * s);
    x = 1 - x;
  }
  for (int i = 0; i < 6; i++) {
    result += 1 / (x * x);
    x += 1;
  }
  float ixx = 1 / (x * x);
  result += (1 + 1 / (2 * x) + ixx * (1.f / 6 - ixx * (1.f / 30 - ixx * (1.f / 42)))) / x;
  return sign * result;
}

/* Hurwitz zeta(x, q) = sum_k (k + q)^-x. */
double hpu_sf_zeta(double x, double q) {
  const double machep = 1.11022302462515654042E-16;
  /* (2k)! / B_2k, the Euler-Maclaurin coefficients */
  static const double A[] = {
      12.0, -720.0, 30240.0, -1209600.0, 47900160.0, -1.8924375803183791606e9, 7.47242496e10,
      -2.950130727918164224e12, 1.1646782814350067249e14, -4.5979787224074726105e15,
      1.8152105401943546773e17, -7.1661652561756670113e18};
  if (x == 1) return INFINITY;
  if (x < 1) return NAN;
  if (q <= 0) {
    if (q == floor(q)) return INFINITY;
    if (x != floor(x)) return NAN; /* q^-x would not be real */
  }
  double s = pow(q, -x), a = q, b = 0;
  int i = 0;
  while (i < 9 || a <= 9.0) {
    i++;
    a += 1;
    b = pow(a, -x);
    s += b;
    if (-machep * s < b && b < machep * s) return s;
  }
  double w = a, k = 0;
  s += b * w / (x - 1);
  s -= 0.5 * b;
  a = 1;
  for (i = 0; i < 12; i++) {
    a *= x + k;
    b /= w;
    double t = a * b / A[i];
    s = s + t;
    if (fabs(t / s) < machep) return s;
    k += 1;
    a *= x + k;
    b /= w;
    k += 1;
  }
  return s;
}

/* n >= 2: (-1)^(n+1) n! zeta(n + 1, x) (n 0 and 1 are digamma and trigamma). */
double hpu_sf_polygamma(int64_t n, double x) {
  if (n == 0) return hpu_sf_digamma(x);
  if (n == 1) return hpu_sf_trigamma(x);
  double nd = (double)n;
  return ((n % 2) ? 1.0 : -1.0) * exp(hpu_sf_lgamma(nd + 1)) * hpu_sf_zeta(nd + 1, x);
}
