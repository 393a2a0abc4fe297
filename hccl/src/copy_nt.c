/* The collectives' bulk copies: hccl_copy for slices moved between callers'
 * buffers and the shared segment, and hccl_copy_stream for results too
 * large to stay in cache, written with non-temporal (streaming) stores that
 * do not read the lines before overwriting them (a plain store of a line
 * not in cache reads it from memory, then writes it back: a third of the
 * traffic of a large gather is that read). Small outputs keep ordinary
 * stores, which leave them in cache for the caller. */
#include <stdint.h>
#include <string.h>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "internal.h"
#include "kernels/bytes.h"

/* The staged collectives copy slices between a caller's buffer and the
 * shared segment, whose slots are page aligned, while malloc'd buffers of
 * that size sit 16 bytes into a page: the gather's copies out then run with
 * the destination 16 bytes ahead of the source modulo 4 KiB. glibc's memcpy
 * takes `rep movsb` for such copies up to the L2 size on AMD CPUs (above it,
 * a vector loop), and on Zen 3 class EPYCs `rep movsb` runs 10-15x slower
 * in that case: host-buffer all-reduces of 128-512 KB (slices of 64-256 KB)
 * fell to 1 GB/s between 64 KB (one phase, no copy out) and 1 MB (512 KB
 * slices, vector loop) at 4-5 GB/s. hpu_copy_bytes takes a plain vector loop
 * in exactly that case and memcpy otherwise. */
void hccl_copy(void *dst, const void *src, size_t n) { hpu_copy_bytes(dst, src, n); }

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
