/* Bessel functions of the first and second kind, orders 0 and 1: j0, j1,
 * y0, y1. The Cephes algorithms (S. Moshier, Cephes Math Library, 3-clause
 * BSD) in the form PyTorch's CPU evaluates them: rational functions of x^2
 * up to 5 (j's with their first two zeros factored out, y's with the
 * (2 / pi) log(x) j(x) term), and beyond the Hankel asymptotic form
 * sqrt(2 / (pi x)) (P cos(x - phase) - (5 / x) Q sin(x - phase)), P and Q
 * rational in 25 / x^2. The denominators' polynomials are summed from the
 * listed coefficients alone, as the CPU does. y's are -inf at 0 and NaN
 * below. */
#include <math.h>

#include "kernels/special.h"

static const double J0_PP[7] = {
    7.96936729297347051624e-04, 8.28352392107440799803e-02, 1.23953371646414299388e+00,
    5.44725003058768775090e+00, 8.74716500199817011941e+00, 5.30324038235394892183e+00,
    9.99999999999999997821e-01};
static const double J0_PQ[7] = {
    9.24408810558863637013e-04, 8.56288474354474431428e-02, 1.25352743901058953537e+00,
    5.47097740330417105182e+00, 8.76190883237069594232e+00, 5.30605288235394617618e+00,
    1.00000000000000000218e+00};
static const double J0_QP[8] = {
    -1.13663838898469149931e-02, -1.28252718670509318512e+00, -1.95539544257735972385e+01,
    -9.32060152123768231369e+01, -1.77681167980488050595e+02, -1.47077505154951170175e+02,
    -5.14105326766599330220e+01, -6.05014350600728481186e+00};
static const double J0_QQ[7] = {
    6.43178256118178023184e+01, 8.56430025976980587198e+02, 3.88240183605401609683e+03,
    7.24046774195652478189e+03, 5.93072701187316984827e+03, 2.06209331660327847417e+03,
    2.42005740240291393179e+02};
static const double J0_RP[4] = {
    -4.79443220978201773821e+09, 1.95617491946556577543e+12, -2.49248344360967716204e+14,
    9.70862251047306323952e+15};
static const double J0_RQ[8] = {
    4.99563147152651017219e+02, 1.73785401676374683123e+05, 4.84409658339962045305e+07,
    1.11855537045356834862e+10, 2.11277520115489217587e+12, 3.10518229857422583814e+14,
    3.18121955943204943306e+16, 1.71086294081043136091e+18};
static const double J1_PP[7] = {
    7.62125616208173112003e-04, 7.31397056940917570436e-02, 1.12719608129684925192e+00,
    5.11207951146807644818e+00, 8.42404590141772420927e+00, 5.21451598682361504063e+00,
    1.00000000000000000254e+00};
static const double J1_PQ[7] = {
    5.71323128072548699714e-04, 6.88455908754495404082e-02, 1.10514232634061696926e+00,
    5.07386386128601488557e+00, 8.39985554327604159757e+00, 5.20982848682361821619e+00,
    9.99999999999999997461e-01};
static const double J1_QP[8] = {
    5.10862594750176621635e-02, 4.98213872951233449420e+00, 7.58238284132545283818e+01,
    3.66779609360150777800e+02, 7.10856304998926107277e+02, 5.97489612400613639965e+02,
    2.11688757100572135698e+02, 2.52070205858023719784e+01};
static const double J1_QQ[7] = {
    7.42373277035675149943e+01, 1.05644886038262816351e+03, 4.98641058337653607651e+03,
    9.56231892404756170795e+03, 7.99704160447350683650e+03, 2.82619278517639096600e+03,
    3.36093607810698293419e+02};
static const double J1_RP[4] = {
    -8.99971225705559398224e+08, 4.52228297998194034323e+11, -7.27494245221818276015e+13,
    3.68295732863852883286e+15};
static const double J1_RQ[8] = {
    6.20836478118054335476e+02, 2.56987256757748830383e+05, 8.35146791431949253037e+07,
    2.21511595479792499675e+10, 4.74914122079991414898e+12, 7.84369607876235854894e+14,
    8.95222336184627338078e+16, 5.32278620332680085395e+18};
static const double Y0_YP[8] = {
    1.55924367855235737965e+04, -1.46639295903971606143e+07, 5.43526477051876500413e+09,
    -9.82136065717911466409e+11, 8.75906394395366999549e+13, -3.46628303384729719441e+15,
    4.42733268572569800351e+16, -1.84950800436986690637e+16};
