/* Copies of results into the caller's output when the output is too large
 * to stay in cache: non-temporal (streaming) stores write the lines without
 * first reading them (a plain store of a line not in cache reads it from
 * memory, then writes it back: a third of the traffic of a large gather is
 * that read). Small outputs keep memcpy, which leaves them in cache for the
 * caller. */
#include <stdint.h>
#include <string.h>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "internal.h"

void hccl_copy_stream(void *dst, const void *src, size_t n) {
#if defined(__SSE2__)
  char *d = dst;
  const char *s = src;
  size_t head = (16 - ((uintptr_t)d & 15)) & 15;
  if (n < 256 || head > n) {
    memcpy(d, s, n);
    return;
  }
  memcpy(d, s, head);
  d += head;
  s += head;
  n -= head;
  size_t body = n & ~(size_t)63;
  for (size_t i = 0; i < body; i += 64) {
    __m128i a = _mm_loadu_si128((const __m128i *)(s + i));
    __m128i b = _mm_loadu_si128((const __m128i *)(s + i + 16));
    __m128i c = _mm_loadu_si128((const __m128i *)(s + i + 32));
    __m128i e = _mm_loadu_si128((const __m128i *)(s + i + 48));
    _mm_stream_si128((__m128i *)(d + i), a);
    _mm_stream_si128((__m128i *)(d + i + 16), b);
    _mm_stream_si128((__m128i *)(d + i + 32), c);
    _mm_stream_si128((__m128i *)(d + i + 48), e);
  }
  memcpy(d + body, s + body, n - body);
  _mm_sfence(); /* streaming stores are weakly ordered: publish them before the next post */
#else
  memcpy(dst, src, n);
#endif
}
