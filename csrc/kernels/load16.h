/* Sixteen float32 / bfloat16 / float16 elements as one vector of floats,
 * masked: the operand load that the GEMM (gemm.c) and matrix-vector
 * (gemv.c) microkernels share. Its target is a subset of every caller's, so
 * it inlines into each. */
#ifndef HPU_KERNELS_LOAD16_H
#define HPU_KERNELS_LOAD16_H

#include "hpu/dtype.h"
#include "kernels/isa.h"

#if HPU_HAVE_ISA_CLONES
#include <immintrin.h>

__attribute__((target("avx512f,avx512bw,avx512vl,prefer-vector-width=512"))) static inline __m512
hpu_load16_f32(const char *p, hpu_dtype_t dt, __mmask16 mk) {
  if (dt == HPU_FLOAT32) return _mm512_maskz_loadu_ps(mk, p);
  __m256i h = _mm256_maskz_loadu_epi16(mk, p);
  if (dt == HPU_FLOAT16) return _mm512_cvtph_ps(h);
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}
#endif

#endif
