// Helpers shared by the files that register aten ops for hpu.
#pragma once

#include <ATen/ATen.h>

#include "hpu_common.h"

namespace habana_torch {

hpu_scalar_t to_hpu_scalar(const c10::Scalar& s);
// Raises TypeError naming the op when the core lacks the dtype.
void check_hpu_dtype(at::ScalarType type, const char* op);
// dst <- src for any mix of hpu and cpu tensors (src broadcast to dst,
// dtype converted); waits when the host is involved.
void copy_between(const at::Tensor& dst, const at::Tensor& src);
void fill_tensor(const at::Tensor& self, hpu_scalar_t value);

}  // namespace habana_torch
