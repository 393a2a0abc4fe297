/* Branch-free float math for the pointwise kernels: written so that GCC
 * vectorises loops calling them (selects instead of branches, bit casts
 * through unions), unlike libm calls. Accuracy: within 2 ulp of the
 * correctly rounded result (Cephes polynomials), close to the Sleef u10
 * functions PyTorch's vectorised CPU kernels use; results may differ from
 * PyTorch in the last bit (tests state tolerances). pw_erf_approx is the
 * same Abramowitz-Stegun 7.1.26 formula PyTorch's Vectorized<float>::erf
 * uses (and hence its gelu): absolute error < 1.5e-7. */
#ifndef HPU_KERNELS_PW_MATH_H
#define HPU_KERNELS_PW_MATH_H

#include <math.h>
#include <stdint.h>

/* The functions loops call per element: forced inline, or GCC's inliner
 * gives up in a loop that calls two or three of them (softplus: exp then
 * log1p) and the loop stays scalar around a call (softplus ran at 0.1 of
 * torch's speed). */
#define PW_INLINE static inline __attribute__((always_inline))

typedef union {
  float f;
  int32_t i;
  uint32_t u;
} pw_bits_t;

static inline float pw_from_bits(int32_t i) {
  pw_bits_t b;
  b.i = i;
  return b.f;
}

static inline int32_t pw_to_bits(float f) {
  pw_bits_t b;
  b.f = f;
  return b.i;
}

/* e^(xc - n ln 2) for n = rint(xc / ln 2): the range reduction and the
 * polynomial that pw_expf and pw_exp_nonpos share. Explicit fmaf (the build
 * is -std=c11: no contraction), as the AVX-512 exp16 does op for op: 8 fewer
 * instructions per vector than separate multiplies and adds, and one
 * rounding fewer each. On CPUs without FMA (the generic build) fmaf is a
 * libm call: right, but slow. */
PW_INLINE float pw_exp_reduced(float xc, float n) {
  float r = fmaf(n, -0.693359375f, xc);
  r = fmaf(n, 2.12194440e-4f, r);
  float p = fmaf(1.9875691500e-4f, r, 1.3981999507e-3f);
  p = fmaf(p, r, 8.3334519073e-3f);
  p = fmaf(p, r, 4.1665795894e-2f);
  p = fmaf(p, r, 1.6666665459e-1f);
  p = fmaf(p, r, 5.0000001201e-1f);
  return fmaf(p, r * r, r) + 1.0f;
}

/* e^x */
PW_INLINE float pw_expf(float x) {
  const float hi = 88.72283935546875f, lo = -103.97283935546875f;
  float xc = x > hi ? hi : x;
  xc = xc < lo ? lo : xc;
  xc = xc == xc ? xc : 0.0f; /* NaN: fixed up at the end */
  float n = rintf(xc * 1.44269504088896341f);
  float y = pw_exp_reduced(xc, n);
  /* 2^n in two factors so that n down to -150 (subnormal results) works. */
  int32_t ni = (int32_t)n;
  int32_t n1 = ni >> 1, n2 = ni - n1;
  y = y * pw_from_bits((n1 + 127) << 23) * pw_from_bits((n2 + 127) << 23);
  y = x > hi ? INFINITY : y;
  y = x < lo ? 0.0f : y;
  return x != x ? x : y;
}

/* natural log */
PW_INLINE float pw_logf(float x) {
  int sub = x < 1.17549435e-38f; /* subnormal (or <= 0, handled below) */
  float xs = sub ? x * 8388608.0f : x;
  int32_t u = pw_to_bits(xs);
  float e = (float)(((u >> 23) & 0xff) - 126 - (sub ? 23 : 0));
  float m = pw_from_bits((u & 0x807fffff) | 0x3f000000); /* [0.5, 1) */
  int small = m < 0.707106781186547524f;
  e = small ? e - 1.0f : e;
  m = small ? m + m - 1.0f : m - 1.0f;
  float z = m * m;
  float y = 7.0376836292e-2f;
  y = y * m - 1.1514610310e-1f;
  y = y * m + 1.1676998740e-1f;
  y = y * m - 1.2420140846e-1f;
  y = y * m + 1.4249322787e-1f;
  y = y * m - 1.6668057665e-1f;
  y = y * m + 2.0000714765e-1f;
  y = y * m - 2.4999993993e-1f;
  y = y * m + 3.3333331174e-1f;
  y = y * m * z;
  y = y + e * -2.12194440e-4f;
  y = y - 0.5f * z;
  float r = m + y;
  r = r + e * 0.693359375f;
  r = x == INFINITY ? x : r;
  r = x == 0.0f ? -INFINITY : r;
  r = x < 0.0f ? NAN : r;
  return x != x ? x : r;
}

PW_INLINE float pw_tanhf(float x) {
  float ax = fabsf(x);
  float z = x * x;
  float s = -5.70498872745e-3f;
  s = s * z + 2.06390887954e-2f;
  s = s * z - 5.37397155531e-2f;
  s = s * z + 1.33314422036e-1f;
  s = s * z - 3.33332819422e-1f;
  s = s * z * x + x;
  float e = pw_expf(ax + ax);
  float l = 1.0f - 2.0f / (e + 1.0f);
  l = copysignf(l, x);
  return ax < 0.625f ? s : l;
}

/* e^x for x <= 0 only (erf's exp(-x^2)): the same polynomial as pw_expf
 * without its overflow and subnormal handling. Below -87 it returns about
 * e^-87 (1.6e-38) instead of a smaller value, which its callers add to 1 or
 * multiply by bounded terms, so their results do not change; NaN gives some
 * finite value (callers propagate NaN from their own input): half the
 * instructions of pw_expf in the vectorised loop. */
