/* Helpers shared by the nn kernels (nn_*.c). */
#ifndef HPU_KERNELS_NN_UTIL_H
#define HPU_KERNELS_NN_UTIL_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "hpu/op.h"
#include "hpu/tensor.h"
#include "kernels/cvt.h"

/* Kernels (nn_*.c), called on validated nodes. Those that read index data
 * return HPU_ERROR_OUT_OF_RANGE (with a message) for bad indices. */
void hpu_nn_reduce(const hpu_node_t *node);
void hpu_nn_argreduce(const hpu_node_t *node);
void hpu_nn_cumsum(const hpu_node_t *node);
void hpu_nn_softmax(const hpu_node_t *node);
void hpu_nn_softmax_backward(const hpu_node_t *node);
void hpu_nn_layer_norm(const hpu_node_t *node);
void hpu_nn_layer_norm_backward(const hpu_node_t *node);
hpu_status_t hpu_nn_nll_loss(const hpu_node_t *node);
hpu_status_t hpu_nn_nll_loss_backward(const hpu_node_t *node);
hpu_status_t hpu_nn_index_select(const hpu_node_t *node);
hpu_status_t hpu_nn_gather(const hpu_node_t *node);
hpu_status_t hpu_nn_scatter(const hpu_node_t *node);
hpu_status_t hpu_nn_index_add(const hpu_node_t *node);
hpu_status_t hpu_nn_embedding_backward(const hpu_node_t *node);
hpu_status_t hpu_nn_index(const hpu_node_t *node);
void hpu_nn_sort(const hpu_node_t *node);

/* Byte address of element `lin` (row-major linear index) of t. */
static inline char *hpu_nn_elem(const hpu_tensor_t *t, int64_t lin) {
  int64_t off = 0;
  for (int d = t->ndim - 1; d >= 0; d--) {
    int64_t s = t->sizes[d];
    if (s == 0) return (char *)hpu_tensor_data(t);
    off += (lin % s) * t->strides[d];
    lin /= s;
  }
  return (char *)hpu_tensor_data(t) + off * (int64_t)hpu_dtype_size(t->dtype);
}

/* exp(x) for float, vectorisable (no calls, no branches): Cephes' expf
 * polynomial after range reduction by ln 2; ~1 ulp. exp(-inf) = 0, NaN
 * propagates, large x gives inf. */
static inline float hpu_nn_expf(float x) {
  float xc = x < -87.33654f ? -87.33654f : (x > 88.3762626647949f ? 88.3762626647949f : x);
  float n = (xc * 1.44269504088896341f + 12582912.0f) - 12582912.0f; /* round to nearest */
  float r = fmaf(n, -0.693359375f, xc);
  r = fmaf(n, 2.12194440e-4f, r);
  float p = 1.9875691500E-4f;
  p = fmaf(p, r, 1.3981999507E-3f);
  p = fmaf(p, r, 8.3334519073E-3f);
  p = fmaf(p, r, 4.1665795894E-2f);
  p = fmaf(p, r, 1.6666665459E-1f);
  p = fmaf(p, r, 5.0000001201E-1f);
  p = fmaf(p, r * r, r) + 1.0f;
  int32_t e = ((int32_t)n + 127) << 23;
  float scale;
  memcpy(&scale, &e, 4);
  float y = p * scale;
  y = x < -87.33654f ? 0.0f : y;
  y = x > 88.3762626647949f ? INFINITY : y;
  return x != x ? x : y;
}

#endif