static const double Y0_YQ[7] = {
    1.04128353664259848412e+03, 6.26107330137134956842e+05, 2.68919633393814121987e+08,
    8.64002487103935000337e+10, 2.02979612750105546709e+13, 3.17157752842975028269e+15,
    2.50596256172653059228e+17};
static const double Y1_YP[6] = {
    1.26320474790178026440e+09, -6.47355876379160291031e+11, 1.14509511541823727583e+14,
    -8.12770255501325109621e+15, 2.02439475713594898196e+17, -7.78877196265950026825e+17};
static const double Y1_YQ[8] = {
    5.94301592346128195359e+02, 2.35564092943068577943e+05, 7.34811944459721705660e+07,
    1.87601316108706159478e+10, 3.88231277496238566008e+12, 6.20557727146953693363e+14,
    6.87141087355300489866e+16, 3.97270608116560655612e+18};

#define PI_4 0.785398163397448309615660845819875721     /* the phase of order 0 */
#define PI3_4 2.356194490192344928846982537459627163    /* of order 1 */
#define SQRT_2_PI 0.797884560802865355879892119868763737 /* sqrt(2 / pi) */
#define TWO_PI 0.636619772367581343075535053490057448    /* 2 / pi */

/* sum c[k] z^(n-1-k) by Horner's rule */
static double poly(double z, const double *c, int n) {
  double r = 0;
  for (int i = 0; i < n; i++) r = r * z + c[i];
  return r;
}

/* The asymptotic form, order 0 (z = 25 / x^2) or 1 (z = (5 / x)^2, as the
 * CPU rounds it); sine = 1 for y (sin and cos swapped, Q added). */
static double hankel0(double x, int y) {
  double z = 25.0 / (x * x);
  double p = poly(z, J0_PP, 7) / poly(z, J0_PQ, 7), q = poly(z, J0_QP, 8) / poly(z, J0_QQ, 7);
  double s = sin(x - PI_4), c = cos(x - PI_4);
  double r = y ? p * s + 5.0 / x * q * c : p * c - 5.0 / x * q * s;
  return r * SQRT_2_PI / sqrt(x);
}

static double hankel1(double x, int y) {
  double z = 5.0 / x * (5.0 / x);
  double p = poly(z, J1_PP, 7) / poly(z, J1_PQ, 7), q = poly(z, J1_QP, 8) / poly(z, J1_QQ, 7);
  double s = sin(x - PI3_4), c = cos(x - PI3_4);
  double r = y ? p * s + 5.0 / x * q * c : p * c - 5.0 / x * q * s;
  return r * SQRT_2_PI / sqrt(x);
}

double hpu_sf_j0(double x) {
  if (x < 0) x = -x;
  if (x <= 5.0) {
    if (x < 0.00001) return 1.0 - x * x / 4.0;
    double z = x * x;
    return (z - 5.78318596294678452118e+00) * (z - 3.04712623436620863991e+01) *
           poly(z, J0_RP, 4) / poly(z, J0_RQ, 8);
  }
  return hankel0(x, 0);
}

double hpu_sf_j1(double x) {
  if (x < 0) return -hpu_sf_j1(-x);
  if (x <= 5.0) {
    double z = x * x;
    return poly(z, J1_RP, 4) / poly(z, J1_RQ, 8) * x * (z - 1.46819706421238932572e+01) *
           (z - 4.92184563216946036703e+01);
  }
  return hankel1(x, 0);
}

double hpu_sf_y0(double x) {
  if (x <= 5.0) {
    if (x == 0) return -INFINITY;
    if (x < 0) return NAN;
    double z = x * x;
    return poly(z, Y0_YP, 8) / poly(z, Y0_YQ, 7) + TWO_PI * log(x) * hpu_sf_j0(x);
  }
  return hankel0(x, 1);
}

double hpu_sf_y1(double x) {
  if (x <= 5.0) {
    if (x == 0) return -INFINITY;
    if (x <= 0) return NAN;
    double z = x * x;
    return x * (poly(z, Y1_YP, 6) / poly(z, Y1_YQ, 8)) + TWO_PI * (hpu_sf_j1(x) * log(x) - 1.0 / x);
  }
  return hankel1(x, 1);
}
