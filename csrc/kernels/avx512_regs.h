/* AVX-512 register helpers shared by the GEMM's packing and epilogue
 * (gemm.c) and the fused attention's transposes and masks (attention.c). Only
 * AVX-512F is asked for, so they inline into either file's clones, whose
 * target sets differ but both contain it. */
#ifndef HPU_KERNELS_AVX512_REGS_H
#define HPU_KERNELS_AVX512_REGS_H

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#include <stdint.h>

#define HPU_ATTR_AVX512F __attribute__((target("avx512f")))

/* Masks of the first n of 16 / 32 lanes (none for n <= 0, all from 16 / 32 on). */
static inline __mmask16 hpu_mask16(int64_t n) {
  return n <= 0 ? 0 : n >= 16 ? 0xffff : (__mmask16)((1u << n) - 1);
}
static inline __mmask32 hpu_mask32(int64_t n) {
  return n <= 0 ? 0 : n >= 32 ? 0xffffffffu : (__mmask32)((1u << n) - 1);
}

/* 16 x 16 transpose of 32-bit elements: r[i][j] -> r[j][i]. */
HPU_ATTR_AVX512F static inline void hpu_tr16_epi32(__m512i r[16]) {
  __m512i t[16];
  for (int i = 0; i < 8; i++) {
    t[2 * i] = _mm512_unpacklo_epi32(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_epi32(r[2 * i], r[2 * i + 1]);
  }
  for (int i = 0; i < 4; i++) { /* r[4i + c]: rows 4i..4i+3 of column 4L + c in lane L */
    r[4 * i] = _mm512_unpacklo_epi64(t[4 * i], t[4 * i + 2]);
    r[4 * i + 1] = _mm512_unpackhi_epi64(t[4 * i], t[4 * i + 2]);
    r[4 * i + 2] = _mm512_unpacklo_epi64(t[4 * i + 1], t[4 * i + 3]);
    r[4 * i + 3] = _mm512_unpackhi_epi64(t[4 * i + 1], t[4 * i + 3]);
  }
  for (int c = 0; c < 4; c++) {
    t[c] = _mm512_shuffle_i32x4(r[c], r[4 + c], 0x88);
    t[4 + c] = _mm512_shuffle_i32x4(r[c], r[4 + c], 0xdd);
    t[8 + c] = _mm512_shuffle_i32x4(r[8 + c], r[12 + c], 0x88);
    t[12 + c] = _mm512_shuffle_i32x4(r[8 + c], r[12 + c], 0xdd);
  }
  for (int c = 0; c < 4; c++) {
    r[c] = _mm512_shuffle_i32x4(t[c], t[8 + c], 0x88);
    r[4 + c] = _mm512_shuffle_i32x4(t[4 + c], t[12 + c], 0x88);
    r[8 + c] = _mm512_shuffle_i32x4(t[c], t[8 + c], 0xdd);
    r[12 + c] = _mm512_shuffle_i32x4(t[4 + c], t[12 + c], 0xdd);
  }
}

/* 16 floats rounded to bf16 exactly as hpu_cvt_f32_bf16 (nearest even,
 * NaN -> 0x7fc0). */
HPU_ATTR_AVX512F static inline __m256i hpu_f32_to_bf16_512(__m512 v) {
  __m512i u = _mm512_castps_si512(v);
  __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
  __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
  u = _mm512_add_epi32(u, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7fff)));
  u = _mm512_srli_epi32(u, 16);
  u = _mm512_mask_mov_epi32(u, nan, _mm512_set1_epi32(0x7fc0));
  return _mm512_cvtepi32_epi16(u);
}
#endif

#endif
