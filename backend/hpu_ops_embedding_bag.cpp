// nn.EmbeddingBag (aten::_embedding_bag and its backwards) from card ops:
// each index's bag from the offsets (the CPU's offset2bag: ones at the bag
// starts, cumsum), the rows gathered, then summed into their bags with
// index_add (mean divides by the bag's count; max reduces with amax and
// keeps the first index reaching it, as the CPU's strict ">" loop). Indices
// equal to padding_idx count for nothing. bf16 / fp16 sum in float and
// round once. The auxiliary outputs are always the full offset2bag, the
// bag sizes and (max) the indices of the maxima, which the backwards read;
// the CPU leaves some empty on its summing fast path.
#include <ATen/ATen.h>
#include <torch/library.h>

#include <limits>
#include <tuple>

#include "hpu_common.h"
#include "hpu_ops.h"

namespace habana_torch {
namespace {

enum { MODE_SUM = 0, MODE_MEAN = 1, MODE_MAX = 2 };

at::ScalarType acc_type(at::ScalarType t) { return t == at::kDouble ? at::kDouble : at::kFloat; }

// Bag of each index: ones at the bag starts, cumsum (the CPU's make_offset2bag).
at::Tensor offset2bag(const at::Tensor& offsets, int64_t bags, int64_t n) {
  at::Tensor marks = at::zeros({n + 1}, offsets.options().dtype(at::kLong));
  at::Tensor starts = offsets.narrow(0, 0, bags).to(at::kLong);
  marks.index_add_(0, starts, at::ones_like(starts));
  marks.narrow(0, 0, 1).sub_(1);
  return marks.cumsum(0).narrow(0, 0, n);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> embedding_bag(
    const at::Tensor& weight, const at::Tensor& indices, const at::Tensor& offsets, bool scale_grad_by_freq,
    int64_t mode, bool sparse, const std::optional<at::Tensor>& per_sample_weights, bool include_last_offset,
    int64_t padding_idx) {
  const at::Tensor psw = per_sample_weights.value_or(at::Tensor());
  check_same_device("embedding_bag", {&weight, &indices, &offsets, &psw});
  TORCH_CHECK(indices.dim() == 1 || indices.dim() == 2, "input has to be a 1D or 2D Tensor, but got Tensor of dimension ",
              indices.dim());
  TORCH_CHECK(indices.scalar_type() == at::kLong || indices.scalar_type() == at::kInt,
              "embedding_bag: Expected indices to be Long or Int, but got ", indices.scalar_type());
  TORCH_CHECK(offsets.dim() == 1, "offsets has to be a 1D Tensor, but got Tensor of dimension ", offsets.dim());
  TORCH_CHECK(offsets.scalar_type() == indices.scalar_type(), "embedding_bag: Expected tensor for argument #2 'offsets' "
              "to have the same dtype as the indices (", indices.scalar_type(), "), but got ", offsets.scalar_type());
  TORCH_CHECK(weight.dim() == 2, "weight has to be a 2D Tensor, but got Tensor of dimension ", weight.dim());
  TORCH_CHECK(at::isFloatingType(weight.scalar_type()), "embedding_bag: expected a floating weight, got ",
              weight.scalar_type());
  TORCH_CHECK(mode >= MODE_SUM && mode <= MODE_MAX, "embedding_bag: unknown mode ", mode);
  check_hpu_dtype(weight.scalar_type(), "embedding_bag");
  if (psw.defined()) {
    TORCH_CHECK(mode == MODE_SUM, "embedding_bag: per_sample_weights was not None. per_sample_weights is only "
                "supported for mode='sum' (got mode='", mode == MODE_MEAN ? "mean" : "max", "'). Please open a "
                "feature request on GitHub.");
    TORCH_CHECK(psw.scalar_type() == weight.scalar_type(), "embedding_bag: expected per_sample_weights to be ",
                weight.scalar_type(), ", got ", psw.scalar_type());
    TORCH_CHECK(psw.dim() == 1 && psw.numel() == indices.numel(), "embedding_bag: per_sample_weights must be 1-d "
                "with one weight per index: ", psw.sizes(), " against ", indices.numel(), " indices");
  }
  const at::Tensor idx = indices.reshape({-1}).to(at::kLong);
  const int64_t n = idx.numel(), d = weight.size(1);
  int64_t bags = offsets.numel() - (include_last_offset ? 1 : 0);
  TORCH_CHECK(bags >= 0, "include_last_offset: number of offsets should be at least 1");
  if (bags > 0) {
    at::Tensor ends = at::stack({offsets.narrow(0, 0, 1), offsets.narrow(0, offsets.numel() - 1, 1)}).to(at::kCPU,
                                                                                                        at::kLong);
    TORCH_CHECK(ends.data_ptr<int64_t>()[0] == 0, "offsets[0] has to be 0, i.e., the first sequence in the mini-batch "
                "has to start from position 0. However, got ", ends.data_ptr<int64_t>()[0]);
    TORCH_CHECK(ends.data_ptr<int64_t>()[1] <= n, "offsets[-1] can not be greater than input's length ", n,
                " but got offsets[-1] of ", ends.data_ptr<int64_t>()[1]);
  }
  at::ScalarType acc = acc_type(weight.scalar_type());
  at::Tensor bag = bags > 0 ? offset2bag(offsets, bags, n) : at::zeros({n}, idx.options());
  at::Tensor valid = padding_idx >= 0 ? idx.ne(padding_idx) : at::ones({n}, idx.options().dtype(at::kBool));
  at::Tensor bag_size = at::zeros({bags}, idx.options()).index_add_(0, bag, valid.to(at::kLong));
  at::Tensor rows = weight.index_select(0, idx).to(acc);  // an index out of range fails at the next sync
  at::Tensor out, max_indices;
  if (mode == MODE_MAX) {
    const double lowest = -std::numeric_limits<double>::infinity();
    at::Tensor v = at::where(valid.unsqueeze(1), rows, lowest);
    at::Tensor target = bag.unsqueeze(1).expand({n, d});
    out = at::full({bags, d}, lowest, rows.options()).scatter_reduce_(0, target, v, "amax", true);
    // the first index of each bag that reaches its maximum (the CPU's strict ">")
    at::Tensor pos = at::where(v.eq(out.index_select(0, bag)).logical_and(valid.unsqueeze(1)),
                               at::arange(n, idx.options()).unsqueeze(1), n);
    at::Tensor first = at::full({bags, d}, n, idx.options()).scatter_reduce_(0, target, pos, "amin", true);
    if (n == 0) {
      max_indices = at::zeros({bags, d}, idx.options());
    } else {
      at::Tensor at_first = idx.index_select(0, first.clamp_max(n - 1).reshape({-1})).reshape({bags, d});
      max_indices = at::where(first.lt(n), at_first, 0);
    }
    out = at::where(bag_size.unsqueeze(1).gt(0), out, 0.0);
  } else {
    if (psw.defined()) rows = rows.mul(psw.to(acc).unsqueeze(1));
    rows = at::where(valid.unsqueeze(1), rows, 0.0);
    out = at::zeros({bags, d}, rows.options()).index_add_(0, bag, rows);
    if (mode == MODE_MEAN) out.div_(bag_size.clamp_min(1).to(acc).unsqueeze(1));
    max_indices = bag_size.clone();
  }
  return {out.to(weight.scalar_type()), bag, bag_size, max_indices};
}

at::Tensor embedding_bag_dense_backward(const at::Tensor& grad, const at::Tensor& indices, const at::Tensor& bag,
                                        const at::Tensor& bag_size, const at::Tensor& max_indices, int64_t num_weights,
                                        bool scale_grad_by_freq, int64_t mode,
                                        const std::optional<at::Tensor>& per_sample_weights, int64_t padding_idx) {
  const at::Tensor psw = per_sample_weights.value_or(at::Tensor());
  check_same_device("embedding_bag_backward", {&grad, &indices, &bag, &bag_size, &max_indices, &psw});
  at::ScalarType acc = acc_type(grad.scalar_type());
  const at::Tensor idx = indices.reshape({-1}).to(at::kLong);
  const int64_t n = idx.numel(), d = grad.size(1);
  at::Tensor g = grad.to(acc);
  at::Tensor grad_weight = at::zeros({num_weights, d}, g.options());
  if (mode == MODE_MAX) {
    // each bag's gradient to the rows holding its maxima (none for empty bags)
    at::Tensor live = bag_size.unsqueeze(1).gt(0).expand_as(g);
    grad_weight.scatter_add_(0, max_indices, at::where(live, g, 0.0));
    return grad_weight.to(grad.scalar_type());
  }
  at::Tensor valid = padding_idx >= 0 ? idx.ne(padding_idx) : at::ones({n}, idx.options().dtype(at::kBool));
  at::Tensor rows = g.index_select(0, bag);
  if (mode == MODE_MEAN) rows = rows.div(bag_size.index_select(0, bag).clamp_min(1).to(acc).unsqueeze(1));
  if (psw.defined()) rows = rows.mul(psw.to(acc).unsqueeze(1));
  if (scale_grad_by_freq) {
    at::Tensor counts = at::zeros({num_weights}, idx.options()).index_add_(0, idx, at::ones_like(idx));
    rows = rows.div(counts.index_select(0, idx).to(acc).unsqueeze(1));
  }
  grad_weight.index_add_(0, idx, at::where(valid.unsqueeze(1), rows, 0.0));
  return grad_weight.to(grad.scalar_type());
}

at::Tensor embedding_bag_backward(const at::Tensor& grad, const at::Tensor& indices, const at::Tensor& offsets,
                                  const at::Tensor& bag, const at::Tensor& bag_size, const at::Tensor& max_indices,
                                  int64_t num_weights, bool scale_grad_by_freq, int64_t mode, bool sparse,
                                  const std::optional<at::Tensor>& per_sample_weights, int64_t padding_idx) {
  TORCH_CHECK(!sparse, "embedding_bag: sparse gradients are not supported on hpu; use sparse=False");
  return embedding_bag_dense_backward(grad, indices, bag, bag_size, max_indices, num_weights, scale_grad_by_freq, mode,
                                      per_sample_weights, padding_idx);
}

// d(out[bag]) / d(weight of index i) = the index's row: grad[bag[i]] . weight[idx[i]].
at::Tensor embedding_bag_per_sample_weights_backward(const at::Tensor& grad, const at::Tensor& weight,
                                                     const at::Tensor& indices, const at::Tensor& offsets,
                                                     const at::Tensor& bag, int64_t mode, int64_t padding_idx) {
  TORCH_CHECK(mode == MODE_SUM, "embedding_bag_backward: per_sample_weights only supported for mode='sum'");
  check_same_device("embedding_bag_backward", {&grad, &weight, &indices, &bag});
  at::ScalarType acc = acc_type(grad.scalar_type());
  const at::Tensor idx = indices.reshape({-1}).to(at::kLong);
  at::Tensor dots = grad.to(acc).index_select(0, bag).mul(weight.to(acc).index_select(0, idx)).sum(1);
  if (padding_idx >= 0) dots = at::where(idx.ne(padding_idx), dots, 0.0);
  return dots.to(grad.scalar_type());
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, HPU, m) {
  m.impl("_embedding_bag", TORCH_FN(embedding_bag));
  m.impl("_embedding_bag_forward_only", TORCH_FN(embedding_bag));
  m.impl("_embedding_bag_backward", TORCH_FN(embedding_bag_backward));
  m.impl("_embedding_bag_dense_backward", TORCH_FN(embedding_bag_dense_backward));
  m.impl("_embedding_bag_per_sample_weights_backward", TORCH_FN(embedding_bag_per_sample_weights_backward));
}

}  // namespace habana_torch
