/* Tensor descriptor helpers. */
#include "hpu/tensor.h"

#include <string.h>

#include "hpu/status.h"

int hpu_tensor_init_contiguous(hpu_tensor_t *t, void *storage, hpu_dtype_t dtype, int ndim,
                               const int64_t *sizes) {
  if (ndim < 0 || ndim > HPU_MAX_DIMS)
    return hpu_error(HPU_ERROR_INVALID_ARGUMENT, "tensor: ndim %d is outside [0, %d]", ndim,
                     HPU_MAX_DIMS);
  if (!hpu_dtype_is_valid(dtype))
    return hpu_error(HPU_ERROR_INVALID_ARGUMENT, "tensor: invalid dtype %d", (int)dtype);
  for (int d = 0; d < ndim; d++)
    if (sizes[d] < 0)
      return hpu_error(HPU_ERROR_INVALID_ARGUMENT, "tensor: negative size %lld in dim %d",
                       (long long)sizes[d], d);
  memset(t, 0, sizeof *t);
  t->storage = storage;
  t->dtype = dtype;
  t->ndim = ndim;
  int64_t stride = 1;
  for (int d = ndim - 1; d >= 0; d--) {
    t->sizes[d] = sizes[d];
    t->strides[d] = stride;
    stride *= sizes[d] > 1 ? sizes[d] : 1;
  }
  return HPU_SUCCESS;
}
