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
hpu_status_t hpu_nn_group_norm(const hpu_node_t *node);
hpu_status_t hpu_nn_group_norm_backward(const hpu_node_t *node);
hpu_status_t hpu_nn_nll_loss(const hpu_node_t *node);
hpu_status_t hpu_nn_nll_loss_backward(const hpu_node_t *node);
hpu_status_t hpu_nn_index_select(const hpu_node_t *node);
hpu_status_t hpu_nn_gather(const hpu_node_t *node);
hpu_status_t hpu_nn_scatter(const hpu_node_t *node);
hpu_status_t hpu_nn_index_add(const hpu_node_t *node);
hpu_status_t hpu_nn_embedding_backward(const hpu_node_t *node);
hpu_status_t hpu_nn_index(const hpu_node_t *node);
void hpu_nn_sort(const hpu_node_t *node);
hpu_status_t hpu_nn_binary_cross_entropy(const hpu_node_t *node);
hpu_status_t hpu_nn_masked_scatter(const hpu_node_t *node);
hpu_status_t hpu_nn_attention(const hpu_node_t *node);
hpu_status_t hpu_nn_attention_backward(const hpu_node_t *node);
hpu_status_t hpu_validate_attention(const hpu_node_t *node);
/* conv.c: HPU_OP_CONV and HPU_OP_CONV_BACKWARD. */
hpu_status_t hpu_conv_validate(const hpu_node_t *node);
hpu_status_t hpu_conv_execute(const hpu_node_t *node);
/* batch_norm.c: HPU_OP_BATCH_NORM and HPU_OP_BATCH_NORM_BACKWARD. */
hpu_status_t hpu_batch_norm_validate(const hpu_node_t *node);
hpu_status_t hpu_batch_norm_execute(const hpu_node_t *node);
/* pool.c: HPU_OP_MAX_POOL2D, HPU_OP_AVG_POOL2D and their backwards. */
hpu_status_t hpu_pool_validate(const hpu_node_t *node);
hpu_status_t hpu_pool_execute(const hpu_node_t *node);

/* The dtypes of the vectorised row functions (hpu_nn_run_*, the row sums). */
static inline int hpu_nn_row_dtype(hpu_dtype_t dt) { return dt == HPU_FLOAT32 || dt == HPU_BFLOAT16; }

/* Over n contiguous float32 or bfloat16 elements at p (nn_minmax.c): the
 * max (mx) or min, *nan set when one is NaN; and the index of the first
 * max or min (of the first NaN when there is one). */
float hpu_nn_run_minmax(hpu_dtype_t dt, const void *p, int64_t n, int mx, int *nan);
/* hpu_nn_run_minmax's function for dt on this CPU, for a loop over rows
 * (picking it per row: 2% of an amax loop's samples, the kernel 33%). */
typedef float (*hpu_nn_minmax_fn)(const void *p, int64_t n, int mx, int *nan);
hpu_nn_minmax_fn hpu_nn_minmax_for(hpu_dtype_t dt);
int64_t hpu_nn_run_argminmax(hpu_dtype_t dt, const void *p, int64_t n, int mx);
/* The first of n contiguous float32 or bfloat16 elements at p that a top-k
 * row whose last item is thr takes in (comes before thr: greater for desc,
 * NaN first; smaller otherwise, NaN last); n when none does. */
int64_t hpu_nn_run_find_topk_entry(hpu_dtype_t dt, const void *p, int64_t n, float thr, int desc);

/* Byte address of element `lin` (row-major linear index) of t. */
static inline char *hpu_nn_elem(const hpu_tensor_t *t, int64_t lin) {
  int64_t es = (int64_t)hpu_dtype_size(t->dtype);
  /* Per-row statistics (layer norm's mean and rstd) come here once a row:
   * the divisions below cost more than a short row's arithmetic. */
  if (hpu_tensor_is_contiguous(t)) return (char *)hpu_tensor_data(t) + lin * es;
  int64_t off = 0;
  for (int d = t->ndim - 1; d >= 0; d--) {
    int64_t s = t->sizes[d];
    if (s == 0) return (char *)hpu_tensor_data(t);
    off += (lin % s) * t->strides[d];
    lin /= s;
  }
  return (char *)hpu_tensor_data(t) + off * es;
}

#endif
