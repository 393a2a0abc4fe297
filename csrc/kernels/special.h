/* Internal interface of the special-function family (hpu/ops_special.def):
 * scalar functions in double, each file one group of them. special.c runs
 * them over chunks for the pointwise engine. Edge-case conventions (poles,
 * negative integers, infinities, domain limits) are PyTorch's CPU ones. */
#ifndef HPU_KERNELS_SPECIAL_H
#define HPU_KERNELS_SPECIAL_H

#include <stdint.h>

/* special_gamma.c: the gamma family. */
double hpu_sf_lgamma(double x);
float hpu_sf_lgammaf(float x);
double hpu_sf_digamma(double x);
float hpu_sf_digammaf(float x);
double hpu_sf_trigamma(double x);
float hpu_sf_trigammaf(float x);
double hpu_sf_zeta(double x, double q);
double hpu_sf_polygamma(int64_t n, double x);

/* special_erf.c: the error function family and the normal distribution. */
double hpu_sf_erfinv(double y);
float hpu_sf_erfinvf(float y);
double hpu_sf_erfcx(double x);
double hpu_sf_ndtri(double y);
double hpu_sf_log_ndtr(double x);

/* special_bessel.c: modified Bessel functions; k0e = e^x k0, k1e = e^x k1. */
double hpu_sf_i0(double x);
double hpu_sf_i0e(double x);
double hpu_sf_i1(double x);
double hpu_sf_i1e(double x);
float hpu_sf_i0f(float x);
float hpu_sf_i0ef(float x);
float hpu_sf_i1f(float x);
float hpu_sf_i1ef(float x);
double hpu_sf_k0(double x);
double hpu_sf_k0e(double x);
double hpu_sf_k1(double x);
double hpu_sf_k1e(double x);

/* special_bessel_jy.c: Bessel functions of the first and second kind. */
double hpu_sf_j0(double x);
double hpu_sf_j1(double x);
double hpu_sf_y0(double x);
double hpu_sf_y1(double x);

/* special_airy.c */
double hpu_sf_airy_ai(double x);

/* special_poly.c: orthogonal polynomials p_n(x), n truncated to an integer;
 * a float form for the float family (the CPU recurs in float). */
double hpu_sf_chebyshev_t(double x, double n);
float hpu_sf_chebyshev_tf(float x, float n);
double hpu_sf_chebyshev_u(double x, double n);
float hpu_sf_chebyshev_uf(float x, float n);
double hpu_sf_chebyshev_v(double x, double n);
float hpu_sf_chebyshev_vf(float x, float n);
double hpu_sf_chebyshev_w(double x, double n);
float hpu_sf_chebyshev_wf(float x, float n);
double hpu_sf_shifted_chebyshev_t(double x, double n);
float hpu_sf_shifted_chebyshev_tf(float x, float n);
double hpu_sf_shifted_chebyshev_u(double x, double n);
float hpu_sf_shifted_chebyshev_uf(float x, float n);
double hpu_sf_shifted_chebyshev_v(double x, double n);
float hpu_sf_shifted_chebyshev_vf(float x, float n);
double hpu_sf_shifted_chebyshev_w(double x, double n);
float hpu_sf_shifted_chebyshev_wf(float x, float n);
double hpu_sf_hermite_h(double x, double n);
float hpu_sf_hermite_hf(float x, float n);
double hpu_sf_hermite_he(double x, double n);
float hpu_sf_hermite_hef(float x, float n);
double hpu_sf_laguerre_l(double x, double n);
float hpu_sf_laguerre_lf(float x, float n);
double hpu_sf_legendre_p(double x, double n);
float hpu_sf_legendre_pf(float x, float n);

#endif
