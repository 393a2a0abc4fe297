/* Host scratch buffers for kernels (scratch.c): temporaries of a kernel
 * call (packed GEMM panels, im2col columns, Winograd tiles) kept between
 * calls, because a fresh malloc of a few hundred KB or more is an mmap
 * whose pages fault in again on every call: on a small convolution the
 * faults took a tenth of its time. */
#ifndef HPU_KERNELS_SCRATCH_H
#define HPU_KERNELS_SCRATCH_H

#include <stddef.h>

/* A 64-byte aligned buffer of at least n bytes (contents undefined), or
 * NULL when the host is out of memory; *slot says where it came from, for
 * hpu_scratch_put. Safe from any thread; a buffer is one caller's until
 * put back. */
void *hpu_scratch_get(size_t n, int *slot);

/* Gives a buffer back: it is kept for the next caller when it is at most
 * HPU_SCRATCH_KEEP_MAX bytes, freed otherwise. */
void hpu_scratch_put(void *p, int slot);

/* One buffer with its slot, for callers that hold several. */
typedef struct {
  void *p;
  int slot;
} hpu_scratch_buf_t;

static inline void *hpu_scratch_take(hpu_scratch_buf_t *b, size_t n) {
  b->p = hpu_scratch_get(n, &b->slot);
  return b->p;
}

/* Puts b's buffer back, if it has one (a zeroed b has none). */
static inline void hpu_scratch_give(hpu_scratch_buf_t *b) {
  if (b->p) hpu_scratch_put(b->p, b->slot);
  b->p = NULL;
}

/* Kept buffers are capped at this size, so the memory held between calls
 * stays bounded (at most HPU_SCRATCH_SLOTS of them); larger temporaries
 * are rare and their kernel's work dwarfs the page faults. */
#define HPU_SCRATCH_KEEP_MAX ((size_t)16 << 20)
#define HPU_SCRATCH_SLOTS 16

#endif