static inline float pw_exp_nonpos(float x) {
  float xc = x > -87.0f ? x : -87.0f; /* one max instruction; NaN -> -87 */
  float n = rintf(xc * 1.44269504088896341f);
  float y = pw_exp_reduced(xc, n);
  return y * pw_from_bits((int32_t)(((uint32_t)(int32_t)n + 127u) << 23));
}

static inline float pw_sigmoidf(float x) { return 1.0f / (1.0f + pw_expf(-x)); }

/* log(1 + x): u = 1 + x rounded, and log(u) corrected by the first-order
 * term of that rounding (log1p(x) = log(u) - ((u - 1) - x) / u); x itself
 * when 1 + x rounds to 1. Vectorises, unlike log1pf (softplus and mish
 * through libm ran at 0.2-0.3 of torch's speed). */
PW_INLINE float pw_log1pf(float x) {
  float u = 1.0f + x;
  float r = pw_logf(u) - ((u - 1.0f) - x) / u;
  r = u == 1.0f ? x : r;
  r = u == 0.0f ? -INFINITY : r;
  r = x == INFINITY ? x : r;
  return x != x ? x : r;
}

/* e^x - 1 without the cancellation near 0: for |x| < 1 its Taylor series
 * to x^11 (truncation below 3e-9 relative), e^x - 1 beyond (e^x >= e or
 * <= 1/e there, so the subtraction loses at most a bit). */
PW_INLINE float pw_expm1f(float x) {
  float p = 2.5052108385e-8f;   /* 1/11! */
  p = p * x + 2.7557319224e-7f; /* 1/10! */
  p = p * x + 2.7557319224e-6f;
  p = p * x + 2.4801587302e-5f;
  p = p * x + 1.9841269841e-4f;
  p = p * x + 1.3888888889e-3f;
  p = p * x + 8.3333333333e-3f;
  p = p * x + 4.1666666667e-2f;
  p = p * x + 1.6666666667e-1f;
  p = p * x + 0.5f;
  float small = (p * x) * x + x;
  float r = pw_expf(x) - 1.0f;
  r = fabsf(x) < 1.0f ? small : r;
  return x != x ? x : r;
}

/* PyTorch's Vectorized<float>::erf (used by its gelu), given ex =
 * pw_exp_nonpos(-(x * x)) (gelu's backward shares it with its pdf). */
static inline float pw_erf_approx_ex(float x, float ex) {
  float ax = fabsf(x);
  float t = 1.0f / fmaf(0.3275911f, ax, 1.0f);
  float r = fmaf(1.061405429f, t, -1.453152027f);
  r = fmaf(r, t, 1.421413741f);
  r = fmaf(r, t, -0.284496736f);
  r = fmaf(r, t, 0.254829592f);
  float v = fmaf(-ex * t, r, 1.0f);
  return copysignf(v, x) * (x == x ? 1.0f : x);
}
static inline float pw_erf_approx(float x) { return pw_erf_approx_ex(x, pw_exp_nonpos(-(x * x))); }

/* gelu, erf form: 0.5 x (1 + erf(x / sqrt 2)), with erf(z) = z P(z^2) / Q(z^2)
 * for |z| < 3.925 and +-1 beyond (erf(3.925) rounds to 1.0f). A rational
 * fit of our own (scripts/fit_gelu_erf.py: Lawson-weighted least squares,
 * degrees 6 / 4, which prints these coefficients): 11 multiply-adds and one
 * division, against ~30 operations for the exp-based form above, and more
 * accurate (max error of erf 3.2e-7 evaluated in float; relative 5.7e-7 near
 * 0). The polynomials take h = x / 2 (z = sqrt2 h: sqrt 2 and the powers of 2
 * are folded into the coefficients), and with r = |erf|,
 *   gelu = h (1 + sign(x) r) = h + |h| r,
 * one multiply-add. gelu(x) has the sign of x (Phi > 0), so the result takes
 * x's sign: that only changes zeros (h + |h| gives +0 where PyTorch's
 * x * 0.5 * (1 - 1) gives -0 for x < 0, and gelu(-0) = -0).
 * Against PyTorch's CPU gelu (itself off by up to ~1.5e-6) it stays within
 * 0.65 of the float32 parity tolerance. NaN propagates through the clamp
 * (vminps with the NaN second); gelu(+inf) = inf, gelu(-inf) = NaN as in
 * PyTorch's formula. */
static inline float pw_gelu_erf(float x) {
  float h = 0.5f * x;
  float ah = fabsf(h);
  float c = ah > 2.7753942f ? 2.7753942f : ah; /* z = 3.925 */
  float s = c * c;
  float p = fmaf(1.798913900e-06f, s, -9.024675091e-05f);
  p = fmaf(p, s, 3.381371265e-03f);
  p = fmaf(p, s, 4.519376531e-02f);
  p = fmaf(p, s, 2.911460996e-01f);
  p = fmaf(p, s, 5.844630599e-01f);
  p = fmaf(p, s, 1.595768571e+00f);
  float q = fmaf(1.646640152e-02f, s, 1.194738373e-01f);
  q = fmaf(q, s, 4.711286724e-01f);
  q = fmaf(q, s, 1.032915473e+00f);
  q = fmaf(q, s, 1.0f);
  float r = (c * p) / q;
  r = r > 1.0f ? 1.0f : r; /* the fit overshoots 1 by up to 2e-7 near the clamp */
  return copysignf(fmaf(ah, r, h), x);
}

#endif
