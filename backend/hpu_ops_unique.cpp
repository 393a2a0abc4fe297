// Ops whose output size depends on the data, built from native hpu ops
// (sort, cumsum, masked_select, put_, scatter_): unique, unique_consecutive,
// bincount and nonzero_static. unique, unique_consecutive and bincount read
// one size on the host, as on CUDA (a flush in lazy mode); nonzero_static,
// whose size is given, reads nothing and records like any other op.
#include <ATen/WrapDimUtils.h>
#include <ATen/native/Resize.h>
#include <torch/library.h>

#include <tuple>
#include <vector>

#include "hpu_common.h"
#include "hpu_ops.h"

namespace habana_torch {
namespace {

// A run of equal elements starts at 0 and wherever an element differs from
// the one before it (NaN never equals NaN, so every NaN is its own run, as
// the CPU's unique without equal_nan).
at::Tensor run_starts(const at::Tensor& flat) {
  const int64_t n = flat.numel();
  at::Tensor starts = at::empty({n}, flat.options().dtype(at::kBool));
  starts.narrow(0, 0, 1).fill_(true);
  if (n > 1) {
    at::Tensor later = starts.narrow(0, 1, n - 1);
    at::ne_out(later, flat.narrow(0, 1, n - 1), flat.narrow(0, 0, n - 1));
  }
  return starts;
}

// Inverse (run number of each element, int64) and counts of the runs of a
// sequence whose run starts are `starts`; `runs` is their number.
at::Tensor run_ids(const at::Tensor& starts) { return starts.cumsum(0, at::kLong).sub_(1); }

at::Tensor run_counts(const at::Tensor& ids, int64_t runs) {
  at::Tensor counts = at::zeros({runs}, ids.options());
  counts.put_(ids, at::ones_like(ids), /*accumulate=*/true);
  return counts;
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> unique2(const at::Tensor& self, bool sorted, bool return_inverse,
                                                       bool return_counts) {
  check_hpu_dtype(self.scalar_type(), "unique");
  // The CPU sorts whether or not `sorted` is asked for; so do we.
  const int64_t n = self.numel();
  at::Tensor none = at::empty({0}, self.options().dtype(at::kLong));
  if (n == 0) {
    return {at::empty({0}, self.options()), return_inverse ? at::zeros(self.sizes(), none.options()) : none,
            return_counts ? none.clone() : none};
  }
  auto [values, order] = at::sort(self.reshape({-1}), /*stable=*/true, /*dim=*/0, /*descending=*/false);
  at::Tensor starts = run_starts(values);
  at::Tensor ids = run_ids(starts);
  const int64_t runs = ids[n - 1].item<int64_t>() + 1;
  at::Tensor out = at::masked_select(values, starts);
  at::Tensor inverse = none, counts = none;
  if (return_inverse) inverse = at::empty({n}, ids.options()).scatter_(0, order, ids).view(self.sizes());
  if (return_counts) counts = run_counts(ids, runs);
  return {out, inverse, counts};
}

// unique_consecutive along `dim`: slices compared whole (equal when every
// element is); the CPU's unique_dim_consecutive.
std::tuple<at::Tensor, at::Tensor, at::Tensor> unique_consecutive_dim(const at::Tensor& self, int64_t dim,
                                                                      bool return_inverse, bool return_counts) {
  dim = at::maybe_wrap_dim(dim, self.dim());
  const int64_t n = self.size(dim);
  at::Tensor none = at::empty({0}, self.options().dtype(at::kLong));
  if (self.numel() == 0) {
    for (int64_t d = 0; d < self.dim(); d++)
      TORCH_CHECK(d == dim || self.size(d) > 0,
                  "There are 0 sized dimensions, and they aren't selected, so unique cannot be applied");
    return {self.clone(at::MemoryFormat::Contiguous), return_inverse ? none.clone() : none,
            return_counts ? none.clone() : none};
  }
  at::Tensor rows = self.movedim(dim, 0).reshape({n, -1});
  at::Tensor starts = at::empty({n}, self.options().dtype(at::kBool));
  starts.narrow(0, 0, 1).fill_(true);
  if (n > 1) starts.narrow(0, 1, n - 1).copy_(rows.narrow(0, 1, n - 1).ne(rows.narrow(0, 0, n - 1)).any(1));
  at::Tensor ids = run_ids(starts);
  const int64_t runs = ids[n - 1].item<int64_t>() + 1;
  at::Tensor first = at::masked_select(at::arange(n, ids.options()), starts);
  at::Tensor out = self.index_select(dim, first);
  return {out, return_inverse ? ids : none, return_counts ? run_counts(ids, runs) : none};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> unique_consecutive(const at::Tensor& self, bool return_inverse,
                                                                  bool return_counts, std::optional<int64_t> dim) {
  check_hpu_dtype(self.scalar_type(), "unique_consecutive");
  if (dim && self.dim() > 0) return unique_consecutive_dim(self, *dim, return_inverse, return_counts);
  const int64_t n = self.numel();
  at::Tensor none = at::empty({0}, self.options().dtype(at::kLong));
  if (n == 0) {
    return {at::empty({0}, self.options()), return_inverse ? at::zeros(self.sizes(), none.options()) : none,
            return_counts ? none.clone() : none};
  }
  at::Tensor flat = self.reshape({-1});
  at::Tensor starts = run_starts(flat);
  at::Tensor ids = run_ids(starts);
  at::Tensor out = at::masked_select(flat, starts);
  at::Tensor inverse = return_inverse ? ids.view(self.sizes()) : none;
  at::Tensor counts = return_counts ? run_counts(ids, out.numel()) : none;
  return {out, inverse, counts};
}

// bincount: the CPU's output dtype (int64 counts; float weights give float,
// any other weights double) and its order of addition (serial, input order:
// put_ with accumulate adds in index order).
at::Tensor bincount(const at::Tensor& self, const std::optional<at::Tensor>& weights_opt, int64_t minlength) {
  const at::Tensor weights = weights_opt.value_or(at::Tensor());
  check_same_device("bincount", {&self, &weights});
  TORCH_CHECK_NOT_IMPLEMENTED(at::isIntegralType(self.scalar_type(), /*includeBool=*/false),
                              "\"bincount_cpu\" not implemented for '", self.scalar_type(), "'");
  TORCH_CHECK(minlength >= 0, "minlength should be >= 0");
  if (self.dim() == 1 && self.numel() == 0) return at::zeros({minlength}, self.options().dtype(at::kLong));
  TORCH_CHECK(self.dim() == 1, "bincount only supports 1-d non-negative integral inputs.");
  auto mm = at::aminmax(self);
  at::Tensor lo_hi = at::stack({std::get<0>(mm), std::get<1>(mm)}).to(at::kCPU, at::kLong);
  TORCH_CHECK(lo_hi.data_ptr<int64_t>()[0] >= 0, "bincount only supports 1-d non-negative integral inputs.");
  const bool has_weights = weights.defined();
  TORCH_CHECK(!(has_weights && (weights.dim() != 1 || weights.size(0) != self.size(0))),
              "weights should be 1-d and have the same length as input");
  const int64_t bins = std::max<int64_t>(lo_hi.data_ptr<int64_t>()[1] + 1, minlength);
  at::Tensor index = self.to(at::kLong);
  if (!has_weights) return at::zeros({bins}, index.options()).put_(index, at::ones_like(index), true);
  at::ScalarType out_type = weights.scalar_type() == at::kFloat ? at::kFloat : at::kDouble;
  return at::zeros({bins}, weights.options().dtype(out_type)).put_(index, weights.to(out_type), true);
}

// nonzero_static: the first `size` nonzero coordinates in row-major order,
// rows past the count filled with fill_value; no host read.
at::Tensor& nonzero_static_out(const at::Tensor& self, int64_t size, int64_t fill_value, at::Tensor& out) {
  check_hpu_dtype(self.scalar_type(), "nonzero_static");
  check_same_device("nonzero_static", {&self, &out});
  TORCH_CHECK(size >= 0, "nonzero_static: 'size' must be an non-negative integer");
  TORCH_CHECK(out.scalar_type() == at::kLong, "nonzero_static: Expected out tensor to have scalar type Long but got ",
              out.scalar_type());
  const int64_t ndim = self.dim(), n = self.numel();
  at::native::resize_output(out, {size, ndim});
  if (size == 0 || ndim == 0) return out;
  out.fill_(fill_value);
  const int64_t k = std::min(size, n);
  if (k == 0) return out;
  at::Tensor is_zero;
  at::Tensor flat = nonzero_first(self, &is_zero).narrow(0, 0, k);
  at::Tensor count = at::scalar_tensor(n, is_zero.options()).sub(is_zero.sum());
  at::Tensor valid = at::arange(k, flat.options()).lt(count).unsqueeze(1);
  out.narrow(0, 0, k).copy_(at::where(valid, coordinates_of(flat, self.sizes()), fill_value));
  return out;
}

at::Tensor nonzero_static(const at::Tensor& self, int64_t size, int64_t fill_value) {
  at::Tensor out = at::empty({0}, self.options().dtype(at::kLong));
  return nonzero_static_out(self, size, fill_value, out);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, HPU, m) {
  m.impl("_unique2", TORCH_FN(unique2));
  m.impl("unique_consecutive", TORCH_FN(unique_consecutive));
  m.impl("bincount", TORCH_FN(bincount));
  m.impl("nonzero_static", TORCH_FN(nonzero_static));
  m.impl("nonzero_static.out", TORCH_FN(nonzero_static_out));
}

}  // namespace habana_torch
