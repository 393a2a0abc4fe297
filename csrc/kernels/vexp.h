#ifndef HPU_KERNELS_VEXP_H
#define HPU_KERNELS_VEXP_H

#include "kernels/isa.h"

#if HPU_HAVE_ISA_CLONES
#include <immintrin.h>
#include <math.h>

/* pw_expf's range reduction on 16 floats: n = rint(xc / ln 2) into *n,
 * and r = xc - n ln 2 (ln 2 in two parts) returned. */
static HPU_ATTR_avx512 inline __m512 exp16_reduce(__m512 xc, __m512 *n) {
  *n = _mm512_roundscale_ps(_mm512_mul_ps(xc, _mm512_set1_ps(1.44269504088896341f)),
                            _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fmadd_ps(*n, _mm512_set1_ps(-0.693359375f), xc);
  return _mm512_fmadd_ps(*n, _mm512_set1_ps(2.12194440e-4f), r);
}

/* pw_expf's polynomial (pw_exp_reduced), 1 + r + r^2 (P0 + P1 r + ...
 * + P5 r^5), for exp16_poly and exp8_poly. */
#define HPU_EXP_P5 1.9875691500e-4f
#define HPU_EXP_P4 1.3981999507e-3f
#define HPU_EXP_P3 8.3334519073e-3f
#define HPU_EXP_P2 4.1665795894e-2f
#define HPU_EXP_P1 1.6666665459e-1f
#define HPU_EXP_P0 5.0000001201e-1f

/* pw_expf's polynomial on the reduced r. */
static HPU_ATTR_avx512 inline __m512 exp16_poly(__m512 r) {
  __m512 p = _mm512_fmadd_ps(_mm512_set1_ps(HPU_EXP_P5), r, _mm512_set1_ps(HPU_EXP_P4));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(HPU_EXP_P3));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(HPU_EXP_P2));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(HPU_EXP_P1));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(HPU_EXP_P0));
  return _mm512_add_ps(_mm512_fmadd_ps(p, _mm512_mul_ps(r, r), r), _mm512_set1_ps(1.0f));
}

/* e^x for 16 floats, by hand for AVX-512 (the exp, sigmoid and silu
 * kernels, softmax rows). GCC vectorised pw_expf's selects into ~50 masked
 * instructions per 16 lanes: exp ran at a third of torch's speed, and
 * softmax at 0.8 of it. Here the clamps are MAX/MIN (which keep NaN), 2^n is
 * one VSCALEFPS (a single rounding, like pw_expf's two exact power-of-two
 * products), and the polynomial is pw_expf's, operation for operation
 * (FMAs where it calls fmaf): the results are bit for bit those of the
 * other ISAs. When all 16 lanes lie in [-87, 88] the clamps and the three
 * fix-ups change nothing and are skipped (softmax rows [1024 x 1024] at one
 * thread: 440 -> 380 us, Zen 4 class); checked over all 2^32 inputs. */
static HPU_ATTR_avx512 inline __m512 exp16(__m512 x) {
  /* all lanes in [-87, 88] (false for NaN): the clamps and fix-ups change nothing */
  __mmask16 in = _mm512_cmp_ps_mask(x, _mm512_set1_ps(-87.0f), _CMP_GE_OQ) &
                 _mm512_cmp_ps_mask(x, _mm512_set1_ps(88.0f), _CMP_LE_OQ);
  if (in == (__mmask16)0xffff) {
    __m512 n, r = exp16_reduce(x, &n);
    return _mm512_scalef_ps(exp16_poly(r), n);
  }
  const __m512 hi = _mm512_set1_ps(88.72283935546875f), lo = _mm512_set1_ps(-103.97283935546875f);
  __m512 n, r = exp16_reduce(_mm512_min_ps(hi, _mm512_max_ps(lo, x)), &n); /* second operand on NaN: x */
  __m512 y = _mm512_scalef_ps(exp16_poly(r), n);
  y = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, hi, _CMP_GT_OQ), y, _mm512_set1_ps(INFINITY));
  y = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, lo, _CMP_LT_OQ), y, _mm512_setzero_ps());
  return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q), y, x);
}

/* The polynomial of exp16_nonpos and exp8_nonpos (below), 1 + C1 r + ...
 * + C5 r^5: one set, so that the two give the same bits. */
#define HPU_EXPNP_C5 8.290313184e-3f
#define HPU_EXPNP_C4 4.189793020e-2f
#define HPU_EXPNP_C3 1.666763574e-1f
#define HPU_EXPNP_C2 4.999915063e-1f
#define HPU_EXPNP_C1 9.999997020e-1f

/* e^x for x <= 0 up to rounding (probabilities: scores minus their row's
 * max or log-sum-exp, where -inf, a masked key, gives 0; NaN stays NaN),
 * for the fused attention. exp16's range reduction, a degree-5 polynomial
 * fitted for relative error on [-ln2/2, ln2/2], and no clamp or fix-up
 * above 0: 12 vector operations where exp16 takes 20, within 2.01 ulp of
 * e^x over every float in [-110, 0.5] (checked against the double exp),
 * as torch's own CPU flash attention takes a 2-ulp exp (exp_u20). Not the
 * bits of pw_expf. */
