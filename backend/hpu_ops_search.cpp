// searchsorted / bucketize and the histograms (histc, histogram,
// histogramdd) on the card: one node each (csrc/kernels/tail_search.c,
// tail_histogram.c). The forwarders check arguments with PyTorch's own
// messages (searchsorted's shared pre-check from ATen) and choose the bin
// edges as the CPU does: the range read on the host (aminmax, one sync, as
// the CPU reads it), the edges made by the CPU's linspace, so they are its
// edges bit for bit, then moved to the card.
#include <ATen/native/BucketizationUtils.h>
#include <ATen/native/Resize.h>
#include <torch/library.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <optional>
#include <string_view>
#include <vector>

#include "hpu_common.h"
#include "hpu_nn_node.h"
#include "hpu_ops.h"

namespace habana_torch {
namespace {

// ---- searchsorted / bucketize ---------------------------------------------------

at::Tensor& searchsorted_out(const at::Tensor& sorted_sequence, const at::Tensor& self, bool out_int32, bool right,
                             std::optional<std::string_view> side, const std::optional<at::Tensor>& sorter_opt,
                             at::Tensor& result) {
  c10::MaybeOwned<at::Tensor> sorter_owned = at::borrow_from_optional_tensor(sorter_opt);
  const at::Tensor& sorter = *sorter_owned;
  at::native::searchsorted_pre_check(sorted_sequence, self, result, out_int32, right, side, sorter);
  check_same_device("searchsorted", {&sorted_sequence, &self, &sorter, &result});
  at::native::resize_output(result, self.sizes());
  if (self.numel() == 0) return result;
  // The CPU's contiguous copies, in the common dtype of values and boundaries.
  at::Tensor input, boundaries, sorter_c;
  at::native::searchsorted_maybe_trim_input_tensors(input, boundaries, sorter_c, self, sorted_sequence, sorter);
  const at::Tensor& in = input.defined() ? input : self;
  const at::Tensor& bd = boundaries.defined() ? boundaries : sorted_sequence;
  const at::Tensor& st = sorter_c.defined() ? sorter_c : sorter;
  TORCH_CHECK_NOT_IMPLEMENTED(in.scalar_type() != at::kBool, "\"searchsorted\" not implemented for 'Bool'");
  check_hpu_dtype(in.scalar_type(), "searchsorted");
  at::Tensor out = result.is_contiguous() ? result : at::empty(result.sizes(), result.options());
  hpu_node_t n = make_node(HPU_OP_TAIL_SEARCHSORTED);
  add_in(n, bd);
  add_in(n, in);
  if (st.defined()) add_in(n, st);
  add_out(n, out);
  n.compute_dtype = n.inputs[0].dtype;
  n.params.nn.i[0] = right || (side && *side == "right");
  n.params.nn.i[1] = bd.dim() == 1;
  launch(dev_of(result), n);
  if (!out.is_same(result)) result.copy_(out);
  return result;
}

at::Tensor hpu_searchsorted(const at::Tensor& sorted_sequence, const at::Tensor& self, bool out_int32, bool right,
                        std::optional<std::string_view> side, const std::optional<at::Tensor>& sorter) {
  at::Tensor result = at::empty({0}, self.options().dtype(out_int32 ? at::kInt : at::kLong));
  return searchsorted_out(sorted_sequence, self, out_int32, right, side, sorter, result);
}

at::Tensor& searchsorted_scalar_out(const at::Tensor& sorted_sequence, const c10::Scalar& self, bool out_int32,
                                    bool right, std::optional<std::string_view> side,
                                    const std::optional<at::Tensor>& sorter, at::Tensor& result) {
  at::Tensor value = at::native::searchsorted_scalar_tensor(self, sorted_sequence.device());
  return searchsorted_out(sorted_sequence, value, out_int32, right, side, sorter, result);
}

at::Tensor searchsorted_scalar(const at::Tensor& sorted_sequence, const c10::Scalar& self, bool out_int32, bool right,
                               std::optional<std::string_view> side, const std::optional<at::Tensor>& sorter) {
  at::Tensor value = at::native::searchsorted_scalar_tensor(self, sorted_sequence.device());
  return hpu_searchsorted(sorted_sequence, value, out_int32, right, side, sorter);
}

at::Tensor& bucketize_out(const at::Tensor& self, const at::Tensor& boundaries, bool out_int32, bool right,
                          at::Tensor& result) {
  TORCH_CHECK(boundaries.dim() == 1, "boundaries tensor must be 1 dimension, but got dim(", boundaries.dim(), ")");
  return searchsorted_out(boundaries, self, out_int32, right, std::nullopt, std::nullopt, result);
}

at::Tensor hpu_bucketize(const at::Tensor& self, const at::Tensor& boundaries, bool out_int32, bool right) {
  at::Tensor result = at::empty({0}, self.options().dtype(out_int32 ? at::kInt : at::kLong));
  return bucketize_out(self, boundaries, out_int32, right, result);
}

at::Tensor bucketize_scalar(const c10::Scalar& self, const at::Tensor& boundaries, bool out_int32, bool right) {
  return hpu_bucketize(at::native::searchsorted_scalar_tensor(self, boundaries.device()), boundaries, out_int32, right);
}

// ---- histograms -----------------------------------------------------------------

void check_histogram_inputs(const at::Tensor& input, at::TensorList bins, const std::optional<at::Tensor>& weight) {
  TORCH_CHECK(input.dim() >= 2, "torch.histogramdd: input tensor should have at least 2 dimensions, but got ",
              input.dim());
  const int64_t d = input.size(-1);
  TORCH_CHECK(static_cast<int64_t>(bins.size()) == d, "torch.histogramdd: expected ", d,
              " sequences of bin edges for a ", d, "-dimensional histogram but got ", bins.size());
  for (int64_t k = 0; k < d; k++) {
    TORCH_CHECK(input.dtype() == bins[k].dtype(), "torch.histogramdd: input tensor and bins tensors should",
                " have the same dtype, but got input with dtype ", input.dtype(), " and bins for dimension ", k,
                " with dtype ", bins[k].dtype());
    TORCH_CHECK(bins[k].dim() == 1, "torch.histogramdd: bins tensor should have one dimension,",
                " but got ", bins[k].dim(), " dimensions in the bins tensor for dimension ", k);
    TORCH_CHECK(bins[k].numel() > 0, "torch.histogramdd: bins tensor should have at least 1 element,",
                " but got ", bins[k].numel(), " elements in the bins tensor for dimension ", k);
  }
  if (weight) {
    TORCH_CHECK(input.dtype() == weight->dtype(), "torch.histogramdd: if weight tensor is provided,"
                " input tensor and weight tensor should have the same dtype, but got input(", input.dtype(), ")",
                ", and weight(", weight->dtype(), ")");
    // a 0-d weight counts as [1]
    at::IntArrayRef want = input.sizes().slice(0, input.dim() - 1);
    const int64_t one = 1;
    at::IntArrayRef got = weight->dim() ? weight->sizes() : at::IntArrayRef(one);
    TORCH_CHECK(want.equals(got), "torch.histogramdd: if weight tensor is provided it should have the same shape as the"
                " input tensor excluding its innermost dimension, but got input with shape ", input.sizes(),
                " and weight with shape ", weight->sizes());
  }
}

void check_histogram_devices(const at::Tensor& self, at::TensorList bins, const std::optional<at::Tensor>& weight) {
  std::vector<const at::Tensor*> all{&self};
  for (const at::Tensor& b : bins) all.push_back(&b);
  if (weight) all.push_back(&*weight);
  check_same_device("histogram", all);
}

void check_bin_counts(const at::Tensor& input, at::IntArrayRef bin_ct) {
  TORCH_CHECK(static_cast<int64_t>(bin_ct.size()) == input.size(-1), "torch.histogramdd: expected ", input.size(-1),
              " bin counts for a ", input.size(-1), "-dimensional histogram but got ", bin_ct.size());
  for (size_t k = 0; k < bin_ct.size(); k++)
    TORCH_CHECK(bin_ct[k] > 0, "torch.histogram(): bins must be > 0, but got ", bin_ct[k], " for dimension ", k);
}

void check_floating(const at::Tensor& self, const char* name) {
  TORCH_CHECK_NOT_IMPLEMENTED(at::isFloatingType(self.scalar_type()), "\"", name, "\" not implemented for '",
                              self.scalar_type(), "'");
  check_hpu_dtype(self.scalar_type(), name);
}

// The CPU's edges: linspace(first, last, bins + 1) in the input's dtype.
at::Tensor linear_edges(double first, double last, int64_t bins, const at::Tensor& like) {
  return at::linspace(first, last, bins + 1, at::TensorOptions().dtype(like.scalar_type())).to(like.device());
}

// Per dim, the outer edges of a histogram with bin counts: `range`, or the
// points' min and max (the CPU's select_outer_bin_edges).
std::pair<std::vector<double>, std::vector<double>> outer_edges(const at::Tensor& points,
                                                                std::optional<at::ArrayRef<double>> range) {
  const int64_t d = points.size(-1);
  std::vector<double> lo(d, 0.0), hi(d, 1.0);
  if (range) {
    TORCH_CHECK(static_cast<int64_t>(range->size()) == 2 * d, "torch.histogramdd: for a ", d,
                "-dimensional histogram range should have ", 2 * d, " elements, but got ", range->size());
    for (int64_t k = 0; k < d; k++) {
      lo[k] = (*range)[2 * k];
      hi[k] = (*range)[2 * k + 1];
    }
  } else if (points.numel() > 0) {
    at::ScalarType t = points.scalar_type();
    TORCH_CHECK_NOT_IMPLEMENTED(t == at::kFloat || t == at::kDouble, "\"histogramdd\" not implemented for '", t,
                                "'");
    auto mm = at::aminmax(points, 0);
    at::Tensor mins = std::get<0>(mm).to(at::kCPU, at::kDouble), maxs = std::get<1>(mm).to(at::kCPU, at::kDouble);
    for (int64_t k = 0; k < d; k++) {
      lo[k] = mins.data_ptr<double>()[k];
      hi[k] = maxs.data_ptr<double>()[k];
    }
  }
  for (int64_t k = 0; k < d; k++) {
    TORCH_CHECK(std::isfinite(lo[k]) && std::isfinite(hi[k]), "torch.histogramdd: dimension ", k, "'s range [",
                lo[k], ", ", hi[k], "] is not finite");
    TORCH_CHECK(lo[k] <= hi[k], "torch.histogramdd: min should not exceed max, but got", " min ", lo[k], " max ",
                hi[k], " for dimension ", k);
    if (lo[k] == hi[k]) {
      lo[k] -= 0.5;
      hi[k] += 0.5;
    }
  }
  return {lo, hi};
}

// The histogram of points [M, D] over `edges` (one sequence per dim) into a
// contiguous result, then density as the CPU divides it.
at::Tensor run_histogram(const at::Tensor& points, at::TensorList edges, const std::optional<at::Tensor>& weight,
                         bool density, hpu_tail_hist_t algorithm) {
  const int64_t d = points.size(1);
  TORCH_CHECK(d <= HPU_MAX_DIMS, "torch.histogramdd: hpu supports at most ", HPU_MAX_DIMS,
              " dimensions, got a ", d, "-dimensional histogram");
  std::vector<int64_t> bins(d), counts(d);
  std::vector<at::Tensor> parts(d);
  for (int64_t k = 0; k < d; k++) {
    counts[k] = edges[k].numel();
    bins[k] = counts[k] - 1;
    parts[k] = edges[k].reshape({-1});
  }
  at::Tensor hist = at::empty(bins, points.options());
  if (hist.numel() == 0) return hist;
  if (std::any_of(counts.begin(), counts.end(), [](int64_t c) { return c < 2; })) return hist.zero_();
  at::Tensor packed = d ? at::cat(parts).contiguous() : at::empty({0}, points.options());
  at::Tensor count_t = at::tensor(counts, at::kLong).to(points.device());
  at::Tensor pts = points.contiguous();
  hpu_node_t n = make_node(HPU_OP_TAIL_HISTOGRAM);
  add_in(n, pts);
  add_in(n, packed);
  add_in(n, count_t);
  at::Tensor w;
  if (weight) {
    w = weight->reshape({points.size(0)}).contiguous();
    add_in(n, w);
  }
  add_out(n, hist);
  n.compute_dtype = n.inputs[0].dtype;
  n.params.nn.i[0] = algorithm;
  launch(dev_of(points), n);
  if (density) {
    hist.div_(hist.sum().item());
    for (int64_t k = 0; k < d; k++) {
      std::vector<int64_t> shape(d, 1);
      shape[k] = bins[k];
      hist.div_(edges[k].diff().reshape(shape));
    }
  }
  return hist;
}

std::vector<at::Tensor> bin_edges_for(const at::Tensor& self, at::IntArrayRef bin_ct,
                                      std::optional<at::ArrayRef<double>> range) {
  TORCH_CHECK(self.dim() >= 2, "torch.histogramdd: input tensor should have at least 2 dimensions");
  check_bin_counts(self, bin_ct);
  at::Tensor points = self.reshape({-1, self.size(-1)});
  auto outer = outer_edges(points, range);
  std::vector<at::Tensor> edges;
  for (size_t k = 0; k < bin_ct.size(); k++) edges.push_back(linear_edges(outer.first[k], outer.second[k], bin_ct[k], self));
  return edges;
}

std::vector<at::Tensor> histogramdd_bin_edges(const at::Tensor& self, at::IntArrayRef bins,
                                              std::optional<at::ArrayRef<double>> range,
                                              const std::optional<at::Tensor>& weight, bool density) {
  check_floating(self, "histogramdd");
  return bin_edges_for(self, bins, range);
}

at::Tensor histogramdd_from_bin_cts(const at::Tensor& self, at::IntArrayRef bins,
                                    std::optional<at::ArrayRef<double>> range, const std::optional<at::Tensor>& weight,
                                    bool density) {
  check_floating(self, "histogramdd");
  check_histogram_devices(self, {}, weight);
  std::vector<at::Tensor> edges = bin_edges_for(self, bins, range);
  check_histogram_inputs(self, edges, weight);
  at::Tensor points = self.reshape({-1, self.size(-1)});
  return run_histogram(points, edges, weight, density, HPU_TAIL_HIST_LINEAR_LOCAL);
}

at::Tensor histogramdd_from_bin_tensors(const at::Tensor& self, at::TensorList bins,
                                        const std::optional<at::Tensor>& weight, bool density) {
  check_histogram_devices(self, bins, weight);
  check_histogram_inputs(self, bins, weight);
  check_floating(self, "histogramdd");
  at::Tensor points = self.reshape({-1, self.size(-1)});
  std::vector<at::Tensor> edges;
  for (const at::Tensor& b : bins) edges.push_back(b.contiguous());
  return run_histogram(points, edges, weight, density, HPU_TAIL_HIST_BINARY_SEARCH);
}

std::optional<at::Tensor> flat_weight(const std::optional<at::Tensor>& weight) {
  if (!weight) return std::nullopt;
  return weight->reshape({weight->numel()});
}

// The out tensors of histc / histogram have the input's dtype.
void check_histogram_outs(const at::Tensor& self, const at::Tensor& hist, const at::Tensor* bin_edges) {
  TORCH_CHECK(self.dtype() == hist.dtype(), "torch.histogram: input tensor and hist tensor should",
              " have the same dtype, but got input ", self.dtype(), " and hist ", hist.dtype());
  TORCH_CHECK(!bin_edges || self.dtype() == bin_edges->dtype(), "torch.histogram: input tensor and bin_edges tensor "
              "should have the same dtype, but got input ", self.dtype(), " and bin_edges ", bin_edges->dtype(),
              " for dimension 0");
}

// torch.histogram's results: the histogram of the 1-d points over edges,
// and the edges, into the out tensors.
std::tuple<at::Tensor&, at::Tensor&> histogram_into(const at::Tensor& points, const at::Tensor& edges,
                                                    const std::optional<at::Tensor>& w, bool density,
                                                    hpu_tail_hist_t algorithm, at::Tensor& hist, at::Tensor& bin_edges) {
  into_out(run_histogram(points, {edges}, w, density, algorithm), hist);
  at::native::resize_output(bin_edges, {edges.numel()});
  bin_edges.copy_(edges);
  return {hist, bin_edges};
}

std::tuple<at::Tensor&, at::Tensor&> histogram_bins_tensor_out(const at::Tensor& self, const at::Tensor& bins,
                                                               const std::optional<at::Tensor>& weight, bool density,
                                                               at::Tensor& hist, at::Tensor& bin_edges) {
  at::Tensor points = self.reshape({self.numel(), 1});
  std::optional<at::Tensor> w = flat_weight(weight);
  check_histogram_devices(self, {bins}, weight);
  check_histogram_inputs(points, {bins}, w);
  check_floating(self, "histogram");
  check_histogram_outs(self, hist, &bin_edges);
  return histogram_into(points, bins.contiguous(), w, density, HPU_TAIL_HIST_BINARY_SEARCH, hist, bin_edges);
}

std::tuple<at::Tensor, at::Tensor> histogram_bins_tensor(const at::Tensor& self, const at::Tensor& bins,
                                                         const std::optional<at::Tensor>& weight, bool density) {
  at::Tensor hist = at::empty({0}, self.options()), edges = at::empty({0}, bins.options());
  histogram_bins_tensor_out(self, bins, weight, density, hist, edges);
  return {hist, edges};
}

std::tuple<at::Tensor&, at::Tensor&> histogram_bin_ct_out(const at::Tensor& self, int64_t bin_ct,
                                                          std::optional<at::ArrayRef<double>> range,
                                                          const std::optional<at::Tensor>& weight, bool density,
                                                          at::Tensor& hist, at::Tensor& bin_edges) {
  at::Tensor points = self.reshape({self.numel(), 1});
  std::optional<at::Tensor> w = flat_weight(weight);
  check_histogram_devices(self, {}, weight);
  check_floating(self, "histogram");
  check_histogram_outs(self, hist, &bin_edges);
  check_bin_counts(points, {bin_ct});
  auto outer = outer_edges(points, range);
  at::Tensor edges = linear_edges(outer.first[0], outer.second[0], bin_ct, self);
  check_histogram_inputs(points, {edges}, w);
  return histogram_into(points, edges, w, density, HPU_TAIL_HIST_LINEAR_LOCAL, hist, bin_edges);
}

std::tuple<at::Tensor, at::Tensor> histogram_bin_ct(const at::Tensor& self, int64_t bin_ct,
                                                    std::optional<at::ArrayRef<double>> range,
                                                    const std::optional<at::Tensor>& weight, bool density) {
  at::Tensor hist = at::empty({0}, self.options()), edges = at::empty({0}, self.options());
  histogram_bin_ct_out(self, bin_ct, range, weight, density, hist, edges);
  return {hist, edges};
}

// histc: bins over [min, max], or over the data's range when min == max
// (widened by 1 each way when that is empty, as the CPU's).
at::Tensor& histc_out(const at::Tensor& self, int64_t bins, const c10::Scalar& min, const c10::Scalar& max,
                      at::Tensor& out) {
  check_same_device("histc", {&self, &out});
  check_histogram_outs(self, out, nullptr);
  TORCH_CHECK(bins > 0, "torch.histogram(): bins must be > 0, but got ", bins, " for dimension 0");
  check_floating(self, "histogram_cpu");
  double lo = min.to<double>(), hi = max.to<double>();
  if (lo == hi && self.numel() > 0) {
    auto mm = at::aminmax(self);
    at::Tensor both = at::stack({std::get<0>(mm), std::get<1>(mm)}).to(at::kCPU, at::kDouble);
    lo = both.data_ptr<double>()[0];
    hi = both.data_ptr<double>()[1];
  }
  if (lo == hi) {
    lo -= 1;
    hi += 1;
  }
  TORCH_CHECK(!(std::isinf(lo) || std::isinf(hi) || std::isnan(lo) || std::isnan(hi)), "torch.histc: range of [", lo,
              ", ", hi, "] is not finite");
  TORCH_CHECK(lo < hi, "torch.histc: max must be larger than min");
  at::Tensor points = self.reshape({self.numel(), 1});
  return into_out(run_histogram(points, {linear_edges(lo, hi, bins, self)}, std::nullopt, false, HPU_TAIL_HIST_LINEAR),
                  out);
}

at::Tensor histc(const at::Tensor& self, int64_t bins, const c10::Scalar& min, const c10::Scalar& max) {
  at::Tensor out = at::empty({0}, self.options());
  return histc_out(self, bins, min, max, out);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, HPU, m) {
  m.impl("searchsorted.Tensor", TORCH_FN(hpu_searchsorted));
  m.impl("searchsorted.Tensor_out", TORCH_FN(searchsorted_out));
  m.impl("searchsorted.Scalar", TORCH_FN(searchsorted_scalar));
  m.impl("searchsorted.Scalar_out", TORCH_FN(searchsorted_scalar_out));
  m.impl("bucketize.Tensor", TORCH_FN(hpu_bucketize));
  m.impl("bucketize.Tensor_out", TORCH_FN(bucketize_out));
  m.impl("bucketize.Scalar", TORCH_FN(bucketize_scalar));
}

TORCH_LIBRARY_IMPL(aten, HPU, m) {
  m.impl("histc", TORCH_FN(histc));
  m.impl("histc.out", TORCH_FN(histc_out));
  m.impl("histogram.bins_tensor", TORCH_FN(histogram_bins_tensor));
  m.impl("histogram.bins_tensor_out", TORCH_FN(histogram_bins_tensor_out));
  m.impl("histogram.bin_ct", TORCH_FN(histogram_bin_ct));
  m.impl("histogram.bin_ct_out", TORCH_FN(histogram_bin_ct_out));
  m.impl("_histogramdd_bin_edges", TORCH_FN(histogramdd_bin_edges));
  m.impl("_histogramdd_from_bin_cts", TORCH_FN(histogramdd_from_bin_cts));
  m.impl("_histogramdd_from_bin_tensors", TORCH_FN(histogramdd_from_bin_tensors));
}

}  // namespace habana_torch
