/* Helpers shared by the tail kernels (tail_*.c): walking a shape in
 * row-major order and the kernels' entry points. */
#ifndef HPU_KERNELS_TAIL_H
#define HPU_KERNELS_TAIL_H

#include <stdint.h>

#include "hpu/op.h"
#include "hpu/tensor.h"

/* A tensor's shape with a 0-d tensor seen as 1-d of size 1, so dim 0 exists. */
typedef struct {
  int nd;
  int64_t sz[HPU_MAX_DIMS];
} hpu_tail_shape_t;

static inline hpu_tail_shape_t hpu_tail_shape(const hpu_tensor_t *t) {
  hpu_tail_shape_t s;
  s.nd = t->ndim ? t->ndim : 1;
  for (int d = 0; d < s.nd; d++) s.sz[d] = t->ndim ? t->sizes[d] : 1;
  return s;
}

static inline int64_t hpu_tail_size(const hpu_tensor_t *t, int64_t dim) {
  return t->ndim ? t->sizes[dim] : 1;
}

/* Element offset (in elements) of coordinates c in t (0-d: 0). */
static inline int64_t hpu_tail_off(const hpu_tensor_t *t, const int64_t *c) {
  int64_t off = 0;
  for (int d = 0; d < t->ndim; d++) off += c[d] * t->strides[d];
  return off;
}

/* Next row-major coordinates within s; 0 after the last. */
static inline int hpu_tail_next(int64_t *c, const hpu_tail_shape_t *s) {
  for (int d = s->nd - 1; d >= 0; d--) {
    if (++c[d] < s->sz[d]) return 1;
    c[d] = 0;
  }
  return 0;
}

/* Row-major linear index of coordinates c within s. */
static inline int64_t hpu_tail_lin(const int64_t *c, const hpu_tail_shape_t *s) {
  int64_t lin = 0;
  for (int d = 0; d < s->nd; d++) lin = lin * s->sz[d] + c[d];
  return lin;
}

hpu_status_t hpu_tail_scatter_reduce(const hpu_node_t *node);
hpu_status_t hpu_tail_cummaxmin(const hpu_node_t *node);
hpu_status_t hpu_tail_take_put(const hpu_node_t *node);
hpu_status_t hpu_tail_index_fill(const hpu_node_t *node);
hpu_status_t hpu_tail_select(const hpu_node_t *node);
hpu_status_t hpu_tail_searchsorted(const hpu_node_t *node);
hpu_status_t hpu_tail_histogram(const hpu_node_t *node);

#endif
