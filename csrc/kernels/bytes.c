/* hpu_copy_bytes: memmove, except where glibc's memmove is pathological.
 *
 * On Zen 3 class EPYCs (measured), glibc's memmove of a few KiB or more
 * (its `rep movsb` path) runs 10-15x slower when the destination is 1-31
 * bytes ahead of the source modulo 4 KiB: 4000-byte rows took 1.5 ms per
 * 4 MiB instead of 0.15 in a C probe of both on the same buffers. A strided copy meets that case whenever a narrow shifts
 * the rows by a few elements (o[:, 5:].copy_(x[:, :-5]), roll, cat along
 * an inner dim). A plain AVX2 load/store loop has no such case; elsewhere
 * memmove is as fast or slightly faster, so it keeps every other case. */
#include "kernels/bytes.h"

#include <stdint.h>
#include <string.h>

#include "kernels/isa.h"
#include "kernels/kernels.h"

#if HPU_HAVE_ISA_CLONES
#include <immintrin.h>

/* Forward copy of non-overlapping ranges, n >= 32. */
static HPU_ATTR_avx2 void copy_forward_avx2(char *d, const char *s, size_t n) {
  size_t i = 0;
  for (; i + 128 <= n; i += 128) {
    __m256i a = _mm256_loadu_si256((const __m256i *)(s + i));
    __m256i b = _mm256_loadu_si256((const __m256i *)(s + i + 32));
    __m256i c = _mm256_loadu_si256((const __m256i *)(s + i + 64));
    __m256i e = _mm256_loadu_si256((const __m256i *)(s + i + 96));
    _mm256_storeu_si256((__m256i *)(d + i), a);
    _mm256_storeu_si256((__m256i *)(d + i + 32), b);
    _mm256_storeu_si256((__m256i *)(d + i + 64), c);
    _mm256_storeu_si256((__m256i *)(d + i + 96), e);
  }
  for (; i + 32 <= n; i += 32)
    _mm256_storeu_si256((__m256i *)(d + i), _mm256_loadu_si256((const __m256i *)(s + i)));
  if (i < n) /* the last 32 bytes again, ending at n */
    _mm256_storeu_si256((__m256i *)(d + n - 32), _mm256_loadu_si256((const __m256i *)(s + n - 32)));
}
#endif

/* Sizes below this stay on memmove's short-copy paths, which do not slow down. */
#define SLOW_CASE_MIN_BYTES 512

void hpu_copy_bytes(void *dst, const void *src, size_t n) {
#if HPU_HAVE_ISA_CLONES
  uintptr_t d = (uintptr_t)dst, s = (uintptr_t)src;
  size_t ahead = (size_t)((d - s) & 4095u);
  int overlap = d < s + n && s < d + n;
  if (n >= SLOW_CASE_MIN_BYTES && ahead > 0 && ahead < 64 && !overlap &&
      hpu_kernels_isa() >= HPU_ISA_AVX2) {
    copy_forward_avx2((char *)dst, (const char *)src, n);
    return;
  }
#endif
  memmove(dst, src, n);
}
