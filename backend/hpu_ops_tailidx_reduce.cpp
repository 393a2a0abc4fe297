// Reductions of the tail family built from native hpu ops, with no node of
// their own: nansum (sum with NaN read as 0), count_nonzero and aminmax
// (amin and amax). Each raises the CPU op's errors for bad arguments.
// (equal is in hpu_ops_linalg_vec.cpp.)
#include <ATen/ATen.h>
#include <ATen/WrapDimUtils.h>
#include <ATen/native/Resize.h>
#include <torch/library.h>

#include "hpu_common.h"
#include "hpu_ops.h"

namespace habana_torch {
namespace {

at::Tensor& nansum_out(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim,
                       std::optional<at::ScalarType> dtype, at::Tensor& out) {
  check_hpu_dtype(self.scalar_type(), "nansum");
  check_same_device("nansum", {&self, &out});
  TORCH_CHECK(!c10::isComplexType(self.scalar_type()), "nansum does not support complex inputs");
  // integers hold no NaN: nansum is sum
  at::Tensor x = at::isFloatingType(self.scalar_type()) ? at::where(self.isnan(), at::zeros({}, self.options()), self)
                                                        : self;
  return at::sum_out(out, x, dim, keepdim, dtype);
}
at::Tensor nansum(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim,
                  std::optional<at::ScalarType> dtype) {
  check_hpu_dtype(self.scalar_type(), "nansum");
  at::Tensor x = at::isFloatingType(self.scalar_type()) ? at::where(self.isnan(), at::zeros({}, self.options()), self)
                                                        : self;
  return at::sum(x, dim, keepdim, dtype);
}

at::Tensor count_nonzero(const at::Tensor& self, at::IntArrayRef dims) {
  check_hpu_dtype(self.scalar_type(), "count_nonzero");
  return at::sum(self.ne(0), dims, false, at::kLong);
}

std::tuple<at::Tensor&, at::Tensor&> aminmax_out(const at::Tensor& self, std::optional<int64_t> dim, bool keepdim,
                                                 at::Tensor& min, at::Tensor& max) {
  check_hpu_dtype(self.scalar_type(), "aminmax");
  check_same_device("aminmax", {&self, &min, &max});
  TORCH_CHECK(min.scalar_type() == self.scalar_type() && max.scalar_type() == self.scalar_type(),
              "Expected out tensor to have dtype ", self.scalar_type(), ", but got ", min.scalar_type(), " instead");
  if (dim.has_value()) {
    int64_t d = at::maybe_wrap_dim(*dim, self.dim());
    TORCH_CHECK(self.dim() == 0 || self.size(d) != 0, "aminmax(): Expected reduction dim ", d,
                " to have non-zero size.");
    at::amin_out(min, self, {d}, keepdim);
    at::amax_out(max, self, {d}, keepdim);
  } else {
    TORCH_CHECK(self.numel() > 0, "aminmax(): cannot compute aminmax over an empty dimension as the operation has no "
                "identity.");
    std::vector<int64_t> all(self.dim());
    for (int64_t d = 0; d < self.dim(); d++) all[d] = d;
    at::amin_out(min, self, all, keepdim);
    at::amax_out(max, self, all, keepdim);
  }
  return {min, max};
}


}  // namespace

TORCH_LIBRARY_IMPL(aten, HPU, m) {
  m.impl("nansum", TORCH_FN(nansum));
  m.impl("nansum.out", TORCH_FN(nansum_out));
  m.impl("count_nonzero.dim_IntList", TORCH_FN(count_nonzero));
  m.impl("aminmax.out", TORCH_FN(aminmax_out));
}

}  // namespace habana_torch
