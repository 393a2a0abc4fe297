/* A row split into its even and odd columns, for the stride-2 convolutions'
 * phase planes (conv_igemm.c, conv_direct.c). */
#ifndef HPU_KERNELS_CONV_SPLIT_H
#define HPU_KERNELS_CONV_SPLIT_H

#include <stdint.h>

#include "kernels/isa.h"

#if HPU_HAVE_ISA_CLONES
#include <immintrin.h>

/* src[0..W)'s even columns to even[0..], its odd ones to odd[0..]: 32
 * floats at a time, split by two permutes (element by element, the split
 * took 27% of the CIFAR ResNet's 3x3/2 16->32 forward at 32x32: perf, Zen 4
 * class). The caller must itself be an AVX-512 clone: called from generic
 * code this is not inlined, and a CPU without AVX-512 stops on its first
 * instruction (SIGILL). */
HPU_ATTR_avx512 static inline void hpu_conv_split_row_avx512(const float *src, int64_t W, float *even, float *odd) {
  const __m512i ie = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  const __m512i io = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
  for (int64_t j = 0; j < W; j += 32) {
    int64_t left = W - j;
    __mmask16 ma = left >= 16 ? 0xffff : (__mmask16)((1u << left) - 1);
    __mmask16 mb = left >= 32 ? 0xffff : left <= 16 ? 0 : (__mmask16)((1u << (left - 16)) - 1);
    __m512 a = _mm512_maskz_loadu_ps(ma, src + j), b = _mm512_maskz_loadu_ps(mb, src + j + 16);
    int64_t ne = (left + 1) / 2, no = left / 2; /* even and odd columns in this block */
    __mmask16 me = ne >= 16 ? 0xffff : (__mmask16)((1u << ne) - 1);
    __mmask16 mo = no >= 16 ? 0xffff : (__mmask16)((1u << no) - 1);
    _mm512_mask_storeu_ps(even + j / 2, me, _mm512_permutex2var_ps(a, ie, b));
    _mm512_mask_storeu_ps(odd + j / 2, mo, _mm512_permutex2var_ps(a, io, b));
  }
}

/* The same on AVX2, 16 floats at a time: a shuffle picks the even (odd)
 * lanes of both halves, a 64-bit permute puts them in order. The last
 * W % 16 go one by one: VMASKMOVPS stores are slow on AMD (perf of the
 * CIFAR ResNet's 3x3/2 64->128 forward at 8x8, rows of 8, on the AVX2
 * clones, Zen 4 class: the split 5.7% of the samples with them beside the
 * GEMM's 21%, one by one 2.7%). */
HPU_ATTR_avx2 static inline void hpu_conv_split_row_avx2(const float *src, int64_t W, float *even, float *odd) {
  int64_t j = 0;
  for (; j + 16 <= W; j += 16) {
    __m256 a = _mm256_loadu_ps(src + j), b = _mm256_loadu_ps(src + j + 8);
    __m256 e = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(a, b, 0x88)), 0xD8));
    __m256 o = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(a, b, 0xDD)), 0xD8));
    _mm256_storeu_ps(even + j / 2, e);
    _mm256_storeu_ps(odd + j / 2, o);
  }
  for (; j + 1 < W; j += 2) {
    even[j / 2] = src[j];
    odd[j / 2] = src[j + 1];
  }
  if (j < W) even[j / 2] = src[j];
}
#endif

#endif
