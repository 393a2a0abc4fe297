/* The memory layout of a new elementwise output, chosen as PyTorch's
 * TensorIterator chooses it, so that an hpu result has the strides the CPU
 * result has: code that views, reshapes or writes into results in place
 * then aliases (or copies) the same way on both devices.
 *
 * The rule: when every operand has the output's shape and they share a
 * layout (all row-major, all channels-last, or all the same dense strides),
 * the output takes it. Otherwise the dims are ranked by the operands'
 * strides (the first operand that tells two dims apart decides; broadcast
 * dims tell nothing; equal strides put the smaller dim inner), and the
 * output is dense in that order. */
#include "hpu/tensor.h"

#include <stdlib.h>

static int is_channels_last_2d(const hpu_tensor_t *t) {
  static const int order[4] = {1, 3, 2, 0};
  if (t->ndim != 4) return 0;
  int64_t expected = 1;
  for (int k = 0; k < 4; k++) {
    int d = order[k];
    if (t->sizes[d] == 1) continue;
    if (t->strides[d] != expected) return 0;
    expected *= t->sizes[d];
  }
  return 1;
}

/* No two elements share memory and there are no gaps, in some dim order. */
static int is_non_overlapping_and_dense(const hpu_tensor_t *t) {
  int n = t->ndim, perm[HPU_MAX_DIMS];
  if (n == 1) return t->sizes[0] < 2 || t->strides[0] == 1;
  /* Dims of size >= 2 by increasing stride (size 0/1 dims last). */
  int m = 0;
  for (int d = 0; d < n; d++)
    if (t->sizes[d] >= 2) perm[m++] = d;
  for (int i = 1; i < m; i++)
    for (int j = i; j > 0 && t->strides[perm[j]] < t->strides[perm[j - 1]]; j--) {
      int tmp = perm[j];
      perm[j] = perm[j - 1];
      perm[j - 1] = tmp;
    }
  int64_t required = 1;
  for (int i = 0; i < m; i++) {
    if (t->strides[perm[i]] != required) return 0;
    required *= t->sizes[perm[i]];
  }
  return 1;
}

static int same_shape(const hpu_tensor_t *t, int ndim, const int64_t *sizes) {
  if (t->ndim != ndim) return 0;
  for (int d = 0; d < ndim; d++)
    if (t->sizes[d] != sizes[d]) return 0;
  return 1;
}

static void dense_strides(int ndim, const int64_t *sizes, const int *order_inner_first,
                          int64_t *strides) {
  int64_t s = 1;
  for (int k = 0; k < ndim; k++) {
    int d = order_inner_first[k];
    strides[d] = s;
    s *= sizes[d];
  }
}

/* Operand k's stride in output dim d (0 where it broadcasts). */
static int64_t stride_in(const hpu_tensor_t *t, int ndim, const int64_t *sizes, int d) {
  int off = ndim - t->ndim;
  if (d < off) return 0;
  int64_t size = t->sizes[d - off];
  if (size == 1 && sizes[d] != 1) return 0;
  return t->strides[d - off];
}

/* >0: dim a should be inner to dim b; <0: outer; 0: no operand tells. */
static int inner_first(int a, int b, int ndim, const int64_t *sizes, int n,
                       const hpu_tensor_t *const *ops) {
  for (int k = 0; k < n; k++) {
    int64_t sa = stride_in(ops[k], ndim, sizes, a), sb = stride_in(ops[k], ndim, sizes, b);
    if (sa == 0 || sb == 0) continue;
    if (sa < sb) return -1;
    if (sa > sb) return 1;
    if (sizes[a] > sizes[b]) return 1;
  }
  return 0;
}

int hpu_tensor_output_strides(int ndim, const int64_t *sizes, int ninputs,
                              const hpu_tensor_t *const *inputs, int64_t *strides) {
  int order[HPU_MAX_DIMS]; /* order[0] is the innermost dim */
  for (int k = 0; k < ndim; k++) order[k] = ndim - 1 - k;
  dense_strides(ndim, sizes, order, strides);
  if (ndim <= 1 || ninputs <= 0) return 1;

  int all_same_shape = 1;
  for (int k = 0; k < ninputs && all_same_shape; k++)
    all_same_shape = same_shape(inputs[k], ndim, sizes);
  if (all_same_shape) {
    int contiguous = 1, channels_last = 1, dense = 1;
    for (int k = 0; k < ninputs; k++) {
      contiguous &= hpu_tensor_is_contiguous(inputs[k]);
      channels_last &= is_channels_last_2d(inputs[k]);
      dense &= is_non_overlapping_and_dense(inputs[k]);
    }
    if (contiguous) return 1;
    if (channels_last) {
      static const int cl[4] = {1, 3, 2, 0};
      dense_strides(4, sizes, cl, strides);
      return 0;
    }
    if (dense) {
      int equal = 1;
      for (int k = 1; k < ninputs && equal; k++)
        for (int d = 0; d < ndim; d++)
          if (inputs[k]->strides[d] != inputs[0]->strides[d]) equal = 0;
      if (equal) {
        for (int d = 0; d < ndim; d++) strides[d] = inputs[0]->strides[d];
        return hpu_tensor_is_contiguous(inputs[0]);
      }
    }
  }

  /* Insertion sort that stops at the first operand with an opinion, as
   * TensorIterator's reorder_dimensions does (ties leave dims in place). */
  for (int i = 1; i < ndim; i++) {
    int cur = i;
    for (int j = i - 1; j >= 0; j--) {
      int c = inner_first(order[j], order[cur], ndim, sizes, ninputs, inputs);
      if (c > 0) {
        int tmp = order[j];
        order[j] = order[cur];
        order[cur] = tmp;
        cur = j;
      } else if (c < 0) {
        break;
      }
    }
  }
  int row_major = 1;
  for (int k = 0; k < ndim; k++)
    if (order[k] != ndim - 1 - k) row_major = 0;
  dense_strides(ndim, sizes, order, strides);
  return row_major;
}
