// Ops built from other native hpu ops (no node of their own): isin and
// isneginf / isposinf, which transformers calls in generation (stopping
// criteria, pad-token checks) and in attention masking (_safe_softmax);
// nonzero and masked_select (boolean-mask indexing); index_copy, with which
// static KV caches (optimum-habana's, transformers' StaticCache) write each
// new token's keys and values. isin and isneginf stay
// on the card: no CPU round trip, no host read, so they record like any
// other op in lazy mode. nonzero and masked_select read one count on the
// host to size their output, as on CUDA (a flush in lazy mode). flip and
// roll (index_select and cat along each dim) also stay on the card.
#include <ATen/WrapDimUtils.h>
#include <ATen/native/Resize.h>
#include <torch/library.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "hpu_common.h"
#include "hpu_ops.h"

namespace habana_torch {

at::Tensor nonzero_first(const at::Tensor& self, at::Tensor* is_zero_out) {
  at::Tensor is_zero = self.reshape({-1}).eq(0).to(at::kLong);
  if (is_zero_out) *is_zero_out = is_zero;
  return std::get<1>(at::sort(is_zero, /*stable=*/true, /*dim=*/0, /*descending=*/false));
}

at::Tensor coordinates_of(const at::Tensor& flat, at::IntArrayRef sizes) {
  const int64_t ndim = static_cast<int64_t>(sizes.size());
  at::Tensor coords = at::empty({flat.numel(), ndim}, flat.options());
  int64_t stride = 1;
  for (int64_t d = ndim - 1; d >= 0; d--) {
    coords.select(1, d).copy_(at::div(flat, stride, "floor").remainder_(sizes[d]));
    stride *= sizes[d];
  }
  return coords;
}

namespace {

// isin by comparing every element with every test element: elements [..., 1]
// == test [m], any over the last dim. O(n * m) work and memory, best when m
// is small (the usual case: a few eos / pad token ids).
at::Tensor isin_compare(const at::Tensor& elements, const at::Tensor& test) {
  return elements.unsqueeze(-1).eq(test.reshape({-1})).any(-1);
}

// isin in O(N log N) for N = n + m, without unique (which reads a size on the host):
// sort test ++ elements, number the runs of equal values, count the test
// entries in each run (index_add), and an element is in the test set when
// its run has a test entry. NaN != NaN, so NaN never matches, as on the CPU.
at::Tensor isin_sorting(const at::Tensor& elements, const at::Tensor& test, at::ScalarType common) {
  // (isin's meta function has already refused bool and complex.)
  at::Tensor t = test.reshape({-1}).to(common);
  at::Tensor e = elements.reshape({-1}).to(common);
  const int64_t m = t.numel();
  at::Tensor all = at::cat({t, e});
  const int64_t n_all = all.numel();
  auto sorted = at::sort(all, /*stable=*/true, /*dim=*/0, /*descending=*/false);
  const at::Tensor& values = std::get<0>(sorted);
  const at::Tensor& order = std::get<1>(sorted);
  at::Tensor run_start = at::cat({at::ones({1}, values.options().dtype(at::kBool)),
                                  values.slice(0, 1).ne(values.slice(0, 0, n_all - 1))});
  at::Tensor run_id = run_start.cumsum(0, at::kLong).sub_(1);
  at::Tensor from_test = order.lt(m).to(at::kLong);
  at::Tensor per_run = at::zeros({n_all}, values.options().dtype(at::kLong)).index_add_(0, run_id, from_test);
  at::Tensor hit_sorted = per_run.index_select(0, run_id).gt(0);
  at::Tensor hit = at::empty({n_all}, values.options().dtype(at::kBool)).scatter_(0, order, hit_sorted);
  return hit.slice(0, m).view(elements.sizes());
}

at::Tensor& isin_tt_out(const at::Tensor& elements, const at::Tensor& test_elements, bool assume_unique,
                        bool invert, at::Tensor& out) {
  // As the CPU kernel: test elements may be a CPU scalar next to hpu elements.
  auto test_ = on_device(test_elements, elements);
  const at::Tensor& test = *test_;
  check_same_device("isin", {&elements, &test, &out});
  at::ScalarType common = at::result_type(elements, test_elements);
  check_hpu_dtype(common, "isin");
  TORCH_CHECK(out.scalar_type() == at::kBool, "isin: expected a bool output, got ", out.scalar_type());
  at::native::resize_output(out, elements.sizes());
  if (elements.numel() == 0) return out;
  at::Tensor result;
  if (test.numel() == 0) {
    result = at::zeros(elements.sizes(), elements.options().dtype(at::kBool));
  } else if (static_cast<double>(test.numel()) <
             10.0 * std::pow(static_cast<double>(elements.numel()), 0.145)) {
    // PyTorch's own threshold between its two CPU algorithms.
    result = isin_compare(elements, test);
  } else {
    result = isin_sorting(elements, test, common);
  }
  if (invert) result = result.logical_not();
  out.copy_(result);
  return out;
}

at::Tensor& isin_ts_out(const at::Tensor& elements, const c10::Scalar& test_element, bool assume_unique,
                        bool invert, at::Tensor& out) {
  check_same_device("isin", {&elements, &out});
  TORCH_CHECK(out.scalar_type() == at::kBool, "isin: expected a bool output, got ", out.scalar_type());
  at::native::resize_output(out, elements.sizes());
  if (elements.numel() == 0) return out;
  return invert ? at::ne_out(out, elements, test_element) : at::eq_out(out, elements, test_element);
}

at::Tensor& isin_st_out(const c10::Scalar& element, const at::Tensor& test_elements, bool assume_unique,
                        bool invert, at::Tensor& out) {
  at::Tensor e = at::scalar_tensor(element, test_elements.options().dtype(at::result_type(test_elements, element)));
  return isin_tt_out(e, test_elements, assume_unique, invert, out);
}

template <bool Negative>
at::Tensor& isinf_signed_out(const at::Tensor& self, at::Tensor& out) {
  const char* name = Negative ? "isneginf" : "isposinf";
  TORCH_CHECK(!self.is_complex(), name, " does not support complex inputs.");
  TORCH_CHECK(out.scalar_type() == at::kBool, name, " does not support non-boolean outputs.");
  check_same_device(name, {&self, &out});
  at::native::resize_output(out, self.sizes());
  if (out.numel() == 0) return out;
  if (at::isFloatingType(self.scalar_type())) {
    const double inf = std::numeric_limits<double>::infinity();
    at::eq_out(out, self, Negative ? -inf : inf);
  } else {
    out.fill_(false);  // integers and bool are never infinite
  }
  return out;
}

// Flat positions (int64, ascending) of the nonzero elements of `self`, and
// their count, read on the host.
at::Tensor nonzero_flat(const at::Tensor& self) {
  at::Tensor is_zero;
  at::Tensor order = nonzero_first(self, &is_zero);
  const int64_t n = is_zero.numel() - (is_zero.numel() ? is_zero.sum().item<int64_t>() : 0);
  if (n == 0) return at::empty({0}, self.options().dtype(at::kLong));
  return order.slice(0, 0, n);
}

at::Tensor& nonzero_out(const at::Tensor& self, at::Tensor& out) {
  check_hpu_dtype(self.scalar_type(), "nonzero");
  check_same_device("nonzero", {&self, &out});
  TORCH_CHECK(out.scalar_type() == at::kLong, "nonzero: Expected out tensor to have scalar type Long but got ",
              out.scalar_type());
  at::Tensor flat = nonzero_flat(self);
  const int64_t n = flat.numel(), ndim = self.dim();
  at::native::resize_output(out, {n, ndim});
  if (n == 0 || ndim == 0) return out;
  out.copy_(coordinates_of(flat, self.sizes()));
  return out;
}

at::Tensor nonzero(const at::Tensor& self) {
  at::Tensor out = at::empty({0}, self.options().dtype(at::kLong));
  nonzero_out(self, out);
  return out;
}

at::Tensor& masked_select_out(const at::Tensor& self, const at::Tensor& mask, at::Tensor& out) {
  check_same_device("masked_select", {&self, &mask, &out});
  TORCH_CHECK(mask.scalar_type() == at::kBool, "masked_select: expected BoolTensor for mask");
  TORCH_CHECK(out.scalar_type() == self.scalar_type(), "masked_select(): self and result must have the same scalar type");
  auto shape = at::infer_size(self.sizes(), mask.sizes());
  at::Tensor positions = nonzero_flat(mask.expand(shape));
  at::native::resize_output(out, {positions.numel()});
  if (positions.numel() == 0) return out;
  out.copy_(self.expand(shape).reshape({-1}).index_select(0, positions));
  return out;
}

// masked_scatter_: one card kernel over the mask expanded to self's shape
// (row-major, contiguous) and the flattened source; a source shorter than
// the mask's count raises at the next synchronisation (the CPU: at once).
at::Tensor& masked_scatter_(at::Tensor& self, const at::Tensor& mask, const at::Tensor& source) {
  check_same_device("masked_scatter_", {&self, &mask, &source});
  TORCH_CHECK(mask.scalar_type() == at::kBool, "masked_scatter_ only supports boolean masks, but got mask with dtype ",
              mask.scalar_type());
  TORCH_CHECK(self.scalar_type() == source.scalar_type(),
              "masked_scatter: expected self and source to have same dtypes but got", self.scalar_type(), " and ",
              source.scalar_type());
  check_hpu_dtype(self.scalar_type(), "masked_scatter_");
  at::Tensor m = mask.expand(self.sizes()).contiguous();
  if (self.numel() == 0) return self;
  bool direct = self.is_contiguous();
  at::Tensor out = direct ? self : self.contiguous();
  at::Tensor src = source.contiguous();
  hpu_node_t n;
  init_node(&n, HPU_OP_MASKED_SCATTER);
  n.num_outputs = 1;
  fill_desc(&n.outputs[0], out);
  n.num_inputs = 2;
  fill_desc(&n.inputs[0], m);
  fill_desc(&n.inputs[1], src);
  n.compute_dtype = to_hpu_dtype(self.scalar_type());
  launch(self.device().index(), n);
  if (!direct) self.copy_(out);
  return self;
}

at::Tensor masked_select(const at::Tensor& self, const at::Tensor& mask) {
  at::Tensor out = at::empty({0}, self.options());
  masked_select_out(self, mask, out);
  return out;
}

}  // namespace

// index_copy as a scatter of source with the index broadcast over the other
// dims: one node, no host read, so it records in lazy mode and in HPU graph
// captures. Out-of-range index values fail the scatter node, reported at the
// next synchronize as every index kernel does.
at::Tensor& index_copy_out(const at::Tensor& self, int64_t dim, const at::Tensor& index,
                           const at::Tensor& source, at::Tensor& out) {
  check_same_device("index_copy", {&self, &index, &source, &out});
  dim = at::maybe_wrap_dim(dim, std::max<int64_t>(self.dim(), 1));
  TORCH_CHECK_INDEX(index.dim() < 2, "index_copy_(): Index should have dimension 1 or 0 (got ",
                    index.dim(), ")");
  TORCH_CHECK_INDEX(index.scalar_type() == at::kLong,
                    "index_copy_(): Expected a long tensor for index, but got ", index.scalar_type());
  TORCH_CHECK(self.scalar_type() == source.scalar_type(),
              "index_copy_(): self and source expected to have the same dtype, but got (self) ",
              self.scalar_type(), " and (source) ", source.scalar_type());
  const int64_t n = index.numel();
  const int64_t nd = std::max<int64_t>(self.dim(), 1);
  at::Tensor src = source.dim() == 0 ? source.reshape({1}) : source;
  TORCH_CHECK(src.dim() == nd, "index_copy_(): When source and destination are not scalars, their "
              "dimensionality must match. Source dimensionality (", source.dim(),
              "), destination dimensionality (", self.dim(), ")");
  TORCH_CHECK_INDEX(src.size(dim) == n, "index_copy_(): Number of indices (", n,
                    ") should be equal to source.size(dim) (", src.size(dim), ")");
  for (int64_t d = 0; d < nd; d++)
    if (d != dim)
      TORCH_CHECK(src.size(d) == (self.dim() ? self.size(d) : 1),
                  "index_copy_(): Source/destination tensor must have same slice shapes. "
                  "Destination slice shape: ", self.sizes(), " at dimension ", d,
                  " and source slice shape: ", source.sizes());
  at::native::resize_output(out, self.sizes());
  if (!out.is_same(self)) out.copy_(self);
  if (n == 0) return out;
  std::vector<int64_t> shape(nd, 1);
  shape[dim] = n;
  at::Tensor target = self.dim() == 0 ? out.reshape({1}) : out;
  at::Tensor idx = index.reshape(shape).expand(src.sizes());
  target.scatter_(dim, idx, src);
  return out;
}

// flip: each listed dim of more than one element reversed by index_select
// with n-1 .. 0; a fresh tensor even when nothing moves, as the CPU's.
at::Tensor hpu_flip(const at::Tensor& self, at::IntArrayRef dims) {
  const int64_t nd = self.dim();
  std::vector<bool> seen(std::max<int64_t>(nd, 1), false);
  at::Tensor r = self;
  for (int64_t d : dims) {
    int64_t w = at::maybe_wrap_dim(d, nd);
    TORCH_CHECK(!seen[w], "dims has duplicates, original flip dims size=", dims.size(),
                ", but unique flip dims size=", std::count(seen.begin(), seen.end(), true) + 1);
    seen[w] = true;
    int64_t n = self.dim() ? self.size(w) : 1;
    if (n <= 1) continue;
    r = at::index_select(r, w, at::arange(n - 1, -1, -1, self.options().dtype(at::kLong)));
  }
  return r.is_same(self) ? self.clone(at::MemoryFormat::Contiguous) : r;
}
at::Tensor& hpu_flip_out(const at::Tensor& self, at::IntArrayRef dims, at::Tensor& out) {
  return into_out(hpu_flip(self, dims), out);
}

// roll: along each dim, the last `shift` slices then the rest (cat of two
// narrows, as the CPU's roll_common); no dims: over the flattened tensor.
at::Tensor hpu_roll(const at::Tensor& self, at::IntArrayRef shifts, at::IntArrayRef dims) {
  TORCH_CHECK(!shifts.empty(), "`shifts` required");
  if (dims.empty()) {
    TORCH_CHECK(shifts.size() == 1, "shifts and dimensions must align. shifts: ", shifts.size(), ", dims:", 0);
    return hpu_roll(self.flatten(), shifts, {0}).view(self.sizes());
  }
  TORCH_CHECK(shifts.size() == dims.size(), "shifts and dimensions must align. shifts: ", shifts.size(),
              ", dims:", dims.size());
  at::Tensor r = self;
  for (size_t i = 0; i < dims.size(); i++) {
    int64_t d = at::maybe_wrap_dim(dims[i], self.dim());
    int64_t n = r.size(d);
    if (n == 0) continue;
    int64_t s = ((shifts[i] % n) + n) % n;
    if (s == 0) continue;
    r = at::cat({r.narrow(d, n - s, s), r.narrow(d, 0, n - s)}, d);
  }
  return r.is_same(self) ? self.clone(at::MemoryFormat::Contiguous) : r;
}
at::Tensor& hpu_roll_out(const at::Tensor& self, at::IntArrayRef shifts, at::IntArrayRef dims, at::Tensor& out) {
  return into_out(hpu_roll(self, shifts, dims), out);
}

// A zero tensor for autograd's zero gradients (sgn's, for one): real
// zeros here, where CUDA has a storage-free ZeroTensor.
at::Tensor hpu_efficientzerotensor(at::IntArrayRef size, std::optional<at::ScalarType> dtype,
                                   std::optional<at::Layout> layout, std::optional<at::Device> device,
                                   std::optional<bool> pin_memory) {
  return at::zeros(size, at::TensorOptions().dtype(dtype).layout(layout).device(device).pinned_memory(pin_memory));
}

TORCH_LIBRARY_IMPL(aten, HPU, m) {
  m.impl("flip", TORCH_FN(hpu_flip));
  m.impl("flip.out", TORCH_FN(hpu_flip_out));
  m.impl("roll", TORCH_FN(hpu_roll));
  m.impl("roll.out", TORCH_FN(hpu_roll_out));
  m.impl("_efficientzerotensor", TORCH_FN(hpu_efficientzerotensor));
}

TORCH_LIBRARY_IMPL(aten, HPU, m) {
  m.impl("isin.Tensor_Tensor_out", TORCH_FN(isin_tt_out));
  m.impl("isin.Tensor_Scalar_out", TORCH_FN(isin_ts_out));
  m.impl("isin.Scalar_Tensor_out", TORCH_FN(isin_st_out));
  m.impl("isneginf.out", TORCH_FN(isinf_signed_out<true>));
  m.impl("isposinf.out", TORCH_FN(isinf_signed_out<false>));
  m.impl("nonzero", TORCH_FN(nonzero));
  m.impl("nonzero.out", TORCH_FN(nonzero_out));
  m.impl("masked_select", TORCH_FN(masked_select));
  m.impl("masked_select.out", TORCH_FN(masked_select_out));
  m.impl("masked_scatter_", TORCH_FN(masked_scatter_));
  m.impl("index_copy.out", TORCH_FN(index_copy_out));
}

}  // namespace habana_torch
