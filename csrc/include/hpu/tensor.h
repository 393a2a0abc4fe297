/* Tensor descriptors: what an op node says about each operand. */
#ifndef HPU_TENSOR_H
#define HPU_TENSOR_H

#include <stdint.h>
#include "hpu/dtype.h"

#ifdef __cplusplus
extern "C" {
#endif

#define HPU_MAX_DIMS 12

typedef struct hpu_tensor {
  void *storage;        /* start of the buffer: a device pointer or host memory */
  int64_t offset;       /* byte offset of element [0,...,0] from storage */
  hpu_dtype_t dtype;
  int ndim;             /* 0 = a scalar (one element) */
  int64_t sizes[HPU_MAX_DIMS];
  int64_t strides[HPU_MAX_DIMS]; /* in elements, >= 0; 0 = broadcast */
} hpu_tensor_t;

/* Inline: graph passes ask both of every operand of every node at each
 * flush, and the calls were a tenth of a cache-hit flush. */
static inline int64_t hpu_tensor_numel(const hpu_tensor_t *t) {
  int64_t n = 1;
  for (int d = 0; d < t->ndim; d++) n *= t->sizes[d];
  return n;
}
/* Row-major contiguous, ignoring the strides of size-1 dims (as PyTorch). */
static inline int hpu_tensor_is_contiguous(const hpu_tensor_t *t) {
  int64_t expected = 1;
  if (hpu_tensor_numel(t) == 0) return 1;
  for (int d = t->ndim - 1; d >= 0; d--) {
    if (t->sizes[d] == 1) continue;
    if (t->strides[d] != expected) return 0;
    expected *= t->sizes[d];
  }
  return 1;
}
/* Pointer to element [0,...,0]. */
static inline void *hpu_tensor_data(const hpu_tensor_t *t) {
  return (char *)t->storage + t->offset;
}
/* One byte past the last element, counted from the storage's start
 * (strides are >= 0; an empty view ends where it starts). */
static inline uint64_t hpu_tensor_end_offset(const hpu_tensor_t *t) {
  if (hpu_tensor_numel(t) == 0) return (uint64_t)t->offset;
  uint64_t last = 0;
  for (int d = 0; d < t->ndim; d++) last += (uint64_t)(t->sizes[d] - 1) * (uint64_t)t->strides[d];
  return (uint64_t)t->offset + (last + 1) * hpu_dtype_size(t->dtype);
}
/* The bytes a view spans, [lo, hi) (a strided view spans more than numel
 * elements; an empty one is empty). */
static inline void hpu_tensor_byte_range(const hpu_tensor_t *t, uintptr_t *lo, uintptr_t *hi) {
  *lo = (uintptr_t)hpu_tensor_data(t);
  *hi = (uintptr_t)t->storage + (uintptr_t)hpu_tensor_end_offset(t);
}
/* Fills a contiguous descriptor. Fails on ndim > HPU_MAX_DIMS or a negative size. */
int hpu_tensor_init_contiguous(hpu_tensor_t *t, void *storage, hpu_dtype_t dtype,
                               int ndim, const int64_t *sizes);

#ifdef __cplusplus
}
#endif
#endif
