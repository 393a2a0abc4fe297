#ifndef HPU_KERNELS_EXP16_H
#define HPU_KERNELS_EXP16_H

#include "kernels/isa.h"

#if HPU_HAVE_ISA_CLONES
#include <immintrin.h>
#include <math.h>

/* e^x for 16 floats, by hand for AVX-512 (the exp, sigmoid and silu
 * kernels, softmax rows). GCC vectorised pw_expf's selects into ~50 masked
 * instructions per 16 lanes: exp ran at a third of torch's speed, and
 * softmax at 0.8 of it. Here the clamps are MAX/MIN (which keep NaN), 2^n is
 * one VSCALEFPS (a single rounding, like pw_expf's two exact power-of-two
 * products), and the polynomial is pw_expf's, operation for operation
 * (FMAs where it calls fmaf): the results are bit for bit those of the
 * other ISAs. */
static HPU_ATTR_avx512 inline __m512 exp16(__m512 x) {
  const __m512 hi = _mm512_set1_ps(88.72283935546875f), lo = _mm512_set1_ps(-103.97283935546875f);
  __m512 xc = _mm512_min_ps(hi, _mm512_max_ps(lo, x)); /* second operand on NaN: x */
  __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(xc, _mm512_set1_ps(1.44269504088896341f)),
                                  _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fmadd_ps(n, _mm512_set1_ps(-0.693359375f), xc);
  r = _mm512_fmadd_ps(n, _mm512_set1_ps(2.12194440e-4f), r);
  __m512 p = _mm512_fmadd_ps(_mm512_set1_ps(1.9875691500e-4f), r, _mm512_set1_ps(1.3981999507e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
  __m512 y = _mm512_add_ps(_mm512_fmadd_ps(p, _mm512_mul_ps(r, r), r), _mm512_set1_ps(1.0f));
  y = _mm512_scalef_ps(y, n);
  y = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, hi, _CMP_GT_OQ), y, _mm512_set1_ps(INFINITY));
  y = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, lo, _CMP_LT_OQ), y, _mm512_setzero_ps());
  return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q), y, x);
}
#endif

#endif