static HPU_ATTR_avx512 inline __m512 exp16_nonpos(__m512 x) {
  const __m512 lo = _mm512_set1_ps(-103.97283935546875f);
  __m512 n, r = exp16_reduce(_mm512_max_ps(lo, x), &n); /* second operand on NaN: x */
  __m512 y = _mm512_fmadd_ps(_mm512_set1_ps(HPU_EXPNP_C5), r, _mm512_set1_ps(HPU_EXPNP_C4));
  y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(HPU_EXPNP_C3));
  y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(HPU_EXPNP_C2));
  y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(HPU_EXPNP_C1));
  y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(1.0f));
  /* x below lo (and -inf) gives 0; "not less than" is true for NaN */
  return _mm512_maskz_scalef_ps(_mm512_cmp_ps_mask(x, lo, _CMP_NLT_UQ), y, n);
}

/* exp16_reduce on 8 floats. */
static HPU_ATTR_avx2 inline __m256 exp8_reduce(__m256 xc, __m256 *n) {
  *n = _mm256_round_ps(_mm256_mul_ps(xc, _mm256_set1_ps(1.44269504088896341f)),
                       _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fmadd_ps(*n, _mm256_set1_ps(-0.693359375f), xc);
  return _mm256_fmadd_ps(*n, _mm256_set1_ps(2.12194440e-4f), r);
}

/* y * 2^n (n integral, -150 <= n <= 128) as pw_expf's two exact
 * power-of-two products: the first keeps y normal, so only the second
 * rounds, once, as VSCALEFPS does. */
static HPU_ATTR_avx2 inline __m256 exp8_scale(__m256 y, __m256 n) {
  __m256i ni = _mm256_cvttps_epi32(n), n1 = _mm256_srai_epi32(ni, 1), n2 = _mm256_sub_epi32(ni, n1);
  const __m256i bias = _mm256_set1_epi32(127);
  y = _mm256_mul_ps(y, _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n1, bias), 23)));
  return _mm256_mul_ps(y, _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n2, bias), 23)));
}

/* exp16_poly on 8 floats. */
static HPU_ATTR_avx2 inline __m256 exp8_poly(__m256 r) {
  __m256 p = _mm256_fmadd_ps(_mm256_set1_ps(HPU_EXP_P5), r, _mm256_set1_ps(HPU_EXP_P4));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(HPU_EXP_P3));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(HPU_EXP_P2));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(HPU_EXP_P1));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(HPU_EXP_P0));
  return _mm256_add_ps(_mm256_fmadd_ps(p, _mm256_mul_ps(r, r), r), _mm256_set1_ps(1.0f));
}

/* The same for 8 floats on AVX2 (exp, sigmoid and silu kernels, softmax
 * rows): AVX2 has no VSCALEFPS, so 2^n is pw_expf's two exact power-of-two
 * products, and the fix-ups are blends. GCC's vectorisation of pw_expf took
 * ~50 instructions per 8 lanes (softmax 0.62 of torch's AVX2 kernel); this
 * is ~32, with the same bits. When all 8 lanes lie in [-87, 88] (softmax
 * rows, activations: nearly always), 2^n is a normal float (-126 <= n <=
 * 127) and one product rounds the same exact value once, as the two do, and
 * no clamp or fix-up changes anything: ~21 instructions, the same bits. */
static HPU_ATTR_avx2 inline __m256 exp8(__m256 x) {
  __m256 in = _mm256_and_ps(_mm256_cmp_ps(x, _mm256_set1_ps(-87.0f), _CMP_GE_OQ),
                            _mm256_cmp_ps(x, _mm256_set1_ps(88.0f), _CMP_LE_OQ)); /* false for NaN */
  if (_mm256_movemask_ps(in) == 0xff) {
    __m256 n, r = exp8_reduce(x, &n);
    __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvttps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_mul_ps(exp8_poly(r), _mm256_castsi256_ps(e));
  }
  const __m256 hi = _mm256_set1_ps(88.72283935546875f), lo = _mm256_set1_ps(-103.97283935546875f);
  __m256 n, r = exp8_reduce(_mm256_min_ps(hi, _mm256_max_ps(lo, x)), &n); /* second operand on NaN: x */
  __m256 y = exp8_scale(exp8_poly(r), n);
  y = _mm256_blendv_ps(y, _mm256_set1_ps(INFINITY), _mm256_cmp_ps(x, hi, _CMP_GT_OQ));
  y = _mm256_blendv_ps(y, _mm256_setzero_ps(), _mm256_cmp_ps(x, lo, _CMP_LT_OQ));
  return _mm256_blendv_ps(y, x, _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
}

/* exp16_nonpos on 8 floats for AVX2 (the fused attention's AVX2 tiles):
 * the same reduction and polynomial, 2^n by exp8_scale (n >= -150 here):
 * the same bits as exp16_nonpos. */
static HPU_ATTR_avx2 inline __m256 exp8_nonpos(__m256 x) {
  const __m256 lo = _mm256_set1_ps(-103.97283935546875f);
  __m256 n, r = exp8_reduce(_mm256_max_ps(lo, x), &n); /* second operand on NaN: x */
  __m256 y = _mm256_fmadd_ps(_mm256_set1_ps(HPU_EXPNP_C5), r, _mm256_set1_ps(HPU_EXPNP_C4));
  y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(HPU_EXPNP_C3));
  y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(HPU_EXPNP_C2));
  y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(HPU_EXPNP_C1));
  y = exp8_scale(_mm256_fmadd_ps(y, r, _mm256_set1_ps(1.0f)), n);
  /* x below lo (and -inf) gives 0; "not less than" is true for NaN, whose
   * n (and so y) is NaN already */
  return _mm256_and_ps(y, _mm256_cmp_ps(x, lo, _CMP_NLT_UQ));
}
#endif

#endif
